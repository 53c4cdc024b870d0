//! Host stalls: how late a thread that only sleeps wakes up, on each CPU, while a run goes on.
//!
//! ```text
//!  sluice lab stall-probe (one process per CPU: taskset, and nice -20 where allowed)
//!    loop { sleep PERIOD; lateness = woke − due } ── lateness ≥ RECORDED_FROM ──▶ one JSON line
//!                                                    {at_unix_secs, late_ms}, flushed at once
//!  lab: lines of each CPU ──read_log──▶ Vec<Stall> ──HostStalls::new(series, start)──▶ Run
//!       (counts, longest, and whether the run's slowest seconds had a stall in them)
//!  sluice lab stalls: the same probes on an idle machine, as a table
//! ```
//!
//! Why: on the lab's machine (a 2-vCPU VM) a plain sleep loop, with nothing else running, wakes
//! 4–6 ms late about once a second on one CPU or the other. `perf sched timehist` shows the
//! probe itself *running* for those 5 ms (no other task, no switch), so the time is lost below
//! the guest's scheduler; a loop that spins instead of sleeping sees almost none of it (one gap
//! over 1 ms in 30 s). Every system under test, and the load generator, sleeps between events
//! and pays for these stalls, so a run's p99.99 and p99.999 are partly the machine's; measuring
//! them beside each run says which part.
//!
//! The probe is an ordinary (fair-class) process like the systems it sits beside: the same loop
//! at real-time priority (`chrt -f 1`) sees the stalls shorter (at most ~2.5 ms in a minute,
//! against ~5 ms), so a real-time probe would understate what the proxies suffer. It runs at
//! nice -20 where the lab may set that, so on the busy CPU of the system under test it does not
//! wait long for its turn behind the proxy (a stall counts from 2 ms; scheduling behind a nice-0
//! task costs far less). Each wake costs a few microseconds, once a millisecond, the same for
//! every system.

use std::collections::BTreeMap;
use std::io::{BufRead as _, Write};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::cpu::CpuTicks;
use crate::table::Table;

/// How long the probe sleeps each time.
pub const PERIOD: Duration = Duration::from_millis(1);
/// Lateness worth a line in the probe's log. A timer wakes up to ~0.1 ms late as a matter of
/// course (timer slack, the wake itself).
pub const RECORDED_FROM: Duration = Duration::from_millis(1);
/// Lateness counted as a stall in the reports: more than scheduling and timers explain.
pub const STALL_FROM_MS: f64 = 2.0;
/// The probe ends after this many lines, so a machine that is late on every wake cannot fill
/// the disk (at one line a millisecond: 100 s; ~5 MB).
pub const MAX_LINES: u64 = 100_000;
/// How many of a run's slowest seconds are matched against the stalls.
pub const SLOWEST_SECONDS: usize = 10;
/// A stall that ended this long before a second began still delays requests completed in it.
const STALL_REACH_SECS: f64 = 0.1;

/// `sluice lab stall-probe` (run by the lab, one per CPU).
#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// How long to probe.
    #[arg(long, value_name = "DURATION")]
    pub duration: String,
    /// Where the JSON lines go.
    #[arg(long, value_name = "FILE")]
    pub out: std::path::PathBuf,
}

/// `sluice lab stalls`.
#[derive(clap::Args, Debug)]
pub struct StallsArgs {
    /// How long to probe each CPU (all at once).
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub duration: String,
    /// CPUs to probe, as taskset takes them (default: every CPU).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
}

/// One late wake of the probe.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    /// When the probe woke (the stall's end), Unix seconds.
    pub at_unix_secs: f64,
    /// How late it woke, in ms.
    pub late_ms: f64,
}

