use std::collections::VecDeque;
use std::io::Read;
use std::task::Waker;

use super::*;

fn head(version: Version, headers: &[(&str, &str)]) -> Parts {
    let mut request = http::Request::builder().uri("/").version(version);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(()).unwrap().into_parts().0
}

fn settings(gzip: bool, brotli: bool) -> Compression {
    Compression {
        use_gzip: gzip,
        enable_brotli: brotli,
        ..Compression::default()
    }
}

fn accepts_value(value: &str, coding: &[u8]) -> bool {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_str(value).unwrap(),
    );
    accepts(&headers, coding)
}

#[test]
fn accept_encoding_is_read_with_q_values() {
    for (value, gzip) in [
        ("gzip", true),
        ("gzip, deflate, br", true),
        ("deflate,GZIP", true),
        ("gzip;q=0.5", true),
        ("gzip ; Q = 0.001", true),
        ("gzip;q=1.000", true),
        ("gzip;q=0", false),
        ("gzip; q=0.000", false),
        ("gzip;q=1.5", false),
        ("gzip;q=abc", false),
        ("br;q=1, gzip;q=0", false),
        // nginx's reading: `*` and x-gzip do not stand for gzip.
        ("*", false),
        ("x-gzip", false),
        ("deflate", false),
        ("gzipx", false),
        ("", false),
    ] {
        assert_eq!(accepts_value(value, b"gzip"), gzip, "{value:?}");
    }
    assert!(accepts_value("gzip, deflate, br", b"br"));
    assert!(!accepts_value("gzip, br;q=0", b"br"));
    // Two header lines are one list.
    let mut headers = HeaderMap::new();
    headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static("deflate"));
    headers.append(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    assert!(accepts(&headers, b"gzip"));
}

#[test]
fn gzip_needs_http_1_1_and_a_user_agent_gzip_disable_leaves_alone() {
    let both = settings(true, true);
    let ae = ("accept-encoding", "gzip, br");
    let allowed_for = |version, headers: &[(&str, &str)], settings: &Compression| {
        allowed(&head(version, headers), settings)
    };
    let all = Allowed {
        gzip: true,
        brotli: true,
    };
    assert_eq!(allowed_for(Version::HTTP_11, &[ae], &both), all);
    assert_eq!(allowed_for(Version::HTTP_2, &[ae], &both), all);
    // gzip_http_version 1.1; ngx_brotli has no such check.
    let old = allowed_for(Version::HTTP_10, &[ae], &both);
    assert_eq!(
        old,
        Allowed {
            gzip: false,
            brotli: true
        }
    );
    let mut msie = settings(true, false);
    msie.gzip_disable = model::compression::GzipDisable::Msie6;
    let agent = (
        "user-agent",
        "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.0)",
    );
    assert!(!allowed_for(Version::HTTP_11, &[ae, agent], &msie).gzip);
    assert!(allowed_for(Version::HTTP_11, &[ae, ("user-agent", "curl/8")], &msie).gzip);
    // Off keys allow nothing.
    assert_eq!(
        allowed_for(Version::HTTP_11, &[ae], &settings(false, false)),
        Allowed::default()
    );
}

fn response_headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(
            header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    headers
}

const BOTH: Allowed = Allowed {
    gzip: true,
    brotli: true,
};

/// The coding `respond` chose and the headers it left.
fn decide(
    pairs: &[(&str, &str)],
    status: u16,
    method: Method,
    length: Option<u64>,
    allowed: Allowed,
    settings: &Compression,
) -> (Option<Coding>, HeaderMap) {
    let mut headers = response_headers(pairs);
    let status = StatusCode::from_u16(status).unwrap();
    let chosen = respond(&mut headers, status, &method, length, allowed, settings);
    (chosen.map(|c| c.coding), headers)
}

