//! The task scope: a workflow task's `retry:` and `timeout:` in force for
//! everything the task runs.
//!
//! Inside [`scope`], the task's `retry:` replaces the provider layer's policy
//! and is the only thing that turns tool- and task-layer retries on; it never
//! touches the http layer, which is set per request (ADR-019). The scope also
//! sets the task's `timeout:` and the attempt budget. The budget is **per
//! outermost call**, not per scope: each call of an annotated fn that no
//! other annotated fn encloses starts a fresh one, which the retry loops
//! nested under it share (a provider's attempts and its transport's, all
//! counted). A scope in which the task makes five provider calls gives each
//! of them the whole budget. By default it is 9 (the ADR's 3 × 3), raised
//! for a loop that allows more attempts by itself, so that it only ever
//! stops loops from multiplying; a `budget:` the task sets always holds.
//!
//! ```
//! use nika_retry::task::{scope, TaskPolicy};
//! use nika_retry::{retry, Classify, Layer, RetryConfig, TimeoutError};
//!
//! #[derive(Debug, thiserror::Error, Classify)]
//! enum ToolError {
//!     #[error("tool busy")]
//!     #[category(transient)]
//!     Busy,
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Timeout(#[from] TimeoutError),
//! }
//!
//! #[retry(layer = "tool")]
//! async fn run_tool(tries: &std::sync::atomic::AtomicU32) -> Result<u32, ToolError> {
//!     let n = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
//!     if n < 3 { Err(ToolError::Busy) } else { Ok(n) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tries = std::sync::atomic::AtomicU32::new(0);
//! // Alone, a tool fn makes one attempt.
//! assert!(run_tool(&tries).await.is_err());
//!
//! // The task opts in with its retry: block.
//! let retry = RetryConfig::for_layer(Layer::Task).with_max_attempts(3)?;
//! let tries = std::sync::atomic::AtomicU32::new(0);
//! let n = scope(TaskPolicy::new().with_retry(retry), run_tool(&tries)).await?;
//! assert_eq!(n, 3);
//! # Ok(())
//! # }
//! ```
//!
//! # Across `tokio::spawn`
//!
//! The scope is carried by the future it wraps, so it follows that future
//! across `.await`s and worker threads, but a task started with
//! `tokio::spawn` inside it starts without one. Wrap what you spawn in
//! [`carry`] to keep the task's policy and observers; the spawned work gets
//! its own attempt budget.

use core::future::Future;
use core::num::NonZeroU32;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use crate::ambient::{self, Policy, Scoped};
use crate::events::{RetryObserver, observers};
use crate::time::{TimeLimited, Total};
use crate::vocab::bucket::TokenBucket;
pub use crate::vocab::config::DEFAULT_BUDGET;
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;
pub use crate::vocab::policy::TaskPolicy;
use crate::vocab::timeout_error::TimeoutError;

/// What the task policy in force says to a call of one layer.
pub(crate) struct ScopeForLayer {
    /// The budget the task set, if it did.
    pub(crate) budget: Option<u32>,
    /// The token bucket of the layer.
    pub(crate) bucket: Option<TokenBucket>,
    /// The `max_attempts` of the task's `retry:`, if it applies to the layer.
    pub(crate) max_attempts: Option<NonZeroU32>,
}

impl ScopeForLayer {
    /// No task policy.
    pub(crate) const NONE: ScopeForLayer = ScopeForLayer {
        budget: None,
        bucket: None,
        max_attempts: None,
    };
}

/// What the task policy in force says to a call of `layer`.
#[cold]
pub(crate) fn in_force(layer: Layer) -> ScopeForLayer {
    ambient::with_policy(|policy| {
        let Some(policy) = policy else {
            return ScopeForLayer::NONE;
        };
        ScopeForLayer {
            budget: policy.budget,
            bucket: policy.token_bucket(layer).cloned(),
            max_attempts: (layer != Layer::Http)
                .then_some(policy.retry.as_ref())
                .flatten()
                .map(RetryConfig::attempts),
        }
    })
}

/// The task's `retry:` for a loop of `layer`, if one is in force. L1 is set
/// per request: the task's `retry:` never reaches it.
pub(crate) fn retry_in_force(layer: Layer) -> Option<RetryConfig> {
    if layer == Layer::Http {
        return None;
    }
    ambient::with_policy(|p| p.and_then(|p| p.retry.clone()))
}

/// Runs `fut`, a task's work, with `policy` in force.
///
/// Scopes nest (the innermost wins) and follow `fut` across `.await`s. The
/// policy's `timeout:` bounds the whole of `fut`; its expiry is a
/// [`TimeoutError`] of boundary `Total` at layer `task`.
///
/// The policy's attempt budget is not shared by the whole of `fut`: it
/// bounds each outermost annotated call in it (with the loops nested under
/// that call), and the next call starts afresh.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use nika_retry::task::{scope, TaskPolicy};
/// use nika_retry::{retry, Classify, Layer, RetryConfig, TimeoutError};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum Error {
///     #[error("busy")]
///     #[category(transient)]
///     Busy,
///     #[error(transparent)]
///     #[category(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// static ATTEMPTS: AtomicU32 = AtomicU32::new(0);
///
/// /// Always busy: each call makes every attempt it is allowed.
/// #[retry(layer = "provider")]
/// async fn complete() -> Result<(), Error> {
///     ATTEMPTS.fetch_add(1, Ordering::SeqCst);
///     Err(Error::Busy)
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // 5 attempts allowed, a budget of 2.
/// let retry = RetryConfig::for_layer(Layer::Provider).with_max_attempts(5)?;
/// let task = TaskPolicy::new().with_retry(retry).with_budget(2);
/// scope(task, async {
///     for _ in 0..3 {
///         assert!(complete().await.is_err());
///     }
///     Ok::<(), Error>(())
/// })
/// .await?;
/// // 2 attempts for each of the 3 calls, not 2 for the whole task.
/// assert_eq!(ATTEMPTS.load(Ordering::SeqCst), 6);
/// # Ok(())
/// # }
/// ```
pub fn scope<F, T, E>(policy: TaskPolicy, fut: F) -> TaskScope<F, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<TimeoutError>,
{
    let deadline = Total::from_now(policy.timeout);
    TaskScope {
        inner: TimeLimited::new(Scoped::new(Some(policy), fut), Layer::Task),
        deadline,
        _error: core::marker::PhantomData,
    }
}

pin_project_lite::pin_project! {
    /// The future [`scope`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct TaskScope<F, E> {
        #[pin]
        inner: TimeLimited<Scoped<Policy, F>>,
        deadline: Option<Total>,
        _error: core::marker::PhantomData<fn() -> E>,
    }
}

