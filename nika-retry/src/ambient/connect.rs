//! [`ConnectLimit`]: the connect limit of the attempt in force.

use core::time::Duration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

use super::{Ambient, CONTEXT};
use crate::time::Span;
use crate::vocab::layer::Layer;

/// The connect limit of an attempt, and whether the attempt has reached a
/// connect boundary with it (so that a limit never reached can be reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnectLimit {
    // 8 bytes rather than a `Duration`'s 16: it is held in every attempt's future.
    limit: Span,
    pub(crate) layer: Layer,
    /// Set by the connect boundaries that read it.
    pub(crate) reached: bool,
}

impl ConnectLimit {
    /// `limit` of `layer`, not reached yet.
    pub(crate) fn new(limit: Option<Duration>, layer: Layer) -> Option<ConnectLimit> {
        limit.map(|limit| ConnectLimit {
            limit: Span::new(limit),
            layer,
            reached: false,
        })
    }

    /// The limit.
    pub(crate) fn limit(self) -> Duration {
        self.limit.get()
    }
}

/// The place of the attempt's connect limit: swapped in for each poll of an
/// attempt that has one (`connect::poll_under`), so that the limit comes
/// back marked if a connect boundary read it.
pub(crate) struct Connect;

impl Ambient for Connect {
    type Value = Option<ConnectLimit>;

    #[inline]
    fn swap(value: &mut Option<ConnectLimit>) {
        CONTEXT.with(|c| *value = c.connect.replace(*value));
    }
}

/// The connect limit of the attempt being polled, noted as reached: what a
/// connect boundary ([`connect`](crate::connect), the reqwest connector) reads.
#[inline]
pub(crate) fn connect_limit() -> Option<(Duration, Layer)> {
    CONTEXT.with(|c| {
        let mut connect = c.connect.get()?;
        connect.reached = true;
        c.connect.set(Some(connect));
        Some((connect.limit(), connect.layer))
    })
}

/// Whether a client from [`client_builder`](crate::http::client_builder) has
/// set up a connection in this process.
pub(crate) static CONNECTOR_USED: AtomicBool = AtomicBool::new(false);

/// Notes that a client from `http::client_builder` has set up a connection.
#[cfg(feature = "reqwest")]
#[inline]
pub(crate) fn connector_used() {
    CONNECTOR_USED.store(true, Ordering::Relaxed);
}

/// The fns whose connect limit was reached once, or reported as never reached.
pub(crate) static SETTLED: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());

std::thread_local! {
    /// The fns this thread has seen settled: after its first attempts, a
    /// fn's connect limit costs a thread-local look-up rather than the
    /// global lock, which every core's calls would otherwise contend on.
    pub(crate) static SEEN_SETTLED: core::cell::RefCell<Vec<&'static str>> =
        const { core::cell::RefCell::new(Vec::new()) };
}

/// After an attempt of `operation` with `limit` ended: settles the fn if
/// this attempt does (it reached the limit, or no client from
/// `http::client_builder` has connected to explain why it did not); whether
/// this settled it without the limit ever being reached, which the caller
/// then reports, once per fn.
pub(crate) fn settle(limit: ConnectLimit, operation: &'static str) -> bool {
    // By address, the cheap test (a fn's name is one `&'static str`, in its
    // site); a miss goes to the global list, compared by content.
    let seen = |list: &Vec<&'static str>| list.iter().any(|op| core::ptr::eq(*op, operation));
    if SEEN_SETTLED.with(|local| seen(&local.borrow())) {
        return false;
    }
    let (settled, unreached) = settled_now(limit, operation);
    if settled {
        SEEN_SETTLED.with(|local| local.borrow_mut().push(operation));
    }
    unreached
}

/// Settles `operation` in the global list if this attempt does: whether it
/// is settled now, and whether this attempt settled it unreached.
fn settled_now(limit: ConnectLimit, operation: &'static str) -> (bool, bool) {
    let settled = SETTLED.read().unwrap_or_else(PoisonError::into_inner);
    if settled.contains(&operation) {
        return (true, false);
    }
    drop(settled);
    if !limit.reached && CONNECTOR_USED.load(Ordering::Relaxed) {
        return (false, false);
    }
    let mut settled = SETTLED.write().unwrap_or_else(PoisonError::into_inner);
    if settled.contains(&operation) {
        return (true, false);
    }
    settled.push(operation);
    (true, !limit.reached)
}