#[test]
fn gzip_applies_as_nginx_s_filter_decides() {
    let gzip = settings(true, false);
    let text = ("content-type", "text/plain; charset=utf-8");
    let get = |pairs: &[(&str, &str)], status, length| {
        decide(pairs, status, Method::GET, length, BOTH, &gzip).0
    };
    assert_eq!(get(&[text], 200, Some(1000)), Some(Coding::Gzip));
    assert_eq!(get(&[text], 200, None), Some(Coding::Gzip));
    assert_eq!(get(&[text], 403, None), Some(Coding::Gzip));
    assert_eq!(get(&[text], 404, None), Some(Coding::Gzip));
    for status in [201, 204, 206, 301, 304, 500, 502] {
        assert_eq!(get(&[text], status, None), None, "{status}");
    }
    // Below gzip-min-length (256) when known; empty.
    assert_eq!(get(&[text], 200, Some(255)), None);
    assert_eq!(get(&[text], 200, Some(256)), Some(Coding::Gzip));
    assert_eq!(get(&[text], 200, Some(0)), None);
    // Type not listed, none at all; text/html always.
    assert_eq!(get(&[("content-type", "image/png")], 200, None), None);
    assert_eq!(get(&[], 200, None), None);
    assert_eq!(
        get(&[("content-type", "TEXT/HTML")], 200, None),
        Some(Coding::Gzip)
    );
    // Already encoded; no-transform.
    assert_eq!(get(&[text, ("content-encoding", "br")], 200, None), None);
    assert_eq!(
        get(
            &[text, ("cache-control", "public, no-transform")],
            200,
            None
        ),
        None
    );
    // HEAD: nothing, not even Vary (nginx's header_only).
    let (chosen, headers) = decide(&[text], 200, Method::HEAD, None, BOTH, &gzip);
    assert_eq!(chosen, None);
    assert!(headers.get(header::VARY).is_none());
}

#[test]
fn a_compressed_response_loses_its_length_and_ranges_and_its_etag_weakens() {
    let gzip = settings(true, false);
    let (chosen, headers) = decide(
        &[
            ("content-type", "application/json"),
            ("content-length", "1000"),
            ("accept-ranges", "bytes"),
            ("etag", "\"abc\""),
            ("vary", "Origin"),
        ],
        200,
        Method::GET,
        Some(1000),
        BOTH,
        &gzip,
    );
    assert_eq!(chosen, Some(Coding::Gzip));
    assert_eq!(headers["content-encoding"], "gzip");
    assert!(headers.get("content-length").is_none());
    assert!(headers.get("accept-ranges").is_none());
    assert_eq!(headers["etag"], "W/\"abc\"");
    let vary: Vec<_> = headers.get_all("vary").iter().collect();
    assert_eq!(vary, ["Origin", "Accept-Encoding"]);

    // A weak ETag stays; one that is not a quoted string goes; Vary is not repeated.
    let (_, headers) = decide(
        &[
            ("content-type", "text/css"),
            ("etag", "W/\"x\""),
            ("vary", "accept-encoding"),
        ],
        200,
        Method::GET,
        None,
        BOTH,
        &gzip,
    );
    assert_eq!(headers["etag"], "W/\"x\"");
    assert_eq!(headers.get_all("vary").iter().count(), 1);
    let (_, headers) = decide(
        &[("content-type", "text/css"), ("etag", "abc")],
        200,
        Method::GET,
        None,
        BOTH,
        &gzip,
    );
    assert!(headers.get("etag").is_none());
}

#[test]
fn vary_goes_on_what_could_be_compressed_even_when_the_client_refuses() {
    let gzip = settings(true, false);
    let pairs = [("content-type", "text/plain"), ("etag", "\"e\"")];
    let (chosen, headers) = decide(&pairs, 200, Method::GET, None, Allowed::default(), &gzip);
    assert_eq!(chosen, None);
    assert_eq!(headers["vary"], "Accept-Encoding");
    assert_eq!(headers["etag"], "\"e\"");
    assert!(headers.get("content-encoding").is_none());
    // Not a type it would compress: no Vary.
    let (_, headers) = decide(
        &[("content-type", "image/png")],
        200,
        Method::GET,
        None,
        Allowed::default(),
        &gzip,
    );
    assert!(headers.get("vary").is_none());
}

