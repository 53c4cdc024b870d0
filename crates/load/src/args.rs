//! `sluice load` flags (raw strings, as typed) and the validated [`Config`] built from them.
//!
//! Everything a person can get wrong is checked here, before any thread starts, and reported as a
//! [`ConfigError`] naming the flag and the value; the CLI turns it into exit code 2.

use std::fs;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Method, Uri};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::recorder::MAX_EARLY_SERIES;
use crate::tls::{cipher_suite, TlsOptions, Trust};

/// How errors are counted, for `--help` (the crate documentation says the same at more length).
const AFTER_HELP: &str = "\
Latency is measured from each request's intended start on the -R schedule (coordinated-omission
corrected, as wrk2); -U adds the latency from the actual send. Without -R the run is closed loop
(as wrk) and both are the same.

Errors count once per failed request, in one class: connect (TCP connect or TLS handshake failed or
timed out), read (reset, EOF or garbage before the response was complete), write, timeout (sent but
not complete within --timeout), status (a complete response >= 400). After any socket error the
connection is replaced. Unlike wrk2, a request stuck past --timeout is one timeout (wrk2 counts it
again every 2 s and keeps the connection), a connection the server closes mid-response is a read
error (wrk reconnects silently), and refused reconnects are not counted on their own: the request
that needed the connection is. Requests still in flight at the end are awaited up to --timeout;
requests a late connection never got to send are reported as unsent.

Exit status: 0 if every request succeeded, 1 if any failed (or none completed), 2 for bad input.";

/// `sluice load [OPTIONS] URL`: a wrk2-compatible constant-rate load generator.
#[derive(Clone, Debug, clap::Args)]
#[command(after_long_help = AFTER_HELP)]
pub struct LoadArgs {
    /// Target URL: http or https, host, optional port, path and query.
    #[arg(value_name = "URL")]
    pub url: String,

    /// OS threads, each with its own event loop and an equal share of the connections.
    #[arg(short = 't', long, value_name = "N", default_value = "2", value_parser = parse_count)]
    pub threads: u32,

    /// Connections to keep open, in total (at least one per thread).
    #[arg(short = 'c', long, value_name = "N", default_value = "10", value_parser = parse_count)]
    pub connections: u32,

    /// How long to measure, e.g. 30s, 5m, 1h, 500ms.
    #[arg(short = 'd', long, value_name = "DURATION", default_value = "10s")]
    pub duration: String,

    /// Constant request rate for all connections together (open loop), e.g. 30000 or 30k.
    /// Without it: closed loop, each connection as fast as it can (wrk).
    #[arg(short = 'R', long, value_name = "RPS")]
    pub rate: Option<String>,

    /// Print the full percentile distribution (wrk2 -L shape, to 99.9999%).
    #[arg(short = 'L', long)]
    pub latency: bool,

    /// Also print the uncorrected distribution (latency from the actual send); implies -L.
    #[arg(short = 'U', long = "u-latency", alias = "u_latency")]
    pub u_latency: bool,

    /// A request not complete this long after it was sent is a timeout; its connection is replaced.
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub timeout: String,

    /// Request header "Name: value"; repeatable. Host overrides the URL's host for routing, and
    /// SNI follows it; "Connection: close" implies --new-connection-per-request.
    #[arg(short = 'H', long = "header", value_name = "K: V")]
    pub headers: Vec<String>,

    /// Request method.
    #[arg(long, value_name = "M", default_value = "GET")]
    pub method: String,

    /// Send this file as the request body.
    #[arg(long, value_name = "FILE")]
    pub body: Option<PathBuf>,

    /// Connect to ADDR (host:port) whatever the URL's host, like curl --connect-to.
    #[arg(long, value_name = "ADDR")]
    pub connect_to: Option<String>,

    /// Open a new connection for every request and send "Connection: close" (the seeds' TPS test).
    #[arg(long)]
    pub new_connection_per_request: bool,

    /// Memory benchmarks: open --connections connections, send one request on each, then keep
    /// them all open and idle for --duration. Prints `idle: N open, F failed` once every
    /// connection is idle (and flushes), then `released` when it closes them.
    #[arg(long, conflicts_with_all = ["rate", "new_connection_per_request"])]
    pub hold_idle: bool,

