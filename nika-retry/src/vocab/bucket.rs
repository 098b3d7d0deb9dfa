//! [`TokenBucket`]: a retry quota shared by many calls into one layer.

use core::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A retry quota across calls: the AWS SDKs' standard retry quota. Not the
/// attempt budget ([`TaskPolicy::budget`](crate::task::TaskPolicy::budget)),
/// which counts the attempts of one outermost call's nested loops.
///
/// - a retry takes `retry_cost` tokens (5), or `timeout_retry_cost` (10)
///   when the attempt before it timed out: one of its own limits expired,
///   or its error holds a [`TimeoutError`](crate::TimeoutError)
///   ([`Classify::timeout`](crate::Classify::timeout): a `connect` limit,
///   an inner fn's limit);
/// - a call that succeeds after retries gives back what its successful
///   retry took, so an outage that recovers costs the bucket nothing for
///   that retry (100 tokens at cost 10: two retries, then a success, leave 90);
/// - a success on the first attempt adds one token (`refill`), up to the capacity;
/// - when the bucket cannot pay for a retry, the call fails fast instead:
///   its event has outcome [`BudgetExhausted`](crate::events::Outcome::BudgetExhausted)
///   and reason [`GiveUp::TokenBucketEmpty`](crate::engine::GiveUp::TokenBucketEmpty),
///   logged as "retry token bucket empty" (an attempt budget spent says
///   "attempt budget exhausted").
///
/// Many concurrent calls into a dead provider thus cannot multiply its load,
/// while one that recovers keeps its retries.
///
/// Cloning shares the bucket, its settings included: the `with_*` setters
/// change the bucket every clone shares, so set them where the bucket is
/// made. Install one per layer for a task with
/// [`TaskPolicy::with_token_bucket`](crate::task::TaskPolicy::with_token_bucket).
///
/// ```
/// use nika_retry::TokenBucket;
///
/// let bucket = TokenBucket::new(100).with_retry_cost(10);
/// let first = bucket.acquire(false).expect("a retry");
/// let second = bucket.acquire(false).expect("another");
/// assert_eq!(bucket.available(), 80);
/// bucket.release(second); // the second retry succeeded
/// assert_eq!(bucket.available(), 90);
/// # let _ = first;
///
/// let small = TokenBucket::new(10).with_retry_cost(5);
/// assert!(small.try_acquire());
/// assert!(small.try_acquire());
/// assert!(!small.try_acquire(), "10 tokens pay for two retries");
/// small.refill();
/// assert_eq!(small.available(), 1);
/// ```
#[derive(Clone)]
pub struct TokenBucket(Arc<Inner>);

struct Inner {
    tokens: AtomicU32,
    capacity: u32,
    retry_cost: AtomicU32,
    timeout_retry_cost: AtomicU32,
    refill: AtomicU32,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens; a retry costs 5, one after a
    /// timeout 10, a first-attempt success puts back 1 (the AWS defaults,
    /// with their capacity of 500).
    pub fn new(capacity: u32) -> TokenBucket {
        TokenBucket(Arc::new(Inner {
            tokens: AtomicU32::new(capacity),
            capacity,
            retry_cost: AtomicU32::new(5),
            timeout_retry_cost: AtomicU32::new(10),
            refill: AtomicU32::new(1),
        }))
    }

    /// Sets what one retry costs.
    #[must_use]
    pub fn with_retry_cost(self, cost: u32) -> TokenBucket {
        self.0.retry_cost.store(cost, Ordering::Relaxed);
        self
    }

    /// Sets what one retry after a timed-out attempt costs.
    #[must_use]
    pub fn with_timeout_retry_cost(self, cost: u32) -> TokenBucket {
        self.0.timeout_retry_cost.store(cost, Ordering::Relaxed);
        self
    }

    /// Sets what one first-attempt success puts back.
    #[must_use]
    pub fn with_refill(self, refill: u32) -> TokenBucket {
        self.0.refill.store(refill, Ordering::Relaxed);
        self
    }

