//! The verb crate's provider on its model's upstream, against a real
//! loopback server and a real reqwest client: rate-limit headers on
//! successes pace the next calls, a spent quota neither holds nor retries,
//! the breaker opens on consecutive failures, and a caller that gives up
//! while waiting strands nobody.

use std::time::Duration;

use nika_retry::retry;
use nika_retry::upstream::Upstream;
use nika_retry_tests::fault::{Fault, FaultServer, Hit};
use nika_retry_tests::verb::{Provider, ProviderError, RequestOptions, Transport};

fn provider(server: &FaultServer) -> Provider {
    Provider::for_model(
        Transport::new(server.url(""), RequestOptions::fast_retries()),
        "gpt-4o",
    )
}

/// A `200` whose OpenAI headers say `remaining` requests are left for 1 s.
fn left(remaining: u32) -> Fault {
    Fault::WithHeaders(
        200,
        vec![
            (
                "x-ratelimit-remaining-requests".into(),
                remaining.to_string(),
            ),
            ("x-ratelimit-reset-requests".into(), "1s".into()),
        ],
    )
}

/// When each request after the first was sent, from the first.
fn sent_after_first(hits: &[Hit]) -> Vec<Duration> {
    hits.iter().map(|h| h.at - hits[0].at).skip(1).collect()
}

#[tokio::test]
async fn headers_of_a_success_saying_none_left_hold_the_next_call() {
    let server = FaultServer::start([left(0), Fault::ok("second")]).await;
    let provider = provider(&server);
    assert_eq!(provider.complete("one").await.unwrap(), "");
    let held = provider.upstream().held_for().expect("the headers hold it");
    assert!(held <= Duration::from_secs(1), "{held:?}");
    assert_eq!(provider.complete("two").await.unwrap(), "second");
    let after = sent_after_first(&server.hits());
    // Held until the reset the first response gave (less its round trip).
    assert!(after[0] >= held, "{after:?} vs {held:?}");
}

#[tokio::test]
async fn the_allowance_lets_that_many_start_before_the_reset() {
    let server = FaultServer::start([left(2), Fault::ok("x")]).await;
    let provider = provider(&server);
    provider.complete("first").await.unwrap();
    let calls = (0..4).map(|_| provider.complete("next"));
    let results = futures_util::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let after = sent_after_first(&server.hits());
    assert_eq!(after.len(), 4);
    // Two went at once; the other two waited for the reset, 1 s after the
    // first response (its round trip taken off, hence 900 ms).
    let early = after.iter().filter(|&&at| at < Duration::from_millis(900));
    assert_eq!(early.count(), 2, "{after:?}");
}

#[tokio::test]
async fn a_spent_quota_is_not_retried_and_holds_nobody() {
    let server = FaultServer::start([Fault::QuotaExhausted, Fault::ok("fine")]).await;
    let provider = provider(&server);
    let error = provider.complete("one").await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::QuotaExhausted { message } if message.contains("quota")),
        "{error:?}"
    );
    assert_eq!(server.requests(), 1, "not retried");
    assert_eq!(
        provider.upstream().held_for(),
        None,
        "its Retry-After: 20 holds nothing"
    );
    assert_eq!(provider.complete("two").await.unwrap(), "fine");
}

#[tokio::test]
async fn a_429_holds_the_model_for_every_call_and_says_why() {
    let server = FaultServer::start([
        Fault::RateLimited {
            retry_after_ms: 300,
        },
        Fault::ok("x"),
    ])
    .await;
    let provider = provider(&server);
    let first = provider.complete("first");
    // Started once the 429 holds the model, however slow the machine.
    let second = async {
        for _ in 0..10_000 {
            if provider.upstream().held_for().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        provider.complete("second").await
    };
    let (first, second) = tokio::join!(first, second);
    assert_eq!((first.unwrap(), second.unwrap()), ("x".into(), "x".into()));
    let after = sent_after_first(&server.hits());
    assert!(
        after.iter().all(|&at| at >= Duration::from_millis(300)),
        "nothing sent during the hold: {after:?}"
    );
}

#[tokio::test]
async fn unshared_each_call_meets_the_limit_alone() {
    let window = || Fault::LimitWindow {
        window: Duration::from_millis(500),
        retry_after: 1,
    };
    let server = FaultServer::start([window()]).await;
    let provider = provider(&server).unshared();
    let calls = (0..3).map(|_| provider.complete("x"));
    let results = futures_util::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(server.limited(), 3);
    assert_eq!(
        provider.upstream().held_for(),
        None,
        "the model's upstream was not used"
    );
}

/// A caller of its own upstream, with the breaker on.
struct Tool {
    client: reqwest::Client,
    url: String,
    upstream: Upstream,
}

#[derive(Debug, thiserror::Error, nika_retry::Classify)]
enum ToolError {
    #[error("HTTP {0}")]
    #[category(transient)]
    Down(u16),
    #[error("request: {0}")]
    #[category(transient)]
    Request(#[from] reqwest::Error),
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] nika_retry::upstream::Held),
}

