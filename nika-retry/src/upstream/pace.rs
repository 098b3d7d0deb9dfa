//! The pace gate's side of an attempt: its [`Reservation`] (the one thing
//! `run/` and `adapter/` hold of their upstream, from admission to
//! settlement), its paced wait, the cold start's scout ([`Scout`]), and
//! what responses and outcomes teach the pacer.
//!
//! An admission that does not wait (`Upstream::admit`) reads the clock and
//! updates a few atomics: no lock, no allocation; it is refused while
//! others queue. One that waits joins the paced waiters' FIFO queue
//! (`Gates::queue`); the queue's head asks when its cost fits, sleeps
//! until then (or until news moves it), and looks again: nobody holds a
//! place while it waits.

use core::future::Future;
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::adapt::as_bucket;
use super::bucket::LimitSource;
use super::handle::{Gates, PACING, Upstream};
use super::hold::{Held, Patience};
use super::pacer::{COST_UNKNOWN, Charge, Holds};
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::events::upstream::HoldReason;
use crate::http::RateLimitFields;
use crate::time::Nanos;
use crate::vocab::category::ErrorCategory;

impl Gates {
    /// Takes what a response's headers say of the limits in; returns
    /// whether the requests are paced by their bucket.
    pub(super) fn learn(&self, fields: &RateLimitFields, departed: Option<u64>) -> bool {
        let pacer = &self.pacer;
        if fields.requests.any() || fields.tokens.any() {
            pacer.heard.store(true, Ordering::Relaxed);
            pacer.learn(fields, departed, self.queued.load(Ordering::Acquire) > 0);
            pacer.warm();
            pacer.ramp.stop();
            self.publish_pacing();
        }
        pacer.requests.known()
    }

    /// An attempt that charged `charge` ended (`succeeded`, or not;
    /// `None`: cancelled).
    pub(super) fn end_charge(&self, charge: Charge, outcome: Option<bool>) {
        let (pacer, succeeded) = (&self.pacer, outcome == Some(true));
        pacer.end(charge, outcome.is_some());
        if charge.holds.has(Holds::RAMP) {
            pacer.ramp.end(succeeded);
            if !pacer.ramp.on() {
                self.publish_pacing();
            }
        }
        if charge.holds.has(Holds::SCOUT) {
            pacer.warm();
            self.publish_pacing();
        }
        if succeeded && let Some(rate) = pacer.adaptive.succeeded(Instant::now()) {
            self.adapt_rate(rate);
        }
    }

    /// Publishes whether attempts must pass the pacer.
    pub(super) fn publish_pacing(&self) {
        let pacer = &self.pacer;
        let active = pacer.active() || pacer.adaptive.on();
        self.look_at(PACING, active);
    }

    /// The pacer's part of an attempt's wait: the cold start's, then its
    /// buckets'. Returns the charge, and the reason it waited if it did;
    /// `None` if the upstream was held meanwhile (nothing charged).
    pub(super) async fn pace(
        &self,
        cost: u32,
        patience: Patience,
        reserved: bool,
    ) -> Result<Option<Charge>, Held> {
        let pacer = &self.pacer;
        let (mut scout, mut reason) = if reserved {
            // Refused by the pace while the upstream was warm.
            (Scout::none(self), None)
        } else {
            self.cold_start().await
        };
        // Dropped on `Held`, or held while paced: the slot goes back.
        let slot = if pacer.ramp.on() {
            let (slot, waited) = pacer.ramp.slot().await;
            if waited {
                reason = Some(WaitReason::ColdStart);
            }
            slot
        } else {
            None
        };
        // Behind the waiters before it: it looks once it is the queue's head.
        let _queue = self.enqueue(patience.deadline, cost).await?;
        // Its wait from here: a take counts from the refill it waited for,
        // not from the margin after it.
        let since = pacer.now();
        // Beyond what the buckets held when it came (a refill's waiter,
        // which a declared quota keeps until the first response).
        let mut beyond = reserved;
        let mut charge = loop {
            let mut changed = pin!(pacer.changed.notified());
            changed.as_mut().enable();
            let now = Instant::now();
            let now_ns = pacer.at(now);
            let planned = pacer.earliest(now_ns, cost);
            beyond |= planned > now_ns;
            let mut at = if beyond {
                pacer.after_news(planned, now_ns)
            } else {
                planned
            };
            if at <= now_ns {
                if reason.is_some() && self.left().is_some() {
                    // Held while it was paced: nothing taken, it waits again.
                    return Ok(None);
                }
                match pacer.take(now_ns, cost, now_ns, since) {
                    Ok(charge) => break charge,
                    Err(later) => at = later,
                }
            }
            let at = pacer.instant(at);
            if past_deadline(patience.deadline, at) {
                return Err(Held::new(
                    self.name.clone(),
                    at.saturating_duration_since(now),
                    HoldReason::RateLimitHeaders,
                ));
            }
            reason = Some(WaitReason::Paced);
            // Its instant, or news that moves it: either way it looks again.
            let mut sleep = pin!(tokio::time::sleep_until(at));
            core::future::poll_fn(|cx| {
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                changed.as_mut().poll(cx)
            })
            .await;
        };
        charge
            .holds
            .set(Holds::SCOUT, core::mem::take(&mut scout.armed));
        charge
            .holds
            .set(Holds::RAMP, slot.is_some_and(|slot| slot.start()));
        charge.reason = reason;
        Ok(Some(charge))
    }