impl<F, T, E> Future for TaskScope<F, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<TimeoutError>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        this.inner
            .poll_with(cx, this.deadline, &mut None, core::convert::identity, |e| {
                Err(E::from(e))
            })
    }
}

/// Wraps `fut` so that it runs with the task policy and the event observers
/// in force where `carry` is called: for work handed to `tokio::spawn`.
///
/// ```
/// use nika_retry::task::{carry, scope, TaskPolicy};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let policy = TaskPolicy::new().with_budget(4);
/// let out: Result<u32, nika_retry::TimeoutError> = scope(policy, async {
///     let handle = tokio::spawn(carry(async { Ok::<u32, nika_retry::TimeoutError>(7) }));
///     handle.await.unwrap()
/// })
/// .await;
/// assert_eq!(out.unwrap(), 7);
/// # }
/// ```
pub fn carry<F: Future>(fut: F) -> Carried<F> {
    Carried {
        inner: Scoped::new(current(), fut),
        observers: observers::current(),
    }
}

/// The task policy in force on this thread right now (for tests and diagnostics).
pub fn current() -> Option<TaskPolicy> {
    ambient::with_policy(|p| p.cloned())
}

pin_project_lite::pin_project! {
    /// The future [`carry`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct Carried<F> {
        #[pin]
        inner: Scoped<Policy, F>,
        observers: Vec<Arc<dyn RetryObserver>>,
    }
}

impl<F: Future> Future for Carried<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let inner = this.inner;
        observers::with_observers(this.observers, || inner.poll(cx))
    }
}
