//! [`RedisStore`]: an upstream's hold, allowance and probe's turn in Redis,
//! shared by every process of a fleet.

mod buckets;
mod health;
mod lent;
mod scripts;

use core::fmt;
use core::future::Future;
use core::time::Duration;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ConnectionAddr, Script};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::hold::MAX_HOLD;
use super::store::{
    Admission, PROBE_LEASE, PROBE_OUT, ProbeTurn, RELEASED_FOR, Reading, STORE_WAIT, Spend, Store,
    StoreFuture,
};
use crate::events::upstream::HoldReason;
use health::Health;
use scripts::{Keys, reason_of, reason_text};

/// How long [`RedisStore::connect`] waits for the server's first answer.
const FIRST_ANSWER: Duration = Duration::from_secs(1);

/// How many writes (holds, allowances, probes' outcomes) wait to be sent
/// at most; past that, while the server does not take them, new ones are
/// dropped (the in-process state has them).
const QUEUED_WRITES: usize = 1024;

/// A [`Store`] in Redis: a 429 seen by one worker process holds every
/// worker on that upstream.
///
/// Each upstream has its keys under `nika-retry:upstream:{name}:` (the name
/// as given, bytes and all; past 200 bytes cut and followed by a hash of
/// it; the braces keep an upstream's keys in one Redis Cluster slot):
///
/// - `…:hold`: the hold, a key that expires when it ends (`SET … PX`, read
///   with `PTTL`: the server's clock, never the processes'), its value why;
///   extended by a script that only ever lengthens it;
/// - `…:allowance`: how many attempts may still start, a counter that
///   expires at its reset; the attempt that takes the last one holds the
///   upstream until then;
/// - `…:probe`: the probe's turn, a lease (`SET NX PX`) of
///   [`PROBE_LEASE`]: a probe whose process crashed holds nobody longer;
///   a store dropped before it sent its probe's outcome gives the lease
///   back then (a blocking round trip of at most its wait);
/// - `…:pace`: the fleet's pacing buckets, a hash: per dimension
///   (requests, tokens) its limit and window, shared by every process as
///   soon as one learns them from the headers or declares them, and its
///   level counted on the server's clock (`TIME`). Every attempt spends
///   every dimension's cost in the same script that reads the hold, or
///   learns when the buckets will hold it ([`Store::admit`]); what a
///   response says is left lowers the level ([`Store::learned`]), so the
///   whole fleet stays under one limit.
///
/// Every attempt asks the server (one round trip, a script: the hold, the
/// probe's turn, the allowance and the buckets at once); there is no
/// cache that could let a held attempt start. A key another program wrote
/// (the wrong type, a value that is no number, no expiry, longer than
/// [`MAX_HOLD`]) is deleted as garbage, never obeyed.
///
/// **Never a hostage.** A call to the server waits at most [`STORE_WAIT`]
/// (or what [`with_wait`](RedisStore::with_wait) says); a server down, slow
/// or restarting is passed over and the upstream goes on with its
/// in-process state (its own holds, and its own pacing buckets with the
/// limits it read from its responses). The first failure of an outage is one warning
/// (a `tracing` event at `WARN`, target `nika_retry`); meanwhile the server
/// is asked again every half second, and the first answer ends the outage.
/// The connection manager reconnects by itself. A hold or a probe's
/// outcome that the server did not take (down, slow, passed over) is sent
/// again in the background until it is taken or its time is over: a 429
/// seen during an outage still holds the fleet for what is left of it, and
/// a probe's lease is given back as soon as the server answers, not left to
/// expire after [`PROBE_LEASE`]. Neither `Display`, `Debug`,
/// a log line nor an error shows the URL's password.
///
/// ```no_run
/// use nika_retry::upstream::{RedisStore, Upstream};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let store = RedisStore::connect("redis://:secret@127.0.0.1:6379/0").await?;
/// assert_eq!(store.to_string(), "redis at 127.0.0.1:6379");
/// // Every worker process does the same: they share one hold.
/// let upstream = Upstream::new("openai/gpt-4o").with_store(store);
/// # let _ = upstream;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    connection: ConnectionManager,
    health: Health,
    /// Where the server is, without credentials.
    at: String,
    /// The URL's password, kept out of every text this store writes.
    secret: Option<String>,
    writes: mpsc::Sender<(Write, Instant)>,
    /// The longest a call to the server waits, in nanoseconds
    /// ([`RedisStore::with_wait`]; its clones share it).
    wait: AtomicU64,
    scripts: Scripts,
    /// The client, for the leases given back when the store is dropped.
    client: Client,
    lent: lent::Lent,
}

