//! Reads across all of a user's accounts: the transaction search (words through a full-text
//! index, filters, newest first by keyset) and the rows a spending summary adds up.
//!
//! Both read only the user's active accounts, as the other listings across accounts do.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
//! use aggregation_core::store::{SearchStore, SqliteStore, TransactionSearch};
//! # let user_id = uuid::Uuid::now_v7(); // a registered user's id
//! let store = SqliteStore::in_memory().await?;
//! store.migrate().await?;
//! let search = TransactionSearch {
//!     words: vec!["coffee".to_owned()],
//!     limit: 50,
//!     ..TransactionSearch::default()
//! };
//! let page = store.search_transactions(user_id, &search).await?;
//! # let _ = page;
//! # Ok(()) }
//! ```

use async_trait::async_trait;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use uuid::Uuid;

use super::StoreError;
use super::records::{TransactionPosition, TransactionRecord, TransactionStatus};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

/// What to look for among the user's transactions, and which page: newest first
/// (`transaction_date`, then id, both descending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionSearch {
    /// Words every row must hold (in its description, merchant name or notes), each one
    /// letters and digits only, lower case; empty: no word condition. The store matches whole
    /// words through its full-text index and never reads them as query syntax.
    pub words: Vec<String>,
    /// Only this account's rows.
    pub account_id: Option<Uuid>,
    /// Only rows of this category id (exactly).
    pub category: Option<String>,
    /// Only rows whose merchant name is this one (compared case-insensitively, ASCII).
    pub merchant: Option<String>,
    /// Only rows in this state.
    pub status: Option<TransactionStatus>,
    /// Only rows whose signed amount is at least this.
    pub min_amount: Option<Decimal>,
    /// Only rows whose signed amount is at most this.
    pub max_amount: Option<Decimal>,
    /// Only rows dated on or after this.
    pub start_date: Option<NaiveDate>,
    /// Only rows dated on or before this.
    pub end_date: Option<NaiveDate>,
    /// Page size; the store returns up to `limit + 1` rows, the extra one telling the caller
    /// that more follow.
    pub limit: u32,
    /// The last row of the previous page: the page holds the rows after it in the
    /// newest-first order. `None` for the first page.
    pub after: Option<TransactionPosition>,
}

/// A transaction as a spending summary counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct SpendingRow {
    /// The row's id (the keyset of the next chunk).
    pub id: Uuid,
    /// Its account.
    pub account_id: Uuid,
    /// Its date.
    pub transaction_date: NaiveDate,
    /// ISO 4217 code.
    pub currency: String,
    /// Signed amount; negative is money out.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub amount: Decimal,
    /// Its category id, or `None`.
    pub category: Option<String>,
    /// Its merchant name, or `None`.
    pub merchant_name: Option<String>,
}

/// Reads across the user's accounts.
#[async_trait]
pub trait SearchStore: Send + Sync {
    /// The user's transactions on active accounts matching every condition of `search`,
    /// newest first (`transaction_date`, then id, descending), from just after
    /// `search.after`: up to `search.limit + 1` rows. An unknown or foreign `account_id`
    /// gives no rows.
    async fn search_transactions(
        &self,
        user_id: Uuid,
        search: &TransactionSearch,
    ) -> Result<Vec<TransactionRecord>, StoreError>;

    /// The rows a spending summary over `from..=to` adds up, oldest first (`transaction_date`,
    /// then id), at most `limit`, from just after `after`: the user's transactions on active
    /// accounts that are neither a transfer leg (`transfer_transaction_id` set) nor failed or
    /// cancelled, with a non-zero amount.
    async fn spending_rows(
        &self,
        user_id: Uuid,
        from: NaiveDate,
        to: NaiveDate,
        after: Option<TransactionPosition>,
        limit: u32,
    ) -> Result<Vec<SpendingRow>, StoreError>;
}
