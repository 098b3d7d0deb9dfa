//! [`InForceUpstream`]: the upstream of the innermost call in force that
//! names one, for [`upstream::current`](crate::upstream::current).

use core::cell::Cell;
use core::mem::ManuallyDrop;

use super::Ambient;
use crate::upstream::handle::Upstream;

std::thread_local! {
    /// A thread-local of its own, as `POLICY`, touched only by the polls of
    /// calls that name an upstream. `ManuallyDrop`, so that the
    /// thread-local needs no destructor, and each access no check that it
    /// is alive: outside a poll it always holds `None` (every handle swapped
    /// in is swapped back out by its guard, a panic included), so nothing
    /// is left to drop when the thread ends.
    static UPSTREAM: Cell<ManuallyDrop<Option<Upstream>>> =
        const { Cell::new(ManuallyDrop::new(None)) };
}

/// The place of the upstream in force: each poll of an attempt of a call
/// that names one swaps its handle in, and back when the poll returns.
pub(crate) struct InForceUpstream;

impl Ambient for InForceUpstream {
    type Value = Option<Upstream>;

    #[inline(always)]
    fn swap(value: &mut Option<Upstream>) {
        // A move each way: no count touched, nothing dropped.
        let mine = ManuallyDrop::new(value.take());
        let outer = UPSTREAM.with(|place| place.replace(mine));
        // `value` was emptied above: forgetting its `None` skips a drop check.
        core::mem::forget(core::mem::replace(value, ManuallyDrop::into_inner(outer)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ambient::Swap;

    #[test]
    fn the_innermost_handle_is_in_force_and_the_outer_comes_back() {
        assert!(upstream().is_none());
        let mut outer = Some(Upstream::new("outer"));
        {
            let _outer = Swap::<InForceUpstream>::new(&mut outer);
            assert_eq!(upstream().unwrap().name(), "outer");
            let mut inner = Some(Upstream::new("inner"));
            {
                let _inner = Swap::<InForceUpstream>::new(&mut inner);
                assert_eq!(upstream().unwrap().name(), "inner");
            }
            assert_eq!(inner.unwrap().name(), "inner", "given back to its owner");
            assert_eq!(upstream().unwrap().name(), "outer");
        }
        assert_eq!(outer.unwrap().name(), "outer");
        assert!(upstream().is_none());
    }
}
