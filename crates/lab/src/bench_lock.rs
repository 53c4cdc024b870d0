//! One benchmark at a time on this machine: the lab takes the same lock as the
//! `scripts/bench-*.sh` benchmarks (`scripts/lib/bench.sh`, `one_at_a_time`), an exclusive
//! `flock` on `/tmp/sluice-bench.lock` (`BENCH_LOCK` overrides it), held until the lab exits.
//! Two at once would collide on fixed ports or measure each other's processes, and their CPU
//! figures would skew each other anyway; the second waits, says so, and gives up after
//! `BENCH_LOCK_WAIT` seconds (default 1800).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// The lock the shell benchmarks take.
const DEFAULT_PATH: &str = "/tmp/sluice-bench.lock";
/// How long to wait for another benchmark by default.
const DEFAULT_WAIT: Duration = Duration::from_secs(1800);
/// How often a waiting lab tries again.
const POLL: Duration = Duration::from_millis(250);

/// Held until dropped (the lock goes with the file).
#[derive(Debug)]
pub struct BenchLock {
    _file: File,
}

/// Takes the machine's benchmark lock, as `BENCH_LOCK` and `BENCH_LOCK_WAIT` say.
pub fn one_at_a_time() -> anyhow::Result<BenchLock> {
    let path =
        std::env::var_os("BENCH_LOCK").map_or_else(|| PathBuf::from(DEFAULT_PATH), PathBuf::from);
    let wait = match std::env::var("BENCH_LOCK_WAIT") {
        Ok(raw) => Duration::from_secs(raw.trim().parse().with_context(|| {
            format!("BENCH_LOCK_WAIT: '{raw}' is not a whole number of seconds")
        })?),
        Err(_) => DEFAULT_WAIT,
    };
    take(&path, wait)
}

/// Takes the lock on `path`, waiting up to `wait` for whoever holds it.
pub fn take(path: &Path, wait: Duration) -> anyhow::Result<BenchLock> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("benchmark lock {}: cannot open it", path.display()))?;
    let started = Instant::now();
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(BenchLock { _file: file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(error)) => {
                return Err(error)
                    .with_context(|| format!("benchmark lock {}: cannot lock it", path.display()))
            }
        }
        if started.elapsed() >= wait {
            bail!(
                "another benchmark still holds {} after {} s (BENCH_LOCK_WAIT); \
                 wait for it to end, or stop it",
                path.display(),
                wait.as_secs()
            );
        }
        if !said {
            eprintln!(
                "sluice lab: another benchmark holds {}; waiting up to {} s",
                path.display(),
                wait.as_secs()
            );
            said = true;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_waits_then_gives_up_and_gets_it_once_released() {
        let dir = std::env::temp_dir().join(format!("sluice-bench-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lock");
        let first = take(&path, Duration::ZERO).unwrap();
        let started = Instant::now();
        let error = take(&path, Duration::from_millis(600))
            .unwrap_err()
            .to_string();
        assert!(error.contains("still holds"), "{error}");
        assert!(started.elapsed() >= Duration::from_millis(600));
        drop(first);
        let again = take(&path, Duration::ZERO);
        assert!(again.is_ok(), "{again:?}");
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_shell_benchmarks_lock_is_the_same_file() {
        // scripts/lib/bench.sh takes this path; a different one would not keep them apart.
        let script = include_str!("../../../scripts/lib/bench.sh");
        assert!(script.contains(&format!("BENCH_LOCK:-{DEFAULT_PATH}")));
    }
}
