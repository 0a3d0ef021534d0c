//! The user's rules: their rows, the run of every rule on the rows a write created or changed
//! (inside the writer's transaction, so imports and syncs of every source go through it), and
//! one rule's preview over, or application to, every existing row of the user, page by page.

use std::collections::BTreeMap;
use std::str::FromStr as _;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::enrich::rules::{
    self, Applied, Rule, RuleChange, RuleFields, RulePreview, Subject, UserSet,
};
use crate::store::backend::{Backend, QueryBuilder, SqlStore, Tx, query, query_as, query_scalar};
use crate::store::records::sql::connections::lock_user_in;
use crate::store::sql::Upserted;
use crate::store::{CategorySource, RuleRecord, StoreError, TransactionPosition};

const SELECT_RULE: &str = "SELECT id, user_id, name, conditions, actions, priority, \
     stop_processing, created_at, updated_at FROM rules";

/// What a rule reads and sets of a row.
const SELECT_ROW: &str = "SELECT t.id, t.account_id, t.amount, t.currency, t.description, \
     t.merchant_code, t.category, t.merchant_name, t.notes, t.category_by_user, \
     t.merchant_name_by_user, t.notes_by_user, t.transaction_date FROM transactions t";

/// A row as [`SELECT_ROW`] reads it.
type RuleRow = (
    Uuid,
    Uuid,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    bool,
    bool,
    bool,
    NaiveDate,
);

/// Rows per page of a preview or an application.
const PAGE_ROWS: i64 = 1_000;

/// A row's fields before and after the rules ran, and what they set.
struct Evaluated {
    id: Uuid,
    before: RuleFields,
    after: RuleFields,
    applied: Applied,
}

/// Runs `rules` on one row; `None` for a row whose amount does not read (never written so).
fn evaluate(rules: &[Rule], row: RuleRow) -> Option<Evaluated> {
    let (id, account_id, amount, currency, description, merchant_code, category, merchant_name) =
        (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7);
    let amount = Decimal::from_str(&amount).ok()?;
    let subject = Subject {
        account_id,
        amount,
        currency: &currency,
        description: description.as_deref(),
        merchant_code: merchant_code.as_deref(),
    };
    let before = RuleFields {
        category,
        merchant_name,
        notes: row.8,
    };
    let user = UserSet {
        category: row.9,
        merchant_name: row.10,
        notes: row.11,
    };
    let mut after = before.clone();
    let applied = rules::run(rules, &subject, &mut after, user);
    Some(Evaluated {
        id,
        before,
        after,
        applied,
    })
}

/// The user's rules, compiled, in the order they run. A stored rule that no longer compiles
/// (never written so: the API checks every rule) is skipped with a warning.
async fn compiled_rules_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
) -> Result<Vec<Rule>, StoreError> {
    let stored: Vec<(Uuid, String, String, bool)> = query_as::<B, _>(
        "SELECT id, conditions, actions, stop_processing FROM rules WHERE user_id = $1 \
         ORDER BY priority, id",
    )
    .bind(user_id)
    .fetch_all(&mut **tx)
    .await?;
    Ok(stored
        .into_iter()
        .filter_map(|(id, conditions, actions, stop)| {
            Rule::from_stored(id, &conditions, &actions, stop)
                .inspect_err(|error| tracing::warn!(rule = %id, %error, "stored rule skipped"))
                .ok()
        })
        .collect())
}

/// `value` when the rules set it.
fn pick(set: bool, value: &Option<String>) -> Option<&str> {
    if set { value.as_deref() } else { None }
}

