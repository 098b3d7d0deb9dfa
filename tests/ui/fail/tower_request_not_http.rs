// The default protocol (`Http`) knows `http::Request`s only: any other
// request that is `Clone` takes `.protocol(Cloned)`.
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

#[derive(Clone)]
struct Lookup(String);

async fn send() {
    let server = tower::service_fn(|_: Lookup| async { Err::<u32, _>(Fault::Reset) });
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server);
    let _ = ServiceExt::oneshot(client, Lookup("key".into())).await;
}

fn main() {}
