//! Header values shown as text in the compiled configuration's dumps (golden files,
//! `/config`): serde helpers shared by the policy blocks.
//!
//! ```text
//!  HeaderValue (bytes) ─▶ lossy UTF-8 text ─▶ serializer
//! ```

use http::HeaderValue;
use serde::Serializer;

pub(crate) fn value_text<S: Serializer>(
    value: &HeaderValue,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&String::from_utf8_lossy(value.as_bytes()))
}

pub(crate) fn optional_value_text<S: Serializer>(
    value: &Option<HeaderValue>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => value_text(value, serializer),
        None => serializer.serialize_none(),
    }
}
