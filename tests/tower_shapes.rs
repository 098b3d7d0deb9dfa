//! `RetryLayer` as a new user writes it, against the fault server on
//! 127.0.0.1: inside a `ServiceBuilder` with other layers around it
//! (`map_err`, `map_response`, `BoxCloneService`, `Buffer`), under a
//! generic fn, over a request that is not HTTP (`Cloned`), with a `call`
//! that reads `current_attempt()`, inside a `tracing` span, and one layer
//! cloned by concurrent callers sharing its `Upstream`. Each shape is
//! checked by what the server saw, not only by compiling.

mod tower_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use nika_retry::tower::{Cloned, RetryLayer, RetryService};
use nika_retry::upstream::Upstream;
use nika_retry::{Layer, current_attempt};
use nika_retry_tests::fault::{Fault, FaultServer};
use tower::util::{BoxCloneService, BoxService};
use tower::{BoxError, Layer as _, Service, ServiceBuilder, ServiceExt};
use tower_support::{Body, HttpError, client, quick, request};

/// hyper-util's client with its error made the user's: what sits below the
/// layer in every shape here.
fn inner()
-> impl Service<Request<Body>, Response = Response<Incoming>, Error = HttpError, Future: Send>
+ Clone
+ Send
+ 'static {
    ServiceBuilder::new()
        .map_err(HttpError::from)
        .service(client())
}

fn layer() -> RetryLayer {
    RetryLayer::new(Layer::Http).config(quick(Layer::Http))
}

