//! The security configuration and refresh-token version rotations on SQL.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::backend::{Backend, Executor, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::events::sql::insert_events;
use crate::store::{
    NewTokenRotation, RotationOutcome, RotationScope, SecurityConfigRecord, SecurityStore,
    StoreError, TokenRotationRecord,
};

const SELECT_CONFIG: &str = "SELECT global_min_token_version, grace_period_seconds, \
     last_rotation_at, last_rotation_reason, updated_at FROM security_config WHERE id = 1";

/// Creates the configuration row when missing.
async fn insert_default_config<'c, B: Backend, E>(
    executor: E,
    grace_seconds: i64,
    at: DateTime<Utc>,
) -> Result<(), StoreError>
where
    E: Executor<'c, B>,
{
    query::<B>(
        "INSERT INTO security_config (id, global_min_token_version, grace_period_seconds, \
         updated_at) VALUES (1, 0, $1, $2) ON CONFLICT (id) DO NOTHING",
    )
    .bind(grace_seconds)
    .bind(at)
    .execute(executor)
    .await?;
    Ok(())
}

async fn insert_rotation<B: Backend>(
    tx: &mut Tx<B>,
    rotation: &NewTokenRotation,
    scope: RotationScope,
    user_id: Option<Uuid>,
    outcome: RotationOutcome,
) -> Result<(), StoreError> {
    query::<B>(
        "INSERT INTO token_rotations (id, scope, user_id, previous_version, new_version, \
         reason, initiated_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(rotation.id)
    .bind(scope.as_str())
    .bind(user_id)
    .bind(outcome.previous_version)
    .bind(outcome.new_version)
    .bind(&rotation.reason)
    .bind(rotation.initiated_by)
    .bind(rotation.at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Locks the configuration row (creating it when missing) for the rest of the transaction, so
/// that rotations are serialized; the global minimum.
async fn lock_config<B: Backend>(
    tx: &mut Tx<B>,
    grace_seconds: i64,
    at: DateTime<Utc>,
) -> Result<i64, StoreError> {
    insert_default_config::<B, _>(&mut **tx, grace_seconds, at).await?;
    Ok(query_scalar::<B, _>(
        "UPDATE security_config SET updated_at = updated_at WHERE id = 1 \
         RETURNING global_min_token_version",
    )
    .fetch_one(&mut **tx)
    .await?)
}

#[async_trait]
impl<B: Backend> SecurityStore for SqlStore<B> {
    async fn security_config(&self) -> Result<Option<SecurityConfigRecord>, StoreError> {
        Ok(query_as::<B, _>(SELECT_CONFIG)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn ensure_security_config(
        &self,
        default_grace_seconds: i64,
        at: DateTime<Utc>,
    ) -> Result<SecurityConfigRecord, StoreError> {
        if let Some(config) = self.security_config().await? {
            return Ok(config);
        }
        insert_default_config(&self.pool, default_grace_seconds, at).await?;
        Ok(query_as::<B, _>(SELECT_CONFIG)
            .fetch_one(&self.pool)
            .await?)
    }

    async fn rotate_global_token_version(
        &self,
        rotation: &NewTokenRotation,
        raise: &RaiseEvents<'_, RotationOutcome>,
        raised: &mut Vec<Event>,
    ) -> Result<RotationOutcome, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        lock_config(&mut tx, rotation.grace_period_seconds, rotation.at).await?;
        let new_version: i64 = query_scalar::<B, _>(
            "UPDATE security_config SET global_min_token_version = global_min_token_version + 1, \
             grace_period_seconds = $1, last_rotation_at = $2, last_rotation_reason = $3, \
             updated_at = $2 WHERE id = 1 RETURNING global_min_token_version",
        )
        .bind(rotation.grace_period_seconds)
        .bind(rotation.at)
        .bind(&rotation.reason)
        .fetch_one(&mut *tx)
        .await?;
        // Tokens of individually rotated users carry their (higher) user minimum; raising it
        // keeps the global rotation effective for them too.
        let raised_users: Vec<(Uuid, i64)> = query_as::<B, _>(
            "UPDATE users SET min_token_version = min_token_version + 1, updated_at = $2 \
             WHERE min_token_version >= $1 RETURNING id, min_token_version",
        )
        .bind(new_version)
        .bind(rotation.at)
        .fetch_all(&mut *tx)
        .await?;
        let outcome = RotationOutcome {
            previous_version: new_version - 1,
            new_version,
        };
        insert_rotation(&mut tx, rotation, RotationScope::Global, None, outcome).await?;
        // One row per raised user: the audit trail, and what the grace period of this rotation
        // accepts for them (their minimum just before it).
        for (user_id, min_token_version) in raised_users {
            let per_user = NewTokenRotation {
                id: Uuid::now_v7(),
                ..rotation.clone()
            };
            let raise = RotationOutcome {
                previous_version: min_token_version - 1,
                new_version: min_token_version,
            };
            let scope = RotationScope::Global;
            insert_rotation(&mut tx, &per_user, scope, Some(user_id), raise).await?;
        }
        let events = raise(&outcome);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(outcome)
    }

    async fn rotate_user_token_version(
        &self,
        user_id: Uuid,
        rotation: &NewTokenRotation,
        raise: &RaiseEvents<'_, RotationOutcome>,
        raised: &mut Vec<Event>,
    ) -> Result<Option<RotationOutcome>, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let global = lock_config(&mut tx, rotation.grace_period_seconds, rotation.at).await?;
        let previous: Option<i64> =
            query_scalar::<B, _>("SELECT min_token_version FROM users WHERE id = $1")
                .bind(user_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(previous_version) = previous else {
            return Ok(None);
        };
        let new_version = previous_version.max(global) + 1;
        query::<B>("UPDATE users SET min_token_version = $2, updated_at = $3 WHERE id = $1")
            .bind(user_id)
            .bind(new_version)
            .bind(rotation.at)
            .execute(&mut *tx)
            .await?;
        let outcome = RotationOutcome {
            previous_version,
            new_version,
        };
        insert_rotation(
            &mut tx,
            rotation,
            RotationScope::User,
            Some(user_id),
            outcome,
        )
        .await?;
        let events = raise(&outcome);
        insert_events(&mut tx, &events).await?;
        tx.commit().await?;
        raised.extend(events);
        Ok(Some(outcome))
    }

    async fn global_rotation_raised_from(
        &self,
        user_id: Uuid,
        min_token_version: i64,
    ) -> Result<Option<i64>, StoreError> {
        // Minimums only grow, so a global row that ends at the current minimum is the change
        // that set it: no user rotation came after.
        Ok(query_scalar::<B, _>(
            "SELECT previous_version FROM token_rotations \
             WHERE user_id = $1 AND scope = $2 AND new_version = $3 LIMIT 1",
        )
        .bind(user_id)
        .bind(RotationScope::Global.as_str())
        .bind(min_token_version)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn token_rotations(&self, limit: u32) -> Result<Vec<TokenRotationRecord>, StoreError> {
        Ok(query_as::<B, _>(
            "SELECT id, scope, user_id, previous_version, new_version, reason, initiated_by, \
             created_at FROM token_rotations ORDER BY created_at DESC, id DESC LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }
}
