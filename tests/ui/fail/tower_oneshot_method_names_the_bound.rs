// The inner service's error must hold the layer's time limits: through
// `.oneshot(…)` as a method, the bound is named once.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer};
use tower::ServiceBuilder;

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
    let _ = client.oneshot(Request::new(String::new())).await;
}

fn main() {}
