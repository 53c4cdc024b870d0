//! The basic-auth phase (`auth-type: basic`): the client's `Authorization: Basic` checked
//! against the route's users (`model::basic_auth`), with the password hashes nginx's
//! `auth_basic_user_file` accepts.
//!
//! ```text
//!  Authorization: Basic base64(user:password) ─▶ the user's hash
//!     {PLAIN} {SHA} {SSHA}: here │ $apr1$ $1$ $2y$ $5$ $6$, DES: crypt3_rs (crypt(3) formats)
//!     ─▶ verified: on (and remembered) │ otherwise ─▶ 401, WWW-Authenticate: Basic realm=…
//! ```
//! A bcrypt check costs milliseconds of CPU, which nginx pays on every request. A verified
//! (hash, header) pair is remembered by its SHA-256 (with a per-process salt, never the
//! password) for `REMEMBER`, in each worker thread: the next requests of that client cost a
//! hash instead. A changed password changes the hash, so a remembered pair never outlives it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use http::request::Parts;
use http::{header, HeaderValue};
use model::basic_auth::BasicAuth;
use sha1::Digest;

/// How long a verified password is remembered.
const REMEMBER: Duration = Duration::from_secs(60);
/// Verified pairs one worker remembers at most.
const REMEMBERED_MAX: usize = 4096;

thread_local! {
    static VERIFIED: RefCell<HashMap<[u8; 32], Instant>> = RefCell::new(HashMap::new());
}

/// Whether the request names a user of `auth` with the right password.
pub(crate) fn allows(auth: &BasicAuth, head: &Parts) -> bool {
    let Some(value) = head.headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let Some((user, password)) = credentials(value) else {
        return false;
    };
    let Some(hash) = std::str::from_utf8(&user)
        .ok()
        .and_then(|user| auth.users.hash_of(user))
    else {
        return false;
    };
    let key = remembered_key(hash, value);
    let now = Instant::now();
    let known = VERIFIED.with(|v| v.borrow().get(&key).is_some_and(|until| *until > now));
    if known {
        return true;
    }
    if !verify(&password, hash) {
        return false;
    }
    VERIFIED.with(|v| {
        let mut verified = v.borrow_mut();
        if verified.len() >= REMEMBERED_MAX {
            verified.retain(|_, until| *until > now);
            if verified.len() >= REMEMBERED_MAX {
                verified.clear();
            }
        }
        verified.insert(key, now + REMEMBER);
    });
    true
}

/// `Basic <base64(user:password)>` (the scheme in any case, as nginx) ─▶ user, password.
fn credentials(value: &HeaderValue) -> Option<(Vec<u8>, Vec<u8>)> {
    let bytes = value.as_bytes();
    let scheme = bytes.get(..6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(bytes[6..].trim_ascii())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

fn remembered_key(hash: &str, header: &HeaderValue) -> [u8; 32] {
    static SALT: OnceLock<[u8; 16]> = OnceLock::new();
    let salt = SALT.get_or_init(|| std::array::from_fn(|_| fastrand::u8(..)));
    let mut digest = sha2::Sha256::new();
    digest.update(salt);
    digest.update(hash.as_bytes());
    digest.update([0]);
    digest.update(header.as_bytes());
    digest.finalize().into()
}

/// nginx's `ngx_crypt`: its own `{PLAIN}`, `{SHA}`, `{SSHA}` and `$apr1$`, then the system's
/// crypt(3) (glibc/libxcrypt: `$1$`, `$2a$`/`$2b$`/`$2y$`, `$5$`, `$6$`, DES).
fn verify(password: &[u8], hash: &str) -> bool {
    let b64 = &base64::engine::general_purpose::STANDARD;
    if let Some(plain) = hash.strip_prefix("{PLAIN}") {
        return constant_eq(plain.as_bytes(), password);
    }
    if let Some(encoded) = hash.strip_prefix("{SHA}") {
        let digest = sha1::Sha1::digest(password);
        return b64
            .decode(encoded)
            .is_ok_and(|stored| constant_eq(&stored, &digest));
    }
    if let Some(encoded) = hash.strip_prefix("{SSHA}") {
        let Ok(stored) = b64.decode(encoded) else {
            return false;
        };
        if stored.len() <= 20 {
            return false;
        }
        let (expected, salt) = stored.split_at(20);
        let mut digest = sha1::Sha1::new();
        digest.update(password);
        digest.update(salt);
        return constant_eq(expected, &digest.finalize());
    }
    // crypt(3) takes the password as a C string: it ends at the first NUL.
    let password = password.split(|b| *b == 0).next().unwrap_or_default();
    let hash = match hash.strip_prefix("$2y$") {
        // The same algorithm as $2b$ (PHP's name for the fixed one).
        Some(rest) => format!("$2b${rest}"),
        None => hash.to_owned(),
    };
    // The SHA-2 crypts by their modules: the crate's format check wants `rounds=` in them.
    if hash.starts_with("$5$") {
        crypt3_rs::crypt::sha256::verify(password, &hash)
    } else if hash.starts_with("$6$") {
        crypt3_rs::crypt::sha512::verify(password, &hash)
    } else {
        crypt3_rs::unix::verify(password, &hash)
    }
}

/// Equal bytes, compared in a time that does not tell where they differ.
pub(crate) fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simple_schemes_verify_here() {
        assert!(verify(b"secret", "{PLAIN}secret"));
        assert!(!verify(b"secret", "{PLAIN}Secret"));
        // `htpasswd -s`: base64(SHA-1("secret")).
        assert!(verify(b"secret", "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        assert!(!verify(b"wrong", "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        assert!(!verify(b"secret", "{SSHA}short"));
    }

    #[test]
    fn credentials_are_read_as_nginx_reads_them() {
        let value = |v: &str| HeaderValue::from_str(v).unwrap();
        // "ann:pa:ss": the password keeps its colons.
        assert_eq!(
            credentials(&value("basic YW5uOnBhOnNz")),
            Some((b"ann".to_vec(), b"pa:ss".to_vec()))
        );
        assert_eq!(credentials(&value("Bearer YW5uOnBhOnNz")), None);
        assert_eq!(credentials(&value("Basic !!!")), None);
        // No colon: no password.
        assert_eq!(credentials(&value("Basic YW5u")), None);
    }
}
