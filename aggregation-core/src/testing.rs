//! Fixtures for tests (feature `testing`): what the service logs, a store whose chosen calls
//! run out of time ([`SlowStore`]), and (with `postgres`) a PostgreSQL database of a test's
//! own.
//!
//! ```
//! use aggregation_core::testing::CapturedLog;
//!
//! let log = CapturedLog::default();
//! let writer = log.clone();
//! // tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false) ...
//! # let _ = writer;
//! assert!(log.lines().is_empty());
//! ```

use std::sync::{Arc, Mutex, PoisonError};

mod slow;
pub use slow::SlowStore;

/// An `io::Write` that keeps what is written, for a `tracing-subscriber` `fmt` writer; clones
/// share the text.
#[derive(Debug, Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
impl CapturedLog {
    /// A plain-text `fmt` subscriber writing here, at `max_level` and above.
    pub(crate) fn subscriber(
        &self,
        max_level: tracing::Level,
    ) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(max_level)
            .finish()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

impl CapturedLog {
    /// Everything written so far, as bytes, leaving the log empty.
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Every line written so far (invalid UTF-8 replaced).
    pub fn lines(&self) -> Vec<String> {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// A PostgreSQL database made for one test or benchmark run beside the one an admin URL names,
/// so runs in parallel never share tables; [`ThrowawayDatabase::drop_database`] removes it.
#[cfg(feature = "postgres")]
#[derive(Debug)]
pub struct ThrowawayDatabase {
    admin_url: String,
    name: String,
    url: String,
}

#[cfg(feature = "postgres")]
impl ThrowawayDatabase {
    /// Creates an empty database named `prefix` and a random part (`prefix` must be a plain
    /// identifier such as `agg_test`), through the server `admin_url` names.
    ///
    /// # Errors
    /// When the server cannot be reached or refuses to create the database.
    pub async fn create(admin_url: &str, prefix: &str) -> Result<Self, sqlx::Error> {
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let admin = sqlx::PgPool::connect(admin_url).await?;
        let created = sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await;
        admin.close().await;
        created?;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            url: database_url(admin_url, &name),
            name,
        })
    }

    /// The URL of the new database: `admin_url` with its database name replaced.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Drops the database, forcing out connections still open; a failure is ignored (the
    /// database is a throwaway one).
    pub async fn drop_database(self) {
        if let Ok(admin) = sqlx::PgPool::connect(&self.admin_url).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&admin)
            .await;
            admin.close().await;
        }
    }
}

/// A PostgreSQL schema made for one test run in the database a URL names, so runs in parallel
/// never share tables; cheaper than a [`ThrowawayDatabase`], whose `DROP DATABASE` waits for
/// a checkpoint (about a second each). [`ThrowawaySchema::drop_schema`] removes it.
#[cfg(feature = "postgres")]
#[derive(Debug)]
pub struct ThrowawaySchema {
    url: String,
    name: crate::store::SchemaName,
}

#[cfg(feature = "postgres")]
impl ThrowawaySchema {
    /// Names a schema `prefix` and a random part (`prefix` a plain lowercase identifier such
    /// as `agg_test`) in the database `url` names. Nothing is created yet: the first
    /// [`PostgresStore::migrate`](crate::store::PostgresStore::migrate) of a store connected
    /// with [`ThrowawaySchema::builder`] creates it.
    ///
    /// # Errors
    /// When `prefix` makes no valid schema name.
    pub fn new(url: &str, prefix: &str) -> Result<Self, crate::store::InvalidSchemaName> {
        let name =
            crate::store::SchemaName::new(&format!("{prefix}_{}", uuid::Uuid::new_v4().simple()))?;
        Ok(Self {
            url: url.to_owned(),
            name,
        })
    }

    /// Options for a store keeping its tables in this schema.
    pub fn builder(&self) -> crate::store::PostgresStoreBuilder {
        crate::store::PostgresStore::builder(&self.url).schema(self.name.clone())
    }

    /// Drops the schema and everything in it; a failure is ignored (the schema is a throwaway
    /// one). A transaction still open on one of its tables is waited for at most 10 s.
    pub async fn drop_schema(self) {
        let options = sqlx::postgres::PgPoolOptions::new().max_connections(1);
        if let Ok(admin) = options.connect(&self.url).await {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.name.as_str()
            )))
            .execute(&admin)
            .await;
            admin.close().await;
        }
    }
}

/// `url` with its database name replaced by `database` (its query kept).
#[cfg(feature = "postgres")]
fn database_url(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let authority_start = base.find("://").map_or(0, |index| index + 3);
    let host_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |index| authority_start + index);
    format!("{}/{database}{query}", &base[..host_end])
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::database_url;

    #[test]
    fn the_database_name_is_replaced_and_the_query_kept() {
        assert_eq!(
            database_url("postgres://postgres@127.0.0.1:5432/test", "agg_x"),
            "postgres://postgres@127.0.0.1:5432/agg_x"
        );
        assert_eq!(
            database_url("postgres://127.0.0.1/test?sslmode=disable", "agg_x"),
            "postgres://127.0.0.1/agg_x?sslmode=disable"
        );
        assert_eq!(
            database_url("postgres://127.0.0.1:5432", "agg_x"),
            "postgres://127.0.0.1:5432/agg_x"
        );
    }
}
