//! The addresses of the host names backends dial (ExternalName Services' names, URL
//! annotations' hosts): asked of the name servers resolv.conf lists (or `--resolver`), as
//! ingress-nginx's resolver asks them, and asked again when their answer's TTL runs out. The
//! result is endpoint facts for the Store, as EndpointSlices are.
//!
//! ```text
//!  names the published backends need ──NameWatch::want──▶ a slot per name, due now
//!  NameWatch::next (the control loop's select): due names ──lookup──▶ candidates by
//!     search + ndots ──▶ A, then AAAA when there is no A ──UDP (TCP when cut)──▶ servers in turn
//!     ──▶ addresses + TTL: due again at the TTL (1 s … 5 min)
//!     ──▶ no such name / no address: no addresses (the backend answers 503), asked again soon
//!     ──▶ no server answered: the last addresses kept, asked again with backoff
//!  changed addresses ──▶ Resolution { name, addresses } ──▶ Store::set_resolved ──▶ fast path
//! ```
//!
//! Names are asked only while a published backend needs them, at most [`CONCURRENT_LOOKUPS`]
//! at a time; the codec is `wire::dns`.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{timeout, Instant};
use wire::dns::{parse_reply, query, RecordType, Reply};

/// Names looked up at once; more wait for a slot.
pub const CONCURRENT_LOOKUPS: usize = 16;
/// The shortest time an answer is kept: a TTL of 0 would otherwise ask without a pause.
pub const MIN_TTL: Duration = Duration::from_secs(1);
/// The longest: a name's addresses are asked again at least this often, whatever its TTL.
pub const MAX_TTL: Duration = Duration::from_secs(300);
/// How soon a name without an address (or without a name server's answer) is asked again,
/// doubling per failure up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// What resolv.conf says, with `--resolver` in place of its name servers when given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolverConfig {
    pub nameservers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: usize,
    /// Per query and server (`options timeout:`, 5 s by default as in glibc; ingress-nginx's
    /// resolver waits 2 s).
    pub timeout: Duration,
    /// Rounds over the servers (`options attempts:`, 2 by default).
    pub attempts: usize,
    /// AAAA records asked for and IPv6 name servers used; off: the ConfigMap's
    /// `disable-ipv6-dns` (nginx's `resolver … ipv6=off`).
    pub ipv6: bool,
}

impl Default for ResolverConfig {
    /// glibc's defaults for an empty resolv.conf: the local name server, no search list.
    fn default() -> ResolverConfig {
        ResolverConfig {
            nameservers: vec![SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 53)],
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
            ipv6: true,
        }
    }
}

impl ResolverConfig {
    /// Reads resolv.conf at `path`.
    pub fn read(path: &Path) -> io::Result<ResolverConfig> {
        Ok(ResolverConfig::parse(&std::fs::read_to_string(path)?))
    }

    /// resolv.conf's `nameserver`, `search` (`domain` when there is no search line), and
    /// `options ndots: timeout: attempts:`; what it does not understand is skipped, as the
    /// C library skips it.
    pub fn parse(text: &str) -> ResolverConfig {
        let mut config = ResolverConfig {
            nameservers: Vec::new(),
            ..ResolverConfig::default()
        };
        let mut domain = None;
        let mut search = None;
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // An IPv6 server may carry a zone (`fe80::1%eth0`), which SocketAddr does
                    // not take: such a line is skipped.
                    if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) {
                        config.nameservers.push(SocketAddr::new(ip, 53));
                    }
                }
                Some("domain") => domain = words.next().map(str::to_owned),
                Some("search") => search = Some(words.map(str::to_owned).collect::<Vec<_>>()),
                Some("options") => {
                    for option in words {
                        let (name, value) = option.split_once(':').unwrap_or((option, ""));
                        let value = value.parse::<u64>().ok();
                        match (name, value) {
                            ("ndots", Some(n)) => config.ndots = n.min(15) as usize,
                            ("timeout", Some(n)) => {
                                config.timeout = Duration::from_secs(n.clamp(1, 30))
                            }
                            ("attempts", Some(n)) => config.attempts = n.clamp(1, 5) as usize,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        config.search = search.or(domain.map(|d| vec![d])).unwrap_or_default();
        config.search.retain(|d| d != ".");
        if config.nameservers.is_empty() {
            config.nameservers = ResolverConfig::default().nameservers;
        }
        config
    }

    /// The name servers to ask: without `ipv6`, the IPv4 ones (all of them if none is).
    fn servers(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        let all = self.ipv6 || self.nameservers.iter().all(SocketAddr::is_ipv6);
        (self.nameservers.iter().copied()).filter(move |server| all || server.is_ipv4())
    }

    /// The names to ask for `name`, in order, as the C library's resolver (and ingress-nginx's)
    /// tries them: a name with a trailing dot as it is; one with fewer dots than `ndots`
    /// with each search domain first, then as it is; others as they are first.
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if name.ends_with('.') {
            return vec![name.to_owned()];
        }
        let searched = self.search.iter().map(|domain| {
            let domain = domain.trim_end_matches('.');
            format!("{name}.{domain}")
        });
        let dots = name.matches('.').count();
        if dots < self.ndots {
            searched.chain([name.to_owned()]).collect()
        } else {
            [name.to_owned()].into_iter().chain(searched).collect()
        }
    }
}

