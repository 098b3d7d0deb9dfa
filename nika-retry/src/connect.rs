//! [`connect`]: the connect boundary of a `#[timeout(connect = …)]` fn.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::ambient::{self, ConnectLimit, Swap};
use crate::time::TimeLimited;
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::{Boundary, TimeoutError};

/// Bounds `fut` by the connect timeout of the enclosing `#[timeout(connect = …)]` fn.
///
/// Wrap the part of an attempt that establishes a connection. Inside a fn
/// with a connect limit, `fut` gets that long and then fails with a
/// [`TimeoutError`] of boundary [`Connect`](Boundary::Connect) (which is
/// transient: the next attempt reconnects); anywhere else it runs unbounded.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{retry, timeout, Classify, TimeoutError};
/// use tokio::net::TcpStream;
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum HttpError {
///     #[error(transparent)]
///     #[category(transparent)]
///     Io(#[from] std::io::Error),
///     #[error(transparent)]
///     #[category(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// #[retry(layer = "http")]
/// #[timeout(connect = "10s", read = "120s")]
/// async fn open(addr: std::net::SocketAddr) -> Result<TcpStream, HttpError> {
///     Ok(nika_retry::connect(TcpStream::connect(addr)).await??)
/// }
/// ```
pub fn connect<F: Future>(fut: F) -> Connect<F> {
    let inner = match ambient::connect_limit() {
        Some((limit, layer)) => TimeLimited::new(fut, layer).after(Some(limit), Boundary::Connect),
        None => TimeLimited::new(fut, Layer::Http),
    };
    Connect { inner }
}

pin_project_lite::pin_project! {
    /// The future [`connect`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct Connect<F> {
        #[pin]
        inner: TimeLimited<F>,
    }
}

impl<F: Future> Future for Connect<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // No `read` limit here, so no `Progress` to keep between polls.
        self.project().inner.poll_until(cx, &None, &mut None)
    }
}

/// Runs one poll of an attempt of `operation` with its connect `limit` (if
/// any) in force over the one around it, notes whether a connect boundary
/// read it, and settles the limit once the attempt is over.
#[inline(always)]
pub(crate) fn poll_under<R>(
    limit: &mut Option<ConnectLimit>,
    operation: &'static str,
    poll: impl FnOnce() -> Poll<R>,
) -> Poll<R> {
    // Swapped back as the poll left it: marked if a boundary read it.
    // `poll` is called in one place, so that it is inlined here.
    let swapped = match limit {
        Some(_) => Some(Swap::<ambient::Connect>::new(&mut *limit)),
        None => None,
    };
    let polled = poll();
    drop(swapped);
    if polled.is_ready() {
        attempt_ended(*limit, operation);
    }
    polled
}

/// After an attempt of `operation` ended: a connect limit that the attempt
/// did not reach may be one that cannot take effect, which is said once per
/// fn, unless an earlier attempt of the fn reached it or a client from
/// [`client_builder`](crate::http::client_builder) has connected in this
/// process (a pooled connection of that client explains it).
#[inline]
pub(crate) fn attempt_ended(limit: Option<ConnectLimit>, operation: &'static str) {
    if let Some(limit) = limit
        && ambient::connect::settle(limit, operation)
    {
        never_reached(limit, operation);
    }
}

#[cold]
fn never_reached(limit: ConnectLimit, operation: &'static str) {
    let message = format!(
        "{operation}: its connect limit of {} was never used: the attempt set up no \
         connection through `nika_retry::connect(…)` or a reqwest client built with \
         `nika_retry::http::client_builder()` (reqwest has no connect step of its own to wrap); \
         build the client with that helper, wrap the connection set-up in `nika_retry::connect`, \
         or remove `connect` from #[timeout]",
        humantime::format_duration(limit.limit())
    );
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "nika_retry", layer = %limit.layer, "{message}");
    #[cfg(not(feature = "tracing"))]
    eprintln!("warning: {message}");
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use super::*;
    use crate::ambient::connect::{CONNECTOR_USED, SEEN_SETTLED, SETTLED};
    use std::sync::atomic::Ordering;

    #[tokio::test(start_paused = true)]
    async fn unbounded_outside_a_connect_scope() {
        let start = tokio::time::Instant::now();
        let out = connect(tokio::time::sleep(Duration::from_secs(3600))).await;
        assert_eq!(out, Ok(()));
        assert_eq!(start.elapsed(), Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_inside_a_connect_scope() {
        let mut limit = ConnectLimit::new(Some(Duration::from_secs(10)), Layer::Http);
        let fut = {
            let _in = Swap::<ambient::Connect>::new(&mut limit);
            connect(core::future::pending::<()>())
        };
        assert!(limit.unwrap().reached, "noted as reached");
        let start = tokio::time::Instant::now();
        let err = fut.await.unwrap_err();
        assert_eq!(err.boundary(), Boundary::Connect);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(ambient::connect_limit(), None, "restored after the scope");
    }

    #[test]
    fn once_a_client_builder_connector_has_connected_an_unreached_limit_is_not_settled() {
        // A pooled connection of such a client explains an attempt that set
        // up none; only an attempt that reaches the limit settles the fn.
        CONNECTOR_USED.store(true, Ordering::Relaxed);
        let limit = ConnectLimit::new(Some(Duration::from_secs(10)), Layer::Http);
        let reached = limit.map(|mut l| {
            l.reached = true;
            l
        });
        let settled = |op| SETTLED.read().unwrap().contains(&op);
        attempt_ended(limit, "tests::pooled");
        assert!(!settled("tests::pooled"), "neither reported nor settled");
        attempt_ended(reached, "tests::pooled");
        assert!(settled("tests::pooled"));
    }

    #[test]
    fn a_fn_is_settled_by_an_attempt_that_reaches_its_connect_boundary() {
        let limit = ConnectLimit::new(Some(Duration::from_secs(10)), Layer::Http);
        let reached = limit.map(|mut l| {
            l.reached = true;
            l
        });
        let settled = |op| SETTLED.read().unwrap().contains(&op);
        let seen_here = |op| SEEN_SETTLED.with(|local| local.borrow().contains(&op));
        attempt_ended(reached, "tests::reaches");
        assert!(
            settled("tests::reaches"),
            "settled by the attempt that reached it"
        );
        assert!(seen_here("tests::reaches"), "and remembered by this thread");
        // Another thread learns it from the global list, not its own.
        std::thread::spawn(move || {
            assert!(!seen_here("tests::reaches"));
            attempt_ended(limit, "tests::reaches");
            assert!(seen_here("tests::reaches"));
        })
        .join()
        .unwrap();
        attempt_ended(None, "tests::no_limit");
        assert!(!settled("tests::no_limit"));
        assert!(!seen_here("tests::no_limit"));
    }
}
