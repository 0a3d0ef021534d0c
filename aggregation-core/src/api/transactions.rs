//! Reading transactions: one transaction, and the transactions of an account.

use chrono::{DateTime, NaiveDate, Utc};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::cursor::{self, PositionListing};
use super::extract::{Json, PathId, Query, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Field, ParameterSchema, Validate, body, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, FieldError};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::store::{
    CategorySource, TransactionEdit, TransactionPosition, TransactionQuery, TransactionRecord,
    TransactionType,
};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/transactions/{id}" => get, limited(API_READ),
        "Read one of the caller's transactions", [200: TransactionJson<'static>]),
    route!(PATCH "/api/v1/transactions/{id}" => edit, limited(API_WRITE),
        "Set or clear a transaction's category, notes and merchant name; each field sent is the caller's from then on (no re-sync, re-import or rule changes it)",
        [200: TransactionJson<'static>]),
    route!(GET "/api/v1/accounts/{id}/transactions" => list_for_account, limited(API_READ),
        "List the transactions of one of the caller's accounts", [200: TransactionList<'static>]),
];

/// Page size bounds and default of the by-account listing.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: u32 = 50;
/// Page size bound and default of the date-range listing.
const MAX_RANGE_LIMIT: i64 = 500;
const DEFAULT_RANGE_LIMIT: u32 = 500;

/// `limit`, `offset`, `transaction_type`, `start_date`, `end_date` and `cursor` of the
/// transactions of an account.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct ListQuery {
    /// Page size: 1 to 100 (default 50) for the listing by account; 1 to 500 (default 500)
    /// for the date-range listing (both `start_date` and `end_date`).
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    /// Rows skipped (listing by account only; the date-range listing pages by `cursor`, and
    /// so may the listing by account).
    #[param(value_type = Option<i64>)]
    offset: Option<String>,
    /// Only this type (listing by account only).
    #[param(value_type = Option<TransactionType>, inline)]
    transaction_type: Option<String>,
    /// First date, inclusive; with `end_date`, selects the date-range listing.
    #[param(schema_with = crate::api::openapi::schemas::date)]
    start_date: Option<String>,
    /// Last date, inclusive; with `start_date`, selects the date-range listing.
    #[param(schema_with = crate::api::openapi::schemas::date)]
    end_date: Option<String>,
    /// The `next_cursor` of the previous page (same filters and dates): the page after it,
    /// by keyset, so a deep page costs what the first does. A date-range cursor needs both
    /// dates, a newest-first one neither; not with a non-zero `offset` (422 `query.offset`).
    #[param(value_type = Option<String>, pattern = "^([A-Za-z0-9_-]{28})?$",
        example = "AQALIzYBmxN0WHd0hGYwABEiM0RV")]
    cursor: Option<String>,
}

/// The `cursor` parameter: absent or empty, or the position of a page of the listing the
/// query selects (a date-range cursor for a date range, a newest-first one otherwise).
/// Malformed, or another listing's (a date-range cursor without both dates included), it is
/// 422 `query.cursor`.
fn cursor(
    raw: Option<String>,
    date_range: bool,
) -> Result<Option<TransactionPosition>, FieldError> {
    let (own, other) = if date_range {
        (
            PositionListing::AccountRange,
            PositionListing::AccountRecent,
        )
    } else {
        (
            PositionListing::AccountRecent,
            PositionListing::AccountRange,
        )
    };
    match cursor::position_parameter(own, raw.clone()) {
        Ok(position) => Ok(position),
        Err(invalid) => {
            let belongs_to_range = !date_range
                && raw.is_some_and(|raw| cursor::decode_position(other, &raw).is_some());
            Err(if belongs_to_range {
                query::error(
                    "cursor",
                    "needs_date_range",
                    "This cursor pages the date-range listing: give start_date and end_date too.",
                )
            } else {
                invalid
            })
        }
    }
}

impl Validate for ListQuery {
    /// The date range when both dates are given, else the page.
    type Valid = TransactionQuery;

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] = &[
        ("limit", || schemas::query_integer(1, Some(MAX_RANGE_LIMIT))),
        ("offset", || schemas::query_integer(0, None)),
    ];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        // Decided by presence, so a malformed date does not also misjudge the limit.
        let date_range = query::string(self.start_date.clone()).is_some()
            && query::string(self.end_date.clone()).is_some();
        let start = query::date("start_date", self.start_date);
        let end = query::date("end_date", self.end_date);
        let ordered = match (&start, &end) {
            (Ok(Some(start)), Ok(Some(end))) if start > end => Err(query::error(
                "start_date",
                "after_end_date",
                "Must not be after end_date.",
            )),
            _ => Ok(()),
        };
        let (max_limit, default_limit) = if date_range {
            (MAX_RANGE_LIMIT, DEFAULT_RANGE_LIMIT)
        } else {
            (MAX_LIMIT, DEFAULT_LIMIT)
        };
        let (limit, offset, transaction_type, start, end, (), after) = (
            query::integer("limit", self.limit, 1, max_limit, default_limit),
            query::integer("offset", self.offset, 0, i64::MAX, 0u64),
            query::choice(
                "transaction_type",
                self.transaction_type,
                TransactionType::ALL,
                TransactionType::as_str,
            ),
            start,
            end,
            ordered,
            cursor(self.cursor, date_range),
        )
            .all_valid()?;
        Ok(match (start, end, after) {
            (Some(start), Some(end), after) => TransactionQuery::DateRange {
                start,
                end,
                limit,
                after,
            },
            (_, _, Some(_)) if offset > 0 => {
                return Err(ApiError::validation(vec![query::error(
                    "offset",
                    "not_with_cursor",
                    "Page by offset or by cursor, not both: leave offset out (or 0) with a cursor.",
                )]));
            }
            (_, _, Some(after)) => TransactionQuery::RecentAfter {
                transaction_type,
                limit,
                after,
            },
            (_, _, None) => TransactionQuery::Recent {
                transaction_type,
                limit,
                offset,
            },
        })
    }
}

