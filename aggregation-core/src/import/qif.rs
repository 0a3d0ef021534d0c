//! QIF (Quicken Interchange Format) files.
//!
//! Placeholder of the import framework: the `qif` parser replaces this file with the reader.
//! Until then no file is detected as QIF by its content, and a QIF upload is refused (400) as
//! unreadable.

use super::model::{ParseError, ParsedFile};

/// Whether the file looks like QIF.
pub(crate) fn sniff(_bytes: &[u8]) -> bool {
    false
}

/// Reads a QIF file.
pub(crate) fn parse(_bytes: &[u8]) -> Result<ParsedFile, ParseError> {
    Err(ParseError::new(0, "QIF files cannot be read yet"))
}
