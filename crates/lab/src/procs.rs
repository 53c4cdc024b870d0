//! Every process the lab starts, and the guarantee that it is stopped again.
//!
//! Each child gets its own process group (its PID), so signalling the group also reaches what it
//! forked (nginx's workers). Live groups are recorded in one registry: dropping a [`Proc`] kills its
//! group, and a SIGINT/SIGTERM to the lab kills every recorded group before exiting. Nothing is
//! ever stopped by name.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rustix::process::{kill_process, kill_process_group, Pid, Signal};

/// Process groups started and not yet known to be gone.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
/// A working directory to remove when interrupted.
static SCRATCH: Mutex<Option<PathBuf>> = Mutex::new(None);
/// Set (under the `LIVE` lock) once the lab is being interrupted: nothing new may start after.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// A child process (and its process group) owned by the lab.
pub(crate) struct Proc {
    name: String,
    child: Child,
    pgid: i32,
    reaped: bool,
}

impl Proc {
    /// Starts `cmd` in its own process group, stdout and stderr appended to `log`.
    pub(crate) fn spawn(name: &str, mut cmd: Command, log: &Path) -> anyhow::Result<Proc> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        cmd.process_group(0)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // Register under the lock, so a signal handler never misses a child that exists.
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if STOPPING.load(Ordering::SeqCst) {
            anyhow::bail!("not starting {name}: the lab is stopping");
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        let pgid = i32::try_from(child.id()).context("pid out of range")?;
        live.insert(pgid);
        Ok(Proc {
            name: name.to_owned(),
            child,
            pgid,
            reaped: false,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its process group id (the leader's pid): every process it forked, unless one moved out.
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Signals only the leader (nginx's master: SIGHUP reloads).
    pub(crate) fn signal_leader(&self, signal: Signal) -> anyhow::Result<()> {
        let pid = Pid::from_raw(self.pgid).context("bad pid")?;
        kill_process(pid, signal).with_context(|| format!("signalling {}", self.name))
    }

    /// Signals the whole group; a group that is already gone is not an error.
    pub(crate) fn signal_group(&self, signal: Signal) {
        signal_group(self.pgid, signal);
    }

    /// The exit status if the leader has exited.
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.reaped = true;
                Some(status)
            }
            _ => None,
        }
    }

    /// Waits up to `limit` for the leader to exit.
    pub(crate) fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL; the group is gone afterwards.
    pub(crate) fn stop(mut self, grace: Duration) {
        self.terminate(grace);
    }

    fn terminate(&mut self, grace: Duration) {
        if !self.reaped {
            self.signal_group(Signal::TERM);
            self.wait_for(grace);
        }
        // Also reaches children that outlive their leader.
        self.signal_group(Signal::KILL);
        if !self.reaped {
            let _ = self.child.wait();
            self.reaped = true;
        }
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.pgid);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if LIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&self.pgid)
        {
            self.terminate(Duration::ZERO);
        }
    }
}

fn signal_group(pgid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pgid) {
        let _ = kill_process_group(pid, signal);
    }
}

/// Kills every recorded group (used on Ctrl-C): SIGTERM, a short grace, SIGKILL. No process can
/// be started afterwards.
pub(crate) fn kill_all() {
    let groups: Vec<i32> = {
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        STOPPING.store(true, Ordering::SeqCst);
        live.iter().copied().collect()
    };
    for &pgid in &groups {
        signal_group(pgid, Signal::TERM);
    }
    if !groups.is_empty() {
        std::thread::sleep(Duration::from_millis(500));
    }
    for &pgid in &groups {
        signal_group(pgid, Signal::KILL);
    }
}

/// True once the lab is being interrupted.
pub(crate) fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// Parks the calling thread for good once interrupted: the signal thread is cleaning up and exits.
pub(crate) fn park_if_stopping() {
    while stopping() {
        std::thread::park();
    }
}

/// Removes `dir` too if the lab is interrupted.
pub(crate) fn remove_on_interrupt(dir: Option<PathBuf>) {
    *SCRATCH.lock().unwrap_or_else(|e| e.into_inner()) = dir;
}

/// On SIGINT or SIGTERM: stop every process the lab started, then exit 130.
pub(crate) fn install_signal_handler() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // Registered here, before any child exists, so no signal is missed.
    let (mut int, mut term) = runtime.block_on(async {
        Ok::<_, std::io::Error>((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("lab-signals".into())
        .spawn(move || {
            runtime.block_on(async {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            });
            eprintln!("\nsluice lab: interrupted, stopping every process it started");
            kill_all();
            let scratch = SCRATCH.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(dir) = scratch {
                let _ = std::fs::remove_dir_all(dir);
            }
            std::process::exit(130);
        })?;
    Ok(())
}

/// `program` pinned to `cpus` with taskset when pinning is on.
pub(crate) fn pinned(cpus: Option<&str>, program: &Path) -> Command {
    match cpus {
        Some(cpus) => {
            let mut cmd = Command::new("taskset");
            cmd.arg("-c").arg(cpus).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}
