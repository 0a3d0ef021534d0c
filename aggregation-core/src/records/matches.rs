//! Transaction matches: what the reconciler matched (duplicates across sources, transfers
//! between the user's accounts), listed for the user, and the user's decisions on them. Every
//! decision is reversible: accepting after rejecting (or the other way round) applies the
//! other outcome, and each raises its event in the same transaction.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::events::{
    DurableEvent as _, Event, Events, TransactionMatchChange, TransactionsMatched,
    TransactionsUnmatched,
};
use crate::store::{MatchDecision, MatchFilter, MatchRecord, MatchStatus, Store, StoreError, now};

/// Why a match could not be read or decided.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MatchError {
    /// No match of the user has this id.
    #[error("Transaction match not found.")]
    NotFound,
    /// The decision cannot be applied as the rows stand now.
    #[error("{0}")]
    Conflict(String),
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for MatchError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(reason) => Self::Conflict(reason),
            other => Self::Store(other),
        }
    }
}

/// What an event about `record` says.
fn change(record: &MatchRecord) -> TransactionMatchChange {
    TransactionMatchChange {
        user_id: record.user_id,
        match_id: record.id,
        kind: record.kind.as_str().to_owned(),
        status: record.status.as_str().to_owned(),
        transaction_ids: record.transaction_ids.clone(),
    }
}

/// The event of a match as it stands: `transactions.unmatched` once rejected, else
/// `transactions.matched`.
pub(crate) fn match_event(record: &MatchRecord, at: DateTime<Utc>) -> Event {
    match record.status {
        MatchStatus::Rejected => TransactionsUnmatched(change(record)).event_at(at),
        _ => TransactionsMatched(change(record)).event_at(at),
    }
}

/// The events of the matches a sync or import recorded, one `transactions.matched` each.
pub(crate) fn matches_events(matches: &[MatchRecord], at: DateTime<Utc>) -> Vec<Event> {
    matches
        .iter()
        .map(|record| match_event(record, at))
        .collect()
}

/// The transaction-matches use case.
#[derive(Clone)]
pub(crate) struct Matches {
    store: Arc<dyn Store>,
    events: Events,
}

impl Matches {
    pub(crate) fn new(store: Arc<dyn Store>, events: Events) -> Self {
        Self { store, events }
    }

    /// The user's matches in the filter, newest first, up to `limit + 1`.
    pub(crate) async fn list(
        &self,
        user_id: Uuid,
        filter: &MatchFilter,
    ) -> Result<Vec<MatchRecord>, MatchError> {
        Ok(self.store.transaction_matches(user_id, filter).await?)
    }

    /// Applies the user's decision on one of their matches; the match as it stands after.
    pub(crate) async fn decide(
        &self,
        user_id: Uuid,
        match_id: Uuid,
        decision: MatchDecision,
    ) -> Result<MatchRecord, MatchError> {
        let at = now();
        let mut raised = Vec::new();
        let decided = self
            .store
            .decide_match(
                user_id,
                match_id,
                decision,
                at,
                &|record: &MatchRecord| vec![match_event(record, at)],
                &mut raised,
            )
            .await?;
        self.events.committed(&raised);
        decided.ok_or(MatchError::NotFound)
    }
}
