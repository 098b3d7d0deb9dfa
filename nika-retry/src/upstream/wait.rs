//! An attempt's pass through its upstream: wait out a hold, take the
//! probe's turn, and after the attempt, what its outcome tells the others.

use core::pin::pin;
use core::time::Duration;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::charge::Charge;
use super::fleet::{FleetPace, Lease};
use super::handle::Upstream;
use super::hold::{Held, Patience};
use super::pacer::COST_UNKNOWN;
use super::store::Admission;
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::events::upstream::HoldReason;
use crate::time::Nanos;
use crate::vocab::category::ErrorCategory;

/// An attempt's place at its upstream, from its admission to its
/// settlement: the one thing `run/` and `adapter/` hold of it. Dropped
/// without an outcome (the call was cancelled), a probe passes its turn
/// on. The generated loop keeps one for the whole call, idle (no probe, no
/// wait) between attempts: an open upstream's attempt writes nothing to
/// it, and nothing is built or moved across the attempt's `await`.
pub(crate) struct Reservation<'u> {
    upstream: &'u Upstream,
    pub(super) probe: bool,
    /// Refused by the pacer with a place it gave back: the wait takes one
    /// again, beyond what the buckets held when it came.
    paced: bool,
    /// How long the caller waited for it, none if it did not: 8 bytes
    /// where an `Option<Duration>` takes 16, in the future of every fn that
    /// names an upstream.
    waited: Nanos,
    /// The call's cost per attempt ([`COST_UNKNOWN`]: the mean learned).
    cost: u32,
    /// What the attempt charged the pacer, and why it waited.
    pub(super) charge: Charge,
}

impl Upstream {
    /// Admits the next attempt of `r` without waiting: `None` if it may
    /// start now (the upstream open, or paced and its buckets holding the
    /// cost: no lock, no allocation), else the instant before which it
    /// cannot ([`wait`](Upstream::wait) then waits, or gives up with `Held`).
    #[inline]
    pub(crate) fn admit(&self, r: &mut Reservation<'_>) -> Option<Instant> {
        if self.open() {
            return None;
        }
        if self.shared.guarded.load(Ordering::Acquire) {
            return Some(Instant::now());
        }
        match self.admit_paced(r.cost) {
            Ok(charge) => {
                self.shared.pacer.adaptive.sent();
                r.charge = charge;
                None
            }
            Err(at) => {
                // Its place went back; the wait takes one again.
                r.paced = at.is_some();
                Some(at.unwrap_or_else(Instant::now))
            }
        }
    }

