//! The status page in a real browser: headless Chromium (Debian's `chromium`) loads `/` from
//! the status listener of a real `sluice serve` whose configuration has a broken Ingress.
//!
//! ```text
//!  DIR: web.yaml (web.test ─▶ a real backend)   bad.yaml (bad.test ─▶ a Service port that does
//!       not exist, and an annotation value carrying a <script>)
//!  sluice serve --config DIR ◀── requests to web.test and bad.test (traffic to show)
//!  chromium --headless --dump-dom http://STATUS/ ─▶ the DOM the browser built ─▶ assertions
//! ```
//! The browser comes from `SLUICE_CHROMIUM` (scripts/test.sh installs Debian's `chromium` and
//! sets it). Without it the test is skipped with a message, except under CI (`CI=true`), where
//! a missing browser fails. scripts/status-screenshot.sh makes the README's picture the same way.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;

/// A browser's first start (profile, fonts cache) can be slow on a busy machine.
const BROWSER_LIMIT: Duration = Duration::from_secs(120);

/// What the broken Ingress's annotation says: markup that must reach the page as text.
const HOSTILE: &str = "<script>document.title='owned'</script>";

fn chromium_binary() -> Option<PathBuf> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var_os("SLUICE_CHROMIUM").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        Some(path) => panic!(
            "SLUICE_CHROMIUM={} is not a file (scripts/test.sh installs chromium)",
            path.display()
        ),
        None if ci => panic!("CI: SLUICE_CHROMIUM is not set; scripts/test.sh installs chromium"),
        None => {
            eprintln!(
                "skipped: set SLUICE_CHROMIUM=$(command -v chromium) to render the status page \
                 in headless Chromium (Debian package chromium)"
            );
            None
        }
    }
}

/// Runs headless Chromium on `url` with `extra` flags and returns its stdout. The browser and
/// its helper processes run in a process group of their own, killed whole after
/// [`BROWSER_LIMIT`].
fn chromium(binary: &Path, profile: &Path, extra: &[&str], url: &str) -> String {
    let mut command = Command::new(binary);
    command
        .args([
            "--headless",
            // Tests run as root in CI, where Chromium's sandbox refuses to start.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = command.spawn().expect("chromium starts");
    let pid = child.id();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + BROWSER_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // The group id is the browser's pid: its renderer and helpers go with it.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
            let _ = child.wait();
            panic!(
                "chromium did not finish within {BROWSER_LIMIT:?}; stderr:\n{}",
                stderr.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "chromium: {status}; stderr:\n{stderr}");
    stdout
}

#[test]
fn headless_chromium_renders_the_status_page_with_a_broken_ingress() {
    let Some(browser) = chromium_binary() else {
        return;
    };
    let dir = temp_dir("status-page");
    let pod = Pod::start("web-pod");
    std::fs::write(
        dir.join("class.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: sluice}\n\
         spec: {controller: sluice.dev/ingress-controller}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("web.yaml"),
        app_yaml("web", "web.test", &[pod.addr]),
    )
    .unwrap();
    // A Service port that does not exist, and an annotation value with markup in it.
    let broken = app_yaml("bad", "bad.test", &[pod.addr])
        .replace("name: http}}}", "name: grpc}}}")
        .replace(
            "kind: Ingress\nmetadata: {name: bad}",
            &format!(
                "kind: Ingress\nmetadata: {{name: bad, annotations: \
                 {{nginx.ingress.kubernetes.io/proxy-connect-timeout: \"{HOSTILE}\"}}}}"
            ),
        );
    assert!(broken.contains(HOSTILE), "{broken}");
    std::fs::write(dir.join("bad.yaml"), broken).unwrap();
    let serve = Serve::start(&dir, &[]);

    for _ in 0..5 {
        assert_eq!(serve.get("web.test", "/").status, 200);
    }
    assert_eq!(serve.get("bad.test", "/").status, 503);
    // A first view, so the browser's view shows rates over the interval since.
    let first = serve.status_page("/");
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(
        first.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let policy = first.header("content-security-policy").unwrap_or("");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert_eq!(serve.get("web.test", "/").status, 200);

    let profile = dir.join("chromium-profile");
    let url = format!("http://{}/", serve.status);
    let dom = chromium(&browser, &profile, &["--dump-dom"], &url);

    assert!(dom.contains("<title>Sluice status</title>"), "{dom}");
    for expected in [
        "web.test",
        "bad.test",
        "default/web",
        "Ingress default/bad",
        "has no port grpc",
        "proxy-connect-timeout",
        "requests/s",
        "since the previous view",
        "/config (JSON)",
    ] {
        assert!(
            dom.contains(expected),
            "{expected:?} not on the page:\n{dom}"
        );
    }
    assert!(
        dom.contains(&pod.addr.to_string()),
        "the endpoint {} is not on the page:\n{dom}",
        pod.addr
    );
    // The annotation value is text in the DOM, never an element: the browser ran no script.
    assert!(!dom.contains("<script"), "{dom}");
    assert!(
        dom.contains("&lt;script&gt;document.title='owned'&lt;/script&gt;"),
        "{dom}"
    );
    // Six requests to web.test, one 503 from bad.test, each under its Ingress.
    let traffic = dom
        .split("id=\"traffic\"")
        .nth(1)
        .and_then(|rest| rest.split("</section>").next())
        .unwrap_or("");
    assert!(
        traffic.contains("default/web</td>") && traffic.contains("default/bad</td>"),
        "{traffic}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
