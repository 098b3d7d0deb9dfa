// The inner service's error must hold the layer's time limits.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer};
use tower::{ServiceBuilder, ServiceExt};

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
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server);
    let _ = ServiceExt::oneshot(client, Request::new(String::new())).await;
}

fn main() {}
