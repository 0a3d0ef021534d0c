//! Webhook endpoints: register, list, delete, rotate the secret, and list deliveries.
//!
//! Choices where the issue is silent: a user has at most 10 endpoints (the 11th registration
//! is 409 `conflict`); `event_types` absent, null or empty means every type, names are
//! deduplicated, and an unknown name is 422 naming `event_types[i]`. The URL is at most 2048
//! characters, absolute `http`/`https` without credentials, fragment or backslashes, judged
//! as WHATWG parsing reads it; a loopback, private or otherwise non-public address in any
//! spelling (`2130706433`, `0x7f.1`, `[::ffff:127.0.0.1]`...), or a `localhost` name, is 422
//! `private_address` unless the server allows private addresses, and a cloud metadata address
//! or an unspecified, multicast or broadcast one is 422 `private_address` even then. Secrets
//! are returned only by the registration and the rotation (201); a rotation takes effect at
//! once, for retries of earlier events too, and the replaced secret signs beside the new one
//! for 24 h. Deliveries list the 50 newest, newest first, each with its attempts. An endpoint
//! that failed every attempt for 24 h is disabled (`enabled: false`, `disabled_at`); `PATCH`
//! with exactly `{"enabled": true}` enables it again (anything else is 422 naming `enabled`:
//! the service disables, the owner only enables), and enabling an enabled endpoint is a 200
//! that changes nothing.

use chrono::{DateTime, Utc};
use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::ObjectBuilder;
use uuid::Uuid;

