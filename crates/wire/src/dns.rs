//! DNS messages (RFC 1035) for resolving the names of Services of type ExternalName: the
//! query Sluice sends and what the reply says. Bytes in, meaning out: the socket, resolv.conf,
//! retries (over TCP after `Truncated`) and caching by TTL are the resolver's. A reply comes
//! from the network, so nothing here panics on its bytes, follows a compression pointer that
//! could loop, or allocates by a count the reply claims.
//!
//! ```text
//!  id, host name, A │ AAAA ─▶ query ─▶ header (RD) + question ─▶ bytes for the server
//!
//!  bytes ─▶ parse_reply ─▶ header: QR set, our id, opcode 0 ─▶ question: our name and type
//!     ├─ TC set ─▶ Truncated (ask again over TCP)
//!     └─ every record read (names through compression pointers that only point back)
//!        ├─ rcode 0 ─▶ CNAME chain from the name ─▶ its A │ AAAA records
//!        │     Addresses { addresses, min TTL } │ NoAddresses { SOA's negative TTL }
//!        ├─ rcode 3 ─▶ NoSuchName { SOA's negative TTL }
//!        └─ others  ─▶ ServerError { rcode }
//! ```
//!
//! The resolver asks as ingress-nginx's Lua resolver does (`rootfs/etc/nginx/lua/util/dns.lua`:
//! A first, AAAA only when there is no A record, cached for the smallest TTL). Unlike its
//! `a_records_and_min_ttl`, which takes every record with an address that lua-resty-dns
//! returns and their TTLs only, the addresses here are those of the name's CNAME chain and
//! the TTL includes the CNAMEs followed (the chain may change when one expires).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest name on the wire, length bytes and root label included (RFC 1035 §2.3.4).
const MAX_NAME: usize = 255;
/// The longest host name as text without its trailing dot: what fits in `MAX_NAME` bytes.
const MAX_HOST: usize = MAX_NAME - 2;
const MAX_LABEL: usize = 63;
/// Compression pointers followed in one name. A pointer must point before the bytes it
/// continues, so they cannot loop; this bounds the work a chain of pointers to pointers
/// costs (a name has at most 127 labels, so a real encoder never needs more).
const MAX_POINTERS: usize = 127;
/// CNAMEs followed from the name asked (a recursive resolver follows the chain itself; a
/// longer one in a reply is a broken or hostile server).
const MAX_CNAMES: usize = 8;
/// Addresses kept from one reply; the rest are ignored, so a reply cannot make us keep much.
pub const MAX_ADDRESSES: usize = 64;

const HEADER: usize = 12;
const CLASS_IN: u16 = 1;
const TYPE_CNAME: u16 = 5;
const TYPE_SOA: u16 = 6;
const RCODE_NXDOMAIN: u8 = 3;

/// The record types Sluice asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordType {
    A,
    Aaaa,
}

/// What a reply to a query says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Addresses of the type asked for the name (after following the CNAMEs in the answer
    /// section), in the reply's order without repeats, at most `MAX_ADDRESSES`; and the
    /// smallest TTL of the records used (CNAMEs included), in seconds.
    Addresses { addresses: Vec<IpAddr>, ttl: u32 },
    /// NOERROR but no address of that type (NODATA). `ttl`: how long that may be cached
    /// (RFC 2308 §5: the smaller of the TTL of the authority section's SOA and its MINIMUM
    /// field), when the reply has an SOA.
    NoAddresses { ttl: Option<u32> },
    /// NXDOMAIN (rcode 3); `ttl` as for `NoAddresses`.
    NoSuchName { ttl: Option<u32> },
    /// The TC bit: the reply was cut to fit a datagram; ask again over TCP.
    Truncated,
    /// Any other rcode (SERVFAIL 2, REFUSED 5, ...).
    ServerError { rcode: u8 },
}

/// Why `query` refuses a host name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidName {
    #[error("empty host name")]
    Empty,
    #[error("host name of {0} characters, more than {MAX_HOST}")]
    TooLong(usize),
    #[error("empty label in host name")]
    EmptyLabel,
    #[error("label of {0} characters in host name, more than {MAX_LABEL}")]
    LabelTooLong(usize),
    #[error("{0:?} in host name (letters, digits, `-` and `_` only)")]
    Character(char),
}

