//! A loopback model server with a rate limit, as an LLM provider keeps one
//! per key and model: so many requests and so many tokens per window (and,
//! as Anthropic counts them, so many input and output tokens apart),
//! counted as one of three kinds of server counts them ([`Kind`]), the
//! limits reported in one of several providers' header dialects
//! ([`Dialect`]: OpenAI's six `x-ratelimit-*` headers by default), a
//! generation time per admitted request, and a `429` with `Retry-After` for
//! a request over the limit. For the fan-out tests, benchmark and demo.
//!
//! The dialects are written from the providers' public documentation, not
//! from what nika-retry parses: the point of a server unlike the project's
//! own is to measure a client against what it was not tuned to. The server
//! can also report its resets rounded up to whole seconds
//! ([`Config::reset_rounding`]) and keep a wall clock that is off from the
//! machine's ([`Config::clock_offset`]).
//!
//! **Tokens** are counted from the request's body as OpenAI estimates them
//! before generating: a JSON body `{"prompt": "…", "max_tokens": N}` costs
//! `N` plus the prompt's characters divided by 4, rounded up
//! ([`tokens_of`]); any other body costs its characters divided by 4. Of
//! those, the prompt's are input and `max_tokens` output
//! ([`input_output_of`]). A request that costs more than a whole limit is
//! answered `400`.
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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use client::{CallError, post};
pub use meter::go_duration;
use meter::{DIMS, INPUT, Meter, OUTPUT, REQUESTS, TOKENS, UNLIMITED, Verdict};

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

/// How a server reports its limits in its answers' headers.
///
/// Every dialect answers a refused request `429` with `Retry-After` in
/// whole seconds (rounded up: never earlier than due).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenAI's six headers (platform.openai.com, "Rate limits"):
    /// `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, the resets
    /// as Go durations (`1.5s`, `6m0s`, [`go_duration`]). No `Date` unless
    /// the clock is offset ([`Config::clock_offset`]).
    #[default]
    OpenAi,
    /// Anthropic's (docs.anthropic.com, "Rate limits", response headers):
    /// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
    /// each reset the RFC 3339 instant of the server's wall clock at which
    /// that limit is whole again (`2026-12-07T03:45:12.345Z`); the input
    /// and output ones only for the limits [`Config::input_tokens`] and
    /// [`Config::output_tokens`] set. A `Date` on every answer.
    ///
    /// Anthropic documents the token `remaining` values as rounded to the
    /// nearest thousand; this server reports them exact, so that a test
    /// can hold them to the meter.
    Anthropic,
    /// The IETF's structured fields (draft-ietf-httpapi-ratelimit-headers,
    /// the shape of its revisions since -08, October 2024; the datatracker
    /// lists -11, May 2026, as the latest; checked against the working
    /// group's editor's copy and a summary of the current draft, not -11's
    /// own text): one policy per limit in
    /// `RateLimit-Policy: "requests";q=20;w=2, "tokens";q=3000;w=2` (a
    /// String identifier, `q` the quota, `w` the window in seconds, rounded
    /// up) and the current state in
    /// `RateLimit: "requests";r=5;t=1, "tokens";r=2800;t=1` (`r` what
    /// remains, `t` the whole seconds until the policy is whole again,
    /// rounded up). Policies `"input-tokens"` and `"output-tokens"` for the
    /// limits set apart. No `qu` (quota unit) parameter: a client tells
    /// the policies apart by name. A `Date` on every answer.
    ///
    /// On a `429` the draft wants `t` to name the same moment as
    /// `Retry-After` ("SHOULD"); this server keeps `t` the meter's reset
    /// (when the policy is whole), which is later for a refilled bucket or
    /// a rolling window.
    Ietf,
    /// No rate-limit headers: a `429` carries `Retry-After` alone, as some
    /// providers and most proxies send it. No `Date` unless the clock is
    /// offset.
    None,
}

