//! Financial records: provider connections, accounts, transactions, holdings and balance
//! snapshots, with one storage trait per aggregate.
//!
//! Every read takes the caller's user id and sees only rows reached through that user's
//! connections (`accounts → connections.user_id`); a foreign id reads as `None`, exactly like an
//! unknown one. Writes (the upserts used by provider sync and file import) take the parent id
//! and trust the caller to have checked ownership first.
//!
//! ```no_run
//! # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
//! use aggregation_core::store::{AccountFilter, AccountStore, ConnectionStore, SqliteStore, now};
//! # let user_id = uuid::Uuid::now_v7(); // a registered user's id
//! let store = SqliteStore::in_memory().await?;
//! let connection = store
//!     .find_or_create_connection(user_id, "file_import", Some("Example Bank"), now())
//!     .await?;
//! let accounts = store.accounts_for_user(user_id, &AccountFilter::default()).await?;
//! # let _ = (connection, accounts);
//! # Ok(()) }
//! ```

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use super::StoreError;
use crate::enums::string_enum;
use crate::events::{Event, RaiseEvents};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;

string_enum! {
    /// The state of a provider connection.
    ConnectionStatus {
        /// Created, authorization not finished.
        Pending => "pending",
        /// Usable.
        Active => "active",
        /// The provider's tokens expired and could not be refreshed.
        Expired => "expired",
        /// The user or provider revoked access.
        Revoked => "revoked",
        /// The last attempt to use it failed.
        Failed => "failed",
        /// Disconnected by the user; kept for audit with credentials cleared.
        Disconnected => "disconnected",
    }
}

impl ConnectionStatus {
    /// Whether the user must authorize the connection again (expired, revoked or failed).
    pub fn needs_reauthentication(self) -> bool {
        matches!(self, Self::Expired | Self::Revoked | Self::Failed)
    }
}

string_enum! {
    /// The kind of a financial account.
    AccountType {
        /// Taxable brokerage account.
        Brokerage => "brokerage",
        /// Traditional IRA.
        Ira => "ira",
        /// Roth IRA.
        RothIra => "roth_ira",
        /// 401(k) plan.
        Plan401k => "401k",
        /// 403(b) plan.
        Plan403b => "403b",
        /// Health savings account.
        Hsa => "hsa",
        /// Checking account.
        Checking => "checking",
        /// Savings account.
        Savings => "savings",
        /// Money market account.
        MoneyMarket => "money_market",
        /// Certificate of deposit.
        Cd => "cd",
        /// Credit card.
        CreditCard => "credit_card",
        /// Line of credit.
        LineOfCredit => "line_of_credit",
        /// Loan.
        Loan => "loan",
        /// Mortgage.
        Mortgage => "mortgage",
        /// Anything else.
        Other => "other",
    }
}

string_enum! {
    /// The kind of a transaction.
    TransactionType {
        /// Buy or sell of a security.
        Trade => "trade",
        /// Money moved in or out.
        Transfer => "transfer",
        /// Dividends, interest and other income.
        Income => "income",
        /// Fees and charges.
        Fee => "fee",
        /// Anything else.
        Other => "other",
    }
}

string_enum! {
    /// The settlement state of a transaction.
    TransactionStatus {
        /// Not settled yet.
        Pending => "pending",
        /// Settled.
        Settled => "settled",
        /// Failed.
        Failed => "failed",
        /// Cancelled.
        Cancelled => "cancelled",
    }
}

string_enum! {
    /// Which kind of source wrote a transaction row.
    TransactionSource {
        /// A provider sync.
        Sync => "sync",
        /// A statement file import.
        Import => "import",
    }
}

string_enum! {
    /// What chose a transaction's category, by precedence (highest first).
    CategorySource {
        /// The user set it (`PATCH /transactions/{id}`); nothing changes it afterwards.
        User => "user",
        /// One of the user's rules set it.
        Rule => "rule",
        /// The provider's own category.
        Provider => "provider",
        /// The card's merchant category code (ISO 18245).
        MerchantCode => "merchant_code",
        /// The bank transaction code (ISO 20022 domain, family and sub-family).
        BankCode => "bank_code",
        /// The reconciler paired the row as a leg of a transfer.
        Transfer => "transfer",
    }
}

string_enum! {
    /// What a transaction match says about its rows.
    MatchKind {
        /// Two sources' rows of one account stand for one real transaction.
        Duplicate => "duplicate",
        /// Two rows on two of the user's accounts are the legs of one transfer.
        Transfer => "transfer",
    }
}

