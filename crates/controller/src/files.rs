//! `Source::Files`: a YAML file or folder, watched and reloaded whole.
//!
//! ```text
//!  FileSource::open ─▶ FileWatch::start (before anything reads) ─▶ Store::replace_all ─▶ compile
//!  ─▶ open-files limit (its settings) ─▶ Proxy::start ─▶ publish ─▶ loop { changed ─▶ debounce ─▶ reload ─▶ replace_all ─▶ act
//!                                                                       │ an ExternalName resolved ─▶ ControlPlane::resolved }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use model::Compiled;
use providers::{FileSource, FileWatch};
use proxy::Proxy;
use translate::{compile, CompileOptions, Store};

use crate::control::ControlPlane;
use crate::error::Error;
use crate::limits;
use crate::options::Options;
use crate::signals::{Step, Termination};
use crate::start::{announce, runtime};

/// Coalesces the burst of events one save produces (write, chmod, rename) into one reload.
const DEBOUNCE: Duration = Duration::from_millis(20);

/// What a config path holds, compiled once: the Store, the result and the files that could not
/// be read. For one-shot readers (`sluice migrate`, tests) that need no proxy.
pub fn load_files(
    path: &Path,
    options: &CompileOptions,
) -> Result<(Store, Compiled, Vec<String>), Error> {
    let source = FileSource::open(path)?;
    let mut store = Store::default();
    store.replace_all(source.objects());
    let compiled = compile(&store, options);
    Ok((store, compiled, source.errors()))
}

pub(crate) fn run(config: PathBuf, options: &Options) -> Result<(), Error> {
    let mut source = FileSource::open(&config)?;
    // Watch before anything else reads the files, so no edit can fall in between.
    let watch = FileWatch::start(source.root())?;
    let mut store = Store::default();
    store.replace_all(source.objects());
    let compiled = Arc::new(compile(&store, &options.compile));

    let workers = options.workers(compiled.settings.worker_processes);
    limits::open_files(compiled.settings.max_worker_open_files, workers);
    let proxy = Proxy::start(options.proxy_config(workers))?;

    let mut control = ControlPlane::new(
        proxy,
        options.compile.clone(),
        &compiled.settings,
        options.resolver.clone(),
    );
    control.store = store;
    control.report_source_errors(source.errors());
    control.publish(compiled);
    tracing::info!(
        http = %control.proxy.http_addr(),
        https = %control.proxy.https_addr(),
        admin = %control.proxy.admin_addr(),
        status = %control.proxy.status_addr(),
        workers,
        objects = control.store.len(),
        config = %config.display(),
        "serving"
    );
    announce(&control.proxy);

    runtime()?.block_on(async {
        let mut termination = Termination::new(options.shutdown_grace_period)?;
        loop {
            // Read before the select, whose resolution branch borrows `control`.
            let certificate_check_in = control.certificate_check_in();
            tokio::select! {
                _ = watch.changed() => {
                    tokio::time::sleep(DEBOUNCE).await;
                    if source.reload() {
                        control.report_source_errors(source.errors());
                        let changes = control.store.replace_all(source.objects());
                        control.act(changes);
                    }
                }
                resolution = control.next_resolution() => {
                    control.resolved(resolution);
                }
                _ = crate::control::sleep_for(certificate_check_in) => {
                    control.act(translate::ChangeSet { config: true, ..Default::default() });
                }
                step = termination.next() => match step {
                    Step::Grace => control.proxy.terminating(),
                    Step::Stop => break,
                },
            }
        }
        Ok::<(), Error>(())
    })?;
    tracing::info!("shutting down: no new connections; finishing requests in flight");
    control.proxy.shutdown();
    tracing::info!("stopped");
    Ok(())
}
