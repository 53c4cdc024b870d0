//! `sluice serve` end to end: the real binary, real backend processes, files edited under it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn routes_from_files_and_applies_every_kind_of_edit_live() {
    let dir = temp_dir("live");
    let (one, two) = (Pod::start("one"), Pod::start("two"));
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    std::fs::write(dir.join("a.yaml"), app_yaml("a", "a.test", &[one.addr])).unwrap();
    let serve = Serve::start(&dir, &[]);

    let first = serve.get("a.test", "/echo");
    assert_eq!(first.status, 200, "{}", first.text());
    assert!(first.text().contains("\"one\""), "{}", first.text());
    assert_eq!(serve.get("b.test", "/").status, 404);
    assert_eq!(serve.admin("/ready").status, 200);

    // A new file: a new Ingress is served.
    std::fs::write(dir.join("b.yaml"), app_yaml("b", "b.test", &[two.addr])).unwrap();
    eventually(WAIT, "b.test routed after adding b.yaml", || {
        (serve.get("b.test", "/echo").status == 200).then_some(())
    });

    // An atomic rename that moves a's endpoints to pod two: the endpoint fast path.
    write_atomically(&dir.join("a.yaml"), &app_yaml("a", "a.test", &[two.addr]));
    eventually(WAIT, "a.test answered by pod two", || {
        serve
            .get("a.test", "/echo")
            .text()
            .contains("\"two\"")
            .then_some(())
    });

    // A deleted file: its Ingress is gone.
    std::fs::remove_file(dir.join("b.yaml")).unwrap();
    eventually(WAIT, "b.test gone after deleting b.yaml", || {
        (serve.get("b.test", "/").status == 404).then_some(())
    });
    assert_eq!(serve.get("a.test", "/").status, 200);
}

#[test]
fn a_broken_edit_is_reported_and_the_last_good_configuration_keeps_serving() {
    let dir = temp_dir("broken");
    let pod = Pod::start("pod");
    let good = app_yaml("web", "web.test", &[pod.addr]);
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    std::fs::write(dir.join("web.yaml"), &good).unwrap();
    let serve = Serve::start(&dir, &[]);
    assert_eq!(serve.get("web.test", "/").status, 200);

    std::fs::write(
        dir.join("web.yaml"),
        format!("{good}\n  - this: [is not yaml"),
    )
    .unwrap();
    let errors = eventually(WAIT, "the broken file reported at /config", || {
        let errors = serve.config_json()["source_errors"].clone();
        (errors.as_array()?.len() == 1).then_some(errors)
    });
    let message = errors[0].as_str().unwrap();
    assert!(message.contains("web.yaml"), "{message}");
    assert!(
        message.contains("keeping this file's last good objects"),
        "{message}"
    );
    assert_eq!(serve.get("web.test", "/").status, 200);

    // An invalid object (a port that is not a number) keeps that object's last good version.
    std::fs::write(
        dir.join("web.yaml"),
        good.replace("port: 80}", "port: eighty}"),
    )
    .unwrap();
    let errors = eventually(WAIT, "the invalid Service reported", || {
        let errors = serve.config_json()["source_errors"].clone();
        errors
            .to_string()
            .contains("Service default/web")
            .then_some(errors)
    });
    assert!(
        errors.to_string().contains("spec.ports[0].port"),
        "{errors}"
    );
    assert_eq!(serve.get("web.test", "/").status, 200);

    std::fs::write(dir.join("web.yaml"), &good).unwrap();
    eventually(WAIT, "errors cleared after the fix", || {
        serve.config_json()["source_errors"]
            .as_array()?
            .is_empty()
            .then_some(())
    });
}

#[test]
fn a_diagnosed_ingress_does_not_disturb_the_others() {
    let dir = temp_dir("diagnosed");
    let pod = Pod::start("pod");
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    std::fs::write(dir.join("ok.yaml"), app_yaml("ok", "ok.test", &[pod.addr])).unwrap();
    let broken = app_yaml("bad", "bad.test", &[pod.addr]).replace("name: http}}}", "name: grpc}}}");
    std::fs::write(dir.join("bad.yaml"), broken).unwrap();
    let serve = Serve::start(&dir, &[]);
    assert_eq!(serve.get("ok.test", "/").status, 200);
    assert_eq!(serve.get("bad.test", "/").status, 503);
    let diagnostics = serve.config_json()["config"]["diagnostics"].to_string();
    assert!(diagnostics.contains("Ingress default/bad"), "{diagnostics}");
    assert!(diagnostics.contains("has no port grpc"), "{diagnostics}");
}

