//! Which of Sluice's listeners (ports) a rule answers on, as a bit set: what the route table
//! and the Gateway listener index (`listener_hosts`) both test a connection's listener against.
//!
//! ```text
//!  connection ─its listener─▶ one bit (HTTP, HTTPS, a declared port)
//!  rule.listeners (a set) ─meets─▶ the rule answers there
//! ```

/// Which of Sluice's listeners a rule answers on: a Gateway API route attached only to the
/// HTTPS listener must not answer plain HTTP. Ingress rules answer on both. Bit 0 is the port-80
/// listener (`--http-listen`), bit 1 the port-443 one (`--https-listen`), the others the ports
/// Gateway listeners declare beyond those (`Compiled::declared_ports`, in `u16`: two bytes in
/// the padding beside the path's kind, no cost per rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Listeners(u16);

impl Listeners {
    pub const HTTP: Listeners = Listeners(1);
    pub const HTTPS: Listeners = Listeners(2);
    /// What Ingress rules answer on: Sluice's own two listeners (a port a Gateway declares
    /// serves that Gateway's routes only).
    pub const ALL: Listeners = Listeners(3);
    pub const NONE: Listeners = Listeners(0);
    /// How many ports beyond 80 and 443 have a bit.
    pub const MAX_DECLARED: usize = 14;

    /// The bit of the `index`th declared port (`None` past [`Listeners::MAX_DECLARED`]).
    pub fn declared(index: usize) -> Option<Listeners> {
        (index < Listeners::MAX_DECLARED).then(|| Listeners(4 << index))
    }

    /// The listener a connection came in on.
    pub fn of(https: bool) -> Listeners {
        if https {
            Listeners::HTTPS
        } else {
            Listeners::HTTP
        }
    }

    /// The set as bits (for sorting).
    pub fn bits(self) -> u16 {
        self.0
    }

    pub fn union(self, other: Listeners) -> Listeners {
        Listeners(self.0 | other.0)
    }

    /// Some listener is in both.
    pub fn meets(self, other: Listeners) -> bool {
        self.0 & other.0 != 0
    }

    /// For display: `None` for both (every Ingress rule), else `http`, `https` or which with
    /// declared ports.
    pub fn only(self) -> Option<&'static str> {
        match self {
            Listeners::HTTP => Some("http"),
            Listeners::HTTPS => Some("https"),
            Listeners::NONE => Some("none"),
            Listeners::ALL => None,
            Listeners(mask) => Some(match mask & Listeners::ALL.0 {
                0 => "declared ports",
                1 => "http and declared ports",
                2 => "https and declared ports",
                _ => "http, https and declared ports",
            }),
        }
    }
}
