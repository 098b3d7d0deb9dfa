//! The upstream's pacer: its buckets (requests, tokens), what it learns of
//! them from the headers (what each dimension's readings say of its
//! window: [`WindowEstimate`]), its cold start, an admission of every dimension at
//! once, and what an attempt that started charged it ([`Charge`], given
//! back when it ends).

use core::num::NonZeroU32;
use core::time::Duration;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::adapt::{Adaptive, Ramp};
use super::bucket::{Bucket, LimitSource, Unseen, nanos};
use super::hold::MAX_HOLD;
use crate::events::WaitReason;
use crate::http::{DATE_RESOLUTION, LimitFields, RateLimitFields};

/// The default of `Upstream::with_cold_start`.
const COLD_START: Duration = Duration::from_secs(1);

/// A call that gave no `cost`: its attempts spend the mean learned.
pub(crate) const COST_UNKNOWN: u32 = u32::MAX;

pub(super) struct Pacer {
    pub(super) requests: Bucket,
    pub(super) tokens: Bucket,
    /// The mean tokens an attempt spends, learned from the headers (0:
    /// not known, tokens not paced for calls without `cost`).
    mean_cost: AtomicU64,
    /// Attempts in flight of calls without `cost` that left while no mean
    /// was known, and took no tokens: a reading counts them at the mean.
    uncosted: AtomicU64,
    /// A response's headers said something of a limit: its 429s are not
    /// the adaptive rate's.
    pub(super) heard: AtomicBool,
    /// No response read yet: a declared quota's refill waits for one, as
    /// a window that counts from its first admission gives nothing back
    /// until it ends (until `first_until`, ns; `u64::MAX` not yet set).
    news: AtomicBool,
    first_until: AtomicU64,
    /// Until then, the first admission (ns; `u64::MAX` not yet): the
    /// burst counts from it, and nothing refills after it.
    burst_from: AtomicU64,
    /// No limit known yet: one scout goes, the others wait for it.
    pub(super) cold: AtomicBool,
    cold_max: AtomicU64,
    learn: Mutex<Learn>,
    /// The waiters for the scout's news.
    scouted: Notify,
    /// After a cold start that brought no news of the limits: the rest go
    /// in rounds that double.
    pub(super) ramp: Ramp,
    /// The paced waiter, whose instant moved (news, a new rate, a hold).
    pub(super) changed: Notify,
    /// The rate adapted to header-less 429s.
    pub(super) adaptive: Adaptive,
    /// What the buckets estimated as the last attempts left.
    departures: Departures,
    /// Bucket times are nanoseconds since this.
    epoch: Instant,
}

#[derive(Default)]
struct Learn {
    requests: WindowEstimate,
    tokens: WindowEstimate,
    /// When the scout's wait ends, once a scout is out.
    scout: Option<Instant>,
    /// The last reading of both dimensions: when, the requests and the
    /// tokens spent.
    spent: Option<(u64, u64, u64)>,
    /// The tokens and the requests spent over the readings, the older
    /// weighing less: their ratio is the mean cost of an attempt.
    spent_since: (f64, f64),
    /// The last responses' `Date` lags (ns), and how many were seen.
    lags: ([i64; LAGS], usize),
}

impl Default for Pacer {
    fn default() -> Pacer {
        let epoch = Instant::now();
        Pacer {
            requests: Bucket::default(),
            tokens: Bucket::default(),
            mean_cost: AtomicU64::new(0),
            uncosted: AtomicU64::new(0),
            heard: AtomicBool::new(false),
            news: AtomicBool::new(true),
            first_until: AtomicU64::new(u64::MAX),
            burst_from: AtomicU64::new(u64::MAX),
            cold: AtomicBool::new(true),
            cold_max: AtomicU64::new(COLD_START.as_nanos() as u64),
            learn: Mutex::default(),
            scouted: Notify::new(),
            ramp: Ramp::default(),
            changed: Notify::new(),
            adaptive: Adaptive::new(epoch),
            departures: Departures::default(),
            epoch,
        }
    }
}

/// How many responses' `Date` lags tell a server's clock behind.
const LAGS: usize = 8;

impl Pacer {
    /// Takes a response's `Date` lag in (ns behind its arrival; negative:
    /// ahead) and returns the lag to read the response by
    /// ([`http::server_now_by`](crate::http::server_now_by)): its own, but
    /// 0 (the clocks agree) for a lag of a second or more that not each of
    /// the last [`LAGS`] responses' was. One response read late (its task
    /// polled late, its headers read after its body) lags a second or more
    /// behind a clock that agrees with this one, and read alone would move
    /// every instant it carries a second later, and the window it bounds
    /// for good. The first response, alone, shows only the lag that the
    /// time its request was out (since `departed`) does not explain, as its
    /// `Date` may have been written at any moment of it.
    pub(super) fn date_lag(&self, lag: i64, departed: Option<u64>) -> i64 {
        let mut learn = self.learn.lock().unwrap_or_else(PoisonError::into_inner);
        let (lags, seen) = &mut learn.lags;
        lags[*seen % LAGS] = lag;
        *seen += 1;
        if lag < DATE_RESOLUTION {
            return lag;
        }
        let least = if *seen == 1 {
            let out = departed.map_or(0, |d| self.now().saturating_sub(d));
            lag.saturating_sub(i64::try_from(out).unwrap_or(i64::MAX))
        } else {
            let recent = &lags[..(*seen).min(LAGS)];
            recent.iter().copied().min().unwrap_or(lag)
        };
        if least < DATE_RESOLUTION { 0 } else { lag }
    }

    /// Whether an attempt must come here before it starts.
    pub(super) fn active(&self) -> bool {
        self.cold.load(Ordering::Relaxed)
            || self.ramp.on()
            || self.requests.known()
            || self.tokens.known()
    }

    pub(super) fn set_cold_max(&self, max: Duration) {
        let ns = nanos(max);
        self.cold_max.store(ns, Ordering::Relaxed);
    }

    pub(super) fn now(&self) -> u64 {
        self.at(Instant::now())
    }

    pub(super) fn at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    pub(super) fn instant(&self, ns: u64) -> Instant {
        crate::time::later(self.epoch, Duration::from_nanos(ns))
    }

    /// The mean cost learned, if any.
    pub(super) fn mean_cost(&self) -> Option<u64> {
        Some(self.mean_cost.load(Ordering::Relaxed)).filter(|&c| c > 0)
    }

