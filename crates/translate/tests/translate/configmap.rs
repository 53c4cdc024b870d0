//! README's ConfigMap keys table and `translate::configmap::KEYS` name the same keys: a key
//! the code reads is documented, and a documented key is read (or diagnosed as the table says).

use std::collections::BTreeSet;

use translate::configmap::{KeyKind, KEYS};

/// The README section `### ConfigMap keys` (under Configuration reference).
fn section(readme: &str) -> &str {
    let start = readme
        .find("### ConfigMap keys\n")
        .expect("README has a ConfigMap keys section");
    let rest = &readme[start + 1..];
    let end = rest.find("\n### ").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The backquoted names in the first column of the section's table.
fn documented(section: &str) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row[1..].split(" | ").next().unwrap_or_default();
        for (i, part) in first.split('`').enumerate() {
            if i % 2 == 1 {
                names.insert(part);
            }
        }
    }
    names
}

#[test]
fn the_readme_documents_every_configmap_key_and_no_other() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let section = section(&readme);
    let documented = documented(section);
    assert!(documented.len() > 60, "{documented:?}");
    let mut wrong = Vec::new();
    for key in KEYS {
        let listed = match key.kind {
            // NGINX Inc.'s names are documented with the key they stand for.
            KeyKind::Alias(of) => {
                readme.contains(&format!("`{}`", key.name)) && documented.contains(of)
            }
            _ => section.contains(&format!("`{}`", key.name)),
        };
        if !listed {
            wrong.push(format!(
                "{}: read, but not in README's ConfigMap keys table",
                key.name
            ));
        }
    }
    for name in documented {
        if !KEYS.iter().any(|k| k.name == name) {
            wrong.push(format!(
                "{name}: in README's ConfigMap keys table, unknown to Sluice"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Each row's documented default: the first backquoted value of its second column, when the
/// column starts with one (`(none)`, derived and prose defaults are not values to parse).
fn documented_defaults(section: &str) -> Vec<(&str, &str)> {
    let mut defaults = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let mut columns = row[1..].split(" | ");
        let (Some(names), Some(default)) = (columns.next(), columns.next()) else {
            continue;
        };
        let Some(value) = default
            .trim()
            .strip_prefix('`')
            .and_then(|d| d.split('`').next())
        else {
            continue;
        };
        for (i, name) in names.split('`').enumerate() {
            if i % 2 == 1 {
                defaults.push((name, value));
            }
        }
    }
    defaults
}

#[test]
fn every_documented_default_is_the_default_the_code_uses() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let defaults = documented_defaults(section(&readme));
    assert!(defaults.len() > 40, "{defaults:?}");
    let source = model::ObjectRef::new(model::Kind::ConfigMap, "sluice", "sluice");
    let mut wrong = Vec::new();
    for (name, value) in defaults {
        let Some(key) = KEYS.iter().find(|k| k.name == name) else {
            continue;
        };
        if !matches!(key.kind, KeyKind::Read(_)) {
            continue;
        }
        let data = [(name.to_owned(), value.to_owned())].into_iter().collect();
        let mut diagnostics = Vec::new();
        let settings = translate::configmap::from_config_map(&source, &data, &mut diagnostics);
        if !diagnostics.is_empty() {
            wrong.push(format!(
                "{name}: the documented default {value:?} is refused: {diagnostics:?}"
            ));
        } else if settings != model::Settings::default() {
            wrong.push(format!(
                "{name}: the documented default {value:?} is not the code's default"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every key ingress-nginx documents has a meaning here, so a ConfigMap carried over from it
/// gets no "unknown key" diagnostic (the list: `ingress_nginx_configmap_keys.txt`).
#[test]
fn every_key_ingress_nginx_documents_is_known() {
    let list = include_str!("ingress_nginx_configmap_keys.txt");
    let keys: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(keys.len() > 180, "{}", keys.len());
    let unknown: Vec<&&str> = keys
        .iter()
        .filter(|name| translate::configmap::key(name).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "ingress-nginx keys Sluice does not know: {unknown:?}"
    );
}
