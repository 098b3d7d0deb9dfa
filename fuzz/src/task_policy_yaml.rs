//! A workflow task's `retry:` / `timeout:` / `budget:` from YAML: arbitrary
//! text, and documents generated from the input whose every key is valid or
//! not by the rules of `docs/workflow-yaml.md`, decided here.

use std::time::Duration;

use nika_retry::task::TaskPolicy;
use nika_retry::{CategorySet, ErrorCategory, Growth};

use crate::bytes::Bytes;

/// Checks the input as YAML text, then as the recipe of a generated document.
pub fn check(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        check_text(text);
    }
    check_generated(&mut Bytes(data));
}

/// How a generated document fared: what the tests of the generator count.
#[derive(Debug, PartialEq)]
pub(crate) enum Generated {
    /// Accepted; whether it had a `retry:` block.
    Accepted { retry: bool },
    /// Refused.
    Refused,
}

/// Arbitrary text: what YAML accepts is in range, and always serialises to
/// YAML that reads back equal. (Random bytes rarely parse as a policy: the
/// generated documents below are what reaches every key.)
fn check_text(text: &str) {
    let Ok(policy) = serde_norway::from_str::<TaskPolicy>(text) else {
        return;
    };
    if let Some(cfg) = &policy.retry {
        assert!((1..=10).contains(&cfg.max_attempts), "{cfg:?}");
        assert!((0.0..=1.0).contains(&cfg.jitter), "{cfg:?}");
        assert!(
            cfg.multiplier.is_finite() && cfg.multiplier >= 1.0,
            "{cfg:?}"
        );
        assert!(cfg.initial_backoff <= cfg.max_backoff, "{cfg:?}");
    }
    if let Some(timeout) = policy.timeout {
        assert!(!timeout.is_zero(), "{policy:?}");
    }
    round_trip(&policy);
}

/// The policy serialises (a failure to is a failure of the target) to YAML
/// that reads back equal.
fn round_trip(policy: &TaskPolicy) {
    let yaml = serde_norway::to_string(policy)
        .unwrap_or_else(|e| panic!("{policy:?} accepted but not serialised: {e}"));
    let again = serde_norway::from_str::<TaskPolicy>(&yaml);
    assert_eq!(again.as_ref().ok(), Some(policy), "{yaml}\n{again:?}");
}

/// The documented defaults of a `retry:` block's keys.
const DEFAULT_DELAY: Duration = Duration::from_millis(1_000);
const DEFAULT_CAP: Duration = Duration::from_millis(16_000);
const DEFAULT_JITTER: f32 = 0.5;
const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_millis(60_000);

/// What a generated `retry:` block means, when every key in it is valid.
#[derive(Debug)]
struct Retry {
    max_attempts: u32,
    delay: Duration,
    cap: Option<Duration>,
    /// `Err(())` for `linear`, whose growth is not a multiplier.
    multiplier: Result<f64, ()>,
    jitter: f32,
    retry_on: CategorySet,
    max_retry_after: Duration,
}

/// A generated document: its YAML, the keys given an invalid value, and
/// what it means when there are none.
struct Document {
    lines: Vec<String>,
    invalid: Vec<&'static str>,
    retry: Option<Retry>,
    timeout: Option<Duration>,
    budget: Option<u32>,
}

/// A YAML document of up to three policy keys and another key, each value
/// valid or not; accepted exactly when every value is valid, with the values
/// written (and the documented defaults for the keys left out); refused
/// otherwise, the error naming an invalid key.
pub(crate) fn check_generated(input: &mut Bytes<'_>) -> Generated {
    let mut doc = Document {
        lines: vec![],
        invalid: vec![],
        retry: None,
        timeout: None,
        budget: None,
    };
    let shape = input.u8();
    if shape & 1 == 1 {
        retry_block(input, &mut doc, shape & 2 == 2);
    }
    if shape & 4 == 4 {
        timeout(input, &mut doc);
    }
    if shape & 8 == 8 {
        budget(input, &mut doc);
    }
    if shape & 16 == 16 {
        // The task's other keys are ignored.
        doc.lines.push("id: step-1".to_owned());
    }
    if shape & 32 == 32 {
        doc.lines.reverse();
    }
    if doc.lines.is_empty() {
        doc.lines.push("id: step-1".to_owned());
    }
    let yaml = doc.lines.join("\n");
    match serde_norway::from_str::<TaskPolicy>(&yaml) {
        Ok(policy) => {
            assert!(
                doc.invalid.is_empty(),
                "accepted though {:?} are invalid:\n{yaml}\n{policy:?}",
                doc.invalid
            );
            assert_eq!(
                (policy.timeout, policy.budget),
                (doc.timeout, doc.budget),
                "{yaml}"
            );
            match (&policy.retry, &doc.retry) {
                (None, None) => {}
                (Some(got), Some(want)) => {
                    let cap = want.cap.unwrap_or(DEFAULT_CAP.max(want.delay));
                    assert_eq!(
                        (
                            got.max_attempts,
                            got.initial_backoff,
                            got.max_backoff,
                            got.jitter,
                            got.retry_on,
                            got.max_retry_after,
                        ),
                        (
                            want.max_attempts,
                            want.delay,
                            cap,
                            want.jitter,
                            want.retry_on,
                            want.max_retry_after,
                        ),
                        "{yaml}"
                    );
                    match want.multiplier {
                        Ok(m) => assert_eq!(
                            (got.growth, got.multiplier),
                            (Growth::Exponential, m),
                            "{yaml}"
                        ),
                        Err(()) => assert_eq!(got.growth, Growth::Linear, "{yaml}"),
                    }
                }
                (got, want) => panic!("{yaml}\n{got:?}\n{want:?}"),
            }
            round_trip(&policy);
            Generated::Accepted {
                retry: policy.retry.is_some(),
            }
        }
        Err(e) => {
            let e = e.to_string();
            assert!(!doc.invalid.is_empty(), "refused:\n{yaml}\n{e}");
            assert!(
                doc.invalid.iter().any(|key| e.contains(key)),
                "{e} names none of {:?}:\n{yaml}",
                doc.invalid
            );
            Generated::Refused
        }
    }
}

