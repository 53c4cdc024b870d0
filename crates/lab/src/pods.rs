//! The backend "deployment": one process per pod, each on its own loopback IP: `sluice backend`
//! (HTTP/1.1), or scripts/grpc-backend (gRPC: grpc-go's interop TestService) for the gRPC lab.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rustix::process::Signal;

use crate::host::{http_get_ok, wait_until};
use crate::procs::{pinned, Proc};
use crate::systems::System;

/// The port every pod listens on (a Deployment's containerPort).
pub(crate) const POD_PORT: u16 = 8080;

/// How removed pods end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Termination {
    /// SIGTERM: the pod drains, like a deleted pod.
    Graceful,
    /// SIGKILL: a crash.
    Kill,
}

impl Termination {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Termination::Graceful => "graceful",
            Termination::Kill => "kill",
        }
    }
}

/// What a pod runs.
#[derive(Clone, Debug)]
pub(crate) enum PodProgram {
    /// This `sluice` binary's `backend`: HTTP/1.1, ready once `/healthz` answers 200.
    Http(PathBuf),
    /// A grpc-backend binary (scripts/grpc-tools.sh): gRPC over HTTP/2 without TLS, ready once it
    /// accepts connections. It ends on SIGTERM with grpc-go's GracefulStop (GOAWAY, then the calls
    /// in flight finish).
    Grpc(PathBuf),
}

struct Pod {
    addr: SocketAddr,
    proc: Proc,
}

/// The running pods of one run.
pub(crate) struct Deployment {
    program: PodProgram,
    cpus: Option<String>,
    logs: PathBuf,
    /// 127.A.B.0/… : a per-lab subnet, so parallel labs do not collide on port 8080.
    subnet: [u8; 2],
    /// Pods ever started: each new pod gets a new IP, as in a cluster.
    started: u32,
    running: Vec<Pod>,
    terminating: Vec<Proc>,
}

impl Deployment {
    pub(crate) fn new(
        program: PodProgram,
        cpus: Option<String>,
        logs: PathBuf,
        subnet: [u8; 2],
    ) -> Self {
        Deployment {
            program,
            cpus,
            logs,
            subnet,
            started: 0,
            running: Vec::new(),
            terminating: Vec::new(),
        }
    }

    pub(crate) fn endpoints(&self) -> Vec<SocketAddr> {
        self.running.iter().map(|p| p.addr).collect()
    }

    /// The process groups of the running pods (for CPU accounting).
    pub(crate) fn process_groups(&self) -> Vec<i32> {
        self.running.iter().map(|p| p.proc.pgid()).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.running.len()
    }

    /// Starts `n` pods and waits until each is ready.
    pub(crate) fn start_pods(&mut self, n: usize) -> anyhow::Result<()> {
        let mut new = Vec::new();
        for _ in 0..n {
            let k = self.started;
            self.started += 1;
            let octet3 = self.subnet[1].wrapping_add(u8::try_from(k / 250).unwrap_or(0));
            let ip = Ipv4Addr::new(127, self.subnet[0], octet3, u8::try_from(k % 250 + 1)?);
            let addr = SocketAddr::from((ip, POD_PORT));
            let name = format!("pod-{k}");
            let mut cmd = match &self.program {
                PodProgram::Http(exe) => {
                    let mut cmd = pinned(self.cpus.as_deref(), exe);
                    cmd.arg("backend").env("SLUICE_LOG", "warn");
                    cmd
                }
                PodProgram::Grpc(binary) => pinned(self.cpus.as_deref(), binary),
            };
            cmd.arg("--listen")
                .arg(addr.to_string())
                .arg("--name")
                .arg(&name);
            let proc = Proc::spawn(&name, cmd, &self.logs.join(format!("{name}.log")))?;
            new.push(Pod { addr, proc });
        }
        for pod in &mut new {
            let addr = pod.addr;
            let proc = &mut pod.proc;
            wait_until(Duration::from_secs(10), || {
                if let Some(status) = proc.try_wait() {
                    anyhow::bail!("{} exited ({status})", proc.name());
                }
                Ok(match self.program {
                    PodProgram::Http(_) => http_get_ok(addr, "/healthz"),
                    PodProgram::Grpc(_) => {
                        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
                    }
                })
            })
            .with_context(|| format!("waiting for the pod on {addr}"))?;
        }
        self.running.extend(new);
        Ok(())
    }

    /// Scales to `replicas` and publishes the change to `system`; returns how long readying new pods
    /// took. Scale-up publishes once the new pods are healthy; scale-down publishes and signals the
    /// removed pods at the same moment.
    pub(crate) fn scale(
        &mut self,
        replicas: usize,
        system: &mut dyn System,
        termination: Termination,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.reap();
        if replicas > self.running.len() {
            self.start_pods(replicas - self.running.len())?;
            let ready = started.elapsed();
            system.publish(&self.endpoints())?;
            return Ok(ready);
        }
        if replicas < self.running.len() {
            // The newest pods go, as a ReplicaSet scale-down prefers.
            let removed = self.running.split_off(replicas);
            system.publish(&self.endpoints())?;
            for pod in removed {
                match termination {
                    Termination::Graceful => {
                        pod.proc.signal_group(Signal::TERM);
                        self.terminating.push(pod.proc);
                    }
                    Termination::Kill => pod.proc.stop(Duration::ZERO),
                }
            }
        }
        Ok(Duration::ZERO)
    }

    /// Forgets drained pods that have exited.
    fn reap(&mut self) {
        self.terminating.retain_mut(|p| p.try_wait().is_none());
    }

    /// Stops every pod, running or draining.
    pub(crate) fn stop_all(&mut self) {
        for pod in self.running.drain(..) {
            pod.proc.signal_group(Signal::TERM);
            self.terminating.push(pod.proc);
        }
        for proc in self.terminating.drain(..) {
            proc.stop(Duration::from_secs(3));
        }
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.stop_all();
    }
}
