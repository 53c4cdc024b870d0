//! The file provider: a YAML/JSON file or a folder of them, read as Kubernetes objects.
//!
//! ```text
//!  path ──scan──▶ *.yaml|*.yml|*.json ──read──▶ parse_documents ──▶ per-file last good objects
//!    ▲                                                                     │ merge (path order)
//!  notify (inotify) ──▶ FileWatch::changed() ──▶ FileSource::reload ───────┴──▶ Vec<Object> + errors
//! ```
//! A file that does not parse keeps its last good objects; an invalid object keeps its last
//! good version; everything else applies. Hidden entries (`.swp` files, Kubernetes'
//! `..data` ConfigMap folders) are skipped; symlinks are followed, so a mounted ConfigMap works.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use model::ObjectRef;
use notify::{RecursiveMode, Watcher};
use tokio::sync::Notify;
use translate::{parse_documents, Object};

/// Why the config path cannot be used at start-up.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(
        "{path}: no such file or directory; --config needs a YAML file or a folder of YAML files"
    )]
    NotFound { path: String },
    #[error("{path}: cannot read: {source}")]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: contains no readable YAML (looked for *.yaml, *.yml and *.json files){details}"
    )]
    NoYaml { path: String, details: String },
    #[error("cannot watch {path} for changes: {source}")]
    Watch {
        path: String,
        #[source]
        source: notify::Error,
    },
}

/// The objects under one path, kept up to date by [`FileSource::reload`].
#[derive(Debug)]
pub struct FileSource {
    root: PathBuf,
    files: BTreeMap<PathBuf, FileState>,
}

#[derive(Debug, Default)]
struct FileState {
    text: Option<String>,
    /// The current content is YAML (its objects may still be invalid).
    readable: bool,
    /// The last good objects of this file.
    objects: Vec<Object>,
    /// Problems with the current content, already formatted for a person.
    errors: Vec<String>,
}

/// Wakes the control plane when anything under the path may have changed.
pub struct FileWatch {
    changed: Arc<Notify>,
    // Dropping the watcher stops the OS watch; kept alive here.
    _watcher: notify::RecommendedWatcher,
}

impl FileSource {
    /// Reads everything under `root`. Fails when the path is missing or nothing in it is
    /// readable YAML, the two mistakes that leave nothing to serve.
    pub fn open(root: impl Into<PathBuf>) -> Result<FileSource, FileError> {
        let root = root.into();
        let display = root.display().to_string();
        match std::fs::metadata(&root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(FileError::NotFound { path: display })
            }
            Err(source) => {
                return Err(FileError::Unreadable {
                    path: display,
                    source,
                })
            }
            Ok(_) => {}
        }
        let mut source = FileSource {
            root,
            files: BTreeMap::new(),
        };
        source.reload();
        let readable = source.files.values().any(|f| f.readable);
        if !readable {
            let details = source
                .errors()
                .iter()
                .map(|e| format!("\n  {e}"))
                .collect::<String>();
            return Err(FileError::NoYaml {
                path: display,
                details,
            });
        }
        Ok(source)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Re-reads every file; returns true when any file's content changed.
    pub fn reload(&mut self) -> bool {
        let mut seen = BTreeSet::new();
        let mut changed = false;
        for path in config_files(&self.root) {
            let state = self.files.entry(path.clone()).or_default();
            changed |= refresh_file(&path, state);
            seen.insert(path);
        }
        let before = self.files.len();
        self.files.retain(|path, _| seen.contains(path));
        changed | (self.files.len() != before)
    }

    /// Every object, merged over files in path order. An object defined twice keeps its
    /// first definition (the duplicate is reported by [`FileSource::errors`]).
    pub fn objects(&self) -> Vec<Object> {
        self.merged().0
    }

    /// Current problems: files that do not parse, invalid objects, duplicates.
    pub fn errors(&self) -> Vec<String> {
        let mut errors: Vec<String> = self.files.values().flat_map(|f| f.errors.clone()).collect();
        errors.extend(self.merged().1);
        errors
    }

