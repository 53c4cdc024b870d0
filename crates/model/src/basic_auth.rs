//! Basic authentication (ingress-nginx's `auth-type: basic` with `auth-secret`,
//! `auth-secret-type`, `auth-realm`): the users and their password hashes, read from the
//! Secret at compile time. Pure data; the proxy checks a request's `Authorization` against it
//! (`proxy/src/basic_auth.rs`).
//!
//! ```text
//!  Secret data.auth (auth-file: an htpasswd file) │ every key a user (auth-map)
//!    ─Users::from_htpasswd / from_map─▶ user ─▶ hash ($2y$ bcrypt, $apr1$, $1$, $5$, $6$,
//!                                        {SHA}, {SSHA}, {PLAIN}, DES crypt)
//!  Authorization: Basic base64(user:password) ─proxy─▶ the user's hash verifies the password
//!    ─▶ on │ no header, unknown user, wrong password ─▶ 401 + WWW-Authenticate: Basic realm
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use http::HeaderValue;
use serde::{Serialize, Serializer};

use crate::header_text::value_text;

/// One route's basic authentication.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct BasicAuth {
    /// `auth-realm` as written (empty when not set, as ingress-nginx renders it).
    pub realm: String,
    /// `Basic realm="<realm>"`, sent with each 401.
    #[serde(serialize_with = "value_text")]
    pub challenge: HeaderValue,
    /// `auth-secret`, `namespace/name`.
    pub secret: String,
    #[serde(serialize_with = "user_count")]
    pub users: Arc<Users>,
}

impl PartialEq for BasicAuth {
    fn eq(&self, other: &BasicAuth) -> bool {
        self.realm == other.realm && self.secret == other.secret && self.users == other.users
    }
}

/// User → password hash, as written.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Users(BTreeMap<String, String>);

impl Users {
    /// An htpasswd file (`auth-file`): `user:hash[:comment]` lines; empty lines and lines
    /// starting with `#` are skipped, as nginx's `auth_basic_user_file` reads them. The
    /// first line of a user wins, as nginx stops at the first match.
    pub fn from_htpasswd(text: &str) -> Users {
        let mut users = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, rest)) = line.split_once(':') else {
                continue;
            };
            let hash = rest.split(':').next().unwrap_or("");
            users
                .entry(user.to_owned())
                .or_insert_with(|| hash.to_owned());
        }
        Users(users)
    }

    /// `auth-map`: every key of the Secret is a user, its value the hash.
    pub fn from_map<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> Users {
        Users(
            entries
                .into_iter()
                .map(|(user, hash)| (user.to_owned(), hash.trim_end().to_owned()))
                .collect(),
        )
    }

    pub fn hash_of(&self, user: &str) -> Option<&str> {
        self.0.get(user).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `Basic realm="<realm>"`, the realm's `"` and `\` escaped. `None`: a realm a header cannot
/// carry (control characters).
pub fn challenge(realm: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!("Basic realm={}", quoted(realm))).ok()
}

/// `text` as an RFC 9110 quoted-string (`"` and `\` escaped): a challenge's realm, basic or
/// digest.
pub fn quoted(text: &str) -> String {
    let mut value = String::with_capacity(text.len() + 2);
    value.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            value.push('\\');
        }
        value.push(c);
    }
    value.push('"');
    value
}

fn user_count<S: Serializer>(users: &Arc<Users>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format!("{} user(s)", users.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn htpasswd_lines_as_nginx_reads_them() {
        let users = Users::from_htpasswd(
            "# admins\nann:$apr1$x$y\r\n\nbob:{SHA}abc=:Bob Smith\nann:second\nbroken\n",
        );
        assert_eq!(users.hash_of("ann"), Some("$apr1$x$y"));
        assert_eq!(users.hash_of("bob"), Some("{SHA}abc="));
        assert_eq!(users.len(), 2);
        let map = Users::from_map([("carl", "$2y$05$abc\n")]);
        assert_eq!(map.hash_of("carl"), Some("$2y$05$abc"));
    }

    #[test]
    fn the_challenge_quotes_the_realm() {
        assert_eq!(challenge("").unwrap(), "Basic realm=\"\"");
        assert_eq!(challenge("a \"b\"").unwrap(), "Basic realm=\"a \\\"b\\\"\"");
        assert!(challenge("a\nb").is_none());
    }
}
