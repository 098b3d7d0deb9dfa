//! [`rate_limit_fields`]: each limit a response's headers describe (its
//! size, what is left of it, when it is whole again, its window), for an
//! upstream that paces its calls.

use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use super::Headers;
use super::rate_limits::{count, go_duration, header, rfc3339, server_now};

/// What a response's headers say of one limit (requests, or tokens).
/// Each field is `None` when no header says it or its value is unusable.
///
/// ```
/// use nika_retry::http::LimitFields;
///
/// let unknown = LimitFields::default();
/// assert_eq!(unknown.limit, None);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitFields {
    /// The size of the limit (`x-ratelimit-limit-*`,
    /// `anthropic-ratelimit-*-limit`, `RateLimit-Policy`'s `q`).
    pub limit: Option<u64>,
    /// What is left of it now.
    pub remaining: Option<u64>,
    /// How long from the response until it is whole again (OpenAI,
    /// Anthropic) or until it resets (the IETF field's `t`).
    pub reset: Option<Duration>,
    /// The window the limit is counted over (`RateLimit-Policy`'s `w`);
    /// OpenAI and Anthropic do not send it.
    pub window: Option<Duration>,
    /// `reset` was an instant (Anthropic's), read against the response:
    /// the window it bounds is counted from when the request reached the
    /// server, earlier than the response by the answer's time, where a
    /// duration (OpenAI's, the IETF's) is counted from the server's
    /// writing it as it admitted.
    pub(crate) instant: bool,
    /// `reset` was written in whole seconds (the IETF's `t`, an instant or
    /// a duration without a fraction): rounded up by up to a second, where
    /// a fraction says the millisecond.
    pub(crate) whole_seconds: bool,
}

impl LimitFields {
    /// Whether any header said anything of this limit.
    ///
    /// ```
    /// use nika_retry::http::LimitFields;
    ///
    /// assert!(!LimitFields::default().any());
    /// ```
    pub fn any(&self) -> bool {
        *self != LimitFields::default()
    }
}

/// What a response's headers say of its limits, per dimension.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use nika_retry::http::rate_limit_fields;
///
/// let openai = [
///     ("x-ratelimit-limit-requests", "20"),
///     ("x-ratelimit-remaining-requests", "19"),
///     ("x-ratelimit-reset-requests", "100ms"),
///     ("x-ratelimit-limit-tokens", "3000"),
///     ("x-ratelimit-remaining-tokens", "2850"),
///     ("x-ratelimit-reset-tokens", "100ms"),
/// ];
/// let fields = rate_limit_fields(&openai[..], SystemTime::now());
/// assert_eq!(fields.requests.limit, Some(20));
/// assert_eq!(fields.tokens.remaining, Some(2850));
/// assert_eq!(fields.tokens.reset, Some(Duration::from_millis(100)));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimitFields {
    /// The limit on requests.
    pub requests: LimitFields,
    /// The limit on tokens (Anthropic's `tokens`, else its `input-tokens`).
    pub tokens: LimitFields,
}

/// Reads every limit a response's headers describe, as `now` (the
/// response's time) sees them: OpenAI's
/// `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, Anthropic's
/// `anthropic-ratelimit-{requests,tokens,input-tokens}-{limit,remaining,reset}`,
/// and the IETF `RateLimit-Policy` (`q` the quota, `w` the window in
/// seconds; `qu="tokens"`, or without `qu` a name that says tokens, for a
/// token quota) with its `RateLimit` (`r`,
/// `t`), paired by policy name. The first dialect that says anything of a
/// dimension is its reading. An unparsable, negative or past value is
/// `None`, never a panic; a count past `u64` is `u64::MAX`.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use nika_retry::http::rate_limit_fields;
///
/// let ietf = [
///     ("RateLimit-Policy", "\"burst\";q=100;w=60"),
///     ("RateLimit", "\"burst\";r=40;t=12"),
/// ];
/// let requests = rate_limit_fields(&ietf[..], SystemTime::now()).requests;
/// assert_eq!(requests.limit, Some(100));
/// assert_eq!(requests.window, Some(Duration::from_secs(60)));
/// assert_eq!((requests.remaining, requests.reset), (Some(40), Some(Duration::from_secs(12))));
/// ```
pub fn rate_limit_fields<H: Headers + ?Sized>(headers: &H, now: SystemTime) -> RateLimitFields {
    rate_limit_fields_at(headers, now, server_now(headers, now))
}

