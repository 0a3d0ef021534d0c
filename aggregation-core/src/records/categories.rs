//! Categories: the taxonomy's (Plaid's personal-finance-category names, read only) and the
//! user's own, and the user's edits of a transaction's category, merchant name and notes.
//! A user's own category is `custom:<uuid>`; deleting it moves its transactions back to
//! uncategorised. An edited field is the user's from then on: no re-sync, re-import or rule
//! changes it again.

use chrono::Utc;
use uuid::Uuid;

use super::Records;
use crate::enrich::taxonomy::{self, CUSTOM_PREFIX, custom_id};
use crate::store::{
    CustomCategoryRecord, StoreError, TransactionEdit, TransactionEdited, TransactionRecord,
};

/// The most categories of their own a user may hold.
pub(crate) const MAX_CUSTOM_CATEGORIES: u64 = 500;

/// Why a category operation or a transaction edit failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CategoryError {
    /// No category of the user's has this id (taxonomy categories cannot be deleted).
    #[error("Category not found.")]
    NotFound,
    /// No transaction of the user has this id.
    #[error("Transaction not found.")]
    TransactionNotFound,
    /// The category of an edit is neither the taxonomy's nor one of the user's.
    #[error("Must be a category id from GET /api/v1/categories.")]
    UnknownCategory,
    /// The user holds [`MAX_CUSTOM_CATEGORIES`] already.
    #[error("You have {MAX_CUSTOM_CATEGORIES} categories of your own already; delete one first.")]
    TooMany,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One entry of the category list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CategoryEntry {
    /// A taxonomy detailed id, or `custom:<uuid>`.
    pub(crate) id: String,
    /// Its primary category.
    pub(crate) primary: String,
    /// Its name.
    pub(crate) name: String,
    /// Whether it is one of the user's own.
    pub(crate) is_custom: bool,
}

impl CategoryEntry {
    pub(crate) fn custom(record: &CustomCategoryRecord) -> Self {
        Self {
            id: format!("{CUSTOM_PREFIX}{}", record.id),
            primary: record.primary_category.clone(),
            name: record.name.clone(),
            is_custom: true,
        }
    }
}

impl Records {
    /// The taxonomy's detailed categories, then the user's own (oldest first).
    pub(crate) async fn categories(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<CategoryEntry>, CategoryError> {
        let custom = self.store.custom_categories(user_id).await?;
        Ok(taxonomy::categories()
            .map(|category| CategoryEntry {
                id: category.id.to_owned(),
                primary: category.primary.to_owned(),
                name: category.name.to_owned(),
                is_custom: false,
            })
            .chain(custom.iter().map(CategoryEntry::custom))
            .collect())
    }

    /// Creates a category of the user's own under `primary` (a taxonomy primary id the caller
    /// checked).
    pub(crate) async fn create_category(
        &self,
        user_id: Uuid,
        name: String,
        primary: String,
    ) -> Result<CategoryEntry, CategoryError> {
        let now = Utc::now();
        let record = CustomCategoryRecord {
            id: Uuid::now_v7(),
            user_id,
            primary_category: primary,
            name,
            created_at: now,
            updated_at: now,
        };
        if !self
            .store
            .create_custom_category(&record, MAX_CUSTOM_CATEGORIES)
            .await?
        {
            return Err(CategoryError::TooMany);
        }
        Ok(CategoryEntry::custom(&record))
    }

    /// Deletes one of the user's categories (`custom:<uuid>`); its transactions become
    /// uncategorised. How many there were.
    pub(crate) async fn delete_category(
        &self,
        user_id: Uuid,
        id: &str,
    ) -> Result<u64, CategoryError> {
        let category_id = custom_id(id).ok_or(CategoryError::NotFound)?;
        self.store
            .delete_custom_category(user_id, category_id, Utc::now())
            .await?
            .ok_or(CategoryError::NotFound)
    }

    /// Applies the user's edit to one of their transactions. A taxonomy category must be a
    /// detailed id; a custom one must be the user's.
    pub(crate) async fn edit_transaction(
        &self,
        user_id: Uuid,
        transaction_id: Uuid,
        edit: &TransactionEdit,
    ) -> Result<TransactionRecord, CategoryError> {
        if let Some(Some(category)) = &edit.category
            && taxonomy::category(category).is_none()
            && custom_id(category).is_none()
        {
            return Err(CategoryError::UnknownCategory);
        }
        match self
            .store
            .edit_transaction(user_id, transaction_id, edit, Utc::now())
            .await?
        {
            TransactionEdited::Edited(record) => Ok(*record),
            TransactionEdited::UnknownCategory => Err(CategoryError::UnknownCategory),
            _ => Err(CategoryError::TransactionNotFound),
        }
    }
}
