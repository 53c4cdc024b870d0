//! File descriptors: the process limit, each worker's share of it, and telling "this process
//! ran out" apart from "that endpoint failed".
//!
//! ```text
//!  start ─▶ raise_open_files_limit(): soft RLIMIT_NOFILE ─▶ hard (logged with both numbers),
//!           or set_open_files_limit(max-worker-open-files × workers)
//!        ─▶ Proxy::start reads the limit ─▶ derived max-worker-connections per worker
//!  accept / connect fails with EMFILE, ENFILE ─▶ is_exhaustion() ─▶ the proxy's own problem:
//!        accepting pauses, an upstream connect answers 503 without blaming the endpoint
//!  admin thread ─▶ Reserve: a few spare descriptors it gives up to accept a probe when the
//!        process has none left
//! ```
//!
//! Why a derived cap: a container runtime may start us with a soft limit of 1024; without a
//! cap, clients alone can take every descriptor and leave none for upstream connections, the
//! admin server's probes, or the configuration watch.

use std::fs::File;
use std::io;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors left to everything but client and upstream connections: listeners, the admin
/// server and its probes, each runtime's epoll and wake-up descriptors, the configuration
/// watch or the Kubernetes client, logs. ingress-nginx leaves 1024 of the limit aside; small
/// limits get an eighth instead.
const RESERVED_MAX: u64 = 1024;

/// Spare descriptors the admin thread holds (see [`Reserve`]).
const ADMIN_SPARES: usize = 4;

/// What [`raise_open_files_limit`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit (the most the soft one can be raised to without privileges).
    pub hard: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, as nginx's `worker_rlimit_nofile` lets
/// operators do and as every busy proxy needs: container runtimes often start processes with
/// a soft limit of 1024 and a hard one of 2^20 or so. Call it once, before the proxy starts.
pub fn raise_open_files_limit() -> io::Result<OpenFilesLimit> {
    let limit = getrlimit(Resource::Nofile);
    let before = limit.current.unwrap_or(u64::MAX);
    // An unlimited hard limit cannot be the soft one on Linux: the kernel's ceiling is
    // fs.nr_open.
    let hard = match limit.maximum {
        Some(hard) => hard,
        None => std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(before),
    };
    if before >= hard {
        return Ok(OpenFilesLimit {
            before,
            now: before,
            hard,
        });
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: limit.maximum,
        },
    )?;
    Ok(OpenFilesLimit {
        before,
        now: hard,
        hard,
    })
}

/// Sets the soft `RLIMIT_NOFILE` to `target` (`max-worker-open-files` × workers), as nginx's
/// `worker_rlimit_nofile` does per worker process. Above the hard limit the hard one is raised
/// too, which needs `CAP_SYS_RESOURCE`; without it the soft limit goes to the hard one and the
/// error is returned with what was done.
pub fn set_open_files_limit(target: u64) -> Result<OpenFilesLimit, (OpenFilesLimit, io::Error)> {
    let limit = getrlimit(Resource::Nofile);
    let before = limit.current.unwrap_or(u64::MAX);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if target <= hard {
        let set = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(target),
                maximum: limit.maximum,
            },
        );
        let done = OpenFilesLimit {
            before,
            now: target,
            hard,
        };
        return match set {
            Ok(()) => Ok(done),
            Err(e) => Err((
                OpenFilesLimit {
                    now: before,
                    ..done
                },
                e.into(),
            )),
        };
    }
    let both = Rlimit {
        current: Some(target),
        maximum: Some(target),
    };
    match setrlimit(Resource::Nofile, both) {
        Ok(()) => Ok(OpenFilesLimit {
            before,
            now: target,
            hard: target,
        }),
        Err(e) => {
            let fallback = raise_open_files_limit().unwrap_or(OpenFilesLimit {
                before,
                now: before,
                hard,
            });
            Err((fallback, e.into()))
        }
    }
}

/// The current soft `RLIMIT_NOFILE`.
pub(crate) fn open_files_limit() -> u64 {
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// `max-worker-connections: 0`: each worker's share of the descriptors left after the
/// reserve, halved because every client connection may hold an upstream connection too
/// (ingress-nginx takes three quarters of `max-worker-open-files`, but nginx counts upstream
/// connections in `worker_connections`; we count only clients). At least 1.
pub(crate) fn derived_max_connections(open_files: u64, workers: usize) -> usize {
    let reserved = (open_files / 8).min(RESERVED_MAX);
    let share = open_files.saturating_sub(reserved) / workers.max(1) as u64;
    usize::try_from(share / 2).unwrap_or(usize::MAX).max(1)
}

/// The process (EMFILE) or the whole system (ENFILE) is out of file descriptors: nothing
/// to do with the peer.
pub(crate) fn is_exhaustion(error: &io::Error) -> bool {
    let raw = error.raw_os_error();
    raw.is_some()
        && (raw == Some(rustix::io::Errno::MFILE.raw_os_error())
            || raw == Some(rustix::io::Errno::NFILE.raw_os_error()))
}

/// A few open descriptors (of `/dev/null`) the admin thread keeps so that a liveness probe is
/// still accepted when the process has none left: on EMFILE it closes one and accepts again,
/// and takes it back once descriptors are free. The workers' connection cap is the first
/// defence; this covers the rest (a `max-worker-connections` set too high, a large upstream
/// pool).
#[derive(Debug, Default)]
pub(crate) struct Reserve {
    spares: Vec<File>,
}

impl Reserve {
    pub(crate) fn new() -> Reserve {
        let mut reserve = Reserve::default();
        reserve.refill();
        reserve
    }

    /// Closes one spare; `false` when none is left to give.
    pub(crate) fn release_one(&mut self) -> bool {
        self.spares.pop().is_some()
    }

    /// Takes back descriptors given up earlier, as far as there are free ones.
    pub(crate) fn refill(&mut self) {
        while self.spares.len() < ADMIN_SPARES {
            match File::open("/dev/null") {
                Ok(file) => self.spares.push(file),
                Err(_) => return,
            }
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.spares.len() >= ADMIN_SPARES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derived_cap_leaves_room_for_upstreams_and_the_reserve() {
        // A container's default soft limit, one worker: 1024 - 128 reserved, halved.
        assert_eq!(derived_max_connections(1024, 1), 448);
        assert_eq!(derived_max_connections(1024, 2), 224);
        // Large limits reserve 1024 like ingress-nginx.
        assert_eq!(
            derived_max_connections(1 << 20, 4),
            ((1 << 20) - 1024) / 4 / 2
        );
        // Absurdly small limits still accept one connection.
        assert_eq!(derived_max_connections(3, 8), 1);
    }

    #[test]
    fn exhaustion_is_emfile_or_enfile_only() {
        let emfile = io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        let enfile = io::Error::from_raw_os_error(rustix::io::Errno::NFILE.raw_os_error());
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert!(is_exhaustion(&emfile));
        assert!(is_exhaustion(&enfile));
        assert!(!is_exhaustion(&refused));
    }
}
