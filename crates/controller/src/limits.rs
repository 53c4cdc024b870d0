//! Process limits asked for at start-up.

/// A container runtime may start us with a soft limit of 1024 descriptors; every client and
/// upstream connection takes one.
pub(crate) fn raise_open_files_limit() {
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
