//! One dimension of an upstream's limits (its requests, its tokens) as a
//! bucket of its limit that refills over its window, kept in atomics so
//! that an admission that does not wait takes no lock.
//!
//! The bucket is a GCRA: `tat` is when it will be whole again, each
//! admission of cost `c` pushes it `c · window / limit` later, and an
//! admission may start once `tat` is at most a window ahead. Nobody holds
//! a place while it waits: the pace's one waiter asks when its cost fits
//! ([`Bucket::earliest`]), sleeps until then, and takes it
//! ([`Bucket::take`]) if it still does. A dimension whose server counts by
//! window keeps a log instead ([`WindowLog`]).
//!
//! A dimension whose server counts by window (a rolling window, or fixed
//! windows) rather than by continuous refill: a log of what was sent and
//! when each part is free again, so that an attempt starts when the
//! window's spend allows it.
//!
//! A refilling estimate frees a little of the limit at every instant; a
//! window frees nothing until what it counted leaves it (rolling) or it
//! ends (fixed), and an attempt sent on the refill's word meets a 429. The
//! log keeps each attempt sent (its cost, when it is free again); the
//! pace's one waiter asks it when its cost fits. An attempt sent
//! at `t` is free at `t` plus the window (and a margin for its way to the
//! server): exact for a rolling window, and never early for a fixed one,
//! whose boundary comes at most a window after it. Servers write their
//! headers when they admit a request, its generation before the response
//! is read: a response's reset cannot say when the attempts sent meanwhile
//! are free, only what the server counted then, which a log that counts
//! less takes in.
//!
//! The log is locked for each admission: only dimensions known to be
//! counted by window keep one.

use core::num::NonZeroU32;
use core::time::Duration;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::hold::MAX_HOLD;

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
    /// When the bucket is whole again.
    tat: AtomicU64,
    /// The cost of attempts started and not yet ended.
    in_flight: AtomicU64,
    /// What corrections moved `tat` by, in all (ns): a departure's mark
    /// less it is the estimate as later corrections will have moved it.
    shift: AtomicI64,
    /// When the last admission took of `tat`, and how long after the one
    /// before: admissions closer than a request's way to the server may
    /// reach it in either order.
    last: AtomicU64,
    gap: AtomicU64,
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
    log: Mutex<Option<WindowLog>>,
}

/// What an admission took of a bucket, in flight until its attempt ends;
/// [`Bucket::undo`] gives it back if the attempt does not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Taken {
    pub(super) cost: u64,
    /// How far it pushed `tat`, and the `tat` it left; or its log entry.
    how: How,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    Refill {
        span: u64,
        end: u64,
    },
    Logged(Sent),
    /// Not paced (no limit known yet): in flight all the same, so that a
    /// limit learned while it is out counts it.
    Counted,
}

