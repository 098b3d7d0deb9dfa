//! Metrics an operator can chart (feature `opentelemetry`): every call of
//! an annotated fn and every request of the adapters (`tower`'s
//! `RetryLayer`, `reqwest_middleware`'s `Retry`) records its duration, its
//! attempts and its time with no attempt in flight; every wait at a shared
//! [`Upstream`](crate::upstream::Upstream) its duration and why; every
//! pushback of an upstream its reason; every [`Started`](crate::stream::Started)
//! stream its time to first chunk. They are recorded through the
//! OpenTelemetry API's global meter provider, or the one given to
//! [`use_meter_provider`], with a meter of scope `nika_retry`.
//!
//! | instrument | kind, unit | attributes |
//! |---|---|---|
//! | [`nika_retry.call.duration`](CALL_DURATION) | histogram, `s` | [`nika_retry.layer`](LAYER), [`nika_retry.operation`](OPERATION), [`nika_retry.outcome`](OUTCOME), [`error.type`](ERROR_TYPE) on failure |
//! | [`nika_retry.call.attempts`](CALL_ATTEMPTS) | histogram, `{attempt}`, buckets 1–5 | the same |
//! | [`nika_retry.retry.delay`](RETRY_DELAY) | histogram, `s` | the same |
//! | [`nika_retry.upstream.wait.duration`](UPSTREAM_WAIT_DURATION) | histogram, `s` | [`nika_retry.upstream.name`](UPSTREAM_NAME), [`nika_retry.wait.reason`](WAIT_REASON) |
//! | [`nika_retry.upstream.pushbacks`](UPSTREAM_PUSHBACKS) | counter, `{pushback}` | [`nika_retry.upstream.name`](UPSTREAM_NAME), [`nika_retry.pushback.reason`](PUSHBACK_REASON) |
//! | [`gen_ai.client.operation.time_to_first_chunk`](TIME_TO_FIRST_CHUNK) | histogram, `s` | [`nika_retry.layer`](LAYER), [`nika_retry.operation`](OPERATION) |
//! | [`nika_retry.stream.resumes`](STREAM_RESUMES) | counter, `{resume}` | [`nika_retry.layer`](LAYER), [`nika_retry.operation`](OPERATION) |
//!
//! Every attribute has a bounded set of values: the fns and adapters of
//! the program, the upstreams it names, and the words each constant lists.
//! The instruments are made when the first call records: set the global
//! provider before it (or give one with [`use_meter_provider`]); a
//! provider set later is not seen. A call dropped before it returns (a
//! cancelled future) records nothing; `#[timeout]` alone, which starts no
//! retry loop, records no call (its stream's first chunk it does). A
//! stream that resumes ([`Started::resume_with`](crate::stream::Started::resume_with))
//! counts each resume in `nika_retry.stream.resumes`; its call, recorded
//! when the fn returned, is recorded once more when a resume ends it (as
//! recovered, or with its failure), with the attempts it made in all.
//!
//! **Cost.** Without the feature, nothing: no clock read, no byte in a
//! call. With it, a call reads the clock when it starts and when it ends
//! and records two histograms (three if it retried or waited), without
//! allocating once the SDK has seen its attributes (BENCHMARKS.md,
//! "Metrics").
//!
//! ```
//! # // Tested with the feature (`cargo test -p nika-retry --doc` alone
//! # // builds without it, and `metrics` is then no public module).
//! # #[cfg(feature = "opentelemetry")]
//! # mod example {
//! use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
//! use nika_retry::{metrics, retry, Classify};
//!
//! #[derive(Debug, Classify)]
//! #[category(transient)]
//! struct Reset;
//!
//! #[retry(layer = "http", backoff = "100ms", jitter = 0.0)]
//! async fn fetch(fail: &std::sync::atomic::AtomicBool) -> Result<(), Reset> {
//!     if fail.swap(false, std::sync::atomic::Ordering::SeqCst) { Err(Reset) } else { Ok(()) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # pub async fn main() {
//! let exporter = InMemoryMetricExporter::default();
//! let provider = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(exporter.clone()).build())
//!     .build();
//! opentelemetry::global::set_meter_provider(provider.clone());
//!
//! // One retry, 100 ms apart: the call lasts 100 ms, in 2 attempts.
//! fetch(&std::sync::atomic::AtomicBool::new(true)).await.unwrap();
//!
//! provider.force_flush().unwrap();
//! let exported = exporter.get_finished_metrics().unwrap();
//! let names: Vec<&str> = exported[0]
//!     .scope_metrics()
//!     .flat_map(|scope| scope.metrics())
//!     .map(|metric| metric.name())
//!     .collect();
//! for name in [metrics::CALL_DURATION, metrics::CALL_ATTEMPTS, metrics::RETRY_DELAY] {
//!     assert!(names.contains(&name), "{name} in {names:?}");
//! }
//! # }
//! # }
//! # fn main() {
//! #     #[cfg(feature = "opentelemetry")]
//! #     example::main();
//! # }
//! ```

