//! `RetryLayer` around `tower::service_fn` services: what it sends again,
//! how it reads responses, what it says.

use core::time::Duration;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response};
use tower::{Service, ServiceBuilder, ServiceExt};

use super::{Cloned, RetryLayer};
use crate::engine::GiveUp;
use crate::events::{EventLog, observe};
use crate::upstream::Held;
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::TimeoutError;
use nika_retry_macros::Classify;

#[derive(Debug, Classify)]
#[category(crate = "crate")]
enum Fault {
    #[category(transient)]
    Reset,
    #[category(transparent)]
    Timeout(TimeoutError),
    #[category(transparent)]
    Held(Held),
}

impl From<TimeoutError> for Fault {
    fn from(e: TimeoutError) -> Self {
        Fault::Timeout(e)
    }
}

impl From<Held> for Fault {
    fn from(e: Held) -> Self {
        Fault::Held(e)
    }
}

/// A server answering `statuses` in turn (200 once they are spent), and
/// the number of requests it got.
fn server(
    statuses: &'static [u16],
) -> (
    impl Service<Request<String>, Response = Response<String>, Error = Fault, Future: Send>
    + Clone
    + Send
    + 'static,
    Arc<AtomicU32>,
) {
    let sent = Arc::new(AtomicU32::new(0));
    let counted = sent.clone();
    let service = tower::service_fn(move |_: Request<String>| {
        let n = counted.fetch_add(1, Ordering::SeqCst) as usize;
        let status = statuses.get(n).copied().unwrap_or(200);
        async move {
            Ok(Response::builder()
                .status(status)
                .body(String::new())
                .unwrap())
        }
    });
    (service, sent)
}

fn request(method: Method) -> Request<String> {
    Request::builder()
        .method(method)
        .uri("http://localhost/")
        .body("body".into())
        .unwrap()
}

