//! The macros check `attempts` and the backoffs against their own copies of
//! the runtime's values (`nika-retry-macros/src/vocab.rs`). This case
//! compiles a fn at each boundary the macros accept and asserts, beside it,
//! that the runtime has the same value, so that a change on either side
//! fails here; the fail cases `attempts_above_ten`,
//! `backoff_above_default_max_*` and `max_backoff_below_default_backoff_*`
//! pin the other side of each boundary. (The limits of a bare `#[timeout]`
//! on an `http` fn, connect 10 s and read 120 s, are the macros' alone: the
//! runtime test `bare_timeout_on_http_means_connect_10s_and_read_120s` pins
//! them.)
use nika_retry::{retry, Classify, Layer, RetryConfig, MAX_ATTEMPTS};

const _: () = {
    assert!(MAX_ATTEMPTS == 10);
    let http = RetryConfig::for_layer(Layer::Http);
    assert!(http.initial_backoff.as_millis() == 250);
    assert!(http.max_backoff.as_millis() == 4_000);
    let layers = [Layer::Provider, Layer::Tool, Layer::Task];
    let mut i = 0;
    while i < layers.len() {
        let config = RetryConfig::for_layer(layers[i]);
        assert!(config.initial_backoff.as_millis() == 1_000);
        assert!(config.max_backoff.as_millis() == 16_000);
        i += 1;
    }
};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", attempts = 10)]
async fn most_attempts() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "http", backoff = "4s")]
async fn http_backoff_at_default_max() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "http", max_backoff = "250ms")]
async fn http_max_backoff_at_default_backoff() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "provider", backoff = "16s")]
async fn provider_backoff_at_default_max() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "task", max_backoff = "1s")]
async fn task_max_backoff_at_default_backoff() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (
        most_attempts(),
        http_backoff_at_default_max(),
        http_max_backoff_at_default_backoff(),
        provider_backoff_at_default_max(),
        task_max_backoff_at_default_backoff(),
    );
}