struct Scripts {
    held_for: Script,
    hold: Script,
    attempt: Script,
    probe: Script,
    probed: Script,
    admit: Script,
    learn: Script,
}

/// A write sent in the background, in order.
enum Write {
    Hold(Keys, Duration, HoldReason),
    Allow(Keys, u32, Duration),
    Probed(Keys, u64, bool),
    /// A response's reading of the limits ([`Store::learned`]).
    Learned(Keys, [Reading; 2]),
}

/// How long the writer waits before it sends again a hold or a probe's
/// outcome that the server did not take (the server is asked at most every
/// half second meanwhile: [`Health`]).
const WRITE_AGAIN: Duration = Duration::from_millis(100);

impl Write {
    /// This write as it stands `elapsed` after it was made: a hold or an
    /// allowance shortened by it; `None` once it no longer matters (its time
    /// is over; a lease given back after [`PROBE_LEASE`] has expired).
    fn after(&self, elapsed: Duration) -> Option<Write> {
        let left = |d: Duration| Some(d.saturating_sub(elapsed)).filter(|d| !d.is_zero());
        Some(match self {
            Write::Hold(keys, held_for, reason) => {
                Write::Hold(keys.clone(), left(*held_for)?, *reason)
            }
            Write::Allow(keys, remaining, reset) => {
                Write::Allow(keys.clone(), *remaining, left(*reset)?)
            }
            Write::Probed(keys, token, released) => {
                left(PROBE_LEASE)?;
                Write::Probed(keys.clone(), *token, *released)
            }
            // A reading's level is only lowered: late, it still holds.
            Write::Learned(keys, readings) => Write::Learned(keys.clone(), *readings),
        })
    }

    /// Whether the writer sends it again until the server takes it: a hold
    /// (one 429 holds the fleet, late rather than never) and a probe's
    /// outcome (else its lease holds every other process until it expires).
    /// An allowance is not: the next response brings a fresh one.
    fn kept(&self) -> bool {
        !matches!(self, Write::Allow(..) | Write::Learned(..))
    }
}

