//! Digest authentication (ingress-nginx's `auth-type: digest` with `auth-secret`,
//! `auth-secret-type`, `auth-realm`; RFC 2617 with `qop=auth` and MD5, as the
//! nginx-http-auth-digest module ingress-nginx loads for it): the users of each realm and
//! their `HA1 = MD5(user:realm:password)`, read from the Secret at compile time. Pure data;
//! the proxy answers challenges and checks responses against it (`proxy/src/digest_auth.rs`).
//!
//! ```text
//!  Secret data.auth (auth-file: an htdigest file, user:realm:HA1 lines)
//!    │ every key a user, its value realm:HA1 (auth-map)
//!    ─DigestUsers::from_htdigest─▶ (user, realm) ─▶ HA1 (32 hex digits)
//!  Authorization: Digest username, realm, nonce, uri, qop, nc, cnonce, response
//!    ─proxy─▶ response == MD5(HA1:nonce:nc:cnonce:qop:MD5(method:uri)) and the nonce is
//!             fresh and the nc unused ─▶ on │ otherwise ─▶ 401 + a new challenge
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// One route's digest authentication.
#[derive(Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct DigestAuth {
    /// `auth-realm` as written: the challenge's realm.
    pub realm: String,
    /// `auth-secret`, `namespace/name`.
    pub secret: String,
    #[serde(serialize_with = "user_count")]
    pub users: Arc<DigestUsers>,
}

/// user → (realm, HA1) for each realm the file names the user in. The HA1 as written
/// (lower-case hex digits, as `htdigest` writes them: the response a client computes hashes
/// the hex text, so another case never matches).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DigestUsers(BTreeMap<String, Vec<(String, String)>>);

/// An htdigest file as read: its users, and the lines that are not `user:realm:HA1`.
#[derive(Debug, Default)]
pub struct HtdigestFile {
    pub users: DigestUsers,
    /// 1-based numbers of the lines left out: not three fields, or an HA1 that is not 32
    /// characters (the module skips them too).
    pub unusable_lines: Vec<usize>,
}

impl DigestUsers {
    /// An htdigest file: `user:realm:HA1` lines; empty lines and lines starting with `#` are
    /// skipped. The first line of a (user, realm) wins, as the module stops at the first match.
    pub fn from_htdigest(text: &str) -> HtdigestFile {
        let mut file = HtdigestFile::default();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.splitn(3, ':');
            let (Some(user), Some(realm), Some(ha1)) =
                (fields.next(), fields.next(), fields.next())
            else {
                file.unusable_lines.push(index + 1);
                continue;
            };
            // The module's file may carry a comment after the hash (`:` or `#`).
            let ha1 = ha1.split([':', '#']).next().unwrap_or("");
            if user.is_empty() || ha1.len() != 32 || !ha1.bytes().all(|b| b.is_ascii_hexdigit()) {
                file.unusable_lines.push(index + 1);
                continue;
            }
            let realms = file.users.0.entry(user.to_owned()).or_default();
            if !realms.iter().any(|(known, _)| known == realm) {
                realms.push((realm.to_owned(), ha1.to_owned()));
            }
        }
        file
    }

    /// The HA1 of `user` in `realm`.
    pub fn ha1(&self, user: &str, realm: &str) -> Option<&str> {
        let realms = self.0.get(user)?;
        realms
            .iter()
            .find(|(known, _)| known == realm)
            .map(|(_, ha1)| ha1.as_str())
    }

    /// Users of `realm`.
    pub fn in_realm(&self, realm: &str) -> usize {
        let named = |realms: &&Vec<(String, String)>| realms.iter().any(|(r, _)| r == realm);
        self.0.values().filter(named).count()
    }

    /// (user, realm) pairs.
    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn user_count<S: Serializer>(users: &Arc<DigestUsers>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{} user(s)", users.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htdigest_lines_as_the_module_reads_them() {
        // HA1s of `htdigest`: MD5("ann:staff:s3cret"), MD5("bob:ops:pw").
        let file = DigestUsers::from_htdigest(
            "# staff\nann:staff:d0c2b1f0a1e4a6f3f4f1b2c3d4e5f6a7\r\n\n\
             bob:ops:0123456789abcdef0123456789abcdef:Bob\n\
             ann:staff:ffffffffffffffffffffffffffffffff\n\
             short:staff:abc\nnocolons\ncarl:x:0123456789abcdef0123456789abcdeg\n",
        );
        let users = &file.users;
        assert_eq!(
            users.ha1("ann", "staff"),
            Some("d0c2b1f0a1e4a6f3f4f1b2c3d4e5f6a7")
        );
        assert_eq!(
            users.ha1("bob", "ops"),
            Some("0123456789abcdef0123456789abcdef")
        );
        assert_eq!(users.ha1("ann", "ops"), None);
        assert_eq!(users.ha1("an", "staff"), None);
        assert_eq!(users.len(), 2);
        assert_eq!(users.in_realm("staff"), 1);
        assert_eq!(file.unusable_lines, vec![6, 7, 8]);
    }
}
