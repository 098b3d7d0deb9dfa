//! The limits' public data: [`Quota`], the limits declared by hand
//! ([`Upstream::with_quota`]), and what an upstream knows of its limits,
//! for metrics ([`Upstream::limits`]).

use core::time::Duration;

use super::bucket::{Bucket, LimitSource};
#[cfg(doc)]
use super::handle::Upstream;

/// Limits declared for an upstream: at most `requests` attempts and
/// `tokens` of cost per `window`, each spent as a bucket that refills over
/// the window ([`Upstream::with_quota`]). Either may be left out.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{Quota, Upstream};
///
/// // OpenAI's tier: 500 requests and 30 000 tokens a minute.
/// let quota = Quota::per(Duration::from_secs(60)).requests(500).tokens(30_000);
/// let upstream = Upstream::new("openai/gpt-4o").with_quota(quota);
/// assert_eq!(upstream.limits().tokens.unwrap().limit, 30_000);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// The window both limits are counted over.
    pub window: Duration,
    /// Attempts per window, if limited.
    pub requests: Option<u32>,
    /// Cost (tokens) per window, if limited.
    pub tokens: Option<u32>,
}

impl Quota {
    /// A quota counted over `window`, with no limit yet. A window of zero
    /// limits nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Quota;
    ///
    /// let quota = Quota::per(Duration::from_secs(2)).requests(20);
    /// assert_eq!(quota.requests, Some(20));
    /// assert_eq!(quota.tokens, None);
    /// ```
    pub fn per(window: Duration) -> Quota {
        Quota {
            window,
            requests: None,
            tokens: None,
        }
    }

    /// At most `n` attempts per window (0: no limit on requests).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Quota;
    ///
    /// assert_eq!(Quota::per(Duration::from_secs(60)).requests(500).requests, Some(500));
    /// ```
    pub fn requests(self, n: u32) -> Quota {
        Quota {
            requests: (n > 0).then_some(n),
            ..self
        }
    }

    /// At most `n` of cost per window: each attempt spends its call's
    /// `cost = …` (0: no limit on tokens).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Quota;
    ///
    /// assert_eq!(Quota::per(Duration::from_secs(60)).tokens(30_000).tokens, Some(30_000));
    /// ```
    pub fn tokens(self, n: u32) -> Quota {
        Quota {
            tokens: (n > 0).then_some(n),
            ..self
        }
    }
}

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
    /// What it holds now.
    pub level: u64,
    /// How fast it refills, per second.
    pub refill: f64,
    /// Where the limit comes from.
    pub source: LimitSource,
    /// What is spent by attempts in flight (the paced waiters hold nothing).
    pub in_flight: u64,
}

impl DimensionLimit {
    pub(super) fn of(bucket: &Bucket, now: u64) -> Option<DimensionLimit> {
        let (limit, window, source) = bucket.get()?;
        Some(DimensionLimit {
            limit,
            window,
            level: bucket.level(now),
            refill: limit as f64 / window.as_secs_f64(),
            source,
            in_flight: bucket.in_flight(),
        })
    }
}
