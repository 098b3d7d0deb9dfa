//! The dialects, the input and output limits, the rounded resets and the
//! offset clock, over real HTTP (a loopback server, reqwest). Windows of a
//! minute, so that a loaded machine's slowness frees nothing mid-test.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use super::{Config, Dialect, Kind, QuotaServer};

/// 400 characters of prompt (100 input tokens) and `max_tokens: 100`.
fn prompt() -> String {
    format!(r#"{{"prompt":"{}","max_tokens":100}}"#, "x".repeat(400))
}

/// 20 requests and 3 000 tokens a minute, a rolling window (its resets are
/// a whole window after the last admission: exact), answers at once.
fn minute(dialect: Dialect) -> Config {
    Config::per(Duration::from_secs(60))
        .requests(20)
        .tokens(3_000)
        .kind(Kind::Rolling)
        .generation(Duration::ZERO, Duration::ZERO)
        .dialect(dialect)
}

/// One answer, and the machine's wall clock before the request left and
/// after its answer came.
struct Answer {
    status: u16,
    headers: HeaderMap,
    sent: SystemTime,
    received: SystemTime,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn has(&self, name: &str) -> &str {
        self.header(name)
            .unwrap_or_else(|| panic!("{name} in {:?}", self.headers))
    }

    /// An RFC 3339 header, as an instant.
    fn instant(&self, name: &str) -> SystemTime {
        humantime::parse_rfc3339(self.has(name)).expect("an RFC 3339 instant")
    }

    /// The `Date` header, as an instant.
    fn date(&self) -> SystemTime {
        httpdate::parse_http_date(self.has("date")).expect("an HTTP-date")
    }

    fn number(&self, name: &str) -> u64 {
        self.has(name).parse().expect("an integer")
    }

    /// The rate-limit headers' names, whatever the dialect.
    fn rate_limit_names(&self) -> Vec<&str> {
        self.headers
            .keys()
            .map(|k| k.as_str())
            .filter(|n| n.contains("ratelimit"))
            .collect()
    }
}

async fn post(client: &reqwest::Client, server: &QuotaServer, body: String) -> Answer {
    let sent = SystemTime::now();
    let response = client
        .post(server.url("/v1/complete"))
        .body(body)
        .send()
        .await
        .expect("the server answers");
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        sent,
        received: SystemTime::now(),
    }
}

/// `n` prompts one after the other; their answers.
async fn sequence(server: &QuotaServer, n: usize) -> Vec<Answer> {
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    for _ in 0..n {
        answers.push(post(&client, server, prompt()).await);
    }
    answers
}

/// Asserts `at` lies in `[from, to]`, with `slack` either side.
fn within(at: SystemTime, from: SystemTime, to: SystemTime, slack: Duration, what: &str) {
    assert!(
        at + slack >= from && at <= to + slack,
        "{what}: {} not in [{}, {}]",
        humantime::format_rfc3339_millis(at),
        humantime::format_rfc3339_millis(from),
        humantime::format_rfc3339_millis(to),
    );
}

const MINUTE: Duration = Duration::from_secs(60);
const MS: Duration = Duration::from_millis(1);
/// `Date` is whole seconds, truncated.
const SECOND: Duration = Duration::from_secs(1);

#[tokio::test]
async fn anthropic_reports_each_limit_with_its_reset_instant() {
    let config = minute(Dialect::Anthropic)
        .input_tokens(1_000)
        .output_tokens(2_500);
    let server = QuotaServer::start(config).await;
    let answers = sequence(&server, 11).await;
    let first = &answers[0];
    assert_eq!(first.status, 200);
    let names = [
        ("requests", 20, 19),
        ("tokens", 3_000, 2_800),
        ("input-tokens", 1_000, 900),
        ("output-tokens", 2_500, 2_400),
    ];
    for (name, limit, remaining) in names {
        let header = |part: &str| format!("anthropic-ratelimit-{name}-{part}");
        assert_eq!(first.number(&header("limit")), limit, "{name}");
        assert_eq!(first.number(&header("remaining")), remaining, "{name}");
        // Whole a minute after the admission (the millisecond rounded up).
        let reset = first.instant(&header("reset"));
        let (from, to) = (first.sent + MINUTE, first.received + MINUTE + MS);
        within(reset, from, to, Duration::ZERO, &header("reset"));
    }
    within(first.date(), first.sent, first.received, SECOND, "date");
    assert!(first.header("retry-after").is_none());
    assert_eq!(first.rate_limit_names().len(), 12, "no other header");

    // 100 input tokens each: the tenth spends the input limit, the
    // eleventh is refused by it alone.
    assert!(answers[..10].iter().all(|a| a.status == 200));
    let refused = &answers[10];
    assert_eq!(refused.status, 429);
    assert_eq!(
        refused.number("anthropic-ratelimit-input-tokens-remaining"),
        0
    );
    assert_eq!(refused.number("anthropic-ratelimit-requests-remaining"), 10);
    assert_eq!(
        refused.number("anthropic-ratelimit-tokens-remaining"),
        1_000
    );
    let hint = refused.number("retry-after");
    assert!((59..=60).contains(&hint), "{hint}: when the first leaves");
    // The input is whole when the tenth leaves the window.
    let reset = refused.instant("anthropic-ratelimit-input-tokens-reset");
    let tenth = &answers[9];
    within(
        reset,
        tenth.sent + MINUTE,
        tenth.received + MINUTE + MS,
        Duration::ZERO,
        "input",
    );
    within(
        refused.date(),
        refused.sent,
        refused.received,
        SECOND,
        "date on a 429",
    );
    let counts = server.counts();
    assert_eq!(
        (
            counts.limited,
            counts.limited_by_input_tokens,
            counts.limited_by_output_tokens,
            counts.limited_by_tokens,
            counts.limited_by_requests
        ),
        (1, 1, 0, 0, 0),
        "{counts:?}"
    );
}

