//! One dimension of an upstream's limits (its requests, its tokens) as a
//! bucket of its limit that refills over its window, kept in atomics so
//! that an admission that does not wait takes no lock.
//!
//! The bucket is a GCRA: `tat` is when it will be whole again, each
//! admission of cost `c` pushes it `c · window / limit` later, and an
//! admission may start once `tat` is at most a window ahead. Each
//! admission reserves its place when it arrives, so that waiters start in
//! the order they came, each at its own instant: nobody is woken to find
//! that somebody else took the refill.
//!
//! Its ledger ([`Ledger`]):
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

use core::time::Duration;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::hold::MAX_HOLD;
use super::window::Log;

/// Where a dimension's limit comes from.
///
/// ```
/// use nika_retry::upstream::{LimitSource, Quota, Upstream};
/// use std::time::Duration;
///
/// let upstream = Upstream::new("openai/gpt-4o").with_quota(Quota::per(Duration::from_secs(60)).requests(500));
/// assert_eq!(upstream.limits().requests.unwrap().source, LimitSource::Declared);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitSource {
    /// Declared with [`Upstream::with_quota`](super::Upstream::with_quota).
    Declared,
    /// Learned from the rate-limit headers of responses.
    Learned,
    /// Adapted to 429s that came without rate-limit headers.
    Adapted,
}

impl LimitSource {
    fn from_u8(v: u8) -> LimitSource {
        match v {
            1 => LimitSource::Declared,
            3 => LimitSource::Adapted,
            _ => LimitSource::Learned,
        }
    }

    fn to_u8(self) -> u8 {
        match self {
            LimitSource::Declared => 1,
            LimitSource::Learned => 2,
            LimitSource::Adapted => 3,
        }
    }
}

/// The nanoseconds of [`MAX_HOLD`]: no reservation reaches further.
const MAX_NS: u64 = MAX_HOLD.as_nanos() as u64;

/// `d` in nanoseconds, at most [`MAX_HOLD`]'s.
pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.min(MAX_HOLD).as_nanos()).unwrap_or(MAX_NS)
}

/// One dimension's bucket. All times are nanoseconds since the
/// upstream's epoch.
#[derive(Debug, Default)]
pub(super) struct Bucket {
    /// The limit, in units of the dimension; 0: unknown (nothing paced).
    limit: AtomicU64,
    /// The window it refills over, in nanoseconds.
    window: AtomicU64,
    /// When the bucket is whole again, reservations included.
    tat: AtomicU64,
    /// The cost of attempts started and not yet ended.
    in_flight: AtomicU64,
    /// The cost reserved by attempts waiting for their instant, and the
    /// estimate's generation, bumped when it is rebuilt from a new limit
    /// or window: a reservation of an older generation waits no longer
    /// for its instant, which was counted at the old rate, and reserves
    /// again.
    ledger: Ledger,
    /// A declared limit: headers may lower it, never raise it (0: none).
    declared: AtomicU64,
    declared_window: AtomicU64,
    source: AtomicU8,
    /// The margin learned from 429s met where the bucket had room (0:
    /// none yet), in nanoseconds: the requests take longer to reach the
    /// server than the default margin allows.
    missed: AtomicU64,
    /// The server counts by window: admissions go through `log`.
    windowed: AtomicBool,
    log: Mutex<Option<Log>>,
}

/// A reservation in a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reserved {
    /// When the attempt may start.
    pub(super) at: u64,
    /// How far it pushed the bucket's `tat` (given back if it never starts).
    pub(super) span: u64,
    /// The `tat` it left.
    end: u64,
    /// Its cost, in flight until it ends.
    pub(super) cost: u64,
    /// The bucket's generation when it was made.
    generation: u32,
    /// Its entry in a windowed dimension's log (0: a refill's
    /// reservation). 32 bits, as the generation: a reservation sits in the
    /// future of every call that waits for its pacer.
    pub(super) id: u32,
}

impl Bucket {
    /// Whether the bucket paces anything.
    pub(super) fn known(&self) -> bool {
        self.limit.load(Ordering::Relaxed) != 0
    }

    /// Whether its limit is a rate adapted to 429s without headers.
    pub(super) fn adapted(&self) -> bool {
        self.known() && self.source.load(Ordering::Relaxed) == LimitSource::Adapted.to_u8()
    }

