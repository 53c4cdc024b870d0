//! The DNS reply target: the reader of what a DNS server sends back when Sluice resolves the
//! name of an ExternalName Service. A reply comes from the network (or from whoever guesses
//! the id), so it is hostile input. The target checks invariants on any bytes, and writes
//! replies whose meaning it knows from records to check the reader against.
//!
//! ```text
//!  bytes ─▶ parse_reply, as a reply to its own id and question ─┬─ an answer ─▶ addresses of
//!     the type asked, at most 64, no repeats; the same with bytes after it, the name in
//!     capitals or with a trailing dot; every prefix cut short or the same answer; another
//!     id refused                                                └─ refused ─▶ the same
//!     refusal with bytes after it, unless it was cut short
//!  bytes as choices ─▶ DnsReply (names, CNAMEs, A, AAAA, TTLs, SOA; compressed or not)
//!     ─▶ to_bytes ─▶ parse_reply ─▶ exactly what the records say (the chain's addresses, the
//!     smallest TTL); every strict prefix cut short (or Truncated, once a TC reply's question
//!     is whole); another id, type, name, opcode or a query refused
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::Choices;
use crate::dns::{parse_reply, MalformedReply, RecordType, Reply, MAX_ADDRESSES};

/// A DNS reply for `to_bytes` to write: one question and the records of the answer,
/// authority and additional sections, in that order.
#[derive(Clone, Debug)]
pub struct DnsReply {
    pub id: u16,
    /// The header's flags as sent: QR, opcode, AA, TC, RD, RA, rcode.
    pub flags: u16,
    /// A name as text (dots between labels, a trailing one ignored), written as is.
    pub question: String,
    pub question_type: u16,
    pub answers: Vec<DnsRecord>,
    pub authority: Vec<DnsRecord>,
    pub additional: Vec<DnsRecord>,
    /// Whether a name whose suffix was written before ends in a pointer to it (RFC 1035
    /// §4.1.4), in owners and in CNAME and SOA data alike.
    pub compress: bool,
}

#[derive(Clone, Debug)]
pub struct DnsRecord {
    pub owner: String,
    pub class: u16,
    pub ttl: u32,
    pub data: DnsData,
}

#[derive(Clone, Debug)]
pub enum DnsData {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(String),
    /// Its other fields are written as fixed numbers.
    Soa {
        mname: String,
        rname: String,
        minimum: u32,
    },
    /// Any other type, its data as given.
    Other {
        kind: u16,
        data: Vec<u8>,
    },
}

/// Where the suffixes of the names written so far start, for compression pointers.
struct Suffixes {
    compress: bool,
    written: Vec<(String, u16)>,
}

/// Labels the generated names are made of: short and long (63), with `-` and `_`.
const LABELS: [&str; 8] = [
    "www",
    "example",
    "com",
    "cdn",
    "a",
    "edge-1",
    "_svc",
    "abcdefghijklmnopqrstuvwxyz0123456789-abcdefghijklmnopqrstuvwxyz",
];

impl DnsReply {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        for count in [
            1,
            self.answers.len(),
            self.authority.len(),
            self.additional.len(),
        ] {
            out.extend_from_slice(&(count as u16).to_be_bytes());
        }
        let mut suffixes = Suffixes {
            compress: self.compress,
            written: Vec::new(),
        };
        suffixes.write(&mut out, &self.question);
        out.extend_from_slice(&self.question_type.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        for record in self
            .answers
            .iter()
            .chain(&self.authority)
            .chain(&self.additional)
        {
            suffixes.write(&mut out, &record.owner);
            let kind: u16 = match record.data {
                DnsData::A(_) => 1,
                DnsData::Aaaa(_) => 28,
                DnsData::Cname(_) => 5,
                DnsData::Soa { .. } => 6,
                DnsData::Other { kind, .. } => kind,
            };
            out.extend_from_slice(&kind.to_be_bytes());
            out.extend_from_slice(&record.class.to_be_bytes());
            out.extend_from_slice(&record.ttl.to_be_bytes());
            let length_at = out.len();
            out.extend_from_slice(&[0, 0]);
            match &record.data {
                DnsData::A(address) => out.extend_from_slice(&address.octets()),
                DnsData::Aaaa(address) => out.extend_from_slice(&address.octets()),
                DnsData::Cname(target) => suffixes.write(&mut out, target),
                DnsData::Soa {
                    mname,
                    rname,
                    minimum,
                } => {
                    suffixes.write(&mut out, mname);
                    suffixes.write(&mut out, rname);
                    // Serial, refresh, retry, expire.
                    for field in [1, 7200, 900, 1_209_600, *minimum] {
                        out.extend_from_slice(&field.to_be_bytes());
                    }
                }
                DnsData::Other { data, .. } => out.extend_from_slice(data),
            }
            let length = (out.len() - length_at - 2) as u16;
            out[length_at..length_at + 2].copy_from_slice(&length.to_be_bytes());
        }
        out
    }
}

