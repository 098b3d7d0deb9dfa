//! The fan-out benchmark (the design's "An upstream that paces", its goals;
//! results in BENCHMARKS.md, "Fan-out under a quota"): 50 calls at once on
//! one model whose limits are 20 requests and 3 000 tokens per 2 s, each
//! call a prompt of 200 tokens (the token limit binds: 15 a window), every
//! answer after 50–150 ms of generation, the provider layer's default 3
//! attempts. Per contender and server kind it prints the requests sent for
//! the 50 completions, the 429s met, the calls that failed, and the
//! makespan against what the limits allow (`Config::allows`), min–max over
//! the runs. Against the server that sends no rate-limit headers, the 429s
//! met more than 100 ms after the first are in brackets: the round of the
//! cold start's ramp that overruns the limit leaves before any 429 is
//! read, and the adaptive rate is off until one is.
//!
//! With `--dialect`, the servers it was not tuned to: the one contender a
//! user writes (the shared upstream, cold, with `cost`) on a server of each
//! header dialect (`Dialect`: OpenAI's, Anthropic's with input and output
//! limited apart, 1 500 each, as binding as the total; the IETF draft's;
//! none) and each kind, one row per (dialect, kind). `--slow`: every
//! answer after 0–2 s of generation instead (the makespan against what the
//! limits allow plus the mean generation). `--round-resets`: every reset
//! reported rounded up to the second (`Config::reset_rounding`);
//! `--clock-offset MS`: the server's wall clock that far ahead (negative:
//! behind), its instants and `Date` with it (`Config::clock_offset`).
//!
//! ```sh
//! cargo bench --bench fanout -- --dialect all --server all --runs 3
//! cargo bench --bench fanout -- --dialect anthropic --slow   # generation 0–2 s
//! cargo bench --bench fanout -- --dialect anthropic --clock-offset -1500 --round-resets
//! cargo bench --bench fanout                          # every server kind, 5 runs each
//! cargo bench --bench fanout -- --server rolling --runs 1
//! cargo bench --bench fanout -- --only gate           # the contenders whose label says `gate`
//! FANOUT_DEBUG=1 cargo bench --bench fanout             # and the server's counts of each run, on stderr
//! cargo bench --features redis --bench fanout         # and 4 processes through Redis
//! ```
//!
//! The contenders: one shared `Upstream`, cold (nothing declared, nothing
//! learned yet), with and without `cost`; a declared quota; the shared
//! upstream against a server that sends no rate-limit headers; each call
//! alone (no upstream); a hand-written gate that knows the quota (the
//! reference); with feature `redis`, 4 worker processes (this bench's own
//! binary, run again) sharing the upstream through `RedisStore`.

use std::collections::VecDeque;
use std::time::Duration;

use nika_retry::retry;
use nika_retry::upstream::Upstream;
use nika_retry_tests::fault::quota::{
    CallError as Error, Config, Dialect, Kind, QuotaServer, post, tokens_of,
};
use tokio::time::Instant;

const CALLS: u32 = 50;
const WINDOW: Duration = Duration::from_secs(2);
const REQUESTS: u32 = 20;
const TOKENS: u32 = 3_000;

/// The server of one run.
fn config(kind: Kind, run: u64) -> Config {
    Config::per(WINDOW)
        .requests(REQUESTS)
        .tokens(TOKENS)
        .kind(kind)
        .seed(run)
}

/// How the servers of a table answer, besides their kind.
#[derive(Clone, Copy, Debug)]
struct Setup {
    dialect: Dialect,
    /// Generation of 0–2 s instead of 50–150 ms.
    slow: bool,
    /// Resets reported rounded up to the second.
    round: bool,
    /// The server's clock ahead of the machine's, in milliseconds.
    offset_ms: i64,
}

impl Setup {
    /// The server of one run in this setup.
    fn config(self, kind: Kind, run: u64) -> Config {
        let config = config(kind, run).dialect(self.dialect);
        let config = match self.dialect {
            // As Anthropic limits them; each as binding as the total.
            Dialect::Anthropic => config.input_tokens(TOKENS / 2).output_tokens(TOKENS / 2),
            _ => config,
        };
        let config = match self.slow {
            true => config.generation(Duration::ZERO, Duration::from_secs(2)),
            false => config,
        };
        let config = match self.round {
            true => config.reset_rounding(Duration::from_secs(1)),
            false => config,
        };
        config.clock_offset(self.offset_ms)
    }
}

