//! The one writer of source data: every source's rows, as one [`NormalizedBatch`], written by
//! [`BatchStore::apply_batch`] in one store operation.
//!
//! The pipeline is source → normalized batch → writer. A provider's sync maps what its client
//! fetched (accounts, each account's transactions and holdings, a change feed's cursor and
//! removals) into a batch aimed at the provider's connection; a file import maps a statement
//! file of any format (OFX, CSV, QIF, CAMT, MT940, ...) into a batch aimed at the user's
//! `file_import` connection of the file's institution, or at the connection of the account the
//! user chose. The writer then does the same for every source, per account: the account's
//! identity (its `provider_account_id` in the connection) is found or created, its
//! transactions are matched by identity and reconciled (pending to booked, other sources'
//! duplicates, transfers), its holdings and balance snapshots are upserted and recorded, and
//! the events of what it did are written in the same transaction. What differs between
//! sources is spelled out as fields of the batch (the target connection, the pending window,
//! what happens to absent holdings, a change feed's update), never as a second writer.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
//! use aggregation_core::store::{
//!     BatchCounts, BatchStore, NormalizedBatch, SqliteStore, TransactionSource, now,
//! };
//! # let user_id = uuid::Uuid::now_v7(); // a registered user's id
//! let store = SqliteStore::in_memory().await?;
//! let mut raised = Vec::new(); // the events written, to publish
//! let no_events = |_: &BatchCounts| Vec::new(); // the use case's rule
//! let batch = NormalizedBatch::new(TransactionSource::Import);
//! let counts = store
//!     .apply_batch(user_id, &batch, now(), &no_events, &mut raised)
//!     .await?;
//! assert!(counts.connection_ids.is_empty());
//! # Ok(()) }
//! ```

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::StoreError;
use super::records::{
    MatchRecord, NewAccount, NewHolding, NewTransaction, SnapshotSource, TransactionSource,
    UpsertCounts,
};
use crate::enums::string_enum;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// The provider slug of the connections that file imports create.
pub const FILE_IMPORT_PROVIDER: &str = "file_import";

/// Everything one source delivers at once (one provider sync, one imported file), normalized:
/// per connection, its accounts, each with its identity and what the source says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedBatch {
    /// The kind of source: the `source` of the transaction rows written.
    pub source: TransactionSource,
    /// The origin of the rows written (a file format's code, `ofx`, `csv`, ...), which the
    /// reconciler compares with other origins' rows to find duplicates. `None`: the target
    /// connection's provider slug (a provider's sync; `file_import` for an import's own
    /// connection).
    pub origin: Option<String>,
    /// The most accounts the user may hold once the batch is written; `None` for no limit.
    /// A batch that creates accounts beyond it fails with [`StoreError::AccountLimit`] and
    /// writes nothing (checked inside the transaction, so concurrent writes of the same user
    /// cannot pass it together).
    pub account_limit: Option<u64>,
    /// One entry per connection written into, in source order.
    pub connections: Vec<BatchConnection>,
}

impl NormalizedBatch {
    /// An empty batch of this kind of source, without an origin or an account limit.
    pub fn new(source: TransactionSource) -> Self {
        Self {
            source,
            origin: None,
            account_limit: None,
            connections: Vec::new(),
        }
    }
}

/// The connection a part of a batch is written into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchTarget {
    /// One of the user's connections: a provider's, for its sync (the caller checked that
    /// the connection is the user's: a missing one is [`StoreError::Other`]), or the
    /// connection of an account the user chose to import into (a missing one is
    /// [`StoreError::Conflict`]). Its alias is left as it is.
    Connection(Uuid),
    /// The user's `file_import` connection with this alias (an imported file's institution:
    /// OFX `FI/ORG`), found, or created on first import.
    FileImport {
        /// The connection's alias.
        alias: String,
    },
}

/// The accounts a batch writes into one connection, with what the connection itself gets.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchConnection {
    /// The connection.
    pub target: BatchTarget,
    /// Its accounts, each once, in source order.
    pub accounts: Vec<BatchAccount>,
    /// For a change-feed provider's transactions: the removed rows and the cursor to store,
    /// both written in the batch's transaction. The accounts' transactions then take over a
    /// pending row only by the provider's link (`pending_transaction_id`), and no pending
    /// row is deleted for being absent ([`BatchAccount::pending_window`] is ignored).
    pub feed: Option<FeedUpdate>,
    /// Whether to set the connection's `last_sync_at` to the batch's time. An import (source
    /// [`TransactionSource::Import`]) leaves a provider's connection's time as it is (its
    /// sync limits go by it).
    pub mark_synced: bool,
}

