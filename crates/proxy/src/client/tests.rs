use super::*;

fn parse(bytes: &[u8], is_head: bool) -> (Answer, BytesMut) {
    let mut buf = BytesMut::from(bytes);
    let mut spare = HeaderMap::new();
    loop {
        match parse_head(&mut buf, &mut spare, is_head, false).unwrap() {
            Parsed::Final(answer) => return (answer, buf),
            Parsed::Informational => continue,
            Parsed::Partial => panic!("incomplete head"),
        }
    }
}

/// Every body frame the buffered bytes give, and whether the body ended.
fn drain(framing: &mut Framing, buf: &mut BytesMut) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    loop {
        match framing.decode(buf).unwrap() {
            Decoded::Data(data) => body.extend_from_slice(&data),
            Decoded::End => return (body, true),
            Decoded::NeedMore => return (body, false),
        }
    }
}

#[test]
fn content_length_bodies_are_split_off_the_head() {
    let (mut answer, mut buf) = parse(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Id: 7\r\n\r\nhello",
        false,
    );
    assert_eq!(answer.response.status(), StatusCode::OK);
    assert_eq!(answer.response.headers()["x-id"], "7");
    assert_eq!(answer.response.headers()["content-length"], "5");
    assert!(answer.keep_alive);
    assert_eq!(answer.framing, Framing::Length(5));
    assert_eq!(
        drain(&mut answer.framing, &mut buf),
        (b"hello".to_vec(), true)
    );
}

#[test]
fn chunked_bodies_are_decoded_and_trailers_dropped() {
    let (mut answer, _) = parse(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        false,
    );
    assert_eq!(answer.framing, Framing::Chunked(Chunk::Size));
    assert!(!answer.response.headers().contains_key("transfer-encoding"));
    let wire = b"5;ext=1\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: 1\r\n\r\n";
    // Byte by byte: every state must cope with a split anywhere.
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut ended = false;
    for byte in wire {
        buf.extend_from_slice(&[*byte]);
        let (data, end) = drain(&mut answer.framing, &mut buf);
        body.extend_from_slice(&data);
        ended = end;
    }
    assert_eq!(body, b"hello world!");
    assert!(ended);
    assert!(buf.is_empty());

    let mut framing = Framing::Chunked(Chunk::Size);
    let mut buf = BytesMut::from(&b"zz\r\n"[..]);
    assert!(framing.decode(&mut buf).is_err());
}

#[test]
fn without_a_length_the_body_runs_until_close() {
    let (answer, buf) = parse(b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nsome", false);
    assert_eq!(answer.framing, Framing::UntilClose);
    assert!(!answer.keep_alive);
    assert_eq!(answer.response.version(), Version::HTTP_11);
    assert_eq!(&buf[..], b"some");
}

#[test]
fn head_204_and_304_have_no_body() {
    let (answer, _) = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n", true);
    assert_eq!(answer.framing, Framing::Empty);
    assert_eq!(answer.response.headers()["content-length"], "1024");
    for status in [204, 304] {
        let head = format!("HTTP/1.1 {status} X\r\n\r\n");
        let (answer, _) = parse(head.as_bytes(), false);
        assert_eq!(answer.framing, Framing::Empty);
        assert!(answer.keep_alive);
    }
}

#[test]
fn connection_headers_decide_reuse_and_are_consumed() {
    let (answer, _) = parse(
            b"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 0\r\n\r\n",
            false,
        );
    assert!(!answer.keep_alive);
    for gone in ["connection", "x-hop", "keep-alive"] {
        assert!(!answer.response.headers().contains_key(gone), "{gone}");
    }
    let (answer, _) = parse(
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
        false,
    );
    assert!(answer.keep_alive);
    let (answer, _) = parse(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
    assert!(!answer.keep_alive);
}

#[test]
fn informational_responses_are_skipped() {
    let (answer, buf) = parse(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
            false,
        );
    assert_eq!(answer.response.status(), StatusCode::CREATED);
    assert!(!answer.response.headers().contains_key("link"));
    assert_eq!(&buf[..], b"ok");
}

#[test]
fn conflicting_lengths_and_many_headers() {
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"[..]);
    let parsed = parse_head(&mut buf, &mut HeaderMap::new(), false, false);
    assert!(matches!(
        parsed,
        Err(ClientError::Framing(FramingError::ConflictingContentLength))
    ));

    let mut head = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n".to_vec();
    for i in 0..60 {
        head.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    let (answer, _) = parse(&head, false);
    assert_eq!(answer.response.headers().len(), 61);
}

#[test]
fn request_heads_are_origin_form_with_the_prepared_headers() {
    let (mut head, ()) = http::Request::post("/a?b=c")
        .header("host", "example.com")
        .header("x-one", "1")
        .body(())
        .unwrap()
        .into_parts();
    let ip = HeaderValue::from_static("192.0.2.1");
    let port = HeaderValue::from_static("80");
    let forwarded = headers::Forwarded::direct(&ip, &port, false);
    let added = headers::prepare_request(&mut head, &forwarded, false);
    let mut out = Vec::new();
    encode_head(&mut out, &head, Some(&added), RequestFraming::Chunked);
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.starts_with("POST /a?b=c HTTP/1.1\r\nhost: example.com\r\nx-one: 1\r\nx-request-id: "),
        "{text}"
    );
    assert!(
        text.contains("\r\nx-real-ip: 192.0.2.1\r\nx-forwarded-for: 192.0.2.1\r\n"),
        "{text}"
    );
    assert!(
        text.contains("\r\nx-forwarded-host: example.com\r\n"),
        "{text}"
    );
    assert!(
        text.ends_with("\r\ntransfer-encoding: chunked\r\n\r\n"),
        "{text}"
    );
    // Framing comes from the argument, never from the head's own headers.
    head.headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    head.headers.insert(
        header::TRANSFER_ENCODING,
        HeaderValue::from_static("chunked"),
    );
    encode_head(&mut out, &head, Some(&added), RequestFraming::Length(5));
    let text = String::from_utf8(out.clone()).unwrap();
    assert_eq!(text.matches("content-length").count(), 1, "{text}");
    assert!(!text.contains("transfer-encoding"), "{text}");
    assert!(text.ends_with("\r\ncontent-length: 5\r\n\r\n"), "{text}");
    assert_eq!(
        request_framing(&head, &RequestBody::Empty),
        RequestFraming::Length(0)
    );
    head.headers.clear();
    head.method = Method::GET;
    assert_eq!(
        request_framing(&head, &RequestBody::Empty),
        RequestFraming::None
    );
    head.uri = http::Uri::from_static("*");
    head.method = Method::OPTIONS;
    head.headers.clear();
    let added = headers::prepare_request(&mut head, &forwarded, false);
    encode_head(&mut out, &head, Some(&added), RequestFraming::None);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("OPTIONS * HTTP/1.1\r\nx-request-id: "),
        "{text}"
    );
    let mut line = [0u8; 18];
    assert_eq!(chunk_size_line(0x1a2b, &mut line), b"1a2b\r\n");
    assert_eq!(chunk_size_line(0, &mut line), b"0\r\n");
}
