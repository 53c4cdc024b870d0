//! Listener ports beyond 80 and 443: each port a Gateway listener declares gets a bit of
//! [`Listeners`] and an entry in `Compiled::declared_ports` (the proxy binds it on
//! `--http-listen`'s address at that number).
//!
//! ```text
//!  listener (HTTP|HTTPS, port) ─▶ 80 HTTP ─▶ Listeners::HTTP   443 HTTPS ─▶ Listeners::HTTPS
//!                                 other ─▶ declared_ports[port] (first use: the next free bit;
//!                                          later uses: the same bit when the protocol agrees,
//!                                          else ProtocolConflict and the listener is not served)
//! ```

use model::routes::Listeners;
use model::sites::DeclaredPort;

use crate::compiler::Compiler;

impl Compiler<'_> {
    /// The listener bit for `port` served plain (`tls` false) or with TLS, or why not.
    pub(super) fn declare_port(&mut self, port: i32, tls: bool) -> Result<Listeners, String> {
        let Some(port) = u16::try_from(port).ok().filter(|p| *p != 0) else {
            return Err(format!("port {port} is not a TCP port"));
        };
        let conflict = |what: &str| {
            Err(format!(
                "port {port} is already served {what} (ProtocolConflict); listener ignored"
            ))
        };
        match (port, tls) {
            (80, false) => return Ok(Listeners::HTTP),
            (443, true) => return Ok(Listeners::HTTPS),
            (80, true) => return conflict("as plain HTTP (--http-listen)"),
            (443, false) => return conflict("with TLS (--https-listen)"),
            _ => {}
        }
        if self.stream_ports.tcp_holds(port) {
            return conflict("as a Gateway's TCP listener");
        }
        if let Some(declared) = self.out.declared_ports.get(&port) {
            return match declared.tls == tls {
                true => Ok(declared.on),
                false if declared.tls => conflict("with TLS by another listener"),
                false => conflict("as plain HTTP by another listener"),
            };
        }
        let index = self.out.declared_ports.len();
        let Some(on) = Listeners::declared(index) else {
            return Err(format!(
                "port {port}: Sluice serves at most {} listener ports beyond 80 and 443; listener ignored",
                Listeners::MAX_DECLARED
            ));
        };
        self.out
            .declared_ports
            .insert(port, DeclaredPort { tls, on });
        Ok(on)
    }
}