impl Tool {
    #[retry(layer = "tool", upstream = self.upstream)]
    async fn call(&self) -> Result<String, ToolError> {
        let response = self.client.post(&self.url).send().await?;
        match response.status().as_u16() {
            200 => Ok(response.text().await?),
            status => Err(ToolError::Down(status)),
        }
    }
}

#[tokio::test]
async fn the_breaker_opens_after_consecutive_failures_then_lets_one_probe_through() {
    let server =
        FaultServer::start([Fault::Status(500), Fault::Status(500), Fault::ok("back")]).await;
    let tool = Tool {
        client: reqwest::Client::new(),
        url: server.url("/search"),
        upstream: Upstream::new("tools/search").with_breaker(2, Duration::from_millis(400)),
    };
    // A tool is not retried: each call is one attempt.
    assert!(matches!(tool.call().await, Err(ToolError::Down(500))));
    assert_eq!(tool.upstream.held_for(), None, "one failure: still closed");
    assert!(matches!(tool.call().await, Err(ToolError::Down(500))));
    let open = tool.upstream.held_for().expect("two in a row open it");
    assert!(open <= Duration::from_millis(400));
    // The next call waits the breaker out, then goes through as its probe.
    assert_eq!(tool.call().await.unwrap(), "back");
    let after = sent_after_first(&server.hits());
    assert!(after[1] - after[0] >= open, "{after:?}");
    assert_eq!(
        tool.upstream.held_for(),
        None,
        "the probe's success closed it"
    );
}

fn tool(server: &FaultServer, failures: u32, open_for: Duration) -> Tool {
    Tool {
        client: reqwest::Client::new(),
        url: server.url("/search"),
        upstream: Upstream::new("tools/search").with_breaker(failures, open_for),
    }
}

#[tokio::test]
async fn a_success_between_two_failures_keeps_the_breaker_closed() {
    let server = FaultServer::start([
        Fault::Status(500),
        Fault::ok("fine"),
        Fault::Status(500),
        Fault::ok("fine"),
    ])
    .await;
    let tool = tool(&server, 2, Duration::from_secs(3600));
    assert!(matches!(tool.call().await, Err(ToolError::Down(500))));
    assert_eq!(tool.call().await.unwrap(), "fine");
    assert!(matches!(tool.call().await, Err(ToolError::Down(500))));
    assert_eq!(
        tool.upstream.held_for(),
        None,
        "two failures, but not in a row"
    );
    assert_eq!(tool.call().await.unwrap(), "fine");
    assert_eq!(server.requests(), 4);
}

#[tokio::test]
async fn half_open_the_probes_failure_opens_the_breaker_again_for_the_others() {
    let open_for = Duration::from_millis(400);
    let server = FaultServer::start([
        Fault::Status(500),
        Fault::Status(500),
        Fault::Status(500),
        Fault::ok("back"),
    ])
    .await;
    let tool = tool(&server, 2, open_for);
    for _ in 0..2 {
        assert!(matches!(tool.call().await, Err(ToolError::Down(500))));
    }
    assert!(tool.upstream.held_for().is_some(), "open");
    // The first call is the probe; the second waits for its outcome.
    let behind = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        tool.call().await
    };
    let (probe, behind) = tokio::join!(tool.call(), behind);
    assert!(matches!(probe, Err(ToolError::Down(500))), "{probe:?}");
    assert_eq!(behind.unwrap(), "back");
    // One failure is below the threshold, yet the probe's opened it again:
    // the call behind went only after another `open_for`.
    let after = sent_after_first(&server.hits());
    assert!(after[2] - after[1] >= open_for, "{after:?}");
    assert_eq!(tool.upstream.held_for(), None, "closed by the success");
}

#[tokio::test]
async fn a_waiter_given_up_on_strands_nobody() {
    let server = FaultServer::start([Fault::ok("x")]).await;
    let provider = provider(&server);
    provider.upstream().hold_for(Duration::from_millis(300));
    // The first waiter is dropped before the hold ends; the one behind it
    // still goes, after the hold.
    let dropped = tokio::time::timeout(Duration::from_millis(100), provider.complete("first"));
    let behind = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        provider.complete("second").await
    };
    // Bounded: a stranded waiter fails the test rather than hanging it.
    let behind = tokio::time::timeout(Duration::from_secs(5), behind);
    let (dropped, behind) = tokio::join!(dropped, behind);
    assert!(dropped.is_err(), "the first caller gave up waiting");
    assert_eq!(behind.expect("not stranded").unwrap(), "x");
    assert_eq!(server.requests(), 1, "the dropped waiter sent nothing");
}
