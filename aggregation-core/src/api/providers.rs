//! Provider connections: list, read, connect (OAuth authorization code flow), callback,
//! alias update, disconnect, and provider token refresh.
//!
//! Choices where the interface is silent: a callback for a user who already has a live
//! connection with the same provider and alias re-authorizes that connection in place (same
//! id, accounts kept) instead of creating a duplicate; it still answers 201. PATCH applies the
//! alias (`null` clears it, an absent field leaves it). Connecting a provider that does not use
//! OAuth (such as `file_import`) is 400, like its callback.
//!
//! The callback is public as the interface says, unless
//! [`Config::with_oauth_callback_requires_auth`](crate::Config::with_oauth_callback_requires_auth)
//! binds it to its user: then it needs the bearer token of the user who started connecting
//! (401 without one). A bearer token of another user is always answered like an unknown state
//! (400), and spends the state. A callback with the provider's `error` instead of a `code`
//! (the user refused at the provider) spends the state and answers 400 naming that error;
//! nothing is created or changed.

use chrono::{DateTime, Utc};
use http::StatusCode;
use http::request::Parts;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::ObjectBuilder;
use uuid::Uuid;

use super::extract::{Caller, Json, JsonOrEmpty, PathId, Query, User};
use super::handler::FromParts;
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{
    ActiveOnlyQuery, AllValid as _, Field, ParameterSchema, Validate, body, query,
};
use super::{ApiResult, json, no_content};
use crate::app::App;
use crate::config::Config;
use crate::problem::{ApiError, ErrorCode, FieldError};
use crate::providers::connections::ConnectionError;
use crate::providers::{ConnectMethod, ProviderError};
use crate::rate_limit::policy::{API_READ, API_WRITE, PROVIDER_CALLBACK, PROVIDER_CONNECT};
use crate::store::{ConnectionRecord, ConnectionStatus};

