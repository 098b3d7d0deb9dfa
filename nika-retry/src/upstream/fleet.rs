//! The fleet gate: an attempt at a store that every process of a fleet
//! shares. Its hold and allowance asked before the attempt goes (`ask`),
//! the probe's lease once a hold ends (`lease`), its pace at a store that
//! keeps the fleet's buckets ([`Store::admit`]: what it spends, the store's
//! answer, the wait for a refill); and what a response's headers tell the
//! store of the limits ([`Store::learned`]).
//!
//! A store that keeps no buckets, fails or is slow answers
//! [`Admission::Local`]: the attempt is paced in this process, as without
//! a store.

use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::bucket::Bucket;
use super::handle::Gates;
use super::hold::{Held, Patience};
use super::pace::Scout;
use super::pacer::{Charge, Holds};
use super::store::{Admission, ProbeTurn, Reading, Spend, Store};
use crate::events::WaitReason;
use crate::events::upstream::HoldReason;
use crate::http::{LimitFields, RateLimitFields};

/// How often a probe asks the store again while another process's probe
/// is out (each time jittered by up to half of it either way).
const PROBE_POLL: Duration = Duration::from_millis(100);

/// What the store said to a local probe.
pub(super) enum Lease {
    Go,
    /// Another process's probe is out: ask again then.
    Poll(Instant),
    /// Held again (taken into the local state).
    Held,
}

impl Gates {
    /// The probe's turn in the store, once the hold has ended. A store that
    /// fails or is slow is passed over (the local probe goes).
    pub(super) async fn lease(&self) -> Lease {
        let Some(store) = &self.store else {
            return Lease::Go;
        };
        let probe = store.probe(&self.name, self.token);
        let asked = tokio::time::timeout(store.wait(), probe).await;
        let now = Instant::now();
        match asked {
            Ok(Ok(ProbeTurn::Wait)) => Lease::Poll(now + PROBE_POLL.mul_f64(0.5 + fastrand::f64())),
            Ok(Ok(ProbeTurn::Held(left, reason))) => {
                self.locked(|state| state.hold(now, left, reason));
                Lease::Held
            }
            _ => Lease::Go,
        }
    }

    /// Takes the store's hold into the local state (and, if it is not
    /// held, one from the store's allowance); a store that fails or is slow
    /// is passed over. Unless the upstream is held here, the attempt's
    /// cost is spent in the store's buckets in the same step: the
    /// admission, if it was. A cold upstream asks after its cold start
    /// ([`fleet_turn`](Upstream::fleet_turn)).
    pub(super) async fn ask(&self, store: &Arc<dyn Store>, cost: u32) -> Option<Admission> {
        let held_here = self.left().is_some();
        if !held_here && self.pacer.cold.load(Ordering::Acquire) {
            // Cold: the store is asked after the cold start (its scout at
            // once, the others after its news), once per attempt.
            return None;
        }
        // Held here, its cost would be spent before the hold ends: not
        // spent now.
        let spend = if held_here {
            [Spend::default(); 2]
        } else {
            self.spends(cost)
        };
        match self.admission(store, spend).await {
            Admission::Held(left, reason) => {
                let now = Instant::now();
                // No event: the process that set the hold in the store sent it.
                self.locked(|state| state.hold(now, left, reason));
                None
            }
            admission => (!held_here).then_some(admission),
        }
    }

    /// What an attempt of cost `cost` spends, per dimension, with the
    /// limits this process knows (a limit of 0: the store's, if any).
    pub(super) fn spends(&self, cost: u32) -> [Spend; 2] {
        let pacer = &self.pacer;
        let tokens = pacer.tokens_of(cost);
        let spend = |bucket: &Bucket, cost: u64| match bucket.get() {
            Some((limit, window, _)) => Spend::new(limit, window, cost),
            None => Spend::new(0, Duration::ZERO, cost),
        };
        [spend(&pacer.requests, 1), spend(&pacer.tokens, tokens)]
    }

    /// The store's admission of an attempt spending `spend`, at most the
    /// store's wait: a failure or no answer is [`Admission::Local`].
    pub(super) async fn admission(&self, store: &Arc<dyn Store>, spend: [Spend; 2]) -> Admission {
        let asked =
            tokio::time::timeout(store.wait(), store.admit(&self.name, self.token, spend)).await;
        match asked {
            Ok(Ok(admission)) => admission,
            _ => Admission::Local,
        }
    }

