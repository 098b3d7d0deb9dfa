// A fn returning `impl Service<…>` without `Future: Send`: the layer runs
// the inner service's future inside its own, which is `Send`.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer, TimeoutError};
use tower::{Service, ServiceBuilder, ServiceExt};

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

fn server() -> impl Service<Request<String>, Response = Response<String>, Error = Fault> + Clone + Send {
    tower::service_fn(|_: Request<String>| async { Err::<Response<String>, _>(Fault::Reset) })
}

async fn send() {
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server());
    let _ = ServiceExt::oneshot(client, Request::new(String::new())).await;
}

fn main() {}
