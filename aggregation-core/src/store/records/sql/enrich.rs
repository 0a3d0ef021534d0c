//! The enrichment writes the user makes: their own categories, and their edits of a
//! transaction's category, merchant name and notes (each then the user's for good).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::enrich::taxonomy::{CUSTOM_PREFIX, custom_id};
use crate::store::backend::{Backend, QueryBuilder, SqlStore, query, query_as, query_scalar};
use crate::store::records::sql::SELECT_TRANSACTION;
use crate::store::records::sql::connections::lock_user_in;
use crate::store::{
    CategorySource, CustomCategoryRecord, StoreError, TransactionEdit, TransactionEdited,
    TransactionRecord,
};

const SELECT_CATEGORY: &str =
    "SELECT id, user_id, primary_category, name, created_at, updated_at FROM custom_categories";

/// The condition "the transaction `t` is one of user `$1`'s".
const OWNED: &str = "t.account_id IN (SELECT a.id FROM accounts a JOIN connections c \
     ON c.id = a.connection_id WHERE c.user_id = $1)";

impl<B: Backend> SqlStore<B> {
    /// See [`crate::store::TransactionStore::custom_categories`].
    pub(in crate::store) async fn custom_categories_of(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<CustomCategoryRecord>, StoreError> {
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(format!(
            "{SELECT_CATEGORY} WHERE user_id = $1 ORDER BY id"
        )))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// See [`crate::store::TransactionStore::create_custom_category`].
    pub(in crate::store) async fn create_category(
        &self,
        category: &CustomCategoryRecord,
        limit: u64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // Two creations cannot both pass the limit.
        lock_user_in(&mut tx, category.user_id).await?;
        let held: i64 =
            query_scalar::<B, _>("SELECT COUNT(*) FROM custom_categories WHERE user_id = $1")
                .bind(category.user_id)
                .fetch_one(&mut *tx)
                .await?;
        if u64::try_from(held).unwrap_or(0) >= limit {
            tx.rollback().await?;
            return Ok(false);
        }
        query::<B>(
            "INSERT INTO custom_categories (id, user_id, primary_category, name, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(category.id)
        .bind(category.user_id)
        .bind(category.primary_category.as_str())
        .bind(category.name.as_str())
        .bind(category.created_at)
        .bind(category.updated_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// See [`crate::store::TransactionStore::delete_custom_category`].
    pub(in crate::store) async fn delete_category(
        &self,
        user_id: Uuid,
        category_id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<u64>, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let deleted = query::<B>("DELETE FROM custom_categories WHERE id = $1 AND user_id = $2")
            .bind(category_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        if deleted.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let moved = query::<B>(sqlx::AssertSqlSafe(format!(
            "UPDATE transactions SET category = NULL, category_source = NULL, \
             category_by_user = FALSE, updated_at = $3 \
             WHERE category = $2 AND id IN (SELECT t.id FROM transactions t WHERE {OWNED})"
        )))
        .bind(user_id)
        .bind(format!("{CUSTOM_PREFIX}{category_id}"))
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(Some(moved))
    }

    /// See [`crate::store::TransactionStore::edit_transaction`].
    pub(in crate::store) async fn edit(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
        edit: &TransactionEdit,
        now: DateTime<Utc>,
    ) -> Result<TransactionEdited, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // One statement sets every field the edit names, each then the user's.
        let mut update = QueryBuilder::<B>::new("UPDATE transactions SET updated_at = ");
        update.push_bind(now);
        if let Some(category) = &edit.category {
            update
                .push(", category = ")
                .push_bind(category.as_deref())
                .push(", category_source = ")
                .push_bind(category.as_ref().map(|_| CategorySource::User.as_str()))
                .push(", category_by_user = TRUE");
        }
        if let Some(merchant_name) = &edit.merchant_name {
            update
                .push(", merchant_name = ")
                .push_bind(merchant_name.as_deref())
                .push(", merchant_name_by_user = TRUE");
        }
        if let Some(notes) = &edit.notes {
            update
                .push(", notes = ")
                .push_bind(notes.as_deref())
                .push(", notes_by_user = TRUE");
        }
        update
            .push(" WHERE id = ")
            .push_bind(transaction_id)
            .push(
                " AND account_id IN (SELECT a.id FROM accounts a JOIN connections c \
                 ON c.id = a.connection_id WHERE c.user_id = ",
            )
            .push_bind(user_id)
            .push(")");
        if update.build().execute(&mut *tx).await?.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(TransactionEdited::NotFound);
        }
        if let Some(Some(category)) = &edit.category
            && category.starts_with(CUSTOM_PREFIX)
        {
            let owned = match custom_id(category) {
                Some(id) => query_scalar::<B, i64>(
                    "SELECT COUNT(*) FROM custom_categories WHERE id = $1 AND user_id = $2",
                )
                .bind(id)
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await?
                .eq(&1),
                None => false,
            };
            if !owned {
                // Undoes the update.
                tx.rollback().await?;
                return Ok(TransactionEdited::UnknownCategory);
            }
        }
        let select =
            format!("{SELECT_TRANSACTION} FROM transactions t WHERE t.id = $2 AND {OWNED}");
        let edited: Option<TransactionRecord> = query_as::<B, _>(sqlx::AssertSqlSafe(select))
            .bind(user_id)
            .bind(transaction_id)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(edited.map_or(TransactionEdited::NotFound, |record| {
            TransactionEdited::Edited(Box::new(record))
        }))
    }
}
