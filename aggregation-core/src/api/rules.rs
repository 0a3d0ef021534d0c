//! Transaction rules: `POST /api/v1/rules` creates one of the caller's, `GET /api/v1/rules`
//! lists them in the order they run, `GET/PATCH/DELETE /api/v1/rules/{id}` read, change and
//! delete one (another user's is 404). `POST /api/v1/rules/preview` runs a rule body over the
//! caller's transactions without saving anything; `POST /api/v1/rules/{id}/apply` applies a
//! saved rule to them (fields the caller set untouched). Both are heavy reads (one of the
//! caller's two slots, as the search and the export take).
//!
//! Fields, ops, the case rules and the bounds are [`crate::enrich::rules`]'s: at most
//! [`MAX_RULES`](crate::records::rules::MAX_RULES) rules a user, 20 conditions and 3 actions a rule.

use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use uuid::Uuid;

use super::extract::{Json, PathId, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::running::HeavyRead;
use super::validate::{AllValid as _, Field, Validate, body};
use super::{ApiResult, json, no_content};
use crate::app::App;
use crate::config::Config;
use crate::enrich::rules::{
    self as engine, ActionSpec, ConditionSpec, RuleError as Invalid, RuleFields,
};
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::records::rules::{RuleDraft, RuleEntry, RuleError, RulePatch};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/rules" => list, limited(API_READ),
        "List the caller's rules in the order they run (priority, then id)",
        [200: RuleList]),
    route!(POST "/api/v1/rules" => create, limited(API_WRITE),
        "Create a rule: conditions that must all hold, and actions that set a new or changed row's category, merchant name or notes at every sync and import",
        [201: RuleJson; CommandValidationFailed]),
    route!(POST "/api/v1/rules/preview" => preview, limited(API_READ),
        "Run a rule body over the caller's transactions, saving nothing: how many it would change and the first 50 before and after",
        [200: PreviewJson]),
    route!(GET "/api/v1/rules/{id}" => get, limited(API_READ),
        "Read one of the caller's rules", [200: RuleJson]),
    route!(PATCH "/api/v1/rules/{id}" => update, limited(API_WRITE),
        "Change one of the caller's rules; the fields sent replace the stored ones",
        [200: RuleJson]),
    route!(DELETE "/api/v1/rules/{id}" => delete, limited(API_WRITE),
        "Delete one of the caller's rules (what it set stays)", [204]),
    route!(POST "/api/v1/rules/{id}/apply" => apply, limited(API_WRITE),
        "Apply one of the caller's rules to their existing transactions (fields the caller set untouched), in one database transaction",
        [200: AppliedJson]),
];

/// The longest rule name, in characters.
const MAX_NAME_CHARS: usize = 100;
/// The bounds of a priority.
const MIN_PRIORITY: i64 = -1_000_000;
const MAX_PRIORITY: i64 = 1_000_000;

impl From<Invalid> for FieldError {
    fn from(error: Invalid) -> Self {
        FieldError::new(error.field, error.code, error.message)
    }
}

impl From<RuleError> for ApiError {
    fn from(error: RuleError) -> Self {
        let detail = error.to_string();
        match error {
            RuleError::NotFound => ApiError::new(ErrorCode::NotFound, detail),
            RuleError::TooMany => ApiError::new(ErrorCode::CommandValidationFailed, detail),
            RuleError::Invalid(invalid) => ApiError::validation(vec![invalid.into()]),
            RuleError::Store(store) => store.into(),
        }
    }
}

/// A condition: the row's `field`, the `op` and the `value` it is compared with. Its
/// schema ([`condition_schema`]) states which ops and which value each field takes.
#[derive(Serialize, Deserialize)]
pub(crate) struct ConditionJson {
    field: String,
    op: String,
    value: Value,
}

impl utoipa::PartialSchema for ConditionJson {
    fn schema() -> RefOr<Schema> {
        condition_schema().into()
    }
}

