//! Streamed responses against the loopback fault server with a real reqwest
//! client: the fault server's streamed scripts as a plain client reads them.

use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::{Classify, ErrorCategory};
use nika_retry_tests::fault::{Fault, FaultServer, Step};
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
