//! Running the capacity studies: per worker count, pods and every system under test started
//! once; per case and round, one `sluice load` per system, alternating, bracketed by CPU readings.
//!
//! ```text
//!  for workers in --workers:                 SUT CPUs | load + pods CPUs (2 CPUs: 0 | 1, or 0-1 | 0-1)
//!    pods (sluice backend × load CPUs) ─ systems (all started, idle ones cost nothing)
//!    for case in rps/http, rps/https, latency/*, tps/*, throughput/1mb:
//!      for round in 1..=rounds: for system (rotating start):
//!         /proc ticks ─▶ sluice load … --json ─▶ /proc ticks ─▶ Measurement
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context as _};

use super::plan::{
    pinning, plan, CapacityArgs, Case, Plan, SizingArgs, Which, CASES, ECDSA_HOST, ECDSA_SUITE,
    LATENCY_SHARE, RSA_SUITE,
};
use super::{
    aggregate, classify, find, CapacityResults, CpuUse, LatencyMs, Measurement, Pinning, Setup,
    Skipped, Study, SCHEMA,
};
use crate::cpu;
use crate::host::HOST;
use crate::host::{compact_timestamp, iso_timestamp, WorkDir};
use crate::pods::{Deployment, PodProgram};
use crate::procs::{self, pinned, Proc};
use crate::systems::{self, Cert, Listeners, SutEnv, System};
use crate::systems::{make_cert_for, KeyKind};