string_enum! {
    /// Where a transaction match stands.
    MatchStatus {
        /// Applied by the reconciler (the duplicate held back, or the transfer paired).
        Automatic => "automatic",
        /// Proposed to the user, not applied (both rows kept, the transfer not paired).
        Suggested => "suggested",
        /// Applied because the user accepted it.
        Accepted => "accepted",
        /// Undone, or never applied, because the user rejected it; never proposed again.
        Rejected => "rejected",
    }
}

string_enum! {
    /// What the user decides about a transaction match.
    MatchDecision {
        /// Apply it: a duplicate's newer row goes, a transfer is paired.
        Accept => "accept",
        /// Undo it: a held-back duplicate is written, a transfer unpaired.
        Reject => "reject",
    }
}

string_enum! {
    /// The kind of security a holding is.
    AssetType {
        /// Stock.
        Equity => "equity",
        /// Exchange-traded fund.
        Etf => "etf",
        /// Option contract.
        Option => "option",
        /// Mutual fund.
        MutualFund => "mutual_fund",
        /// Bonds and other fixed income.
        FixedIncome => "fixed_income",
        /// Futures contract.
        Futures => "futures",
        /// Cryptocurrency.
        Cryptocurrency => "cryptocurrency",
        /// Cash and cash equivalents (sweep funds).
        CashEquivalent => "cash_equivalent",
        /// Anything else.
        Other => "other",
    }
}

string_enum! {
    /// What wrote a balance snapshot.
    SnapshotSource {
        /// An accounts sync.
        AccountSync => "account_sync",
        /// A holdings sync.
        HoldingsSync => "holdings_sync",
        /// A sync the user asked for (connection sync).
        ManualSync => "manual_sync",
        /// A file import.
        FileImport => "file_import",
        /// The background sync job.
        ScheduledSync => "scheduled_sync",
    }
}

/// The namespace of provider ids (UUIDv5 of the provider slug).
const PROVIDER_NAMESPACE: Uuid = Uuid::from_u128(0x6f0c_5a1e_8d2b_4c7e_9a31_0b5d_e4f2_a817);

/// The stable id of a provider: the UUIDv5 of its slug in a fixed namespace, the same in every
/// installation.
pub fn provider_id(provider_slug: &str) -> Uuid {
    Uuid::new_v5(&PROVIDER_NAMESPACE, provider_slug.as_bytes())
}

/// Masks an account number to `****` and its last four characters. Idempotent, so a number
/// masked already comes back unchanged.
pub fn mask_account_number(number: &str) -> String {
    let number = number.trim();
    let chars: Vec<char> = number.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(4)..].iter().collect();
    format!("****{tail}")
}

/// A stored provider connection.
#[derive(Debug, Clone)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct ConnectionRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// The provider's stable id ([`provider_id`] of the slug).
    pub provider_id: Uuid,
    /// The provider's slug (`schwab`, `file_import`, ...).
    pub provider_slug: String,
    /// The user's name for the connection (for imports: the institution).
    pub alias: Option<String>,
    /// State.
    pub status: ConnectionStatus,
    /// Provider credentials, AES-256-GCM encrypted; `None` when there are none (imports,
    /// disconnected connections).
    pub encrypted_credentials: Option<Vec<u8>>,
    /// Id of the key that encrypted the credentials.
    pub credentials_key_id: Option<String>,
    /// When the provider's access token expires; kept in clear so the refresh job can find
    /// connections that are due without decrypting anything (`None` without credentials).
    pub credentials_expires_at: Option<DateTime<Utc>>,
    /// When the connection was established.
    pub connected_at: DateTime<Utc>,
    /// When it last synced; `None` before the first sync.
    pub last_sync_at: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

impl ConnectionRecord {
    /// Whether the connection is usable (status `active`).
    pub fn is_connected(&self) -> bool {
        self.status == ConnectionStatus::Active
    }
}

/// A connection to create.
#[derive(Debug, Clone)]
pub struct NewConnection {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// The provider's slug; the provider id is derived from it.
    pub provider_slug: String,
    /// The user's name for the connection.
    pub alias: Option<String>,
    /// Initial state.
    pub status: ConnectionStatus,
    /// Encrypted credentials, if any.
    pub encrypted_credentials: Option<Vec<u8>>,
    /// Id of the key that encrypted them.
    pub credentials_key_id: Option<String>,
    /// When the provider's access token expires; kept in clear so the refresh job can find
    /// connections that are due without decrypting anything (`None` without credentials).
    pub credentials_expires_at: Option<DateTime<Utc>>,
    /// Creation time (also `connected_at` and `updated_at`).
    pub created_at: DateTime<Utc>,
}