/// The probe: sleeps [`PERIOD`] at a time for `duration` and writes a line for every wake at
/// least [`RECORDED_FROM`] late, flushed at once (the lab may stop the probe at any moment).
pub fn probe(duration: Duration, out: &mut impl Write) -> std::io::Result<()> {
    let start = Instant::now();
    let mut lines = 0;
    while start.elapsed() < duration && lines < MAX_LINES {
        let due = Instant::now() + PERIOD;
        std::thread::sleep(PERIOD);
        let late = Instant::now().saturating_duration_since(due);
        if late >= RECORDED_FROM {
            let stall = Stall {
                at_unix_secs: unix_secs(SystemTime::now()),
                late_ms: late.as_secs_f64() * 1000.0,
            };
            serde_json::to_writer(&mut *out, &stall)?;
            out.write_all(b"\n")?;
            out.flush()?;
            lines += 1;
        }
    }
    Ok(())
}

/// Runs `sluice lab stall-probe`.
pub fn run_probe(args: ProbeArgs) -> anyhow::Result<()> {
    let duration = load::parse_duration(&args.duration)
        .with_context(|| format!("--duration: '{}' is not a duration like 30s", args.duration))?;
    let mut out = std::fs::File::create(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    probe(duration, &mut out).with_context(|| format!("writing {}", args.out.display()))
}

/// The stalls a probe logged. A line cut short by the probe being stopped mid-write is skipped;
/// anything else unreadable is an error naming the file and line.
pub fn read_log(path: &Path) -> anyhow::Result<Vec<Stall>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let lines: Vec<String> = std::io::BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", path.display()))?;
    let mut stalls = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(stall) => stalls.push(stall),
            Err(_) if i + 1 == lines.len() => {}
            Err(error) => anyhow::bail!("{} line {}: {error}", path.display(), i + 1),
        }
    }
    Ok(stalls)
}

/// Seconds since the Unix epoch.
pub fn unix_secs(at: SystemTime) -> f64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What one CPU's probe saw during a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuStalls {
    /// The CPU list the probe was pinned to.
    pub cpus: String,
    /// What runs there, in words.
    pub role: String,
    /// Whether the probe ran at nice -20 (else its lateness on a busy CPU includes more waiting
    /// for its turn).
    pub raised: bool,
    /// Wakes at least [`STALL_FROM_MS`] late over the whole probe.
    pub stalls: u64,
    /// Of those, how many were 5 ms or more.
    pub stalls_5ms: u64,
    /// The latest wake, in ms (0 if none was logged).
    pub longest_ms: f64,
    /// Every logged wake ([`RECORDED_FROM`] and later), in seconds since the measurement began.
    pub log: Vec<TimedStall>,
}

/// A logged wake placed in the run's series.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimedStall {
    /// When it ended, in seconds since the measurement began (negative: before it).
    pub at_secs: f64,
    pub late_ms: f64,
}

/// One of a run's slowest seconds and the longest stall that could have delayed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowSecond {
    pub second: u64,
    /// The slowest request completed in that second, in ms.
    pub max_ms: f64,
    /// The longest wake at least [`STALL_FROM_MS`] late that ended in the second or up to
    /// 0.1 s before it, on any probed CPU: (ms, CPU list). `None`: no stall there.
    pub stall: Option<(f64, String)>,
}

/// The host's stalls during one run, next to the run's slowest seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStalls {
    pub probes: Vec<CpuStalls>,
    /// The run's [`SLOWEST_SECONDS`] slowest seconds (by their slowest request), slowest first.
    pub slowest_seconds: Vec<SlowSecond>,
}

/// One probe's raw log with where it ran.
pub struct ProbeLog {
    pub cpus: String,
    pub role: String,
    pub raised: bool,
    pub stalls: Vec<Stall>,
}