/// A transaction as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0192f3a4-1111-7d8e-9f00-112233445566", "account_id": "0192f3a4-5b6c-7d8e-9f00-112233445566", "provider_transaction_id": "T-20260115-001", "transaction_type": "trade", "subtype": "buy", "status": "settled", "amount": "-1523.40", "currency": "USD", "description": "Bought 10 VTI", "symbol": "VTI", "security_name": "Vanguard Total Stock Market ETF", "quantity": "10", "unit_price": "152.34", "commission": "0.00", "transaction_date": "2026-01-15", "settlement_date": "2026-01-16", "source": "sync", "pending_transaction_id": null, "transfer_transaction_id": null, "category": null, "category_source": null, "merchant_name": null, "notes": null, "created_at": "2026-01-15T21:00:00Z", "updated_at": "2026-01-15T21:00:00Z"}))]
pub(crate) struct TransactionJson<'a> {
    id: Uuid,
    account_id: Uuid,
    provider_transaction_id: &'a str,
    #[schema(value_type = TransactionType)]
    transaction_type: &'static str,
    subtype: Option<&'a str>,
    #[schema(value_type = crate::store::TransactionStatus)]
    status: &'static str,
    #[serde(with = "rust_decimal::serde::str")]
    amount: Decimal,
    currency: &'a str,
    description: Option<&'a str>,
    symbol: Option<&'a str>,
    security_name: Option<&'a str>,
    #[serde(with = "rust_decimal::serde::str_option")]
    quantity: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    unit_price: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str_option")]
    commission: Option<Decimal>,
    transaction_date: NaiveDate,
    settlement_date: Option<NaiveDate>,
    /// Which kind of source wrote it: `sync` or `import`.
    #[schema(value_type = crate::store::TransactionSource)]
    source: &'static str,
    /// For a booked row that took over a pending one (keeping its id, category and notes):
    /// the provider id the pending row had.
    pending_transaction_id: Option<&'a str>,
    /// For a leg of a transfer between two of the caller's accounts: the other leg's id.
    transfer_transaction_id: Option<Uuid>,
    /// The category: a taxonomy detailed id (`FOOD_AND_DRINK_COFFEE`) or one of the caller's
    /// own (`custom:<uuid>`); `null` when uncategorised.
    category: Option<&'a str>,
    /// What chose the category, by precedence: `user` > `rule` > `provider` >
    /// `merchant_code` > `bank_code` > `transfer`; `null` when nothing did.
    #[schema(value_type = Option<crate::store::CategorySource>)]
    category_source: Option<&'static str>,
    /// The merchant's name (the source's, a rule's, the caller's, or derived from the
    /// description); `null` when none is known.
    merchant_name: Option<&'a str>,
    /// The caller's (or a rule's) notes; `null` when none.
    notes: Option<&'a str>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(crate) fn transaction_json(transaction: &TransactionRecord) -> TransactionJson<'_> {
    TransactionJson {
        id: transaction.id,
        account_id: transaction.account_id,
        provider_transaction_id: &transaction.provider_transaction_id,
        transaction_type: transaction.transaction_type.as_str(),
        subtype: transaction.subtype.as_deref(),
        status: transaction.status.as_str(),
        amount: transaction.amount,
        currency: &transaction.currency,
        description: transaction.description.as_deref(),
        symbol: transaction.symbol.as_deref(),
        security_name: transaction.security_name.as_deref(),
        quantity: transaction.quantity,
        unit_price: transaction.unit_price,
        commission: transaction.commission,
        transaction_date: transaction.transaction_date,
        settlement_date: transaction.settlement_date,
        source: transaction.source.as_str(),
        pending_transaction_id: transaction.pending_transaction_id.as_deref(),
        transfer_transaction_id: transaction.transfer_transaction_id,
        category: transaction.category.as_deref(),
        category_source: transaction.category_source.map(CategorySource::as_str),
        merchant_name: transaction.merchant_name.as_deref(),
        notes: transaction.notes.as_deref(),
        created_at: transaction.created_at,
        updated_at: transaction.updated_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct TransactionList<'a> {
    transactions: Vec<TransactionJson<'a>>,
    /// Every matching row, not only this page (for a date range: every row in the range).
    total_count: u64,
    /// The page size applied.
    limit: u64,
    /// Rows skipped (always 0 for a date range, which pages by cursor).
    offset: u64,
    /// Whether rows follow this page.
    has_more: bool,
    /// When more rows follow: the `cursor` of the next page (same filters and dates; for the
    /// listing by account, also after an `offset` page); otherwise `null`.
    #[schema(pattern = "^[A-Za-z0-9_-]{28}$")]
    next_cursor: Option<String>,
}

/// `GET /api/v1/transactions/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let transaction = state.records.transaction(claims.sub, id).await?;
    json(StatusCode::OK, &transaction_json(&transaction))
}

