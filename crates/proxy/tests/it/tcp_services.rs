//! TCP services (`--tcp-services-configmap`): a ConfigMap entry opens a port whose connections
//! reach the Service's endpoints, bytes both ways with half-close; PROXY protocol from the
//! client and to the upstream; ports follow the ConfigMap; endpoint churn leaves connections to
//! surviving endpoints alone and closes the ones to removed endpoints after
//! worker-shutdown-timeout; bad entries are diagnostics while good ones serve. Real sockets on
//! 127.0.0.1.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::support::*;
use model::NamespacedName;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// An echo backend: (with `proxy_protocol`) reads and records the PROXY header line, greets
/// with its name, echoes lines, and at the client's half-close says `bye` and closes.
async fn echo_backend(
    name: &'static str,
    proxy_protocol: bool,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((LOCALHOST, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let headers = Arc::new(Mutex::new(Vec::new()));
    let seen = headers.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let (reader, mut writer) = stream.into_split();
                let mut reader = BufReader::new(reader);
                if proxy_protocol {
                    let mut header = String::new();
                    if reader.read_line(&mut header).await.is_err() {
                        return;
                    }
                    seen.lock().unwrap().push(header.trim_end().to_owned());
                }
                let _ = writer.write_all(format!("{name}\n").as_bytes()).await;
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            if writer.write_all(line.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                let _ = writer.write_all(b"bye\n").await;
                let _ = writer.shutdown().await;
            });
        }
    });
    (addr, headers)
}

/// `N` different ports on 127.0.0.1 that nothing listens on now.
fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind((LOCALHOST, 0)).unwrap())
        .collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

/// The TCP services ConfigMap `sluice/tcp`.
fn tcp_config_map(entries: &[(u16, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = entries
        .iter()
        .map(|(port, to)| (port.to_string(), json!(to)))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "tcp", "namespace": "sluice"},
        "data": data,
    })
}

/// Service `db` (port `http` 5432) with these endpoints, the TCP ConfigMap, and settings.
fn objects(endpoints: &[SocketAddr], entries: &[(u16, &str)], data: &[(&str, &str)]) -> Vec<Value> {
    let mut objects = vec![
        service("db", &[("http", 5432)]),
        tcp_config_map(entries),
        settings(data),
    ];
    objects.extend(slices("db", endpoints));
    objects
}

fn harness() -> Harness {
    let mut h = Harness::start();
    h.control.options.tcp_services_config_map = Some(NamespacedName::new("sluice", "tcp"));
    h
}

/// A client connection to a TCP service port, read line by line.
struct Session {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Session {
    async fn open(port: u16) -> Session {
        Session::open_with(port, b"").await
    }

    async fn open_with(port: u16, first: &[u8]) -> Session {
        let stream = bounded(TcpStream::connect((LOCALHOST, port)))
            .await
            .expect("the TCP service port accepts");
        let (reader, mut writer) = stream.into_split();
        if !first.is_empty() {
            writer.write_all(first).await.unwrap();
        }
        Session {
            lines: BufReader::new(reader).lines(),
            writer,
        }
    }

    /// The next line; `None` at the end of the stream.
    async fn line(&mut self) -> Option<String> {
        bounded(self.lines.next_line()).await.unwrap_or(None)
    }