async fn status<S>(service: &mut S, request: Request<String>) -> u16
where
    S: Service<Request<String>, Response = Response<String>, Error = Fault>,
{
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    response.status().as_u16()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn http_retries_5xx_and_hands_the_last_response_back() {
    let (inner, sent) = server(&[503, 502, 500, 200]);
    let mut service = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(inner);
    assert_eq!(status(&mut service, request(Method::GET)).await, 500);
    assert_eq!(sent.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_post_is_retried_only_when_the_server_refused_it() {
    let (inner, sent) = server(&[502]);
    let mut service = RetryLayer::new(Layer::Http).layer_on(inner);
    assert_eq!(status(&mut service, request(Method::POST)).await, 502);
    assert_eq!(
        sent.load(Ordering::SeqCst),
        1,
        "a 502 may have been acted on"
    );

    let (inner, sent) = server(&[503]);
    let mut service = RetryLayer::new(Layer::Http).layer_on(inner);
    assert_eq!(status(&mut service, request(Method::POST)).await, 200);
    assert_eq!(sent.load(Ordering::SeqCst), 2, "a 503 refused it");

    let (inner, sent) = server(&[502]);
    let layer = RetryLayer::new(Layer::Http).idempotent(true);
    let mut service = layer.layer_on(inner);
    assert_eq!(status(&mut service, request(Method::POST)).await, 200);
    assert_eq!(sent.load(Ordering::SeqCst), 2, "said idempotent");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_body_that_cannot_be_replayed_is_sent_once_and_the_event_says_why() {
    let (inner, sent) = server(&[503]);
    let layer = RetryLayer::new(Layer::Http).replay_body(|_: &String| None);
    let mut service = layer.layer_on(inner);
    let log = Arc::new(EventLog::new());
    let got = observe(log.clone(), status(&mut service, request(Method::GET))).await;
    assert_eq!(got, 503);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let events = log.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, Some(GiveUp::NotReplayable));
    assert_eq!(events[0].operation, "nika_retry::tower::RetryLayer");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn any_clone_request_with_cloned_its_errors_classified() {
    let sent = Arc::new(AtomicU32::new(0));
    let counted = sent.clone();
    let inner = tower::service_fn(move |n: u32| {
        let fails = counted.fetch_add(1, Ordering::SeqCst) < 2;
        async move { if fails { Err(Fault::Reset) } else { Ok(n * 2) } }
    });
    let mut service = RetryLayer::new(Layer::Provider)
        .protocol(Cloned)
        .layer_on(inner);
    let doubled = service.ready().await.unwrap().call(21).await.unwrap();
    assert_eq!((doubled, sent.load(Ordering::SeqCst)), (42, 3));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn dropping_the_response_future_sends_nothing_more() {
    let (inner, sent) = server(&[503, 503]);
    let mut service = RetryLayer::new(Layer::Http).layer_on(inner);
    let future = service.ready().await.unwrap().call(request(Method::GET));
    // The first attempt fails at once; the layer then sleeps its backoff.
    let cut = tokio::time::timeout(Duration::from_millis(100), future).await;
    assert!(cut.is_err(), "still waiting out the backoff");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_limit_is_the_inner_error_type() {
    let inner = tower::service_fn(|_: Request<String>| async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok::<_, Fault>(Response::new(String::new()))
    });
    let timeouts = super::Timeouts::NONE.with_attempt(Duration::from_secs(1));
    let layer = RetryLayer::new(Layer::Tool).timeouts(timeouts);
    let mut service = layer.layer_on(inner);
    let got = service
        .ready()
        .await
        .unwrap()
        .call(request(Method::GET))
        .await;
    assert!(matches!(got, Err(Fault::Timeout(_))), "{got:?}");
}

/// What a `tracing` subscriber printed.
#[cfg(feature = "tracing")]
#[derive(Clone, Default)]
struct Printed(Arc<Mutex<Vec<u8>>>);

#[cfg(feature = "tracing")]
impl std::io::Write for Printed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(feature = "tracing")]
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn each_attempt_has_a_span_with_its_resend_count_and_time_to_first_chunk() {
    use futures_core::Stream;

    /// Two chunks, the first after 2 s.
    struct Chunks(u8, Option<core::pin::Pin<Box<tokio::time::Sleep>>>);
    impl Stream for Chunks {
        type Item = Result<u8, Fault>;
        fn poll_next(
            mut self: core::pin::Pin<&mut Self>,
            cx: &mut core::task::Context<'_>,
        ) -> core::task::Poll<Option<Self::Item>> {
            if let Some(sleep) = self.1.as_mut() {
                core::task::ready!(sleep.as_mut().poll(cx));
                self.1 = None;
            }
            self.0 += 1;
            core::task::Poll::Ready((self.0 <= 2).then_some(Ok(self.0)))
        }
    }
    use core::future::Future;

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
    let inner = tower::service_fn(move |_: Request<String>| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            let sleep = Box::pin(tokio::time::sleep(Duration::from_secs(2)));
            let started = crate::stream::started(Chunks(0, Some(sleep))).await?;
            drop(started);
            tracing::info!("answered");
            let status = if n == 0 { 503 } else { 200 };
            Ok::<_, Fault>(
                Response::builder()
                    .status(status)
                    .body(String::new())
                    .unwrap(),
            )
        }
    });
    let mut service = RetryLayer::new(Layer::Http).layer_on(inner);
    assert_eq!(status(&mut service, request(Method::GET)).await, 200);
    let text = String::from_utf8(printed.0.lock().unwrap().clone()).unwrap();
    let answered: Vec<&str> = text.lines().filter(|l| l.contains("answered")).collect();
    assert_eq!(answered.len(), 2, "{text}");
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

/// `layer.layer(inner)` without naming tower's trait at each use.
trait LayerOn<S>: tower_layer::Layer<S> {
    fn layer_on(&self, inner: S) -> Self::Service {
        self.layer(inner)
    }
}

impl<S, L: tower_layer::Layer<S>> LayerOn<S> for L {}
