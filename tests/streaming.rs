//! Streamed responses against the loopback fault server with a real reqwest
//! client, through the verb crate's `Provider::stream` (server-sent events,
//! `started_when` a token arrives): one test per row of the contract
//! (docs/streams.md), then the fault server's streamed
//! scripts as a plain client reads them. Real clock: small limits only where
//! a test is about a stall, generous ones where it counts.

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::events::{Outcome, observe};
use nika_retry::stream::Started;
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Boundary, Classify, ErrorCategory, Layer, TimeoutError};
use nika_retry_tests::EventLog;
use nika_retry_tests::fault::{Fault, FaultServer, Step};
use nika_retry_tests::verb::{
    Chunk, HttpError, Provider, ProviderError, RequestOptions, Transport,
};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Waits (10 s at most, on the real clock) until `done` holds; whether it
/// does is for the caller to assert.
async fn eventually(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() && Instant::now() < deadline {
        tokio::time::sleep(ms(5)).await;
    }
}

/// `fut`, or a failure if it hangs: a stream that should have been cut by
/// a limit fails its test rather than waiting for the server's lifetime.
async fn within<F: std::future::Future>(fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("still waiting after 20 s: no limit cut it")
}

/// A provider against `server` whose streams carry `read`.
fn provider(server: &FaultServer, read: Duration) -> Provider {
    let options = RequestOptions {
        read_timeout: read,
        ..RequestOptions::default()
    };
    Provider::new(Transport::new(server.url(""), options))
}

/// The task's `retry:`: 3 attempts, 25–50 ms apart.
fn fast_retries() -> TaskPolicy {
    serde_norway::from_str("retry: { max_attempts: 3, delay_ms: 50, backoff: constant }").unwrap()
}

/// One `stream` call under [`fast_retries`], its events in `log`.
async fn open(
    provider: &Provider,
    log: &Arc<EventLog>,
) -> Result<Started<impl Stream<Item = Result<Chunk, ProviderError>> + use<>>, ProviderError> {
    observe(log.clone(), scope(fast_retries(), provider.stream("hi"))).await
}

fn token(text: &str) -> Chunk {
    Chunk::Token(text.to_owned())
}

fn meta(data: &str) -> Chunk {
    Chunk::Meta {
        event: "meta".to_owned(),
        data: data.to_owned(),
    }
}

/// What a stream yields until it ends: `Ok` chunks, then what ended it.
#[derive(Debug)]
struct Drained {
    chunks: Vec<Chunk>,
    /// The `Err` items, in order (a well-behaved stream has one at most, last).
    errors: Vec<ProviderError>,
}

async fn drain(stream: impl Stream<Item = Result<Chunk, ProviderError>>) -> Drained {
    let mut stream = std::pin::pin!(stream);
    let (mut chunks, mut errors) = (vec![], vec![]);
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => {
                assert!(errors.is_empty(), "{chunk:?} after {errors:?}");
                chunks.push(chunk);
            }
            Err(error) => errors.push(error),
        }
    }
    Drained { chunks, errors }
}

fn timeout_of(error: &ProviderError) -> Option<TimeoutError> {
    match error {
        ProviderError::Timeout(t) => Some(t.clone()),
        _ => None,
    }
}

use Outcome::{Recovered, Retrying};

// ---- Before the first content: the attempt's.

#[tokio::test]
async fn a_body_cut_before_the_first_token_is_retried() {
    let server =
        FaultServer::start([Fault::stream([Step::Cut]), Fault::stream(Step::tokens(3))]).await;
    let log = Arc::new(EventLog::default());
    let stream = open(&provider(&server, ms(5_000)), &log).await.unwrap();
    let drained = drain(stream).await;
    assert_eq!(drained.chunks, [token("t1"), token("t2"), token("t3")]);
    assert!(drained.errors.is_empty(), "{:?}", drained.errors);
    assert_eq!(server.requests(), 2);
    assert_eq!(
        log.outline(),
        [(Layer::Provider, Retrying), (Layer::Provider, Recovered)]
    );
    assert_eq!(log.events()[0].category, Some(ErrorCategory::Transient));
    // One call: the same key, the second attempt counted as a retry.
    let hits = server.hits();
    assert_eq!(hits[0].idempotency_key, hits[1].idempotency_key);
    assert_eq!(hits[1].retry_count.as_deref(), Some("1"));
}

