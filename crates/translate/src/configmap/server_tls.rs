//! The `ssl-*` keys of the client-facing handshake (`model::server_tls::ServerTls`): their
//! parsers (the `KEYS` entries call them) and the notes a value read with parts left out
//! earns once the whole ConfigMap is read.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine;
use model::server_tls::{CipherSuites, KxGroups, TicketKey, SESSIONS_PER_MEGABYTE};
use model::settings::Settings;
use model::upstream_tls::{ProtocolWords, TlsVersions};
use model::{Diagnostic, ObjectRef, Severity};
use rustls::NamedGroup;

use crate::openssl_ciphers;

/// nginx's largest record and rustls' smallest.
const MAX_RECORD: u64 = 16 * 1024;
const MIN_RECORD: u64 = 32;

pub(super) fn protocols(settings: &mut Settings, value: &str) -> Result<(), &'static str> {
    match TlsVersions::parse_nginx(value) {
        ProtocolWords::Unknown(_) => Err(TlsVersions::EXPECTED),
        ProtocolWords::Read { versions, .. } if versions.is_empty() => {
            Err("TLSv1.2 and/or TLSv1.3 (Sluice speaks no older protocol)")
        }
        ProtocolWords::Read { versions, .. } => {
            settings.server_tls.protocols = versions;
            Ok(())
        }
    }
}

pub(super) fn ciphers(settings: &mut Settings, value: &str) -> Result<(), &'static str> {
    // An empty value: ingress-nginx then writes neither ssl_ciphers nor
    // ssl_prefer_server_ciphers, so OpenSSL's DEFAULT list in the client's order.
    let (text, prefer_server) = match value {
        "" => ("DEFAULT", false),
        _ => (value, true),
    };
    let list = openssl_ciphers::parse(text)?;
    let tls = &mut settings.server_tls;
    // Nothing rustls speaks: the default stays (`notes` says so).
    if !list.suites.is_empty() {
        tls.ciphers = CipherSuites::of(&list.suites);
    }
    tls.prefer_server_ciphers = prefer_server;
    Ok(())
}

const CURVES: &str = "curve names separated by colons, like X25519:prime256v1:secp384r1, or auto";

pub(super) fn ecdh_curves(settings: &mut Settings, value: &str) -> Result<(), &'static str> {
    if value == "auto" {
        settings.server_tls.ecdh_curves = None;
        return Ok(());
    }
    let (groups, _) = curves(value);
    if groups.is_empty() {
        return Err(CURVES);
    }
    settings.server_tls.ecdh_curves = Some(KxGroups(groups));
    Ok(())
}

/// OpenSSL's group names → the groups rustls (aws-lc-rs) has, and the names left out.
fn curves(value: &str) -> (Vec<u16>, Vec<&str>) {
    let mut groups = Vec::new();
    let mut dropped = Vec::new();
    for name in value.split(':').map(str::trim).filter(|n| !n.is_empty()) {
        let group = match name.to_ascii_lowercase().as_str() {
            "x25519" => NamedGroup::X25519,
            "prime256v1" | "p-256" | "secp256r1" => NamedGroup::secp256r1,
            "secp384r1" | "p-384" => NamedGroup::secp384r1,
            "x25519mlkem768" => NamedGroup::X25519MLKEM768,
            "secp256r1mlkem768" => NamedGroup::secp256r1MLKEM768,
            "mlkem768" => NamedGroup::MLKEM768,
            "mlkem1024" => NamedGroup::MLKEM1024,
            _ => {
                dropped.push(name);
                continue;
            }
        };
        let code = u16::from(group);
        if !groups.contains(&code) {
            groups.push(code);
        }
    }
    (groups, dropped)
}

/// `bytes`: the value read as an nginx size.
pub(super) fn session_cache_size(
    settings: &mut Settings,
    bytes: Option<u64>,
) -> Result<(), &'static str> {
    let bytes = bytes.filter(|b| *b > 0).ok_or("a size like 10m or 512k")?;
    let sessions = (bytes.saturating_mul(SESSIONS_PER_MEGABYTE) / (1024 * 1024)).max(1);
    settings.server_tls.session_cache_sessions = usize::try_from(sessions).unwrap_or(usize::MAX);
    Ok(())
}

