//! Streams that resume, soaked: 1 000 streamed answers against the fault
//! server on 127.0.0.1, each cut or stalled 1–50 % of the way through
//! (which, and where, drawn from a seed), read with `resume_with` by
//! cursor, again by continuation, and, beside them, the same 1 000 without
//! it. Bounded: 50 streams at a time, 30 events each 1 ms apart, a 300 ms
//! `read`, a minute at most per round (RELIABILITY.md, "Streams that
//! resume").

use std::time::Duration;

use futures_util::StreamExt;
use nika_retry_tests::fault::resumable::{Break, Resumable};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::resuming::{Client, Way};
use tokio::time::Instant;

const STREAMS: u64 = 1_000;
const AT_ONCE: usize = 50;

/// What a round of streams came to.
#[derive(Debug, Default)]
struct Round {
    complete: u64,
    /// Streams whose text repeats or skips an event of the server's.
    wrong: u64,
    /// Streams that ended early (their text a true prefix of the answer).
    short: u64,
    requests: usize,
    elapsed: Duration,
}

/// `STREAMS` streams against a fresh server, resumed by `way` if `resume`.
async fn round(way: Way, resume: bool) -> Round {
    let answers = Resumable::new(30, 0x52)
        .breaking(1, 50, Break::Either)
        .every(Duration::from_millis(1));
    let server = FaultServer::start_bounded(
        [Fault::Resumable(answers.clone())],
        4 * STREAMS as usize,
        Duration::from_secs(120),
    )
    .await;
    let client = Client::new(&server.url(""));
    let start = Instant::now();
    let outcomes: Vec<_> = futures_util::stream::iter(0..STREAMS)
        .map(|id| {
            let client = client.clone();
            async move { (id, client.complete(id, way, resume).await) }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    let mut round = Round {
        elapsed: start.elapsed(),
        requests: server.requests(),
        ..Round::default()
    };
    for (id, outcome) in outcomes {
        let whole = answers.text(id);
        if outcome.text == whole && outcome.error.is_none() {
            round.complete += 1;
        } else if whole.starts_with(&outcome.text) && outcome.text.len() < whole.len() {
            round.short += 1;
        } else {
            round.wrong += 1;
        }
    }
    println!(
        "{way:?}, resume_with {resume}: {} of {STREAMS} complete, {} short, {} wrong, {} requests, {:.1} s",
        round.complete,
        round.short,
        round.wrong,
        round.requests,
        round.elapsed.as_secs_f64()
    );
    round
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_cut_streams_resume_whole_by_cursor_and_by_continuation_and_without_resume_with_none_does()
 {
    let resumed = tokio::time::timeout(Duration::from_secs(60), round(Way::Cursor, true))
        .await
        .expect("the resumed round within a minute");
    assert_eq!(resumed.wrong, 0, "no event lost or repeated: {resumed:?}");
    assert!(
        resumed.complete * 100 >= STREAMS * 99,
        "at least 99 % complete: {resumed:?}"
    );
    // Every stream broke once: one request each, and one resume.
    assert!(resumed.requests >= 2 * STREAMS as usize, "{resumed:?}");

    let continued = tokio::time::timeout(Duration::from_secs(60), round(Way::Continuation, true))
        .await
        .expect("the continued round within a minute");
    assert_eq!(
        continued.wrong, 0,
        "no text lost or repeated: {continued:?}"
    );
    assert!(
        continued.complete * 100 >= STREAMS * 99,
        "at least 99 % complete: {continued:?}"
    );

    let today = tokio::time::timeout(Duration::from_secs(60), round(Way::Cursor, false))
        .await
        .expect("the round without resume_with within a minute");
    assert_eq!(today.wrong, 0, "{today:?}");
    assert_eq!(
        today.complete, 0,
        "every stream broke after its content: {today:?}"
    );
    assert_eq!(
        today.requests, STREAMS as usize,
        "one request each: {today:?}"
    );
}
