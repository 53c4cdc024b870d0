//! The TLS ClientHello's server name (SNI), read out of the first TLS record a client sends,
//! for TLS passthrough: which host a connection is for, before any byte is taken off the
//! socket (proxy's `passthrough` peeks; this reads what it peeked).
//!
//! ```text
//!  peeked bytes ─▶ client_hello_name ─▶ record (type 22, length) ─▶ handshake (type 1,
//!     ClientHello, all in this record) ─▶ skip version, random, session, suites, compression
//!     ─▶ extensions ─▶ server_name (type 0) ─▶ host_name (type 0)
//!        Named(name as sent: letters, digits, `-`, `.`)
//!        │ Anonymous (not a ClientHello, none or a bad name, or not all in this record)
//!        │ Incomplete (a prefix of a record: peek again with more bytes)
//! ```
//! Only a ClientHello that fits in one record is read (RFC 8446 lets one span records; the
//! caller terminates such a connection itself, as if its name were not a passthrough host).

/// What the first bytes say.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello<'a> {
    /// A ClientHello naming this server (as sent: the caller lower-cases it).
    Named(&'a str),
    /// A ClientHello without SNI, or not a ClientHello at all: terminated here (the handshake
    /// code decides what to answer).
    Anonymous,
    /// More bytes needed.
    Incomplete,
}

/// Reads the SNI host name out of a TLS record holding a ClientHello (RFC 8446 4.1.2,
/// RFC 6066 3).
pub fn client_hello_name(bytes: &[u8]) -> Hello<'_> {
    // Record: type 22 (handshake), version, length.
    if bytes.len() < 5 {
        return if bytes.first().is_none_or(|b| *b == 22) {
            Hello::Incomplete
        } else {
            Hello::Anonymous
        };
    }
    if bytes[0] != 22 {
        return Hello::Anonymous;
    }
    let record_length = usize::from(u16::from_be_bytes([bytes[3], bytes[4]]));
    if bytes.len() < 5 + record_length {
        return Hello::Incomplete;
    }
    let mut reader = Reader(&bytes[5..5 + record_length]);
    read_name(&mut reader).map_or(Hello::Anonymous, Hello::Named)
}

/// The ClientHello's server name, if it is all in this record and has one.
fn read_name<'a>(r: &mut Reader<'a>) -> Option<&'a str> {
    // Handshake: type 1 (ClientHello), 24-bit length; the body must be in this record.
    if r.u8()? != 1 {
        return None;
    }
    let length = r.u24()?;
    let mut body = Reader(r.take(length)?);
    body.take(2 + 32)?; // legacy_version, random
    let session = usize::from(body.u8()?);
    body.take(session)?;
    let suites = usize::from(body.u16()?);
    body.take(suites)?;
    let compression = usize::from(body.u8()?);
    body.take(compression)?;
    let extensions = usize::from(body.u16()?);
    let mut extensions = Reader(body.take(extensions)?);
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let length = usize::from(extensions.u16()?);
        let mut data = Reader(extensions.take(length)?);
        if kind != 0 {
            continue;
        }
        let list = usize::from(data.u16()?);
        let mut names = Reader(data.take(list)?);
        while !names.0.is_empty() {
            let name_type = names.u8()?;
            let length = usize::from(names.u16()?);
            let name = names.take(length)?;
            if name_type == 0 {
                let name = std::str::from_utf8(name).ok()?;
                // A host name: letters, digits, hyphens and dots (RFC 6066: no trailing dot).
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
                return valid.then_some(name);
            }
        }
        return None;
    }
    None
}

/// Big-endian reads off a byte slice; `None` past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    }
}