/// What a reading's server had not counted when it wrote what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unseen {
    /// Its request left `at` (pacer time), when the bucket noted `mark`
    /// ([`Bucket::mark`]): the server counted what left before, not what
    /// left after. (Servers write the headers as they admit a request; a
    /// slow answer brings them late.)
    Since { at: u64, mark: NonZeroU32 },
    /// When its request left is not known: everything in flight but its
    /// own (`own`) counts on top, and `besides` that the bucket does not
    /// hold (attempts that left before their cost was known); `later`: it
    /// moves the estimate only later.
    InFlight { own: u64, besides: u64, later: bool },
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

    /// When `cost` fits, at `now` or later (`None`: the dimension is not
    /// paced, or the cost is nothing).
    pub(super) fn earliest(&self, now: u64, cost: u64) -> Option<u64> {
        let span = self.span(cost)?;
        if self.windowed() {
            let limit = self.limit.load(Ordering::Relaxed);
            if let Some(log) = self.log().as_mut() {
                return Some(log.earliest(now, cost, limit));
            }
        }
        Some(self.due(now, self.tat(), span))
    }

    /// When an admission of `span` at `now` may start, with `tat` as it is.
    fn due(&self, now: u64, tat: u64, span: u64) -> u64 {
        let window = self.window.load(Ordering::Relaxed);
        let at = tat.max(now).saturating_add(span).saturating_sub(window);
        if at <= now {
            return at;
        }
        // The server's refill runs from when the requests before reached
        // it, a little after they left (the first of a burst the latest):
        // a waiter goes that much after the refill it waits for. (A
        // learned estimate is corrected by what the server said as it
        // admitted, read a generation later: later already, until a 429
        // says otherwise.)
        let declared = self.source.load(Ordering::Relaxed) == LimitSource::Declared.to_u8();
        at.saturating_add(if declared {
            self.margin(window)
        } else {
            self.missed.load(Ordering::Relaxed)
        })
    }

    /// Takes `cost` at `now` if it fits by `by` (`Err`: when it would,
    /// nothing taken; a dimension that knows no limit yet takes it
    /// always); `Ok(None)`: a cost of nothing. A caller that has waited
    /// `since` counts from its refill's instant, not from the margin after
    /// it (else each waiter's margin adds up). What it takes is in flight
    /// from here until [`end`](Bucket::end), or [`undo`](Bucket::undo)ne.
    pub(super) fn take(
        &self,
        now: u64,
        cost: u64,
        by: u64,
        since: u64,
    ) -> Result<Option<Taken>, u64> {
        if cost == 0 {
            return Ok(None);
        }
        let Some(span) = self.span(cost) else {
            self.in_flight.fetch_add(cost, Ordering::Relaxed);
            let how = How::Counted;
            self.took(now);
            return Ok(Some(Taken { cost, how }));
        };
        let how = if self.windowed()
            && let Some(log) = self.log().as_mut()
        {
            let limit = self.limit.load(Ordering::Relaxed);
            let at = log.earliest(now, cost, limit);
            if at > by {
                return Err(at);
            }
            How::Logged(log.send(now, cost))
        } else {
            let mut tat = self.tat();
            loop {
                let at = self.due(now, tat, span);
                if at > by {
                    return Err(at);
                }
                let window = self.window.load(Ordering::Relaxed);
                let refilled = tat.max(since).saturating_add(span).saturating_sub(window);
                let end = tat.max(now.min(refilled.max(since))).saturating_add(span);
                match self
                    .tat
                    .compare_exchange_weak(tat, end, Ordering::AcqRel, Ordering::Relaxed)
                {
                    Ok(_) => break How::Refill { span, end },
                    Err(moved) => tat = moved,
                }
            }
        };
        self.took(now);
        self.in_flight.fetch_add(cost, Ordering::Relaxed);
        Ok(Some(Taken { cost, how }))
    }

    /// An admission took of the bucket at `now`.
    fn took(&self, now: u64) {
        let last = self.last.swap(now, Ordering::AcqRel);
        self.gap.store(now.saturating_sub(last), Ordering::Release);
    }

    /// What `taken` took goes back: its attempt did not start (another
    /// dimension refused it). A refill's is given back only if nobody took
    /// after it.
    pub(super) fn undo(&self, taken: Taken) {
        sub(&self.in_flight, taken.cost);
        match taken.how {
            How::Refill { span, end } => {
                let _ = self.tat.compare_exchange(
                    end,
                    end.saturating_sub(span),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
            }
            How::Logged(sent) => {
                if let Some(log) = self.log().as_mut() {
                    log.take_back(sent);
                }
            }
            How::Counted => {}
        }
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

    fn log(&self) -> MutexGuard<'_, Option<WindowLog>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the server counts this dimension by window.
    pub(super) fn windowed(&self) -> bool {
        self.windowed.load(Ordering::Acquire)
    }

    /// The theoretical arrival time (ns).
    pub(super) fn tat(&self) -> u64 {
        self.tat.load(Ordering::Acquire)
    }

    /// An attempt of `cost` ended.
    pub(super) fn end(&self, cost: u64) {
        sub(&self.in_flight, cost);
    }

    /// Sets the limit and its window (a declared one caps what headers
    /// say; a zero limit or window leaves the dimension as it is). Returns
    /// whether the rate changed by more than a sixteenth (a waiter's
    /// instant, planned at the old rate, is then stale).
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

    /// The server said `remaining` is left, read at `now`; `unseen` is
    /// what it had not counted then. A reading whose departure is known
    /// says how far the estimate was off when its request left: the
    /// estimate moves by that (what left after, and what refilled since,
    /// it counts as it did). Returns whether it moved the estimate earlier.
    pub(super) fn correct(&self, now: u64, remaining: u64, unseen: Unseen) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 || self.windowed() {
            return false;
        }
        let counted = limit - remaining.min(limit);
        let window = self.window.load(Ordering::Relaxed);
        // Never more than the limit spent.
        let most = now.saturating_add(window);
        match unseen {
            Unseen::InFlight {
                own,
                besides,
                later,
            } => {
                // Some of the rest in flight it may have counted.
                let others = self.in_flight().saturating_add(besides).saturating_sub(own);
                let spent = self.span(counted.saturating_add(others)).unwrap_or(0);
                let read = now.saturating_add(spent).min(most);
                self.move_tat(|tat| if later { read.max(tat) } else { read })
            }
            Unseen::Since { at, mark } => {
                // It counted when the request reached it, up to a margin
                // after it left. (What left after, the estimate counts as
                // it did; what refilled since, too.)
                let margin = self.margin(window);
                let server =
                    (at.saturating_add(margin)).saturating_add(self.span(counted).unwrap_or(0));
                let off = i128::from(server) - i128::from(self.estimate_at(at, mark));
                self.move_tat(|tat| {
                    // Whole no earlier than at the departure, as it was then.
                    let moved = i128::from(tat.max(at)) + off;
                    u64::try_from(moved.max(0)).unwrap_or(most).min(most)
                })
            }
        }
    }

    /// Moves `tat` by `f`, counting it in the shift; returns whether it
    /// moved earlier.
    fn move_tat(&self, f: impl Fn(u64) -> u64) -> bool {
        let old = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| Some(f(tat)))
            .unwrap_or_else(|tat| tat);
        let by = i128::from(f(old)) - i128::from(old);
        self.shift
            .fetch_add(i64::try_from(by).unwrap_or(0), Ordering::Relaxed);
        by < 0
    }

    /// What a departure at `now`, just after its admission took, notes of
    /// the bucket: when it is whole, no earlier than `now`, less the shift
    /// so far, in microseconds, wrapping. None while it paces nothing, or
    /// when the admission came within a request's way to the server of
    /// the one before or after it: the server may count them in either
    /// order, and its reading could move the estimate early.
    pub(super) fn mark(&self, now: u64) -> Option<NonZeroU32> {
        let window = self.window.load(Ordering::Relaxed);
        if !self.known()
            || self.windowed()
            || self.gap.load(Ordering::Acquire) <= self.margin(window)
        {
            return None;
        }
        let whole = i64::try_from(self.tat().max(now)).unwrap_or(i64::MAX);
        let mark = (whole.wrapping_sub(self.shift.load(Ordering::Relaxed)) / 1_000) as u32;
        // A mark of 0 is 1 µs off: nothing.
        NonZeroU32::new(mark.max(1))
    }

    /// When the estimate had the bucket whole at the departure `at` that
    /// noted `mark`, moved by every correction since.
    fn estimate_at(&self, at: u64, mark: NonZeroU32) -> u64 {
        let shift = (self.shift.load(Ordering::Relaxed) / 1_000) as u32;
        let off = mark
            .get()
            .wrapping_add(shift)
            .wrapping_sub((at / 1_000) as u32) as i32;
        at.saturating_add_signed(i64::from(off) * 1_000)
    }

    /// What refills in `ns` nanoseconds.
    fn units(&self, ns: u64) -> u64 {
        let limit = self.limit.load(Ordering::Relaxed);
        let window = self.window.load(Ordering::Relaxed).max(1);
        let units = u128::from(ns) * u128::from(limit) / u128::from(window);
        u64::try_from(units).unwrap_or(u64::MAX)
    }

    /// A response read at `now` of a dimension its server counts by window:
    /// `remaining` left, whole at `whole_at`, `own` of what is in flight
    /// its own attempt's; an attempt counts for `window` from when it
    /// starts. The first such response turns the dimension's log on, with
    /// what the server counted and everything else in flight spent until
    /// `whole_at`. Returns whether it did.
    pub(super) fn read_window(
        &self,
        now: u64,
        remaining: u64,
        (own, besides): (u64, u64),
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
        let others = self.in_flight().saturating_add(besides).saturating_sub(own);
        let spent = counted.saturating_add(others).min(limit);
        // The rest in flight counts until a window (and the margin) after
        // it left: the last admission, or now for what the bucket does not
        // hold (it left before its cost was known, at some time before).
        let left = match besides {
            0 => self.last.load(Ordering::Acquire).min(now),
            _ => now,
        };
        let whole_at = if others > 0 {
            whole_at.max(left.saturating_add(window))
        } else {
            whole_at
        };
        *log = Some(WindowLog::new(now, spent, whole_at, window));
        self.windowed.store(true, Ordering::Release);
        true
    }

    /// Spent until `at` (a hold until then): one admission goes at `at`,
    /// the others each at the rate after it, not in a burst. Returns
    /// whether it moved the estimate (not for a log, nor past a later end).
    pub(super) fn spent_until(&self, at: u64) -> bool {
        let window = self.window.load(Ordering::Relaxed);
        let Some(one) = self.span(1) else {
            return false;
        };
        if self.windowed() {
            return false;
        }
        let tat = at.saturating_add(window).saturating_sub(one);
        self.tat.fetch_max(tat, Ordering::AcqRel) < tat
    }

    /// What the bucket holds at `now`.
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
        limit.saturating_sub(self.units(debt))
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

