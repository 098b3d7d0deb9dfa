//! A counter that lets the test suite pin what the retry loop does not do
//! when nobody listens: build its events.

use core::cell::Cell;

std::thread_local! {
    static EVENTS_BUILT: Cell<u64> = const { Cell::new(0) };
}

/// Counts one `RetryEvent` built on this thread (only ever on the path that
/// goes on to emit it).
#[inline]
pub(crate) fn event_built() {
    EVENTS_BUILT.with(|n| n.set(n.get().wrapping_add(1)));
}

/// How many `RetryEvent`s the retry loops polled on this thread have built
/// so far: for tests ("events are not even built when nobody listens").
pub fn events_built() -> u64 {
    EVENTS_BUILT.with(Cell::get)
}
