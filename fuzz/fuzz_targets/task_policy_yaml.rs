//! A workflow task's `retry:` / `timeout:` / `budget:` from arbitrary YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nika_retry::task::TaskPolicy;

fuzz_target!(|text: &str| {
    let Ok(policy) = serde_norway::from_str::<TaskPolicy>(text) else {
        return;
    };
    if let Some(cfg) = &policy.retry {
        assert!((1..=10).contains(&cfg.max_attempts), "{cfg:?}");
        assert!((0.0..=1.0).contains(&cfg.jitter), "{cfg:?}");
        assert!(cfg.multiplier.is_finite() && cfg.multiplier >= 1.0, "{cfg:?}");
        assert!(cfg.initial_backoff <= cfg.max_backoff, "{cfg:?}");
    }
    if let Some(timeout) = policy.timeout {
        assert!(!timeout.is_zero(), "{policy:?}");
    }
    // What was accepted serialises back to YAML that reads back the same.
    if let Ok(yaml) = serde_norway::to_string(&policy) {
        let again = serde_norway::from_str::<TaskPolicy>(&yaml);
        assert_eq!(again.as_ref().ok(), Some(&policy), "{yaml}\n{again:?}");
    }
});
