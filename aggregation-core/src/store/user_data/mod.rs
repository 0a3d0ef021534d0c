//! The store side of users' own data: the erasure of everything a user owns (begun in one
//! transaction, then deleted in bounded batches under a lease) and the keyset reads the export
//! streams page by page.
//!
//! [`USER_TABLES`] lists every table holding a user's rows, in the order erasure empties them,
//! with the SQL that deletes one batch and where the export puts (or why it leaves out) its
//! rows. A test reads the migrated schema and fails when a table that reaches `users` (a
//! `user_id` column, or a chain of foreign keys) is missing from it: a migration adding such a
//! table adds a row here.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    AccountRecord, HoldingRecord, SnapshotRecord, StoreError, TransactionPosition,
    TransactionRecord, UserRecord,
};
use crate::events::Event;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(in crate::store) mod sql;
#[cfg(test)]
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod tests;

/// Where the export puts a table's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exported {
    /// In this section of the export document.
    Section(&'static str),
    /// Not exported, for this reason (secrets, or the service's own bookkeeping).
    Omitted(&'static str),
}

/// One table holding a user's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserTable {
    /// The table's name.
    pub name: &'static str,
    /// Where the export puts its rows.
    pub exported: Exported,
    /// Deletes at most `$2` of the rows of user `$1`; the same text on both backends.
    pub(crate) erase_batch: &'static str,
}

/// The rows of a user's accounts, for the batch deletes of the tables below them.
macro_rules! user_accounts {
    () => {
        "SELECT a.id FROM accounts a JOIN connections c ON c.id = a.connection_id \
         WHERE c.user_id = $1"
    };
}