/// [`rate_limit_fields`], read against the server's now already decided
/// (`now`; `ours`, the machine's when the response arrived).
pub(crate) fn rate_limit_fields_at<H: Headers + ?Sized>(
    headers: &H,
    ours: SystemTime,
    now: SystemTime,
) -> RateLimitFields {
    // Read against the server's `Date`, an instant is known to its second.
    let by_date = now != ours;
    let openai = |dim: &str| {
        let reset = header(headers, &format!("x-ratelimit-reset-{dim}")).and_then(go_duration);
        LimitFields {
            limit: header(headers, &format!("x-ratelimit-limit-{dim}")).and_then(count),
            remaining: header(headers, &format!("x-ratelimit-remaining-{dim}")).and_then(count),
            reset,
            window: None,
            instant: false,
            whole_seconds: reset.is_some_and(|r| r.subsec_nanos() == 0),
        }
    };
    let anthropic = |dim: &str| {
        let at = header(headers, &format!("anthropic-ratelimit-{dim}-reset"))
            .and_then(|v| rfc3339(v.trim()));
        let reset = at.and_then(|at| at.duration_since(now).ok());
        let whole = at
            .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
            .is_some_and(|since| since.subsec_nanos() == 0);
        LimitFields {
            limit: header(headers, &format!("anthropic-ratelimit-{dim}-limit")).and_then(count),
            remaining: header(headers, &format!("anthropic-ratelimit-{dim}-remaining"))
                .and_then(count),
            reset,
            window: None,
            instant: reset.is_some(),
            whole_seconds: reset.is_some() && (whole || by_date),
        }
    };
    let (ietf_requests, ietf_tokens) = ietf(headers);
    let first = |readings: [LimitFields; 3]| readings.into_iter().find(LimitFields::any);
    RateLimitFields {
        requests: first([openai("requests"), anthropic("requests"), ietf_requests])
            .unwrap_or_default(),
        tokens: first([
            openai("tokens"),
            first([anthropic("tokens"), anthropic("input-tokens"), ietf_tokens])
                .unwrap_or_default(),
            LimitFields::default(),
        ])
        .unwrap_or_default(),
    }
}

/// One member of `RateLimit-Policy` or `RateLimit`: its name and its
/// parameters.
#[derive(Default)]
struct Member<'v> {
    name: &'v str,
    quota: Option<u64>,
    window: Option<u64>,
    tokens: bool,
    remaining: Option<u64>,
    reset: Option<u64>,
}

fn members(value: &str) -> impl Iterator<Item = Member<'_>> {
    value.split(',').map(|member| {
        let mut params = member.split(';');
        let name = params.next().unwrap_or_default().trim().trim_matches('"');
        let mut m = Member {
            name,
            // Without `qu` the draft counts requests; a policy named for
            // tokens ("tokens", "input-tokens") counts them all the same,
            // as a server that tells its policies apart by name means.
            tokens: name.to_ascii_lowercase().contains("token"),
            ..Member::default()
        };
        for param in params {
            let Some((key, val)) = param.split_once('=') else {
                continue;
            };
            let val = val.trim();
            match key.trim() {
                "q" => m.quota = m.quota.or(count(val)),
                "w" => m.window = m.window.or(count(val)),
                "qu" => m.tokens = val.trim_matches('"').contains("token"),
                "r" => m.remaining = m.remaining.or(count(val)),
                "t" => m.reset = m.reset.or(count(val)),
                _ => {}
            }
        }
        m
    })
}

