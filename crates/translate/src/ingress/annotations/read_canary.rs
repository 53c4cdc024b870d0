//! The `canary-*` parser, with ingress-nginx's value rules.

use http::HeaderName;

use model::Severity;

use super::parsed::Canary;
use super::reader::Reader;

impl Reader<'_> {
    /// The canary family. As ingress-nginx: a weight or header without `canary: "true"` is an
    /// error and the Ingress is an ordinary one; `canary-weight-total` below 100 counts as 100;
    /// a value with characters ingress-nginx refuses (it allows letters, digits and `-._~/:`)
    /// is left out; `canary-by-header-pattern` is read only without `canary-by-header-value`.
    pub(super) fn canary(&mut self) -> Option<Canary> {
        const CANARY_KEYS: [&str; 6] = [
            "canary-weight",
            "canary-weight-total",
            "canary-by-header",
            "canary-by-header-value",
            "canary-by-header-pattern",
            "canary-by-cookie",
        ];
        let enabled = self.bool("canary").unwrap_or(false);
        if !enabled {
            let set: Vec<String> = CANARY_KEYS
                .iter()
                .filter(|name| self.get(name).is_some())
                .map(|name| self.key(name))
                .collect();
            if !set.is_empty() {
                let key = self.key("canary");
                // Served as ingress-nginx serves it (as an ordinary Ingress): a trap, noticed.
                self.diagnose(
                    Severity::Notice,
                    format!("{}: configured but not enabled ({key} is not \"true\"); ignored, the Ingress is served as an ordinary one (as in ingress-nginx)", set.join(", ")),
                );
            }
            return None;
        }
        let mut canary = Canary {
            weight: 0,
            weight_total: 100,
            ..Canary::default()
        };
        if let Some(weight) = self.canary_number("canary-weight") {
            canary.weight = weight;
        }
        if let Some(total) = self.canary_number("canary-weight-total") {
            if total < 100 {
                let key = self.key("canary-weight-total");
                self.diagnose(
                    Severity::Notice,
                    format!("annotation {key}: {total} is below 100, so 100 applies (as in ingress-nginx): canary-weight {} means {} %", canary.weight, canary.weight.min(100)),
                );
            } else {
                canary.weight_total = total;
            }
        }
        canary.header = self.canary_text("canary-by-header").and_then(|name| {
            match HeaderName::from_bytes(name.as_bytes()) {
                Ok(header) => Some(header),
                Err(_) => {
                    self.invalid("canary-by-header", &name, "a header name");
                    None
                }
            }
        });
        canary.header_value = self.canary_text("canary-by-header-value");
        canary.cookie = self.canary_text("canary-by-cookie");
        if let Some(pattern) = self
            .get("canary-by-header-pattern")
            .filter(|p| !p.is_empty())
        {
            let key = self.key("canary-by-header-pattern");
            if canary.header_value.is_some() {
                self.diagnose(
                    Severity::Notice,
                    format!("annotation {key}: ignored, canary-by-header-value is set and wins (as in ingress-nginx)"),
                );
            } else {
                match regex::Regex::new(pattern) {
                    Ok(compiled) => canary.header_pattern = Some(compiled),
                    Err(why) => self.diagnose(
                        Severity::Unsupported,
                        format!("annotation {key}: {pattern:?} is not a regular expression Sluice can compile ({}); ignored, the request goes on to the cookie and weight rules", why.to_string().lines().last().unwrap_or("invalid").trim().trim_start_matches("error:").trim()),
                    ),
                }
            }
        }
        if canary.header.is_none() {
            for companion in ["canary-by-header-value", "canary-by-header-pattern"] {
                if self.get(companion).is_some() {
                    let key = self.key(companion);
                    self.diagnose(
                        Severity::Notice,
                        format!("annotation {key}: has no effect without canary-by-header (as in ingress-nginx)"),
                    );
                }
            }
        }
        Some(canary)
    }

    /// A canary value ingress-nginx accepts: letters, digits and `-._~/:`, spaces removed.
    pub(super) fn canary_text(&mut self, name: &str) -> Option<String> {
        let value: String = self.get(name)?.chars().filter(|c| *c != ' ').collect();
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~/:".contains(c);
        if !value.chars().all(allowed) {
            self.invalid(
                name,
                &value,
                "letters, digits and -._~/: (what ingress-nginx accepts)",
            );
            return None;
        }
        (!value.is_empty()).then_some(value)
    }

    /// A canary weight: a whole number; a negative one sends nothing, as in ingress-nginx.
    pub(super) fn canary_number(&mut self, name: &str) -> Option<u32> {
        let value = self.get(name)?;
        match value.parse::<i64>() {
            Ok(n) => Some(n.clamp(0, i64::from(u32::MAX)) as u32),
            Err(_) => {
                self.invalid(name, value, "a whole number");
                None
            }
        }
    }
}
