//! The configuration as one worker holds it.

use std::rc::Rc;
use std::sync::Arc;

use model::Compiled;

/// The current configuration as one worker holds it: cloning the `Rc` is a plain increment,
/// where cloning the `Arc` would bump a counter every worker shares.
pub(crate) type Current = Rc<Arc<Compiled>>;
