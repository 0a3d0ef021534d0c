//! The user's transaction rules: create, list, update, delete, preview over the user's
//! transactions (nothing saved) and apply to them. The conditions and actions are checked by
//! [`crate::enrich::rules`]; a `set_category` must name a taxonomy detailed category or one of
//! the user's own. At most [`MAX_RULES`] a user.

use chrono::Utc;
use uuid::Uuid;

use super::Records;
use crate::enrich::rules::{ActionSpec, ConditionSpec, Rule, RuleError as Invalid, RulePreview};
use crate::enrich::taxonomy::{self, custom_id};
use crate::store::{RuleRecord, StoreError};

/// The most rules a user may hold.
pub(crate) const MAX_RULES: u64 = 500;

/// How many changed rows a preview shows.
pub(crate) const PREVIEW_SAMPLE: usize = 50;

/// Why a rule operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuleError {
    /// No rule of the user has this id.
    #[error("Rule not found.")]
    NotFound,
    /// The user holds [`MAX_RULES`] already.
    #[error("You have {MAX_RULES} rules already; delete one first.")]
    TooMany,
    /// A condition or action is wrong (including a category that is neither the taxonomy's
    /// nor one of the user's).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A rule's content, checked: what a creation writes and a preview runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RuleDraft {
    /// Its name.
    pub(crate) name: String,
    /// Its conditions.
    pub(crate) conditions: Vec<ConditionSpec>,
    /// Its actions.
    pub(crate) actions: Vec<ActionSpec>,
    /// Lowest runs first.
    pub(crate) priority: i32,
    /// Whether a match ends the run for the row.
    pub(crate) stop_processing: bool,
}

/// The fields a `PATCH` changes; `None` keeps the stored one.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RulePatch {
    /// A new name.
    pub(crate) name: Option<String>,
    /// New conditions.
    pub(crate) conditions: Option<Vec<ConditionSpec>>,
    /// New actions.
    pub(crate) actions: Option<Vec<ActionSpec>>,
    /// A new priority.
    pub(crate) priority: Option<i32>,
    /// A new stop flag.
    pub(crate) stop_processing: Option<bool>,
}

/// A stored rule as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RuleEntry {
    /// Its id.
    pub(crate) id: Uuid,
    /// Its content.
    pub(crate) draft: RuleDraft,
    /// Creation time.
    pub(crate) created_at: chrono::DateTime<Utc>,
    /// Last change.
    pub(crate) updated_at: chrono::DateTime<Utc>,
}

impl RuleEntry {
    /// The stored rule; `None` for a row whose JSON does not read (never written so).
    pub(crate) fn of(record: &RuleRecord) -> Option<Self> {
        Some(Self {
            id: record.id,
            draft: RuleDraft {
                name: record.name.clone(),
                conditions: serde_json::from_str(&record.conditions).ok()?,
                actions: serde_json::from_str(&record.actions).ok()?,
                priority: record.priority,
                stop_processing: record.stop_processing,
            },
            created_at: record.created_at,
            updated_at: record.updated_at,
        })
    }
}

fn stored_json<T: serde::Serialize>(value: &T) -> Result<String, RuleError> {
    serde_json::to_string(value)
        .map_err(|error| RuleError::Store(StoreError::Other(error.to_string())))
}

impl Records {
    /// Checks that every `set_category` of `draft` names a taxonomy detailed category or one
    /// of the user's own, and compiles it.
    async fn compile(&self, user_id: Uuid, id: Uuid, draft: &RuleDraft) -> Result<Rule, RuleError> {
        let mut custom = None;
        for (index, action) in draft.actions.iter().enumerate() {
            let ActionSpec::SetCategory(category) = action else {
                continue;
            };
            let known = if taxonomy::category(category).is_some() {
                true
            } else if let Some(category_id) = custom_id(category) {
                if custom.is_none() {
                    custom = Some(self.store.custom_categories(user_id).await?);
                }
                custom
                    .as_ref()
                    .is_some_and(|held| held.iter().any(|record| record.id == category_id))
            } else {
                false
            };
            if !known {
                return Err(RuleError::Invalid(Invalid {
                    field: format!("actions[{index}].set_category"),
                    code: "unknown_category",
                    message: "Must be a category id from GET /api/v1/categories.".to_owned(),
                }));
            }
        }
        Ok(Rule::compile(
            id,
            &draft.conditions,
            &draft.actions,
            draft.stop_processing,
        )?)
    }

