//! Memory budgets: the real binary holding many idle keep-alive connections, measured from
//! /proc. Budgets are bounds with room for allocator noise, not benchmarks
//! (`scripts/bench-idle.sh` compares with nginx).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);
/// Idle plain HTTP/1.1 connections held for the measurement.
const CONNECTIONS: usize = 2000;
/// An idle plain connection may cost this much user-space memory (measured 2.5 KiB; it was
/// 16.7 KiB while a connection's task carried a request's state and its read buffer).
const PLAIN_IDLE_BUDGET_KIB: f64 = 6.0;

fn resident_kib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

#[test]
fn an_idle_plain_keep_alive_connection_stays_within_its_memory_budget() {
    let dir = temp_dir("memory");
    let pod = Pod::start("pod");
    std::fs::write(
        dir.join("objects.yaml"),
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: sluice}}\n\
             spec: {{controller: sluice.dev/ingress-controller}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: sluice, namespace: sluice}}\n\
             data: {{disable-access-log: \"true\"}}\n---\n{}",
            app_yaml("web", "web.test", &[pod.addr])
        ),
    )
    .unwrap();
    let serve = Serve::start(&dir, &[]);
    assert_eq!(serve.get("web.test", "/").status, 200);
    let pid = serve.process.pid();
    let before = resident_kib(pid);

    let mut load = Command::new(BIN)
        .args([
            "load",
            "--hold-idle",
            "-t",
            "1",
            "-c",
            &CONNECTIONS.to_string(),
            "-d",
            "3s",
            "--timeout",
            "20s",
            "-H",
            "Host: web.test",
            &format!("http://{}/", serve.http),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(load.stdout.take().unwrap()).lines();
    let idle = lines
        .next()
        .expect("sluice load prints the idle line")
        .unwrap();
    assert_eq!(idle, format!("idle: {CONNECTIONS} open, 0 failed"));
    // Sluice sees them all idle too.
    eventually(WAIT, "every held connection counted idle", || {
        let metrics = serve.admin("/metrics").text();
        let idle: f64 = metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix("sluice_client_connections{protocol=\"http1\",state=\"idle\"} ")
            })?
            .parse()
            .ok()?;
        (idle >= CONNECTIONS as f64).then_some(())
    });
    let holding = resident_kib(pid);
    let per_connection = (holding - before) / CONNECTIONS as f64;
    assert!(
        per_connection < PLAIN_IDLE_BUDGET_KIB,
        "{per_connection:.1} KiB per idle connection (RSS {before} → {holding} KiB)"
    );
    for _ in lines {}
    assert!(load.wait().unwrap().success());
}
