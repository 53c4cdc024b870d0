use std::collections::BTreeMap;

use model::settings::Settings;
use model::ObjectRef;

use super::*;

#[test]
fn snippets_translate_header_directives_only() {
    let edits = translate_snippet(
            "more_set_headers \"X-Frame-Options: DENY\";\n# a comment\nproxy_set_header X-Team web;\nadd_header Cache-Control no-store always;\nmore_clear_headers Server;",
        )
        .unwrap();
    let shown: Vec<String> = edits
        .iter()
        .map(|(e, req)| format!("{} {e}", if *req { "request" } else { "response" }))
        .collect();
    assert_eq!(
        shown,
        [
            "response set x-frame-options: DENY",
            "request set x-team: web",
            "response add cache-control: no-store",
            "response remove server"
        ]
    );
    let refused = translate_snippet("rewrite ^/old /new break;").unwrap_err();
    assert!(refused.contains("rewrite-target"), "{refused}");
    let refused = translate_snippet("if ($host = x) { return 301 https://y; }").unwrap_err();
    assert!(refused.contains("block"), "{refused}");
    // A value with a variable is a template; an unknown variable, or one in a name, is not.
    let edits = translate_snippet("more_set_headers \"X-Host: $host\";").unwrap();
    assert!(edits[0].0.template().is_some());
    let refused = translate_snippet("more_set_headers \"X-Host: $nope_nope\";").unwrap_err();
    assert!(refused.contains("$nope_nope"), "{refused}");
    let refused = translate_snippet("proxy_set_header $host 1;").unwrap_err();
    assert!(refused.contains("header name"), "{refused}");
    assert!(translate_snippet("add_header X-A b").is_err());
}

#[test]
fn snippets_cannot_frame_messages_or_choose_the_host() {
    for snippet in [
        "proxy_set_header Content-Length \"0\";",
        "proxy_set_header Transfer-Encoding chunked;",
        "more_set_input_headers \"Connection: close\";",
        "more_set_input_headers \"Keep-Alive: timeout=5\";",
        "proxy_set_header Upgrade websocket;",
        "proxy_set_header TE trailers;",
        "proxy_set_header Trailer X-Checksum;",
        "proxy_set_header Proxy-Connection keep-alive;",
        "more_clear_input_headers Content-Length;",
        "more_set_headers \"Content-Length: 1\";",
        "add_header Transfer-Encoding chunked;",
        "more_clear_headers Transfer-Encoding;",
        "proxy_set_header Host internal.example.com;",
        "more_set_input_headers \"Host: internal.example.com\";",
    ] {
        let refused = translate_snippet(snippet).unwrap_err();
        assert!(refused.contains("is refused"), "{snippet}: {refused}");
    }
    let refused = translate_snippet("proxy_set_header Host a.example.com;").unwrap_err();
    assert!(refused.contains("upstream-vhost"), "{refused}");
    // Clearing a hop-by-hop header asks for what Sluice does anyway; a response's Host is
    // no routing input.
    let edits =
        translate_snippet("proxy_set_header Connection \"\";\nmore_set_headers \"Host: x\";")
            .unwrap();
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert!(!edits[0].1);
}

#[test]
fn every_annotation_with_an_effect_has_a_parser_and_only_those() {
    for annotation in REGISTRY {
        let needs_parser = match annotation.support {
            Support::Yes | Support::Partial(_) | Support::FailsClosed(_) | Support::Sluice(_) => {
                Some(true)
            }
            Support::No(_) => Some(false),
            // A no-op that Sluice accepts may still check its value.
            Support::Accepted(_) => None,
        };
        match (needs_parser, annotation.parser) {
            (Some(true), None) => panic!("{} is supported but has no parser", annotation.name),
            (Some(false), Some(parser)) => panic!(
                "{} is not supported but names the parser {parser:?}",
                annotation.name
            ),
            _ => {}
        }
    }
}

#[test]
fn parsers_read_only_names_of_the_registry() {
    // `Reader::get` asserts that each name it is asked for has an entry; every parser runs
    // on every Ingress, so one parse with nothing set and one with everything set reach
    // every read.
    let settings = Settings {
        allow_snippet_annotations: true,
        ..Settings::default()
    };
    let object = ObjectRef::new(model::Kind::Ingress, "default", "web");
    let mut diagnostics = Vec::new();
    parse(&BTreeMap::new(), &settings, &object, &mut diagnostics);
    let every: BTreeMap<String, String> = REGISTRY
        .iter()
        .map(|a| (format!("{NGINX_PREFIX}{}", a.name), "1".to_owned()))
        .collect();
    parse(&every, &settings, &object, &mut diagnostics);
}

#[test]
fn the_catalogue_has_each_annotation_once() {
    let mut names: Vec<&str> = REGISTRY.iter().map(|a| a.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len());
}