/// What a name resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Its addresses (IPv4 when it has any, else IPv6), kept for `ttl`.
    Addresses {
        addresses: Vec<IpAddr>,
        ttl: Duration,
    },
    /// The name servers say it has no address (no such name under any candidate, or no A or
    /// AAAA record); `ttl`: how long they said that holds, when they did.
    NoAddress { ttl: Option<Duration> },
    /// No name server gave an answer: timeouts, refusals, failures, replies that do not parse.
    NoAnswer(String),
}

/// Looks `name` up as resolv.conf says (see [`ResolverConfig::candidates`]).
pub async fn lookup(config: &ResolverConfig, name: &str) -> Lookup {
    let mut negative_ttl: Option<Duration> = None;
    // Some server said of some candidate that it has no address.
    let mut said_none = false;
    let mut failure = None;
    for candidate in config.candidates(name) {
        let record_types = if config.ipv6 {
            &[RecordType::A, RecordType::Aaaa][..]
        } else {
            &[RecordType::A][..]
        };
        for &record_type in record_types {
            match ask(config, &candidate, record_type).await {
                // At most `wire::dns::MAX_ADDRESSES` of them.
                Ok(Reply::Addresses { addresses, ttl }) => {
                    let ttl = Duration::from_secs(ttl.into());
                    return Lookup::Addresses { addresses, ttl };
                }
                Ok(Reply::NoSuchName { ttl }) => {
                    said_none = true;
                    negative_ttl = min_ttl(negative_ttl, ttl);
                    // No such name has no AAAA either.
                    break;
                }
                Ok(Reply::NoAddresses { ttl }) => {
                    said_none = true;
                    negative_ttl = min_ttl(negative_ttl, ttl);
                }
                Ok(other) => failure = Some(format!("{candidate}: {other:?}")),
                Err(why) => failure = Some(format!("{candidate}: {why}")),
            }
        }
    }
    match failure {
        // Nothing but failures: the servers may be down, so this is not "none".
        Some(why) if !said_none => Lookup::NoAnswer(why),
        // A server said of some candidate that it has no address: the servers are up, and a
        // candidate they refuse (a search-list name outside their zones) is no outage.
        _ => Lookup::NoAddress { ttl: negative_ttl },
    }
}

fn min_ttl(kept: Option<Duration>, new: Option<u32>) -> Option<Duration> {
    let new = new.map(|s| Duration::from_secs(s.into()));
    match (kept, new) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// One question, to the servers in turn for `attempts` rounds, until one answers with a
/// reply that means something (addresses, no such name, no address). A truncated reply is
/// asked again over TCP of the same server.
async fn ask(
    config: &ResolverConfig,
    name: &str,
    record_type: RecordType,
) -> Result<Reply, String> {
    let mut last = String::from("no name server");
    for _ in 0..config.attempts.max(1) {
        for server in config.servers() {
            let id = fastrand::u16(..);
            let question = Question {
                server,
                message: query(id, name, record_type).map_err(|e| e.to_string())?,
                id,
                name,
                record_type,
                timeout: config.timeout,
            };
            let answer = match question.over_udp().await {
                Ok(Reply::Truncated) => question.over_tcp().await,
                other => other,
            };
            match answer {
                Ok(
                    reply @ (Reply::Addresses { .. }
                    | Reply::NoSuchName { .. }
                    | Reply::NoAddresses { .. }),
                ) => return Ok(reply),
                Ok(Reply::ServerError { rcode }) => {
                    last = format!("{server} answered with rcode {rcode}")
                }
                Ok(Reply::Truncated) => last = format!("{server} cut its reply over TCP"),
                Err(why) => last = format!("{server}: {why}"),
            }
        }
    }
    Err(last)
}

/// A query for one name and type, to one server.
struct Question<'a> {
    server: SocketAddr,
    message: Vec<u8>,
    id: u16,
    name: &'a str,
    record_type: RecordType,
    timeout: Duration,
}

