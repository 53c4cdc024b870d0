//! CI smoke of `sluice lab rps|tps|throughput|sizing`: the real commands and processes (sluice
//! serve, nginx, pods, the load generator) on loopback, about a second per run, each command
//! bounded in time, so the capacity lab cannot rot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Each command's limit; a hung lab is stopped with SIGTERM (it then stops what it started).
const LIMIT: Duration = Duration::from_secs(180);

/// Short runs for sluice and nginx with one worker.
const FAST: [&str; 12] = [
    "--quick",
    "--systems",
    "sluice,nginx",
    "--workers",
    "1",
    "--duration",
    "1s",
    "--warmup",
    "200ms",
    "--connections",
    "10",
    "--out",
];

fn lab(args: &[&str], out: &Path) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("lab")
        .args(args)
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running sluice lab");
    let pid = child.id();
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    loop {
        if let Ok(output) = rx.recv_timeout(Duration::from_millis(200)) {
            let output = output.expect("waiting for sluice lab");
            assert!(
                output.status.success(),
                "sluice lab {args:?} failed\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            return output;
        }
        if started.elapsed() > LIMIT {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
            let _ = rx.recv_timeout(Duration::from_secs(10));
            panic!("sluice lab {args:?} took longer than {LIMIT:?}");
        }
    }
}

fn results(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    serde_json::from_str(&text).expect("results.json is JSON")
}

fn runs<'a>(json: &'a Value, study: &str, case: &str) -> Vec<&'a Value> {
    json["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["study"] == study && r["case"] == case)
        .collect()
}

fn nginx_installed() -> bool {
    Path::new("/usr/sbin/nginx").exists()
}

/// The systems each case must have measured.
fn systems() -> Vec<&'static str> {
    if nginx_installed() {
        vec!["sluice", "nginx"]
    } else {
        vec!["sluice"]
    }
}

fn assert_measured(run: &Value) {
    let what = format!("{} {}/{}", run["system"], run["study"], run["case"]);
    assert!(run["requests"].as_u64().unwrap() > 0, "{what}: requests");
    assert!(run["rate_achieved"].as_f64().unwrap() > 0.0, "{what}: rate");
    assert_eq!(run["workers"], 1, "{what}");
    let cpu = &run["cpu"];
    assert!(cpu["sut_secs"].as_f64().unwrap() > 0.0, "{what}: SUT CPU");
    assert!(
        cpu["sut_us_per_request"].as_f64().unwrap() > 0.0,
        "{what}: CPU per request"
    );
    assert!(cpu["load_secs"].as_f64().unwrap() > 0.0, "{what}: load CPU");
    assert!(
        cpu["wall_secs"].as_f64().unwrap() > 1.0,
        "{what}: wall time"
    );
    let bound = run["bound"].as_str().unwrap();
    assert!(
        [
            "sut",
            "client",
            "shared-cpu",
            "fixed-rate",
            "contended",
            "latency"
        ]
        .contains(&bound),
        "{what}: bound {bound}"
    );
    assert_eq!(run["errors"]["status"], 0, "{what}: non-2xx");
}

fn assert_report(dir: &Path, heading: &str) {
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(heading), "report.md lacks {heading}:\n{md}");
    assert!(md.contains("SUT CPU µs/req"), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<svg"), "report.html has charts");
    assert!(
        std::fs::read_dir(dir.join("runs")).unwrap().count() > 0,
        "raw load results kept"
    );
}