impl RedisStore {
    /// A store on the server at `url` (`redis://[:password@]host[:port][/db]`,
    /// `rediss://…`, `redis+unix:///path/to/socket`). Fails only for a URL
    /// that is not one; a server that does not answer within a second is an
    /// outage (see above): the store works once it answers.
    ///
    /// ```
    /// use nika_retry::upstream::RedisStore;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = RedisStore::connect("http://:hunter2@example.com").await.unwrap_err();
    /// assert!(!err.to_string().contains("hunter2"));
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a URL that is not a Redis URL (the URL is not in
    /// the error: it may hold a password).
    pub async fn connect(url: &str) -> io::Result<RedisStore> {
        let client = Client::open(url).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a Redis URL ({:?})", e.kind()),
            )
        })?;
        RedisStore::from_client(client).await
    }

    /// A store on `client`'s server, connected through a
    /// [`ConnectionManager`] that reconnects. Must be called inside the
    /// tokio runtime that runs the calls (its tasks live there).
    ///
    /// ```no_run
    /// use nika_retry::upstream::RedisStore;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis+unix:///run/redis/redis.sock")?;
    /// let store = RedisStore::from_client(client).await?;
    /// assert_eq!(store.outages(), 0);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// When the connection manager cannot be made (not for a server that
    /// does not answer).
    pub async fn from_client(client: Client) -> io::Result<RedisStore> {
        let info = client.get_connection_info();
        let at = match info.addr() {
            ConnectionAddr::Unix(path) => format!("redis at {}", path.display()),
            addr => format!("redis at {addr}"),
        };
        let secret = info
            .redis_settings()
            .password()
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(FIRST_ANSWER))
            .set_response_timeout(Some(FIRST_ANSWER))
            .set_max_delay(Duration::from_secs(1));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| io::Error::other(format!("no connection manager ({:?})", e.kind())))?;
        let (writes, queue) = mpsc::channel(QUEUED_WRITES);
        let store = RedisStore {
            inner: Arc::new(Inner {
                connection,
                health: Health::default(),
                at,
                secret,
                writes,
                wait: AtomicU64::new(millis(STORE_WAIT) * 1_000_000),
                client,
                lent: lent::Lent::default(),
                scripts: Scripts {
                    held_for: Script::new(scripts::HELD_FOR),
                    hold: Script::new(scripts::HOLD),
                    attempt: Script::new(scripts::ATTEMPT),
                    probe: Script::new(scripts::PROBE),
                    probed: Script::new(scripts::PROBED),
                    admit: Script::new(buckets::ADMIT),
                    learn: Script::new(buckets::LEARN),
                },
            }),
        };
        tokio::spawn(writer(Arc::downgrade(&store.inner), queue));
        let mut connection = store.inner.connection.clone();
        let ping = redis::cmd("PING");
        let ping = ping.query_async::<()>(&mut connection);
        match tokio::time::timeout(FIRST_ANSWER, ping).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => store.inner.failed(&e.to_string()),
            Err(_) => store.inner.failed("no answer"),
        }
        Ok(store)
    }

    /// This store (and its clones), waiting at most `wait` for each answer
    /// of the server before it is passed over ([`STORE_WAIT`], 50 ms, by
    /// default): for a server farther away than the same host or rack, or
    /// a loaded machine. While the server does not answer, one attempt per
    /// half second waits this long.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use nika_retry::upstream::RedisStore;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let store = RedisStore::connect("redis://redis.internal:6379/0")
    ///     .await?
    ///     .with_wait(Duration::from_millis(200));
    /// # let _ = store;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn with_wait(self, wait: Duration) -> RedisStore {
        let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        self.inner.wait.store(nanos, Ordering::Relaxed);
        self
    }

    /// How many outages this store has met (each warned of once).
    ///
    /// ```no_run
    /// # async fn f(store: nika_retry::upstream::RedisStore) {
    /// if store.outages() > 0 {
    ///     eprintln!("{store} was down at least once");
    /// }
    /// # }
    /// ```
    pub fn outages(&self) -> u64 {
        self.inner.health.outages()
    }

    /// Whether the server did not answer the last time it was asked.
    ///
    /// ```no_run
    /// # async fn f(store: nika_retry::upstream::RedisStore) {
    /// assert!(!store.is_down(), "{store} answers");
    /// # }
    /// ```
    pub fn is_down(&self) -> bool {
        self.inner.health.is_down()
    }
}