impl HostStalls {
    /// Places each probe's stalls in the run's series (second 0 began at
    /// `measurement_started_unix_secs`) and matches them with its slowest seconds. Stalls before
    /// the measurement or after its last second still count in the totals: they are the
    /// machine's state while the run was on.
    pub fn new(
        probes: Vec<ProbeLog>,
        series: &[load::SeriesPoint],
        measurement_started_unix_secs: f64,
    ) -> HostStalls {
        let probes: Vec<CpuStalls> = probes
            .into_iter()
            .map(|p| {
                let stalls: Vec<&Stall> = p
                    .stalls
                    .iter()
                    .filter(|s| s.late_ms >= STALL_FROM_MS)
                    .collect();
                CpuStalls {
                    stalls: stalls.len() as u64,
                    stalls_5ms: stalls.iter().filter(|s| s.late_ms >= 5.0).count() as u64,
                    longest_ms: p.stalls.iter().map(|s| s.late_ms).fold(0.0, f64::max),
                    log: p
                        .stalls
                        .iter()
                        .map(|s| TimedStall {
                            at_secs: s.at_unix_secs - measurement_started_unix_secs,
                            late_ms: s.late_ms,
                        })
                        .collect(),
                    cpus: p.cpus,
                    role: p.role,
                    raised: p.raised,
                }
            })
            .collect();
        let mut seconds: Vec<(u64, f64)> = series
            .iter()
            .filter_map(|p| Some((p.second, p.max_us? as f64 / 1000.0)))
            .collect();
        seconds.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let slowest_seconds = seconds
            .into_iter()
            .take(SLOWEST_SECONDS)
            .map(|(second, max_ms)| {
                let from = second as f64 - STALL_REACH_SECS;
                let to = second as f64 + 1.0;
                let stall = probes
                    .iter()
                    .flat_map(|p| p.log.iter().map(move |s| (s, &p.cpus)))
                    .filter(|(s, _)| {
                        s.late_ms >= STALL_FROM_MS && s.at_secs >= from && s.at_secs < to
                    })
                    .max_by(|a, b| a.0.late_ms.total_cmp(&b.0.late_ms))
                    .map(|(s, cpus)| (s.late_ms, cpus.clone()));
                SlowSecond {
                    second,
                    max_ms,
                    stall,
                }
            })
            .collect();
        HostStalls {
            probes,
            slowest_seconds,
        }
    }

    /// "9 of 10": how many of the slowest seconds had a stall in them.
    pub fn slowest_with_stall(&self) -> String {
        format!(
            "{} of {}",
            self.slowest_seconds
                .iter()
                .filter(|s| s.stall.is_some())
                .count(),
            self.slowest_seconds.len()
        )
    }

    /// Stall counts per probe, "CPU 0: 171, CPU 1: 3".
    pub fn counts(&self) -> String {
        self.probes
            .iter()
            .map(|p| format!("CPU {}: {}", p.cpus, p.stalls))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Stalls (≥ [`STALL_FROM_MS`]) over every probe.
    pub fn total(&self) -> u64 {
        self.probes.iter().map(|p| p.stalls).sum()
    }

    /// Stalls of 5 ms or more over every probe.
    pub fn total_5ms(&self) -> u64 {
        self.probes.iter().map(|p| p.stalls_5ms).sum()
    }

    /// The longest wake over every probe, in ms.
    pub fn longest_ms(&self) -> f64 {
        self.probes.iter().map(|p| p.longest_ms).fold(0.0, f64::max)
    }
}

/// Whether `nice -n -20` works here (root, or CAP_SYS_NICE): asked once per lab. `nice` runs
/// the command anyway when it may not raise the priority, so ask what niceness it got.
pub(crate) fn raised_priority_allowed() -> bool {
    std::process::Command::new("nice")
        .args(["-n", "-20", "nice"])
        .stderr(std::process::Stdio::null())
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.trim_ascii() == b"-20")
}

/// Probes running beside a run, one per CPU set.
pub(crate) struct Probes {
    running: Vec<(ProbeLogPlace, crate::procs::Proc)>,
}

struct ProbeLogPlace {
    cpus: String,
    role: String,
    raised: bool,
    path: std::path::PathBuf,
}

