//! The layer-violation reports of `run::violation` waiting for the outer
//! call's name (a stack on the thread), and the pairs of fns already warned
//! about in the process.

use core::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use crate::events::RetryObserver;
use crate::vocab::layer::Layer;

/// The inner half of a report, waiting for the outer call's name.
pub(crate) struct Pending {
    pub(crate) inner_layer: Layer,
    pub(crate) inner_operation: &'static str,
    pub(crate) outer_layer: Layer,
    /// The observers in force where the inner loop started.
    pub(crate) observers: Vec<Arc<dyn RetryObserver>>,
}

std::thread_local! {
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
}

/// The pairs `(outer, inner)` already warned about in this process.
static WARNED: Mutex<BTreeSet<(&'static str, &'static str)>> = Mutex::new(BTreeSet::new());

/// Leaves `report` until the outer call completes it.
pub(crate) fn leave(report: Pending) {
    PENDING.with(|p| p.borrow_mut().push(report));
}

/// The last `count` reports left, in the order they were left.
pub(crate) fn take_last(count: u32) -> Vec<Pending> {
    PENDING.with(|p| {
        let mut pending = p.borrow_mut();
        let from = pending.len().saturating_sub(count as usize);
        pending.split_off(from)
    })
}

/// Whether the pair `(outer, inner)` is warned about for the first time in
/// the process (and from now on is not).
pub(crate) fn first_warning(outer: &'static str, inner: &'static str) -> bool {
    WARNED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((outer, inner))
}
