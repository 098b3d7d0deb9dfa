//! Metrics an operator can chart: a fan-out of 20 completions through one
//! shared `Upstream`, against a model whose limit is 8 requests a second,
//! with the OpenTelemetry SDK exporting what nika-retry recorded to stdout.
//!
//! ```text
//! cargo run --example metrics
//! ```
//!
//! - **Feature `opentelemetry`** records through the OpenTelemetry API's
//!   global meter provider: set it before the first call (or give one to
//!   `nika_retry::metrics::use_meter_provider`), and every annotated fn,
//!   `tower` layer and `reqwest_middleware` client records its calls.
//! - **What it prints**: per fn, `nika_retry.call.duration`,
//!   `nika_retry.call.attempts` and `nika_retry.retry.delay` (how long the
//!   calls had no attempt in flight); per upstream,
//!   `nika_retry.upstream.wait.duration` by why they waited (its cold
//!   start, its hold, its pace) and `nika_retry.upstream.pushbacks` by
//!   reason (the 429 its first request meets).
//!
//! Self-contained: it compiles from the published crates and its own code.
//! Its loopback model server (`serve`, at the bottom: not part of what you
//! copy) counts requests in a rolling second, sends OpenAI's rate-limit
//! headers on every answer and a 429 with `Retry-After` over the limit (and
//! on the first request, as if another client had spent the second). In
//! a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest", "opentelemetry"] }
//! opentelemetry = { version = "0.33", default-features = false, features = ["metrics"] }
//! opentelemetry_sdk = { version = "0.33", default-features = false, features = ["metrics"] }
//! opentelemetry-stdout = { version = "0.33", default-features = false, features = ["metrics"] }
//! reqwest = "0.13"
//! futures-util = "0.3"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util", "time"] }
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, ErrorCategory, TimeoutError, retry};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

const CALLS: usize = 20;

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
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

pub struct Provider {
    http: reqwest::Client,
    url: String,
    upstream: Upstream,
}

impl Provider {
    /// One completion, through the model's upstream; 5 attempts, so that
    /// a 429 the upstream could not foresee loses nothing.
    #[retry(layer = "provider", attempts = 5, upstream = self.upstream)]
    pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
        let response = self
            .http
            .post(&self.url)
            .body(prompt.to_owned())
            .send()
            .await?;
        self.upstream.observe(response.headers());
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The SDK, exporting to stdout when flushed; the global provider, set
    // before the first call records.
    let exporter = opentelemetry_stdout::MetricExporter::default();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter).build())
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());

    let (url, seen) = serve(8, Duration::from_secs(1)).await?;
    let provider = Provider {
        http: reqwest::Client::new(),
        url,
        upstream: Upstream::new("openai/gpt-4o-mini"),
    };
    let started = Instant::now();
    let prompts: Vec<String> = (0..CALLS)
        .map(|i| format!("Summarize chapter {i}."))
        .collect();
    let calls = prompts.iter().map(|prompt| provider.complete(prompt));
    let results = futures_util::future::join_all(calls).await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    println!(
        "{CALLS} completions in {:.1} s ({failed} failed): {} requests, {} answered 429\n",
        started.elapsed().as_secs_f64(),
        seen.requests.load(Ordering::SeqCst),
        seen.limited.load(Ordering::SeqCst),
    );
    // What nika-retry recorded, as the stdout exporter prints it (once,
    // as the provider shuts down).
    meters.shutdown()?;
    Ok(())
}

// ---- The loopback model server (not part of what you copy): at most
// `limit` requests in any `window`, 20 ms per answer, OpenAI's
// `x-ratelimit-*` request headers on every answer, 429 with `Retry-After`
// over the limit and to the first request.

/// What the server saw.
#[derive(Default)]
pub struct Seen {
    pub requests: AtomicUsize,
    pub limited: AtomicUsize,
}

pub async fn serve(limit: usize, window: Duration) -> std::io::Result<(String, Arc<Seen>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/completions", listener.local_addr()?);
    let seen = Arc::new(Seen::default());
    let log = Arc::new(Mutex::new(VecDeque::new()));
    let counts = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (log, seen) = (log.clone(), counts.clone());
            tokio::spawn(async move { connection(socket, limit, window, &log, &seen).await });
        }
    });
    Ok((url, seen))
}

async fn connection(
    mut socket: TcpStream,
    limit: usize,
    window: Duration,
    log: &Mutex<VecDeque<Instant>>,
    seen: &Seen,
) {
    let mut buf = Vec::new();
    while read_request(&mut socket, &mut buf).await {
        let first = seen.requests.fetch_add(1, Ordering::SeqCst) == 0;
        let (admitted, headers) = {
            let mut log = log.lock().unwrap();
            let now = Instant::now();
            log.retain(|&at| at + window > now);
            let admitted = log.len() < limit && !first;
            if admitted {
                log.push_back(now);
            }
            // Whole again when the newest leaves; room when the oldest does.
            let whole = log.back().map_or(Duration::ZERO, |&at| at + window - now);
            let room = log.front().map_or(window, |&at| at + window - now);
            let mut headers = format!(
                "x-ratelimit-limit-requests: {limit}\r\nx-ratelimit-remaining-requests: {}\r\n\
                 x-ratelimit-reset-requests: {}ms\r\n",
                limit - log.len(),
                whole.as_millis(),
            );
            if !admitted {
                let seconds = room.as_millis().div_ceil(1000).max(1);
                headers.push_str(&format!("retry-after: {seconds}\r\n"));
            }
            (admitted, headers)
        };
        let response = if admitted {
            tokio::time::sleep(Duration::from_millis(20)).await;
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

/// Reads one request (its head, then `content-length` bytes of body).
async fn read_request(socket: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                buf.drain(..end + 4 + length);
                return true;
            }
        }
        let mut chunk = [0u8; 4096];
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