impl Question<'_> {
    async fn over_udp(&self) -> Result<Reply, String> {
        let local: SocketAddr = match self.server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(local).await.map_err(|e| e.to_string())?;
        // Connected: the kernel drops datagrams from any other address.
        socket
            .connect(self.server)
            .await
            .map_err(|e| e.to_string())?;
        socket
            .send(&self.message)
            .await
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + self.timeout;
        // No EDNS in the query, so a server should send at most 512 bytes and cut the rest
        // (then TCP); room for more, so a server that sends more is still read whole.
        let mut buffer = [0u8; 4096];
        loop {
            let received = tokio::time::timeout_at(deadline, socket.recv(&mut buffer)).await;
            let length = match received {
                Err(_) => return Err(format!("no reply in {:?}", self.timeout)),
                Ok(Err(e)) => return Err(e.to_string()),
                Ok(Ok(length)) => length,
            };
            // A reply to another question (another id, a late answer) is not this one.
            match parse_reply(&buffer[..length], self.id, self.name, self.record_type) {
                Ok(reply) => return Ok(reply),
                Err(why) => {
                    tracing::debug!(server = %self.server, self.name, %why, "a reply that is not ours")
                }
            }
        }
    }

    async fn over_tcp(&self) -> Result<Reply, String> {
        let exchange = async {
            let mut stream = TcpStream::connect(self.server).await?;
            let mut framed = Vec::with_capacity(2 + self.message.len());
            framed.extend_from_slice(&(self.message.len() as u16).to_be_bytes());
            framed.extend_from_slice(&self.message);
            stream.write_all(&framed).await?;
            let length = stream.read_u16().await? as usize;
            let mut reply = vec![0u8; length];
            stream.read_exact(&mut reply).await?;
            Ok::<_, io::Error>(reply)
        };
        let reply = timeout(self.timeout, exchange)
            .await
            .map_err(|_| format!("no reply over TCP in {:?}", self.timeout))?
            .map_err(|e| format!("over TCP: {e}"))?;
        parse_reply(&reply, self.id, self.name, self.record_type).map_err(|e| e.to_string())
    }
}

/// What a name's lookup changed: its addresses (an empty list: it has none now), or what is
/// to be said of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub name: String,
    pub addresses: Vec<IpAddr>,
    /// `None` for a plain answer; else why there are no addresses (no such name, no record),
    /// or why they are the last ones found (no name server answers).
    pub problem: Option<String>,
}

struct Slot {
    due: Instant,
    /// What was last reported; `None` before the first answer.
    addresses: Option<Vec<IpAddr>>,
    /// What was last said with them (see `Resolution::problem`).
    problem: Option<String>,
    /// Failures in a row, for the backoff.
    failures: u32,
    in_flight: bool,
}

type LookupFuture = Pin<Box<dyn std::future::Future<Output = (String, Lookup)> + Send>>;

/// The names the published configuration needs, each looked up when due. Driven by the
/// control loop's `select!` through [`NameWatch::next`] (cancel-safe: every state lives here).
pub struct NameWatch {
    config: std::sync::Arc<ResolverConfig>,
    slots: BTreeMap<String, Slot>,
    in_flight: FuturesUnordered<LookupFuture>,
}

impl NameWatch {
    pub fn new(config: ResolverConfig) -> NameWatch {
        NameWatch {
            config: std::sync::Arc::new(config),
            slots: BTreeMap::new(),
            in_flight: FuturesUnordered::new(),
        }
    }

    /// `disable-ipv6-dns` from the ConfigMap: from each name's next lookup on, no AAAA
    /// question and no IPv6 name server.
    pub fn set_ipv6(&mut self, ipv6: bool) {
        if self.config.ipv6 != ipv6 {
            let mut config = (*self.config).clone();
            config.ipv6 = ipv6;
            self.config = std::sync::Arc::new(config);
        }
    }

    /// The names to keep resolved from now on: new ones are due at once, others are
    /// forgotten (a lookup in flight for one is let finish and dropped).
    pub fn want(&mut self, names: &BTreeSet<String>) {
        self.slots.retain(|name, _| names.contains(name));
        for name in names {
            self.slots.entry(name.clone()).or_insert_with(|| Slot {
                due: Instant::now(),
                addresses: None,
                problem: None,
                failures: 0,
                in_flight: false,
            });
        }
    }