/// One key's value as written, and what it means if valid (`None`: invalid).
type Value<T> = (String, Option<T>);

/// A whole number of up to `bits` bits, zero included; or, one time in 16 each, a
/// negative number, a fraction and a word. (A value read past the end of the
/// input, all zeros, is a number: the choices that read zero are valid
/// where they can be, so that short inputs make valid documents too.)
fn whole(input: &mut Bytes<'_>, zero_ok: bool, bits: u8) -> Value<u64> {
    let shape = input.u8();
    let n = input.u64() >> (input.u8() % 64).max(64 - bits);
    match shape % 16 {
        13 => (format!("-{}", n.max(1)), None),
        14 => ("2.5".to_owned(), None),
        15 => ("many".to_owned(), None),
        _ => (n.to_string(), (zero_ok || n > 0).then_some(n)),
    }
}

fn retry_block(input: &mut Bytes<'_>, doc: &mut Document, flow: bool) {
    let mut keys: Vec<(&str, String)> = vec![];
    let mut valid = true;
    let mut invalid = |doc: &mut Document, key| {
        doc.invalid.push(key);
        valid = false;
    };

    // max_attempts: required, 1–10.
    const ATTEMPTS: [i64; 14] = [3, 1, 2, 4, 5, 6, 7, 8, 9, 10, 0, 11, -1, 12];
    let shape = input.u8();
    let max_attempts = match shape % 16 {
        14 => {
            invalid(doc, "max_attempts");
            None
        }
        15 => {
            keys.push(("max_attempts", "2.5".to_owned()));
            invalid(doc, "max_attempts");
            None
        }
        k => {
            let n = ATTEMPTS[usize::from(k)];
            keys.push(("max_attempts", n.to_string()));
            if (1..=10).contains(&n) {
                Some(n as u32)
            } else {
                invalid(doc, "max_attempts");
                None
            }
        }
    };

    // delay_ms and max_delay_ms: whole milliseconds, 0 or more.
    // (max_delay_ms less often, since a delay above it is refused.)
    let mut millis = |key: &'static str, doc: &mut Document, keys: &mut Vec<_>| {
        let present = input.u8() % 3;
        if present == 0 || (key == "max_delay_ms" && present == 2) {
            return None;
        }
        let (text, value) = whole(input, true, 64);
        keys.push((key, text));
        if value.is_none() {
            invalid(doc, key);
        }
        value.map(Duration::from_millis)
    };
    let delay = millis("delay_ms", doc, &mut keys);
    let cap = millis("max_delay_ms", doc, &mut keys);

    // backoff: a name, or a multiplier of at least 1.
    let shape = input.u8();
    let multiplier = match shape % 6 {
        0 => Ok(2.0),
        1 => named(&mut keys, "backoff", "constant", Ok(1.0)),
        2 => named(&mut keys, "backoff", "linear", Err(())),
        3 => named(&mut keys, "backoff", "exponential", Ok(2.0)),
        4 => {
            keys.push(("backoff", "quadratic".to_owned()));
            invalid(doc, "backoff");
            Ok(2.0)
        }
        _ => {
            let m = f64::from(shape / 6) / 16.0;
            keys.push(("backoff", m.to_string()));
            if m < 1.0 {
                invalid(doc, "backoff");
            }
            Ok(m)
        }
    };

    // jitter: 0.0–1.0.
    let shape = input.u8();
    let jitter = match shape % 8 {
        0..=2 => DEFAULT_JITTER,
        3 => {
            keys.push(("jitter", "half".to_owned()));
            invalid(doc, "jitter");
            DEFAULT_JITTER
        }
        sign => {
            let j = f64::from(input.u8()) / 200.0 * if sign == 4 { -1.0 } else { 1.0 };
            keys.push(("jitter", j.to_string()));
            if !(0.0..=1.0).contains(&j) {
                invalid(doc, "jitter");
            }
            j as f32
        }
    };

    // retry_on: a list of transient and rate_limited (empty retries
    // nothing); one time in four, one of the names it refuses beside them.
    const REFUSED: [&str; 4] = ["auth", "not_found", "permanent", "sometimes"];
    let shape = input.u8();
    let retry_on = if shape & 1 == 0 {
        CategorySet::RETRYABLE
    } else {
        let mut list = vec![];
        let mut set = CategorySet::EMPTY;
        for (bit, name, category) in [
            (2, "transient", ErrorCategory::Transient),
            (4, "rate_limited", ErrorCategory::RateLimited),
        ] {
            if shape & bit != 0 {
                list.push(name);
                set = set.with(category);
            }
        }
        if shape >> 3 & 3 == 3 {
            let at = usize::from(shape >> 7).min(list.len());
            list.insert(at, REFUSED[usize::from(shape >> 5 & 3)]);
            invalid(doc, "retry_on");
        }
        keys.push(("retry_on", format!("[{}]", list.join(", "))));
        set
    };

    // max_retry_after_ms: whole milliseconds, 0 or more.
    let max_retry_after = match input.u8() % 3 {
        0 => DEFAULT_MAX_RETRY_AFTER,
        _ => {
            let (text, value) = whole(input, true, 64);
            keys.push(("max_retry_after_ms", text));
            if value.is_none() {
                invalid(doc, "max_retry_after_ms");
            }
            value.map_or(DEFAULT_MAX_RETRY_AFTER, Duration::from_millis)
        }
    };

    // A key the block does not know.
    if input.u8() % 8 == 7 {
        keys.push(("retries", "3".to_owned()));
        invalid(doc, "retries");
    }

    // delay_ms must not exceed max_delay_ms (the default delay too).
    let delay = delay.unwrap_or(DEFAULT_DELAY);
    if cap.is_some_and(|cap| delay > cap) {
        invalid(doc, "delay_ms");
    }

    if input.u8() % 2 == 1 {
        keys.reverse();
    }
    let line = if flow {
        let pairs: Vec<String> = keys.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        format!("retry: {{ {} }}", pairs.join(", "))
    } else if keys.is_empty() {
        "retry: {}".to_owned()
    } else {
        let pairs: Vec<String> = keys.iter().map(|(k, v)| format!("  {k}: {v}")).collect();
        format!("retry:\n{}", pairs.join("\n"))
    };
    doc.lines.push(line);
    if let (true, Some(max_attempts)) = (valid, max_attempts) {
        doc.retry = Some(Retry {
            max_attempts,
            delay,
            cap,
            multiplier,
            jitter,
            retry_on,
            max_retry_after,
        });
    }
}

