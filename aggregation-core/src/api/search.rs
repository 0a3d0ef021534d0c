//! Across the caller's accounts: the transaction search (`GET /api/v1/transactions`) and the
//! spending summary (`GET /api/v1/spending`), both heavy reads (one of the user's two slots,
//! as the net worth takes).

use std::str::FromStr as _;

use chrono::{Months, NaiveDate};
use http::StatusCode;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::cursor::{self, PositionListing};
use super::extract::{Query, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::running::HeavyRead;
use super::transactions::{TransactionJson, transaction_json};
use super::validate::{AllValid as _, ParameterSchema, Validate, query};
use super::{ApiResult, json};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, FieldError};
use crate::rate_limit::policy::API_READ;
use crate::records::search::{
    self, CurrencySpending, GroupBy, MAX_PERIODS, PeriodSpending, PeriodsError, Tally,
};
use crate::records::worth::Interval;
use crate::store::{TransactionPosition, TransactionSearch, TransactionStatus};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/transactions" => search_transactions, limited(API_READ),
        "Search the caller's transactions across accounts, newest first", [200: SearchList<'static>]),
    route!(GET "/api/v1/spending" => spending, limited(API_READ),
        "The caller's money out per period and group, and income, per currency", [200: SpendingJson]),
];

/// Page size bounds and default of the search.
const MAX_LIMIT: i64 = 100;
const DEFAULT_LIMIT: u32 = 50;
/// The longest `q`, in characters.
const MAX_QUERY_CHARS: usize = 256;
/// The most distinct words of `q`.
const MAX_WORDS: usize = 16;
/// The longest `category` and `merchant`, in characters.
const MAX_FILTER_CHARS: usize = 200;

/// The words of a search text: runs of letters and digits (anything else separates them),
/// lower-cased, each once, in order. The full-text indexes split stored text the same way.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    words
}

/// The query of the search: words, filters and the page.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct SearchQuery {
    /// Words that must all occur in the description, merchant name or notes (whole words, any
    /// case; punctuation separates words and is otherwise ignored, so no query syntax).
    #[param(value_type = Option<String>, max_length = 256)]
    q: Option<String>,
    /// Only this account's rows.
    #[param(schema_with = crate::api::openapi::schemas::uuid)]
    account_id: Option<String>,
    /// Only rows of this category id (as `GET /api/v1/categories` lists them).
    #[param(value_type = Option<String>, max_length = 200)]
    category: Option<String>,
    /// Only rows whose merchant name is this one (any case).
    #[param(value_type = Option<String>, max_length = 200)]
    merchant: Option<String>,
    /// Only rows in this state.
    #[param(value_type = Option<TransactionStatus>, inline)]
    status: Option<String>,
    /// Only rows whose signed amount (negative: money out) is at least this.
    #[param(value_type = Option<String>, pattern = r"^-?[0-9]{1,20}(\.[0-9]{1,8})?$", example = "-50.00")]
    min_amount: Option<String>,
    /// Only rows whose signed amount is at most this.
    #[param(value_type = Option<String>, pattern = r"^-?[0-9]{1,20}(\.[0-9]{1,8})?$", example = "-5.00")]
    max_amount: Option<String>,
    /// First date, inclusive.
    #[param(schema_with = crate::api::openapi::schemas::date)]
    start_date: Option<String>,
    /// Last date, inclusive.
    #[param(schema_with = crate::api::openapi::schemas::date)]
    end_date: Option<String>,
    /// Page size, 1 to 100 (default 50).
    #[param(value_type = Option<i64>)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (same query): the page after it (empty is the
    /// first page).
    #[param(value_type = Option<String>, pattern = "^([A-Za-z0-9_-]{28})?$",
        example = "UQALIzYBmxN0WHd0hGYwABEiM0RV")]
    cursor: Option<String>,
}

/// An optional text filter of at most `max` characters, trimmed; `None` when absent or blank.
fn text_filter(name: &str, raw: Option<String>, max: usize) -> Result<Option<String>, FieldError> {
    match query::string(raw) {
        Some(value) if value.chars().count() > max => Err(query::error(
            name,
            "too_long",
            format!("Must be at most {max} characters."),
        )),
        value => Ok(value),
    }
}