impl Dialect {
    /// The four dialects.
    pub const ALL: [Dialect; 4] = [
        Dialect::OpenAi,
        Dialect::Anthropic,
        Dialect::Ietf,
        Dialect::None,
    ];

    /// A short name: `openai`, `anthropic`, `ietf`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Ietf => "ietf",
            Dialect::None => "none",
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
    /// Tokens per window ([`tokens_of`]), input and output together.
    pub tokens: u32,
    /// Input tokens per window, if limited apart ([`input_output_of`]).
    pub input_tokens: Option<u32>,
    /// Output tokens (`max_tokens`) per window, if limited apart.
    pub output_tokens: Option<u32>,
    /// How the window is counted.
    pub kind: Kind,
    /// How long an admitted request takes to answer: drawn uniformly from
    /// this range (both ends included) for each request.
    pub generation: (Duration, Duration),
    /// How answers report the limits.
    pub dialect: Dialect,
    /// Every reported reset (durations and instants) rounded up to a
    /// multiple of this; zero: to the millisecond.
    pub reset_rounding: Duration,
    /// How far the server's wall clock (its reset instants, its `Date`) is
    /// ahead of the machine's, in milliseconds; negative: behind.
    pub clock_offset_ms: i64,
    /// The seed of the generation times.
    pub seed: u64,
}