impl utoipa::ToSchema for ConditionJson {}

/// The fields compared as text: any case, the value a literal (or a pattern for `regex`).
const TEXT_FIELDS: [&str; 5] = [
    "description",
    "merchant_name",
    "currency",
    "category",
    "merchant_code",
];

/// One of a condition's shapes: `field` one of `fields`, `op` one of `ops`, and `value`.
fn condition_shape(
    fields: &[&str],
    ops: &[&str],
    value: impl Into<RefOr<Schema>>,
    description: &str,
) -> ObjectBuilder {
    let names = |names: &[&str]| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(names.iter().copied()))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .property("field", names(fields))
        .property("op", names(ops))
        .property("value", value)
        .required("field")
        .required("op")
        .required("value")
}

/// A decimal bound of an amount condition: a JSON number or its text (`-12.50`).
fn decimal_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Number, Type::String]))
        .description(Some("A decimal: a number, or text such as `-12.50`."))
}

/// The shapes a condition takes, one per kind of field. The server checks more than a
/// schema states: a `regex` must compile (at most 256 KiB), `between`'s low bound must not be
/// above its high one, and a decimal's text must read as one.
fn condition_schema() -> OneOfBuilder {
    use crate::enrich::rules::MAX_PATTERN_CHARS;
    OneOfBuilder::new()
        .description(Some(
            "A condition: the row's `field`, the `op`, and the `value` compared with.",
        ))
        .examples([json!({"field": "description", "op": "contains", "value": "blue bottle"})])
        .item(condition_shape(
            &TEXT_FIELDS,
            &["contains", "equals", "starts_with", "regex"],
            schemas::text(1, MAX_PATTERN_CHARS, false),
            "A text field, compared in any case; `regex` takes a pattern (the regex crate's \
             syntax, linear time) whose compiled form stays within 256 KiB.",
        ))
        .item(condition_shape(
            &["amount"],
            &["equals", "gt", "lt"],
            decimal_schema(),
            "The signed amount (negative is money out) against a decimal.",
        ))
        .item(condition_shape(
            &["amount"],
            &["between"],
            ArrayBuilder::new()
                .items(decimal_schema())
                .min_items(Some(2))
                .max_items(Some(2)),
            "The signed amount within `[low, high]`, both inclusive, low not above high.",
        ))
        .item(condition_shape(
            &["account_id"],
            &["equals"],
            ObjectBuilder::new().schema_type(Type::String),
            "The row's account: an account id.",
        ))
}

/// An action: an object of exactly one of these keys.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"set_category": "FOOD_AND_DRINK_COFFEE"}))]
pub(crate) struct ActionJson {
    /// A category id from `GET /api/v1/categories` (a taxonomy detailed id or one of the
    /// caller's `custom:<uuid>`); the row's `category_source` becomes `rule`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 64)]
    set_category: Option<String>,
    /// A merchant name, 1 to 200 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 200)]
    set_merchant_name: Option<String>,
    /// Notes, at most 2,000 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    set_notes: Option<String>,
}

impl ActionJson {
    fn of(action: &ActionSpec) -> Self {
        let mut json = Self {
            set_category: None,
            set_merchant_name: None,
            set_notes: None,
        };
        match action {
            ActionSpec::SetCategory(value) => json.set_category = Some(value.clone()),
            ActionSpec::SetMerchantName(value) => json.set_merchant_name = Some(value.clone()),
            ActionSpec::SetNotes(value) => json.set_notes = Some(value.clone()),
        }
        json
    }
}