/// The most entries kept: beyond it the two that leave first are merged
/// (the cost of both, free when the later is), which only ever frees later.
const MAX_ENTRIES: usize = 1024;

/// What one attempt spent of a windowed dimension, counted until `free_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sent {
    free_at: u64,
    cost: u64,
}

/// The log of one dimension: what the server still counts, the earliest
/// free first. Times are the pacer's nanoseconds.
#[derive(Debug)]
pub(super) struct WindowLog {
    entries: VecDeque<Sent>,
    /// How long an attempt counts from when it was sent: the longest
    /// reset seen, and a margin for the request's way there.
    window: u64,
}

impl WindowLog {
    /// A log whose server counted `spent` at `now`, all of it free by
    /// `whole_at`.
    pub(super) fn new(now: u64, spent: u64, whole_at: u64, window: u64) -> WindowLog {
        let mut log = WindowLog {
            entries: VecDeque::new(),
            window: window.max(1),
        };
        if spent > 0 && whole_at > now {
            log.insert(Sent {
                free_at: whole_at,
                cost: spent,
            });
        }
        log
    }

    pub(super) fn set_window(&mut self, window: u64) {
        self.window = window.max(1);
    }

    /// When `cost` (of a dimension limited to `limit`) fits, at `now` or
    /// later: once what leaves first leaves room for it (a cost above the
    /// limit waits for the log to empty).
    pub(super) fn earliest(&mut self, now: u64, cost: u64, limit: u64) -> u64 {
        self.prune(now);
        let cost = cost.min(limit);
        let mut spent: u64 = self.entries.iter().map(|e| e.cost).sum();
        let mut at = now;
        for e in &self.entries {
            if spent.saturating_add(cost) <= limit {
                break;
            }
            spent -= e.cost;
            at = e.free_at;
        }
        at
    }