/// An optional amount bound: a plain decimal (`-12.50`).
fn amount(name: &str, raw: Option<String>) -> Result<Option<Decimal>, FieldError> {
    let Some(raw) = raw.map(|raw| raw.trim().to_owned()) else {
        return Ok(None);
    };
    let plain = {
        let digits = raw.strip_prefix('-').unwrap_or(&raw);
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "0"));
        (1..=20).contains(&whole.len())
            && (1..=8).contains(&fraction.len())
            && whole
                .bytes()
                .chain(fraction.bytes())
                .all(|b| b.is_ascii_digit())
    };
    match Decimal::from_str(&raw) {
        Ok(value) if plain => Ok(Some(value)),
        _ => Err(query::error(
            name,
            "invalid_decimal",
            "Must be a decimal number such as -12.50 (at most 20 digits, 8 after the point).",
        )),
    }
}

/// The search's words: at most [`MAX_QUERY_CHARS`] characters and [`MAX_WORDS`] words.
fn search_words(raw: Option<String>) -> Result<Vec<String>, FieldError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    if raw.chars().count() > MAX_QUERY_CHARS {
        return Err(query::error(
            "q",
            "too_long",
            format!("Must be at most {MAX_QUERY_CHARS} characters."),
        ));
    }
    let words = words(&raw);
    if words.len() > MAX_WORDS {
        return Err(query::error(
            "q",
            "too_many_words",
            format!("Must hold at most {MAX_WORDS} words."),
        ));
    }
    Ok(words)
}

impl Validate for SearchQuery {
    type Valid = TransactionSearch;

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] =
        &[("limit", || schemas::query_integer(1, Some(MAX_LIMIT)))];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (words, account_id, category, merchant, status, min_amount, max_amount) = (
            search_words(self.q),
            query::uuid("account_id", self.account_id),
            text_filter("category", self.category, MAX_FILTER_CHARS),
            text_filter("merchant", self.merchant, MAX_FILTER_CHARS),
            query::choice(
                "status",
                self.status,
                TransactionStatus::ALL,
                TransactionStatus::as_str,
            ),
            amount("min_amount", self.min_amount),
            amount("max_amount", self.max_amount),
        )
            .all_valid()?;
        let (start_date, end_date, limit, after) = (
            query::date("start_date", self.start_date),
            query::date("end_date", self.end_date),
            query::integer("limit", self.limit, 1, MAX_LIMIT, DEFAULT_LIMIT),
            cursor::position_parameter(PositionListing::Search, self.cursor),
        )
            .all_valid()?;
        if let (Some(start), Some(end)) = (start_date, end_date)
            && start > end
        {
            return Err(ApiError::validation(vec![query::error(
                "start_date",
                "after_end_date",
                "Must not be after end_date.",
            )]));
        }
        if let (Some(min), Some(max)) = (min_amount, max_amount)
            && min > max
        {
            return Err(ApiError::validation(vec![query::error(
                "min_amount",
                "above_max_amount",
                "Must not be above max_amount.",
            )]));
        }
        Ok(TransactionSearch {
            words,
            account_id,
            category,
            merchant,
            status,
            min_amount,
            max_amount,
            start_date,
            end_date,
            limit,
            after,
        })
    }
}

/// A page of the search.
#[derive(Serialize, utoipa::ToSchema)]
struct SearchList<'a> {
    /// The page's rows, newest first (date, then id).
    transactions: Vec<TransactionJson<'a>>,
    /// The page size applied.
    limit: u64,
    /// Whether rows follow this page.
    has_more: bool,
    /// When more rows follow: the `cursor` of the next page (same query); otherwise `null`.
    #[schema(pattern = "^[A-Za-z0-9_-]{28}$")]
    next_cursor: Option<String>,
}

