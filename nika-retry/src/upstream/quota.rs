//! [`Quota`]: limits declared by hand, and the builders that give an
//! upstream its quota and its cold start.

use core::time::Duration;
use std::sync::atomic::Ordering;

use super::bucket::LimitSource;
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

impl Upstream {
    /// Declares the upstream's limits: each attempt of its calls starts
    /// when every limited dimension holds its cost (one request; the
    /// call's `cost = …` of tokens), waiters served in arrival order.
    /// Rate-limit headers may lower a declared limit, never raise it. A
    /// declared quota has no cold start: it starts whole and its first
    /// burst goes at once; the waiters beyond it wait for the first
    /// response (at most the cold start's max), whose headers say whether
    /// the server refills or counts by window (then a log of what was sent
    /// paces them), and each goes a margin after the refill it waits for
    /// (a fortieth of the window, at most 40 ms, doubled by a 429 up to an
    /// eighth): the server's refill runs from when a request reaches it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::{Quota, Upstream};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("tools/search")
    ///     .with_quota(Quota::per(Duration::from_secs(1)).requests(2));
    /// let limits = upstream.limits();
    /// assert_eq!(limits.requests.unwrap().level, 2, "a declared bucket starts whole");
    /// assert!(!limits.cold_start);
    /// # }
    /// ```
    pub fn with_quota(self, quota: Quota) -> Upstream {
        let pacer = &self.shared.pacer;
        if !quota.window.is_zero() {
            for (bucket, limit) in [
                (&pacer.requests, quota.requests),
                (&pacer.tokens, quota.tokens),
            ] {
                if let Some(limit) = limit {
                    bucket.set(u64::from(limit), quota.window, LimitSource::Declared);
                }
            }
        }
        if pacer.requests.known() || pacer.tokens.known() {
            pacer.cold.store(false, Ordering::Relaxed);
            // Its burst goes; its refill waits for the first response,
            // which says whether the server refills at all.
            pacer.unheard();
        }
        self.publish_pacing();
        self
    }

    /// How long the calls of an upstream that knows no limit yet wait for
    /// its first attempt (the scout) to tell them: its response's headers
    /// observed, or its end, whichever comes first, at most `max`. The
    /// default is 1 s; `Duration::ZERO` turns the cold start off.
    ///
    /// If the scout brought no word of the limits (a server that sends no
    /// rate-limit headers), the others go in rounds that double, as TCP's
    /// slow start: 2 out at once, one more for each that succeeds (and
    /// twice as many when a round has waited `max` for its successes:
    /// long calls), until a response's headers, a 429 (which turns the
    /// adaptive rate on) or 64 attempts out together end the ramp. Its
    /// waits are
    /// [`WaitReason::ColdStart`](crate::events::WaitReason::ColdStart).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Upstream;
    ///
    /// let upstream = Upstream::new("openai/gpt-4o").with_cold_start(Duration::ZERO);
    /// assert!(!upstream.limits().cold_start);
    /// ```
    pub fn with_cold_start(self, max: Duration) -> Upstream {
        let pacer = &self.shared.pacer;
        pacer.set_cold_max(max);
        if max.is_zero() {
            pacer.cold.store(false, Ordering::Relaxed);
        }
        self.publish_pacing();
        self
    }
}
