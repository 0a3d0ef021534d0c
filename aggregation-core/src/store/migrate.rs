//! Migrations through `sqlx::migrate!`, recorded in `aggregation_migrations`, and the upgrade
//! of that table from the layout of the runner this crate had before.

use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;

use super::StoreError;
use super::backend::{Backend, SqlStore, Tx, query, query_as, query_scalar, raw_sql};

/// The table recording applied migrations (its name predates `sqlx::migrate!`).
const MIGRATIONS_TABLE: &str = "aggregation_migrations";

impl<B: Backend> SqlStore<B> {
    /// Applies the embedded migrations that are not applied yet, all in one transaction; safe
    /// to call at every start, from several processes at once (they take turns).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut migrator = B::migrator();
        migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
        // The transaction below serializes migrating processes already.
        migrator.set_locking(false);
        // As before: a database migrated by a newer release still opens.
        migrator.set_ignore_missing(true);
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        B::prepare_migration(&self.schema, &mut tx).await?;
        upgrade_legacy_table(&mut tx, &migrator).await?;
        // Inside a transaction, each migration's own transaction is a savepoint.
        B::run_migrations(&migrator, &mut tx).await?;
        tx.commit().await?;
        // What imports stopped half-way by the end of a process left.
        crate::store::batches::sql::discard_abandoned(&self.pool, None, chrono::Utc::now()).await?;
        Ok(())
    }

    /// The underlying pool.
    pub fn pool(&self) -> &sqlx::Pool<B> {
        &self.pool
    }
}

/// Rewrites a migrations table of the former runner (version, description, applied_at) into
/// sqlx's layout, with the checksums of the embedded migrations, so that they count as applied.
async fn upgrade_legacy_table<B: Backend>(
    tx: &mut Tx<B>,
    migrator: &Migrator,
) -> Result<(), StoreError> {
    let legacy: i64 = query_scalar::<B, _>(B::LEGACY_MIGRATIONS_PROBE)
        .fetch_one(&mut **tx)
        .await?;
    if legacy == 0 {
        return Ok(());
    }
    let applied: Vec<(i64, DateTime<Utc>)> =
        query_as::<B, _>("SELECT version, applied_at FROM aggregation_migrations ORDER BY version")
            .fetch_all(&mut **tx)
            .await?;
    raw_sql("DROP TABLE aggregation_migrations")
        .execute::<B>(&mut **tx)
        .await?;
    B::ensure_migrations_table(tx, MIGRATIONS_TABLE).await?;
    for (version, applied_at) in applied {
        let Some(migration) = migrator.iter().find(|known| known.version == version) else {
            return Err(StoreError::Other(format!(
                "applied migration {version} is not embedded in this build"
            )));
        };
        query::<B>(
            "INSERT INTO aggregation_migrations (version, description, installed_on, success, \
             checksum, execution_time) VALUES ($1, $2, $3, TRUE, $4, -1)",
        )
        .bind(version)
        .bind(&*migration.description)
        .bind(applied_at)
        .bind(&*migration.checksum)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}
