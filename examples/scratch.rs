use nika_retry::{retry, timeout, Classify, ErrorCategory, TimeoutError};
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug)]
enum E { Flaky, Timeout(TimeoutError) }
impl From<TimeoutError> for E { fn from(t: TimeoutError) -> Self { E::Timeout(t) } }
impl Classify for E { fn category(&self) -> ErrorCategory { match self { E::Flaky => ErrorCategory::Transient, E::Timeout(t) => t.category() } } }

static N: AtomicU32 = AtomicU32::new(0);

/// docs kept
#[retry(layer = "http", backoff = "10ms")]
#[timeout(total = "5s")]
async fn flaky(x: &str) -> Result<String, E> {
    if N.fetch_add(1, Ordering::SeqCst) < 2 { return Err(E::Flaky); }
    let s = x.to_owned();
    Ok(s)
}

#[tokio::main]
async fn main() {
    println!("{:?}", flaky("hi").await.map_err(|_| ()));
    println!("attempts {}", N.load(Ordering::SeqCst));
}
