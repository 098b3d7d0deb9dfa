//! `ReadBody::first_content_when` below the `tower` layer records the time
//! to the stream's first content on the attempt's span, as
//! `stream::started` does in an annotated fn: OpenTelemetry's
//! `gen_ai.response.time_to_first_chunk`. A file of its own: a `tracing`
//! subscriber set in one test's thread while another test's thread meets
//! the same callsites races tracing's interest cache.

mod tower_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use nika_retry::Layer;
use nika_retry::tower::{ReadBody, RetryLayer};
use nika_retry_tests::fault::{Fault, FaultServer, Step};
use tower::ServiceBuilder;
use tower_support::{HttpError, client, quick, request};
use tracing_subscriber::fmt::format::FmtSpan;

/// What a `tracing` subscriber printed.
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Printed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn the_attempt_that_met_the_first_content_records_its_time() {
    let printed = Printed::default();
    let writer = printed.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // A ping, then the first token 300 ms later.
    let server = FaultServer::start([Fault::stream([
        Step::Meta("ping".into()),
        Step::Wait(Duration::from_millis(300)),
        Step::Event("t1".into()),
    ])])
    .await;
    let mut service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Layer::Provider)
                .config(quick(Layer::Provider))
                .read_body(ReadBody::first_content_when(|d| {
                    !d.starts_with(b"event: meta")
                })),
        )
        .map_err(HttpError::from)
        .service(client());
    let response = service
        .ready()
        .await
        .unwrap()
        .call(request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    let took = response.body().time_to_first_content().unwrap();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    drop(response);
    let text = String::from_utf8(printed.0.lock().unwrap().clone()).unwrap();
    let closed: Vec<&str> = text.lines().filter(|l| l.contains("attempt{")).collect();
    assert_eq!(closed.len(), 1, "{text}");
    let field = "gen_ai.response.time_to_first_chunk=";
    let at = closed[0].find(field).map(|i| &closed[0][i + field.len()..]);
    let seconds: f64 = at
        .and_then(|rest| rest.split(['}', ' ']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no time to first chunk: {}", closed[0]));
    assert!((0.3..2.0).contains(&seconds), "{seconds}");
}
