//! The `tower` layer's spans, OpenTelemetry's way: one per attempt, with
//! `http.request.resend_count` on the attempts after the first and the
//! time to a stream's first content as `gen_ai.response.time_to_first_chunk`.
//! A file of its own: a `tracing` subscriber set in one test's thread while
//! another test's thread meets the same callsites races tracing's interest
//! cache.

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use http::{Request, Response};
use nika_retry::Layer;
use nika_retry::tower::RetryLayer;
use nika_retry_tests::ProviderError;
use tower::ServiceBuilder;

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

/// Two chunks, the first after 2 s.
struct Chunks(u8, Option<Pin<Box<tokio::time::Sleep>>>);

impl Stream for Chunks {
    type Item = Result<u8, ProviderError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(sleep) = self.1.as_mut() {
            std::task::ready!(sleep.as_mut().poll(cx));
            self.1 = None;
        }
        self.0 += 1;
        Poll::Ready((self.0 <= 2).then_some(Ok(self.0)))
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn each_attempt_has_a_span_with_its_resend_count_and_time_to_first_chunk() {
    let printed = Printed::default();
    let writer = printed.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let sent = Arc::new(AtomicU32::new(0));
    let counted = sent.clone();
    // A 503 after its stream's first chunk, then a 200.
    let inner = tower::service_fn(move |_: Request<String>| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            let sleep = Box::pin(tokio::time::sleep(Duration::from_secs(2)));
            let started = nika_retry::stream::started(Chunks(0, Some(sleep))).await?;
            drop(started);
            tracing::info!("answered");
            let status = if n == 0 { 503 } else { 200 };
            let response = Response::builder().status(status).body(String::new());
            Ok::<_, ProviderError>(response.expect("a valid response"))
        }
    });
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(inner);
    let request = Request::get("http://localhost/")
        .body(String::new())
        .unwrap();
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let text = String::from_utf8(printed.0.lock().unwrap().clone()).unwrap();
    let answered: Vec<&str> = text.lines().filter(|l| l.contains("answered")).collect();
    assert_eq!(answered.len(), 2, "{text}");
    assert!(
        answered[0].contains("attempt{layer=\"http\""),
        "{}",
        answered[0]
    );
    assert!(!answered[0].contains("resend_count"), "{}", answered[0]);
    assert!(
        answered[1].contains("http.request.resend_count=1"),
        "{}",
        answered[1]
    );
    // From the call's start, as `Started::time_to_first_content`: the
    // second attempt's counts the first and the backoff too.
    assert!(
        answered[0].contains("gen_ai.response.time_to_first_chunk=2.0}"),
        "{}",
        answered[0]
    );
    assert!(
        answered[1].contains("gen_ai.response.time_to_first_chunk=4."),
        "{}",
        answered[1]
    );
}
