//! nginx snippets: the safe subset (header directives) translated into header edits.

use http::{HeaderName, HeaderValue};

use model::policy::{HeaderAction, HeaderEdit, HeaderTemplate};

/// Translates the safe subset of an nginx snippet into header edits (`true`: request side).
/// `Err` names the first directive that is refused, and the typed alternative if there is one.
/// One match with an arm per directive (~120 lines): what is translated and what is refused
/// read side by side, as a reviewer of the snippet allow-list needs them.
pub fn translate_snippet(text: &str) -> Result<Vec<(HeaderEdit, bool)>, String> {
    let mut edits = Vec::new();
    for directive in split_directives(text)? {
        let (name, args) = directive.split_first().expect("directives are not empty");
        const TRANSLATED: [&str; 8] = [
            "more_set_headers",
            "more_set_input_headers",
            "add_header",
            "proxy_set_header",
            "more_clear_headers",
            "more_clear_input_headers",
            "proxy_hide_header",
            "",
        ];
        // Variables are values made per request: in a header name they would make one.
        let names_only = matches!(
            name.as_str(),
            "more_clear_headers" | "more_clear_input_headers" | "proxy_hide_header"
        );
        if TRANSLATED.contains(&name.as_str()) {
            let named = |arg: &&String| match name.as_str() {
                "more_set_headers" | "more_set_input_headers" => {
                    arg.split_once(':').is_none_or(|(n, _)| n.contains('$'))
                }
                "add_header" | "proxy_set_header" => args.first() == Some(*arg),
                _ => names_only,
            };
            if let Some(arg) = args.iter().filter(named).find(|arg| arg.contains('$')) {
                return Err(format!(
                    "{name}: {arg:?}: a header name cannot come from an nginx variable"
                ));
            }
        }
        match name.as_str() {
            "more_set_headers" | "more_set_input_headers" => {
                let to_request = name == "more_set_input_headers";
                if args.is_empty() || args.iter().any(|a| a.starts_with('-')) {
                    return Err(format!("{name}: only \"Name: value\" arguments are supported (no -s or -t filters)"));
                }
                for arg in args {
                    let (header, value) = arg
                        .split_once(':')
                        .ok_or_else(|| format!("{name}: {arg:?} is not \"Name: value\""))?;
                    let header = header_name(name, header.trim())?;
                    let action = value_action(name, value.trim(), false)?;
                    push_edit(
                        &mut edits,
                        name,
                        HeaderEdit {
                            name: header,
                            action,
                        },
                        to_request,
                    )?;
                }
            }
            "add_header" => {
                let (header, value) = match args {
                    [header, value] => (header, value),
                    [header, value, always] if always == "always" => (header, value),
                    _ => {
                        return Err(
                            "add_header: expected a name, a value and optionally always".into()
                        )
                    }
                };
                let header = header_name(name, header)?;
                let action = if value.contains('$') {
                    value_action(name, value, true)?
                } else {
                    HeaderAction::Append(header_value(name, value)?)
                };
                push_edit(
                    &mut edits,
                    name,
                    HeaderEdit {
                        name: header,
                        action,
                    },
                    false,
                )?;
            }
            "proxy_set_header" => {
                let [header, value] = args else {
                    return Err("proxy_set_header: expected a name and a value".into());
                };
                let header = header_name(name, header)?;
                // nginx: an empty value means the header is not passed.
                let action = value_action(name, value, false)?;
                push_edit(
                    &mut edits,
                    name,
                    HeaderEdit {
                        name: header,
                        action,
                    },
                    true,
                )?;
            }
            "more_clear_headers" | "more_clear_input_headers" | "proxy_hide_header" => {
                let to_request = name == "more_clear_input_headers";
                if args.is_empty() || args.iter().any(|a| a.starts_with('-') || a.contains('*')) {
                    return Err(format!(
                        "{name}: only literal header names are supported (no wildcards or filters)"
                    ));
                }
                for arg in args {
                    let header = header_name(name, arg)?;
                    push_edit(
                        &mut edits,
                        name,
                        HeaderEdit {
                            name: header,
                            action: HeaderAction::Remove,
                        },
                        to_request,
                    )?;
                }
            }
            other => {
                let alternative = typed_alternative(other)
                    .map(|a| format!(" (use {a} instead)"))
                    .unwrap_or_default();
                return Err(format!("the directive {other:?} is refused{alternative}"));
            }
        }
    }
    Ok(edits)
}

/// Headers that say how a message is framed or what its connection does, not what it means.
/// An edit of one desyncs the connection it is sent on: `Content-Length: 0` above a body that
/// is still sent made the body the next request on the pooled upstream connection, another
/// tenant's (request smuggling). Sluice frames every message itself.
pub(super) const CONNECTION_HEADERS: [&str; 8] = [
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-connection",
];