/// A stored account.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct AccountRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// The connection it came from.
    pub connection_id: Uuid,
    /// The provider's id for the account, unique within the connection.
    pub provider_account_id: String,
    /// The account number masked to its last four characters (`****1234`).
    pub account_number_masked: Option<String>,
    /// Display name.
    pub name: String,
    /// Kind.
    pub account_type: AccountType,
    /// ISO 4217 currency code (upper case).
    pub currency: String,
    /// Current balance.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub balance_amount: Decimal,
    /// Available balance, when the provider reports one.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub available_balance_amount: Option<Decimal>,
    /// Whether the provider still reports the account.
    pub is_active: bool,
    /// When a sync or import last saw it.
    pub last_synced_at: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change of a field (not moved by a sync that changed nothing).
    pub updated_at: DateTime<Utc>,
}

/// An account as a provider or file reports it, to upsert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAccount {
    /// The provider's id for the account: the upsert key within the connection.
    pub provider_account_id: String,
    /// The account number; the store keeps only `****` and its last four characters (an empty
    /// one counts as none).
    pub account_number: Option<String>,
    /// Display name.
    pub name: String,
    /// Kind.
    pub account_type: AccountType,
    /// ISO 4217 currency code (stored upper case).
    pub currency: String,
    /// Current balance.
    pub balance_amount: Decimal,
    /// Available balance, if reported.
    pub available_balance_amount: Option<Decimal>,
    /// Whether the account is open.
    pub is_active: bool,
}

/// Which of the user's accounts to list.
#[derive(Debug, Clone, Default)]
pub struct AccountFilter {
    /// Only the accounts of this connection.
    pub connection_id: Option<Uuid>,
    /// Only active accounts.
    pub active_only: bool,
    /// Only accounts of this type.
    pub account_type: Option<AccountType>,
}

/// A stored transaction.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct TransactionRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Its account.
    pub account_id: Uuid,
    /// The provider's id (for files: the FITID), unique within the account.
    pub provider_transaction_id: String,
    /// Kind.
    pub transaction_type: TransactionType,
    /// The provider's finer kind (`BUY`, `DIV`, `DEBIT`, ...).
    pub subtype: Option<String>,
    /// Settlement state.
    pub status: TransactionStatus,
    /// Amount; negative is money out of the account.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub amount: Decimal,
    /// ISO 4217 currency code (upper case).
    pub currency: String,
    /// Description or payee.
    pub description: Option<String>,
    /// Security symbol, for trades and security income.
    pub symbol: Option<String>,
    /// Security name.
    pub security_name: Option<String>,
    /// Units traded.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub quantity: Option<Decimal>,
    /// Price per unit.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub unit_price: Option<Decimal>,
    /// Commission charged.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub commission: Option<Decimal>,
    /// Trade or posting date.
    pub transaction_date: NaiveDate,
    /// Settlement date.
    pub settlement_date: Option<NaiveDate>,
    /// Which kind of source wrote it.
    pub source: TransactionSource,
    /// For a booked row that took over a pending one (keeping its id): the provider id the
    /// pending row had.
    pub pending_transaction_id: Option<String>,
    /// For a leg of a transfer between two of the user's accounts: the other leg's id.
    pub transfer_transaction_id: Option<Uuid>,
    /// The category: a taxonomy detailed id (`FOOD_AND_DRINK_COFFEE`) or a user's own
    /// (`custom:<uuid>`); `None` when uncategorised.
    pub category: Option<String>,
    /// What chose the category (`None` when nothing did).
    pub category_source: Option<CategorySource>,
    /// The merchant's name: the source's, a rule's, the user's, or derived from the description.
    pub merchant_name: Option<String>,
    /// The user's (or a rule's) notes.
    pub notes: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change of a field.
    pub updated_at: DateTime<Utc>,
}