/// `GET /api/v1/transactions`
///
/// The caller's transactions on active accounts matching every given condition, newest
/// first (`transaction_date`, then id), `limit` at a time; `next_cursor` names the next page.
async fn search_transactions(
    state: &App,
    User(claims): User,
    Query(search): Query<SearchQuery>,
    _slot: HeavyRead,
) -> ApiResult {
    let mut rows = state
        .records
        .search_transactions(claims.sub, &search)
        .await?;
    let page_size = usize::try_from(search.limit).unwrap_or(usize::MAX);
    let has_more = rows.len() > page_size;
    rows.truncate(page_size);
    let next_cursor = rows.last().filter(|_| has_more).map(|last| {
        cursor::encode_position(PositionListing::Search, TransactionPosition::of(last))
    });
    json(
        StatusCode::OK,
        &SearchList {
            transactions: rows.iter().map(transaction_json).collect(),
            limit: u64::from(search.limit),
            has_more,
            next_cursor,
        },
    )
}

/// `from`, `to`, `interval` and `group_by` of the spending summary.
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct SpendingQuery {
    /// The first day (`YYYY-MM-DD`); default: the day after `to` a year earlier.
    #[param(schema_with = crate::api::openapi::schemas::date)]
    from: Option<String>,
    /// The last day (`YYYY-MM-DD`); default: today (UTC).
    #[param(schema_with = crate::api::openapi::schemas::date)]
    to: Option<String>,
    /// The periods: calendar days, ISO weeks (Monday to Sunday) or calendar months (the
    /// first and last cut to the range); default `month`. At most 1,000 periods.
    #[param(value_type = Option<Interval>, inline)]
    interval: Option<String>,
    /// What money out is grouped by within a period; default `category`.
    #[param(value_type = Option<GroupBy>, inline)]
    group_by: Option<String>,
}

/// The spending summary asked for.
pub(crate) struct SpendingRequest {
    from: NaiveDate,
    to: NaiveDate,
    interval: Interval,
    group_by: GroupBy,
    periods: Vec<(NaiveDate, NaiveDate)>,
}

impl Validate for SpendingQuery {
    type Valid = SpendingRequest;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (from, to, interval, group_by) = (
            query::date("from", self.from),
            query::date("to", self.to),
            query::choice("interval", self.interval, Interval::ALL, Interval::as_str),
            query::choice("group_by", self.group_by, GroupBy::ALL, GroupBy::as_str),
        )
            .all_valid()?;
        let to = to.unwrap_or_else(|| crate::store::now().date_naive());
        let from = from.unwrap_or_else(|| {
            to.checked_sub_months(Months::new(12))
                .and_then(|year_before| year_before.succ_opt())
                .unwrap_or(to)
                .max(crate::dates::EARLIEST_DATE)
                .min(to)
        });
        let interval = interval.unwrap_or(Interval::Month);
        let periods = search::periods(from, to, interval).map_err(|error| {
            ApiError::validation(vec![match error {
                PeriodsError::AfterTo => query::error("from", "after_to", "Must not be after to."),
                PeriodsError::TooMany => query::error(
                    "from",
                    "too_many_periods",
                    format!(
                        "The range holds more than {MAX_PERIODS} periods at this interval; \
                         move from closer to to, or choose a longer interval."
                    ),
                ),
            }])
        })?;
        Ok(SpendingRequest {
            from,
            to,
            interval,
            group_by: group_by.unwrap_or(GroupBy::Category),
            periods,
        })
    }
}

/// A total and how many rows make it.
#[derive(Serialize, utoipa::ToSchema)]
struct TallyJson {
    /// The sum as a decimal string (money out counted by its size: positive).
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String, example = "123.45")]
    total: Decimal,
    /// The rows summed.
    count: u64,
}

fn tally_json(tally: Tally) -> TallyJson {
    TallyJson {
        total: tally.total,
        count: tally.count,
    }
}

/// Money out of one group in one period.
#[derive(Serialize, utoipa::ToSchema)]
struct GroupJson {
    /// The category id, merchant name or account id; `null` for rows without a category
    /// (or merchant name).
    key: Option<String>,
    /// The sum of money out (positive) as a decimal string.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String, example = "42.10")]
    total: Decimal,
    /// The rows summed.
    count: u64,
}