use super::extract::{Json, PathId, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Field, Validate, body};
use super::{ApiResult, json, no_content};
use crate::app::App;
use crate::config::Config;
use crate::events::EventType;
use crate::outbound::ssrf::{MAX_URL_CHARS, check_url};
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::rate_limit::policy::{API_READ, API_WRITE};
use crate::store::{
    DeliveryStatus, WebhookAttemptRecord, WebhookDeliveryRecord, WebhookEndpointRecord,
};
use crate::webhooks::{WebhookError, WithSecret};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/webhooks" => list, limited(API_READ),
        "List the caller's webhook endpoints", [200: WebhookList<'static>]),
    route!(POST "/api/v1/webhooks" => register, limited(API_WRITE),
        "Register a webhook endpoint; the answer carries its signing secret, shown once",
        [201: WebhookWithSecretJson<'static>; Conflict, CommandExecutionFailed]),
    route!(GET "/api/v1/webhooks/{id}" => get, limited(API_READ),
        "Read one of the caller's webhook endpoints", [200: WebhookJson<'static>]),
    route!(PATCH "/api/v1/webhooks/{id}" => update, limited(API_WRITE),
        "Enable a webhook endpoint again after it was disabled for failing; `{\"enabled\": true}` is the only change",
        [200: WebhookJson<'static>]),
    route!(DELETE "/api/v1/webhooks/{id}" => delete, limited(API_WRITE),
        "Delete a webhook endpoint; nothing more is sent to it", [204]),
    route!(POST "/api/v1/webhooks/{id}/secret-rotations" => rotate_secret, limited(API_WRITE),
        "Replace a webhook endpoint's signing secret; the answer carries the new one, shown once",
        [201: SecretRotationJson; CommandExecutionFailed]),
    route!(GET "/api/v1/webhooks/{id}/deliveries" => deliveries, limited(API_READ),
        "List the newest deliveries of a webhook endpoint with their attempts",
        [200: DeliveryList]),
];

/// Most names `event_types` may list (the known types, each once, fit several times over).
const MAX_EVENT_TYPE_NAMES: usize = 32;

/// `{url, event_types?}` of a registration.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct WebhookRegistrationBody {
    #[schema(required = true, schema_with = url_schema)]
    url: Field,
    #[schema(value_type = Option<Vec<crate::events::EventType>>)]
    event_types: Field,
}

fn url_schema() -> ObjectBuilder {
    schemas::with_example(
        schemas::text(1, MAX_URL_CHARS, false),
        "https://hooks.example.com/aggregation",
    )
}

/// What a registration asks for.
pub(crate) struct Register {
    url: String,
    event_types: Vec<String>,
}

/// The event type names of a registration: known names, each once, in the order sent.
fn event_types(field: Field) -> Result<Vec<String>, FieldError> {
    let items = match field {
        Field::Absent | Field::Null => return Ok(Vec::new()),
        Field::Value(Value::Array(items)) if items.len() <= MAX_EVENT_TYPE_NAMES => items,
        Field::Value(Value::Array(_)) => {
            return Err(FieldError::new(
                "event_types",
                "too_long",
                format!("Must list at most {MAX_EVENT_TYPE_NAMES} event types."),
            ));
        }
        Field::Value(_) => {
            return Err(FieldError::new(
                "event_types",
                "invalid_type",
                "Must be an array of event type names.",
            ));
        }
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let known = item.as_str().and_then(EventType::parse);
        let Some(event_type) = known else {
            let known_names: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            return Err(FieldError::new(
                format!("event_types[{index}]"),
                "unknown_event_type",
                format!("Must be one of: {}.", known_names.join(", ")),
            ));
        };
        let name = event_type.as_str().to_owned();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// A webhook URL: a string of at most [`MAX_URL_CHARS`] that passes the SSRF rule.
fn webhook_url(field: Field, config: &Config) -> Result<String, FieldError> {
    let url = body::string("url", field, 1, MAX_URL_CHARS)?;
    check_url(&url, config.webhook_allow_private())
        .map_err(|refusal| FieldError::new("url", refusal.code, refusal.message))?;
    Ok(url)
}

impl Validate for WebhookRegistrationBody {
    type Valid = Register;

    fn validate(self, config: &Config) -> Result<Self::Valid, ApiError> {
        let (url, event_types) =
            (webhook_url(self.url, config), event_types(self.event_types)).all_valid()?;
        Ok(Register { url, event_types })
    }
}

/// `{enabled}` of a PATCH.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct WebhookUpdateBody {
    /// Must be `true`: enables the endpoint again.
    #[schema(required = true, schema_with = crate::api::openapi::schemas::only_true)]
    enabled: Field,
}

/// What a PATCH asks for: enabling (the only change there is).
pub(crate) struct Enable;

impl Validate for WebhookUpdateBody {
    type Valid = Enable;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let enabled = match self.enabled {
            Field::Value(Value::Bool(true)) => Ok(Enable),
            Field::Absent | Field::Null => Err(FieldError::new(
                "enabled",
                "required",
                "This field is required.",
            )),
            Field::Value(Value::Bool(false)) => Err(FieldError::new(
                "enabled",
                "invalid_value",
                "Only true is accepted: endpoints are disabled by the service when they keep \
                 failing; delete one to stop its deliveries.",
            )),
            Field::Value(_) => Err(FieldError::new("enabled", "invalid_type", "Must be true.")),
        };
        enabled.all_valid()
    }
}

impl From<WebhookError> for ApiError {
    fn from(error: WebhookError) -> Self {
        let detail = error.to_string();
        match error {
            WebhookError::NotFound => ApiError::new(ErrorCode::NotFound, detail),
            WebhookError::TooMany => ApiError::new(ErrorCode::Conflict, detail),
            WebhookError::Crypto(crypto) => {
                tracing::error!(error = %crypto, "webhook secret encryption failed");
                ApiError::new(
                    ErrorCode::CommandExecutionFailed,
                    "The webhook secret could not be encrypted.",
                )
            }
            WebhookError::Store(store) => store.into(),
        }
    }
}

/// An endpoint as the API shows it (never its secret).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct WebhookJson<'a> {
    id: Uuid,
    url: &'a str,
    /// The event types it receives; empty for every type.
    event_types: &'a [String],
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// False once disabled for failing every attempt for 24 h: nothing is sent to it until
    /// `PATCH` enables it.
    enabled: bool,
    /// When it was disabled; null while enabled.
    disabled_at: Option<DateTime<Utc>>,
    /// Until when the secret replaced by the last rotation still signs beside the current
    /// one; null when no replaced secret signs.
    previous_secret_expires_at: Option<DateTime<Utc>>,
}

pub(crate) fn webhook_json(endpoint: &WebhookEndpointRecord) -> WebhookJson<'_> {
    WebhookJson {
        id: endpoint.id,
        url: &endpoint.url,
        event_types: &endpoint.event_types,
        created_at: endpoint.created_at,
        updated_at: endpoint.updated_at,
        enabled: endpoint.disabled_at.is_none(),
        disabled_at: endpoint.disabled_at,
        previous_secret_expires_at: endpoint
            .previous_secret_expires_at
            .filter(|until| *until > crate::store::now()),
    }
}

/// A registered endpoint with its signing secret (shown only in this answer).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct WebhookWithSecretJson<'a> {
    id: Uuid,
    url: &'a str,
    event_types: &'a [String],
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    /// Always true for a new endpoint.
    enabled: bool,
    /// `whsec_` and the base64 key: the Standard Webhooks secret.
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    secret: &'a str,
}

#[derive(Serialize, utoipa::ToSchema)]
struct WebhookList<'a> {
    webhooks: Vec<WebhookJson<'a>>,
    total_count: usize,
}

/// A new secret (shown only in this answer).
#[derive(Serialize, utoipa::ToSchema)]
struct SecretRotationJson {
    webhook_id: Uuid,
    secret: String,
    rotated_at: DateTime<Utc>,
    /// Until when the replaced secret signs beside the new one (both signatures in
    /// `webhook-signature`).
    previous_secret_expires_at: Option<DateTime<Utc>>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct AttemptJson {
    /// 1 for the first attempt.
    attempt: i32,
    attempted_at: DateTime<Utc>,
    /// The receiver's status code; null when no answer came.
    status_code: Option<i32>,
    /// Why the attempt did not deliver: `connect_failed` (no connection: the name did not
    /// resolve, the address may not be reached, refused, TLS failed), `timeout`,
    /// `request_failed` (the exchange broke off), `http_status` (a status other than 2xx,
    /// in `status_code`) or `internal_error`; null when delivered.
    error: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct DeliveryJson {
    /// The event, also the `webhook-id` of every attempt.
    event_id: Uuid,
    event_type: String,
    #[schema(value_type = DeliveryStatus)]
    status: &'static str,
    attempt_count: i32,
    created_at: DateTime<Utc>,
    next_attempt_at: Option<DateTime<Utc>>,
    delivered_at: Option<DateTime<Utc>>,
    attempts: Vec<AttemptJson>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct DeliveryList {
    deliveries: Vec<DeliveryJson>,
}

fn attempt_json(attempt: WebhookAttemptRecord) -> AttemptJson {
    AttemptJson {
        attempt: attempt.attempt,
        attempted_at: attempt.attempted_at,
        status_code: attempt.status_code,
        error: attempt.error,
    }
}

fn delivery_json(delivery: WebhookDeliveryRecord) -> DeliveryJson {
    DeliveryJson {
        event_id: delivery.event_id,
        event_type: delivery.event_type,
        status: delivery.status.as_str(),
        attempt_count: delivery.attempt_count,
        created_at: delivery.created_at,
        next_attempt_at: delivery.next_attempt_at,
        delivered_at: delivery.delivered_at,
        attempts: delivery.attempts.into_iter().map(attempt_json).collect(),
    }
}

/// `GET /api/v1/webhooks`
async fn list(state: &App, User(claims): User) -> ApiResult {
    let endpoints = state.webhooks.list(claims.sub).await?;
    json(
        StatusCode::OK,
        &WebhookList {
            total_count: endpoints.len(),
            webhooks: endpoints.iter().map(webhook_json).collect(),
        },
    )
}

/// `POST /api/v1/webhooks`
async fn register(
    state: &App,
    User(claims): User,
    Json(Register { url, event_types }): Json<WebhookRegistrationBody>,
) -> ApiResult {
    let WithSecret { endpoint, secret } = state
        .webhooks
        .register(claims.sub, url, event_types)
        .await?;
    json(
        StatusCode::CREATED,
        &WebhookWithSecretJson {
            id: endpoint.id,
            url: &endpoint.url,
            event_types: &endpoint.event_types,
            created_at: endpoint.created_at,
            updated_at: endpoint.updated_at,
            enabled: endpoint.disabled_at.is_none(),
            secret: &secret,
        },
    )
}

/// `GET /api/v1/webhooks/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let endpoint = state.webhooks.get(claims.sub, id).await?;
    json(StatusCode::OK, &webhook_json(&endpoint))
}

/// `PATCH /api/v1/webhooks/{id}`
async fn update(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    Json(Enable): Json<WebhookUpdateBody>,
) -> ApiResult {
    let endpoint = state.webhooks.enable(claims.sub, id).await?;
    json(StatusCode::OK, &webhook_json(&endpoint))
}

/// `DELETE /api/v1/webhooks/{id}`
async fn delete(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    state.webhooks.delete(claims.sub, id).await?;
    no_content()
}

/// `POST /api/v1/webhooks/{id}/secret-rotations`
async fn rotate_secret(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let (rotated, rotated_at) = state.webhooks.rotate_secret(claims.sub, id).await?;
    json(
        StatusCode::CREATED,
        &SecretRotationJson {
            webhook_id: rotated.endpoint.id,
            secret: rotated.secret,
            rotated_at,
            previous_secret_expires_at: rotated.endpoint.previous_secret_expires_at,
        },
    )
}

/// `GET /api/v1/webhooks/{id}/deliveries`
async fn deliveries(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let deliveries = state.webhooks.deliveries(claims.sub, id).await?;
    json(
        StatusCode::OK,
        &DeliveryList {
            deliveries: deliveries.into_iter().map(delivery_json).collect(),
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn the_openapi_document_describes_registration_and_deliveries() {
        let document: Value =
            serde_json::from_str(&crate::api::openapi_json("https://api.example").unwrap())
                .unwrap();
        let paths = &document["paths"];
        for (path, method, status) in [
            ("/api/v1/webhooks", "post", "201"),
            ("/api/v1/webhooks", "post", "409"),
            ("/api/v1/webhooks", "post", "422"),
            ("/api/v1/webhooks", "get", "200"),
            ("/api/v1/webhooks/{id}", "delete", "204"),
            ("/api/v1/webhooks/{id}", "delete", "404"),
            ("/api/v1/webhooks/{id}", "patch", "200"),
            ("/api/v1/webhooks/{id}", "patch", "404"),
            ("/api/v1/webhooks/{id}", "patch", "422"),
            ("/api/v1/webhooks/{id}/secret-rotations", "post", "201"),
            ("/api/v1/webhooks/{id}/deliveries", "get", "200"),
        ] {
            assert!(
                paths[path][method]["responses"][status].is_object(),
                "{method} {path} answers {status}"
            );
        }
        let text = document.to_string();
        for documented in [
            "whsec_",
            "import.completed",
            "webhook.disabled",
            "status_code",
            "delivered",
            "disabled_at",
            "previous_secret_expires_at",
        ] {
            assert!(text.contains(documented), "{documented} is documented");
        }
    }
}