/// Writes what the rules set, one statement per distinct set of values (rules give few).
async fn write_changes_in<B: Backend>(
    tx: &mut Tx<B>,
    changes: &[Evaluated],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    type Values<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let mut groups: BTreeMap<Values<'_>, Vec<Uuid>> = BTreeMap::new();
    for change in changes {
        let key = (
            pick(change.applied.category, &change.after.category),
            pick(change.applied.merchant_name, &change.after.merchant_name),
            pick(change.applied.notes, &change.after.notes),
        );
        if key != (None, None, None) {
            groups.entry(key).or_default().push(change.id);
        }
    }
    for ((category, merchant_name, notes), ids) in groups {
        for chunk in ids.chunks(B::KEYS_PER_STATEMENT) {
            let mut update = QueryBuilder::<B>::new("UPDATE transactions SET updated_at = ");
            update.push_bind(now);
            if let Some(category) = category {
                update
                    .push(", category = ")
                    .push_bind(category)
                    .push(", category_source = ")
                    .push_bind(CategorySource::Rule.as_str());
            }
            if let Some(merchant_name) = merchant_name {
                update.push(", merchant_name = ").push_bind(merchant_name);
            }
            if let Some(notes) = notes {
                update.push(", notes = ").push_bind(notes);
            }
            update.push(" WHERE id IN (");
            let mut listed = update.separated(", ");
            for id in chunk {
                listed.push_bind(*id);
            }
            update.push(")");
            update.build().execute(&mut **tx).await?;
        }
    }
    Ok(())
}

/// Runs the user's rules on the rows a write created or changed (`outcomes` of the upsert),
/// inside the writer's transaction. The rules are read and compiled once for the batch; a
/// user without rules costs one indexed read.
pub(in crate::store) async fn run_rules_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    outcomes: &[(Uuid, Upserted)],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = outcomes
        .iter()
        .filter(|(_, outcome)| *outcome != Upserted::Unchanged)
        .map(|(id, _)| *id)
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let rules = compiled_rules_in(tx, user_id).await?;
    if rules.is_empty() {
        return Ok(());
    }
    for chunk in ids.chunks(B::KEYS_PER_STATEMENT) {
        let mut select = QueryBuilder::<B>::new(format!("{SELECT_ROW} WHERE t.id IN ("));
        let mut listed = select.separated(", ");
        for id in chunk {
            listed.push_bind(*id);
        }
        select.push(")");
        let rows: Vec<RuleRow> = select.build_query_as().fetch_all(&mut **tx).await?;
        let changes: Vec<Evaluated> = rows
            .into_iter()
            .filter_map(|row| evaluate(&rules, row))
            .filter(|evaluated| evaluated.applied.any())
            .collect();
        write_changes_in(tx, &changes, now).await?;
    }
    Ok(())
}

/// Runs `rule` alone on every row of the user (of its account, when a condition names one),
/// page by page; `each` gets every row the rule changes, with the page's changes also handed
/// back for writing when `write` is set. How many rows changed.
async fn sweep_in<B: Backend>(
    tx: &mut Tx<B>,
    user_id: Uuid,
    rule: &Rule,
    write: Option<DateTime<Utc>>,
    mut each: impl FnMut(&Evaluated),
) -> Result<u64, StoreError> {
    let mut accounts = QueryBuilder::<B>::new(
        "SELECT a.id FROM accounts a JOIN connections c ON c.id = a.connection_id \
         WHERE c.user_id = ",
    );
    accounts.push_bind(user_id);
    if let Some(account_id) = rule.account() {
        accounts.push(" AND a.id = ").push_bind(account_id);
    }
    accounts.push(" ORDER BY a.id");
    let accounts: Vec<(Uuid,)> = accounts.build_query_as().fetch_all(&mut **tx).await?;
    let currency = rule.currency();
    let mut changed = 0;
    for (account_id,) in accounts {
        let mut after: Option<TransactionPosition> = None;
        loop {
            let mut page = QueryBuilder::<B>::new(format!("{SELECT_ROW} WHERE t.account_id = "));
            page.push_bind(account_id);
            if let Some(currency) = &currency {
                page.push(" AND t.currency = ").push_bind(currency.as_str());
            }
            if let Some(after) = after {
                page.push_after_position(after, None, false);
            }
            page.push(" ORDER BY t.transaction_date, t.id LIMIT ")
                .push_bind(PAGE_ROWS);
            let rows: Vec<RuleRow> = page.build_query_as().fetch_all(&mut **tx).await?;
            let full = i64::try_from(rows.len()).unwrap_or(i64::MAX) >= PAGE_ROWS;
            after = rows.last().map(|row| TransactionPosition {
                transaction_date: row.12,
                id: row.0,
            });
            let changes: Vec<Evaluated> = rows
                .into_iter()
                .filter_map(|row| evaluate(std::slice::from_ref(rule), row))
                .filter(|evaluated| evaluated.before != evaluated.after)
                .collect();
            changed += u64::try_from(changes.len()).unwrap_or(u64::MAX);
            changes.iter().for_each(&mut each);
            if let Some(now) = write {
                write_changes_in(tx, &changes, now).await?;
            }
            if !full {
                break;
            }
        }
    }
    Ok(changed)
}