/// One period of a currency.
#[derive(Serialize, utoipa::ToSchema)]
struct PeriodJson {
    /// The period's first day within the range.
    start: NaiveDate,
    /// The period's last day within the range.
    end: NaiveDate,
    /// Money out, all groups together.
    spending: TallyJson,
    /// Money in.
    income: TallyJson,
    /// Money out per group, largest first (ties by key, `null` last).
    groups: Vec<GroupJson>,
}

/// One currency's spending.
#[derive(Serialize, utoipa::ToSchema)]
struct CurrencySpendingJson {
    /// ISO 4217 code.
    currency: String,
    /// Money out over the whole range.
    spending: TallyJson,
    /// Money in over the whole range.
    income: TallyJson,
    /// Every period of the range, oldest first (empty ones included).
    periods: Vec<PeriodJson>,
}

/// `GET /api/v1/spending`
#[derive(Serialize, utoipa::ToSchema)]
struct SpendingJson {
    /// The first day summed.
    from: NaiveDate,
    /// The last day summed.
    to: NaiveDate,
    /// The periods' length.
    #[schema(value_type = Interval)]
    interval: &'static str,
    /// What money out is grouped by.
    #[schema(value_type = GroupBy)]
    group_by: &'static str,
    /// One entry per currency with rows in the range, by code; no conversion between them.
    currencies: Vec<CurrencySpendingJson>,
}

fn period_json(period: PeriodSpending) -> PeriodJson {
    PeriodJson {
        start: period.start,
        end: period.end,
        spending: tally_json(period.spending),
        income: tally_json(period.income),
        groups: period
            .groups
            .into_iter()
            .map(|(key, tally)| GroupJson {
                key,
                total: tally.total,
                count: tally.count,
            })
            .collect(),
    }
}

fn currency_json(currency: CurrencySpending) -> CurrencySpendingJson {
    CurrencySpendingJson {
        currency: currency.currency,
        spending: tally_json(currency.spending),
        income: tally_json(currency.income),
        periods: currency.periods.into_iter().map(period_json).collect(),
    }
}

/// `GET /api/v1/spending`
///
/// Per currency and period: money out (positive totals) per group, and income apart, over
/// the caller's active accounts; transfer legs, failed and cancelled rows left out.
async fn spending(
    state: &App,
    User(claims): User,
    Query(request): Query<SpendingQuery>,
    _slot: HeavyRead,
) -> ApiResult {
    let currencies = state
        .records
        .spending(claims.sub, &request.periods, request.group_by)
        .await?;
    json(
        StatusCode::OK,
        &SpendingJson {
            from: request.from,
            to: request.to,
            interval: request.interval.as_str(),
            group_by: request.group_by.as_str(),
            currencies: currencies.into_iter().map(currency_json).collect(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_letters_and_digits_lower_cased_once() {
        assert_eq!(
            words("SQ *BLUE Bottle-coffee"),
            ["sq", "blue", "bottle", "coffee"]
        );
        assert_eq!(
            words("\"coffee\" NEAR(a b) -x *"),
            ["coffee", "near", "a", "b", "x"]
        );
        assert_eq!(words("Café café 42"), ["café", "42"]);
        assert!(words("\" * - ^ : ( )").is_empty());
    }

    #[test]
    fn amounts_are_plain_decimals() {
        assert_eq!(
            amount("min_amount", Some("-12.50".to_owned())).ok(),
            Some(Some(Decimal::new(-1250, 2)))
        );
        assert_eq!(
            amount("min_amount", Some("3".to_owned())).ok(),
            Some(Some(Decimal::new(3, 0)))
        );
        for bad in [
            "",
            "1e5",
            "1.",
            ".5",
            "--1",
            "NaN",
            "12.123456789",
            "1,5",
            "9".repeat(21).as_str(),
        ] {
            assert!(amount("min_amount", Some(bad.to_owned())).is_err(), "{bad}");
        }
    }
}
