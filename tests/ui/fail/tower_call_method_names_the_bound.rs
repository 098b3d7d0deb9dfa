// Each attempt after the first goes through a clone of the inner service:
// a `BoxService` is not `Clone` (a `BoxCloneService` is). Through
// `.ready()` and `.call(…)` as methods, named once.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer, TimeoutError};
use tower::util::BoxService;
use tower::ServiceBuilder;

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

async fn send() {
    let server: BoxService<Request<String>, Response<String>, Fault> =
        BoxService::new(tower::service_fn(|_: Request<String>| async {
            Err::<Response<String>, _>(Fault::Reset)
        }));
    let mut client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server);
    let _ = client.ready().await.unwrap().call(Request::new(String::new())).await;
}

fn main() {}