    /// TLS session resumption. off: every new connection is a full handshake. on: sessions are
    /// cached and resumed across connections and threads.
    #[arg(long, value_name = "on|off", value_enum, default_value_t = TlsResumption::Off)]
    pub tls_resumption: TlsResumption,

    /// Offer only these TLS cipher suites, comma-separated, by OpenSSL or IANA name (e.g.
    /// ECDHE-RSA-AES256-GCM-SHA384, the seeds' suite); the TLS versions offered follow from them.
    #[arg(long, value_name = "SUITE[,SUITE...]")]
    pub tls_ciphers: Option<String>,

    /// Do not verify the server's certificate.
    #[arg(long, conflicts_with = "cacert")]
    pub insecure: bool,

    /// Trust the CA certificates in this PEM file instead of the built-in web roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Write machine-readable results (everything, including both histograms) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write the corrected latency as an HdrHistogram percentile distribution (.hgrm) to FILE.
    #[arg(long, value_name = "FILE")]
    pub hgrm: Option<PathBuf>,

    /// Run this long first, on the same schedule, without recording it, e.g. 5s.
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    pub warmup: String,

    /// Also record the first DURATION of the measurement per 100 ms (completions, latency, and
    /// how late the generator sent), in the --json file's early_series; at most 60s, 0s: off.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub early_series: String,

    /// Speak HTTP/2 (ALPN h2 over TLS, prior knowledge over plain TCP); one request at a time per
    /// connection, as with HTTP/1.1.
    #[arg(long)]
    pub http2: bool,

    /// gRPC unary calls over HTTP/2 (implies --http2): POST with `content-type:
    /// application/grpc` and `te: trailers`, the --body file (a serialized protobuf message, may
    /// be absent for an empty one) sent as one length-prefixed gRPC message. A call succeeds
    /// only with HTTP 200 and `grpc-status: 0`; any other grpc-status is a `status` error.
    #[arg(long)]
    pub grpc: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsResumption {
    On,
    Off,
}

/// A validated run: every field is in the form the driver uses.
#[derive(Clone, Debug)]
pub struct Config {
    pub target: Target,
    pub threads: NonZeroU32,
    pub connections: NonZeroU32,
    pub duration: Duration,
    pub warmup: Duration,
    /// `--early-series`: how much of the measurement's start is also recorded per 100 ms.
    pub early_series: Duration,
    /// Requests per second for the whole run; `None` is closed loop.
    pub rate: Option<f64>,
    pub timeout: Duration,
    pub method: Method,
    /// Extra request headers, in order (Host is in `target.host_header`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    pub new_connection_per_request: bool,
    /// `--hold-idle`: one request per connection, then idle for `duration`.
    pub hold_idle: bool,
    pub http2: bool,
    /// `--grpc`: the body is framed as a gRPC message and the answer judged by grpc-status.
    pub grpc: bool,
    pub tls: TlsOptions,
    pub output: Output,
}

/// Where requests go and what they say about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    pub https: bool,
    /// The URL's host (without brackets for IPv6) and port.
    pub host: String,
    pub port: u16,
    /// Path and query, at least "/".
    pub path: String,
    /// The Host header: `-H Host:` if given, else the URL's authority.
    pub host_header: String,
    /// The TLS server name: the Host header's host part.
    pub server_name: String,
    /// `--connect-to`, as host and port, to resolve instead of the URL's host.
    pub connect_to: Option<(String, u16)>,
}

#[derive(Clone, Debug, Default)]
pub struct Output {
    pub latency: bool,
    pub u_latency: bool,
    pub json: Option<PathBuf>,
    pub hgrm: Option<PathBuf>,
}