    /// Takes the cost of an attempt of a call of `cost` from every
    /// dimension at `now`, if it fits by `by`, for a caller waiting
    /// `since`: its charge; else when it would fit, nothing taken.
    pub(super) fn take(&self, now: u64, cost: u32, by: u64, since: u64) -> Result<Charge, u64> {
        let tokens = self.tokens_of(cost);
        let refused = |at: u64| self.earliest(now, cost).max(at);
        let requests = self.requests.take(now, 1, by, since).map_err(refused)?;
        let tokens = match self.tokens.take(now, tokens, by, since) {
            Ok(tokens) => tokens,
            Err(at) => {
                if let Some(r) = requests {
                    self.requests.undo(r);
                }
                return Err(refused(at));
            }
        };
        let mut charge = Charge {
            rate: self.adaptive.generation(),
            tokens: tokens.map_or(0, |t| u32::try_from(t.cost).unwrap_or(u32::MAX)),
            ..Charge::default()
        };
        charge.holds.set(Holds::REQUEST, requests.is_some());
        if cost == COST_UNKNOWN && charge.tokens == 0 {
            charge.holds.set(Holds::UNCOSTED, true);
            self.uncosted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(charge)
    }

    /// When an attempt of a call of `cost` fits every dimension, at `now`
    /// or later.
    pub(super) fn earliest(&self, now: u64, cost: u32) -> u64 {
        let requests = self.requests.earliest(now, 1);
        let tokens = self.tokens.earliest(now, self.tokens_of(cost));
        requests.max(tokens).unwrap_or(now).max(now)
    }

    /// The tokens an attempt of a call of `cost` spends.
    pub(super) fn tokens_of(&self, cost: u32) -> u64 {
        match cost {
            COST_UNKNOWN => self.mean_cost.load(Ordering::Relaxed),
            cost => u64::from(cost),
        }
    }

    /// Until the first response: a declared quota's waiters beyond its
    /// burst wait for it (at most the cold start's max).
    pub(super) fn unheard(&self) {
        self.burst_from.store(u64::MAX, Ordering::Relaxed);
        self.news.store(false, Ordering::Release);
    }

    /// What an admission that does not wait may start by at `now`: `now`,
    /// or while no response came, the first admission's instant (a
    /// window that counts from it gives nothing back until it ends).
    pub(super) fn refilled_to(&self, now: u64) -> u64 {
        if self.news.load(Ordering::Acquire) {
            return now;
        }
        let burst = &self.burst_from;
        let _ = burst.compare_exchange(u64::MAX, now, Ordering::AcqRel, Ordering::Relaxed);
        burst.load(Ordering::Acquire).min(now)
    }

    /// A response was read, or an attempt ended: the waiters for it go.
    pub(super) fn heard_back(&self) {
        if !self.news.swap(true, Ordering::AcqRel) {
            self.changed.notify_waiters();
        }
    }

    /// When a waiter whose instant is `at` may go: not before the first
    /// response while none came.
    pub(super) fn after_news(&self, at: u64, now: u64) -> u64 {
        if self.news.load(Ordering::Acquire) {
            return at;
        }
        let max = self.cold_max.load(Ordering::Relaxed);
        let _ = self.first_until.compare_exchange(
            u64::MAX,
            now.saturating_add(max),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        let until = self.first_until.load(Ordering::Acquire);
        if until <= now {
            self.heard_back();
            return at;
        }
        at.max(until)
    }

    /// An attempt that charged `charge` ended (`answered`; else it was
    /// cancelled, and heard nothing).
    pub(super) fn end(&self, charge: Charge, answered: bool) {
        if answered {
            self.heard_back();
        }
        if charge.holds.has(Holds::REQUEST) {
            self.requests.end(1);
        }
        if charge.tokens > 0 {
            self.tokens.end(u64::from(charge.tokens));
        }
        if charge.holds.has(Holds::UNCOSTED) {
            self.uncosted.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A hold until `until`: a rate adapted to 429s without headers sent
    /// nothing during it, and its bucket, full at its end, would let a
    /// burst go into the server that just refused one. It is spent until
    /// then instead: the waiters go at the rate (a hold used to end in a
    /// burst and a 429 each time).
    pub(super) fn held_until(&self, until: Instant) {
        if self.requests.adapted() && self.requests.spent_until(self.at(until)) {
            self.changed.notify_waiters();
        }
    }

    /// The scout's news, or the end of the wait for it: the others go, in
    /// the ramp's rounds if nothing was heard of the limits.
    pub(super) fn warm(&self) {
        if self.cold.swap(false, Ordering::AcqRel) {
            let unheard = !self.heard.load(Ordering::Relaxed)
                && !self.requests.known()
                && !self.tokens.known()
                && !self.adaptive.on();
            if unheard {
                let round = self.cold_max.load(Ordering::Relaxed);
                self.ramp.start(Duration::from_nanos(round));
            }
            self.scouted.notify_waiters();
        }
    }

    /// While the cold start is pending: this caller's turn, the scout's
    /// (`Ok`, from then the others wait for it until `until` at most) or a
    /// wait for its news until `until` (`Err(Some)`); `Err(None)`: the
    /// wait is over, the cold start with it.
    pub(super) fn scout_turn(&self, now: Instant) -> Result<(), Option<Instant>> {
        let mut learn = self.learn.lock().unwrap_or_else(PoisonError::into_inner);
        match learn.scout {
            None => {
                let max = Duration::from_nanos(self.cold_max.load(Ordering::Relaxed));
                learn.scout = Some(crate::time::later(now, max));
                Ok(())
            }
            Some(until) if until <= now => Err(None),
            Some(until) => Err(Some(until)),
        }
    }

    /// The waiters for the scout's news.
    pub(super) fn scouted(&self) -> &Notify {
        &self.scouted
    }

    /// When an attempt leaving now left (never 0), noting what each
    /// bucket estimated then, if any did.
    pub(super) fn departure(&self) -> u64 {
        let at = self.now().max(1);
        let marks = [self.requests.mark(at), self.tokens.mark(at)];
        if marks != [None; 2] {
            self.departures.note(at, marks);
        }
        at
    }

    /// Takes what a response's headers say of the limits in: the response
    /// of an attempt that `departed` then, if known.
    /// `queued`: callers wait in the pace's queue, holding no places.
    pub(super) fn learn(&self, fields: &RateLimitFields, departed: Option<u64>, queued: bool) {
        let now = self.now();
        // A reset given as an instant is when the window that counted the
        // request ends: at most that long after the request left, which
        // bounds the window from above (from the response, it would read
        // short by the answer's time, and free what was sent early).
        let answered = Duration::from_nanos(departed.map_or(0, |d| now.saturating_sub(d)));
        let counted_at = departed.unwrap_or(now);
        let (requests, tokens, windows, sample) = {
            let mut learn = self.learn.lock().unwrap_or_else(PoisonError::into_inner);
            let learn = &mut *learn;
            let requests = Self::learn_one(
                &self.requests,
                &mut learn.requests,
                &fields.requests,
                answered,
            );
            let tokens = Self::learn_one(&self.tokens, &mut learn.tokens, &fields.tokens, answered);
            let windowed = learn.requests.windowed || learn.tokens.windowed;
            let sample = match (requests.0, tokens.0) {
                // Timed when its server counted it: as its request left,
                // if known (at the response, the answer's time would read
                // as refilled and spent again). One older than the last
                // (of a burst, one that counted less) tells nothing new.
                (Some(r), Some(t)) if learn.spent.is_none_or(|last| last <= (counted_at, r, t)) => {
                    let last = learn.spent.replace((counted_at, r, t));
                    let since = self.cost_sample(counted_at, (r, t), last.filter(|_| !windowed));
                    since.map(|(t, r)| {
                        let (tokens, requests) = &mut learn.spent_since;
                        // A quarter of the weight to the newest.
                        (*tokens, *requests) = (*tokens * 0.75 + t, *requests * 0.75 + r);
                        (*tokens / *requests).ceil() as u64
                    })
                }
                _ => None,
            };
            (requests, tokens, [learn.requests, learn.tokens], sample)
        };
        // A reading said that the server counts by window, not by refill
        // (for good): each dimension keeps a log from its next reading.
        let windowed = windows.iter().any(|w| w.windowed);
        let ((_, requests_changed), (_, tokens_changed)) = (requests, tokens);
        if let Some(mean) = sample {
            self.mean_cost.store(mean, Ordering::Relaxed);
        }
        // In flight besides what the tokens' bucket holds: the attempts
        // that left before a mean was known, at the mean.
        let uncosted = self
            .uncosted
            .load(Ordering::Relaxed)
            .saturating_mul(self.mean_cost.load(Ordering::Relaxed));
        // The attempt that read these is in flight: its own cost was counted.
        let own_requests = u64::from(self.requests.in_flight() > 0);
        let own_tokens = self
            .tokens
            .in_flight()
            .saturating_add(uncosted)
            .checked_div(self.requests.in_flight())
            .unwrap_or(0);
        // What the server had not seen: what left after the attempt, if
        // the bucket paced when it left; else the rest in flight.
        let marks = departed.map(|at| (at, self.departures.find(at)));
        let unseen = |i: usize, (own, besides): (u64, u64)| match marks
            .and_then(|(at, marks)| Some((at, marks[i]?)))
        {
            Some((at, mark)) => Unseen::Since { at, mark },
            // A reading may be older than attempts that started and ended
            // after its request: while callers queue, it moves their next
            // place later, never earlier (the waiter holds no place for
            // the reading to count).
            None => Unseen::InFlight {
                own,
                besides,
                later: queued,
            },
        };
        let dimensions = [
            (
                &self.requests,
                &fields.requests,
                (own_requests, 0),
                requests_changed,
                unseen(0, (own_requests, 0)),
            ),
            (
                &self.tokens,
                &fields.tokens,
                (own_tokens, uncosted),
                tokens_changed,
                unseen(1, (own_tokens, uncosted)),
            ),
        ];
        let mut moved = false;
        for ((bucket, fields, own, changed, unseen), window) in dimensions.into_iter().zip(windows)
        {
            let Some(remaining) = fields.remaining else {
                continue;
            };
            if !windowed {
                // Earlier: the waiter's instant is stale.
                moved |= bucket.correct(now, remaining, unseen) || changed;
                continue;
            }
            let Some((_, w, source)) = bucket.get() else {
                continue;
            };
            // Counted for the longest reset seen, from when its request
            // left (a window is at least that long), or the window read or declared (a fixed window's
            // resets are shorter); and a margin for the way there, which a
            // reset read after the response does not see.
            let w = if window.longest_bound.is_zero() || source == LimitSource::Declared {
                w
            } else {
                window.longest_bound
            };
            let w = nanos(w);
            // A reset given as a duration counts from when the server
            // wrote it, as the request reached it: within a margin of its
            // departure, if known (from the response, a slow answer's
            // reset reads late by the answer's time). An instant is one.
            let written = match departed {
                Some(at) if !fields.instant => now.min(at.saturating_add(bucket.margin(w))),
                _ => now,
            };
            let whole_at = written.saturating_add(fields.reset.map_or(w, nanos));
            moved |= bucket.read_window(now, remaining, own, whole_at, w + bucket.margin(w));
        }
        if moved {
            // The waiter's instant was planned at the old rate: it looks again.
            self.changed.notify_waiters();
        }
        // Last: the waiters for a first response find what it taught.
        self.heard_back();
    }

    /// What one reading says of the cost of an attempt: the tokens and
    /// the requests spent. On a window both count the same requests (and
    /// so does the first reading, from the requests of one burst); on a
    /// refill each dimension frees at its own rate, and what is still
    /// spent is no longer of the same requests (the requests, refilled
    /// faster, read 1 spent where the tokens still count 15 attempts):
    /// what was spent since the `last` reading, what refilled meanwhile
    /// included, is.
    fn cost_sample(
        &self,
        now: u64,
        (r, t): (u64, u64),
        last: Option<(u64, u64, u64)>,
    ) -> Option<(f64, f64)> {
        let Some((at, last_r, last_t)) = last else {
            return (r > 0 && t > 0).then_some((t as f64, r as f64));
        };
        let elapsed = now.saturating_sub(at) as f64;
        // Spent since: what was spent then refilled meanwhile (at most all
        // of it), and the difference.
        let since = |bucket: &Bucket, spent: u64, last: u64| {
            let (limit, window, _) = bucket.get()?;
            let refilled = (limit as f64 * elapsed / nanos(window).max(1) as f64).min(last as f64);
            Some(spent as f64 + refilled - last as f64)
        };
        let requests = since(&self.requests, r, last_r)?;
        let tokens = since(&self.tokens, t, last_t)?;
        (requests > 0.0 && tokens > 0.0).then_some((tokens, requests))
    }

    /// One dimension's reading: sets its limit; returns how much of it is
    /// spent, if the reading says, and whether its rate changed.
    fn learn_one(
        bucket: &Bucket,
        window: &mut WindowEstimate,
        fields: &LimitFields,
        answered: Duration,
    ) -> (Option<u64>, bool) {
        let Some(limit) = fields.limit.filter(|&l| l > 0) else {
            return (None, false);
        };
        let bound = fields
            .reset
            .filter(|_| fields.instant)
            .map(|r| r.saturating_add(answered));
        // Read even when the server says its window (the IETF's `w`):
        // what it says of the window's length tells nothing of whether it
        // refills or counts by window.
        let rounding = match fields.whole_seconds {
            true => Duration::from_secs(1),
            false => Duration::from_millis(1),
        };
        let read = window.read(limit, fields.remaining, fields.reset, bound, rounding);
        let said = fields.window.filter(|w| !w.is_zero());
        if let (Some(said), Some(reset)) = (said, fields.reset) {
            // Resets in whole seconds of a window no longer than a second
            // cannot tell a refill from a window: the log, right on both.
            window.windowed |= said <= Duration::from_secs(1) && reset.subsec_nanos() == 0;
        }
        let w = said.unwrap_or(read);
        // The window declared, or said: one reading tells. A refill whole
        // in `reset` misses `reset` of its refill; a window that misses
        // fewer (by more than the one a rounding allows) counts by window,
        // and is whole sooner only when it ends. A declared window takes
        // the reset as it reads (a refill read as a window is paced later,
        // never sooner); one the server says, less what the server may
        // have rounded it up by (else every refill of whole-second resets
        // would read as a window).
        let known = match bucket.get() {
            Some((_, declared, LimitSource::Declared)) => Some((declared, Duration::ZERO)),
            _ => said.map(|said| (said, rounding)),
        };
        if let Some((known, rounded)) = known
            && let (Some(remaining), Some(reset)) = (fields.remaining, fields.reset)
        {
            let refill =
                reset.saturating_sub(rounded).as_secs_f64() / known.as_secs_f64() * limit as f64;
            let missing = limit.saturating_sub(remaining) as f64;
            window.windowed |= refill > missing * 1.0625 + 2.0;
        }
        let changed = bucket.set(limit, w, LimitSource::Learned);
        (fields.remaining.map(|r| limit.saturating_sub(r)), changed)
    }
}

/// How many departures' marks are kept: the attempts marked (each alone,
/// a request's way after the one before) while one answer comes back.
const DEPARTURES: usize = 64;

/// The marks of the last departures that noted any ([`Bucket::mark`]),
/// by when they left: a reading finds its attempt's there. Kept here, not
/// carried by the attempt: an open upstream's attempt, which notes
/// nothing, then moves 8 bytes in and out of force at each poll, not 16.
/// An entry overwritten before its reading comes reads as not noted.
struct Departures {
    /// Each entry: when it left, then its marks (requests' high, tokens'
    /// low; 0: none).
    entries: [[AtomicU64; 2]; DEPARTURES],
    next: AtomicUsize,
}

impl Default for Departures {
    fn default() -> Departures {
        Departures {
            entries: core::array::from_fn(|_| [AtomicU64::new(0), AtomicU64::new(0)]),
            next: AtomicUsize::new(0),
        }
    }
}

impl Departures {
    /// Keeps `marks` for the departure at `at`, over the oldest kept.
    fn note(&self, at: u64, marks: [Option<NonZeroU32>; 2]) {
        let [requests, tokens] = marks.map(|m| u64::from(m.map_or(0, NonZeroU32::get)));
        let entry = &self.entries[self.next.fetch_add(1, Ordering::Relaxed) % DEPARTURES];
        // Not found while it is written: its time goes last.
        entry[0].store(0, Ordering::Release);
        entry[1].store(requests << 32 | tokens, Ordering::Release);
        entry[0].store(at, Ordering::Release);
    }

    /// The marks noted by the departure at `at`, if still kept.
    fn find(&self, at: u64) -> [Option<NonZeroU32>; 2] {
        for entry in &self.entries {
            if entry[0].load(Ordering::Acquire) == at {
                let marks = entry[1].load(Ordering::Acquire);
                // Overwritten meanwhile: not its marks.
                if entry[0].load(Ordering::Acquire) == at {
                    return [
                        NonZeroU32::new((marks >> 32) as u32),
                        NonZeroU32::new(marks as u32),
                    ];
                }
            }
        }
        [None; 2]
    }
}

/// What a turn has charged the pacer, given back when its attempt ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Charge {
    /// What it holds besides tokens (one request, the scout's turn, a
    /// slot of the ramp), a bit each: a success at an open upstream asks
    /// whether the charge is empty twice, one compare each.
    pub(super) holds: Holds,
    /// Why its call waited, if it did.
    pub(super) reason: Option<WaitReason>,
    /// The adaptive rate's generation it was admitted at (0: off): a 429
    /// of an attempt admitted before the last decrease does not lower
    /// the rate again.
    pub(super) rate: u8,
    /// Tokens.
    pub(super) tokens: u32,
}

impl Charge {
    /// Whether the attempt's end tells the pacer anything (a charge of
    /// tokens holds its request too: every admission takes one).
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.holds == Holds::NONE
    }
}

/// What a charge holds besides tokens, a bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Holds(u8);

impl Holds {
    pub(super) const NONE: Holds = Holds(0);
    /// One request of the requests' bucket.
    pub(super) const REQUEST: Holds = Holds(1);
    /// Its scout's turn: the others wait for its news.
    pub(super) const SCOUT: Holds = Holds(2);
    /// A slot of the cold start's ramp, given back when it ends.
    pub(super) const RAMP: Holds = Holds(4);
    /// No tokens, for a call without `cost` while no mean was known.
    pub(super) const UNCOSTED: Holds = Holds(8);

    /// Whether it holds `what`.
    #[inline(always)]
    pub(super) fn has(self, what: Holds) -> bool {
        self.0 & what.0 != 0
    }

    /// Holds `what` if `on`, else not.
    #[inline(always)]
    pub(super) fn set(&mut self, what: Holds, on: bool) {
        if on {
            self.0 |= what.0;
        } else {
            self.0 &= !what.0;
        }
    }
}

/// The window assumed for a limit whose headers say nothing of it (OpenAI
/// and Anthropic count per minute).
const MINUTE: Duration = Duration::from_secs(60);

/// What responses have said of a dimension's window.
#[derive(Default, Clone, Copy)]
pub(super) struct WindowEstimate {
    /// The longest reset seen: a window is at least that long.
    pub(super) longest_reset: Duration,
    /// The longest a window may be, as far as the resets seen say: each
    /// reset counted from when its request left when it was an instant
    /// (from the response, it reads short by the answer's time). What the
    /// upstream sent stays counted this long.
    pub(super) longest_bound: Duration,
    /// The shortest window that a continuous refill would explain, from
    /// readings with 2 or more missing.
    refill: Option<Duration>,
    /// The same from the readings with 1 missing, until there are others.
    refill_one: Option<Duration>,
    /// The longest window that a continuous refill would explain, from
    /// each reading: a refill's window lies between the two.
    refill_low: Duration,
    /// A reading no continuous refill explains: the server counts by window.
    pub(super) windowed: bool,
}

impl WindowEstimate {
    /// Takes a reading (limit `l`, `remaining`, `reset`) in: the window it
    /// suggests. A continuous refill whole in `reset` with `l - remaining`
    /// missing refills over `reset · l / (l - remaining)`; a fixed or
    /// rolling window resets within its window. The larger of the two
    /// estimates is the window, the refill's the smallest seen, so that a
    /// window counted from its start, which makes it look long, is soon
    /// corrected.
    ///
    /// A refilling server rounds what is left down (19.9 reads 19), so
    /// that `m` missing may be as little as `m - 1` and a bit: the refill
    /// read is the longest the reading allows, `reset · l / (m - 1)`, or a
    /// requests window of 2 s reads as 1.4 s and its 429s follow. A
    /// reading of 1 missing bounds nothing that way; it counts (as `m`)
    /// until a reading of more comes.
    ///
    /// `bound`: the reset counted from when the request left, if longer
    /// (an instant's): the refill's upper estimates take it, the lower
    /// ones the reset less `rounding` (what the server may have rounded it
    /// up by), so that neither a slow answer nor a rounded reset makes a
    /// refill look like a window.
    pub(super) fn read(
        &mut self,
        l: u64,
        remaining: Option<u64>,
        reset: Option<Duration>,
        bound: Option<Duration>,
        rounding: Duration,
    ) -> Duration {
        if let Some(reset) = reset.filter(|r| !r.is_zero()) {
            let reset = reset.min(MAX_HOLD);
            self.longest_reset = self.longest_reset.max(reset);
            let bound = bound.map_or(reset, |b| b.clamp(reset, MAX_HOLD));
            self.longest_bound = self.longest_bound.max(bound);
            let missing = remaining.map_or(0, |r| l.saturating_sub(r));
            let over = |reset: Duration, m: u64| {
                let ns = reset.as_nanos() * u128::from(l) / u128::from(m);
                Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)).min(MAX_HOLD)
            };
            // A refill is at most what the reset counted from when its
            // request left says, at least what it says from the response.
            let refill = |m: u64| over(bound, m);
            if missing > 0 {
                // Whole in `reset` less what it was rounded up by, with at
                // most `missing` missing: at least this window.
                let low = over(reset.saturating_sub(rounding), missing);
                self.refill_low = self.refill_low.max(low);
            }
            match missing {
                0 => {}
                1 => {
                    let r = refill(1);
                    self.refill_one = Some(self.refill_one.map_or(r, |old| old.min(r)));
                }
                m => {
                    let r = refill(m - 1);
                    self.refill = Some(self.refill.map_or(r, |old| old.min(r)));
                    // A refill whole in `reset` spends at most `reset` per
                    // `m - 1` of the limit; a window (rolling or fixed) is
                    // whole sooner, as its end comes nearer, than a refill
                    // at the rate its longest reset says. The margin: a
                    // reset rounded up to the millisecond.
                    let margin = self.longest_reset / 128 + Duration::from_millis(2);
                    self.windowed |= r + margin < self.longest_reset;
                }
            }
            // Two readings no single refill explains (a server writes its
            // headers as it admits: a rolling window's reset is its window
            // whatever is missing).
            if let Some(high) = self.refill.filter(|&r| r < MAX_HOLD) {
                self.windowed |= self.refill_low > high + high / 64;
            }
        }
        match self.refill.or(self.refill_one) {
            Some(refill) => refill.max(self.longest_reset),
            // Until a refill is seen: a minute, unless a reset says longer.
            None => self.longest_reset.max(MINUTE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::super::Upstream;

    /// Anthropic's headers: `remaining` of the requests left, whole again
    /// at `reset`, beside a `Date` of `date`.
    fn dated(remaining: u32, reset: SystemTime, date: SystemTime) -> [(&'static str, String); 3] {
        [
            (
                "anthropic-ratelimit-requests-remaining",
                remaining.to_string(),
            ),
            (
                "anthropic-ratelimit-requests-reset",
                humantime::format_rfc3339_millis(reset).to_string(),
            ),
            ("date", httpdate::fmt_http_date(date)),
        ]
    }

    #[tokio::test]
    async fn one_response_whose_date_lags_a_second_does_not_move_the_servers_clock() {
        // In the first half of a second, a `Date` of that second lags the
        // machine's clock by less than half of one, and one of the second
        // before by a second and more: read late, or a server behind.
        let mut wall = SystemTime::now();
        while wall.duration_since(UNIX_EPOCH).unwrap().subsec_millis() >= 500 {
            std::thread::sleep(Duration::from_millis(10));
            wall = SystemTime::now();
        }
        let second =
            UNIX_EPOCH + Duration::from_secs(wall.duration_since(UNIX_EPOCH).unwrap().as_secs());
        let before = second - Duration::from_secs(1);
        let reset = wall + Duration::from_secs(3);
        let held = |dates: [SystemTime; 2]| {
            let upstream = Upstream::new("u");
            upstream.observe(&dated(5, reset, dates[0])[..]);
            upstream.observe(&dated(0, reset, dates[1])[..]);
            upstream
                .held_for()
                .expect("none left: held until the reset")
        };
        // The clocks agree by the first response: the late one is read
        // against the machine's clock, the reset 3 s away, not 4 and more.
        let late = held([second, before]);
        assert!(
            late <= Duration::from_secs(3) && late > Duration::from_millis(2_800),
            "{late:?}"
        );
        // Every response a second behind: the server's clock is, and its
        // instants are read against it, later.
        let behind = held([before, before]);
        assert!(behind > Duration::from_millis(3_900), "{behind:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_servers_clock_is_told_by_the_last_responses_dates_together() {
        let ms = |n: i64| n * 1_000_000;
        let [pacer, a, b, c] = core::array::from_fn(|_| Pacer::default());
        tokio::time::advance(Duration::from_millis(500)).await;
        let departed = Some(pacer.now() - 100_000_000);
        // The first response, alone: the 100 ms its request was out may
        // explain a lag of a second and 50 ms, not one of 1.2 s.
        assert_eq!(a.date_lag(ms(1_050), departed), 0);
        assert_eq!(b.date_lag(ms(1_200), departed), ms(1_200));
        assert_eq!(c.date_lag(ms(1_050), None), ms(1_050));
        assert_eq!(pacer.date_lag(ms(300), departed), ms(300));
        // One response 2 s behind: the clocks still agree.
        assert_eq!(pacer.date_lag(ms(2_000), None), 0);
        // Every response from here 2 s behind too: the server's clock
        // moved, and once the last eight say so, it is taken as behind.
        let lags: Vec<i64> = (1..LAGS).map(|_| pacer.date_lag(ms(2_000), None)).collect();
        assert_eq!(lags[LAGS - 3], 0);
        assert_eq!(lags[LAGS - 2], ms(2_000));
        // A server ahead (a `Date` after the arrival) is taken at once.
        assert_eq!(pacer.date_lag(-ms(1_500), None), -ms(1_500));
    }

    #[test]
    fn a_refill_whose_instants_are_whole_seconds_is_not_read_as_a_window() {
        // Anthropic's headers from a bucket of 3 000 tokens refilling at
        // 1 500 a second, each reset instant rounded up to the second.
        let pacer = Pacer::default();
        let now = SystemTime::now();
        for missing in (200..=3000_u64).step_by(200) {
            let whole = now + Duration::from_secs_f64(missing as f64 / 1500.0);
            let secs = whole.duration_since(UNIX_EPOCH).unwrap().as_secs() + 1;
            let at = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs));
            let headers = [
                ("anthropic-ratelimit-tokens-limit", "3000".to_owned()),
                (
                    "anthropic-ratelimit-tokens-remaining",
                    (3000 - missing).to_string(),
                ),
                ("anthropic-ratelimit-tokens-reset", at.to_string()),
            ];
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            pacer.learn(
                &crate::http::rate_limit_fields(&headers[..], now),
                None,
                false,
            );
            assert!(!pacer.tokens.windowed(), "{missing} missing, whole at {at}");
        }
    }

    /// What a refilling server of 20 requests and 3 000 tokens per 2 s
    /// says in OpenAI's headers with `requests` and `tokens` left.
    fn refill_reading(requests: f64, tokens: f64) -> RateLimitFields {
        let reset = |left: f64, limit: f64, per_s: f64| {
            format!("{}ms", ((limit - left) / per_s * 1000.0).ceil() as u64)
        };
        let headers = [
            ("x-ratelimit-limit-requests", "20".to_owned()),
            (
                "x-ratelimit-remaining-requests",
                (requests.floor() as u64).to_string(),
            ),
            ("x-ratelimit-reset-requests", reset(requests, 20.0, 10.0)),
            ("x-ratelimit-limit-tokens", "3000".to_owned()),
            (
                "x-ratelimit-remaining-tokens",
                (tokens.floor() as u64).to_string(),
            ),
            ("x-ratelimit-reset-tokens", reset(tokens, 3000.0, 1500.0)),
        ];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        crate::http::rate_limit_fields(&headers[..], std::time::SystemTime::now())
    }

    /// A refilling server of 20 requests and 3 000 tokens per 2 s, read
    /// as it admits attempts of 200 tokens: a burst of 15, then one each
    /// 133 ms, the tokens' pace (the requests, refilled faster, read about
    /// 1 spent while the tokens read nearly all). The mean cost learned
    /// stays near 200; the ratio of what each reading says is spent grew
    /// past 1 000, and the attempts of calls without `cost` went that much
    /// slower (1.6–1.8× in the fan-out).
    #[tokio::test(start_paused = true)]
    async fn the_mean_cost_read_from_a_refill_counts_what_was_spent_since() {
        let pacer = Pacer::default();
        let (mut requests, mut tokens) = (20.0_f64, 3000.0_f64);
        let step = Duration::from_millis(133);
        for i in 0..45 {
            if i >= 15 {
                tokio::time::advance(step).await;
                requests = (requests + 10.0 * step.as_secs_f64()).min(20.0);
                tokens = (tokens + 1500.0 * step.as_secs_f64()).min(3000.0);
            }
            requests -= 1.0;
            tokens -= 200.0;
            let fields = refill_reading(requests, tokens);
            pacer.learn(&fields, None, false);
        }
        let mean = pacer.mean_cost().expect("learned");
        assert!(
            (170..=230).contains(&mean),
            "{mean}, not within 15 % of 200"
        );
    }

    /// The same server, its answers taking 10 ms and 700 ms in turn: each
    /// reading is of when its request reached the server, not of when its
    /// response came. Timed by the responses, the refill of the answers'
    /// times read as spent and the mean cost learned wandered 170–230
    /// (85–257 here; calls without `cost` on a refill: 0–2 429s, up to
    /// 1.22× of what the limits allow). A reading older than the last is
    /// not a sample. (What is left of the requests, in whole requests,
    /// still sways each sample by up to one.)
    #[tokio::test(start_paused = true)]
    async fn the_mean_cost_times_each_reading_by_when_its_request_left() {
        let pacer = Pacer::default();
        let start = pacer.now();
        let ms = |n: u64| n * 1_000_000;
        let (mut requests, mut tokens) = (20.0_f64, 3000.0_f64);
        // (departed, read, what the server said then), in departure order.
        let mut readings = Vec::new();
        let mut left = 0;
        for i in 0..45_u64 {
            if i >= 15 {
                requests = (requests + 10.0 * 0.134).min(20.0);
                tokens = (tokens + 1500.0 * 0.134).min(3000.0);
                left += ms(134);
            }
            requests -= 1.0;
            tokens -= 200.0;
            let answer = if i % 2 == 0 { ms(10) } else { ms(700) };
            readings.push((left, left + answer, requests, tokens));
        }
        readings.sort_by_key(|&(_, read, ..)| read);
        for (departed, read, requests, tokens) in readings {
            let now = pacer.now() - start;
            tokio::time::advance(Duration::from_nanos(read - now)).await;
            let fields = refill_reading(requests, tokens);
            pacer.learn(&fields, Some(start + departed), false);
            let mean = pacer.mean_cost().expect("learned from the first");
            assert!(
                (180..=220).contains(&mean),
                "{mean}, not within 10 % of 200"
            );
        }
    }

    /// Attempts that left while no limit was known (the scout, the cold
    /// start's ramp) are counted when the first reading comes, beside what
    /// the server counted. They went uncounted: 2 more than the window
    /// held, and 2 429s, when a slow scout's headers came after the ramp's
    /// first round.
    #[test]
    fn attempts_out_before_any_limit_was_known_count_when_one_is_learned() {
        let pacer = Pacer::default();
        for _ in 0..3 {
            let charge = pacer.take(0, 200, 0, 0).expect("nothing paced");
            assert!(charge.holds.has(Holds::REQUEST) && charge.tokens == 200);
        }
        // The first one's response: 200 of 3 000 spent, whole in 2 s.
        let headers = [
            ("x-ratelimit-limit-tokens", "3000"),
            ("x-ratelimit-remaining-tokens", "2800"),
            ("x-ratelimit-reset-tokens", "2s"),
        ];
        let fields = crate::http::rate_limit_fields(&headers[..], std::time::SystemTime::now());
        pacer.learn(&fields, None, false);
        let level = pacer.tokens.level(pacer.now());
        assert!(
            (2390..=2410).contains(&level),
            "{level}: its own and the 2 others in flight spent, not 200"
        );
    }

    /// The same for calls without `cost` while no mean is known: they
    /// take no tokens, and when the first reading teaches the mean, those
    /// in flight count at it. They went uncounted: with answers of 0–2 s
    /// the scout's reading came after the cold start's second had let 2
    /// more go, and the window's log let 12 more into room for 10 (2
    /// 429s, 1.5× what the limits allow).
    #[test]
    fn attempts_out_before_a_mean_cost_was_known_count_at_the_first_mean() {
        let pacer = Pacer::default();
        let charges: Vec<Charge> = (0..3)
            .map(|_| pacer.take(0, COST_UNKNOWN, 0, 0).expect("nothing paced"))
            .collect();
        assert!(charges.iter().all(|c| c.tokens == 0), "no mean: no tokens");
        // The first one's response: 1 request and 200 tokens of it spent.
        let headers = [
            ("x-ratelimit-limit-requests", "20"),
            ("x-ratelimit-remaining-requests", "19"),
            ("x-ratelimit-reset-requests", "100ms"),
            ("x-ratelimit-limit-tokens", "3000"),
            ("x-ratelimit-remaining-tokens", "2800"),
            ("x-ratelimit-reset-tokens", "134ms"),
        ];
        let fields = crate::http::rate_limit_fields(&headers[..], std::time::SystemTime::now());
        pacer.learn(&fields, None, false);
        assert_eq!(pacer.mean_cost(), Some(200));
        let level = pacer.tokens.level(pacer.now());
        assert!(
            (2390..=2410).contains(&level),
            "{level}: its own and the 2 others in flight spent at the mean, not 200"
        );
        // Ended, they count no more.
        for charge in charges {
            pacer.end(charge, true);
        }
        pacer.learn(&fields, None, false);
        let level = pacer.tokens.level(pacer.now());
        assert!((2790..=2810).contains(&level), "{level}");
    }

    /// A window's reset given as a duration counts from when the server
    /// wrote it, as the request reached it: within the margin of its
    /// departure. Read from the response, a slow answer's reset read late
    /// by the answer's time (the fan-out's first window went ~55 ms late
    /// on OpenAI's rolling window: 1.04–1.06× of what the limits allow).
    #[tokio::test(start_paused = true)]
    async fn a_reset_given_as_a_duration_counts_from_its_requests_departure() {
        let pacer = Pacer::default();
        pacer
            .requests
            .set(20, Duration::from_secs(2), LimitSource::Declared);
        let left = pacer.now();
        pacer
            .take(left, COST_UNKNOWN, u64::MAX, left)
            .expect("declared: the burst goes");
        // Answered 500 ms later: 1 counted, free again in 2 s (a window).
        tokio::time::advance(Duration::from_millis(500)).await;
        let headers = [
            ("x-ratelimit-limit-requests", "20"),
            ("x-ratelimit-remaining-requests", "19"),
            ("x-ratelimit-reset-requests", "2s"),
        ];
        let fields = crate::http::rate_limit_fields(&headers[..], std::time::SystemTime::now());
        pacer.learn(&fields, Some(left), false);
        assert!(pacer.requests.windowed());
        // 2 s and the margin (40 ms) after it left, not 2 s after the answer.
        let ms = 1_000_000;
        assert_eq!(pacer.requests.level(left + 2_039 * ms), 19);
        assert_eq!(pacer.requests.level(left + 2_040 * ms), 20);
    }

    /// A slow answer's reading, while callers queue: read as the server's
    /// count now, with everything in flight on top, it could only ever
    /// move their next place later (some of what is in flight the server
    /// had counted). Its request's departure says how far the estimate was
    /// off then, and it moves the place either way: answers of 0–2 s on a
    /// refill took 1.36–1.43× of what the limits allow, 1.17–1.34× now.
    #[tokio::test(start_paused = true)]
    async fn a_slow_answers_reading_moves_the_queues_place_by_how_far_it_was_off() {
        let ms = |n: u64| Duration::from_millis(n);
        let pacer = Pacer::default();
        pacer.requests.set(20, ms(2000), LimitSource::Learned);
        pacer.tokens.set(3000, ms(2000), LimitSource::Learned);
        for _ in 0..14 {
            pacer.take(pacer.now(), 200, 0, 0).expect("the burst fits");
        }
        let departure = pacer.departure();
        assert_eq!(pacer.departures.find(departure), [None; 2], "in its burst");
        // Alone, 200 ms after the burst: its departure is marked.
        tokio::time::advance(ms(200)).await;
        let now = pacer.now();
        pacer.take(now, 200, now, now).expect("refilled");
        let departure = pacer.departure();
        assert!(pacer.departures.find(departure).iter().all(Option::is_some));
        let before = pacer.tokens.tat();
        // Answered 1.3 s later: the server had counted 2 300, not the
        // 2 700 estimated (2 of the burst it never counted).
        tokio::time::advance(ms(1300)).await;
        let headers = [
            ("x-ratelimit-limit-tokens", "3000"),
            ("x-ratelimit-remaining-tokens", "700"),
            ("x-ratelimit-reset-tokens", "1s533ms"),
        ];
        let fields = crate::http::rate_limit_fields(&headers[..], std::time::SystemTime::now());
        pacer.learn(&fields, Some(departure), true);
        let moved = before as i128 - pacer.tokens.tat() as i128;
        // 400 tokens: 267 ms, less the margin of the way there (40 ms).
        assert_eq!(moved / 1_000_000, 226, "{moved} ns earlier");
        // Without its departure, all in flight on top: later, never earlier.
        let after = pacer.tokens.tat();
        pacer.learn(&fields, None, true);
        assert!(pacer.tokens.tat() > after);
    }

    #[test]
    fn a_departures_marks_are_found_by_when_it_left_until_overwritten() {
        let departures = Departures::default();
        let mark = |n: u32| NonZeroU32::new(n);
        departures.note(7, [mark(1), None]);
        departures.note(8, [None, mark(u32::MAX)]);
        assert_eq!(departures.find(7), [mark(1), None]);
        assert_eq!(departures.find(8), [None, mark(u32::MAX)]);
        assert_eq!(departures.find(9), [None; 2], "never noted");
        for at in 100..100 + DEPARTURES as u64 {
            departures.note(at, [mark(2), mark(3)]);
        }
        assert_eq!(departures.find(7), [None; 2], "overwritten: not its marks");
        assert_eq!(departures.find(100), [mark(2), mark(3)]);
    }

    #[test]
    fn an_admission_refused_by_one_dimension_takes_nothing_of_the_other() {
        let pacer = Pacer::default();
        let two = Duration::from_secs(2);
        pacer.requests.set(20, two, LimitSource::Learned);
        pacer.tokens.set(3000, two, LimitSource::Learned);
        for _ in 0..15 {
            pacer.take(0, 200, 0, 0).expect("the burst fits");
        }
        // Tokens spent, requests not: refused when the tokens fit, 133 ms.
        let span = 200 * two.as_nanos() as u64 / 3000;
        let window = two.as_nanos() as u64;
        assert_eq!(pacer.take(0, 200, 0, 0), Err(16 * span - window));
        assert_eq!(pacer.requests.in_flight(), 15, "no request taken");
        assert_eq!(pacer.requests.level(0), 5);
        let charge = pacer.take(0, 200, u64::MAX, 0).expect("by then");
        assert!(charge.holds.has(Holds::REQUEST));
        assert_eq!(charge.tokens, 200);
        assert_eq!(pacer.earliest(0, 200), 17 * span - window);
    }

    #[test]
    fn a_continuous_refill_is_read_from_one_response() {
        let mut w = WindowEstimate::default();
        let read = w.read(20, Some(19), Some(Duration::from_millis(100)), None, ONE_MS);
        assert_eq!(read, Duration::from_secs(2));
    }

    #[test]
    fn a_fixed_window_seen_from_its_start_is_corrected_by_later_responses() {
        let mut w = WindowEstimate::default();
        // 2 s windows: 1 spent at its start, then 10 halfway through.
        let first = w.read(20, Some(19), Some(Duration::from_secs(2)), None, ONE_MS);
        assert_eq!(first, Duration::from_secs(40), "looks like a slow refill");
        let later = w.read(20, Some(10), Some(Duration::from_secs(1)), None, ONE_MS);
        assert_eq!(
            later.as_millis(),
            2222,
            "1 s for 9 and a bit: at most 20/9 s"
        );
        let end = w.read(20, Some(0), Some(Duration::from_millis(100)), None, ONE_MS);
        assert_eq!(end.as_millis(), 2000, "never below the longest reset");
    }

    #[test]
    fn a_refill_that_rounds_what_is_left_down_never_reads_shorter() {
        // 20 per 2 s, 18.9 left (it reads 18), whole in 110 ms.
        let mut w = WindowEstimate::default();
        let read = w.read(20, Some(18), Some(Duration::from_millis(110)), None, ONE_MS);
        assert!(read >= Duration::from_secs(2), "{read:?}, not 1.1 s");
    }

    #[test]
    fn a_reading_without_reset_assumes_a_minute() {
        let mut w = WindowEstimate::default();
        assert_eq!(w.read(500, Some(499), None, None, ONE_MS), MINUTE);
        assert_eq!(
            w.read(500, None, Some(Duration::MAX), None, ONE_MS),
            MAX_HOLD
        );
    }

    const ONE_MS: Duration = Duration::from_millis(1);
    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_refill_read_from_instants_after_slow_answers_is_no_window() {
        // 3 000 tokens per 2 s refilling at 1 500 a second, its resets
        // instants (Anthropic's): each read 50–150 ms after its request
        // reached the server, 1 ms after it left. From the response, the
        // first (200 missing, whole in 133 ms) read after 120 ms says a
        // refill of 0.2 s; the last of the burst (3 000 missing) 2 s.
        let mut w = WindowEstimate::default();
        let read = |w: &mut WindowEstimate, missing: u64, answer_ms: u32| {
            let whole = Duration::from_secs_f64(missing as f64 / 1500.0);
            let reset = whole.saturating_sub(answer_ms * ONE_MS);
            w.read(
                3000,
                Some(3000 - missing),
                Some(reset),
                Some(whole + ONE_MS),
                ONE_MS,
            );
        };
        read(&mut w, 200, 120);
        for (i, missing) in (400..=3000).step_by(200).enumerate() {
            read(&mut w, missing, 50 + (i as u32 * 37) % 100);
            assert!(!w.windowed, "{missing} missing");
        }
    }

    #[test]
    fn a_refill_read_in_whole_seconds_is_no_window_and_a_rolling_one_is() {
        // 3 000 tokens per 2 s, `t` rounded up to the second (the IETF's):
        // a refill missing 200 whole in 133 ms reads `t=1`.
        let seconds = |missing: u64| {
            let whole = Duration::from_secs_f64(missing as f64 / 1500.0);
            Some(Duration::from_secs(
                whole.as_nanos().div_ceil(1_000_000_000) as u64,
            ))
        };
        let mut w = WindowEstimate::default();
        for missing in (200..=3000).step_by(200) {
            w.read(3000, Some(3000 - missing), seconds(missing), None, SECOND);
            assert!(!w.windowed, "{missing} missing");
        }
        // A rolling window: whole in its 2 s, whatever is missing.
        let mut w = WindowEstimate::default();
        for missing in [200, 3000] {
            w.read(3000, Some(3000 - missing), Some(2 * SECOND), None, SECOND);
        }
        assert!(w.windowed);
    }

    /// The IETF's `t` is rounded up to the second, and one reading of a
    /// rolling window (200 of 3 000 spent, whole in 1.05 s: `t=2`) could
    /// be a refill as slow as 15 s a window: read so, 200 more went 133 ms
    /// later, into a window that frees nothing for a second (a 429 in one
    /// run of two with answers of 0–2 s). The window the policy says (`w`)
    /// tells: a refill of 3 000 a 2 s misses 200 for 133 ms, `t=1`.
    #[tokio::test(start_paused = true)]
    async fn a_window_the_policy_says_tells_a_rounded_reset_of_a_window_from_a_refill() {
        let read = |remaining: u64, t: u64| {
            let pacer = Pacer::default();
            let rate_limit = format!("\"tokens\";r={remaining};t={t}");
            let headers = [
                ("RateLimit-Policy", "\"tokens\";q=3000;w=2;qu=\"tokens\""),
                ("RateLimit", rate_limit.as_str()),
            ];
            let fields = crate::http::rate_limit_fields(&headers[..], std::time::SystemTime::now());
            pacer.learn(&fields, None, false);
            pacer.tokens.windowed()
        };
        assert!(read(2800, 2), "whole in over a second: a window");
        assert!(!read(2800, 1), "whole within the second: a refill");
        assert!(
            !read(0, 2),
            "all of it missing: a refill would be whole in 2 s too"
        );
    }

    #[test]
    fn a_refill_server_is_never_read_as_a_window() {
        // 3 000 per 2 s refilling at 1 500 a second, read as the server
        // writes them (what is left rounded down, resets rounded up to the
        // millisecond) as it admits 200 at a time, refilling between.
        let mut w = WindowEstimate::default();
        let mut level = 3000.0_f64;
        for i in 0..60 {
            level = (level + 1500.0 * 0.037 * f64::from(i % 3)).min(3000.0) - 200.0;
            if level < 0.0 {
                level += 200.0;
                continue;
            }
            let reset = Duration::from_secs_f64((3000.0 - level) / 1500.0);
            let reset = Duration::from_millis(reset.as_nanos().div_ceil(1_000_000) as u64);
            w.read(3000, Some(level as u64), Some(reset), None, ONE_MS);
            assert!(!w.windowed, "reading {i}: {level} left, whole in {reset:?}");
        }
    }

    #[test]
    fn a_rolling_window_is_read_from_two_readings_no_refill_explains() {
        // Written as the server admits: the request just admitted leaves
        // the window last, whole a window later whatever is missing.
        let mut w = WindowEstimate::default();
        w.read(3000, Some(2800), Some(2000 * ONE_MS), None, ONE_MS);
        assert!(!w.windowed, "one reading: a 30 s refill, for all it says");
        w.read(3000, Some(0), Some(2000 * ONE_MS), None, ONE_MS);
        assert!(
            w.windowed,
            "200 missing and 3 000 missing, both whole in 2 s"
        );
    }

    #[test]
    fn a_fixed_window_is_read_as_its_end_comes_nearer() {
        let mut w = WindowEstimate::default();
        w.read(20, Some(19), Some(1900 * ONE_MS), None, ONE_MS);
        w.read(20, Some(5), Some(1850 * ONE_MS), None, ONE_MS);
        assert!(
            w.windowed,
            "15 missing and 1 missing, whole within 50 ms of each other"
        );
        // Read from a window's end: whole sooner than its refill allows.
        let mut w = WindowEstimate::default();
        w.read(20, Some(0), Some(2000 * ONE_MS), None, ONE_MS);
        w.read(20, Some(0), Some(1000 * ONE_MS), None, ONE_MS);
        assert!(w.windowed, "all missing, whole in 2 s and then in 1 s");
    }
}
