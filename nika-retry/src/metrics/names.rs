//! The names of the instruments and of their attributes:
//! `docs/observability.md` lists each with its unit.

/// `nika_retry.call.duration` (histogram, `s`): one call, from its start to
/// the result it returns, its attempts, backoff sleeps and waits at its
/// upstream included. Attributes: [`LAYER`], [`OPERATION`], [`OUTCOME`],
/// and [`ERROR_TYPE`] when it failed.
///
/// ```
/// assert_eq!(nika_retry::metrics::CALL_DURATION, "nika_retry.call.duration");
/// ```
pub const CALL_DURATION: &str = "nika_retry.call.duration";

/// `nika_retry.call.attempts` (histogram, `{attempt}`, buckets 1 to 5 as
/// gRPC A96's): the attempts one call made. Attributes as
/// [`CALL_DURATION`]'s.
///
/// ```
/// assert_eq!(nika_retry::metrics::CALL_ATTEMPTS, "nika_retry.call.attempts");
/// ```
pub const CALL_ATTEMPTS: &str = "nika_retry.call.attempts";

/// `nika_retry.retry.delay` (histogram, `s`): the time one call had no
/// attempt in flight, its backoff sleeps and its waits at its upstream
/// included, as gRPC A96's `grpc.client.call.retry_delay`; recorded for a
/// call that had any (one that retried or waited). Attributes as
/// [`CALL_DURATION`]'s.
///
/// ```
/// assert_eq!(nika_retry::metrics::RETRY_DELAY, "nika_retry.retry.delay");
/// ```
pub const RETRY_DELAY: &str = "nika_retry.retry.delay";

/// `nika_retry.upstream.wait.duration` (histogram, `s`): one wait of an
/// attempt at its shared upstream before it started. Attributes:
/// [`UPSTREAM_NAME`], [`WAIT_REASON`].
///
/// ```
/// assert_eq!(nika_retry::metrics::UPSTREAM_WAIT_DURATION, "nika_retry.upstream.wait.duration");
/// ```
pub const UPSTREAM_WAIT_DURATION: &str = "nika_retry.upstream.wait.duration";

/// `nika_retry.upstream.pushbacks` (counter, `{pushback}`): each time an
/// upstream pushed back, counted once: an attempt through it that the
/// server refused (a 429, or a failure with a `Retry-After`: the hold it
/// causes is not counted again), or a hold for another reason (rate-limit
/// headers saying nothing is left, the breaker opening, a hold by hand),
/// each time one starts or grows. Attributes: [`UPSTREAM_NAME`],
/// [`PUSHBACK_REASON`].
///
/// ```
/// assert_eq!(nika_retry::metrics::UPSTREAM_PUSHBACKS, "nika_retry.upstream.pushbacks");
/// ```
pub const UPSTREAM_PUSHBACKS: &str = "nika_retry.upstream.pushbacks";

/// `gen_ai.client.operation.time_to_first_chunk` (histogram, `s`, the
/// semantic conventions' name and buckets): from the start of the call to
/// the first content of a [`Started`](crate::stream::Started) stream,
/// retries included. Attributes: [`LAYER`] and [`OPERATION`] of the
/// annotated fn the stream was awaited in (none outside one).
///
/// ```
/// assert_eq!(
///     nika_retry::metrics::TIME_TO_FIRST_CHUNK,
///     "gen_ai.client.operation.time_to_first_chunk"
/// );
/// ```
pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";

/// `nika_retry.stream.resumes` (counter, `{resume}`): each resume of a
/// [`Started`](crate::stream::Started) stream cut after its content
/// ([`Started::resume_with`](crate::stream::Started::resume_with)), as its
/// call decides it. Attributes: [`LAYER`] and [`OPERATION`] of the annotated
/// fn that opened the stream.
///
/// ```
/// assert_eq!(nika_retry::metrics::STREAM_RESUMES, "nika_retry.stream.resumes");
/// ```
pub const STREAM_RESUMES: &str = "nika_retry.stream.resumes";

/// Attribute `nika_retry.layer`: `http`, `provider`, `tool` or `task`.
///
/// ```
/// assert_eq!(nika_retry::metrics::LAYER, "nika_retry.layer");
/// ```
pub const LAYER: &str = "nika_retry.layer";

/// Attribute `nika_retry.operation`: the annotated fn's `module::path::fn`,
/// or the adapter's (`nika_retry::tower::RetryLayer`,
/// `nika_retry::reqwest_middleware::Retry`).
///
/// ```
/// assert_eq!(nika_retry::metrics::OPERATION, "nika_retry.operation");
/// ```
pub const OPERATION: &str = "nika_retry.operation";

/// Attribute `nika_retry.outcome`: how the call ended. `success` (its
/// first attempt succeeded), `recovered` (a later one did), `gave_up`,
/// `budget_exhausted` (as the call's last [`RetryEvent`](crate::events::RetryEvent)
/// says), or `held` (its upstream was held longer than it waits, and it
/// returned [`Held`](crate::upstream::Held) without an attempt).
///
/// ```
/// assert_eq!(nika_retry::metrics::OUTCOME, "nika_retry.outcome");
/// ```
pub const OUTCOME: &str = "nika_retry.outcome";

/// Attribute `error.type` (the semantic conventions'), on a call that
/// failed: the category of its last error (`transient`, `rate_limited`,
/// `auth`, `not_found`, `permanent`), or `held`.
///
/// ```
/// assert_eq!(nika_retry::metrics::ERROR_TYPE, "error.type");
/// ```
pub const ERROR_TYPE: &str = "error.type";

/// Attribute `nika_retry.upstream.name`: the name the
/// [`Upstream`](crate::upstream::Upstream) was given.
///
/// ```
/// assert_eq!(nika_retry::metrics::UPSTREAM_NAME, "nika_retry.upstream.name");
/// ```
pub const UPSTREAM_NAME: &str = "nika_retry.upstream.name";

/// Attribute `nika_retry.wait.reason`: why an attempt waited at its
/// upstream, `held`, `paced` or `cold_start`
/// ([`WaitReason`](crate::events::WaitReason)).
///
/// ```
/// assert_eq!(nika_retry::metrics::WAIT_REASON, "nika_retry.wait.reason");
/// ```
pub const WAIT_REASON: &str = "nika_retry.wait.reason";

/// Attribute `nika_retry.pushback.reason`: `rate_limited` (an attempt
/// refused as rate limited: a 429), `server_hint` (another failure that
/// carried the server's `Retry-After`: a 503), `rate_limit_headers`,
/// `breaker` or `by_hand` (a hold for that
/// [`HoldReason`](crate::upstream::HoldReason)).
///
/// ```
/// assert_eq!(nika_retry::metrics::PUSHBACK_REASON, "nika_retry.pushback.reason");
/// ```
pub const PUSHBACK_REASON: &str = "nika_retry.pushback.reason";