impl Inner {
    /// Runs `request` unless the server is passed over for now, at most
    /// [`STORE_WAIT`].
    async fn call<T>(&self, request: impl Future<Output = redis::RedisResult<T>>) -> io::Result<T> {
        if !self.health.ask() {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("{} does not answer", self.at),
            ));
        }
        match tokio::time::timeout(self.wait(), request).await {
            Ok(Ok(answer)) => {
                self.health.answered(&self.at);
                Ok(answer)
            }
            Ok(Err(e)) => {
                let why = self.redact(e.to_string());
                self.failed(&why);
                Err(io::Error::other(why))
            }
            Err(_) => {
                self.failed("no answer");
                Err(io::Error::new(io::ErrorKind::TimedOut, "no answer"))
            }
        }
    }

    fn wait(&self) -> Duration {
        Duration::from_nanos(self.wait.load(Ordering::Relaxed))
    }

    fn failed(&self, why: &str) {
        self.health.failed(&self.at, &self.redact(why.to_owned()));
    }

    fn redact(&self, text: String) -> String {
        match &self.secret {
            Some(secret) => text.replace(secret.as_str(), "***"),
            None => text,
        }
    }

    async fn write(&self, write: Write) -> io::Result<()> {
        let mut connection = self.connection.clone();
        let max = millis(MAX_HOLD);
        match write {
            Write::Hold(keys, held_for, reason) => {
                let mut script = self.scripts.hold.key(keys.hold);
                let request = script
                    .key(keys.probe)
                    .arg(millis(held_for))
                    .arg(reason_text(reason))
                    .arg(max)
                    .invoke_async::<i64>(&mut connection);
                self.call(request).await.map(drop)
            }
            Write::Allow(keys, remaining, reset) => {
                let mut set = redis::cmd("SET");
                set.arg(keys.allowance)
                    .arg(remaining)
                    .arg("PX")
                    .arg(millis(reset));
                let request = set.query_async::<()>(&mut connection);
                self.call(request).await
            }
            Write::Probed(keys, token, released) => {
                let mut script = self.scripts.probed.key(keys.probe);
                let request = script
                    .arg(token.to_string())
                    .arg(if released { "1" } else { "0" })
                    .arg(millis(RELEASED_FOR))
                    .invoke_async::<i64>(&mut connection);
                self.call(request).await.map(drop)
            }
            Write::Learned(keys, readings) => self.learn(keys, readings).await,
        }
    }

    fn send(&self, write: Write) {
        // Full only while the server takes nothing: the in-process state
        // has what is dropped.
        let _ = self.writes.try_send((write, Instant::now()));
    }

    /// A `{left ms, reason}` answer as a hold, if any.
    fn held(left: i64, reason: &[u8]) -> Option<(Duration, HoldReason)> {
        let left = Duration::from_millis(u64::try_from(left).ok()?).min(MAX_HOLD);
        (!left.is_zero()).then(|| (left, reason_of(reason)))
    }
}

/// Sends the writes in the order they were made (a probe's hold before its
/// outcome); a hold or a probe's outcome the server did not take (down,
/// slow, passed over) is sent again until it is taken or no longer matters,
/// the writes behind it waiting; ends with the store.
async fn writer(inner: std::sync::Weak<Inner>, mut queue: mpsc::Receiver<(Write, Instant)>) {
    while let Some((write, made)) = queue.recv().await {
        while let Some(now) = write.after(made.elapsed()) {
            let Some(store) = inner.upgrade() else { return };
            let probed = match &now {
                Write::Probed(keys, token, _) => Some((keys.probe.clone(), *token)),
                _ => None,
            };
            if store.write(now).await.is_ok() {
                if let Some((probe, token)) = probed {
                    store.lent.given_back(&probe, token);
                }
                break;
            }
            if !write.kept() {
                break;
            }
            drop(store);
            tokio::time::sleep(WRITE_AGAIN).await;
        }
    }
}

