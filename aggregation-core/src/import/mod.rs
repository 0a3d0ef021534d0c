//! Importing statement files.
//!
//! [`ofx`] reads OFX 1.x (SGML) and OFX 2.x (XML) statement files, `.ofx` and `.qfx` alike,
//! into [`OfxDocument`]s: bank, credit-card and investment statements with their
//! transactions, positions and balances. The mapping from a document to
//! accounts, transactions, holdings and balance snapshots (used by `POST /api/v1/imports`) is
//! documented in the crate's `import::records` module; `import::statement` holds the import use
//! case (parse, map, write, report).

pub mod ofx;
pub(crate) mod records;
pub(crate) mod statement;

pub use ofx::{
    Balance, InvestmentBalance, OfxDocument, OfxError, Position, PositionKind, SecurityId, Signon,
    Statement, StatementAccount, StatementKind, StatementTransaction, TransactionKind, parse_ofx,
};
#[cfg(feature = "testing")]
pub use ofx::{write_ofx1, write_ofx2};
