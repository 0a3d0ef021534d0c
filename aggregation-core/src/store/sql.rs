//! What both SQL backends share: the mapping of sqlx errors, the decoding of values stored as
//! text (decimals, enum names), and the small conversions the aggregate files use.
//!
//! The aggregate files themselves (`sql_users.rs`, `sql_sessions.rs`, ...) are plain Rust over
//! the aliases `Db`, `Tx` and `SqlStore` of their backend: `sqlite.rs` and `postgres.rs` each
//! include them once, as a generic over the two backends would, without restating sqlx's trait
//! bounds on every function. `$n` placeholders, `ON CONFLICT` and
//! `RETURNING` work on SQLite and PostgreSQL alike, so the SQL cannot drift between them.

use std::str::FromStr as _;

use rust_decimal::Decimal;
use sqlx::Database;
use sqlx::error::BoxDynError;
use uuid::Uuid;

use super::records::{
    AccountType, AssetType, ConnectionStatus, SnapshotSource, TransactionStatus, TransactionType,
    UpsertCounts,
};
use super::{RotationScope, StoreError};
use crate::events::EventType;

/// Every way a call can run out of time (no pooled connection within the acquire timeout, a
/// PostgreSQL `statement_timeout`, a SQLite lock still held when the busy timeout ends) is
/// [`StoreError::Unavailable`], which the API answers with 503. The detail is logged here.
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                tracing::error!(error = %error, "store unavailable");
                Self::Unavailable(error.to_string())
            }
            sqlx::Error::Database(database) if timed_out(database.as_ref()) => {
                tracing::error!(error = %error, "store call timed out");
                Self::Unavailable(error.to_string())
            }
            sqlx::Error::Database(database) if database.is_unique_violation() => {
                Self::Conflict(database.message().to_owned())
            }
            sqlx::Error::Database(database) if lost_a_race(database.as_ref()) => {
                // Writers take rows in one order, so this is rare; the client may simply retry.
                tracing::warn!(error = %error, "concurrent write conflict");
                Self::Unavailable(error.to_string())
            }
            _ => {
                tracing::error!(error = %error, "store failure");
                Self::Other(error.to_string())
            }
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        use sqlx::migrate::MigrateError;
        match error {
            MigrateError::Execute(error) | MigrateError::ExecuteMigration(error, _) => error.into(),
            other => {
                tracing::error!(error = %other, "migration failure");
                Self::Other(other.to_string())
            }
        }
    }
}

/// Whether PostgreSQL gave up a transaction for a concurrent one: `deadlock_detected` (40P01)
/// or `serialization_failure` (40001).
fn lost_a_race(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(error) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        return matches!(error.code(), "40P01" | "40001");
    }
    let _ = error;
    false
}

/// Whether a database error means the call ran out of time rather than failed.
fn timed_out(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(error) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        // query_canceled: what `statement_timeout` raises.
        return error.code() == "57014";
    }
    #[cfg(feature = "sqlite")]
    if let Some(error) = error.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        use sqlx::error::DatabaseError as _;
        const SQLITE_BUSY: i32 = 5;
        const SQLITE_LOCKED: i32 = 6;
        // The primary result code is the low byte of the extended one.
        let primary = error
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .map(|code| code & 0xff);
        return matches!(primary, Some(SQLITE_BUSY | SQLITE_LOCKED));
    }
    false
}

/// Lets rows decode values stored as text: `$parse` turns the column's `&str` (named `$text`)
/// into the value, or fails the decode.
macro_rules! stored_as_text {
    ($($name:ty => |$text:ident| $parse:expr;)+) => {$(
        impl<DB: Database> sqlx::Type<DB> for $name
        where
            str: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: Database> sqlx::Decode<'r, DB> for $name
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(value: DB::ValueRef<'r>) -> Result<Self, BoxDynError> {
                let $text = <&str as sqlx::Decode<'r, DB>>::decode(value)?;
                $parse
            }
        }
    )+};
}

stored_as_text! {
    AccountType => |name| by_name(AccountType::parse(name), name);
    AssetType => |name| by_name(AssetType::parse(name), name);
    ConnectionStatus => |name| by_name(ConnectionStatus::parse(name), name);
    EventType => |name| by_name(EventType::parse(name), name);
    RotationScope => |name| by_name(RotationScope::parse(name), name);
    SnapshotSource => |name| by_name(SnapshotSource::parse(name), name);
    TransactionStatus => |name| by_name(TransactionStatus::parse(name), name);
    TransactionType => |name| by_name(TransactionType::parse(name), name);
    Dec => |text| Decimal::from_str(text)
        .map(Dec)
        .map_err(|error| format!("{text:?}: {error}").into());
}

/// An enum value parsed from its stored name; an unknown name fails the decode.
fn by_name<T>(value: Option<T>, name: &str) -> Result<T, BoxDynError> {
    value.ok_or_else(|| format!("unknown value {name:?}").into())
}

/// A decimal stored as its text (never a float), decoded by value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Dec(pub(super) Decimal);

impl From<Dec> for Decimal {
    fn from(Dec(value): Dec) -> Self {
        value
    }
}

/// An optional decimal stored as text (`NULL` for none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OptionalDec(Option<Decimal>);

impl<DB: Database> sqlx::Type<DB> for OptionalDec
where
    Dec: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <Dec as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <Dec as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<'r, DB: Database> sqlx::Decode<'r, DB> for OptionalDec
where
    Dec: sqlx::Decode<'r, DB>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, BoxDynError> {
        let decimal = <Option<Dec> as sqlx::Decode<'r, DB>>::decode(value)?;
        Ok(Self(decimal.map(Decimal::from)))
    }
}

impl From<OptionalDec> for Option<Decimal> {
    fn from(OptionalDec(value): OptionalDec) -> Self {
        value
    }
}

/// The stored text of a decimal.
pub(super) fn text(value: Decimal) -> String {
    value.to_string()
}

/// The stored text of an optional decimal.
pub(super) fn optional_text(value: Option<Decimal>) -> Option<String> {
    value.map(text)
}

/// A currency code as stored: trimmed, upper case.
pub(super) fn currency(code: &str) -> String {
    code.trim().to_ascii_uppercase()
}

/// A database count as `u64` (a negative count cannot happen; it reads as zero).
pub(super) fn count(total: i64) -> u64 {
    u64::try_from(total).unwrap_or(0)
}

/// Events per statement of the outbox (`sql_events.rs`): its insert and its webhook fan-out
/// each bind 5 parameters an event, so a chunk stays far below SQLite's 32,766 and
/// PostgreSQL's 65,535 bound parameters, and a revocation of every session of a user still
/// takes one chunk in all but extreme cases.
pub(super) const EVENTS_PER_STATEMENT: usize = 1_000;

/// What an upsert did to one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Upserted {
    Created,
    Updated,
    Unchanged,
}

/// Adds upserts to `counts` and records their ids, in order.
pub(super) fn tally(counts: &mut UpsertCounts, done: impl IntoIterator<Item = (Uuid, Upserted)>) {
    for (id, outcome) in done {
        match outcome {
            Upserted::Created => counts.created += 1,
            Upserted::Updated => counts.updated += 1,
            Upserted::Unchanged => counts.unchanged += 1,
        }
        counts.ids.push(id);
    }
}

/// The counts of a batch of upserts.
pub(super) fn counted(done: Vec<(Uuid, Upserted)>) -> UpsertCounts {
    let mut counts = UpsertCounts::default();
    tally(&mut counts, done);
    counts
}