/// A transaction as a provider or file reports it, to upsert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTransaction {
    /// The provider's id: the upsert key within the account.
    pub provider_transaction_id: String,
    /// Kind.
    pub transaction_type: TransactionType,
    /// The provider's finer kind.
    pub subtype: Option<String>,
    /// Settlement state.
    pub status: TransactionStatus,
    /// Amount; negative is money out.
    pub amount: Decimal,
    /// ISO 4217 currency code (stored upper case).
    pub currency: String,
    /// Description or payee.
    pub description: Option<String>,
    /// Security symbol.
    pub symbol: Option<String>,
    /// Security name.
    pub security_name: Option<String>,
    /// Units traded.
    pub quantity: Option<Decimal>,
    /// Price per unit.
    pub unit_price: Option<Decimal>,
    /// Commission charged.
    pub commission: Option<Decimal>,
    /// Trade or posting date.
    pub transaction_date: NaiveDate,
    /// Settlement date.
    pub settlement_date: Option<NaiveDate>,
    /// For a booked row, the provider's id of the pending row it books, when the provider
    /// links them (Plaid's `pending_transaction_id`): the booked row takes that row over.
    pub pending_transaction_id: Option<String>,
    /// The merchant's ISO 18245 category code as the source reports it (four digits, such as
    /// Enable Banking's `merchant_category_code`): the row's category when nothing of higher
    /// precedence names one.
    pub merchant_code: Option<String>,
}

/// One of a user's own categories, under a primary category of the taxonomy. Shown with the id
/// `custom:<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct CustomCategoryRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// The taxonomy's primary category it sits under (`FOOD_AND_DRINK`).
    pub primary_category: String,
    /// Its name, as the user wrote it.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// One of a user's rules, as stored: its conditions and actions are JSON arrays in the API's
/// shape ([`crate::enrich::rules`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct RuleRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// Its name.
    pub name: String,
    /// `[{field, op, value}]`, as JSON text.
    pub conditions: String,
    /// `[{set_category | set_merchant_name | set_notes: value}]`, as JSON text.
    pub actions: String,
    /// Rules run lowest first (then by id).
    pub priority: i32,
    /// Whether a match ends the run for the row.
    pub stop_processing: bool,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// The user's change to a transaction's enrichment fields: for each, `None` leaves it as it
/// is, `Some(None)` clears it and `Some(Some(value))` sets it. A field the user changed (set or
/// cleared) is the user's from then on: no re-sync, re-import or rule changes it again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionEdit {
    /// A taxonomy detailed id, or `custom:<uuid>` of one of the user's categories.
    pub category: Option<Option<String>>,
    /// The merchant's name.
    pub merchant_name: Option<Option<String>>,
    /// Notes.
    pub notes: Option<Option<String>>,
}

/// What an edit of a transaction did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TransactionEdited {
    /// The transaction as it is now.
    Edited(Box<TransactionRecord>),
    /// The user has no transaction with this id.
    NotFound,
    /// The category is `custom:<uuid>` of no category of the user's: nothing was changed.
    UnknownCategory,
}

/// A recorded match between transaction rows: a duplicate across sources or a transfer
/// pair, applied or suggested, as the reconciler made it and the user decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// The owner of the rows.
    pub user_id: Uuid,
    /// Duplicate or transfer.
    pub kind: MatchKind,
    /// Where it stands.
    pub status: MatchStatus,
    /// The rows it is about that exist now: a duplicate's kept row, then its newer row unless
    /// that one is held back; a transfer's two legs.
    pub transaction_ids: Vec<Uuid>,
    /// How sure the reconciler was, from 0 to 1 (two decimals).
    pub confidence: Decimal,
    /// Why the rows were matched, in words.
    pub reason: String,
    /// When the reconciler made it.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// Which of the user's matches to list: newest first, one page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchFilter {
    /// Only matches in this state.
    pub status: Option<MatchStatus>,
    /// Only matches of this kind.
    pub kind: Option<MatchKind>,
    /// Only matches older than this one (the last of the previous page).
    pub before: Option<Uuid>,
    /// Page size.
    pub limit: u32,
}

/// How to list an account's transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionQuery {
    /// Newest first (`transaction_date`, then id, descending), one page.
    Recent {
        /// Only this type.
        transaction_type: Option<TransactionType>,
        /// Page size.
        limit: u32,
        /// Rows skipped.
        offset: u64,
    },
    /// Newest first like [`Recent`](Self::Recent), from just after `after` (keyset paging,
    /// so a deep page costs what the first does). The page holds up to `limit + 1` rows: a
    /// row beyond `limit` tells the caller that more follow. `total_count` counts every
    /// matching row, before and after `after` alike.
    RecentAfter {
        /// Only this type.
        transaction_type: Option<TransactionType>,
        /// Page size.
        limit: u32,
        /// The last row of the previous page.
        after: TransactionPosition,
    },
    /// Transactions dated within `start..=end`, oldest first (`transaction_date`, then id,
    /// ascending), from just after `after` (keyset paging). The page holds up to `limit + 1`
    /// rows: a row beyond `limit` tells the caller that more follow. `total_count` counts
    /// every row of the range, before and after `after` alike.
    DateRange {
        /// First date, inclusive.
        start: NaiveDate,
        /// Last date, inclusive.
        end: NaiveDate,
        /// Page size.
        limit: u32,
        /// The last row of the previous page; `None` for the first page.
        after: Option<TransactionPosition>,
    },
}

