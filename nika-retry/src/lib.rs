//! Layer-aware retries and timeouts for async Rust, checked at compile time.
//!
//! Annotate one attempt; the macros generate the retry loop, the sleeps and
//! the timeouts, with the policy of the fn's layer. The layer rules are the
//! nika engine's ADR-019, the design decision that gave each layer the
//! retries and time limits of its own failure mode: the http transport
//! retries connection failures and 5xx, the provider 5xx and 429 (waiting
//! out the server's hint), a tool nothing unless its task opts in:
//!
//! ```
//! use std::time::Duration;
//! use nika_retry::{retry, timeout, Classify, TimeoutError};
//!
//! #[derive(Debug, thiserror::Error, Classify)]
//! pub enum ProviderError {
//!     #[error("rate limited")]
//!     #[category(rate_limited, retry_after_ms = retry_after_ms)]
//!     RateLimited { retry_after_ms: Option<u64> },
//!     /// A 503 may carry a `Retry-After` too: keep it, so that the layer
//!     /// above still waits it when the http layer gave up on it.
//!     #[error("api error {status}: {message}")]
//!     #[category(http_status = status, retry_after = retry_after)]
//!     Api { status: u16, message: String, retry_after: Option<Duration> },
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Timeout(#[from] TimeoutError),
//! }
//!
//! struct Client;
//!
//! impl Client {
//!     /// One attempt; 5xx and 429 are retried 3 times in all, 1 s then 4 s apart
//!     /// (or as long as the server's hint says). Not streamed, the answer comes
//!     /// whole once generated: `attempt` bounds that (a `read` would cut a long one).
//!     #[retry(layer = "provider")]
//!     #[timeout(attempt = "10m")]
//!     pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
//!         Ok(format!("echo: {prompt}"))
//!     }
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! assert_eq!(Client.complete("hi").await.unwrap(), "echo: hi");
//! # }
//! ```
//!
//! The compiler refuses a policy that breaks the layer rules:
//!
//! ```compile_fail
//! # use nika_retry::retry;
//! # #[derive(Debug)] struct ToolError;
//! # impl nika_retry::Classify for ToolError { fn category(&self) -> nika_retry::ErrorCategory { nika_retry::ErrorCategory::Permanent } }
//! // error: layer `tool` never retries by itself: tool failures are semantic …
//! #[retry(layer = "tool", attempts = 3)]
//! async fn run_tool() -> Result<(), ToolError> { Ok(()) }
//! ```
//!
//! # The layers
//!
//! | layer | attempts | backoff before attempts 2, 3 | retries | timeouts |
//! |---|---|---|---|---|
//! | `http` | 3 | 250 ms, 1 s (×4, cap 4 s), 50 % jitter | Transient | connect 10 s, read 120 s with a bare `#[timeout]` |
//! | `provider` | 3 | 1 s, 4 s (×4, cap 16 s), 50 % jitter | Transient, RateLimited | — |
//! | `tool` | 1 | — | nothing unless the task opts in | per call |
//! | `task` | 1 | — | the task's `retry:` block | the task's `timeout:` |
//!
//! `max_attempts` counts every attempt, so "3 attempts" sleeps twice. A
//! server hint (`Retry-After`, `retry_after_ms`) replaces the backoff; one
//! above `max_retry_after` (30 s for http, 60 s for the others) makes the
//! call give up at once rather than sleep on it.
//!
//! # Pieces
//!
//! - [`macro@retry`], [`macro@timeout`] and [`derive@Classify`]: the macros.
//! - [`ErrorCategory`], [`Classify`], [`Reached`], [`Layer`], [`RetryConfig`], [`TimeoutError`]: the vocabulary.
//! - [`engine`]: the decision state machine the generated loops drive, usable by hand.
//! - [`http`]: status classification and `Retry-After` parsing.
//! - [`connect`]: the connect boundary of a `#[timeout(connect = …)]` fn.
//! - [`stream`]: a streamed response, retried only before its first content, `read` and `total` followed past the fn's return.
//! - [`task`]: a workflow task's `retry:` and `timeout:` in force, and the attempt budget.
//! - [`events`]: every decision, tagged with its layer, to `tracing` and to observers.
//! - `metrics` (feature `opentelemetry`): calls, attempts, retry delays, waits at an upstream,
//!   its pushbacks and streams' time to first chunk, as OpenTelemetry instruments.
//! - [`upstream`]: the state calls against one upstream limit share: one 429 holds them all
//!   (with feature `redis`, all the worker processes of a fleet: `RedisStore`).
//! - [`TokenBucket`]: an opt-in retry quota shared across calls of a layer.
//! - `tower` (feature `tower`): `RetryLayer`, the policy of a layer for any tower service.
//! - `reqwest_middleware` (feature `reqwest-middleware`): the policy of a layer for a
//!   `reqwest_middleware` client, from the same engine.
//! - [`current_attempt`]: the attempt and the call's idempotency key, from inside the body.
//!
//! # Public structs
//!
//! One rule, so that a field added in a later release breaks no code:
//! every public struct of this crate with a public field is
//! `#[non_exhaustive]`. Read its fields freely; build it with what the
//! crate gives for it: a constructor ([`engine::Failure::new`]), a constant
//! and its `with_*` setters ([`engine::Limits::NONE`]`.with_time_left(…)`,
//! [`RetryConfig::for_layer`]`(…).with_max_attempts(…)`). A change that
//! breaks public API anyway raises the version, and `CHANGELOG.md` says
//! what to change.
// # The kernel, for a maintainer
//
// Modules by floor, from the ground up, each importing only from its own
// floor and the floors below: no import runs back up. `tests/map.rs` holds
// the floors, and reads every `crate::` path of the sources outside
// comments and test code against them (a new import that runs back up
// fails it). No module takes a name through this file's re-exports, nor
// imports `__private`; every thread-local and every static that changes is
// in `ambient/`, but two that stand beside the module they serve, so that
// no import runs back up (the observer stack, `events/observers.rs`, which
// the public `events::observe` fills, a floor below `ambient/`; the
// upstream in force, `upstream/handle.rs`'s `in_force`, beside the handle of
// `upstream/`, a floor above), and the instruments `metrics` makes once
// per process (`metrics/instruments.rs`; the same test). Within a module,
// files may import each other and through their `mod.rs`.
//
// - `vocab/`, the ground: `category`, `layer` (with the layer rule,
//   `Layer::may_nest_in`), `reached`, `timeout_error`, `classify`,
//   `config`, `key`, `bucket`, `policy` (a task's keys, read by
//   `serde_impl`, described by `schema_impl`: its serde attributes name
//   them, so both stand on this floor, with `schema` and `tonic_impl`),
//   `site` (an annotated fn's `const`). This file re-exports them.
// - `engine/`: decisions. `Failure` and `Limits` in (the deadline, the
//   budget, the bucket, idempotence, opt-in), the whole verdict out
//   (`RetryState::decide`: `Decision`, its `GiveUp`, its `Outcome` and
//   the `Level` of its event, decided with it: `Decision::level`),
//   `backoff`. No clock and no future; its one side effects are the
//   bucket's charge it is given and the jitter's draws from fastrand's
//   thread generator (listed in `ambient`'s table, with the others).
// - `time/`: spans in 8 bytes (`Nanos`, `Span`), saturating instants
//   (`later`, `from_now`), the call's `Total`, and `TimeLimited`, a future
//   under `attempt`/`connect`, `read` and `total`. Knows no call.
// - `events/`: what a decision looks like outside: `RetryEvent`,
//   `UpstreamEvent` (and its `HoldReason`), `RetryObserver`, the
//   `EventLog`, their `tracing` lines; the observer stack on the thread,
//   `observe`, and what is sent to it (`observers`: `listening`, `emit`,
//   `emit_upstream`).
// - `metrics/` (the public module with feature `opentelemetry`): the
//   instruments' names (`names`), the instruments made from a meter
//   (`instruments`), and what the runtime records where it decides
//   (`record`: a call's end and its time with no attempt in flight, a wait
//   at an upstream, a pushback, a stream's first chunk), called from
//   `run/`, `stream/` and `upstream/mod.rs` (a pushback); without the
//   feature, `off.rs`: the same names,
//   doing nothing, empty types. Those callers take the hooks through
//   `metrics/mod.rs`, which picks `record` or `off` by the feature.
// - `ambient/`: the thread-locals and process globals of the crate (but
//   the two beside the modules they serve, and `metrics`' instruments):
//   what is in force during one poll, put in and taken back by one guard
//   (`Swap`) or, for a call's own poll, one exchange (`exchange`: the
//   attempt's word, `AttemptSlot`, and the outermost call's `Budget`,
//   installed and restored on each poll; what a failing call reads around
//   it, and the retry it charges the budget); the layer-violation reports
//   waiting for their outer call (`violations`); the connect lists
//   (`connect`). Its module docs list every one of the crate's: what, who
//   writes it, when.
// - `connect`, `task`, `attempt`: the boundaries a body uses
//   (`connect()`, `scope`, `current_attempt`), each reading or putting its
//   piece of `ambient`.
// - `http/`: status and header classification, `Retry-After` and rate-limit
//   parsing, and the reqwest connector over `connect`.
// - `upstream/`: the state calls against one upstream share, as gates.
//   `mod.rs` holds the one `impl Upstream`: its builders, `observe`, and
//   the interface `run/` and `adapter/` call (`admit`, the admission that
//   does not wait, whole; `wait`; `settle`);
//   `handle`: the `Upstream` type and `Gates`, the gates' state, beneath
//   the rest, with the public data of the limits (`Quota`, the snapshot)
//   and `in_force`, the upstream in force (a thread-local holding a
//   handle) for `upstream::current()`; `hold`: the hold gate (holds, the
//   probe, the breaker, `Held`, how long a call may wait); the pace gate:
//   `pace` (an attempt's `Reservation`, the paced waiters' queue and its
//   head's wait, the cold start's scout and what responses teach the
//   pacer), `pacer` (its state, an admission of every dimension, what a
//   started attempt charged it, what responses say of a window and of
//   the server's clock), `bucket` a dimension's GCRA bucket, or the log
//   kept when its server counts by window; `adapt`: the adapt gate (the
//   cold start's rounds after a scout that heard nothing, and the
//   adaptive rate); its stores (`store`, the `Store` trait and the
//   in-process store; `redis/`: `scripts` the hold, allowance and probe,
//   `buckets` the fleet's pacing buckets, `lent` the leases given back on
//   drop, `health`); `fleet`: the fleet gate, an attempt's hold, probe's
//   lease and pace at a store.
// - `run/`: what generated code drives: `Overrides`, which makes the fn's
//   `Site`; `Call<D>` (`state.rs`, beneath the rest of the folder) and its
//   one `impl` (`call.rs`: every step generated code and `adapter::drive`
//   call: `new`, `attempt`, `timed`, `wait_at`, `said_idempotent`, `next`,
//   `next_after`), `D` its time limits' share
//   (`Untimed`, or `Timing` for `TimedCall`, with `Timed`, an attempt under
//   them: `timed.rs`), the rest a `CallState` it derefs to, whose cold
//   paths compile once: each poll of an attempt (`poll.rs`: `Attempt`, the
//   attempt put in force) and what the call does after a failed attempt
//   (`after.rs`: the verdict applied, `sleep`); `Once` (`#[timeout]` alone); a call's `AtUpstream`
//   (its `Reservation`, admitted, waited for and settled; its cost, its wait
//   and why) and `WithUpstream` (the upstream in force
//   while an attempt is polled); the
//   layer-violation report; and the bound traits whose `on_unimplemented`
//   messages the user sees.
// - `stream/`: the boundary a body awaits its stream at (`started`),
//   reading and putting its piece of `ambient`, and the `Started` stream
//   it returns; one that resumes after its content (`resumer.rs`: where
//   its call stood, `ResumePoint`, and `resume`) drives the resume's
//   attempts through `run/`'s call, as the fn's were: so it stands above
//   `run/`.
// - `adapter/`: what the `tower` layer and the `reqwest_middleware`
//   middleware share: their options (`Options`, `Timeouts`) and `drive`,
//   the loop that runs a request's attempts through `run/`'s calls (the
//   expansion of `#[retry(upstream = …)]` beside `#[timeout]`), a
//   response judged as `http::classify_response` does (`judge`).
// - `tower/` (feature `tower`): `RetryLayer`, `RetryService` and its
//   `ResponseFuture` over `adapter::drive`, and the `Protocol` that says
//   how a request is replayed and a response read.
// - `reqwest_middleware/` (feature `reqwest-middleware`): `Retry`, the
//   middleware over `adapter::drive` (a request's copy by `try_clone`, each
//   attempt with its own copy of the extensions), and `Classify` for the
//   middleware stack's error (`classify.rs`).
// - `private/` (`__private`): re-exports for generated code, and the
//   derive's helpers; nothing inside the crate imports it.
//
// ## One failed attempt
//
// From the generated loop's failed attempt to the start of its next one
// (`#[retry]` alone), file by file: the steps that decide, each named by
// its file and fn. What the steps call on their way and is not named here
// (the slot's bits, `Budget`'s arithmetic, the getters: after the list) a
// count of the files entered counts too: `bash benches/files_entered.sh`
// counts every file and entry (15 files today; BENCHMARKS.md, "Files a
// failed attempt enters").
//
// 1. `run/poll.rs`: generated code awaits `call.attempt(async { body })`
//    (`run/call.rs`). Each poll (`Attempt::poll`) builds the attempt's slot
//    (`CallState::enter`) and
// 2. `ambient/exchange.rs` puts it in force (`install`, one access in; on
//    the call's first poll `install_first`, which reads in the same access
//    what is around the call: whether it owns the budget, whether a task
//    policy is in force or it breaks the layer rule, and then
//    `CallState::resolve` reads those first, `exchange::around`, the rare path).
//    The body is polled and fails; the guard's drop puts the outer attempt
//    back (`restore`, one access out; loops nested in the poll that broke
//    the layer rule go to `run::violation::report`, the rare path).
// 3. `run/call.rs`: generated code calls `call.next(&result, config,
//    self_type)` (`next_after` with an upstream, which then settles the
//    turn). `result.error()` (`RetryResult`, in `run/after.rs`), then
// 4. `engine/mod.rs`: `Failure::of` classifies the error (`Classify`).
//    `run/after.rs`'s `failed` reads the clock once and
// 5. `ambient/exchange.rs` what is around the call, in one access
//    (`around_failure`: the budget in force, the idempotence of the
//    attempt around it, whether a task policy is in force: only then is
//    the policy's `retry:` looked up, in `task.rs`). It resolves the
//    config (task scope → `config = …` → site) and asks
// 6. `engine/mod.rs` (its second entry) for the whole verdict
//    (`RetryState::decide`: the bucket charged, `NotOptedIn`, the budget,
//    idempotence), whose delay is
// 7. `engine/backoff.rs`'s `backoff`, jittered. `after.rs` applies the
//    verdict: a retry is charged to the budget by
// 8. `ambient/exchange.rs`'s `charge` (the call's own, or the one in
//    force); the event is built only if
// 9. `events/observers.rs` says anyone listens at the level the verdict
//    gave it (`listening`, `emit`);
//    `next` returns the instant to retry at.
// 10. Generated code sleeps until it (`sleep`: `run/after.rs`'s second
//    entry) and loops to 1.
//
// With `#[timeout]`, `call.timed(limits, async { body }, from_timeout)`
// (`run/timed.rs`) takes the place of 1: `connect::poll_under` puts the
// connect limit in force around the poll (`ambient::Connect`), and
// `TimeLimited::poll_with` (`time/limited.rs`) polls the body under its
// limits; an expiry becomes the fn's error through `FromTimeout`. What a
// failure reads on its way but does not enter is values: the slot's bits
// and `Budget`'s arithmetic (`ambient/exchange.rs`), the getters of `RetryConfig`,
// `ErrorCategory` and `Reached` (`vocab/`), `Decision::outcome` and
// `Decision::level` (`engine/verdict.rs`), `time::later`, the call's
// `Deadline` (`run/state.rs`).
//
// ## One stream item
//
// 1. In the body, `stream::started(s).await` (`stream/starting.rs`) looks up
//    the frame of the innermost fn (`ambient::stream_frame`). A call that has
//    not put one in force is asked (a bit in its attempt slot): the stream
//    wakes itself and, from its next poll, the call swaps its `StreamFrame`
//    in (`ambient::Frame`). `#[timeout]` alone, which has no slot, lends
//    itself the one in force for its poll (`ambient::AloneMark`) and, once
//    asked, swaps its own frame in (`ambient::OnceFrame`). A fn whose return
//    type names `Started` has its frame in force from the first poll.
// 2. Items before the first content are held; an `Err` fails the attempt.
// 3. `Started` (`stream/started.rs`) replays the held items, then polls the
//    stream; a ready item touches no timer; a pending one under the carried
//    limits (`stream/carried.rs`) arms or resets one timer for the earlier
//    of `read` and `total`; its expiry is one `Err(TimeoutError)`, then the end.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod adapter;
mod ambient;
mod attempt;
mod connect;
pub mod engine;
pub mod events;
pub mod http;
#[cfg(feature = "opentelemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
pub mod metrics;
// Without the feature: the runtime's hooks, each doing nothing.
#[cfg(not(feature = "opentelemetry"))]
mod metrics;
#[cfg(feature = "reqwest-middleware")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
pub mod reqwest_middleware;
mod run;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub mod schema;
#[cfg(feature = "schema")]
mod schema_impl;
#[cfg(feature = "serde")]
mod serde_impl;
pub mod stream;
pub mod task;
mod time;
#[cfg(feature = "tonic")]
mod tonic_impl;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
pub mod upstream;
mod vocab;

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "tower", feature = "reqwest-middleware")))
)]
pub use adapter::{Cost, Idempotent};
pub use attempt::{AttemptInfo, current_attempt};
pub use connect::{Connect, connect};
pub use vocab::bucket::TokenBucket;
pub use vocab::category::{CategorySet, ErrorCategory, ParseCategoryError};
pub use vocab::classify::{Classify, io_kind_category};
pub use vocab::config::{ConfigError, Growth, MAX_ATTEMPTS, RetryConfig};
pub use vocab::key::IdempotencyKey;
pub use vocab::layer::{Layer, ParseLayerError};
pub use vocab::reached::{Reached, io_kind_reached};
pub use vocab::timeout_error::{Boundary, TimeoutError};

