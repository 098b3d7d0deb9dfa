//! A fan-out: 50 summaries started at once on one model, each a workflow
//! task in its own `task::scope`, all through one shared `Upstream`, every
//! retry decision kept in an `EventLog`. The model's limits are 20 requests
//! and 3 000 tokens per 2 s, and every answer carries OpenAI's rate-limit
//! headers, which the provider hands to the upstream.
//!
//! ```text
//! cargo run --example fanout
//! ```
//!
//! - **One upstream per key and model**, made once and named by every call
//!   (`upstream = self.upstream`): a 429 to one call holds them all, and
//!   `observe` reads every answer's `x-ratelimit-*` headers (a success's
//!   too): it learns the limits from them and paces the calls, by requests
//!   and by tokens (`cost = …`: what one call spends), so that they do not
//!   burst into the limit. Until the first answer is back it lets one call
//!   go alone (its cold start).
//! - **A 429 spends an attempt.** A window the upstream could not foresee
//!   can still answer one; each task allows 5 attempts rather than the
//!   provider layer's 3, so that no summary is lost to it.
//! - **The log** is one `EventLog` observing the whole fan-out: one event per
//!   retry decision, each with the call's wait at its upstream.
//!
//! Self-contained: it compiles from the published crates and its own code.
//! Its loopback model server (`serve`, at the bottom: not part of what you
//! copy) counts requests and tokens in a rolling window and answers 429
//! with `Retry-After` over them. In a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest"] }
//! reqwest = "0.13"
//! serde_json = "1"
//! futures-util = "0.3"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util", "time"] }
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nika_retry::events::{EventLog, Outcome, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, ErrorCategory, Layer, RetryConfig, TimeoutError, retry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

const CALLS: usize = 50;

// ---- The provider: one upstream for its model, every answer observed.

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// A non-success answer: a 429 is `RateLimited`, with its `Retry-After`.
    #[error("api error {status}")]
    #[category(from = category, retry_after = retry_after)]
    Api {
        status: u16,
        category: ErrorCategory,
        retry_after: Option<Duration>,
    },
    /// The upstream is held longer than this call waits.
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
    /// The task's `timeout:`, if it has one.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// The most tokens an answer may take.
const MAX_TOKENS: u32 = 100;

/// What a completion of `prompt` spends of the token limit, as this
/// model counts it: a token per 4 characters, and the answer's `max_tokens`
/// (a real provider's tokenizer counts differently; an estimate that is a
/// little high only paces a little early).
fn tokens_of(prompt: &str) -> u32 {
    let chars = u32::try_from(prompt.chars().count()).unwrap_or(u32::MAX);
    chars.div_ceil(4).saturating_add(MAX_TOKENS)
}

pub struct Provider {
    http: reqwest::Client,
    url: String,
    upstream: Upstream,
}

impl Provider {
    pub fn new(url: String, model: &str) -> Provider {
        Provider {
            http: reqwest::Client::new(),
            url,
            upstream: Upstream::new(format!("openai/{model}")),
        }
    }

    /// One completion; `cost` is what it spends of the token limit (its
    /// prompt's tokens plus its `max_tokens`), so the upstream paces by
    /// tokens from the first call it knows the limit for.
    #[retry(layer = "provider", upstream = self.upstream, cost = tokens_of(prompt))]
    pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
        let body = serde_json::json!({ "prompt": prompt, "max_tokens": MAX_TOKENS }).to_string();
        let request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json");
        let response = request.body(body).send().await?;
        self.upstream.observe(response.headers()); // every answer, successes too
        let status = response.status().as_u16();
        if status >= 400 {
            let (category, retry_after) = nika_retry::http::classify_response(&response);
            return Err(ProviderError::Api {
                status,
                category,
                retry_after,
            });
        }
        Ok(response.text().await?)
    }
}

// ---- The fan-out: a task scope per summary, one log for all of them.

/// What a fan-out did: its results, its retry decisions, how long it took.
pub struct FanOut {
    pub results: Vec<Result<String, ProviderError>>,
    pub log: EventLog,
    pub makespan: Duration,
}

pub async fn fan_out(provider: &Provider, prompts: &[String]) -> FanOut {
    // A 429 spends an attempt: allow a few more than the default 3.
    let retry = RetryConfig::for_layer(Layer::Provider)
        .with_max_attempts(5)
        .expect("5 attempts are valid");
    let policy = TaskPolicy::new().with_retry(retry);
    let log = EventLog::new();
    let started = Instant::now();
    let tasks = prompts
        .iter()
        .map(|prompt| scope(policy.clone(), provider.complete(prompt)));
    let all = futures_util::future::join_all(tasks);
    let results = observe(Arc::new(log.clone()), all).await;
    FanOut {
        results,
        log,
        makespan: started.elapsed(),
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let (url, seen) = serve(Limits {
        window: Duration::from_secs(2),
        requests: 20,
        tokens: 3_000,
    })
    .await?;
    let provider = Provider::new(url, "gpt-4o-mini");
    // 400 characters and `max_tokens: 100`: 200 tokens, 15 per window.
    let prompts: Vec<String> = (0..CALLS)
        .map(|i| format!("{:<400}", format!("Summarize chapter {i}.")))
        .collect();
    let done = fan_out(&provider, &prompts).await;
    let failed = done.results.iter().filter(|r| r.is_err()).count();
    let retries = done
        .log
        .events()
        .iter()
        .filter(|e| e.outcome == Outcome::Retrying)
        .count();
    println!(
        "{CALLS} summaries in {:.1} s ({failed} failed): {} requests, {} answered 429, {retries} retries",
        done.makespan.as_secs_f64(),
        seen.requests.load(Ordering::SeqCst),
        seen.limited.load(Ordering::SeqCst),
    );
    println!(
        "(the limits allow about 6.1 s: 15 summaries per 2 s window, the last 5 in the fourth)"
    );
    Ok(())
}

// ---- The loopback model server (not part of what you copy): at most
// `requests` requests and `tokens` tokens in any `window` (a prompt costs
// its characters / 4 plus its `max_tokens`), 50–150 ms per answer, OpenAI's
// `x-ratelimit-*` headers on every answer, 429 with `Retry-After` over.

pub struct Limits {
    pub window: Duration,
    pub requests: usize,
    pub tokens: u64,
}

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    pub requests: AtomicUsize,
    pub limited: AtomicUsize,
}