impl Suffixes {
    fn write(&mut self, out: &mut Vec<u8>, name: &str) {
        let name = name.strip_suffix('.').unwrap_or(name);
        let labels: Vec<&str> = name.split('.').filter(|label| !label.is_empty()).collect();
        for (i, label) in labels.iter().enumerate() {
            let suffix = labels[i..].join(".");
            if self.compress {
                if let Some((_, at)) = self.written.iter().find(|(known, _)| *known == suffix) {
                    out.extend_from_slice(&(0xc000 | at).to_be_bytes());
                    return;
                }
                // A pointer has 14 bits of offset.
                if let Ok(at @ ..0x4000) = u16::try_from(out.len()) {
                    self.written.push((suffix, at));
                }
            }
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
        out.push(0);
    }
}

/// A DNS reply: `dns::parse_reply` on `data` as a reply to the id and question it carries;
/// and `data` read as the choices of a reply, written by `DnsReply::to_bytes` and parsed
/// back.
///
/// Properties: no panic; addresses only of the type asked, at most `MAX_ADDRESSES`, none
/// twice; TTLs below 2^31 (RFC 2181); an answer is the same whatever bytes follow the reply,
/// with the name asked in capitals or with a trailing dot, and every prefix is either cut
/// short or already that answer (never another), so the reply's end decides, not how bytes
/// arrive; another id is refused; a refusal other than a cut stays the same refusal
/// whatever follows; a reply written from records parses to exactly what they say (the
/// addresses of the type asked owned by the CNAME chain from the name, in order without
/// repeats, the smallest TTL of those and of the CNAMEs; the SOA's negative TTL; Truncated
/// on TC; the rcode) and no strict prefix of it parses (a TC reply's prefixes read as
/// Truncated once its question is whole).
///
/// Returns whether `data` itself was accepted.
pub fn dns_reply(data: &[u8]) -> bool {
    round_trip(&mut Choices(data));
    let (id, name, asked) = question_of(data);
    let answer = parse_reply(data, id, &name, asked);
    let mut followed = data.to_vec();
    followed.extend_from_slice(b"\0\xc0\x0c\x00\x01\x00\x01");
    let again = parse_reply(&followed, id, &name, asked);
    if !matches!(answer, Err(MalformedReply::Cut(_))) {
        assert_eq!(again, answer, "bytes after the reply changed its reading");
    }
    let Ok(reply) = answer else {
        return false;
    };
    check_shape(&reply, asked);
    assert_eq!(
        parse_reply(data, id, &name.to_ascii_uppercase(), asked),
        Ok(reply.clone()),
        "the name asked in capitals"
    );
    assert_eq!(
        parse_reply(data, id, &format!("{name}."), asked),
        Ok(reply.clone()),
        "the name asked with a trailing dot"
    );
    assert!(matches!(
        parse_reply(data, id.wrapping_add(1), &name, asked),
        Err(MalformedReply::OtherId { .. })
    ));
    let mut decided = false;
    for cut in cuts(data.len()) {
        match parse_reply(&data[..cut], id, &name, asked) {
            Err(MalformedReply::Cut(_)) => {
                assert!(!decided, "{cut} bytes cut short, fewer did not")
            }
            Ok(prefix) => {
                assert_eq!(prefix, reply, "{cut} bytes read as another answer");
                decided = true;
            }
            Err(e) => panic!("{cut} bytes of an accepted reply refused: {e}"),
        }
    }
    true
}

/// The id, name and type `data` asks, read plainly (a reply echoes the query, whose name has
/// no pointers); `example.com` when there is no name there.
fn question_of(data: &[u8]) -> (u16, String, RecordType) {
    let id = data
        .get(..2)
        .map_or(0, |id| u16::from_be_bytes([id[0], id[1]]));
    let mut labels = Vec::new();
    let mut at = 12;
    while let Some(&length @ 1..=63) = data.get(at) {
        let Some(label) = data.get(at + 1..at + 1 + usize::from(length)) else {
            break;
        };
        labels.push(String::from_utf8_lossy(label).into_owned());
        at += 1 + usize::from(length);
    }
    let asked = match data.get(at + 1..at + 3) {
        Some([0, 28]) => RecordType::Aaaa,
        _ => RecordType::A,
    };
    let name = if labels.is_empty() {
        "example.com".to_string()
    } else {
        labels.join(".")
    };
    (id, name, asked)
}

/// What any answer must look like.
fn check_shape(reply: &Reply, asked: RecordType) {
    let ttl = match reply {
        Reply::Addresses { addresses, ttl } => {
            assert!(!addresses.is_empty() && addresses.len() <= MAX_ADDRESSES);
            assert!(
                addresses
                    .iter()
                    .all(|a| a.is_ipv4() == (asked == RecordType::A)),
                "{addresses:?} for {asked:?}"
            );
            for (i, address) in addresses.iter().enumerate() {
                assert!(!addresses[..i].contains(address), "{address} twice");
            }
            Some(*ttl)
        }
        Reply::NoAddresses { ttl } | Reply::NoSuchName { ttl } => *ttl,
        Reply::Truncated => None,
        Reply::ServerError { rcode } => {
            assert!(*rcode != 0 && *rcode != 3 && *rcode < 16);
            None
        }
    };
    assert!(ttl.is_none_or(|ttl| ttl <= i32::MAX as u32), "TTL {ttl:?}");
}

/// Prefix lengths to try, ascending: all of a short reply, the header's and a few more of a
/// long one.
fn cuts(length: usize) -> Vec<usize> {
    if length <= 512 {
        return (0..length).collect();
    }
    let mut cuts: Vec<usize> = (0..40)
        .chain([length / 3, length / 2, length - 2, length - 1])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// A reply made from `data` read as choices (as `dns_reply` builds them): what the seeded
/// runs start from.
pub fn dns_reply_message(data: &[u8]) -> Vec<u8> {
    generate(&mut Choices(data)).0.to_bytes()
}

/// Writes a reply made from `choices` and checks that it reads as its records say, and that
/// no prefix of it and no reply to another query reads at all.
fn round_trip(choices: &mut Choices<'_>) {
    let (reply, asked) = generate(choices);
    let bytes = reply.to_bytes();
    let mut name = reply.question.to_ascii_lowercase();
    if choices.below(2) == 0 {
        name.push('.');
    }
    let expected = meaning(&reply, asked);
    assert_eq!(
        parse_reply(&bytes, reply.id, &name, asked),
        expected,
        "{reply:?}"
    );

    let truncated = reply.flags & 0x0200 != 0;
    let question_end = 12 + reply.question.len() + 2 + 4;
    for cut in cuts(bytes.len()) {
        let prefix = parse_reply(&bytes[..cut], reply.id, &name, asked);
        if truncated && cut >= question_end {
            assert_eq!(prefix, Ok(Reply::Truncated), "{cut} bytes of {reply:?}");
        } else {
            assert!(
                matches!(prefix, Err(MalformedReply::Cut(_))),
                "{cut} bytes of {reply:?}: {prefix:?}"
            );
        }
    }

    let mut followed = bytes.clone();
    followed.extend((0..choices.below(8)).map(|_| choices.byte()));
    assert_eq!(parse_reply(&followed, reply.id, &name, asked), expected);

    let other_type = match asked {
        RecordType::A => RecordType::Aaaa,
        RecordType::Aaaa => RecordType::A,
    };
    assert_eq!(
        parse_reply(&bytes, reply.id, &name, other_type),
        Err(MalformedReply::OtherQuestion("type"))
    );
    assert_eq!(
        parse_reply(&bytes, reply.id, "not-asked.example", asked),
        Err(MalformedReply::OtherQuestion("name"))
    );
    assert_eq!(
        parse_reply(&bytes, reply.id ^ 0x8000, &name, asked),
        Err(MalformedReply::OtherId {
            expected: reply.id ^ 0x8000,
            got: reply.id
        })
    );
    let mut query = bytes.clone();
    query[2] &= 0x7f;
    assert_eq!(
        parse_reply(&query, reply.id, &name, asked),
        Err(MalformedReply::NotAReply)
    );
    let mut notify = bytes;
    notify[2] = notify[2] & 0x87 | 4 << 3;
    assert_eq!(
        parse_reply(&notify, reply.id, &name, asked),
        Err(MalformedReply::Opcode(4))
    );
}

/// What a reply says, read off its records (not its bytes): the model `parse_reply` must
/// agree with.
fn meaning(reply: &DnsReply, asked: RecordType) -> Result<Reply, MalformedReply> {
    if reply.flags & 0x0200 != 0 {
        return Ok(Reply::Truncated);
    }
    let negative_ttl = reply.authority.iter().find_map(|record| match record.data {
        DnsData::Soa { minimum, .. } if record.class == 1 => {
            Some(seconds(record.ttl).min(seconds(minimum)))
        }
        _ => None,
    });
    match reply.flags & 0xf {
        0 => {}
        3 => return Ok(Reply::NoSuchName { ttl: negative_ttl }),
        rcode => return Ok(Reply::ServerError { rcode: rcode as u8 }),
    }
    let same = |a: &str, b: &str| {
        a.strip_suffix('.')
            .unwrap_or(a)
            .eq_ignore_ascii_case(b.strip_suffix('.').unwrap_or(b))
    };
    let mut chain = vec![reply.question.as_str()];
    let mut ttl = u32::MAX;
    while let Some((target, cname_ttl)) =
        reply.answers.iter().find_map(|record| match &record.data {
            DnsData::Cname(target)
                if record.class == 1 && same(&record.owner, chain[chain.len() - 1]) =>
            {
                Some((target.as_str(), record.ttl))
            }
            _ => None,
        })
    {
        if chain.len() > 8 || chain.iter().any(|name| same(name, target)) {
            return Err(MalformedReply::CnameChain);
        }
        chain.push(target);
        ttl = ttl.min(seconds(cname_ttl));
    }
    let mut addresses = Vec::new();
    for record in &reply.answers {
        let address = match (record.class, &record.data, asked) {
            (1, DnsData::A(address), RecordType::A) => IpAddr::V4(*address),
            (1, DnsData::Aaaa(address), RecordType::Aaaa) => IpAddr::V6(*address),
            _ => continue,
        };
        if chain.iter().any(|name| same(name, &record.owner))
            && addresses.len() < MAX_ADDRESSES
            && !addresses.contains(&address)
        {
            addresses.push(address);
            ttl = ttl.min(seconds(record.ttl));
        }
    }
    Ok(if addresses.is_empty() {
        Reply::NoAddresses { ttl: negative_ttl }
    } else {
        Reply::Addresses { addresses, ttl }
    })
}

/// A TTL as RFC 2181 §8 has it read: with the top bit set, zero.
fn seconds(ttl: u32) -> u32 {
    if ttl >= 1 << 31 {
        0
    } else {
        ttl
    }
}

/// A reply to a query of the type returned, made from `choices` (the rare cases on their
/// last values, so that choices run out into a plain reply): a question name and a few
/// others, answer records among them in any order (CNAMEs that chain, loop or run long;
/// addresses of both types, sometimes more than are kept; records of other types and
/// classes), an SOA and other records after them, any rcode, sometimes TC.
fn generate(choices: &mut Choices<'_>) -> (DnsReply, RecordType) {
    let asked = if choices.below(2) == 0 {
        RecordType::A
    } else {
        RecordType::Aaaa
    };
    let question = host(choices);
    let mut names = vec![question.clone()];
    for _ in 0..1 + choices.below(4) {
        names.push(host(choices));
    }
    let mut answers: Vec<DnsRecord> = (0..choices.below(10))
        .map(|_| record(choices, &names))
        .collect();
    if choices.below(8) == 7 {
        // A chain of CNAMEs from the question, longer than is followed or not, ending in
        // addresses.
        let mut owner = question.clone();
        for hop in 0..choices.below(12) {
            let target = format!("hop{hop}.example");
            answers.push(DnsRecord {
                owner,
                class: 1,
                ttl: ttl(choices),
                data: DnsData::Cname(target.clone()),
            });
            owner = target;
        }
        names.push(owner);
    }
    if choices.below(16) == 15 {
        // More addresses than are kept, some repeated.
        let owner = &names[names.len() - 1];
        for i in 0..70u8 {
            let i = i % 67;
            let data = match asked {
                RecordType::A => DnsData::A(Ipv4Addr::new(10, 0, 0, i)),
                RecordType::Aaaa => {
                    DnsData::Aaaa(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i.into()))
                }
            };
            answers.push(DnsRecord {
                owner: owner.clone(),
                class: 1,
                ttl: ttl(choices),
                data,
            });
        }
    }
    // Chains are followed whatever the records' order.
    let rotation = choices.below(answers.len() + 1);
    answers.rotate_left(rotation);

    let mut authority = Vec::new();
    if choices.below(2) == 0 {
        let zone = question
            .split_once('.')
            .map_or(&question[..], |(_, zone)| zone);
        authority.push(DnsRecord {
            owner: zone.to_string(),
            class: if choices.below(16) == 15 { 3 } else { 1 },
            ttl: ttl(choices),
            data: DnsData::Soa {
                mname: format!("ns1.{zone}"),
                rname: format!("hostmaster.{zone}"),
                minimum: ttl(choices),
            },
        });
    }
    if choices.below(4) == 0 {
        authority.push(DnsRecord {
            owner: question.clone(),
            class: 1,
            ttl: ttl(choices),
            data: DnsData::Other {
                kind: 2,
                data: b"\x03ns2\x07example\x00".to_vec(),
            },
        });
    }
    // Addresses in the additional section (glue) are never the answer.
    let additional = (0..choices.below(3))
        .map(|_| record(choices, &names))
        .collect();

    let tc = if choices.below(16) == 15 { 0x0200 } else { 0 };
    let aa = if choices.below(2) == 1 { 0x0400 } else { 0 };
    let rcode = match choices.below(16) {
        0..=9 => 0,
        10 | 11 => 3,
        12 => 2,
        13 => 5,
        14 => 1,
        _ => 9,
    };
    let reply = DnsReply {
        id: u16::from_be_bytes(choices.array()),
        flags: 0x8000 | aa | tc | 0x0100 | 0x0080 | rcode,
        question,
        question_type: match asked {
            RecordType::A => 1,
            RecordType::Aaaa => 28,
        },
        answers,
        authority,
        additional,
        compress: choices.below(4) != 3,
    };
    (reply, asked)
}

/// A host name of 1 to 4 labels (at most 253 characters), in any case.
fn host(choices: &mut Choices<'_>) -> String {
    let mut labels: Vec<&str> = (0..1 + choices.below(4))
        .map(|_| LABELS[choices.below(LABELS.len())])
        .collect();
    while labels.join(".").len() > 253 {
        labels.remove(0);
    }
    cased(choices, &labels.join("."))
}

/// `name` as it is, in capitals or in alternating case: servers echo what they were asked,
/// and owners are compared without case.
fn cased(choices: &mut Choices<'_>, name: &str) -> String {
    match choices.below(4) {
        0 => name.to_ascii_uppercase(),
        1 => name
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_uppercase()
                } else {
                    c
                }
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// A record owned by one of `names` (at least two): an A or AAAA, a CNAME to another of
/// them, an SOA, or another type; now and then of class CH (skipped).
fn record(choices: &mut Choices<'_>, names: &[String]) -> DnsRecord {
    // The question's half the time: most replies answer it.
    let owner_index = match choices.below(2 * names.len()) {
        index if index < names.len() => index,
        _ => 0,
    };
    let owner = cased(choices, &names[owner_index]);
    let class = if choices.below(16) == 15 { 3 } else { 1 };
    let ttl = ttl(choices);
    let data = match choices.below(10) {
        0..=2 => DnsData::A(Ipv4Addr::from(choices.array::<4>())),
        3..=5 => DnsData::Aaaa(Ipv6Addr::from(choices.array::<16>())),
        6 | 7 => {
            // To another name: a chain, or a loop through two or more.
            let target = owner_index + 1 + choices.below(names.len() - 1);
            DnsData::Cname(cased(choices, &names[target % names.len()]))
        }
        8 if choices.below(4) == 3 => DnsData::Soa {
            // Outside the authority section an SOA says nothing of how long to cache.
            mname: one_of(choices, names),
            rname: one_of(choices, names),
            minimum: self::ttl(choices),
        },
        8 => DnsData::Other {
            kind: 16,
            data: b"\x0bv=spf1 -all".to_vec(),
        },
        _ => DnsData::Other {
            kind: [13, 99, 65, 0xff00][choices.below(4)],
            data: (0..choices.below(6)).map(|_| choices.byte()).collect(),
        },
    };
    DnsRecord {
        owner,
        class,
        ttl,
        data,
    }
}

/// One of `names`, in any case.
fn one_of(choices: &mut Choices<'_>, names: &[String]) -> String {
    let name = &names[choices.below(names.len())];
    cased(choices, name)
}

/// TTLs of every kind: zero, short, long, the largest, with the top bit set (read as zero).
fn ttl(choices: &mut Choices<'_>) -> u32 {
    match choices.below(10) {
        0 => 0,
        1 => 1,
        2 => 30,
        3 => 300,
        4 => 86_400,
        5 => i32::MAX as u32,
        6 => 1 << 31,
        7 => u32::MAX,
        _ => u32::from_be_bytes(choices.array()),
    }
}