/// A duration in whole milliseconds, at least 1 (`PX 0` is an error).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Store for RedisStore {
    fn held_for<'a>(
        &'a self,
        upstream: &'a str,
    ) -> StoreFuture<'a, Option<(Duration, HoldReason)>> {
        Box::pin(async move {
            let inner = &self.inner;
            let mut connection = inner.connection.clone();
            let mut script = inner.scripts.held_for.key(Keys::of(upstream).hold);
            let request = script
                .arg(millis(MAX_HOLD))
                .invoke_async::<(i64, Vec<u8>)>(&mut connection);
            let (left, reason) = inner.call(request).await?;
            Ok(Inner::held(left, &reason))
        })
    }

    fn hold(&self, upstream: &str, held_for: Duration, reason: HoldReason) {
        if !held_for.is_zero() {
            let held_for = held_for.min(MAX_HOLD);
            self.inner
                .send(Write::Hold(Keys::of(upstream), held_for, reason));
        }
    }

    fn attempt<'a>(
        &'a self,
        upstream: &'a str,
        token: u64,
    ) -> StoreFuture<'a, Option<(Duration, HoldReason)>> {
        Box::pin(async move {
            let inner = &self.inner;
            let keys = Keys::of(upstream);
            let mut connection = inner.connection.clone();
            let mut script = inner.scripts.attempt.key(keys.hold);
            let request = script
                .key(keys.allowance)
                .key(keys.probe)
                .arg(millis(MAX_HOLD))
                .arg(token.to_string())
                .arg(millis(PROBE_LEASE))
                .invoke_async::<(i64, Vec<u8>)>(&mut connection);
            let (left, reason) = inner.call(request).await?;
            if left < 0 {
                return Ok(Some((PROBE_OUT, HoldReason::ServerHint)));
            }
            Ok(Inner::held(left, &reason))
        })
    }

    fn allow(&self, upstream: &str, remaining: u32, reset: Duration) {
        if remaining > 0 && !reset.is_zero() {
            let reset = reset.min(MAX_HOLD);
            self.inner
                .send(Write::Allow(Keys::of(upstream), remaining, reset));
        }
    }

    fn probe<'a>(&'a self, upstream: &'a str, token: u64) -> StoreFuture<'a, ProbeTurn> {
        Box::pin(async move {
            let inner = &self.inner;
            let keys = Keys::of(upstream);
            let mut connection = inner.connection.clone();
            let mut script = inner.scripts.probe.key(keys.hold);
            let request = script
                .key(&keys.probe)
                .arg(token.to_string())
                .arg(millis(PROBE_LEASE))
                .arg(millis(MAX_HOLD))
                .invoke_async::<(i64, i64, Vec<u8>)>(&mut connection);
            Ok(match inner.call(request).await? {
                (1, _, _) => ProbeTurn::Wait,
                (2, left, reason) => match Inner::held(left, &reason) {
                    Some((left, reason)) => ProbeTurn::Held(left, reason),
                    None => ProbeTurn::Go,
                },
                _ => {
                    inner.lent.taken(&keys.probe, token);
                    ProbeTurn::Go
                }
            })
        })
    }

    fn probed(&self, upstream: &str, token: u64, released: bool) {
        let keys = Keys::of(upstream);
        self.inner.lent.ended(&keys.probe, token, released);
        self.inner.send(Write::Probed(keys, token, released));
    }

    fn admit<'a>(
        &'a self,
        upstream: &'a str,
        token: u64,
        spend: [Spend; 2],
    ) -> StoreFuture<'a, Admission> {
        Box::pin(self.inner.admit(upstream, token, spend))
    }

    fn learned(&self, upstream: &str, readings: [Reading; 2]) {
        if readings.iter().any(|r| r.limit > 0 && !r.window.is_zero()) {
            self.inner
                .send(Write::Learned(Keys::of(upstream), readings));
        }
    }

    fn wait(&self) -> Duration {
        self.inner.wait()
    }
}

impl Drop for Inner {
    /// The last clone of the store is dropped: the probes' leases whose
    /// outcome its writer did not send yet are given back now (blocking,
    /// at most the store's wait per round trip).
    fn drop(&mut self) {
        let wait = self.wait();
        self.lent
            .give_back_all(&self.client, &self.scripts.probed, wait);
    }
}

impl fmt::Display for RedisStore {
    /// Where the server is (`redis at 127.0.0.1:6379`), never its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.inner.at)
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("at", &self.inner.at)
            .field("down", &self.is_down())
            .finish_non_exhaustive()
    }
}