/// What was admitted in the last window: when, and its tokens.
type Window = Mutex<VecDeque<(Instant, u64)>>;

pub async fn serve(limits: Limits) -> std::io::Result<(String, Arc<Seen>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/completions", listener.local_addr()?);
    let (limits, seen) = (Arc::new(limits), Arc::new(Seen::default()));
    let window = Arc::new(Window::default());
    let counts = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (limits, window, seen) = (limits.clone(), window.clone(), counts.clone());
            tokio::spawn(async move { connection(socket, &limits, &window, &seen).await });
        }
    });
    Ok((url, seen))
}

async fn connection(mut socket: TcpStream, limits: &Limits, window: &Window, seen: &Seen) {
    let mut buf = Vec::new();
    while let Some(body) = read_request(&mut socket, &mut buf).await {
        let n = seen.requests.fetch_add(1, Ordering::SeqCst);
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let prompt = json["prompt"].as_str().unwrap_or_default().chars().count() as u64;
        let tokens = prompt.div_ceil(4) + json["max_tokens"].as_u64().unwrap_or(0);
        let (admitted, headers) = admit(limits, window, tokens);
        let response = if admitted {
            tokio::time::sleep(Duration::from_millis(50 + (n as u64 * 37) % 101)).await;
            format!("HTTP/1.1 200 OK\r\n{headers}content-length: 4\r\n\r\ndone")
        } else {
            seen.limited.fetch_add(1, Ordering::SeqCst);
            format!("HTTP/1.1 429 Too Many Requests\r\n{headers}content-length: 0\r\n\r\n")
        };
        if socket.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Admits a request of `tokens` now if the window has room for it; the
/// answer's rate-limit headers (and a 429's `Retry-After`).
fn admit(limits: &Limits, window: &Window, tokens: u64) -> (bool, String) {
    let mut log = window.lock().unwrap();
    let now = Instant::now();
    log.retain(|&(at, _)| at + limits.window > now);
    let used: u64 = log.iter().map(|&(_, t)| t).sum();
    let admitted = log.len() < limits.requests && used + tokens <= limits.tokens;
    if admitted {
        log.push_back((now, tokens));
    }
    let used: u64 = log.iter().map(|&(_, t)| t).sum();
    // Whole again when the newest leaves; room for one more when the oldest does.
    let whole = log
        .back()
        .map_or(Duration::ZERO, |&(at, _)| at + limits.window - now);
    let room = log
        .front()
        .map_or(Duration::ZERO, |&(at, _)| at + limits.window - now);
    let mut headers = format!(
        "x-ratelimit-limit-requests: {}\r\nx-ratelimit-limit-tokens: {}\r\n\
         x-ratelimit-remaining-requests: {}\r\nx-ratelimit-remaining-tokens: {}\r\n\
         x-ratelimit-reset-requests: {ms}ms\r\nx-ratelimit-reset-tokens: {ms}ms\r\n",
        limits.requests,
        limits.tokens,
        limits.requests - log.len(),
        limits.tokens - used,
        ms = whole.as_millis(),
    );
    if !admitted {
        let seconds = room.as_millis().div_ceil(1000).max(1);
        headers.push_str(&format!("retry-after: {seconds}\r\n"));
    }
    (admitted, headers)
}

/// Reads one request (its head, then `content-length` bytes of body).
async fn read_request(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                let body = buf[end + 4..end + 4 + length].to_vec();
                buf.drain(..end + 4 + length);
                return Some(body);
            }
        }
        let mut chunk = [0u8; 4096];
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The fan-out against the loopback server (`cargo test --example fanout`):
/// every summary done, and every 429 the server answered is one retry
/// decision in the log, each waited out.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_task_of_the_fan_out_completes_and_each_429_is_one_logged_retry() {
        let limits = Limits {
            window: Duration::from_secs(1),
            requests: 5,
            tokens: 1_000,
        };
        let (url, seen) = serve(limits).await.expect("a server");
        let provider = Provider::new(url, "test");
        let prompts: Vec<String> = (0..12).map(|i| format!("{i:<400}")).collect();
        let done = fan_out(&provider, &prompts).await;
        for result in &done.results {
            assert!(result.is_ok(), "{result:?}");
        }
        let limited = seen.limited.load(Ordering::SeqCst);
        assert_eq!(seen.requests.load(Ordering::SeqCst), 12 + limited);
        let events = done.log.events();
        let retried = events
            .iter()
            .filter(|e| {
                e.outcome == Outcome::Retrying && e.category == Some(ErrorCategory::RateLimited)
            })
            .count();
        assert_eq!(retried, limited, "one retry decision per 429");
        // 12 calls of 200 tokens cannot all go at once under 5 requests and
        // 1 000 tokens a second: each that did not meet a 429 waited at the
        // upstream (its cold start, then its pace), and says so.
        let waited = events.iter().filter(|e| e.wait_reason.is_some()).count();
        assert!(
            limited > 0 || waited > 0,
            "12 calls under a limit of 5 a second neither met a 429 nor waited"
        );
    }
}
