//! What a request gets back: one `match` on the path, static buffers for the fixed-size files.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, HOST};
use http::{HeaderMap, Request, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use crate::body::ResponseBody;

/// Size of the largest file; the other files are prefixes of the same buffer.
const ONE_MB: usize = 1 << 20;

/// Frame size for the 1 MB file: the connection writes it as it goes rather than as one 1 MB write.
const FILE_FRAME: usize = 64 * 1024;

/// The `/` page is padded to this size so it weighs what the seeds' NGINX "hello" page weighs.
const HELLO_SIZE: usize = 1024;

/// Upper bound for `/slow?ms=N`, so a typo cannot pin a connection for hours.
const MAX_SLOW_MS: u64 = 300_000;

const TEXT: &str = "text/plain; charset=utf-8";
const OCTETS: &str = "application/octet-stream";
const JSON: &str = "application/json";

/// The bytes behind every fixed-size file. Zeros, so the buffer sits in `.bss` and costs no binary
/// size; serving a file is `Bytes::from_static` on a prefix of it: no allocation, no copy.
static ZEROS: [u8; ONE_MB] = [0; ONE_MB];

/// What every connection of one backend shares.
#[derive(Debug)]
pub(crate) struct Site {
    pub(crate) name: String,
    /// Requests whose handler has started and not yet finished (or been dropped).
    pub(crate) in_flight: AtomicUsize,
}

/// One accepted connection: the address it arrived on and the site serving it.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) local: SocketAddr,
    pub(crate) site: Arc<Site>,
}

/// Counts a request in `Site::in_flight` for as long as its handler future lives, including when
/// the connection is dropped mid-request.
struct InFlight<'a>(&'a AtomicUsize);

impl Site {
    pub(crate) fn new(name: String) -> Self {
        Self {
            name,
            in_flight: AtomicUsize::new(0),
        }
    }
}

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers one request. Never fails: every problem is a status code.
pub(crate) async fn handle(req: Request<Incoming>, conn: &Conn) -> Response<ResponseBody> {
    let _in_flight = InFlight::enter(&conn.site.in_flight);
    match req.uri().path() {
        "/" => hello(&req, conn),
        "/healthz" => respond(StatusCode::OK, TEXT, ResponseBody::full("ok")),
        "/0kb.bin" => file(0),
        "/1kb.bin" => file(1024),
        "/1mb.bin" => file(ONE_MB),
        // `/echo/...` too: which backend saw which path is what routing tests ask.
        p if p == "/echo" || p.starts_with("/echo/") => echo(req, conn).await,
        "/slow" => slow(req.uri().query()).await,
        path => match path.strip_prefix("/status/") {
            Some(code) => status(code),
            None => respond(
                StatusCode::NOT_FOUND,
                TEXT,
                ResponseBody::full("not found\n"),
            ),
        },
    }
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: ResponseBody,
) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn file(len: usize) -> Response<ResponseBody> {
    let bytes = Bytes::from_static(&ZEROS[..len]);
    respond(
        StatusCode::OK,
        OCTETS,
        ResponseBody::framed(bytes, FILE_FRAME),
    )
}

fn hello(req: &Request<Incoming>, conn: &Conn) -> Response<ResponseBody> {
    let request_id = header_text(req.headers(), "x-request-id");
    let text = hello_text(
        conn.local,
        &conn.site.name,
        &httpdate::fmt_http_date(SystemTime::now()),
        req.uri(),
        request_id.as_deref().unwrap_or("-"),
    );
    respond(StatusCode::OK, TEXT, ResponseBody::full(text))
}

/// The `/` page: the fields of the NGINX "hello" demo, then a padding line that brings the page to
/// `HELLO_SIZE` bytes, so response size does not depend on name or URI length (unless huge).
fn hello_text(local: SocketAddr, name: &str, date: &str, uri: &Uri, request_id: &str) -> String {
    const PAD_PREFIX: &str = "Padding: ";
    let mut text = String::with_capacity(HELLO_SIZE);
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "Server address: {local}\nServer name: {name}\nDate: {date}\n\
         URI: {uri}\nRequest ID: {request_id}\n"
    );
    let room = HELLO_SIZE.saturating_sub(text.len());
    if room > PAD_PREFIX.len() + 1 {
        text.push_str(PAD_PREFIX);
        text.extend(std::iter::repeat_n('.', room - PAD_PREFIX.len() - 1));
        text.push('\n');
    }
    text
}

