//! Response compression end to end: a real `sluice serve` with the ConfigMap's `use-gzip` /
//! `enable-brotli` keys (file mode), a real HTTP/1.1 backend on a thread of the test, and raw
//! HTTP/1.x and curl (HTTP/2) clients. Decoded with flate2 (miniz_oxide) and the brotli
//! crate's decoder, not the encoders Sluice uses for gzip.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;

/// A web page that compresses as one does (~20 KB).
fn page() -> Vec<u8> {
    let mut text = b"<!doctype html><html><body><ul>\n".to_vec();
    for n in 0..400u32 {
        text.extend_from_slice(
            format!(
                "<li class=\"row\" id=\"r{n}\">item {} of the list</li>\n",
                n * 7919 % 997
            )
            .as_bytes(),
        );
    }
    text.extend_from_slice(b"</ul></body></html>\n");
    text
}

/// The backend: one thread per connection, keep-alive, answers chosen by path. `/stream`
/// sends its first chunk, then waits for the test's word before the second and the end.
struct Backend {
    addr: SocketAddr,
    release: mpsc::Sender<()>,
}

impl Backend {
    fn start() -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let released = released.clone();
                std::thread::spawn(move || serve_connection(stream, &released));
            }
        });
        Backend { addr, release }
    }
}

fn serve_connection(stream: TcpStream, released: &Mutex<mpsc::Receiver<()>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_owned(),
            parts.next().unwrap_or("").to_owned(),
        );
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
        }
        let head_only = method == "HEAD";
        let fixed = |status: &str, headers: &str, body: &[u8]| {
            let mut response = format!(
                "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            if !head_only {
                response.extend_from_slice(body);
            }
            response
        };
        let response = match path.as_str() {
            "/page" => fixed(
                "200 OK",
                "Content-Type: text/html; charset=utf-8\r\nETag: \"v1\"\r\nAccept-Ranges: bytes\r\n",
                &page(),
            ),
            "/missing" => fixed("404 Not Found", "Content-Type: text/html\r\n", &page()),
            "/small" => fixed("200 OK", "Content-Type: text/plain\r\n", &[b'x'; 100]),
            "/png" => fixed("200 OK", "Content-Type: image/png\r\n", &page()),
            "/encoded" => fixed(
                "200 OK",
                "Content-Type: text/plain\r\nContent-Encoding: gzip\r\n",
                b"not really gzip, passed on as it came",
            ),
            "/no-transform" => fixed(
                "200 OK",
                "Content-Type: text/plain\r\nCache-Control: no-transform\r\n",
                &page(),
            ),
            "/created" => fixed("201 Created", "Content-Type: text/plain\r\n", &page()),
            "/empty" => b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
            "/same" => b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n".to_vec(),
            "/stream" => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                            Transfer-Encoding: chunked\r\n\r\n";
                let chunk = |text: &str| format!("{:x}\r\n{text}\r\n", text.len());
                if out
                    .write_all(format!("{head}{}", chunk("event one\n")).as_bytes())
                    .is_err()
                {
                    return;
                }
                let _ = out.flush();
                // Until the test has seen the first event through the proxy.
                let _ = released.lock().unwrap().recv_timeout(Duration::from_secs(20));
                format!("{}0\r\n\r\n", chunk("event two\n")).into_bytes()
            }
            _ => fixed("404 Not Found", "Content-Type: text/plain\r\n", b"no such path"),
        };
        if out.write_all(&response).is_err() {
            return;
        }
    }
}

/// `GET path` (or another method) on `app.test` with these headers, over a new connection.
fn fetch(serve: &Serve, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut stream = TcpStream::connect(serve.http).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    request(&mut stream, method, "app.test", path, headers).unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn unbrotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(bytes, 4096)
        .read_to_end(&mut out)
        .unwrap();
    out
}

const GZIP: (&str, &str) = ("Accept-Encoding", "gzip");

