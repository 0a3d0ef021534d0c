//! CSV statements in a bank's own layout, read with a caller's mapping or by detection.
//!
//! Placeholder of the import framework: the `csv` parser replaces this file with the reader.
//! Until then no file is detected as CSV by its content, and a CSV upload is refused (400) as
//! unreadable. The mapping types are final: the framework reads the `mapping` part into them.

#![allow(dead_code, reason = "a placeholder until the parser lands")]

use super::model::{ParseError, ParsedFile};

/// How to read a CSV file (the `mapping` part, decisions.md "CSV mapping").
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CsvMapping {
    /// The field delimiter (one character; `\t` for tabs).
    pub(crate) delimiter: Option<String>,
    /// The decimal separator (`.` or `,`).
    pub(crate) decimal: Option<String>,
    /// The thousands separator.
    pub(crate) thousands: Option<String>,
    /// The date format (`%d.%m.%Y`, …).
    pub(crate) date_format: Option<String>,
    /// The text encoding (`utf-8`, `windows-1252`, `utf-16`, …).
    pub(crate) encoding: Option<String>,
    /// Lines to skip before the header row.
    pub(crate) skip_rows: Option<usize>,
    /// Which column holds what.
    pub(crate) columns: CsvColumns,
    /// Whether amounts are written from the bank's point of view (negate them).
    pub(crate) invert_sign: Option<bool>,
}

/// Which column holds what: by header name or 0-based index.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CsvColumns {
    /// Booking date (required).
    pub(crate) date: ColumnRef,
    /// Signed amount (else `debit` and `credit`).
    pub(crate) amount: Option<ColumnRef>,
    /// Money out.
    pub(crate) debit: Option<ColumnRef>,
    /// Money in.
    pub(crate) credit: Option<ColumnRef>,
    /// Description.
    pub(crate) description: Option<ColumnRef>,
    /// Payee or payer.
    pub(crate) payee: Option<ColumnRef>,
    /// Memo.
    pub(crate) memo: Option<ColumnRef>,
    /// The bank's reference for the row.
    pub(crate) id: Option<ColumnRef>,
    /// Running balance.
    pub(crate) balance: Option<ColumnRef>,
    /// Currency of the row.
    pub(crate) currency: Option<ColumnRef>,
}

/// A column, by 0-based index or header name.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub(crate) enum ColumnRef {
    /// 0-based index.
    Index(usize),
    /// Header name.
    Name(String),
}

impl Default for ColumnRef {
    fn default() -> Self {
        Self::Index(0)
    }
}

/// Why a CSV file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CsvError {
    /// The file cannot be read (400).
    #[error(transparent)]
    Unreadable(ParseError),
    /// The mapping does not fit the file, or a column cannot be found (422 naming it).
    #[error("column {column}: {reason}")]
    Mapping {
        /// The column (mapping key or header).
        column: String,
        /// What is wrong.
        reason: String,
    },
}

/// Whether the file looks like CSV.
pub(crate) fn sniff(_bytes: &[u8]) -> bool {
    false
}

/// Reads a CSV file with the mapping, or by detection without one.
pub(crate) fn parse(_bytes: &[u8], _mapping: Option<&CsvMapping>) -> Result<ParsedFile, CsvError> {
    Err(CsvError::Unreadable(ParseError::new(
        0,
        "CSV files cannot be read yet",
    )))
}