/// The longest merchant name and notes a user may set, in characters.
const MAX_MERCHANT_NAME_CHARS: usize = 200;
const MAX_NOTES_CHARS: usize = 2_000;
/// The longest category id (`custom:` and a UUID is 43; taxonomy ids are shorter).
const MAX_CATEGORY_CHARS: usize = 64;

/// `{category?, notes?, merchant_name?}` of an edit: a field sent is set (`null` clears it),
/// a field left out stays as it is. At least one field.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct TransactionEditBody {
    /// A category id from `GET /api/v1/categories` (a taxonomy detailed id or one of the
    /// caller's `custom:<uuid>`), or `null` for none.
    #[schema(value_type = Option<String>, max_length = 64, example = "FOOD_AND_DRINK_COFFEE")]
    category: Field,
    /// Notes, up to 2,000 characters, or `null` for none.
    #[schema(value_type = Option<String>, max_length = 2000)]
    notes: Field,
    /// The merchant's name, 1 to 200 characters, or `null` for none.
    #[schema(value_type = Option<String>, min_length = 1, max_length = 200)]
    merchant_name: Field,
}

impl Validate for TransactionEditBody {
    type Valid = TransactionEdit;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (category, notes, merchant_name) = (
            body::nullable_string("category", self.category, 1, MAX_CATEGORY_CHARS),
            body::nullable_string("notes", self.notes, 0, MAX_NOTES_CHARS),
            body::nullable_string(
                "merchant_name",
                self.merchant_name,
                1,
                MAX_MERCHANT_NAME_CHARS,
            ),
        )
            .all_valid()?;
        if category.is_none() && notes.is_none() && merchant_name.is_none() {
            return Err(ApiError::validation(vec![FieldError::new(
                "category",
                "required",
                "Send at least one of category, notes and merchant_name.",
            )]));
        }
        Ok(TransactionEdit {
            category,
            merchant_name,
            notes,
        })
    }
}

