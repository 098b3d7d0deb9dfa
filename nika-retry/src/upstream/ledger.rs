//! What a bucket's waiters have reserved, counted per generation of its
//! estimate, in one atomic word.
//!
//! A rebuilt estimate (a new rate, a dimension turned windowed) drops the
//! waiters' reservations: each reserves again when it wakes. Until it
//! does, its old reservation must not count as waiting, or a correction
//! read in between counts it once there and once more when it reserves
//! again (a 3.7 s stall in the fan-out benchmark, seed 7: 35 waiters
//! counted twice). So the count and the generation move together: a new
//! generation starts from nothing reserved, and a reservation of an older
//! one takes nothing off when it leaves.

use std::sync::atomic::{AtomicU64, Ordering};

/// The low bits count what is reserved; the high ones, the generation.
const SHIFT: u32 = 40;
/// The most the count holds (it saturates there: absurd costs only).
const WAITING: u64 = (1 << SHIFT) - 1;
/// Generations wrap at 2²⁴: a reservation would have to wait through that
/// many rebuilds to be taken for current.
const GENERATIONS: u64 = 1 << (64 - SHIFT);

/// The waiters' reservations of one bucket, and its estimate's generation.
#[derive(Debug, Default)]
pub(super) struct Ledger(AtomicU64);

impl Ledger {
    /// The generation in force.
    pub(super) fn generation(&self) -> u32 {
        generation(self.0.load(Ordering::Acquire))
    }

    /// What the waiters of the generation in force have reserved.
    pub(super) fn waiting(&self) -> u64 {
        self.0.load(Ordering::Acquire) & WAITING
    }

    /// Counts `cost` reserved: returns the generation it is counted in.
    pub(super) fn reserve(&self, cost: u64) -> u32 {
        let before = self.update(|word| {
            let waiting = (word & WAITING).saturating_add(cost).min(WAITING);
            Some(word & !WAITING | waiting)
        });
        generation(before)
    }

    /// A reservation of `cost` counted in `generation` stops waiting (it
    /// starts, or is given back): taken off if its generation is in force.
    pub(super) fn release(&self, generation_of: u32, cost: u64) {
        let _ = self.update(|word| {
            (generation(word) == generation_of)
                .then(|| word & !WAITING | (word & WAITING).saturating_sub(cost))
        });
    }

    /// A new generation, with nothing reserved in it.
    pub(super) fn rebuild(&self) {
        let _ = self.update(|word| Some((((word >> SHIFT) + 1) % GENERATIONS) << SHIFT));
    }

    /// Applies `f` to the word: the word before it.
    fn update(&self, f: impl FnMut(u64) -> Option<u64>) -> u64 {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, f)
            .unwrap_or_else(|word| word)
    }
}

fn generation(word: u64) -> u32 {
    // 24 bits: always fits.
    u32::try_from(word >> SHIFT).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuild_forgets_what_was_reserved_and_a_stale_release_takes_nothing_off() {
        let ledger = Ledger::default();
        let old = ledger.reserve(200);
        ledger.reserve(200);
        assert_eq!(ledger.waiting(), 400);
        ledger.rebuild();
        assert_eq!(ledger.waiting(), 0, "the rebuilt estimate counts none");
        let new = ledger.reserve(200);
        assert_ne!(old, new);
        ledger.release(old, 200);
        assert_eq!(ledger.waiting(), 200, "the stale one took nothing off");
        ledger.release(new, 200);
        assert_eq!(ledger.waiting(), 0);
    }

    #[test]
    fn absurd_costs_saturate_and_generations_wrap() {
        let ledger = Ledger::default();
        let g = ledger.reserve(u64::MAX);
        ledger.reserve(u64::MAX);
        assert_eq!(ledger.waiting(), WAITING);
        ledger.release(g, u64::MAX);
        assert_eq!(ledger.waiting(), 0, "never below zero");
        let last = Ledger(AtomicU64::new(((GENERATIONS - 1) << SHIFT) | 7));
        last.rebuild();
        assert_eq!((last.generation(), last.waiting()), (g, 0), "wrapped round");
    }
}