/// Every table holding a user's rows, in the order erasure empties them (children before the
/// rows their foreign keys point to), except `users` itself, whose row goes last
/// ([`UserDataStore::finish_user_erasure`]), and `user_erasures`, the record of the erasure
/// (ids and times, kept). A table added by a migration that reaches a user gets a row here.
pub const USER_TABLES: &[UserTable] = &[
    UserTable {
        name: "webhook_attempts",
        exported: Exported::Omitted("delivery bookkeeping of the user's webhooks"),
        erase_batch: "DELETE FROM webhook_attempts WHERE (endpoint_id, event_id, attempt) IN \
             (SELECT w.endpoint_id, w.event_id, w.attempt FROM webhook_attempts w \
              JOIN webhook_endpoints e ON e.id = w.endpoint_id WHERE e.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "webhook_deliveries",
        exported: Exported::Omitted("delivery bookkeeping of the user's webhooks"),
        erase_batch: "DELETE FROM webhook_deliveries WHERE (endpoint_id, event_id) IN \
             (SELECT d.endpoint_id, d.event_id FROM webhook_deliveries d \
              JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "transaction_matches",
        exported: Exported::Section("transaction_matches"),
        erase_batch: "DELETE FROM transaction_matches WHERE id IN \
             (SELECT m.id FROM transaction_matches m WHERE m.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "custom_categories",
        exported: Exported::Section("categories"),
        erase_batch: "DELETE FROM custom_categories WHERE id IN \
             (SELECT k.id FROM custom_categories k WHERE k.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "rules",
        exported: Exported::Section("rules"),
        erase_batch: "DELETE FROM rules WHERE id IN \
             (SELECT r.id FROM rules r WHERE r.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "transactions",
        exported: Exported::Section("transactions"),
        erase_batch: concat!(
            "DELETE FROM transactions WHERE id IN (SELECT t.id FROM transactions t \
             WHERE t.account_id IN (",
            user_accounts!(),
            ") LIMIT $2)"
        ),
    },
    UserTable {
        name: "holdings",
        exported: Exported::Section("holdings"),
        erase_batch: concat!(
            "DELETE FROM holdings WHERE id IN (SELECT h.id FROM holdings h \
             WHERE h.account_id IN (",
            user_accounts!(),
            ") LIMIT $2)"
        ),
    },
    UserTable {
        name: "balance_snapshots",
        exported: Exported::Section("balance_snapshots"),
        erase_batch: concat!(
            "DELETE FROM balance_snapshots WHERE id IN (SELECT s.id FROM balance_snapshots s \
             WHERE s.account_id IN (",
            user_accounts!(),
            ") LIMIT $2)"
        ),
    },
    UserTable {
        name: "sync_claims",
        exported: Exported::Omitted("sync cool-downs, the service's bookkeeping"),
        erase_batch: concat!(
            "DELETE FROM sync_claims WHERE (subject_id, kind) IN (SELECT s.subject_id, s.kind \
             FROM sync_claims s WHERE s.subject_id IN (SELECT id FROM connections \
             WHERE user_id = $1) OR s.subject_id IN (",
            user_accounts!(),
            ") LIMIT $2)"
        ),
    },
    UserTable {
        name: "provider_request_budgets",
        exported: Exported::Omitted("provider request budgets, the service's bookkeeping"),
        erase_batch: "DELETE FROM provider_request_budgets WHERE connection_id IN \
             (SELECT b.connection_id FROM provider_request_budgets b \
              JOIN connections c ON c.id = b.connection_id WHERE c.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "provider_cursors",
        exported: Exported::Omitted("a change feed's position, the service's bookkeeping"),
        erase_batch: "DELETE FROM provider_cursors WHERE connection_id IN \
             (SELECT p.connection_id FROM provider_cursors p \
              JOIN connections c ON c.id = p.connection_id WHERE c.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "provider_webhook_keys",
        exported: Exported::Omitted("digests that route a provider's webhooks, bookkeeping"),
        erase_batch: "DELETE FROM provider_webhook_keys WHERE connection_id IN \
             (SELECT k.connection_id FROM provider_webhook_keys k \
              JOIN connections c ON c.id = k.connection_id WHERE c.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "import_staging",
        exported: Exported::Omitted("the accounts of an import still being written, bookkeeping"),
        erase_batch: "DELETE FROM import_staging WHERE account_id IN \
             (SELECT s.account_id FROM import_staging s WHERE s.user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "accounts",
        exported: Exported::Section("accounts"),
        erase_batch: concat!(
            "DELETE FROM accounts WHERE id IN (",
            user_accounts!(),
            " LIMIT $2)"
        ),
    },
    UserTable {
        name: "connections",
        exported: Exported::Section("connections"),
        erase_batch: "DELETE FROM connections WHERE id IN \
             (SELECT id FROM connections WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "webhook_endpoints",
        exported: Exported::Section("webhooks"),
        erase_batch: "DELETE FROM webhook_endpoints WHERE id IN \
             (SELECT id FROM webhook_endpoints WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "oauth_states",
        exported: Exported::Omitted("pending authorizations: secrets of a few minutes"),
        erase_batch: "DELETE FROM oauth_states WHERE state_digest IN \
             (SELECT state_digest FROM oauth_states WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "refresh_tokens",
        exported: Exported::Omitted("token digests: secrets"),
        erase_batch: "DELETE FROM refresh_tokens WHERE digest IN \
             (SELECT digest FROM refresh_tokens WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "sessions",
        exported: Exported::Section("sessions"),
        erase_batch: "DELETE FROM sessions WHERE id IN \
             (SELECT id FROM sessions WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "one_time_tokens",
        exported: Exported::Omitted("token digests: secrets"),
        erase_batch: "DELETE FROM one_time_tokens WHERE digest IN \
             (SELECT digest FROM one_time_tokens WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "login_networks",
        exported: Exported::Omitted("keyed digests for the login throttle"),
        erase_batch: "DELETE FROM login_networks WHERE (user_id, network_digest) IN \
             (SELECT user_id, network_digest FROM login_networks WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "token_rotations",
        exported: Exported::Omitted("administrators' security records"),
        erase_batch: "DELETE FROM token_rotations WHERE id IN \
             (SELECT id FROM token_rotations WHERE user_id = $1 LIMIT $2)",
    },
    UserTable {
        name: "events",
        exported: Exported::Section("events"),
        // The audit trail keeps `user.deleted` (ids and a time only).
        erase_batch: "DELETE FROM events WHERE id IN (SELECT id FROM events \
             WHERE user_id = $1 AND type <> 'user.deleted' LIMIT $2)",
    },
    UserTable {
        name: "user_roles",
        exported: Exported::Section("user"),
        erase_batch: "DELETE FROM user_roles WHERE (user_id, role) IN \
             (SELECT user_id, role FROM user_roles WHERE user_id = $1 LIMIT $2)",
    },
];