/// Where a row stands in the order of a listing paged by keyset (date, then id): the position
/// a next page starts after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TransactionPosition {
    /// The row's transaction date.
    pub transaction_date: NaiveDate,
    /// The row's id (ties within a date are ordered by id).
    pub id: Uuid,
}

impl TransactionPosition {
    /// The position of a row.
    pub fn of(transaction: &TransactionRecord) -> Self {
        Self {
            transaction_date: transaction.transaction_date,
            id: transaction.id,
        }
    }
}

/// A page of rows and how many rows matched in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The rows of the page.
    pub items: Vec<T>,
    /// Every matching row, not only this page.
    pub total_count: u64,
}

/// Which page of a keyset-paged listing to read: the rows after the one with id `after` (the
/// last row of the previous page; the first page when `None`), at most `limit` of them. A
/// store returns up to `limit + 1` rows, the extra one telling the caller another page follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageAfter {
    /// The page size.
    pub limit: u32,
    /// The id of the row the page starts after.
    pub after: Option<Uuid>,
}

impl PageAfter {
    /// The first `limit` rows.
    pub fn first(limit: u32) -> Self {
        Self { limit, after: None }
    }
}

/// A page of holdings and the counts of every matching holding.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldingPage {
    /// The rows of the page (up to the page size plus one, see [`PageAfter`]).
    pub items: Vec<HoldingRecord>,
    /// Every matching holding, not only this page.
    pub total_count: u64,
    /// The active ones among them.
    pub active_count: u64,
}

/// What a batch upsert did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpsertCounts {
    /// Rows inserted.
    pub created: u64,
    /// Existing rows with at least one changed field, now updated.
    pub updated: u64,
    /// Existing rows whose fields were all equal; left as they were.
    pub unchanged: u64,
    /// The id of the row behind each input, in input order; a transaction held back as
    /// another source's duplicate has none (it is counted as matched instead).
    pub ids: Vec<Uuid>,
}

/// A stored holding (position).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct HoldingRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Its account.
    pub account_id: Uuid,
    /// The provider's id for the position, unique within the account.
    pub provider_holding_id: String,
    /// Security symbol.
    pub symbol: String,
    /// Security name.
    pub security_name: Option<String>,
    /// Kind of security.
    pub asset_type: AssetType,
    /// Units held.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub quantity: Decimal,
    /// Total cost basis.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub cost_basis: Option<Decimal>,
    /// Market value.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub market_value: Decimal,
    /// ISO 4217 currency code (upper case).
    pub currency: String,
    /// Average price paid per unit.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub average_price: Option<Decimal>,
    /// Latest price per unit.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub current_price: Option<Decimal>,
    /// Market value minus cost basis.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub unrealized_gain_loss: Option<Decimal>,
    /// Whether the provider still reports the position.
    pub is_active: bool,
    /// When a sync or import last saw it.
    pub last_synced_at: Option<DateTime<Utc>>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change of a field.
    pub updated_at: DateTime<Utc>,
}

/// A holding as a provider or file reports it, to upsert (and mark active).
#[derive(Debug, Clone, PartialEq)]
pub struct NewHolding {
    /// The provider's id for the position: the upsert key within the account.
    pub provider_holding_id: String,
    /// Security symbol.
    pub symbol: String,
    /// Security name.
    pub security_name: Option<String>,
    /// Kind of security.
    pub asset_type: AssetType,
    /// Units held.
    pub quantity: Decimal,
    /// Total cost basis.
    pub cost_basis: Option<Decimal>,
    /// Market value.
    pub market_value: Decimal,
    /// ISO 4217 currency code (stored upper case).
    pub currency: String,
    /// Average price paid per unit.
    pub average_price: Option<Decimal>,
    /// Latest price per unit.
    pub current_price: Option<Decimal>,
    /// Market value minus cost basis.
    pub unrealized_gain_loss: Option<Decimal>,
}

/// Which of the user's holdings to list.
#[derive(Debug, Clone, Default)]
pub struct HoldingFilter {
    /// Only the holdings of this account.
    pub account_id: Option<Uuid>,
    /// Only active holdings.
    pub active_only: bool,
    /// Only this kind of security.
    pub asset_type: Option<AssetType>,
    /// Only this symbol (compared case-insensitively).
    pub symbol: Option<String>,
}

