//! What a window allows, counted as each of the three kinds of server
//! counts it: a pure meter, given the time of each request, so that the
//! counting is tested without a socket or a clock.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::Kind;

/// How many dimensions a quota limits: `[requests, tokens, input tokens,
/// output tokens]`. A dimension the server does not limit has the limit
/// [`UNLIMITED`].
pub(super) const DIMS: usize = 4;
/// The request dimension's index.
pub(super) const REQUESTS: usize = 0;
/// The token dimension's index: input and output together.
pub(super) const TOKENS: usize = 1;
/// The input (prompt) token dimension's index.
pub(super) const INPUT: usize = 2;
/// The output (`max_tokens`) token dimension's index.
pub(super) const OUTPUT: usize = 3;
/// The limit of a dimension that is not limited: never short, whatever
/// the kind (a sum of real costs never reaches it).
pub(super) const UNLIMITED: u64 = u64::MAX;

/// What the meter made of one request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Verdict {
    /// Whether the request was admitted (and spent its cost).
    pub admitted: bool,
    /// Per dimension, whether it lacked room for the request.
    pub short: [bool; DIMS],
    /// Per dimension, what is left after this request (OpenAI's
    /// `x-ratelimit-remaining-*`).
    pub remaining: [u64; DIMS],
    /// Per dimension, how long until it is whole again (OpenAI's
    /// `x-ratelimit-reset-*`: "until the rate limit resets to its initial
    /// state"; Anthropic's `-reset`: "fully replenished").
    pub reset: [Duration; DIMS],
    /// For a refused request: the earliest time from now at which the same
    /// request would be admitted (zero when admitted).
    pub retry_after: Duration,
}

/// The count of one server, by its kind.
#[derive(Debug)]
pub(super) struct Meter {
    window: Duration,
    limit: [u64; DIMS],
    count: Count,
}

#[derive(Debug)]
enum Count {
    /// Per dimension the level of a bucket of the limit, refilled at
    /// `limit / window`, as of `at`.
    Refill { level: [f64; DIMS], at: Instant },
    /// The requests admitted in the last window: when, and their costs.
    Rolling {
        log: VecDeque<(Instant, [u64; DIMS])>,
    },
    /// The window `index` (counted from `epoch`) and what it has spent.
    Fixed {
        epoch: Instant,
        index: u64,
        used: [u64; DIMS],
    },
}

/// The dimensions' indices, for `map`s over them.
const EACH: [usize; DIMS] = [REQUESTS, TOKENS, INPUT, OUTPUT];

impl Meter {
    /// A meter of `limit` (indexed by [`REQUESTS`], [`TOKENS`], [`INPUT`],
    /// [`OUTPUT`]) per `window`, whole at `epoch`.
    pub(super) fn new(kind: Kind, window: Duration, limit: [u64; DIMS], epoch: Instant) -> Meter {
        let count = match kind {
            Kind::Refill => Count::Refill {
                level: limit.map(|l| l as f64),
                at: epoch,
            },
            Kind::Rolling => Count::Rolling {
                log: VecDeque::new(),
            },
            Kind::Fixed => Count::Fixed {
                epoch,
                index: 0,
                used: [0; DIMS],
            },
        };
        Meter {
            window,
            limit,
            count,
        }
    }