/// Bad input, naming the flag and the value so the person can fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("URL {value:?}: {reason}")]
    Url { value: String, reason: String },
    #[error("{flag} {value:?}: {reason}")]
    Invalid {
        flag: &'static str,
        value: String,
        reason: String,
    },
    #[error("{flag} {path:?}: cannot read the file")]
    File {
        flag: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl TryFrom<LoadArgs> for Config {
    type Error = ConfigError;

    fn try_from(args: LoadArgs) -> Result<Config, ConfigError> {
        let threads = NonZeroU32::new(args.threads)
            .ok_or_else(|| invalid("--threads", "0", "must be at least 1"))?;
        let connections = NonZeroU32::new(args.connections)
            .ok_or_else(|| invalid("--connections", "0", "must be at least 1"))?;
        if connections < threads {
            return Err(invalid(
                "--connections",
                &connections.to_string(),
                &format!("must be at least --threads ({threads})"),
            ));
        }
        let duration = parse_duration(&args.duration)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| invalid("--duration", &args.duration, DURATION_HINT))?;
        let timeout = parse_duration(&args.timeout)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| invalid("--timeout", &args.timeout, DURATION_HINT))?;
        let warmup = parse_duration(&args.warmup)
            .ok_or_else(|| invalid("--warmup", &args.warmup, DURATION_HINT))?;
        let early_series = parse_duration(&args.early_series)
            .ok_or_else(|| invalid("--early-series", &args.early_series, DURATION_HINT))?;
        if early_series > MAX_EARLY_SERIES {
            return Err(invalid(
                "--early-series",
                &args.early_series,
                &format!(
                    "at most {}s (each 100 ms is kept in memory)",
                    MAX_EARLY_SERIES.as_secs()
                ),
            ));
        }
        let rate = match &args.rate {
            None => None,
            Some(raw) => Some(
                parse_metric(raw)
                    .filter(|r| r.is_finite() && *r > 0.0)
                    .ok_or_else(|| {
                        invalid(
                            "--rate",
                            raw,
                            "expected requests per second like 1000 or 30k",
                        )
                    })?,
            ),
        };
        let method = Method::from_bytes(args.method.as_bytes())
            .map_err(|_| invalid("--method", &args.method, "not a valid HTTP method"))?;
        let method = match (args.grpc, method) {
            (false, method) => method,
            (true, Method::GET | Method::POST) => Method::POST,
            (true, _) => {
                return Err(invalid("--method", &args.method, "gRPC calls are POSTs"));
            }
        };

        let RequestHeaders {
            headers,
            host_override,
            close,
        } = request_headers(&args)?;

        let target = parse_target(&args.url, host_override, args.connect_to.as_deref())?;
        let body = match &args.body {
            None => Bytes::new(),
            Some(path) => Bytes::from(fs::read(path).map_err(|source| ConfigError::File {
                flag: "--body",
                path: path.clone(),
                source,
            })?),
        };
        let trust = trust(&args)?;

        let cipher_suites = args.tls_ciphers.as_deref().map(cipher_suites).transpose()?;

        Ok(Config {
            target,
            threads,
            connections,
            duration,
            warmup,
            early_series,
            rate,
            timeout,
            method,
            headers,
            body,
            new_connection_per_request: close,
            hold_idle: args.hold_idle,
            http2: args.http2 || args.grpc,
            grpc: args.grpc,
            tls: TlsOptions {
                resumption: args.tls_resumption == TlsResumption::On,
                trust,
                cipher_suites,
            },
            output: Output {
                latency: args.latency || args.u_latency,
                u_latency: args.u_latency,
                json: args.json,
                hgrm: args.hgrm,
            },
        })
    }
}

/// What `--header`s say.
struct RequestHeaders {
    /// The request's own.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// A `Host` header: it overrides the URL's.
    host_override: Option<String>,
    /// `Connection: close` among them, or `--new-connection-per-request`.
    close: bool,
}

/// `--header`s, checked (the body's framing is not theirs to set).
fn request_headers(args: &LoadArgs) -> Result<RequestHeaders, ConfigError> {
    let mut headers = Vec::new();
    let mut host_override = None;
    let mut close = args.new_connection_per_request;
    for raw in &args.headers {
        let (name, value) = parse_header(raw)?;
        if name == http::header::HOST {
            let host = value
                .to_str()
                .map_err(|_| invalid("--header", raw, "Host must be visible ASCII"))?;
            host_override = Some(host.to_owned());
            continue;
        }
        if name == http::header::CONTENT_LENGTH || name == http::header::TRANSFER_ENCODING {
            return Err(invalid(
                "--header",
                raw,
                "the body's framing comes from --body; drop this header",
            ));
        }
        if name == http::header::CONNECTION
            && value
                .as_bytes()
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
        {
            close = true;
        }
        headers.push((name, value));
    }
    Ok(RequestHeaders {
        headers,
        host_override,
        close,
    })
}