/// A stored balance snapshot.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct SnapshotRecord {
    /// Id (UUIDv7).
    pub id: Uuid,
    /// Its account.
    pub account_id: Uuid,
    /// Balance.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub balance: Decimal,
    /// Available balance, if known.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub available_balance: Option<Decimal>,
    /// Market value of the holdings, if known.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub holdings_value: Option<Decimal>,
    /// Cash, if known.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::OptionalDec")
    )]
    pub cash_value: Option<Decimal>,
    /// ISO 4217 currency code (upper case).
    pub currency: String,
    /// What wrote it.
    pub source: SnapshotSource,
    /// When the balance was captured.
    pub captured_at: DateTime<Utc>,
}

/// A balance snapshot to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSnapshot {
    /// Its account.
    pub account_id: Uuid,
    /// Balance.
    pub balance: Decimal,
    /// Available balance, if known.
    pub available_balance: Option<Decimal>,
    /// Market value of the holdings, if known.
    pub holdings_value: Option<Decimal>,
    /// Cash, if known.
    pub cash_value: Option<Decimal>,
    /// ISO 4217 currency code (stored upper case).
    pub currency: String,
    /// What writes it.
    pub source: SnapshotSource,
    /// When the balance was captured (truncated to microseconds by the caller, the precision
    /// both databases keep).
    pub captured_at: DateTime<Utc>,
}

/// One account's balance at one point of a history, as
/// [`SnapshotStore::balances_at`] reads it: the balance of the account's latest snapshot before
/// the point.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct PointBalance {
    /// The point's index in the list asked for.
    pub point: i64,
    /// The account.
    pub account_id: Uuid,
    /// The account's kind.
    pub account_type: AccountType,
    /// The balance of its latest snapshot before the point.
    #[cfg_attr(
        any(feature = "sqlite", feature = "postgres"),
        sqlx(try_from = "crate::store::sql::Dec")
    )]
    pub balance: Decimal,
}

/// Provider connections.
#[async_trait]
pub trait ConnectionStore: Send + Sync {
    /// Creates a connection and returns it. [`StoreError::Other`] when the user does not exist.
    async fn create_connection(
        &self,
        connection: &NewConnection,
    ) -> Result<ConnectionRecord, StoreError>;

    /// The user's connection with this provider slug and alias (compared exactly; `None`
    /// matches only `None`) that is not disconnected; when there is none, creates one with
    /// status `active` and no credentials. Atomic per user: concurrent calls with the same key
    /// return the same connection. [`StoreError::Other`] when the user does not exist.
    async fn find_or_create_connection(
        &self,
        user_id: Uuid,
        provider_slug: &str,
        alias: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<ConnectionRecord, StoreError>;

    /// One connection of the user; `None` when unknown or another user's.
    async fn connection_for_user(
        &self,
        user_id: Uuid,
        connection_id: Uuid,
    ) -> Result<Option<ConnectionRecord>, StoreError>;
}

/// Accounts.
#[async_trait]
pub trait AccountStore: Send + Sync {
    /// Inserts or updates accounts of a connection, keyed on `provider_account_id` within the
    /// connection, all in one transaction (all or nothing). An existing row counts as updated
    /// only when a field differs (decimals compared by value), and only then moves
    /// `updated_at`; every row's `last_synced_at` becomes `now`. A key repeated in the batch
    /// is applied in order. [`StoreError::Other`] when the connection does not exist; the
    /// caller checks that it belongs to the right user.
    async fn upsert_accounts(
        &self,
        connection_id: Uuid,
        accounts: &[NewAccount],
        now: DateTime<Utc>,
    ) -> Result<UpsertCounts, StoreError>;

    /// One account of the user; `None` when unknown or another user's.
    async fn account_for_user(
        &self,
        user_id: Uuid,
        account_id: Uuid,
    ) -> Result<Option<AccountRecord>, StoreError>;