    /// The next change of a wanted name's addresses. Never returns while nothing changes
    /// (pending forever when no name is wanted).
    pub async fn next(&mut self) -> Resolution {
        loop {
            self.start_due();
            let next_due = (self.slots.values())
                .filter(|s| !s.in_flight)
                .map(|s| s.due)
                .min();
            let wake = async {
                match next_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some((name, lookup)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    if let Some(changed) = self.settle(name, lookup) {
                        return changed;
                    }
                }
                () = wake => {}
            }
        }
    }

    fn start_due(&mut self) {
        let now = Instant::now();
        for (name, slot) in &mut self.slots {
            if self.in_flight.len() >= CONCURRENT_LOOKUPS {
                break;
            }
            if slot.in_flight || slot.due > now {
                continue;
            }
            slot.in_flight = true;
            let config = self.config.clone();
            let name = name.clone();
            self.in_flight.push(Box::pin(async move {
                let found = lookup(&config, &name).await;
                (name, found)
            }));
        }
    }

    /// Takes a finished lookup into its slot; returns the change to report, if any.
    fn settle(&mut self, name: String, lookup: Lookup) -> Option<Resolution> {
        let slot = self.slots.get_mut(&name)?;
        slot.in_flight = false;
        let now = Instant::now();
        let backoff = |failures: u32| {
            (FIRST_RETRY * 2u32.saturating_pow(failures.saturating_sub(1).min(16))).min(MAX_RETRY)
        };
        let (addresses, problem) = match lookup {
            Lookup::Addresses { addresses, ttl } => {
                if slot.failures > 0 {
                    tracing::info!(name, ?addresses, "a backend's host name resolves again");
                }
                slot.failures = 0;
                slot.due = now + ttl.clamp(MIN_TTL, MAX_TTL);
                (addresses, None)
            }
            Lookup::NoAddress { ttl } => {
                slot.failures += 1;
                let retry = ttl.map_or(backoff(slot.failures), |t| t.min(backoff(slot.failures)));
                slot.due = now + retry.max(MIN_TTL);
                let problem = format!(
                    "host name {name} has no address (the name servers know no such name, or it \
                     has no A or AAAA record), so there is nothing to send to; asked again \
                     within {}s",
                    MAX_RETRY.as_secs()
                );
                (Vec::new(), Some(problem))
            }
            Lookup::NoAnswer(why) => {
                slot.failures += 1;
                slot.due = now + backoff(slot.failures);
                // Said once per outage: the reason of its first failure stands for the rest.
                let problem = match &slot.problem {
                    Some(kept) if slot.failures > 1 => kept.clone(),
                    _ => format!(
                        "no name server answers for host name {name} ({why}); the addresses \
                         last found are used until one does"
                    ),
                };
                (slot.addresses.clone().unwrap_or_default(), Some(problem))
            }
        };
        let mut addresses = addresses;
        addresses.sort_unstable();
        addresses.dedup();
        if slot.addresses.as_ref() == Some(&addresses) && slot.problem == problem {
            return None;
        }
        match &problem {
            None => tracing::info!(name, ?addresses, "a backend's host name resolved"),
            Some(problem) => tracing::warn!("{problem}"),
        }
        slot.addresses = Some(addresses.clone());
        slot.problem = problem.clone();
        Some(Resolution {
            name,
            addresses,
            problem,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_is_read_as_the_c_library_reads_it() {
        let config = ResolverConfig::parse(
            "# comment\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nnameserver ::1 ; x\n\
             domain ignored.example\nsearch ns.svc.cluster.local svc.cluster.local .\n\
             options ndots:5 timeout:3 attempts:9 rotate\n",
        );
        assert_eq!(
            config.nameservers,
            [
                "10.96.0.10:53".parse().unwrap(),
                "[::1]:53".parse().unwrap()
            ]
        );
        assert_eq!(config.search, ["ns.svc.cluster.local", "svc.cluster.local"]);
        assert_eq!(config.ndots, 5);
        assert_eq!(config.timeout, Duration::from_secs(3));
        assert_eq!(config.attempts, 5);

        let empty = ResolverConfig::parse("domain example.com\n");
        assert_eq!(empty.nameservers, ResolverConfig::default().nameservers);
        assert_eq!(empty.search, ["example.com"]);
        assert_eq!(empty.ndots, 1);
    }

    #[test]
    fn names_are_tried_with_the_search_list_as_ndots_says() {
        let config = ResolverConfig {
            search: vec!["ns.svc.cluster.local".into(), "cluster.local.".into()],
            ndots: 2,
            ..ResolverConfig::default()
        };
        assert_eq!(
            config.candidates("db"),
            ["db.ns.svc.cluster.local", "db.cluster.local", "db"]
        );
        assert_eq!(
            config.candidates("api.example.com"),
            [
                "api.example.com",
                "api.example.com.ns.svc.cluster.local",
                "api.example.com.cluster.local"
            ]
        );
        assert_eq!(config.candidates("api.example.com."), ["api.example.com."]);
    }

    #[test]
    fn a_failure_keeps_the_last_addresses_and_no_address_clears_them() {
        let mut watch = NameWatch::new(ResolverConfig::default());
        let name = "api.example.com".to_owned();
        watch.want(&BTreeSet::from([name.clone()]));
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let found = Lookup::Addresses {
            addresses: vec![ip, ip],
            ttl: Duration::ZERO,
        };
        assert_eq!(
            watch.settle(name.clone(), found.clone()),
            Some(Resolution {
                name: name.clone(),
                addresses: vec![ip],
                problem: None,
            })
        );
        // TTL 0 is kept for the minimum.
        assert!(watch.slots[&name].due >= Instant::now() + MIN_TTL - Duration::from_millis(50));
        // The same addresses again: nothing to report.
        assert_eq!(watch.settle(name.clone(), found.clone()), None);
        // No server answered: the addresses stay, with a word on why they are old; said once.
        let outage = watch.settle(name.clone(), Lookup::NoAnswer("timeout".into()));
        let outage = outage.expect("the first failure is reported");
        assert_eq!(outage.addresses, [ip]);
        let said = outage.problem.expect("what is said of the addresses");
        assert!(
            said.contains("no name server answers") && said.contains("timeout"),
            "{said}"
        );
        let again = watch.settle(name.clone(), Lookup::NoAnswer("refused".into()));
        assert_eq!(again, None, "the same outage");
        assert_eq!(watch.slots[&name].failures, 2);
        // Back: the word goes.
        let back = watch
            .settle(name.clone(), found)
            .expect("recovery is reported");
        assert_eq!((back.addresses, back.problem), (vec![ip], None));
        // The servers say there is no address: reported empty, and why.
        let gone = watch.settle(name.clone(), Lookup::NoAddress { ttl: Some(MAX_TTL) });
        let gone = gone.expect("reported");
        assert!(gone.addresses.is_empty());
        assert!(gone.problem.unwrap().contains("has no address"));
        // Asked again by the backoff, not the negative TTL's 5 minutes.
        assert!(watch.slots[&name].due <= Instant::now() + FIRST_RETRY * 2);
        // A name no longer wanted is forgotten, and its late answer dropped.
        watch.want(&BTreeSet::new());
        assert!(watch.slots.is_empty());
        assert_eq!(watch.settle(name, Lookup::NoAddress { ttl: None }), None);
    }

    /// A name server on 127.0.0.1 that answers every question with "no address" and notes
    /// the record types asked.
    async fn noting_server() -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<u16>>>) {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let noted = asked.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let query = &mut buf[..n];
                let kind = u16::from_be_bytes([query[n - 4], query[n - 3]]);
                noted.lock().unwrap().push(kind);
                // The question back as a response (QR, RA, NOERROR) with no answer.
                query[2] |= 0x80;
                query[3] = 0x80;
                let _ = socket.send_to(query, from).await;
            }
        });
        (addr, asked)
    }

    #[tokio::test]
    async fn without_ipv6_no_aaaa_is_asked_and_no_ipv6_server() {
        let (server, asked) = noting_server().await;
        let mut config = ResolverConfig {
            nameservers: vec![server],
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(2),
            attempts: 1,
            ipv6: true,
        };
        let none = Lookup::NoAddress { ttl: None };
        assert_eq!(lookup(&config, "db.example.test").await, none);
        assert_eq!(*asked.lock().unwrap(), [1, 28], "A, then AAAA");
        asked.lock().unwrap().clear();
        config.ipv6 = false;
        assert_eq!(lookup(&config, "db.example.test").await, none);
        assert_eq!(*asked.lock().unwrap(), [1], "A only");

        let v6: SocketAddr = "[::1]:53".parse().unwrap();
        config.nameservers = vec![v6, server];
        assert_eq!(config.servers().collect::<Vec<_>>(), [server]);
        config.nameservers = vec![v6];
        assert_eq!(
            config.servers().collect::<Vec<_>>(),
            [v6],
            "none left: all of them"
        );
        config.ipv6 = true;
        config.nameservers = vec![v6, server];
        assert_eq!(config.servers().collect::<Vec<_>>(), [v6, server]);
    }
}
