//! The enrichment writes the user makes: their own categories, and their edits of a
//! transaction's category, merchant name and notes (each then the user's for good).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::backend::{Backend, SqlStore, query, query_as, query_scalar};
use crate::store::records::sql::SELECT_TRANSACTION;
use crate::store::{
    CategorySource, CustomCategoryRecord, StoreError, TransactionEdit, TransactionEdited,
    TransactionRecord,
};

/// The prefix of a custom category's id as transactions and the API carry it.
pub(in crate::store) const CUSTOM_PREFIX: &str = "custom:";

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
        // Locks the user's row (PostgreSQL; SQLite's writers are serialized already), so two
        // creations cannot both pass the limit.
        query::<B>("UPDATE users SET updated_at = updated_at WHERE id = $1")
            .bind(category.user_id)
            .execute(&mut *tx)
            .await?;
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
        let select =
            format!("{SELECT_TRANSACTION} FROM transactions t WHERE t.id = $2 AND {OWNED}");
        let found: Option<TransactionRecord> =
            query_as::<B, _>(sqlx::AssertSqlSafe(select.clone()))
                .bind(user_id)
                .bind(transaction_id)
                .fetch_optional(&mut *tx)
                .await?;
        if found.is_none() {
            tx.rollback().await?;
            return Ok(TransactionEdited::NotFound);
        }
        if let Some(Some(category)) = &edit.category
            && let Some(custom) = category.strip_prefix(CUSTOM_PREFIX)
        {
            let owned = match Uuid::parse_str(custom) {
                Ok(id) => query_scalar::<B, i64>(
                    "SELECT COUNT(*) FROM custom_categories WHERE id = $1 AND user_id = $2",
                )
                .bind(id)
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await?
                .eq(&1),
                Err(_) => false,
            };
            if !owned {
                tx.rollback().await?;
                return Ok(TransactionEdited::UnknownCategory);
            }
        }
        if let Some(category) = &edit.category {
            query::<B>(
                "UPDATE transactions SET category = $1, category_source = $2, \
                 category_by_user = TRUE, updated_at = $3 WHERE id = $4",
            )
            .bind(category.as_deref())
            .bind(category.as_ref().map(|_| CategorySource::User.as_str()))
            .bind(now)
            .bind(transaction_id)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(merchant_name) = &edit.merchant_name {
            query::<B>(
                "UPDATE transactions SET merchant_name = $1, merchant_name_by_user = TRUE, \
                 updated_at = $2 WHERE id = $3",
            )
            .bind(merchant_name.as_deref())
            .bind(now)
            .bind(transaction_id)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(notes) = &edit.notes {
            query::<B>(
                "UPDATE transactions SET notes = $1, notes_by_user = TRUE, updated_at = $2 \
                 WHERE id = $3",
            )
            .bind(notes.as_deref())
            .bind(now)
            .bind(transaction_id)
            .execute(&mut *tx)
            .await?;
        }
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
