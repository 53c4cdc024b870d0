//! The cost of one route lookup, for callgrind: an Ingress-only table (the plain path every
//! Ingress request takes) looked up many times in one function, `lookups`, that callgrind can
//! count alone (`--toggle-collect='*lookups*'`). A measurement, not a check: ignored by default.
//!
//! ```text
//!  1,000 Ingress hosts, Prefix / and Prefix /api each ─▶ RouteTable::route_on ×ROUNDS ─▶ count
//! ```
//! Run: `cargo test -p model --release --test lookup_cost --no-run`, then the binary under
//! `valgrind --tool=callgrind --toggle-collect='*lookups*' BIN --ignored --exact
//! ingress_lookups`; instructions divided by `LOOKUPS` are one lookup's.

use std::sync::Arc;

use model::routes::{HostPattern, Listeners, PathKind, PathRoute};
use model::{Route, RouteTable};

const HOSTS: usize = 1_000;
const LOOKUPS: usize = 100_000;

fn route(service: &str) -> Arc<Route> {
    Arc::new(Route::bare(service))
}

fn ingress_table() -> RouteTable {
    let mut table = RouteTable::default();
    for i in 0..HOSTS {
        let host = HostPattern::Exact(format!("host-{i}.example.com").into());
        let routes = table.host_mut(&host);
        routes.server = true;
        routes.add(PathRoute::new(PathKind::Prefix, "/", route("web")));
        routes.add(PathRoute::new(PathKind::Prefix, "/api", route("api")));
    }
    table.finish();
    table
}

#[inline(never)]
fn lookups(table: &RouteTable, hosts: &[String], head: &http::request::Parts) -> usize {
    let mut found = 0;
    for i in 0..LOOKUPS {
        let host = &hosts[i % hosts.len()];
        let path = if i % 2 == 0 {
            "/api/items"
        } else {
            "/index.html"
        };
        if let Some(m) = table.route_on(Listeners::HTTP, host, path, head) {
            found += m.route.service.len();
        }
    }
    found
}

#[test]
#[ignore = "a measurement for callgrind: run with --ignored"]
fn ingress_lookups() {
    let table = ingress_table();
    let hosts: Vec<String> = (0..HOSTS)
        .step_by(7)
        .map(|i| format!("host-{i}.example.com"))
        .collect();
    let head = http::Request::new(()).into_parts().0;
    let found = std::hint::black_box(lookups(&table, &hosts, std::hint::black_box(&head)));
    // "api" on even lookups, "web" on odd ones: every lookup found its rule.
    assert_eq!(found, LOOKUPS / 2 * 3 + LOOKUPS / 2 * 3);
}