#[test]
fn gzip_and_brotli_follow_nginx_s_filters_and_decode_to_the_exact_bytes() {
    let backend = Backend::start();
    let dir = config_dir(
        "compression",
        backend.addr,
        &[("use-gzip", "true"), ("enable-brotli", "true")],
    );
    let serve = Serve::start(&dir, &[]);
    eventually(Duration::from_secs(10), "app.test routed", || {
        (fetch(&serve, "GET", "/page", &[]).status == 200).then_some(())
    });

    // gzip: chunked, no length, Vary, a weak ETag, no Accept-Ranges; decodes exactly.
    let gzipped = fetch(&serve, "GET", "/page", &[GZIP]);
    assert_eq!(gzipped.status, 200);
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    assert_eq!(gzipped.header("transfer-encoding"), Some("chunked"));
    assert_eq!(gzipped.header("content-length"), None);
    assert_eq!(gzipped.header("vary"), Some("Accept-Encoding"));
    assert_eq!(gzipped.header("etag"), Some("W/\"v1\""));
    assert_eq!(gzipped.header("accept-ranges"), None);
    assert!(
        gzipped.body.len() < page().len() / 3,
        "{}",
        gzipped.body.len()
    );
    assert!(gunzip(&gzipped.body) == page());

    // Both accepted: brotli (ngx_brotli's filter runs first), whatever the q-values.
    let brotli = fetch(
        &serve,
        "GET",
        "/page",
        &[("Accept-Encoding", "gzip;q=1, br;q=0.1")],
    );
    assert_eq!(brotli.header("content-encoding"), Some("br"));
    assert!(unbrotli(&brotli.body) == page());
    // A 404 from the upstream is compressed as nginx's filter does.
    let missing = fetch(&serve, "GET", "/missing", &[GZIP]);
    assert_eq!(
        (missing.status, missing.header("content-encoding")),
        (404, Some("gzip"))
    );
    assert!(gunzip(&missing.body) == page());

    // q=0 refuses; the answer still says it varies.
    let refused = fetch(
        &serve,
        "GET",
        "/page",
        &[("Accept-Encoding", "gzip;q=0, br;q=0")],
    );
    assert_eq!(refused.header("content-encoding"), None);
    assert_eq!(
        refused.header("content-length"),
        Some(page().len().to_string().as_str())
    );
    assert_eq!(refused.header("vary"), Some("Accept-Encoding"));
    assert_eq!(refused.header("etag"), Some("\"v1\""));
    assert!(refused.body == page());

    // 100 bytes: under gzip-min-length (256), over brotli-min-length (20).
    let small = fetch(&serve, "GET", "/small", &[GZIP]);
    assert_eq!(small.header("content-encoding"), None);
    assert_eq!(small.body, [b'x'; 100]);
    let small = fetch(&serve, "GET", "/small", &[("Accept-Encoding", "br")]);
    assert_eq!(small.header("content-encoding"), Some("br"));
    assert_eq!(unbrotli(&small.body), [b'x'; 100]);

    // Not a listed type; already encoded; no-transform; a status nginx does not compress.
    for path in ["/png", "/no-transform", "/created"] {
        let answer = fetch(&serve, "GET", path, &[("Accept-Encoding", "gzip, br")]);
        assert_eq!(answer.header("content-encoding"), None, "{path}");
        assert_eq!(answer.header("vary"), None, "{path}");
        assert!(answer.body == page(), "{path}");
    }
    let encoded = fetch(
        &serve,
        "GET",
        "/encoded",
        &[("Accept-Encoding", "gzip, br")],
    );
    assert_eq!(encoded.header("content-encoding"), Some("gzip"));
    assert_eq!(encoded.text(), "not really gzip, passed on as it came");

    // HEAD, 204 and 304: no body, no coding, no Vary.
    let head = fetch(&serve, "HEAD", "/page", &[GZIP]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-encoding"), None);
    assert_eq!(head.header("vary"), None);
    for (path, status) in [("/empty", 204), ("/same", 304)] {
        let answer = fetch(&serve, "GET", path, &[GZIP]);
        assert_eq!(answer.status, status);
        assert_eq!(answer.header("content-encoding"), None, "{path}");
        assert!(answer.body.is_empty(), "{path}");
    }

    // HTTP/1.0: no gzip (gzip_http_version 1.1), the length as the upstream said.
    let mut stream = TcpStream::connect(serve.http).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /page HTTP/1.0\r\nHost: app.test\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        !head.to_ascii_lowercase().contains("content-encoding"),
        "{head}"
    );
    assert!(body.as_bytes() == page());
}

#[test]
fn an_http2_client_gets_it_compressed_without_a_length() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("curl not found; skipped");
        return;
    }
    let backend = Backend::start();
    let dir = config_dir(
        "compression-h2",
        backend.addr,
        &[("use-gzip", "true"), ("use-h2c", "true")],
    );
    let serve = Serve::start(&dir, &[]);
    eventually(Duration::from_secs(10), "app.test routed", || {
        (fetch(&serve, "GET", "/page", &[]).status == 200).then_some(())
    });
    let headers = dir.join("h2-headers.txt");
    let body = dir.join("h2-body.bin");
    let output = std::process::Command::new("curl")
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "--compressed",
            "--max-time",
            "10",
        ])
        .args(["-H", "Host: app.test", "-D"])
        .arg(&headers)
        .arg("-o")
        .arg(&body)
        .args(["-w", "%{http_version}"])
        .arg(format!("http://{}/page", serve.http))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "2");
    let headers = std::fs::read_to_string(&headers)
        .unwrap()
        .to_ascii_lowercase();
    assert!(headers.contains("content-encoding: gzip"), "{headers}");
    assert!(headers.contains("vary: accept-encoding"), "{headers}");
    assert!(!headers.contains("content-length"), "{headers}");
    // curl --compressed decoded it.
    assert!(std::fs::read(&body).unwrap() == page());
}