/// `PATCH /api/v1/transactions/{id}`
async fn edit(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    Json(edit): Json<TransactionEditBody>,
) -> ApiResult {
    let transaction = state
        .records
        .edit_transaction(claims.sub, id, &edit)
        .await?;
    json(StatusCode::OK, &transaction_json(&transaction))
}

/// `GET /api/v1/accounts/{id}/transactions`
///
/// With both `start_date` and `end_date`: the transactions dated in that inclusive range,
/// oldest first, `limit` at a time (default and at most 500), the next page named by
/// `next_cursor`; `offset` and `transaction_type` are validated but not applied. Otherwise:
/// one page newest first with `limit`, `transaction_type`, and `offset` or `cursor` (the
/// `next_cursor` of the previous page, by keyset; both at once is 422); a lone date is
/// ignored.
async fn list_for_account(
    state: &App,
    User(claims): User,
    PathId(account_id): PathId,
    Query(query): Query<ListQuery>,
) -> ApiResult {
    let page = state
        .records
        .transactions_of_account(claims.sub, account_id, &query)
        .await?;
    let mut items = page.items;
    let next = |items: &[TransactionRecord], has_more: bool, listing| {
        items
            .last()
            .filter(|_| has_more)
            .map(|last| cursor::encode_position(listing, TransactionPosition::of(last)))
    };
    let (limit, offset, has_more, next_cursor) = match query {
        TransactionQuery::Recent { limit, offset, .. } => {
            let returned = items.len() as u64;
            let has_more = offset.saturating_add(returned) < page.total_count;
            let next_cursor = next(&items, has_more, PositionListing::AccountRecent);
            (u64::from(limit), offset, has_more, next_cursor)
        }
        TransactionQuery::RecentAfter { limit, .. } | TransactionQuery::DateRange { limit, .. } => {
            // The store reads one row past the page to tell whether more follow.
            let page_size = usize::try_from(limit).unwrap_or(usize::MAX);
            let has_more = items.len() > page_size;
            items.truncate(page_size);
            let listing = if matches!(query, TransactionQuery::DateRange { .. }) {
                PositionListing::AccountRange
            } else {
                PositionListing::AccountRecent
            };
            (
                u64::from(limit),
                0,
                has_more,
                next(&items, has_more, listing),
            )
        }
    };
    json(
        StatusCode::OK,
        &TransactionList {
            transactions: items.iter().map(transaction_json).collect(),
            total_count: page.total_count,
            limit,
            offset,
            has_more,
            next_cursor,
        },
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_listing_documents_its_cursor_and_page_bounds() {
        let document = serde_json::to_value(crate::api::openapi::document("https://x.test", None))
            .expect("document serializes");
        let listing = &document["paths"]["/api/v1/accounts/{id}/transactions"]["get"];
        let parameter = |name: &str| {
            listing["parameters"]
                .as_array()
                .expect("parameters")
                .iter()
                .find(|parameter| parameter["name"] == name)
                .cloned()
                .expect("documented")
        };
        assert_eq!(parameter("limit")["schema"]["maximum"], 500);
        let cursor = parameter("cursor");
        assert_eq!(cursor["in"], "query");
        assert_eq!(cursor["schema"]["pattern"], "^([A-Za-z0-9_-]{28})?$");
        let next_cursor =
            &document["components"]["schemas"]["TransactionList"]["properties"]["next_cursor"];
        assert_eq!(next_cursor["type"], serde_json::json!(["string", "null"]));
        assert_eq!(next_cursor["pattern"], "^[A-Za-z0-9_-]{28}$");
    }
}
