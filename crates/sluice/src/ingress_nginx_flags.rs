//! ingress-nginx's command-line flags that `sluice serve` does not take: each fails at start
//! with what to do instead, rather than clap's "unexpected argument"; the few whose value is
//! what Sluice does anyway are dropped. Flags Sluice implements under ingress-nginx's name are
//! ordinary clap flags (`serve.rs`); any other unknown flag stays clap's error.
//!
//! ```text
//!  argv ──▶ check(argv) ──▶ a listed flag? ─ value Sluice does anyway ─▶ dropped
//!                │                         └ otherwise ─▶ Err("ingress-nginx flag --X is not
//!                │                                        supported by Sluice (why / instead)")
//!                └──▶ the rest, unchanged ──▶ clap
//! ```
//!
//! The list follows ingress-nginx's `pkg/flags/flags.go` (and klog's flags it adds).

use std::ffi::OsString;

/// An ingress-nginx flag Sluice does not implement.
struct Refused {
    name: &'static str,
    /// A Go boolean flag: its value only comes after `=` (pflag), never as the next argument.
    boolean: bool,
    /// Values that ask for what Sluice does anyway; the flag is then dropped. `"true"` also
    /// stands for a bare boolean flag.
    harmless: &'static [&'static str],
    why: &'static str,
}

const fn flag(name: &'static str, why: &'static str) -> Refused {
    Refused {
        name,
        boolean: false,
        harmless: &[],
        why,
    }
}

const fn switch(
    name: &'static str,
    harmless: &'static [&'static str],
    why: &'static str,
) -> Refused {
    Refused {
        name,
        boolean: true,
        harmless,
        why,
    }
}

const TRUE: &[&str] = &["true", "1", "t", "T", "TRUE", "True"];
const FALSE: &[&str] = &["false", "0", "f", "F", "FALSE", "False"];

const METRICS: &str =
    "Sluice's Prometheus metrics are fixed (README: admin endpoints); remove the flag";
const LOGGING: &str = "Sluice logs to stderr at the level SLUICE_LOG sets (error, warn, info, debug, trace); remove the flag";
const GEOIP: &str = "GeoIP databases are not used by Sluice; remove the flag";
const KUBECONFIG: &str = "Sluice reads the API server's address and CA from a kubeconfig: pass --kubeconfig PATH (in a pod the service account is used)";

const REFUSED: &[Refused] = &[
    flag("apiserver-host", KUBECONFIG),
    flag("certificate-authority", KUBECONFIG),
    flag("sync-period", "Sluice's watchers resynchronise on their own (a lost watch relists); remove the flag"),
    switch("profiling", FALSE, "Sluice has no Go profiler; remove the flag (profile the process with perf instead)"),
    flag("profiler-port", "Sluice has no Go profiler; remove the flag"),
    flag("profiler-address", "Sluice has no Go profiler; remove the flag"),
    flag("health-check-timeout", "Sluice's /healthz answers at once; remove the flag"),
    switch("update-status", TRUE, "Sluice writes Ingress status only with --publish-service or --publish-status-address: leave both out to leave status alone"),
    switch("update-status-on-shutdown", FALSE, "Sluice leaves Ingress status as it is when it stops (the next leader keeps it current); remove the flag"),
    flag("ssl-passthrough-proxy-port", "Sluice passes TLS through on its HTTPS listener itself, with no internal port; remove the flag"),
    flag("annotations-prefix", "Sluice reads the nginx.ingress.kubernetes.io/ and sluice.dev/ prefixes only; only --annotations-prefix=nginx.ingress.kubernetes.io is accepted"),
    switch("enable-annotation-validation", TRUE, "Sluice always validates annotation values (a bad one is a diagnostic on its Ingress); remove the flag"),
    switch("enable-ssl-chain-completion", FALSE, "Sluice serves a Secret's certificate chain as it is: put the intermediates into tls.crt"),
    flag("sync-rate-limit", "Sluice compiles each burst of changes once, in microseconds to milliseconds; remove the flag"),
    switch("metrics-per-undefined-host", FALSE, METRICS),
    flag("bucket-factor", METRICS),
    flag("max-buckets", METRICS),
    flag("monitor-max-batch-size", METRICS),
    flag("default-server-port", "Sluice answers requests no rule matches itself (404) or through --default-backend-service NS/NAME; there is no separate default server"),
    switch("disable-full-test", FALSE, "Sluice's admission webhook always compiles every Ingress (it takes milliseconds); remove the flag"),
    flag("status-port", "Sluice's status listener (/config) is --status-listen 127.0.0.1:PORT"),
    flag("stream-port", "Sluice's TCP services (--tcp-services-configmap) are served by its workers directly, with no internal stream port; remove the flag"),
    flag("internal-logger-address", LOGGING),
    switch("deep-inspect", TRUE, "Sluice never executes snippets and always validates annotations; remove the flag"),
    flag("dynamic-configuration-retries", "Sluice applies configuration in memory, an atomic swap that cannot fail; remove the flag"),
    switch("disable-sync-events", FALSE, "Sluice writes Events only for problems with an Ingress; remove the flag"),
    flag("maxmind-mirror", GEOIP),
    flag("maxmind-license-key", GEOIP),
    flag("maxmind-edition-ids", GEOIP),
    flag("maxmind-retries-count", GEOIP),
    flag("maxmind-retries-timeout", GEOIP),
    switch("version", &[], "use `sluice --version`"),
    // klog's, added to ingress-nginx's flag set.
    flag("vmodule", LOGGING),
    switch("logtostderr", TRUE, LOGGING),
    switch("alsologtostderr", FALSE, LOGGING),
    flag("log_dir", LOGGING),
    flag("log_file", LOGGING),
    flag("log_file_max_size", LOGGING),
    flag("stderrthreshold", LOGGING),
    flag("log_backtrace_at", LOGGING),
    switch("skip_headers", FALSE, LOGGING),
    switch("skip_log_headers", FALSE, LOGGING),
    switch("add_dir_header", FALSE, LOGGING),
    switch("one_output", FALSE, LOGGING),
];

