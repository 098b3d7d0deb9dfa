//! `Classify::timeout`: the time limit an error is, found
//! in the error shapes the docs recommend, where `TimeoutError::find` cannot
//! see it (thiserror's `#[error(transparent)]` hides it from `source()`).

use std::io;
use std::time::Duration;

use nika_retry::{Boundary, Classify, Layer, TimeoutError, timeout};
use nika_retry_tests::fault::{Fault, FaultServer, HangingPort};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Another crate's type that happens to have the name.
mod other {
    #[derive(Debug)]
    pub struct TimeoutError;
}

/// Every shape a user writes a timeout into.
#[derive(Debug, thiserror::Error, nika_retry::Classify)]
enum ToolError {
    /// The shape every doc recommends.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    /// An `io::Error` that may hold one.
    #[error(transparent)]
    #[category(transparent)]
    Io(io::Error),
    /// A variant whose one field is a `TimeoutError`, with its own category.
    #[error("too slow: {0}")]
    #[category(transient)]
    Slow(nika_retry::TimeoutError),
    /// The same, named.
    #[error("late: {limit}")]
    #[category(permanent)]
    Late { limit: TimeoutError },
    /// A type of that name from elsewhere: compiles, and is not ours.
    #[error("elsewhere")]
    #[category(transient)]
    Elsewhere(other::TimeoutError),
    /// Two fields: not "its one field".
    #[error("two")]
    #[category(transient)]
    Two(TimeoutError, u32),
    #[error("other")]
    #[category(permanent)]
    Other,
}

/// A struct holding one, and a generic wrapper delegating to its field.
#[derive(Debug, nika_retry::Classify)]
#[category(transient)]
struct Deadline(TimeoutError);

#[derive(Debug, nika_retry::Classify)]
#[category(transparent)]
struct Wrap<E>(E);

fn limit(boundary: Boundary) -> TimeoutError {
    TimeoutError::new(boundary, Duration::from_secs(30), Layer::Task)
}

#[test]
fn found_through_a_transparent_variant_where_find_is_blind() {
    let total = limit(Boundary::Total);
    let err = ToolError::from(total.clone());
    assert_eq!(err.timeout(), Some(&total));
    // The trap the docs describe beside `find`: the transparent variant
    // forwards `source()` past the TimeoutError.
    assert_eq!(TimeoutError::find(&err), None);
    // Through a generic transparent wrapper too.
    assert_eq!(Wrap(ToolError::from(total.clone())).timeout(), Some(&total));
    assert_eq!(Wrap(total.clone()).timeout(), Some(&total));
}

#[test]
fn found_in_a_variant_whose_one_field_is_a_timeout_error() {
    let attempt = limit(Boundary::Attempt);
    assert_eq!(ToolError::Slow(attempt.clone()).timeout(), Some(&attempt));
    let late = ToolError::Late {
        limit: attempt.clone(),
    };
    assert_eq!(late.timeout(), Some(&attempt));
    // Its category stays the variant's own.
    assert_eq!(late.category(), nika_retry::ErrorCategory::Permanent);
    assert_eq!(Deadline(attempt.clone()).timeout(), Some(&attempt));
}

#[test]
fn not_found_where_there_is_none() {
    assert_eq!(ToolError::Other.timeout(), None);
    assert_eq!(ToolError::Elsewhere(other::TimeoutError).timeout(), None);
    assert_eq!(ToolError::Two(limit(Boundary::Read), 2).timeout(), None);
    assert_eq!(ToolError::Io(io::Error::other("disk full")).timeout(), None);
    assert_eq!(
        Wrap(io::Error::from(io::ErrorKind::TimedOut)).timeout(),
        None
    );
}

/// A tool returning `io::Error`, bounded per run.
#[timeout(layer = "tool", attempt = "1s")]
async fn shell(stall: Duration) -> Result<(), io::Error> {
    tokio::time::sleep(stall).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn found_in_the_io_error_of_a_timed_out_tool_and_through_a_variant_holding_it() {
    let err = shell(Duration::from_secs(60)).await.unwrap_err();
    let expected = TimeoutError::new(Boundary::Attempt, Duration::from_secs(1), Layer::Tool);
    assert_eq!(err.timeout(), Some(&expected));
    let wrapped = ToolError::Io(err);
    assert_eq!(wrapped.timeout(), Some(&expected));
    assert!(shell(ms(10)).await.is_ok());
}

#[derive(Debug, thiserror::Error, nika_retry::Classify)]
enum HttpError {
    #[error(transparent)]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// One GET whose connection set-up is bounded by the client's connector.
#[timeout(layer = "http", connect = "200ms")]
async fn get(client: &reqwest::Client, url: &str) -> Result<String, HttpError> {
    Ok(client.get(url).send().await?.text().await?)
}

#[tokio::test]
async fn found_in_a_reqwest_error_whose_connector_hit_the_connect_limit() {
    let port = HangingPort::start().await;
    let client = nika_retry::http::client_builder().build().unwrap();
    let err = get(&client, &port.url()).await.unwrap_err();
    let HttpError::Request(request) = &err else {
        panic!("not a reqwest error: {err:?}")
    };
    let expected = TimeoutError::new(Boundary::Connect, ms(200), Layer::Http);
    assert!(request.is_connect(), "{request:?}");
    assert_eq!(request.timeout(), Some(&expected));
    // And through the transparent variant that holds the reqwest error.
    assert_eq!(err.timeout(), Some(&expected));
}

#[tokio::test]
async fn a_reqwest_timeout_of_reqwests_own_is_not_one_of_ours() {
    let server = FaultServer::start([Fault::Hang]).await;
    let err = reqwest::Client::new()
        .get(server.url("/"))
        .timeout(ms(100))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(err.timeout(), None);
}
