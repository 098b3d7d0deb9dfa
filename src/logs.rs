//! What a `tracing_subscriber::fmt` subscriber prints, kept in memory, for
//! the tests that read the retry events' log lines.

use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::Level;
use tracing_subscriber::fmt::MakeWriter;

/// The clock of the runtime [`logged`] runs its work on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Real time.
    Real,
    /// Paused: it advances to the next timer whenever the runtime is idle.
    Paused,
}

/// Runs `work` to its end on a current-thread runtime with `clock`, under
/// a `fmt` subscriber of `max` and below (no colours): what `work` returned,
/// and the lines the subscriber printed.
///
/// ```
/// use nika_retry_tests::logs::{Clock, logged};
/// use tracing::Level;
///
/// let (n, text) = logged(Level::INFO, Clock::Paused, async {
///     tokio::time::sleep(std::time::Duration::from_secs(60)).await;
///     tracing::info!("slept");
///     tracing::debug!("not printed");
///     1
/// });
/// assert_eq!(n, 1);
/// assert!(text.contains("INFO") && text.contains("slept"));
/// assert!(!text.contains("not printed"));
/// ```
pub fn logged<F: Future>(max: Level, clock: Clock, work: F) -> (F::Output, String) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_max_level(max)
        .with_ansi(false)
        .finish();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(clock == Clock::Paused)
        .build()
        .expect("a current-thread runtime");
    let out = tracing::subscriber::with_default(subscriber, || runtime.block_on(work));
    (out, captured.text())
}

/// A writer for `fmt().with_writer(…)` whose clones share one buffer.
///
/// ```
/// use nika_retry_tests::logs::Captured;
///
/// let captured = Captured::default();
/// let subscriber = tracing_subscriber::fmt()
///     .with_writer(captured.clone())
///     .with_ansi(false)
///     .finish();
/// tracing::subscriber::with_default(subscriber, || tracing::warn!("hello"));
/// assert!(captured.text().contains("WARN"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}