    fn merged(&self) -> (Vec<Object>, Vec<String>) {
        let mut first_seen: BTreeMap<ObjectRef, &Path> = BTreeMap::new();
        let mut objects = Vec::new();
        let mut duplicates = Vec::new();
        for (path, state) in &self.files {
            for object in &state.objects {
                let object_ref = object.object_ref();
                match first_seen.get(&object_ref) {
                    Some(first) => duplicates.push(format!(
                        "{}: {object_ref}: already defined in {}; this copy is ignored",
                        path.display(),
                        first.display()
                    )),
                    None => {
                        first_seen.insert(object_ref, path);
                        objects.push(object.clone());
                    }
                }
            }
        }
        (objects, duplicates)
    }
}

/// Re-reads one file into its state; true when the content changed.
fn refresh_file(path: &Path, state: &mut FileState) -> bool {
    let name = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            // Unreadable for now (mid-write, permissions): keep what we had.
            state.errors = vec![format!(
                "{name}: cannot read: {e}; keeping its last good objects"
            )];
            return false;
        }
    };
    if state.text.as_deref() == Some(text.as_str()) {
        return false;
    }
    // Editors and shell redirects truncate before they write: a file that had content and is
    // empty now is most likely mid-write. Taking it at its word would drop its objects (and with
    // them the last good versions an invalid edit falls back on). Deleting the file removes them.
    if text.trim().is_empty() && state.text.as_deref().is_some_and(|t| !t.trim().is_empty()) {
        state.errors = vec![format!(
            "{name}: empty; keeping its last good objects (delete the file to remove them)"
        )];
        return false;
    }
    match parse_documents(&name, &text) {
        Err(error) => {
            state.readable = false;
            state.errors = vec![format!("{error}; keeping this file's last good objects")];
        }
        Ok(documents) => {
            let mut objects = documents.objects;
            state.readable = true;
            state.errors = Vec::new();
            for error in documents.errors {
                // Keep the last good version of an object that has become invalid.
                let previous = error.object.as_ref().and_then(|bad| {
                    state
                        .objects
                        .iter()
                        .find(|o| o.object_ref() == *bad)
                        .cloned()
                });
                let note = if previous.is_some() {
                    "; keeping its last good version"
                } else {
                    "; object skipped"
                };
                state.errors.push(format!("{error}{note}"));
                objects.extend(previous);
            }
            state.objects = objects;
        }
    }
    state.text = Some(text);
    true
}

/// The config files under `root` (or `root` itself), sorted.
fn config_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if root.is_file() {
        files.push(root.to_path_buf());
        return files;
    }
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

