//! Services of type ExternalName end to end: `sluice serve` resolves their names with a real
//! name server (dnsmasq from Debian's dnsmasq-base, on 127.0.0.1, answering only for `.test`
//! names from a hosts file the test edits) and follows the answers as they change. Without
//! dnsmasq the test is skipped with a message, except under CI (`CI=true`), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::process::Process;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(15);
const DNSMASQ: &str = "/usr/sbin/dnsmasq";

/// dnsmasq on 127.0.0.1:`port` (UDP and TCP), authoritative for `.test` from `hosts`, every
/// answer with a TTL of 1 s, asking no other server.
struct NameServer {
    process: Process,
    port: u16,
    hosts: PathBuf,
    log: PathBuf,
}

impl NameServer {
    fn start(dir: &Path, hosts: &str) -> Option<NameServer> {
        if !Path::new(DNSMASQ).exists() {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !ci,
                "{DNSMASQ} is missing (scripts/test.sh installs dnsmasq-base)"
            );
            eprintln!("skipped: {DNSMASQ} is missing (apt-get install dnsmasq-base)");
            return None;
        }
        let port = testkit::free_udp_port();
        let hosts_file = dir.join("hosts");
        let log = dir.join("dnsmasq.log");
        std::fs::write(&hosts_file, hosts).unwrap();
        let mut command = Command::new("sh");
        // dnsmasq prints nothing to stdout in the foreground: one line says it was started.
        command
            .args(["-c", "echo started; exec \"$@\"", "sh", DNSMASQ])
            .args([
                "--keep-in-foreground",
                "--no-resolv",
                "--no-hosts",
                "--local=/test/",
                "--local-ttl=1",
                "--listen-address=127.0.0.1",
                "--bind-interfaces",
                "--user=root",
                &format!("--pid-file={}", dir.join("dnsmasq.pid").display()),
                &format!("--port={port}"),
                &format!("--addn-hosts={}", hosts_file.display()),
                &format!("--log-facility={}", log.display()),
            ]);
        let server = NameServer {
            process: Process::spawn(command, "dnsmasq"),
            port,
            hosts: hosts_file,
            log,
        };
        server.wait_reads(1);
        Some(server)
    }

    /// Replaces the hosts file and has dnsmasq read it again (SIGHUP also empties its cache).
    fn set_hosts(&self, hosts: &str) {
        let reads = self.reads();
        std::fs::write(&self.hosts, hosts).unwrap();
        self.process.signal("HUP");
        self.wait_reads(reads + 1);
    }

    /// How often its log says it read the hosts file.
    fn reads(&self) -> usize {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let read = format!("read {}", self.hosts.display());
        log.matches(&read).count()
    }

    fn wait_reads(&self, reads: usize) {
        eventually(WAIT, "dnsmasq reads its hosts file", || {
            (self.reads() >= reads).then_some(())
        });
    }
}

/// A Service `api` of type ExternalName (the bare name `api`, found through resolv.conf's
/// search list) whose port 80 is dialled at `target_port`, an Ingress for `ext.test` to it, and
/// one for `guarded.test` to it behind an auth-url at host name `auth.ext.test`.
fn external_name_yaml(target_port: u16, auth_port: u16) -> String {
    let guarded = format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: guarded\n\
         \x20 annotations: {{nginx.ingress.kubernetes.io/auth-url: \
         \"http://auth.ext.test:{auth_port}/healthz\"}}\n\
         spec:\n  ingressClassName: sluice\n  rules:\n  - host: guarded.test\n    http:\n      paths:\n\
         \x20     - {{path: /, pathType: Prefix, backend: {{service: {{name: api, port: {{number: 80}}}}}}}}\n"
    );
    let main = format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{name: sluice}}\n\
         spec: {{controller: sluice.dev/ingress-controller}}\n\
         ---\napiVersion: v1\nkind: Service\nmetadata: {{name: api}}\n\
         spec: {{type: ExternalName, externalName: api, \
         ports: [{{name: http, port: 80, targetPort: {target_port}}}]}}\n\
         ---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: api}}\n\
         spec:\n  ingressClassName: sluice\n  rules:\n  - host: ext.test\n    http:\n      paths:\n\
         \x20     - {{path: /, pathType: Prefix, backend: {{service: {{name: api, port: {{number: 80}}}}}}}}\n"
    );
    main + &guarded
}