    /// An attempt of `cost` sent at `now`: counted for a window from now.
    pub(super) fn send(&mut self, now: u64, cost: u64) -> Sent {
        let sent = Sent {
            free_at: now.saturating_add(self.window),
            cost,
        };
        self.insert(sent);
        sent
    }

    /// A send whose attempt did not start after all.
    pub(super) fn take_back(&mut self, sent: Sent) {
        if let Some(i) = self.entries.iter().rposition(|e| *e == sent) {
            self.entries.remove(i);
        }
    }

    /// A response read at `now`: the server had `remaining` left when it
    /// admitted the request (before `now`), all of it free by `whole_at`.
    /// What it counted beyond everything the log counts (another client's
    /// spend) is added, free then. What the log counts beyond the server
    /// stays (an attempt that met a 429, say): which one the server did
    /// not count is not known, and freeing one that it did would be early.
    pub(super) fn read(&mut self, now: u64, remaining: u64, whole_at: u64, limit: u64) {
        self.prune(now);
        let counted: u64 = self.entries.iter().map(|e| e.cost).sum();
        let spent = limit.saturating_sub(remaining.min(limit));
        if spent > counted && whole_at > now {
            self.insert(Sent {
                free_at: whole_at,
                cost: spent - counted,
            });
        }
    }

    /// What is left at `now`.
    pub(super) fn level(&self, now: u64, limit: u64) -> u64 {
        let spent: u64 = self
            .entries
            .iter()
            .filter(|e| e.free_at > now)
            .map(|e| e.cost)
            .sum();
        limit.saturating_sub(spent)
    }