    /// How long `cost` takes to refill, in nanoseconds.
    fn span(&self, cost: u64) -> Option<u64> {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 || cost == 0 {
            return None;
        }
        let window = self.window.load(Ordering::Relaxed);
        let span = u128::from(cost) * u128::from(window) / u128::from(limit);
        Some(u64::try_from(span).unwrap_or(MAX_NS).min(MAX_NS))
    }

    /// Reserves `cost` at `now`: `None` if the dimension is not paced.
    /// The reservation is the caller's from here: it [`ends`](Bucket::end)
    /// it after its attempt, or [`gives it back`](Bucket::give_back).
    pub(super) fn reserve(&self, now: u64, cost: u64) -> Option<Reserved> {
        let span = self.span(cost)?;
        let window = self.window.load(Ordering::Relaxed);
        if self.windowed.load(Ordering::Acquire) {
            let limit = self.limit.load(Ordering::Relaxed);
            if let Some(log) = self.log().as_mut() {
                let (id, at) = log.reserve(now, cost, limit);
                let generation = self.ledger.reserve(cost);
                return Some(Reserved {
                    at,
                    span: 0,
                    end: 0,
                    cost,
                    generation,
                    id,
                });
            }
        }
        let generation = self.ledger.reserve(cost);
        let mut tat = self.tat.load(Ordering::Relaxed);
        let new = loop {
            let new = tat.max(now).saturating_add(span);
            match self
                .tat
                .compare_exchange_weak(tat, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break new,
                Err(now_tat) => tat = now_tat,
            }
        };
        let mut at = new.saturating_sub(window);
        if at > now {
            // The server's refill runs from when the requests before reached
            // it, a little after they left (the first of a burst the
            // latest): a waiter goes that much after the refill it waits
            // for. (A learned estimate is corrected by what the server said
            // as it admitted, read a generation later: later already,
            // until a 429 says otherwise.)
            let declared = self.source.load(Ordering::Relaxed) == LimitSource::Declared.to_u8();
            let missed = self.missed.load(Ordering::Relaxed);
            at = at.saturating_add(if declared {
                self.margin(window)
            } else {
                missed
            });
        }
        Some(Reserved {
            at,
            span,
            end: new,
            cost,
            generation,
            id: 0,
        })
    }

    /// The margin kept for a request's way to the server: a fortieth of
    /// the window (at most 40 ms), or what 429s taught.
    pub(super) fn margin(&self, window: u64) -> u64 {
        transit(window).max(self.missed.load(Ordering::Relaxed))
    }

    /// An attempt it admitted met a 429 all the same (not a rate adapted
    /// to 429s): its requests reach the server later than the margin
    /// allows. The margin doubles, up to an eighth of the window.
    pub(super) fn missed(&self) {
        let window = self.window.load(Ordering::Relaxed);
        if self.adapted() || window == 0 {
            return;
        }
        let old = self.missed.load(Ordering::Relaxed);
        let grown = old
            .saturating_mul(2)
            .max(2 * transit(window))
            .min(window / 8);
        self.missed.store(grown.max(old), Ordering::Relaxed);
    }

    fn log(&self) -> MutexGuard<'_, Option<Log>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the server counts this dimension by window.
    pub(super) fn windowed(&self) -> bool {
        self.windowed.load(Ordering::Acquire)
    }

    /// When a reservation may start, as planned now (a windowed
    /// dimension's plan moves as responses say more).
    pub(super) fn at(&self, reserved: &Reserved) -> u64 {
        if reserved.id == 0 {
            return reserved.at;
        }
        self.log()
            .as_ref()
            .and_then(|log| log.planned(reserved.id))
            .unwrap_or(reserved.at)
    }

    /// A reservation's attempt starts: its cost is in flight until it
    /// [`ends`](Bucket::end).
    pub(super) fn start(&self, reserved: Reserved, now: u64) {
        if reserved.id != 0 {
            let limit = self.limit.load(Ordering::Relaxed);
            if let Some(log) = self.log().as_mut() {
                log.start(reserved.id, now, limit);
            }
        }
        self.ledger.release(reserved.generation, reserved.cost);
        self.in_flight.fetch_add(reserved.cost, Ordering::Relaxed);
    }

