//! Fixtures for tests of what the service logs (feature `testing`).
//!
//! ```
//! use aggregation_core::testing::CapturedLog;
//!
//! let log = CapturedLog::default();
//! let writer = log.clone();
//! // tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false) ...
//! # let _ = writer;
//! assert!(log.lines().is_empty());
//! ```

use std::sync::{Arc, Mutex, PoisonError};

/// An `io::Write` that keeps what is written, for a `tracing-subscriber` `fmt` writer; clones
/// share the text.
#[derive(Debug, Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Every line written so far (invalid UTF-8 replaced).
    pub fn lines(&self) -> Vec<String> {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}
