//! CPU time from `/proc`: what the system under test, the load generator and the backends spent.
//!
//! ```text
//!  /proc/PID/stat ──parse_stat──▶ ProcStat { pgrp, utime, stime, cutime, cstime }
//!        │ every process whose pgrp is the SUT's group, summed   ──▶ group_ticks(pgid)
//!  /proc/self/stat cutime+cstime (children reaped so far)         ──▶ reaped_children_ticks()
//!  /proc/stat cpuN lines ──parse_machine──▶ busy/total ticks per CPU ──▶ machine_ticks()
//! ```
//!
//! The parsers are pure (text in, numbers out); the readers are thin. Times are clock ticks
//! (`CLK_TCK`, 100 per second on Linux), converted to seconds by [`ticks_to_secs`].

use std::collections::BTreeMap;

/// The fields of `/proc/PID/stat` the lab uses (see proc(5)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    /// Process group id (field 5).
    pub pgrp: i32,
    /// User and system time of the process, all its threads (fields 14, 15).
    pub utime: u64,
    pub stime: u64,
    /// User and system time of its children that it has waited for (fields 16, 17).
    pub cutime: u64,
    pub cstime: u64,
}

impl ProcStat {
    /// utime + stime.
    pub fn ticks(&self) -> u64 {
        self.utime + self.stime
    }

    /// cutime + cstime.
    pub fn children_ticks(&self) -> u64 {
        self.cutime + self.cstime
    }
}

/// Parses one `/proc/PID/stat` line. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted from its *last* closing parenthesis.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    // After ") ": state(3) ppid(4) pgrp(5) session(6) tty(7) tpgid(8) flags(9) minflt(10)
    // cminflt(11) majflt(12) cmajflt(13) utime(14) stime(15) cutime(16) cstime(17) ...
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<i64>().ok());
    let ticks = |n: usize| field(n).and_then(|v| u64::try_from(v).ok());
    Some(ProcStat {
        pid,
        pgrp: i32::try_from(field(5)?).ok()?,
        utime: ticks(14)?,
        stime: ticks(15)?,
        cutime: ticks(16)?,
        cstime: ticks(17)?,
    })
}

/// Busy and total ticks of one CPU (or a sum of CPUs) from `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq + steal.
    pub busy: u64,
    /// busy + idle + iowait.
    pub total: u64,
    /// Of `busy`: time the hypervisor says it ran something else on this CPU.
    pub steal: u64,
}

impl CpuTicks {
    /// busy / total, 0 when nothing elapsed.
    pub fn busy_share(&self) -> f64 {
        if self.total > 0 {
            self.busy as f64 / self.total as f64
        } else {
            0.0
        }
    }
}

/// The per-CPU lines (`cpu0 …`, `cpu1 …`) of `/proc/stat`, by CPU number; the aggregate `cpu`
/// line is left out. Guest time is already inside user time, so it is not added again.
pub fn parse_machine(text: &str) -> BTreeMap<usize, CpuTicks> {
    let mut cpus = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(Ok(n)) = name.strip_prefix("cpu").map(str::parse::<usize>) else {
            continue;
        };
        let v: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal guest guest_nice
        let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
        cpus.insert(
            n,
            CpuTicks {
                busy,
                total: busy + at(3) + at(4),
                steal: at(7),
            },
        );
    }
    cpus
}

/// Parses a `taskset -c` CPU list such as `0`, `1-3` or `0,2-3` into CPU numbers.
pub fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

/// The kernel's clock tick rate for `/proc` times.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

pub fn ticks_to_secs(ticks: u64, hz: u64) -> f64 {
    ticks as f64 / hz.max(1) as f64
}

/// utime + stime of every live process in process group `pgid` (nginx: master and workers).
pub fn group_ticks(pgid: i32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|text| parse_stat(&text))
        .filter(|s| s.pgrp == pgid)
        .map(|s| s.ticks())
        .sum()
}

/// cutime + cstime of this process: CPU time of every child it has reaped so far. Read before
/// spawning a child and after reaping it, the difference is that child's CPU time, exactly.
pub fn reaped_children_ticks() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|t| parse_stat(&t))
        .map_or(0, |s| s.children_ticks())
}

