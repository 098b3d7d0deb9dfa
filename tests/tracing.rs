//! `tracing` output of the retry events, and `#[instrument]` beside
//! `#[retry]`. Alone in its binary and run one at a time: tracing caches
//! callsite interest process-wide, so tests on other threads would race it.

use std::sync::Mutex;

use nika_retry::retry;
use nika_retry_tests::logs::Captured;
use nika_retry_tests::{ProviderError, Script};

#[retry(layer = "http", jitter = 0.0)]
async fn http(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

static SERIAL: Mutex<()> = Mutex::new(());

/// The lines `tracing` prints while `run` runs on a paused clock, with a
/// line for each span created.
fn traced(run: impl std::future::Future<Output = ()>) -> String {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || runtime.block_on(run));
    captured.text()
}

#[test]
fn tracing_events_carry_the_layer_field() {
    let text = traced(async {
        let script = Script::new(1, ProviderError::status(503));
        assert_eq!(http(&script).await, Ok(2));
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("WARN") && lines[0].contains("nika_retry:"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("layer=\"http\"") && lines[0].contains("outcome=\"retrying\""),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("delay_ms=250"), "{}", lines[0]);
    assert!(
        lines[1].contains("DEBUG") && lines[1].contains("outcome=\"recovered\""),
        "{}",
        lines[1]
    );
}

/// `#[instrument]` below `#[retry]`, with an owned argument: it wraps the
/// whole expanded fn.
#[retry(layer = "http", jitter = 0.0, clone(prompt))]
#[tracing::instrument(skip(script))]
async fn instrumented(prompt: String, script: &Script) -> Result<usize, ProviderError> {
    script.attempt()?;
    Ok(prompt.len())
}

#[test]
fn one_span_covers_the_whole_call_and_its_retry_events() {
    let text = traced(async {
        let script = Script::new(2, ProviderError::status(503));
        assert_eq!(instrumented("hello".to_owned(), &script).await, Ok(5));
        assert_eq!(script.attempts(), 3);
    });
    let spans = text.lines().filter(|l| l.contains(": new")).count();
    assert_eq!(spans, 1, "{text}");
    let events: Vec<&str> = text.lines().filter(|l| l.contains("outcome=")).collect();
    assert_eq!(events.len(), 3, "{text}");
    for event in events {
        assert!(event.contains("instrumented{prompt=\"hello\"}"), "{event}");
    }
}