    /// A request of `input` and `output` tokens at `now` (never before the
    /// previous one): admitted, spending one request, its tokens, its input
    /// and its output, if every dimension has room for it.
    pub(super) fn take(&mut self, now: Instant, input: u64, output: u64) -> Verdict {
        let cost = [1, input + output, input, output];
        let (window, limit) = (self.window, self.limit);
        match &mut self.count {
            Count::Refill { level, at } => {
                let rate = limit.map(|l| l as f64 / window.as_secs_f64());
                let elapsed = now.saturating_duration_since(*at).as_secs_f64();
                for d in EACH {
                    level[d] = (level[d] + elapsed * rate[d]).min(limit[d] as f64);
                }
                *at = now;
                let short = EACH.map(|d| level[d] < cost[d] as f64);
                let admitted = !short.contains(&true);
                let mut retry_after = Duration::ZERO;
                for d in EACH {
                    if admitted {
                        level[d] -= cost[d] as f64;
                    } else if short[d] {
                        let wait = secs((cost[d] as f64 - level[d]) / rate[d]);
                        retry_after = retry_after.max(wait);
                    }
                }
                Verdict {
                    admitted,
                    short,
                    remaining: level.map(|l| l.max(0.0) as u64),
                    reset: EACH.map(|d| secs((limit[d] as f64 - level[d]) / rate[d])),
                    retry_after,
                }
            }
            Count::Rolling { log } => {
                while log.front().is_some_and(|&(at, _)| at + window <= now) {
                    log.pop_front();
                }
                let used = |log: &VecDeque<(Instant, [u64; DIMS])>| {
                    EACH.map(|d| log.iter().map(|(_, c)| c[d]).sum::<u64>())
                };
                let before = used(log);
                let short = EACH.map(|d| before[d].saturating_add(cost[d]) > limit[d]);
                let admitted = !short.contains(&true);
                let mut retry_after = Duration::ZERO;
                if admitted {
                    log.push_back((now, cost));
                } else {
                    // The oldest entries expire first: wait until enough of
                    // each short dimension has.
                    for d in EACH.into_iter().filter(|&d| short[d]) {
                        let mut excess = before[d] + cost[d] - limit[d];
                        for &(at, c) in log.iter() {
                            excess = excess.saturating_sub(c[d]);
                            if excess == 0 {
                                retry_after = retry_after.max(at + window - now);
                                break;
                            }
                        }
                    }
                }
                let after = used(log);
                // Whole again when the last entry that spent some of it leaves.
                let reset = EACH.map(|d| {
                    log.iter()
                        .rev()
                        .find(|(_, c)| c[d] > 0)
                        .map_or(Duration::ZERO, |&(at, _)| at + window - now)
                });
                Verdict {
                    admitted,
                    short,
                    remaining: EACH.map(|d| limit[d].saturating_sub(after[d])),
                    reset,
                    retry_after,
                }
            }
            Count::Fixed { epoch, index, used } => {
                let since = now.saturating_duration_since(*epoch);
                let current = (since.as_nanos() / window.as_nanos()) as u64;
                if current != *index {
                    *index = current;
                    *used = [0; DIMS];
                }
                let next = window * (current as u32 + 1);
                let to_next = next.saturating_sub(since);
                let short = EACH.map(|d| used[d].saturating_add(cost[d]) > limit[d]);
                let admitted = !short.contains(&true);
                if admitted {
                    for d in EACH {
                        used[d] += cost[d];
                    }
                }
                Verdict {
                    admitted,
                    short,
                    remaining: EACH.map(|d| limit[d].saturating_sub(used[d])),
                    reset: EACH.map(|d| {
                        if used[d] == 0 {
                            Duration::ZERO
                        } else {
                            to_next
                        }
                    }),
                    retry_after: if admitted { Duration::ZERO } else { to_next },
                }
            }
        }
    }
}

/// A non-negative number of seconds as a duration (rounded up to the
/// microsecond, so that a wait is never a hair short).
fn secs(s: f64) -> Duration {
    Duration::from_micros((s.max(0.0) * 1e6).ceil() as u64)
}

