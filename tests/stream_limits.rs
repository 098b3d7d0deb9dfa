//! A stream under the policy of the fn that opened it (docs/streams.md), with hand-made streams on a paused clock: before the first
//! content the attempt's limits, classification and budget apply; after it
//! `Started` carries the fn's `read` and the call's `total`, and nothing is
//! retried. The real-HTTP side is in tests/streaming.rs.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use nika_retry::stream::{self, Started};
use nika_retry::{Boundary, Classify, Layer, TimeoutError, retry, timeout};
use tokio::sync::mpsc;
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[derive(Debug, PartialEq, thiserror::Error, Classify)]
enum Error {
    /// The body was cut: transient, so retried before any content.
    #[error("connection reset")]
    #[category(transient)]
    Reset,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// A server-sent event: metadata (held before content) or a token.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Event {
    Meta(u32),
    Token(u32),
}

type Item = Result<Event, Error>;

fn is_token(event: &Event) -> bool {
    matches!(event, Event::Token(_))
}

/// One step of a scripted response.
enum Step {
    /// Wait, then send the item.
    After(u64, Item),
    /// Send nothing more, and keep the response open.
    Stall,
}

use Step::{After, Stall};

fn token(after_ms: u64, n: u32) -> Step {
    After(after_ms, Ok(Event::Token(n)))
}

fn meta(after_ms: u64, n: u32) -> Step {
    After(after_ms, Ok(Event::Meta(n)))
}

/// A response body: what a spawned task sends, at the times its script says.
struct Body(mpsc::Receiver<Item>);

impl Stream for Body {
    type Item = Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        self.0.poll_recv(cx)
    }
}

fn body(steps: Vec<Step>) -> Body {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        for step in steps {
            match step {
                After(wait, item) => {
                    tokio::time::sleep(ms(wait)).await;
                    if tx.send(item).await.is_err() {
                        return;
                    }
                }
                Stall => core::future::pending::<()>().await,
            }
        }
    });
    Body(rx)
}

/// The responses of a server, one per request, and the requests it got.
struct Server {
    responses: Mutex<VecDeque<Vec<Step>>>,
    requests: AtomicU32,
}

impl Server {
    fn new(responses: Vec<Vec<Step>>) -> Server {
        Server {
            responses: Mutex::new(responses.into()),
            requests: AtomicU32::new(0),
        }
    }

    /// Sends the next response's body. A request past the script fails the
    /// test: a test that made one more request than it planned says so.
    fn request(&self) -> Body {
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let steps = self.responses.lock().unwrap().pop_front();
        body(steps.unwrap_or_else(|| panic!("request {n} has no scripted response")))
    }

    fn requests(&self) -> u32 {
        self.requests.load(Ordering::SeqCst)
    }
}

/// What `StreamExt::next` does, failing the test (rather than hanging it)
/// if nothing comes within an hour of the paused clock.
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    let next = core::future::poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx));
    tokio::time::timeout(Duration::from_secs(3600), next)
        .await
        .expect("an item or the end within an hour")
}

/// Whether `stream` still has nothing after an hour.
async fn still_waiting_after_an_hour<S: Stream + Unpin>(stream: &mut S) -> bool {
    let next = core::future::poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx));
    tokio::time::timeout(Duration::from_secs(3600), next)
        .await
        .is_err()
}

/// Every item to the end.
async fn drain<S: Stream + Unpin>(stream: &mut S) -> Vec<S::Item> {
    let mut items = Vec::new();
    while let Some(item) = next(stream).await {
        items.push(item);
    }
    items
}

fn expired(boundary: Boundary, limit: Duration, layer: Layer) -> Item {
    Err(Error::Timeout(TimeoutError::new(boundary, limit, layer)))
}

/// A provider call as a verb crate writes one: 3 attempts 100 ms apart, a
/// read limit of 1 s, each attempt bounded to 5 s, the call to 30 s.
#[retry(layer = "provider", backoff = "100ms", jitter = 0.0)]
#[timeout(read = "1s", attempt = "5s", total = "30s")]
async fn complete(server: &Server) -> Result<Started<Body>, Error> {
    stream::started_when(server.request(), is_token).await
}

