//! `Started` and `Starting` on a paused clock, with hand-made streams.

use core::future::poll_fn;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_core::Stream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::carried::Carried;
use super::{MAX_HELD, Started, started, started_when};
use crate::time::Total;
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::{Boundary, TimeoutError};

type Item = Result<u32, TimeoutError>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stream of what a spawned task sends: items at the times the test says.
struct Channel {
    rx: mpsc::Receiver<Item>,
    dropped: Arc<AtomicBool>,
}

impl Stream for Channel {
    type Item = Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::Relaxed);
    }
}

/// Whether the stream was dropped (the connection closed).
struct Dropped(Arc<AtomicBool>);

impl Dropped {
    fn is_closed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// One step of a script: wait, then send an item; or wait for ever.
enum Step {
    After(u64, Item),
    Stall,
}

fn ok(after_ms: u64, n: u32) -> Step {
    Step::After(after_ms, Ok(n))
}

/// A stream that plays `steps`, then ends; and what tells it was dropped.
fn script(steps: Vec<Step>) -> (Channel, Dropped) {
    let (tx, rx) = mpsc::channel(1);
    let dropped = Arc::new(AtomicBool::new(false));
    let channel = Channel {
        rx,
        dropped: Arc::clone(&dropped),
    };
    tokio::spawn(async move {
        for step in steps {
            match step {
                Step::After(wait, item) => {
                    tokio::time::sleep(ms(wait)).await;
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
                Step::Stall => core::future::pending::<()>().await,
            }
        }
    });
    (channel, Dropped(dropped))
}

/// Items that are always ready: `0..n`, then the end; counts its polls.
struct Ready {
    next: u32,
    end: u32,
}

impl Stream for Ready {
    type Item = Item;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Item>> {
        let n = self.next;
        self.next += 1;
        Poll::Ready((n < self.end).then_some(Ok(n)))
    }
}

/// The next item, failing the test (rather than hanging it) if nothing
/// comes within an hour of the paused clock.
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    let next = poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx));
    tokio::time::timeout(Duration::from_secs(3600), next)
        .await
        .expect("an item or the end within an hour")
}

/// Every item until the end, and the instant of the end.
async fn drain<S: Stream + Unpin>(stream: &mut S) -> (Vec<S::Item>, Instant) {
    let mut items = Vec::new();
    while let Some(item) = next(stream).await {
        items.push(item);
    }
    (items, Instant::now())
}

fn limits(read: Option<Duration>, total: Option<Duration>) -> Option<Carried> {
    Some(Carried {
        read,
        total: total.map(|limit| Total::new(Instant::now() + limit, limit)),
        layer: Layer::Provider,
    })
}

/// `stream` as started with its first item, under `limits`.
fn under<S: Stream>(stream: S, limits: Option<Carried>) -> Started<S> {
    Started::new(Some(stream), Vec::new(), None, limits, Duration::ZERO)
}

fn expired(boundary: Boundary, limit: Duration) -> Item {
    Err(TimeoutError::new(boundary, limit, Layer::Provider))
}

