//! `nika_retry::upstream::current()` (issue 43.2): a transport fn under a
//! provider fn feeds the provider's upstream the rate-limit headers it
//! sees, with no parameter threaded through; against the loopback fault
//! server and a real reqwest client.

use std::time::Duration;

use nika_retry::upstream::{self, Held, Upstream};
use nika_retry::{Classify, ErrorCategory, retry};
use nika_retry_tests::fault::{Fault, FaultServer};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    #[error("HTTP {status}")]
    #[category(from = category, retry_after = retry_after)]
    Status {
        status: u16,
        category: ErrorCategory,
        retry_after: Option<Duration>,
    },
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// The transport: sees every response, names no upstream.
struct Transport {
    client: reqwest::Client,
    url: String,
}

impl Transport {
    #[retry(layer = "http", backoff = "10ms")]
    async fn post(&self, body: &str) -> Result<String, Error> {
        let response = self
            .client
            .post(&self.url)
            .body(body.to_owned())
            .send()
            .await?;
        if let Some(upstream) = upstream::current() {
            upstream.observe(response.headers());
        }
        let status = response.status();
        if !status.is_success() {
            let (category, retry_after) = nika_retry::http::classify_response(&response);
            return Err(Error::Status {
                status: status.as_u16(),
                category,
                retry_after,
            });
        }
        Ok(response.text().await?)
    }
}

/// The provider: names the upstream its calls share.
struct Provider {
    transport: Transport,
    upstream: Upstream,
}

impl Provider {
    #[retry(layer = "provider", backoff = "10ms", upstream = self.upstream)]
    async fn complete(&self, prompt: &str) -> Result<String, Error> {
        self.transport.post(prompt).await
    }
}

fn provider(server: &FaultServer) -> Provider {
    Provider {
        transport: Transport {
            client: reqwest::Client::new(),
            url: server.url("/v1/complete"),
        },
        upstream: Upstream::new("openai/gpt-4o"),
    }
}

/// A `200` whose OpenAI headers say nothing is left until `reset`.
fn none_left(reset: &str) -> Fault {
    Fault::WithHeaders(
        200,
        vec![
            ("x-ratelimit-remaining-requests".into(), "0".into()),
            ("x-ratelimit-reset-requests".into(), reset.into()),
        ],
    )
}

#[tokio::test]
async fn the_transport_feeds_the_providers_upstream_and_the_next_call_waits() {
    let server = FaultServer::start([none_left("300ms"), Fault::ok("second")]).await;
    let provider = provider(&server);
    assert_eq!(provider.complete("one").await.unwrap(), "");
    let held = provider
        .upstream
        .held_for()
        .expect("the transport's headers held the provider's upstream");
    assert!(held <= Duration::from_millis(300), "{held:?}");
    assert_eq!(provider.complete("two").await.unwrap(), "second");
    let hits = server.hits();
    let gap = hits[1].at - hits[0].at;
    assert!(gap >= held, "the second request waited the reset: {gap:?}");
}

#[tokio::test]
async fn a_transport_called_alone_has_no_upstream_to_feed() {
    let server = FaultServer::start([none_left("20s")]).await;
    let provider = provider(&server);
    // The transport directly, outside any call that names an upstream.
    assert_eq!(provider.transport.post("one").await.unwrap(), "");
    assert_eq!(provider.upstream.held_for(), None);
    assert!(upstream::current().is_none());
}

/// A fn with an upstream of its own, nested in the provider: it is the
/// innermost, and the provider's comes back after it.
#[retry(layer = "http", upstream = inner)]
async fn names_its_own(inner: &Upstream) -> Result<Option<String>, Error> {
    Ok(upstream::current().map(|u| u.name().to_owned()))
}

/// `upstream = None`: the call names none, and the one around it shows through.
#[retry(layer = "http", upstream = None::<Upstream>)]
async fn names_none() -> Result<Option<String>, Error> {
    Ok(upstream::current().map(|u| u.name().to_owned()))
}

#[retry(layer = "provider", upstream = outer)]
async fn around(outer: &Upstream, inner: &Upstream) -> Result<Vec<Option<String>>, Error> {
    let mut seen = vec![upstream::current().map(|u| u.name().to_owned())];
    seen.push(names_its_own(inner).await?);
    tokio::task::yield_now().await; // a poll of its own after the inner one
    seen.push(upstream::current().map(|u| u.name().to_owned()));
    seen.push(names_none().await?);
    Ok(seen)
}

#[tokio::test]
async fn the_innermost_call_that_names_one_is_in_force() {
    let (outer, inner) = (Upstream::new("outer"), Upstream::new("inner"));
    let seen = around(&outer, &inner).await.unwrap();
    let name = |n: &str| Some(n.to_owned());
    assert_eq!(
        seen,
        [name("outer"), name("inner"), name("outer"), name("outer")]
    );
    assert_eq!(names_none().await.unwrap(), None);
    assert!(upstream::current().is_none());
}
