//! The vocabulary floor: the words every other module of the crate speaks,
//! importing nothing but each other (each only from the ones listed before
//! it). The crate root re-exports their public names; inside the crate,
//! each is imported from its defining module here, never through the root.
//!
//! - `category`: [`ErrorCategory`](category::ErrorCategory) and its set.
//! - `layer`: [`Layer`](layer::Layer), and the layer rule
//!   ([`Layer::may_nest_in`](layer::Layer::may_nest_in)).
//! - `reached`: whether a failed attempt may have reached the other side.
//! - `timeout_error`: [`TimeoutError`](timeout_error::TimeoutError) and its
//!   [`Boundary`](timeout_error::Boundary).
//! - `classify`: the [`Classify`](classify::Classify) trait, over the three above.
//! - `config`: a layer's [`RetryConfig`](config::RetryConfig).
//! - `key`: the call's [`IdempotencyKey`](key::IdempotencyKey).
//! - `bucket`: the opt-in [`TokenBucket`](bucket::TokenBucket).
//! - `policy`: a task's keys ([`TaskPolicy`](policy::TaskPolicy)), read by
//!   `serde_impl`, described by `schema_impl`.
//! - `site`: one annotated fn's [`Site`](site::Site), over `layer` and `config`.

pub(crate) mod bucket;
pub(crate) mod category;
pub(crate) mod classify;
pub(crate) mod config;
pub(crate) mod key;
pub(crate) mod layer;
pub(crate) mod policy;
pub(crate) mod reached;
pub(crate) mod site;
pub(crate) mod timeout_error;