#[tokio::test]
async fn the_output_limit_refuses_on_its_own() {
    for kind in Kind::ALL {
        let config = minute(Dialect::Anthropic).kind(kind).output_tokens(250);
        let server = QuotaServer::start(config).await;
        let answers = sequence(&server, 3).await;
        let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
        assert_eq!(statuses, [200, 200, 429], "{kind:?}: 100 output each");
        let refused = &answers[2];
        assert_eq!(
            refused.number("anthropic-ratelimit-output-tokens-remaining"),
            50
        );
        assert!(
            refused
                .header("anthropic-ratelimit-input-tokens-limit")
                .is_none()
        );
        let counts = server.counts();
        assert_eq!(
            (
                counts.limited_by_output_tokens,
                counts.limited_by_input_tokens
            ),
            (1, 0),
            "{kind:?}: {counts:?}"
        );
        assert_eq!(server.admissions().len(), 2);
    }
}

#[tokio::test]
async fn a_request_over_a_limit_of_its_own_is_a_400() {
    let server = QuotaServer::start(minute(Dialect::Anthropic).input_tokens(50)).await;
    let answer = sequence(&server, 1).await.remove(0);
    assert_eq!(answer.status, 400, "100 input tokens, 50 allowed");
    assert_eq!(server.counts().limited, 0);
}

