//! A workflow task's `retry:` / `timeout:` / `budget:` from arbitrary YAML.

use nika_retry::task::TaskPolicy;

/// What YAML accepts is in range, and always serialises to YAML that
/// reads back equal.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
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
    let yaml = serde_norway::to_string(&policy)
        .unwrap_or_else(|e| panic!("{policy:?} accepted but not serialised: {e}"));
    let again = serde_norway::from_str::<TaskPolicy>(&yaml);
    assert_eq!(again.as_ref().ok(), Some(&policy), "{yaml}\n{again:?}");
}
