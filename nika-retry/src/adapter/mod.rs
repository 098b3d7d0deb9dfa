//! What the adapters share (the `tower` layer, the `reqwest_middleware`
//! middleware): their options ([`Options`], [`Timeouts`]) and the one loop
//! that runs a request's attempts ([`drive`]) through the calls the macros
//! drive (`run/`: `TimedCall`, `AtUpstream`, `next_after`, `sleep`), so
//! that every decision is the engine's: the task scope, the budget across
//! layers, the token bucket, the upstream, `current_attempt()` inside the
//! inner service, the events and the layer reports.
//!
//! - [`options`]: the layer's site, config, timeouts, upstream and
//!   idempotence, as one value both adapters wrap.
//! - [`judge`]: a response as a failure (its status, `x-should-retry`, the
//!   server's hint, what it reached), its rate-limit headers to the upstream.
//! - [`drive`]: the loop.
//! - `marks`: what one request says of itself (`Idempotent`, `Cost`),
//!   from its extensions.
//! - `body`: a response's body after its headers, read inside the attempt
//!   or held to its limits past the adapter's return (`ReadBody`).
// Each adapter uses it under its own feature.
#![cfg_attr(
    not(any(feature = "tower", feature = "reqwest-middleware")),
    allow(dead_code, unused_imports)
)]

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod body;
mod drive;
mod judge;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod marks;
mod options;

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub use body::ReadBody;
#[cfg(feature = "tower")]
pub use body::{FromBodyError, TimedBody};
pub(crate) use drive::{Errors, drive};
pub(crate) use judge::response_failure;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) use marks::Marks;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub use marks::{Cost, Idempotent};
pub use options::Timeouts;
pub(crate) use options::{Options, Sites};

#[cfg(test)]
pub(crate) mod tests;