/// `d` as Go prints a duration (`time.Duration.String`), which is how
/// OpenAI writes its resets, to the millisecond (rounded up, so that a
/// reset that is not yet due never reads `0s`): `1.5s`, `6m0s`, `120ms`,
/// `1h2m3.04s`, `0s`.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    if ms < 1000 {
        return if ms == 0 {
            "0s".to_owned()
        } else {
            format!("{ms}ms")
        };
    }
    let (h, m, ms_of_minute) = (ms / 3_600_000, ms / 60_000 % 60, ms % 60_000);
    let (s, frac) = (ms_of_minute / 1000, ms_of_minute % 1000);
    let seconds = match frac {
        0 => format!("{s}s"),
        frac => format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0')),
    };
    match (h, m) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_secs(2);
    const MS: Duration = Duration::from_millis(1);

    /// A meter of 20 requests and 3 000 tokens per 2 s.
    fn meter(kind: Kind, epoch: Instant) -> Meter {
        Meter::new(kind, W, [20, 3_000, UNLIMITED, UNLIMITED], epoch)
    }

    impl Meter {
        /// A request of `tokens`, all of them input.
        fn spend(&mut self, now: Instant, tokens: u64) -> Verdict {
            self.take(now, tokens, 0)
        }
    }

    /// How many requests of `tokens` a burst at `now` gets admitted.
    fn burst(meter: &mut Meter, now: Instant, tokens: u64) -> usize {
        (0..100)
            .take_while(|_| meter.spend(now, tokens).admitted)
            .count()
    }

    #[test]
    fn each_kind_admits_exactly_its_limit_in_a_burst() {
        for kind in [Kind::Refill, Kind::Rolling, Kind::Fixed] {
            let t0 = Instant::now();
            assert_eq!(
                burst(&mut meter(kind, t0), t0, 200),
                15,
                "{kind:?}: tokens bind"
            );
            assert_eq!(
                burst(&mut meter(kind, t0), t0, 100),
                20,
                "{kind:?}: requests bind"
            );
        }
    }

    #[test]
    fn refill_gives_back_the_limit_over_the_window_continuously() {
        let t0 = Instant::now();
        let mut m = meter(Kind::Refill, t0);
        assert_eq!(burst(&mut m, t0, 200), 15);
        let refused = m.spend(t0, 200);
        assert!(refused.short[TOKENS] && !refused.short[REQUESTS]);
        assert_eq!(refused.remaining[..2], [5, 0]);
        // 200 tokens at 1 500 per second: 133.34 ms.
        assert_eq!(refused.retry_after.as_micros(), 133_334);
        assert_eq!(refused.reset[TOKENS], W);
        assert!(!m.spend(t0 + 133 * MS, 200).admitted);
        assert!(m.spend(t0 + 134 * MS, 200).admitted);
    }

    #[test]
    fn rolling_frees_what_left_the_window() {
        let t0 = Instant::now();
        let mut m = meter(Kind::Rolling, t0);
        for i in 0..15 {
            assert!(m.spend(t0 + i * 100 * MS, 200).admitted);
        }
        let refused = m.spend(t0 + 1500 * MS, 200);
        assert!(!refused.admitted);
        assert_eq!(refused.retry_after, 500 * MS, "when the first one leaves");
        assert_eq!(
            refused.reset[TOKENS],
            W - 100 * MS,
            "when the last one leaves"
        );
        assert!(!m.spend(t0 + 1999 * MS, 200).admitted);
        assert!(m.spend(t0 + W, 200).admitted);
        assert!(!m.spend(t0 + W, 200).admitted, "one left, one came in");
    }

    #[test]
    fn fixed_starts_afresh_at_each_boundary() {
        let t0 = Instant::now();
        let mut m = meter(Kind::Fixed, t0);
        assert_eq!(burst(&mut m, t0 + 1900 * MS, 200), 15);
        let refused = m.spend(t0 + 1900 * MS, 200);
        assert_eq!(refused.retry_after, 100 * MS);
        assert_eq!(refused.reset[..2], [100 * MS; 2]);
        assert_eq!(
            burst(&mut m, t0 + W, 200),
            15,
            "30 in 100 ms across the boundary"
        );
    }

    #[test]
    fn a_request_larger_than_the_limit_is_never_admitted() {
        for kind in [Kind::Refill, Kind::Rolling, Kind::Fixed] {
            let t0 = Instant::now();
            let mut m = meter(kind, t0);
            assert!(!m.spend(t0 + 10 * W, 3_001).admitted, "{kind:?}");
        }
    }

    #[test]
    fn input_and_output_are_dimensions_of_their_own_in_each_kind() {
        for kind in Kind::ALL {
            let t0 = Instant::now();
            // 5 000 tokens in all, of them at most 1 000 input and 2 500 output.
            let mut m = Meter::new(kind, W, [20, 5_000, 1_000, 2_500], t0);
            let input = (0..10).take_while(|_| m.take(t0, 300, 10).admitted);
            assert_eq!(input.count(), 3, "{kind:?}: 300 input each");
            let refused = m.take(t0, 300, 10);
            assert_eq!(refused.short, [false, false, true, false], "{kind:?}");
            assert_eq!(refused.remaining, [17, 4_070, 100, 2_470], "{kind:?}");
            let (retry_after, whole) = match kind {
                // 200 input short and 900 spent, refilled at 500 a second.
                Kind::Refill => (400 * MS, 1800 * MS),
                Kind::Rolling | Kind::Fixed => (W, W),
            };
            assert_eq!(refused.retry_after, retry_after, "{kind:?}");
            assert_eq!(refused.reset[INPUT], whole, "{kind:?}");
            assert!(
                m.take(t0, 100, 10).admitted,
                "{kind:?}: 100 input still fit"
            );

            let mut m = Meter::new(kind, W, [20, 5_000, 1_000, 2_500], t0);
            let output = (0..10).take_while(|_| m.take(t0, 10, 500).admitted);
            assert_eq!(output.count(), 5, "{kind:?}: 500 output each");
            let refused = m.take(t0, 10, 500);
            assert_eq!(refused.short, [false, false, false, true], "{kind:?}");
            assert_eq!(refused.remaining[OUTPUT], 0, "{kind:?}");
        }
    }

    #[test]
    fn an_unlimited_dimension_is_never_short() {
        for kind in Kind::ALL {
            let t0 = Instant::now();
            let mut m = meter(kind, t0);
            let taken = m.take(t0, 1_000, 1_000);
            assert!(taken.admitted, "{kind:?}");
            assert_eq!(taken.remaining[TOKENS], 1_000, "{kind:?}");
            let refused = m.take(t0, 1_000, 1);
            assert_eq!(refused.short, [false, true, false, false], "{kind:?}");
        }
    }

    #[test]
    fn go_durations_as_openai_writes_them() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_micros(1), "1ms"),
            (120 * MS, "120ms"),
            (1500 * MS, "1.5s"),
            (Duration::from_secs(1), "1s"),
            (Duration::from_secs(360), "6m0s"),
            (Duration::from_millis(3_723_040), "1h2m3.04s"),
        ];
        for (d, text) in cases {
            assert_eq!(go_duration(d), text);
        }
    }
}