fn run_failing(args: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(BIN).args(args).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn start_up_errors_say_what_to_fix() {
    let (code, stderr) = run_failing(&["serve", "--config", "/nonexistent/sluice"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("/nonexistent/sluice: no such file or directory"),
        "{stderr}"
    );

    let empty = temp_dir("empty");
    let (code, stderr) = run_failing(&["serve", "--config", empty.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("contains no readable YAML"), "{stderr}");

    let (code, stderr) = run_failing(&[
        "serve",
        "--config",
        ".",
        "--http-listen",
        "localhost:eighty",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--http-listen"), "{stderr}");
    // A resolv.conf given and unreadable, a name server that is no address.
    let (code, stderr) = run_failing(&[
        "serve",
        "--config",
        empty.to_str().unwrap(),
        "--resolv-conf",
        "/nonexistent/resolv.conf",
    ]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("--resolv-conf /nonexistent/resolv.conf: No such file"),
        "{stderr}"
    );
    let (code, stderr) = run_failing(&["serve", "--config", ".", "--resolver", "dns.local"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("\"dns.local\" is not a name server address"),
        "{stderr}"
    );
    let (code, stderr) = run_failing(&["serve", "--config", ".", "--workers", "0"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--workers"), "{stderr}");
    let (code, stderr) = run_failing(&["serve", "--config", ".", "--configmap", "sluice"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("expected NAMESPACE/NAME"), "{stderr}");

    // /config describes every tenant: its listener stays on loopback.
    let dir = temp_dir("status-exposed");
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    let (code, stderr) = run_failing(
        &[
            &["serve", "--config", dir.to_str().unwrap()][..],
            &loopback_listeners_but("--status-listen", "0.0.0.0:10246"),
        ]
        .concat(),
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--status-listen 0.0.0.0:10246 is not a loopback address"),
        "{stderr}"
    );
    assert!(stderr.contains("kubectl port-forward"), "{stderr}");

    // A port someone else holds.
    let dir = temp_dir("busy");
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let (code, stderr) = run_failing(
        &[
            &["serve", "--config", dir.to_str().unwrap()][..],
            &loopback_listeners_but("--http-listen", &taken_addr),
        ]
        .concat(),
    );
    assert_eq!(code, 1);
    assert!(stderr.contains(&taken_addr), "{stderr}");
}

#[test]
fn a_privileged_port_without_permission_explains_the_fix() {
    // Run as `nobody` when we are root (CI is); otherwise we already are unprivileged.
    let dir = temp_dir("privileged");
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    let args = [
        &["serve", "--config", dir.to_str().unwrap()][..],
        &loopback_listeners_but("--http-listen", "127.0.0.1:81"),
    ]
    .concat();
    let output = if nix_is_root() {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
            .args(args)
            .output()
            .expect("setpriv (util-linux) is installed by scripts/test.sh")
    } else {
        std::process::Command::new(BIN).args(args).output().unwrap()
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.1:81"), "{stderr}");
    assert!(stderr.contains("CAP_NET_BIND_SERVICE"), "{stderr}");
}

fn nix_is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

#[test]
fn sigterm_finishes_requests_in_flight_then_exits_zero() {
    // A hand-rolled upstream, so the test knows the moment the request is in flight.
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let (arrived, request_arrived) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut conn, _) = upstream.accept().unwrap();
        let mut buffer = [0u8; 4096];
        let _ = conn.read(&mut buffer).unwrap();
        arrived.send(()).unwrap();
        released.recv().unwrap();
        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nfinished")
            .unwrap();
    });

    let dir = temp_dir("drain");
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    std::fs::write(
        dir.join("app.yaml"),
        app_yaml("app", "app.test", &[upstream_addr]),
    )
    .unwrap();
    let mut serve = Serve::start(&dir, &[]);
    let http = serve.http;
    let client = std::thread::spawn(move || get(http, "app.test", "/slow"));
    request_arrived
        .recv_timeout(WAIT)
        .expect("request reached the upstream");

    serve.process.signal("TERM");
    // New connections are refused once the listeners are closed...
    eventually(WAIT, "listener closed after SIGTERM", || {
        TcpStream::connect(http).is_err().then_some(())
    });
    // ...while the request in flight still completes.
    release.send(()).unwrap();
    let response = client.join().unwrap().expect("in-flight request completed");
    assert_eq!(response.status, 200);
    assert_eq!(response.text(), "finished");
    assert_eq!(serve.process.wait_exit(WAIT), 0);
}

#[test]
fn the_quick_start_demo_serves_http_and_verified_https() {
    let dir = temp_dir("demo");
    let process = run_sluice(
        &[
            &["demo", "--dir", dir.to_str().unwrap()],
            &LOOPBACK_LISTENERS[..],
        ]
        .concat(),
    );
    let serve = Serve::from_process(process);
    let hello = serve.get("demo.example.com", "/");
    assert_eq!(hello.status, 200, "{}", hello.text());
    assert!(hello.text().contains("hello"), "{}", hello.text());

    let ca = std::fs::read(dir.join("demo-ca.pem")).unwrap();
    let echo = get_tls(serve.https, "demo.example.com", &ca, "/echo").unwrap();
    assert_eq!(echo.status, 200, "{}", echo.text());
    let seen: serde_json::Value = serde_json::from_slice(&echo.body).unwrap();
    assert_eq!(seen["backend"], "echo");
    assert_eq!(seen["headers"]["x-forwarded-proto"], "https");
}

#[test]
fn ingress_nginx_flags_work_and_the_ones_sluice_lacks_say_so() {
    let dir = temp_dir("default-backend-service");
    let (one, fallback) = (Pod::start("one"), Pod::start("fallback"));
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    std::fs::write(dir.join("a.yaml"), app_yaml("a", "a.test", &[one.addr])).unwrap();
    std::fs::write(
        dir.join("fallback.yaml"),
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: fallback}}\n\
             spec: {{ports: [{{name: http, port: 80}}]}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: fallback-1, labels: {{kubernetes.io/service-name: fallback}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {}}}]\n\
             endpoints: [{{addresses: [\"127.0.0.1\"]}}]\n",
            fallback.addr.port()
        ),
    )
    .unwrap();
    let serve = Serve::start(
        &dir,
        &[
            "--default-backend-service=default/fallback",
            "--enable-metrics=true",
            "--annotations-prefix=nginx.ingress.kubernetes.io",
            "--time-buckets=0.25,5",
            "--exclude-socket-metrics=nginx_ingress_controller_bytes_sent,request_size",
        ],
    );
    let routed = serve.get("a.test", "/echo");
    assert!(routed.text().contains("\"one\""), "{}", routed.text());
    // The metrics flags: the request histograms' bounds, and two families left out.
    eventually(Duration::from_secs(5), "the request counted", || {
        let metrics = serve.admin("/metrics").text();
        let bounds: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("nginx_ingress_controller_request_duration_seconds_bucket{"))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        (bounds == ["0.25", "5", "+Inf"]).then_some(metrics)
    });
    let metrics = serve.admin("/metrics").text();
    assert!(
        !metrics.contains("nginx_ingress_controller_bytes_sent"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("nginx_ingress_controller_request_size"),
        "{metrics}"
    );
    assert!(metrics.contains("nginx_ingress_controller_response_size_bucket{"));
    let unmatched = serve.get("unknown.test", "/echo");
    assert_eq!(unmatched.status, 200, "{}", unmatched.text());
    assert!(
        unmatched.text().contains("\"fallback\""),
        "{}",
        unmatched.text()
    );

    let (code, stderr) =
        run_failing(&["serve", "--config", ".", "--ssl-passthrough-proxy-port=442"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(
            "ingress-nginx flag --ssl-passthrough-proxy-port is not supported by Sluice (Sluice passes TLS through on its HTTPS listener itself"
        ),
        "{stderr}"
    );
    let (code, stderr) = run_failing(&["serve", "--config", ".", "--time-buckets=1,0.5"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("0.5 is not larger than the bound before it: bounds must increase"),
        "{stderr}"
    );
    let (code, stderr) = run_failing(&["serve", "--config", ".", "--no-such-flag"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unexpected argument"), "{stderr}");
}

#[test]
fn access_log_lines_are_dropped_and_counted_when_nobody_reads_stdout() {
    let dir = temp_dir("stuck-log");
    std::fs::write(dir.join("class.yaml"), class_yaml()).unwrap();
    // Requests for a host no rule names are logged only when asked (as ingress-nginx's).
    std::fs::write(
        dir.join("configmap.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: sluice, namespace: sluice}\n\
         data: {enable-access-log-for-default-backend: \"true\"}\n",
    )
    .unwrap();
    // stdout is a pipe nobody reads after the first line: it fills, and so does the writer's
    // queue (64 buffers of 32 KiB).
    let serve = Serve::from_process(Process::spawn_unread(
        sluice_command(&Serve::args(&dir, &[])),
        "sluice serve",
    ));
    let long_path = format!("/{}", "x".repeat(2000));
    let batch = format!("GET {long_path} HTTP/1.1\r\nHost: nowhere.test\r\n\r\n").repeat(100);
    let mut answered = 0;
    let mut buf = vec![0u8; 64 * 1024];
    // 4,000 requests, ~2 KB of log line each: 8 MB, far beyond what the pipe and queue hold.
    // A connection per 100 (keep-alive-requests is 1,000).
    for _ in 0..40 {
        let mut stream = TcpStream::connect(serve.http).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        stream.write_all(batch.as_bytes()).unwrap();
        let mut seen = Vec::new();
        let mut in_batch = 0;
        while in_batch < 100 {
            let n = stream.read(&mut buf).expect("the proxy keeps answering");
            assert!(n > 0, "the proxy closed the connection after {in_batch}");
            seen.extend_from_slice(&buf[..n]);
            in_batch = String::from_utf8_lossy(&seen)
                .matches("HTTP/1.1 404 ")
                .count();
        }
        answered += in_batch;
    }
    assert!(answered >= 4000);
    let dropped = eventually(WAIT, "dropped lines counted", || {
        let metrics = serve.admin("/metrics").text();
        let line = metrics
            .lines()
            .find(|l| l.starts_with("sluice_access_log_lines_dropped_total "))?
            .to_owned();
        let n: f64 = line.rsplit(' ').next()?.parse().ok()?;
        (n > 0.0).then_some(n)
    });
    assert!(dropped < 4000.0, "{dropped}");
    // Still serving.
    assert_eq!(serve.get("nowhere.test", "/").status, 404);
}

#[test]
fn tcp_and_udp_services_from_files_open_ports_and_follow_edits() {
    let dir = temp_dir("tcp-services");
    let one = Pod::start("one");
    let dns_port = udp_echo("127.0.0.1:0".parse().unwrap());
    let udp_port = free_udp_port();
    std::fs::write(
        dir.join("db.yaml"),
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: db}}\n\
             spec: {{ports: [{{name: http, port: 80}}]}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: db-1, labels: {{kubernetes.io/service-name: db}}}}\n\
             addressType: IPv4\nports: [{{name: http, port: {}}}]\n\
             endpoints: [{{addresses: [\"127.0.0.1\"]}}]\n---\n\
             apiVersion: v1\nkind: Service\nmetadata: {{name: dns}}\n\
             spec: {{ports: [{{name: dns, port: 53, protocol: UDP}}]}}\n---\n\
             apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
             metadata: {{name: dns-1, labels: {{kubernetes.io/service-name: dns}}}}\n\
             addressType: IPv4\nports: [{{name: dns, port: {}, protocol: UDP}}]\n\
             endpoints: [{{addresses: [\"127.0.0.1\"]}}]\n",
            one.addr.port(),
            dns_port
        ),
    )
    .unwrap();
    let ports: Vec<TcpListener> = (0..2)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let [first, second] = [0, 1].map(|i| ports[i].local_addr().unwrap().port());
    drop(ports);
    let tcp_yaml = |port: u16| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: tcp}}\n\
             data: {{\"{port}\": \"default/db:http\"}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: udp}}\n\
             data: {{\"{udp_port}\": \"default/dns:dns\", \"5353\": \"kube-system/kube-dns:53\"}}\n"
        )
    };
    std::fs::write(dir.join("tcp.yaml"), tcp_yaml(first)).unwrap();
    let serve = Serve::start(
        &dir,
        &[
            "--tcp-services-configmap=default/tcp",
            "--udp-services-configmap",
            "default/udp",
        ],
    );
    let reply = eventually(WAIT, "the TCP service to answer", || {
        through_tcp_service(first)
    });
    assert!(reply.contains("Server name: one"), "{reply}");
    // The UDP service answers through its port; its other entry names a missing Service.
    let answer = udp_ask(udp_port, b"query");
    assert_eq!(answer, b"dns:query");
    let config = serve.config_json();
    let diagnostics = config["config"]["diagnostics"].to_string();
    assert!(
        diagnostics.contains("ConfigMap default/udp: missing: data.5353")
            && diagnostics.contains("Service kube-system/kube-dns not found"),
        "{diagnostics}"
    );

    // The file moves the service to another port: that one opens, the first closes.
    write_atomically(&dir.join("tcp.yaml"), &tcp_yaml(second));
    eventually(WAIT, "the second port to answer", || {
        through_tcp_service(second)
    });
    eventually(WAIT, "the first port to close", || {
        TcpStream::connect(("127.0.0.1", first))
            .is_err()
            .then_some(())
    });
}
