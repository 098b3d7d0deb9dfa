//! [`current_attempt`]: which attempt of which call the body is running, and
//! the call's idempotency key.

use crate::Layer;
use crate::ambient::exchange;
use crate::key::IdempotencyKey;

/// The attempt of an annotated fn that is running, read from inside its body.
///
/// A transport sends the key and the retry count the way the
/// Stainless-generated LLM SDKs do, so that a server can tell a retry from a
/// new request:
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
///     sent.push((info.idempotency_key.to_string(), info.retries()));
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
    /// The call's key: drawn once per call, the same for all its attempts.
    pub idempotency_key: IdempotencyKey,
}

impl AttemptInfo {
    /// The retries before this attempt (`attempt − 1`): the value of a retry-count header.
    pub fn retries(&self) -> u32 {
        self.attempt.saturating_sub(1)
    }
}

/// The attempt being run, when called from inside the body of a `#[retry]`
/// fn (the innermost one, if they nest); `None` anywhere else.
///
/// Costs one thread-local read, and no allocation; the call's idempotency
/// key is drawn the first time it is read.
pub fn current_attempt() -> Option<AttemptInfo> {
    let (slot, key) = exchange::attempt(IdempotencyKey::draw)?;
    Some(AttemptInfo {
        layer: slot.layer(),
        attempt: slot.attempt(),
        max_attempts: slot.max_attempts(),
        idempotency_key: key,
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
