// `.protocol(Cloned)` replays a request by cloning it: a request type that
// is not `Clone` is refused, and the message says to derive it.
use nika_retry::tower::{Cloned, RetryLayer};
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

/// A job for a queue: not `Clone`.
struct Job(String);

async fn send() {
    let server = tower::service_fn(|_: Job| async { Err::<u32, _>(Fault::Reset) });
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Layer::Tool).protocol(Cloned))
        .service(server);
    let _ = ServiceExt::oneshot(client, Job("mail".into())).await;
}

fn main() {}