#[tokio::test(start_paused = true)]
async fn a_stall_before_content_is_cut_by_read_and_retried() {
    let server = Server::new(vec![
        vec![meta(10, 1), Stall],
        vec![meta(10, 2), token(50, 1), token(10, 2)],
    ]);
    let mut events = complete(&server).await.unwrap();
    assert_eq!(server.requests(), 2);
    // The first attempt's metadata is gone with it; the second's is replayed.
    let items = drain(&mut events).await;
    let want = [Event::Meta(2), Event::Token(1), Event::Token(2)];
    assert_eq!(items, want.map(Ok));
    // Read cut the first at 10 + 1000 ms; 100 ms of backoff; 60 ms to the token.
    assert_eq!(events.time_to_first_content(), ms(1010 + 100 + 60));
}

#[tokio::test(start_paused = true)]
async fn an_error_before_content_fails_the_attempt_and_is_retried() {
    let server = Server::new(vec![
        vec![meta(10, 1), After(10, Err(Error::Reset))],
        vec![After(10, Err(Error::Reset))],
        vec![token(10, 1)],
    ]);
    let mut events = complete(&server).await.unwrap();
    assert_eq!(server.requests(), 3);
    assert_eq!(drain(&mut events).await, [Ok(Event::Token(1))]);
    // Backoff 100 ms, then 400 ms (the provider layer's ×4).
    assert_eq!(events.time_to_first_content(), ms(20 + 100 + 10 + 400 + 10));
}

#[tokio::test(start_paused = true)]
async fn errors_before_content_share_the_attempts_budget() {
    let server = Server::new(vec![
        vec![After(10, Err(Error::Reset))],
        vec![After(10, Err(Error::Reset))],
        vec![After(10, Err(Error::Reset))],
        vec![token(10, 1)],
    ]);
    assert_eq!(complete(&server).await.unwrap_err(), Error::Reset);
    assert_eq!(server.requests(), 3, "the provider layer's 3 attempts");
}

#[tokio::test(start_paused = true)]
async fn attempt_bounds_the_time_to_first_content() {
    // Metadata every 500 ms keeps `read` quiet, but no token comes: the
    // attempt's 5 s cut it, and the next attempt delivers.
    let trickle = (0..100).map(|n| meta(500, n)).collect();
    let server = Server::new(vec![trickle, vec![token(10, 1)]]);
    let start = Instant::now();
    let mut events = complete(&server).await.unwrap();
    assert_eq!(server.requests(), 2);
    assert_eq!(start.elapsed(), ms(5000 + 100 + 10));
    assert_eq!(drain(&mut events).await, [Ok(Event::Token(1))]);
}

#[tokio::test(start_paused = true)]
async fn total_bounds_the_retries_before_content() {
    #[retry(
        layer = "provider",
        attempts = 10,
        backoff = "100ms",
        multiplier = 1.0,
        jitter = 0.0
    )]
    #[timeout(read = "1s", total = "2500ms")]
    async fn complete(server: &Server) -> Result<Started<Body>, Error> {
        stream::started(server.request()).await
    }
    let server = Server::new((0..10).map(|_| vec![Stall]).collect());
    let err = complete(&server).await.unwrap_err();
    let total = TimeoutError::new(Boundary::Total, ms(2500), Layer::Provider);
    assert_eq!(err, Error::Timeout(total));
    // Cut by read at 1 s and 2.1 s; the third, from 2.2 s, by total.
    assert_eq!(server.requests(), 3);
}

#[tokio::test(start_paused = true)]
async fn after_content_read_cuts_a_stall_with_one_error_and_nothing_is_retried() {
    let server = Server::new(vec![vec![token(10, 1), token(300, 2), Stall]]);
    let start = Instant::now();
    let mut events = complete(&server).await.unwrap();
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(2))));
    let read = expired(Boundary::Read, ms(1000), Layer::Provider);
    assert_eq!(next(&mut events).await, Some(read));
    assert_eq!(start.elapsed(), ms(310 + 1000));
    assert_eq!(next(&mut events).await, None);
    assert_eq!(next(&mut events).await, None, "and it stays ended");
    assert_eq!(server.requests(), 1, "never retried after content");
}

