//! HTTPRoute's `CORS` filter as the route policy's CORS block, with Gateway API's rules
//! (`model::cors::CorsRules::GatewayApi`): the proxy's CORS phase serves it as it serves
//! `enable-cors`.
//!
//! ```text
//!  cors { allowOrigins, allowMethods, allowHeaders, exposeHeaders, allowCredentials, maxAge }
//!    ─▶ Cors { origins: Any (`*`) │ List(whole-Origin patterns), values joined with ", ",
//!              max age (default 5 s) } │ Err(the field and why): the rule answers 503
//! ```

use http::{HeaderName, HeaderValue, Method};
use model::cors::{AllowedOrigins, Cors, CorsRules, OriginPattern};

use super::objects::CorsFilter;

/// Gateway API's default `maxAge`, in seconds.
const DEFAULT_MAX_AGE: i32 = 5;

/// The filter as a policy block; `Err` names the field (after `cors`) and why.
pub(super) fn gateway_cors(filter: &CorsFilter) -> Result<Cors, String> {
    let origins = if filter.allow_origins.iter().any(|o| o == "*") {
        AllowedOrigins::Any
    } else {
        let mut patterns = Vec::new();
        for (i, origin) in filter.allow_origins.iter().enumerate() {
            check_origin(origin).map_err(|why| format!(".allowOrigins[{i}] {origin:?}: {why}"))?;
            patterns.push(OriginPattern::gateway(origin));
        }
        AllowedOrigins::List(patterns.into())
    };
    let methods = list("allowMethods", &filter.allow_methods, |m| {
        Method::from_bytes(m.as_bytes())
            .map(drop)
            .map_err(|_| "not an HTTP method")
    })?;
    let headers = list("allowHeaders", &filter.allow_headers, header_name)?;
    let expose = list("exposeHeaders", &filter.expose_headers, header_name)?;
    let max_age = filter.max_age.unwrap_or(DEFAULT_MAX_AGE);
    if max_age < 0 {
        return Err(format!(".maxAge {max_age}: must not be negative"));
    }
    Ok(Cors {
        origins,
        allow_methods: methods,
        allow_headers: headers,
        allow_credentials: filter.allow_credentials.unwrap_or(false),
        expose_headers: (!expose.is_empty()).then_some(expose),
        max_age: HeaderValue::from(max_age),
        rules: CorsRules::GatewayApi,
    })
}

/// `scheme://host[:port]` or `scheme://*.host[:port]`.
fn check_origin(origin: &str) -> Result<(), &'static str> {
    let (scheme, rest) = origin
        .split_once("://")
        .ok_or("must be `*` or scheme://host[:port]")?;
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err("the scheme must be letters");
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    if port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err("the port must be a number up to 65535");
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    let label_ok =
        |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !name.split('.').all(label_ok) {
        return Err("the host must be a DNS name, `*.` in front at most");
    }
    Ok(())
}

fn header_name(name: &str) -> Result<(), &'static str> {
    HeaderName::from_bytes(name.as_bytes())
        .map(drop)
        .map_err(|_| "not a header name")
}

/// A list field as one header value (`, ` between); `*` must stand alone.
fn list(
    field: &str,
    values: &[String],
    check: impl Fn(&str) -> Result<(), &'static str>,
) -> Result<HeaderValue, String> {
    if values.iter().any(|v| v == "*") {
        if values.len() > 1 {
            return Err(format!(".{field}: `*` must be the only entry"));
        }
        return Ok(HeaderValue::from_static("*"));
    }
    for (i, value) in values.iter().enumerate() {
        check(value).map_err(|why| format!(".{field}[{i}] {value:?}: {why}"))?;
    }
    HeaderValue::from_str(&values.join(", ")).map_err(|_| format!(".{field}: not a header value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(origins: &[&str], methods: &[&str]) -> CorsFilter {
        CorsFilter {
            allow_origins: origins.iter().map(|s| s.to_string()).collect(),
            allow_methods: methods.iter().map(|s| s.to_string()).collect(),
            ..CorsFilter::default()
        }
    }

    #[test]
    fn a_filter_becomes_a_gateway_cors_block() {
        let cors = gateway_cors(&CorsFilter {
            allow_headers: vec!["x-a".into(), "x-b".into()],
            expose_headers: vec!["x-c".into()],
            allow_credentials: Some(true),
            max_age: Some(3600),
            ..filter(
                &["https://www.foo.com", "https://*.bar.com"],
                &["GET", "OPTIONS"],
            )
        })
        .unwrap();
        assert_eq!(cors.rules, CorsRules::GatewayApi);
        assert_eq!(cors.allow_methods, "GET, OPTIONS");
        assert_eq!(cors.allow_headers, "x-a, x-b");
        assert_eq!(cors.expose_headers.as_ref().unwrap(), "x-c");
        assert_eq!(cors.max_age, "3600");
        assert!(cors.allow_credentials);
        let AllowedOrigins::List(patterns) = &cors.origins else {
            panic!("{:?}", cors.origins)
        };
        assert!(patterns[1].matches(b"https://a.b.bar.com"));
        // Defaults: no headers sent for empty lists, a max age of 5 s, no credentials.
        let plain = gateway_cors(&filter(&["*"], &[])).unwrap();
        assert_eq!(plain.origins, AllowedOrigins::Any);
        assert_eq!(plain.allow_methods, "");
        assert_eq!(plain.max_age, "5");
        assert!(!plain.allow_credentials);
    }

    #[test]
    fn bad_entries_name_their_field() {
        let why = |f: CorsFilter| gateway_cors(&f).unwrap_err();
        assert_eq!(
            why(filter(&["www.foo.com"], &[])),
            ".allowOrigins[0] \"www.foo.com\": must be `*` or scheme://host[:port]"
        );
        assert!(why(filter(&["https://a.com:99999"], &[])).contains("port"));
        assert!(why(filter(&["https://a/b"], &[])).contains("DNS name"));
        assert_eq!(
            why(filter(&["*"], &["GET", "*"])),
            ".allowMethods: `*` must be the only entry"
        );
        assert!(why(filter(&["*"], &["GE T"])).contains("allowMethods[0]"));
    }
}
