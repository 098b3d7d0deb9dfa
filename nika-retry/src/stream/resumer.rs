//! A streamed response that resumes after its content
//! ([`Started::resume_with`](super::Started::resume_with)): where its
//! call stood when the content came ([`ResumePoint`]), and the resume
//! itself ([`resume`]), the attempts of that call that follow on, driven
//! through `run/`'s call as the fn's were: its budget, backoff, upstream,
//! limits, key and events.

use core::future::Future;
use core::time::Duration;

use tokio::time::Instant;

use super::carried::Carried;
use super::{Resume, Started, StreamError};
use crate::ambient::{self, AttemptSlot, Budget, SiteOf};
use crate::run::{AtUpstream, AttemptLimits, TimedCall, WithUpstream, sleep};
use crate::task;
use crate::time::Total;
use crate::upstream::{Upstream, in_force};
use crate::vocab::classify::Classify;
use crate::vocab::key::IdempotencyKey;
use crate::vocab::site::Site;

/// Where the call of a started stream stood when its content came: read
/// once, as the stream starts inside the attempt, since the call's own
/// future is gone by the time the stream breaks.
#[derive(Clone, Debug)]
pub(crate) struct ResumePoint {
    site: &'static Site,
    /// The attempt that delivered the content.
    slot: AttemptSlot,
    /// The call's key, if it had drawn one.
    key: Option<IdempotencyKey>,
    /// The budget in force (the outermost call's).
    budget: Option<Budget>,
    start: Option<Instant>,
    read: Option<Duration>,
    total: Option<Total>,
    /// The upstream in force (the innermost call's that names one).
    upstream: Option<Upstream>,
}

impl ResumePoint {
    /// The point of the call of `site` (its frame's), started at `start`
    /// and carrying `limits`, with the attempt in force now; `None` for a
    /// call that is not idempotent, which never resumes.
    #[cold]
    #[inline(never)]
    pub(crate) fn in_force(
        site: SiteOf,
        start: Option<Instant>,
        limits: Option<Carried>,
    ) -> Option<ResumePoint> {
        let (slot, key, budget) = ambient::exchange::attempt_as_is()?;
        if slot.not_idempotent() {
            return None;
        }
        Some(ResumePoint {
            site: site.0,
            slot,
            key,
            budget,
            start,
            read: limits.and_then(|l| l.read),
            total: limits.and_then(|l| l.total),
            upstream: in_force::upstream(),
        })
    }

    /// The call, as it goes on after the attempt that delivered the content.
    fn call(&self) -> TimedCall {
        // The stream holds the call's budget now, as the call did.
        let budget = match self.budget {
            Some(budget) => budget,
            None => Budget::new(task::DEFAULT_BUDGET, self.slot.attempt()),
        };
        let start = self.start.unwrap_or_else(Instant::now);
        TimedCall::going_on(self.site, self.slot, budget, start, self.total, self.key)
    }
}

/// What a stream that resumes keeps between its resumes: the call, its
/// upstream, and the closure that opens the rest.
pub(crate) struct Resumer<F> {
    call: TimedCall,
    upstream: Option<Upstream>,
    read: Option<Duration>,
    f: F,
}

impl<F> Resumer<F> {
    /// A resumer of the call at `point`, opening the rest with `f`.
    pub(crate) fn new(point: &ResumePoint, f: F) -> Resumer<F> {
        Resumer {
            call: point.call(),
            upstream: point.upstream.clone(),
            read: point.read,
            f,
        }
    }
}

impl<F> core::fmt::Debug for Resumer<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Resumer")
            .field("call", &self.call)
            .field("upstream", &self.upstream.as_ref().map(Upstream::name))
            .finish_non_exhaustive()
    }
}

/// After `cut`, an `Err` item of a stream that had given its caller
/// `delivered` items: the engine decides on it as on a failed attempt of
/// the call; if it retries, the resume sleeps its backoff, passes the
/// upstream, and calls `f` as the call's next attempt, until one gives a
/// started stream or the engine gives up (then the last error). Held at
/// the upstream longer than the call waits, it gives up with the last
/// error too. Gives the resumer back with the outcome.
pub(crate) async fn resume<F, Fut, R, T, E>(
    mut resumer: Resumer<F>,
    cut: E,
    delivered: u64,
) -> (Result<Started<R>, E>, Resumer<F>)
where
    F: FnMut(Resume) -> Fut,
    Fut: Future<Output = Result<Started<R>, E>>,
    R: futures_core::Stream<Item = Result<T, E>>,
    E: Classify + StreamError,
{
    let outcome = attempts(&mut resumer, cut, delivered).await;
    (outcome, resumer)
}

/// The attempts of [`resume`], the resumer lent.
async fn attempts<F, Fut, R, T, E>(
    resumer: &mut Resumer<F>,
    cut: E,
    delivered: u64,
) -> Result<Started<R>, E>
where
    F: FnMut(Resume) -> Fut,
    Fut: Future<Output = Result<Started<R>, E>>,
    R: futures_core::Stream<Item = Result<T, E>>,
    E: Classify + StreamError,
{
    let Resumer {
        call,
        upstream,
        read,
        f,
    } = resumer;
    let mut turn = AtUpstream::new(upstream.as_ref());
    let limits = AttemptLimits {
        read: *read,
        ..AttemptLimits::NONE
    };
    let mut last: Result<Started<R>, E> = Err(cut);
    loop {
        let Some(until) = call.next_resuming(&mut turn, &last, delivered) else {
            return last;
        };
        crate::metrics::resumed(call.site);
        let why = match &last {
            Err(error) => Resume::new(delivered, call.attempt, error),
            Ok(_) => unreachable!("only a failure is retried"),
        };
        sleep(until).await;
        if let Some(at) = turn.admit() {
            if call.wait_at(&mut turn, at).await.is_err() {
                return last;
            }
        }
        // `f` is called inside the attempt's first poll: the attempt, its
        // key and its upstream are in force for it and what it awaits.
        let attempt = WithUpstream::new(&turn, async { f(why).await });
        last = call.timed(limits, attempt, E::from_timeout).await;
    }
}