    /// The wait of an attempt [`admit`](Upstream::admit) refused, until
    /// `at` at the earliest: the hold (a probe's turn; `Held` past the
    /// call's `cap`, the longest server hint it sleeps on), the store, the
    /// pace (`Held` past the call's `deadline`, as is any wait). Boxed: the
    /// wait's state (its `Notified`, its `Sleep`, the store's futures)
    /// would otherwise sit in the future of every fn that names an
    /// upstream, held or not, and of every fn that calls one (448 bytes);
    /// one allocation for a wait, which lasts milliseconds at least, is
    /// nothing beside it. Only the box crosses the caller's `await`.
    #[cold]
    pub(crate) fn wait<'a, 'u: 'a>(
        &'u self,
        r: &'a mut Reservation<'u>,
        at: Instant,
        cap: Duration,
        deadline: Option<Instant>,
    ) -> core::pin::Pin<Box<impl core::future::Future<Output = Result<(), Held>> + 'a>> {
        let patience = Patience { cap, deadline };
        Box::pin(async move {
            if r.paced && deadline.is_some_and(|d| at > d) {
                // A pace is no server hint: only the call's deadline bounds it.
                let left = at.saturating_duration_since(Instant::now());
                return Err(Held::new(
                    self.shared.name.clone(),
                    left,
                    HoldReason::RateLimitHeaders,
                ));
            }
            *r = self.wait_turn(patience, r.cost, r.paced).await?;
            Ok(())
        })
    }

    /// The attempt ended: `failure` is its error's, `until` the start of
    /// the retry its call drew (the backoff is until then). A server hint
    /// holds the upstream, whether or not the call retries; a rate limit
    /// without one holds it for the backoff; a probe's outcome releases the
    /// others unless it held again. `r` is idle after (a success with
    /// neither probe nor failures counted ends the call: nothing to reset).
    #[inline(always)]
    pub(crate) fn settle(
        &self,
        r: &mut Reservation<'_>,
        failure: Option<Failure>,
        until: Option<Instant>,
    ) {
        r.settle(failure, until);
    }

    /// What the unit tests drive: [`admit`](Upstream::admit) and, if it
    /// refuses, [`wait`](Upstream::wait), at the mean cost learned.
    #[cfg(test)]
    pub(crate) async fn pass(&self, patience: Patience) -> Result<Reservation<'_>, Held> {
        self.pass_costing(patience, COST_UNKNOWN).await
    }

    /// [`pass`](Upstream::pass) at `cost`.
    #[cfg(test)]
    pub(crate) async fn pass_costing(
        &self,
        patience: Patience,
        cost: u32,
    ) -> Result<Reservation<'_>, Held> {
        let mut r = Reservation::idle(self).with_cost(cost);
        if let Some(at) = self.admit(&mut r) {
            self.wait(&mut r, at, patience.cap, patience.deadline)
                .await?;
        }
        Ok(r)
    }

    /// Whether the next attempt may start at once (one atomic load).
    #[inline(always)]
    fn open(&self) -> bool {
        if self.shared.guarded.load(Ordering::Acquire) || self.shared.pacing.load(Ordering::Acquire)
        {
            return false;
        }
        // Counted for the adaptive rate's measure of what is sent.
        self.shared.pacer.adaptive.sent();
        true
    }

    /// A wait at a held upstream, then at its pacer; a hold that started
    /// meanwhile is waited out again.
    #[cold]
    async fn wait_turn(
        &self,
        patience: Patience,
        cost: u32,
        mut paced: bool,
    ) -> Result<Reservation<'_>, Held> {
        let start = Instant::now();
        loop {
            let (mut turn, admission) = if self.shared.guarded.load(Ordering::Acquire) {
                self.hold_wait(patience, cost).await?
            } else {
                (Reservation::idle(self), None)
            };
            turn.cost = cost;
            let held = turn.waited.get().is_some_and(|w| !w.is_zero());
            let fleet = match &self.shared.store {
                Some(store) => self.fleet_turn(store, admission, patience, cost).await?,
                None => FleetPace::Local,
            };
            match fleet {
                FleetPace::Held => continue,
                FleetPace::Spent(charge) => turn.charge = charge,
                FleetPace::Local => {}
            }
            if matches!(fleet, FleetPace::Local) && self.shared.pacing.load(Ordering::Acquire) {
                // Dropped on `Held`: a probe's turn passes on.
                let Some(charge) = self
                    .pace(cost, patience, core::mem::take(&mut paced))
                    .await?
                else {
                    // Held while it was paced: its place went back, it waits again.
                    continue;
                };
                turn.charge = charge;
            }
            if held {
                // The hold first: the pace after it is the hold's tail (a
                // rate adapted to 429s without headers spends it).
                turn.charge.reason = Some(WaitReason::Held);
            }
            self.shared.pacer.adaptive.sent();
            // A scout, or a step that found the upstream open, did not wait.
            let waited = turn.charge.reason.is_some() || turn.probe;
            turn.waited = Nanos::new(waited.then(|| start.elapsed()));
            return Ok(turn);
        }
    }

    /// The wait for the hold's end, and the store's admission asked last
    /// if it still stands (the attempt goes at once after it).
    #[cold]
    async fn hold_wait(
        &self,
        patience: Patience,
        cost: u32,
    ) -> Result<(Reservation<'_>, Option<Admission>), Held> {
        let start = Instant::now();
        loop {
            let admission = match &self.shared.store {
                Some(store) => self.ask(store, cost).await,
                None => None,
            };
            let mut released = pin!(self.shared.released.notified());
            let now = Instant::now();
            let (step, grown) = {
                let mut state = self.lock();
                let (step, grown) = state.step(now);
                let reason = state.reason.unwrap_or(HoldReason::ServerHint);
                if let Some((until, probe)) = step
                    && let left = until.saturating_duration_since(now)
                    && (left > patience.cap || patience.deadline.is_some_and(|d| now + left > d))
                {
                    let passed_on = probe;
                    if passed_on {
                        state.probe = false;
                    }
                    self.publish(&state);
                    drop(state);
                    if passed_on {
                        // The turn goes to the next waiter, who has its own patience.
                        self.shared.released.notify_one();
                    }
                    self.after_hold(grown);
                    return Err(Held::new(self.shared.name.clone(), left, reason));
                }
                if matches!(step, Some((_, false))) {
                    // Registered under the lock: a release after it is seen.
                    released.as_mut().enable();
                }
                self.publish(&state);
                (step, grown)
            };
            self.after_hold(grown);
            match step {
                None => return Ok((self.turn(false, start), admission)),
                Some((until, true)) => {
                    // Owned from here: a probe dropped while it sleeps passes its turn.
                    let mut turn = self.turn(true, start);
                    let mut until = until;
                    loop {
                        tokio::time::sleep_until(until).await;
                        if let Some(later) = self.lock().until.filter(|&later| later > until) {
                            let left = later.saturating_duration_since(Instant::now());
                            if left > patience.cap || patience.deadline.is_some_and(|d| later > d) {
                                // Held longer meanwhile, past this caller's
                                // patience: it steps again below, gives up
                                // with `Held` and passes the turn on.
                                break;
                            }
                            until = later;
                            continue;
                        }
                        match self.lease().await {
                            Lease::Go => break,
                            Lease::Poll(at) => until = at,
                            // Held again in the store: the turn goes back
                            // and this caller steps again, patience and all.
                            Lease::Held => break,
                        }
                    }
                    if self.held_for().is_some() {
                        drop(turn);
                        continue;
                    }
                    turn.waited = Nanos::new(Some(start.elapsed()));
                    return Ok((turn, None));
                }
                Some((_, false)) => {
                    released.await;
                    // The spread the release just set.
                    let spread = self.lock().spread;
                    if !spread.is_zero() {
                        // Released with the others: arrive spread out, then
                        // look again (another call may have held it since).
                        let jitter =
                            fastrand::u64(..=spread.as_nanos().try_into().unwrap_or(u64::MAX));
                        tokio::time::sleep(Duration::from_nanos(jitter)).await;
                    }
                }
            }
        }
    }

    fn turn(&self, probe: bool, start: Instant) -> Reservation<'_> {
        Reservation {
            upstream: self,
            probe,
            paced: false,
            waited: Nanos::new(Some(start.elapsed())),
            cost: COST_UNKNOWN,
            charge: Charge::default(),
        }
    }
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
            self.upstream.end_charge(charge, Some(failure.is_none()));
            if failure.is_none()
                && !self.probe
                && !self.upstream.shared.counting.load(Ordering::Relaxed)
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
            && !self.upstream.shared.counting.load(Ordering::Relaxed)
    }

    #[cold]
    fn settle_slow(&mut self, failure: Option<Failure>, until: Option<Instant>, charge: Charge) {
        let upstream = self.upstream;
        let probe = core::mem::take(&mut self.probe);
        self.waited = Nanos::NONE;
        let now = Instant::now();
        let backoff = until.map(|until| until.saturating_duration_since(now));
        if let Some(failure) = failure {
            upstream.adapt(failure, now, charge);
        }
        let mut released = false;
        let grown = upstream.locked(|state| {
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
        upstream.after_hold(grown);
        if probe && let Some(store) = &upstream.shared.store {
            // After the hold, if any: the store keeps their order.
            store.probed(&upstream.shared.name, upstream.shared.token, released);
        }
        if probe {
            // Released, or held again: either way the waiters look again.
            upstream.shared.released.notify_waiters();
        }
    }
}

impl Drop for Reservation<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.charge.is_empty() {
            // An attempt cancelled: its cost is no longer in flight.
            self.upstream
                .end_charge(core::mem::take(&mut self.charge), None);
        }
        if self.probe {
            // A probe that never finished: the next waiter takes its turn.
            let shared = &self.upstream.shared;
            self.upstream.locked(|state| state.probe = false);
            if let Some(store) = &shared.store {
                store.probed(&shared.name, shared.token, false);
            }
            shared.released.notify_one();
        }
    }
}