/// One prompt: 400 characters and `max_tokens: 100`, 200 tokens.
fn prompt() -> String {
    let text = "Summarize this chapter. ".repeat(17);
    format!(r#"{{"prompt":"{}","max_tokens":100}}"#, &text[..400])
}

/// A provider client as `docs/upstream.md` writes one.
struct Provider {
    http: reqwest::Client,
    url: String,
    upstream: Upstream,
}

impl Provider {
    fn new(url: String, upstream: Upstream) -> Provider {
        Provider {
            http: reqwest::Client::new(),
            url,
            upstream,
        }
    }

    /// One request; `observed`: its rate-limit headers go to the upstream.
    async fn send(&self, body: &str, observed: bool) -> Result<String, Error> {
        let observed = observed.then_some(&self.upstream);
        post(&self.http, &self.url, body, observed).await
    }

    /// Through the shared upstream, no `cost`.
    #[retry(layer = "provider", upstream = self.upstream)]
    async fn shared(&self, body: &str) -> Result<String, Error> {
        self.send(body, true).await
    }

    /// Through the shared upstream, each attempt's tokens given.
    #[retry(layer = "provider", upstream = self.upstream, cost = tokens_of(body))]
    async fn shared_cost(&self, body: &str) -> Result<String, Error> {
        self.send(body, true).await
    }

    /// Alone: no upstream.
    #[retry(layer = "provider")]
    async fn alone(&self, body: &str) -> Result<String, Error> {
        self.send(body, false).await
    }

    /// Alone, each attempt first through the hand-written gate.
    #[retry(layer = "provider")]
    async fn gated(&self, gate: &Gate, body: &str) -> Result<String, Error> {
        gate.admit(tokens_of(body)).await;
        self.send(body, false).await
    }
}

/// The reference: what a user who knows the quota, and how the server
/// counts it, writes by hand. Each attempt waits, in arrival order (tokio's
/// `Mutex` is fair), until both dimensions have room for it: against a
/// continuously refilled server, a bucket of the limit refilling at the
/// limit per window; against a window, the requests and tokens admitted
/// in the last window. Either with 50 ms of margin for the time a request
/// takes to reach the server.
struct Gate {
    refill: bool,
    state: tokio::sync::Mutex<GateState>,
}

struct GateState {
    /// The refilled buckets (`[requests, tokens]`) as of `at`.
    level: [f64; 2],
    at: Instant,
    /// What the window admitted: when, and its tokens.
    log: VecDeque<(Instant, u64)>,
}

impl Gate {
    const MARGIN: Duration = Duration::from_millis(50);
    const LIMIT: [f64; 2] = [REQUESTS as f64, TOKENS as f64];

    fn new(kind: Kind) -> Gate {
        Gate {
            refill: kind == Kind::Refill,
            state: tokio::sync::Mutex::new(GateState {
                level: Gate::LIMIT,
                at: Instant::now(),
                log: VecDeque::new(),
            }),
        }
    }

    async fn admit(&self, tokens: u64) {
        let cost = [1.0, tokens as f64];
        let mut state = self.state.lock().await;
        loop {
            let now = Instant::now();
            let wait = if self.refill {
                let elapsed = (now - state.at).as_secs_f64();
                state.at = now;
                let mut wait: f64 = 0.0;
                for ((level, limit), cost) in state.level.iter_mut().zip(Gate::LIMIT).zip(cost) {
                    let rate = limit / WINDOW.as_secs_f64();
                    *level = (*level + elapsed * rate).min(limit);
                    // The margin's refill kept in hand: the server's bucket
                    // refills from when a request reaches it, a little later.
                    let need = cost + rate * Gate::MARGIN.as_secs_f64();
                    wait = wait.max((need - *level) / rate);
                }
                if wait <= 0.0 {
                    state.level[0] -= cost[0];
                    state.level[1] -= cost[1];
                    return;
                }
                Duration::from_secs_f64(wait)
            } else {
                let window = WINDOW + Gate::MARGIN;
                while state.log.front().is_some_and(|&(at, _)| at + window <= now) {
                    state.log.pop_front();
                }
                let used: u64 = state.log.iter().map(|&(_, t)| t).sum();
                if state.log.len() < REQUESTS as usize && used + tokens <= u64::from(TOKENS) {
                    state.log.push_back((now, tokens));
                    return;
                }
                // Room comes back when the oldest leaves the window.
                let (oldest, _) = state.log.front().copied().unwrap_or((now, 0));
                (oldest + window).saturating_duration_since(now)
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Contender {
    Shared,
    SharedCost,
    Declared,
    NoHeaders,
    Alone,
    Gate,
    #[cfg(feature = "redis")]
    Redis,
}

impl Contender {
    const ALL: &[Contender] = &[
        Contender::SharedCost,
        Contender::Shared,
        Contender::Declared,
        Contender::NoHeaders,
        Contender::Alone,
        #[cfg(feature = "redis")]
        Contender::Redis,
        Contender::Gate,
    ];

    fn label(self) -> &'static str {
        match self {
            Contender::SharedCost => "one shared Upstream, cold, with cost",
            Contender::Shared => "one shared Upstream, cold",
            Contender::Declared => "a declared quota (with_quota), with cost",
            Contender::NoHeaders => "shared, server sends no rate-limit headers",
            Contender::Alone => "each call alone (no upstream)",
            Contender::Gate => "a hand-written gate that knows the quota",
            #[cfg(feature = "redis")]
            Contender::Redis => "4 processes through RedisStore",
        }
    }
}

/// What one run saw.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    requests: usize,
    limited: usize,
    /// Of those, the ones after the first burst: more than 100 ms after
    /// the first 429 (a burst sent at once meets its 429s within a few
    /// milliseconds, before any of them is read).
    later: usize,
    failed: usize,
    /// Of the failed calls, the ones still waiting when the run was cut
    /// off ([`STALL`]).
    stalled: usize,
    /// The makespan over what the limits allow.
    ratio: f64,
}

/// How long a run may take before it is cut off and its unfinished calls
/// counted as failed: a client that stops sending (a hold that never ends)
/// must not stop the table.
const STALL: Duration = Duration::from_secs(60);

async fn run(contender: Contender, kind: Kind, seed: u64, setup: Setup, redis: &Redis) -> Outcome {
    let config = match contender {
        Contender::NoHeaders => setup.config(kind, seed).without_headers(),
        _ => setup.config(kind, seed),
    };
    let server = QuotaServer::start(config).await;
    let upstream = Upstream::new(format!("fanout/{}-{seed}", kind.name()));
    let upstream = match contender {
        Contender::Declared => upstream.with_quota(
            nika_retry::upstream::Quota::per(WINDOW)
                .requests(REQUESTS)
                .tokens(TOKENS),
        ),
        _ => upstream,
    };
    let provider = Provider::new(server.url("/v1/complete"), upstream);
    let gate = Gate::new(kind);
    let body = prompt();
    let started = Instant::now();
    let (failed, stalled, makespan) = match contender {
        // Timed from the moment the ready processes are told to go.
        #[cfg(feature = "redis")]
        Contender::Redis => {
            let (failed, makespan) = redis.fleet(&server, seed, &body).await;
            (failed, 0, makespan)
        }
        _ => {
            let calls = (0..CALLS).map(|_| async {
                match contender {
                    Contender::Shared | Contender::NoHeaders => provider.shared(&body).await,
                    Contender::SharedCost | Contender::Declared => {
                        provider.shared_cost(&body).await
                    }
                    Contender::Alone => provider.alone(&body).await,
                    Contender::Gate => provider.gated(&gate, &body).await,
                    #[cfg(feature = "redis")]
                    Contender::Redis => unreachable!("run as processes"),
                }
            });
            // Counted as they end, so that a cut-off run still knows.
            let ended = std::sync::Mutex::new((0, 0));
            let calls = calls.map(|call| async {
                let ok = call.await.is_ok();
                let mut ended = ended.lock().unwrap_or_else(|e| e.into_inner());
                ended.0 += 1;
                ended.1 += usize::from(!ok);
            });
            let all = futures_util::future::join_all(calls);
            let cut = tokio::time::timeout(STALL, all).await.is_err();
            let (done, failed) = *ended.lock().unwrap_or_else(|e| e.into_inner());
            let stalled = CALLS as usize - done;
            if cut {
                eprintln!(
                    "{contender:?} {kind:?} seed {seed}: cut off after {STALL:?}, {stalled} calls unfinished"
                );
            }
            (failed + stalled, stalled, started.elapsed())
        }
    };
    let _ = redis;
    let counts = server.counts();
    let later = server.refusals_later(Duration::from_millis(100));
    if std::env::var_os("FANOUT_DEBUG").is_some() {
        let at: Vec<u128> = server
            .refusals()
            .iter()
            .map(|r| r.duration_since(server.started()).as_millis())
            .collect();
        let ratio =
            makespan.as_secs_f64() / server.config().allows_body(CALLS, &body).as_secs_f64();
        let dialect = setup.dialect;
        eprintln!(
            "{contender:?} {dialect:?} {kind:?} seed {seed}: {counts:?}, {ratio:.2}×; 429s at {at:?} ms"
        );
        let admissions = server.admissions();
        if let Some(first) = admissions.iter().map(|a| a.at).min() {
            let at: Vec<u128> = admissions
                .iter()
                .map(|a| a.at.duration_since(first).as_millis())
                .collect();
            eprintln!("  admitted at {at:?} ms after the first");
        }
    }
    let allows = server.config().allows_body(CALLS, &body);
    Outcome {
        requests: counts.requests,
        limited: counts.limited,
        later,
        failed,
        stalled,
        ratio: makespan.as_secs_f64() / allows.as_secs_f64(),
    }
}

/// `min–max` of a column.
fn range<T: PartialOrd + Copy>(
    values: impl Iterator<Item = T>,
    show: impl Fn(T) -> String,
) -> String {
    let values: Vec<T> = values.collect();
    let pick = |better: fn(&T, &T) -> bool| {
        let first = values[0];
        values
            .iter()
            .copied()
            .fold(first, |a, b| if better(&b, &a) { b } else { a })
    };
    let (min, max) = (show(pick(T::lt)), show(pick(T::gt)));
    if min == max {
        min
    } else {
        format!("{min}–{max}")
    }
}

fn main() {
    #[cfg(feature = "redis")]
    if let Ok(job) = std::env::var(WORKER) {
        std::process::exit(worker(&job));
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| {
        let at = args.iter().position(|a| a == name)?;
        args.get(at + 1).cloned()
    };
    let runs: u64 = value("--runs").map_or(5, |r| r.parse().expect("--runs N"));
    let kinds: Vec<Kind> = match value("--server").as_deref() {
        None | Some("all") => Kind::ALL.to_vec(),
        Some(name) => Kind::ALL.into_iter().filter(|k| k.name() == name).collect(),
    };
    assert!(!kinds.is_empty(), "--server refill | rolling | fixed | all");
    let only = value("--only").unwrap_or_default();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let setup = Setup {
        dialect: Dialect::OpenAi,
        slow: flag("--slow"),
        round: flag("--round-resets"),
        offset_ms: value("--clock-offset").map_or(0, |ms| ms.parse().expect("--clock-offset MS")),
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let redis = Redis::start();
    if let Some(dialect) = value("--dialect") {
        let dialects: Vec<Dialect> = Dialect::ALL
            .into_iter()
            .filter(|d| dialect == "all" || d.name() == dialect)
            .collect();
        assert!(
            !dialects.is_empty(),
            "--dialect openai | anthropic | ietf | none | all"
        );
        // `--only LABEL` picks the contenders (the one of that label, else
        // those whose label holds it); by default the one with cost.
        let exact = Contender::ALL.iter().copied().find(|c| c.label() == only);
        let contenders: Vec<Contender> = match (only.as_str(), exact) {
            ("", _) => vec![Contender::SharedCost],
            (_, Some(exact)) => vec![exact],
            (only, None) => Contender::ALL
                .iter()
                .copied()
                .filter(|c| c.label().contains(only))
                .collect(),
        };
        for contender in contenders {
            dialect_table(&dialects, &kinds, runs, setup, contender, &runtime, &redis);
        }
        return;
    }
    let cost = tokens_of(&prompt());
    for kind in kinds {
        let allows = setup.config(kind, 0).allows_body(CALLS, &prompt());
        println!(
            "\n{} server: {REQUESTS} requests and {TOKENS} tokens per {WINDOW:?}; {CALLS} calls of {cost} tokens at once; the limits allow {:.2} s; {runs} runs\n",
            kind.name(),
            allows.as_secs_f64()
        );
        println!(
            "| {:<44} | {:>9} | {:>7} | {:>6} | {:>11} |",
            "contender", "requests", "429s", "failed", "makespan"
        );
        println!(
            "|{:-<46}|{:->10}:|{:->8}:|{:->7}:|{:->12}:|",
            "", "", "", "", ""
        );
        for &contender in Contender::ALL {
            if !contender.label().contains(only.as_str()) {
                continue;
            }
            let outcomes: Vec<Outcome> = (0..runs)
                .map(|seed| runtime.block_on(run(contender, kind, seed + 1, setup, &redis)))
                .collect();
            let all = || outcomes.iter();
            println!(
                "| {:<44} | {:>9} | {:>7} | {:>6} | {:>11} |",
                contender.label(),
                range(all().map(|o| o.requests), |v| v.to_string()),
                match contender {
                    // Its adaptive rate is off until the first 429: what
                    // met one after the first burst, in brackets.
                    Contender::NoHeaders => format!(
                        "{} ({})",
                        range(all().map(|o| o.limited), |v| v.to_string()),
                        range(all().map(|o| o.later), |v| v.to_string())
                    ),
                    _ => range(all().map(|o| o.limited), |v| v.to_string()),
                },
                failed(&outcomes),
                range(all().map(|o| o.ratio), |v| format!("{v:.2}×")),
            );
        }
    }
}

/// The failed calls' range, and the runs cut off with calls unfinished.
fn failed(outcomes: &[Outcome]) -> String {
    let failed = range(outcomes.iter().map(|o| o.failed), |v| v.to_string());
    match outcomes.iter().filter(|o| o.stalled > 0).count() {
        0 => failed,
        cut => format!("{failed}, {cut} cut"),
    }
}

/// The shared upstream, cold, with `cost`, on a server of each dialect and
/// kind: one row per (dialect, kind).
fn dialect_table(
    dialects: &[Dialect],
    kinds: &[Kind],
    runs: u64,
    setup: Setup,
    contender: Contender,
    runtime: &tokio::runtime::Runtime,
    redis: &Redis,
) {
    let generation = if setup.slow { "0–2 s" } else { "50–150 ms" };
    let round = if setup.round {
        "; resets rounded up to the second"
    } else {
        ""
    };
    let offset = setup.offset_ms;
    println!(
        "\n{}; {REQUESTS} requests and {TOKENS} tokens per {WINDOW:?}; {CALLS} calls of {} tokens at once; generation {generation}{round}; server clock {offset:+} ms; {runs} runs; 429s met more than 100 ms after the first in brackets\n",
        contender.label(),
        tokens_of(&prompt())
    );
    println!(
        "| {:<9} | {:<7} | {:>8} | {:>9} | {:>11} | {:>6} | {:>11} |",
        "dialect", "server", "allows", "requests", "429s", "failed", "makespan"
    );
    println!(
        "|{:-<11}|{:-<9}|{:->9}:|{:->10}:|{:->12}:|{:->7}:|{:->12}:|",
        "", "", "", "", "", "", ""
    );
    for &dialect in dialects {
        let setup = Setup { dialect, ..setup };
        for &kind in kinds {
            let outcomes: Vec<Outcome> = (0..runs)
                .map(|seed| runtime.block_on(run(contender, kind, seed + 1, setup, redis)))
                .collect();
            let all = || outcomes.iter();
            let allows = setup.config(kind, 0).allows_body(CALLS, &prompt());
            println!(
                "| {:<9} | {:<7} | {:>8} | {:>9} | {:>11} | {:>6} | {:>11} |",
                dialect.name(),
                kind.name(),
                format!("{:.2} s", allows.as_secs_f64()),
                range(all().map(|o| o.requests), |v| v.to_string()),
                format!(
                    "{} ({})",
                    range(all().map(|o| o.limited), |v| v.to_string()),
                    range(all().map(|o| o.later), |v| v.to_string())
                ),
                failed(&outcomes),
                range(all().map(|o| o.ratio), |v| format!("{v:.2}×")),
            );
        }
    }
}

#[cfg(not(feature = "redis"))]
struct Redis;

#[cfg(not(feature = "redis"))]
impl Redis {
    fn start() -> Redis {
        Redis
    }
}

#[cfg(feature = "redis")]
#[path = "support/fanout_fleet.rs"]
mod fanout_fleet;
#[cfg(feature = "redis")]
use fanout_fleet::{Redis, WORKER, worker};