    /// This caller's turn in the queue of the paced waiters, once it is
    /// its head (at once if none is before it). `Held` if the place it
    /// would take now, before any waiter's, is past the call's deadline
    /// already, or if the deadline passes while it queues.
    async fn enqueue(&self, deadline: Option<Instant>, cost: u32) -> Result<InQueue<'_>, Held> {
        let mut queue = InQueue {
            gates: self,
            turn: None,
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        if let Ok(turn) = self.queue.try_lock() {
            queue.turn = Some(turn);
            return Ok(queue);
        }
        let Some(deadline) = deadline else {
            queue.turn = Some(self.queue.lock().await);
            return Ok(queue);
        };
        let pacer = &self.pacer;
        let now = Instant::now();
        // The earliest it could go, were it the head: the waiters before
        // it only make it later.
        let at = pacer.instant(pacer.earliest(pacer.at(now), cost));
        let late = |at: Instant| {
            Held::new(
                self.name.clone(),
                at.saturating_duration_since(Instant::now()),
                HoldReason::RateLimitHeaders,
            )
        };
        if at > deadline {
            return Err(late(at));
        }
        match tokio::time::timeout_at(deadline, self.queue.lock()).await {
            Ok(turn) => {
                queue.turn = Some(turn);
                Ok(queue)
            }
            Err(_) => Err(late(deadline)),
        }
    }

    /// Whether the dimensions a response says are spent (none left, the
    /// longest whole again in `reset`) are all paced by their buckets.
    pub(super) fn paces_spent(&self, fields: &RateLimitFields, reset: Duration) -> bool {
        let pacer = &self.pacer;
        let dimensions = [
            (&pacer.requests, &fields.requests),
            (&pacer.tokens, &fields.tokens),
        ];
        let mut longest = None;
        for (bucket, fields) in dimensions {
            if fields.remaining == Some(0) {
                if !bucket.known() {
                    return false;
                }
                longest = longest.max(fields.reset);
            }
        }
        // The hold's reset is one of these (another dialect's may not be).
        longest.is_some_and(|l| l + Duration::from_millis(1) >= reset)
    }

    /// A failed attempt: a 429 from an upstream whose responses never said
    /// anything of their limits turns the adaptive rate on, or lowers it.
    pub(super) fn adapt(&self, failure: Failure, now: Instant, charge: Charge) {
        let pacer = &self.pacer;
        if failure.category == ErrorCategory::RateLimited {
            // Admitted by the pacer and refused all the same.
            if charge.holds.has(Holds::REQUEST) {
                pacer.requests.missed();
            }
            if charge.tokens > 0 {
                pacer.tokens.missed();
            }
        }
        if pacer.heard.load(Ordering::Relaxed) {
            return;
        }
        if failure.category != ErrorCategory::RateLimited {
            // The send rate, measured also before the first 429.
            pacer.adaptive.measure(now);
            return;
        }
        if pacer.requests.known() && !pacer.requests.adapted() {
            return;
        }
        if let Some(rate) = pacer.adaptive.throttled(now, charge.rate) {
            self.adapt_rate(rate);
        }
    }

