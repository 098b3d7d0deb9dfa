//! A real `redis-server` for the tests of a shared upstream store: started on
//! a unix socket in a directory of its own, with nothing persisted, and
//! stopped (its directory removed) when dropped. It can be killed and started
//! again on the same socket, as a restart in production is.
//!
//! Needs Debian's package `redis-server` (`apt-get install -y redis-server`);
//! without it, [`RedisServer::start`] panics with that advice rather than let
//! a test pass without Redis.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a server may take to answer its first `PING`.
const STARTUP: Duration = Duration::from_secs(10);

/// A `redis-server` of the test's own.
///
/// ```no_run
/// let redis = nika_retry_tests::redis_server::RedisServer::start();
/// assert!(redis.url().starts_with("redis+unix://"));
/// ```
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts one and waits until it answers.
    ///
    /// # Panics
    ///
    /// When `redis-server` is not installed or does not answer within 10 s:
    /// the test needs it, and says which package gives it.
    pub fn start() -> RedisServer {
        static STARTED: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nika-retry-redis-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let mut server = RedisServer { child: None, dir };
        server.run();
        server
    }

    /// The URL a client connects with (`redis+unix:///…/redis.sock`).
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket().display())
    }

    /// The server's unix socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    /// Kills the server (`SIGKILL`: no goodbye to its clients), as a crash
    /// does. Its socket stops answering at once.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // It may have exited on its own already; either way it is gone.
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.socket());
    }

    /// Starts it again on the same socket, empty (nothing was persisted).
    pub fn restart(&mut self) {
        self.kill();
        self.run();
    }

    /// Whether it answers a `PING` now.
    pub fn answers(&self) -> bool {
        ping(&self.socket())
    }

    fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(self.socket())
            .args(["--unixsocketperm", "700"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): these tests need a real Redis; \
                     install Debian's package redis-server (apt-get install -y redis-server)"
                )
            });
        self.child = Some(child);
        let until = Instant::now() + STARTUP;
        while !self.answers() {
            assert!(
                Instant::now() < until,
                "redis-server did not answer on {} within {STARTUP:?}",
                self.socket().display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One `PING` on `socket`, answered `+PONG`.
fn ping(socket: &Path) -> bool {
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return false;
    };
    let timeout = Some(Duration::from_secs(1));
    let mut answer = [0u8; 7];
    stream.set_read_timeout(timeout).is_ok()
        && stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut answer).is_ok()
        && &answer == b"+PONG\r\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_dies_and_comes_back() {
        let mut redis = RedisServer::start();
        assert!(redis.answers());
        redis.kill();
        assert!(!redis.answers(), "a killed server answers nothing");
        redis.restart();
        assert!(redis.answers());
        let dir = redis.dir.clone();
        drop(redis);
        assert!(!dir.exists(), "its directory is removed");
    }
}
