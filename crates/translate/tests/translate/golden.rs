//! Golden tests for `compile()`: `tests/golden/<case>.in.yaml` → `<case>.out.yaml`.
//!
//! Each input is a set of ordinary Kubernetes objects; the output is what Sluice makes of them
//! (routes, backends with endpoints, certificates, settings, diagnostics, parse errors).
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p translate --test translate golden` and review the diff.
//! A first line `# options: default-tls-secret=NS/NAME node-local-endpoints=refuse` sets compile
//! options (also `configmap=NS/NAME`, `default-backend-service=NS/NAME`, `ingress-class=NAME`, `controller-class=NAME`,
//! `watch-ingress-without-class`, `ingress-class-by-name`: `sluice serve`'s flags). Lines `# request: HOST PATH [NAME:VALUE]…` are routed on the result
//! (the words after the path are request headers, or `method=VERB`; a host written `http://HOST` or
//! `https://HOST` is routed as a request on that listener, a bare one as on either), and the output says where each went
//! (route, regex, canary and weights, rewritten path, redirects): the matching rules as data.

use std::path::{Path, PathBuf};

use model::routes::Listeners;
use model::{NamespacedName, NodeLocalEndpoints};
use serde::Serialize;
use translate::{
    compile, compile_reusing, parse_documents, CompileOptions, Compiled, Fragments, Store,
};

#[derive(Serialize)]
struct Golden {
    parse_errors: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    requests: Vec<String>,
    compiled: model::compiled::CompiledView,
}

/// One `# request: HOST PATH [NAME:VALUE | method=VERB]…` line.
pub(crate) struct RequestLine<'a> {
    /// `Some(true)`: written `https://HOST`, `Some(false)`: `http://HOST`, `None`: bare.
    pub scheme: Option<bool>,
    pub host: &'a str,
    /// The request target, query included.
    pub path: &'a str,
    /// What follows the path, as written.
    pub words: String,
    pub head: http::request::Parts,
}

pub(crate) fn request_lines(text: &str) -> Vec<RequestLine<'_>> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# request:"))
        .map(|request| {
            let mut words = request.split_whitespace();
            let (written_host, path) = (words.next().unwrap(), words.next().unwrap());
            let (scheme, host) = match written_host.split_once("://") {
                Some(("http", host)) => (Some(false), host),
                Some(("https", host)) => (Some(true), host),
                _ => (None, written_host),
            };
            let mut head = http::Request::builder().uri(path);
            let mut written = Vec::new();
            for word in words {
                if let Some(method) = word.strip_prefix("method=") {
                    head = head.method(method);
                } else {
                    let (name, value) = word.split_once(':').expect("NAME:VALUE");
                    head = head.header(name, value);
                }
                written.push(word);
            }
            RequestLine {
                scheme,
                host,
                path,
                words: written.join(" "),
                head: head.body(()).unwrap().into_parts().0,
            }
        })
        .collect()
}