/// A rule as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0192f3a4-3333-7d8e-9f00-112233445566", "name": "Coffee", "conditions": [{"field": "description", "op": "contains", "value": "coffee"}], "actions": [{"set_category": "FOOD_AND_DRINK_COFFEE"}], "priority": 0, "stop_processing": false, "created_at": "2026-03-02T10:00:00Z", "updated_at": "2026-03-02T10:00:00Z"}))]
pub(crate) struct RuleJson {
    id: Uuid,
    /// Its name.
    name: String,
    /// Every one must hold.
    conditions: Vec<ConditionJson>,
    /// What a matching row gets.
    actions: Vec<ActionJson>,
    /// Rules run lowest first, then by id.
    priority: i32,
    /// Whether a match ends the run for the row.
    stop_processing: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(crate) fn rule_json(entry: &RuleEntry) -> RuleJson {
    RuleJson {
        id: entry.id,
        name: entry.draft.name.clone(),
        conditions: entry
            .draft
            .conditions
            .iter()
            .map(|spec| ConditionJson {
                field: spec.field.clone(),
                op: spec.op.clone(),
                value: spec.value.clone(),
            })
            .collect(),
        actions: entry.draft.actions.iter().map(ActionJson::of).collect(),
        priority: entry.draft.priority,
        stop_processing: entry.draft.stop_processing,
        created_at: entry.created_at,
        updated_at: entry.updated_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct RuleList {
    rules: Vec<RuleJson>,
}

/// A row's category, merchant name and notes.
#[derive(Serialize, utoipa::ToSchema)]
struct FieldsJson {
    category: Option<String>,
    merchant_name: Option<String>,
    notes: Option<String>,
}

impl From<RuleFields> for FieldsJson {
    fn from(fields: RuleFields) -> Self {
        Self {
            category: fields.category,
            merchant_name: fields.merchant_name,
            notes: fields.notes,
        }
    }
}

/// One row a preview would change.
#[derive(Serialize, utoipa::ToSchema)]
struct ChangeJson {
    /// The transaction.
    id: Uuid,
    before: FieldsJson,
    after: FieldsJson,
}

/// What a rule would change.
#[derive(Serialize, utoipa::ToSchema)]
struct PreviewJson {
    /// How many of the caller's transactions it would change.
    count: u64,
    /// The first 50 of them (by account, date and id).
    transactions: Vec<ChangeJson>,
}

/// What an application changed.
#[derive(Serialize, utoipa::ToSchema)]
struct AppliedJson {
    /// How many transactions changed.
    changed: u64,
}

/// `{name, conditions, actions, priority?, stop_processing?}` of a new rule (or a preview).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct RuleBody {
    /// Its name: 1 to 100 characters, not only spaces.
    #[schema(required = true, schema_with = name_schema)]
    name: Field,
    /// 1 to 20 conditions; every one must hold.
    #[schema(required = true, value_type = Vec<ConditionJson>, min_items = 1, max_items = 20)]
    conditions: Field,
    /// 1 to 3 actions, each kind at most once.
    #[schema(required = true, value_type = Vec<ActionJson>, min_items = 1, max_items = 3)]
    actions: Field,
    /// Rules run lowest first (then by id): -1,000,000 to 1,000,000, default 0.
    #[schema(value_type = Option<i32>, minimum = -1000000, maximum = 1000000)]
    priority: Field,
    /// Whether a match ends the run for the row (default false).
    #[schema(value_type = Option<bool>)]
    stop_processing: Field,
}

/// The fields of a rule to change; those left out keep their value.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct RulePatchBody {
    /// A new name.
    #[schema(schema_with = name_schema)]
    name: Field,
    /// New conditions (all of them).
    #[schema(required = false, value_type = Vec<ConditionJson>, min_items = 1, max_items = 20)]
    conditions: Field,
    /// New actions (all of them).
    #[schema(required = false, value_type = Vec<ActionJson>, min_items = 1, max_items = 3)]
    actions: Field,
    /// A new priority.
    #[schema(required = false, value_type = i32, minimum = -1000000, maximum = 1000000)]
    priority: Field,
    /// A new stop flag.
    #[schema(required = false, value_type = bool)]
    stop_processing: Field,
}

fn name_schema() -> ObjectBuilder {
    schemas::with_example(
        schemas::text(1, MAX_NAME_CHARS, false).pattern(Some(r"\S")),
        "Coffee shops",
    )
}

fn name(field: Field) -> Result<String, FieldError> {
    let name = body::string("name", field, 1, MAX_NAME_CHARS)?;
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Err(FieldError::new("name", "blank", "Must not be only spaces."));
    }
    Ok(trimmed.to_owned())
}