/// The IETF fields' requests and tokens: per unit, the policy with the
/// smallest quota per second of window, with the `RateLimit` member of its
/// name (or the only member, when neither names one).
fn ietf<H: Headers + ?Sized>(headers: &H) -> (LimitFields, LimitFields) {
    let Some(policy) = header(headers, "ratelimit-policy") else {
        return Default::default();
    };
    let field = header(headers, "ratelimit").unwrap_or_default();
    let pick = |tokens: bool| {
        let tightest = members(policy)
            .filter(|m| m.tokens == tokens && m.quota.is_some())
            .min_by(|a, b| {
                // q/w compared as q_a * w_b against q_b * w_a, in u128.
                let rate = |m: &Member<'_>, other: &Member<'_>| {
                    u128::from(m.quota.unwrap_or(0)) * u128::from(other.window.unwrap_or(1))
                };
                rate(a, b).cmp(&rate(b, a))
            })?;
        let current = members(field).find(|m| m.name == tightest.name);
        Some(LimitFields {
            limit: tightest.quota,
            remaining: current.as_ref().and_then(|m| m.remaining),
            reset: current
                .as_ref()
                .and_then(|m| m.reset)
                .map(Duration::from_secs),
            window: tightest.window.map(Duration::from_secs),
            instant: false,
            whole_seconds: current.as_ref().is_some_and(|m| m.reset.is_some()),
        })
    };
    (
        pick(false).unwrap_or_default(),
        pick(true).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn read(headers: &[(&str, &str)]) -> RateLimitFields {
        rate_limit_fields(headers, now())
    }

    #[test]
    fn openai_six_headers() {
        let fields = read(&[
            ("x-ratelimit-limit-requests", "20"),
            ("x-ratelimit-remaining-requests", "12"),
            ("x-ratelimit-reset-requests", "800ms"),
            ("x-ratelimit-limit-tokens", "3000"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "2s"),
        ]);
        assert_eq!(fields.requests.limit, Some(20));
        assert_eq!(fields.requests.remaining, Some(12));
        assert_eq!(fields.requests.reset, Some(Duration::from_millis(800)));
        assert_eq!(fields.tokens.limit, Some(3000));
        assert_eq!(fields.tokens.remaining, Some(0));
        assert_eq!(fields.requests.window, None);
    }

    #[test]
    fn anthropic_tokens_then_input_tokens() {
        let at = humantime::format_rfc3339(now() + Duration::from_secs(30)).to_string();
        let fields = read(&[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-input-tokens-limit", "40000"),
            ("anthropic-ratelimit-input-tokens-remaining", "39000"),
            ("anthropic-ratelimit-input-tokens-reset", at.as_str()),
        ]);
        assert_eq!(fields.requests.limit, Some(50));
        assert_eq!(fields.requests.remaining, None);
        assert_eq!(fields.tokens.limit, Some(40000));
        assert_eq!(fields.tokens.reset, Some(Duration::from_secs(30)));
        let fields = read(&[
            ("anthropic-ratelimit-tokens-limit", "80000"),
            ("anthropic-ratelimit-input-tokens-limit", "40000"),
        ]);
        assert_eq!(fields.tokens.limit, Some(80000), "the combined limit first");
    }

    #[test]
    fn ietf_policy_the_tightest_with_its_field() {
        let fields = read(&[
            (
                "RateLimit-Policy",
                "\"hour\";q=1000;w=3600, \"minute\";q=100;w=60, \"tpm\";q=5000;w=60;qu=\"tokens\"",
            ),
            ("RateLimit", "\"hour\";r=900;t=100, \"minute\";r=3;t=7"),
        ]);
        // 1000 per hour is the slower rate (0.28/s against 1.67/s).
        assert_eq!(fields.requests.limit, Some(1000));
        assert_eq!(fields.requests.remaining, Some(900));
        assert_eq!(fields.requests.window, Some(Duration::from_secs(3600)));
        assert_eq!(fields.tokens.limit, Some(5000));
        assert_eq!(fields.tokens.remaining, None);
    }

    #[test]
    fn ietf_policies_without_qu_are_told_apart_by_name() {
        let fields = read(&[
            (
                "RateLimit-Policy",
                "\"requests\";q=20;w=2, \"tokens\";q=3000;w=2, \"output-tokens\";q=2500;w=2",
            ),
            (
                "RateLimit",
                "\"requests\";r=19;t=2, \"tokens\";r=2800;t=2, \"output-tokens\";r=2400;t=2",
            ),
        ]);
        assert_eq!(fields.requests.limit, Some(20), "not the tokens' 3 000");
        assert_eq!(fields.requests.remaining, Some(19));
        // The tighter of the two token policies (1 250 a second).
        assert_eq!(fields.tokens.limit, Some(2500));
        assert_eq!(fields.tokens.remaining, Some(2400));
        // `qu` says otherwise: requests, whatever the name.
        let fields = read(&[("RateLimit-Policy", "\"tokens\";q=30;w=2;qu=\"requests\"")]);
        assert_eq!(
            (fields.requests.limit, fields.tokens.limit),
            (Some(30), None)
        );
    }

    #[test]
    fn absurd_values_are_none_or_saturate_never_a_panic() {
        for value in [
            "-1",
            "",
            "1e9",
            "NaN",
            "٣",
            "99999999999999999999999999",
            "\u{0}",
            "18446744073709551616",
        ] {
            let fields = read(&[
                ("x-ratelimit-limit-requests", value),
                ("x-ratelimit-remaining-requests", value),
                ("x-ratelimit-reset-requests", value),
                ("RateLimit-Policy", &format!("a;q={value};w={value}")),
            ]);
            let r = fields.requests;
            assert!(
                r.limit.is_none() || r.limit == Some(u64::MAX),
                "{value:?}: {r:?}"
            );
            let fields = read(&[("RateLimit-Policy", &format!("a;q={value};w={value}"))]);
            assert!(
                fields
                    .requests
                    .window
                    .is_none_or(|w| w.as_secs() == u64::MAX)
            );
        }
        let past = humantime::format_rfc3339(now() - Duration::from_secs(5)).to_string();
        let fields = read(&[("anthropic-ratelimit-requests-reset", past.as_str())]);
        assert_eq!(fields.requests.reset, None, "a past reset");
        let fields = read(&[("x-ratelimit-reset-tokens", "99999999999999999999h")]);
        assert_eq!(fields.tokens.reset, None, "past Duration");
    }
}
