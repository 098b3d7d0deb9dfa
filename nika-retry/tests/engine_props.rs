//! Properties of the retry engine over random configs and failures.

use std::time::Duration;

use nika_retry::engine::{Decision, Failure, GiveUp, Limits, RetryState, backoff};
use nika_retry::{ErrorCategory, Growth, Layer, RetryConfig};
use proptest::prelude::*;

fn config() -> impl Strategy<Value = RetryConfig> {
    (
        1u32..=10,
        0u64..5_000,
        0u64..20_000,
        1.0f64..8.0,
        0.0f32..=1.0,
        any::<bool>(),
        0u64..120_000,
    )
        .prop_map(
            |(attempts, initial, extra, multiplier, jitter, linear, max_hint)| {
                let mut cfg = RetryConfig::for_layer(Layer::Provider);
                cfg.max_attempts = attempts;
                cfg.initial_backoff = Duration::from_millis(initial);
                cfg.max_backoff = Duration::from_millis(initial + extra);
                cfg.multiplier = multiplier;
                cfg.jitter = jitter;
                cfg.max_retry_after = Duration::from_millis(max_hint);
                if linear {
                    cfg.growth = Growth::Linear;
                }
                cfg
            },
        )
}

fn failure() -> impl Strategy<Value = Failure> {
    let category = prop_oneof![
        4 => Just(ErrorCategory::Transient),
        4 => Just(ErrorCategory::RateLimited),
        1 => Just(ErrorCategory::Auth),
        1 => Just(ErrorCategory::NotFound),
        1 => Just(ErrorCategory::Permanent),
    ];
    let hint = proptest::option::weighted(0.3, (0u64..200_000).prop_map(Duration::from_millis));
    (category, hint).prop_map(|(c, h)| Failure::new(c, h))
}

fn limits() -> impl Strategy<Value = Limits<'static>> {
    (
        proptest::option::of((0u64..100_000).prop_map(Duration::from_millis)),
        proptest::option::of(0u32..10),
    )
        .prop_map(|(time_left, budget_left)| {
            Limits::NONE
                .with_time_left(time_left)
                .with_budget_left(budget_left)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn backoff_delays_stay_within_jitter_and_cap(cfg in config(), seed: u64, failures in 1usize..12) {
        let mut state = RetryState::with_seed(seed);
        for _ in 0..failures {
            let n = state.attempt();
            let f = Failure::new(ErrorCategory::Transient, None);
            match state.decide(&cfg, f, Limits::NONE) {
                Decision::Retry { delay, from_hint } => {
                    let d = backoff(&cfg, n);
                    prop_assert!(!from_hint);
                    prop_assert!(delay <= d && d <= cfg.max_backoff, "{delay:?} > {d:?}");
                    let floor = d.as_secs_f64() * (1.0 - f64::from(cfg.jitter));
                    prop_assert!(delay.as_secs_f64() >= floor - 1e-9, "{delay:?} below {floor}");
                }
                Decision::GiveUp(why) => {
                    prop_assert_eq!(why, GiveUp::AttemptsExhausted);
                    break;
                }
            }
        }
    }

    #[test]
    fn attempts_never_exceed_max_attempts(cfg in config(), seed: u64, failures in prop::collection::vec(failure(), 1..30), limits in limits()) {
        let mut state = RetryState::with_seed(seed);
        let mut attempts = 1;
        for f in failures {
            if let Decision::Retry { .. } = state.decide(&cfg, f, limits) {
                attempts += 1;
            } else {
                break;
            }
        }
        prop_assert!(attempts <= cfg.max_attempts);
        prop_assert_eq!(attempts, state.attempt());
    }

    #[test]
    fn a_hint_above_the_cap_never_sleeps(cfg in config(), seed: u64, over in 1u64..1_000_000, limits in limits()) {
        let hint = cfg.max_retry_after + Duration::from_millis(over);
        let f = Failure::new(ErrorCategory::RateLimited, Some(hint));
        let decision = RetryState::with_seed(seed).decide(&cfg, f, limits);
        prop_assert!(matches!(decision, Decision::GiveUp(_)), "{decision:?}");
    }

    #[test]
    fn a_hint_within_the_cap_is_slept_exactly(cfg in config(), seed: u64, frac in 0.0f64..=1.0) {
        let hint = cfg.max_retry_after.mul_f64(frac);
        let f = Failure::new(ErrorCategory::RateLimited, Some(hint));
        let decision = RetryState::with_seed(seed).decide(&cfg, f, Limits::NONE);
        if cfg.max_attempts > 1 {
            prop_assert_eq!(decision, Decision::Retry { delay: hint, from_hint: true });
        }
    }

    #[test]
    fn no_sleep_reaches_the_deadline(cfg in config(), seed: u64, failures in prop::collection::vec(failure(), 1..12), limits in limits()) {
        let mut state = RetryState::with_seed(seed);
        for f in failures {
            match state.decide(&cfg, f, limits) {
                Decision::Retry { delay, .. } => {
                    if let Some(left) = limits.time_left {
                        prop_assert!(delay < left);
                    }
                    prop_assert_ne!(limits.budget_left, Some(0));
                }
                Decision::GiveUp(_) => break,
            }
        }
    }

    #[test]
    fn unretryable_categories_always_give_up(cfg in config(), seed: u64, limits in limits()) {
        for c in [ErrorCategory::Auth, ErrorCategory::NotFound, ErrorCategory::Permanent] {
            let decision = RetryState::with_seed(seed).decide(&cfg, Failure::new(c, None), limits);
            prop_assert_eq!(decision, Decision::GiveUp(GiveUp::NotRetryable));
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule(cfg in config(), seed: u64, failures in prop::collection::vec(failure(), 1..12), limits in limits()) {
        let run = || {
            let mut state = RetryState::with_seed(seed);
            failures.iter().map(|f| state.decide(&cfg, *f, limits)).collect::<Vec<_>>()
        };
        prop_assert_eq!(run(), run());
    }
}