/// Why bytes are not a reply to the query made: the server's fault (or someone else's
/// datagram), never the caller's, so the resolver may ask another server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedReply {
    #[error("not a DNS reply: its QR bit is clear")]
    NotAReply,
    #[error("DNS reply to query {got}, not {expected}")]
    OtherId { expected: u16, got: u16 },
    #[error("DNS reply of opcode {0}, not a standard query")]
    Opcode(u8),
    #[error("DNS reply with {0} questions, not the one asked")]
    QuestionCount(u16),
    /// The question is not the one asked: its name, type or class differs.
    #[error("DNS reply to another question: its {0} differs")]
    OtherQuestion(&'static str),
    /// The bytes end inside the section named, or its count claims more records than follow.
    #[error("DNS reply cut short in its {0}")]
    Cut(&'static str),
    #[error("DNS name with a label length byte {0:#04x} (neither a length nor a pointer)")]
    LabelType(u8),
    #[error("DNS compression pointer to offset {0}, not before the name it continues")]
    PointerNotBack(u16),
    #[error("DNS name through more than {MAX_POINTERS} compression pointers")]
    TooManyPointers,
    #[error("DNS name longer than {MAX_NAME} bytes")]
    NameTooLong,
    #[error("DNS {kind} record with {length} bytes of data")]
    RecordData { kind: &'static str, length: u16 },
    #[error("DNS CNAME chain looping or longer than {MAX_CNAMES}")]
    CnameChain,
}

/// A name as read: its labels with their length bytes, lower-cased, without the root
/// label. On the stack, so reading a name allocates nothing.
#[derive(Clone, Copy)]
struct Name {
    length: usize,
    bytes: [u8; MAX_NAME],
}

/// A resource record as read: the data of IN's A, AAAA, CNAME and SOA checked and kept.
struct Record {
    owner: Name,
    ttl: u32,
    data: Data,
}

// A record lives on the stack while it is looked at, never in a collection: boxing the
// CNAME's name would allocate for every CNAME read, for nothing.
#[allow(clippy::large_enum_variant)]
enum Data {
    Address(IpAddr),
    Cname(Name),
    /// An SOA's MINIMUM field, its negative-caching TTL.
    Soa {
        minimum: u32,
    },
    Other,
}

impl RecordType {
    fn code(self) -> u16 {
        match self {
            RecordType::A => 1,
            RecordType::Aaaa => 28,
        }
    }
}

impl Name {
    const ROOT: Name = Name {
        length: 0,
        bytes: [0; MAX_NAME],
    };

    /// A host name as `query` writes it, lower-cased.
    fn from_host(host: &str) -> Result<Name, InvalidName> {
        let mut name = Name::ROOT;
        for label in host_labels(host)? {
            name.push(label.as_bytes())
                .expect("a valid host name fits in 255 bytes");
        }
        Ok(name)
    }

    fn push(&mut self, label: &[u8]) -> Result<(), MalformedReply> {
        // This label, its length byte, and the root label still to come.
        if self.length + 1 + label.len() + 1 > MAX_NAME {
            return Err(MalformedReply::NameTooLong);
        }
        self.bytes[self.length] = label.len() as u8;
        let start = self.length + 1;
        for (to, from) in self.bytes[start..start + label.len()].iter_mut().zip(label) {
            *to = from.to_ascii_lowercase();
        }
        self.length = start + label.len();
        Ok(())
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.length]
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// A query for `name` (a host name, optionally with one trailing dot) of `record_type`,
/// class IN, recursion desired, with `id` (the caller draws it at random: it and the
/// question are what tell a reply from a spoofed datagram).
pub fn query(id: u16, name: &str, record_type: RecordType) -> Result<Vec<u8>, InvalidName> {
    let labels = host_labels(name)?;
    let mut out = Vec::with_capacity(HEADER + name.len() + 2 + 4);
    out.extend_from_slice(&id.to_be_bytes());
    // Flags: a standard query with RD; one question, no records.
    out.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in labels {
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&record_type.code().to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// Reads a reply to `query(id, name, record_type)`.
///
/// The whole reply is read and checked, whatever its rcode, so a reply is taken whole or
/// not at all (bytes after its last record are ignored); only the TC bit is answered before
/// the records, as a cut reply's records may be missing. The question must be the one
/// asked (names compared case-insensitively, a trailing dot ignored): a `name` that `query`
/// refuses is never echoed. Records of other classes than IN, of other types, or owned by
/// names not on the CNAME chain are skipped.
pub fn parse_reply(
    bytes: &[u8],
    id: u16,
    name: &str,
    record_type: RecordType,
) -> Result<Reply, MalformedReply> {
    let header: &[u8; HEADER] = bytes.first_chunk().ok_or(MalformedReply::Cut("header"))?;
    let field = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
    let flags = field(2);
    if flags & 0x8000 == 0 {
        return Err(MalformedReply::NotAReply);
    }
    if field(0) != id {
        return Err(MalformedReply::OtherId {
            expected: id,
            got: field(0),
        });
    }
    let opcode = ((flags >> 11) & 0xf) as u8;
    if opcode != 0 {
        return Err(MalformedReply::Opcode(opcode));
    }
    if field(4) != 1 {
        return Err(MalformedReply::QuestionCount(field(4)));
    }

    let mut at = HEADER;
    let question = read_name(bytes, &mut at, "question")?;
    let fixed = take(bytes, &mut at, 4, "question")?;
    if Name::from_host(name).ok() != Some(question) {
        return Err(MalformedReply::OtherQuestion("name"));
    }
    if u16::from_be_bytes([fixed[0], fixed[1]]) != record_type.code() {
        return Err(MalformedReply::OtherQuestion("type"));
    }
    if u16::from_be_bytes([fixed[2], fixed[3]]) != CLASS_IN {
        return Err(MalformedReply::OtherQuestion("class"));
    }
    if flags & 0x0200 != 0 {
        return Ok(Reply::Truncated);
    }

    let answers_at = at;
    let answers = field(6);
    let mut negative_ttl = None;
    for (section, count) in [
        ("answer section", answers),
        ("authority section", field(8)),
        ("additional section", field(10)),
    ] {
        for _ in 0..count {
            let record = read_record(bytes, &mut at, section)?;
            // The first SOA of the authority section: the zone's, saying how long the
            // absence of the name or of its addresses may be cached.
            if let Data::Soa { minimum } = record.data {
                if section == "authority section" && negative_ttl.is_none() {
                    negative_ttl = Some(record.ttl.min(minimum));
                }
            }
        }
    }
    match (flags & 0xf) as u8 {
        0 => {}
        RCODE_NXDOMAIN => return Ok(Reply::NoSuchName { ttl: negative_ttl }),
        rcode => return Ok(Reply::ServerError { rcode }),
    }

    // Every record was read above, so reading the answers again cannot fail.
    let (chain, mut ttl) = cname_chain(bytes, answers_at, answers, question)?;
    let mut addresses = Vec::new();
    let mut at = answers_at;
    for _ in 0..answers {
        let record = read_record(bytes, &mut at, "answer section")?;
        let Data::Address(address) = record.data else {
            continue;
        };
        let of_type = match record_type {
            RecordType::A => address.is_ipv4(),
            RecordType::Aaaa => address.is_ipv6(),
        };
        if of_type
            && chain.contains(&record.owner)
            && addresses.len() < MAX_ADDRESSES
            && !addresses.contains(&address)
        {
            addresses.push(address);
            ttl = ttl.min(record.ttl);
        }
    }
    Ok(if addresses.is_empty() {
        Reply::NoAddresses { ttl: negative_ttl }
    } else {
        Reply::Addresses { addresses, ttl }
    })
}

/// The names from `question` along the answer section's CNAMEs (each name's first), and the
/// smallest TTL of those CNAMEs (`u32::MAX` when there are none).
fn cname_chain(
    bytes: &[u8],
    answers_at: usize,
    answers: u16,
    question: Name,
) -> Result<(Vec<Name>, u32), MalformedReply> {
    let mut chain = vec![question];
    let mut ttl = u32::MAX;
    'follow: loop {
        let current = chain[chain.len() - 1];
        let mut at = answers_at;
        for _ in 0..answers {
            let record = read_record(bytes, &mut at, "answer section")?;
            if let Data::Cname(target) = record.data {
                if record.owner == current {
                    if chain.len() > MAX_CNAMES || chain.contains(&target) {
                        return Err(MalformedReply::CnameChain);
                    }
                    chain.push(target);
                    ttl = ttl.min(record.ttl);
                    continue 'follow;
                }
            }
        }
        return Ok((chain, ttl));
    }
}

/// The labels of a host name `query` accepts: one trailing dot ignored; 1 to 63 letters,
/// digits, `-` or `_` each (`_` is in real names: `_sip._tcp`); 253 characters at most.
fn host_labels(name: &str) -> Result<std::str::Split<'_, char>, InvalidName> {
    let host = name.strip_suffix('.').unwrap_or(name);
    if host.is_empty() {
        return Err(InvalidName::Empty);
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err(InvalidName::EmptyLabel);
        }
        if let Some(bad) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(InvalidName::Character(bad));
        }
        if label.len() > MAX_LABEL {
            return Err(InvalidName::LabelTooLong(label.len()));
        }
    }
    if host.len() > MAX_HOST {
        return Err(InvalidName::TooLong(host.len()));
    }
    Ok(host.split('.'))
}

/// A resource record at `at` in `section` (RFC 1035 §4.1.3), moving `at` past it.
fn read_record(
    bytes: &[u8],
    at: &mut usize,
    section: &'static str,
) -> Result<Record, MalformedReply> {
    let owner = read_name(bytes, at, section)?;
    let fixed = take(bytes, at, 10, section)?;
    let kind = u16::from_be_bytes([fixed[0], fixed[1]]);
    let class = u16::from_be_bytes([fixed[2], fixed[3]]);
    let ttl = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let length = u16::from_be_bytes([fixed[8], fixed[9]]);
    let data_at = *at;
    let data = take(bytes, at, usize::from(length), section)?;
    let wrong_length = |kind| MalformedReply::RecordData { kind, length };
    // Record data is class-specific (RFC 1035 §3.2.4): only IN's is read.
    let data = match (class, kind) {
        (CLASS_IN, 1) => Data::Address(IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(data).map_err(|_| wrong_length("A"))?,
        ))),
        (CLASS_IN, 28) => Data::Address(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(data).map_err(|_| wrong_length("AAAA"))?,
        ))),
        (CLASS_IN, TYPE_CNAME) => {
            // A name that may point back into the message, filling the data exactly.
            let mut end = data_at;
            let target = read_name(bytes, &mut end, section)?;
            if end != *at {
                return Err(wrong_length("CNAME"));
            }
            Data::Cname(target)
        }
        (CLASS_IN, TYPE_SOA) => {
            // MNAME, RNAME, then SERIAL, REFRESH, RETRY, EXPIRE and MINIMUM (32 bits each).
            let mut end = data_at;
            read_name(bytes, &mut end, section)?;
            read_name(bytes, &mut end, section)?;
            if end + 20 != *at {
                return Err(wrong_length("SOA"));
            }
            let minimum = &bytes[end + 16..end + 20];
            Data::Soa {
                minimum: ttl_seconds(u32::from_be_bytes([
                    minimum[0], minimum[1], minimum[2], minimum[3],
                ])),
            }
        }
        _ => Data::Other,
    };
    Ok(Record {
        owner,
        ttl: ttl_seconds(ttl),
        data,
    })
}

