//! [`backoff`]: the delay before a retry, before jitter.

use crate::vocab::config::MAX_ATTEMPTS;
use crate::vocab::config::{Growth, RetryConfig};
use core::time::Duration;

/// The backoff before retry `n` (1-based: `n = 1` precedes the second attempt),
/// before jitter: `min(initial · multiplier^(n−1), max_backoff)`, or
/// `min(initial · n, max_backoff)` for [`Growth::Linear`].
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{engine::backoff, Layer, RetryConfig};
///
/// let provider = RetryConfig::for_layer(Layer::Provider);
/// let schedule: Vec<_> = (1..=4).map(|n| backoff(&provider, n)).collect();
/// let secs = |s| Duration::from_secs(s);
/// assert_eq!(schedule, [secs(1), secs(4), secs(16), secs(16)]);
/// ```
pub fn backoff(cfg: &RetryConfig, n: u32) -> Duration {
    let cap = cfg.max_backoff;
    let initial = cfg.initial_backoff.min(cap);
    let n = n.clamp(1, MAX_ATTEMPTS);
    match whole_backoff(cfg, initial, n) {
        Some(d) => d.min(cap),
        None => float_backoff(cfg, initial, n, cap),
    }
}

/// [`backoff`] in integers, for a whole multiplier (the layer defaults'
/// ×4 and ×2) or linear growth, when the product is below 2^53 ns (about
/// 104 days): there the `f64` computation is exact too, so both give the
/// same duration, and this one needs no power in `f64`.
pub(super) fn whole_backoff(cfg: &RetryConfig, initial: Duration, n: u32) -> Option<Duration> {
    let factor = match cfg.growth {
        Growth::Exponential => {
            let m = effective_multiplier(cfg.multiplier);
            // Whole: compared through an integer (`fract` is a libm call).
            let whole = m as u16;
            if f64::from(whole) != m {
                return None;
            }
            u32::from(whole).checked_pow(n - 1)?
        }
        Growth::Linear => n,
    };
    let d = initial.checked_mul(factor)?;
    (d < Duration::from_nanos(1 << 53)).then_some(d)
}

/// [`backoff`] in `f64`, for any multiplier.
pub(super) fn float_backoff(
    cfg: &RetryConfig,
    initial: Duration,
    n: u32,
    cap: Duration,
) -> Duration {
    let factor = match cfg.growth {
        Growth::Exponential => effective_multiplier(cfg.multiplier).powi(n as i32 - 1),
        Growth::Linear => f64::from(n),
    };
    let ns = nanos_f64(initial) * factor;
    if !ns.is_finite() || ns >= nanos_f64(cap) {
        return cap;
    }
    // `ns` is finite, non-negative and below `cap`.
    let d = if ns < u64::MAX as f64 {
        Duration::from_nanos(ns as u64)
    } else {
        Duration::try_from_secs_f64(ns / 1e9).unwrap_or(cap)
    };
    d.min(cap)
}

/// `d` in nanoseconds as an `f64`, through a `u64` when it fits (every
/// duration under 584 years): a `u128` to `f64` conversion is a call into
/// a software routine, on every failed attempt.
fn nanos_f64(d: Duration) -> f64 {
    // Computed in `u64` rather than narrowed from `as_nanos`, which the
    // optimizer sees through and converts from `u128` all the same.
    let ns = d
        .as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(u64::from(d.subsec_nanos())));
    match ns {
        Some(ns) => ns as f64,
        None => d.as_nanos() as f64,
    }
}

fn effective_multiplier(m: f64) -> f64 {
    if m.is_finite() && m >= 1.0 { m } else { 1.0 }
}
