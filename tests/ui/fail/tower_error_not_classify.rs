// The inner service's error must classify: the layer reads it to decide.
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Layer, TimeoutError};
use tower::{ServiceBuilder, ServiceExt};

#[derive(Debug)]
enum Fault {
    Reset,
    Timeout(TimeoutError),
    Held(Held),
}

impl From<TimeoutError> for Fault {
    fn from(e: TimeoutError) -> Self {
        Fault::Timeout(e)
    }
}

impl From<Held> for Fault {
    fn from(e: Held) -> Self {
        Fault::Held(e)
    }
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