/// Busy/total ticks per CPU now.
pub fn machine_ticks() -> BTreeMap<usize, CpuTicks> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_machine(&t))
        .unwrap_or_default()
}

/// Busy and total ticks between two [`machine_ticks`] readings, over the CPUs in `only` (all
/// when `None`).
pub fn machine_delta(
    before: &BTreeMap<usize, CpuTicks>,
    after: &BTreeMap<usize, CpuTicks>,
    only: Option<&[usize]>,
) -> CpuTicks {
    let mut delta = CpuTicks::default();
    for (cpu, a) in after {
        if only.is_some_and(|set| !set.contains(cpu)) {
            continue;
        }
        if let Some(b) = before.get(cpu) {
            delta.busy += a.busy.saturating_sub(b.busy);
            delta.total += a.total.saturating_sub(b.total);
            delta.steal += a.steal.saturating_sub(b.steal);
        }
    }
    delta
}

#[cfg(test)]
mod tests {
    use super::*;

    const NGINX_WORKER: &str = "4242 (nginx) S 4241 4241 4241 0 -1 4194624 1203 0 0 0 \
        731 268 5 7 20 0 1 0 123456 12345678 1234 18446744073709551615 1 1 0 0 0 0 0 \
        4096 0 0 0 0 17 0 0 0 0 0 0";

    #[test]
    fn stat_fields_are_counted_after_the_name() {
        let s = parse_stat(NGINX_WORKER).unwrap();
        assert_eq!(
            s,
            ProcStat {
                pid: 4242,
                pgrp: 4241,
                utime: 731,
                stime: 268,
                cutime: 5,
                cstime: 7,
            }
        );
        assert_eq!(s.ticks(), 999);
        assert_eq!(s.children_ticks(), 12);
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_does_not_shift_fields() {
        let text = NGINX_WORKER.replace("(nginx)", "(nginx: worker (x) process)");
        let s = parse_stat(&text).unwrap();
        assert_eq!((s.pgrp, s.utime, s.stime), (4241, 731, 268));
    }

    #[test]
    fn truncated_or_garbled_stat_is_none() {
        assert_eq!(parse_stat(""), None);
        assert_eq!(parse_stat("12 (x) S 1 2"), None);
        assert_eq!(parse_stat("x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14"), None);
    }

    #[test]
    fn machine_lines_sum_busy_and_idle_per_cpu() {
        let text = "cpu  300 0 100 900 10 0 5 0 0 0\n\
                    cpu0 200 0 50 400 5 0 5 0 0 0\n\
                    cpu1 100 0 50 500 5 0 0 2 0 0\n\
                    intr 12345\nctxt 999\n";
        let m = parse_machine(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[&0],
            CpuTicks {
                busy: 255,
                total: 660,
                steal: 0
            }
        );
        assert_eq!(
            m[&1],
            CpuTicks {
                busy: 152,
                total: 657,
                steal: 2
            }
        );
        let later = parse_machine("cpu0 300 0 60 420 5 0 5 0 0 0\ncpu1 100 0 50 600 5 0 0 7 0 0\n");
        assert_eq!(
            machine_delta(&m, &later, None),
            CpuTicks {
                busy: 115,
                total: 235,
                steal: 5
            }
        );
        assert_eq!(
            machine_delta(&m, &later, Some(&[1])),
            CpuTicks {
                busy: 5,
                total: 105,
                steal: 5
            }
        );
    }

    #[test]
    fn cpu_lists_like_taskset() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("1-3"), Some(vec![1, 2, 3]));
        assert_eq!(parse_cpu_list("0,2-3,2"), Some(vec![0, 2, 3]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn ticks_convert_to_seconds() {
        assert!((ticks_to_secs(250, 100) - 2.5).abs() < 1e-12);
    }

    #[test]
    fn this_process_can_be_read() {
        let me = std::fs::read_to_string("/proc/self/stat").unwrap();
        let s = parse_stat(&me).unwrap();
        assert_eq!(s.pid, i32::try_from(std::process::id()).unwrap());
        assert!(clock_ticks_per_second() > 0);
        assert!(!machine_ticks().is_empty());
    }
}
