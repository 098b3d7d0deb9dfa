//! [`Site`]: one annotated fn, as the `const` it resolves to (made by
//! `run::site::Overrides::site`).

use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;

/// One annotated fn, resolved at compile time into a `const`.
#[derive(Debug)]
pub struct Site {
    /// The layer of `#[retry(layer = …)]`.
    pub layer: Layer,
    /// `module_path!()::fn_name`.
    pub operation: &'static str,
    /// The layer defaults with the attribute's literals applied.
    pub config: RetryConfig,
}