/// The crate README's example, compiled as a doctest so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;

/// Retries an `async fn` by the policy of its layer.
///
/// ```text
/// #[retry(layer = "http" | "provider" | "tool" | "task",
///         attempts = 3, backoff = "250ms", max_backoff = "4s", multiplier = 4.0,
///         jitter = 0.5, on = [transient, rate_limited], config = EXPR, clone(arg, …),
///         upstream = EXPR, cost = EXPR, idempotent = false | EXPR, crate = "path")]
/// ```
///
/// | `#[retry]` key | takes | what it does |
/// |---|---|---|
/// | `layer` | `"http"`, `"provider"`, `"tool"` or `"task"` | required: the layer whose defaults apply |
/// | `attempts` | integer literal, 1 to 10 | attempts in all, the first included |
/// | `backoff` | duration literal (`"250ms"`) | the delay before the first retry |
/// | `max_backoff` | duration literal (`"4s"`) | the longest delay between two attempts |
/// | `multiplier` | number literal ≥ 1.0 | how much each delay grows over the one before (1.0: constant) |
/// | `jitter` | number literal, 0.0 to 1.0 | the fraction of each delay drawn at random |
/// | `on` | `[transient, rate_limited]` (either or both) | the categories that are retried |
/// | `config` | expression: `RetryConfig` or `Option<RetryConfig>` | a runtime config that replaces the literals when `Some`; evaluated when an attempt fails |
/// | `clone` | `clone(arg, …)`: arguments, `self` included | each attempt gets its own clone of these |
/// | `upstream` | expression: `Upstream`, `&Upstream`, `Option<Upstream>` or `Option<&Upstream>` | the upstream whose holds this call shares, evaluated once per call; `None`: alone |
/// | `cost` | expression: `u32` or `u64` (needs `upstream`) | what one attempt spends of the upstream's token limit (prompt tokens plus `max_tokens`), evaluated once per call; without it, the mean the upstream learned |
/// | `idempotent` | `false`, `true` or a `bool` expression | `false`: retry only what certainly had no effect, in this call and the calls nested in it; evaluated once per call |
/// | `crate` | string literal path (`"nr"`) | this crate's path where the dependency is renamed |
///
/// `layer` is required; the other keys override that layer's defaults
/// ([`RetryConfig::for_layer`]) and are checked at compile time. `config = EXPR`
/// takes a [`RetryConfig`] or `Option<RetryConfig>` at run time and, when
/// `Some`, replaces the literals; it is evaluated only when an attempt fails,
/// so the success path never builds a config. A task scope's `retry:`
/// ([`task::scope`]) takes precedence over both, except on layer `http`. The fn must return `Result<T, E>` with
/// `E: Classify`; only `Transient` and `RateLimited` errors are ever retried.
///
/// **`upstream = EXPR`** (an [`Upstream`](upstream::Upstream), a reference
/// to one): every attempt passes the upstream the calls share before it
/// starts (its holds, its pacing); the error type needs
/// `From<upstream::Held>`. **`cost = EXPR`** (a `u32` or `u64`, evaluated
/// once per call; only with `upstream`): what one attempt spends of the
/// upstream's token limit ([`upstream::Quota::tokens`]); without it, the
/// mean cost learned from the token headers.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{Held, Quota, Upstream};
/// use nika_retry::{retry, Classify};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// pub enum ProviderError {
///     #[error(transparent)]
///     #[category(transparent)]
///     Held(#[from] Held),
/// }
///
/// #[retry(layer = "provider", upstream = upstream, cost = prompt_tokens + max_tokens)]
/// async fn complete(upstream: &Upstream, prompt_tokens: u32, max_tokens: u32) -> Result<(), ProviderError> {
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let upstream = Upstream::new("openai/gpt-4o")
///     .with_quota(Quota::per(Duration::from_secs(1)).tokens(1_000));
/// let started = tokio::time::Instant::now();
/// complete(&upstream, 600, 400).await.unwrap(); // the whole bucket
/// complete(&upstream, 300, 200).await.unwrap(); // half of it refilled
/// // 500 ms, and a margin for the request's way to the server (a fortieth
/// // of the window, at most 40 ms).
/// assert_eq!(started.elapsed(), Duration::from_millis(525));
/// # }
/// ```
///
/// **`idempotent = false | EXPR`**, on any layer (`tool` included): a
/// repeated attempt could repeat an effect (a mail, a payment). The call
/// then retries only a failure whose attempt certainly had no effect
/// ([`Classify::reached`] is [`Reached::No`] or [`Reached::Refused`]) and
/// gives up at once on any other
/// ([`GiveUp::MayHaveTakenEffect`](engine::GiveUp::MayHaveTakenEffect), a
/// WARN line naming the fn), whatever a task scope's `retry:` says. An
/// expression is a `bool` evaluated once per call, as it starts. Without
/// the key a fn is idempotent, as it is when it sends
/// [`current_attempt`]'s idempotency key to a server that deduplicates on
/// it, except inside a call that is not: a call that is not idempotent
/// makes every annotated call nested in its attempts that does not say
/// `idempotent = true` not idempotent either, so the transport fn under a
/// mailer tool does not repeat a lost answer without being marked.
///
/// ```
/// use nika_retry::{retry, Classify};
///
/// #[derive(Debug, Classify)]
/// enum MailError {
///     #[category(transient, reached = no)]
///     Refused,
///     #[category(transient)] // may have arrived: Reached::Maybe
///     AnswerLost,
/// }
///
/// #[retry(layer = "provider", backoff = "1ms", idempotent = false)]
/// async fn send(tries: &std::cell::Cell<u32>, error: fn() -> MailError) -> Result<(), MailError> {
///     tries.set(tries.get() + 1);
///     Err(error())
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let tries = std::cell::Cell::new(0);
/// send(&tries, || MailError::Refused).await.unwrap_err();
/// assert_eq!(tries.get(), 3, "never sent: retried");
/// tries.set(0);
/// send(&tries, || MailError::AnswerLost).await.unwrap_err();
/// assert_eq!(tries.get(), 1, "may have been sent: not retried");
/// # }
/// ```
///
/// # Writing the body
///
/// The body runs once per attempt, as written, and means what it means in a
/// plain `async fn`: it may borrow `&self`, `&mut self` and the arguments,
/// use `?` and `return`, and every return-position coercion still works
/// (`Ok(&self.buf)` for `Result<&str, _>`, `Ok(Box::new(x))` for
/// `Result<Box<dyn Trait>, _>`, in the tail and in an early `return`), inside
/// `#[async_trait]` too.
///
/// **`clone(…)`.** Every attempt starts from the arguments as the caller
/// passed them. An argument the body moves must be listed in `clone(…)`, so
/// that each attempt gets its own clone (a `Copy` one need not be). Where
/// the macro sees the move (the argument's bare name passed to a call or
/// bound by a `let`), the compile error points at that use and says to list
/// it; a move it cannot see (inside a macro, a struct literal, a `match`)
/// gets rustc's E0382 "use of moved value … in previous iteration of loop":
/// that too is the sign to add `clone(arg)`. Once it is listed, the
/// attribute's own expressions (`idempotent`, `config`, `upstream`) read the
/// caller's argument, never the clone an attempt moved. A `mut`
/// argument must be listed too (it is a compile error otherwise: an attempt
/// would see what the one before left in it). `clone(self)` clones `self` taken by value (`self`,
/// `mut self`, `self: Arc<Self>`) for each attempt, and a name bound by a
/// destructuring argument (`(a, b): (String, u32)`) may be listed like any
/// other:
///
/// ```
/// use nika_retry::{retry, Classify};
///
/// #[derive(Debug, Classify)]
/// #[category(transient)]
/// struct Busy;
///
/// #[retry(layer = "provider", attempts = 2, backoff = "1ms", clone(body, tries))]
/// async fn send(body: String, mut tries: u32) -> Result<usize, Busy> {
///     tries += 1; // every attempt starts from the caller's `tries`
///     let owned: String = body; // moved: needs clone(body)
///     Ok(owned.len() + tries as usize)
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() { assert_eq!(send("four".into(), 0).await.unwrap(), 5); }
/// ```
///
/// ```compile_fail
/// # use nika_retry::{retry, Classify};
/// # #[derive(Debug, Classify)] #[category(transient)] struct Busy;
/// #[retry(layer = "provider")]
/// async fn count(mut n: u32) -> Result<u32, Busy> { // error: `n` is `mut`: … add clone(n)
///     n += 1;
///     Ok(n)
/// }
/// ```
///
/// **`&mut self`** is the caller's state: the attempts share it by design,
/// each borrowing it afresh; so is what a `&mut T` argument points to, and a
/// `mut` binding of a `&mut T` or `Pin<&mut T>` (`mut self: Pin<&mut Self>`,
/// to call `as_mut()`) is never refused. A fn that returns a borrow of it
/// (`-> Result<&mut Item, E>` from `&mut self`) is refused by the borrow
/// checker (E0499/E0524 "… in previous iteration of loop"), as the same loop
/// written by hand would be: retry a fn that does the fallible work and
/// returns owned data, and take the borrow after it.
///
/// **`#[tracing::instrument]`** goes below `#[retry]`: it then wraps the
/// whole call, so one span covers every attempt and the retry events.
/// Written above, it would open one span per attempt, and `#[retry]`
/// refuses it with a compile error saying so; the same for
/// `#[tokio::test]` / `#[tokio::main]` above `#[retry]`.
///
/// **Renamed attributes.** `#[retry]` and `#[timeout]` find each other as
/// `#[timeout]`, `#[nika_retry::timeout]`, or a path that starts with the
/// `crate = "…"` given on either; other crates' attributes of the same name
/// (`#[ntest::timeout(1000)]`) are left alone. Through a re-export, import
/// the attribute by name or give `crate = "my"`. Under another name
/// (`use nika_retry::timeout as t;`), write `#[t(…)]` above `#[retry]`; below
/// it is a compile error, never a second wrapper around the whole loop.
///
/// **`crate = "path"`** names this crate where the dependency is renamed
/// (`nr = { package = "nika-retry", … }` → `crate = "nr"`), as tokio's and
/// serde's attributes do; on `#[retry]` or `#[timeout]` (either serves
/// both), and as `#[category(crate = "nr")]` on a derived type.
///
/// Layer `tool` takes no retry keys: tool failures are semantic, and a task
/// opts in to retrying them from its workflow `retry:` block.
#[doc(inline)]
pub use nika_retry_macros::retry;