/// Which server certificates are trusted: `--insecure`, `--cacert`, or the web's roots.
fn trust(args: &LoadArgs) -> Result<Trust, ConfigError> {
    let trust = if args.insecure {
        Trust::Insecure
    } else if let Some(path) = &args.cacert {
        let file_error = |source| ConfigError::File {
            flag: "--cacert",
            path: path.clone(),
            source,
        };
        let pem = fs::read(path).map_err(file_error)?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("--cacert", &path.display().to_string(), &e.to_string()))?;
        if certs.is_empty() {
            return Err(invalid(
                "--cacert",
                &path.display().to_string(),
                "no PEM certificates in the file",
            ));
        }
        Trust::Roots(certs)
    } else {
        Trust::WebRoots
    };
    Ok(trust)
}

/// `--tls-ciphers`: each name a cipher suite the TLS library offers.
fn cipher_suites(list: &str) -> Result<Vec<rustls::SupportedCipherSuite>, ConfigError> {
    list.split(',')
        .map(|name| {
            cipher_suite(name.trim()).ok_or_else(|| {
                invalid(
                    "--tls-ciphers",
                    name,
                    "not a cipher suite Sluice's TLS library offers",
                )
            })
        })
        .collect()
}

const DURATION_HINT: &str = "expected a duration like 30s, 5m, 1h or 500ms";

fn invalid(flag: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        flag,
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

/// `30s`, `5m`, `1h`, `500ms`, `1.5s`, `2` (seconds, as wrk). Not model's nginx-syntax parser on
/// purpose: the load generator shares no code with what it measures.
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let raw = raw.trim();
    let split = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "us" | "µs" => number / 1_000_000.0,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

/// A number with an optional SI suffix, as wrk: `1000`, `30k`, `1.5M`.
pub fn parse_metric(raw: &str) -> Option<f64> {
    let raw = raw.trim();
    let (number, scale) = match raw.char_indices().last()? {
        (i, 'k' | 'K') => (&raw[..i], 1e3),
        (i, 'M') => (&raw[..i], 1e6),
        (i, 'G') => (&raw[..i], 1e9),
        _ => (raw, 1.0),
    };
    let value: f64 = number.trim().parse().ok()?;
    Some(value * scale)
}

fn parse_count(raw: &str) -> Result<u32, String> {
    parse_metric(raw)
        .filter(|v| v.fract() == 0.0 && *v >= 0.0 && *v <= f64::from(u32::MAX))
        .map(|v| v as u32)
        .ok_or_else(|| format!("expected a whole number like 10 or 1k, got {raw:?}"))
}

/// `Name: value`, both checked against HTTP's rules.
pub fn parse_header(raw: &str) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let (name, value) = raw
        .split_once(':')
        .ok_or_else(|| invalid("--header", raw, "expected \"Name: value\""))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| invalid("--header", raw, "the name is not a valid header name"))?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| {
        invalid(
            "--header",
            raw,
            "the value has characters HTTP does not allow",
        )
    })?;
    Ok((name, value))
}

