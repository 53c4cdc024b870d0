//! Ports Gateway listeners declare beyond Sluice's own two (`model::sites::DeclaredPort`):
//! bound on `--http-listen`'s address at the declared number, one SO_REUSEPORT socket per
//! worker, the way TCP service ports are (`stream`).
//!
//! ```text
//!  publish(config) ─▶ apply: port added ─▶ bind ×workers ─▶ ListenerChange::OpenDeclared
//!                           (accept ─▶ front_door::serve as that listener: plain or TLS,
//!                            its bit of model::routes::Listeners, its declared port)
//!                     port gone or changed ─▶ ListenerChange::Close (open connections stay)
//!                     bind failed ─▶ logged, shown on /config, tried again at each publish and
//!                                    every port_retry_interval (`ports`) until it binds
//! ```

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use model::sites::DeclaredPort;
use model::Compiled;
use tokio::sync::mpsc;

use crate::listen::{NotOpen, Why};
use crate::stream::ListenerChange;

/// The control plane's side: which declared ports are bound.
pub(crate) struct DeclaredListeners {
    ip: IpAddr,
    /// Sluice's own HTTP and HTTPS ports as bound: binding one again (SO_REUSEPORT) would
    /// share its connections.
    own: [(u16, &'static str); 2],
    workers: Vec<mpsc::UnboundedSender<ListenerChange>>,
    open: BTreeMap<u16, DeclaredPort>,
    failed: BTreeMap<u16, Why>,
}

impl DeclaredListeners {
    pub(crate) fn new(
        ip: IpAddr,
        own: [(u16, &'static str); 2],
        workers: Vec<mpsc::UnboundedSender<ListenerChange>>,
    ) -> Self {
        DeclaredListeners {
            ip,
            own,
            workers,
            open: BTreeMap::new(),
            failed: BTreeMap::new(),
        }
    }

    /// Opens the ports `config` declares and closes the ones it no longer does (or declares
    /// differently). Returns the ports that could not be bound, with why.
    pub(crate) fn apply(&mut self, config: &Compiled) -> Vec<NotOpen> {
        let wanted = &config.declared_ports;
        let gone: Vec<u16> = (self.open.iter())
            .filter(|(port, open)| wanted.get(port) != Some(open))
            .map(|(port, _)| *port)
            .collect();
        for port in gone {
            for worker in &self.workers {
                let _ = worker.send(ListenerChange::Close { port });
            }
            self.open.remove(&port);
            tracing::info!(port, "Gateway listener port closed");
        }
        self.failed.retain(|port, _| wanted.contains_key(port));
        for (port, declared) in wanted {
            if self.open.contains_key(port) {
                continue;
            }
            let conflict = if let Some((_, listener)) = self.own.iter().find(|(own, _)| own == port)
            {
                Some(format!("it is the {listener}'s port"))
            } else if (config.stream_ports(model::streams::StreamProtocol::Tcp)).contains_key(port)
            {
                Some("it is a TCP service's port (--tcp-services-configmap)".to_owned())
            } else {
                None
            };
            let bound = match conflict {
                Some(conflict) => Err(Why::conflict(conflict)),
                None => crate::listen::bind_reuseport(
                    "Gateway listener",
                    "a Gateway's listener port",
                    SocketAddr::new(self.ip, *port),
                    self.workers.len(),
                )
                .map_err(|e| Why::bind_failed(crate::error::Chain(&e).to_string())),
            };
            match bound {
                Ok(bound) => {
                    for (worker, socket) in self.workers.iter().zip(bound.sockets) {
                        let _ = worker.send(ListenerChange::OpenDeclared {
                            port: *port,
                            declared: *declared,
                            socket,
                        });
                    }
                    self.open.insert(*port, *declared);
                    self.failed.remove(port);
                    tracing::info!(port, tls = declared.tls, "Gateway listener port open");
                }
                Err(why) => {
                    if self.failed.get(port) != Some(&why) {
                        let text = &why.text;
                        if why.retried {
                            tracing::warn!(
                                port,
                                "Gateway listener port not opened: {text}; tried again every few \
                                 seconds and at each configuration change"
                            );
                        } else {
                            tracing::warn!(
                                port,
                                "Gateway listener port not opened: {text}; the configuration \
                                 must change (a Gateway's listener port or the other use)"
                            );
                        }
                    }
                    self.failed.insert(*port, why);
                }
            }
        }
        (self.failed.iter())
            .map(|(port, why)| NotOpen {
                port: format!("Gateway listener port {port}"),
                why: why.clone(),
            })
            .collect()
    }
}