impl Probes {
    /// Starts one probe per `(CPU list, role)`, each pinned there (`None`: unpinned), for at most
    /// `limit`; their logs go to `dir`.
    pub(crate) fn start(
        exe: &Path,
        dir: &Path,
        places: &[(Option<String>, &str)],
        raised: bool,
        limit: Duration,
    ) -> anyhow::Result<Probes> {
        let mut running = Vec::new();
        for (i, (cpus, role)) in places.iter().enumerate() {
            let path = dir.join(format!("stalls-{i}.jsonl"));
            // `taskset -c CPUS nice -n -20 sluice …`, or without nice.
            let mut cmd = if raised {
                let mut cmd = crate::procs::pinned(cpus.as_deref(), Path::new("nice"));
                cmd.args(["-n", "-20"]).arg(exe);
                cmd
            } else {
                crate::procs::pinned(cpus.as_deref(), exe)
            };
            cmd.args(["lab", "stall-probe", "--duration"])
                .arg(format!("{}ms", limit.as_millis()))
                .arg("--out")
                .arg(&path);
            let proc = crate::procs::Proc::spawn(
                "stall probe",
                cmd,
                &dir.join(format!("stalls-{i}.log")),
            )?;
            running.push((
                ProbeLogPlace {
                    cpus: cpus.clone().unwrap_or_else(|| "any".to_owned()),
                    role: (*role).to_owned(),
                    raised,
                    path,
                },
                proc,
            ));
        }
        Ok(Probes { running })
    }

    /// Stops every probe and reads what each logged.
    pub(crate) fn finish(self) -> anyhow::Result<Vec<ProbeLog>> {
        let mut logs = Vec::new();
        for (place, proc) in self.running {
            proc.stop(Duration::from_secs(1));
            // A probe that had not logged anything yet may not have made its file.
            let stalls = if place.path.exists() {
                read_log(&place.path)?
            } else {
                Vec::new()
            };
            logs.push(ProbeLog {
                cpus: place.cpus,
                role: place.role,
                raised: place.raised,
                stalls,
            });
        }
        Ok(logs)
    }
}

/// Runs `sluice lab stalls`: probes on every CPU (or `--cpus`) of an idle machine, as a table.
pub fn run_stalls(args: StallsArgs) -> anyhow::Result<()> {
    let duration = load::parse_duration(&args.duration)
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--duration: '{}' is not a duration like 30s", args.duration))?;
    let cpus = match &args.cpus {
        Some(list) => crate::cpu::parse_cpu_list(list)
            .with_context(|| format!("--cpus: '{list}' is not a CPU list like 0,2-3"))?,
        None => (0..std::thread::available_parallelism().map_or(1, usize::from)).collect(),
    };
    crate::procs::install_signal_handler()?;
    let exe = std::env::current_exe().context("finding the sluice binary")?;
    let work = crate::host::WorkDir::new()?;
    let places: Vec<(Option<String>, &str)> = cpus
        .iter()
        .map(|cpu| (Some(cpu.to_string()), "idle"))
        .collect();
    let raised = raised_priority_allowed();
    eprintln!(
        "sluice lab stalls: a thread sleeping {} ms at a time on CPU {}, {duration:?}{}",
        PERIOD.as_millis(),
        cpus.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        if raised { ", nice -20" } else { "" }
    );
    let started = unix_secs(SystemTime::now());
    let ticks_before = crate::cpu::machine_ticks();
    let probes = Probes::start(
        &exe,
        &work.0,
        &places,
        raised,
        duration + Duration::from_secs(5),
    )?;
    std::thread::sleep(duration);
    let ticks_after = crate::cpu::machine_ticks();
    let stalls = HostStalls::new(probes.finish()?, &[], started);
    let ticks: BTreeMap<usize, CpuTicks> = cpus
        .iter()
        .map(|&cpu| {
            let delta = crate::cpu::machine_delta(&ticks_before, &ticks_after, Some(&[cpu]));
            (cpu, delta)
        })
        .collect();
    print!("{}", stalls_table(&stalls, duration, &ticks));
    println!("{}", machine_facts());
    Ok(())
}