fn parse_target(
    url: &str,
    host_override: Option<String>,
    connect_to: Option<&str>,
) -> Result<Target, ConfigError> {
    let bad = |reason: &str| ConfigError::Url {
        value: url.to_owned(),
        reason: reason.to_owned(),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        Some(_) => return Err(bad("the scheme must be http or https")),
        None => return Err(bad("expected an absolute URL like http://host:port/path")),
    };
    let authority = uri.authority().ok_or_else(|| bad("the URL has no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("user information in the URL is not supported"));
    }
    let host = unbracket(authority.host());
    if host.is_empty() {
        return Err(bad("the URL has no host"));
    }
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri
        .path_and_query()
        .map(|p| p.as_str())
        .filter(|p| !p.is_empty())
        .unwrap_or("/")
        .to_owned();
    let host_header = host_override.unwrap_or_else(|| authority.as_str().to_owned());
    let server_name = host_part(&host_header);
    if https {
        rustls::pki_types::ServerName::try_from(server_name.clone()).map_err(|_| {
            invalid(
                "--header",
                &format!("Host: {host_header}"),
                "not usable as a TLS server name",
            )
        })?;
    }
    let connect_to = connect_to
        .map(|raw| {
            split_host_port(raw).ok_or_else(|| {
                invalid(
                    "--connect-to",
                    raw,
                    "expected host:port, e.g. 127.0.0.1:8443",
                )
            })
        })
        .transpose()?;
    Ok(Target {
        url: url.to_owned(),
        https,
        host: host.to_owned(),
        port,
        path,
        host_header,
        server_name,
        connect_to,
    })
}

/// The host of a `host[:port]` Host header, without IPv6 brackets.
fn host_part(host_header: &str) -> String {
    match split_host_port(host_header) {
        Some((host, _)) => host,
        None => unbracket(host_header).to_owned(),
    }
}

fn split_host_port(raw: &str) -> Option<(String, u16)> {
    let (host, port) = raw.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']')?;
        inner.parse::<IpAddr>().ok()?;
        return Some((inner.to_owned(), port));
    }
    if host.is_empty() || host.contains(':') {
        return None;
    }
    Some((host.to_owned(), port))
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadArgs,
    }

    fn args(argv: &[&str]) -> LoadArgs {
        Cli::try_parse_from(std::iter::once("load").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    fn config(argv: &[&str]) -> Result<Config, ConfigError> {
        Config::try_from(args(argv))
    }

    fn error(argv: &[&str]) -> String {
        config(argv).unwrap_err().to_string()
    }

    #[test]
    fn durations_parse_like_wrk() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("abc"), None);
        assert_eq!(parse_duration("10x"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn metrics_take_si_suffixes() {
        assert_eq!(parse_metric("30k"), Some(30_000.0));
        assert_eq!(parse_metric("1.5M"), Some(1_500_000.0));
        assert_eq!(parse_metric("250"), Some(250.0));
        assert_eq!(parse_metric("k"), None);
        assert_eq!(parse_count("1k"), Ok(1000));
        assert!(parse_count("1.5").is_err());
    }

    #[test]
    fn a_full_command_line_becomes_a_config() {
        let c = config(&[
            "-t",
            "2",
            "-c",
            "100",
            "-d",
            "30s",
            "-R",
            "30k",
            "--timeout",
            "1s",
            "-H",
            "Host: app.example.com",
            "-H",
            "X-Test: yes",
            "--connect-to",
            "127.0.0.1:8443",
            "--tls-resumption",
            "on",
            "--insecure",
            "--warmup",
            "5s",
            "-U",
            "https://10.0.0.1/a?b=1",
        ])
        .unwrap();
        assert_eq!(c.threads.get(), 2);
        assert_eq!(c.connections.get(), 100);
        assert_eq!(c.duration, Duration::from_secs(30));
        assert_eq!(c.warmup, Duration::from_secs(5));
        assert_eq!(c.timeout, Duration::from_secs(1));
        assert_eq!(c.rate, Some(30_000.0));
        assert_eq!(c.headers.len(), 1);
        assert!(c.tls.resumption);
        assert!(matches!(c.tls.trust, Trust::Insecure));
        assert!(c.output.latency && c.output.u_latency);
        assert!(!c.new_connection_per_request);
        assert_eq!(
            c.target,
            Target {
                url: "https://10.0.0.1/a?b=1".into(),
                https: true,
                host: "10.0.0.1".into(),
                port: 443,
                path: "/a?b=1".into(),
                host_header: "app.example.com".into(),
                server_name: "app.example.com".into(),
                connect_to: Some(("127.0.0.1".into(), 8443)),
            }
        );
    }

    #[test]
    fn defaults_are_wrks() {
        let c = config(&["http://[::1]:8080"]).unwrap();
        assert_eq!((c.threads.get(), c.connections.get()), (2, 10));
        assert_eq!(c.duration, Duration::from_secs(10));
        assert_eq!(c.timeout, Duration::from_secs(2));
        assert_eq!(c.rate, None);
        assert_eq!(c.early_series, Duration::from_secs(5));
        assert!(!c.tls.resumption);
        assert_eq!(c.target.host, "::1");
        assert_eq!(c.target.host_header, "[::1]:8080");
        assert_eq!(c.target.server_name, "::1");
        assert_eq!(c.target.path, "/");
    }

    #[test]
    fn connection_close_header_implies_a_connection_per_request() {
        let c = config(&["-H", "Connection: close", "http://h/"]).unwrap();
        assert!(c.new_connection_per_request);
    }

    #[test]
    fn bad_input_names_the_flag_and_the_value() {
        assert_eq!(
            error(&["-d", "abc", "http://h/"]),
            "--duration \"abc\": expected a duration like 30s, 5m, 1h or 500ms"
        );
        assert!(error(&["--timeout", "0s", "http://h/"]).starts_with("--timeout \"0s\""));
        assert!(error(&["--warmup", "soon", "http://h/"]).starts_with("--warmup \"soon\""));
        assert_eq!(
            error(&["--early-series", "61s", "http://h/"]),
            "--early-series \"61s\": at most 60s (each 100 ms is kept in memory)"
        );
        assert_eq!(
            config(&["--early-series", "60s", "http://h/"])
                .unwrap()
                .early_series,
            Duration::from_secs(60)
        );
        assert!(config(&["--early-series", "0s", "http://h/"])
            .unwrap()
            .early_series
            .is_zero());
        assert_eq!(
            error(&["-H", "NoColon", "http://h/"]),
            "--header \"NoColon\": expected \"Name: value\""
        );
        assert!(error(&["-H", "Bad Name: v", "http://h/"]).starts_with("--header \"Bad Name: v\""));
        assert!(error(&["-R", "fast", "http://h/"]).starts_with("--rate \"fast\""));
        assert!(error(&["-R", "0", "http://h/"]).starts_with("--rate \"0\""));
        assert!(error(&["-t", "4", "-c", "2", "http://h/"]).starts_with("--connections \"2\""));
        assert!(error(&["--connect-to", "nowhere", "http://h/"])
            .starts_with("--connect-to \"nowhere\""));
        assert!(error(&["--body", "/nonexistent/file", "http://h/"])
            .starts_with("--body \"/nonexistent/file\""));
        assert!(error(&["--method", "GE T", "http://h/"]).starts_with("--method \"GE T\""));
        assert!(error(&["-H", "Content-Length: 5", "http://h/"]).starts_with("--header"));
        for url in ["not a url", "ftp://h/", "/just/a/path", "http://user@h/"] {
            assert!(
                error(&[url]).starts_with(&format!("URL {url:?}: ")),
                "{url}"
            );
        }
    }

    #[test]
    fn it_plugs_into_a_subcommand_enum_as_the_sluice_cli_uses_it() {
        #[derive(Parser)]
        #[command(name = "sluice", version)]
        struct Sluice {
            #[command(subcommand)]
            command: Command,
        }
        #[derive(clap::Subcommand)]
        enum Command {
            /// A wrk2-compatible load generator.
            Load(LoadArgs),
        }
        let cli =
            Sluice::try_parse_from(["sluice", "load", "-t1", "-c", "5", "-R", "1k", "http://h/"])
                .unwrap();
        let Command::Load(args) = cli.command;
        assert_eq!((args.threads, args.connections), (1, 5));
        assert_eq!(args.rate.as_deref(), Some("1k"));
        let mut command = <Sluice as clap::CommandFactory>::command();
        command.build();
        let help = command
            .find_subcommand_mut("load")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("--new-connection-per-request"));
        assert!(help.contains("Errors count once per failed request"));
    }

    #[test]
    fn clap_rejects_malformed_numbers_and_unknown_values() {
        let parse = |argv: &[&str]| {
            Cli::try_parse_from(std::iter::once("load").chain(argv.iter().copied())).map(|_| ())
        };
        assert!(parse(&["-c", "ten", "http://h/"]).is_err());
        assert!(parse(&["--tls-resumption", "maybe", "http://h/"]).is_err());
        assert!(parse(&["--insecure", "--cacert", "x.pem", "http://h/"]).is_err());
        assert!(parse(&[]).is_err());
        let err = Cli::try_parse_from(["load", "-c", "ten", "http://h/"])
            .err()
            .unwrap();
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn grpc_calls_are_http2_posts() {
        let c = config(&[
            "--grpc",
            "http://h:50051/grpc.testing.TestService/UnaryCall",
        ])
        .unwrap();
        assert!(c.grpc && c.http2);
        assert_eq!(c.method, Method::POST);
        assert!(
            error(&["--grpc", "--method", "PUT", "http://h/s/m"]).contains("gRPC calls are POSTs")
        );
        assert!(!config(&["http://h/"]).unwrap().grpc);
    }
}