#[test]
fn lab_rps_tps_throughput_and_sizing_smoke() {
    let base: PathBuf =
        std::env::temp_dir().join(format!("sluice-lab-capacity-{}", std::process::id()));
    let (rps, tps, tput, sizing) = (
        base.join("rps"),
        base.join("tps"),
        base.join("throughput"),
        base.join("sizing"),
    );

    // RPS over HTTP and HTTPS, then p99 at 50 % of nginx's RPS.
    let out = lab(&[&["rps"][..], &FAST].concat(), &rps);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("RPS, 1 KB, HTTPS"), "summary:\n{stdout}");
    let json = results(&rps);
    assert_eq!(json["schema"], "sluice-lab-capacity/1");
    assert_eq!(json["command"], "rps");
    for case in ["http", "https"] {
        let found = runs(&json, "rps", case);
        for system in systems() {
            let run = found
                .iter()
                .find(|r| r["system"] == system)
                .unwrap_or_else(|| panic!("no {system} rps/{case}\n{stdout}"));
            assert_measured(run);
            assert!(run["rate_requested"].is_null(), "closed loop");
        }
    }
    for case in ["http", "https"] {
        for run in runs(&json, "latency", case) {
            assert_measured(run);
            assert!(run["rate_requested"].as_f64().unwrap() > 0.0);
            assert!(run["latency_ms"]["p99"].as_f64().unwrap() > 0.0);
        }
    }
    if nginx_installed() {
        assert_eq!(runs(&json, "latency", "https").len(), 2);
        assert!(
            stdout.contains("CPU per request (µs), HTTPS 1 KB"),
            "{stdout}"
        );
    } else {
        assert!(
            stdout.contains("nginx-light"),
            "names the package:\n{stdout}"
        );
    }
    assert_report(&rps, "## RPS, 1 KB, HTTP\n");

    // TLS handshakes: full ones really are full, resumed ones really resume.
    lab(&[&["tps"][..], &FAST].concat(), &tps);
    let json = results(&tps);
    for system in systems() {
        for key in ["rsa", "ecdsa"] {
            let full = runs(&json, "tps", &format!("{key}-full"));
            let run = full.iter().find(|r| r["system"] == system).unwrap();
            assert_measured(run);
            assert!(run["handshakes"]["full"].as_u64().unwrap() > 0);
            assert_eq!(run["handshakes"]["resumed"], 0, "{system} {key}-full");
            let resumed = runs(&json, "tps", &format!("{key}-resumed"));
            let run = resumed.iter().find(|r| r["system"] == system).unwrap();
            assert_measured(run);
            assert!(
                run["handshakes"]["resumed"].as_u64().unwrap()
                    > run["handshakes"]["full"].as_u64().unwrap(),
                "{system} {key}-resumed resumes: {}",
                run["handshakes"]
            );
        }
    }
    assert_report(&tps, "## TLS TPS, 0 KB, RSA-2048, full handshakes\n");

    // Throughput of the 1 MB file.
    lab(&[&["throughput"][..], &FAST].concat(), &tput);
    let json = results(&tput);
    for run in runs(&json, "throughput", "1mb") {
        assert_measured(run);
        assert!(run["gbps"].as_f64().unwrap() > 0.0);
        assert!(run["bytes_read"].as_u64().unwrap() >= 1_048_576);
    }

    // Sizing from the three results files, with a cost.
    let files: Vec<String> = [&rps, &tps, &tput]
        .iter()
        .map(|d| d.join("results.json").display().to_string())
        .collect();
    let mut args = vec!["sizing", "--from"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--cost-per-hour", "0.05", "--out"]);
    let out = lab(&args, &sizing);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Sizing"), "{stdout}");
    let json = results(&sizing);
    assert_eq!(json["command"], "sizing");
    assert_eq!(json["cost_per_cpu_hour"], 0.05);
    assert_eq!(json["setup"]["sources"].as_array().unwrap().len(), 3);
    let md = std::fs::read_to_string(sizing.join("report.md")).unwrap();
    assert!(md.contains("## Sizing\n"), "{md}");
    assert!(md.contains("per 1M HTTP req"), "{md}");
    assert!(md.contains("| sluice | 1 |"), "{md}");
    assert!(md.contains("| sluice | 4 (extrapolated) |"), "{md}");

    std::fs::remove_dir_all(&base).unwrap();
}