/// `--annotations-prefix` with ingress-nginx's default is what Sluice reads anyway.
const ANNOTATIONS_PREFIX: &[&str] = &["nginx.ingress.kubernetes.io"];

/// Checks `sluice serve`'s arguments (the whole argv) for ingress-nginx flags Sluice does not
/// take: returns the arguments without the harmless ones, or the message for the first other.
pub(crate) fn check(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let mut kept = Vec::with_capacity(args.len());
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str() else {
            kept.push(arg);
            continue;
        };
        if text == "--" {
            kept.push(arg);
            kept.extend(rest);
            break;
        }
        // pflag takes `-name` as well as `--name`.
        let Some(body) = text
            .strip_prefix("--")
            .or_else(|| text.strip_prefix('-').filter(|b| b.len() > 1))
        else {
            kept.push(arg);
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (body, None),
        };
        let Some(refused) = REFUSED.iter().find(|r| r.name == name) else {
            kept.push(arg);
            continue;
        };
        let value = match (inline, refused.boolean) {
            (Some(value), _) => Some(value),
            (None, true) => Some("true".to_owned()),
            // A valued flag's value is the next argument, as pflag reads it.
            (None, false) => rest.next().and_then(|v| v.into_string().ok()),
        };
        let harmless = if refused.name == "annotations-prefix" {
            ANNOTATIONS_PREFIX
        } else {
            refused.harmless
        };
        if value.as_deref().is_some_and(|v| harmless.contains(&v)) {
            continue;
        }
        return Err(format!(
            "ingress-nginx flag --{} is not supported by Sluice ({})",
            refused.name, refused.why
        ));
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Vec<String>, String> {
        check(args.iter().map(OsString::from).collect())
            .map(|kept| kept.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn a_refused_flag_says_why_and_what_to_do_instead() {
        for args in [
            &[
                "sluice",
                "serve",
                "--kubernetes",
                "--ssl-passthrough-proxy-port",
                "442",
            ][..],
            &["sluice", "serve", "--ssl-passthrough-proxy-port=442"],
            &["sluice", "serve", "-ssl-passthrough-proxy-port=442"],
        ] {
            let error = run(args).unwrap_err();
            assert!(
                error.starts_with("ingress-nginx flag --ssl-passthrough-proxy-port is not supported by Sluice (Sluice passes TLS through on its HTTPS listener itself"),
                "{error}"
            );
        }
        let error = run(&["sluice", "serve", "--stream-port", "10247"]).unwrap_err();
        assert!(error.contains("no internal stream port"), "{error}");
        let error = run(&["sluice", "serve", "--vmodule=x=2"]).unwrap_err();
        assert!(error.contains("SLUICE_LOG"), "{error}");
        let error = run(&["sluice", "serve", "--annotations-prefix", "custom.io"]).unwrap_err();
        assert!(error.contains("--annotations-prefix"), "{error}");
    }

    #[test]
    fn values_sluice_has_anyway_are_dropped_and_the_rest_is_left_to_clap() {
        let kept = run(&[
            "sluice",
            "serve",
            "--update-status=true",
            "--annotations-prefix",
            "nginx.ingress.kubernetes.io",
            "--profiling=false",
            "--kubernetes",
            "--not-a-flag-anyone-has",
        ])
        .unwrap();
        assert_eq!(
            kept,
            ["sluice", "serve", "--kubernetes", "--not-a-flag-anyone-has"]
        );
        // A refused flag's valued form takes the next argument with it only when it is valued.
        let error = run(&["sluice", "serve", "--update-status", "--kubernetes"]);
        assert_eq!(error.unwrap(), ["sluice", "serve", "--kubernetes"]);
        let error = run(&["sluice", "serve", "--update-status=false"]).unwrap_err();
        assert!(error.contains("--publish-service"), "{error}");
        // After `--` nothing is a flag.
        let kept = run(&["sluice", "serve", "--", "--vmodule=2"]).unwrap();
        assert_eq!(kept.len(), 4);
    }

    #[test]
    fn every_flag_is_listed_once() {
        let mut names: Vec<&str> = REFUSED.iter().map(|r| r.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