impl Config {
    /// Limits counted per `window`: 60 requests and 100 000 tokens until
    /// set, input and output not limited apart, a continuously refilled
    /// bucket ([`Kind::Refill`]), 50–150 ms of generation, OpenAI's
    /// headers, resets to the millisecond, the machine's clock.
    pub fn per(window: Duration) -> Config {
        Config {
            window,
            requests: 60,
            tokens: 100_000,
            input_tokens: None,
            output_tokens: None,
            kind: Kind::Refill,
            generation: (Duration::from_millis(50), Duration::from_millis(150)),
            dialect: Dialect::OpenAi,
            reset_rounding: Duration::ZERO,
            clock_offset_ms: 0,
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

    /// At most `n` input tokens per window, besides the total.
    pub fn input_tokens(self, n: u32) -> Config {
        Config {
            input_tokens: Some(n),
            ..self
        }
    }

    /// At most `n` output tokens per window, besides the total.
    pub fn output_tokens(self, n: u32) -> Config {
        Config {
            output_tokens: Some(n),
            ..self
        }
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
    /// providers and most proxies send it ([`Dialect::None`]).
    pub fn without_headers(self) -> Config {
        self.dialect(Dialect::None)
    }

    /// The limits reported in `dialect`.
    pub fn dialect(self, dialect: Dialect) -> Config {
        Config { dialect, ..self }
    }

    /// Every reported reset rounded up to a multiple of `to`: durations to
    /// a multiple of it, instants to a multiple of it since the Unix
    /// epoch. `Duration::from_secs(1)`: a server that reports whole seconds.
    pub fn reset_rounding(self, to: Duration) -> Config {
        Config {
            reset_rounding: to,
            ..self
        }
    }

    /// The server's wall clock `millis` milliseconds ahead of the machine's
    /// (behind if negative): its reset instants and its `Date` header, and
    /// a `Date` on every answer of every dialect. The meter, and every
    /// duration the server reports, are unchanged.
    pub fn clock_offset(self, millis: i64) -> Config {
        Config {
            clock_offset_ms: millis,
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
    ///
    /// The `tokens` are counted as input: with input and output limited
    /// apart, use [`Config::allows_body`].
    pub fn allows(&self, calls: u32, tokens: u64) -> Duration {
        self.allows_split(calls, tokens, 0)
    }

    /// What the limits allow for `calls` requests of `body` each
    /// ([`Config::allows`]), its input and output counted apart
    /// ([`input_output_of`]).
    pub fn allows_body(&self, calls: u32, body: &str) -> Duration {
        let (input, output) = input_output_of(body);
        self.allows_split(calls, input, output)
    }

    fn allows_split(&self, calls: u32, input: u64, output: u64) -> Duration {
        let epoch = Instant::now();
        let mut meter = self.meter(epoch);
        let mut at = Duration::ZERO;
        for _ in 0..calls {
            loop {
                let verdict = meter.take(epoch + at, input, output);
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
        Meter::new(self.kind, self.window, self.limits(), epoch)
    }

    /// Per dimension of the meter, the limit ([`UNLIMITED`] if none).
    fn limits(&self) -> [u64; DIMS] {
        let apart = |n: Option<u32>| n.map_or(UNLIMITED, u64::from);
        let mut limit = [0; DIMS];
        limit[REQUESTS] = u64::from(self.requests);
        limit[TOKENS] = u64::from(self.tokens);
        limit[INPUT] = apart(self.input_tokens);
        limit[OUTPUT] = apart(self.output_tokens);
        limit
    }

    /// The limits a dialect reports: name, meter dimension, limit.
    fn reported(&self) -> Vec<(&'static str, usize, u32)> {
        let mut out = vec![
            ("requests", REQUESTS, self.requests),
            ("tokens", TOKENS, self.tokens),
        ];
        out.extend(self.input_tokens.map(|n| ("input-tokens", INPUT, n)));
        out.extend(self.output_tokens.map(|n| ("output-tokens", OUTPUT, n)));
        out
    }

    /// The server's wall clock now.
    fn server_now(&self) -> SystemTime {
        shift(SystemTime::now(), self.clock_offset_ms)
    }

    /// `d` rounded up as the server reports it: to [`Config::reset_rounding`]
    /// (zero: as is).
    fn round(&self, d: Duration) -> Duration {
        round_up(d, self.reset_rounding)
    }

    /// The instant `reset` after `at` (the server's clock) as the server
    /// reports it: to the millisecond, then to [`Config::reset_rounding`],
    /// both up, so that a reported instant is never before the reset.
    fn reset_instant(&self, at: SystemTime, reset: Duration) -> SystemTime {
        let since = (at + reset).duration_since(UNIX_EPOCH).unwrap_or_default();
        let since = round_up(
            round_up(since, Duration::from_millis(1)),
            self.reset_rounding,
        );
        UNIX_EPOCH + since
    }

    /// Whether answers carry `Date`: always in the dialects whose providers
    /// send it beside instants; in the others only when the clock is
    /// offset, so that today's answers stay as they were.
    fn dated(&self) -> bool {
        matches!(self.dialect, Dialect::Anthropic | Dialect::Ietf) || self.clock_offset_ms != 0
    }
}

/// `d` rounded up to a multiple of `to` (zero: `d`).
fn round_up(d: Duration, to: Duration) -> Duration {
    if to.is_zero() {
        return d;
    }
    let n = d.as_nanos().div_ceil(to.as_nanos()) * to.as_nanos();
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

/// `t` moved by `millis` (later if positive).
fn shift(t: SystemTime, millis: i64) -> SystemTime {
    let by = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 { t + by } else { t - by }
}

/// `t` in RFC 3339, UTC: to the second when it is a whole second (as a
/// server that reports whole seconds writes it), else to the millisecond.
fn rfc3339(t: SystemTime) -> String {
    let whole = t
        .duration_since(UNIX_EPOCH)
        .is_ok_and(|d| d.subsec_nanos() == 0);
    if whole {
        humantime::format_rfc3339_seconds(t).to_string()
    } else {
        humantime::format_rfc3339_millis(t).to_string()
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
    let (input, output) = input_output_of(body);
    input + output
}

/// A request body's tokens as input and output, as a server that limits
/// them apart counts them before generating: a JSON body's `prompt`'s
/// characters divided by 4 (rounded up) and its `max_tokens`; any other
/// body, its characters divided by 4 and none.
///
/// ```
/// use nika_retry_tests::fault::quota::input_output_of;
///
/// assert_eq!(input_output_of(r#"{"prompt": "abcdefgh", "max_tokens": 100}"#), (2, 100));
/// assert_eq!(input_output_of("abcde"), (2, 0));
/// ```
pub fn input_output_of(body: &str) -> (u64, u64) {
    let quarter = |text: &str| (text.chars().count() as u64).div_ceil(4);
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(json) if json["prompt"].is_string() => (
            quarter(json["prompt"].as_str().unwrap_or_default()),
            json["max_tokens"].as_u64().unwrap_or(0),
        ),
        _ => (quarter(body), 0),
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
    /// Of those, the ones the input token limit refused
    /// ([`Config::input_tokens`]).
    pub limited_by_input_tokens: usize,
    /// Of those, the ones the output token limit refused
    /// ([`Config::output_tokens`]).
    pub limited_by_output_tokens: usize,
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

    /// Meters one request of `input` and `output` tokens (its `body`
    /// kept among the arrivals): its verdict (`None`: too large ever to be
    /// admitted), the server's wall clock when it was decided, and, if
    /// admitted, its generation time.
    fn take(&self, input: u64, output: u64, body: &str) -> Option<(Verdict, SystemTime, Duration)> {
        let mut state = self.lock();
        state.counts.requests += 1;
        let cost = [1, input + output, input, output];
        if cost.iter().zip(self.config.limits()).any(|(c, l)| *c > l) {
            return None;
        }
        let now = Instant::now();
        let wall = self.config.server_now();
        let verdict = state.meter.take(now, input, output);
        state.arrivals.push(Arrival {
            at: now,
            body: body.to_owned(),
            admitted: verdict.admitted,
        });
        if !verdict.admitted {
            let counts = &mut state.counts;
            counts.limited += 1;
            counts.limited_by_tokens += usize::from(verdict.short[TOKENS]);
            counts.limited_by_requests += usize::from(verdict.short[REQUESTS]);
            counts.limited_by_input_tokens += usize::from(verdict.short[INPUT]);
            counts.limited_by_output_tokens += usize::from(verdict.short[OUTPUT]);
            state.refusals.push(now);
            return Some((verdict, wall, Duration::ZERO));
        }
        let tokens = input + output;
        state.counts.admitted += 1;
        state.admissions.push(Admission { at: now, tokens });
        let (min, max) = self.config.generation;
        let span = (max - min).as_micros() as u64;
        let draw = splitmix64(&mut state.random) % (span + 1);
        Some((verdict, wall, min + Duration::from_micros(draw)))
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
    let config = &shared.config;
    while let Some(request) = super::read_request(&mut stream, &mut buf).await {
        let _answering = shared.enter();
        let (input, output) = input_output_of(&request.body);
        let tokens = input + output;
        let Some((verdict, decided, generation)) = shared.take(input, output, &request.body) else {
            let body = format!(
                r#"{{"error":{{"type":"invalid_request_error","message":"{tokens} tokens ({input} in, {output} out) is over a limit of {:?}"}}}}"#,
                config.reported().iter().map(|r| r.2).collect::<Vec<_>>()
            );
            let response = super::response(400, "Bad Request", &[], &body);
            if stream.write_all(response.as_bytes()).await.is_err() {
                return;
            }
            continue;
        };
        // The headers state the meter as it decided (a provider's limiter
        // runs before the model): with a slow answer, a duration is as old
        // as the generation when it arrives, an instant still exact.
        let mut headers = rate_headers(config, &verdict, decided);
        let response = if verdict.admitted {
            tokio::time::sleep(generation).await;
            date(config, &mut headers);
            let body = format!(r#"{{"text":"done","usage":{{"total_tokens":{tokens}}}}}"#);
            super::response(200, "OK", &headers, &body)
        } else {
            // Whole seconds (RFC 9110), rounded up: never earlier than due.
            let wait = config.round(verdict.retry_after);
            let seconds = wait.as_nanos().div_ceil(1_000_000_000);
            headers.push(("Retry-After", seconds.to_string()));
            date(config, &mut headers);
            let body = match config.dialect {
                Dialect::Anthropic => {
                    r#"{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}}"#
                }
                _ => r#"{"error":{"type":"rate_limit_error","message":"Rate limit reached"}}"#,
            };
            super::response(429, "Too Many Requests", &headers, body)
        };
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// `Date`, the server's wall clock as the answer leaves, if it sends one.
fn date(config: &Config, headers: &mut Vec<(&'static str, String)>) {
    if config.dated() {
        headers.push(("Date", httpdate::fmt_http_date(config.server_now())));
    }
}

/// The rate-limit headers of `config`'s dialect for `verdict`, decided at
/// `decided` (the server's wall clock).
fn rate_headers(
    config: &Config,
    verdict: &Verdict,
    decided: SystemTime,
) -> Vec<(&'static str, String)> {
    match config.dialect {
        Dialect::OpenAi => openai_headers(config, verdict),
        Dialect::Anthropic => anthropic_headers(config, verdict, decided),
        Dialect::Ietf => ietf_headers(config, verdict),
        Dialect::None => Vec::new(),
    }
}

/// OpenAI's six headers: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`.
fn openai_headers(config: &Config, verdict: &Verdict) -> Vec<(&'static str, String)> {
    let reset = |d: usize| go_duration(config.round(verdict.reset[d]));
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
        ("x-ratelimit-reset-requests", reset(REQUESTS)),
        ("x-ratelimit-reset-tokens", reset(TOKENS)),
    ]
}

/// Anthropic's: per reported limit `anthropic-ratelimit-<name>-{limit,remaining,reset}`.
fn anthropic_headers(
    config: &Config,
    verdict: &Verdict,
    decided: SystemTime,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (name, d, limit) in config.reported() {
        let [limit_name, remaining_name, reset_name] = anthropic_names(name);
        let reset = config.reset_instant(decided, verdict.reset[d]);
        out.push((limit_name, limit.to_string()));
        out.push((remaining_name, verdict.remaining[d].to_string()));
        out.push((reset_name, rfc3339(reset)));
    }
    out
}

/// The three header names of one of Anthropic's limits (static, as the
/// response writer takes them).
fn anthropic_names(name: &str) -> [&'static str; 3] {
    match name {
        "requests" => [
            "anthropic-ratelimit-requests-limit",
            "anthropic-ratelimit-requests-remaining",
            "anthropic-ratelimit-requests-reset",
        ],
        "tokens" => [
            "anthropic-ratelimit-tokens-limit",
            "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset",
        ],
        "input-tokens" => [
            "anthropic-ratelimit-input-tokens-limit",
            "anthropic-ratelimit-input-tokens-remaining",
            "anthropic-ratelimit-input-tokens-reset",
        ],
        _ => [
            "anthropic-ratelimit-output-tokens-limit",
            "anthropic-ratelimit-output-tokens-remaining",
            "anthropic-ratelimit-output-tokens-reset",
        ],
    }
}

/// The IETF draft's `RateLimit-Policy` and `RateLimit`, one list member
/// per reported limit, whole seconds rounded up.
fn ietf_headers(config: &Config, verdict: &Verdict) -> Vec<(&'static str, String)> {
    let seconds = |d: Duration| d.as_nanos().div_ceil(1_000_000_000);
    let window = seconds(config.window);
    let reported = config.reported();
    let policy: Vec<String> = reported
        .iter()
        .map(|(name, _, limit)| format!(r#""{name}";q={limit};w={window}"#))
        .collect();
    let state: Vec<String> = reported
        .iter()
        .map(|&(name, d, _)| {
            let r = verdict.remaining[d];
            let t = seconds(config.round(verdict.reset[d]));
            format!(r#""{name}";r={r};t={t}"#)
        })
        .collect();
    vec![
        ("RateLimit-Policy", policy.join(", ")),
        ("RateLimit", state.join(", ")),
    ]
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
