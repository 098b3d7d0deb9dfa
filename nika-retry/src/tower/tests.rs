//! `RetryLayer` around `tower::service_fn` services: what it sends again,
//! how it reads responses, what it says.

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use http::{Method, Request, Response};
use tower::{Service, ServiceBuilder, ServiceExt};

use super::{Cloned, RetryLayer};
use crate::adapter::tests::Fault;
use crate::engine::GiveUp;
use crate::events::{EventLog, observe};
use crate::vocab::layer::Layer;

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

/// `layer.layer(inner)` without naming tower's trait at each use.
trait LayerOn<S>: tower_layer::Layer<S> {
    fn layer_on(&self, inner: S) -> Self::Service {
        self.layer(inner)
    }
}

impl<S, L: tower_layer::Layer<S>> LayerOn<S> for L {}

#[cfg(feature = "tonic")]
#[test]
fn tonic_replays_a_request_by_its_message_metadata_and_extensions() {
    use super::{Protocol, Tonic};
    use crate::adapter::Idempotent;

    let mut request = tonic::Request::new(String::from("hello"));
    request.metadata_mut().insert(
        "x-tenant",
        tonic::metadata::MetadataValue::from_static("acme"),
    );
    request.extensions_mut().insert(Idempotent::NO);
    let copy = Protocol::<_, tonic::Response<()>>::replay(&Tonic, &request).unwrap();
    assert_eq!(copy.get_ref(), "hello");
    assert_eq!(copy.metadata().get("x-tenant").unwrap(), "acme");
    assert_eq!(copy.extensions().get(), Some(&Idempotent::NO));
    let marks = Protocol::<_, tonic::Response<()>>::extensions(&Tonic, &request);
    assert_eq!(marks.and_then(|e| e.get()), Some(&Idempotent::NO));
}
