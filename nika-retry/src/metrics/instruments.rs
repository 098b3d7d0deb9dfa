//! [`Instruments`]: the instruments of the crate, made once from a meter,
//! and the process's, made from the meter provider given to
//! [`use_meter_provider`](super::use_meter_provider), or else from the
//! global one when a call first records. The one process global of the
//! crate outside `ambient/`: made once, then only read, and read by
//! `metrics` alone.

use std::sync::OnceLock;

use opentelemetry::InstrumentationScope;
use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider};

use super::names;

/// Each instrument [`metrics`](super) records, from one meter of scope
/// `nika_retry`.
pub(crate) struct Instruments {
    pub(crate) call_duration: Histogram<f64>,
    pub(crate) call_attempts: Histogram<u64>,
    pub(crate) retry_delay: Histogram<f64>,
    pub(crate) upstream_wait: Histogram<f64>,
    pub(crate) pushbacks: Counter<u64>,
    pub(crate) first_chunk: Histogram<f64>,
    pub(crate) resumes: Counter<u64>,
}

/// Seconds, from 5 ms to 5 min: a call that retried or waited at a held
/// upstream lasts minutes, a call that did not a few milliseconds.
const SECONDS: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// Attempts per call, as gRPC A96's `grpc.client.call.retries`: 1 to 5,
/// then more.
const ATTEMPTS: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];

/// The semantic conventions' advice for `gen_ai.client.operation.time_to_first_chunk`.
const FIRST_CHUNK: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

impl Instruments {
    /// The instruments of a meter of `provider`, scope `nika_retry` at this
    /// crate's version.
    pub(crate) fn of<P: MeterProvider + ?Sized>(provider: &P) -> Instruments {
        let scope = InstrumentationScope::builder("nika_retry")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Instruments::from_meter(&provider.meter_with_scope(scope))
    }

    /// The instruments of the global meter provider (in this crate's unit
    /// tests, of the tests' provider, which no test can race to replace).
    pub(crate) fn default_provider() -> Instruments {
        #[cfg(not(test))]
        return Instruments::of(&*opentelemetry::global::meter_provider());
        #[cfg(test)]
        return Instruments::of(super::tests::provider());
    }

    fn from_meter(meter: &Meter) -> Instruments {
        let seconds = |name: &'static str, description: &'static str, buckets: &[f64]| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(buckets.to_vec())
                .build()
        };
        Instruments {
            call_duration: seconds(
                names::CALL_DURATION,
                "Duration of a call of an annotated fn or an adapter's request, its retries and waits included",
                &SECONDS,
            ),
            call_attempts: meter
                .u64_histogram(names::CALL_ATTEMPTS)
                .with_unit("{attempt}")
                .with_description("Attempts a call made")
                .with_boundaries(ATTEMPTS.to_vec())
                .build(),
            retry_delay: seconds(
                names::RETRY_DELAY,
                "Time a call had no attempt in flight: its backoff sleeps and its waits at its upstream",
                &SECONDS,
            ),
            upstream_wait: seconds(
                names::UPSTREAM_WAIT_DURATION,
                "Time an attempt waited at its shared upstream before it started",
                &SECONDS,
            ),
            pushbacks: meter
                .u64_counter(names::UPSTREAM_PUSHBACKS)
                .with_unit("{pushback}")
                .with_description(
                    "Times an upstream pushed back: attempts it refused, holds it asked for",
                )
                .build(),
            first_chunk: seconds(
                names::TIME_TO_FIRST_CHUNK,
                "Time from the start of a call to the first content of its streamed response",
                &FIRST_CHUNK,
            ),
            resumes: meter
                .u64_counter(names::STREAM_RESUMES)
                .with_unit("{resume}")
                .with_description("Resumes of streamed responses cut after their content")
                .build(),
        }
    }
}

/// The process's instruments, made once.
static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// The instruments, made from the global meter provider if none was given.
#[inline]
pub(crate) fn instruments() -> &'static Instruments {
    INSTRUMENTS.get_or_init(Instruments::default_provider)
}

/// Makes the instruments with `make`, unless they are made already: then
/// `false`.
pub(crate) fn install(make: impl FnOnce() -> Instruments) -> bool {
    let mut installed = false;
    INSTRUMENTS.get_or_init(|| {
        installed = true;
        make()
    });
    installed
}
