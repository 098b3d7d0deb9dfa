//! Layer-aware retries and timeouts for async Rust, checked at compile time.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod category;
mod classify;
mod config;
pub mod engine;
pub mod http;
mod layer;
mod timeout;

pub use category::{CategorySet, ErrorCategory, ParseCategoryError};
pub use classify::{Classify, io_kind_category};
pub use config::{ConfigError, Growth, MAX_ATTEMPTS, RetryConfig};
pub use layer::{Layer, ParseLayerError};
pub use timeout::{Boundary, TimeoutError};

mod connect;
mod timer;
pub use connect::{Connect, connect};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use nika_retry_macros::{Classify, retry, timeout};
