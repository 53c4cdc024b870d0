//! What both sources do the same way at start: the control plane's runtime and the announce line.

use crate::error::Error;

/// A current-thread runtime for the control plane.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "starting the control plane's runtime",
            source,
        })
}

/// The stable line on stdout for scripts and tests that start Sluice on port 0.
pub(crate) fn announce(proxy: &proxy::Proxy) {
    println!(
        "sluice serve: listening http={} https={} admin={} status={}",
        proxy.http_addr(),
        proxy.https_addr(),
        proxy.admin_addr(),
        proxy.status_addr()
    );
}
