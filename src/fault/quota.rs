//! A loopback model server with a rate limit, as an LLM provider keeps one
//! per key and model: so many requests and so many tokens per window,
//! counted as one of three kinds of server counts them ([`Kind`]), OpenAI's
//! six `x-ratelimit-*` headers on every answer (or none: [`Config::without_headers`]),
//! a generation time per admitted request, and a `429` with `Retry-After`
//! for a request over the limit. For the fan-out tests, benchmark and demo.
//!
//! **Tokens** are counted from the request's body as OpenAI estimates them
//! before generating: a JSON body `{"prompt": "…", "max_tokens": N}` costs
//! `N` plus the prompt's characters divided by 4, rounded up
//! ([`tokens_of`]); any other body costs its characters divided by 4. A
//! request that costs more than the whole token limit is answered `400`.
//!
//! ```no_run
//! # async fn f() {
//! use std::time::Duration;
//! use nika_retry_tests::fault::quota::{Config, Kind, QuotaServer};
//!
//! let server = QuotaServer::start(
//!     Config::per(Duration::from_secs(2)).requests(20).tokens(3_000).kind(Kind::Rolling),
//! )
//! .await;
//! let _ = server.url("/v1/complete");
//! # }
//! ```

mod client;
mod meter;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use client::{CallError, post};
pub use meter::go_duration;
use meter::{Meter, REQUESTS, TOKENS, Verdict};

/// How a server counts what its window allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A bucket per dimension, as big as the limit, refilling continuously
    /// at the limit per window: OpenAI's documented behaviour (a limit of
    /// 60 a minute is one a second; a full bucket allows a burst of 60).
    Refill,
    /// At most the limit in any window ending now: what was admitted a
    /// window ago is freed.
    Rolling,
    /// At most the limit in each window counted from the server's start;
    /// everything is freed at each boundary.
    Fixed,
}

impl Kind {
    /// The three kinds.
    pub const ALL: [Kind; 3] = [Kind::Refill, Kind::Rolling, Kind::Fixed];

    /// A short name: `refill`, `rolling`, `fixed`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Refill => "refill",
            Kind::Rolling => "rolling",
            Kind::Fixed => "fixed",
        }
    }
}

/// What a [`QuotaServer`] allows and how it answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The window the limits are counted over.
    pub window: Duration,
    /// Requests per window.
    pub requests: u32,
    /// Tokens per window ([`tokens_of`]).
    pub tokens: u32,
    /// How the window is counted.
    pub kind: Kind,
    /// How long an admitted request takes to answer: drawn uniformly from
    /// this range (both ends included) for each request.
    pub generation: (Duration, Duration),
    /// Whether answers carry OpenAI's `x-ratelimit-*` headers; without
    /// them a 429 says only `Retry-After`.
    pub headers: bool,
    /// The seed of the generation times.
    pub seed: u64,
}

impl Config {
    /// Limits counted per `window`: 60 requests and 100 000 tokens until
    /// set, a continuously refilled bucket ([`Kind::Refill`]), 50–150 ms of
    /// generation, OpenAI's headers.
    pub fn per(window: Duration) -> Config {
        Config {
            window,
            requests: 60,
            tokens: 100_000,
            kind: Kind::Refill,
            generation: (Duration::from_millis(50), Duration::from_millis(150)),
            headers: true,
            seed: 1,
        }
    }

    /// At most `n` requests per window.
    pub fn requests(self, n: u32) -> Config {
        Config {
            requests: n,
            ..self
        }
    }

    /// At most `n` tokens per window.
    pub fn tokens(self, n: u32) -> Config {
        Config { tokens: n, ..self }
    }

    /// Counted as `kind` counts.
    pub fn kind(self, kind: Kind) -> Config {
        Config { kind, ..self }
    }

    /// Each admitted request answered after a time drawn from `min..=max`.
    pub fn generation(self, min: Duration, max: Duration) -> Config {
        Config {
            generation: (min, max.max(min)),
            ..self
        }
    }

    /// No rate-limit headers: a 429 carries `Retry-After` alone, as some
    /// providers and most proxies send it.
    pub fn without_headers(self) -> Config {
        Config {
            headers: false,
            ..self
        }
    }

    /// The generation times drawn from `seed`.
    pub fn seed(self, seed: u64) -> Config {
        Config { seed, ..self }
    }

