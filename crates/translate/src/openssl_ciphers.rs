//! OpenSSL cipher lists (nginx's `ssl_ciphers`: the `ssl-ciphers` ConfigMap key and
//! annotation) read into the TLS 1.2 suites rustls speaks.
//!
//! ```text
//!  "ECDHE+AESGCM:!aNULL:@STRENGTH" ─words (: , or space)─▶ rules over OpenSSL's cipher table,
//!      in OpenSSL's default order: add (no prefix), - remove, ! remove for good, + move to
//!      the end, A+B both, @STRENGTH sort by key bits
//!  the ciphers left on, in order ─▶ those rustls has (ECDHE with AES-GCM or ChaCha20-Poly1305)
//!      named ones it has not, and no suite with the same authentication and cipher in the
//!      list to serve their clients ─▶ `dropped`   words OpenSSL does not know ─▶ `unknown`
//! ```
//! The table holds what OpenSSL 1.1.1/3 builds offer for TLS 1.2 and older, in the order
//! `openssl ciphers -v ALL` prints them ((EC)DHE with AEAD, (EC)DHE, other AEAD, the rest;
//! by key bits within each; ECDHE before DHE, GCM before ChaCha20, AES first, TLS 1.2
//! before older), so an alias selects them in OpenSSL's order.

use model::Severity;
use rustls::CipherSuite;

/// What a cipher list selects, in its order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CipherList {
    /// The TLS 1.2 suites rustls speaks, most preferred first.
    pub suites: Vec<CipherSuite>,
    /// Ciphers named one by one that rustls cannot do (DHE without an ECDHE twin in the list,
    /// CBC, RSA key exchange, 3DES, ...): left out.
    pub dropped: Vec<&'static str>,
    /// Words that are no OpenSSL cipher or alias (OpenSSL skips them too).
    pub unknown: Vec<String>,
}

impl CipherList {
    /// What was left out, said the same for the ConfigMap key and the annotation: the
    /// names rustls cannot do (a difference) and the words that are no OpenSSL name.
    pub(crate) fn notes(&self) -> Vec<(Severity, String)> {
        let mut notes = Vec::new();
        if !self.dropped.is_empty() {
            notes.push((
                Severity::Difference,
                format!(
                    "{} dropped: rustls speaks TLS 1.2 only with ECDHE and AES-GCM or \
                     ChaCha20-Poly1305 (no DHE, CBC, RSA key exchange, 3DES or RC4)",
                    self.dropped.join(":")
                ),
            ));
        }
        if !self.unknown.is_empty() {
            notes.push((
                Severity::Error,
                format!(
                    "{} ignored: no OpenSSL cipher or alias by that name (OpenSSL skips them \
                     too)",
                    self.unknown.join(":")
                ),
            ));
        }
        notes
    }
}

/// What a bad list is answered with.
pub(crate) const EXPECTED: &str = "an OpenSSL cipher list like \
     ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256 or HIGH:!aNULL:!MD5";

