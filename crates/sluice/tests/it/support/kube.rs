//! Kubernetes end-to-end fixture: a private kube-apiserver + etcd (scripts/kube-cluster.sh) in a
//! network namespace of the test's own, Sluice in `--kubernetes` mode against it, and backend
//! "pods" on test addresses (198.18.0.0/15) that EndpointSlices may point at.
//!
//! ```text
//!   test thread ── unshare(CLONE_NEWNET) ──▶ its own loopback (lo up, 198.18.x.y/32 added)
//!     │  everything it spawns inherits that namespace:
//!     ├─ etcd :2379/2380 + kube-apiserver :6443   (kube-cluster.sh start; fixed ports never clash)
//!     ├─ sluice serve --kubernetes --kubeconfig DIR/admin.kubeconfig   (ports 0, stderr to DIR)
//!     ├─ sluice backend --listen 198.18.0.n:8080                       (the "pods")
//!     ├─ a watchdog: when the test process is gone, kills whatever is left in the namespace
//!     └─ a current-thread tokio runtime + kube Client: objects written as serde_json values
//! ```
//!
//! No kubelet or controller-manager runs: tests write EndpointSlices by hand, the objects a cluster
//! would produce (see /work/shared/notes/kube-test-env.md).

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ApiResource;
use serde_json::{json, Value};

use super::{eventually, get, temp_dir, Process, Serve, BIN};

/// `spec.controller` of the IngressClasses Sluice implements.
pub(crate) const CONTROLLER: &str = "sluice.dev/ingress-controller";
/// Field manager the fixture writes objects with (server-side apply).
pub(crate) const MANAGER: &str = "sluice-e2e";

/// A private Kubernetes API for one test, in that test's own network namespace.
pub(crate) struct Cluster {
    pub(crate) dir: PathBuf,
    /// Folder with kube-apiserver, etcd and kubectl.
    pub(crate) bin: PathBuf,
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    // Last: dropped after the client, stops the daemons and sweeps the namespace.
    guard: Guard,
}

/// Stops the cluster and everything else left in the namespace, also when the test panics.
struct Guard {
    dir: PathBuf,
    script: PathBuf,
    netns: u64,
    /// The watchdog waits for EOF on this pipe: when the test process dies without dropping us
    /// (SIGKILL, abort), the kernel closes it and the watchdog cleans up on its own.
    watchdog_stdin: Option<ChildStdin>,
    watchdog: Option<Child>,
}

/// `sluice serve --kubernetes` started by [`Cluster::sluice`].
pub(crate) struct KubeSluice {
    pub(crate) serve: Serve,
    /// Sluice's stderr (its log), kept in the cluster folder.
    pub(crate) log: PathBuf,
    pub(crate) identity: String,
}

/// Options for [`Cluster::sluice_with`].
pub(crate) struct SluiceOptions<'a> {
    /// Becomes POD_NAME (the leader-election identity) and names the log file.
    pub(crate) identity: &'a str,
    /// Becomes POD_NAMESPACE (where the Lease lives).
    pub(crate) namespace: &'a str,
    /// Defaults to the admin kubeconfig.
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Flags after the fixture's own.
    pub(crate) extra: &'a [&'a str],
    /// Whether to wait for `/ready` = 200 before returning.
    pub(crate) wait_ready: bool,
    /// SLUICE_LOG for this process; `None`: `$SLUICE_E2E_LOG`, else info.
    pub(crate) log: Option<&'a str>,
    /// More environment variables (the downward API's, as a deployment sets them).
    pub(crate) env: &'a [(&'a str, &'a str)],
}

/// One endpoint of an EndpointSlice and its conditions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Endpoint {
    pub(crate) ip: IpAddr,
    pub(crate) ready: bool,
    pub(crate) serving: bool,
    pub(crate) terminating: bool,
}

impl Endpoint {
    pub(crate) fn ready(ip: IpAddr) -> Endpoint {
        Endpoint {
            ip,
            ready: true,
            serving: true,
            terminating: false,
        }
    }
}

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// The repository's `deploy/` folder.
pub(crate) fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Identity (inode) of the network namespace the calling thread is in.
fn current_netns() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net")
        .expect("/proc/thread-self/ns/net")
        .ino()
}

