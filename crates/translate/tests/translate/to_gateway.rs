//! `sluice migrate --to gateway-api`, replayed: every golden Ingress case with `# request:` lines
//! is converted, the Gateway API objects are compiled in place of the Ingresses (with the same
//! Services, Secrets and ConfigMaps), and each request gets the same answer from both (the
//! Service and share it goes to, the path and Host sent upstream, or the redirect, 404, 500 or
//! 503), unless the conversion lists a gap for the Ingress or host that answered it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use model::routes::Listeners;
use model::{Compiled, NamespacedName};
use translate::to_gateway::{to_gateway_api, Target};
use translate::{compile, parse_documents, Object, Store};

use crate::golden::{options_for, request_lines};

/// What a client sees, as data: where the request went or what Sluice answered itself.
fn answer(
    compiled: &Compiled,
    https: bool,
    host: &str,
    target: &str,
    head: &http::request::Parts,
) -> (String, Option<NamespacedName>) {
    let listener = Listeners::of(https);
    let (path, query) = target
        .split_once('?')
        .map_or((target, None), |(p, q)| (p, Some(q)));
    if let Some(to) = compiled.routes.www_redirect(host) {
        // As the proxy answers it: the scheme used, the target without a trailing `/`.
        let scheme = if https { "https" } else { "http" };
        let code = compiled.settings.http_redirect_code;
        return (
            format!(
                "redirect {code} {scheme}://{to}{}",
                target.strip_suffix('/').unwrap_or(target)
            ),
            None,
        );
    }
    let Some(matched) = compiled.routes.route_on(listener, host, path, head) else {
        return ("404".into(), None);
    };
    let route = matched.route;
    let owner = (!route.ingress.name.is_empty()).then(|| route.ingress.clone());
    let policy = &route.policy;
    let ssl = &policy.ssl_redirect;
    if !https && (ssl.force || (ssl.enabled && matched.tls)) {
        return (format!("ssl-redirect {}", ssl.code), owner);
    }
    if let Some(redirect) = &policy.gateway_redirect {
        if redirect.scheme.as_deref() == Some("https")
            && redirect.hostname.is_none()
            && redirect.path.is_none()
            && redirect.port.is_none()
            && !https
        {
            return (format!("ssl-redirect {}", redirect.code), owner);
        }
        return (
            format!(
                "redirect {} {}",
                redirect.code,
                redirect.location(https, host, path, query)
            ),
            owner,
        );
    }
    if let (Some(root), "/") = (matched.app_root, path) {
        let scheme = if https { "https" } else { "http" };
        return (
            format!("redirect 302 {scheme}://{host}{}", root.to_str().unwrap()),
            owner,
        );
    }
    if let Some(redirect) = &policy.redirect {
        return (
            format!(
                "redirect {} {}",
                redirect.code,
                redirect.location.to_str().unwrap()
            ),
            owner,
        );
    }
    if route.not_found {
        return ("404".into(), owner);
    }
    if policy.invalid_backend {
        return ("500".into(), owner);
    }
    if let Some(why) = &policy.denied {
        return (format!("503 {why}"), owner);
    }
    let mut split = vec![];
    let total = route.traffic.as_ref().map_or(0, |t| t.total);
    let mut rest = total;
    for alternative in route.traffic.iter().flat_map(|t| t.alternatives.iter()) {
        rest = rest.saturating_sub(alternative.weight);
        if alternative.weight > 0 {
            split.push(format!(
                "{}%{}",
                alternative.weight * 100 / total,
                backend_of(&alternative.route)
            ));
        }
    }
    if total == 0 || rest > 0 {
        let share = (rest * 100).checked_div(total).unwrap_or(100);
        split.push(format!("{share}%{}", backend_of(route)));
    }
    split.sort();
    let sent = match &policy.rewrite {
        Some(rewrite) => match rewrite.apply(matched.pattern, path) {
            Ok(rewritten) => rewritten.path,
            Err(e) => return (format!("400 {e}"), owner),
        },
        None => path.to_string(),
    };
    let upstream_host = policy
        .upstream_vhost
        .as_ref()
        .map_or(host.to_string(), |h| h.to_str().unwrap().to_string());
    let headers: Vec<String> = policy
        .request_headers
        .iter()
        .map(|e| format!("{e:?}"))
        .collect();
    (
        format!(
            "{} {sent} host={upstream_host} {}",
            split.join(","),
            headers.join(";")
        ),
        owner,
    )
}

/// The Service port a route sends to (the canary's own, where the route's `service` names the
/// main Ingress's for metrics).
fn backend_of(route: &model::Route) -> String {
    route.backend.key().map_or_else(
        || format!("{} (unresolved)", route.service),
        ToString::to_string,
    )
}

