//! CI smoke of `sluice lab dynamic`: the real command, real processes (sluice serve, nginx, pods,
//! the load generator) on loopback, a few seconds per run, so the lab cannot rot.

use std::path::PathBuf;
use std::process::Command;

/// Runs `sluice lab dynamic` with Sluice and nginx, 2 s churn steps at 200 req/s and graceful
/// termination, plus `extra` flags (the duration among them); asserts it succeeded. Returns the output folder, results.json, stdout and
/// stderr.
fn run_small_lab(name: &str, extra: &[&str]) -> (PathBuf, serde_json::Value, String, String) {
    let out = std::env::temp_dir().join(format!("sluice-lab-{name}-{}", std::process::id()));
    let (stdout, stderr) = run_lab(
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["lab", "dynamic"])
            .args(extra)
            .args([
                "--systems",
                "sluice,nginx",
                "--low-for",
                "2s",
                "--high-for",
                "2s",
                "--rate",
                "200",
                "--connections",
                "10",
                "--termination",
                "graceful",
                "--out",
            ])
            .arg(&out),
    );
    let json =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    (out, json, stdout, stderr)
}

/// Runs a `sluice lab` command and asserts it succeeded; returns its stdout and stderr.
fn run_lab(command: &mut Command) -> (String, String) {
    let output = command.output().expect("running sluice lab");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "sluice lab failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

#[test]
fn lab_dynamic_smoke_with_sluice_and_nginx() {
    let (out, json, stdout, stderr) = run_small_lab("smoke", &["--duration", "5s"]);
    let runs = json["runs"].as_array().expect("runs");
    let find = |system: &str, deployment: &str| {
        runs.iter()
            .find(|r| r["system"] == system && r["deployment"] == deployment)
            .unwrap_or_else(|| panic!("no {system} {deployment} run\n{stderr}"))
    };
    for run in runs {
        for key in [
            "system",
            "deployment",
            "termination",
            "rate_requested",
            "rate_achieved",
        ] {
            assert!(!run[key].is_null(), "{key} missing");
        }
        for key in ["connect", "read", "write", "timeout", "status"] {
            assert!(run["errors"][key].is_u64(), "errors.{key} missing");
        }
        for key in [
            "p50", "p99", "p99.9", "p99.99", "p99.999", "p99.9999", "max",
        ] {
            assert!(
                run["latency_ms"][key].is_number(),
                "latency_ms.{key} missing"
            );
        }
        assert_eq!(run["load"]["schema"], "sluice-load/1");
        assert!(run["requests"].as_u64().unwrap() > 0);
        // The measurement's start is on the wall clock (the probes' stalls are placed by it).
        assert!(
            run["load"]["measurement_started_unix_secs"]
                .as_f64()
                .unwrap()
                > 1.7e9
        );
        // A stall probe ran on each of the run's CPU sets, and the run's slowest seconds were
        // matched against them.
        let host = &run["host_stalls"];
        let probes = host["probes"].as_array().expect("host_stalls.probes");
        let pinned = std::thread::available_parallelism().map_or(1, usize::from) >= 2;
        assert_eq!(probes.len(), if pinned { 2 } else { 1 }, "{host}");
        for probe in probes {
            assert!(
                probe["stalls"].is_u64() && probe["longest_ms"].is_number(),
                "{probe}"
            );
        }
        assert!(
            !host["slowest_seconds"].as_array().unwrap().is_empty(),
            "{host}"
        );
    }

    // The machine's own facts travel with the results and the report.
    let machine = json["setup"]["machine"].as_str().expect("setup.machine");
    assert!(machine.starts_with("machine: "), "{machine}");

    let sluice_static = find("sluice", "static");
    assert_eq!(sluice_static["termination"], "none");
    for key in ["connect", "read", "write", "timeout", "status"] {
        assert_eq!(
            sluice_static["errors"][key], 0,
            "sluice static {key} errors\n{stdout}"
        );
    }
    let sluice_dynamic = find("sluice", "dynamic");
    assert_eq!(sluice_dynamic["termination"], "graceful");
    assert!(
        !sluice_dynamic["events"].as_array().unwrap().is_empty(),
        "the dynamic run scaled"
    );
    if std::path::Path::new("/usr/sbin/nginx").exists() {
        find("nginx", "static");
        find("nginx", "dynamic");
    } else {
        assert!(
            stdout.contains("nginx-light"),
            "names the package:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("sluice  static"),
        "summary on stdout:\n{stdout}"
    );
    assert!(
        stdout.contains("slow s w/ stall"),
        "summary on stdout:\n{stdout}"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| host stalls ≥ 2 ms, by CPU |")
            && report.contains("the slowest seconds and the host's stalls"),
        "{report}"
    );
    assert!(report.contains(&format!("- {machine}\n")), "{report}");
    assert!(out.join("report.html").is_file());
    std::fs::remove_dir_all(&out).unwrap();
}

/// The stall probe logs the time it was kept from running: stopped (SIGSTOP) for 300 ms, it
/// wakes that late, and the line is in its log at once, while it still runs (the lab stops
/// probes at any moment and reads what they wrote).
#[test]
fn the_stall_probe_logs_the_time_it_was_stopped() {
    let log = std::env::temp_dir().join(format!("sluice-stall-probe-{}.jsonl", std::process::id()));
    let mut probe = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["lab", "stall-probe", "--duration", "20s", "--out"])
        .arg(&log)
        .spawn()
        .expect("starting the probe");
    let pid = probe.id().to_string();
    let signal = |name: &str| {
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success(), "kill {name} {pid}");
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    signal("-STOP");
    std::thread::sleep(std::time::Duration::from_millis(300));
    signal("-CONT");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let longest = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let longest = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|stall| stall["late_ms"].as_f64())
            .fold(0.0, f64::max);
        if longest >= 250.0 || std::time::Instant::now() > deadline {
            break longest;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    probe.kill().unwrap();
    probe.wait().unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(
        (250.0..5000.0).contains(&longest),
        "stopped for 300 ms, the probe logged {longest} ms as its latest wake"
    );
}

/// `--protocol grpc`: the same churn with unary gRPC calls to grpc-go pods. Sluice must fail no
/// call, static or churning; nginx (reloading per change) runs beside it. The pods come from
/// `SLUICE_GRPC_TOOLS` (scripts/test.sh sets it); without it the test is skipped with a message,
/// except under CI, where it fails.
#[test]
fn lab_dynamic_grpc_fails_no_call_through_sluice() {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    match std::env::var_os("SLUICE_GRPC_TOOLS") {
        Some(_) => {}
        None if ci => panic!("CI: SLUICE_GRPC_TOOLS is not set; scripts/test.sh builds them"),
        None => {
            eprintln!("skipped: set SLUICE_GRPC_TOOLS=$(scripts/grpc-tools.sh) (needs Go)");
            return;
        }
    }
    let (out, json, stdout, stderr) =
        run_small_lab("grpc", &["--protocol", "grpc", "--duration", "6s"]);
    assert_eq!(json["setup"]["protocol"], "grpc");
    let runs = json["runs"].as_array().expect("runs");
    for deployment in ["static", "dynamic"] {
        let run = runs
            .iter()
            .find(|r| r["system"] == "sluice" && r["deployment"] == deployment)
            .unwrap_or_else(|| panic!("no sluice {deployment} run\n{stderr}"));
        assert!(
            run["requests"].as_u64().unwrap() > 0,
            "no calls completed\n{stdout}"
        );
        for key in ["connect", "read", "write", "timeout", "status"] {
            assert_eq!(
                run["errors"][key], 0,
                "sluice {deployment}: {key} errors (failed gRPC calls)\n{stdout}"
            );
        }
        if deployment == "dynamic" {
            assert!(
                !run["events"].as_array().unwrap().is_empty(),
                "the dynamic run scaled"
            );
        }
    }
    if std::path::Path::new("/usr/sbin/nginx").exists() {
        assert!(
            runs.iter().any(|r| r["system"] == "nginx"),
            "nginx ran beside it:\n{stdout}"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// `--rounds 2`: the experiment twice, the systems' order reversed in the second round, each
/// round in its own folder and `rounds.json` reading them together; `sluice lab rounds` reads
/// the same folders again and refuses a round of another experiment by file and field.
#[test]
fn lab_dynamic_rounds_run_twice_and_read_together() {
    let out = std::env::temp_dir().join(format!("sluice-lab-rounds-{}", std::process::id()));
    let sluice = || Command::new(env!("CARGO_BIN_EXE_sluice"));
    let (stdout, stderr) = run_lab(
        sluice()
            .args([
                "lab",
                "dynamic",
                "--rounds",
                "2",
                "--systems",
                "sluice,nginx",
            ])
            .args(["--only", "static", "--duration", "3s", "--rate", "200"])
            .args(["--connections", "10", "--no-stall-probes", "--out"])
            .arg(&out),
    );
    let nginx = std::path::Path::new("/usr/sbin/nginx").exists();
    let order = |round: usize| -> Vec<String> {
        let text = std::fs::read_to_string(out.join(format!("round-{round}/results.json")))
            .unwrap_or_else(|e| panic!("round {round}: {e}\n{stderr}"));
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["system"].as_str().unwrap().to_owned())
            .collect()
    };
    if nginx {
        assert_eq!(order(1), ["sluice", "nginx"]);
        assert_eq!(order(2), ["nginx", "sluice"]);
    } else {
        assert_eq!(order(2), ["sluice"]);
    }
    let rounds: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rounds.json")).unwrap()).unwrap();
    assert_eq!(rounds["schema"], "sluice-lab-rounds/1");
    assert_eq!(rounds["rounds"].as_array().unwrap().len(), 2);
    let sluice_cell = rounds["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["system"] == "sluice")
        .expect("a cell for sluice");
    let per_round: u64 = sluice_cell["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(sluice_cell["pooled_requests"].as_u64().unwrap(), per_round);
    if nginx {
        let p9999 = rounds["comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["peer"] == "nginx" && c["criterion"] == "p99.99")
            .expect("sluice against nginx at p99.99");
        assert_eq!(p9999["rounds"], 2, "{p9999}");
        assert!(p9999["pooled_ms"].as_f64().unwrap() > 0.0, "{p9999}");
    }
    assert!(stdout.contains("sluice lab rounds: 2 rounds"), "{stdout}");
    assert!(out.join("rounds.md").is_file());

    // The same rounds read again, then with a round of another rate.
    let again = sluice()
        .args(["lab", "rounds"])
        .arg(out.join("round-1"))
        .arg(out.join("round-2"))
        .output()
        .unwrap();
    assert!(again.status.success(), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("2 rounds"));
    let mut other: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("round-2/results.json")).unwrap())
            .unwrap();
    other["setup"]["rate"] = 999.into();
    let other_file = out.join("other-rate.json");
    std::fs::write(&other_file, other.to_string()).unwrap();
    let refused = sluice()
        .args(["lab", "rounds"])
        .arg(out.join("round-1"))
        .arg(&other_file)
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && message.contains("other-rate.json")
            && message.contains("setup.rate"),
        "{refused:?}"
    );
    let zero = sluice()
        .args(["lab", "dynamic", "--rounds", "0"])
        .output()
        .unwrap();
    assert!(
        !zero.status.success()
            && String::from_utf8_lossy(&zero.stderr).contains("--rounds must be at least 1"),
        "{zero:?}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// `--rounds 2` where the second round fails (nginx refuses to start in it, as a broken
/// install would): the first round is still read into `rounds.json` and `rounds.md`, and the
/// command fails at the end naming the round that failed.
#[test]
fn lab_dynamic_rounds_keep_the_rounds_that_completed_when_one_fails() {
    let nginx = std::path::Path::new("/usr/sbin/nginx");
    if !nginx.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs nginx (scripts/test.sh)"
        );
        eprintln!("skipped: no /usr/sbin/nginx");
        return;
    }
    let out = std::env::temp_dir().join(format!("sluice-lab-failed-round-{}", std::process::id()));
    let bin = out.with_extension("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // Found first on PATH: starts the real nginx, except once round 2's folder exists.
    let wrapper = bin.join("nginx");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" != -v ] && [ -d '{}/round-2' ]; then\n  \
               echo 'nginx (test wrapper): refusing to start in round 2' >&2; exit 1\n\
             fi\n\
             exec {} \"$@\"\n",
            out.display(),
            nginx.display()
        ),
    )
    .unwrap();
    let mut permissions = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&wrapper, permissions).unwrap();
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();

    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env("PATH", path)
        .args(["lab", "dynamic", "--rounds", "2", "--systems", "nginx"])
        .args(["--only", "static", "--duration", "2s", "--rate", "200"])
        .args(["--connections", "10", "--no-stall-probes", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "round 2 failed, so must the command\n{stderr}"
    );
    assert!(stderr.contains("round 2 failed"), "{stderr}");
    assert!(stderr.contains("refusing to start in round 2"), "{stderr}");
    assert!(stderr.contains("round(s) [2] of 2 failed"), "{stderr}");
    let rounds: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rounds.json")).unwrap()).unwrap();
    let read: Vec<&str> = rounds["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(read.len(), 1, "{rounds}");
    assert!(read[0].contains("round-1"), "{read:?}");
    assert!(out.join("rounds.md").is_file());
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&bin).unwrap();
}
