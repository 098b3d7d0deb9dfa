// `.replay_body(|body| …)` with no type on the closure's parameter: rustc
// must know the body's type where the closure calls a method on it.
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

/// A body that is whole, or streamed.
enum Body {
    Whole(String),
    Streamed,
}

impl Body {
    fn copy(&self) -> Option<Body> {
        match self {
            Body::Whole(text) => Some(Body::Whole(text.clone())),
            Body::Streamed => None,
        }
    }
}

async fn send() {
    let server =
        tower::service_fn(|_: Request<Body>| async { Err::<Response<String>, _>(Fault::Reset) });
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http).replay_body(|body| body.copy()))
        .service(server);
    let _ = ServiceExt::oneshot(client, Request::new(Body::Streamed)).await;
}

fn main() {}
