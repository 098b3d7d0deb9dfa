//! [`Upstream::limits`]: what an upstream knows of its limits, for metrics.

use core::time::Duration;
use std::sync::atomic::Ordering;

use super::bucket::{Bucket, LimitSource};
use super::handle::Upstream;

/// What an [`Upstream`] knows of its limits, at one instant
/// ([`Upstream::limits`]). Not to be confused with the engine's `Limits`
/// of one decision.
///
/// ```
/// use nika_retry::upstream::Upstream;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let limits = Upstream::new("openai/gpt-4o").limits();
/// assert_eq!(limits.requests, None, "nothing learned yet");
/// assert!(limits.cold_start, "its first attempt will scout");
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpstreamLimits {
    /// The limit on attempts, if known.
    pub requests: Option<DimensionLimit>,
    /// The limit on tokens, if known.
    pub tokens: Option<DimensionLimit>,
    /// The mean tokens an attempt spends, learned from the token headers:
    /// what an attempt of a call without `cost = …` is charged.
    pub mean_cost: Option<u64>,
    /// Whether the cold start is still pending: the next attempt scouts,
    /// the others wait for its news.
    pub cold_start: bool,
    /// While the cold start's ramp runs (its scout brought no word of the
    /// limits): how many attempts may be out together, one more for each
    /// that succeeds ([`Upstream::with_cold_start`]).
    pub ramp: Option<u32>,
}

/// One dimension of an upstream's limits.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{LimitSource, Quota, Upstream};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let upstream = Upstream::new("tools/search")
///     .with_quota(Quota::per(Duration::from_secs(2)).requests(20));
/// let requests = upstream.limits().requests.unwrap();
/// assert_eq!((requests.limit, requests.window), (20, Duration::from_secs(2)));
/// assert_eq!(requests.level, 20);
/// assert_eq!(requests.refill, 10.0, "per second");
/// assert_eq!(requests.source, LimitSource::Declared);
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DimensionLimit {
    /// The bucket's size: what may be spent at once.
    pub limit: u64,
    /// The window it refills over.
    pub window: Duration,
    /// What it holds now, reservations of waiting attempts spent.
    pub level: u64,
    /// How fast it refills, per second.
    pub refill: f64,
    /// Where the limit comes from.
    pub source: LimitSource,
    /// What is spent by attempts in flight (and those waiting for their turn).
    pub in_flight: u64,
}

impl DimensionLimit {
    fn of(bucket: &Bucket, now: u64) -> Option<DimensionLimit> {
        let (limit, window, source) = bucket.get()?;
        Some(DimensionLimit {
            limit,
            window,
            level: bucket.level(now),
            refill: limit as f64 / window.as_secs_f64(),
            source,
            in_flight: bucket.in_flight().saturating_add(bucket.waiting()),
        })
    }
}

impl Upstream {
    /// What the upstream knows of its limits now: per dimension the limit,
    /// the level, the refill and whether it was declared, learned from
    /// headers or adapted to 429s; the mean cost it learned; whether its
    /// cold start is pending.
    ///
    /// ```
    /// use nika_retry::upstream::{LimitSource, Upstream};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("openai/gpt-4o");
    /// upstream.observe(&[
    ///     ("x-ratelimit-limit-requests", "20"),
    ///     ("x-ratelimit-remaining-requests", "19"),
    ///     ("x-ratelimit-reset-requests", "100ms"),
    /// ][..]);
    /// let requests = upstream.limits().requests.unwrap();
    /// assert_eq!((requests.limit, requests.level), (20, 19));
    /// assert_eq!(requests.source, LimitSource::Learned);
    /// assert!(!upstream.limits().cold_start);
    /// # }
    /// ```
    pub fn limits(&self) -> UpstreamLimits {
        let pacer = &self.shared.pacer;
        let now = pacer.now();
        UpstreamLimits {
            requests: DimensionLimit::of(&pacer.requests, now),
            tokens: DimensionLimit::of(&pacer.tokens, now),
            mean_cost: pacer.mean_cost(),
            cold_start: pacer.cold.load(Ordering::Relaxed),
            ramp: pacer.ramp.window(),
        }
    }
}
