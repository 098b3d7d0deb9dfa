//! A fleet of worker processes on one provider key: with the upstream kept
//! in Redis, the first worker's 429 holds every worker; without it, each
//! process meets the limit on its own. Prints the 429 counts side by side.
//!
//! ```text
//! cargo run --features redis --example fleet [WORKERS] [CALLS]
//! ```
//!
//! It starts a `redis-server` of its own on a unix socket (Debian's package
//! `redis-server`), or uses the one at `REDIS_URL`, and a loopback server
//! with a rate limit: the first request opens a 3 s window in which every
//! request is answered `429` with `Retry-After: 3`. The workers are this
//! program run again (`fleet worker URL CALLS [REDIS_URL]`). Self-contained:
//! copy it as it is. In a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["redis", "reqwest"] }
//! reqwest = "0.13"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util", "process", "time"] }
//! ```

use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nika_retry::upstream::{Held, RedisStore, Store, Upstream};
use nika_retry::{Classify, ErrorCategory, retry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const UPSTREAM: &str = "example/model";
const WINDOW: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("status {0}")]
    Api(u16, ErrorCategory, Option<Duration>),
    #[error("transport: {0}")]
    Transport(#[from] reqwest::Error),
    #[error(transparent)]
    Held(#[from] Held),
}

impl Classify for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Api(_, category, _) => *category,
            Error::Transport(_) => ErrorCategory::Transient,
            Error::Held(held) => held.category(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api(_, _, hint) => *hint,
            Error::Held(held) => held.retry_after(),
            Error::Transport(_) => None,
        }
    }
}

struct Provider {
    client: reqwest::Client,
    url: String,
    upstream: Upstream,
}

impl Provider {
    /// One call; a 429 holds the upstream, in Redis for the whole fleet.
    #[retry(layer = "provider", upstream = self.upstream)]
    async fn complete(&self) -> Result<String, Error> {
        let response = self.client.get(&self.url).send().await?;
        if response.status().is_success() {
            return Ok(response.text().await?);
        }
        let (category, hint) = nika_retry::http::classify_response(&response);
        Err(Error::Api(response.status().as_u16(), category, hint))
    }
}

/// A worker process: CALLS calls, one after another.
async fn worker(args: &[String]) -> ExitCode {
    let (Some(url), Some(Ok(calls))) = (args.first(), args.get(1).map(|n| n.parse::<u32>())) else {
        eprintln!("usage: fleet worker URL CALLS [REDIS_URL]");
        return ExitCode::from(2);
    };
    let mut upstream = Upstream::new(UPSTREAM);
    if let Some(redis) = args.get(2) {
        match RedisStore::connect(redis).await {
            Ok(store) => upstream = upstream.with_store(store),
            Err(e) => {
                eprintln!("worker: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let provider = Provider {
        client: reqwest::Client::new(),
        url: url.clone(),
        upstream,
    };
    for _ in 0..calls {
        if let Err(e) = provider.complete().await {
            eprintln!("worker: a call failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// The rate-limited server: how many 429s and 200s it answered.
#[derive(Default)]
struct Counts {
    limited: AtomicUsize,
    ok: AtomicUsize,
}

async fn limit_server() -> std::io::Result<(String, Arc<Counts>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/complete", listener.local_addr()?);
    let counts = Arc::new(Counts::default());
    let served = counts.clone();
    tokio::spawn(async move {
        let opened = Arc::new(std::sync::OnceLock::<Instant>::new());
        while let Ok((mut stream, _)) = listener.accept().await {
            let (counts, opened) = (served.clone(), opened.clone());
            tokio::spawn(async move {
                // One request per connection; its head is all we read.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let opened = *opened.get_or_init(Instant::now);
                let answer = if opened.elapsed() < WINDOW {
                    counts.limited.fetch_add(1, Ordering::Relaxed);
                    "HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                } else {
                    counts.ok.fetch_add(1, Ordering::Relaxed);
                    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                };
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok((url, counts))
}

/// A `redis-server` of this program's own, on a unix socket in a temp dir.
struct OwnRedis {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl OwnRedis {
    fn start() -> Result<OwnRedis, String> {
        let dir = std::env::temp_dir().join(format!("nika-retry-fleet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let child = std::process::Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no", "--unixsocket"])
            .arg(dir.join("redis.sock"))
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start redis-server ({e}): install Debian's package redis-server, or set REDIS_URL")
            })?;
        Ok(OwnRedis { child, dir })
    }

    fn url(&self) -> String {
        format!("redis+unix://{}", self.dir.join("redis.sock").display())
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One run of the fleet: the first worker, and once its first request was
/// answered (with Redis: once its hold is in the store), the others.
/// How many 429s the fleet met.
async fn fleet(workers: usize, calls: u32, redis: Option<&str>) -> Result<usize, String> {
    let (url, counts) = limit_server().await.map_err(|e| e.to_string())?;
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let spawn = || {
        tokio::process::Command::new(&me)
            .arg("worker")
            .arg(&url)
            .arg(calls.to_string())
            .args(redis)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())
    };
    let mut children = vec![spawn()?];
    let watch = match redis {
        Some(redis) => Some(
            RedisStore::connect(redis)
                .await
                .map_err(|e| e.to_string())?,
        ),
        None => None,
    };
    for _ in 0..400 {
        let answered = match &watch {
            Some(store) => matches!(store.held_for(UPSTREAM).await, Ok(Some(_))),
            None => counts.limited.load(Ordering::Relaxed) > 0,
        };
        if answered {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    for _ in 1..workers {
        children.push(spawn()?);
    }
    for mut child in children {
        let status = child.wait().await.map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("a worker failed: {status}"));
        }
    }
    Ok(counts.limited.load(Ordering::Relaxed))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return worker(&args[1..]).await;
    }
    let workers = args.first().and_then(|n| n.parse().ok()).unwrap_or(4);
    let calls = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(3);
    let own;
    let url = match std::env::var("REDIS_URL") {
        Ok(url) => url,
        Err(_) => match OwnRedis::start() {
            Ok(redis) => {
                own = redis;
                // Until it has opened its socket (a store would work
                // without it, on local state, until it answers).
                let socket = own.dir.join("redis.sock");
                for _ in 0..200 {
                    if socket.exists() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                own.url()
            }
            Err(e) => {
                eprintln!("fleet: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let (alone, shared) = match (
        fleet(workers, calls, None).await,
        fleet(workers, calls, Some(&url)).await,
    ) {
        (Ok(alone), Ok(shared)) => (alone, shared),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("fleet: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{workers} workers x {calls} calls against one rate limit");
    println!("{:<28}{:>6}", "", "429s");
    println!("{:<28}{:>6}", "each process on its own", alone);
    println!("{:<28}{:>6}", "the upstream in Redis", shared);
    ExitCode::SUCCESS
}
