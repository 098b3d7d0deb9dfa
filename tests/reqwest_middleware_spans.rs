//! `nika_retry::reqwest_middleware::Retry`'s spans, OpenTelemetry's way:
//! one per attempt, `http.request.resend_count` on those after the first.
//! A file of its own (as `tests/tower_spans.rs`): a `tracing` subscriber
//! set in one test's thread while another test's thread meets the same
//! callsites races tracing's interest cache (the callsite may be cached as
//! uninteresting before this test's subscriber is in force).

use nika_retry::Layer;
use nika_retry::reqwest_middleware::Retry;
use nika_retry_tests::fault::{Fault, FaultServer};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

fn client(retry: Retry) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(retry)
        .build()
}

/// A `GET` of `url`: the status.
async fn get(client: &ClientWithMiddleware, url: &str) -> Result<u16, reqwest_middleware::Error> {
    let response = client.get(url).send().await?;
    Ok(response.status().as_u16())
}

/// OpenTelemetry's semantic conventions: one span per physical request,
/// `http.request.resend_count` on those after the first.
#[tokio::test(start_paused = true)]
async fn each_attempt_is_a_span_and_the_resends_carry_their_count() {
    use tracing_subscriber::fmt::format::FmtSpan;
    let captured = nika_retry_tests::logs::Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .finish();
    let _in_force = tracing::subscriber::set_default(subscriber);
    let server =
        FaultServer::start([Fault::Status(503), Fault::Status(503), Fault::ok("ok")]).await;
    assert_eq!(
        get(&client(Retry::new(Layer::Http)), &server.url("/"))
            .await
            .expect("a response"),
        200
    );
    let text = captured.text();
    let spans: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("attempt{") && l.contains("close"))
        .collect();
    assert_eq!(spans.len(), 3, "{text}");
    assert!(!spans[0].contains("resend_count"), "{}", spans[0]);
    assert!(
        spans[1].contains("http.request.resend_count=1"),
        "{}",
        spans[1]
    );
    assert!(
        spans[2].contains("http.request.resend_count=2"),
        "{}",
        spans[2]
    );
    assert!(
        spans
            .iter()
            .all(|s| s.contains("layer=\"http\"") || s.contains("layer=http")),
        "{text}"
    );
}