/// Reads an OpenSSL cipher list. `Err`: characters no cipher list has.
pub(crate) fn parse(text: &str) -> Result<CipherList, &'static str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "!:+-_.,@= ".contains(c);
    if text.trim().is_empty() || !text.chars().all(allowed) {
        return Err(EXPECTED);
    }
    // OpenSSL's working list: every cipher off, in its default order.
    let mut order: Vec<usize> = (0..TABLE.len()).collect();
    let mut on = [false; TABLE.len()];
    let mut killed = [false; TABLE.len()];
    let mut named: Vec<usize> = Vec::new();
    let mut unknown = Vec::new();
    for word in text.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        if word == "@STRENGTH" {
            // Stable: equal strength keeps its order.
            order.sort_by_key(|i| std::cmp::Reverse(TABLE[*i].bits));
            continue;
        }
        if word.starts_with("@SECLEVEL=") {
            continue;
        }
        let (op, body) = match word.as_bytes()[0] {
            b'!' => (Op::Kill, &word[1..]),
            b'-' => (Op::Remove, &word[1..]),
            b'+' => (Op::Last, &word[1..]),
            _ => (Op::Add, word),
        };
        let Some(selects) = selector(body) else {
            unknown.push(word.to_owned());
            continue;
        };
        if let (Op::Add, Selector::Name(index)) = (op, &selects) {
            named.push(*index);
        }
        let matching: Vec<usize> = order
            .iter()
            .copied()
            .filter(|i| selects.matches(*i))
            .collect();
        match op {
            Op::Add => {
                let added: Vec<usize> = (matching.into_iter())
                    .filter(|i| !on[*i] && !killed[*i])
                    .collect();
                for i in &added {
                    on[*i] = true;
                }
                move_to_end(&mut order, &added);
            }
            Op::Last => {
                let moved: Vec<usize> = matching.into_iter().filter(|i| on[*i]).collect();
                move_to_end(&mut order, &moved);
            }
            Op::Remove => matching.into_iter().for_each(|i| on[i] = false),
            Op::Kill => matching.into_iter().for_each(|i| {
                on[i] = false;
                killed[i] = true;
            }),
        }
    }
    let suites: Vec<CipherSuite> = (order.iter())
        .filter(|i| on[**i])
        .filter_map(|i| TABLE[*i].rustls)
        .collect();
    let served = |cipher: &Cipher| {
        TABLE.iter().any(|twin| {
            twin.rustls.is_some_and(|s| suites.contains(&s))
                && twin.auth == cipher.auth
                && twin.enc == cipher.enc
        })
    };
    let mut dropped = Vec::new();
    for i in named {
        let cipher = &TABLE[i];
        if on[i] && cipher.rustls.is_none() && !served(cipher) && !dropped.contains(&cipher.name) {
            dropped.push(cipher.name);
        }
    }
    Ok(CipherList {
        suites,
        dropped,
        unknown,
    })
}

/// Moves `items` (in their order) to the end of `order`.
fn move_to_end(order: &mut Vec<usize>, items: &[usize]) {
    if items.is_empty() {
        return;
    }
    order.retain(|i| !items.contains(i));
    order.extend_from_slice(items);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Remove,
    Kill,
    Last,
}

/// What one word (without its prefix) selects.
enum Selector {
    Name(usize),
    /// Aliases joined by `+`: a cipher every one of them selects.
    Aliases(Vec<Alias>),
}

impl Selector {
    fn matches(&self, index: usize) -> bool {
        match self {
            Selector::Name(i) => *i == index,
            Selector::Aliases(all) => all.iter().all(|a| a.matches(&TABLE[index])),
        }
    }
}

fn selector(body: &str) -> Option<Selector> {
    if let Some(i) = TABLE.iter().position(|c| c.name == body) {
        return Some(Selector::Name(i));
    }
    let aliases = (body.split('+'))
        .map(alias)
        .collect::<Option<Vec<Alias>>>()?;
    (!aliases.is_empty()).then_some(Selector::Aliases(aliases))
}

