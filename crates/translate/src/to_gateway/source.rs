//! What the conversion's parts share: the target, a gap, an Ingress being converted.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::IngressSpec;
use model::{Kind, NamespacedName, ObjectRef, Settings};
use serde::Serialize;

use crate::ingress::annotations::{parse, IngressAnnotations, NGINX_PREFIX, SLUICE_PREFIX};
use crate::objects::Ingress;

/// Where the converted routes attach.
#[derive(Clone, Debug)]
pub struct Target {
    /// The Gateway written, and named by every route's parentRef.
    pub gateway: NamespacedName,
    /// Its `gatewayClassName` (a GatewayClass of Sluice's controller is written too).
    pub class: String,
}

/// Something the Gateway API objects do not say as the Ingress did.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Gap {
    /// `namespace/name` of the Ingress (or of the Gateway, for listener limits).
    pub object: String,
    /// The annotation or field.
    pub what: String,
    /// What happens instead.
    pub why: String,
}

/// An Ingress being converted, with its annotations at hand.
pub(super) struct Source<'a> {
    pub(super) key: NamespacedName,
    pub(super) spec: &'a IngressSpec,
    annotations: Option<&'a BTreeMap<String, String>>,
    /// The annotations as the compile reads them (validated: a value ingress-nginx refuses is
    /// left out here too).
    pub(super) parsed: IngressAnnotations,
}

impl<'a> Source<'a> {
    pub(super) fn new(
        key: NamespacedName,
        ingress: &'a Ingress,
        settings: &Settings,
    ) -> Option<Source<'a>> {
        let annotations = ingress.metadata.annotations.as_ref();
        let object = ObjectRef::new(Kind::Ingress, &*key.namespace, &*key.name);
        let parsed = parse(
            annotations.unwrap_or(&BTreeMap::new()),
            settings,
            &object,
            &mut Vec::new(),
        );
        Some(Source {
            key,
            spec: ingress.spec.as_ref()?,
            annotations,
            parsed,
        })
    }

    /// An ingress-nginx annotation's value, by its name without the prefix (Sluice's own
    /// prefix, which Sluice reads as the same annotation, when ingress-nginx's is absent).
    pub(super) fn annotation(&self, name: &str) -> Option<&'a str> {
        let annotations = self.annotations?;
        [NGINX_PREFIX, SLUICE_PREFIX]
            .iter()
            .find_map(|prefix| annotations.get(&format!("{prefix}{name}")))
            .map(|v| v.trim())
    }

    pub(super) fn flag(&self, name: &str) -> Option<bool> {
        self.annotation(name).and_then(|v| v.parse().ok())
    }

    pub(super) fn is_canary(&self) -> bool {
        self.flag("canary") == Some(true)
    }

    /// Every ingress-nginx annotation this Ingress carries, by name without the prefix.
    /// The ConfigMap's screens of a whole Ingress (`annotations-risk-level`,
    /// `annotation-value-word-blocklist`): `Some` when it is refused.
    pub(super) fn screened(&self, settings: &Settings) -> Option<(String, &'static str)> {
        let annotations = self
            .annotations
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| {
                let (prefix, name) = match key.strip_prefix(SLUICE_PREFIX) {
                    Some(name) => (SLUICE_PREFIX, name),
                    None => (NGINX_PREFIX, key.strip_prefix(NGINX_PREFIX)?),
                };
                Some((prefix, name, value.trim()))
            });
        crate::ingress::annotations::screen(annotations, settings)
    }

    pub(super) fn annotation_names(&self) -> impl Iterator<Item = &'a str> {
        self.annotations
            .into_iter()
            .flat_map(|a| a.keys())
            .filter_map(|k| {
                k.strip_prefix(NGINX_PREFIX)
                    .or_else(|| k.strip_prefix(SLUICE_PREFIX))
            })
    }

    pub(super) fn namespace(&self) -> &str {
        &self.key.namespace
    }
}

/// `a.example.com` → `a.example.com`, `*.example.com` → `wildcard.example.com`: a name part
/// for objects and listeners.
pub(super) fn host_slug(host: Option<&str>) -> String {
    match host {
        None => "any-host".to_string(),
        Some(h) => h.replace('*', "wildcard"),
    }
}
