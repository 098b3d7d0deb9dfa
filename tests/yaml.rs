//! The workflow YAML: the task `retry:` block the workflow format already has, `timeout:`, and every
//! bad input named by key and value.

use std::time::Duration;

use nika_retry::task::TaskPolicy;
use nika_retry::{ErrorCategory, Growth, Layer, RetryConfig};

fn policy(yaml: &str) -> Result<TaskPolicy, String> {
    serde_norway::from_str(yaml).map_err(|e| e.to_string())
}

#[test]
fn the_workflow_retry_block_maps_onto_retry_config() {
    let p =
        policy("retry: { max_attempts: 3, delay_ms: 500, backoff: exponential }\ntimeout: 30s\n")
            .unwrap();
    let retry = p.retry.clone().unwrap();
    assert_eq!(retry.max_attempts, 3);
    assert_eq!(retry.initial_backoff, Duration::from_millis(500));
    assert_eq!(retry.multiplier, 2.0);
    assert_eq!(retry.growth, Growth::Exponential);
    assert_eq!(p.timeout, Some(Duration::from_secs(30)));
    assert_eq!(p.budget, None, "the default budget");
}

#[test]
fn backoff_accepts_names_and_multipliers() {
    let get = |b: &str| {
        policy(&format!("retry: {{ max_attempts: 2, backoff: {b} }}"))
            .unwrap()
            .retry
            .unwrap()
    };
    assert_eq!(get("constant").multiplier, 1.0);
    assert_eq!(get("linear").growth, Growth::Linear);
    assert_eq!(get("exponential").multiplier, 2.0);
    assert_eq!(get("3").multiplier, 3.0);
    assert_eq!(get("1.5").multiplier, 1.5);
}

#[test]
fn a_long_delay_raises_the_cap() {
    let retry = policy("retry: { max_attempts: 2, delay_ms: 30000 }")
        .unwrap()
        .retry
        .unwrap();
    assert_eq!(
        (retry.initial_backoff, retry.max_backoff),
        (Duration::from_secs(30), Duration::from_secs(30))
    );
}

#[test]
fn the_task_mapping_may_hold_other_keys_and_no_policy() {
    let p = policy("id: summarize\nprompt: hello\n").unwrap();
    assert_eq!(p, TaskPolicy::new());
    let p = policy("budget: 4\n").unwrap();
    assert_eq!(p.budget, Some(4));
}

#[test]
fn round_trips_through_yaml() {
    for yaml in [
        "retry: { max_attempts: 3, delay_ms: 500, backoff: exponential }\ntimeout: 30s\n",
        "retry: { max_attempts: 5, delay_ms: 100, backoff: linear, jitter: 0.0, max_delay_ms: 400 }\n",
        "retry: { max_attempts: 2, backoff: 3.5, retry_on: [transient], max_retry_after_ms: 5000 }\nbudget: 3\n",
        "timeout: 2m 30s\n",
    ] {
        let first = policy(yaml).unwrap();
        let written = serde_norway::to_string(&first).unwrap();
        assert_eq!(policy(&written).unwrap(), first, "{yaml} -> {written}");
    }
    let cfg = RetryConfig::for_layer(Layer::Provider)
        .with_retry_on([ErrorCategory::RateLimited])
        .unwrap();
    let back: RetryConfig =
        serde_norway::from_str(&serde_norway::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(back, cfg);
}

/// Each bad input fails with a message naming the key and the value.
#[test]
fn bad_inputs_name_the_key_and_the_value() {
    let cases = [
        (
            "retry: { max_attempts: 3, delay: 500 }",
            ["unknown field `delay`", "max_attempts"],
        ),
        ("retry: { max_attempts: 0 }", ["max_attempts", "`0`"]),
        ("retry: { max_attempts: 11 }", ["max_attempts", "`11`"]),
        ("retry: { max_attempts: -1 }", ["max_attempts", "-1"]),
        (
            "retry: { max_attempts: 2, delay_ms: -5 }",
            ["delay_ms", "-5"],
        ),
        (
            "retry: { max_attempts: 2, backoff: quadratic }",
            ["backoff", "`quadratic`"],
        ),
        (
            "retry: { max_attempts: 2, backoff: 0.5 }",
            ["backoff", "`0.5`"],
        ),
        ("retry: { max_attempts: 2, jitter: 2.0 }", ["jitter", "`2`"]),
        (
            "retry: { max_attempts: 2, retry_on: [auth] }",
            ["retry_on", "`auth`"],
        ),
        (
            "retry: { max_attempts: 2, retry_on: [sometimes] }",
            ["retry_on", "`sometimes`"],
        ),
        (
            "retry: { max_attempts: 2, delay_ms: 900, max_delay_ms: 100 }",
            ["delay_ms", "`900`"],
        ),
        (
            "retry: { delay_ms: 100 }",
            ["missing field `max_attempts`", "retry"],
        ),
        ("timeout: 30", ["timeout", "`30`"]),
        ("timeout: soon", ["timeout", "`soon`"]),
        ("timeout: -3", ["timeout", "`-3`"]),
        ("budget: 0", ["budget", "`0`"]),
        ("budget: -1", ["budget", "-1"]),
    ];
    for (yaml, wants) in cases {
        let err = policy(yaml).expect_err(yaml);
        for want in wants {
            assert!(err.contains(want), "{yaml}: {err:?} lacks {want:?}");
        }
    }
}

#[test]
fn whole_numbers_are_read_exactly() {
    // Above 2^53, where an f64 would round.
    let retry = policy("retry: { max_attempts: 2, delay_ms: 9007199254740993 }")
        .unwrap()
        .retry
        .unwrap();
    assert_eq!(
        retry.initial_backoff,
        Duration::from_millis(9_007_199_254_740_993)
    );
    // A float that is a whole number is that number; one that is not is refused.
    let retry = policy("retry: { max_attempts: 3.0 }")
        .unwrap()
        .retry
        .unwrap();
    assert_eq!(retry.max_attempts, 3);
    let err = policy("retry: { max_attempts: 2, delay_ms: 0.5 }").unwrap_err();
    assert!(err.contains("invalid delay_ms `0.5`"), "{err}");
}