    fn prune(&mut self, now: u64) {
        while self.entries.front().is_some_and(|e| e.free_at <= now) {
            self.entries.pop_front();
        }
    }

    fn insert(&mut self, sent: Sent) {
        if self.entries.len() >= MAX_ENTRIES
            && let Some(first) = self.entries.pop_front()
            && let Some(second) = self.entries.front_mut()
        {
            second.cost = second.cost.saturating_add(first.cost);
        }
        let at = self.entries.partition_point(|e| e.free_at <= sent.free_at);
        self.entries.insert(at, sent);
    }
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

    /// A reading not known when its request left, `own` of it in flight.
    fn unknown(own: u64) -> Unseen {
        Unseen::InFlight {
            own,
            besides: 0,
            later: false,
        }
    }

    /// Takes `cost` now, whenever it fits: when it did.
    fn take(b: &Bucket, now: u64, cost: u64) -> u64 {
        let at = b.earliest(now, cost).expect("paced");
        b.take(at.max(now), cost, u64::MAX, now).unwrap();
        at
    }

    #[test]
    fn a_declared_buckets_waiters_keep_a_margin_for_the_way_to_the_server() {
        let b = declared(20, 2);
        for _ in 0..20 {
            assert_eq!(take(&b, 0, 1), 0, "the burst does not wait");
        }
        // A fortieth of the window, at most 40 ms, after each refill.
        assert_eq!(b.earliest(0, 1), Some(S / 10 + 40_000_000));
        let b = declared(1, 1);
        take(&b, 0, 1);
        assert_eq!(b.earliest(0, 1), Some(S + 25_000_000));
        assert_eq!(transit(u64::MAX), 40_000_000);
    }

    #[test]
    fn a_waiters_margin_is_not_counted_in_the_bucket() {
        // 100 a second, a waiter of the whole 100 behind the first.
        let b = declared(100, 1);
        take(&b, 0, 100);
        let at = take(&b, 0, 100);
        assert_eq!(at, S + 25_000_000, "its refill, and the margin");
        // Counted from its refill: 1 more fits 10 ms after it, at once.
        assert_eq!(b.earliest(at, 1), Some(S + 10_000_000));
    }

    #[test]
    fn a_whole_bucket_lets_its_limit_go_then_one_per_refill() {
        let b = bucket(20, 2);
        let now = 10 * S;
        for i in 0..20 {
            assert!(b.take(now, 1, now, now).is_ok(), "burst {i}");
        }
        assert_eq!(
            b.take(now, 1, now, now),
            Err(now + S / 10),
            "2 s / 20: one each 100 ms"
        );
        assert_eq!(b.level(now), 0, "refused: nothing taken");
        assert_eq!(take(&b, now, 1), now + S / 10);
        assert_eq!(take(&b, now + S / 10, 1), now + 2 * S / 10, "in order");
        assert_eq!(b.level(now + 3 * S), 20, "whole again after its window");
    }

    #[test]
    fn costs_above_the_limit_wait_their_refill_not_for_ever() {
        let b = bucket(3000, 2);
        assert_eq!(
            b.earliest(0, 4500),
            Some(S),
            "1 500 beyond a full bucket: one more second"
        );
        assert_eq!(b.earliest(0, 0), None, "nothing to spend");
        assert_eq!(b.take(0, 0, 0, 0), Ok(None));
        let unknown = Bucket::default();
        assert_eq!(unknown.earliest(0, 1), None, "unknown: not paced");
        let counted = unknown.take(0, 7, 0, 0).unwrap().expect("counted");
        assert_eq!(unknown.in_flight(), 7, "but counted in flight");
        unknown.undo(counted);
        assert_eq!(unknown.in_flight(), 0);
    }

    #[test]
    fn in_flight_counts_until_ended_and_corrections_subtract_it() {
        let b = bucket(20, 2);
        let a = b.take(0, 1, 0, 0).unwrap().unwrap();
        let c = b.take(0, 1, 0, 0).unwrap().unwrap();
        assert_eq!(b.in_flight(), 2);
        // The server counted `a` (its response says 15 left); `c` is still out.
        b.correct(0, 15, unknown(1));
        assert_eq!(b.level(0), 14);
        b.end(a.cost);
        b.end(c.cost);
        assert_eq!(b.in_flight(), 0);
        b.correct(0, 0, unknown(0));
        assert_eq!(b.level(0), 0);
        assert_eq!(b.earliest(0, 1), Some(S / 10), "empty: the next refill");
    }