pub(crate) const ROUTES: &[Route] = &[
    route!(GET "/api/v1/providers" => list, limited(API_READ),
        "List the caller's provider connections", [200: ConnectionList<'static>]),
    route!(POST "/api/v1/providers" => connect, limited(PROVIDER_CONNECT),
        "Connect a provider: an OAuth authorization URL, a link token for the provider's widget (Plaid Link), or the connection a setup token made", [201: ConnectAnswer<'static>; NotFound, CommandValidationFailed, ProviderError]),
    route!(POST "/api/v1/providers/callback" => callback, limited(PROVIDER_CALLBACK),
        "Complete connecting a provider: the OAuth code and state in the query, or a link provider's state and public token in the body", [201: ConnectionJson<'static>; NotFound, CommandValidationFailed, ProviderError]),
    route!(GET "/api/v1/providers/{id}" => get, limited(API_READ),
        "Read one of the caller's connections", [200: ConnectionJson<'static>]),
    route!(PATCH "/api/v1/providers/{id}" => update, limited(API_WRITE),
        "Change a connection's alias", [200: ConnectionJson<'static>]),
    route!(DELETE "/api/v1/providers/{id}" => disconnect, limited(API_WRITE),
        "Disconnect a provider connection", [204]),
    route!(POST "/api/v1/providers/{id}/token-refreshes" => refresh_tokens, limited(API_WRITE),
        "Refresh a connection's provider tokens", [201: TokenRefreshJson; CommandValidationFailed, ProviderError]),
    route!(POST "/api/v1/providers/{id}/reauthorizations" => reauthorize, limited(PROVIDER_CONNECT),
        "Authorize an existing connection again: an OAuth authorization URL or a link token in update mode whose callback renews it, or the connection a new setup token renewed", [201: ConnectAnswer<'static>; CommandValidationFailed, ProviderError]),
];

/// Longest alias.
const MAX_ALIAS_CHARS: usize = 100;
/// Longest provider slug a connect reads.
pub(crate) const MAX_PROVIDER_SLUG_CHARS: usize = 100;
/// Longest redirect URI a connect reads.
pub(crate) const MAX_REDIRECT_URI_CHARS: usize = 2048;
/// Longest setup token a connect reads.
const MAX_SETUP_TOKEN_CHARS: usize = 4096;
/// Longest institution id a connect reads.
const MAX_INSTITUTION_ID_CHARS: usize = 200;
/// Longest authorization code or state accepted on a callback.
const MAX_CALLBACK_PARAM_CHARS: usize = 2048;

/// `{provider_slug, alias?, redirect_uri?, institution_id?, setup_token?}` of a connect; the
/// redirect URI must be one of the configured ones, the first being the default. An `oauth`
/// provider that needs an institution requires `institution_id`; a `setup_token` provider
/// requires `setup_token` (and ignores `redirect_uri`).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct ConnectBody {
    #[schema(value_type = crate::api::openapi::schemas::ConnectableProviderSlug, required = true)]
    provider_slug: Field,
    #[schema(schema_with = connect_alias_schema)]
    alias: Field,
    #[schema(value_type = Option<crate::api::openapi::schemas::AllowedRedirectUri>)]
    redirect_uri: Field,
    /// The institution to connect (`oauth` providers with `needs_institution`), an id the
    /// provider's institutions list gives.
    #[schema(value_type = Option<String>)]
    institution_id: Field,
    /// The setup token the user got from the provider (`setup_token` providers).
    #[schema(schema_with = setup_token_schema)]
    setup_token: Field,
}

/// The schema of a `setup_token` field: the bounds its rule (`body::optional_string`) checks.
fn setup_token_schema() -> ObjectBuilder {
    schemas::text(1, MAX_SETUP_TOKEN_CHARS, true)
}

fn connect_alias_schema() -> ObjectBuilder {
    schemas::with_example(schemas::text(0, MAX_ALIAS_CHARS, true), "Brokerage")
}

/// What a connect asks for.
pub(crate) struct Connect {
    slug: String,
    alias: Option<String>,
    redirect_uri: Option<String>,
    institution_id: Option<String>,
    setup_token: Option<String>,
}

impl Validate for ConnectBody {
    type Valid = Connect;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        let (slug, alias, redirect_uri, institution_id, setup_token) = (
            body::string(
                "provider_slug",
                self.provider_slug,
                1,
                MAX_PROVIDER_SLUG_CHARS,
            ),
            body::optional_string("alias", self.alias, 0, MAX_ALIAS_CHARS),
            body::optional_string("redirect_uri", self.redirect_uri, 1, MAX_REDIRECT_URI_CHARS),
            body::optional_string(
                "institution_id",
                self.institution_id,
                1,
                MAX_INSTITUTION_ID_CHARS,
            ),
            body::optional_string("setup_token", self.setup_token, 1, MAX_SETUP_TOKEN_CHARS),
        )
            .all_valid()?;
        Ok(Connect {
            slug,
            alias,
            redirect_uri,
            institution_id,
            setup_token,
        })
    }
}

/// The redirect URI of a connect: the requested one if the server allows it, else the first
/// configured. Judged only once the provider is known to be offered (an unknown one is 404
/// whatever the server's redirect configuration).
fn allowed_redirect_uri(config: &Config, requested: Option<String>) -> Result<String, ApiError> {
    let allowed = config.oauth_redirect_uris();
    match requested {
        Some(uri) if allowed.contains(&uri) => Ok(uri),
        Some(_) => Err(ApiError::field(
            "redirect_uri",
            "not_allowed",
            "Must be one of the configured redirect URIs.",
        )),
        None => allowed.first().cloned().ok_or_else(|| {
            ApiError::field(
                "redirect_uri",
                "not_configured",
                "No redirect URI is configured on this server.",
            )
        }),
    }
}

/// `?code&state` of an OAuth callback, or `?error&error_description&state` when the user
/// refused at the provider (RFC 6749 §4.1.2.1).
#[derive(Deserialize, utoipa::IntoParams)]
pub(crate) struct CallbackQuery {
    /// The authorization code; required unless `error` is given.
    #[param(value_type = Option<String>)]
    code: Option<String>,
    /// The state; required with `code` or `error` (a `link` provider's callback carries it
    /// in the body instead).
    #[param(value_type = Option<String>)]
    state: Option<String>,
    /// The provider's error code when the user refused or the authorization failed
    /// (`access_denied`, …): the callback then answers 400 and spends the state.
    #[param(value_type = Option<String>)]
    error: Option<String>,
    /// The provider's description of `error`.
    #[param(value_type = Option<String>)]
    error_description: Option<String>,
}

/// What a callback brings back from the provider.
pub(crate) enum CallbackAnswer {
    /// An authorization code to exchange.
    Code(String),
    /// The provider's error instead of a code.
    Refused {
        error: String,
        description: Option<String>,
    },
}

/// An optional callback parameter of at most [`MAX_CALLBACK_PARAM_CHARS`] bytes.
fn optional_callback_param(name: &str, raw: Option<String>) -> Result<Option<String>, FieldError> {
    match query::string(raw) {
        None => Ok(None),
        some => callback_param(name, some).map(Some),
    }
}

/// A required callback parameter of at most [`MAX_CALLBACK_PARAM_CHARS`] bytes.
fn callback_param(name: &str, raw: Option<String>) -> Result<String, FieldError> {
    match query::string(raw) {
        None => Err(query::error(
            name,
            "required",
            "This query parameter is required.",
        )),
        Some(value) if value.len() > MAX_CALLBACK_PARAM_CHARS => Err(query::error(
            name,
            "too_long",
            format!("Must be at most {MAX_CALLBACK_PARAM_CHARS} characters long."),
        )),
        Some(value) => Ok(value),
    }
}

impl Validate for CallbackQuery {
    /// `None` when the query names nothing: a link provider's callback carries its state
    /// (and `public_token`) in the body.
    type Valid = Option<(CallbackAnswer, String)>;

    const PARAMETER_SCHEMAS: &'static [ParameterSchema] = &[
        ("code", || schemas::text(1, MAX_CALLBACK_PARAM_CHARS, false)),
        ("state", || {
            schemas::text(1, MAX_CALLBACK_PARAM_CHARS, false)
        }),
        ("error", || {
            schemas::text(1, MAX_CALLBACK_PARAM_CHARS, false)
        }),
        ("error_description", || {
            schemas::text(1, MAX_CALLBACK_PARAM_CHARS, false)
        }),
    ];

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        if [
            &self.code,
            &self.state,
            &self.error,
            &self.error_description,
        ]
        .iter()
        .all(|value| query::string((*value).clone()).is_none())
        {
            return Ok(None);
        }
        let mut errors = Vec::new();
        let answer = if query::string(self.error.clone()).is_some() {
            let error = callback_param("error", self.error).map_err(|e| errors.push(e));
            let description = optional_callback_param("error_description", self.error_description)
                .map_err(|e| errors.push(e));
            match (error, description) {
                (Ok(error), Ok(description)) => {
                    Some(CallbackAnswer::Refused { error, description })
                }
                _ => None,
            }
        } else {
            callback_param("code", self.code)
                .map_err(|e| errors.push(e))
                .ok()
                .map(CallbackAnswer::Code)
        };
        let state = callback_param("state", self.state)
            .map_err(|e| errors.push(e))
            .ok();
        match (answer, state) {
            (Some(answer), Some(state)) if errors.is_empty() => Ok(Some((answer, state))),
            _ => Err(ApiError::validation(errors)),
        }
    }
}

/// `{state, public_token?}` of a `link` provider's callback (Plaid Link): the state
/// `POST /providers` (or a reauthorization) answered and the `public_token` the widget gave.
/// Only a reauthorization's callback (Link in update mode) may leave the `public_token` out:
/// it renews the connection the reauthorization was started for; a fresh connect's state
/// without one is 400 `command_validation_failed`. Ignored when the query carries an OAuth
/// callback.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct CallbackBody {
    /// The state of the connect or reauthorization.
    #[schema(schema_with = callback_body_text)]
    state: Field,
    /// The public token Plaid Link gave the front end; required but after a reauthorization.
    #[schema(schema_with = callback_body_text)]
    public_token: Field,
}

/// The schema of a callback body's text field.
fn callback_body_text() -> ObjectBuilder {
    schemas::text(1, MAX_CALLBACK_PARAM_CHARS, false)
}

impl Validate for CallbackBody {
    type Valid = (Option<String>, Option<String>);

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            body::optional_string("state", self.state, 1, MAX_CALLBACK_PARAM_CHARS),
            body::optional_string(
                "public_token",
                self.public_token,
                1,
                MAX_CALLBACK_PARAM_CHARS,
            ),
        )
            .all_valid()
    }
}

/// The caller of a callback: 401 without a valid token when
/// [`Config::oauth_callback_requires_auth`]; otherwise whoever sent it.
pub(crate) struct CallbackCaller(Caller);

impl FromParts for CallbackCaller {
    async fn from_parts(parts: &Parts, state: &App) -> Result<Self, ApiError> {
        if state.config.oauth_callback_requires_auth() {
            let User(claims) = User::from_parts(parts, state).await?;
            return Ok(Self(Caller::Authenticated(claims)));
        }
        Caller::from_parts(parts, state).await.map(Self)
    }
}

/// `{alias}` of a PATCH: `null` clears it, an absent field leaves it.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct UpdateBody {
    #[schema(schema_with = update_alias_schema)]
    alias: Field,
}

fn update_alias_schema() -> ObjectBuilder {
    schemas::with_example(schemas::text(0, MAX_ALIAS_CHARS, true), "Retirement")
}

impl Validate for UpdateBody {
    type Valid = Option<Option<String>>;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::nullable_string("alias", self.alias, 0, MAX_ALIAS_CHARS).all_valid()
    }
}

/// `{force?}` of a body that may be absent.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct ForceBody {
    #[schema(value_type = Option<bool>)]
    force: Field,
}

impl Validate for ForceBody {
    type Valid = bool;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::flag("force", self.force, false).all_valid()
    }
}

impl From<ConnectionError> for ApiError {
    fn from(error: ConnectionError) -> Self {
        let detail = error.to_string();
        match error {
            ConnectionError::UnknownProvider(_)
            | ConnectionError::NotFound
            | ConnectionError::AccountNotInConnection => ApiError::new(ErrorCode::NotFound, detail),
            ConnectionError::WebhookRejected => ApiError::new(ErrorCode::Unauthorized, detail),
            ConnectionError::NoInstitutions(_) => {
                ApiError::field("path.slug", "no_institutions", detail)
            }
            ConnectionError::BudgetSpent { retry_after_secs } => {
                ApiError::rate_limited_because(retry_after_secs, detail)
            }
            ConnectionError::NeedsReauthentication(ConnectionStatus::Expired) => ApiError::new(
                ErrorCode::Conflict,
                "The connection expired; authorize it again with POST \
                 /api/v1/providers/{id}/reauthorizations.",
            ),
            ConnectionError::NoOAuth(_)
            | ConnectionError::NeedsSetupToken(_)
            | ConnectionError::SetupTokenRefused(_)
            | ConnectionError::PublicTokenRefused(_)
            | ConnectionError::MissingGrant(_)
            | ConnectionError::RefusedAtProvider { .. }
            | ConnectionError::NotRefreshable
            | ConnectionError::InvalidState
            | ConnectionError::MalformedState
            | ConnectionError::NotSyncable(_)
            | ConnectionError::NeedsReauthentication(_) => {
                ApiError::new(ErrorCode::CommandValidationFailed, detail)
            }
            ConnectionError::CoolingDown { retry_after_secs } => {
                ApiError::rate_limited_because(retry_after_secs, detail)
            }
            ConnectionError::Provider(ProviderError::RateLimited { retry_after_secs }) => {
                tracing::warn!(retry_after_secs, "the provider's rate limit was reached");
                ApiError::new(
                    ErrorCode::ServiceUnavailable,
                    "The provider's rate limit was reached; retry later.",
                )
                .with_header(
                    http::header::RETRY_AFTER,
                    http::HeaderValue::from(retry_after_secs.max(1)),
                )
            }
            ConnectionError::Provider(provider) => {
                tracing::warn!(error = %provider, "provider call failed");
                ApiError::new(ErrorCode::ProviderError, detail)
            }
            ConnectionError::Credentials(crypto) => {
                tracing::error!(error = %crypto, "provider credential encryption failed");
                ApiError::new(
                    ErrorCode::CommandExecutionFailed,
                    "The provider credentials could not be encrypted or read.",
                )
            }
            ConnectionError::Store(store) => store.into(),
        }
    }
}

/// A connection as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ConnectionJson<'a> {
    id: Uuid,
    user_id: Uuid,
    provider_id: Uuid,
    provider_slug: &'a str,
    alias: Option<&'a str>,
    #[schema(value_type = crate::store::ConnectionStatus)]
    status: &'static str,
    is_connected: bool,
    needs_reauthentication: bool,
    connected_at: DateTime<Utc>,
    last_sync_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

pub(crate) fn connection_json(connection: &ConnectionRecord) -> ConnectionJson<'_> {
    ConnectionJson {
        id: connection.id,
        user_id: connection.user_id,
        provider_id: connection.provider_id,
        provider_slug: &connection.provider_slug,
        alias: connection.alias.as_deref(),
        status: connection.status.as_str(),
        is_connected: connection.is_connected(),
        needs_reauthentication: connection.status.needs_reauthentication(),
        connected_at: connection.connected_at,
        last_sync_at: connection.last_sync_at,
        created_at: connection.created_at,
        updated_at: connection.updated_at,
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct ConnectionList<'a> {
    connections: Vec<ConnectionJson<'a>>,
    total_count: usize,
    active_count: usize,
}

/// `GET /api/v1/providers`
async fn list(
    state: &App,
    User(claims): User,
    Query(active_only): Query<ActiveOnlyQuery<false>>,
) -> ApiResult {
    let connections = state.connections.list(claims.sub, active_only).await?;
    json(
        StatusCode::OK,
        &ConnectionList {
            connections: connections.iter().map(connection_json).collect(),
            total_count: connections.len(),
            active_count: connections
                .iter()
                .filter(|connection| connection.is_connected())
                .count(),
        },
    )
}

/// `GET /api/v1/providers/{id}`
async fn get(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    let connection = state.connections.owned(claims.sub, id).await?;
    json(StatusCode::OK, &connection_json(&connection))
}

#[derive(Serialize, utoipa::ToSchema)]
struct AuthorizationJson {
    authorization_url: String,
    state: String,
    expires_in: u64,
}

/// What a `link` provider's connect answers: the token for its widget (Plaid Link) and the
/// state its callback brings back.
#[derive(Serialize, utoipa::ToSchema)]
struct LinkJson {
    link_token: String,
    state: String,
    expires_in: u64,
}

/// The answer of a started authorization: an address (`oauth`) or a link token (`link`).
fn authorization_answer(
    method: ConnectMethod,
    authorization: crate::providers::connections::Authorization,
) -> ConnectAnswer<'static> {
    if method == ConnectMethod::Link {
        ConnectAnswer::Link(LinkJson {
            link_token: authorization.authorization_url,
            state: authorization.state,
            expires_in: authorization.expires_in,
        })
    } else {
        ConnectAnswer::Authorization(AuthorizationJson {
            authorization_url: authorization.authorization_url,
            state: authorization.state,
            expires_in: authorization.expires_in,
        })
    }
}