    /// What the limits allow: the makespan of `calls` requests of `tokens`
    /// each, all ready at the server's start, each sent the moment the
    /// server would admit it, plus the mean generation time. The yardstick
    /// of a fan-out's makespan.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry_tests::fault::quota::{Config, Kind};
    ///
    /// let config = Config::per(Duration::from_secs(2)).requests(20).tokens(3_000);
    /// // 15 calls of 200 tokens at once, then 1 500 tokens a second.
    /// let refill = config.clone().allows(50, 200);
    /// assert_eq!(refill.as_millis(), 4_766);
    /// // 15 a window: the last 5 in the fourth.
    /// assert_eq!(config.kind(Kind::Rolling).allows(50, 200).as_millis(), 6_100);
    /// ```
    pub fn allows(&self, calls: u32, tokens: u64) -> Duration {
        let epoch = Instant::now();
        let mut meter = self.meter(epoch);
        let mut at = Duration::ZERO;
        for _ in 0..calls {
            loop {
                let verdict = meter.take(epoch + at, tokens);
                if verdict.admitted || verdict.retry_after.is_zero() {
                    break;
                }
                at += verdict.retry_after;
            }
        }
        let (min, max) = self.generation;
        at + (min + max) / 2
    }

    fn meter(&self, epoch: Instant) -> Meter {
        let limit = [u64::from(self.requests), u64::from(self.tokens)];
        Meter::new(self.kind, self.window, limit, epoch)
    }
}

/// What a token limit counts of a request body: a JSON body's `max_tokens`
/// plus its `prompt`'s characters divided by 4 (rounded up); any other
/// body, its characters divided by 4.
///
/// ```
/// use nika_retry_tests::fault::quota::tokens_of;
///
/// assert_eq!(tokens_of(r#"{"prompt": "abcdefgh", "max_tokens": 100}"#), 102);
/// assert_eq!(tokens_of("abcde"), 2);
/// ```
pub fn tokens_of(body: &str) -> u64 {
    let quarter = |text: &str| (text.chars().count() as u64).div_ceil(4);
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(json) if json["prompt"].is_string() => {
            quarter(json["prompt"].as_str().unwrap_or_default())
                + json["max_tokens"].as_u64().unwrap_or(0)
        }
        _ => quarter(body),
    }
}

/// What a server saw, for assertions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests that arrived.
    pub requests: usize,
    /// Requests answered `429`.
    pub limited: usize,
    /// Of those, the ones the token limit refused (a request may lack both).
    pub limited_by_tokens: usize,
    /// Of those, the ones the request limit refused.
    pub limited_by_requests: usize,
    /// Requests admitted and answered `200`.
    pub admitted: usize,
    /// The most requests the server was answering at one time.
    pub max_concurrent: usize,
}

/// One admitted request: when, and the tokens it spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    /// When the server admitted it (tokio's clock).
    pub at: Instant,
    /// Its tokens ([`tokens_of`]).
    pub tokens: u64,
}

/// One request the server metered: when, its body, and whether it was
/// admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When the server metered it (tokio's clock).
    pub at: Instant,
    /// Its body.
    pub body: String,
    /// Whether it was admitted (else answered `429`).
    pub admitted: bool,
}

/// A running quota server: stops when dropped.
pub struct QuotaServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

struct Shared {
    config: Config,
    started: Instant,
    state: Mutex<State>,
}

struct State {
    meter: Meter,
    counts: Counts,
    admissions: Vec<Admission>,
    refusals: Vec<Instant>,
    arrivals: Vec<Arrival>,
    concurrent: usize,
    /// splitmix64's state, for the generation times.
    random: u64,
}

impl QuotaServer {
    /// Starts a server of `config` on `127.0.0.1:0`; its windows count from now.
    pub async fn start(config: Config) -> QuotaServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let started = Instant::now();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                meter: config.meter(started),
                counts: Counts::default(),
                admissions: Vec::new(),
                refusals: Vec::new(),
                arrivals: Vec::new(),
                concurrent: 0,
                random: config.seed,
            }),
            config,
            started,
        });
        let serving = shared.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                connections.spawn(serve(stream, serving.clone()));
            }
        });
        QuotaServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What the server allows.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// When its windows started counting.
    pub fn started(&self) -> Instant {
        self.shared.started
    }

    /// What it saw so far.
    pub fn counts(&self) -> Counts {
        self.shared.lock().counts
    }

    /// The requests it admitted, in order.
    pub fn admissions(&self) -> Vec<Admission> {
        self.shared.lock().admissions.clone()
    }

    /// Every request it metered, in order.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared.lock().arrivals.clone()
    }

    /// When it answered each `429`, in order.
    pub fn refusals(&self) -> Vec<Instant> {
        self.shared.lock().refusals.clone()
    }

    /// The `429`s it answered more than `after` after the first: a burst
    /// sent at once meets its own within a few milliseconds, before any
    /// of them is read, so these are the ones a client could have avoided.
    pub fn refusals_later(&self, after: Duration) -> usize {
        let refusals = self.refusals();
        let Some(&first) = refusals.first() else {
            return 0;
        };
        refusals.iter().filter(|&&r| r > first + after).count()
    }

    /// The most requests and the most tokens admitted in any span of one
    /// window (`[t, t + window)`), wherever it starts: what a rolling
    /// window bounds by its limits (a refilled bucket allows up to twice
    /// its limit there; a fixed window, twice across a boundary).
    pub fn peak(&self) -> (usize, u64) {
        let admissions = self.admissions();
        let window = self.shared.config.window;
        let mut peak = (0, 0);
        for (i, first) in admissions.iter().enumerate() {
            let inside = admissions[i..]
                .iter()
                .take_while(|a| a.at < first.at + window);
            let (n, tokens) = inside.fold((0, 0), |(n, t), a| (n + 1, t + a.tokens));
            peak = (peak.0.max(n), peak.1.max(tokens));
        }
        peak
    }

    /// Per window counted from the server's start, the requests and tokens
    /// admitted in it: what a fixed window bounds by its limits.
    pub fn per_window(&self) -> Vec<(usize, u64)> {
        let window = self.shared.config.window.as_nanos();
        let mut out: Vec<(usize, u64)> = Vec::new();
        for a in self.admissions() {
            let index = (a.at.duration_since(self.shared.started).as_nanos() / window) as usize;
            if out.len() <= index {
                out.resize(index + 1, (0, 0));
            }
            out[index].0 += 1;
            out[index].1 += a.tokens;
        }
        out
    }
}