#[test]
fn brotli_comes_first_when_both_apply_with_its_own_minimum_and_types() {
    let both = settings(true, true);
    let text = ("content-type", "text/plain");
    let get = |length, allowed| decide(&[text], 200, Method::GET, length, allowed, &both).0;
    assert_eq!(get(Some(1000), BOTH), Some(Coding::Brotli));
    let gzip_only = Allowed {
        gzip: true,
        brotli: false,
    };
    assert_eq!(get(Some(1000), gzip_only), Some(Coding::Gzip));
    // 100 bytes: over brotli-min-length (20), under gzip-min-length (256).
    assert_eq!(get(Some(100), BOTH), Some(Coding::Brotli));
    assert_eq!(get(Some(100), gzip_only), None);
    // brotli alone still says Vary (ingress-nginx's template would not).
    let brotli = settings(false, true);
    let (chosen, headers) = decide(&[text], 200, Method::GET, None, Allowed::default(), &brotli);
    assert_eq!(chosen, None);
    assert_eq!(headers["vary"], "Accept-Encoding");
}

/// A body beneath the compressor: the polls it answers, in order.
struct Script(VecDeque<Polled>);

impl Script {
    fn poll(&mut self) -> Polled {
        self.0.pop_front().unwrap_or(Poll::Ready(None))
    }
}

fn data(bytes: &[u8]) -> Polled {
    Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(bytes)))))
}

/// What the compressor answers to each poll, until the body ends.
fn drive(compressor: &mut Compressor, script: &mut Script) -> Vec<Poll<Option<Frame<Bytes>>>> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut polls = Vec::new();
    for _ in 0..10_000 {
        let poll = compressor.poll_frame(&mut cx, |_| script.poll());
        match poll {
            Poll::Ready(None) => return polls,
            Poll::Ready(Some(frame)) => polls.push(Poll::Ready(Some(frame.unwrap()))),
            Poll::Pending => polls.push(Poll::Pending),
        }
    }
    panic!("the body never ended");
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