/// What a connect answers: the authorization to follow (`oauth` providers) or the connection
/// itself (`setup_token` providers), both 201.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(untagged)]
enum ConnectAnswer<'a> {
    /// `oauth`: where to send the user; the callback finishes.
    Authorization(AuthorizationJson),
    /// `link`: the token for the provider's widget; the callback with its public token
    /// finishes.
    Link(LinkJson),
    /// `setup_token`: the connection the claimed token made.
    Connection(ConnectionJson<'a>),
}

/// `POST /api/v1/providers`
async fn connect(
    state: &App,
    User(claims): User,
    Json(Connect {
        slug,
        alias,
        redirect_uri,
        institution_id,
        setup_token,
    }): Json<ConnectBody>,
) -> ApiResult {
    // An empty alias means none, as the interface stores "empty when none".
    let alias = alias.filter(|alias| !alias.trim().is_empty());
    let provider = state.connections.connectable(&slug)?;
    if provider.connect_method() == ConnectMethod::SetupToken {
        let setup_token = setup_token.ok_or_else(|| {
            ApiError::field(
                "setup_token",
                "required",
                "This provider connects with the setup token the user got from it.",
            )
        })?;
        let (connection, _created) = state
            .connections
            .connect_with_setup_token(claims.sub, &slug, alias, setup_token.trim())
            .await?;
        return json(
            StatusCode::CREATED,
            &ConnectAnswer::Connection(connection_json(&connection)),
        );
    }
    state.connections.offers_oauth(&slug)?;
    let method = provider.connect_method();
    if provider.needs_institution() {
        let Some(institution_id) = institution_id.as_deref() else {
            return Err(ApiError::field(
                "institution_id",
                "required",
                "This provider needs an institution from its institutions list.",
            ));
        };
        let mut known = false;
        let mut countries = provider.countries();
        if let Some(country) = provider.institution_country(institution_id) {
            countries.retain(|offered| *offered == country);
        }
        for country in countries {
            let listed = state.connections.institutions(&slug, &country).await?;
            if listed
                .iter()
                .any(|institution| institution.id == institution_id)
            {
                known = true;
                break;
            }
        }
        if !known {
            return Err(ApiError::field(
                "institution_id",
                "unknown_institution",
                "Must be an id the provider's institutions list gives.",
            ));
        }
    }
    let redirect_uri = allowed_redirect_uri(&state.config, redirect_uri)?;
    let authorization = state
        .connections
        .start_authorization(
            claims.sub,
            &slug,
            alias,
            redirect_uri,
            institution_id
                .as_deref()
                .filter(|_| provider.needs_institution()),
        )
        .await?;
    json(
        StatusCode::CREATED,
        &authorization_answer(method, authorization),
    )
}

