//! [`InForceUpstream`]: the upstream of the innermost call in force that
//! names one, for [`upstream::current`](crate::upstream::current), and
//! when its attempt left, for the headers that attempt reads. A place of
//! `ambient`'s kind, kept beside the handle it holds rather than in
//! `ambient/`, so that `ambient/` imports nothing of this module
//! (`ambient/mod.rs` lists it with the others).

use core::cell::Cell;
use core::mem::ManuallyDrop;

use super::handle::Upstream;
use crate::ambient::Ambient;

std::thread_local! {
    /// A thread-local of its own, as `ambient`'s `POLICY`, touched only by the polls of
    /// calls that name an upstream. `ManuallyDrop`, so that the
    /// thread-local needs no destructor, and each access no check that it
    /// is alive: outside a poll it always holds `None` (every handle swapped
    /// in is swapped back out by its guard, a panic included), so nothing
    /// is left to drop when the thread ends.
    static UPSTREAM: Cell<ManuallyDrop<Option<Upstream>>> =
        const { Cell::new(ManuallyDrop::new(None)) };
    /// When the attempt in force left, on its upstream's pacer clock (0:
    /// not recorded: its upstream paced nothing when it started).
    static DEPARTED: Cell<u64> = const { Cell::new(0) };
}

/// What an attempt of a call that names an upstream puts in force while
/// it is polled.
pub(crate) struct InForce {
    /// A clone of the call's handle.
    pub(crate) handle: Option<Upstream>,
    /// When the attempt left ([`Upstream::departure`]).
    pub(crate) departed: u64,
}

/// The place of the upstream in force: each poll of an attempt of a call
/// that names one swaps its handle in, and back when the poll returns.
pub(crate) struct InForceUpstream;

impl Ambient for InForceUpstream {
    type Value = InForce;

    #[inline(always)]
    fn swap(value: &mut InForce) {
        // A move each way: no count touched, nothing dropped.
        let mine = ManuallyDrop::new(value.handle.take());
        let outer = UPSTREAM.with(|place| place.replace(mine));
        // `value` was emptied above: forgetting its `None` skips a drop check.
        core::mem::forget(core::mem::replace(
            &mut value.handle,
            ManuallyDrop::into_inner(outer),
        ));
        value.departed = DEPARTED.with(|place| place.replace(value.departed));
    }
}

/// A clone of the handle in force (no allocation), if any.
pub(crate) fn upstream() -> Option<Upstream> {
    UPSTREAM.with(|place| {
        let handle = place.take();
        let clone = Option::clone(&handle);
        place.set(handle);
        clone
    })
}

/// When the attempt in force left, if its upstream is `upstream` and it
/// was recorded.
pub(crate) fn departed(upstream: &Upstream) -> Option<u64> {
    let departed = DEPARTED.with(Cell::get);
    if departed == 0 {
        return None;
    }
    UPSTREAM.with(|place| {
        let handle = place.take();
        let same = handle.as_ref().is_some_and(|h| h.same(upstream));
        place.set(handle);
        same.then_some(departed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ambient::Swap;

    #[test]
    fn the_innermost_handle_is_in_force_and_the_outer_comes_back() {
        assert!(upstream().is_none());
        let mut outer = InForce {
            handle: Some(Upstream::new("outer")),
            departed: 7,
        };
        {
            let _outer = Swap::<InForceUpstream>::new(&mut outer);
            assert_eq!(upstream().unwrap().name(), "outer");
            let inner_handle = Upstream::new("inner");
            let mut inner = InForce {
                handle: Some(inner_handle.clone()),
                departed: 9,
            };
            {
                let _inner = Swap::<InForceUpstream>::new(&mut inner);
                assert_eq!(upstream().unwrap().name(), "inner");
                assert_eq!(departed(&inner_handle), Some(9));
                assert_eq!(
                    departed(&Upstream::new("inner")),
                    None,
                    "another upstream of that name"
                );
            }
            assert_eq!(
                inner.handle.unwrap().name(),
                "inner",
                "given back to its owner"
            );
            assert_eq!(inner.departed, 9);
            assert_eq!(upstream().unwrap().name(), "outer");
            assert_eq!(departed(&inner_handle), None);
        }
        assert_eq!(outer.handle.unwrap().name(), "outer");
        assert!(upstream().is_none());
    }
}
