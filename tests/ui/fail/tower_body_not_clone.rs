// Under the default protocol (`Http`), a request's body must be `Clone`
// for the layer to replay it; a streamed one takes `.replay_body(..)`.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer, TimeoutError};
use tower::{ServiceBuilder, ServiceExt};

#[derive(Debug, thiserror::Error, Classify)]
enum Fault {
    #[error("connection reset")]
    #[category(transient)]
    Reset,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// A body read from a socket: it cannot be copied.
struct Streamed;

async fn send() {
    let server = tower::service_fn(|_: Request<Streamed>| async {
        Err::<Response<String>, _>(Fault::Reset)
    });
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server);
    let _ = ServiceExt::oneshot(client, Request::new(Streamed)).await;
}

fn main() {}
