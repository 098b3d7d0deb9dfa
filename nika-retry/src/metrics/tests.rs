//! The hooks, read back through the SDK's in-memory exporter: the unit
//! tests' provider, which every call of the crate's unit tests records
//! through (so each test reads only the attributes of its own fns).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

use super::names;
use crate::events::{EventLog, Outcome, observe};
use crate::upstream::Upstream;
use crate::vocab::timeout_error::TimeoutError;
use nika_retry_macros::{Classify, retry};

struct Sdk {
    exporter: InMemoryMetricExporter,
    provider: SdkMeterProvider,
}

static SDK: LazyLock<Sdk> = LazyLock::new(|| {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    Sdk { exporter, provider }
});

/// The provider of the unit tests' instruments.
pub(crate) fn provider() -> &'static SdkMeterProvider {
    &SDK.provider
}

/// One data point: a histogram's count, sum and bucket counts, or a
/// counter's value (as `sum`, `count` 0).
#[derive(Debug, Default, PartialEq)]
struct Point {
    count: u64,
    sum: f64,
    buckets: Vec<u64>,
}

/// The point of instrument `name` whose attributes include `with`, if any.
fn point(name: &str, with: &[KeyValue]) -> Option<Point> {
    SDK.provider.force_flush().unwrap();
    let exported = SDK.exporter.get_finished_metrics().unwrap();
    let last = exported.last()?;
    let metric = last
        .scope_metrics()
        .flat_map(|scope| scope.metrics())
        .find(|metric| metric.name() == name)?;
    let has = |attributes: Vec<&KeyValue>| with.iter().all(|kv| attributes.contains(&kv));
    match metric.data() {
        AggregatedMetrics::F64(MetricData::Histogram(h)) => h
            .data_points()
            .find(|p| has(p.attributes().collect()))
            .map(|p| Point {
                count: p.count(),
                sum: p.sum(),
                buckets: p.bucket_counts().collect(),
            }),
        AggregatedMetrics::U64(MetricData::Histogram(h)) => h
            .data_points()
            .find(|p| has(p.attributes().collect()))
            .map(|p| Point {
                count: p.count(),
                sum: p.sum() as f64,
                buckets: p.bucket_counts().collect(),
            }),
        AggregatedMetrics::U64(MetricData::Sum(s)) => s
            .data_points()
            .find(|p| has(p.attributes().collect()))
            .map(|p| Point {
                count: 0,
                sum: p.value() as f64,
                buckets: Vec::new(),
            }),
        other => panic!("{name}: {other:?}"),
    }
}

fn kv(key: &'static str, value: &'static str) -> KeyValue {
    KeyValue::new(key, Value::from(value))
}

#[derive(Debug, Classify)]
#[category(transient, crate = "crate")]
struct Busy;

impl From<TimeoutError> for Busy {
    fn from(_: TimeoutError) -> Self {
        Busy
    }
}

static FLAKY: AtomicU32 = AtomicU32::new(0);

/// Fails its first attempt of every two.
#[retry(layer = "provider", backoff = "300ms", jitter = 0.0, crate = "crate")]
async fn flaky_unit() -> Result<(), Busy> {
    if FLAKY.fetch_add(1, Ordering::SeqCst) % 2 == 0 {
        Err(Busy)
    } else {
        Ok(())
    }
}

#[retry(layer = "http", backoff = "100ms", jitter = 0.0, crate = "crate")]
async fn always_busy_unit() -> Result<(), Busy> {
    Err(Busy)
}

