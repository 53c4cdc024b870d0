//! Process limits asked for at start-up, from the ConfigMap read then.
//!
//! ```text
//!  max-worker-open-files 0 (default) ─▶ soft RLIMIT_NOFILE raised to the hard limit
//!  max-worker-open-files N           ─▶ soft RLIMIT_NOFILE = N × workers (hard raised too when
//!                                       N × workers is above it and the process may)
//! ```
//! A container runtime may start us with a soft limit of 1024 descriptors; every client and
//! upstream connection takes one. nginx's `worker_rlimit_nofile` is per worker process;
//! Sluice's workers are threads sharing one process's table, so the process asks for the sum.

use std::num::NonZeroUsize;

pub(crate) fn open_files(max_worker_open_files: u64, workers: NonZeroUsize) {
    if max_worker_open_files > 0 {
        let target = max_worker_open_files.saturating_mul(workers.get() as u64);
        match proxy::set_open_files_limit(target) {
            Ok(limit) => tracing::info!(
                before = limit.before,
                now = limit.now,
                hard = limit.hard,
                "set the open-files limit (RLIMIT_NOFILE) to max-worker-open-files {} × {} workers",
                max_worker_open_files,
                workers
            ),
            Err((limit, e)) => tracing::warn!(
                error = %e,
                now = limit.now,
                "cannot set the open-files limit (RLIMIT_NOFILE) to max-worker-open-files {} × {} \
                 workers = {target}; it is {} (raising the hard limit needs CAP_SYS_RESOURCE)",
                max_worker_open_files,
                workers,
                limit.now
            ),
        }
        return;
    }
    match proxy::raise_open_files_limit() {
        Ok(limit) if limit.now > limit.before => tracing::info!(
            before = limit.before,
            now = limit.now,
            hard = limit.hard,
            "raised the open-files limit (RLIMIT_NOFILE) from {} to the hard limit {}",
            limit.before,
            limit.hard
        ),
        Ok(limit) => tracing::info!(
            soft = limit.now,
            hard = limit.hard,
            "the open-files limit (RLIMIT_NOFILE) is already at the hard limit"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit (RLIMIT_NOFILE)"),
    }
}