async fn echo(req: Request<Incoming>, conn: &Conn) -> Response<ResponseBody> {
    let (parts, mut body) = req.into_parts();
    // Count the body instead of collecting it: a large upload should not cost a large buffer.
    let mut body_bytes: u64 = 0;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    body_bytes += data.len() as u64;
                }
            }
            Err(e) => {
                let text = format!("echo: reading the request body: {e}\n");
                return respond(StatusCode::BAD_REQUEST, TEXT, ResponseBody::full(text));
            }
        }
    }

    // serde_json's Map is sorted, so the output is stable whatever order the headers came in.
    let mut headers = Map::new();
    for name in parts.headers.keys() {
        let values: Vec<_> = parts
            .headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()))
            .collect();
        headers.insert(name.as_str().to_owned(), Value::from(values.join(", ")));
    }
    let host = header_text(&parts.headers, HOST.as_str())
        .or_else(|| parts.uri.authority().map(ToString::to_string));

    let doc = json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "host": host,
        "headers": headers,
        "backend": conn.site.name,
        "body_bytes": body_bytes,
    });
    let mut text = doc.to_string();
    text.push('\n');
    respond(StatusCode::OK, JSON, ResponseBody::full(text))
}

async fn slow(query: Option<&str>) -> Response<ResponseBody> {
    match slow_delay(query) {
        Some(delay) => {
            tokio::time::sleep(delay).await;
            let text = format!("slept {} ms\n", delay.as_millis());
            respond(StatusCode::OK, TEXT, ResponseBody::full(text))
        }
        None => {
            let text = format!("slow: want ?ms=N with N in 0..={MAX_SLOW_MS}\n");
            respond(StatusCode::BAD_REQUEST, TEXT, ResponseBody::full(text))
        }
    }
}

/// `ms=N` from a query string, if present and within bounds.
fn slow_delay(query: Option<&str>) -> Option<Duration> {
    let ms = query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("ms="))?
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms <= MAX_SLOW_MS)?;
    Some(Duration::from_millis(ms))
}

fn status(code: &str) -> Response<ResponseBody> {
    match parse_status(code) {
        Ok(status) if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED => {
            // These statuses must not carry a body.
            respond(status, TEXT, ResponseBody::empty())
        }
        Ok(status) => {
            let text = format!("status {}\n", status.as_u16());
            respond(status, TEXT, ResponseBody::full(text))
        }
        Err(reason) => {
            let text = format!("status: {reason}\n");
            respond(StatusCode::BAD_REQUEST, TEXT, ResponseBody::full(text))
        }
    }
}

/// A final status from its three digits. 1xx is refused: it cannot end an exchange.
fn parse_status(code: &str) -> Result<StatusCode, &'static str> {
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err("want three digits, as in /status/503");
    }
    let status = StatusCode::from_bytes(code.as_bytes()).map_err(|_| "not a status code")?;
    if status.is_informational() {
        return Err("1xx is not a final status");
    }
    Ok(status)
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_is_padded_to_a_fixed_size() {
        let uri: Uri = "/some/path?x=1".parse().unwrap();
        let text = hello_text(
            "127.0.0.1:8080".parse().unwrap(),
            "pod-a",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            &uri,
            "-",
        );
        assert_eq!(text.len(), HELLO_SIZE);
        assert!(text.starts_with(
            "Server address: 127.0.0.1:8080\nServer name: pod-a\n\
             Date: Thu, 01 Jan 1970 00:00:00 GMT\nURI: /some/path?x=1\nRequest ID: -\nPadding: ..."
        ));
        assert!(text.ends_with(".\n"));
    }

    #[test]
    fn hello_grows_past_the_pad_size_rather_than_truncating() {
        let uri: Uri = format!("/{}", "a".repeat(2000)).parse().unwrap();
        let text = hello_text("[::1]:80".parse().unwrap(), "n", "d", &uri, "-");
        assert!(text.len() > HELLO_SIZE);
        assert!(!text.contains("Padding"));
    }

    #[test]
    fn slow_delay_reads_ms_within_bounds() {
        assert_eq!(slow_delay(Some("ms=250")), Some(Duration::from_millis(250)));
        assert_eq!(slow_delay(Some("a=1&ms=0")), Some(Duration::ZERO));
        assert_eq!(slow_delay(Some("ms=-1")), None);
        assert_eq!(slow_delay(Some("ms=300001")), None);
        assert_eq!(slow_delay(Some("xms=5")), None);
        assert_eq!(slow_delay(None), None);
    }

    #[test]
    fn parse_status_takes_final_statuses_only() {
        assert_eq!(parse_status("503"), Ok(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(parse_status("599").map(|s| s.as_u16()), Ok(599));
        assert!(parse_status("101").is_err());
        assert!(parse_status("50").is_err());
        assert!(parse_status("5033").is_err());
        assert!(parse_status("+50").is_err());
        assert!(parse_status("abc").is_err());
    }
}