    /// The attempt's turn at a store: while this process is cold, its cold
    /// start first (its scout asks the store, which counts what it spends
    /// while no limit is known; the others ask after the scout's news,
    /// when the store may know the limits), then the store's pace.
    /// [`Admission::Go`]: the store spent its cost, or it goes as this
    /// process's scout (`charge` says so, and why it waited);
    /// [`Admission::Local`]: this process's pacer paces it;
    /// [`Admission::Held`]: held meanwhile (taken into the local state), it
    /// waits for the hold again. Never `Ready`.
    pub(super) async fn fleet_turn(
        &self,
        store: &Arc<dyn Store>,
        first: Option<Admission>,
        patience: Patience,
        cost: u32,
        charge: &mut Charge,
    ) -> Result<Admission, Held> {
        let (mut scout, mut reason, first) = match first {
            Some(Admission::Local) | None if self.pacer.cold.load(Ordering::Acquire) => {
                let (scout, reason) = self.cold_start().await;
                (scout, reason, None)
            }
            first => (Scout::none(self), None, first),
        };
        let paced = self
            .fleet_pace(store, first, patience, cost, &mut reason)
            .await?;
        // The scout goes, paced by the store if it knows a limit (another
        // process's scout came back first), else as this process's scout;
        // the others wait for its news. Held, it passes its turn (dropped).
        let scouting = core::mem::take(&mut scout.armed);
        let go = match paced {
            Admission::Go => true,
            Admission::Local => scouting,
            _ => {
                scout.armed = scouting;
                false
            }
        };
        if !go {
            return Ok(paced);
        }
        *charge = Charge {
            reason,
            ..Charge::default()
        };
        charge.holds.set(Holds::SCOUT, scouting);
        Ok(Admission::Go)
    }

    /// The attempt's pace at the store: `first` the store's answer already
    /// had, if any. While a bucket lacks the cost the attempt sleeps until
    /// it holds it and asks again; the waiters of this process ask in
    /// arrival order, one at a time, so that a refill wakes one of them.
    /// A wait past the call's deadline is `Held` at once. `reason`: why
    /// the attempt waited (its cold start), `Paced` once it sleeps here.
    /// Never `Ready`; `Held` taken into the local state.
    async fn fleet_pace(
        &self,
        store: &Arc<dyn Store>,
        first: Option<Admission>,
        patience: Patience,
        cost: u32,
        reason: &mut Option<WaitReason>,
    ) -> Result<Admission, Held> {
        let mut next = first;
        let mut queue = None;
        loop {
            let admission = match next.take() {
                Some(admission) => admission,
                None => self.admission(store, self.spends(cost)).await,
            };
            let after = match admission {
                Admission::Ready(after) => after,
                Admission::Held(left, why) => {
                    let now = Instant::now();
                    // No event: the process that set the hold in the store sent it.
                    self.locked(|state| state.hold(now, left, why));
                    return Ok(admission);
                }
                // Go, Local (and whatever a later store answers: local).
                Admission::Go => return Ok(Admission::Go),
                _ => return Ok(Admission::Local),
            };
            let now = Instant::now();
            if patience.deadline.is_some_and(|d| now + after > d) {
                return Err(Held::new(
                    self.name.clone(),
                    after,
                    HoldReason::RateLimitHeaders,
                ));
            }
            *reason = Some(WaitReason::Paced);
            if queue.is_none() {
                match self.queue.try_lock() {
                    Ok(first) => queue = Some(first),
                    Err(_) => {
                        // Behind this process's other waiters: its turn
                        // comes later, the store's answer is stale by then.
                        queue = Some(self.queue.lock().await);
                        continue;
                    }
                }
            }
            tokio::time::sleep(after).await;
        }
    }

    /// A response's reading of the limits, shared with the store: the
    /// limits this process paces with, and what the server says is left.
    pub(super) fn share_learned(&self, fields: &RateLimitFields, departed: Option<u64>) {
        let Some(store) = &self.store else {
            return;
        };
        if !fields.requests.any() && !fields.tokens.any() {
            return;
        }
        let pacer = &self.pacer;
        // An instant bounds the window from when the request left, as in
        // this process (`Pacer::learn`): the fleet's window log counts that
        // long, not the answer's time less.
        let answered = departed.map_or(Duration::ZERO, |d| {
            Duration::from_nanos(pacer.now().saturating_sub(d))
        });
        let reading = |bucket: &Bucket, fields: &LimitFields| match bucket.get() {
            Some((limit, window, _)) => {
                // A reset in whole seconds may be up to a second late; an
                // instant counted from when the request left, up to the
                // answer's time late for the moment the server counted it.
                let rounding = match fields.whole_seconds {
                    true => Duration::from_secs(1),
                    false => Duration::ZERO,
                };
                let reading = Reading::new(limit, window, fields.remaining);
                match fields.reset {
                    Some(reset) if fields.instant => reading
                        .with_reset(reset + answered)
                        .rounded(rounding + answered),
                    Some(reset) => reading.with_reset(reset).rounded(rounding),
                    None => reading,
                }
            }
            None => Reading::default(),
        };
        store.learned(
            &self.name,
            [
                reading(&pacer.requests, &fields.requests),
                reading(&pacer.tokens, &fields.tokens),
            ],
        );
    }
}