    /// Takes the cost of one retry (the timeout cost if the attempt before
    /// it timed out) if the bucket holds it; returns what it took, for
    /// [`release`](TokenBucket::release) when the retry succeeds.
    pub fn acquire(&self, after_timeout: bool) -> Option<u32> {
        let cost = if after_timeout {
            &self.0.timeout_retry_cost
        } else {
            &self.0.retry_cost
        }
        .load(Ordering::Relaxed);
        self.0
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .ok()
            .map(|_| cost)
    }

    /// Takes the cost of one retry if the bucket holds it.
    pub fn try_acquire(&self) -> bool {
        self.acquire(false).is_some()
    }

    /// Gives back `tokens` that a retry took, up to the capacity: its call succeeded.
    pub fn release(&self, tokens: u32) {
        self.add(tokens);
    }

    /// Puts back the refill of one first-attempt success, up to the capacity.
    pub fn refill(&self) {
        self.add(self.0.refill.load(Ordering::Relaxed));
    }

    fn add(&self, tokens: u32) {
        let capacity = self.0.capacity;
        let _ = self
            .0
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                (t < capacity).then(|| t.saturating_add(tokens).min(capacity))
            });
    }

    /// Tokens in the bucket now.
    pub fn available(&self) -> u32 {
        self.0.tokens.load(Ordering::Acquire)
    }

    /// The bucket's capacity.
    pub fn capacity(&self) -> u32 {
        self.0.capacity
    }
}

impl PartialEq for TokenBucket {
    /// Two handles are equal when they share one bucket.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("available", &self.available())
            .field("capacity", &self.0.capacity)
            .field("retry_cost", &self.0.retry_cost.load(Ordering::Relaxed))
            .field(
                "timeout_retry_cost",
                &self.0.timeout_retry_cost.load(Ordering::Relaxed),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_stops_at_capacity() {
        let bucket = TokenBucket::new(3).with_retry_cost(1).with_refill(2);
        bucket.refill();
        assert_eq!(bucket.available(), 3);
        assert!(bucket.try_acquire());
        bucket.refill();
        assert_eq!(bucket.available(), 3);
        assert_eq!(bucket.clone(), bucket);
        assert_ne!(TokenBucket::new(3), bucket);
    }

    #[test]
    fn a_success_after_retries_gives_back_its_retry_the_aws_way() {
        let bucket = TokenBucket::new(100).with_retry_cost(10);
        let _first = bucket.acquire(false);
        let second = bucket.acquire(false);
        bucket.release(second.unwrap());
        assert_eq!(bucket.available(), 90);
        assert_eq!(bucket.acquire(true), Some(10));
        let costly = TokenBucket::new(100).with_timeout_retry_cost(30);
        assert_eq!(
            (costly.acquire(true), costly.acquire(false)),
            (Some(30), Some(5))
        );
        costly.release(1_000);
        assert_eq!(costly.available(), 100);
        let empty = TokenBucket::new(4);
        assert_eq!(empty.acquire(false), None);
        assert_eq!(empty.available(), 4);
    }

    #[test]
    fn a_success_puts_back_the_refill_set() {
        let bucket = TokenBucket::new(20).with_retry_cost(10).with_refill(3);
        assert!(bucket.try_acquire() && bucket.try_acquire());
        assert_eq!(bucket.available(), 0);
        bucket.refill();
        assert_eq!(bucket.available(), 3);
        bucket.refill();
        assert_eq!(bucket.available(), 6);
        // The default refill is one token.
        let default = TokenBucket::new(10);
        assert!(default.try_acquire());
        default.refill();
        assert_eq!(default.available(), 6);
    }

    #[test]
    fn concurrent_acquires_never_overdraw() {
        let bucket = TokenBucket::new(100).with_retry_cost(3);
        let granted: u32 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..50).filter(|_| bucket.try_acquire()).count() as u32))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(granted, 33);
        assert_eq!(bucket.available(), 1);
    }

    #[test]
    fn capacity_and_debug_show_the_settings() {
        let bucket = TokenBucket::new(30)
            .with_retry_cost(4)
            .with_timeout_retry_cost(12);
        assert_eq!(bucket.acquire(true), Some(12));
        assert_eq!(bucket.capacity(), 30);
        assert_eq!(
            format!("{bucket:?}"),
            "TokenBucket { available: 18, capacity: 30, retry_cost: 4, timeout_retry_cost: 12 }"
        );
    }
}
