//! Transparency: every `async fn` that compiles without the attributes
//! compiles with them and means the same, except for the retries (docs/attributes.md,
//! "Writing the body"): return-position coercions in the tail and in an
//! early `return`, `#[async_trait]` methods, `mut` and destructured
//! arguments, `clone(self)`, the body's own names beside the generated ones,
//! renamed and re-exported attributes. Each shape here fails its first
//! attempts (a counting error source), so the retries really happen, and
//! must return what the plain fn would return from one attempt.

use std::fmt::Display;
use std::sync::Arc;

use nika_retry::retry;
use nika_retry_tests::{ProviderError, Script};

fn busy() -> ProviderError {
    ProviderError::status(503)
}

/// Fails the first two attempts.
fn flaky() -> Script {
    Script::new(2, busy())
}

// ---- Return-position coercions, in the tail and in an early `return`.

struct Buffer {
    buf: String,
    script: Script,
}

impl Buffer {
    #[retry(layer = "provider", backoff = "1ms")]
    async fn as_str(&self) -> Result<&str, ProviderError> {
        self.script.attempt()?;
        Ok(&self.buf) // &String to &str
    }

    #[retry(layer = "provider", backoff = "1ms")]
    async fn boxed(&self, early: bool) -> Result<Box<dyn Display + Send>, ProviderError> {
        self.script.attempt()?;
        if early {
            return Ok(Box::new("early")); // Box<&str> to Box<dyn Display>
        }
        Ok(Box::new(5u32))
    }
}

#[tokio::test(start_paused = true)]
async fn return_position_coercions() {
    let buffer = Buffer {
        buf: "text".to_owned(),
        script: flaky(),
    };
    assert_eq!(buffer.as_str().await, Ok("text"));
    assert_eq!(buffer.script.attempts(), 3);

    // The early `return` and the tail, each after two failed attempts.
    for (early, expected) in [(true, "early"), (false, "5")] {
        let buffer = Buffer {
            buf: String::new(),
            script: flaky(),
        };
        let out = buffer.boxed(early).await.map(|d| d.to_string());
        assert_eq!(out.as_deref(), Ok(expected));
        assert_eq!(buffer.script.attempts(), 3, "{expected}");
    }
}

#[async_trait::async_trait]
trait Render: Send + Sync {
    async fn render(&self, early: bool) -> Result<Box<dyn Display + Send>, ProviderError>;
    async fn append(&self, s: String) -> Result<String, ProviderError>;
    async fn consume(self: Arc<Self>) -> Result<usize, ProviderError>;
}

struct Page(Script);

#[async_trait::async_trait]
impl Render for Page {
    #[retry(layer = "provider", backoff = "1ms")]
    async fn render(&self, early: bool) -> Result<Box<dyn Display + Send>, ProviderError> {
        self.0.attempt()?;
        if early {
            return Ok(Box::new("e"));
        }
        Ok(Box::new(1u8))
    }

    /// A `mut` argument of an `#[async_trait]` method, cloned per attempt.
    #[retry(layer = "provider", backoff = "1ms", clone(s))]
    async fn append(&self, mut s: String) -> Result<String, ProviderError> {
        s.push('!');
        self.0.attempt()?;
        Ok(s)
    }

    /// `self: Arc<Self>` moved by the body, cloned per attempt.
    #[retry(layer = "provider", backoff = "1ms", clone(self))]
    async fn consume(self: Arc<Self>) -> Result<usize, ProviderError> {
        self.0.attempt()?;
        Ok(owned_count(self))
    }
}

/// An `#[async_trait]` method has no `async` once expanded: a `block_on` in
/// its body is the user's own (here inside `spawn_blocking`), not the mark
/// `#[tokio::test]` above `#[retry]` would leave.
#[async_trait::async_trait]
trait Blocking: Send + Sync {
    async fn blocking_part(&self) -> Result<u8, ProviderError>;
}

#[async_trait::async_trait]
impl Blocking for Page {
    #[retry(layer = "provider", backoff = "1ms")]
    async fn blocking_part(&self) -> Result<u8, ProviderError> {
        self.0.attempt()?;
        let blocking = || tokio::runtime::Handle::current().block_on(async { 7u8 });
        Ok(tokio::task::spawn_blocking(blocking).await.unwrap_or(0))
    }
}

fn owned_count<T>(value: Arc<T>) -> usize {
    Arc::strong_count(&value)
}