/// A TTL as RFC 2181 §8 reads it: a value with the top bit set is taken as zero.
fn ttl_seconds(ttl: u32) -> u32 {
    if ttl > i32::MAX as u32 {
        0
    } else {
        ttl
    }
}

/// The name at `at` (RFC 1035 §3.1, compressed as §4.1.4 allows), moving `at` past it: past
/// its first pointer when it has one, where the name's own bytes end.
fn read_name(bytes: &[u8], at: &mut usize, section: &'static str) -> Result<Name, MalformedReply> {
    let mut name = Name::ROOT;
    let mut position = *at;
    // Where the bytes being read began: a pointer must point before it, so every jump goes
    // further back than the last and no pointer can loop.
    let mut start = *at;
    let mut after_first_pointer = None;
    let mut pointers = 0;
    loop {
        let length = *bytes.get(position).ok_or(MalformedReply::Cut(section))?;
        match length & 0xc0 {
            0x00 if length == 0 => {
                *at = after_first_pointer.unwrap_or(position + 1);
                return Ok(name);
            }
            0x00 => {
                let end = position + 1 + usize::from(length);
                let label = bytes
                    .get(position + 1..end)
                    .ok_or(MalformedReply::Cut(section))?;
                name.push(label)?;
                position = end;
            }
            0xc0 => {
                let low = *bytes
                    .get(position + 1)
                    .ok_or(MalformedReply::Cut(section))?;
                let target = u16::from_be_bytes([length & 0x3f, low]);
                if usize::from(target) >= start {
                    return Err(MalformedReply::PointerNotBack(target));
                }
                pointers += 1;
                if pointers > MAX_POINTERS {
                    return Err(MalformedReply::TooManyPointers);
                }
                after_first_pointer.get_or_insert(position + 2);
                position = usize::from(target);
                start = position;
            }
            // 0x40 (extended label types, RFC 6891 deprecated them) and 0x80 (reserved).
            _ => return Err(MalformedReply::LabelType(length)),
        }
    }
}