const FLAKY_OP: &str = "nika_retry::metrics::tests::flaky_unit";
const BUSY_OP: &str = "nika_retry::metrics::tests::always_busy_unit";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_recovered_call_records_its_duration_attempts_and_delay() {
    let log = EventLog::new();
    observe(log.clone().into(), flaky_unit()).await.unwrap();
    let events = log.events();
    assert_eq!(events.len(), 2, "{events:?}");
    let at = [
        kv(names::OPERATION, FLAKY_OP),
        kv(names::OUTCOME, "recovered"),
    ];
    let duration = point(names::CALL_DURATION, &at).expect("a call duration");
    // The one retry's delay, which the event says, is the whole call on a paused clock.
    assert_eq!(events[0].delay, Some(Duration::from_millis(300)));
    assert_eq!((duration.count, duration.sum), (1, 0.3));
    let attempts = point(names::CALL_ATTEMPTS, &at).unwrap();
    assert_eq!((attempts.count, attempts.sum), (1, 2.0));
    // Buckets ≤1, ≤2, ≤3, ≤4, ≤5, more: the call is in the second.
    assert_eq!(attempts.buckets, [0, 1, 0, 0, 0, 0]);
    let delay = point(names::RETRY_DELAY, &at).unwrap();
    assert_eq!((delay.count, delay.sum), (1, 0.3));
    assert!(
        point(
            names::CALL_DURATION,
            &[
                kv(names::OPERATION, FLAKY_OP),
                kv(names::ERROR_TYPE, "transient")
            ]
        )
        .is_none(),
        "a success has no error.type"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_give_up_records_its_error_type_and_its_last_outcome() {
    let log = EventLog::new();
    observe(log.clone().into(), always_busy_unit())
        .await
        .unwrap_err();
    let last = log.events().pop().unwrap();
    assert_eq!((last.outcome, last.attempt), (Outcome::GaveUp, 3));
    let at = [
        kv(names::LAYER, "http"),
        kv(names::OPERATION, BUSY_OP),
        kv(names::OUTCOME, "gave_up"),
        kv(names::ERROR_TYPE, "transient"),
    ];
    let attempts = point(names::CALL_ATTEMPTS, &at).unwrap();
    assert_eq!((attempts.count, attempts.sum), (1, 3.0));
    // 100 ms, then 400 ms (×4): the delays its two retries' events say.
    let delays: Duration = log.events().iter().filter_map(|e| e.delay).sum();
    assert_eq!(delays, Duration::from_millis(500));
    let delay = point(names::RETRY_DELAY, &at).unwrap();
    assert_eq!(delay.sum, delays.as_secs_f64());
    let duration = point(names::CALL_DURATION, &at).unwrap();
    assert_eq!(duration.sum, delays.as_secs_f64());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hold_by_hand_is_a_pushback_and_a_hold_after_a_hint_is_not_counted_twice() {
    let upstream = Upstream::new("unit/by-hand");
    upstream.hold_for(Duration::from_secs(3));
    upstream.hold_for(Duration::from_secs(5));
    let at = |reason| {
        [
            kv(names::UPSTREAM_NAME, "unit/by-hand"),
            kv(names::PUSHBACK_REASON, reason),
        ]
    };
    // Started, then extended: two pushbacks by hand.
    assert_eq!(
        point(names::UPSTREAM_PUSHBACKS, &at("by_hand"))
            .unwrap()
            .sum,
        2.0
    );
    upstream.hold(
        Duration::from_secs(9),
        crate::upstream::HoldReason::ServerHint,
    );
    assert_eq!(point(names::UPSTREAM_PUSHBACKS, &at("server_hint")), None);
}

/// Three events, then a reset; a resume gives the rest.
#[retry(layer = "provider", backoff = "200ms", jitter = 0.0, crate = "crate")]
async fn cut_unit() -> Result<crate::stream::Started<Events>, Busy> {
    crate::stream::started(Events(vec![Ok(0), Ok(1), Ok(2), Err(Busy)])).await
}

/// Items played in order.
struct Events(Vec<Result<u32, Busy>>);

impl futures_core::Stream for Events {
    type Item = Result<u32, Busy>;
    fn poll_next(
        mut self: core::pin::Pin<&mut Self>,
        _: &mut core::task::Context<'_>,
    ) -> core::task::Poll<Option<Self::Item>> {
        let next = (!self.0.is_empty()).then(|| self.0.remove(0));
        core::task::Poll::Ready(next)
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_resume_is_counted_and_ends_its_call_again_with_its_attempts() {
    let op = [kv(names::OPERATION, "nika_retry::metrics::tests::cut_unit")];
    let mut stream = cut_unit()
        .await
        .unwrap()
        .resume_with(|resume: crate::stream::Resume| {
            let from = u32::try_from(resume.delivered()).unwrap();
            crate::stream::started(Events((from..5).map(Ok).collect()))
        });
    let mut seen = Vec::new();
    while let Some(item) = core::future::poll_fn(|cx| {
        futures_core::Stream::poll_next(core::pin::Pin::new(&mut stream), cx)
    })
    .await
    {
        seen.push(item.unwrap());
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    let resumes = point(names::STREAM_RESUMES, &op).expect("a resume counted");
    assert_eq!(resumes.sum, 1.0);
    let recovered = [op[0].clone(), kv(names::OUTCOME, "recovered")];
    let attempts = point(names::CALL_ATTEMPTS, &recovered).expect("the call ended again");
    assert_eq!((attempts.count, attempts.sum), (1, 2.0));
}