impl Drop for QuotaServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Meters one request: its verdict (`None`: too large ever to be
    /// admitted) and, if admitted, its generation time.
    fn take(&self, tokens: u64, body: &str) -> Option<(Verdict, Duration)> {
        let mut state = self.lock();
        state.counts.requests += 1;
        if tokens > u64::from(self.config.tokens) {
            return None;
        }
        let now = Instant::now();
        let verdict = state.meter.take(now, tokens);
        state.arrivals.push(Arrival {
            at: now,
            body: body.to_owned(),
            admitted: verdict.admitted,
        });
        if !verdict.admitted {
            state.counts.limited += 1;
            state.refusals.push(now);
            state.counts.limited_by_tokens += usize::from(verdict.short[TOKENS]);
            state.counts.limited_by_requests += usize::from(verdict.short[REQUESTS]);
            return Some((verdict, Duration::ZERO));
        }
        state.counts.admitted += 1;
        state.admissions.push(Admission { at: now, tokens });
        let (min, max) = self.config.generation;
        let span = (max - min).as_micros() as u64;
        let draw = splitmix64(&mut state.random) % (span + 1);
        Some((verdict, min + Duration::from_micros(draw)))
    }

    /// One more request being answered; the guard counts it down.
    fn enter(self: &Arc<Self>) -> Answering {
        let mut state = self.lock();
        state.concurrent += 1;
        state.counts.max_concurrent = state.counts.max_concurrent.max(state.concurrent);
        Answering(self.clone())
    }
}

/// A request being answered (counted in [`Counts::max_concurrent`]).
struct Answering(Arc<Shared>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.lock().concurrent -= 1;
    }
}

/// Serves the requests of one keep-alive connection.
async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::with_capacity(1024);
    while let Some(request) = super::read_request(&mut stream, &mut buf).await {
        let _answering = shared.enter();
        let tokens = tokens_of(&request.body);
        let Some((verdict, generation)) = shared.take(tokens, &request.body) else {
            let body = format!(
                r#"{{"error":{{"type":"invalid_request_error","message":"{tokens} tokens is over the limit of {}"}}}}"#,
                shared.config.tokens
            );
            let response = super::response(400, "Bad Request", &[], &body);
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
            continue;
        };
        let mut headers = Vec::new();
        if shared.config.headers {
            headers = openai_headers(&shared.config, &verdict);
        }
        let response = if verdict.admitted {
            tokio::time::sleep(generation).await;
            let body = format!(r#"{{"text":"done","usage":{{"total_tokens":{tokens}}}}}"#);
            super::response(200, "OK", &headers, &body)
        } else {
            // Whole seconds (RFC 9110), rounded up: never earlier than due.
            let seconds = verdict.retry_after.as_nanos().div_ceil(1_000_000_000);
            headers.push(("Retry-After", seconds.to_string()));
            let body = r#"{"error":{"type":"rate_limit_error","message":"Rate limit reached"}}"#;
            super::response(429, "Too Many Requests", &headers, body)
        };
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// OpenAI's six headers: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`.
fn openai_headers(config: &Config, verdict: &Verdict) -> Vec<(&'static str, String)> {
    vec![
        ("x-ratelimit-limit-requests", config.requests.to_string()),
        ("x-ratelimit-limit-tokens", config.tokens.to_string()),
        (
            "x-ratelimit-remaining-requests",
            verdict.remaining[REQUESTS].to_string(),
        ),
        (
            "x-ratelimit-remaining-tokens",
            verdict.remaining[TOKENS].to_string(),
        ),
        (
            "x-ratelimit-reset-requests",
            go_duration(verdict.reset[REQUESTS]),
        ),
        (
            "x-ratelimit-reset-tokens",
            go_duration(verdict.reset[TOKENS]),
        ),
    ]
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