    pub(super) fn adapt_rate(&self, rate: f64) {
        self.pacer.ramp.stop();
        let (limit, window) = as_bucket(rate);
        self.pacer.requests.set(limit, window, LimitSource::Adapted);
        self.publish_pacing();
    }
}

/// A caller in the queue of the paced waiters, counted in `queued` from
/// before it queues until its attempt starts, it gives up, or it is
/// dropped (its call cancelled): the next one is the head then.
struct InQueue<'g> {
    gates: &'g Gates,
    turn: Option<tokio::sync::MutexGuard<'g, ()>>,
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.gates.queued.fetch_sub(1, Ordering::AcqRel);
        drop(self.turn.take());
    }
}

/// The scout's turn before its attempt starts: dropped then (its call
/// cancelled, or failed with `Held`), the others go.
pub(super) struct Scout<'u> {
    gates: &'u Gates,
    pub(super) armed: bool,
}

impl<'u> Scout<'u> {
    /// Not the scout.
    pub(super) fn none(gates: &'u Gates) -> Scout<'u> {
        Scout {
            gates,
            armed: false,
        }
    }
}

impl Drop for Scout<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.gates.pacer.warm();
            self.gates.publish_pacing();
        }
    }
}

impl Gates {
    /// Waits out the cold start, if it is pending: this caller's scout
    /// turn (armed if it is the scout), and why it waited, if it did.
    pub(super) async fn cold_start(&self) -> (Scout<'_>, Option<WaitReason>) {
        let pacer = &self.pacer;
        let mut scout = Scout::none(self);
        let mut reason = None;
        loop {
            // Registered before the look: news after it is seen.
            let mut news = pin!(pacer.scouted().notified());
            news.as_mut().enable();
            if !pacer.cold.load(Ordering::Acquire) {
                break;
            }
            match pacer.scout_turn(Instant::now()) {
                Ok(()) => {
                    scout.armed = true;
                    break;
                }
                Err(None) => {
                    pacer.warm();
                    self.publish_pacing();
                    break;
                }
                Err(Some(until)) => {
                    reason = Some(WaitReason::ColdStart);
                    // The scout's news, or the end of the wait for it.
                    let _ = tokio::time::timeout_at(until, &mut news).await;
                }
            }
        }
        (scout, reason)
    }
}

/// An attempt's place at its upstream, from its admission to its
/// settlement: the one thing `run/` and `adapter/` hold of it. Dropped
/// without an outcome (the call was cancelled), a probe passes its turn
/// on. The generated loop keeps one for the whole call, idle (no probe, no
/// wait) between attempts: an open upstream's attempt writes nothing to
/// it, and nothing is built or moved across the attempt's `await`.
pub(crate) struct Reservation<'u> {
    pub(super) upstream: &'u Upstream,
    pub(super) probe: bool,
    /// Refused by the pacer: the wait looks again, beyond what the
    /// buckets held when it came.
    pub(super) paced: bool,
    /// How long the caller waited for it, none if it did not: 8 bytes
    /// where an `Option<Duration>` takes 16, in the future of every fn that
    /// names an upstream.
    pub(super) waited: Nanos,
    /// The call's cost per attempt ([`COST_UNKNOWN`]: the mean learned).
    pub(super) cost: u32,
    /// What the attempt charged the pacer, and why it waited.
    pub(super) charge: Charge,
}

impl<'u> Reservation<'u> {
    /// A turn that neither probes nor waited: an open upstream's.
    #[inline(always)]
    pub(crate) fn idle(upstream: &'u Upstream) -> Self {
        Reservation {
            upstream,
            probe: false,
            paced: false,
            waited: Nanos::NONE,
            cost: COST_UNKNOWN,
            charge: Charge::default(),
        }
    }

    /// This turn, for a call whose attempts cost `cost` tokens.
    #[inline(always)]
    pub(crate) fn with_cost(mut self, cost: u32) -> Self {
        self.cost = cost;
        self
    }

    /// Why the caller waited for this turn, if it did.
    #[inline(always)]
    pub(crate) fn wait_reason(&self) -> Option<WaitReason> {
        self.charge.reason
    }