/// `key: name`, and what it means.
fn named<T>(keys: &mut Vec<(&str, String)>, key: &'static str, name: &str, meaning: T) -> T {
    keys.push((key, name.to_owned()));
    meaning
}

/// `timeout:`: a duration with a unit, above zero; `~` is none.
fn timeout(input: &mut Bytes<'_>, doc: &mut Document) {
    const UNITS: [(&str, u64); 4] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)];
    let shape = input.u8();
    let n = u64::from(input.u8()) << 8 | u64::from(input.u8());
    let (unit, unit_ms) = UNITS[usize::from(shape / 16) % UNITS.len()];
    let text = match shape % 16 {
        0 => "~".to_owned(),
        1 => n.to_string(),
        2 => "soon".to_owned(),
        3 => format!("0{unit}"),
        _ => format!("{n}{unit}"),
    };
    match shape % 16 {
        0 => {}
        4.. if n > 0 => doc.timeout = Some(Duration::from_millis(n * unit_ms)),
        _ => doc.invalid.push("timeout"),
    }
    doc.lines.push(format!("timeout: {text}"));
}

/// `budget:`: a whole number of attempts, at least 1.
fn budget(input: &mut Bytes<'_>, doc: &mut Document) {
    // Mostly below 2^32, the largest budget; sometimes above.
    let (text, value) = whole(input, false, 34);
    match value.and_then(|n| u32::try_from(n).ok()) {
        Some(n) => doc.budget = Some(n),
        None => doc.invalid.push("budget"),
    }
    doc.lines.push(format!("budget: {text}"));
}