#[tokio::test]
async fn metadata_then_a_cut_is_retried_and_its_metadata_dropped() {
    let server = FaultServer::start([
        Fault::stream([Step::Meta("first attempt".into()), Step::Cut]),
        Fault::stream([
            Step::Meta("model".into()),
            Step::Meta("usage".into()),
            Step::Event("t1".into()),
            Step::Event("t2".into()),
        ]),
    ])
    .await;
    let log = Arc::new(EventLog::default());
    let stream = open(&provider(&server, ms(5_000)), &log).await.unwrap();
    // The attempt that succeeded: its metadata held, replayed once and in
    // order before its first token; the failed attempt's is gone.
    assert_eq!(
        drain(stream).await.chunks,
        [meta("model"), meta("usage"), token("t1"), token("t2")]
    );
    assert_eq!(server.requests(), 2);
    assert_eq!(log.outline()[0], (Layer::Provider, Retrying));
}

#[tokio::test]
async fn time_to_first_content_spans_a_stall_cut_by_read_and_the_retry() {
    // Long enough that the answering attempt's first token, late on a loaded
    // machine, is never cut too (one more request).
    const READ: Duration = Duration::from_secs(1);
    let server = FaultServer::start([
        Fault::stream([Step::Meta("ping".into()), Step::Stall]),
        Fault::stream(Step::tokens(2)),
    ])
    .await;
    let log = Arc::new(EventLog::default());
    let stream = open(&provider(&server, READ), &log).await.unwrap();
    // The first attempt stalled after its headers and a ping: `read` cut it,
    // and the loop retried it.
    let retry = &log.events()[0];
    assert_eq!(retry.outcome, Retrying);
    assert_eq!(retry.category, Some(ErrorCategory::Transient));
    assert_eq!(server.requests(), 2);
    eventually(|| server.hangups() == 1).await;
    assert_eq!(
        server.hangups(),
        1,
        "the stalled attempt's connection was closed"
    );
    // At least the stall and the wait before the retry.
    let first = stream.time_to_first_content();
    assert!(first >= READ + retry.delay.unwrap(), "{first:?}");
    assert_eq!(drain(stream).await.chunks, [token("t1"), token("t2")]);
}

// ---- After it: the caller's, never retried.

#[tokio::test]
async fn nothing_after_the_first_token_is_retried() {
    let server = FaultServer::start([
        Fault::stream(Step::tokens(3).chain([Step::Cut])),
        Fault::stream(Step::tokens(3)),
    ])
    .await;
    let log = Arc::new(EventLog::default());
    let stream = open(&provider(&server, ms(5_000)), &log).await.unwrap();
    let drained = drain(stream).await;
    assert_eq!(drained.chunks, [token("t1"), token("t2"), token("t3")]);
    let [ProviderError::Transport(HttpError::Request(cut))] = &drained.errors[..] else {
        panic!("one error, the cut: {:?}", drained.errors)
    };
    assert_eq!(cut.category(), ErrorCategory::Transient, "{cut:?}");
    assert_eq!(server.requests(), 1);
    assert!(log.events().is_empty(), "{:?}", log.events());
}

#[tokio::test]
async fn read_cuts_a_stall_after_the_first_token_once_and_the_stream_ends() {
    // Long enough that late headers on a loaded machine are never cut (a retry).
    const READ: Duration = Duration::from_secs(1);
    let server = FaultServer::start([Fault::stream(Step::tokens(2).chain([Step::Stall]))]).await;
    let log = Arc::new(EventLog::default());
    let mut stream = open(&provider(&server, READ), &log).await.unwrap();
    for expected in ["t1", "t2"] {
        assert_eq!(stream.next().await.unwrap().unwrap(), token(expected));
    }
    let cut = within(stream.next()).await.unwrap().unwrap_err();
    assert_eq!(
        timeout_of(&cut),
        Some(TimeoutError::new(Boundary::Read, READ, Layer::Provider))
    );
    assert!(stream.next().await.is_none(), "then it ends");
    assert!(stream.next().await.is_none(), "and stays ended");
    // The expired stream let go of its connection, while still held.
    eventually(|| server.hangups() == 1).await;
    assert_eq!((server.hangups(), server.requests()), (1, 1));
    assert!(log.events().is_empty(), "not retried: {:?}", log.events());
    drop(stream);
}

