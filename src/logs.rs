//! What a `tracing_subscriber::fmt` subscriber prints, kept in memory, for
//! the tests that read the retry events' log lines.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

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