/// The tables that reach a user and are not emptied by a batch of [`USER_TABLES`], with why.
pub const KEPT_USER_TABLES: &[(&str, &str)] = &[
    ("users", "deleted last, once every batch is done"),
    (
        "user_erasures",
        "the record of the erasure: ids and times only",
    ),
];

/// An erasure about to begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUserErasure {
    /// The user erased.
    pub user_id: Uuid,
    /// The administrator who asked; `None` when the user did.
    pub requested_by: Option<Uuid>,
    /// When it was asked.
    pub requested_at: DateTime<Utc>,
}

/// The record of an erasure.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(any(feature = "sqlite", feature = "postgres"), derive(sqlx::FromRow))]
pub struct UserErasureRecord {
    /// The user erased.
    pub user_id: Uuid,
    /// When it was asked.
    pub requested_at: DateTime<Utc>,
    /// The administrator who asked; `None` when the user did.
    pub requested_by: Option<Uuid>,
    /// Rows deleted so far.
    pub deleted_rows: i64,
    /// When the last row went; `None` while under way.
    pub finished_at: Option<DateTime<Utc>>,
}

/// Erasure and export of a user's own data.
#[async_trait]
pub trait UserDataStore: Send + Sync {
    /// Begins erasing `erasure.user_id`, atomically: writes the erasure record, raises the
    /// user's minimum token version, revokes every session and refresh token, removes the
    /// roles, and frees the email (the row keeps no email or password hash, so a login
    /// answers as for an unknown account and the email can register again); then writes
    /// `events`. The user as it was before; `None` (nothing written) when there is no such
    /// user or its erasure has begun already.
    async fn begin_user_erasure(
        &self,
        erasure: &NewUserErasure,
        events: &[Event],
    ) -> Result<Option<UserRecord>, StoreError>;

    /// Leases an unfinished erasure to `owner` until `lease_until`: that of `user_id`, or
    /// with `None` the oldest one. An erasure whose lease is held by another owner and has
    /// not lapsed at `now` is not taken. The user leased; `None` when there is none to take.
    async fn claim_user_erasure(
        &self,
        user_id: Option<Uuid>,
        owner: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<Uuid>, StoreError>;

    /// Deletes at most `limit` rows of the user, from the first table of [`USER_TABLES`]
    /// that still holds some, in one transaction that also extends the lease to
    /// `lease_until`. The rows deleted (0: every table is empty); `None` (nothing deleted)
    /// when `owner` no longer holds the lease.
    async fn erase_user_batch(
        &self,
        user_id: Uuid,
        owner: &str,
        limit: u32,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<u64>, StoreError>;

    /// Ends the erasure: deletes the user's row (and whatever still cascades from it) and
    /// marks the record finished at `at`, atomically. `false` when `owner` no longer holds
    /// the lease.
    async fn finish_user_erasure(
        &self,
        user_id: Uuid,
        owner: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// The erasure record of a user; `None` when it was never erased.
    async fn user_erasure(&self, user_id: Uuid) -> Result<Option<UserErasureRecord>, StoreError>;

    /// The users whose erasure was asked at or after `since`.
    async fn users_erased_since(&self, since: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError>;

    /// At most `limit` of the user's accounts with ids after `after`, by id.
    async fn export_accounts(
        &self,
        user_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<AccountRecord>, StoreError>;

    /// At most `limit` transactions of one of the user's accounts, oldest first
    /// (`transaction_date`, then id), after `after`. Empty when the account is not the
    /// user's.
    async fn export_transactions(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        after: Option<TransactionPosition>,
        limit: u32,
    ) -> Result<Vec<TransactionRecord>, StoreError>;

    /// At most `limit` holdings (active or not) of one of the user's accounts, by id, after
    /// `after`.
    async fn export_holdings(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<HoldingRecord>, StoreError>;

    /// At most `limit` balance snapshots of one of the user's accounts, by id, after
    /// `after`.
    async fn export_snapshots(
        &self,
        user_id: Uuid,
        account_id: Uuid,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<SnapshotRecord>, StoreError>;
}
