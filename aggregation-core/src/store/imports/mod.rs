//! File imports as one store operation: everything a statement file holds (per institution:
//! accounts with their transactions, holdings and balance snapshot) written in one database
//! transaction, all or nothing.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
//! use aggregation_core::store::{ImportBatch, ImportCounts, ImportStore, SqliteStore, now};
//! # let user_id = uuid::Uuid::now_v7(); // a registered user's id
//! let store = SqliteStore::in_memory().await?;
//! let mut raised = Vec::new(); // the events written, to publish
//! let no_events = |_: &ImportCounts| Vec::new(); // the use case's rule
//! let counts = store
//!     .apply_import(user_id, &ImportBatch::default(), now(), &no_events, &mut raised)
//!     .await?;
//! assert!(counts.connection_ids.is_empty());
//! # Ok(()) }
//! ```

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::StoreError;
use super::records::{MatchRecord, NewAccount, NewHolding, NewTransaction};
use crate::enums::string_enum;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// The provider slug of the connections that file imports create.
pub const FILE_IMPORT_PROVIDER: &str = "file_import";

/// Everything one imported file holds, grouped by institution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportBatch {
    /// One entry per institution, in file order.
    pub institutions: Vec<ImportInstitution>,
    /// The most accounts the user may hold once the batch is written; `None` for no limit.
    /// A batch that creates accounts beyond it fails with [`StoreError::AccountLimit`] and
    /// writes nothing (checked inside the transaction, so concurrent writes of the same user
    /// cannot pass it together).
    pub account_limit: Option<u64>,
    /// The file format's code (`ofx`, `csv`, ...): the origin of the rows written, which the
    /// reconciler compares with other origins' rows (another format's, a provider sync's) to
    /// find duplicates. `None` counts as the origin `file_import`.
    pub origin: Option<String>,
}

/// The accounts of one institution; they go into the user's `file_import` connection whose
/// alias is the institution's name (found, or created on first import), or into the
/// connection named by `connection_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportInstitution {
    /// The institution's name (OFX `FI/ORG`): the connection's alias.
    pub alias: String,
    /// An existing connection of the user to write into instead (an import into an account
    /// the user chose: that account's connection, whatever its provider). Its alias and
    /// last sync time are left as they are. [`StoreError::Conflict`] when the user has no
    /// such connection (any more).
    pub connection_id: Option<Uuid>,
    /// The institution's accounts, each once.
    pub accounts: Vec<ImportAccount>,
}

/// One account of an imported file with what the file says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportAccount {
    /// The account, upserted by `provider_account_id` within the connection.
    pub account: NewAccount,
    /// Whether the file gives the account's balance. When it does not, an existing account
    /// keeps its stored balance and available balance (a new one starts at zero and none).
    pub balance_reported: bool,
    /// Transactions, upserted by `provider_transaction_id` (the FITID) within the account.
    pub transactions: Vec<NewTransaction>,
    /// Holdings, upserted by `provider_holding_id` within the account and marked active.
    /// Holdings absent from the file are left as they are.
    pub holdings: Vec<NewHolding>,
    /// The balance snapshots to record (source `file_import`, the account's currency), one
    /// per balance the file states. One is not written again when the account already has a
    /// `file_import` snapshot captured at the same instant with the same figures, so
    /// importing a file twice records it once.
    pub snapshots: Vec<ImportSnapshot>,
}

/// The balances of an imported account at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSnapshot {
    /// Balance.
    pub balance: Decimal,
    /// Available balance, if known.
    pub available_balance: Option<Decimal>,
    /// Market value of the holdings, if known.
    pub holdings_value: Option<Decimal>,
    /// Cash, if known.
    pub cash_value: Option<Decimal>,
    /// When the balance held (truncated to microseconds by the caller).
    pub captured_at: DateTime<Utc>,
}

string_enum! {
    /// What an import did to one row.
    ImportOutcome {
        /// Inserted.
        Created => "created",
        /// Existing, with at least one changed field.
        Updated => "updated",
        /// Existing, with every field equal.
        Unchanged => "unchanged",
    }
}