/// Bounds an `async fn` in time: each attempt and the whole call of a
/// `#[retry]` fn, or the one run of a fn that has no `#[retry]`.
///
/// ```text
/// #[timeout(connect = "10s", read = "120s", attempt = "30s", total = "5m" | total = EXPR,
///           layer = "…" (only without #[retry]), crate = "path")]
/// ```
///
/// | `#[timeout]` key | takes | what it does |
/// |---|---|---|
/// | `connect` | duration literal, or expression: `Duration` or `Option<Duration>` | bounds connection set-up; layer `http` |
/// | `read` | the same | bounds an attempt's inactivity; layers `http` and `provider` |
/// | `attempt` | the same | bounds each attempt's whole duration |
/// | `total` | the same | bounds the whole call, its retries and sleeps included |
/// | `layer` | `"http"`, `"provider"`, `"tool"` or `"task"` | the fn's layer, only without `#[retry]` (which names it otherwise) |
/// | `crate` | string literal path (`"nr"`) | this crate's path where the dependency is renamed |
///
/// Four limits, one meaning each:
///
/// - `read` is an **inactivity** limit, as an HTTP client's read timeout is:
///   it expires only once the attempt has gone that long without being woken
///   by anything it waits on; every wake-up restarts it. A long response that
///   keeps streaming is never cut by `read`; a stalled one is. A sibling
///   future in a `join!` beside the call does not count as its progress.
///   `http` and `provider` layers only. A call that is **not streamed** hears
///   nothing until the server has the whole answer, so there `read` bounds
///   the generation itself: see [below](#a-call-that-is-not-streamed).
/// - `attempt` bounds one attempt's whole duration (a retry gets a fresh one).
///   An expired attempt is dropped: a child process it started keeps running
///   unless it was spawned with `tokio::process::Command::kill_on_drop(true)`
///   (or in a process group you kill); see `docs/tools-and-tasks.md`.
/// - `total` bounds the whole call with its retries and sleeps (no sleep is
///   started that would end past it).
/// - `connect` bounds connection set-up: what the body wraps in [`connect`],
///   and, with feature `reqwest`, the connector of a client built with
///   `http::client_builder`. `http` layer only.
///
/// They nest: a literal `connect` ≤ `read` ≤ `attempt` ≤ `total` is checked
/// at compile time. Any other expression is a `Duration` or
/// `Option<Duration>` (`None`: no limit), evaluated as each attempt starts
/// (`total` once, as the call starts). A bare `#[timeout]` on an `http` fn
/// means connect 10 s, read 120 s.
///
/// Expiry becomes the fn's own error through `From<TimeoutError>`: per-attempt
/// expiries are transient (and retried), a `total` expiry is permanent.
/// Whether `#[timeout]` is written above or below `#[retry]` makes no difference.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{retry, timeout, Classify, TimeoutError};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum ToolError {
///     #[error(transparent)]
///     #[category(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// #[timeout(attempt = limit)]
/// #[retry(layer = "tool")]
/// async fn run(limit: Option<Duration>) -> Result<(), ToolError> {
///     tokio::time::sleep(Duration::from_secs(60)).await;
///     Ok(())
/// }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let err = run(Some(Duration::from_secs(1))).await.unwrap_err();
/// assert_eq!(err.to_string(), "attempt timeout of 1s expired (layer tool)");
/// # }
/// ```
///
/// # A call that is not streamed
///
/// A non-streamed completion gets no byte, not even its headers, until the
/// server has generated all of it: its inactivity *is* the generation time.
/// `read = "120s"` there cuts a 3-minute answer at 120 s and runs it again,
/// 3 times in a provider loop (and up to 9 requests with an http loop under
/// it). Bound such a call by the longest generation you accept, with
/// `attempt` (or a `read` that large), or stream it: then `read` is the gap
/// between two events, and a short one catches a stall without cutting a
/// long answer ([`stream::started_when`]).
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// use nika_retry::{retry, timeout, Boundary, Classify, TimeoutError};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum ProviderError {
///     #[error(transparent)]
///     #[category(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// static REQUESTS: AtomicU32 = AtomicU32::new(0);
///
/// /// A stand-in for the request: the server is silent for the 3 minutes it
/// /// takes to generate the answer, then sends it whole.
/// async fn generate() -> Result<String, ProviderError> {
///     REQUESTS.fetch_add(1, Ordering::SeqCst);
///     tokio::time::sleep(Duration::from_secs(180)).await;
///     Ok("the answer".into())
/// }
///
/// /// `read` on a call that is not streamed: the 3 minutes are a stall.
/// #[retry(layer = "provider")]
/// #[timeout(read = "120s")]
/// async fn cut() -> Result<String, ProviderError> {
///     generate().await
/// }
///
/// /// The longest generation accepted, as `attempt`.
/// #[retry(layer = "provider")]
/// #[timeout(attempt = "10m")]
/// async fn whole() -> Result<String, ProviderError> {
///     generate().await
/// }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let ProviderError::Timeout(err) = cut().await.unwrap_err();
/// assert_eq!(err.boundary(), Boundary::Read);
/// assert_eq!(REQUESTS.swap(0, Ordering::SeqCst), 3, "cut at 120 s and re-run, 3 times");
///
/// assert_eq!(whole().await.unwrap(), "the answer");
/// assert_eq!(REQUESTS.load(Ordering::SeqCst), 1);
/// # }
/// ```
///
/// # `#[timeout]` alone
///
/// Without `#[retry]`, `#[timeout(layer = "…", …)]` bounds one run of the
/// body and never retries it: for the boundaries the layer rules give no
/// retry (an agent loop's total, a tool's execution, a task). A task scope's `retry:`
/// does not apply to it; `layer` is then required (and beside a `#[retry]`,
/// which names the layer, refused). `std::io::Error` holds a timeout, so a
/// tool returning it needs no error type of its own.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{timeout, Boundary, Classify, TimeoutError};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum AgentError {
///     #[error(transparent)]
///     #[category(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// struct Limits { max_duration_secs: u64 }
///
/// impl Limits {
///     fn max_duration(&self) -> Duration {
///         Duration::from_secs(self.max_duration_secs)
///     }
/// }
///
/// struct Agent { limits: Limits }
///
/// impl Agent {
///     /// The agent loop: bounded in total, run once.
///     #[timeout(layer = "task", total = self.limits.max_duration())]
///     async fn run(&self) -> Result<u32, AgentError> {
///         loop {
///             tokio::time::sleep(Duration::from_secs(1)).await; // one turn
///         }
///     }
/// }
///
/// struct Shell { timeout: Duration }
///
/// impl Shell {
///     /// One tool call, bounded; the timeout comes back as an `io::Error`.
///     #[timeout(layer = "tool", attempt = self.timeout)]
///     async fn exec(&self, secs: u64) -> Result<u64, std::io::Error> {
///         tokio::time::sleep(Duration::from_secs(secs)).await;
///         Ok(secs)
///     }
/// }
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let agent = Agent { limits: Limits { max_duration_secs: 30 } };
/// let err = agent.run().await.unwrap_err();
/// assert_eq!(err.to_string(), "total timeout of 30s expired (layer task)");
///
/// let shell = Shell { timeout: Duration::from_secs(5) };
/// assert_eq!(shell.exec(1).await.unwrap(), 1);
/// let err = shell.exec(60).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// assert_eq!(TimeoutError::find(&err).map(|t| t.boundary()), Some(Boundary::Attempt));
/// # }
/// ```
#[doc(inline)]
pub use nika_retry_macros::timeout;