#[tokio::test]
async fn read_never_cuts_a_stream_that_keeps_delivering() {
    // An event every read/4, for longer than 3 × read: a gap would have to
    // come 750 ms late on a loaded machine to be cut.
    const READ: Duration = Duration::from_secs(1);
    let server = FaultServer::start([Fault::steady(READ / 4, 14)]).await;
    let log = Arc::new(EventLog::default());
    let start = Instant::now();
    let stream = open(&provider(&server, READ), &log).await.unwrap();
    let drained = drain(stream).await;
    assert!(start.elapsed() > 3 * READ, "{:?}", start.elapsed());
    assert_eq!(drained.chunks.len(), 14);
    assert_eq!(drained.chunks[13], token("t14"));
    assert!(drained.errors.is_empty(), "{:?}", drained.errors);
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn total_ends_a_long_stream() {
    const TOTAL: Duration = Duration::from_millis(800);
    // 50 events 100 ms apart: 5 s, far past the total.
    let server = FaultServer::start([Fault::steady(ms(100), 50)]).await;
    let provider = provider(&server, ms(5_000)).with_stream_total(TOTAL);
    let log = Arc::new(EventLog::default());
    let start = Instant::now();
    let stream = open(&provider, &log).await.unwrap();
    let drained = within(drain(stream)).await;
    assert!(start.elapsed() >= TOTAL, "{:?}", start.elapsed());
    let n = drained.chunks.len();
    assert!((1..50).contains(&n), "{n} tokens");
    assert_eq!(drained.chunks[n - 1], token(&format!("t{n}")));
    let [cut] = &drained.errors[..] else {
        panic!("{:?}", drained.errors)
    };
    assert_eq!(
        timeout_of(cut),
        Some(TimeoutError::new(Boundary::Total, TOTAL, Layer::Provider))
    );
    assert_eq!(server.requests(), 1);
}

// ---- The stream as a value.

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = FaultServer::start([Fault::stream(Step::tokens(1).chain([Step::Stall]))]).await;
    let log = Arc::new(EventLog::default());
    let mut stream = open(&provider(&server, ms(30_000)), &log).await.unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap(), token("t1"));
    assert_eq!((server.open_connections(), server.hangups()), (1, 0));
    drop(stream);
    eventually(|| server.hangups() == 1).await;
    assert_eq!(server.hangups(), 1, "the server saw the client hang up");
    eventually(|| server.open_connections() == 0).await;
    assert_eq!(server.open_connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_and_its_stream_are_send_across_tokio_spawn() {
    let server = FaultServer::start([Fault::stream([Step::Cut]), Fault::steady(ms(10), 3)]).await;
    let provider = Arc::new(provider(&server, ms(5_000)));
    // The whole call in a spawned task, retry included.
    let task = tokio::spawn({
        let provider = provider.clone();
        async move {
            let log = Arc::new(EventLog::default());
            open(&provider, &log).await
        }
    });
    let stream = task.await.unwrap().unwrap();
    // The stream it returned, read in another one.
    let drained = tokio::spawn(drain(stream)).await.unwrap();
    assert_eq!(drained.chunks, [token("t1"), token("t2"), token("t3")]);
    assert_eq!(server.requests(), 2);
}

// ---- The fault server's streamed scripts, as a plain reqwest client reads them.

type Events =
    std::pin::Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>>>>;

/// A GET of `url` as a plain SSE client: the response's headers and its events.
async fn raw_sse(client: &reqwest::Client, url: &str) -> (reqwest::header::HeaderMap, Events) {
    let response = client.get(url).send().await.expect("the headers arrive");
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    (headers, Box::pin(response.bytes_stream().eventsource()))
}

#[tokio::test]
async fn a_script_is_server_sent_events_over_a_chunked_body() {
    let server = FaultServer::start([
        Fault::stream([
            Step::Meta("{\"usage\":1}".into()),
            Step::Event("Hello".into()),
            Step::Event("two\nlines".into()),
        ]),
        Fault::ok("next"),
    ])
    .await;
    let client = reqwest::Client::new();
    let (headers, events) = raw_sse(&client, &server.url("/v1/stream")).await;
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["transfer-encoding"], "chunked");
    let events: Vec<_> = events
        .map(|e| e.map(|e| (e.event, e.data)).expect("no error"))
        .collect()
        .await;
    let pair = |event: &str, data: &str| (event.to_owned(), data.to_owned());
    assert_eq!(
        events,
        [
            pair("meta", "{\"usage\":1}"),
            pair("message", "Hello"),
            pair("message", "two\nlines")
        ]
    );
    let hit = &server.hits()[0];
    assert_eq!((hit.events_sent, hit.hung_up), (2, None));
    // The body ended cleanly: the connection serves the next request.
    let next = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(next.text().await.unwrap(), "next");
    assert_eq!((server.requests(), server.open_connections()), (2, 1));
}

