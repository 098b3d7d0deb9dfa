//! The delay rule, decision by decision.

use super::backoff::{float_backoff, whole_backoff};
use super::*;
use crate::vocab::config::Growth;
use crate::vocab::layer::Layer;

const T: Failure = Failure::new(ErrorCategory::Transient, None);
const RL: Failure = Failure::new(ErrorCategory::RateLimited, None);

fn exact(layer: Layer) -> RetryConfig {
    RetryConfig::for_layer(layer).with_jitter(0.0).unwrap()
}

fn schedule(cfg: &RetryConfig, failure: Failure) -> (Vec<Duration>, GiveUp) {
    let mut state = RetryState::with_seed(1);
    let mut delays = vec![];
    loop {
        match state.decide(cfg, failure, Limits::NONE) {
            Decision::Retry { delay, .. } => delays.push(delay),
            Decision::GiveUp(why) => return (delays, why),
        }
    }
}

#[test]
fn the_integer_backoff_is_the_float_one_wherever_it_applies() {
    let mut compared = 0;
    for growth in [Growth::Exponential, Growth::Linear] {
        for multiplier in [1.0, 2.0, 3.0, 4.0, 10.0, 1000.0] {
            for initial in [0, 1, 7, 250_000_000, 1_000_000_000, 86_400_000_000_000] {
                let cfg = RetryConfig {
                    growth,
                    multiplier,
                    initial_backoff: Duration::from_nanos(initial),
                    max_backoff: Duration::MAX,
                    ..RetryConfig::for_layer(crate::vocab::layer::Layer::Provider)
                };
                for n in 1..=12 {
                    let initial = cfg.initial_backoff;
                    if let Some(whole) = whole_backoff(&cfg, initial, n) {
                        let float = float_backoff(&cfg, initial, n, cfg.max_backoff);
                        assert_eq!(whole, float, "{growth:?} ×{multiplier} {initial:?} n={n}");
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 500, "{compared}");
    // Not whole, or past 2^53 ns: the float path's alone.
    let half = RetryConfig {
        multiplier: 1.5,
        ..RetryConfig::for_layer(crate::vocab::layer::Layer::Http)
    };
    assert_eq!(whole_backoff(&half, Duration::from_secs(1), 2), None);
    let long = RetryConfig {
        multiplier: 2.0,
        ..RetryConfig::for_layer(crate::vocab::layer::Layer::Http)
    };
    assert_eq!(whole_backoff(&long, Duration::from_secs(1 << 40), 2), None);
}

#[test]
fn http_schedule_is_250ms_then_1s_then_gives_up() {
    let (delays, why) = schedule(&exact(Layer::Http), T);
    assert_eq!(delays, [Duration::from_millis(250), Duration::from_secs(1)]);
    assert_eq!(why, GiveUp::AttemptsExhausted);
}

#[test]
fn http_leaves_rate_limits_to_the_provider_layer() {
    assert_eq!(
        schedule(&exact(Layer::Http), RL),
        (vec![], GiveUp::NotRetryable)
    );
    let (delays, _) = schedule(&exact(Layer::Provider), RL);
    assert_eq!(delays, [Duration::from_secs(1), Duration::from_secs(4)]);
}

#[test]
fn tool_and_task_layers_do_not_retry_by_default() {
    for layer in [Layer::Tool, Layer::Task] {
        assert_eq!(
            schedule(&exact(layer), T),
            (vec![], GiveUp::AttemptsExhausted)
        );
    }
}

#[test]
fn never_retries_auth_not_found_or_permanent_even_if_configured() {
    let mut cfg = exact(Layer::Provider);
    cfg.retry_on = ErrorCategory::ALL.into_iter().collect();
    for c in [
        ErrorCategory::Auth,
        ErrorCategory::NotFound,
        ErrorCategory::Permanent,
    ] {
        let (delays, why) = schedule(&cfg, Failure::new(c, None));
        assert_eq!((delays.len(), why), (0, GiveUp::NotRetryable), "{c}");
    }
}

#[test]
fn a_hint_replaces_the_backoff_and_uses_an_attempt() {
    let hint = Failure::new(ErrorCategory::RateLimited, Some(Duration::from_secs(7)));
    let mut state = RetryState::with_seed(1);
    let cfg = exact(Layer::Provider);
    assert_eq!(
        state.decide(&cfg, hint, Limits::NONE),
        Decision::Retry {
            delay: Duration::from_secs(7),
            from_hint: true
        }
    );
    assert_eq!(state.attempt(), 2);
}

#[test]
fn a_hint_above_the_cap_gives_up_at_once() {
    let hint = Duration::from_secs(61);
    let failure = Failure::new(ErrorCategory::RateLimited, Some(hint));
    let (delays, why) = schedule(&exact(Layer::Provider), failure);
    assert_eq!((delays.len(), why), (0, GiveUp::HintTooLong { hint }));
}

#[test]
fn no_sleep_reaches_the_deadline() {
    let cfg = exact(Layer::Provider);
    let mut state = RetryState::with_seed(1);
    let limits = Limits {
        time_left: Some(Duration::from_secs(1)),
        budget_left: None,
        ..Limits::NONE
    };
    assert_eq!(
        state.decide(&cfg, T, limits),
        Decision::GiveUp(GiveUp::PastDeadline {
            delay: Duration::from_secs(1)
        })
    );
    let roomy = Limits {
        time_left: Some(Duration::from_millis(1001)),
        budget_left: None,
        ..Limits::NONE
    };
    assert_eq!(
        state.decide(&cfg, T, roomy),
        Decision::retry(Duration::from_secs(1))
    );
}

#[test]
fn a_spent_budget_stops_retries() {
    let cfg = exact(Layer::Provider);
    let limits = Limits {
        time_left: None,
        budget_left: Some(0),
        ..Limits::NONE
    };
    assert_eq!(
        RetryState::with_seed(1).decide(&cfg, T, limits),
        Decision::GiveUp(GiveUp::BudgetExhausted)
    );
}

#[test]
fn linear_and_constant_growth() {
    let cfg = exact(Layer::Task).with_growth(Growth::Linear);
    let ns: Vec<_> = (1..=3).map(|n| backoff(&cfg, n)).collect();
    assert_eq!(ns, [1, 2, 3].map(Duration::from_secs));
    let constant = exact(Layer::Task).with_multiplier(1.0).unwrap();
    assert_eq!(backoff(&constant, 5), Duration::from_secs(1));
}

#[test]
fn out_of_range_fields_are_clamped_not_panicking() {
    let mut cfg = RetryConfig::for_layer(Layer::Provider);
    cfg.multiplier = f64::NAN;
    cfg.jitter = 7.0;
    cfg.initial_backoff = Duration::MAX;
    cfg.max_backoff = Duration::MAX;
    cfg.max_attempts = u32::MAX;
    let (delays, why) = schedule(&cfg, T);
    assert_eq!((delays.len(), why), (9, GiveUp::AttemptsExhausted));
    // A NaN multiplier counts as 1: every backoff is the (saturated) cap,
    // and the jitter of 7 counts as 1, so the delays still spread.
    assert_eq!(backoff(&cfg, 9), Duration::MAX);
    let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
    assert!(
        distinct.len() > 1,
        "jitter 7 clamped to 1 still jitters: {delays:?}"
    );
    cfg.multiplier = f64::MAX;
    cfg.initial_backoff = Duration::from_secs(1);
    cfg.max_backoff = Duration::from_secs(10);
    assert_eq!(backoff(&cfg, 10), Duration::from_secs(10));
}

/// Many seeded draws of the delay before retry `n`, each from a fresh
/// state; the smallest and the largest.
fn draws(cfg: &RetryConfig, n: u32) -> (Duration, Duration) {
    let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
    for seed in 0..4_000 {
        let mut state = RetryState::with_seed(seed);
        let mut delay = Duration::ZERO;
        for _ in 0..n {
            let Decision::Retry { delay: d, .. } = state.decide(cfg, T, Limits::NONE) else {
                panic!("retry {n} of {cfg:?} was refused");
            };
            delay = d;
        }
        lo = lo.min(delay);
        hi = hi.max(delay);
    }
    (lo, hi)
}

#[test]
fn jitter_spreads_delays_over_the_whole_band_and_never_outside_it() {
    // The http layer's 50 %: 250 ms before retry 1, 1 s before retry 2.
    let http = RetryConfig::for_layer(Layer::Http);
    for (n, d) in [(1, 250u64), (2, 1_000)] {
        let d = Duration::from_millis(d);
        let (lo, hi) = draws(&http, n);
        // Never outside [d/2, d].
        assert!(lo >= d / 2 && hi <= d, "retry {n}: {lo:?}..{hi:?}");
        // 4 000 uniform draws come within 1 % of both ends.
        assert!(lo <= d / 2 + d / 100, "retry {n}: lowest {lo:?}");
        assert!(hi >= d - d / 100, "retry {n}: highest {hi:?}");
    }
    // Other fractions: the band is [d·(1−j), d].
    for j in [0.1f32, 0.25, 0.9, 1.0] {
        let cfg = exact(Layer::Provider).with_jitter(j).unwrap();
        let d = Duration::from_secs(1);
        let (lo, hi) = draws(&cfg, 1);
        let floor = d.mul_f64(1.0 - f64::from(j));
        assert!(lo >= floor && hi <= d, "jitter {j}: {lo:?}..{hi:?}");
        assert!(lo <= floor + d / 100, "jitter {j}: lowest {lo:?}");
        assert!(hi >= d - d / 100, "jitter {j}: highest {hi:?}");
    }
}

#[test]
fn jitter_draws_are_uniform_over_the_band() {
    // Quartiles of 4 000 draws from [500 ms, 1 s]: about 1 000 each.
    let cfg = exact(Layer::Provider).with_jitter(0.5).unwrap();
    let mut quartiles = [0u32; 4];
    for seed in 0..4_000 {
        let Decision::Retry { delay, .. } =
            RetryState::with_seed(seed).decide(&cfg, T, Limits::NONE)
        else {
            panic!("refused")
        };
        let q = ((delay.as_millis() as u64).saturating_sub(500) / 125).min(3);
        quartiles[q as usize] += 1;
    }
    assert!(
        quartiles.iter().all(|&n| (850..=1_150).contains(&n)),
        "{quartiles:?}"
    );
}

#[test]
fn zero_jitter_is_exact() {
    let (lo, hi) = draws(&exact(Layer::Http), 2);
    assert_eq!((lo, hi), (Duration::from_secs(1), Duration::from_secs(1)));
}

#[test]
fn a_hint_equal_to_the_cap_is_slept_on() {
    let cfg = exact(Layer::Provider);
    let hint = cfg.max_retry_after;
    let failure = Failure::new(ErrorCategory::RateLimited, Some(hint));
    assert_eq!(
        RetryState::with_seed(1).decide(&cfg, failure, Limits::NONE),
        Decision::Retry {
            delay: hint,
            from_hint: true
        }
    );
    let above = Failure::new(
        ErrorCategory::RateLimited,
        Some(hint + Duration::from_nanos(1)),
    );
    assert_eq!(
        RetryState::with_seed(1).decide(&cfg, above, Limits::NONE),
        Decision::GiveUp(GiveUp::HintTooLong {
            hint: hint + Duration::from_nanos(1)
        })
    );
}

#[test]
fn jitter_stays_in_its_band_up_to_duration_max() {
    for (jitter, num, den) in [(0.5f32, 1u128, 2u128), (0.25, 3, 4), (1.0, 0, 1)] {
        let mut cfg = RetryConfig::for_layer(Layer::Provider);
        cfg.jitter = jitter;
        for d in [
            Duration::MAX,
            Duration::MAX - Duration::from_nanos(1),
            Duration::from_secs(u64::MAX / 3),
            Duration::from_nanos(u64::MAX) * 7,
        ] {
            cfg.initial_backoff = d;
            cfg.max_backoff = d;
            assert_eq!(backoff(&cfg, 3), d);
            let mut state = RetryState::with_seed(5);
            for _ in 0..200 {
                let got = state.jittered(&cfg, d);
                // got ≥ d·(1 − jitter), exactly: got·den ≥ d·num.
                assert!(got <= d, "{got:?} > {d:?}");
                assert!(
                    got.as_nanos() * den >= d.as_nanos() * num,
                    "{got:?} below the band of {d:?}"
                );
            }
        }
    }
}

#[test]
fn a_backoff_beyond_584_years_is_not_cut_to_it() {
    let mut cfg = exact(Layer::Provider);
    cfg.initial_backoff = Duration::from_secs(1 << 40);
    cfg.max_backoff = Duration::MAX;
    assert_eq!(backoff(&cfg, 2), Duration::from_secs(1 << 42));
}

#[test]
fn thread_seed_reproduces_the_schedule() {
    let cfg = RetryConfig::for_layer(Layer::Provider);
    let run = || {
        seed_thread_jitter(42);
        let mut s = RetryState::new();
        [
            s.decide(&cfg, T, Limits::NONE),
            s.decide(&cfg, T, Limits::NONE),
        ]
    };
    assert_eq!(run(), run());
}

#[test]
fn give_up_reasons_read_as_sentences() {
    let secs = Duration::from_secs;
    let reasons = [
        (GiveUp::NotRetryable, "not retryable"),
        (GiveUp::AttemptsExhausted, "attempts exhausted"),
        (GiveUp::NotOptedIn, "not opted in by the task"),
        (GiveUp::BudgetExhausted, "attempt budget exhausted"),
        (GiveUp::TokenBucketEmpty, "retry token bucket empty"),
        (
            GiveUp::HintTooLong { hint: secs(90) },
            "server asked to wait 1m 30s",
        ),
        (
            GiveUp::PastDeadline { delay: secs(4) },
            "a 4s wait would pass the deadline",
        ),
    ];
    for (why, text) in reasons {
        assert_eq!(why.to_string(), text);
    }
}

#[test]
fn a_seed_fixes_the_jitter() {
    let cfg = RetryConfig::for_layer(Layer::Provider)
        .with_max_attempts(10)
        .unwrap();
    let run = |seed| {
        let mut state = RetryState::with_seed(seed);
        let delays: Vec<_> = (0..9)
            .map(|_| state.decide(&cfg, T, Limits::NONE))
            .collect();
        delays
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn a_multiplier_below_one_or_infinite_counts_as_one() {
    for m in [0.5, f64::INFINITY, f64::NAN, -2.0] {
        let mut cfg = exact(Layer::Provider);
        cfg.multiplier = m;
        assert_eq!(backoff(&cfg, 3), Duration::from_secs(1), "{m}");
    }
}

#[test]
fn a_backoff_below_2_pow_64_ns_is_exact_to_the_nanosecond() {
    // 2^62 + 1024 ns is exact as an f64 of nanoseconds; as an f64 of
    // seconds it is 217 ns off.
    let d = Duration::from_nanos((1 << 62) + 1024);
    let mut cfg = exact(Layer::Provider).with_multiplier(1.0).unwrap();
    cfg.initial_backoff = d;
    cfg.max_backoff = Duration::MAX;
    assert_eq!(backoff(&cfg, 1), d);
    assert_eq!(backoff(&cfg, 5), d);
}

/// A call that is not idempotent: every other limit left out.
const NOT_IDEMPOTENT: Limits = Limits {
    idempotent: false,
    ..Limits::NONE
};

#[test]
fn a_call_that_is_not_idempotent_retries_only_what_had_no_effect() {
    let cfg = exact(Layer::Provider);
    let decide =
        |failure: Failure, limits: Limits| RetryState::with_seed(1).decide(&cfg, failure, limits);
    // Never sent, or turned away: retried as any call is.
    for reached in [Reached::No, Reached::Refused] {
        assert_eq!(
            decide(T.with_reached(reached), NOT_IDEMPOTENT),
            Decision::retry(Duration::from_secs(1)),
            "{reached}"
        );
    }
    // A 429 is refused by default: retried after its hint.
    let hinted = Failure::new(ErrorCategory::RateLimited, Some(Duration::from_secs(2)));
    assert!(matches!(
        decide(hinted, NOT_IDEMPOTENT),
        Decision::Retry {
            from_hint: true,
            ..
        }
    ));
    // What may have reached the other side gives up at once.
    assert_eq!(
        decide(T.with_reached(Reached::Maybe), NOT_IDEMPOTENT),
        Decision::GiveUp(GiveUp::MayHaveTakenEffect)
    );
    assert_eq!(
        decide(T, NOT_IDEMPOTENT),
        Decision::GiveUp(GiveUp::MayHaveTakenEffect),
        "a transient failure is Maybe by default"
    );
    // The same failure of an idempotent call is retried.
    assert_eq!(
        decide(T.with_reached(Reached::Maybe), Limits::NONE),
        Decision::retry(Duration::from_secs(1))
    );
}

#[test]
fn a_failure_given_up_on_anyway_keeps_its_reason() {
    let cfg = exact(Layer::Provider);
    let permanent = Failure::new(ErrorCategory::Permanent, None);
    assert_eq!(
        RetryState::with_seed(1).decide(&cfg, permanent, NOT_IDEMPOTENT),
        Decision::GiveUp(GiveUp::NotRetryable)
    );
    let mut last = RetryState::with_seed(1);
    for _ in 1..cfg.effective_attempts() {
        assert!(matches!(
            last.decide(&cfg, T.with_reached(Reached::No), NOT_IDEMPOTENT),
            Decision::Retry { .. }
        ));
    }
    assert_eq!(
        last.decide(&cfg, T, NOT_IDEMPOTENT),
        Decision::GiveUp(GiveUp::AttemptsExhausted)
    );
    let spent = Limits {
        budget_left: Some(0),
        ..NOT_IDEMPOTENT
    };
    assert_eq!(
        RetryState::with_seed(1).decide(&cfg, T, spent),
        Decision::GiveUp(GiveUp::BudgetExhausted)
    );
}

#[test]
fn a_failure_reaches_as_its_error_says() {
    let d = Duration::from_secs(1);
    let connect = crate::vocab::timeout_error::TimeoutError::new(
        crate::vocab::timeout_error::Boundary::Connect,
        d,
        Layer::Http,
    );
    assert_eq!(Failure::of(&connect).reached, Reached::No);
    let read = crate::vocab::timeout_error::TimeoutError::new(
        crate::vocab::timeout_error::Boundary::Read,
        d,
        Layer::Http,
    );
    assert_eq!(Failure::of(&read).reached, Reached::Maybe);
    assert_eq!(RL.reached, Reached::Refused);
    assert_eq!(
        GiveUp::MayHaveTakenEffect.to_string(),
        "not retried: the attempt may have taken effect and the fn is not idempotent"
    );
}