impl FileWatch {
    /// Watches `root` (recursively for a folder; a single file through its folder, so
    /// editors' and `mv`'s atomic renames are seen).
    pub fn start(root: &Path) -> Result<FileWatch, FileError> {
        let changed = Arc::new(Notify::new());
        let notify_changed = changed.clone();
        let watch_error = |source| FileError::Watch {
            path: root.display().to_string(),
            source,
        };
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                // Access events (reads, including our own) change nothing.
                if event.is_ok_and(|e| !e.kind.is_access()) {
                    notify_changed.notify_one();
                }
            })
            .map_err(watch_error)?;
        if root.is_file() {
            let parent = root
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            watcher
                .watch(parent, RecursiveMode::NonRecursive)
                .map_err(watch_error)?;
        } else {
            watcher
                .watch(root, RecursiveMode::Recursive)
                .map_err(watch_error)?;
        }
        Ok(FileWatch {
            changed,
            _watcher: watcher,
        })
    }

    /// Resolves after the next change (at once if one happened since the last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n";

    /// A fresh folder for one test, removed when the test ends (also when it fails).
    struct TempDir(PathBuf);

    impl std::ops::Deref for TempDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl AsRef<Path> for TempDir {
        fn as_ref(&self) -> &Path {
            &self.0
        }
    }

    impl From<&TempDir> for PathBuf {
        fn from(dir: &TempDir) -> PathBuf {
            dir.0.clone()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp_dir(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("sluice-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn names(source: &FileSource) -> Vec<String> {
        source
            .objects()
            .iter()
            .map(|o| o.object_ref().to_string())
            .collect()
    }

    #[test]
    fn missing_path_and_empty_folder_are_fatal_with_a_clear_message() {
        let missing = FileSource::open("/nonexistent/sluice.yaml").unwrap_err();
        assert!(missing
            .to_string()
            .contains("/nonexistent/sluice.yaml: no such file"));
        let dir = temp_dir("empty");
        std::fs::write(dir.join("notes.txt"), "hello").unwrap();
        let empty = FileSource::open(&dir).unwrap_err();
        assert!(
            empty.to_string().contains("contains no readable YAML"),
            "{empty}"
        );
        std::fs::write(dir.join("bad.yaml"), "kind: [").unwrap();
        let broken = FileSource::open(&dir).unwrap_err();
        assert!(
            broken
                .to_string()
                .contains("bad.yaml: document 1: not valid YAML"),
            "{broken}"
        );
    }

    #[test]
    fn a_broken_edit_keeps_the_files_last_good_objects() {
        let dir = temp_dir("broken");
        std::fs::write(dir.join("a.yaml"), SERVICE).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/b.yml"), SERVICE.replace("web", "api")).unwrap();
        std::fs::write(dir.join(".a.yaml.swp"), "junk").unwrap();
        let mut source = FileSource::open(&dir).unwrap();
        assert_eq!(
            names(&source),
            ["Service default/web", "Service default/api"]
        );

        std::fs::write(dir.join("a.yaml"), "kind: [").unwrap();
        assert!(source.reload());
        assert_eq!(
            names(&source),
            ["Service default/web", "Service default/api"]
        );
        assert!(source.errors()[0].contains("keeping this file's last good objects"));

        std::fs::remove_file(dir.join("a.yaml")).unwrap();
        assert!(source.reload());
        assert_eq!(names(&source), ["Service default/api"]);
        assert!(source.errors().is_empty());
    }

    #[test]
    fn an_invalid_object_keeps_its_last_good_version() {
        let dir = temp_dir("object");
        let two = format!("{SERVICE}---\n{}", SERVICE.replace("web", "api"));
        std::fs::write(dir.join("a.yaml"), &two).unwrap();
        let mut source = FileSource::open(&dir).unwrap();
        let broken = two.replace(
            "metadata: {name: api}",
            "metadata: {name: api}\nspec: {ports: 80}",
        );
        std::fs::write(dir.join("a.yaml"), broken).unwrap();
        source.reload();
        assert_eq!(
            names(&source),
            ["Service default/web", "Service default/api"]
        );
        let errors = source.errors();
        assert!(
            errors[0].contains("Service default/api: spec.ports"),
            "{errors:?}"
        );
        assert!(
            errors[0].ends_with("keeping its last good version"),
            "{errors:?}"
        );
    }

    #[test]
    fn an_emptied_file_is_taken_as_mid_write_and_keeps_its_objects() {
        let dir = temp_dir("emptied");
        let two = format!("{SERVICE}---\n{}", SERVICE.replace("web", "api"));
        std::fs::write(dir.join("a.yaml"), &two).unwrap();
        let mut source = FileSource::open(&dir).unwrap();
        // Truncated, then written with an invalid `api`: its last good version must survive.
        std::fs::write(dir.join("a.yaml"), "").unwrap();
        assert!(!source.reload());
        assert_eq!(
            names(&source),
            ["Service default/web", "Service default/api"]
        );
        let broken = two.replace(
            "metadata: {name: api}",
            "metadata: {name: api}\nspec: {ports: 80}",
        );
        std::fs::write(dir.join("a.yaml"), broken).unwrap();
        assert!(source.reload());
        assert_eq!(
            names(&source),
            ["Service default/web", "Service default/api"]
        );
    }

    #[test]
    fn duplicates_keep_the_first_definition() {
        let dir = temp_dir("dup");
        std::fs::write(dir.join("a.yaml"), SERVICE).unwrap();
        std::fs::write(dir.join("b.yaml"), SERVICE).unwrap();
        let source = FileSource::open(&dir).unwrap();
        assert_eq!(names(&source), ["Service default/web"]);
        assert!(source.errors()[0].contains("b.yaml: Service default/web: already defined in"));
    }

    #[test]
    fn unchanged_content_is_not_a_change() {
        let dir = temp_dir("same");
        std::fs::write(dir.join("a.yaml"), SERVICE).unwrap();
        let mut source = FileSource::open(dir.join("a.yaml")).unwrap();
        assert!(!source.reload());
        std::fs::write(dir.join("a.yaml"), SERVICE.replace("web", "www")).unwrap();
        assert!(source.reload());
    }
}