/// `POST /api/v1/providers/callback?code=…&state=…`
async fn callback(
    state: &App,
    CallbackCaller(caller): CallbackCaller,
    Query(query): Query<CallbackQuery>,
    JsonOrEmpty((body_state, public_token)): JsonOrEmpty<CallbackBody>,
) -> ApiResult {
    // Public unless configured otherwise; a bearer token, when sent, must be the state's
    // user's, and another user's is answered as an unknown state.
    let caller = match caller {
        Caller::InvalidToken => return Err(ApiError::unauthorized()),
        Caller::Anonymous => None,
        Caller::Authenticated(claims) => Some(claims.sub),
    };
    let Some((answer, oauth_state)) = query else {
        // A link provider's callback: `{state, public_token?}` in the body. With neither that
        // nor a query, what is missing is an OAuth callback's `code` and `state`, as the
        // interface's callback names them.
        let link_state = match (body_state, &public_token) {
            (Some(link_state), _) => link_state,
            (None, None) => {
                return Err(ApiError::validation(vec![
                    query::error("code", "required", "This query parameter is required."),
                    query::error("state", "required", "This query parameter is required."),
                ]));
            }
            (None, Some(_)) => {
                return Err(ApiError::field(
                    "state",
                    "required",
                    "This field is required.",
                ));
            }
        };
        let (connection, _created) = state
            .connections
            .complete_link(public_token.as_deref(), &link_state, caller)
            .await?;
        return json(StatusCode::CREATED, &connection_json(&connection));
    };
    let code = match answer {
        CallbackAnswer::Code(code) => code,
        CallbackAnswer::Refused { error, description } => {
            return Err(state
                .connections
                .refuse_authorization(&oauth_state, caller, &error, description.as_deref())
                .await
                .into());
        }
    };
    let (connection, _created) = state
        .connections
        .complete_authorization(&code, &oauth_state, caller)
        .await?;
    json(StatusCode::CREATED, &connection_json(&connection))
}