fn required(name: &str) -> FieldError {
    FieldError::new(name, "required", "This field is required.")
}

fn conditions(field: Field) -> Result<Vec<ConditionSpec>, FieldError> {
    match field {
        Field::Value(value) => Ok(engine::condition_specs(&value)?),
        Field::Absent | Field::Null => Err(required("conditions")),
    }
}

fn actions(field: Field) -> Result<Vec<ActionSpec>, FieldError> {
    match field {
        Field::Value(value) => Ok(engine::action_specs(&value)?),
        Field::Absent | Field::Null => Err(required("actions")),
    }
}

fn priority(field: Field) -> Result<i32, FieldError> {
    match field {
        Field::Absent | Field::Null => Ok(0),
        Field::Value(Value::Number(number)) => number
            .as_i64()
            .filter(|value| (MIN_PRIORITY..=MAX_PRIORITY).contains(value))
            .and_then(|value| i32::try_from(value).ok())
            .ok_or_else(|| {
                FieldError::new(
                    "priority",
                    "out_of_range",
                    format!("Must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}."),
                )
            }),
        Field::Value(_) => Err(FieldError::new(
            "priority",
            "invalid_type",
            "Must be a whole number.",
        )),
    }
}

/// A field a `PATCH` may leave out (`None`) but not send as `null`.
fn present<T>(
    name: &str,
    field: Field,
    rule: impl FnOnce(Field) -> Result<T, FieldError>,
) -> Result<Option<T>, FieldError> {
    match field {
        Field::Absent => Ok(None),
        Field::Null => Err(FieldError::new(name, "invalid_type", "Must not be null.")),
        value => rule(value).map(Some),
    }
}

impl Validate for RuleBody {
    type Valid = RuleDraft;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (name, conditions, actions, priority, stop_processing) = (
            name(self.name),
            conditions(self.conditions),
            actions(self.actions),
            priority(self.priority),
            body::flag("stop_processing", self.stop_processing, false),
        )
            .all_valid()?;
        Ok(RuleDraft {
            name,
            conditions,
            actions,
            priority,
            stop_processing,
        })
    }
}

impl Validate for RulePatchBody {
    type Valid = RulePatch;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (name, conditions, actions, priority, stop_processing) = (
            present("name", self.name, name),
            present("conditions", self.conditions, conditions),
            present("actions", self.actions, actions),
            present("priority", self.priority, priority),
            present("stop_processing", self.stop_processing, |field| {
                body::flag("stop_processing", field, false)
            }),
        )
            .all_valid()?;
        Ok(RulePatch {
            name,
            conditions,
            actions,
            priority,
            stop_processing,
        })
    }
}

/// `GET /api/v1/rules`
async fn list(state: &App, User(claims): User) -> ApiResult {
    let rules = state.records.rules(claims.sub).await?;
    json(
        StatusCode::OK,
        &RuleList {
            rules: rules.iter().map(rule_json).collect(),
        },
    )
}

/// `POST /api/v1/rules`
async fn create(state: &App, User(claims): User, Json(draft): Json<RuleBody>) -> ApiResult {
    let created = state.records.create_rule(claims.sub, draft).await?;
    json(StatusCode::CREATED, &rule_json(&created))
}

/// `GET /api/v1/rules/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let rule = state.records.rule(claims.sub, id).await?;
    json(StatusCode::OK, &rule_json(&rule))
}

