//! Transaction matches: what the reconciler recognised as one real transaction (a duplicate
//! across sources) or as the two legs of a transfer, and the caller's decisions on them.
//!
//! Choices where the contract is silent: the list is newest first, 50 a page by default (1 to
//! 100 with `limit`), `next_cursor` is the id of the page's last match (give it back as
//! `cursor`), and `null` on the last page. A decision answers 200 with the match as it stands;
//! deciding what already holds is a 200 that changes nothing; accepting a transfer whose leg
//! was paired with another row meanwhile is 409.

use chrono::{DateTime, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::extract::{PathId, Query, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, ParameterSchema, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, ErrorCode};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::records::matches::MatchError;
use crate::store::{MatchDecision, MatchFilter, MatchKind, MatchRecord, MatchStatus};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/transaction-matches" => list, limited(API_READ),
        "List the caller's transaction matches (duplicates across sources, transfers), newest first",
        [200: MatchList]),
    route!(POST "/api/v1/transaction-matches/{id}/accept" => accept, limited(API_WRITE),
        "Accept a match: a duplicate's newer row is removed, a transfer's legs are paired",
        [200: MatchJson; Conflict]),
    route!(POST "/api/v1/transaction-matches/{id}/reject" => reject, limited(API_WRITE),
        "Reject a match: a held-back duplicate is written, a transfer is unpaired; never proposed again",
        [200: MatchJson; Conflict]),
];

/// Page size bounds and default.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: u32 = 50;

impl From<MatchError> for ApiError {
    fn from(error: MatchError) -> Self {
        let detail = error.to_string();
        match error {
            MatchError::NotFound => ApiError::new(ErrorCode::NotFound, detail),
            MatchError::Conflict(_) => ApiError::new(ErrorCode::Conflict, detail),
            MatchError::Store(store) => store.into(),
        }
    }
}

/// `status`, `kind`, `limit` and `cursor` of the list.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct ListQuery {
    /// Only matches in this state.
    #[param(value_type = Option<MatchStatus>, inline)]
    status: Option<String>,
    /// Only matches of this kind.
    #[param(value_type = Option<MatchKind>, inline)]
    kind: Option<String>,
    /// Page size: 1 to 100 (default 50).
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page: the page after it.
    #[param(value_type = Option<String>, format = Uuid)]
    cursor: Option<String>,
}

impl Validate for ListQuery {
    type Valid = MatchFilter;

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] =
        &[("limit", || schemas::query_integer(1, Some(MAX_LIMIT)))];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (status, kind, limit, before) = (
            query::choice("status", self.status, MatchStatus::ALL, MatchStatus::as_str),
            query::choice("kind", self.kind, MatchKind::ALL, MatchKind::as_str),
            query::integer("limit", self.limit, 1, MAX_LIMIT, DEFAULT_LIMIT),
            query::uuid("cursor", self.cursor),
        )
            .all_valid()?;
        Ok(MatchFilter {
            status,
            kind,
            before,
            limit,
        })
    }
}

/// A match as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0192f3a4-2222-7d8e-9f00-112233445566", "kind": "duplicate", "status": "automatic", "transaction_ids": ["0192f3a4-1111-7d8e-9f00-112233445566"], "confidence": 0.9, "reason": "Another source's row of the same amount, dated 1 days apart, with a description 90% alike.", "created_at": "2026-03-02T10:00:00Z", "updated_at": "2026-03-02T10:00:00Z"}))]
pub(crate) struct MatchJson {
    id: Uuid,
    #[schema(value_type = MatchKind)]
    kind: &'static str,
    #[schema(value_type = MatchStatus)]
    status: &'static str,
    /// The rows it is about that exist now: a duplicate's kept row, then its newer row unless
    /// that one is held back; a transfer's two legs.
    transaction_ids: Vec<Uuid>,
    /// How sure the reconciler was, from 0 to 1.
    #[schema(minimum = 0, maximum = 1)]
    confidence: f64,
    /// Why the rows were matched.
    reason: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(crate) fn match_json(record: &MatchRecord) -> MatchJson {
    MatchJson {
        id: record.id,
        kind: record.kind.as_str(),
        status: record.status.as_str(),
        transaction_ids: record.transaction_ids.clone(),
        confidence: record
            .confidence
            .clamp(Decimal::ZERO, Decimal::ONE)
            .to_f64()
            .unwrap_or_default(),
        reason: record.reason.clone(),
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct MatchList {
    matches: Vec<MatchJson>,
    /// The `cursor` of the next page; `null` on the last page.
    #[schema(format = Uuid)]
    next_cursor: Option<String>,
}

/// `GET /api/v1/transaction-matches`
async fn list(state: &App, User(claims): User, Query(filter): Query<ListQuery>) -> ApiResult {
    let mut matches = state.matches.list(claims.sub, &filter).await?;
    let page_size = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    let has_more = matches.len() > page_size;
    matches.truncate(page_size);
    let next_cursor = matches
        .last()
        .filter(|_| has_more)
        .map(|last| last.id.to_string());
    json(
        StatusCode::OK,
        &MatchList {
            matches: matches.iter().map(match_json).collect(),
            next_cursor,
        },
    )
}

/// `POST /api/v1/transaction-matches/{id}/accept`
async fn accept(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let decided = state
        .matches
        .decide(claims.sub, id, MatchDecision::Accept)
        .await?;
    json(StatusCode::OK, &match_json(&decided))
}

/// `POST /api/v1/transaction-matches/{id}/reject`
async fn reject(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let decided = state
        .matches
        .decide(claims.sub, id, MatchDecision::Reject)
        .await?;
    json(StatusCode::OK, &match_json(&decided))
}