#[cfg(feature = "opentelemetry")]
pub(crate) mod instruments;
#[cfg(feature = "opentelemetry")]
mod names;
#[cfg(not(feature = "opentelemetry"))]
mod off;
#[cfg(feature = "opentelemetry")]
mod record;
#[cfg(test)]
#[cfg(feature = "opentelemetry")]
pub(crate) mod tests;

#[cfg(feature = "opentelemetry")]
pub use names::{
    CALL_ATTEMPTS, CALL_DURATION, ERROR_TYPE, LAYER, OPERATION, OUTCOME, PUSHBACK_REASON,
    RETRY_DELAY, STREAM_RESUMES, TIME_TO_FIRST_CHUNK, UPSTREAM_NAME, UPSTREAM_PUSHBACKS,
    UPSTREAM_WAIT_DURATION, WAIT_REASON,
};
#[cfg(not(feature = "opentelemetry"))]
pub(crate) use off::{CallClock, End, FirstChunk, StreamOf, held, refused, resumed, waited};
#[cfg(feature = "opentelemetry")]
pub(crate) use record::{CallClock, End, FirstChunk, StreamOf, held, refused, resumed, waited};

/// Records the crate's metrics through `provider` rather than the global
/// meter provider: call it before the first call records (a program's
/// start). The instruments are made once: if they are made already (this
/// was called before, or a call has recorded through the global provider),
/// it changes nothing and says so.
///
/// ```
/// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
///
/// let exporter = InMemoryMetricExporter::default();
/// let provider = SdkMeterProvider::builder()
///     .with_reader(PeriodicReader::builder(exporter.clone()).build())
///     .build();
/// nika_retry::metrics::use_meter_provider(&provider).unwrap();
/// // Once only.
/// let again = nika_retry::metrics::use_meter_provider(&provider).unwrap_err();
/// assert_eq!(
///     again.to_string(),
///     "nika_retry records its metrics already: give its meter provider before its first call"
/// );
/// ```
#[cfg(feature = "opentelemetry")]
pub fn use_meter_provider<P>(provider: &P) -> Result<(), AlreadyRecording>
where
    P: opentelemetry::metrics::MeterProvider + ?Sized,
{
    if instruments::install(|| instruments::Instruments::of(provider)) {
        Ok(())
    } else {
        Err(AlreadyRecording)
    }
}

/// [`use_meter_provider`] came after the instruments were made.
///
/// ```
/// use nika_retry::metrics::AlreadyRecording;
///
/// fn explain(error: AlreadyRecording) -> String {
///     error.to_string()
/// }
/// ```
#[cfg(feature = "opentelemetry")]
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("nika_retry records its metrics already: give its meter provider before its first call")]
pub struct AlreadyRecording;