    /// The upstream this turn is at.
    #[inline(always)]
    pub(crate) fn upstream(&self) -> &'u Upstream {
        self.upstream
    }

    /// How long the caller waited for this turn, none if it did not.
    #[inline(always)]
    pub(crate) fn waited(&self) -> Nanos {
        self.waited
    }

    /// The attempt ended: `failure` is its error's, `until` the start of
    /// the retry its call drew (the backoff is until then). A server hint
    /// holds the upstream, whether or not the call retries; a rate limit
    /// without one holds it for the backoff; a probe's outcome releases the
    /// others unless it held again. The turn is idle after (a success with
    /// neither probe nor failures counted ends the call: nothing to reset).
    #[inline(always)]
    pub(crate) fn settle(&mut self, failure: Option<Failure>, until: Option<Instant>) {
        if failure.is_none() && self.success_ends() {
            return;
        }
        let charge = self.charge;
        if !self.charge.is_empty() {
            let charge = core::mem::take(&mut self.charge);
            self.upstream
                .gates
                .end_charge(charge, Some(failure.is_none()));
            if failure.is_none()
                && !self.probe
                && !self.upstream.gates.counting.load(Ordering::Relaxed)
            {
                self.waited = Nanos::NONE;
                return;
            }
        }
        self.settle_slow(failure, until, charge);
    }

    /// Whether a success at this turn tells the upstream nothing: not a
    /// probe's, and no failures counted (one load).
    #[inline(always)]
    pub(crate) fn success_ends(&self) -> bool {
        !self.probe
            && self.charge.is_empty()
            && !self.upstream.gates.counting.load(Ordering::Relaxed)
    }

    #[cold]
    fn settle_slow(&mut self, failure: Option<Failure>, until: Option<Instant>, charge: Charge) {
        let upstream = self.upstream;
        let probe = core::mem::take(&mut self.probe);
        self.waited = Nanos::NONE;
        let now = Instant::now();
        let backoff = until.map(|until| until.saturating_duration_since(now));
        if let Some(failure) = failure {
            upstream.gates.adapt(failure, now, charge);
        }
        let mut released = false;
        let grown = upstream.gates.locked(|state| {
            let mut grown = None;
            match failure {
                None => state.succeeded(),
                Some(failure) => {
                    let hold = match (failure.retry_after, failure.category) {
                        (Some(hint), _) => Some(hint),
                        (None, ErrorCategory::RateLimited) => backoff,
                        (None, _) => None,
                    };
                    if let Some(hold) = hold {
                        grown = state.hold(now, hold, HoldReason::ServerHint);
                    }
                    if failure.category == ErrorCategory::Transient
                        && let Some(open_for) = state.failed_transiently(probe)
                    {
                        grown = state.hold(now, open_for, HoldReason::Breaker).or(grown);
                    }
                }
            }
            if probe {
                released = state.probed(now);
            }
            grown
        });
        upstream.gates.after_hold(grown);
        if probe && let Some(store) = &upstream.gates.store {
            // After the hold, if any: the store keeps their order.
            store.probed(&upstream.gates.name, upstream.gates.token, released);
        }
        if probe {
            // Released, or held again: either way the waiters look again.
            upstream.gates.released.notify_waiters();
        }
    }
}

impl Drop for Reservation<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // Settled or idle (every call's end but a cancelled one's): nothing.
        if self.probe || !self.charge.is_empty() {
            self.cancelled();
        }
    }
}

impl Reservation<'_> {
    /// Dropped with an attempt out or a probe's turn: its call was cancelled.
    #[cold]
    fn cancelled(&mut self) {
        if !self.charge.is_empty() {
            // An attempt cancelled: its cost is no longer in flight.
            self.upstream
                .gates
                .end_charge(core::mem::take(&mut self.charge), None);
        }
        if self.probe {
            // A probe that never finished: the next waiter takes its turn.
            let gates = &self.upstream.gates;
            self.upstream.gates.locked(|state| state.probe = false);
            if let Some(store) = &gates.store {
                store.probed(&gates.name, gates.token, false);
            }
            gates.released.notify_one();
        }
    }
}

