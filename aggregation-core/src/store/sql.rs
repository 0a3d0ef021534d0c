//! What both SQL backends share: the mapping of sqlx errors, the decoding of values stored as
//! text (decimals, enum names), and the small conversions the aggregate files use.
//!
//! The aggregate files themselves (`sql_users.rs`, `sql_sessions.rs`, ...) are generic over the
//! [`Backend`](super::Backend) and compiled once (see `backend.rs`). `$n` placeholders, `ON CONFLICT` and
//! `RETURNING` work on SQLite and PostgreSQL alike, so the SQL cannot drift between them.

use std::str::FromStr as _;

use rust_decimal::Decimal;
use sqlx::Database;
use sqlx::error::BoxDynError;
use uuid::Uuid;

use super::records::{
    AccountType, AssetType, CategorySource, ConnectionStatus, SnapshotSource, TransactionSource,
    TransactionStatus, TransactionType, UpsertCounts,
};
use super::{RotationScope, StoreError};
use crate::events::EventType;

/// Every failure to reach or talk to the database is [`StoreError::Unavailable`], which the API
/// answers with 503: no pooled connection within the acquire timeout, a closed pool, I/O, TLS
/// and wire-protocol errors (a server that accepts and closes a connection fails the
/// `SSLRequest` exchange), a crashed connection worker, the server refusing connections or
/// shutting down. What says the database answered but this call ran out of time is
/// [`StoreError::Busy`], also 503 but never counted toward the circuit breaker: a PostgreSQL
/// `statement_timeout` (57014) or lock timeout (55P03), a SQLite lock still held when the busy
/// timeout ends, a transaction given up for a concurrent one. (A pool acquire timeout is
/// ambiguous, a busy pool or a database gone; the breaker tells them apart with a ping that
/// does not wait for the pool.) Only what says the store answered and our own code or data is
/// at fault (decoding a row, a broken invariant) is [`StoreError::Other`], answered with 500.
///
/// Unavailability is not logged here: the service logs an outage once when it starts, as a
/// count while it lasts and once when it ends (see `store::guard`), not once per call.
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::BeginFailed => {
                tracing::debug!(error = %error, "store unavailable");
                Self::Unavailable(error.to_string())
            }
            sqlx::Error::Database(database) if ran_out_of_time(database.as_ref()) => {
                tracing::debug!(error = %error, "store busy");
                Self::Busy(error.to_string())
            }
            sqlx::Error::Database(database) if unreachable(database.as_ref()) => {
                tracing::debug!(error = %error, "store unavailable");
                Self::Unavailable(error.to_string())
            }
            sqlx::Error::Database(database) if database.is_unique_violation() => {
                Self::Conflict(database.message().to_owned())
            }
            sqlx::Error::Database(database) if lost_a_race(database.as_ref()) => {
                // Writers take rows in one order, so this is rare; the client may simply retry.
                tracing::warn!(error = %error, "concurrent write conflict");
                Self::Busy(error.to_string())
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

/// Whether a database error means the server answered but this call ran out of time: it
/// waited for a lock another call held, or ran longer than the statement timeout.
fn ran_out_of_time(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(error) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        // 57014 query_canceled: what `statement_timeout` raises. 55P03 lock_not_available:
        // what `lock_timeout` raises.
        return matches!(error.code(), "57014" | "55P03");
    }
    #[cfg(feature = "sqlite")]
    if let Some(error) = error.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        const SQLITE_BUSY: i32 = 5;
        const SQLITE_LOCKED: i32 = 6;
        return matches!(
            sqlite_primary_code(error),
            Some(SQLITE_BUSY | SQLITE_LOCKED)
        );
    }
    false
}

/// The primary result code of a SQLite error: the low byte of the extended one.
#[cfg(feature = "sqlite")]
fn sqlite_primary_code(error: &sqlx::sqlite::SqliteError) -> Option<i32> {
    use sqlx::error::DatabaseError as _;
    error
        .code()
        .and_then(|code| code.parse::<i32>().ok())
        .map(|code| code & 0xff)
}

/// Whether a database error means the server could not serve the call at all, rather than
/// that the statement failed.
fn unreachable(error: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    #[cfg(feature = "postgres")]
    if let Some(error) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        let code = error.code();
        // Class 08: connection exceptions. 57P01-57P05: the server shutting down, crashed,
        // starting up, or the session idle too long. Class 53: insufficient resources (too
        // many connections, disk full, out of memory). Class 58: I/O errors on the server.
        // 25006: a read-only transaction, i.e. a standby answering while a failover is under
        // way.
        return code == "25006"
            || code.starts_with("08")
            || code.starts_with("57P")
            || code.starts_with("53")
            || code.starts_with("58");
    }
    #[cfg(feature = "sqlite")]
    if let Some(error) = error.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        const SQLITE_NOMEM: i32 = 7;
        const SQLITE_IOERR: i32 = 10;
        const SQLITE_FULL: i32 = 13;
        const SQLITE_CANTOPEN: i32 = 14;
        return matches!(
            sqlite_primary_code(error),
            Some(SQLITE_NOMEM | SQLITE_IOERR | SQLITE_FULL | SQLITE_CANTOPEN)
        );
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
    CategorySource => |name| by_name(CategorySource::parse(name), name);
    ConnectionStatus => |name| by_name(ConnectionStatus::parse(name), name);
    EventType => |name| by_name(EventType::parse(name), name);
    RotationScope => |name| by_name(RotationScope::parse(name), name);
    SnapshotSource => |name| by_name(SnapshotSource::parse(name), name);
    TransactionSource => |name| by_name(TransactionSource::parse(name), name);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind) -> sqlx::Error {
        sqlx::Error::Io(std::io::Error::from(kind))
    }

    #[test]
    fn failing_to_reach_or_talk_to_the_database_is_unavailable() {
        for error in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
            sqlx::Error::BeginFailed,
            // What a server that accepts and at once closes a connection causes.
            sqlx::Error::Protocol("unexpected response from SSLRequest: 0x00".to_owned()),
            sqlx::Error::Tls("handshake eof".into()),
            io(std::io::ErrorKind::ConnectionRefused),
            io(std::io::ErrorKind::ConnectionReset),
            io(std::io::ErrorKind::UnexpectedEof),
        ] {
            let shown = error.to_string();
            assert!(
                matches!(StoreError::from(error), StoreError::Unavailable(_)),
                "{shown}"
            );
        }
    }

    #[test]
    fn our_own_faults_stay_failures() {
        for error in [
            sqlx::Error::RowNotFound,
            sqlx::Error::ColumnNotFound("balance".to_owned()),
            sqlx::Error::Decode("unknown value \"bogus\"".into()),
        ] {
            let shown = error.to_string();
            assert!(
                matches!(StoreError::from(error), StoreError::Other(_)),
                "{shown}"
            );
        }
    }
}