    #[test]
    fn a_late_reading_moves_the_estimate_by_how_far_it_was_off_when_its_request_left() {
        // 20 a 2 s window: one each 100 ms; a margin of 40 ms for the way.
        let b = bucket(20, 2);
        for _ in 0..7 {
            b.take(0, 1, 0, 0).unwrap();
        }
        assert_eq!(b.mark(0), None, "in a burst: the server may count it first");
        b.take(100 * MS, 1, u64::MAX, 100 * MS).unwrap();
        let mark = b.mark(100 * MS).unwrap();
        for _ in 0..3 {
            b.take(200 * MS, 1, u64::MAX, 200 * MS).unwrap();
        }
        // Read at 1 s: the server counted the 7 before it less 100 ms
        // refilled, as the estimate did, from when the request reached it
        // (the margin). The 3 after it it did not see: it knows nothing of
        // them, the estimate does.
        let since = Unseen::Since { at: 100 * MS, mark };
        b.correct(S, 13, since);
        assert_eq!(b.tat(), 1_140 * MS, "11 spent from 40 ms");
        assert_eq!(b.level(S), 19);
        // Another answer of that time says 2 more were spent (another
        // client's): the estimate was off by those, not by the margin again.
        b.correct(S, 11, since);
        assert_eq!(b.tat(), 1_340 * MS);
        // One that says 2 fewer than it counted lowers it by those.
        b.correct(S, 15, since);
        assert_eq!(b.tat(), 940 * MS);
        assert_eq!(b.level(S), 20);
        // Not known when it left: the 11 in flight but its own count on top.
        b.correct(S, 12, unknown(1));
        assert_eq!(b.level(S), 2);
        // While callers queue, such a reading moves it later, never earlier.
        let tat = b.tat();
        let later = Unseen::InFlight {
            own: 11,
            besides: 0,
            later: true,
        };
        b.correct(S, 20, later);
        assert_eq!(b.tat(), tat);
        // A departure now notes the estimate less the corrections so far:
        // one more correction moves what it reads back.
        b.take(S, 1, u64::MAX, S).unwrap();
        let mark = b.mark(S).unwrap();
        b.correct(S, 0, unknown(0));
        assert_eq!(
            b.estimate_at(S, mark),
            3 * S,
            "2.9 s when it left, moved since"
        );
    }

    #[test]
    fn the_servers_remaining_replaces_the_estimate_both_ways() {
        let b = bucket(10, 1);
        b.correct(0, 2, unknown(0));
        assert_eq!(b.level(0), 2, "lowered (a rolling window still full)");
        b.correct(0, 10, unknown(0));
        assert_eq!(b.level(0), 10, "raised (a fixed window that reset)");
        b.correct(0, u64::MAX, unknown(0));
        assert_eq!(b.level(0), 10, "never above the limit");
    }