/// Where `# request: HOST PATH` lines go, one line each.
fn route_requests(text: &str, compiled: &model::Compiled) -> Vec<String> {
    request_lines(text)
        .into_iter()
        .map(|request| {
            let (host, path, head) = (request.host, request.path, &request.head);
            let listener = match request.scheme {
                Some(https) => Listeners::of(https),
                None => Listeners::ALL,
            };
            let written_host = match request.scheme {
                Some(true) => format!("https://{host}"),
                Some(false) => format!("http://{host}"),
                None => host.to_string(),
            };
            let mut out = format!("{written_host} {path}");
            if !request.words.is_empty() {
                out.push_str(&format!(" {}", request.words));
            }
            out.push_str(" -> ");
            // A Gateway listener's pre-routing filters come before any route (GEP-5224).
            let stage =
                (request.scheme).and_then(|_| compiled.routes.listener_stage(listener, None, host));
            match stage.map(|s| &s.filters) {
                Some(Err(_)) => {
                    out.push_str("500 (the listener's filters fail closed)");
                    return out;
                }
                Some(Ok(filters)) => {
                    out.push_str(&format!("{} pre-routing filter(s), then ", filters.len()))
                }
                None => {}
            }
            if let Some(to) = compiled.routes.www_redirect(host) {
                out.push_str(&format!("www redirect to {to}"));
                return out;
            }
            let routed = path.split_once('?').map_or(path, |(p, _)| p);
            let Some(matched) = compiled.routes.route_on(listener, host, routed, head) else {
                out.push_str("404");
                return out;
            };
            let route = matched.route;
            let default_server = compiled.routes.default_server();
            if default_server.is_some_and(|server| std::sync::Arc::ptr_eq(server, route)) {
                // No host, rule or default backend took it: ingress-nginx's `_` server, the
                // http level's policy, then 404.
                out.push_str("404 (default server)");
            } else if route.not_found && route.ingress.name.is_empty() {
                // The host default without --default-backend-service: the ConfigMap's policy,
                // then 404.
                out.push_str("404 (host default)");
            } else {
                out.push_str(&format!("{} {}", route.ingress, route.service));
            }
            if let Some(canary) = route.alternative_name() {
                out.push_str(&format!(", canary {canary}"));
            }
            let alternatives = route.traffic.iter().flat_map(|t| t.alternatives.iter());
            for alternative in alternatives.filter(|a| a.weight > 0) {
                let total = route.traffic.as_ref().map_or(0, |t| t.total);
                // A Gateway API split's alternatives have no canary name: their Service.
                let name = (alternative.route.alternative_name())
                    .map_or(&*alternative.route.service, |n| &**n);
                out.push_str(&format!(", {}/{total} to {name}", alternative.weight));
            }
            if let Some(pattern) = matched.pattern {
                out.push_str(&format!(" by {pattern}"));
            }
            if let (Some(root), "/") = (matched.app_root, path) {
                out.push_str(&format!(", app-root 302 {}", root.to_str().unwrap()));
            }
            if route.not_found && !route.ingress.name.is_empty() {
                out.push_str(" (root: 404 after the policy)");
            }
            let policy = &route.policy;
            if policy.external_auth.is_some() || policy.user_auth.is_some() {
                out.push_str(", auth");
            }
            let ssl = &policy.ssl_redirect;
            if listener == Listeners::HTTP && (ssl.force || (ssl.enabled && matched.tls)) {
                out.push_str(&format!(", ssl-redirect {}", ssl.code));
            }
            if policy.invalid_backend {
                out.push_str(" (an unusable backend: 500)");
            }
            if let Some(why) = &policy.denied {
                out.push_str(&format!(", denied 503 ({why})"));
            }
            if let Some(redirect) = &policy.gateway_redirect {
                let (path, query) = path
                    .split_once('?')
                    .map_or((path, None), |(p, q)| (p, Some(q)));
                let https = listener == Listeners::HTTPS;
                let location = redirect.location(https, host, path, query);
                out.push_str(&format!(", redirect {} {location}", redirect.code));
            }
            if let Some(redirect) = &policy.redirect {
                out.push_str(&format!(
                    ", redirect {} {}",
                    redirect.code,
                    redirect.location.to_str().unwrap()
                ));
            }
            if let Some(rewrite) = &policy.rewrite {
                match rewrite.apply(matched.pattern, path) {
                    Ok(rewritten) => out.push_str(&format!(", rewritten to {rewritten}")),
                    Err(e) => out.push_str(&format!(", rewrite refused 400 ({e})")),
                }
            }
            out
        })
        .collect()
}