/// `PATCH /api/v1/providers/{id}`
async fn update(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    Json(alias): Json<UpdateBody>,
) -> ApiResult {
    let connection = state.connections.update(claims.sub, id, alias).await?;
    json(StatusCode::OK, &connection_json(&connection))
}

/// `DELETE /api/v1/providers/{id}`
async fn disconnect(state: &App, User(claims): User, PathId(id): PathId) -> ApiResult {
    state.connections.disconnect(claims.sub, id).await?;
    no_content()
}

#[derive(Serialize, utoipa::ToSchema)]
struct TokenRefreshJson {
    success: bool,
    message: &'static str,
    expires_at: DateTime<Utc>,
}

/// `POST /api/v1/providers/{id}/token-refreshes`
async fn refresh_tokens(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    JsonOrEmpty(force): JsonOrEmpty<ForceBody>,
) -> ApiResult {
    let outcome = state
        .connections
        .refresh_tokens_for_user(claims.sub, id, force)
        .await?;
    json(
        StatusCode::CREATED,
        &TokenRefreshJson {
            success: true,
            message: if outcome.refreshed {
                "Provider tokens refreshed."
            } else {
                "Provider tokens are still valid; pass force to refresh them anyway."
            },
            expires_at: outcome.expires_at,
        },
    )
}

