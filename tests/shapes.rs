//! The signature shapes `#[retry]` must keep working: methods, traits,
//! `#[async_trait]`, generics, `?` and `return`, and `Send` futures.

use std::fmt::Debug;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::{retry, timeout};
use nika_retry_tests::{ProviderError, Script};

fn busy() -> ProviderError {
    ProviderError::status(503)
}

struct Counter {
    calls: u32,
    fail_until: u32,
}

impl Counter {
    /// `&mut self` is lent to each attempt afresh.
    #[retry(layer = "provider", backoff = "1ms", jitter = 0.0)]
    async fn bump(&mut self) -> Result<u32, ProviderError> {
        self.calls += 1;
        if self.calls < self.fail_until {
            return Err(busy());
        }
        Ok(self.calls)
    }

    /// `Self` and an associated fn without a receiver.
    #[retry(layer = "provider", backoff = "1ms")]
    async fn make(script: &Script) -> Result<Self, ProviderError> {
        let n = script.attempt()?;
        Ok(Self {
            calls: n,
            fail_until: 0,
        })
    }
}

#[tokio::test(start_paused = true)]
async fn mut_self_methods_and_associated_fns() {
    let mut counter = Counter {
        calls: 0,
        fail_until: 3,
    };
    assert_eq!(counter.bump().await, Ok(3));
    assert_eq!(counter.calls, 3);
    let script = Script::new(2, busy());
    assert_eq!(Counter::make(&script).await.map(|c| c.calls), Ok(3));
}

/// A `mut` binding of a `&mut T` or a `Pin<&mut T>` is the caller's state:
/// each attempt reborrows it, and what an attempt writes through it stays
/// for the next (`mut` is needed for `as_mut()` and to lend `&mut out`).
impl Counter {
    fn bump_pinned(self: Pin<&mut Self>) -> u32 {
        let this = self.get_mut();
        this.calls += 1;
        this.calls
    }

    #[retry(layer = "provider", backoff = "1ms", jitter = 0.0)]
    async fn pinned(mut self: Pin<&mut Self>) -> Result<u32, ProviderError> {
        if self.as_mut().bump_pinned() < self.fail_until {
            return Err(busy());
        }
        Ok(self.calls)
    }
}

fn record(mut out: impl std::io::Write, line: &str) {
    let _ = writeln!(out, "{line}");
}

#[retry(layer = "provider", backoff = "1ms", jitter = 0.0)]
async fn logged(mut out: &mut Vec<u8>, script: &Script) -> Result<usize, ProviderError> {
    record(&mut out, "attempt");
    script.attempt()?;
    Ok(out.len())
}

#[tokio::test(start_paused = true)]
async fn mut_bindings_of_exclusive_borrows_are_the_callers_state() {
    let mut counter = Counter {
        calls: 0,
        fail_until: 3,
    };
    assert_eq!(Pin::new(&mut counter).pinned().await, Ok(3));
    assert_eq!(counter.calls, 3);

    let mut log = Vec::new();
    let script = Script::new(2, busy());
    assert_eq!(logged(&mut log, &script).await, Ok(3 * "attempt\n".len()));
    assert_eq!(log, b"attempt\nattempt\nattempt\n");
}

trait Provider {
    fn complete(&self, prompt: &str) -> impl Future<Output = Result<String, ProviderError>> + Send;
}

struct Echo(Script);

impl Provider for Echo {
    #[retry(layer = "provider", backoff = "1ms")]
    async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
        self.0.attempt()?;
        Ok(prompt.to_uppercase())
    }
}

#[tokio::test(start_paused = true)]
async fn native_async_fn_in_a_trait_impl() {
    let echo = Echo(Script::new(1, busy()));
    assert_eq!(echo.complete("hi").await.as_deref(), Ok("HI"));
    assert_eq!(echo.0.attempts(), 2);
}

#[async_trait::async_trait]
trait Tool: Send + Sync {
    async fn run(&self, input: String) -> Result<usize, ProviderError>;
}

struct Wc(Script);

#[async_trait::async_trait]
impl Tool for Wc {
    /// Inside `#[async_trait]` the macro sees `Box::pin(async move { … })`
    /// and retries the inner block; `input` moves in once, so it is borrowed here.
    #[retry(layer = "provider", backoff = "1ms")]
    #[timeout(attempt = "1s")]
    async fn run(&self, input: String) -> Result<usize, ProviderError> {
        self.0.attempt()?;
        Ok(input.split_whitespace().count())
    }
}

#[tokio::test(start_paused = true)]
async fn async_trait_methods_are_retried() {
    let wc = Wc(Script::new(2, busy()));
    let tool: &dyn Tool = &wc;
    assert_eq!(tool.run("one two three".to_owned()).await, Ok(3));
    assert_eq!(wc.0.attempts(), 3);
}

/// Generics, a lifetime, a where-clause and an `impl Trait` argument.
#[retry(layer = "provider", backoff = "1ms")]
async fn generic<'a, T, F>(
    items: &'a [T],
    pick: F,
    script: &Script,
    label: impl AsRef<str>,
) -> Result<&'a T, ProviderError>
where
    T: Debug + Sync,
    F: Fn(&[T]) -> Option<&T> + Sync,
{
    script.attempt()?;
    let _ = label.as_ref();
    pick(items).ok_or_else(|| ProviderError::status(404))
}

#[tokio::test(start_paused = true)]
async fn generics_lifetimes_where_clauses_and_impl_trait() {
    let items = [1, 2, 3];
    let script = Script::new(1, busy());
    assert_eq!(generic(&items, |s| s.last(), &script, "last").await, Ok(&3));
    let script = Script::new(0, busy());
    assert_eq!(
        generic(&items, |_| None, &script, "none").await,
        Err(ProviderError::status(404))
    );
    assert_eq!(script.attempts(), 1, "404 is not retried");
}

/// A by-value argument the body moves is cloned per attempt.
#[retry(layer = "provider", backoff = "1ms", clone(body))]
async fn consume(body: Vec<u8>, script: &Script) -> Result<usize, ProviderError> {
    script.attempt()?;
    let owned: Vec<u8> = body;
    Ok(owned.len())
}

#[tokio::test(start_paused = true)]
async fn clone_gives_each_attempt_its_own_copy() {
    let script = Script::new(2, busy());
    assert_eq!(consume(vec![1, 2, 3], &script).await, Ok(3));
    assert_eq!(script.attempts(), 3);
}

/// `impl Trait` in the return type.
#[retry(layer = "provider", backoff = "1ms")]
async fn evens(script: &Script) -> Result<impl Iterator<Item = u32>, ProviderError> {
    let n = script.attempt()?;
    Ok((0..n * 2).filter(|x| x % 2 == 0))
}

#[tokio::test(start_paused = true)]
async fn impl_trait_in_the_return_type() {
    let script = Script::new(1, busy());
    assert_eq!(evens(&script).await.unwrap().collect::<Vec<_>>(), [0, 2]);
}

static SPAWNED: AtomicU32 = AtomicU32::new(0);

#[retry(layer = "http", backoff = "1ms")]
#[timeout(read = "1s", total = "10s")]
async fn spawned() -> Result<u32, ProviderError> {
    let n = SPAWNED.fetch_add(1, Ordering::SeqCst) + 1;
    tokio::task::yield_now().await;
    if n < 3 { Err(busy()) } else { Ok(n) }
}

fn assert_send<T: Send>(_: &T) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_future_is_send_and_runs_on_a_spawned_task() {
    let fut = spawned();
    assert_send(&fut);
    assert_eq!(tokio::spawn(fut).await.unwrap(), Ok(3));
}