/// `PATCH /api/v1/rules/{id}`
async fn update(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    Json(patch): Json<RulePatchBody>,
) -> ApiResult {
    let rule = state.records.update_rule(claims.sub, id, patch).await?;
    json(StatusCode::OK, &rule_json(&rule))
}

/// `DELETE /api/v1/rules/{id}`
async fn delete(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    state.records.delete_rule(claims.sub, id).await?;
    no_content()
}

/// `POST /api/v1/rules/preview`
async fn preview(
    state: &App,
    User(claims): User,
    _slot: HeavyRead,
    Json(draft): Json<RuleBody>,
) -> ApiResult {
    let preview = state.records.preview_rule(claims.sub, &draft).await?;
    json(
        StatusCode::OK,
        &PreviewJson {
            count: preview.count,
            transactions: preview
                .changes
                .into_iter()
                .map(|change| ChangeJson {
                    id: change.id,
                    before: change.before.into(),
                    after: change.after.into(),
                })
                .collect(),
        },
    )
}

/// `POST /api/v1/rules/{id}/apply`
async fn apply(state: &App, User(claims): User, PathId(id): PathId, _slot: HeavyRead) -> ApiResult {
    let changed = state.records.apply_rule(claims.sub, id).await?;
    json(StatusCode::OK, &AppliedJson { changed })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::sync::Arc;

    use http::{Method, Request};
    use tower::ServiceExt as _;

    use crate::api::extract::{Caller, buffered_body};
    use crate::api::router::{ApiState, Dispatch, RouterLayer};
    use crate::app::App;
    use crate::auth::AccessClaims;
    use crate::config::Config;
    use crate::problem::ErrorCode;

    /// The body is read before the slot is asked for, so no request held half-sent can keep a
    /// slot: the caller's slots are taken here, as two running heavy reads would hold them.
    #[tokio::test]
    async fn preview_and_apply_are_429_while_the_callers_heavy_reads_run() {
        let config = Config::new("http://localhost:8080", vec![7; 32]).expect("config");
        let app = App::for_tests(config).await;
        let user = uuid::Uuid::now_v7();
        let mut held = Vec::new();
        while let Ok(slot) = app.heavy_reads.try_acquire(user) {
            held.push(slot);
        }
        assert!(!held.is_empty(), "the caller has heavy-read slots");
        let service = tower::ServiceBuilder::new()
            .layer(RouterLayer::new())
            .service(Dispatch::new(Arc::clone(&app), ApiState::default()));
        let send = |path: String, caller: uuid::Uuid| {
            let mut request = Request::builder()
                .method(Method::POST)
                .uri(path)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(buffered_body(bytes::Bytes::from_static(
                    br#"{"name": "Coffee", "conditions": [{"field": "description", "op": "contains", "value": "coffee"}], "actions": [{"set_notes": "coffee"}]}"#,
                )))
                .expect("request");
            request
                .extensions_mut()
                .insert(Caller::Authenticated(Arc::new(AccessClaims::for_tests(
                    caller,
                    uuid::Uuid::nil(),
                ))));
            service.clone().oneshot(request)
        };
        let rule = uuid::Uuid::now_v7();
        for path in [
            "/api/v1/rules/preview".to_owned(),
            format!("/api/v1/rules/{rule}/apply"),
        ] {
            let error = send(path.clone(), user).await.expect_err("429");
            assert_eq!(error.code(), ErrorCode::RateLimitExceeded, "{path}");
            assert!(error.detail().contains("running already"), "{path}");
        }
        // Another user's preview runs; once the caller's reads end, theirs does too.
        let other = send("/api/v1/rules/preview".to_owned(), uuid::Uuid::now_v7()).await;
        assert!(other.is_ok(), "{:?}", other.err().map(|e| e.code()));
        drop(held);
        let answered = send("/api/v1/rules/preview".to_owned(), user).await;
        assert!(answered.is_ok(), "{:?}", answered.err().map(|e| e.code()));
    }
}