/// `{redirect_uri?, setup_token?}` of a reauthorization: `setup_token` for a `setup_token`
/// provider (a new token from the provider renews the connection at once), `redirect_uri` for
/// an `oauth` one.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct ReauthorizeBody {
    #[schema(value_type = Option<crate::api::openapi::schemas::AllowedRedirectUri>)]
    redirect_uri: Field,
    /// A new setup token (`setup_token` providers).
    #[schema(schema_with = setup_token_schema)]
    setup_token: Field,
}

impl Validate for ReauthorizeBody {
    type Valid = (Option<String>, Option<String>);

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            body::optional_string("redirect_uri", self.redirect_uri, 1, MAX_REDIRECT_URI_CHARS),
            body::optional_string("setup_token", self.setup_token, 1, MAX_SETUP_TOKEN_CHARS),
        )
            .all_valid()
    }
}

/// `POST /api/v1/providers/{id}/reauthorizations`
async fn reauthorize(
    state: &App,
    User(claims): User,
    PathId(id): PathId,
    JsonOrEmpty((redirect_uri, setup_token)): JsonOrEmpty<ReauthorizeBody>,
) -> ApiResult {
    let connection = state.connections.owned(claims.sub, id).await?;
    let provider = state.connections.connectable(&connection.provider_slug)?;
    if provider.connect_method() == ConnectMethod::SetupToken {
        let setup_token = setup_token.ok_or_else(|| {
            ApiError::field(
                "setup_token",
                "required",
                "This provider is authorized again with a new setup token from it.",
            )
        })?;
        let renewed = state
            .connections
            .renew_with_setup_token(&connection, setup_token.trim())
            .await?;
        return json(
            StatusCode::CREATED,
            &ConnectAnswer::Connection(connection_json(&renewed)),
        );
    }
    state.connections.offers_oauth(&connection.provider_slug)?;
    let method = provider.connect_method();
    let redirect_uri = allowed_redirect_uri(&state.config, redirect_uri)?;
    let authorization = state
        .connections
        .start_reauthorization(&connection, redirect_uri)
        .await?;
    json(
        StatusCode::CREATED,
        &authorization_answer(method, authorization),
    )
}
