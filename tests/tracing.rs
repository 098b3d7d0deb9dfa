//! `tracing` output of the retry events. Alone in its binary: tracing caches
//! callsite interest process-wide, so other tests on other threads would race it.

use std::sync::{Arc, Mutex};

use nika_retry::retry;
use nika_retry_tests::{ProviderError, Script};

#[retry(layer = "http", jitter = 0.0)]
async fn http(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn tracing_events_carry_the_layer_field() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let script = Script::new(1, ProviderError::status(503));
            assert_eq!(http(&script).await, Ok(2));
        });
    });
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
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