/// The hosts file: `api.ext.test` at `api` (when given), `auth.ext.test` at 127.0.0.4.
fn hosts(api: &[&str]) -> String {
    let mut text: String = api
        .iter()
        .map(|ip| format!("{ip} api.ext.test\n"))
        .collect();
    text.push_str("127.0.0.4 auth.ext.test\n");
    text
}

/// Who answers `ext.test/echo` now: a pod's name, or the status when no pod does.
fn answered_by(serve: &Serve) -> String {
    let response = serve.get("ext.test", "/echo");
    if response.status != 200 {
        return response.status.to_string();
    }
    let text = response.text();
    ["one", "two"]
        .into_iter()
        .find(|pod| text.contains(&format!("\"{pod}\"")))
        .unwrap_or("someone else")
        .to_owned()
}

fn wait_answered_by(serve: &Serve, who: &str, after: &str) {
    eventually(WAIT, &format!("ext.test answered by {who} {after}"), || {
        (answered_by(serve) == who).then_some(())
    });
}

#[test]
fn external_name_services_follow_their_names_answers() {
    let dir = temp_dir("external-name");
    let Some(dns) = NameServer::start(&dir, &hosts(&["127.0.0.2"])) else {
        return;
    };
    // Two pods on one port, at two loopback addresses: where the name points decides.
    let port = testkit::free_tcp_port();
    let one = Pod::start_at("one", &format!("127.0.0.2:{port}"));
    let two = Pod::start_at("two", &format!("127.0.0.3:{port}"));
    assert_eq!((one.addr.port(), two.addr.port()), (port, port));
    // The auth server of guarded.test (its /healthz answers 200: let in).
    let auth = Pod::start_at("auth", "127.0.0.4:0");

    let yaml = external_name_yaml(port, auth.addr.port());
    std::fs::write(dir.join("api.yaml"), yaml).unwrap();
    // resolv.conf's own server (127.0.0.1:53) is not asked: --resolver replaces it; its search
    // list turns `api` into `api.ext.test`.
    let resolv_conf = dir.join("resolv.conf");
    std::fs::write(
        &resolv_conf,
        "nameserver 127.0.0.1\nsearch ext.test\noptions ndots:1 timeout:1 attempts:2\n",
    )
    .unwrap();
    let resolver = format!("127.0.0.1:{}", dns.port);
    let serve = Serve::start(
        &dir.join("api.yaml"),
        &[
            "--resolv-conf",
            resolv_conf.to_str().unwrap(),
            "--resolver",
            &resolver,
        ],
    );
    wait_answered_by(&serve, "one", "at start");

    // The name moves: followed within its TTL, no reload, no edit of any object.
    dns.set_hosts(&hosts(&["127.0.0.3"]));
    wait_answered_by(&serve, "two", "after the name moved");

    // The name goes (NXDOMAIN): no endpoint, 503, as for a Service without endpoints.
    dns.set_hosts(&hosts(&[]));
    wait_answered_by(&serve, "503", "after the name was removed");
    // Whose fault: /config says it of the backend, and so do its diagnostics.
    let config = serve.config_json();
    let said = config["config"]["backends"]["default/api:http"]["resolution"].to_string();
    assert!(said.contains("host name api has no address"), "{said}");

    // It comes back, with more addresses than a 512-byte UDP reply holds: the name server
    // cuts it and Sluice asks again over TCP, so every address is an endpoint.
    let many: Vec<String> = (10..70).map(|n| format!("127.0.1.{n}")).collect();
    let many: Vec<&str> = ["127.0.0.2"]
        .into_iter()
        .chain(many.iter().map(String::as_str))
        .collect();
    dns.set_hosts(&hosts(&many));
    let wait_endpoints = |count: usize| {
        eventually(WAIT, &format!("{count} addresses are endpoints"), || {
            let config = serve.config_json();
            let ready = config["config"]["backends"]["default/api:http"]["ready"].as_array()?;
            (ready.len() == count).then_some(())
        })
    };
    wait_endpoints(61);
    dns.set_hosts(&hosts(&["127.0.0.2"]));
    wait_endpoints(1);
    assert_eq!(answered_by(&serve), "one");

    // auth-url at a host name: the sub-request goes to the name's addresses; without any, it
    // fails (500, never the upstream), as nginx's does.
    let guarded = || serve.get("guarded.test", "/echo").status;
    eventually(WAIT, "guarded.test let in by auth.ext.test", || {
        (guarded() == 200).then_some(())
    });
    dns.set_hosts("127.0.0.2 api.ext.test\n");
    eventually(WAIT, "guarded.test refused without auth.ext.test", || {
        (guarded() == 500).then_some(())
    });
    assert_eq!(answered_by(&serve), "one");

    // The name server stops answering: the last addresses keep serving while it is asked
    // again (each lookup now times out after 1 s, twice).
    drop(dns);
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        assert_eq!(answered_by(&serve), "one", "while no name server answers");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn in_kubernetes_an_external_name_service_and_its_edits_are_followed() {
    use crate::kubernetes::{cluster_with_class, pod};
    use crate::support::kube::ingress;

    let ns = "external-name";
    // Everything below runs in the test's own network namespace: dnsmasq on its loopback too.
    let cluster = cluster_with_class("kube-external-name", ns);
    let dir = cluster.dir.clone();
    let hosts = "198.18.0.51 api.ext.test\n198.18.0.52 other.ext.test\n";
    let Some(dns) = NameServer::start(&dir, hosts) else {
        return;
    };
    let (one, two) = (pod(&cluster, 51), pod(&cluster, 52));
    let service = |external_name: &str| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "api", "namespace": ns},
            "spec": {"type": "ExternalName", "externalName": external_name,
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        })
    };
    cluster.create(&service("api.ext.test"));
    cluster.create(&ingress(ns, "api", Some("sluice"), "ext.test", "api"));
    let resolver = format!("127.0.0.1:{}", dns.port);
    let sluice = cluster.sluice(ns, &["--resolver", &resolver]);
    sluice.wait_served_by("ext.test", &one.name, WAIT);

    // The Service is edited to another name: the next compile reads that name's answer.
    cluster.apply(&service("other.ext.test"));
    sluice.wait_served_by("ext.test", &two.name, WAIT);

    // A name that points at the node itself is refused there, as such a slice address is.
    dns.set_hosts("127.0.0.1 other.ext.test\n");
    sluice.wait_status("ext.test", 503, WAIT);
    eventually(WAIT, "the refusal is logged", || {
        let log = sluice.log_text();
        log.contains("ExternalName other.ext.test of Service external-name/api")
            .then_some(())
    });

    // The name goes: the Ingress gets a Warning Event saying whose fault the 503 is (a second
    // problem of the same reason on it: an Event of its own, not a count on the first).
    dns.set_hosts("198.18.0.51 api.ext.test\n");
    let event = eventually(
        WAIT,
        "a Warning Event on the Ingress naming the host",
        || {
            (cluster.events_about(ns, "Ingress", "api").into_iter()).find(|e| {
                e["note"]
                    .as_str()
                    .is_some_and(|m| m.contains("host name other.ext.test has no address"))
            })
        },
    );
    assert_eq!(event["type"], "Warning", "{event:#}");
}