/// What the kernel tells about the machine's CPUs that bears on late wakes: whether it runs
/// under a hypervisor, and how idle CPUs wait (the cpuidle driver and governor; for haltpoll,
/// how long a guest polls before it halts).
pub fn machine_facts() -> String {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|t| t.trim().to_owned())
    };
    let virtual_machine = read("/proc/cpuinfo").is_some_and(|info| {
        info.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    });
    let mut facts = vec![if virtual_machine {
        "a virtual machine (the CPUs' hypervisor flag)".to_owned()
    } else {
        "no hypervisor flag".to_owned()
    }];
    if let Some(driver) = read("/sys/devices/system/cpu/cpuidle/current_driver") {
        let governor = read("/sys/devices/system/cpu/cpuidle/current_governor")
            .or_else(|| read("/sys/devices/system/cpu/cpuidle/current_governor_ro"))
            .unwrap_or_else(|| "?".to_owned());
        facts.push(format!("cpuidle {driver}, governor {governor}"));
    }
    if let Some(poll) = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns") {
        facts.push(format!("guest_halt_poll_ns {poll}"));
    }
    format!("machine: {}", facts.join("; "))
}

/// `sluice lab stalls`' output: each probe's stalls, with how busy its CPU was meanwhile and
/// how much of that the hypervisor reported as stolen (`ticks`, by CPU number).
pub fn stalls_table(
    stalls: &HostStalls,
    duration: Duration,
    ticks: &BTreeMap<usize, CpuTicks>,
) -> String {
    let minutes = duration.as_secs_f64() / 60.0;
    let mut table = Table::new(
        &[
            "cpu",
            "nice -20",
            "stalls≥2ms",
            "stalls≥5ms",
            "per minute",
            "longest ms",
            "busy %",
            "steal %",
        ],
        1,
    );
    let share = |part: u64, whole: u64| {
        if whole == 0 {
            "–".to_owned()
        } else {
            format!("{:.1}", 100.0 * part as f64 / whole as f64)
        }
    };
    for p in &stalls.probes {
        let cpu = p.cpus.parse::<usize>().ok().and_then(|c| ticks.get(&c));
        table.rows.push(vec![
            p.cpus.clone(),
            if p.raised { "yes" } else { "no" }.to_owned(),
            p.stalls.to_string(),
            p.stalls_5ms.to_string(),
            format!("{:.1}", p.stalls as f64 / minutes),
            format!("{:.2}", p.longest_ms),
            cpu.map_or_else(|| "–".to_owned(), |t| share(t.busy, t.total)),
            cpu.map_or_else(|| "–".to_owned(), |t| share(t.steal, t.total)),
        ]);
    }
    let mut out = table.text();
    out += &format!(
        "(a stall: the probe woke at least {STALL_FROM_MS} ms after it was due; every process on \
         that CPU lost that time. Steal: what the hypervisor reports as taken from the CPU; \
         stalls with no steal are lost where the guest cannot see them)\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_puts_each_cpus_busy_and_stolen_share_beside_its_stalls() {
        let probe = |cpus: &str| CpuStalls {
            cpus: cpus.to_owned(),
            role: "idle".to_owned(),
            raised: true,
            stalls: 30,
            stalls_5ms: 4,
            longest_ms: 6.25,
            log: Vec::new(),
        };
        let stalls = HostStalls {
            probes: vec![probe("0"), probe("1-3")],
            slowest_seconds: Vec::new(),
        };
        let ticks = BTreeMap::from([(
            0,
            CpuTicks {
                busy: 50,
                total: 1000,
                steal: 10,
            },
        )]);
        let text = stalls_table(&stalls, Duration::from_secs(30), &ticks);
        let row = |cpus: &str| {
            text.lines()
                .find(|l| l.split_whitespace().next() == Some(cpus))
                .unwrap_or_else(|| panic!("no row for {cpus}:\n{text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        // 30 stalls in half a minute: 60 a minute; 5 % busy, of which 1 % stolen.
        assert_eq!(
            row("0"),
            ["0", "yes", "30", "4", "60.0", "6.25", "5.0", "1.0"]
        );
        // A CPU list has no single /proc/stat line: no shares.
        assert_eq!(row("1-3")[6..], ["–", "–"]);
    }

    #[test]
    fn machine_facts_say_whether_a_hypervisor_is_there() {
        let facts = machine_facts();
        let flagged = std::fs::read_to_string("/proc/cpuinfo")
            .unwrap()
            .lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"));
        assert!(facts.starts_with("machine: "), "{facts}");
        assert_eq!(facts.contains("a virtual machine"), flagged, "{facts}");
    }

    fn second(second: u64, max_ms: u64) -> load::SeriesPoint {
        load::SeriesPoint {
            second,
            completed: 3000,
            errors: load::ErrorCounts::default(),
            p50_us: Some(500),
            p99_us: Some(900),
            max_us: Some(max_ms * 1000),
        }
    }

    fn log(cpus: &str, stalls: &[(f64, f64)]) -> ProbeLog {
        ProbeLog {
            cpus: cpus.to_owned(),
            role: "test".to_owned(),
            raised: true,
            stalls: stalls
                .iter()
                .map(|&(at, late_ms)| Stall {
                    at_unix_secs: 1000.0 + at,
                    late_ms,
                })
                .collect(),
        }
    }

    #[test]
    fn slowest_seconds_are_matched_with_the_longest_stall_that_could_delay_them() {
        // Seconds 0..30; seconds 13, 17 and 21 are slow, the rest take 1 ms (so the ten slowest
        // are those three and seconds 0–6). A stall at 12.95 s reaches into second 13, second
        // 17 has two stalls (the longer one counts), second 21 has only a 1.5 ms wake (logged,
        // not a stall), and a stall in second 25 falls in none of the ten.
        let series: Vec<_> = (0..30)
            .map(|s| match s {
                13 => second(s, 9),
                17 => second(s, 8),
                21 => second(s, 7),
                _ => second(s, 1),
            })
            .collect();
        let stalls = HostStalls::new(
            vec![
                log("0", &[(12.95, 5.5), (25.5, 4.0), (17.2, 2.5)]),
                log("1", &[(17.8, 6.0), (21.5, 1.5)]),
            ],
            &series,
            1000.0,
        );
        let slowest: Vec<_> = stalls
            .slowest_seconds
            .iter()
            .map(|s| (s.second, s.max_ms, s.stall.clone()))
            .collect();
        assert_eq!(
            slowest[..4],
            [
                (13, 9.0, Some((5.5, "0".to_owned()))),
                (17, 8.0, Some((6.0, "1".to_owned()))),
                (21, 7.0, None),
                (0, 1.0, None),
            ]
        );
        assert_eq!(stalls.slowest_seconds.len(), SLOWEST_SECONDS);
        assert_eq!(stalls.slowest_with_stall(), "2 of 10");
        assert_eq!(stalls.counts(), "CPU 0: 3, CPU 1: 1");
        assert_eq!(stalls.probes[0].stalls_5ms, 1);
        assert_eq!(stalls.longest_ms(), 6.0);
        assert_eq!(stalls.probes[1].log[1].at_secs, 21.5);
    }

    #[test]
    fn a_log_cut_short_by_the_probe_being_stopped_still_reads() {
        let dir = std::env::temp_dir().join(format!("sluice-stalls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cut.jsonl");
        std::fs::write(
            &path,
            "{\"at_unix_secs\":1.5,\"late_ms\":4.25}\n{\"at_unix_secs\":2.5,\"la",
        )
        .unwrap();
        assert_eq!(
            read_log(&path).unwrap(),
            vec![Stall {
                at_unix_secs: 1.5,
                late_ms: 4.25
            }]
        );
        std::fs::write(&path, "nonsense\n{\"at_unix_secs\":1.5,\"late_ms\":4.25}\n").unwrap();
        let error = read_log(&path).unwrap_err().to_string();
        assert!(error.contains("cut.jsonl line 1"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