    /// The user's accounts matching the filter, by name then id. Not paged (a user has few
    /// accounts).
    async fn accounts_for_user(
        &self,
        user_id: Uuid,
        filter: &AccountFilter,
    ) -> Result<Vec<AccountRecord>, StoreError>;
}

/// Transactions.
#[async_trait]
pub trait TransactionStore: Send + Sync {
    /// Inserts or updates transactions of an account, keyed on `provider_transaction_id`
    /// within the account, all in one transaction (all or nothing). An existing row counts as
    /// updated only when a field differs, and only then moves `updated_at`. Identity only: the
    /// rows are not reconciled (that is the batch writer's, for imports and syncs alike:
    /// [`BatchStore`](super::BatchStore)), and new ones
    /// take the source `import` with the origin `file_import`.
    /// [`StoreError::Other`] when the account does not exist; the caller checks ownership.
    async fn upsert_transactions(
        &self,
        account_id: Uuid,
        transactions: &[NewTransaction],
        now: DateTime<Utc>,
    ) -> Result<UpsertCounts, StoreError>;

    /// One transaction of the user; `None` when unknown or another user's.
    async fn transaction_for_user(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
    ) -> Result<Option<TransactionRecord>, StoreError>;

    /// Transactions of one of the user's accounts, with the count of every matching row.
    /// An unknown or foreign account gives an empty page (check the account first to tell
    /// 404 apart).
    async fn transactions_for_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        query: &TransactionQuery,
    ) -> Result<Page<TransactionRecord>, StoreError>;

    /// The user's transaction matches in the filter, newest first, at most `limit + 1` (a
    /// row beyond `limit` tells that more follow).
    async fn transaction_matches(
        &self,
        user_id: Uuid,
        filter: &MatchFilter,
    ) -> Result<Vec<MatchRecord>, StoreError>;