fn joined(polls: &[Poll<Option<Frame<Bytes>>>]) -> Vec<u8> {
    polls
        .iter()
        .filter_map(|p| match p {
            Poll::Ready(Some(frame)) => frame.data_ref().map(|d| d.to_vec()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Text that compresses about as well as a web page.
fn page(len: usize) -> Vec<u8> {
    let mut text = Vec::new();
    let mut n = 0u64;
    while text.len() < len {
        text.extend_from_slice(
            format!("<li id=\"item-{n}\">entry {}</li>\n", n * 7919 % 1000).as_bytes(),
        );
        n += 1;
    }
    text.truncate(len);
    text
}

#[test]
fn what_is_fed_before_the_body_waits_goes_out_at_once_and_decodes() {
    for coding in [Coding::Gzip, Coding::Brotli] {
        let mut compressor = Compressor::new(coding, 1, None);
        // Each wait is answered Pending twice: once when the compressor flushes, once when
        // it asks again after handing the flushed frame over (a real body stays pending
        // until it wakes the task).
        let mut script = Script(VecDeque::from([
            data(b"data: one\n\n"),
            Poll::Pending,
            Poll::Pending,
            data(b"data: two\n\n"),
            Poll::Pending,
            Poll::Pending,
        ]));
        let polls = drive(&mut compressor, &mut script);
        // A frame before each wait: the event is not held back.
        let first_wait = polls.iter().position(|p| p.is_pending()).unwrap();
        assert!(first_wait > 0, "{coding:?}: nothing before the first wait");
        let before = joined(&polls[..first_wait]);
        // A sync flush makes what was fed decodable on its own: decode the prefix.
        let prefix = match coding {
            Coding::Gzip => {
                let mut out = vec![0; 100];
                let mut decoder = flate2::read::GzDecoder::new(&before[..]);
                let n = decoder.read(&mut out).unwrap();
                out.truncate(n);
                out
            }
            Coding::Brotli => {
                let mut out = vec![0; 100];
                let mut decoder = brotli::Decompressor::new(&before[..], 4096);
                let n = decoder.read(&mut out).unwrap();
                out.truncate(n);
                out
            }
        };
        assert_eq!(prefix, b"data: one\n\n", "{coding:?}");
        let all = joined(&polls);
        let decoded = match coding {
            Coding::Gzip => gunzip(&all),
            Coding::Brotli => unbrotli(&all),
        };
        assert_eq!(decoded, b"data: one\n\ndata: two\n\n");
        assert!(
            compressor.encoder.is_none(),
            "the encoder is freed at the end"
        );
        assert!(compressor.is_end_stream());
    }
}

#[test]
fn a_large_body_goes_out_in_bounded_frames_and_decodes_exactly() {
    let body = page(3 << 20);
    for (coding, level) in [(Coding::Gzip, 1), (Coding::Gzip, 9), (Coding::Brotli, 4)] {
        let mut compressor = Compressor::new(coding, level, Some(body.len() as u64));
        // One upstream frame of 1 MiB, then 64 KiB ones.
        let mut script = Script(
            std::iter::once(data(&body[..1 << 20]))
                .chain(body[1 << 20..].chunks(64 << 10).map(data))
                .collect(),
        );
        let polls = drive(&mut compressor, &mut script);
        assert!(polls.iter().all(|p| match p {
            Poll::Ready(Some(frame)) => frame.data_ref().unwrap().len() <= OUT_BUFFER,
            _ => true,
        }));
        let all = joined(&polls);
        assert!(
            all.len() < body.len() / 3,
            "{coding:?} {level}: {}",
            all.len()
        );
        let decoded = match coding {
            Coding::Gzip => gunzip(&all),
            Coding::Brotli => unbrotli(&all),
        };
        assert!(decoded == body, "{coding:?} {level}: decoded differs");
    }
}

#[test]
fn trailers_follow_the_finished_stream_and_an_empty_body_is_a_valid_stream() {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let mut compressor = Compressor::new(Coding::Gzip, 1, None);
    let mut script = Script(VecDeque::from([
        data(&page(1000)),
        Poll::Ready(Some(Ok(Frame::trailers(trailers.clone())))),
    ]));
    let polls = drive(&mut compressor, &mut script);
    let last = match polls.last().unwrap() {
        Poll::Ready(Some(frame)) => frame.trailers_ref().unwrap().clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(last, trailers);
    assert_eq!(gunzip(&joined(&polls)), page(1000));

    for coding in [Coding::Gzip, Coding::Brotli] {
        let mut compressor = Compressor::new(coding, 1, None);
        let polls = drive(&mut compressor, &mut Script(VecDeque::new()));
        let all = joined(&polls);
        let decoded = match coding {
            Coding::Gzip => gunzip(&all),
            Coding::Brotli => unbrotli(&all),
        };
        assert!(decoded.is_empty());
    }
}

#[test]
fn an_error_beneath_ends_the_body_and_frees_the_encoder() {
    let mut compressor = Compressor::new(Coding::Gzip, 1, None);
    let mut script = Script(VecDeque::from([
        data(&page(1000)),
        Poll::Ready(Some(Err("upstream reset".into()))),
    ]));
    let mut cx = Context::from_waker(Waker::noop());
    let mut saw_error = false;
    for _ in 0..10 {
        match compressor.poll_frame(&mut cx, |_| script.poll()) {
            Poll::Ready(Some(Err(_))) => saw_error = true,
            Poll::Ready(None) => break,
            _ => {}
        }
    }
    assert!(saw_error);
    assert!(compressor.encoder.is_none() && compressor.is_end_stream());
}