/// The next `n` bytes at `at`, moving `at` past them.
fn take<'a>(
    bytes: &'a [u8],
    at: &mut usize,
    n: usize,
    section: &'static str,
) -> Result<&'a [u8], MalformedReply> {
    let taken = bytes
        .get(*at..*at + n)
        .ok_or(MalformedReply::Cut(section))?;
    *at += n;
    Ok(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: u16 = 0x1234;

    /// A reply header for query `ID`: `flags`, one question, then the answer, authority and
    /// additional counts.
    fn header(flags: u16, [answers, authority, additional]: [u16; 3]) -> Vec<u8> {
        [ID, flags, 1, answers, authority, additional]
            .iter()
            .flat_map(|field| field.to_be_bytes())
            .collect()
    }

    /// The question `www.example.com` A at offset 12: `example.com` starts at 16, `com` at 24.
    const QUESTION: &[u8] = b"\x03www\x07example\x03com\x00\x00\x01\x00\x01";

    /// What a recursive resolver answers for a name behind a CDN (as `dig` shows it):
    /// www.example.com CNAME cdn.example.com (3600 s), then two A records of cdn (300 s,
    /// 60 s), every owner and the CNAME's target compressed.
    fn cdn_reply() -> Vec<u8> {
        [
            &header(0x8180, [3, 0, 0])[..],
            QUESTION,
            // At 33: owner → 12; CNAME IN 3600; 6 bytes: "cdn" (at 45) → 16 (example.com).
            b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x0e\x10\x00\x06\x03cdn\xc0\x10",
            // Owner → 45 (cdn.example.com); A IN 300; 93.184.216.34.
            b"\xc0\x2d\x00\x01\x00\x01\x00\x00\x01\x2c\x00\x04\x5d\xb8\xd8\x22",
            // Owner → 45; A IN 60; 93.184.216.35.
            b"\xc0\x2d\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x5d\xb8\xd8\x23",
        ]
        .concat()
    }

    fn parse(bytes: &[u8]) -> Result<Reply, MalformedReply> {
        parse_reply(bytes, ID, "www.example.com", RecordType::A)
    }

    /// An SOA of example.com (owner → 16), `ttl` and `minimum` as given.
    fn soa(ttl: u32, minimum: u32) -> Vec<u8> {
        let mut record = b"\xc0\x10\x00\x06\x00\x01".to_vec();
        record.extend_from_slice(&ttl.to_be_bytes());
        // ns1 → example.com, hostmaster → example.com, then five 32-bit fields.
        record.extend_from_slice(b"\x00\x27\x03ns1\xc0\x10\x0ahostmaster\xc0\x10");
        for field in [2024010101, 7200, 900, 1209600, minimum] {
            record.extend_from_slice(&u32::to_be_bytes(field));
        }
        record
    }

    #[test]
    fn a_cname_then_its_addresses_give_the_addresses_and_the_smallest_ttl() {
        let addresses = vec![
            IpAddr::from([93, 184, 216, 34]),
            IpAddr::from([93, 184, 216, 35]),
        ];
        assert_eq!(
            parse(&cdn_reply()),
            Ok(Reply::Addresses {
                addresses: addresses.clone(),
                ttl: 60
            })
        );
        // The name asked in another case, with a trailing dot: the same question.
        assert_eq!(
            parse_reply(&cdn_reply(), ID, "WWW.Example.com.", RecordType::A),
            Ok(Reply::Addresses {
                addresses: addresses.clone(),
                ttl: 60
            })
        );
        // The CNAME's TTL counts: the chain may change when it expires.
        let mut short_cname = cdn_reply();
        short_cname[39..43].copy_from_slice(&10u32.to_be_bytes());
        assert_eq!(
            parse(&short_cname),
            Ok(Reply::Addresses { addresses, ttl: 10 })
        );
    }

    #[test]
    fn records_of_other_names_types_and_classes_and_repeats_are_skipped() {
        let reply = [
            &header(0x8180, [5, 0, 1])[..],
            QUESTION,
            // An AAAA of the name: not asked.
            b"\xc0\x0c\x00\x1c\x00\x01\x00\x00\x00\x05\x00\x10",
            b"\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01",
            // An A of example.com (→ 16): another name.
            b"\xc0\x10\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x09",
            // An A of the name, class CH (3), 5 bytes of data: not read.
            b"\xc0\x0c\x00\x01\x00\x03\x00\x00\x00\x05\x00\x05hello",
            // An A of the name, TTL with the top bit set: zero (RFC 2181 §8).
            b"\xc0\x0c\x00\x01\x00\x01\x80\x00\x00\x00\x00\x04\x0a\x00\x00\x01",
            // The same address again, in capitals.
            b"\x03WWW\x07EXAMPLE\x03COM\x00",
            b"\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01",
            // Glue in the additional section: never the answer.
            b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x02",
        ]
        .concat();
        assert_eq!(
            parse(&reply),
            Ok(Reply::Addresses {
                addresses: vec![IpAddr::from([10, 0, 0, 1])],
                ttl: 0
            })
        );
    }

    #[test]
    fn an_aaaa_reply_gives_ipv6_addresses() {
        let reply = [
            &header(0x8180, [2, 0, 0])[..],
            b"\x02v6\x07example\x00\x00\x1c\x00\x01",
            // An A of the name: not asked.
            b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01",
            // V6.EXAMPLE AAAA 2001:db8::1, 120 s.
            b"\x02V6\x07EXAMPLE\x00\x00\x1c\x00\x01\x00\x00\x00\x78\x00\x10",
            b"\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01",
        ]
        .concat();
        assert_eq!(
            parse_reply(&reply, ID, "v6.example", RecordType::Aaaa),
            Ok(Reply::Addresses {
                addresses: vec!["2001:db8::1".parse().unwrap()],
                ttl: 120
            })
        );
        assert_eq!(
            parse_reply(&reply, ID, "v6.example", RecordType::A),
            Err(MalformedReply::OtherQuestion("type"))
        );
    }

    #[test]
    fn nxdomain_and_nodata_carry_the_soa_negative_ttl() {
        let nxdomain = [&header(0x8183, [0, 1, 0])[..], QUESTION, &soa(900, 300)].concat();
        assert_eq!(parse(&nxdomain), Ok(Reply::NoSuchName { ttl: Some(300) }));
        let nodata = [&header(0x8180, [0, 1, 0])[..], QUESTION, &soa(60, 300)].concat();
        assert_eq!(parse(&nodata), Ok(Reply::NoAddresses { ttl: Some(60) }));
        let bare = [&header(0x8183, [0, 0, 0])[..], QUESTION].concat();
        assert_eq!(parse(&bare), Ok(Reply::NoSuchName { ttl: None }));
        let mut cname_only = cdn_reply();
        cname_only[7] = 1;
        cname_only.truncate(51);
        assert_eq!(parse(&cname_only), Ok(Reply::NoAddresses { ttl: None }));
    }

    #[test]
    fn other_rcodes_are_server_errors_and_tc_asks_for_tcp() {
        let servfail = [&header(0x8182, [0, 0, 0])[..], QUESTION].concat();
        assert_eq!(parse(&servfail), Ok(Reply::ServerError { rcode: 2 }));
        let refused = [&header(0x8185, [0, 0, 0])[..], QUESTION].concat();
        assert_eq!(parse(&refused), Ok(Reply::ServerError { rcode: 5 }));
        // TC: three answers claimed, none there (the server cut them), so no reading them.
        let truncated = [&header(0x8380, [3, 0, 0])[..], QUESTION].concat();
        assert_eq!(parse(&truncated), Ok(Reply::Truncated));
        assert_eq!(
            parse(&truncated[..truncated.len() - 1]),
            Err(MalformedReply::Cut("question"))
        );
    }

    #[test]
    fn a_reply_to_another_query_is_refused() {
        let reply = cdn_reply();
        assert_eq!(
            parse_reply(&reply, 0x4321, "www.example.com", RecordType::A),
            Err(MalformedReply::OtherId {
                expected: 0x4321,
                got: ID
            })
        );
        let mut query = reply.clone();
        query[2] &= 0x7f;
        assert_eq!(parse(&query), Err(MalformedReply::NotAReply));
        let mut update = reply.clone();
        update[2] |= 5 << 3;
        assert_eq!(parse(&update), Err(MalformedReply::Opcode(5)));
        assert_eq!(
            parse_reply(&reply, ID, "www.example.org", RecordType::A),
            Err(MalformedReply::OtherQuestion("name"))
        );
        assert_eq!(
            parse_reply(&reply, ID, "example.com", RecordType::A),
            Err(MalformedReply::OtherQuestion("name"))
        );
        assert_eq!(
            parse_reply(&reply, ID, "www example.com", RecordType::A),
            Err(MalformedReply::OtherQuestion("name"))
        );
        let mut chaos = reply.clone();
        chaos[32] = 3;
        assert_eq!(parse(&chaos), Err(MalformedReply::OtherQuestion("class")));
        let mut two = reply;
        two[5] = 2;
        assert_eq!(parse(&two), Err(MalformedReply::QuestionCount(2)));
    }

    #[test]
    fn compression_pointers_only_point_back() {
        // An owner that is a label then a pointer to its own start: a.a.a.… for ever.
        let looping = [
            &header(0x8180, [1, 0, 0])[..],
            QUESTION,
            b"\x01a\xc0\x21\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01",
        ]
        .concat();
        assert_eq!(parse(&looping), Err(MalformedReply::PointerNotBack(33)));
        // Two pointers leading to each other: the CNAME target's (at 49) to the next owner
        // (51), which points to the target's start (45), which leads to 49 again.
        let mut two_step = cdn_reply();
        two_step[49..51].copy_from_slice(b"\xc0\x33");
        two_step[51..53].copy_from_slice(b"\xc0\x2d");
        assert_eq!(parse(&two_step), Err(MalformedReply::PointerNotBack(51)));
        // A pointer forward, to the A record's data.
        let mut forward = cdn_reply();
        forward[51..53].copy_from_slice(b"\xc0\x3f");
        assert_eq!(parse(&forward), Err(MalformedReply::PointerNotBack(63)));
        // Pointers to pointers, each further back, more than a name has labels.
        let mut chain = [&header(0x8180, [2, 0, 0])[..], QUESTION].concat();
        chain.extend_from_slice(b"\xc0\x0c\x00\x10\x00\x01\x00\x00\x00\x05\x01\x04");
        let first = chain.len();
        chain.extend_from_slice(b"\xc0\x0c");
        for i in 1..130 {
            let previous = (first + 2 * (i - 1)) as u16;
            chain.extend_from_slice(&(0xc000 | previous).to_be_bytes());
        }
        let last = (chain.len() - 2) as u16;
        chain.extend_from_slice(&(0xc000 | last).to_be_bytes());
        chain.extend_from_slice(b"\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01");
        assert_eq!(parse(&chain), Err(MalformedReply::TooManyPointers));
        // Extended (0x40) and reserved (0x80) label types.
        let mut extended = cdn_reply();
        extended[45] = 0x41;
        assert_eq!(parse(&extended), Err(MalformedReply::LabelType(0x41)));
    }

    #[test]
    fn names_over_255_bytes_are_refused() {
        let label = [&[63][..], &[b'x'; 63]].concat();
        // Four 63-byte labels: 256 bytes, and the root.
        let long = [
            &header(0x8180, [1, 0, 0])[..],
            QUESTION,
            &label.repeat(4),
            b"\x00\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01",
        ]
        .concat();
        assert_eq!(parse(&long), Err(MalformedReply::NameTooLong));
        // Three of them then www.example.com through a pointer: 192 + 17 fits.
        let fits = [
            &header(0x8180, [1, 0, 0])[..],
            QUESTION,
            &label.repeat(3),
            b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x05\x00\x04\x0a\x00\x00\x01",
        ]
        .concat();
        assert_eq!(parse(&fits), Ok(Reply::NoAddresses { ttl: None }));
    }

    #[test]
    fn record_data_of_the_wrong_length_is_refused() {
        let mut five = cdn_reply();
        five[62] = 5;
        five.push(0);
        assert_eq!(
            parse(&five),
            Err(MalformedReply::RecordData {
                kind: "A",
                length: 5
            })
        );
        // A CNAME whose name ends before its data does.
        let mut cname = cdn_reply();
        cname[44] = 7;
        cname.insert(51, 0);
        cname[52] = 0x2d;
        cname[67] = 0x2d;
        assert_eq!(
            parse(&cname),
            Err(MalformedReply::RecordData {
                kind: "CNAME",
                length: 7
            })
        );
        let mut soa_record = soa(60, 60);
        soa_record[11] += 1;
        soa_record.push(0);
        let nodata = [&header(0x8180, [0, 1, 0])[..], QUESTION, &soa_record].concat();
        assert_eq!(
            parse(&nodata),
            Err(MalformedReply::RecordData {
                kind: "SOA",
                length: 40
            })
        );
    }

    #[test]
    fn counts_beyond_the_bytes_and_cut_replies_are_refused() {
        let mut claims = cdn_reply();
        claims[6..8].copy_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(parse(&claims), Err(MalformedReply::Cut("answer section")));
        let mut authority = cdn_reply();
        authority[9] = 1;
        assert_eq!(
            parse(&authority),
            Err(MalformedReply::Cut("authority section"))
        );
        let reply = cdn_reply();
        for cut in 0..reply.len() {
            assert!(
                matches!(parse(&reply[..cut]), Err(MalformedReply::Cut(_))),
                "{cut} bytes"
            );
        }
        // Bytes after the last record are not the reply's.
        let mut followed = reply.clone();
        followed.extend_from_slice(b"\xc0\x0c\xff");
        assert_eq!(parse(&followed), parse(&reply));
    }

    #[test]
    fn cname_chains_are_followed_in_any_order_up_to_8() {
        // The name → n0 → n1 → … → n{length-1}, written last link first, then an A.
        let chain = |length: u8| {
            let mut reply = header(0x8180, [u16::from(length) + 1, 0, 0]);
            reply.extend_from_slice(QUESTION);
            for hop in (0..length).rev() {
                if hop == 0 {
                    reply.extend_from_slice(b"\xc0\x0c");
                } else {
                    reply.extend_from_slice(&[2, b'n', b'0' + hop - 1, 0]);
                }
                reply.extend_from_slice(b"\x00\x05\x00\x01\x00\x00\x00\x05\x00\x04");
                reply.extend_from_slice(&[2, b'n', b'0' + hop, 0]);
            }
            reply.extend_from_slice(&[2, b'n', b'0' + length - 1, 0]);
            reply.extend_from_slice(b"\x00\x01\x00\x01\x00\x00\x00\x07\x00\x04\x0a\x00\x00\x01");
            parse(&reply)
        };
        assert_eq!(
            chain(8),
            Ok(Reply::Addresses {
                addresses: vec![IpAddr::from([10, 0, 0, 1])],
                ttl: 5
            })
        );
        assert_eq!(chain(9), Err(MalformedReply::CnameChain));
        // www.example.com → cdn.example.com → www.example.com.
        let mut looping = cdn_reply();
        looping.truncate(51);
        looping.extend_from_slice(b"\xc0\x2d\x00\x05\x00\x01\x00\x00\x00\x3c\x00\x02\xc0\x0c");
        looping[7] = 2;
        assert_eq!(parse(&looping), Err(MalformedReply::CnameChain));
    }

    #[test]
    fn at_most_64_addresses_are_kept() {
        let mut reply = header(0x8180, [100, 0, 0]);
        reply.extend_from_slice(QUESTION);
        for i in 0..100u8 {
            reply.extend_from_slice(b"\xc0\x0c\x00\x01\x00\x01");
            reply.extend_from_slice(&u32::from(1000 - u16::from(i)).to_be_bytes());
            reply.extend_from_slice(&[0, 4, 10, 0, 0, i]);
        }
        let Ok(Reply::Addresses { addresses, ttl }) = parse(&reply) else {
            panic!("{:?}", parse(&reply));
        };
        assert_eq!(addresses.len(), MAX_ADDRESSES);
        assert_eq!(addresses[63], IpAddr::from([10, 0, 0, 63]));
        // The TTLs of the records ignored do not count.
        assert_eq!(ttl, 1000 - 63);
    }

    #[test]
    fn the_query_is_a_standard_recursive_question() {
        assert_eq!(
            query(0xabcd, "example.com", RecordType::A).unwrap(),
            b"\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\
              \x07example\x03com\x00\x00\x01\x00\x01"
        );
        assert_eq!(
            query(0xabcd, "example.com.", RecordType::A),
            query(0xabcd, "example.com", RecordType::A)
        );
        let aaaa = query(7, "_sip._tcp.Example-1.com", RecordType::Aaaa).unwrap();
        assert_eq!(
            &aaaa[12..],
            b"\x04_sip\x04_tcp\x09Example-1\x03com\x00\x00\x1c\x00\x01"
        );
        let longest = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61),
        ]
        .join(".");
        assert_eq!(longest.len(), 253);
        let bytes = query(1, &longest, RecordType::A).unwrap();
        assert_eq!(bytes.len(), 12 + 255 + 4);
        // A reply echoing it is read: the longest name fits the reader's bound too.
        let mut reply = bytes;
        reply[2] |= 0x80;
        assert_eq!(
            parse_reply(&reply, 1, &longest, RecordType::A),
            Ok(Reply::NoAddresses { ttl: None })
        );
    }

    #[test]
    fn invalid_names_are_refused_with_what_is_wrong() {
        let refused = |name: &str| query(1, name, RecordType::A).unwrap_err();
        assert_eq!(refused(""), InvalidName::Empty);
        assert_eq!(refused("."), InvalidName::Empty);
        assert_eq!(
            refused(&format!("{}.com", "x".repeat(64))),
            InvalidName::LabelTooLong(64)
        );
        assert_eq!(refused("a..b"), InvalidName::EmptyLabel);
        assert_eq!(refused(".a"), InvalidName::EmptyLabel);
        assert_eq!(refused("a.b.."), InvalidName::EmptyLabel);
        let long = [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(62),
        ]
        .join(".");
        assert_eq!(refused(&long), InvalidName::TooLong(254));
        assert_eq!(refused("www example.com"), InvalidName::Character(' '));
        assert_eq!(refused("é.com"), InvalidName::Character('é'));
        assert_eq!(refused("a/b"), InvalidName::Character('/'));
        assert_eq!(
            refused("www example.com").to_string(),
            "' ' in host name (letters, digits, `-` and `_` only)"
        );
    }
}