#[tokio::test(start_paused = true)]
async fn async_trait_methods() {
    for (early, expected) in [(true, "e"), (false, "1")] {
        let page = Page(flaky());
        let out = page.render(early).await.map(|d| d.to_string());
        assert_eq!(out.as_deref(), Ok(expected));
        assert_eq!(page.0.attempts(), 3, "{expected}");
    }

    let page = Page(flaky());
    assert_eq!(page.append("hi".to_owned()).await.as_deref(), Ok("hi!"));

    let page = Arc::new(Page(flaky()));
    // The caller's Arc, the fn's and the attempt's clone.
    assert_eq!(Arc::clone(&page).consume().await, Ok(3));
    assert_eq!(page.0.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn block_on_in_an_async_trait_method() {
    let page = Page(flaky());
    assert_eq!(page.blocking_part().await, Ok(7));
    assert_eq!(page.0.attempts(), 3);
}

// ---- `mut` arguments: each attempt starts from the caller's value.

#[retry(layer = "provider", backoff = "1ms", clone(n))]
async fn add_ten(mut n: u32, script: &Script) -> Result<u32, ProviderError> {
    n += 10;
    script.attempt()?;
    Ok(n)
}

#[retry(layer = "provider", backoff = "1ms", clone(v))]
async fn push_one(mut v: Vec<u32>, script: &Script) -> Result<Vec<u32>, ProviderError> {
    v.push(1);
    script.attempt()?;
    Ok(v)
}

#[tokio::test(start_paused = true)]
async fn mut_arguments_start_from_the_callers_value() {
    let script = flaky();
    assert_eq!(add_ten(0, &script).await, Ok(10));
    assert_eq!(script.attempts(), 3);
    let script = flaky();
    assert_eq!(push_one(vec![7], &script).await, Ok(vec![7, 1]));
}

// ---- `clone(self)` and destructured arguments.

#[derive(Clone)]
struct Job {
    name: String,
    script: Arc<Script>,
}

impl Job {
    #[retry(layer = "provider", backoff = "1ms", clone(self))]
    async fn into_name(self) -> Result<String, ProviderError> {
        self.script.attempt()?;
        Ok(self.name)
    }

    #[retry(layer = "provider", backoff = "1ms", clone(self))]
    async fn renamed(mut self, suffix: &str) -> Result<String, ProviderError> {
        self.name.push_str(suffix);
        self.script.attempt()?;
        Ok(self.name)
    }

    /// `self` in a `use` tree and in `pub(self)` is not the receiver: the
    /// renaming `clone(self)` does in the body leaves both alone.
    #[retry(layer = "provider", backoff = "1ms", clone(self))]
    async fn described(self) -> Result<String, ProviderError> {
        use std::fmt::{self, Write as _};
        struct Tag {
            pub(self) text: String,
        }
        self.script.attempt()?;
        let mut text = String::new();
        let written: fmt::Result = write!(text, "<{}>", self.name);
        Ok(written.map_or_else(|_| String::new(), |()| Tag { text }.text))
    }

    #[retry(layer = "provider", backoff = "1ms", clone(self))]
    async fn shared(self: Arc<Self>) -> Result<usize, ProviderError> {
        self.script.attempt()?;
        Ok(owned_count(self))
    }
}

#[tokio::test(start_paused = true)]
async fn clone_self_beside_use_trees_and_pub_self() {
    let job = Job {
        name: "job".to_owned(),
        script: Arc::new(flaky()),
    };
    assert_eq!(job.clone().described().await.as_deref(), Ok("<job>"));
    assert_eq!(job.script.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn clone_self_by_value_and_arc() {
    let job = Job {
        name: "job".to_owned(),
        script: Arc::new(flaky()),
    };
    assert_eq!(job.clone().into_name().await.as_deref(), Ok("job"));
    let job = Job {
        script: Arc::new(flaky()),
        ..job
    };
    assert_eq!(job.clone().renamed("-1").await.as_deref(), Ok("job-1"));
    assert_eq!(job.script.attempts(), 3);
    let job = Arc::new(Job {
        script: Arc::new(flaky()),
        ..job
    });
    assert_eq!(Arc::clone(&job).shared().await, Ok(3));
}

fn take(s: String) -> usize {
    s.len()
}

#[retry(layer = "provider", backoff = "1ms", clone(a))]
async fn destructured((a, b): (String, u32), script: &Script) -> Result<usize, ProviderError> {
    script.attempt()?;
    Ok(take(a) + b as usize)
}

#[retry(layer = "provider", backoff = "1ms", clone(a))]
async fn destructured_mut(
    (mut a, b): (String, u32),
    script: &Script,
) -> Result<String, ProviderError> {
    a.push('+');
    script.attempt()?;
    Ok(format!("{a}{b}"))
}

#[tokio::test(start_paused = true)]
async fn destructured_arguments() {
    let script = flaky();
    assert_eq!(destructured(("abc".to_owned(), 1), &script).await, Ok(4));
    let script = flaky();
    assert_eq!(
        destructured_mut(("a".to_owned(), 2), &script)
            .await
            .as_deref(),
        Ok("a+2")
    );
}

// ---- Hygiene: generated names are not the body's.

#[allow(dead_code)]
const __NIKA_SITE: u32 = 7;

#[retry(layer = "provider", backoff = "1ms")]
async fn user_names(script: &Script) -> Result<u32, ProviderError> {
    let __nika_call = 1;
    let __nika_result = 2;
    let __nika_delay = 3;
    let __nika_ret = 4;
    script.attempt()?;
    Ok(__NIKA_SITE + __nika_call + __nika_result + __nika_delay + __nika_ret)
}

#[tokio::test(start_paused = true)]
async fn generated_names_are_out_of_the_bodys_reach() {
    let script = flaky();
    assert_eq!(user_names(&script).await, Ok(17));
    assert_eq!(script.attempts(), 3);
}

// ---- Renamed and re-exported attributes keep their meaning.

/// Re-exports the whole crate, so that `crate = "my"` can name it.
mod my {
    pub use nika_retry::*;
}

use nika_retry::timeout as t;

/// Under another name above `#[retry]`, `attempt` still bounds each attempt:
/// the slow first attempts expire and are retried, the fast one succeeds.
#[t(attempt = "1s")]
#[retry(layer = "provider", backoff = "1ms", jitter = 0.0)]
async fn renamed(script: &Script) -> Result<u32, ProviderError> {
    let n = script.attempt()?;
    if n < 3 {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
    Ok(n)
}

// A re-export path is known as nika-retry's through `crate`.
#[my::retry(layer = "provider", backoff = "1ms", jitter = 0.0, crate = "my")]
#[my::timeout(attempt = "1s")]
async fn re_exported(script: &Script) -> Result<u32, ProviderError> {
    let n = script.attempt()?;
    if n < 2 {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn renamed_attributes_bound_each_attempt() {
    // Attempts 1 and 2 run past their second and are retried.
    let script = Script::new(0, busy());
    assert_eq!(renamed(&script).await, Ok(3));
    let script = Script::new(0, busy());
    assert_eq!(re_exported(&script).await, Ok(2));
}
