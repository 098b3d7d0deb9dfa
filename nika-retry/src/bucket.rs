//! [`TokenBucket`]: a retry budget shared by many calls into one layer.

use core::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A retry budget across calls, in the style of the AWS SDKs' standard mode:
/// each retry costs tokens, each success puts one back, and when the bucket
/// is empty calls fail fast instead of retrying — so that many concurrent
/// calls into a failing provider cannot multiply its load.
///
/// Cloning shares the bucket. Install one per layer for a task with
/// [`TaskPolicy::with_token_bucket`](crate::task::TaskPolicy::with_token_bucket).
///
/// ```
/// use nika_retry::TokenBucket;
///
/// let bucket = TokenBucket::new(10).with_retry_cost(5);
/// assert!(bucket.try_acquire());
/// assert!(bucket.try_acquire());
/// assert!(!bucket.try_acquire(), "10 tokens pay for two retries");
/// bucket.refill();
/// assert_eq!(bucket.available(), 1);
/// ```
#[derive(Clone)]
pub struct TokenBucket(Arc<Inner>);

struct Inner {
    tokens: AtomicU32,
    capacity: u32,
    retry_cost: AtomicU32,
    refill: AtomicU32,
}

impl TokenBucket {
    /// A full bucket of `capacity` tokens; a retry costs 5, a success refills 1
    /// (the AWS defaults, with their capacity of 500).
    pub fn new(capacity: u32) -> TokenBucket {
        TokenBucket(Arc::new(Inner {
            tokens: AtomicU32::new(capacity),
            capacity,
            retry_cost: AtomicU32::new(5),
            refill: AtomicU32::new(1),
        }))
    }

    /// Sets what one retry costs.
    #[must_use]
    pub fn with_retry_cost(self, cost: u32) -> TokenBucket {
        self.0.retry_cost.store(cost, Ordering::Relaxed);
        self
    }

    /// Sets what one success puts back.
    #[must_use]
    pub fn with_refill(self, refill: u32) -> TokenBucket {
        self.0.refill.store(refill, Ordering::Relaxed);
        self
    }

    /// Takes the cost of one retry if the bucket holds it.
    pub fn try_acquire(&self) -> bool {
        let cost = self.0.retry_cost.load(Ordering::Relaxed);
        self.0
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| t.checked_sub(cost))
            .is_ok()
    }

    /// Puts back the refill of one success, up to the capacity.
    pub fn refill(&self) {
        let refill = self.0.refill.load(Ordering::Relaxed);
        let capacity = self.0.capacity;
        let _ = self
            .0
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                (t < capacity).then(|| t.saturating_add(refill).min(capacity))
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
}
