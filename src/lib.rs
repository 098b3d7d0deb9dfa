//! Shared pieces of the integration tests and examples of nika-retry: a
//! loopback fault server, a verb crate written as a user would write it, the
//! error types the tests share, an attempt counter and an event log.
#![forbid(unsafe_code)]

pub mod behind_first;
pub mod doc;
pub mod fault;
pub mod fleet;
pub mod logs;
#[cfg(feature = "opentelemetry")]
pub mod metrics;
#[cfg(feature = "redis")]
pub mod redis_server;
pub mod resuming;
pub mod verb;

/// `README.md` and the reference in `docs/`: each of their Rust snippets is
/// compiled (and run where it has a `main`) as a doctest, so that what a
/// user copies from them builds (`tests/docs_doctests.rs` checks that every
/// page with a Rust snippet is here).
#[cfg(doctest)]
pub mod doctests {
    #[doc = include_str!("../README.md")]
    pub struct Readme;
    #[doc = include_str!("../docs/adapters.md")]
    pub struct Adapters;
    #[doc = include_str!("../docs/attributes.md")]
    pub struct Attributes;
    #[doc = include_str!("../docs/comparisons.md")]
    pub struct Comparisons;
    #[doc = include_str!("../docs/demo.md")]
    pub struct Demo;
    // Compiled with feature `redis` (`RedisStore`), as `.ci/run` does.
    #[cfg(feature = "redis")]
    #[doc = include_str!("../docs/fleet.md")]
    pub struct Fleet;
    #[doc = include_str!("../docs/layers.md")]
    pub struct Layers;
    #[doc = include_str!("../docs/observability.md")]
    pub struct Observability;
    #[doc = include_str!("../docs/side-effects.md")]
    pub struct SideEffects;
    #[doc = include_str!("../docs/streams.md")]
    pub struct Streams;
    #[doc = include_str!("../docs/task-scope.md")]
    pub struct TaskScope;
    #[doc = include_str!("../docs/time-limits.md")]
    pub struct TimeLimits;
    #[doc = include_str!("../docs/tools-and-tasks.md")]
    pub struct ToolsAndTasks;
    #[doc = include_str!("../docs/upstream.md")]
    pub struct Upstream;
    #[doc = include_str!("../docs/workflow-yaml.md")]
    pub struct WorkflowYaml;
}

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::events::{Outcome, RetryEvent, RetryObserver, observe};
use nika_retry::{Classify, Layer, TimeoutError};

/// The smallest error a retried fn can have: one transient failure, and the
/// time limits (`From<TimeoutError>`, as `#[timeout]` needs).
#[derive(Debug, Clone, PartialEq, thiserror::Error, Classify)]
pub enum Error {
    /// A transient failure: retried on every layer that retries.
    #[error("busy")]
    #[category(transient)]
    Busy,
    /// A time limit expired.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// A fault server playing `script`, and a transport to it with `options`:
/// the set-up of a test of the verb crate over loopback HTTP.
pub async fn serve(
    script: impl IntoIterator<Item = fault::Fault>,
    options: verb::RequestOptions,
) -> (fault::FaultServer, verb::Transport) {
    let server = fault::FaultServer::start(script).await;
    let transport = verb::Transport::new(server.url(""), options);
    (server, transport)
}

/// A provider-style error, as an LLM provider crate's `ProviderError`: a 429
/// with the provider's hint, other API failures by status, time limits.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Classify)]
pub enum ProviderError {
    /// HTTP 429 with the provider's hint.
    #[error("rate limited")]
    #[category(rate_limited, retry_after_ms = retry_after_ms)]
    RateLimited {
        /// The wait the provider asked for.
        retry_after_ms: Option<u64>,
    },
    /// Any other API failure, classified by its status, with the server's
    /// hint (a 503 may carry a `Retry-After`).
    #[error("api error {status}: {message}")]
    #[category(http_status = status, retry_after = retry_after)]
    Api {
        /// The HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
        /// The wait the server asked for.
        retry_after: Option<Duration>,
    },
    /// A time limit expired.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    /// The call's upstream is held longer than the call waits (a fn with
    /// `upstream = …`): rate limited, with what is left of the hold.
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] nika_retry::upstream::Held),
}

impl ProviderError {
    /// An `Api` error of `status`.
    pub fn status(status: u16) -> ProviderError {
        ProviderError::Api {
            status,
            message: format!("status {status}"),
            retry_after: None,
        }
    }

    /// A 429 with an optional hint.
    pub fn rate_limited(hint: Option<Duration>) -> ProviderError {
        ProviderError::RateLimited {
            retry_after_ms: hint.map(|d| d.as_millis() as u64),
        }
    }
}

/// Counts attempts and fails the first `failures` of them with `error`.
#[derive(Debug)]
pub struct Script {
    attempts: AtomicU32,
    failures: u32,
    error: ProviderError,
}

impl Script {
    /// Fails `failures` times with `error`, then succeeds.
    pub fn new(failures: u32, error: ProviderError) -> Script {
        Script {
            attempts: AtomicU32::new(0),
            failures,
            error,
        }
    }

    /// Always fails with `error`.
    pub fn always(error: ProviderError) -> Script {
        Script::new(u32::MAX, error)
    }

    /// One attempt: records it, then fails or returns the attempt number.
    pub fn attempt(&self) -> Result<u32, ProviderError> {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.failures {
            Err(self.error.clone())
        } else {
            Ok(n)
        }
    }

    /// How many attempts were made.
    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

/// The library's [`EventLog`](nika_retry::events::EventLog), unbounded
/// (a test's log drops nothing), with the outline the tests compare.
pub struct EventLog(nika_retry::events::EventLog);

impl Default for EventLog {
    fn default() -> Self {
        EventLog(nika_retry::events::EventLog::with_capacity(usize::MAX))
    }
}

impl std::ops::Deref for EventLog {
    type Target = nika_retry::events::EventLog;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl RetryObserver for EventLog {
    fn on_event(&self, event: &RetryEvent) {
        self.0.on_event(event);
    }
}

impl EventLog {
    /// Runs `fut` observed by a new log: its output, and the log of its
    /// events.
    pub async fn record<F: Future>(fut: F) -> (F::Output, Arc<EventLog>) {
        let log = Arc::new(EventLog::default());
        let out = observe(log.clone(), fut).await;
        (out, log)
    }

    /// `(layer, outcome)` of every event so far.
    pub fn outline(&self) -> Vec<(Layer, Outcome)> {
        self.events().iter().map(|e| (e.layer, e.outcome)).collect()
    }
}
