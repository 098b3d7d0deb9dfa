//! The server's listener, closed and opened again on purpose: while it is
//! closed, a client's connection is refused (the request never leaves), as
//! by a server that is restarting.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// The listener, or nothing while connections are refused.
#[derive(Clone)]
pub(super) struct Gate(Arc<Mutex<Inner>>);

struct Inner {
    addr: SocketAddr,
    listener: Option<TcpListener>,
    /// The accept loop, to wake when the listener is back.
    waker: Option<Waker>,
    /// Connections refused on purpose so far (periods closed, rather).
    closings: usize,
}

impl Gate {
    pub(super) fn new(listener: TcpListener) -> io::Result<Gate> {
        Ok(Gate(Arc::new(Mutex::new(Inner {
            addr: listener.local_addr()?,
            listener: Some(listener),
            waker: None,
            closings: 0,
        }))))
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next connection; while closed, waits for the listener to be back.
    pub(super) fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<TcpStream>> {
        let mut inner = self.inner();
        // Kept on every poll: a closed listener takes its own waker with it.
        inner.waker = Some(cx.waker().clone());
        match &inner.listener {
            Some(listener) => listener.poll_accept(cx).map_ok(|(stream, _)| stream),
            None => Poll::Pending,
        }
    }

    /// Closes the listener now, so that the next connect is refused, and
    /// opens it again on the same port after `period` (tokio's clock);
    /// `Duration::MAX`: only when [`listen_again`](Gate::listen_again) says.
    pub(super) fn refuse_for(&self, period: Duration) {
        let mut inner = self.inner();
        if inner.listener.take().is_none() {
            return;
        }
        inner.closings += 1;
        if period == Duration::MAX {
            return;
        }
        let gate = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(period).await;
            gate.reopen();
        });
    }

    /// Listens again now, if closed.
    pub(super) fn listen_again(&self) {
        if self.inner().listener.is_none() {
            self.reopen();
        }
    }

    fn reopen(&self) {
        let mut inner = self.inner();
        // SO_REUSEADDR: the port's closed connections linger in TIME_WAIT.
        let listener = TcpSocket::new_v4().and_then(|socket| {
            socket.set_reuseaddr(true)?;
            socket.bind(inner.addr)?;
            socket.listen(1024)
        });
        match listener {
            Ok(listener) => inner.listener = Some(listener),
            // The port was taken meanwhile: the server stays closed.
            Err(e) => eprintln!("fault server: cannot listen on {} again: {e}", inner.addr),
        }
        if let Some(waker) = inner.waker.take() {
            waker.wake();
        }
    }

    /// How many times the listener was closed on purpose.
    pub(super) fn closings(&self) -> usize {
        self.inner().closings
    }
}