#[tokio::test(start_paused = true)]
async fn ready_items_touch_no_timer_and_take_no_time() {
    let start = Instant::now();
    let mut items = under(
        Ready { next: 0, end: 1000 },
        limits(Some(ms(10)), Some(ms(20))),
    );
    let (got, end) = drain(&mut items).await;
    assert_eq!(got.len(), 1000);
    assert!(got.iter().all(Result::is_ok));
    assert!(!items.has_timer(), "no item waited: no timer");
    assert_eq!(end, start);
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_waits_arms_one_timer_only_under_a_limit() {
    let (stream, _tx) = script(vec![ok(5, 1), ok(5, 2)]);
    let mut items = under(stream, limits(Some(ms(10)), None));
    assert_eq!(drain(&mut items).await.0, [Ok(1), Ok(2)]);
    assert!(items.has_timer());

    let (stream, _tx) = script(vec![ok(5, 1), ok(5, 2)]);
    let mut items = under(stream, None);
    assert_eq!(drain(&mut items).await.0, [Ok(1), Ok(2)]);
    assert!(!items.has_timer(), "no limit: no timer");
}

#[tokio::test(start_paused = true)]
async fn a_live_stream_is_never_cut_by_read() {
    let start = Instant::now();
    // 200 items, one every read/2: 100 reads long in all.
    let steps = (0..200).map(|n| ok(50, n)).collect();
    let (stream, _tx) = script(steps);
    let mut items = under(stream, limits(Some(ms(100)), None));
    let (got, end) = drain(&mut items).await;
    assert_eq!(got, (0..200).map(Ok).collect::<Vec<_>>());
    assert_eq!(end - start, ms(50 * 200));
}

#[tokio::test(start_paused = true)]
async fn read_cuts_a_stall_with_one_error_then_the_stream_stays_ended() {
    let start = Instant::now();
    let (stream, tx) = script(vec![ok(30, 1), ok(30, 2), Step::Stall]);
    let mut items = under(stream, limits(Some(ms(100)), None));
    assert_eq!(next(&mut items).await, Some(Ok(1)));
    assert_eq!(next(&mut items).await, Some(Ok(2)));
    assert!(!tx.is_closed());
    assert_eq!(
        next(&mut items).await,
        Some(expired(Boundary::Read, ms(100)))
    );
    // The last item at 60 ms, then nothing: cut 100 ms later.
    assert_eq!(Instant::now() - start, ms(160));
    assert!(tx.is_closed(), "the stream is dropped at the expiry");
    assert_eq!(next(&mut items).await, None);
    assert_eq!(next(&mut items).await, None, "fused");
    assert!(futures_core::FusedStream::is_terminated(&items));
}

#[tokio::test(start_paused = true)]
async fn total_ends_a_long_live_stream() {
    let start = Instant::now();
    let steps = (0..100).map(|n| ok(50, n)).collect();
    let (stream, tx) = script(steps);
    let mut items = under(stream, limits(Some(ms(100)), Some(ms(1020))));
    let (got, end) = drain(&mut items).await;
    assert_eq!(got.len(), 21);
    assert_eq!(got[19], Ok(19));
    assert_eq!(got[20], expired(Boundary::Total, ms(1020)));
    assert_eq!(end - start, ms(1020));
    assert!(tx.is_closed());
}

#[tokio::test(start_paused = true)]
async fn the_earlier_of_read_and_total_names_the_boundary() {
    let (stream, _tx) = script(vec![ok(10, 1), Step::Stall]);
    // Total at 50 ms, before the read limit of the stall (10 + 100 ms).
    let start = Instant::now();
    let mut items = under(stream, limits(Some(ms(100)), Some(ms(50))));
    assert_eq!(next(&mut items).await, Some(Ok(1)));
    assert_eq!(
        next(&mut items).await,
        Some(expired(Boundary::Total, ms(50)))
    );
    assert_eq!(Instant::now() - start, ms(50), "cut at total, not at read");

    // Total alone cuts a stall at its deadline.
    let (stream, _tx) = script(vec![Step::Stall]);
    let start = Instant::now();
    let mut items = under(stream, limits(None, Some(ms(70))));
    assert_eq!(
        next(&mut items).await,
        Some(expired(Boundary::Total, ms(70)))
    );
    assert_eq!(Instant::now() - start, ms(70));
}

#[tokio::test(start_paused = true)]
async fn a_caller_slower_than_read_between_items_is_not_the_streams_stall() {
    let (stream, _tx) = script(vec![ok(10, 1), ok(10, 2), ok(10, 3)]);
    let mut items = under(stream, limits(Some(ms(100)), None));
    let mut got = Vec::new();
    while let Some(item) = next(&mut items).await {
        got.push(item);
        // The caller takes longer than `read` over each item.
        tokio::time::sleep(ms(300)).await;
    }
    assert_eq!(got, [Ok(1), Ok(2), Ok(3)]);
}

#[tokio::test(start_paused = true)]
async fn without_limits_a_stall_is_never_cut() {
    let (stream, tx) = script(vec![ok(0, 1), Step::Stall]);
    let mut items = under(stream, None);
    assert_eq!(next(&mut items).await, Some(Ok(1)));
    let next = poll_fn(|cx| Pin::new(&mut items).poll_next(cx));
    let waited = tokio::time::timeout(Duration::from_secs(3600), next).await;
    assert!(waited.is_err(), "still waiting after an hour");
    assert!(!items.has_timer() && !tx.is_closed());
}

#[tokio::test(start_paused = true)]
async fn held_items_are_replayed_once_in_order_then_the_rest() {
    let steps = vec![ok(10, 100), ok(10, 101), ok(10, 1), ok(10, 2), ok(10, 102)];
    let (stream, _tx) = script(steps);
    let start = Instant::now();
    let mut items = started_when(stream, |n: &u32| *n < 100).await.unwrap();
    assert_eq!(items.time_to_first_content(), ms(30));
    assert_eq!(Instant::now() - start, ms(30));
    let (got, _) = drain(&mut items).await;
    assert_eq!(got, [Ok(100), Ok(101), Ok(1), Ok(2), Ok(102)]);
}

#[tokio::test(start_paused = true)]
async fn started_takes_the_first_ok_item_as_content() {
    let (stream, _tx) = script(vec![ok(10, 7), ok(10, 8)]);
    let mut items = started(stream).await.unwrap();
    assert_eq!(items.time_to_first_content(), ms(10));
    assert_eq!(items.size_hint().0, 1, "the content item, to replay");
    assert_eq!(drain(&mut items).await.0, [Ok(7), Ok(8)]);
}

#[tokio::test(start_paused = true)]
async fn an_error_before_content_is_the_output_and_drops_what_was_held() {
    let cut = TimeoutError::new(Boundary::Read, ms(1), Layer::Http);
    let (stream, tx) = script(vec![
        ok(10, 100),
        Step::After(10, Err(cut.clone())),
        ok(10, 1),
    ]);
    let out = started_when(stream, |n: &u32| *n < 100).await;
    assert_eq!(out.unwrap_err(), cut);
    assert!(tx.is_closed(), "the stream is dropped with the error");
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_before_content_replays_what_it_held() {
    let (stream, _tx) = script(vec![ok(10, 100), ok(10, 101)]);
    let mut items = started_when(stream, |_: &u32| false).await.unwrap();
    assert_eq!(items.time_to_first_content(), ms(20));
    assert_eq!(items.size_hint(), (2, Some(2)));
    assert_eq!(drain(&mut items).await.0, [Ok(100), Ok(101)]);
    assert_eq!(next(&mut items).await, None);

    let (stream, _tx) = script(vec![]);
    let mut items = started(stream).await.unwrap();
    assert_eq!(next(&mut items).await, None, "an empty stream stays empty");
}

#[tokio::test(start_paused = true)]
async fn a_predicate_that_never_says_content_holds_at_most_max_held() {
    let end = 3 * MAX_HELD as u32;
    let mut calls = 0;
    let mut items = started_when(Ready { next: 0, end }, |_: &u32| {
        calls += 1;
        false
    })
    .await
    .unwrap();
    assert_eq!(items.size_hint().0, MAX_HELD, "held up to the bound");
    let (got, _) = drain(&mut items).await;
    assert_eq!(got, (0..end).map(Ok).collect::<Vec<_>>());
    assert_eq!(
        calls, MAX_HELD,
        "asked only before the stream counted as started"
    );
}

#[test]
fn started_is_send_and_unpin_when_its_stream_is() {
    fn send_unpin<T: Send + Unpin>() {}
    send_unpin::<Started<Channel>>();
    send_unpin::<super::Starting<Channel, fn(&u32) -> bool>>();
}