/// Derives [`Classify`](trait@Classify) from `#[category(...)]` attributes.
///
/// On each variant (or on a struct): one of `transient`, `rate_limited`,
/// `auth`, `not_found`, `permanent`; or `http_status = field` (a `u16`,
/// classified by [`http::status_category`], an `Option<u16>`, whose `None`
/// means no response and is transient, or with feature `reqwest` a
/// `StatusCode`); or `transparent` (delegate to the
/// variant's one field). A hint key adds the server's wait:
/// `retry_after = field` (`Duration` / `Option<Duration>`) or
/// `retry_after_ms = field` (`u64` / `Option<u64>`). Tuple fields are named by
/// index. `#[category(default = …)]` on the enum classifies the variants left
/// unmarked; without it, an unmarked variant is a compile error.
/// `#[category(crate = "nr")]` on the type names this crate where the
/// dependency is renamed.
///
/// | `#[category]` key | takes | what it does |
/// |---|---|---|
/// | `transient` | nothing | a failure worth another attempt (a reset, a 5xx) |
/// | `rate_limited` | nothing | the server asked to slow down (a 429): waited, then retried by the layers that retry it |
/// | `auth` | nothing | credentials refused (401, 403): never retried |
/// | `not_found` | nothing | nothing there (404): never retried |
/// | `permanent` | nothing | retrying would fail again: never retried |
/// | `transparent` | nothing | the variant's one field classifies (its `Classify`: category, hint, timeout, reached) |
/// | `http_status` | a field (`u16`, `Option<u16>`, reqwest's `StatusCode`) | the category of that status ([`http::status_category`]), and what the attempt reached (429, 503, 408: refused) |
/// | `from` | a field holding an [`ErrorCategory`] | the category decided at run time, as [`http::classify_response`](crate::http) returns it (`x-should-retry` over the status); with `http_status`, that one says only what the attempt reached |
/// | `retry_after` | a field (`Duration`, `Option<Duration>`) | the server's wait, as the least the next attempt waits |
/// | `retry_after_ms` | a field (`u64`, `Option<u64>`) | the same, in milliseconds |
/// | `reached` | `no`, `refused` or `maybe` | what the failed attempt reached, for a call that is not idempotent: `no` (never left), `refused` (turned away unacted), `maybe` |
/// | `default` | a category, on the enum | the category of the variants left unmarked |
/// | `crate` | a string, on the type | the path of this crate where the dependency is renamed |
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{Classify, ErrorCategory};
///
/// #[derive(Debug, Classify)]
/// #[category(default = permanent)]
/// enum HttpError {
///     #[category(http_status = 0, retry_after = 1)]
///     Status(u16, Option<Duration>),
///     #[category(transparent)]
///     Io(std::io::Error),
///     BadUrl,
/// }
///
/// let throttled = HttpError::Status(429, Some(Duration::from_secs(2)));
/// assert_eq!(throttled.category(), ErrorCategory::RateLimited);
/// assert_eq!(throttled.retry_after(), Some(Duration::from_secs(2)));
/// let refused = HttpError::Io(std::io::ErrorKind::ConnectionRefused.into());
/// assert_eq!(refused.category(), ErrorCategory::Transient);
/// assert_eq!(HttpError::BadUrl.category(), ErrorCategory::Permanent);
/// ```
#[doc(inline)]
pub use nika_retry_macros::Classify;
