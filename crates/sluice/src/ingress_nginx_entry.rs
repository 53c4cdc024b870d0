//! ingress-nginx's chart with Sluice's image as it is: the chart's container args start with
//! its controller's path (`/nginx-ingress-controller`, which its image's entrypoint runs), its
//! preStop hook runs `/wait-shutdown`, and its certificate Jobs pass kube-webhook-certgen's
//! commands to their image's entrypoint. Sluice takes all three:
//!
//! ```text
//!  sluice /nginx-ingress-controller FLAGS…  ─▶ sluice serve --kubernetes FLAGS…
//!  argv[0] …/nginx-ingress-controller       ─▶ sluice serve --kubernetes FLAGS…
//!  argv[0] …/wait-shutdown (a link to sluice in Sluice's images), or sluice /wait-shutdown
//!                                           ─▶ sluice wait-shutdown: SIGTERM to this
//!                                              container's `sluice serve`, then wait for it
//!  sluice create|patch FLAGS…, or argv[0] …/kube-webhook-certgen
//!                                           ─▶ sluice kube-webhook-certgen create|patch FLAGS…
//!                                              (the chart's admission certificate Jobs)
//! ```
//! The controller entry also sets `--healthz-as-ready`: the chart probes `/healthz` for
//! readiness, and ingress-nginx's `/healthz` fails until its first configuration is loaded
//! and while it shuts down.
//! The flags then go through `ingress_nginx_flags` and clap as `serve`'s always do.

use std::ffi::{CStr, OsStr, OsString};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

const CONTROLLER: &str = "nginx-ingress-controller";
const WAIT_SHUTDOWN: &str = "wait-shutdown";
const CERTGEN: &str = "kube-webhook-certgen";

/// `args` (the whole argv) with ingress-nginx's entry points turned into Sluice's commands.
pub(crate) fn rewrite(args: Vec<OsString>) -> Vec<OsString> {
    let named = |arg: Option<&OsString>, name: &str| {
        arg.and_then(|a| Path::new(a).file_name())
            .is_some_and(|file| file == OsStr::new(name))
    };
    let first_is = |name: &str| args.get(1).is_some_and(|a| a == name);
    let program = args.first().cloned().unwrap_or_else(|| "sluice".into());
    let (command, rest) = if named(args.first(), CONTROLLER) {
        (CONTROLLER, &args[1..])
    } else if named(args.first(), WAIT_SHUTDOWN) {
        (WAIT_SHUTDOWN, &args[1..])
    } else if named(args.first(), CERTGEN) {
        (CERTGEN, &args[1..])
    } else if first_is("/nginx-ingress-controller") {
        (CONTROLLER, &args[2..])
    } else if first_is("/wait-shutdown") {
        (WAIT_SHUTDOWN, &args[2..])
    } else if first_is("create") || first_is("patch") {
        // kube-webhook-certgen's commands, as the chart's Jobs pass them to the image's
        // entrypoint (no Sluice command has either name).
        (CERTGEN, &args[1..])
    } else {
        return args;
    };
    let mut rewritten = vec![program];
    match command {
        WAIT_SHUTDOWN | CERTGEN => rewritten.push(command.into()),
        _ => {
            rewritten.push("serve".into());
            if !rest.iter().any(|a| a == "--kubernetes") {
                rewritten.push("--kubernetes".into());
            }
            // The chart probes /healthz for readiness too, as ingress-nginx's /healthz fails
            // until its first configuration and while it shuts down.
            if !rest.iter().any(|a| a == HEALTHZ_AS_READY) {
                rewritten.push(HEALTHZ_AS_READY.into());
            }
        }
    }
    rewritten.extend(rest.iter().cloned());
    rewritten
}

/// `serve`'s flag that makes `/healthz` answer as `/ready`.
const HEALTHZ_AS_READY: &str = "--healthz-as-ready";

/// How often `wait-shutdown` looks whether the server has drained.
const POLL: Duration = Duration::from_millis(50);

/// The name (`/proc/PID/comm`) `wait-shutdown` gives itself, so a draining server finds it.
const WAITER_NAME: &CStr = c"wait-shutdown";
/// The name a server's main thread takes once it has drained, just before it exits.
const DRAINED_NAME: &CStr = c"sluice-drained";
/// How long a drained server waits for the waiters to see it before it exits anyway.
const WAITERS_GRACE: Duration = Duration::from_secs(2);

/// `sluice wait-shutdown`: SIGTERM to every `sluice serve` of this PID namespace (the
/// container's: processes running this same executable, the chart's `/nginx-ingress-controller`
/// form included), then wait until each has drained (or exited), as ingress-nginx's
/// `/wait-shutdown` does for its controller. The kubelet bounds the wait
/// (`terminationGracePeriodSeconds`); Sluice's own drain (`--shutdown-grace-period`,
/// `worker-shutdown-timeout`) runs meanwhile.
///
/// It cannot wait for the server's exit: the server is the container's PID 1, and when PID 1
/// exits the kernel kills the rest of its PID namespace, this process too (the kubelet then
/// reports the hook as failed, exit 137, with a Warning Event on every pod stop). So a drained
/// server names its main thread `sluice-drained` and waits (up to 2 s) until every process
/// named `wait-shutdown` has gone ([`release_waiters`]); this process returns 0 on seeing that
/// name, or the server gone.
pub(crate) fn wait_shutdown() -> ExitCode {
    // As the link's name gives it; `sluice wait-shutdown` would be "sluice".
    let _ = rustix::thread::set_name(WAITER_NAME);
    let servers = servers();
    if servers.is_empty() {
        eprintln!("sluice wait-shutdown: no `sluice serve` runs in this PID namespace");
        return ExitCode::from(1);
    }
    for pid in &servers {
        let Some(target) = rustix::process::Pid::from_raw(*pid) else {
            continue;
        };
        if let Err(error) = rustix::process::kill_process(target, rustix::process::Signal::TERM) {
            eprintln!("sluice wait-shutdown: SIGTERM to process {pid}: {error}");
        }
    }
    while servers
        .iter()
        .any(|pid| alive(*pid) && comm(*pid).as_deref() != DRAINED_NAME.to_str().ok())
    {
        std::thread::sleep(POLL);
    }
    ExitCode::SUCCESS
}