pub(crate) fn options_for(text: &str) -> CompileOptions {
    let mut options = CompileOptions::default();
    if let Some(line) = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# options:"))
    {
        for option in line.split_whitespace() {
            match option.split_once('=') {
                Some(("default-tls-secret", value)) => {
                    options.default_tls_secret =
                        Some(NamespacedName::parse(value).expect("NS/NAME"))
                }
                Some(("node-local-endpoints", "refuse")) => {
                    options.node_local_endpoints = NodeLocalEndpoints::Refuse
                }
                Some(("default-backend-service", value)) => {
                    options.default_backend_service =
                        Some(NamespacedName::parse(value).expect("NS/NAME"))
                }
                Some(("configmap", value)) => {
                    options.config_map = NamespacedName::parse(value).expect("NS/NAME")
                }
                Some(("ingress-class", value)) => options.ingress_class = value.into(),
                Some(("controller-class", value)) => options.controller_class = value.into(),
                None if option == "watch-ingress-without-class" => {
                    options.watch_ingress_without_class = true
                }
                None if option == "ingress-class-by-name" => options.ingress_class_by_name = true,
                None if option == "enable-ssl-passthrough" => options.enable_ssl_passthrough = true,
                None if option == "disable-svc-external-name" => {
                    options.disable_svc_external_name = true
                }
                _ => panic!("unknown golden option {option:?}"),
            }
        }
    }
    options
}

fn run_case(input: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(input).unwrap();
    let name = input.file_name().unwrap().to_string_lossy();
    let documents = parse_documents(&name, &text).map_err(|e| e.to_string())?;
    let mut store = Store::default();
    store.replace_all(documents.objects);
    let options = options_for(&text);
    let golden_of = |compiled: &Compiled| {
        let golden = Golden {
            parse_errors: documents.errors.iter().map(ToString::to_string).collect(),
            requests: route_requests(&text, compiled),
            compiled: compiled.view(),
        };
        serde_yaml::to_string(&golden).unwrap()
    };
    let full = compile(&store, &options);
    let actual = golden_of(&full);
    // The same Store through route fragments: made by the first compile, every one kept
    // reused by the second (a route that lost a hostname to a route of the other kind is not
    // kept), with the same output.
    let mut fragments = Fragments::default();
    let mut kept = 0;
    for pass in ["first", "second"] {
        let compiled = compile_reusing(&store, &options, &mut fragments);
        if compiled.gateway_status != full.gateway_status {
            return Err(format!(
                "{name}: compile_reusing ({pass} compile): another status"
            ));
        }
        let reusing = golden_of(&compiled);
        if reusing != actual {
            return Err(format!(
                "{name}: compile_reusing ({pass} compile) differs from compile:\n{reusing}"
            ));
        }
        if pass == "second" && fragments.counts().reused != kept {
            return Err(format!("{name}: {:?} of {kept} kept", fragments.counts()));
        }
        kept = fragments.len();
    }
    let expected_path = PathBuf::from(input.to_string_lossy().replace(".in.yaml", ".out.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&expected_path, &actual).unwrap();
        return Ok(());
    }
    let expected = std::fs::read_to_string(&expected_path).map_err(|e| {
        format!(
            "{}: {e} (run with UPDATE_GOLDEN=1)",
            expected_path.display()
        )
    })?;
    if expected != actual {
        return Err(format!(
            "{} differs from compile output; rerun with UPDATE_GOLDEN=1 and review the diff.\n--- actual ---\n{actual}",
            expected_path.display()
        ));
    }
    Ok(())
}

#[test]
fn golden_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".in.yaml"))
        .collect();
    inputs.sort();
    assert!(
        inputs.len() >= 7,
        "golden cases missing from {}",
        dir.display()
    );
    let failures: Vec<String> = inputs.iter().filter_map(|p| run_case(p).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn compiling_the_same_store_twice_is_identical() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let text = std::fs::read_to_string(dir.join("routing.in.yaml")).unwrap();
    let mut store = Store::default();
    store.replace_all(parse_documents("routing", &text).unwrap().objects);
    let options = CompileOptions::default();
    let once = serde_yaml::to_string(&compile(&store, &options).view()).unwrap();
    let twice = serde_yaml::to_string(&compile(&store, &options).view()).unwrap();
    assert_eq!(once, twice);
}