    /// Applies the user's decision on one of their matches in one database transaction:
    /// accepting a duplicate deletes its newer row (kept in the match, so a later rejection
    /// writes it again), rejecting one writes the row held back; accepting a transfer pairs
    /// its legs, rejecting it unpairs them. Deciding what already holds changes nothing.
    /// `raise` is called with the changed match inside the transaction (not when nothing
    /// changed); its events are written there and appended to `raised` once committed.
    /// `None` when the user has no such match; [`StoreError::Conflict`] when accepting a
    /// transfer whose leg is paired with another row meanwhile.
    async fn decide_match(
        &self,
        user_id: Uuid,
        match_id: Uuid,
        decision: MatchDecision,
        now: DateTime<Utc>,
        raise: &RaiseEvents<'_, MatchRecord>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<MatchRecord>, StoreError>;

    /// The user's own categories, oldest first.
    async fn custom_categories(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<CustomCategoryRecord>, StoreError>;

    /// Stores a new category of `category.user_id`, unless the user holds `limit` already
    /// (`false`, nothing stored). Atomic: two concurrent creations cannot pass the limit.
    async fn create_custom_category(
        &self,
        category: &CustomCategoryRecord,
        limit: u64,
    ) -> Result<bool, StoreError>;

    /// Deletes one of the user's categories and moves its transactions back to uncategorised,
    /// in one database transaction; how many transactions it had. `None` when the user has no
    /// such category.
    async fn delete_custom_category(
        &self,
        user_id: Uuid,
        category_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<u64>, StoreError>;

    /// Applies the user's edit to one of their transactions, marking each field it names as
    /// the user's (a category gets the source `user`), in one database transaction. The
    /// caller checks that a taxonomy category exists; a custom one is checked here, against
    /// the user's categories in the same transaction.
    async fn edit_transaction(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
        edit: &TransactionEdit,
        now: DateTime<Utc>,
    ) -> Result<TransactionEdited, StoreError>;
    /// The user's rules in the order they run: priority, then id.
    async fn rules(&self, user_id: Uuid) -> Result<Vec<RuleRecord>, StoreError>;

    /// Stores a new rule of `rule.user_id`, unless the user holds `limit` already (`false`,
    /// nothing stored). Atomic: two concurrent creations cannot pass the limit.
    async fn create_rule(&self, rule: &RuleRecord, limit: u64) -> Result<bool, StoreError>;

    /// Rewrites the user's rule `rule.id` (name, conditions, actions, priority,
    /// stop_processing, updated_at); `false` when the user has no such rule.
    async fn update_rule(&self, rule: &RuleRecord) -> Result<bool, StoreError>;

    /// Deletes one of the user's rules; `false` when the user has no such rule.
    async fn delete_rule(&self, user_id: Uuid, rule_id: Uuid) -> Result<bool, StoreError>;

    /// What running `rule` alone over every transaction of the user would change (fields the
    /// user set left alone): the count and the first `sample` changes. Reads page by page
    /// (bounded memory), writes nothing.
    async fn preview_rule(
        &self,
        user_id: Uuid,
        rule: &crate::enrich::rules::Rule,
        sample: usize,
    ) -> Result<crate::enrich::rules::RulePreview, StoreError>;

    /// Runs `rule` alone over every transaction of the user, in one database transaction,
    /// page by page; fields the user set are left alone, a category it sets gets the source
    /// `rule`. How many rows changed.
    async fn apply_rule(
        &self,
        user_id: Uuid,
        rule: &crate::enrich::rules::Rule,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError>;
}

/// Holdings.
#[async_trait]
pub trait HoldingStore: Send + Sync {
    /// Inserts or updates holdings of an account, keyed on `provider_holding_id` within the
    /// account, all in one transaction (all or nothing), and marks each active. An existing
    /// row counts as updated only when a field differs (reactivation included), and only then
    /// moves `updated_at`; every row's `last_synced_at` becomes `now`.
    /// [`StoreError::Other`] when the account does not exist; the caller checks ownership.
    async fn upsert_holdings(
        &self,
        account_id: Uuid,
        holdings: &[NewHolding],
        now: DateTime<Utc>,
    ) -> Result<UpsertCounts, StoreError>;

    /// Marks inactive every active holding of the account whose provider id is not in
    /// `keep_provider_ids` (all of them when it is empty); the number deactivated. One
    /// statement, so atomic.
    async fn deactivate_missing_holdings(
        &self,
        account_id: Uuid,
        keep_provider_ids: &[String],
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError>;

    /// The user's holdings matching the filter, by symbol then id: the page `page` asks for
    /// (the holding named by `page.after` is found by id among the user's, in the filter's
    /// account when it names one, at its symbol as stored now; an unknown one gives no rows),
    /// with the counts of every matching holding.
    async fn holdings_for_user(
        &self,
        user_id: Uuid,
        filter: &HoldingFilter,
        page: PageAfter,
    ) -> Result<HoldingPage, StoreError>;
}

/// Balance snapshots.
#[async_trait]
pub trait SnapshotStore: Send + Sync {
    /// Stores a snapshot and returns it. [`StoreError::Other`] when the account does not exist.
    async fn insert_snapshot(&self, snapshot: &NewSnapshot) -> Result<SnapshotRecord, StoreError>;

    /// The latest snapshot (by `captured_at`, then id) of each of the user's accounts that has
    /// one, ordered like the accounts list (name, then id).
    async fn latest_snapshots_for_user(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<SnapshotRecord>, StoreError>;

    /// Snapshots of one of the user's accounts captured within `start..=end`, optionally of one
    /// source, oldest first (by `captured_at`, then id): the page `page` asks for (the snapshot
    /// named by `page.after` is found in the account by id; an unknown one gives no rows), with
    /// the count of every snapshot in the range. Empty for an unknown or foreign account.
    async fn balance_history(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        source: Option<SnapshotSource>,
        page: PageAfter,
    ) -> Result<Page<SnapshotRecord>, StoreError>;

    /// The newest `limit` snapshots of one of the user's accounts, optionally of one source,
    /// newest first, with the count of every matching snapshot. Empty for an unknown or
    /// foreign account.
    async fn snapshots_for_account(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        limit: u32,
        source: Option<SnapshotSource>,
    ) -> Result<Page<SnapshotRecord>, StoreError>;

    /// For each instant of `points` and each of the user's active accounts in `currency`
    /// (compared upper case), the balance of the account's latest snapshot (by `captured_at`,
    /// then id) captured strictly before that instant, in one query: the history of a net
    /// worth chart. A point before an account's first snapshot has no row for that account.
    /// Rows come ordered by point index, then account id; empty when `points` is.
    async fn balances_at(
        &self,
        user_id: Uuid,
        currency: &str,
        points: &[DateTime<Utc>],
    ) -> Result<Vec<PointBalance>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_ids() {
        assert_eq!(mask_account_number("123456789"), "****6789");
        assert_eq!(mask_account_number("****6789"), "****6789");
        assert_eq!(mask_account_number("12"), "****12");
        assert_eq!(provider_id("schwab"), provider_id("schwab"));
        assert_ne!(provider_id("schwab"), provider_id("file_import"));
        assert_eq!(provider_id("schwab").get_version_num(), 5);
        assert_eq!(AccountType::parse("401k"), Some(AccountType::Plan401k));
        assert_eq!(AccountType::Plan401k.as_str(), "401k");
        assert_eq!(AssetType::parse("bond"), None);
        for status in ConnectionStatus::ALL {
            assert_eq!(ConnectionStatus::parse(status.as_str()), Some(*status));
        }
    }
}