#[tokio::test]
async fn map_response_and_map_err_outside_the_layer_see_only_the_last_attempt() {
    let server =
        FaultServer::start([Fault::Status(503), Fault::Status(502), Fault::ok("hi")]).await;
    let service = ServiceBuilder::new()
        .map_err(|e: HttpError| e.to_string())
        .map_response(|r: Response<Incoming>| r.status().as_u16())
        .layer(layer())
        .service(inner());
    let status = service
        .oneshot(request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(server.requests(), 3);

    // A failure handed back goes through `map_err` once, as the user's type.
    let dead = nika_retry_tests::fault::closed_port().await;
    let service = ServiceBuilder::new()
        .map_err(|e: HttpError| format!("wrapped: {e}"))
        .layer(layer())
        .service(inner());
    let error = service
        .oneshot(request(Method::GET, &format!("http://{dead}/")))
        .await
        .unwrap_err();
    assert!(error.starts_with("wrapped: "), "{error}");
}

#[tokio::test]
async fn boxed_as_a_box_clone_service_above_and_below_the_layer() {
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    // Above: the layered service erased, as an application stores it.
    let boxed: BoxCloneService<Request<Body>, Response<Incoming>, HttpError> =
        BoxCloneService::new(layer().layer(inner()));
    let response = boxed
        .clone()
        .oneshot(request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 2);

    // Below: an erased inner service is `Clone`, so each attempt gets one.
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let service = layer().layer(BoxCloneService::new(inner()));
    let response = service
        .oneshot(request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 2);
}

/// What a `Buffer` fails with, as the user's error: the inner service's
/// own (a broken buffer, its worker gone, does not happen here).
fn from_buffer(error: BoxError) -> HttpError {
    match error.downcast::<HttpError>() {
        Ok(own) => *own,
        Err(other) => panic!("the buffer's worker failed: {other}"),
    }
}

#[tokio::test]
async fn a_buffer_above_the_layer_and_one_that_makes_a_box_service_clone_below_it() {
    // Above: callers share one layered service through a buffer's handles.
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let service = ServiceBuilder::new()
        .buffer(4)
        .layer(layer())
        .service(inner());
    let response = service
        .oneshot(request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 2);

    // Below: a `BoxService` is not `Clone` (tests/ui/fail/tower_inner_not_clone.rs);
    // a buffer in front of it is, its errors mapped back to the user's.
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let once: BoxService<Request<Body>, Response<Incoming>, HttpError> = BoxService::new(inner());
    let service = ServiceBuilder::new()
        .layer(layer())
        .map_err(from_buffer)
        .buffer(4)
        .service(once);
    let response = service
        .oneshot(request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.requests(), 2);
}

/// A library's fn over any HTTP service: the bounds it must spell to send
/// through the layer are those of `RetryService`'s `Service` impl.
async fn get_with_retries<S, B>(inner: S, request: Request<B>) -> Result<u16, S::Error>
where
    S: Service<Request<B>, Response = Response<Incoming>, Error = HttpError>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Clone + Send + 'static,
{
    let service: RetryService<S> = layer().layer(inner);
    let response = service.oneshot(request).await?;
    Ok(response.status().as_u16())
}

#[tokio::test]
async fn a_generic_fn_over_any_service_wraps_it() {
    let server = FaultServer::start([Fault::Status(502), Fault::ok("hi")]).await;
    let status = get_with_retries(inner(), request(Method::GET, &server.url("/")))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(server.requests(), 2);
}

/// A request that is not HTTP: a lookup by path, which the service turns
/// into a GET of the fault server, a status of 500 or more its error.
#[derive(Clone, Debug)]
struct Lookup {
    path: String,
}

/// What the service saw of each attempt, read in its `call` (not in the
/// future it returns): the attempt's number and idempotency key.
type Seen = Arc<Mutex<Vec<(u32, String)>>>;

fn lookups(
    server: &FaultServer,
    seen: Seen,
) -> impl Service<Lookup, Response = String, Error = HttpError, Future: Send> + Clone + Send + 'static
{
    let base = server.url("");
    let http = inner();
    tower::service_fn(move |lookup: Lookup| {
        let attempt = current_attempt().expect("`call` runs inside the attempt");
        seen.lock()
            .unwrap()
            .push((attempt.attempt, attempt.idempotency_key.to_string()));
        let url = format!("{}{}", base.trim_end_matches('/'), lookup.path);
        let http = http.clone();
        async move {
            let response = http.oneshot(request(Method::GET, &url)).await?;
            match response.status().as_u16() {
                s if s >= 500 => Err(HttpError::Status(s)),
                _ => Ok(lookup.path),
            }
        }
    })
}

#[tokio::test]
async fn cloned_over_a_plain_request_and_the_call_reads_its_attempt() {
    let server =
        FaultServer::start([Fault::Status(503), Fault::Status(500), Fault::ok("hi")]).await;
    let seen = Seen::default();
    let service = layer()
        .protocol(Cloned)
        .layer(lookups(&server, seen.clone()));
    let path = service
        .oneshot(Lookup {
            path: "/users/7".into(),
        })
        .await
        .unwrap();
    assert_eq!(path, "/users/7");
    assert_eq!(server.requests(), 3);
    assert!(server.hits().iter().all(|h| h.path == "/users/7"));
    let seen = seen.lock().unwrap().clone();
    let numbers: Vec<u32> = seen.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert!(
        seen.iter().all(|(_, key)| *key == seen[0].1),
        "one key for the request's attempts: {seen:?}"
    );
}

#[tracing::instrument(skip(service))]
async fn traced_get<S>(service: S, url: String) -> Result<u16, HttpError>
where
    S: Service<Request<Body>, Response = Response<Incoming>, Error = HttpError>,
{
    let response = service.oneshot(request(Method::GET, &url)).await?;
    Ok(response.status().as_u16())
}

#[tokio::test]
async fn inside_an_instrumented_fn_spawned_on_the_runtime() {
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let service = layer().layer(inner());
    // Spawned: the instrumented future, the layer's inside it, is `Send`.
    let status = tokio::spawn(traced_get(service, server.url("/")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn one_layer_cloned_by_concurrent_callers_shares_its_upstream() {
    let server = FaultServer::start([
        Fault::WithHeaders(429, vec![("retry-after".into(), "1".into())]),
        Fault::ok("hi"),
    ])
    .await;
    let upstream = Upstream::new("tests/tower_shapes");
    let layer = RetryLayer::new(Layer::Provider).upstream(upstream.clone());
    let service = layer.layer(inner());
    let url = server.url("/");
    let first = tokio::spawn(service.clone().oneshot(request(Method::GET, &url)));
    // Once the 429 is in, three more callers through clones of the service.
    while upstream.held_for().is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let others: Vec<_> = (0..3)
        .map(|_| tokio::spawn(service.clone().oneshot(request(Method::GET, &url))))
        .collect();
    assert_eq!(first.await.unwrap().unwrap().status(), 200);
    for other in others {
        assert_eq!(other.await.unwrap().unwrap().status(), 200);
    }
    let hits = server.hits();
    assert_eq!(
        hits.len(),
        5,
        "the 429, its retry, and one for each other caller"
    );
    for later in &hits[1..] {
        let after = later.at - hits[0].at;
        assert!(after >= Duration::from_millis(990), "held: {after:?}");
    }
}

#[tokio::test]
async fn below_a_buffer_the_inner_call_runs_on_its_worker_outside_the_attempt() {
    // A `Buffer` between the layer and the service calls the service on its
    // own worker task: the attempt in force is not there (task-local).
    // A service that reads `current_attempt()` or stamps the idempotency
    // key goes above the buffer.
    let server = FaultServer::start([Fault::Status(503), Fault::ok("hi")]).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = server.url("");
    let http = inner();
    let reads = {
        let seen = seen.clone();
        tower::service_fn(move |lookup: Lookup| {
            seen.lock()
                .unwrap()
                .push(current_attempt().map(|a| a.attempt));
            let url = format!("{}{}", base.trim_end_matches('/'), lookup.path);
            let http = http.clone();
            async move {
                let response = http.oneshot(request(Method::GET, &url)).await?;
                match response.status().as_u16() {
                    s if s >= 500 => Err(HttpError::Status(s)),
                    _ => Ok(lookup.path),
                }
            }
        })
    };
    let service = ServiceBuilder::new()
        .layer(layer().protocol(Cloned))
        .map_err(from_buffer)
        .buffer(4)
        .service(reads);
    let path = service.oneshot(Lookup { path: "/a".into() }).await.unwrap();
    assert_eq!(path, "/a");
    assert_eq!(server.requests(), 2);
    assert_eq!(*seen.lock().unwrap(), [None, None]);
}
