//! README's annotations table is made from `translate::ingress::annotations::REGISTRY`: this test fails when
//! they differ. `UPDATE_README=1 cargo test -p translate --test translate catalogue` rewrites the table.

use translate::ingress::annotations::{Support, REGISTRY};

const BEGIN: &str = "<!-- annotations:begin";
const END: &str = "<!-- annotations:end -->";

fn table() -> String {
    let mut rows: Vec<(&str, &Support)> = REGISTRY.iter().map(|a| (a.name, &a.support)).collect();
    rows.sort_by_key(|(name, _)| *name);
    let mut out =
        String::from("| `nginx.ingress.kubernetes.io/…` | Sluice | notes |\n|---|---|---|\n");
    for (name, support) in rows {
        let (mark, note) = match support {
            Support::Yes => ("Y", ""),
            Support::Partial(note) => ("partial", *note),
            Support::Accepted(note) => ("Y (accepted)", *note),
            Support::No(note) => ("N", *note),
            Support::FailsClosed(note) => ("refused (fails closed)", *note),
            Support::Sluice(note) => ("Sluice only", *note),
        };
        // Sluice's own keys are read only under its prefix: the row says so.
        let prefix = match support {
            Support::Sluice(_) => "sluice.dev/",
            _ => "",
        };
        out.push_str(&format!("| `{prefix}{name}` | {mark} | {note} |\n"));
    }
    out
}

#[test]
fn the_readme_table_is_the_catalogue() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find(BEGIN)
        .expect("README has the annotations markers");
    let start = start + readme[start..].find('\n').unwrap() + 1;
    let end = readme.find(END).expect("README has the end marker");
    let current = &readme[start..end];
    let wanted = table();
    if std::env::var_os("UPDATE_README").is_some() {
        let updated = format!("{}{wanted}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(
        current, wanted,
        "README's annotations table differs from the registry; run UPDATE_README=1 cargo test -p translate --test translate catalogue"
    );
    // Every documented ingress-nginx annotation is listed (the docs list 117 plus the
    // allowlist/whitelist pair).
    assert!(REGISTRY.len() >= 118, "{}", REGISTRY.len());
}