#[tokio::test]
async fn ietf_reports_policies_and_state_as_structured_fields() {
    let config = minute(Dialect::Ietf).output_tokens(2_500);
    let server = QuotaServer::start(config).await;
    let answers = sequence(&server, 16).await;
    let first = &answers[0];
    assert_eq!(first.status, 200);
    assert_eq!(
        first.has("ratelimit-policy"),
        r#""requests";q=20;w=60, "tokens";q=3000;w=60, "output-tokens";q=2500;w=60"#
    );
    // A rolling window: whole a minute after the admission, rounded up to
    // the second.
    assert_eq!(
        first.has("ratelimit"),
        r#""requests";r=19;t=60, "tokens";r=2800;t=60, "output-tokens";r=2400;t=60"#
    );
    within(first.date(), first.sent, first.received, SECOND, "date");
    assert_eq!(first.rate_limit_names(), ["ratelimit-policy", "ratelimit"]);

    // 200 tokens each: 15 fit in 3 000.
    assert!(answers[..15].iter().all(|a| a.status == 200));
    let refused = &answers[15];
    assert_eq!(refused.status, 429);
    let state = refused.has("ratelimit");
    assert!(state.contains(r#""tokens";r=0;t="#), "{state}");
    assert!(state.starts_with(r#""requests";r=5;t="#), "{state}");
    let hint = refused.number("retry-after");
    assert!((59..=60).contains(&hint), "{hint}");
    assert_eq!(server.counts().limited_by_tokens, 1);
}

#[tokio::test]
async fn openai_is_still_the_default_without_a_date() {
    let server = QuotaServer::start(minute(Dialect::OpenAi)).await;
    let answer = sequence(&server, 1).await.remove(0);
    assert_eq!(Config::per(MINUTE).dialect, Dialect::OpenAi);
    assert_eq!(answer.has("x-ratelimit-remaining-tokens"), "2800");
    assert_eq!(answer.has("x-ratelimit-reset-tokens"), "1m0s");
    assert_eq!(answer.rate_limit_names().len(), 6);
    assert!(answer.header("date").is_none());
}

#[tokio::test]
async fn without_headers_a_429_carries_retry_after_alone() {
    for config in [
        minute(Dialect::None),
        minute(Dialect::Anthropic).without_headers(),
    ] {
        assert_eq!(config.dialect, Dialect::None);
        let server = QuotaServer::start(config.requests(1)).await;
        let answers = sequence(&server, 2).await;
        assert_eq!((answers[0].status, answers[1].status), (200, 429));
        for answer in &answers {
            assert!(answer.rate_limit_names().is_empty());
            assert!(answer.header("date").is_none());
        }
        assert_eq!(answers[0].headers.get("retry-after"), None);
        assert_eq!(answers[1].number("retry-after"), 60);
    }
}

/// 20 requests and 3 000 tokens per 2 s, refilled: one prompt leaves the
/// requests whole after 100 ms and the tokens after 133.334 ms.
fn refill(dialect: Dialect) -> Config {
    Config::per(Duration::from_secs(2))
        .requests(20)
        .tokens(3_000)
        .generation(Duration::ZERO, Duration::ZERO)
        .dialect(dialect)
}

#[tokio::test]
async fn resets_rounded_up_to_the_second() {
    // OpenAI's durations.
    let exact = sequence(&QuotaServer::start(refill(Dialect::OpenAi)).await, 1).await;
    assert_eq!(exact[0].has("x-ratelimit-reset-requests"), "100ms");
    assert_eq!(exact[0].has("x-ratelimit-reset-tokens"), "134ms");
    let config = refill(Dialect::OpenAi).reset_rounding(SECOND);
    let rounded = sequence(&QuotaServer::start(config).await, 1).await;
    assert_eq!(rounded[0].has("x-ratelimit-reset-requests"), "1s");
    assert_eq!(rounded[0].has("x-ratelimit-reset-tokens"), "1s");

    // The IETF's seconds, to a multiple of 5.
    let config = refill(Dialect::Ietf).reset_rounding(5 * SECOND);
    let rounded = sequence(&QuotaServer::start(config).await, 1).await;
    assert_eq!(
        rounded[0].has("ratelimit"),
        r#""requests";r=19;t=5, "tokens";r=2800;t=5"#
    );

    // Anthropic's instants: a whole second, the first after the reset.
    let config = refill(Dialect::Anthropic).reset_rounding(SECOND);
    let answer = sequence(&QuotaServer::start(config).await, 1)
        .await
        .remove(0);
    let text = answer.has("anthropic-ratelimit-tokens-reset");
    assert!(!text.contains('.'), "{text}: whole seconds");
    let reset = answer.instant("anthropic-ratelimit-tokens-reset");
    let due = answer.sent + Duration::from_micros(133_334);
    within(
        reset,
        due,
        answer.received + 134 * MS + SECOND,
        Duration::ZERO,
        "rounded",
    );
    assert!(reset >= due, "never before the reset");
}

#[tokio::test]
async fn an_offset_clock_shifts_the_instants_and_the_date() {
    for offset in [3_600_000_i64, -90_000] {
        let shift = |t: SystemTime| super::shift(t, offset);
        let config = minute(Dialect::Anthropic).clock_offset(offset);
        let server = QuotaServer::start(config).await;
        let answer = sequence(&server, 1).await.remove(0);
        let (from, to) = (shift(answer.sent), shift(answer.received));
        within(answer.date(), from, to, SECOND, "date");
        let reset = answer.instant("anthropic-ratelimit-requests-reset");
        within(
            reset,
            from + MINUTE,
            to + MINUTE + MS,
            Duration::ZERO,
            "reset",
        );

        // A dialect of durations: a `Date` off by as much, the durations
        // the same.
        let config = minute(Dialect::OpenAi).clock_offset(offset);
        let server = QuotaServer::start(config).await;
        let answer = sequence(&server, 1).await.remove(0);
        within(
            answer.date(),
            shift(answer.sent),
            shift(answer.received),
            SECOND,
            "date",
        );
        assert_eq!(answer.has("x-ratelimit-reset-requests"), "1m0s");
    }
}

#[tokio::test]
async fn slow_answers_in_every_dialect() {
    let generation = Duration::from_millis(300);
    for dialect in Dialect::ALL {
        let config = minute(dialect).generation(generation, generation);
        let server = QuotaServer::start(config).await;
        let answer = sequence(&server, 1).await.remove(0);
        assert_eq!(answer.status, 200, "{dialect:?}");
        let took = answer
            .received
            .duration_since(answer.sent)
            .unwrap_or_default();
        assert!(took >= generation, "{dialect:?}: {took:?}");
        let names = answer.rate_limit_names().len();
        let expected = match dialect {
            Dialect::OpenAi => 6,
            Dialect::Anthropic => 6,
            Dialect::Ietf => 2,
            _ => 0,
        };
        assert_eq!(names, expected, "{dialect:?}");
        if dialect == Dialect::Anthropic {
            // Decided before the generation: the instant is a minute after
            // the admission, not after the answer; the `Date` is the answer's.
            let reset = answer.instant("anthropic-ratelimit-requests-reset");
            let (from, to) = (
                answer.sent + MINUTE,
                answer.received - generation + MINUTE + MS,
            );
            within(reset, from, to, Duration::ZERO, "decided");
            within(
                answer.date(),
                answer.sent + generation,
                answer.received,
                SECOND,
                "date",
            );
        }
    }
}
