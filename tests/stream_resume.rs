//! Streams that resume (`Started::resume_with`) against the fault server's
//! resumable answers on 127.0.0.1, with a real reqwest client
//! (`nika_retry_tests::resuming`): by cursor and by continuation, each
//! answer cut or stalled 1–50 % of the way through, and the caller's text
//! equal to the server's, no event lost or repeated. Real clock, a few
//! streams each, a 300 ms `read`.

use std::time::Duration;

use nika_retry_tests::fault::resumable::{Break, Resumable};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::resuming::{Client, Way};

/// A server whose every request is a resumable answer of 40 events, 1 ms
/// apart, the first response of each stream broken `how`.
async fn server(how: Break, breaks: u32) -> (FaultServer, Resumable, Client) {
    let answers = Resumable::new(40, 52)
        .breaking(1, 50, how)
        .breaks(breaks)
        .every(Duration::from_millis(1));
    let server = FaultServer::start_bounded(
        [Fault::Resumable(answers.clone())],
        200,
        Duration::from_secs(60),
    )
    .await;
    let client = Client::new(&server.url(""));
    (server, answers, client)
}

/// Streams `ids` read `way`, resumed; each must equal the server's answer.
async fn every_stream_whole(way: Way, how: Break, breaks: u32, ids: std::ops::Range<u64>) {
    let (_server, answers, client) = server(how, breaks).await;
    for id in ids {
        let outcome = tokio::time::timeout(Duration::from_secs(20), client.complete(id, way, true))
            .await
            .expect("a stream ends within 20 s");
        assert!(outcome.error.is_none(), "{id}: {:?}", outcome.error);
        assert_eq!(
            outcome.text,
            answers.text(id),
            "stream {id}: lost or repeated events"
        );
        assert_eq!(
            answers.served(id),
            breaks + 1,
            "stream {id}: one request per break, and one more"
        );
    }
}

#[tokio::test]
async fn by_cursor_every_event_once() {
    every_stream_whole(Way::Cursor, Break::Either, 1, 0..8).await;
}

#[tokio::test]
async fn by_continuation_every_event_once() {
    every_stream_whole(Way::Continuation, Break::Either, 1, 0..8).await;
}

#[tokio::test]
async fn a_stall_resumes_after_read_as_a_cut_does() {
    every_stream_whole(Way::Cursor, Break::Stall, 1, 100..102).await;
}

#[tokio::test]
async fn two_breaks_spend_the_calls_three_attempts() {
    every_stream_whole(Way::Continuation, Break::Cut, 2, 200..203).await;
}

#[tokio::test]
async fn without_resume_with_the_cut_is_the_callers_last_item() {
    let (_server, answers, client) = server(Break::Cut, 1).await;
    let outcome = client.complete(7, Way::Cursor, false).await;
    assert!(outcome.error.is_some(), "{outcome:?}");
    let whole = answers.text(7);
    assert!(whole.starts_with(&outcome.text) && outcome.text.len() < whole.len());
    assert_eq!(answers.served(7), 1, "no second request");
}