#[tokio::test(start_paused = true)]
async fn after_content_an_error_item_is_the_callers_and_not_retried() {
    let server = Server::new(vec![vec![
        token(10, 1),
        After(10, Err(Error::Reset)),
        token(10, 2),
    ]]);
    let mut events = complete(&server).await.unwrap();
    let items = drain(&mut events).await;
    assert_eq!(
        items,
        [Ok(Event::Token(1)), Err(Error::Reset), Ok(Event::Token(2))]
    );
    assert_eq!(server.requests(), 1);
}

#[tokio::test(start_paused = true)]
async fn total_ends_a_long_stream() {
    // A token every 500 ms for ever: `read` never expires, `total` (30 s
    // from the call's start) does.
    let forever = (0..1000).map(|n| token(500, n)).collect();
    let server = Server::new(vec![forever]);
    let start = Instant::now();
    let mut events = complete(&server).await.unwrap();
    let items = drain(&mut events).await;
    assert_eq!(start.elapsed(), ms(30_000));
    let total = expired(Boundary::Total, ms(30_000), Layer::Provider);
    assert_eq!(items.last(), Some(&total));
    assert_eq!(
        items.len(),
        59 + 1,
        "a token every 500 ms until 30 s, then the expiry"
    );
}

#[tokio::test(start_paused = true)]
async fn a_live_stream_is_never_cut_by_read() {
    #[retry(layer = "provider")]
    #[timeout(read = "1s")]
    async fn complete(server: &Server) -> Result<Started<Body>, Error> {
        stream::started(server.request()).await
    }
    // A token every read/2 for 100 reads.
    let live = (0..200).map(|n| token(500, n)).collect();
    let server = Server::new(vec![live]);
    let start = Instant::now();
    let mut events = complete(&server).await.unwrap();
    let items = drain(&mut events).await;
    assert_eq!(
        items,
        (0..200).map(|n| Ok(Event::Token(n))).collect::<Vec<_>>()
    );
    assert_eq!(start.elapsed(), ms(500 * 200));
}

#[tokio::test(start_paused = true)]
async fn a_body_that_waits_before_started_still_gets_its_frame() {
    #[retry(layer = "provider")]
    #[timeout(read = "1s")]
    async fn complete(server: &Server) -> Result<Started<Body>, Error> {
        // The headers take a while: the call is past its first poll.
        tokio::time::sleep(ms(200)).await;
        stream::started(server.request()).await
    }
    let server = Server::new(vec![vec![token(10, 1), Stall]]);
    let mut events = complete(&server).await.unwrap();
    assert_eq!(events.time_to_first_content(), ms(210));
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    let read = expired(Boundary::Read, ms(1000), Layer::Provider);
    assert_eq!(next(&mut events).await, Some(read));
}