/// Whether a place at `at` is past the call's `deadline`. A pace is no
/// server hint: only the deadline bounds it, never the call's cap on
/// hints (`max_retry_after`); `wait`'s first look and the pace loop's
/// every look ask the same.
pub(super) fn past_deadline(deadline: Option<Instant>, at: Instant) -> bool {
    deadline.is_some_and(|d| at > d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENT: Patience = Patience {
        cap: Duration::from_secs(60),
        deadline: None,
    };

    fn requests(remaining: &str) -> [(&'static str, String); 3] {
        [
            ("x-ratelimit-limit-requests", "20".to_owned()),
            ("x-ratelimit-remaining-requests", remaining.to_owned()),
            ("x-ratelimit-reset-requests", "2s".to_owned()),
        ]
    }

    /// The bench's rolling window: its first reading (1 of 20 spent, whole
    /// in 2 s) reads as a 40 s refill, one each 2 s;
    /// the next reading (19 spent, whole in 2 s) is one no refill explains
    /// with the first. Before the fix they kept their instants (the 5th 10 s
    /// away; 50 calls took 70 s where 6 s were allowed); then they followed
    /// a 2 s refill, one each 100 ms, and met the window's 429s. Now one
    /// goes, the other four when the window's 19 leave it.
    #[tokio::test(start_paused = true)]
    async fn waiters_reserved_at_a_first_guess_follow_the_window_learned_after() {
        let upstream = Upstream::new("u").with_cold_start(Duration::ZERO);
        upstream.observe(&requests("19")[..]);
        let first = upstream.limits().requests.expect("learned");
        assert_eq!(first.window, Duration::from_secs(40), "a first guess");
        let burst: Vec<_> = futures_burst(&upstream, 19).await;
        let start = Instant::now();
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                let u = upstream.clone();
                tokio::spawn(async move {
                    let turn = u.pass(PATIENT).await.expect("paced, not held");
                    drop(turn);
                    Instant::now()
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        // The burst; the 5 waiters hold nothing.
        assert_eq!(upstream.limits().requests.unwrap().in_flight, 19);
        // The burst ends; the server's next answer: 19 of 20 spent.
        drop(burst);
        upstream.observe(&requests("1")[..]);
        let learned = upstream.limits().requests.unwrap();
        assert!(learned.window < Duration::from_millis(2300), "{learned:?}");
        let mut starts = Vec::new();
        for waiter in waiters {
            starts.push(waiter.await.unwrap() - start);
        }
        starts.sort();
        let ms = |n: u64| Duration::from_millis(n);
        assert!(starts[0] <= ms(10), "the one left, at once: {starts:?}");
        assert!(
            starts[1..].iter().all(|&s| s >= ms(2010) && s <= ms(2100)),
            "the rest as the window frees, not a refill's 100 ms apart: {starts:?}"
        );
        assert_eq!(
            upstream.limits().requests.unwrap().in_flight,
            0,
            "nothing left counted"
        );
    }

    /// A declared quota of `limit` per `window_ms`, its burst of `limit`
    /// started now (the turns kept in flight), and a caller spawned after
    /// `after_ms`: when it started, from now.
    async fn behind_a_declared_burst(
        limit: u32,
        window_ms: u64,
        after_ms: u64,
        meanwhile: impl AsyncFnOnce(&Upstream, Vec<Reservation<'_>>),
    ) -> Duration {
        let ms = Duration::from_millis;
        let upstream =
            Upstream::new("u").with_quota(super::super::Quota::per(ms(window_ms)).requests(limit));
        let start = Instant::now();
        let burst = futures_burst(&upstream, limit as usize).await;
        tokio::time::sleep(ms(after_ms)).await;
        let u = upstream.clone();
        let caller = tokio::spawn(async move {
            drop(u.pass(PATIENT).await.expect("paced, not held"));
            start.elapsed()
        });
        tokio::task::yield_now().await;
        meanwhile(&upstream, burst).await;
        caller.await.unwrap()
    }

    /// Before the first response, a declared quota's refill is not
    /// counted: the server may count by window, which gives nothing back
    /// until it ends. Its burst took 600 ms to go out, say (1 000 tasks on
    /// a loaded machine): the next caller used to start at once on the
    /// refill of those 600 ms, into a rolling window still full (132–175
    /// 429s in the soak, `tests/soak_quota.rs`).
    #[tokio::test(start_paused = true)]
    async fn a_declared_quota_counts_no_refill_before_its_first_response() {
        let started = behind_a_declared_burst(2, 1000, 600, async |upstream, burst| {
            tokio::time::sleep(Duration::from_millis(200)).await;
            // A refilling server's answer: 1 of 2 missing, whole in 500 ms.
            upstream.observe(
                &[
                    ("x-ratelimit-limit-requests", "2"),
                    ("x-ratelimit-remaining-requests", "1"),
                    ("x-ratelimit-reset-requests", "500ms"),
                ][..],
            );
            drop(burst);
        })
        .await;
        // Not before the response; then, with 1 counted and the other
        // still in flight, one refill (500 ms) from it and the margin.
        assert_eq!(started, Duration::from_millis(800 + 500 + 25));
    }

    /// An attempt cancelled heard nothing of how the server counts: the
    /// declared quota's waiters still wait for a response (at most the
    /// cold start's max). They used to go on the refill's word at the
    /// first cancellation.
    #[tokio::test(start_paused = true)]
    async fn a_cancelled_attempt_is_no_news_to_a_declared_quotas_waiters() {
        let started = behind_a_declared_burst(2, 1000, 0, async |_, mut burst| {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(burst.pop());
            tokio::time::sleep(Duration::from_secs(2)).await;
        })
        .await;
        assert_eq!(
            started,
            Duration::from_secs(1),
            "the cold start's max, not 525 ms"
        );
    }

    /// A fixed window read early in its course resets sooner than the
    /// window declared: an attempt still counts for the whole window
    /// declared (and the margin), and so does what was in flight when the
    /// first reading came, from when it left (it reaches the server within
    /// the margin).
    #[tokio::test(start_paused = true)]
    async fn a_declared_window_counts_each_attempt_for_all_of_it() {
        let started = behind_a_declared_burst(20, 2000, 0, async |upstream, burst| {
            tokio::time::sleep(Duration::from_millis(10)).await;
            // 1 of 20 counted, the window ends in 1.9 s: a fixed window.
            upstream.observe(
                &[
                    ("x-ratelimit-limit-requests", "20"),
                    ("x-ratelimit-remaining-requests", "19"),
                    ("x-ratelimit-reset-requests", "1.9s"),
                ][..],
            );
            drop(burst);
        })
        .await;
        // The 19 others in flight, sent at 0, count until 2 s + 40 ms
        // after (they used to until the reset, 1.91 s, then until 2 s +
        // 40 ms after the reading that found them in flight, 2.05 s).
        assert_eq!(started, Duration::from_millis(2040));
    }

    /// A window's plan moves later while the paced waiter sleeps (20
    /// more sent just before its instant, as another path's attempts): it
    /// looks again when it wakes, and waits for the new one. A waiter used
    /// to start at its old instant, one more than the window held (under
    /// load, up to ~1 s early, and 1–120 429s that no late request
    /// explained in `tests/soak_quota.rs`).
    #[tokio::test(start_paused = true)]
    async fn a_waiter_whose_window_plan_moved_later_while_it_slept_waits_for_the_new_one() {
        let ms = Duration::from_millis;
        let started = behind_a_declared_burst(20, 2000, 10, async |upstream, burst| {
            // Windowed (a fixed window's reading): the 20 in flight count
            // until 2.05 s, the caller's instant.
            upstream.observe(
                &[
                    ("x-ratelimit-limit-requests", "20"),
                    ("x-ratelimit-remaining-requests", "19"),
                    ("x-ratelimit-reset-requests", "1.9s"),
                ][..],
            );
            drop(burst);
            tokio::time::sleep(ms(2040 - 10)).await;
            // 20 sent at 2.04 s: they count until 4.08 s.
            let pacer = &upstream.gates.pacer;
            for _ in 0..20 {
                let charge = pacer
                    .take(pacer.now(), 1, u64::MAX, pacer.now())
                    .expect("sent");
                upstream.gates.end_charge(charge, Some(true));
            }
            tokio::time::sleep(ms(3000)).await;
        })
        .await;
        assert_eq!(started, ms(4080), "not at its old instant, 2.05 s");
    }

    /// Starts 14 callers behind a scout that ends after 100 ms; each
    /// holds its turn 100 ms, then settles it with `outcome(i)`: when each
    /// started, and why it waited.
    async fn behind_a_scout(
        upstream: &Upstream,
        outcome: fn(usize) -> Option<Failure>,
    ) -> Vec<(Duration, Option<WaitReason>)> {
        behind_a_scout_for(upstream, Duration::from_millis(100), outcome).await
    }

    /// The same, each caller holding its turn `call`.
    async fn behind_a_scout_for(
        upstream: &Upstream,
        call: Duration,
        outcome: fn(usize) -> Option<Failure>,
    ) -> Vec<(Duration, Option<WaitReason>)> {
        let mut scout = upstream.pass(PATIENT).await.expect("the scout");
        let start = Instant::now();
        let callers: Vec<_> = (0..14)
            .map(|i| {
                let u = upstream.clone();
                tokio::spawn(async move {
                    let mut turn = u.pass(PATIENT).await.expect("not held");
                    let (at, reason) = (start.elapsed(), turn.wait_reason());
                    tokio::time::sleep(call).await;
                    turn.settle(outcome(i), None);
                    (at, reason)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        scout.settle(None, None);
        let mut starts = Vec::new();
        for caller in callers {
            starts.push(caller.await.unwrap());
        }
        starts.sort_by_key(|&(at, _)| at);
        starts
    }

    /// How many of `starts` fell in each 100 ms from 100 ms on.
    fn rounds(starts: &[(Duration, Option<WaitReason>)]) -> Vec<usize> {
        let mut rounds = Vec::new();
        for &(at, _) in starts {
            let round = (at.as_millis() / 100) as usize;
            rounds.resize(rounds.len().max(round), 0);
            rounds[round - 1] += 1;
        }
        rounds
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_scout_that_heard_nothing_the_others_go_in_rounds_that_double() {
        let upstream = Upstream::new("u");
        let starts = behind_a_scout(&upstream, |_| None).await;
        assert_eq!(rounds(&starts), [2, 4, 8], "{starts:?}");
        assert!(
            starts
                .iter()
                .all(|&(_, r)| r == Some(WaitReason::ColdStart)),
            "{starts:?}"
        );
        assert!(upstream.gates.pacer.ramp.on(), "until 64 may be out");
    }

    #[tokio::test(start_paused = true)]
    async fn a_round_of_long_calls_waits_for_its_successes_at_most_the_cold_starts_max() {
        // 30 s calls: rounds of successes would take 30 s each; the window
        // doubles after each 1 s (the cold start's max) instead.
        let upstream = Upstream::new("u");
        let starts = behind_a_scout_for(&upstream, Duration::from_secs(30), |_| None).await;
        let s = |n: u64| Duration::from_millis(n);
        let at: Vec<_> = starts.iter().map(|&(at, _)| at).collect();
        assert_eq!(
            at,
            [
                [s(100); 2].as_slice(),
                &[s(1100); 2],
                &[s(2100); 4],
                &[s(3100); 6],
            ]
            .concat(),
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_without_headers_ends_the_ramp_and_the_adaptive_rate_paces() {
        let upstream = Upstream::new("u");
        // The first round's first caller meets a 429.
        let limited = |i| (i == 0).then_some(Failure::new(ErrorCategory::RateLimited, None));
        let starts = behind_a_scout(&upstream, limited).await;
        assert!(!upstream.gates.pacer.ramp.on());
        assert!(upstream.gates.pacer.adaptive.on());
        assert_eq!(rounds(&starts)[0], 2, "{starts:?}");
        // The 12 left, released by the ramp's end at 200 ms, go at the
        // adapted rate: its bucket's burst at once, the rest as it
        // refills (unpaced, all 12 went at 200 ms).
        let (last, reason) = starts[starts.len() - 1];
        assert!(last > Duration::from_millis(200), "{starts:?}");
        assert_eq!(reason, Some(WaitReason::Paced), "{starts:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_scout_whose_response_said_its_limits_starts_no_ramp() {
        let upstream = Upstream::new("u");
        let mut scout = upstream.pass(PATIENT).await.expect("the scout");
        upstream.observe(&requests("19")[..]);
        scout.settle(None, None);
        assert!(!upstream.gates.pacer.ramp.on());
    }

    async fn futures_burst(upstream: &Upstream, n: usize) -> Vec<Reservation<'_>> {
        let mut turns = Vec::new();
        for _ in 0..n {
            let turn = upstream.pass(PATIENT).await.expect("open");
            assert!(turn.wait_reason().is_none(), "the burst does not wait");
            turns.push(turn);
        }
        turns
    }
}