/// Moves the calling thread (and whatever it spawns from now on) into a new network namespace.
fn enter_new_network_namespace() -> u64 {
    let before = current_netns();
    // rustix deprecated its safe `unshare` because CLONE_FILES can leave other threads holding
    // descriptors this thread no longer shares. CLONE_NEWNET touches no descriptor table: it only
    // gives this thread (and the threads and processes it creates afterwards) a fresh network
    // stack, so the call is sound here.
    #[allow(deprecated)]
    let result = rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNET);
    if let Err(e) = result {
        panic!(
            "unshare(CLONE_NEWNET) failed ({e}): the Kubernetes tests need a network namespace of \
             their own, so they must run as root (or with CAP_SYS_ADMIN)"
        );
    }
    let after = current_netns();
    assert_ne!(
        before, after,
        "unshare did not change the network namespace"
    );
    after
}

fn run(command: &mut Command, what: &str) -> String {
    try_run(command, what).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `command` to completion: its stdout, or a message with everything it printed.
fn try_run(command: &mut Command, what: &str) -> Result<String, String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// SIGKILLs every process in network namespace `netns` but this one and `spare`. We made the
/// namespace, so everything in it is ours.
fn sweep_namespace(netns: u64, spare: Option<u32>) {
    let own = std::process::id().to_string();
    let spare = spare.map(|pid| pid.to_string());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == own || Some(&pid) == spare.as_ref() {
            continue;
        }
        let inode = std::fs::metadata(entry.path().join("ns/net")).map(|m| m.ino());
        if inode.ok() == Some(netns) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The watchdog: waits for EOF on stdin (our drop, or the test process dying), then kills every
/// process left in this network namespace (all of them ours: we made it) except the test process,
/// and stops the cluster. Its own process group, and signals ignored, so a Ctrl-C meant for the
/// test does not stop it before it has cleaned up.
const WATCHDOG: &str = r#"
trap '' INT TERM HUP
read -r _ || true
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  [[ $pid == "$$" || $pid == "$3" ]] && continue
  [[ $p/ns/net -ef /proc/$$/ns/net ]] && kill -KILL "$pid" 2>/dev/null
done
bash "$1" stop "$2" >/dev/null 2>&1
exit 0
"#;

impl Cluster {
    /// Puts the calling thread into a fresh network namespace, brings up its loopback and starts
    /// etcd + kube-apiserver there (~5 s). Panics with the script's output when that fails.
    pub(crate) fn start(test: &str) -> Cluster {
        Cluster::start_with(test, &[])
    }

    /// As [`Cluster::start`], with `env` for `kube-cluster.sh start` (e.g.
    /// `CLUSTER_TRUST_BUNDLES=0`: an API server without that API, as Kubernetes' default).
    pub(crate) fn start_with(test: &str, env: &[(&str, &str)]) -> Cluster {
        let netns = enter_new_network_namespace();
        run(
            Command::new("ip").args(["link", "set", "lo", "up"]),
            "ip link set lo up",
        );
        let dir = temp_dir(&format!("kube-{test}"));
        let script = scripts_dir().join("kube-cluster.sh");
        assert!(script.exists(), "{} not found", script.display());

        let mut watchdog = Command::new("bash")
            .args(["-c", WATCHDOG, "sluice-e2e-watchdog"])
            .arg(&script)
            .arg(&dir)
            .arg(std::process::id().to_string())
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the watchdog (bash)");
        let guard = Guard {
            dir: dir.clone(),
            script: script.clone(),
            netns,
            watchdog_stdin: watchdog.stdin.take(),
            watchdog: Some(watchdog),
        };

        let started = Instant::now();
        let start = || {
            let mut command = Command::new("bash");
            command.arg(&script).arg("start").arg(&dir);
            command.envs(env.iter().copied());
            if let Some(bin) = std::env::var_os("SLUICE_KUBE_BIN") {
                command.arg("--bin").arg(bin);
            }
            try_run(&mut command, "scripts/kube-cluster.sh start")
        };
        if let Err(first) = start() {
            // kube-cluster.sh can take a daemon still being exec'd (its /proc comm not yet
            // `kube-apiserver`) for one that exited, on a busy machine. Clear the namespace and
            // try once more; a second failure is real.
            eprintln!("[{test}] cluster start failed, retrying once:\n{first}");
            let watchdog = guard.watchdog.as_ref().map(Child::id);
            sweep_namespace(netns, watchdog);
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            start().unwrap_or_else(|second| panic!("{second}"));
        }
        eprintln!(
            "[{test}] kube-apiserver ready in {:.1} s ({})",
            started.elapsed().as_secs_f64(),
            dir.display()
        );
        let env = std::fs::read_to_string(dir.join("cluster.env")).expect("DIR/cluster.env");
        let bin = env
            .lines()
            .find_map(|l| l.strip_prefix("BIN="))
            .map(PathBuf::from)
            .expect("BIN= in cluster.env");

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let kubeconfig = dir.join("admin.kubeconfig");
        let client = runtime
            .block_on(async {
                let file = Kubeconfig::read_from(&kubeconfig)?;
                let config =
                    kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                        .await?;
                anyhow::Ok(kube::Client::try_from(config)?)
            })
            .unwrap_or_else(|e| panic!("kube client for {}: {e:#}", kubeconfig.display()));
        Cluster {
            dir,
            bin,
            runtime,
            client,
            guard,
        }
    }

    pub(crate) fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    /// The kubeconfig of the token user RBAC treats as ServiceAccount sluice/sluice.
    pub(crate) fn sluice_kubeconfig(&self) -> PathBuf {
        self.dir.join("sluice.kubeconfig")
    }

    /// A kubeconfig for ServiceAccount `namespace/name` (which must exist): a token from the
    /// TokenRequest API in place of sluice.kubeconfig's.
    pub(crate) fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let token = self.kubectl(&["create", "token", name, "-n", namespace, "--duration", "1h"]);
        let sluice = std::fs::read_to_string(self.sluice_kubeconfig()).unwrap();
        let config: String = (sluice.lines())
            .map(|line| match line.trim_start().strip_prefix("token: ") {
                Some(_) => format!("    token: {}\n", token.trim()),
                None => format!("{line}\n"),
            })
            .collect();
        assert!(
            config.contains(token.trim()),
            "no token line in sluice.kubeconfig"
        );
        let path = self.dir.join(format!("{namespace}-{name}.kubeconfig"));
        std::fs::write(&path, config).unwrap();
        path
    }

    /// Adds `198.18.0.n/32` to this namespace's loopback and returns it.
    pub(crate) fn add_address(&self, n: u8) -> IpAddr {
        let ip = Ipv4Addr::new(198, 18, 0, n);
        self.add_addresses(&[ip]);
        IpAddr::V4(ip)
    }

    /// Adds each address (all in 198.18.0.0/15) as a /32 on this namespace's loopback: a single
    /// `ip -batch`, so thousands cost one process.
    pub(crate) fn add_addresses(&self, ips: &[Ipv4Addr]) {
        // Never outside the namespace we made: the caller must be the test thread (or a thread
        // it spawned after Cluster::start).
        assert_eq!(
            current_netns(),
            self.guard.netns,
            "add_address called from a thread outside the test's network namespace"
        );
        let mut batch = String::new();
        for ip in ips {
            let [a, b, ..] = ip.octets();
            assert!(
                a == 198 && (b == 18 || b == 19),
                "{ip} is not a test address (198.18.0.0/15)"
            );
            batch.push_str(&format!("address add {ip}/32 dev lo\n"));
        }
        let mut child = Command::new("ip")
            .args(["-batch", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ip");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(batch.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "ip address add: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `kubectl --kubeconfig DIR/admin.kubeconfig ARGS`; panics unless it succeeds; its stdout.
    pub(crate) fn kubectl(&self, args: &[&str]) -> String {
        run(
            Command::new(self.bin.join("kubectl"))
                .arg("--kubeconfig")
                .arg(self.admin_kubeconfig())
                .args(args),
            &format!("kubectl {args:?}"),
        )
    }

    /// Installs the Gateway API CRDs of the standard channel ($SLUICE_GATEWAY_CRDS, else what
    /// scripts/gateway-crds.sh caches under ~/.cache/sluice-kube) and waits until the API server
    /// serves them.
    pub(crate) fn install_gateway_crds(&self) {
        self.install_gateway_crds_of("standard");
    }

    /// Installs the Gateway API CRDs of `channel` (`standard` or `experimental`), as
    /// `install_gateway_crds`.
    pub(crate) fn install_gateway_crds_of(&self, channel: &str) {
        let crds = std::env::var("SLUICE_GATEWAY_CRDS").unwrap_or_else(|_| {
            run(
                Command::new("bash").arg(scripts_dir().join("gateway-crds.sh")),
                "scripts/gateway-crds.sh",
            )
        });
        let folder = Path::new(crds.trim()).join(channel);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                let name = path.file_name().unwrap().to_string_lossy();
                // The CRDs only; not the release's admission policy (`*_vap_*`).
                name.starts_with("gateway.networking.k8s.io_") && !name.contains("_vap_")
            })
            .collect();
        files.sort();
        let mut args = vec!["apply", "--server-side"];
        for file in &files {
            args.extend(["-f", file.to_str().unwrap()]);
        }
        self.kubectl(&args);
        self.kubectl(&[
            "wait",
            "--for",
            "condition=Established",
            "--timeout",
            "60s",
            "crd/gatewayclasses.gateway.networking.k8s.io",
            "crd/gateways.gateway.networking.k8s.io",
            "crd/httproutes.gateway.networking.k8s.io",
            "crd/grpcroutes.gateway.networking.k8s.io",
            "crd/tlsroutes.gateway.networking.k8s.io",
            "crd/referencegrants.gateway.networking.k8s.io",
            "crd/listenersets.gateway.networking.k8s.io",
        ]);
    }

    /// Stops kube-apiserver (etcd keeps running).
    pub(crate) fn stop_apiserver(&self) {
        run(
            Command::new("bash")
                .arg(&self.guard.script)
                .arg("stop-apiserver")
                .arg(&self.dir),
            "kube-cluster.sh stop-apiserver",
        );
    }

    /// Starts kube-apiserver again (same certificates and port) and waits for /readyz.
    pub(crate) fn start_apiserver(&self) {
        run(
            Command::new("bash")
                .arg(&self.guard.script)
                .arg("start-apiserver")
                .arg(&self.dir),
            "kube-cluster.sh start-apiserver",
        );
    }

    // --- objects -------------------------------------------------------------------------------

    fn api(&self, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let (resource, namespaced) = api_resource(kind);
        match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &resource),
            (true, None) => panic!("{kind} is namespaced: give a namespace"),
            (false, _) => Api::all_with(self.client.clone(), &resource),
        }
    }

    fn api_for(&self, object: &Value) -> (Api<DynamicObject>, String) {
        let kind = object["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("no kind in {object}"));
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_else(|| panic!("no metadata.name in {object}"));
        (
            self.api(kind, object["metadata"]["namespace"].as_str()),
            name.to_owned(),
        )
    }

    /// POSTs `object`; the API server's error message when it refuses.
    pub(crate) fn try_create(&self, object: &Value) -> Result<Value, String> {
        let (api, _) = self.api_for(object);
        let dynamic: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        self.runtime
            .block_on(api.create(&PostParams::default(), &dynamic))
            .map(|created| serde_json::to_value(created).unwrap())
            .map_err(|e| e.to_string())
    }

    /// POSTs `object` (it must not exist yet).
    pub(crate) fn create(&self, object: &Value) -> Value {
        self.try_create(object)
            .unwrap_or_else(|e| panic!("create {}: {e}", describe(object)))
    }

    /// Creates all `objects`, `concurrency` requests at a time (for thousands of objects).
    pub(crate) fn create_many(&self, objects: Vec<Value>, concurrency: usize) {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        let client = self.client.clone();
        self.runtime
            .block_on(
                stream::iter(objects.into_iter().map(move |object| {
                    let client = client.clone();
                    async move {
                        let kind = object["kind"].as_str().unwrap().to_owned();
                        let (resource, namespaced) = api_resource(&kind);
                        let api: Api<DynamicObject> = if namespaced {
                            let ns = object["metadata"]["namespace"].as_str().unwrap();
                            Api::namespaced_with(client, ns, &resource)
                        } else {
                            Api::all_with(client, &resource)
                        };
                        let dynamic: DynamicObject = serde_json::from_value(object.clone())?;
                        api.create(&PostParams::default(), &dynamic)
                            .await
                            .map_err(|e| anyhow::anyhow!("create {}: {e}", describe(&object)))?;
                        anyhow::Ok(())
                    }
                }))
                .buffer_unordered(concurrency)
                .try_collect::<Vec<()>>(),
            )
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Creates or updates `object` by server-side apply (forcing ownership of its fields): the
    /// fields it names are set, the ones an earlier apply named and this one does not are removed.
    pub(crate) fn apply(&self, object: &Value) -> Value {
        let (api, name) = self.api_for(object);
        let params = PatchParams::apply(MANAGER).force();
        self.runtime
            .block_on(api.patch(&name, &params, &Patch::Apply(object)))
            .map(|applied| serde_json::to_value(applied).unwrap())
            .unwrap_or_else(|e| panic!("apply {}: {e}", describe(object)))
    }

    /// PUTs `object` over the existing one (whose resourceVersion is read first).
    pub(crate) fn replace(&self, object: &Value) -> Value {
        let (api, name) = self.api_for(object);
        self.runtime
            .block_on(async {
                let current = api.get(&name).await?;
                let mut dynamic: DynamicObject = serde_json::from_value(object.clone()).unwrap();
                dynamic.metadata.resource_version = current.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &dynamic).await
            })
            .map(|replaced| serde_json::to_value(replaced).unwrap())
            .unwrap_or_else(|e| panic!("replace {}: {e}", describe(object)))
    }

    /// A JSON merge patch of `kind` `namespace`/`name`.
    pub(crate) fn merge_patch(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Value {
        self.merge_patch_of(kind, (namespace, name), patch, false)
    }

    /// A JSON merge patch of the status subresource of `kind` `namespace`/`name` (what a
    /// kubelet or node controller writes: a pod's phase and conditions, a node's addresses).
    pub(crate) fn merge_patch_status(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Value {
        self.merge_patch_of(kind, (namespace, name), patch, true)
    }

    fn merge_patch_of(
        &self,
        kind: &str,
        (namespace, name): (&str, &str),
        patch: &Value,
        status: bool,
    ) -> Value {
        let api = self.api(kind, Some(namespace).filter(|ns| !ns.is_empty()));
        let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
        let patched = if status {
            self.runtime
                .block_on(api.patch_status(name, &params, &patch))
        } else {
            self.runtime.block_on(api.patch(name, &params, &patch))
        };
        let what = if status { "status of " } else { "" };
        patched
            .map(|patched| serde_json::to_value(patched).unwrap())
            .unwrap_or_else(|e| panic!("merge patch {what}{kind} {namespace}/{name}: {e}"))
    }

    pub(crate) fn delete(&self, kind: &str, namespace: &str, name: &str) {
        let api = self.api(kind, Some(namespace).filter(|ns| !ns.is_empty()));
        self.runtime
            .block_on(api.delete(name, &DeleteParams::default()))
            .unwrap_or_else(|e| panic!("delete {kind} {namespace}/{name}: {e}"));
    }

    /// The object, or None when it does not exist. `namespace` "" for cluster-scoped kinds.
    pub(crate) fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let api = self.api(kind, Some(namespace).filter(|ns| !ns.is_empty()));
        self.runtime
            .block_on(api.get_opt(name))
            .unwrap_or_else(|e| panic!("get {kind} {namespace}/{name}: {e}"))
            .map(|object| serde_json::to_value(object).unwrap())
    }

    /// Every `kind` in `namespace` ("" for cluster-scoped kinds).
    pub(crate) fn list(&self, kind: &str, namespace: &str) -> Vec<Value> {
        let api = self.api(kind, Some(namespace).filter(|ns| !ns.is_empty()));
        self.runtime
            .block_on(api.list(&ListParams::default()))
            .unwrap_or_else(|e| panic!("list {kind} in {namespace:?}: {e}"))
            .items
            .into_iter()
            .map(|object| serde_json::to_value(object).unwrap())
            .collect()
    }

    /// Events (events.k8s.io/v1) in `namespace` about `kind` `name`.
    pub(crate) fn events_about(&self, namespace: &str, kind: &str, name: &str) -> Vec<Value> {
        self.list("Event", namespace)
            .into_iter()
            .filter(|e| e["regarding"]["kind"] == kind && e["regarding"]["name"] == name)
            .collect()
    }

    /// Writes `object` straight into etcd, at the key the API server keeps `resource` objects
    /// under (`/registry/RESOURCE/NAMESPACE/NAME`), skipping admission and validation: what an
    /// object stored before the API server validated that field looks like, or one written by
    /// anything with etcd access. The API server's own watch on etcd then delivers it to every
    /// watcher like any other change. Returns once the API serves it.
    pub(crate) fn put_bypassing_validation(&self, resource: &str, kind: &str, object: &Value) {
        use base64::Engine;
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        let (namespace, name) = (
            object["metadata"]["namespace"].as_str().unwrap(),
            object["metadata"]["name"].as_str().unwrap(),
        );
        let env = std::fs::read_to_string(self.dir.join("cluster.env")).unwrap();
        let port = env
            .lines()
            .find_map(|l| l.strip_prefix("ETCD_CLIENT_PORT="))
            .unwrap_or("2379");
        let key = format!("/registry/{resource}/{namespace}/{name}");
        let request =
            json!({"key": b64(key.as_bytes()), "value": b64(object.to_string().as_bytes())});
        // etcd's gRPC gateway (JSON over HTTP); curl is what scripts/test.sh installs anyway.
        run(
            Command::new("curl").args([
                "-sSf",
                "--max-time",
                "10",
                "-X",
                "POST",
                &format!("http://127.0.0.1:{port}/v3/kv/put"),
                "-d",
                &request.to_string(),
            ]),
            "curl etcd /v3/kv/put",
        );
        eventually(
            Duration::from_secs(20),
            &format!("{kind} {namespace}/{name} written to etcd is served by the API"),
            || self.get(kind, namespace, name),
        );
    }

    /// Service `name` (port `http` 80) + one EndpointSlice `name-1` with `endpoints`, all
    /// ready, on port `http` `port`.
    pub(crate) fn create_service(&self, ns: &str, name: &str, port: u16, endpoints: &[IpAddr]) {
        let endpoints: Vec<Endpoint> = endpoints.iter().copied().map(Endpoint::ready).collect();
        self.create(&service(ns, name));
        self.create(&endpoint_slice(
            ns,
            &format!("{name}-1"),
            name,
            port,
            &endpoints,
        ));
    }

    /// [`Cluster::create_service`] + Ingress `name` (class `sluice`) routing `host` `/` to it.
    pub(crate) fn create_app(
        &self,
        ns: &str,
        name: &str,
        host: &str,
        port: u16,
        endpoints: &[IpAddr],
    ) {
        self.create_service(ns, name, port, endpoints);
        self.create(&ingress(ns, name, Some("sluice"), host, name));
    }

    // --- sluice --------------------------------------------------------------------------------

    /// `sluice serve --kubernetes` with the admin kubeconfig, identity `sluice-0`, POD_NAMESPACE
    /// and `--configmap` in `namespace`, leader election `sluice-e2e`; waits for `/ready`.
    pub(crate) fn sluice(&self, namespace: &str, extra: &[&str]) -> KubeSluice {
        self.sluice_with(SluiceOptions {
            identity: "sluice-0",
            namespace,
            kubeconfig: None,
            extra,
            wait_ready: true,
            log: None,
            env: &[],
        })
    }

    /// `sluice serve --kubernetes --kubeconfig … --http-listen 127.0.0.1:0 --https-listen
    /// 127.0.0.1:0 --admin-listen 127.0.0.1:0 --status-listen 127.0.0.1:0 --workers 1 [--configmap NS/sluice
    /// --election-id sluice-e2e unless in extra] EXTRA` with POD_NAME and POD_NAMESPACE set.
    /// Sluice as deployed: the deploy manifests applied, then Sluice as their ServiceAccount
    /// sluice/sluice (their RBAC), with their ConfigMap and Lease name, and `extra` flags.
    /// Ready when it returns.
    pub(crate) fn sluice_as_deployed(&self, identity: &str, extra: &[&str]) -> KubeSluice {
        let manifests = deploy_dir().join("manifests");
        self.kubectl(&["apply", "-f", manifests.to_str().unwrap()]);
        let flags = [
            "--configmap",
            "sluice/sluice",
            "--election-id",
            "sluice-leader",
        ];
        let extra: Vec<&str> = flags.iter().chain(extra).copied().collect();
        self.sluice_with(SluiceOptions {
            identity,
            namespace: "sluice",
            kubeconfig: Some(self.sluice_kubeconfig()),
            extra: &extra,
            wait_ready: true,
            log: None,
            env: &[],
        })
    }

    pub(crate) fn sluice_with(&self, options: SluiceOptions<'_>) -> KubeSluice {
        let kubeconfig = options
            .kubeconfig
            .unwrap_or_else(|| self.admin_kubeconfig());
        let log = self.dir.join(format!("sluice-{}.log", options.identity));
        let configmap = format!("{}/sluice", options.namespace);
        let mut args: Vec<&str> = vec![
            "serve",
            "--kubernetes",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ];
        args.extend(super::LOOPBACK_LISTENERS);
        args.extend(["--workers", "1"]);
        if !options.extra.contains(&"--configmap") {
            args.extend(["--configmap", &configmap]);
        }
        if !options.extra.contains(&"--election-id") {
            args.extend(["--election-id", "sluice-e2e"]);
        }
        // The tests that stop a replica time its exit; Kubernetes mode's 5 s default grace is
        // for kube-proxy and load balancers, which these tests do not have.
        if !(options.extra.iter()).any(|a| a.starts_with("--shutdown-grace-period")) {
            args.extend(["--shutdown-grace-period", "0"]);
        }
        args.extend_from_slice(options.extra);
        let mut command = Command::new(BIN);
        command
            .args(&args)
            .env(
                "SLUICE_LOG",
                options.log.map(str::to_owned).unwrap_or_else(|| {
                    std::env::var("SLUICE_E2E_LOG").unwrap_or_else(|_| "info".to_owned())
                }),
            )
            .env("POD_NAME", options.identity)
            .env("POD_NAMESPACE", options.namespace)
            .envs(options.env.iter().copied())
            .env_remove("KUBECONFIG")
            .stderr(File::create(&log).unwrap());
        let what = format!("sluice {}", args.join(" "));
        let process = Process::try_spawn(command, &what).unwrap_or_else(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("{e}; its log:\n{log}")
        });
        let sluice = KubeSluice {
            serve: Serve::from_process(process),
            log,
            identity: options.identity.to_owned(),
        };
        if options.wait_ready {
            sluice.wait_ready(Duration::from_secs(60));
        }
        sluice
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // EOF: the watchdog sweeps whatever is left in the namespace, then exits.
        drop(self.watchdog_stdin.take());
        if let Some(mut watchdog) = self.watchdog.take() {
            let deadline = Instant::now() + Duration::from_secs(30);
            while matches!(watchdog.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        // SLUICE_KEEP_CLUSTER=1 keeps it after a pass too (a benchmark's Sluice logs).
        if std::thread::panicking() || std::env::var_os("SLUICE_KEEP_CLUSTER").is_some() {
            eprintln!(
                "kept the cluster folder for inspection: {} (apiserver.log, sluice-*.log)",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl std::ops::Deref for KubeSluice {
    type Target = Serve;

    fn deref(&self) -> &Serve {
        &self.serve
    }
}

impl std::ops::DerefMut for KubeSluice {
    fn deref_mut(&mut self) -> &mut Serve {
        &mut self.serve
    }
}

impl Drop for KubeSluice {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of {} ({}):\n{}",
                self.log.display(),
                self.identity,
                self.log_tail(40)
            );
        }
    }
}

impl KubeSluice {
    /// Waits (bounded) for `/ready` = 200; the log tail in the message otherwise.
    pub(crate) fn wait_ready(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.ready_status() == Some(200) {
                return;
            }
            if self.has_exited() {
                panic!(
                    "sluice {} exited before it was ready:\n{}",
                    self.identity,
                    self.log_tail(40)
                );
            }
            assert!(
                Instant::now() < deadline,
                "sluice {} not ready within {limit:?} (last /ready: {:?}):\n{}",
                self.identity,
                self.ready_status(),
                self.log_tail(40)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn ready_status(&self) -> Option<u16> {
        get(self.serve.admin, "admin", "/ready")
            .ok()
            .map(|r| r.status)
    }

    /// Whether the process has exited (a zombie not yet reaped counts as exited).
    pub(crate) fn has_exited(&self) -> bool {
        let pid = self.serve.process.pid();
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z')),
            Err(_) => true,
        }
    }

    /// Status of `GET path` with `Host: host`, None when the request failed.
    pub(crate) fn status(&self, host: &str, path: &str) -> Option<u16> {
        get(self.serve.http, host, path).ok().map(|r| r.status)
    }

    /// The whole log so far.
    pub(crate) fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// Panics with the lines of the log that say the API server refused a request (RBAC's
    /// "forbidden"): a Sluice as deployed must be granted everything it does.
    pub(crate) fn assert_nothing_forbidden(&self) {
        let log = self.log_text();
        let refused: Vec<&str> = (log.lines())
            .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
            .collect();
        assert!(
            refused.is_empty(),
            "{} refused by RBAC:\n{}",
            self.identity,
            refused.join("\n")
        );
    }

    pub(crate) fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits until `GET /` for `host` is answered by backend `pod` (its name in the body).
    pub(crate) fn wait_served_by(&self, host: &str, pod: &str, limit: Duration) {
        let needle = format!("Server name: {pod}\n");
        eventually(limit, &format!("{host} answered by {pod}"), || {
            let response = get(self.serve.http, host, "/").ok()?;
            (response.status == 200 && response.text().contains(&needle)).then_some(())
        });
    }

    pub(crate) fn wait_status(&self, host: &str, status: u16, limit: Duration) {
        eventually(limit, &format!("{host} answers {status}"), || {
            (self.status(host, "/") == Some(status)).then_some(())
        });
    }
}

// --- object builders ---------------------------------------------------------------------------

fn api_resource(kind: &str) -> (ApiResource, bool) {
    use k8s_openapi::api::{
        admissionregistration, certificates, coordination, core, discovery, events, networking,
        rbac,
    };
    match kind {
        "Namespace" => (ApiResource::erase::<core::v1::Namespace>(&()), false),
        "Node" => (ApiResource::erase::<core::v1::Node>(&()), false),
        "Pod" => (ApiResource::erase::<core::v1::Pod>(&()), true),
        "ServiceAccount" => (ApiResource::erase::<core::v1::ServiceAccount>(&()), true),
        "Service" => (ApiResource::erase::<core::v1::Service>(&()), true),
        "Secret" => (ApiResource::erase::<core::v1::Secret>(&()), true),
        "ConfigMap" => (ApiResource::erase::<core::v1::ConfigMap>(&()), true),
        "EndpointSlice" => (
            ApiResource::erase::<discovery::v1::EndpointSlice>(&()),
            true,
        ),
        "Ingress" => (ApiResource::erase::<networking::v1::Ingress>(&()), true),
        "IngressClass" => (
            ApiResource::erase::<networking::v1::IngressClass>(&()),
            false,
        ),
        "Lease" => (ApiResource::erase::<coordination::v1::Lease>(&()), true),
        "Role" => (ApiResource::erase::<rbac::v1::Role>(&()), true),
        "Event" => (ApiResource::erase::<events::v1::Event>(&()), true),
        "ValidatingWebhookConfiguration" => (
            ApiResource::erase::<admissionregistration::v1::ValidatingWebhookConfiguration>(&()),
            false,
        ),
        "ClusterTrustBundle" => (
            ApiResource::erase::<certificates::v1beta1::ClusterTrustBundle>(&()),
            false,
        ),
        "GatewayClass" => (gateway_api("GatewayClass", "gatewayclasses"), false),
        "Gateway" => (gateway_api("Gateway", "gateways"), true),
        "HTTPRoute" => (gateway_api("HTTPRoute", "httproutes"), true),
        "GRPCRoute" => (gateway_api("GRPCRoute", "grpcroutes"), true),
        "TLSRoute" => (gateway_api("TLSRoute", "tlsroutes"), true),
        "TCPRoute" => (gateway_api("TCPRoute", "tcproutes"), true),
        "ReferenceGrant" => (gateway_api("ReferenceGrant", "referencegrants"), true),
        "BackendTLSPolicy" => (gateway_api("BackendTLSPolicy", "backendtlspolicies"), true),
        "ListenerSet" => (gateway_api("ListenerSet", "listenersets"), true),
        other => panic!("the fixture does not know kind {other}"),
    }
}

/// A Gateway API kind (`gateway.networking.k8s.io/v1`; its CRDs: `install_gateway_crds`).
fn gateway_api(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["namespace"].as_str().unwrap_or(""),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

pub(crate) fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

pub(crate) fn ingress_class(name: &str, controller: &str) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
        "metadata": {"name": name},
        "spec": {"controller": controller},
    })
}

/// Service with one port, `http` 80.
pub(crate) fn service(ns: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    })
}

/// EndpointSlice of Service `service`, port `http` = `port`.
pub(crate) fn endpoint_slice(
    ns: &str,
    name: &str,
    service: &str,
    port: u16,
    endpoints: &[Endpoint],
) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|e| {
            json!({
                "addresses": [e.ip.to_string()],
                "conditions": {"ready": e.ready, "serving": e.serving, "terminating": e.terminating},
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": name, "namespace": ns,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
}

/// Ingress routing `host` `/` (Prefix) to Service `service` port `http`.
pub(crate) fn ingress(
    ns: &str,
    name: &str,
    class: Option<&str>,
    host: &str,
    service: &str,
) -> Value {
    let mut object = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"rules": [{"host": host, "http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": service, "port": {"name": "http"}}},
        }]}}]},
    });
    if let Some(class) = class {
        object["spec"]["ingressClassName"] = json!(class);
    }
    object
}

/// `kubernetes.io/tls` Secret.
pub(crate) fn tls_secret(ns: &str, name: &str, cert_pem: &str, key_pem: &str) -> Value {
    use base64::Engine;
    let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": ns},
        "data": {"tls.crt": encode(cert_pem), "tls.key": encode(key_pem)},
    })
}

pub(crate) fn config_map(ns: &str, name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": data,
    })
}

/// `ip:port` of a pod.
pub(crate) fn socket(ip: IpAddr, port: u16) -> String {
    SocketAddr::new(ip, port).to_string()
}