/// An OpenSSL alias: a set of ciphers by their properties.
#[derive(Clone, Copy, Debug)]
enum Alias {
    All,
    ComplementOfAll,
    Default,
    ComplementOfDefault,
    High,
    Medium,
    /// LOW, EXPORT: none left in OpenSSL builds.
    Nothing,
    Kx(Kx),
    /// The key exchange without anonymous ones (`ECDHE`, `DHE`).
    KxAuthenticated(Kx),
    /// Anonymous ones of this key exchange (`AECDH`, `ADH`).
    KxAnonymous(Kx),
    Auth(Auth),
    Enc(&'static [Enc]),
    Mac(Mac),
    Tls12,
    Legacy,
}

fn alias(word: &str) -> Option<Alias> {
    use Enc::*;
    Some(match word {
        "ALL" => Alias::All,
        "COMPLEMENTOFALL" => Alias::ComplementOfAll,
        "DEFAULT" => Alias::Default,
        "COMPLEMENTOFDEFAULT" => Alias::ComplementOfDefault,
        "HIGH" => Alias::High,
        "MEDIUM" => Alias::Medium,
        "LOW" | "EXP" | "EXPORT" | "EXPORT40" | "EXPORT56" | "PSK" | "kPSK" | "aPSK"
        | "ECDHEPSK" | "DHEPSK" | "RSAPSK" | "kECDHEPSK" | "kDHEPSK" | "kRSAPSK" | "SRP"
        | "kSRP" | "aSRP" | "GOST" | "kGOST" | "aGOST" | "aGOST01" | "aGOST12" | "IDEA"
        | "SEED" | "ARIA" | "ARIA128" | "ARIA256" | "ARIAGCM" | "DES" | "RC2" | "AESCCM8"
        | "kDH" | "kDHr" | "kDHd" | "aDH" | "kECDH" | "kECDHr" | "kECDHe" | "aECDH"
        | "CHACHA20POLY1305" => Alias::Nothing,
        "kECDHE" | "kEECDH" | "ECDH" => Alias::Kx(Kx::Ecdhe),
        "ECDHE" | "EECDH" => Alias::KxAuthenticated(Kx::Ecdhe),
        "AECDH" => Alias::KxAnonymous(Kx::Ecdhe),
        "kDHE" | "kEDH" | "DH" => Alias::Kx(Kx::Dhe),
        "DHE" | "EDH" => Alias::KxAuthenticated(Kx::Dhe),
        "ADH" => Alias::KxAnonymous(Kx::Dhe),
        "kRSA" | "RSA" => Alias::Kx(Kx::Rsa),
        "aRSA" => Alias::Auth(Auth::Rsa),
        "aECDSA" | "ECDSA" => Alias::Auth(Auth::Ecdsa),
        "aDSS" | "DSS" => Alias::Auth(Auth::Dss),
        "aNULL" => Alias::Auth(Auth::Null),
        "eNULL" | "NULL" => Alias::Enc(&[Null]),
        "AESGCM" => Alias::Enc(&[Aes128Gcm, Aes256Gcm]),
        "AESCCM" => Alias::Enc(&[Aes128Ccm, Aes256Ccm]),
        "AES" => Alias::Enc(&[
            Aes128Gcm, Aes256Gcm, Aes128Ccm, Aes256Ccm, Aes128Cbc, Aes256Cbc,
        ]),
        "AES128" => Alias::Enc(&[Aes128Gcm, Aes128Ccm, Aes128Cbc]),
        "AES256" => Alias::Enc(&[Aes256Gcm, Aes256Ccm, Aes256Cbc]),
        "CHACHA20" => Alias::Enc(&[Chacha20]),
        "CAMELLIA" => Alias::Enc(&[Camellia128, Camellia256]),
        "CAMELLIA128" => Alias::Enc(&[Camellia128]),
        "CAMELLIA256" => Alias::Enc(&[Camellia256]),
        "3DES" => Alias::Enc(&[TripleDes]),
        "RC4" => Alias::Enc(&[Rc4]),
        "SHA1" | "SHA" => Alias::Mac(Mac::Sha1),
        "SHA256" => Alias::Mac(Mac::Sha256),
        "SHA384" => Alias::Mac(Mac::Sha384),
        "MD5" => Alias::Mac(Mac::Md5),
        "TLSv1.2" => Alias::Tls12,
        "TLSv1" | "TLSv1.0" | "SSLv3" => Alias::Legacy,
        _ => return None,
    })
}

impl Alias {
    fn matches(self, c: &Cipher) -> bool {
        let null = c.enc == Enc::Null;
        match self {
            Alias::All => !null,
            Alias::ComplementOfAll => null,
            Alias::Default => !null && c.auth != Auth::Null,
            Alias::ComplementOfDefault => !null && c.auth == Auth::Null,
            Alias::High => c.bits >= 128 && c.enc != Enc::Rc4,
            Alias::Medium => matches!(c.enc, Enc::TripleDes | Enc::Rc4),
            Alias::Nothing => false,
            Alias::Kx(kx) => c.kx == kx,
            Alias::KxAuthenticated(kx) => c.kx == kx && c.auth != Auth::Null,
            Alias::KxAnonymous(kx) => c.kx == kx && c.auth == Auth::Null,
            Alias::Auth(auth) => c.auth == auth,
            Alias::Enc(encs) => encs.contains(&c.enc),
            Alias::Mac(mac) => c.mac == mac,
            Alias::Tls12 => c.tls12_only(),
            Alias::Legacy => !c.tls12_only(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kx {
    Ecdhe,
    Dhe,
    Rsa,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Auth {
    Ecdsa,
    Rsa,
    Dss,
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Enc {
    Aes128Gcm,
    Aes256Gcm,
    Aes128Ccm,
    Aes256Ccm,
    Chacha20,
    Aes128Cbc,
    Aes256Cbc,
    Camellia128,
    Camellia256,
    TripleDes,
    Rc4,
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mac {
    Aead,
    Sha1,
    Sha256,
    Sha384,
    Md5,
}

/// One OpenSSL cipher: its name, what it is made of, and rustls' suite if rustls has it.
struct Cipher {
    name: &'static str,
    kx: Kx,
    auth: Auth,
    enc: Enc,
    mac: Mac,
    /// Key bits, as `@STRENGTH` sorts them.
    bits: u16,
    rustls: Option<CipherSuite>,
}

impl Cipher {
    /// Introduced with TLS 1.2 (AEAD or SHA-2 MACs): what `TLSv1.2` selects.
    fn tls12_only(&self) -> bool {
        matches!(self.mac, Mac::Aead | Mac::Sha256 | Mac::Sha384)
    }
}

const fn c(name: &'static str, kx: Kx, auth: Auth, enc: Enc, mac: Mac, bits: u16) -> Cipher {
    Cipher {
        name,
        kx,
        auth,
        enc,
        mac,
        bits,
        rustls: None,
    }
}

const fn r(name: &'static str, kx: Kx, auth: Auth, enc: Enc, suite: CipherSuite) -> Cipher {
    let bits = match enc {
        Enc::Aes128Gcm => 128,
        _ => 256,
    };
    Cipher {
        name,
        kx,
        auth,
        enc,
        mac: Mac::Aead,
        bits,
        rustls: Some(suite),
    }
}

/// OpenSSL's ciphers for TLS 1.2 and older, in its default order (see the module's doc).
#[rustfmt::skip]
const TABLE: [Cipher; 72] = {
    use Auth::{Dss, Ecdsa, Null as Anon, Rsa as RsaAuth};
    use Enc::*;
    use Kx::{Dhe, Ecdhe, Rsa};
    use Mac::{Aead, Md5, Sha1, Sha256, Sha384};
    [
        // (EC)DHE with AEAD, 256 bits.
        r("ECDHE-ECDSA-AES256-GCM-SHA384", Ecdhe, Ecdsa, Aes256Gcm, CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
        r("ECDHE-RSA-AES256-GCM-SHA384", Ecdhe, RsaAuth, Aes256Gcm, CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
        c("DHE-DSS-AES256-GCM-SHA384", Dhe, Dss, Aes256Gcm, Aead, 256),
        c("DHE-RSA-AES256-GCM-SHA384", Dhe, RsaAuth, Aes256Gcm, Aead, 256),
        r("ECDHE-ECDSA-CHACHA20-POLY1305", Ecdhe, Ecdsa, Chacha20, CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
        r("ECDHE-RSA-CHACHA20-POLY1305", Ecdhe, RsaAuth, Chacha20, CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
        c("DHE-RSA-CHACHA20-POLY1305", Dhe, RsaAuth, Chacha20, Aead, 256),
        c("ECDHE-ECDSA-AES256-CCM", Ecdhe, Ecdsa, Aes256Ccm, Aead, 256),
        c("DHE-RSA-AES256-CCM", Dhe, RsaAuth, Aes256Ccm, Aead, 256),
        c("ADH-AES256-GCM-SHA384", Dhe, Anon, Aes256Gcm, Aead, 256),
        // (EC)DHE with AEAD, 128 bits.
        r("ECDHE-ECDSA-AES128-GCM-SHA256", Ecdhe, Ecdsa, Aes128Gcm, CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
        r("ECDHE-RSA-AES128-GCM-SHA256", Ecdhe, RsaAuth, Aes128Gcm, CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
        c("DHE-DSS-AES128-GCM-SHA256", Dhe, Dss, Aes128Gcm, Aead, 128),
        c("DHE-RSA-AES128-GCM-SHA256", Dhe, RsaAuth, Aes128Gcm, Aead, 128),
        c("ECDHE-ECDSA-AES128-CCM", Ecdhe, Ecdsa, Aes128Ccm, Aead, 128),
        c("DHE-RSA-AES128-CCM", Dhe, RsaAuth, Aes128Ccm, Aead, 128),
        c("ADH-AES128-GCM-SHA256", Dhe, Anon, Aes128Gcm, Aead, 128),
        // (EC)DHE with CBC, TLS 1.2's MACs.
        c("ECDHE-ECDSA-AES256-SHA384", Ecdhe, Ecdsa, Aes256Cbc, Sha384, 256),
        c("ECDHE-RSA-AES256-SHA384", Ecdhe, RsaAuth, Aes256Cbc, Sha384, 256),
        c("DHE-RSA-AES256-SHA256", Dhe, RsaAuth, Aes256Cbc, Sha256, 256),
        c("DHE-DSS-AES256-SHA256", Dhe, Dss, Aes256Cbc, Sha256, 256),
        c("ECDHE-ECDSA-CAMELLIA256-SHA384", Ecdhe, Ecdsa, Camellia256, Sha384, 256),
        c("ECDHE-RSA-CAMELLIA256-SHA384", Ecdhe, RsaAuth, Camellia256, Sha384, 256),
        c("DHE-RSA-CAMELLIA256-SHA256", Dhe, RsaAuth, Camellia256, Sha256, 256),
        c("ADH-AES256-SHA256", Dhe, Anon, Aes256Cbc, Sha256, 256),
        c("ECDHE-ECDSA-AES128-SHA256", Ecdhe, Ecdsa, Aes128Cbc, Sha256, 128),
        c("ECDHE-RSA-AES128-SHA256", Ecdhe, RsaAuth, Aes128Cbc, Sha256, 128),
        c("DHE-RSA-AES128-SHA256", Dhe, RsaAuth, Aes128Cbc, Sha256, 128),
        c("DHE-DSS-AES128-SHA256", Dhe, Dss, Aes128Cbc, Sha256, 128),
        c("ECDHE-ECDSA-CAMELLIA128-SHA256", Ecdhe, Ecdsa, Camellia128, Sha256, 128),
        c("ECDHE-RSA-CAMELLIA128-SHA256", Ecdhe, RsaAuth, Camellia128, Sha256, 128),
        c("DHE-RSA-CAMELLIA128-SHA256", Dhe, RsaAuth, Camellia128, Sha256, 128),
        c("ADH-AES128-SHA256", Dhe, Anon, Aes128Cbc, Sha256, 128),
        // (EC)DHE with CBC, older MACs.
        c("ECDHE-ECDSA-AES256-SHA", Ecdhe, Ecdsa, Aes256Cbc, Sha1, 256),
        c("ECDHE-RSA-AES256-SHA", Ecdhe, RsaAuth, Aes256Cbc, Sha1, 256),
        c("DHE-RSA-AES256-SHA", Dhe, RsaAuth, Aes256Cbc, Sha1, 256),
        c("DHE-DSS-AES256-SHA", Dhe, Dss, Aes256Cbc, Sha1, 256),
        c("DHE-RSA-CAMELLIA256-SHA", Dhe, RsaAuth, Camellia256, Sha1, 256),
        c("AECDH-AES256-SHA", Ecdhe, Anon, Aes256Cbc, Sha1, 256),
        c("ADH-AES256-SHA", Dhe, Anon, Aes256Cbc, Sha1, 256),
        c("ECDHE-ECDSA-AES128-SHA", Ecdhe, Ecdsa, Aes128Cbc, Sha1, 128),
        c("ECDHE-RSA-AES128-SHA", Ecdhe, RsaAuth, Aes128Cbc, Sha1, 128),
        c("DHE-RSA-AES128-SHA", Dhe, RsaAuth, Aes128Cbc, Sha1, 128),
        c("DHE-DSS-AES128-SHA", Dhe, Dss, Aes128Cbc, Sha1, 128),
        c("DHE-RSA-CAMELLIA128-SHA", Dhe, RsaAuth, Camellia128, Sha1, 128),
        c("AECDH-AES128-SHA", Ecdhe, Anon, Aes128Cbc, Sha1, 128),
        c("ADH-AES128-SHA", Dhe, Anon, Aes128Cbc, Sha1, 128),
        c("ECDHE-ECDSA-DES-CBC3-SHA", Ecdhe, Ecdsa, TripleDes, Sha1, 112),
        c("ECDHE-RSA-DES-CBC3-SHA", Ecdhe, RsaAuth, TripleDes, Sha1, 112),
        c("EDH-RSA-DES-CBC3-SHA", Dhe, RsaAuth, TripleDes, Sha1, 112),
        c("ECDHE-ECDSA-RC4-SHA", Ecdhe, Ecdsa, Rc4, Sha1, 128),
        c("ECDHE-RSA-RC4-SHA", Ecdhe, RsaAuth, Rc4, Sha1, 128),
        // Other AEAD (RSA key exchange).
        c("AES256-GCM-SHA384", Rsa, RsaAuth, Aes256Gcm, Aead, 256),
        c("AES256-CCM", Rsa, RsaAuth, Aes256Ccm, Aead, 256),
        c("AES128-GCM-SHA256", Rsa, RsaAuth, Aes128Gcm, Aead, 128),
        c("AES128-CCM", Rsa, RsaAuth, Aes128Ccm, Aead, 128),
        // The rest.
        c("AES256-SHA256", Rsa, RsaAuth, Aes256Cbc, Sha256, 256),
        c("CAMELLIA256-SHA256", Rsa, RsaAuth, Camellia256, Sha256, 256),
        c("AES128-SHA256", Rsa, RsaAuth, Aes128Cbc, Sha256, 128),
        c("CAMELLIA128-SHA256", Rsa, RsaAuth, Camellia128, Sha256, 128),
        c("AES256-SHA", Rsa, RsaAuth, Aes256Cbc, Sha1, 256),
        c("CAMELLIA256-SHA", Rsa, RsaAuth, Camellia256, Sha1, 256),
        c("AES128-SHA", Rsa, RsaAuth, Aes128Cbc, Sha1, 128),
        c("CAMELLIA128-SHA", Rsa, RsaAuth, Camellia128, Sha1, 128),
        c("DES-CBC3-SHA", Rsa, RsaAuth, TripleDes, Sha1, 112),
        c("RC4-SHA", Rsa, RsaAuth, Rc4, Sha1, 128),
        c("RC4-MD5", Rsa, RsaAuth, Rc4, Md5, 128),
        // No encryption at all: only COMPLEMENTOFALL, eNULL or the name selects them.
        c("ECDHE-ECDSA-NULL-SHA", Ecdhe, Ecdsa, Null, Sha1, 0),
        c("ECDHE-RSA-NULL-SHA", Ecdhe, RsaAuth, Null, Sha1, 0),
        c("NULL-SHA256", Rsa, RsaAuth, Null, Sha256, 0),
        c("NULL-SHA", Rsa, RsaAuth, Null, Sha1, 0),
        c("NULL-MD5", Rsa, RsaAuth, Null, Md5, 0),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;
    use CipherSuite::*;

    /// ingress-nginx's default `ssl-ciphers` (config.go).
    const INGRESS_NGINX: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-AES128-GCM-SHA256";
    /// Mozilla's intermediate configuration (server side TLS guidelines, v5.7).
    const MOZILLA_INTERMEDIATE: &str = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
    /// Mozilla's modern configuration of v4 (before modern became TLS 1.3 only).
    const MOZILLA_MODERN_V4: &str = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256";

    const ORDERED_BY_NAME: [CipherSuite; 6] = [
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    /// OpenSSL's own order of the same six (`openssl ciphers -v HIGH`).
    const OPENSSL_ORDER: [CipherSuite; 6] = [
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ];

    fn clean(text: &str) -> Vec<CipherSuite> {
        let list = parse(text).unwrap();
        assert_eq!(list.dropped, Vec::<&str>::new(), "{text}");
        assert_eq!(list.unknown, Vec::<String>::new(), "{text}");
        list.suites
    }

    #[test]
    fn the_lists_people_use_read_without_a_word_dropped() {
        assert_eq!(clean(INGRESS_NGINX), ORDERED_BY_NAME);
        assert_eq!(clean(MOZILLA_INTERMEDIATE), ORDERED_BY_NAME);
        assert_eq!(clean(MOZILLA_MODERN_V4), OPENSSL_ORDER);
        assert_eq!(
            model::server_tls::TLS12_DEFAULT,
            ORDERED_BY_NAME,
            "the model's default is ingress-nginx's list"
        );
    }

    #[test]
    fn aliases_select_in_openssl_s_order() {
        assert_eq!(clean("HIGH:!aNULL:!MD5"), OPENSSL_ORDER);
        assert_eq!(
            clean("ECDHE+AESGCM:ECDHE+CHACHA20"),
            [
                TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ]
        );
        assert_eq!(clean("DEFAULT"), OPENSSL_ORDER);
        assert_eq!(clean("ALL:!COMPLEMENTOFDEFAULT:!eNULL"), OPENSSL_ORDER);
        assert_eq!(
            clean("EECDH+AESGCM:EDH+AESGCM"),
            [
                TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ]
        );
        // Only RSA certificates' suites.
        assert_eq!(
            clean("ECDHE+aRSA+AESGCM"),
            [
                TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ]
        );
        assert_eq!(
            clean("TLSv1.2+ECDSA"),
            [
                TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            ]
        );
    }

    #[test]
    fn prefixes_remove_kill_and_reorder() {
        // `+` moves to the end, `-` removes (may come back), `!` removes for good.
        assert_eq!(
            clean("AESGCM+ECDHE:CHACHA20:+AES256"),
            [
                TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
                TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
                TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            ]
        );
        assert_eq!(
            clean("HIGH:-CHACHA20:ECDHE-RSA-CHACHA20-POLY1305"),
            [
                TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            ]
        );
        assert_eq!(clean("HIGH:!CHACHA20:ECDHE-RSA-CHACHA20-POLY1305").len(), 4);
        // @STRENGTH: 256-bit first, order kept among equals.
        assert_eq!(
            clean("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:@STRENGTH"),
            [
                TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
                TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            ]
        );
        assert_eq!(clean("ECDHE+AESGCM:@SECLEVEL=2").len(), 4);
        // Commas and spaces separate too, as OpenSSL reads them.
        assert_eq!(
            clean("ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-AES256-GCM-SHA384").len(),
            2
        );
    }

    #[test]
    fn named_ciphers_rustls_lacks_are_dropped_unless_a_twin_serves_their_clients() {
        let list = parse("ECDHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES128-GCM-SHA256:AES128-SHA:ECDHE-RSA-AES256-SHA384:DHE-DSS-AES256-GCM-SHA384").unwrap();
        assert_eq!(list.suites, [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]);
        // DHE-RSA-AES128-GCM-SHA256's clients get its ECDHE twin; the others have none.
        assert_eq!(
            list.dropped,
            [
                "AES128-SHA",
                "ECDHE-RSA-AES256-SHA384",
                "DHE-DSS-AES256-GCM-SHA384"
            ]
        );
        // Killed names are not reported; aliases never are.
        let list = parse("HIGH:AES128-SHA:!AES128-SHA").unwrap();
        assert_eq!(list.dropped, Vec::<&str>::new());
        // Nothing rustls speaks: an empty list (the caller decides what applies).
        let list = parse("DHE-RSA-AES256-GCM-SHA384:AES256-SHA").unwrap();
        assert!(list.suites.is_empty());
        assert_eq!(list.dropped, ["DHE-RSA-AES256-GCM-SHA384", "AES256-SHA"]);
    }

    #[test]
    fn garbage_is_refused_and_unknown_words_reported() {
        for bad in ["", "   ", "ECDHE;rm -rf", "'HIGH'", "HIGH$", "ECDHE/AES"] {
            assert_eq!(parse(bad), Err(EXPECTED), "{bad:?}");
        }
        let list = parse("HIGH:FOOBAR:!TLS_AES_128_GCM_SHA256:ECDHE+BOGUS").unwrap();
        assert_eq!(list.suites, OPENSSL_ORDER);
        assert_eq!(
            list.unknown,
            ["FOOBAR", "!TLS_AES_128_GCM_SHA256", "ECDHE+BOGUS"]
        );
    }
}
