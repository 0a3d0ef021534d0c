//! The search and spending reads, one SQL text for both backends but for the word condition
//! and the decimal type ([`Driver::SEARCH_WORDS_OPEN`](crate::store::backend::Driver)).
//!
//! Words reach the database only as a bound parameter, each wrapped in double quotes (a
//! word is letters and digits only, so it never holds one): FTS5 reads a quoted word as a
//! plain string, never as `NEAR`, `AND`, a prefix `*` or a column filter, and PostgreSQL's
//! `plainto_tsquery` reads any text as plain words.

use async_trait::async_trait;
use chrono::NaiveDate;
use uuid::Uuid;

use super::{SearchStore, SpendingRow, TransactionSearch};
use crate::store::backend::{Backend, QueryBuilder, SqlStore};
use crate::store::records::sql::SELECT_TRANSACTION;
use crate::store::sql::text;
use crate::store::{StoreError, TransactionPosition, TransactionRecord, TransactionStatus};

/// The bound search text for `words`: each one double-quoted, separated by spaces (FTS5's
/// implicit `AND`).
pub(in crate::store) fn quoted_words(words: &[String]) -> String {
    let mut quoted = String::new();
    for word in words {
        if !quoted.is_empty() {
            quoted.push(' ');
        }
        quoted.push('"');
        // A word is letters and digits only; doubling a quote is FTS5's escape should one
        // ever come through.
        quoted.push_str(&word.replace('"', "\"\""));
        quoted.push('"');
    }
    quoted
}

/// Starts a query over the transactions of the user's active accounts (`t`, with `a` and `c`).
fn active_transactions<B: Backend>(select: &str, user_id: Uuid) -> QueryBuilder<B> {
    let mut query = QueryBuilder::new(select);
    query
        .push(" FROM accounts a JOIN connections c ON c.id = a.connection_id AND c.user_id = ")
        .push_bind(user_id)
        .push(" JOIN transactions t ON t.account_id = a.id WHERE a.is_active = ")
        .push_bind(true);
    query
}

#[async_trait]
impl<B: Backend> SearchStore for SqlStore<B> {
    async fn search_transactions(
        &self,
        user_id: Uuid,
        search: &TransactionSearch,
    ) -> Result<Vec<TransactionRecord>, StoreError> {
        let mut query = active_transactions::<B>(SELECT_TRANSACTION, user_id);
        if let Some(account_id) = search.account_id {
            query.push(" AND a.id = ").push_bind(account_id);
        }
        if let Some(status) = search.status {
            query.push(" AND t.status = ").push_bind(status.as_str());
        }
        if let Some(start) = search.start_date {
            query.push(" AND t.transaction_date >= ").push_bind(start);
        }
        if let Some(end) = search.end_date {
            query.push(" AND t.transaction_date <= ").push_bind(end);
        }
        for (bound, operator) in [(search.min_amount, ">="), (search.max_amount, "<=")] {
            if let Some(bound) = bound {
                query
                    .push(format_args!(
                        " AND CAST(t.amount AS {}) {operator} CAST(",
                        B::DECIMAL_TYPE
                    ))
                    .push_bind(text(bound))
                    .push(format_args!(" AS {})", B::DECIMAL_TYPE));
            }
        }
        if !search.words.is_empty() {
            query
                .push(B::SEARCH_WORDS_OPEN)
                .push_bind(quoted_words(&search.words))
                .push(B::SEARCH_WORDS_CLOSE);
        }
        if let Some(after) = search.after {
            // Spelled out rather than as a row comparison: the same text on both backends.
            query
                .push(" AND (t.transaction_date < ")
                .push_bind(after.transaction_date)
                .push(" OR (t.transaction_date = ")
                .push_bind(after.transaction_date)
                .push(" AND t.id < ")
                .push_bind(after.id)
                .push("))");
        }
        query
            .push(" ORDER BY t.transaction_date DESC, t.id DESC LIMIT ")
            .push_bind(i64::from(search.limit) + 1);
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }

    async fn spending_rows(
        &self,
        user_id: Uuid,
        from: NaiveDate,
        to: NaiveDate,
        after: Option<TransactionPosition>,
        limit: u32,
    ) -> Result<Vec<SpendingRow>, StoreError> {
        let mut query = active_transactions::<B>(
            "SELECT t.id, t.account_id, t.transaction_date, t.currency, t.amount, \
             NULL AS category, NULL AS merchant_name",
            user_id,
        );
        query
            .push(" AND t.transfer_transaction_id IS NULL AND t.status IN (")
            .push_bind(TransactionStatus::Pending.as_str())
            .push(", ")
            .push_bind(TransactionStatus::Settled.as_str())
            .push(") AND t.transaction_date >= ")
            .push_bind(from)
            .push(" AND t.transaction_date <= ")
            .push_bind(to);
        if let Some(after) = after {
            query
                .push(" AND (t.transaction_date > ")
                .push_bind(after.transaction_date)
                .push(" OR (t.transaction_date = ")
                .push_bind(after.transaction_date)
                .push(" AND t.id > ")
                .push_bind(after.id)
                .push("))");
        }
        query
            .push(" ORDER BY t.transaction_date, t.id LIMIT ")
            .push_bind(i64::from(limit));
        Ok(query.build_query_as().fetch_all(&self.pool).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_and_separated() {
        let words = ["coffee".to_owned(), "near".to_owned()];
        assert_eq!(quoted_words(&words), "\"coffee\" \"near\"");
        assert_eq!(quoted_words(&["a\"b".to_owned()]), "\"a\"\"b\"");
        assert_eq!(quoted_words(&[]), "");
    }
}