/// `sluice lab sizing`: from files, or by measuring everything.
pub fn run_sizing(args: SizingArgs) -> anyhow::Result<()> {
    if args.from.is_empty() {
        return run_capacity(Which::All, args.run, args.cost_per_hour);
    }
    let mut files = Vec::new();
    for path in &args.from {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--from: reading {}", path.display()))?;
        let results: CapacityResults = serde_json::from_str(&text).with_context(|| {
            format!(
                "--from {}: not the results.json of lab rps, tps, throughput or sizing",
                path.display()
            )
        })?;
        if results.schema != SCHEMA {
            bail!(
                "--from {}: schema '{}', expected '{SCHEMA}'",
                path.display(),
                results.schema
            );
        }
        files.push((path.display().to_string(), results));
    }
    let mut merged = super::merge(files).context("--from: no files")?;
    merged.command = "sizing".to_owned();
    if args.cost_per_hour.is_some() {
        merged.cost_per_cpu_hour = args.cost_per_hour;
    }
    let out = args.run.out.unwrap_or_else(|| {
        PathBuf::from("lab-results")
            .join(format!("{}-sizing", compact_timestamp(SystemTime::now())))
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    write_outputs(&out, &merged)?;
    print!("{}", super::render::summary(&merged));
    eprintln!("sluice lab sizing: report in {}", out.display());
    Ok(())
}

/// Writes results.json, report.md and report.html into `out`.
pub fn write_outputs(out: &Path, results: &CapacityResults) -> anyhow::Result<()> {
    crate::host::write_report_files(
        out,
        results,
        super::render::markdown(results),
        super::render::html(results),
    )
}

/// What stays the same across every run of one lab.
struct Lab {
    plan: Plan,
    exe: PathBuf,
    work: PathBuf,
    ca: PathBuf,
    certs: Vec<Cert>,
    hz: u64,
}

struct Running {
    name: String,
    system: Box<dyn System>,
    listeners: Listeners,
}

/// `sluice lab rps|tps|throughput` (and `sizing` without `--from`).
pub fn run_capacity(
    which: Which,
    args: CapacityArgs,
    cost_per_cpu_hour: Option<f64>,
) -> anyhow::Result<()> {
    let started = SystemTime::now();
    let plan = plan(which, args, cost_per_cpu_hour)?;
    procs::install_signal_handler()?;
    let exe = std::env::current_exe().context("finding the sluice binary")?;
    std::fs::create_dir_all(plan.out.join("runs"))
        .with_context(|| format!("creating {}", plan.out.display()))?;
    let work = WorkDir::new()?;
    let certs = vec![
        make_cert_for(&work.0, HOST, KeyKind::Rsa2048)?,
        make_cert_for(&work.0, ECDSA_HOST, KeyKind::EcdsaP256)?,
    ];
    let mut ca_pem = String::new();
    for c in &certs {
        ca_pem += &std::fs::read_to_string(&c.cert_pem)?;
    }
    let ca = plan.out.join("ca.pem");
    std::fs::write(&ca, &ca_pem)?;

    let cases: Vec<Case> = CASES
        .iter()
        .copied()
        .filter(|c| plan.which.includes(c.study))
        .collect();
    let pinnings: Vec<Pinning> = plan
        .workers
        .iter()
        .map(|&w| pinning(w, plan.cpus, plan.pin))
        .collect();

    let mut skipped = Vec::new();
    let mut available = Vec::new();
    for name in &plan.systems {
        match systems::make(name) {
            Ok(_) => available.push(name.clone()),
            Err(error) => {
                eprintln!("sluice lab: skipping {name}: {error:#}");
                skipped.push(Skipped {
                    system: name.clone(),
                    reason: format!("{error:#}"),
                });
            }
        }
    }
    let setup = setup(&plan, &cases, &pinnings, &available);
    let runs_of = |latency: bool| {
        let n = cases
            .iter()
            .filter(|c| (c.study == Study::Latency) == latency)
            .count();
        plan.workers.len() * n * plan.rounds as usize * available.len()
    };
    let total = runs_of(false) + runs_of(true);
    let overhead = plan.warmup + Duration::from_millis(300);
    let minutes = ((overhead + plan.duration).as_secs_f64() * runs_of(false) as f64
        + (overhead + plan.latency_duration).as_secs_f64() * runs_of(true) as f64)
        / 60.0;
    let latency_runs = match runs_of(true) {
        0 => String::new(),
        n => format!(" ({n} latency runs of {:?})", plan.latency_duration),
    };
    eprintln!(
        "sluice lab {}: {} runs of {:?}{} + {:?} warm-up (about {} min); systems {}; workers {:?}",
        plan.which.command(),
        total,
        plan.duration,
        latency_runs,
        plan.warmup,
        minutes.ceil(),
        available.join(", "),
        plan.workers
    );
    for p in &pinnings {
        eprintln!("  workers={}: {}", p.workers, p.description);
    }

    let lab = Lab {
        exe,
        work: work.0.clone(),
        ca,
        certs,
        hz: cpu::clock_ticks_per_second(),
        plan,
    };
    let mut runs = Vec::new();
    let mut index = 0;
    for pin in &pinnings {
        procs::park_if_stopping();
        if let Err(error) = run_workers(
            &lab,
            pin,
            &cases,
            &available,
            &mut runs,
            &mut skipped,
            (&mut index, total),
        ) {
            procs::park_if_stopping();
            eprintln!("sluice lab: workers={}: {error:#}", pin.workers);
            skipped.push(Skipped {
                system: available.join(","),
                reason: format!("workers={}: {error:#}", pin.workers),
            });
        }
    }

    let results = CapacityResults {
        schema: SCHEMA.to_owned(),
        started_at: iso_timestamp(started),
        command: lab.plan.which.command().to_owned(),
        setup,
        skipped,
        runs,
        cost_per_cpu_hour: lab.plan.cost_per_cpu_hour,
    };
    write_outputs(&lab.plan.out, &results)?;
    print!("{}", super::render::summary(&results));
    eprintln!("sluice lab: results in {}", lab.plan.out.display());
    if results.runs.is_empty() {
        bail!("no run completed");
    }
    Ok(())
}

fn setup(plan: &Plan, cases: &[Case], pinnings: &[Pinning], systems: &[String]) -> Setup {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    let mut notes = vec![
        format!(
            "Load: `sluice load -c{} -d{}s --warmup {}s`, threads = the client side's CPUs, closed \
             loop (as the seeds' `wrk -c`) except the latency comparison; {} round(s), the systems \
             alternating within each round and the first one rotating from round to round.",
            plan.connections,
            plan.duration.as_secs_f64(),
            plan.warmup.as_secs_f64(),
            plan.rounds
        ),
        "CPU per request: utime + stime from /proc/PID/stat of every process in the system's \
         process group (nginx master and workers; haproxy; sluice), read just before the load \
         generator starts and just after it exits, divided by every response it completed \
         (warm-up included), so it stays meaningful when the load generator is the bottleneck. \
         It includes connection setup: one full handshake per connection in keep-alive HTTPS runs."
            .to_owned(),
        format!(
            "Saturation: the system under test at ≥ {pct:.0} % of its CPUs is SUT-bound; else the \
             load generator (alone, or with the pods on its CPUs) at ≥ {pct:.0} % is client-bound; \
             where SUT and client share the CPUs, all of them together at ≥ {pct:.0} % is \
             shared-CPU-bound; when the CPUs were ≥ {pct:.0} % busy but mostly with processes \
             outside the lab, contended; otherwise latency-bound. A fixed-rate run that achieved its rate \
             is 'fixed rate'. 'Others' is CPU used by processes outside the lab (the machine may be \
             shared); runs where it exceeds {noisy:.0} % of the machine are counted as noisy.",
            pct = super::SATURATED * 100.0,
            noisy = super::NOISY * 100.0,
        ),
        "Pods: `sluice backend` processes on loopback, one per client-side CPU, pinned with the \
         load generator; every system proxies to them over pooled HTTP/1.1 keep-alive connections."
            .to_owned(),
    ];
    if cases.iter().any(|c| c.https) {
        notes.push(format!(
            "TLS: RSA-2048 certificate for {HOST} with {RSA_SUITE} (the seeds' suite), ECDSA P-256 \
             for {ECDSA_HOST} with {ECDSA_SUITE}; the client offers only that suite (so TLS 1.2) \
             and prefers X25519 for the key exchange; SNI selects the certificate in every system."
        ));
    }
    if cases.iter().any(|c| c.study == Study::Tps) {
        notes.push(
            "TLS TPS: a new connection per request with `Connection: close` for /0kb.bin. \
             '*-full' runs have the client's session resumption off: it offers no session ID or \
             ticket, so no server can resume and every handshake is a full one. '*-resumed' runs \
             cache sessions and offer them, as wrk did in the seeds. Every system keeps its \
             default session settings (tickets on) in both; the full/resumed counts are the \
             client's (a resumed handshake needs the server's consent), not a server-side count."
                .to_owned(),
        );
    }
    if cases.iter().any(|c| c.study == Study::Latency) {
        notes.push(format!(
            "Latency comparison: every system at a fixed rate (-R) of {LATENCY_SHARE} × nginx's \
             median closed-loop RPS at the same worker count and protocol (or the first system's \
             when nginx was not measured), for {}s per run; p99 is coordinated-omission corrected.",
            plan.latency_duration.as_secs_f64()
        ));
    }
    Setup {
        cpus: plan.cpus,
        cpu_model,
        clock_ticks_per_second: cpu::clock_ticks_per_second(),
        duration_secs: plan.duration.as_secs_f64(),
        warmup_secs: plan.warmup.as_secs_f64(),
        rounds: plan.rounds,
        connections: plan.connections,
        pinning: pinnings.to_vec(),
        versions: systems
            .iter()
            .map(|s| (s.clone(), systems::version(s)))
            .collect(),
        notes,
        sources: Vec::new(),
    }
}

/// Every case and round for one worker count.
fn run_workers(
    lab: &Lab,
    pin: &Pinning,
    cases: &[Case],
    available: &[String],
    runs: &mut Vec<Measurement>,
    skipped: &mut Vec<Skipped>,
    (index, total): (&mut usize, usize),
) -> anyhow::Result<()> {
    let w = pin.workers;
    let dir = lab.work.join(format!("workers-{w}"));
    std::fs::create_dir_all(&dir)?;
    crate::host::set_mode_755(&dir)?;
    let subnet = crate::host::subnet_seed();
    let mut deployment = Deployment::new(
        PodProgram::Http(lab.exe.clone()),
        pin.load_cpus.clone(),
        dir.clone(),
        [subnet[0], subnet[1].wrapping_add(u8::try_from(w % 200)?)],
    );
    deployment.start_pods(pin.pods)?;
    let pods = deployment.process_groups();

    let mut running: Vec<Running> = Vec::new();
    for name in available {
        let mut system = systems::make(name)?;
        let env = SutEnv {
            dir: dir.join(name),
            certs: lab.certs.clone(),
            cpus: pin.sut_cpus.clone(),
            exe: lab.exe.clone(),
            workers: w,
            grpc: false,
        };
        let started = system
            .start(&env, &deployment.endpoints())
            .and_then(|l| check_serves(l.http).map(|()| l));
        match started {
            Ok(listeners) => running.push(Running {
                name: name.clone(),
                system,
                listeners,
            }),
            Err(error) => {
                system.stop();
                eprintln!("sluice lab: {name} with {w} worker(s) did not start: {error:#}");
                skipped.push(Skipped {
                    system: name.clone(),
                    reason: format!("workers={w}: {error:#}"),
                });
            }
        }
    }

    // Failures are per run (recorded as skipped); the systems and pods are stopped after.
    for case in cases {
        let rate = if case.study == Study::Latency {
            match reference_rate(runs, case, w, &running) {
                Some(rate) => Some(rate),
                None => {
                    skipped.push(Skipped {
                        system: "all".into(),
                        reason: format!(
                            "latency/{} with {w} worker(s): no closed-loop RPS to take 50 % of",
                            case.name
                        ),
                    });
                    *index += lab.plan.rounds as usize * running.len();
                    continue;
                }
            }
        } else {
            None
        };
        for round in 1..=lab.plan.rounds {
            let n = running.len();
            for k in 0..n {
                procs::park_if_stopping();
                let sys = &running[(k + round as usize - 1) % n];
                *index += 1;
                let tag = format!(
                    "{}-{}-w{w}-r{round}-{}",
                    case.study.label(),
                    case.name,
                    sys.name
                );
                match measure(lab, sys, case, pin, rate, round, &pods, &tag) {
                    Ok(m) => {
                        eprintln!("[{index}/{total}] {}", progress_line(&m));
                        runs.push(m);
                    }
                    Err(error) => {
                        procs::park_if_stopping();
                        eprintln!("[{index}/{total}] {tag}: failed: {error:#}");
                        skipped.push(Skipped {
                            system: sys.name.clone(),
                            reason: format!("{tag}: {error:#}"),
                        });
                    }
                }
            }
        }
    }
    for mut r in running {
        r.system.stop();
    }
    deployment.stop_all();
    Ok(())
}

/// 50 % of nginx's (or else the first system's) median closed-loop RPS for the same protocol and
/// worker count.
fn reference_rate(runs: &[Measurement], case: &Case, w: u32, running: &[Running]) -> Option<f64> {
    let aggs = aggregate(runs);
    let reference = std::iter::once("nginx")
        .chain(running.iter().map(|r| r.name.as_str()))
        .find_map(|s| find(&aggs, Study::Rps, case.name, w, s))?;
    let rate = (reference.value.median * LATENCY_SHARE).round();
    (rate >= 1.0).then_some(rate)
}

fn progress_line(m: &Measurement) -> String {
    let value = match m.study {
        Study::Throughput => format!("{:.2} Gbit/s", m.gbps),
        Study::Latency => format!(
            "{:.0} req/s of {:.0}, p99 {:.2} ms",
            m.rate_achieved,
            m.rate_requested.unwrap_or(0.0),
            m.latency_ms.p99
        ),
        Study::Tps => format!(
            "{:.0} handshakes/s ({} full, {} resumed)",
            m.rate_achieved, m.handshakes.full, m.handshakes.resumed
        ),
        Study::Rps => format!("{:.0} req/s", m.rate_achieved),
    };
    format!(
        "{}/{} w={} r{} {:<7} {value}, {:.1} µs CPU/req, SUT {:.0} %, load {:.0} %, others {:.0} % → {}{}",
        m.study.label(),
        m.case,
        m.workers,
        m.round,
        m.system,
        m.cpu.sut_us_per_request,
        m.cpu.sut_util * 100.0,
        m.cpu.load_util * 100.0,
        m.cpu.others_util * 100.0,
        m.bound.label(),
        if m.errors.total() > 0 {
            format!(", {} errors", m.errors.total())
        } else {
            String::new()
        }
    )
}

/// A system that answers fast with errors would look efficient: check a real 1 KB answer first.
fn check_serves(http: SocketAddr) -> anyhow::Result<()> {
    crate::host::wait_until(Duration::from_secs(10), || {
        Ok(crate::host::http_get_host_ok(http, HOST, "/1kb.bin"))
    })
    .with_context(|| format!("GET http://{HOST}/1kb.bin via {http} did not answer 200"))
}

#[allow(clippy::too_many_arguments)]
fn measure(
    lab: &Lab,
    sys: &Running,
    case: &Case,
    pin: &Pinning,
    rate: Option<f64>,
    round: u32,
    pods: &[i32],
    tag: &str,
) -> anyhow::Result<Measurement> {
    let plan = &lab.plan;
    let duration = if case.study == Study::Latency {
        plan.latency_duration
    } else {
        plan.duration
    };
    let pgid = sys
        .system
        .process_group()
        .context("the system is not running")?;
    let dir = lab.work.join("load");
    std::fs::create_dir_all(&dir)?;
    let json = dir.join(format!("{tag}.json"));
    let _ = std::fs::remove_file(&json);
    let url = format!(
        "{}://{}{}",
        if case.https { "https" } else { "http" },
        case.host,
        case.path
    );
    let addr = if case.https {
        sys.listeners.https
    } else {
        sys.listeners.http
    };
    let mut cmd = pinned(pin.load_cpus.as_deref(), &lab.exe);
    cmd.arg("load")
        .arg("-t")
        .arg(pin.load_threads.to_string())
        .arg("-c")
        .arg(plan.connections.max(pin.load_threads).to_string())
        .arg("-d")
        .arg(format!("{}ms", duration.as_millis()))
        .arg("--warmup")
        .arg(format!("{}ms", plan.warmup.as_millis()))
        .arg("--connect-to")
        .arg(addr.to_string())
        .arg("--json")
        .arg(&json);
    if case.https {
        cmd.arg("--cacert")
            .arg(&lab.ca)
            .arg("--tls-ciphers")
            .arg(case.suite)
            .arg("--tls-resumption")
            .arg(if case.resumption { "on" } else { "off" });
    }
    if case.per_request {
        cmd.arg("--new-connection-per-request");
    }
    if let Some(rate) = rate {
        cmd.arg("-R").arg(format!("{rate:.0}"));
    }
    cmd.arg(&url);

    let ticks = |pgids: &[i32]| -> u64 { pgids.iter().map(|&g| cpu::group_ticks(g)).sum() };
    let sut0 = cpu::group_ticks(pgid);
    let pods0 = ticks(pods);
    let children0 = cpu::reaped_children_ticks();
    let machine0 = cpu::machine_ticks();
    let t0 = Instant::now();
    let log = dir.join(format!("{tag}.log"));
    let mut load = Proc::spawn("sluice load", cmd, &log)?;
    let deadline = plan.warmup + duration + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = load.try_wait() {
            break status;
        }
        if t0.elapsed() >= deadline {
            load.stop(Duration::from_secs(1));
            bail!("sluice load did not finish within {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Reaped: its CPU time is now in this process's children's times.
    let wall = t0.elapsed().as_secs_f64();
    let children1 = cpu::reaped_children_ticks();
    let sut1 = cpu::group_ticks(pgid);
    let pods1 = ticks(pods);
    let machine1 = cpu::machine_ticks();
    drop(load);

    let text = std::fs::read_to_string(&json).with_context(|| {
        format!(
            "sluice load ({status}) wrote no results; its output:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    })?;
    let results: load::Results =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", json.display()))?;
    std::fs::write(plan.out.join("runs").join(format!("{tag}.load.json")), text)?;

    let hz = lab.hz;
    let secs = |t: u64| cpu::ticks_to_secs(t, hz);
    let machine = cpu::machine_delta(&machine0, &machine1, None);
    let sut_set = pin.sut_cpus.as_deref().and_then(cpu::parse_cpu_list);
    let load_set = pin.load_cpus.as_deref().and_then(cpu::parse_cpu_list);
    let busy = |set: &Option<Vec<usize>>| {
        cpu::machine_delta(&machine0, &machine1, set.as_deref()).busy_share()
    };
    let completed = results.requests + results.warmup.completed;
    let sut_cpus = sut_set
        .as_ref()
        .map_or(plan.cpus.min(pin.workers as usize), Vec::len);
    let cpu_use = CpuUse::new(
        wall,
        secs(sut1.saturating_sub(sut0)),
        u32::try_from(sut_cpus).unwrap_or(1),
        secs(children1.saturating_sub(children0)),
        pin.load_threads,
        secs(pods1.saturating_sub(pods0)),
        pin.shared,
        secs(machine.busy),
        u32::try_from(machine0.len().max(1)).unwrap_or(1),
        completed,
    )
    .with_cpusets(busy(&sut_set), busy(&load_set));
    let gbps = if results.duration_secs > 0.0 {
        results.bytes_read as f64 * 8.0 / results.duration_secs / 1e9
    } else {
        0.0
    };
    Ok(Measurement {
        study: case.study,
        case: case.name.to_owned(),
        system: sys.name.clone(),
        workers: pin.workers,
        round,
        url,
        connections: results.connections,
        threads: results.threads,
        rate_requested: results.requested_rate,
        duration_secs: results.duration_secs,
        requests: results.requests,
        warmup_requests: results.warmup.completed,
        rate_achieved: results.achieved_rate,
        gbps,
        bytes_read: results.bytes_read,
        errors: results.errors,
        handshakes: results.tls_handshakes,
        latency_ms: LatencyMs::from_load(&results),
        bound: classify(&cpu_use, results.requested_rate, results.achieved_rate),
        cpu: cpu_use,
    })
}
