//! The `Date` header value, formatted once a second per worker thread rather than per
//! response (RFC 9110 §6.6.1: an origin server with a clock sends one; hyper did too).

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// `Sun, 06 Nov 1994 08:49:37 GMT`.
const LENGTH: usize = 29;

struct Cached {
    second: u64,
    value: String,
}

thread_local! {
    static CACHED: RefCell<Cached> = const {
        RefCell::new(Cached {
            second: u64::MAX,
            value: String::new(),
        })
    };
}

/// Appends the current date, as a `Date` header value, to `out`.
pub(crate) fn extend(out: &mut Vec<u8>) {
    with_current(|date| out.extend_from_slice(date));
}

/// Calls `f` with the current date as a `Date` header value (formatted once a second).
pub(crate) fn with_current<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHED.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.second != second {
            cached.second = second;
            cached.value = httpdate::fmt_http_date(now);
            debug_assert_eq!(cached.value.len(), LENGTH);
        }
        f(cached.value.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_date_is_an_http_date_of_now() {
        let mut out = Vec::new();
        super::extend(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.len(), super::LENGTH);
        let parsed = httpdate::parse_http_date(&text).unwrap();
        let skew = std::time::SystemTime::now()
            .duration_since(parsed)
            .unwrap_or_default();
        assert!(skew < std::time::Duration::from_secs(5), "{text}");
    }
}
