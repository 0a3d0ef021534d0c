//! Importing statement files.
//!
//! [`parse_ofx`] reads OFX 1.x (SGML) and OFX 2.x (XML) statement files, `.ofx` and `.qfx`
//! alike, into [`OfxDocument`]s: bank, credit-card and investment statements with their
//! transactions, positions and balances; `write_ofx1` and `write_ofx2` (test fixtures, feature
//! `testing`) write them. The mapping from a document to
//! accounts, transactions, holdings and balance snapshots (used by `POST /api/v1/imports`) is
//! documented in the crate's `import::records` module; `import::statement` holds the import use
//! case (parse, map, write, report).
//!
//! The other statement formats (QIF, CSV, CAMT.052/053/054, MT940/942) are read into one
//! statement model (`import::model`) and mapped by `import::parsed` (identity, balance
//! checks). Both mappings hand their statements to the one merge of `import::batch`, which
//! assembles the one normalized batch the store writes (one account per key, one transaction
//! per id, holdings, balances and snapshots). `import::format` is the format table: code,
//! name, extensions, needs, content sniff and parser of each format.
//!
//! # What is read
//!
//! OFX 1.x (SGML) and OFX 2.x (XML) read alike: the same content gives the same
//! [`OfxDocument`] whatever the header (colon header, `<?xml?>` and `<?OFX?>`, header written as
//! elements, or none), the line endings, and whether leaf elements are closed, unclosed or
//! mixed. Every statement in the file is returned, in file order: bank (`STMTRS`), credit card
//! (`CCSTMTRS`) and investment (`INVSTMTRS`, with positions, trades, income, reinvestments,
//! transfers, cash lines and `INVBAL`), from one or several transaction wrappers and message
//! sets. Securities are named through `SECLIST` wherever it is in the file.
//!
//! Text: bytes are read as UTF-8 where valid and as Windows-1252 elsewhere, whatever the header
//! says. Entities are decoded exactly once (`&amp;lt;` is `&lt;`); a bare `&` stays as it is.
//! CDATA, comments, processing instructions and proprietary elements (`INTU.BID`, …) are
//! handled or ignored; values are trimmed.
//!
//! # Choices
//!
//! - **Bad values are errors, empty values are missing.** An amount or date that cannot be read
//!   (`$120`, `  .  `, `R$ 5.326,43`, `5.326,43`, `2024-13-45`) is a
//!   [`OfxError::Malformed`] naming the element and its line, even in an optional field: a
//!   money figure is never silently dropped or guessed. The one exception is a balance
//!   (`BALAMT`, the amounts of `INVBAL`): one that cannot be read is left out and reported in
//!   [`OfxDocument::warnings`] with its line, so the transactions are still imported. An
//!   empty element (`<BALAMT/>`,
//!   `<DTASOF></DTASOF>`) and an all-zeros date count as absent: an optional field becomes
//!   `None` (a balance without an amount is no balance); a required one (`FITID`, `DTPOSTED`,
//!   `TRNAMT`, `DTTRADE`, `TOTAL` of trades and income, a position's `SECID` and `UNITS`) is an
//!   error.
//! - Amounts accept `+`, zero padding, a leading `.`, and `,` as the decimal separator; the
//!   scale is kept as written (`-30.000`). Thousands separators are refused.
//! - Dates: `YYYYMMDD`, `YYYYMMDDHH`, `YYYYMMDDHHMM`, `YYYYMMDDHHMMSS`, digits beyond 14 as a
//!   fraction (`2009021100000000`), `.XXX` or `:XXX` fractions, a `[offset:ZONE]` zone (`-5`,
//!   `0`, `-03`, `+5.30`; an empty offset as in `[-:EST]`, or no zone, is UTC; the zone name is
//!   ignored), anything after the zone ignored, leading spaces; also `DD/MM/YYYY` (`MM/DD/YYYY`
//!   when the second number is above 12) and `YYYY-MM-DD`. Results are instants in UTC.
//! - A bank line's `DTAVAIL` is its `settled` date; an investment transaction's `DTTRADE` is
//!   its `posted` date and `DTSETTLE` its `settled` date.
//! - A cash line of an investment statement (`INVBANKTRAN`) is a
//!   [`TransactionKind::Bank`] transaction with its `TRNTYPE`.
//! - A file whose sign-on failed and that has no statement is [`OfxError::SignonFailed`]; a
//!   statement wrapper with an error status and no statement is skipped, and when no statement
//!   at all is left, the first such error is [`OfxError::RequestFailed`]. A file that has
//!   statements reports a failed sign-on through [`OfxDocument::signon`].
//! - `<!DOCTYPE` and `<!ENTITY` are refused wherever they appear as markup, never expanded.
//! - Nothing in the input can make the parser panic; nesting deeper than 128 elements, markup
//!   that never ends, and aggregates such as `STMTTRN` left open at the end of the file are
//!   [`OfxError::Malformed`] with the line (a missing `</OFX>` or message-set end is tolerated).
//! - A file with neither an `<OFX>` element nor an OFX header, or whose markup breaks before
//!   any `<OFX>` without an OFX header, is [`OfxError::NotOfx`]; an OFX header without an
//!   `<OFX>` element is [`OfxError::Malformed`]. An empty or blank file is [`OfxError::Empty`].
//! - Unknown elements are ignored; proprietary aggregates (`INTU.XXX` with children) are
//!   skipped whole; `PAYEE` and `CURRENCY` written as leaves (`<PAYEE>Name`) are accepted.

pub(crate) mod batch;
mod camt;
mod codepage;
mod csv;
pub(crate) mod format;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod fuzz;
pub(crate) mod model;
mod mt940;
mod ofx;
pub(crate) mod parsed;
mod qif;
pub(crate) mod records;
pub(crate) mod statement;

pub(crate) use csv::CsvMapping;
pub use ofx::{
    Balance, InvestmentBalance, OfxDocument, OfxError, OfxWarning, Position, PositionKind,
    SecurityId, Signon, Statement, StatementAccount, StatementKind, StatementTransaction,
    TransactionKind, parse_ofx,
};
#[cfg(feature = "testing")]
pub use ofx::{write_ofx1, write_ofx2};