    /// The user's rules, in the order they run.
    pub(crate) async fn rules(&self, user_id: Uuid) -> Result<Vec<RuleEntry>, RuleError> {
        Ok(self
            .store
            .rules(user_id)
            .await?
            .iter()
            .filter_map(RuleEntry::of)
            .collect())
    }

    /// One of the user's rules.
    pub(crate) async fn rule(&self, user_id: Uuid, rule_id: Uuid) -> Result<RuleEntry, RuleError> {
        self.rules(user_id)
            .await?
            .into_iter()
            .find(|entry| entry.id == rule_id)
            .ok_or(RuleError::NotFound)
    }

    /// Creates a rule of the user's.
    pub(crate) async fn create_rule(
        &self,
        user_id: Uuid,
        draft: RuleDraft,
    ) -> Result<RuleEntry, RuleError> {
        let id = Uuid::now_v7();
        self.compile(user_id, id, &draft).await?;
        let now = crate::dates::truncate_to_micros(Utc::now());
        let record = RuleRecord {
            id,
            user_id,
            name: draft.name.clone(),
            conditions: stored_json(&draft.conditions)?,
            actions: stored_json(&draft.actions)?,
            priority: draft.priority,
            stop_processing: draft.stop_processing,
            created_at: now,
            updated_at: now,
        };
        if !self.store.create_rule(&record, MAX_RULES).await? {
            return Err(RuleError::TooMany);
        }
        Ok(RuleEntry {
            id,
            draft,
            created_at: now,
            updated_at: now,
        })
    }

    /// Changes what `patch` names of one of the user's rules.
    pub(crate) async fn update_rule(
        &self,
        user_id: Uuid,
        rule_id: Uuid,
        patch: RulePatch,
    ) -> Result<RuleEntry, RuleError> {
        let entry = self.rule(user_id, rule_id).await?;
        let draft = RuleDraft {
            name: patch.name.unwrap_or(entry.draft.name),
            conditions: patch.conditions.unwrap_or(entry.draft.conditions),
            actions: patch.actions.unwrap_or(entry.draft.actions),
            priority: patch.priority.unwrap_or(entry.draft.priority),
            stop_processing: patch.stop_processing.unwrap_or(entry.draft.stop_processing),
        };
        self.compile(user_id, rule_id, &draft).await?;
        let now = crate::dates::truncate_to_micros(Utc::now());
        let record = RuleRecord {
            id: rule_id,
            user_id,
            name: draft.name.clone(),
            conditions: stored_json(&draft.conditions)?,
            actions: stored_json(&draft.actions)?,
            priority: draft.priority,
            stop_processing: draft.stop_processing,
            created_at: entry.created_at,
            updated_at: now,
        };
        if !self.store.update_rule(&record).await? {
            return Err(RuleError::NotFound);
        }
        Ok(RuleEntry {
            id: rule_id,
            draft,
            created_at: entry.created_at,
            updated_at: now,
        })
    }

    /// Deletes one of the user's rules (what it already set stays).
    pub(crate) async fn delete_rule(&self, user_id: Uuid, rule_id: Uuid) -> Result<(), RuleError> {
        if self.store.delete_rule(user_id, rule_id).await? {
            Ok(())
        } else {
            Err(RuleError::NotFound)
        }
    }

    /// What `draft` would change of the user's transactions; nothing is saved.
    pub(crate) async fn preview_rule(
        &self,
        user_id: Uuid,
        draft: &RuleDraft,
    ) -> Result<RulePreview, RuleError> {
        let rule = self.compile(user_id, Uuid::nil(), draft).await?;
        Ok(self
            .store
            .preview_rule(user_id, &rule, PREVIEW_SAMPLE)
            .await?)
    }

    /// Applies one of the user's rules to their transactions; how many changed.
    pub(crate) async fn apply_rule(&self, user_id: Uuid, rule_id: Uuid) -> Result<u64, RuleError> {
        let entry = self.rule(user_id, rule_id).await?;
        let rule = self.compile(user_id, rule_id, &entry.draft).await?;
        Ok(self.store.apply_rule(user_id, &rule, Utc::now()).await?)
    }
}
