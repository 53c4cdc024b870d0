//! `custom-headers`: ingress-nginx's checks of the response headers a ConfigMap names
//! (`more_set_headers "<name>: <value>"` in its template), shared by the ConfigMap key
//! `global-allowed-response-headers` and the annotation.

/// ingress-nginx's `headerRegexp`: `^[a-zA-Z\d\-_]+$`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// ingress-nginx's `valueRegexp`: printable ASCII without a few characters, non-empty.
pub fn valid_value(value: &str) -> bool {
    !value.is_empty()
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric() || b" _:;.,\\/\"'?!(){}[]@<>=-+*#$&`|~^%".contains(&b)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_as_ingress_nginx_checks_them() {
        assert!(valid_name("X-Frame_Options1"));
        assert!(!valid_name("X Frame") && !valid_name("") && !valid_name("X:Y"));
        assert!(valid_value("max-age=1; includeSubDomains"));
        assert!(valid_value("default-src 'self' https://a.example/*"));
        assert!(!valid_value("") && !valid_value("a\tb") && !valid_value("é"));
    }
}
