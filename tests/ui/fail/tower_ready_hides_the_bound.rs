// Pinned as rustc prints it: through a method call on the layered service
// (`.ready()`), before the request's type is known, rustc only says that
// `RetryService<…>: Service<_>` does not hold, not which bound failed (here
// `Fault: From<TimeoutError>`). The same mistake through
// `ServiceExt::oneshot(service, request)` names it
// (tower_error_without_from_timeout.rs). If a rustc names it here too,
// this file's .stderr changes: README "Tower services" can then drop its
// advice.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer};
use tower::{Service, ServiceBuilder, ServiceExt};

#[derive(Debug, thiserror::Error, Classify)]
enum Fault {
    #[error("connection reset")]
    #[category(transient)]
    Reset,
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

async fn send() {
    let server = tower::service_fn(|_: Request<String>| async {
        Err::<Response<String>, _>(Fault::Reset)
    });
    let mut client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server);
    let _ = client.ready().await.unwrap().call(Request::new(String::new())).await;
}

fn main() {}
