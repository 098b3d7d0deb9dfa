// Through method calls on the layered service (`.ready()`, then `.call(…)`),
// the bound the inner service lacks (here `Fault: From<TimeoutError>`) is
// named once, at `.call`: `RetryService` has `ready`, `call` and `oneshot`
// of its own, whose bounds rustc reports with their messages, where
// `ServiceExt`'s would say only that `RetryService<…>: Service<_>` does not
// hold (E0599).
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
    let mut client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Http))
        .service(server);
    let _ = client.ready().await.unwrap().call(Request::new(String::new())).await;
}

fn main() {}