#[tokio::test(start_paused = true)]
async fn outside_an_annotated_fn_no_limit_applies() {
    let server = Server::new(vec![
        vec![After(10, Err(Error::Reset))],
        vec![token(10, 1), Stall],
    ]);
    // An error before content is the output; nothing retries it.
    let err = stream::started(server.request()).await.unwrap_err();
    assert_eq!(err, Error::Reset);
    let mut events = stream::started(server.request()).await.unwrap();
    assert_eq!(events.time_to_first_content(), ms(10));
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    assert!(
        still_waiting_after_an_hour(&mut events).await,
        "a stall is not cut: still waiting after an hour"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_without_timeout_carries_no_limit() {
    #[retry(layer = "provider")]
    async fn complete(server: &Server) -> Result<Started<Body>, Error> {
        stream::started(server.request()).await
    }
    let server = Server::new(vec![vec![token(10, 1), Stall]]);
    let mut events = complete(&server).await.unwrap();
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    assert!(
        still_waiting_after_an_hour(&mut events).await,
        "no limit in the fn: none on the stream"
    );
}

#[tokio::test(start_paused = true)]
async fn a_started_stream_is_send_across_spawn() {
    const fn send_unpin<T: Send + Unpin>() {}
    const _: () = send_unpin::<Started<Body>>();

    let server = std::sync::Arc::new(Server::new(vec![vec![token(10, 1), token(10, 2), Stall]]));
    let opened = std::sync::Arc::clone(&server);
    // The call and the stream it gives both move to another task.
    let events = tokio::spawn(async move { complete(&opened).await.unwrap() })
        .await
        .unwrap();
    let items = tokio::spawn(async move {
        let mut events = events;
        drain(&mut events).await
    })
    .await
    .unwrap();
    let read = expired(Boundary::Read, ms(1000), Layer::Provider);
    assert_eq!(items, [Ok(Event::Token(1)), Ok(Event::Token(2)), read]);
}

/// The http call of a provider call: its own, shorter, read limit.
#[retry(layer = "http", backoff = "10ms", jitter = 0.0)]
#[timeout(read = "300ms")]
async fn http_send(server: &Server) -> Result<Started<Body>, Error> {
    stream::started(server.request()).await
}

#[tokio::test(start_paused = true)]
async fn nested_fns_take_the_innermost_fns_limits() {
    #[retry(layer = "provider")]
    #[timeout(read = "10s")]
    async fn complete(server: &Server) -> Result<Started<Body>, Error> {
        http_send(server).await
    }
    let server = Server::new(vec![vec![token(10, 1), Stall]]);
    let mut events = complete(&server).await.unwrap();
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    let read = expired(Boundary::Read, ms(300), Layer::Http);
    assert_eq!(next(&mut events).await, Some(read), "the http fn's 300 ms");

    // An inner fn without limits: none, though the outer fn has some.
    #[retry(layer = "http")]
    async fn bare(server: &Server) -> Result<Started<Body>, Error> {
        stream::started(server.request()).await
    }
    #[retry(layer = "provider")]
    #[timeout(read = "1s")]
    async fn around_bare(server: &Server) -> Result<Started<Body>, Error> {
        bare(server).await
    }
    let server = Server::new(vec![vec![token(10, 1), Stall]]);
    let mut events = around_bare(&server).await.unwrap();
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    assert!(still_waiting_after_an_hour(&mut events).await);
}

#[tokio::test(start_paused = true)]
async fn timeout_alone_puts_its_limits_on_the_stream_even_inside_a_call() {
    #[timeout(layer = "provider", read = "200ms")]
    async fn once(server: &Server) -> Result<Started<Body>, Error> {
        stream::started(server.request()).await
    }
    let server = Server::new(vec![vec![token(10, 1), Stall]]);
    let mut events = once(&server).await.unwrap();
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    let read = expired(Boundary::Read, ms(200), Layer::Provider);
    assert_eq!(next(&mut events).await, Some(read));

    #[retry(layer = "task")]
    #[timeout(total = "1h")]
    async fn task(server: &Server) -> Result<Started<Body>, Error> {
        // Past the call's first poll, so that its own frame is in force.
        tokio::time::sleep(ms(5)).await;
        once(server).await
    }
    let server = Server::new(vec![vec![token(10, 1), Stall]]);
    let start = Instant::now();
    let mut events = task(&server).await.unwrap();
    assert_eq!(next(&mut events).await, Some(Ok(Event::Token(1))));
    let read = expired(Boundary::Read, ms(200), Layer::Provider);
    assert_eq!(next(&mut events).await, Some(read), "the inner fn's");
    assert_eq!(start.elapsed(), ms(5 + 10 + 200));
}

#[tokio::test(start_paused = true)]
async fn the_metadata_of_the_attempt_that_succeeded_is_replayed_once_in_order() {
    let server = Server::new(vec![
        vec![meta(10, 1), meta(10, 2), After(10, Err(Error::Reset))],
        vec![
            meta(10, 3),
            meta(10, 4),
            token(10, 1),
            meta(10, 5),
            token(10, 2),
        ],
    ]);
    let mut events = complete(&server).await.unwrap();
    let items = drain(&mut events).await;
    let want = [
        Event::Meta(3),
        Event::Meta(4),
        Event::Token(1),
        Event::Meta(5),
        Event::Token(2),
    ];
    assert_eq!(items, want.map(Ok));
}
