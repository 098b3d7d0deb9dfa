//! [`connect`]: the connect boundary of a `#[timeout(connect = …)]` fn.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::context;
use crate::timer::Deadline;
use crate::{Boundary, Layer, TimeoutError};

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
    let inner = match context::connect_limit() {
        Some((limit, layer)) => Deadline::new(fut, layer).after(Some(limit), Boundary::Connect),
        None => Deadline::new(fut, Layer::Http),
    };
    Connect { inner }
}

pin_project_lite::pin_project! {
    /// The future [`connect`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct Connect<F> {
        #[pin]
        inner: Deadline<F>,
    }
}

impl<F: Future> Future for Connect<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn unbounded_outside_a_connect_scope() {
        let start = tokio::time::Instant::now();
        let out = connect(tokio::time::sleep(Duration::from_secs(3600))).await;
        assert_eq!(out, Ok(()));
        assert_eq!(start.elapsed(), Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_inside_a_connect_scope() {
        let limit = Some((Duration::from_secs(10), Layer::Http));
        let fut = {
            let _in_force = context::with_connect(limit);
            connect(core::future::pending::<()>())
        };
        let start = tokio::time::Instant::now();
        let err = fut.await.unwrap_err();
        assert_eq!(err.boundary(), Boundary::Connect);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(context::connect_limit(), None, "restored after the scope");
    }
}