    /// Whether a reservation was counted at the bucket's current rate
    /// (else its instant is stale: it reserves again).
    pub(super) fn current(&self, reserved: &Reserved) -> bool {
        self.ledger.generation() == reserved.generation
            && (reserved.id == 0
                || self
                    .log()
                    .as_ref()
                    .is_some_and(|log| log.planned(reserved.id).is_some()))
    }

    /// A reservation whose attempt never started. The last one gives its
    /// refill back to those who come after; one with others reserved
    /// behind it leaves a gap (they keep their instants, which were counted
    /// after it: moving the end back would let a newcomer start beside the
    /// last of them).
    /// A reservation of an older generation gives nothing back: the
    /// estimate was rebuilt without it.
    pub(super) fn give_back(&self, reserved: Reserved) {
        if reserved.id != 0 {
            if let Some(log) = self.log().as_mut() {
                log.give_back(reserved.id);
            }
        } else if self.current(&reserved) {
            let _ = self.tat.compare_exchange(
                reserved.end,
                reserved.end.saturating_sub(reserved.span),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
        self.ledger.release(reserved.generation, reserved.cost);
    }

    /// The theoretical arrival time (ns).
    pub(super) fn tat(&self) -> u64 {
        self.tat.load(Ordering::Acquire)
    }

    /// Moves the theoretical arrival time to `at` if it is earlier.
    pub(super) fn tat_at_least(&self, at: u64) {
        self.tat.fetch_max(at, Ordering::AcqRel);
    }

    /// An attempt of `cost` ended.
    pub(super) fn end(&self, cost: u64) {
        sub(&self.in_flight, cost);
    }

    /// Sets the limit and its window (a declared one caps what headers
    /// say; a zero limit or window leaves the dimension as it is). Returns
    /// whether the rate changed by more than a sixteenth (the waiters'
    /// instants, counted at the old rate, are then stale).
    pub(super) fn set(&self, limit: u64, window: Duration, source: LimitSource) -> bool {
        let window = nanos(window);
        if limit == 0 || window == 0 {
            return false;
        }
        let (old_limit, old_window) = (
            self.limit.load(Ordering::Relaxed),
            self.window.load(Ordering::Relaxed),
        );
        let declared = self.declared.load(Ordering::Relaxed);
        let (limit, window, source) = match source {
            LimitSource::Declared => {
                self.declared.store(limit, Ordering::Relaxed);
                self.declared_window.store(window, Ordering::Relaxed);
                (limit, window, source)
            }
            // Headers that say no less than the declared quota leave it declared.
            _ if declared != 0 && limit >= declared => (
                declared,
                self.declared_window.load(Ordering::Relaxed),
                LimitSource::Declared,
            ),
            _ => (limit, window, source),
        };
        self.window.store(window, Ordering::Relaxed);
        self.limit.store(limit, Ordering::Relaxed);
        self.source.store(source.to_u8(), Ordering::Relaxed);
        if self.windowed() {
            // A log does not plan by the rate: nothing goes stale.
            return false;
        }
        // The span of one unit, old against new (ns per unit, scaled by both limits).
        let old = u128::from(old_window) * u128::from(limit);
        let new = u128::from(window) * u128::from(old_limit);
        old_limit != 0 && old.abs_diff(new) * 16 > old.max(new)
    }

    /// The server said `remaining` is left at `now`, while `own` of what
    /// is in flight was already counted by it (the attempt that read the
    /// response): what is left, less the rest in flight and what the
    /// waiters reserved, replaces the estimate. With `rebuild` (the rate
    /// changed), the waiters' reservations are dropped from it and theirs
    /// go stale: they reserve again at the new rate.
    pub(super) fn correct(&self, now: u64, remaining: u64, own: u64, rebuild: bool) {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 || self.windowed() {
            return;
        }
        if rebuild {
            self.ledger.rebuild();
        }
        let waiting = self.ledger.waiting();
        let others = self.in_flight.load(Ordering::Relaxed).saturating_sub(own);
        // What the server counted and what is in flight besides (some of
        // which it may have counted: at most the limit), then what the
        // waiters reserved, which it cannot have: a correction that forgot
        // them would let a newcomer start beside them.
        let spent = (limit - remaining.min(limit))
            .saturating_add(others)
            .min(limit)
            .saturating_add(waiting);
        let Some(missing) = self.span(spent) else {
            // Whole: the bucket is full now.
            self.tat.store(now, Ordering::Release);
            return;
        };
        self.tat
            .store(now.saturating_add(missing), Ordering::Release);
    }

    /// A response read at `now` of a dimension its server counts by window:
    /// `remaining` left, whole at `whole_at`, `own` of what is in flight
    /// its own attempt's; an attempt counts for `window` from when it
    /// starts. The first such response turns the dimension's log on, with
    /// what the server counted and everything else in flight spent until
    /// `whole_at`; the waiters' reservations go stale (they reserve again
    /// in it). Returns whether it did.
    pub(super) fn read_window(
        &self,
        now: u64,
        remaining: u64,
        own: u64,
        whole_at: u64,
        window: u64,
    ) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 {
            return false;
        }
        let mut log = self.log();
        if let Some(log) = log.as_mut() {
            log.set_window(window);
            log.read(now, remaining, whole_at, limit);
            return false;
        }
        let counted = limit.saturating_sub(remaining.min(limit));
        let others = self.in_flight.load(Ordering::Relaxed).saturating_sub(own);
        let spent = counted.saturating_add(others).min(limit);
        // The rest in flight reaches the server within the margin: it
        // counts until a window (and the margin) from now.
        let whole_at = if others > 0 {
            whole_at.max(now.saturating_add(window))
        } else {
            whole_at
        };
        *log = Some(Log::new(now, spent, whole_at, window));
        self.windowed.store(true, Ordering::Release);
        self.ledger.rebuild();
        true
    }

    /// Spent until `at` (a hold until then): one admission goes at `at`,
    /// the others each at the rate after it, not in a burst; the waiters'
    /// reservations go stale. Returns whether it moved the estimate (not
    /// for a log, nor past a later end).
    pub(super) fn spent_until(&self, at: u64) -> bool {
        let window = self.window.load(Ordering::Relaxed);
        let Some(one) = self.span(1) else {
            return false;
        };
        if self.windowed() {
            return false;
        }
        let tat = at.saturating_add(window).saturating_sub(one);
        if self.tat.fetch_max(tat, Ordering::AcqRel) >= tat {
            return false;
        }
        self.ledger.rebuild();
        true
    }

    /// What the bucket holds at `now` (a reservation ahead of it counts
    /// as spent).
    pub(super) fn level(&self, now: u64) -> u64 {
        let limit = self.limit.load(Ordering::Relaxed);
        let window = self.window.load(Ordering::Relaxed);
        if limit == 0 || window == 0 {
            return 0;
        }
        if self.windowed()
            && let Some(log) = self.log().as_ref()
        {
            return log.level(now, limit);
        }
        let debt = self.tat.load(Ordering::Relaxed).saturating_sub(now);
        let spent = u128::from(debt) * u128::from(limit) / u128::from(window);
        limit.saturating_sub(u64::try_from(spent).unwrap_or(u64::MAX))
    }

    /// `(limit, window, source)` if known.
    pub(super) fn get(&self) -> Option<(u64, Duration, LimitSource)> {
        let limit = self.limit.load(Ordering::Relaxed);
        (limit != 0).then(|| {
            (
                limit,
                Duration::from_nanos(self.window.load(Ordering::Relaxed)),
                LimitSource::from_u8(self.source.load(Ordering::Relaxed)),
            )
        })
    }

    /// The cost in flight (for tests and the snapshot).
    pub(super) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The cost reserved by waiters (for tests and the snapshot).
    pub(super) fn waiting(&self) -> u64 {
        self.ledger.waiting()
    }
}

/// The most a request is assumed to take to reach its server, beyond a
/// fortieth of the window.
const TRANSIT_NS: u64 = 40_000_000;

/// The margin kept for a request's way to the server, in a window of
/// `window` nanoseconds.
pub(super) fn transit(window: u64) -> u64 {
    (window / 40).min(TRANSIT_NS)
}

/// Takes `cost` off a counter, never below zero.
fn sub(counter: &AtomicU64, cost: u64) {
    let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
        Some(n.saturating_sub(cost))
    });
}

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

    const S: u64 = 1_000_000_000;

    /// A learned bucket: its waiters go at the refill they wait for.
    fn bucket(limit: u64, window_s: u64) -> Bucket {
        let b = Bucket::default();
        b.set(limit, Duration::from_secs(window_s), LimitSource::Learned);
        b
    }

    fn declared(limit: u64, window_s: u64) -> Bucket {
        let b = Bucket::default();
        b.set(limit, Duration::from_secs(window_s), LimitSource::Declared);
        b
    }

    #[test]
    fn a_declared_buckets_waiters_keep_a_margin_for_the_way_to_the_server() {
        let b = declared(20, 2);
        for _ in 0..20 {
            assert_eq!(b.reserve(0, 1).unwrap().at, 0, "the burst does not wait");
        }
        // A fortieth of the window, at most 40 ms, after each refill.
        assert_eq!(b.reserve(0, 1).unwrap().at, S / 10 + 40_000_000);
        assert_eq!(
            b.reserve(0, 1).unwrap().at,
            2 * S / 10 + 40_000_000,
            "not summed"
        );
        let b = declared(1, 1);
        b.reserve(0, 1).unwrap();
        assert_eq!(b.reserve(0, 1).unwrap().at, S + 25_000_000);
        assert_eq!(transit(u64::MAX), 40_000_000);
    }

    #[test]
    fn a_whole_bucket_lets_its_limit_go_then_one_per_refill() {
        let b = bucket(20, 2);
        let now = 10 * S;
        for i in 0..20 {
            assert!(b.reserve(now, 1).unwrap().at <= now, "burst {i}");
        }
        let next = b.reserve(now, 1).unwrap();
        assert_eq!(next.at, now + S / 10, "2 s / 20: one each 100 ms");
        assert_eq!(b.reserve(now, 1).unwrap().at, now + 2 * S / 10, "in order");
        assert_eq!(b.level(now + 3 * S), 20, "whole again after its window");
    }

    #[test]
    fn costs_above_the_limit_wait_their_refill_not_for_ever() {
        let b = bucket(3000, 2);
        let r = b.reserve(0, 4500).unwrap();
        assert_eq!(r.at, S, "1 500 beyond a full bucket: one more second");
        assert_eq!(b.reserve(0, 0), None, "nothing to spend");
        assert_eq!(Bucket::default().reserve(0, 1), None, "unknown: not paced");
    }

    #[test]
    fn in_flight_counts_until_ended_and_corrections_subtract_it() {
        let b = bucket(20, 2);
        let a = b.reserve(0, 1).unwrap();
        let c = b.reserve(0, 1).unwrap();
        assert_eq!(
            (b.waiting(), b.in_flight()),
            (2, 0),
            "reserved, not started"
        );
        b.start(a, 0);
        b.start(c, 0);
        assert_eq!((b.waiting(), b.in_flight()), (0, 2));
        // The server counted `a` (its response says 15 left); `c` is still out.
        b.correct(0, 15, 1, false);
        assert_eq!(b.level(0), 14);
        b.end(a.cost);
        b.end(c.cost);
        assert_eq!(b.in_flight(), 0);
        b.correct(0, 0, 0, false);
        assert_eq!(b.level(0), 0);
        assert_eq!(
            b.reserve(0, 1).unwrap().at,
            S / 10,
            "empty: the next refill"
        );
    }

    #[test]
    fn the_servers_remaining_replaces_the_estimate_both_ways() {
        let b = bucket(10, 1);
        b.correct(0, 2, 0, false);
        assert_eq!(b.level(0), 2, "lowered (a rolling window still full)");
        b.correct(0, 10, 0, false);
        assert_eq!(b.level(0), 10, "raised (a fixed window that reset)");
        b.correct(0, u64::MAX, 0, false);
        assert_eq!(b.level(0), 10, "never above the limit");
    }

    #[test]
    fn waiters_count_in_a_correction_until_a_rebuild_makes_them_stale() {
        let b = bucket(20, 2);
        b.correct(0, 20, 0, false);
        let w = b.reserve(0, 5).unwrap();
        b.correct(0, 20, 0, false);
        assert_eq!(b.level(0), 15, "the waiter's reservation stays spent");
        assert!(b.current(&w));
        b.correct(0, 20, 0, true);
        assert_eq!(b.level(0), 20, "rebuilt without it");
        assert!(!b.current(&w), "it reserves again");
        b.give_back(w);
        assert_eq!((b.level(0), b.waiting()), (20, 0), "nothing given twice");
    }

    #[test]
    fn a_correction_read_before_the_waiters_reserve_again_counts_them_once() {
        // 10 in flight, 15 waiting, when a response says the window is
        // 2.2 s (rebuilt: 110 ms a request), and another response is read
        // before the waiters wake to reserve again.
        let b = bucket(20, 2);
        for _ in 0..10 {
            b.start(b.reserve(0, 1).unwrap(), 0);
        }
        let stale: Vec<_> = (0..15).map(|_| b.reserve(0, 1).unwrap()).collect();
        assert!(b.set(20, Duration::from_millis(2200), LimitSource::Learned));
        b.correct(0, 9, 1, true);
        b.correct(0, 15, 1, false);
        for w in stale {
            assert!(!b.current(&w));
            b.give_back(w);
        }
        let again: Vec<_> = (0..15).map(|_| b.reserve(0, 1).unwrap()).collect();
        // 5 counted by the server and 9 others in flight: 14 spent, and
        // the 15 waiters after them, once.
        assert_eq!(again.last().unwrap().at, 990_000_000);
        assert_eq!(b.waiting(), 15);
    }

    #[test]
    fn spent_until_a_holds_end_the_bucket_lets_no_burst_go_at_it() {
        let b = bucket(10, 1);
        let waiter = b.reserve(0, 1).unwrap();
        assert!(b.spent_until(2 * S));
        assert!(!b.current(&waiter), "it reserves again, after the hold");
        let after: Vec<_> = (0..3).map(|_| b.reserve(2 * S, 1).unwrap().at).collect();
        assert_eq!(after, [2 * S, 21 * S / 10, 22 * S / 10]);
        assert!(!b.spent_until(S), "an earlier end moves nothing");
    }

    #[test]
    fn a_rate_changed_by_more_than_a_sixteenth_says_so() {
        let b = bucket(20, 2);
        assert!(!b.set(20, Duration::from_millis(2050), LimitSource::Declared));
        assert!(b.set(20, Duration::from_secs(40), LimitSource::Declared));
        assert!(b.set(40, Duration::from_secs(40), LimitSource::Declared));
    }

    #[test]
    fn the_last_reservation_given_back_returns_its_refill() {
        let b = bucket(1, 1);
        b.reserve(0, 1).unwrap();
        let waiting = b.reserve(0, 1).unwrap();
        assert_eq!(waiting.at, S);
        b.give_back(waiting);
        assert_eq!(b.waiting(), 1);
        assert_eq!(b.reserve(0, 1).unwrap().at, S, "the next takes its place");
    }

    #[test]
    fn a_reservation_given_back_before_others_leaves_a_gap_not_a_double() {
        let b = bucket(1, 1);
        b.reserve(0, 1).unwrap();
        let second = b.reserve(0, 1).unwrap();
        let third = b.reserve(0, 1).unwrap();
        assert_eq!((second.at, third.at), (S, 2 * S));
        b.give_back(second);
        let fourth = b.reserve(0, 1).unwrap();
        assert_eq!(fourth.at, 3 * S, "never beside the third");
    }

    #[test]
    fn headers_lower_a_declared_limit_never_raise_it() {
        let b = declared(100, 60);
        b.set(1000, Duration::from_secs(60), LimitSource::Learned);
        assert_eq!(b.get().unwrap().0, 100);
        assert_eq!(b.get().unwrap().2, LimitSource::Declared);
        b.set(50, Duration::from_secs(60), LimitSource::Learned);
        assert_eq!(b.get().unwrap().0, 50);
        b.set(u64::MAX, Duration::MAX, LimitSource::Learned);
        assert_eq!(b.get().unwrap().0, 100, "capped, and no overflow");
    }

    #[test]
    fn absurd_limits_and_windows_never_overflow() {
        let b = Bucket::default();
        b.set(1, Duration::MAX, LimitSource::Learned);
        let r = b.reserve(u64::MAX - 5, u64::MAX).unwrap();
        assert!(r.at >= u64::MAX - 5 - MAX_NS);
        b.correct(u64::MAX, 0, 0, true);
        let b = Bucket::default();
        b.set(u64::MAX, Duration::from_nanos(1), LimitSource::Learned);
        assert!(b.reserve(0, u64::MAX).unwrap().at <= 1);
        b.set(0, Duration::ZERO, LimitSource::Learned);
        assert!(b.known(), "a zero changes nothing");
    }

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
