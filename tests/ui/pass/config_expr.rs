//! config = EXPR takes a RetryConfig, an Option<RetryConfig> or a &RetryConfig.
use nika_retry::{retry, Classify, Layer, RetryConfig};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

struct Options {
    retry: Option<RetryConfig>,
    fixed: RetryConfig,
}

struct Client {
    options: Options,
}

impl Client {
    #[retry(layer = "provider", config = self.options.retry.clone())]
    async fn optional(&self) -> Result<(), Error> {
        Ok(())
    }

    #[retry(layer = "provider", config = self.options.fixed.clone())]
    async fn fixed(&self) -> Result<(), Error> {
        Ok(())
    }

    #[retry(layer = "http", config = &self.options.fixed)]
    async fn borrowed(&self) -> Result<(), Error> {
        Ok(())
    }
}

#[retry(layer = "task", attempts = 2, config = RetryConfig::for_layer(Layer::Task))]
async fn literal_and_config() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let client = Client {
        options: Options {
            retry: None,
            fixed: RetryConfig::for_layer(Layer::Provider),
        },
    };
    let _ = (client.optional(), client.fixed(), client.borrowed(), literal_and_config());
}