/// What happens to an account's stored holdings that the batch's list does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbsentHoldings {
    /// They stay as they are (a statement file states some positions only).
    Kept,
    /// Active ones are deactivated (a provider's list is complete), counted in
    /// [`BatchCounts::holdings_deactivated`].
    Deactivated,
}

/// One account of a batch: its identity and what the source says about it.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchAccount {
    /// The account's key within the connection. Without [`account`](Self::account) it must
    /// exist already ([`StoreError::Other`] otherwise).
    pub provider_account_id: String,
    /// The account's fields to upsert (by `provider_account_id` within the connection, with
    /// the same key), when the source states them.
    pub account: Option<NewAccount>,
    /// Whether `account` states the balance. When it does not, an existing account keeps
    /// its stored balance and available balance (a new one starts at zero and none).
    pub balance_reported: bool,
    /// Transactions, matched by `provider_transaction_id` within the account and
    /// reconciled, when the source delivered them.
    pub transactions: Option<Vec<NewTransaction>>,
    /// The inclusive window the transactions were fetched for, when the source's answer is
    /// complete for it: the account's `pending` transactions dated in it that are not in
    /// `transactions` are deleted (they booked under another id, or were dropped), counted in
    /// [`BatchCounts::transactions_removed`]. `None` deletes nothing.
    pub pending_window: Option<(NaiveDate, NaiveDate)>,
    /// Holdings, upserted by `provider_holding_id` within the account and marked active,
    /// when the source delivered them.
    pub holdings: Option<Vec<NewHolding>>,
    /// What happens to stored holdings absent from `holdings` (when given).
    pub absent_holdings: AbsentHoldings,
    /// The balance snapshots to record, in order.
    pub snapshots: Vec<BatchSnapshot>,
}

impl BatchAccount {
    /// An account of the batch known by its key only, with nothing to write yet.
    pub fn new(provider_account_id: impl Into<String>) -> Self {
        Self {
            provider_account_id: provider_account_id.into(),
            account: None,
            balance_reported: false,
            transactions: None,
            pending_window: None,
            holdings: None,
            absent_holdings: AbsentHoldings::Kept,
            snapshots: Vec::new(),
        }
    }
}

/// One balance snapshot of a batch's account (in the account's currency).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSnapshot {
    /// What writes it.
    pub source: SnapshotSource,
    /// The balances the source states with the instant they held. A stated snapshot is not
    /// written again when the account already has one of the same source captured at the
    /// same instant with the same figures, so importing a file twice records it once.
    /// `None`: the account's balances as they stand after the batch's account upsert,
    /// captured at the batch's time.
    pub stated: Option<StatedBalances>,
    /// Market value of the holdings, if known.
    pub holdings_value: Option<Decimal>,
    /// Cash, if known.
    pub cash_value: Option<Decimal>,
}

/// The balances a source states for one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct StatedBalances {
    /// Balance.
    pub balance: Decimal,
    /// Available balance, if known.
    pub available_balance: Option<Decimal>,
    /// When the balance held (truncated to microseconds by the caller).
    pub captured_at: DateTime<Utc>,
}

/// What a change feed's sync writes beyond its rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedUpdate {
    /// The cursor the next sync goes on from.
    pub cursor: String,
    /// Rows the provider removed, by `(provider_account_id, provider_transaction_id)` (any
    /// account of the connection when the account is `None`): deleted after the batch's
    /// upserts (so a pending row a booked one took over is not lost), counted in
    /// [`BatchCounts::transactions_removed`].
    pub removed: Vec<(Option<String>, String)>,
    /// The provider's category and merchant name per row, for the enrichment writer.
    pub enrichment: Vec<ProviderEnrichment>,
}

/// A provider's category and merchant name for one row of a batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderEnrichment {
    /// The row's account.
    pub provider_account_id: String,
    /// The row.
    pub provider_transaction_id: String,
    /// The provider's category id (Plaid's `personal_finance_category.detailed`).
    pub category: Option<String>,
    /// The provider's merchant name.
    pub merchant_name: Option<String>,
}