    #[test]
    fn spent_until_a_holds_end_the_bucket_lets_no_burst_go_at_it() {
        let b = bucket(10, 1);
        assert!(b.spent_until(2 * S));
        let mut now = 0;
        let after: Vec<_> = (0..3)
            .map(|_| {
                now = take(&b, now, 1);
                now
            })
            .collect();
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
    fn the_last_take_undone_returns_its_refill_and_an_earlier_one_leaves_a_gap() {
        let b = bucket(1, 1);
        b.take(0, 1, 0, 0).unwrap();
        let last = b.take(S, 1, S, S).unwrap().unwrap();
        b.undo(last);
        assert_eq!(b.in_flight(), 1);
        assert_eq!(b.earliest(S, 1), Some(S), "the next takes its place");
        let second = b.take(S, 1, S, S).unwrap().unwrap();
        let _third = b.take(2 * S, 1, 2 * S, 2 * S).unwrap().unwrap();
        b.undo(second);
        assert_eq!(b.earliest(2 * S, 1), Some(3 * S), "never beside the third");
    }

    #[test]
    fn a_logged_take_undone_leaves_the_log() {
        let b = bucket(3, 1);
        b.read_window(0, 3, (0, 0), 0, S);
        let taken = b.take(0, 3, 0, 0).unwrap().unwrap();
        assert_eq!(b.take(0, 1, 0, 0), Err(S), "counted for its window");
        b.undo(taken);
        assert_eq!((b.level(0), b.in_flight()), (3, 0));
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
        let at = b.earliest(u64::MAX - 5, u64::MAX).unwrap();
        assert!(at >= u64::MAX - 5 - MAX_NS);
        b.take(u64::MAX - 5, u64::MAX, u64::MAX, u64::MAX - 5)
            .unwrap();
        b.correct(u64::MAX, 0, unknown(0));
        let b = Bucket::default();
        b.set(u64::MAX, Duration::from_nanos(1), LimitSource::Learned);
        assert!(b.earliest(0, u64::MAX).unwrap() <= 1);
        b.set(0, Duration::ZERO, LimitSource::Learned);
        assert!(b.known(), "a zero changes nothing");
    }

    const MS: u64 = 1_000_000;

    /// 3 000 a 2 s window, nothing counted yet.
    fn fresh() -> WindowLog {
        WindowLog::new(0, 0, 0, 2 * S)
    }

    /// Sends `cost` when it fits, from `now` on: when it went.
    fn send(log: &mut WindowLog, now: u64, cost: u64) -> u64 {
        let at = log.earliest(now, cost, 3000);
        log.send(at, cost);
        at
    }

    #[test]
    fn a_full_window_frees_what_it_counted_a_window_after_it_was_sent() {
        let mut log = fresh();
        for _ in 0..15 {
            assert_eq!(send(&mut log, 0, 200), 0);
        }
        assert_eq!(
            log.earliest(100 * MS, 200, 3000),
            2 * S,
            "not on a refill's word (133 ms)"
        );
        assert_eq!(
            send(&mut log, 100 * MS, 2801),
            2 * S,
            "a cost near the limit waits for all of it"
        );
        assert_eq!(log.earliest(2 * S, 200, 3000), 4 * S, "and spends it");
    }

    #[test]
    fn what_the_server_counts_beyond_the_log_is_added_free_at_its_reset() {
        let mut log = fresh();
        log.read(0, 1000, 2 * S, 3000);
        assert_eq!(log.level(0, 3000), 1000, "another client's 2 000");
        assert_eq!(log.level(2 * S, 3000), 3000);
        assert_eq!(log.earliest(0, 1001, 3000), 2 * S);
        assert_eq!(log.earliest(0, 1000, 3000), 0);
        // What the log counts beyond the server stays counted.
        let mut log = fresh();
        send(&mut log, 0, 1000);
        send(&mut log, 10 * MS, 1000);
        log.read(100 * MS, 2000, 2 * S, 3000);
        assert_eq!(log.level(100 * MS, 3000), 1000);
        assert_eq!(log.level(2010 * MS, 3000), 3000);
    }

    #[test]
    fn a_send_taken_back_frees_its_cost_and_no_other() {
        let mut log = fresh();
        let first = log.send(0, 1500);
        let second = log.send(0, 1500);
        assert_eq!(first, second, "two alike");
        log.take_back(second);
        assert_eq!(log.level(0, 3000), 1500, "one of the two, once");
        log.take_back(Sent {
            free_at: 7,
            cost: 1500,
        });
        assert_eq!(log.level(0, 3000), 1500, "none that is not there");
    }

    #[test]
    fn a_cost_above_the_limit_waits_for_the_log_to_empty() {
        let mut log = fresh();
        send(&mut log, 0, 10);
        send(&mut log, 5 * MS, 10);
        assert_eq!(log.earliest(S, 5000, 3000), 2 * S + 5 * MS);
    }

    #[test]
    fn a_long_log_merges_what_leaves_first_never_freeing_earlier() {
        let mut log = WindowLog::new(0, 0, 0, 2 * S);
        for i in 0..(MAX_ENTRIES as u64 + 10) {
            send(&mut log, i, 1);
        }
        assert!(log.entries.len() <= MAX_ENTRIES);
        assert_eq!(log.level(2 * S + 10, 3000), 3000 - (MAX_ENTRIES as u64 - 1));
        assert!(log.earliest(2000, 3000, 3000) >= 2 * S + MAX_ENTRIES as u64);
    }
}
