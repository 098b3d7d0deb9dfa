//! The probe of `benches/files_entered.sh`: CALLS calls whose every attempt
//! fails, of MAX attempts each, through `#[retry]` alone (`retry`) or a
//! `tower` service under `RetryLayer` answering 503 (`tower`). The script
//! builds it as a crate of its own beside the runtime crate, runs it under
//! callgrind with MAX = 3, then 2, and counts the difference: one failed
//! attempt that is retried.
//!
//!   files-entered retry|tower MAX CALLS

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer, RetryConfig, TimeoutError, retry};
use tower_layer::Layer as _;
use tower_service::Service;

#[derive(Debug, Classify)]
#[category(transient)]
struct Reset;

#[retry(layer = "http", attempts = 3)]
async fn three() -> Result<(), Reset> {
    Err(Reset)
}

#[retry(layer = "http", attempts = 2)]
async fn two() -> Result<(), Reset> {
    Err(Reset)
}

/// The service's error: what the layer itself may fail with.
#[derive(Debug, thiserror::Error, Classify)]
enum Fault {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// A server that answers every request 503, at once.
#[derive(Clone)]
struct Unavailable;

impl Service<http::Request<()>> for Unavailable {
    type Response = http::Response<()>;
    type Error = Fault;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<()>, Fault>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Fault>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<()>) -> Self::Future {
        Box::pin(async {
            let mut response = http::Response::new(());
            *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
            Ok(response)
        })
    }
}

// Paused: the backoffs' sleeps pass at once.
#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "files-entered retry|tower MAX CALLS";
    let [_, path, max, calls] = args.as_slice() else {
        panic!("{usage}");
    };
    let (max, calls): (u32, u32) = (max.parse().expect(usage), calls.parse().expect(usage));
    match path.as_str() {
        "retry" => {
            for _ in 0..calls {
                let failed = if max == 3 { three().await } else { two().await };
                assert!(failed.is_err());
            }
        }
        "tower" => {
            let config = RetryConfig::for_layer(Layer::Http)
                .with_max_attempts(max)
                .expect("2 or 3 attempts");
            let mut service = RetryLayer::new(Layer::Http)
                .config(config)
                .layer(Unavailable);
            for _ in 0..calls {
                let response = service.call(http::Request::new(())).await;
                assert_eq!(response.expect("a response").status(), 503);
            }
        }
        _ => panic!("{usage}"),
    }
}
