//! A child process a test talks to: started, its first stdout line awaited (bounded), the rest of
//! its stdout drained so it never blocks on a full pipe, and killed when the test is done.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// How long a process may take to print its first line (a debug build starting on a busy box).
const FIRST_LINE: Duration = Duration::from_secs(30);

/// A running child process, killed on drop unless it already exited.
pub struct Process {
    pub child: Child,
    /// The first line it printed (where servers say what they bound).
    pub stdout_line: String,
    /// [`Process::spawn_unread`]: the rest of stdout, held open and never read.
    pub unread: Option<BufReader<ChildStdout>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Process {
    /// Spawns `command` (stdin and stdout are taken over here; stderr is the caller's choice) and
    /// waits (bounded) for its first stdout line.
    pub fn spawn(command: Command, what: &str) -> Process {
        Process::try_spawn(command, what).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Process::spawn`], but a process that exits or stays silent is an error, not a panic
    /// (so the caller can add what it knows, e.g. the log), and is reaped.
    pub fn try_spawn(command: Command, what: &str) -> Result<Process, String> {
        Process::start(command, what, true)
    }

    /// As [`Process::spawn`], but after the first line nobody reads stdout (the pipe stays open
    /// and fills up): a stuck log consumer.
    pub fn spawn_unread(command: Command, what: &str) -> Process {
        Process::start(command, what, false).unwrap_or_else(|e| panic!("{e}"))
    }

    fn start(mut command: Command, what: &str, drain: bool) -> Result<Process, String> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {what}: {e}"))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            if !matches!(reader.read_line(&mut line), Ok(1..)) {
                return;
            }
            let line = line.trim_end().to_owned();
            if drain {
                let _ = sender.send((line, None));
                for _ in reader.lines() {}
            } else {
                let _ = sender.send((line, Some(reader)));
            }
        });
        match receiver.recv_timeout(FIRST_LINE) {
            Ok((stdout_line, unread)) => Ok(Process {
                child,
                stdout_line,
                unread,
            }),
            Err(error) => {
                let _ = child.kill();
                let status = child.wait();
                let why = match error {
                    RecvTimeoutError::Timeout => "printed nothing within 30 s",
                    RecvTimeoutError::Disconnected => "closed its stdout",
                };
                Err(format!("{what} {why} ({status:?})"))
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (a name such as `TERM` or `HUP`) with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// Waits (bounded) for the process to exit and returns its exit code (-1 for a signal).
    pub fn wait_exit(&mut self, limit: Duration) -> i32 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "process did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    }

    #[test]
    fn the_first_line_is_kept_and_a_silent_exit_is_an_error() {
        let mut process = Process::spawn(shell("echo listening on 1; echo more; exit 3"), "sh");
        assert_eq!(process.stdout_line, "listening on 1");
        assert_eq!(process.wait_exit(Duration::from_secs(10)), 3);
        let error = Process::try_spawn(shell("exit 0"), "silent").err().unwrap();
        assert!(error.starts_with("silent closed its stdout"), "{error}");
    }
}