struct Replay {
    compared: usize,
    excused: usize,
    mismatches: Vec<String>,
}

fn replay(input: &Path, replay: &mut Replay) {
    let text = std::fs::read_to_string(input).unwrap();
    let name = input.file_name().unwrap().to_string_lossy().to_string();
    let options = options_for(&text);
    let documents = parse_documents(&name, &text).unwrap();
    let mut store = Store::default();
    store.replace_all(documents.objects.clone());
    let original = compile(&store, &options);
    if original.ingresses.is_empty() {
        return;
    }
    let target = Target {
        gateway: NamespacedName::new("default", "sluice"),
        class: "sluice".into(),
    };
    let conversion = to_gateway_api(&store, &original, &target);
    let converted_text = conversion.yaml();
    let converted = parse_documents("converted", &converted_text)
        .unwrap_or_else(|e| panic!("{name}: the conversion does not parse: {e}\n{converted_text}"));
    assert!(
        converted.errors.is_empty(),
        "{name}: {:?}\n{converted_text}",
        converted.errors
    );
    let mut objects: Vec<Object> = documents
        .objects
        .into_iter()
        .filter(|o| !matches!(o, Object::Ingress(_) | Object::IngressClass(_)))
        .collect();
    objects.extend(converted.objects);
    let mut gateway_store = Store::default();
    gateway_store.replace_all(objects);
    let gateway = compile(&gateway_store, &options);
    let excused_ingresses: BTreeSet<&str> =
        conversion.gaps.iter().map(|g| g.object.as_str()).collect();
    // A diagnostic on a converted object is a conversion error unless the Ingress it came
    // from has a gap listed (the golden's own broken backends).
    let errors: Vec<_> = gateway
        .diagnostics
        .iter()
        .filter(|d| {
            matches!(
                d.object.kind,
                model::Kind::Gateway | model::Kind::HTTPRoute | model::Kind::GatewayClass
            )
        })
        .filter(|d| {
            let route = format!("{}/{}", d.object.namespace, d.object.name);
            !excused_ingresses
                .iter()
                .any(|i| route == *i || route.starts_with(&format!("{i}-")))
        })
        .collect();
    assert!(
        errors.is_empty(),
        "{name}: the converted objects have diagnostics: {errors:#?}\n{converted_text}"
    );
    let excused_hosts: BTreeSet<&str> = conversion
        .gaps
        .iter()
        .filter_map(|g| g.what.strip_prefix("host "))
        .collect();
    for request in request_lines(&text) {
        let tls_host = original
            .routes
            .route_on(
                Listeners::HTTPS,
                request.host,
                request.path.split('?').next().unwrap(),
                &request.head,
            )
            .is_some_and(|m| m.tls);
        let listeners: &[bool] = match request.scheme {
            Some(https) => &[https][..],
            None if tls_host => &[false, true],
            None => &[false],
        };
        for &https in listeners {
            let (want, owner) = answer(&original, https, request.host, request.path, &request.head);
            let (got, _) = answer(&gateway, https, request.host, request.path, &request.head);
            if want == got {
                replay.compared += 1;
                continue;
            }
            let excused = owner
                .as_ref()
                .is_some_and(|o| excused_ingresses.contains(o.to_string().as_str()))
                || excused_hosts.contains(request.host)
                || excused_hosts.iter().any(|h| {
                    h.strip_prefix('*')
                        .is_some_and(|s| request.host.ends_with(s))
                });
            if excused {
                replay.excused += 1;
            } else {
                replay.mismatches.push(format!(
                    "{name}: {} {}{} {}: Ingress → {want}\n    Gateway API → {got}\n    gaps: {}",
                    if https { "https" } else { "http" },
                    request.host,
                    request.path,
                    request.words,
                    conversion.gaps_markdown().replace('\n', "\n          ")
                ));
            }
        }
    }
}

#[test]
fn converted_golden_ingresses_answer_the_same() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".in.yaml") && !name.starts_with("gateway-")
        })
        .collect();
    inputs.sort();
    let mut result = Replay {
        compared: 0,
        excused: 0,
        mismatches: Vec::new(),
    };
    for input in &inputs {
        replay(input, &mut result);
    }
    println!(
        "{} requests answered the same, {} differ where a gap is listed",
        result.compared, result.excused
    );
    assert!(
        result.mismatches.is_empty(),
        "{} unexplained differences:\n{}",
        result.mismatches.len(),
        result.mismatches.join("\n")
    );
    assert!(
        result.compared >= 100,
        "only {} requests compared",
        result.compared
    );
}