impl<B: Backend> SqlStore<B> {
    /// See [`crate::store::TransactionStore::rules`].
    pub(in crate::store) async fn rules_of(
        &self,
        user_id: Uuid,
    ) -> Result<Vec<RuleRecord>, StoreError> {
        Ok(query_as::<B, _>(sqlx::AssertSqlSafe(format!(
            "{SELECT_RULE} WHERE user_id = $1 ORDER BY priority, id"
        )))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// See [`crate::store::TransactionStore::create_rule`].
    pub(in crate::store) async fn insert_rule(
        &self,
        rule: &RuleRecord,
        limit: u64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        // Two creations cannot both pass the limit.
        lock_user_in(&mut tx, rule.user_id).await?;
        let held: i64 = query_scalar::<B, _>("SELECT COUNT(*) FROM rules WHERE user_id = $1")
            .bind(rule.user_id)
            .fetch_one(&mut *tx)
            .await?;
        if u64::try_from(held).unwrap_or(0) >= limit {
            tx.rollback().await?;
            return Ok(false);
        }
        query::<B>(
            "INSERT INTO rules (id, user_id, name, conditions, actions, priority, \
             stop_processing, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(rule.id)
        .bind(rule.user_id)
        .bind(rule.name.as_str())
        .bind(rule.conditions.as_str())
        .bind(rule.actions.as_str())
        .bind(rule.priority)
        .bind(rule.stop_processing)
        .bind(rule.created_at)
        .bind(rule.updated_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// See [`crate::store::TransactionStore::update_rule`].
    pub(in crate::store) async fn rewrite_rule(
        &self,
        rule: &RuleRecord,
    ) -> Result<bool, StoreError> {
        let updated = query::<B>(
            "UPDATE rules SET name = $3, conditions = $4, actions = $5, priority = $6, \
             stop_processing = $7, updated_at = $8 WHERE id = $1 AND user_id = $2",
        )
        .bind(rule.id)
        .bind(rule.user_id)
        .bind(rule.name.as_str())
        .bind(rule.conditions.as_str())
        .bind(rule.actions.as_str())
        .bind(rule.priority)
        .bind(rule.stop_processing)
        .bind(rule.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(updated.rows_affected() > 0)
    }

    /// See [`crate::store::TransactionStore::delete_rule`].
    pub(in crate::store) async fn remove_rule(
        &self,
        user_id: Uuid,
        rule_id: Uuid,
    ) -> Result<bool, StoreError> {
        let deleted = query::<B>("DELETE FROM rules WHERE id = $1 AND user_id = $2")
            .bind(rule_id)
            .bind(user_id)
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected() > 0)
    }

    /// See [`crate::store::TransactionStore::preview_rule`].
    pub(in crate::store) async fn preview(
        &self,
        user_id: Uuid,
        rule: &Rule,
        sample: usize,
    ) -> Result<RulePreview, StoreError> {
        // One read transaction: the count and the sample see one state.
        let mut tx = self.pool.begin().await?;
        let mut changes = Vec::new();
        let count = sweep_in(&mut tx, user_id, rule, None, |evaluated| {
            if changes.len() < sample {
                changes.push(RuleChange {
                    id: evaluated.id,
                    before: evaluated.before.clone(),
                    after: evaluated.after.clone(),
                });
            }
        })
        .await?;
        tx.rollback().await?;
        Ok(RulePreview { count, changes })
    }

    /// See [`crate::store::TransactionStore::apply_rule`].
    pub(in crate::store) async fn apply(
        &self,
        user_id: Uuid,
        rule: &Rule,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin_with(B::BEGIN_WRITE).await?;
        let changed = sweep_in(&mut tx, user_id, rule, Some(now), |_| {}).await?;
        tx.commit().await?;
        Ok(changed)
    }
}