pub(super) fn session_ticket_key(settings: &mut Settings, value: &str) -> Result<(), &'static str> {
    const EXPECTED: &str =
        "the base64 of 48 or 80 random bytes, as `openssl rand 80 | openssl enc -A -base64` makes";
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|_| EXPECTED)?;
    if bytes.len() != 48 && bytes.len() != 80 {
        return Err(EXPECTED);
    }
    settings.server_tls.session_ticket_key = Some(TicketKey(Arc::from(bytes)));
    Ok(())
}

/// `bytes`: the value read as an nginx size.
pub(super) fn buffer_size(settings: &mut Settings, bytes: Option<u64>) -> Result<(), &'static str> {
    let bytes = bytes
        .filter(|b| *b >= MIN_RECORD)
        .ok_or("a size from 32 bytes to 16k, like 4k")?;
    // nginx's records are 16 KiB at most too, whatever the buffer.
    settings.server_tls.buffer_size = Some(bytes.min(MAX_RECORD) as usize);
    Ok(())
}

/// What the keys read with parts left out, or with no effect: one diagnostic each.
pub(super) fn notes(
    settings: &Settings,
    data: &BTreeMap<String, String>,
    source: &ObjectRef,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut note = |severity, text: String| {
        diagnostics.push(Diagnostic::with_severity(severity, source.clone(), text));
    };
    let tls = &settings.server_tls;
    if let Some(value) = data.get("ssl-protocols") {
        if let ProtocolWords::Read { versions, dropped } = TlsVersions::parse_nginx(value) {
            if !dropped.is_empty() && !versions.is_empty() {
                note(
                    Severity::Difference,
                    format!(
                        "data.ssl-protocols: {} dropped: Sluice speaks only TLSv1.2 and TLSv1.3; {versions} apply",
                        dropped.join(" ")
                    ),
                );
            }
        }
    }
    let mut no_tls12_suite = false;
    if let Some(Ok(list)) = (data.get("ssl-ciphers"))
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .map(openssl_ciphers::parse)
    {
        for (severity, text) in list.notes() {
            note(severity, format!("data.ssl-ciphers: {text}"));
        }
        no_tls12_suite = list.suites.is_empty() && tls.protocols.tls12;
    }
    if no_tls12_suite {
        note(
            Severity::Error,
            "data.ssl-ciphers: leaves no TLS 1.2 suite Sluice speaks while ssl-protocols enables TLSv1.2; ingress-nginx's default list applies (TLS 1.3's suites are not set by ssl-ciphers)".into(),
        );
    }
    if let Some(value) = data.get("ssl-ecdh-curve").map(|v| v.trim()) {
        let (groups, dropped) = curves(value);
        if value != "auto" && !groups.is_empty() && !dropped.is_empty() {
            note(
                Severity::Difference,
                format!(
                    "data.ssl-ecdh-curve: {} dropped: Sluice's groups are X25519, prime256v1, secp384r1, X25519MLKEM768, SecP256r1MLKEM768, MLKEM768 and MLKEM1024",
                    dropped.join(":")
                ),
            );
        }
    }
    if tls.session_ticket_key.is_some() && !settings.ssl_session_tickets {
        note(
            Severity::Notice,
            "data.ssl-session-ticket-key: no effect while ssl-session-tickets is false (as in ingress-nginx): no tickets are issued".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_take_openssl_s_names() {
        let (groups, dropped) = curves("X25519:prime256v1:P-384:secp521r1:x25519");
        assert_eq!(
            groups,
            [
                u16::from(NamedGroup::X25519),
                u16::from(NamedGroup::secp256r1),
                u16::from(NamedGroup::secp384r1)
            ]
        );
        assert_eq!(dropped, ["secp521r1"]);
    }
}
