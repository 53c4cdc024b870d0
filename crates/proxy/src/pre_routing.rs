//! Gateway API's pre-routing stage (GEP-5224, a listener's `filters.requests`): before any
//! route is matched, the filters of the listener the request belongs to, in list order.
//!
//! ```text
//!  respond: config ─▶ stage(): RouteTable::listener_stage(port's bit, SNI, Host)
//!      (one emptiness check when no listener has filters) ─none─▶ routing as ever
//!      │ a stage
//!      ▼
//!  run(): Err (a filter cannot run) ─▶ 500 (fail closed)
//!         each ExternalAuth in order (auth::gateway_check: the sub-request on the auth
//!         phase's machinery and pool) ─deny─▶ the auth server's answer, nothing after it runs
//!         ─allow─▶ its headers in the request (never Host) ─▶ the next filter
//!      ─▶ routing, once, on the request as the filters left it (header matches see them)
//! ```

use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use http::request::Parts;
use http::{Method, Response};
use model::pre_routing::{ListenerStage, PreRoutingFilter};
use model::Compiled;

use crate::auth::{self, AuthAdds};
use crate::error::ProxyError;
use crate::normalise::request_host;
use crate::request_body::ClientBody;
use crate::response_body::ResponseBody;
use crate::worker::ConnCtx;

/// The stage of the listener `head` came in on, if it has one. CONNECT and TRACE (refused by
/// routing before anything is asked) and a Host routing refuses have none.
pub(crate) fn stage<'c>(
    conn: &ConnCtx,
    config: &'c Compiled,
    head: &Parts,
) -> Option<&'c Arc<ListenerStage>> {
    let routes = config.site(conn.local).routes;
    if !routes.listener_hosts().has_stages() {
        return None;
    }
    if head.method == Method::CONNECT || head.method == Method::TRACE {
        return None;
    }
    let host = request_host(head).ok()?;
    routes.listener_stage(conn.on, conn.sni.as_deref(), host)
}

/// Runs `stage` on `head`. `None`: the request goes on to routing; `Some`: its answer.
/// The filters' answer headers go in `adds`; a body an ExternalAuth's `forwardBody` reads
/// is put back in `body` as read; `client` is the request's address.
pub(crate) async fn run(
    conn: &Rc<ConnCtx>,
    config: &Compiled,
    stage: &ListenerStage,
    (head, body, client): (&mut Parts, &mut Option<ClientBody>, IpAddr),
    adds: &mut AuthAdds,
) -> Option<Result<Response<ResponseBody>, ProxyError>> {
    let filters = match &stage.filters {
        Ok(filters) => filters,
        Err(why) => {
            tracing::warn!(listener = %stage.listener, why = %why, "the listener's filters cannot run; answering 500");
            return Some(Err(ProxyError::ListenerFiltersUnusable));
        }
    };
    for filter in filters.iter() {
        match filter {
            PreRoutingFilter::ExternalAuth(external) => {
                let upstream = &stage.upstream;
                let request = (&mut *head, &mut *body, client);
                let checked =
                    auth::gateway_check(conn, config, (upstream, external), request, adds);
                if let Some(answer) = checked.await {
                    return Some(answer);
                }
            }
        }
    }
    None
}