    async fn ask(&mut self, text: &str) -> Option<String> {
        self.writer
            .write_all(format!("{text}\n").as_bytes())
            .await
            .ok()?;
        self.line().await
    }
}

#[tokio::test]
async fn bytes_go_both_ways_and_a_half_close_goes_through() {
    let (db, _) = echo_backend("db-1", false).await;
    let mut h = harness();
    let [port] = free_ports();
    h.apply(&objects(&[db], &[(port, "default/db:5432")], &[]));

    let mut session = Session::open(port).await;
    assert_eq!(session.line().await.as_deref(), Some("db-1"));
    assert_eq!(session.ask("hello").await.as_deref(), Some("hello"));
    // An open connection's bytes are counted already.
    let labels = format!("port=\"{port}\",upstream=\"tcp-default-db-5432\"");
    eventually_async(
        STEP,
        "the open connection's bytes to be counted",
        || async {
            let metrics = get(h.admin(), "admin", "/metrics").await.text();
            metrics.contains(&format!("sluice_tcp_connections_active{{{labels}}} 1"))
                && metrics.contains(&format!(
                    "sluice_tcp_bytes_total{{{labels},direction=\"received\"}} 6"
                ))
                && metrics.contains(&format!(
                    "sluice_tcp_bytes_total{{{labels},direction=\"sent\"}} 11"
                ))
        },
    )
    .await;
    // The client is done sending: the backend sees the end, answers, then closes.
    session.writer.shutdown().await.unwrap();
    assert_eq!(session.line().await.as_deref(), Some("bye"));
    assert_eq!(session.line().await, None);

    eventually_async(STEP, "the connection to be counted", || async {
        let metrics = get(h.admin(), "admin", "/metrics").await.text();
        metrics.contains(&format!("sluice_tcp_connections_total{{{labels}}} 1"))
            && metrics.contains(&format!("sluice_tcp_connections_active{{{labels}}} 0"))
            // "hello\n" in; "db-1\n", "hello\n", "bye\n" out.
            && metrics.contains(&format!(
                "sluice_tcp_bytes_total{{{labels},direction=\"received\"}} 6"
            ))
            && metrics.contains(&format!(
                "sluice_tcp_bytes_total{{{labels},direction=\"sent\"}} 15"
            ))
    })
    .await;
    // ingress-nginx's default stream log format.
    eventually_async(STEP, "the connection's log line", || async {
        h.access_lines()
            .iter()
            .any(|l| l.starts_with("[127.0.0.1] [") && l.contains("] TCP 200 15 6 "))
    })
    .await;
    // The port is on /config.
    let config = get(h.status(), "status", "/config").await.json();
    assert_eq!(
        config["config"]["tcp_services"][port.to_string()]["service"],
        "default/db:5432"
    );
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn the_proxy_protocol_is_read_from_clients_and_sent_upstream() {
    let (db, headers) = echo_backend("db-1", true).await;
    let mut h = harness();
    let [port] = free_ports();
    h.apply(&objects(
        &[db],
        &[(port, "default/db:http:PROXY:PROXY")],
        &[],
    ));

    // The load balancer's header names the client; the upstream hears of that client.
    let header = format!("PROXY TCP4 203.0.113.7 127.0.0.1 51234 {port}\r\n");
    let mut session = Session::open_with(port, header.as_bytes()).await;
    assert_eq!(session.line().await.as_deref(), Some("db-1"));
    assert_eq!(session.ask("through").await.as_deref(), Some("through"));
    assert_eq!(
        headers.lock().unwrap().as_slice(),
        [format!("PROXY TCP4 203.0.113.7 127.0.0.1 51234 {port}")]
    );

    // Without a header the connection is closed before any upstream hears of it.
    let mut bare = Session::open_with(port, b"GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(bare.line().await, None);
    assert_eq!(headers.lock().unwrap().len(), 1);
    let labels = format!("port=\"{port}\",upstream=\"tcp-default-db-http\"");
    assert_metric(
        &h,
        &format!("sluice_tcp_connections_failed_total{{{labels},reason=\"proxy_protocol\"}} 1"),
    )
    .await;
    eventually_async(STEP, "the refused connection's log line", || async {
        h.access_lines().iter().any(|l| l.contains("] TCP 400 0 "))
    })
    .await;
    // Spliced connections keep a stopping proxy waiting (up to worker-shutdown-timeout).
    drop(session);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn ports_open_and_close_with_the_config_map_and_established_connections_stay() {
    let (db, _) = echo_backend("db-1", false).await;
    let mut h = harness();
    let [first, second] = free_ports();
    h.apply(&objects(&[db], &[(first, "default/db:5432")], &[]));
    let mut established = Session::open(first).await;
    assert_eq!(established.line().await.as_deref(), Some("db-1"));
    assert!(TcpStream::connect((LOCALHOST, second)).await.is_err());

    // The ConfigMap moves the service to another port.
    h.apply(&objects(&[db], &[(second, "default/db:5432")], &[]));
    eventually_async(STEP, "the new port to accept", || async {
        TcpStream::connect((LOCALHOST, second)).await.is_ok()
    })
    .await;
    let mut moved = Session::open(second).await;
    assert_eq!(moved.line().await.as_deref(), Some("db-1"));
    eventually_async(STEP, "the old port to refuse", || async {
        TcpStream::connect((LOCALHOST, first)).await.is_err()
    })
    .await;
    // A configuration change never closes a client connection.
    assert_eq!(
        established.ask("still here").await.as_deref(),
        Some("still here")
    );

    // Back again: the port reopens.
    h.apply(&objects(&[db], &[(first, "default/db:5432")], &[]));
    eventually_async(STEP, "the port to reopen", || async {
        TcpStream::connect((LOCALHOST, first)).await.is_ok()
    })
    .await;
    drop((established, moved));
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn endpoint_churn_leaves_survivors_alone_and_closes_removed_endpoints_after_the_grace() {
    let (one, _) = echo_backend("one", false).await;
    let (two, _) = echo_backend("two", false).await;
    let mut h = harness();
    let [port] = free_ports();
    let entries = [(port, "default/db:5432")];
    let grace = [("worker-shutdown-timeout", "1s")];
    h.apply(&objects(&[one, two], &entries, &grace));

    // One connection to each endpoint (round robin per worker: a few tries at most).
    let mut on_one = None;
    let mut on_two = None;
    for _ in 0..20 {
        let mut session = Session::open(port).await;
        match session.line().await.as_deref() {
            Some("one") if on_one.is_none() => on_one = Some(session),
            Some("two") if on_two.is_none() => on_two = Some(session),
            _ => {}
        }
        if on_one.is_some() && on_two.is_some() {
            break;
        }
    }
    let (mut on_one, mut on_two) = (on_one.unwrap(), on_two.unwrap());

    // `two` leaves the Service: an endpoint-only change (the fast path, no compile).
    h.update(&objects(&[one], &entries, &grace));
    // New connections go to the endpoints left.
    for _ in 0..4 {
        let mut session = Session::open(port).await;
        assert_eq!(session.line().await.as_deref(), Some("one"));
    }
    // The connection to the removed endpoint still works within the grace, then is closed.
    assert_eq!(on_two.ask("within").await.as_deref(), Some("within"));
    // Nothing more comes on it: the next read sees its end once the grace is over.
    let ended = bounded(on_two.lines.next_line()).await;
    assert!(matches!(ended, Ok(None) | Err(_)), "{ended:?}");
    // The one to the surviving endpoint is untouched.
    assert_eq!(on_one.ask("survivor").await.as_deref(), Some("survivor"));
    let labels = format!("port=\"{port}\",upstream=\"tcp-default-db-5432\"");
    assert_metric(
        &h,
        &format!("sluice_tcp_connections_failed_total{{{labels},reason=\"endpoint_removed\"}} 1"),
    )
    .await;
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn bad_entries_are_diagnostics_and_a_taken_port_is_reported_and_bound_once_freed() {
    let (db, _) = echo_backend("db-1", false).await;
    let mut h = harness();
    let [good, missing, taken] = free_ports();
    // Another program holds this port (without SO_REUSEPORT, so binding it fails).
    let holder = std::net::TcpListener::bind((LOCALHOST, taken)).unwrap();
    // The HTTP listener's port, which the compile cannot know (the harness binds port 0): its
    // SO_REUSEPORT sockets would let a second bind succeed and share its connections.
    let http = h.http().port();
    let compiled = h.apply_allowing_diagnostics(&objects(
        &[db],
        &[
            (good, "default/db:5432"),
            (missing, "default/nothing:5432"),
            (taken, "default/db:5432"),
            (http, "default/db:5432"),
        ],
        &[],
    ));
    let diagnostics: Vec<String> = compiled
        .diagnostics
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(
        diagnostics[0].starts_with(&format!(
            "ConfigMap sluice/tcp: missing: data.{missing}: Service default/nothing not found"
        )),
        "{diagnostics:?}"
    );
    let mut session = Session::open(good).await;
    assert_eq!(session.line().await.as_deref(), Some("db-1"));
    let config = get(h.status(), "status", "/config").await.json();
    let errors: Vec<&str> = config["tcp_service_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .contains(&format!("TCP service port {http}: it is the HTTP listener's port (change the configuration)").as_str()),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(
            |e| e.starts_with(&format!("TCP service port {taken}: cannot listen"))
                && e.ends_with("(tried again every 200ms)")
        ),
        "{errors:?}"
    );
    // The HTTP listener still speaks HTTP.
    assert_eq!(get(h.http(), "any.example", "/").await.status, 404);
    // The program holding the port lets go: the retry binds it, with no configuration change
    // (the harness retries every 200 ms), and /config keeps only the permanent error.
    drop(holder);
    eventually_async(
        STEP,
        "the freed port to be bound and leave /config",
        || async {
            let config = get(h.status(), "status", "/config").await.json();
            config["tcp_service_errors"].as_array().unwrap().len() == 1
        },
    )
    .await;
    let mut retried = Session::open(taken).await;
    assert_eq!(retried.line().await.as_deref(), Some("db-1"));
    drop((retried, session));
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn least_request_sends_new_connections_to_the_endpoint_with_fewest_open() {
    let (one, _) = echo_backend("one", false).await;
    let (two, _) = echo_backend("two", false).await;
    // One worker: one balancer sees every connection.
    let mut h = Harness::with_workers(1);
    h.control.options.tcp_services_config_map = Some(NamespacedName::new("sluice", "tcp"));
    let [port] = free_ports();
    let settings = [("load-balance", "least_request")];
    h.apply(&objects(
        &[one, two],
        &[(port, "default/db:5432")],
        &settings,
    ));

    // Two open on each endpoint...
    let mut open: Vec<(String, Session)> = Vec::new();
    for _ in 0..4 {
        let mut session = Session::open(port).await;
        let name = session.line().await.unwrap();
        open.push((name, session));
    }
    let on_one = open.iter().filter(|(name, _)| name == "one").count();
    assert_eq!(on_one, 2, "least connections balances open ones");
    // ...then both on `one` end: the next two go there (round robin would split them).
    for (_, session) in open.iter_mut().filter(|(name, _)| name == "one") {
        session.writer.shutdown().await.unwrap();
        assert_eq!(session.line().await.as_deref(), Some("bye"));
        assert_eq!(session.line().await, None);
    }
    let labels = format!("port=\"{port}\",upstream=\"tcp-default-db-5432\"");
    let active = format!("sluice_tcp_connections_active{{{labels}}} 2");
    eventually_async(STEP, "the ended connections to be counted out", || async {
        let metrics = get(h.admin(), "admin", "/metrics").await.text();
        metrics.lines().any(|l| l == active)
    })
    .await;
    for _ in 0..2 {
        let mut session = Session::open(port).await;
        assert_eq!(session.line().await.as_deref(), Some("one"));
        open.push(("one".into(), session));
    }
    drop(open);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn a_service_without_endpoints_keeps_its_port_and_serves_once_one_appears() {
    let (db, _) = echo_backend("db-1", false).await;
    let mut h = harness();
    let [port] = free_ports();
    let entries = [(port, "default/db:5432")];
    h.apply(&objects(&[], &entries, &[]));

    // Accepted, and closed: no endpoint to splice to.
    let mut session = Session::open(port).await;
    assert_eq!(session.line().await, None);
    let labels = format!("port=\"{port}\",upstream=\"tcp-default-db-5432\"");
    assert_metric(
        &h,
        &format!("sluice_tcp_connections_failed_total{{{labels},reason=\"no_endpoint\"}} 1"),
    )
    .await;
    eventually_async(STEP, "the failed connection's log line", || async {
        h.access_lines()
            .iter()
            .any(|l| l.contains("] TCP 502 0 0 "))
    })
    .await;

    // An endpoint appears: the endpoint fast path, no recompile, and the port serves.
    h.update(&objects(&[db], &entries, &[]));
    let mut session = Session::open(port).await;
    assert_eq!(session.line().await.as_deref(), Some("db-1"));
    drop(session);
    shutdown(h.control.proxy).await;
}

#[tokio::test]
async fn stream_keys_choose_how_many_endpoints_a_connection_tries_and_format_its_line() {
    let (db, _) = echo_backend("db-1", false).await;
    let dead = free_ports::<3>().map(|p| SocketAddr::from((LOCALHOST, p)));
    let mut h = harness();
    let [port] = free_ports();
    let entries = [(port, "default/db:5432")];
    let format = "$remote_addr $protocol $status up=[$upstream_addr] \
                  connect=$upstream_connect_time in=$bytes_received/$upstream_bytes_sent \
                  server=$server_addr:$server_port conn=$connection";
    // Three endpoints refuse connections, one answers. `0` tries is every endpoint once: each
    // connection reaches the live one whatever the balancer offers first (the ingress-nginx
    // default, 3, would not always).
    let mut endpoints = dead.to_vec();
    endpoints.push(db);
    h.apply(&objects(
        &endpoints,
        &entries,
        &[
            ("proxy-stream-next-upstream-tries", "0"),
            ("log-format-stream", format),
        ],
    ));
    for _ in 0..4 {
        let mut session = Session::open(port).await;
        assert_eq!(session.line().await.as_deref(), Some("db-1"));
        assert_eq!(session.ask("hi").await.as_deref(), Some("hi"));
    }
    eventually_async(STEP, "four lines in log-format-stream", || async {
        let lines = h.access_lines();
        let ours: Vec<&String> = lines
            .iter()
            .filter(|l| l.starts_with("127.0.0.1 TCP 200 up=["))
            .collect();
        ours.len() == 4
            && ours.iter().all(|l| {
                l.contains(&format!("{db}] connect="))
                    && l.contains(" in=3/3 ")
                    && l.contains(&format!(" server=127.0.0.1:{port} conn="))
            })
    })
    .await;

    // Only dead endpoints, and `proxy-stream-next-upstream: false`: one is tried, then 502.
    let only_dead = objects(
        &dead,
        &entries,
        &[
            ("proxy-stream-next-upstream", "false"),
            ("log-format-stream", format),
        ],
    );
    h.apply(&only_dead);
    let mut session = Session::open(port).await;
    assert_eq!(session.line().await, None);
    eventually_async(STEP, "a 502 line naming one endpoint", || async {
        h.access_lines().iter().any(|l| {
            l.starts_with("127.0.0.1 TCP 502 up=[")
                && !l.contains(", ")
                && l.contains("] connect=- in=0/0 ")
        })
    })
    .await;

    // The stream log off (its format still set): the next connection writes no line, while
    // the HTTP access log stays on.
    let config = get(h.status(), "status", "/config").await.json();
    assert_eq!(config["config"]["settings"]["log-format-stream"], format);
    h.apply(&objects(
        &dead,
        &entries,
        &[
            ("proxy-stream-next-upstream", "false"),
            ("log-format-stream", format),
            ("disable-stream-access-log", "true"),
        ],
    ));
    let mut session = Session::open(port).await;
    assert_eq!(session.line().await, None);
    let config = get(h.status(), "status", "/config").await.json();
    assert_eq!(
        config["config"]["settings"]["disable-stream-access-log"],
        true
    );
    assert_eq!(config["config"]["settings"]["disable-access-log"], false);
    // On again with another format: once its line is there, the one before it would be too.
    h.apply(&objects(
        &dead,
        &entries,
        &[("log-format-stream", "marker $status")],
    ));
    let mut session = Session::open(port).await;
    assert_eq!(session.line().await, None);
    eventually_async(STEP, "the marker line", || async {
        h.access_lines().iter().any(|l| l == "marker 502")
    })
    .await;
    let logged_502 = h
        .access_lines()
        .iter()
        .filter(|l| l.starts_with("127.0.0.1 TCP 502 "))
        .count();
    assert_eq!(
        logged_502, 1,
        "the connection made with the stream log off was logged"
    );
    shutdown(h.control.proxy).await;
}
