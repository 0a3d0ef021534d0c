//! Importing statement files.
//!
//! [`ofx`] reads OFX 1.x (SGML) and OFX 2.x (XML) statement files, `.ofx` and `.qfx` alike,
//! into [`OfxDocument`]s: bank, credit-card and investment statements with their
//! transactions, positions and balances.

pub mod ofx;

pub use ofx::{
    Balance, InvestmentBalance, OfxDocument, OfxError, Position, PositionKind, SecurityId, Signon,
    Statement, StatementAccount, StatementKind, StatementTransaction, TransactionKind, parse_ofx,
    write_ofx1, write_ofx2,
};