string_enum! {
    /// What a batch did to one row.
    ImportOutcome {
        /// Inserted.
        Created => "created",
        /// Existing, with at least one changed field.
        Updated => "updated",
        /// Existing, with every field equal.
        Unchanged => "unchanged",
    }
}

/// What a batch did to one account and its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountCounts {
    /// The account's id (for a preview of a new account: the id it would have had).
    pub account_id: Uuid,
    /// The account's key within its connection.
    pub provider_account_id: String,
    /// What was done to the account itself; `None` when the batch stated no fields for it.
    pub outcome: Option<ImportOutcome>,
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

/// What a batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchCounts {
    /// The connection of each part of the batch, in batch order.
    pub connection_ids: Vec<Uuid>,
    /// Each account of the batch, in batch order.
    pub per_account: Vec<AccountCounts>,
    /// Accounts upserted (those the batch stated fields for).
    pub accounts: UpsertCounts,
    /// Transactions upserted, summed over accounts (`unchanged`: same provider id, every
    /// field equal, left as they were).
    pub transactions: UpsertCounts,
    /// Holdings upserted, summed over accounts (reactivation counts as an update).
    pub holdings: UpsertCounts,
    /// Holdings marked inactive because the source no longer lists them.
    pub holdings_deactivated: u64,
    /// Pending transactions deleted because the source no longer returns them for the
    /// window, and rows a change feed removed.
    pub transactions_removed: u64,
    /// Balance snapshots written.
    pub snapshots_created: u64,
    /// Transactions recognised as rows another source wrote already (automatic duplicates):
    /// not written, recorded as matches.
    pub transactions_matched: u64,
    /// Booked transactions that took over a pending row (keeping its id).
    pub transactions_booked: u64,
    /// Transfers paired between the user's accounts.
    pub transfers: u64,
    /// The matches recorded (automatic and suggested, duplicates and transfers).
    pub matches: Vec<MatchRecord>,
}

/// The one writer of source data (provider syncs and file imports alike).
#[async_trait]
pub trait BatchStore: Send + Sync {
    /// Applies a whole batch for the user, all or nothing: per part, finds the target
    /// connection (locking it, so batches into one connection are applied one after the
    /// other) or finds or creates the user's `file_import` connection with the alias (like
    /// [`find_or_create_connection`](super::ConnectionStore::find_or_create_connection)); then
    /// per account upserts it (the rules of
    /// [`upsert_accounts`](super::AccountStore::upsert_accounts) and friends), reconciles and
    /// writes its transactions, upserts its holdings (deactivating absent ones when asked),
    /// deletes the pending rows absent from its window and records its snapshots; then
    /// writes the part's change-feed update and marks the connection synced. Any failure
    /// rolls everything back, leaving the store as it was.
    ///
    /// A large import (more transactions than one bounded write batch, every part a
    /// [`BatchTarget::FileImport`] without a feed or pending window) whose accounts are all
    /// new is written in several short write transactions instead of one long one, so other
    /// writers never wait long for the store's write lock: its accounts are staged first, then
    /// filled a batch of rows at a time, and the last transaction writes the events and ends
    /// the staging. Until then the new accounts are visible to the user with the rows written
    /// so far; a failure half-way removes them with everything written into them (and a
    /// connection the import created for them), as does the next migration or large import of
    /// the user when the process stopped half-way.
    /// [`StoreError::Other`] when the user does not exist. `raise` is called with the counts
    /// in the same transaction; the events it returns are written there (so a batch that
    /// rolls back has none) and appended to `raised` once committed.
    async fn apply_batch(
        &self,
        user_id: Uuid,
        batch: &NormalizedBatch,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, BatchCounts>,
        raised: &mut Vec<Event>,
    ) -> Result<BatchCounts, StoreError>;

    /// What [`apply_batch`](Self::apply_batch) would do, with the same rules and counts,
    /// leaving the store as it was: the writes run in a transaction that is rolled back, and
    /// no event is written. The counts' connection and account ids of rows that do not exist
    /// yet are those the rolled-back transaction gave them.
    async fn preview_batch(
        &self,
        user_id: Uuid,
        batch: &NormalizedBatch,
        now: DateTime<Utc>,
    ) -> Result<BatchCounts, StoreError>;
}