/// Adds one translated edit, or refuses it: no snippet frames a message, manages a
/// connection, or chooses the `Host` the upstream routes on.
pub(super) fn push_edit(
    edits: &mut Vec<(HeaderEdit, bool)>,
    directive: &str,
    edit: HeaderEdit,
    to_request: bool,
) -> Result<(), String> {
    let header = edit.name.as_str();
    if CONNECTION_HEADERS.contains(&header) {
        if edit.action == HeaderAction::Remove
            && !matches!(header, "content-length" | "transfer-encoding")
        {
            // `proxy_set_header Connection "";` (nginx's keep-alive recipe) and the like ask
            // for what Sluice does anyway: hop-by-hop headers are never passed on.
            return Ok(());
        }
        return Err(format!(
            "{directive}: {header} is refused: Sluice sets the framing and connection headers \
             from the message it sends (an edit of them would let one request smuggle another)"
        ));
    }
    if to_request && edit.name == http::header::HOST {
        return Err(format!(
            "{directive}: host is refused (use the upstream-vhost annotation instead)"
        ));
    }
    edits.push((edit, to_request));
    Ok(())
}

/// A value that sets (or, `append`, adds) a header: empty removes it (nginx passes no empty
/// header); one with nginx variables becomes a template filled per request, refused naming
/// the variable Sluice does not know before the request goes upstream.
fn value_action(directive: &str, value: &str, append: bool) -> Result<HeaderAction, String> {
    if value.is_empty() {
        return Ok(HeaderAction::Remove);
    }
    if !value.contains('$') {
        let value = header_value(directive, value)?;
        return Ok(if append {
            HeaderAction::Append(value)
        } else {
            HeaderAction::Set(value)
        });
    }
    let segments = model::access_log::parse_header_template(value)
        .map_err(|why| format!("{directive}: {value:?}: {why}"))?;
    // The literal parts must be header text on their own.
    for segment in &segments {
        if let model::access_log::Segment::Literal(text) = segment {
            header_value(directive, text)?;
        }
    }
    let template = HeaderTemplate {
        written: value.into(),
        segments: segments.into_boxed_slice(),
    };
    Ok(if append {
        HeaderAction::AppendTemplate(template)
    } else {
        HeaderAction::SetTemplate(template)
    })
}

pub(super) fn header_name(directive: &str, name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("{directive}: {name:?} is not a header name"))
}

pub(super) fn header_value(directive: &str, value: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(value)
        .map_err(|_| format!("{directive}: {value:?} is not a header value"))
}

/// The annotation (or ConfigMap key) that does what a refused directive did.
pub(super) fn typed_alternative(directive: &str) -> Option<&'static str> {
    Some(match directive {
        "rewrite" => "the rewrite-target annotation",
        "return" => "the permanent-redirect or temporal-redirect annotation",
        "allow" | "deny" => "the whitelist-source-range / denylist-source-range annotations",
        "client_max_body_size" => "the proxy-body-size annotation",
        "proxy_connect_timeout" => "the proxy-connect-timeout annotation",
        "proxy_send_timeout" => "the proxy-send-timeout annotation",
        "proxy_read_timeout" => "the proxy-read-timeout annotation",
        "proxy_next_upstream" => "the proxy-next-upstream annotation",
        "proxy_next_upstream_tries" => "the proxy-next-upstream-tries annotation",
        "proxy_next_upstream_timeout" => "the proxy-next-upstream-timeout annotation",
        "proxy_request_buffering" => "the proxy-request-buffering annotation",
        "client_body_buffer_size" => "the client-body-buffer-size annotation",
        "proxy_buffering" => "the proxy-buffering annotation",
        "server_name" => "the server-alias annotation",
        _ => return None,
    })
}

/// Splits a snippet into directives of words (quotes removed). Blocks and `if` are refused:
/// nothing conditional is translated.
pub(super) fn split_directives(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut directives = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            ';' => {
                if !words.is_empty() {
                    directives.push(std::mem::take(&mut words));
                }
            }
            '{' | '}' => {
                let name = words.first().map_or("a block", String::as_str);
                return Err(format!("{name:?} with a block is refused (nothing conditional or nested is translated)"));
            }
            '"' | '\'' => {
                let quote = c;
                let mut word = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(next) = chars.next() {
                                word.push(next);
                            }
                        }
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        c => word.push(c),
                    }
                }
                if !closed {
                    return Err("an unterminated quote".into());
                }
                words.push(word);
            }
            c if c.is_whitespace() => {}
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, ';' | '{' | '}' | '"' | '\'') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                words.push(word);
            }
        }
    }
    if !words.is_empty() {
        return Err(format!("{:?}: a directive must end with ';'", words[0]));
    }
    Ok(directives)
}
