//! nika-retry's metrics read back through the OpenTelemetry SDK's
//! in-memory exporter (feature `opentelemetry`): one provider for the
//! process, given to `nika_retry::metrics::use_meter_provider` before any
//! call records, so that tests running at once each read the data points
//! of their own fns and upstreams (by attribute).

use std::sync::LazyLock;

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

struct Sdk {
    exporter: InMemoryMetricExporter,
    provider: SdkMeterProvider,
}

static SDK: LazyLock<Sdk> = LazyLock::new(|| {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    nika_retry::metrics::use_meter_provider(&provider)
        .expect("the SDK given before any call records");
    Sdk { exporter, provider }
});

/// Gives nika-retry the in-memory exporter's provider, once per process:
/// call it before the first call of a test.
pub fn install() {
    LazyLock::force(&SDK);
}

/// One data point as exported (cumulative): a histogram's count, sum and
/// bucket counts, or a counter's value (`sum`, with `count` 0).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Point {
    /// Measurements recorded (a histogram's).
    pub count: u64,
    /// Their sum, or a counter's value.
    pub sum: f64,
    /// A histogram's bucket counts, one more than its boundaries.
    pub buckets: Vec<u64>,
    /// A histogram's boundaries.
    pub bounds: Vec<f64>,
}

/// An attribute, as the points are filtered by.
pub fn kv(key: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(key, value)
}

/// The point of the instrument `name` whose attributes include all of
/// `with`, as the SDK exports it now; `None` if nothing was recorded there.
/// Panics if more than one point has them (a filter too loose to be exact).
pub fn point(name: &str, with: &[KeyValue]) -> Option<Point> {
    let points = points(name, with);
    assert!(points.len() <= 1, "{name} {with:?}: {points:?}");
    points.into_iter().next().map(|(_, point)| point)
}

/// Every point of the instrument `name` whose attributes include all of
/// `with`, with their attributes.
pub fn points(name: &str, with: &[KeyValue]) -> Vec<(Vec<KeyValue>, Point)> {
    install();
    SDK.provider.force_flush().expect("flushed");
    let exported = SDK.exporter.get_finished_metrics().expect("exported");
    // Cumulative: the last export holds everything recorded before it.
    let Some(last) = exported.last() else {
        return Vec::new();
    };
    let Some(metric) = last
        .scope_metrics()
        .filter(|scope| scope.scope().name() == "nika_retry")
        .flat_map(|scope| scope.metrics())
        .find(|metric| metric.name() == name)
    else {
        return Vec::new();
    };
    let has = |attributes: &[KeyValue]| with.iter().all(|kv| attributes.contains(kv));
    let mut found = Vec::new();
    match metric.data() {
        AggregatedMetrics::F64(MetricData::Histogram(h)) => {
            for p in h.data_points() {
                let attributes: Vec<KeyValue> = p.attributes().cloned().collect();
                if has(&attributes) {
                    let point = Point {
                        count: p.count(),
                        sum: p.sum(),
                        buckets: p.bucket_counts().collect(),
                        bounds: p.bounds().collect(),
                    };
                    found.push((attributes, point));
                }
            }
        }
        AggregatedMetrics::U64(MetricData::Histogram(h)) => {
            for p in h.data_points() {
                let attributes: Vec<KeyValue> = p.attributes().cloned().collect();
                if has(&attributes) {
                    let point = Point {
                        count: p.count(),
                        sum: p.sum() as f64,
                        buckets: p.bucket_counts().collect(),
                        bounds: p.bounds().collect(),
                    };
                    found.push((attributes, point));
                }
            }
        }
        AggregatedMetrics::U64(MetricData::Sum(s)) => {
            for p in s.data_points() {
                let attributes: Vec<KeyValue> = p.attributes().cloned().collect();
                if has(&attributes) {
                    let point = Point {
                        sum: p.value() as f64,
                        ..Point::default()
                    };
                    found.push((attributes, point));
                }
            }
        }
        other => panic!("{name}: an aggregation the crate does not record: {other:?}"),
    }
    found
}
