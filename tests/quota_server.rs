//! The quota server itself (`src/fault/quota.rs`), over real HTTP: each
//! kind admits exactly its limit in a window, every answer carries OpenAI's
//! six headers with the right values (or none, without headers), a refused
//! request gets a 429 with `Retry-After`, and the server counts what it saw.
//! Windows of a minute, so that a loaded machine's slowness refills nothing.

use std::time::Duration;

use nika_retry_tests::fault::quota::{Config, Kind, QuotaServer, tokens_of};
use tokio::time::Instant;

/// 200 tokens: 400 characters of prompt and 100 of `max_tokens`.
fn prompt() -> String {
    let prompt = "x".repeat(400);
    format!(r#"{{"prompt":"{prompt}","max_tokens":100}}"#)
}

/// 20 requests and 3 000 tokens a minute: 15 prompts of 200 tokens.
fn minute(kind: Kind) -> Config {
    Config::per(Duration::from_secs(60))
        .requests(20)
        .tokens(3_000)
        .kind(kind)
        .generation(Duration::from_millis(20), Duration::from_millis(40))
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn post(client: &reqwest::Client, server: &QuotaServer, body: String) -> Answer {
    let response = client
        .post(server.url("/v1/complete"))
        .body(body)
        .send()
        .await
        .expect("the server answers");
    Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
    }
}

/// `n` prompts at once; their answers.
async fn burst(server: &QuotaServer, n: usize) -> Vec<Answer> {
    let client = reqwest::Client::new();
    let calls = (0..n).map(|_| post(&client, server, prompt()));
    futures_util::future::join_all(calls).await
}

/// A Go-style duration as the server writes it (`59.998s`, `1m0s`, `120ms`).
fn go(text: &str) -> Duration {
    if let Some(ms) = text.strip_suffix("ms") {
        return Duration::from_millis(ms.parse().expect("ms"));
    }
    let (minutes, seconds) = match text.split_once('m') {
        Some((m, s)) => (m.parse::<u64>().expect("minutes"), s),
        None => (0, text),
    };
    let seconds: f64 = seconds.trim_end_matches('s').parse().expect("seconds");
    Duration::from_secs(minutes * 60) + Duration::from_secs_f64(seconds)
}

#[tokio::test]
async fn each_kind_admits_exactly_its_limit_in_a_window() {
    for kind in Kind::ALL {
        let server = QuotaServer::start(minute(kind)).await;
        let answers = burst(&server, 30).await;
        let ok = answers.iter().filter(|a| a.status == 200).count();
        assert_eq!(ok, 15, "{kind:?}: 3 000 tokens of 200 each");
        let counts = server.counts();
        assert_eq!(
            (counts.requests, counts.admitted, counts.limited),
            (30, 15, 15),
            "{kind:?}"
        );
        assert_eq!(counts.limited_by_tokens, 15, "{kind:?}: tokens bind");
        assert_eq!(counts.limited_by_requests, 0, "{kind:?}");
        assert_eq!(server.peak(), (15, 3_000), "{kind:?}");
        assert_eq!(server.per_window(), vec![(15, 3_000)], "{kind:?}");
        assert!(counts.max_concurrent >= 2, "{kind:?}: answered at once");
    }
}

#[tokio::test]
async fn the_request_limit_binds_when_prompts_are_small() {
    for kind in Kind::ALL {
        let server = QuotaServer::start(minute(kind)).await;
        let client = reqwest::Client::new();
        let calls = (0..25).map(|_| post(&client, &server, "short".to_owned()));
        let answers = futures_util::future::join_all(calls).await;
        let ok = answers.iter().filter(|a| a.status == 200).count();
        assert_eq!(ok, 20, "{kind:?}");
        assert_eq!(server.counts().limited_by_requests, 5, "{kind:?}");
    }
}

#[tokio::test]
async fn every_answer_carries_openais_six_headers() {
    for kind in Kind::ALL {
        let server = QuotaServer::start(minute(kind)).await;
        let client = reqwest::Client::new();
        let first = post(&client, &server, prompt()).await;
        assert_eq!(first.status, 200);
        assert_eq!(first.header("x-ratelimit-limit-requests"), Some("20"));
        assert_eq!(first.header("x-ratelimit-limit-tokens"), Some("3000"));
        assert_eq!(first.header("x-ratelimit-remaining-requests"), Some("19"));
        assert_eq!(first.header("x-ratelimit-remaining-tokens"), Some("2800"));
        let reset = go(first.header("x-ratelimit-reset-tokens").expect("a reset"));
        let bound = match kind {
            // 200 tokens at 50 a second; 1 request at one every 3 s.
            Kind::Refill => Duration::from_secs(4),
            Kind::Rolling | Kind::Fixed => Duration::from_secs(60),
        };
        let close = |reset: Duration, bound: Duration| {
            reset <= bound && reset + Duration::from_secs(1) > bound
        };
        assert!(close(reset, bound), "{kind:?}: {reset:?}");
        let reset = go(first.header("x-ratelimit-reset-requests").expect("a reset"));
        let bound = if kind == Kind::Refill {
            Duration::from_secs(3)
        } else {
            bound
        };
        assert!(close(reset, bound), "{kind:?}: {reset:?}");
        assert!(first.header("retry-after").is_none(), "a 200 has no hint");

        let answers = burst(&server, 20).await;
        let refused = answers.iter().find(|a| a.status == 429).expect("a 429");
        // Less than a prompt (a refilled bucket got a few back meanwhile).
        let left: u32 = refused
            .header("x-ratelimit-remaining-tokens")
            .and_then(|v| v.parse().ok())
            .expect("what is left");
        assert!(left < 200, "{kind:?}: {left}");
        assert_eq!(refused.header("x-ratelimit-limit-tokens"), Some("3000"));
        let hint: u64 = refused
            .header("retry-after")
            .expect("a 429 says when")
            .parse()
            .expect("whole seconds");
        assert!((1..=60).contains(&hint), "{kind:?}: {hint}");
        // What nika-retry reads of it: OpenAI's dialect.
        let limits = nika_retry::http::rate_limits(&refused.headers, std::time::SystemTime::now());
        assert!(limits.is_some(), "{kind:?}");
    }
}

#[tokio::test]
async fn without_headers_a_429_says_only_retry_after() {
    let server = QuotaServer::start(minute(Kind::Rolling).without_headers()).await;
    let answers = burst(&server, 20).await;
    assert_eq!(answers.iter().filter(|a| a.status == 200).count(), 15);
    for answer in &answers {
        let named: Vec<&str> = answer.headers.keys().map(|k| k.as_str()).collect();
        assert!(
            !named.iter().any(|n| n.starts_with("x-ratelimit")),
            "{named:?}"
        );
        assert_eq!(answer.header("retry-after").is_some(), answer.status == 429);
    }
}

#[tokio::test]
async fn a_freed_window_admits_again_after_its_retry_after() {
    let config = Config::per(Duration::from_secs(1))
        .requests(2)
        .kind(Kind::Rolling)
        .generation(Duration::ZERO, Duration::ZERO);
    let server = QuotaServer::start(config).await;
    let client = reqwest::Client::new();
    let statuses = [
        post(&client, &server, "a".into()).await.status,
        post(&client, &server, "b".into()).await.status,
    ];
    assert_eq!(statuses, [200, 200]);
    let refused = post(&client, &server, "c".into()).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), Some("1"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(post(&client, &server, "d".into()).await.status, 200);
    let (first, last) = (server.admissions()[0].at, server.admissions()[2].at);
    assert!(last - first >= Duration::from_secs(1));
}

#[tokio::test]
async fn an_admitted_request_takes_its_generation_time() {
    let config =
        minute(Kind::Fixed).generation(Duration::from_millis(150), Duration::from_millis(150));
    let server = QuotaServer::start(config).await;
    let started = Instant::now();
    let answer = post(&reqwest::Client::new(), &server, prompt()).await;
    assert_eq!(answer.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(150));
}

#[tokio::test]
async fn a_prompt_over_the_whole_limit_is_a_400() {
    let server = QuotaServer::start(minute(Kind::Refill).tokens(100)).await;
    let answer = post(&reqwest::Client::new(), &server, prompt()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(server.counts().admitted, 0);
    assert_eq!(tokens_of(&prompt()), 200);
}