#[tokio::test]
async fn a_cut_ends_the_body_with_a_transient_error_after_what_was_sent() {
    let script = Step::tokens(2).chain([Step::Cut, Step::Event("never".into())]);
    let server = FaultServer::start([Fault::stream(script)]).await;
    let client = reqwest::Client::new();
    let (_, mut events) = raw_sse(&client, &server.url("/")).await;
    for token in ["t1", "t2"] {
        assert_eq!(events.next().await.unwrap().unwrap().data, token);
    }
    let Some(Err(EventStreamError::Transport(error))) = events.next().await else {
        panic!("the cut is an error")
    };
    assert_eq!(error.category(), ErrorCategory::Transient, "{error:?}");
    assert_eq!(server.hits()[0].events_sent, 2);
    assert_eq!(server.hangups(), 0, "the server closed it, not the client");
}

#[tokio::test]
async fn a_reset_before_any_event_fails_the_request_or_its_body() {
    let server = FaultServer::start([Fault::stream([Step::Reset])]).await;
    let client = reqwest::Client::new();
    // The RST may overtake the headers: then `send` fails instead of the body.
    let error = match client.get(server.url("/")).send().await {
        Err(error) => error,
        Ok(response) => match response.bytes_stream().eventsource().next().await {
            Some(Err(EventStreamError::Transport(error))) => error,
            other => panic!("{other:?}"),
        },
    };
    assert_eq!(error.category(), ErrorCategory::Transient, "{error:?}");
}

#[tokio::test]
async fn a_stall_holds_the_connection_until_the_client_hangs_up() {
    let script = Step::tokens(1).chain([Step::Stall]);
    let server = FaultServer::start([Fault::stream(script)]).await;
    let client = reqwest::Client::new();
    let (_, mut events) = raw_sse(&client, &server.url("/")).await;
    assert_eq!(events.next().await.unwrap().unwrap().data, "t1");
    assert!(
        tokio::time::timeout(ms(100), events.next()).await.is_err(),
        "nothing after t1"
    );
    assert_eq!((server.hangups(), server.open_connections()), (0, 1));
    drop(events);
    eventually(|| server.open_connections() == 0).await;
    assert_eq!((server.hangups(), server.open_connections()), (1, 0));
    let hit = &server.hits()[0];
    assert!(hit.hung_up.unwrap() > hit.at);
}

#[tokio::test]
async fn a_wait_sees_the_client_hang_up_before_it_is_over() {
    let script = [
        Step::Wait(Duration::from_secs(30)),
        Step::Event("late".into()),
    ];
    let server = FaultServer::start([Fault::stream(script)]).await;
    let client = reqwest::Client::new();
    let start = Instant::now();
    let (_, events) = raw_sse(&client, &server.url("/")).await;
    drop(events);
    eventually(|| server.hangups() == 1).await;
    assert_eq!(server.hangups(), 1);
    let hit = &server.hits()[0];
    assert_eq!(hit.events_sent, 0);
    assert!(hit.hung_up.unwrap() - start < Duration::from_secs(30));
}

#[tokio::test]
async fn a_steady_script_spaces_its_events() {
    let server = FaultServer::start([Fault::steady(ms(40), 3)]).await;
    let client = reqwest::Client::new();
    let start = Instant::now();
    let (_, events) = raw_sse(&client, &server.url("/")).await;
    let data: Vec<String> = events.map(|e| e.unwrap().data).collect().await;
    assert_eq!(data, ["t1", "t2", "t3"]);
    // Three waits of 40 ms before the last event: a lower bound only.
    assert!(start.elapsed() >= ms(120), "{:?}", start.elapsed());
}