/// Called by `serve` on the main thread once it has drained, before the process exits: names
/// the thread `sluice-drained`, waits `post_shutdown_grace` (ingress-nginx's
/// `--post-shutdown-grace-period`), then until no process of this PID namespace is named
/// `wait-shutdown` (at most 2 s more), so that a preStop hook waiting for this server returns
/// before the container's end kills it.
pub(crate) fn release_waiters(post_shutdown_grace: Duration) {
    let _ = rustix::thread::set_name(DRAINED_NAME);
    std::thread::sleep(post_shutdown_grace);
    let deadline = std::time::Instant::now() + WAITERS_GRACE;
    let own = std::process::id();
    let waiting = || {
        pids()
            .filter(|pid| *pid != own)
            .any(|pid| comm(pid as i32).as_deref() == WAITER_NAME.to_str().ok())
    };
    while waiting() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every process of this PID namespace, by /proc.
fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
}

/// `pid`'s command name (its main thread's; anyone may read it, dumpable or not).
fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|name| name.trim_end().to_owned())
}

/// The processes of this PID namespace that run this executable (or, where that cannot be
/// read, a program named `sluice` or `nginx-ingress-controller`) as a server.
fn servers() -> Vec<i32> {
    let Ok(this) = std::fs::metadata("/proc/self/exe") else {
        return Vec::new();
    };
    let own = std::process::id();
    let mut found = Vec::new();
    for pid in pids() {
        if pid == own {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<OsString> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| OsString::from(String::from_utf8_lossy(a).into_owned()))
            .collect();
        let same_binary = match std::fs::metadata(format!("/proc/{pid}/exe")) {
            Ok(exe) => {
                use std::os::unix::fs::MetadataExt;
                exe.dev() == this.dev() && exe.ino() == this.ino()
            }
            // A process that gained the binary's file capability is not dumpable: its `exe`
            // is root's to read. Its command line still is anyone's.
            Err(_) => (args.first())
                .and_then(|program| Path::new(program).file_name())
                .is_some_and(|name| name == OsStr::new("sluice") || name == OsStr::new(CONTROLLER)),
        };
        if !same_binary {
            continue;
        }
        let args = rewrite(args);
        if args.get(1).is_some_and(|command| command == "serve") {
            if let Ok(pid) = i32::try_from(pid) {
                found.push(pid);
            }
        }
    }
    found
}

/// Whether `pid` still runs (a zombie, exited but not yet reaped, does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_charts_entry_points_become_sluices_commands() {
        // The ingress-nginx chart's args after Sluice's image's entrypoint.
        assert_eq!(
            rewrite(argv(&[
                "/sluice",
                "/nginx-ingress-controller",
                "--ingress-class=nginx"
            ])),
            argv(&[
                "/sluice",
                "serve",
                "--kubernetes",
                "--healthz-as-ready",
                "--ingress-class=nginx"
            ])
        );
        // A link named as ingress-nginx's binary, and one named as its preStop hook.
        assert_eq!(
            rewrite(argv(&[
                "/nginx-ingress-controller",
                "--kubernetes",
                "--v=2"
            ])),
            argv(&[
                "/nginx-ingress-controller",
                "serve",
                "--healthz-as-ready",
                "--kubernetes",
                "--v=2"
            ])
        );
        assert_eq!(
            rewrite(argv(&["/wait-shutdown"])),
            argv(&["/wait-shutdown", "wait-shutdown"])
        );
        assert_eq!(
            rewrite(argv(&["sluice", "/wait-shutdown"])),
            argv(&["sluice", "wait-shutdown"])
        );
        // The certificate Jobs' args, and a link named as kube-webhook-certgen.
        assert_eq!(
            rewrite(argv(&["/sluice", "create", "--host=a,b"])),
            argv(&["/sluice", "kube-webhook-certgen", "create", "--host=a,b"])
        );
        assert_eq!(
            rewrite(argv(&[
                "/kube-webhook-certgen",
                "--log-level=debug",
                "patch"
            ])),
            argv(&[
                "/kube-webhook-certgen",
                "kube-webhook-certgen",
                "--log-level=debug",
                "patch"
            ])
        );
        // Sluice's own commands are left alone.
        let own = argv(&["sluice", "serve", "--kubernetes"]);
        assert_eq!(rewrite(own.clone()), own);
        let other = argv(&["sluice", "nginx-ingress-controller"]);
        assert_eq!(rewrite(other.clone()), other);
    }
}
