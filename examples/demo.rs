//! The layered retry policy of ADR-019, run on tokio's paused clock so that a
//! minute of backoff takes no time: each scenario prints how many attempts
//! its layer made, how long it waited and how it ended.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::time::Duration;

use nika_retry::{retry, timeout};
use nika_retry_tests::{ProviderError, Script};
use tokio::time::Instant;

/// L1: the transport retries connection-level failures, never 429.
#[retry(layer = "http")]
#[timeout(read = "120s")]
async fn transport(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

/// L2: the provider retries 5xx and waits out 429 with its hint.
#[retry(layer = "provider")]
async fn provider(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

/// L2: a tool failure is semantic and is not retried.
#[retry(layer = "tool")]
async fn tool(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    println!(
        "{:<10} {:<34} {:>8} {:>9}  outcome",
        "layer", "scenario", "attempts", "waited"
    );
    println!("{}", "-".repeat(78));
    let scenarios: [(&str, &str, Script); 6] = [
        (
            "http",
            "503 twice, then 200",
            Script::new(2, ProviderError::status(503)),
        ),
        (
            "http",
            "429 (left to the provider layer)",
            Script::always(ProviderError::rate_limited(None)),
        ),
        (
            "provider",
            "429 with retry_after_ms = 7000",
            Script::new(1, ProviderError::rate_limited(Some(Duration::from_secs(7)))),
        ),
        (
            "provider",
            "500 on every attempt",
            Script::always(ProviderError::status(500)),
        ),
        (
            "provider",
            "401 (never retried)",
            Script::always(ProviderError::status(401)),
        ),
        (
            "tool",
            "tool failure (semantic)",
            Script::always(ProviderError::status(503)),
        ),
    ];
    for (layer, name, script) in &scenarios {
        let start = Instant::now();
        let result = match *layer {
            "http" => transport(script).await,
            "provider" => provider(script).await,
            _ => tool(script).await,
        };
        let outcome = match result {
            Ok(n) => format!("ok on attempt {n}"),
            Err(e) => format!("error: {e}"),
        };
        let waited = format!("{:.2?}", start.elapsed());
        println!(
            "{layer:<10} {name:<34} {:>8} {waited:>9}  {outcome}",
            script.attempts()
        );
    }
}
