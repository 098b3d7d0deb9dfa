//! [`current_attempt`]: which attempt of which call the body is running, and
//! the logical request's idempotency key.

use crate::ambient::exchange;
use crate::vocab::key::IdempotencyKey;
use crate::vocab::layer::Layer;

/// The attempt of an annotated fn that is running, read from inside its body.
///
/// A transport sends the key and the retry count the way the
/// Stainless-generated LLM SDKs do, so that a server can tell a retry from a
/// new request: `idempotency_key` and [`total_retries`](AttemptInfo::total_retries),
/// both about the logical request (the outermost annotated call), so that
/// a transport under a provider sends the same key on every request of one
/// provider call, its provider's retries included, and a count that goes
/// on from one provider attempt to the next:
///
/// ```
/// use nika_retry::{current_attempt, retry, Classify};
///
/// #[derive(Debug, Classify)]
/// #[category(transient)]
/// struct Reset;
///
/// #[retry(layer = "http", backoff = "1ms")]
/// async fn send(sent: &std::sync::Mutex<Vec<(String, u32)>>) -> Result<(), Reset> {
///     let info = current_attempt().expect("inside a #[retry] fn");
///     // As headers: `Idempotency-Key: {key}`, `X-Retry-Count: {retries}`.
///     let mut sent = sent.lock().unwrap();
///     sent.push((info.idempotency_key.to_string(), info.total_retries));
///     if sent.len() < 2 { Err(Reset) } else { Ok(()) }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let sent = std::sync::Mutex::new(vec![]);
/// send(&sent).await.unwrap();
/// let sent = sent.into_inner().unwrap();
/// assert_eq!(sent[0].0, sent[1].0, "one key for all the attempts of a call");
/// assert_eq!((sent[0].1, sent[1].1), (0, 1));
/// assert_eq!(sent[0].0.len(), 36);
/// assert!(current_attempt().is_none(), "outside any attempt");
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AttemptInfo {
    /// The layer of the innermost annotated fn being polled.
    pub layer: Layer,
    /// The 1-based number of this attempt.
    pub attempt: u32,
    /// The attempts the loop allows in all. For a fn with `config = …`, the
    /// first attempt sees the attribute's value (or the task's `retry:`),
    /// since the expression is only evaluated when an attempt fails.
    pub max_attempts: u32,
    /// The logical request's key: drawn once per call of the outermost
    /// annotated fn, the same for all its attempts and for every attempt of
    /// every annotated call nested in them; the next outermost call draws
    /// a new one. The value of an `Idempotency-Key` header.
    pub idempotency_key: IdempotencyKey,
    /// The retries taken so far across all the layers of the logical
    /// request, this loop's and the loops around and under it: 0 on the
    /// request's first attempt, one more on each retry at any layer. The
    /// value of a retry-count header (for a server, every attempt after the
    /// first one is a retry, whichever layer made it).
    pub total_retries: u32,
}

impl AttemptInfo {
    /// The retries of the innermost loop before this attempt (`attempt − 1`):
    /// its own, restarting from 0 on each call of the fn (in a transport,
    /// on each attempt of the provider around it). A retry-count header
    /// says [`total_retries`](AttemptInfo::total_retries).
    pub fn retries(&self) -> u32 {
        self.attempt.saturating_sub(1)
    }
}

/// The attempt being run, when called from inside the body of a `#[retry]`
/// fn; `None` anywhere else. When annotated calls nest, the layer and the
/// attempt are the innermost loop's, the key and the total retries the
/// logical request's (the outermost call's).
///
/// Costs one thread-local read, and no allocation; the request's
/// idempotency key is drawn the first time it is read.
pub fn current_attempt() -> Option<AttemptInfo> {
    let (slot, key, budget) = exchange::attempt(IdempotencyKey::draw)?;
    let retries = slot.attempt().saturating_sub(1);
    Some(AttemptInfo {
        layer: slot.layer(),
        attempt: slot.attempt(),
        max_attempts: slot.max_attempts(),
        idempotency_key: key,
        // The outermost call's budget counts one plus every retry taken.
        total_retries: budget.map_or(retries, |b| b.used().saturating_sub(1)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_outside_an_attempt() {
        assert_eq!(current_attempt(), None);
    }
}
