//! SWIFT MT940 statements and MT942 interim reports.
//!
//! Placeholder of the import framework: the `mt940` parser replaces this file with the
//! reader. Until then no file is detected as MT940/MT942, and an upload named so by its
//! `format` part is refused (400) as unreadable.

#![allow(dead_code, reason = "a placeholder until the parser lands")]

use super::model::{ParseError, ParsedFile};

/// The kind of SWIFT message a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MtMessage {
    /// MT940, the customer statement.
    Mt940,
    /// MT942, the interim transaction report.
    Mt942,
}

/// The SWIFT message of a file (`None`: not MT940/MT942).
pub(crate) fn sniff(_bytes: &[u8]) -> Option<MtMessage> {
    None
}

/// Reads an MT940 or MT942 file.
pub(crate) fn parse(_bytes: &[u8]) -> Result<ParsedFile, ParseError> {
    Err(ParseError::new(
        0,
        "MT940 and MT942 files cannot be read yet",
    ))
}