/// What an import did to one account and its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedAccount {
    /// The account's id (for a preview of a new account: the id it would have had).
    pub account_id: Uuid,
    /// The account's key within its connection.
    pub provider_account_id: String,
    /// What was done to the account itself.
    pub outcome: ImportOutcome,
    /// Transactions inserted.
    pub transactions_created: u64,
    /// Existing transactions with at least one changed field.
    pub transactions_updated: u64,
    /// Existing transactions with every field equal.
    pub transactions_skipped: u64,
    /// Holdings inserted.
    pub holdings_created: u64,
    /// Existing holdings with at least one changed field.
    pub holdings_updated: u64,
    /// Balance snapshots written.
    pub snapshots_created: u64,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportCounts {
    /// The connection of each institution of the batch, in batch order.
    pub connection_ids: Vec<Uuid>,
    /// Each account of the batch, in batch order.
    pub accounts: Vec<ImportedAccount>,
    /// Accounts inserted.
    pub accounts_created: u64,
    /// Existing accounts with at least one changed field.
    pub accounts_updated: u64,
    /// Existing accounts whose fields were all equal.
    pub accounts_unchanged: u64,
    /// Transactions inserted (a FITID not seen before in the account).
    pub transactions_created: u64,
    /// Existing transactions (same FITID) with at least one changed field.
    pub transactions_updated: u64,
    /// Existing transactions (same FITID) with every field equal: left as they were.
    pub transactions_skipped: u64,
    /// Holdings inserted.
    pub holdings_created: u64,
    /// Existing holdings with at least one changed field (reactivation included).
    pub holdings_updated: u64,
    /// Existing holdings whose fields were all equal.
    pub holdings_unchanged: u64,
    /// Balance snapshots written.
    pub snapshots_created: u64,
    /// Transactions recognised as rows another source wrote already (automatic duplicates):
    /// not written, recorded as matches.
    pub transactions_matched: u64,
    /// Transfers paired between the user's accounts.
    pub transfers: u64,
    /// The matches recorded (automatic and suggested, duplicates and transfers).
    pub matches: Vec<MatchRecord>,
}

/// File imports.
#[async_trait]
pub trait ImportStore: Send + Sync {
    /// Applies a whole import for the user in one database transaction: per institution,
    /// finds or creates the user's `file_import` connection with that alias (like
    /// [`find_or_create_connection`](super::ConnectionStore::find_or_create_connection)), then
    /// upserts each account, its transactions and holdings (the rules of
    /// [`upsert_accounts`](super::AccountStore::upsert_accounts) and friends) and records its
    /// snapshot. Any failure rolls everything back, leaving the store as it was.
    ///
    /// A large import (more transactions than one bounded write batch) whose accounts are all
    /// new is written in several short write transactions instead of one long one, so other
    /// writers never wait long for the store's write lock: its accounts are staged first, then
    /// filled a batch of rows at a time, and the last transaction writes the events and ends
    /// the staging. Until then the new accounts are visible to the user with the rows written
    /// so far; a failure half-way removes them with everything written into them (and a
    /// connection the import created for them), as does the next migration or large import of
    /// the user when the process stopped half-way.
    /// [`StoreError::Other`] when the user does not exist. `raise` is called with the counts
    /// in the same transaction; the events it returns are written there and appended to
    /// `raised` once committed.
    async fn apply_import(
        &self,
        user_id: Uuid,
        batch: &ImportBatch,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, ImportCounts>,
        raised: &mut Vec<Event>,
    ) -> Result<ImportCounts, StoreError>;

    /// What [`apply_import`](Self::apply_import) would do, with the same rules and counts,
    /// leaving the store as it was: the writes run in a transaction that is rolled back, and
    /// no event is written. The counts' connection and account ids of rows that do not exist
    /// yet are those the rolled-back transaction gave them.
    async fn preview_import(
        &self,
        user_id: Uuid,
        batch: &ImportBatch,
        now: DateTime<Utc>,
    ) -> Result<ImportCounts, StoreError>;
}
