//! CAMT.052/053/054 (ISO 20022 bank-to-customer cash management) statements.
//!
//! Placeholder of the import framework: the `camt` parser replaces this file with the reader.
//! Until then no file is detected as CAMT, and an upload named CAMT by its `format` part is
//! refused (400) as unreadable.

#![allow(dead_code, reason = "a placeholder until the parser lands")]

use super::model::{ParseError, ParsedFile};

/// The kind of CAMT message a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CamtMessage {
    /// camt.052, the account report.
    Report,
    /// camt.053, the statement.
    Statement,
    /// camt.054, the debit/credit notification.
    Notification,
}

/// The CAMT message of a file, by its namespace (`None`: not CAMT).
pub(crate) fn sniff(_bytes: &[u8]) -> Option<CamtMessage> {
    None
}

/// Reads a CAMT file.
pub(crate) fn parse(_bytes: &[u8]) -> Result<ParsedFile, ParseError> {
    Err(ParseError::new(0, "CAMT files cannot be read yet"))
}