#[test]
fn a_streamed_body_arrives_compressed_in_pieces_before_the_upstream_ends() {
    let backend = Backend::start();
    let dir = config_dir("compression-stream", backend.addr, &[("use-gzip", "true")]);
    let serve = Serve::start(&dir, &[]);
    eventually(Duration::from_secs(10), "app.test routed", || {
        (fetch(&serve, "GET", "/page", &[]).status == 200).then_some(())
    });

    let mut stream = TcpStream::connect(serve.http).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(
            b"GET /stream HTTP/1.1\r\nHost: app.test\r\nAccept-Encoding: gzip\r\n\
              Connection: close\r\n\r\n",
        )
        .unwrap();
    // Read (and de-chunk) as bytes come, decoding as we go, until the first event is there:
    // the upstream is still holding its second one.
    let mut raw = Vec::new();
    let mut decoder = flate2::write::GzDecoder::new(Vec::new());
    let mut fed = 0;
    let mut head_end = None;
    let mut buf = [0u8; 4096];
    while !decoder.get_ref().ends_with(b"event one\n") {
        let n = stream
            .read(&mut buf)
            .expect("the first event, before the upstream's end");
        assert!(n > 0, "closed before the first event");
        raw.extend_from_slice(&buf[..n]);
        let Some(end) =
            head_end.or_else(|| raw.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4))
        else {
            continue;
        };
        head_end = Some(end);
        let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
        assert!(head.contains("content-encoding: gzip"), "{head}");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        // Whole chunks only.
        let mut at = end + fed;
        while let Some(line) = raw[at..].windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(std::str::from_utf8(&raw[at..at + line]).unwrap(), 16)
                .unwrap();
            let start = at + line + 2;
            if size == 0 || raw.len() < start + size + 2 {
                break;
            }
            decoder.write_all(&raw[start..start + size]).unwrap();
            decoder.flush().unwrap();
            at = start + size + 2;
        }
        fed = at - end;
    }
    assert_eq!(decoder.get_ref().as_slice(), b"event one\n");
    backend.release.send(()).unwrap();
    stream.read_to_end(&mut raw).unwrap();
    // The whole body, de-chunked, decodes to both events.
    let mut body = Vec::new();
    let mut data = &raw[head_end.unwrap()..];
    loop {
        let line = data.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&data[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            break;
        }
        body.extend_from_slice(&data[line + 2..line + 2 + size]);
        data = &data[line + 2 + size + 2..];
    }
    assert_eq!(gunzip(&body), b"event one\nevent two\n");
}

#[test]
fn bad_compression_keys_are_diagnosed_and_their_defaults_apply() {
    let backend = Backend::start();
    let dir = config_dir(
        "compression-keys",
        backend.addr,
        &[
            ("use-gzip", "true"),
            ("gzip-level", "10"),
            ("gzip-types", "text/css, text/html"),
            ("gzip-disable", "(?<!x)bot"),
            ("brotli-level", "twelve"),
        ],
    );
    let serve = Serve::start(&dir, &[]);
    let diagnostics = eventually(Duration::from_secs(10), "the keys diagnosed", || {
        let diagnostics = serve.config_json()["config"]["diagnostics"].to_string();
        diagnostics.contains("gzip-level").then_some(diagnostics)
    });
    for expected in [
        "data.gzip-level: invalid value \\\"10\\\": expected a level from 1 to 9",
        "data.gzip-types: invalid value \\\"text/css, text/html\\\"",
        "data.gzip-disable: invalid value",
        "data.brotli-level: invalid value \\\"twelve\\\": expected a level from 0 to 11",
    ] {
        assert!(
            diagnostics.contains(expected),
            "{expected} not in {diagnostics}"
        );
    }
    // use-gzip still applies, with the default level and types.
    let gzipped = eventually(Duration::from_secs(10), "app.test routed", || {
        let answer = fetch(&serve, "GET", "/page", &[GZIP]);
        (answer.status == 200).then_some(answer)
    });
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    assert!(gunzip(&gzipped.body) == page());
}
