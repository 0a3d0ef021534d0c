//! Registration, email verification, login, refresh, logout and password reset.

use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat};
use uuid::Uuid;

use super::extract::{Json, User};
use super::openapi::schemas;
use super::routes::{Route, limited, route};
use super::validate::{AllValid as _, Field, Validate, body};
use super::{ApiResult, json, no_content};
use crate::app::App;
use crate::auth::password::{MAX_PASSWORD_CHARS, check_password_rule};
use crate::auth::{ClientInfo, IssuedTokens};
use crate::config::Config;
use crate::problem::{ApiError, FieldError};
use crate::rate_limit::policy::{
    API_WRITE, AUTH_EMAIL_FLOW, AUTH_LOGIN, AUTH_REGISTER, AUTH_TOKEN_REFRESH,
};

pub(crate) const ROUTES: &[Route] = &[
    route!(POST "/api/v1/users" => register, limited(AUTH_REGISTER), "Register an account", [201: RegistrationResponse<'static>; Conflict]),
    route!(POST "/api/v1/email-verifications" => verify_email, limited(AUTH_EMAIL_FLOW),
        "Verify an email address with the emailed token", [201: Message<'static>; CommandValidationFailed, NotFound]),
    route!(POST "/api/v1/email-verification-tokens" => resend_verification,
        limited(AUTH_EMAIL_FLOW), "Send the verification email again", [201: Message<'static>]),
    route!(POST "/api/v1/sessions" => login, limited(AUTH_LOGIN), "Log in", [201: TokensResponse<'static>; Unauthorized, Forbidden]),
    route!(POST "/api/v1/tokens" => refresh, limited(AUTH_TOKEN_REFRESH),
        "Exchange a refresh token for new tokens", [201: TokensResponse<'static>; Unauthorized]),
    route!(DELETE "/api/v1/sessions/current" => logout, limited(API_WRITE),
        "Log out of the current session", [204]),
    route!(POST "/api/v1/password-reset-tokens" => request_password_reset, limited(AUTH_EMAIL_FLOW),
        "Email a password reset link", [201: Message<'static>]),
    route!(POST "/api/v1/password-resets" => reset_password, limited(AUTH_EMAIL_FLOW),
        "Set a new password with the emailed token", [201: Message<'static>; CommandValidationFailed, NotFound]),
];

/// A new password: any string (`name` is the field), then the password rule.
fn new_password(name: &str, field: Field) -> Result<String, FieldError> {
    let password = body::string(name, field, 0, usize::MAX)?;
    match check_password_rule(name, &password) {
        Some(error) => Err(error),
        None => Ok(password),
    }
}

/// `{email, password}` of a registration.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct UserRegistrationBody {
    #[schema(value_type = String, required = true, format = Email, example = "ada@example.com")]
    email: Field,
    #[schema(required = true, schema_with = crate::api::openapi::schemas::new_password)]
    password: Field,
}

impl Validate for UserRegistrationBody {
    type Valid = (String, String);

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            body::email("email", self.email),
            new_password("password", self.password),
        )
            .all_valid()
    }
}

/// `{token}` of an email verification.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct TokenBody {
    #[schema(value_type = String, required = true, pattern = "^[0-9a-fA-F]{64}$", example = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")]
    token: Field,
}

impl Validate for TokenBody {
    type Valid = String;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::hex_token("token", self.token).all_valid()
    }
}

/// `{email}` of a request for an email.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct EmailBody {
    #[schema(value_type = String, required = true, format = Email, example = "ada@example.com")]
    email: Field,
}

impl Validate for EmailBody {
    type Valid = String;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::email("email", self.email).all_valid()
    }
}

/// `{email, password}` of a login.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct LoginBody {
    #[schema(value_type = String, required = true, format = Email, example = "ada@example.com")]
    email: Field,
    #[schema(required = true, schema_with = login_password_schema)]
    password: Field,
}

/// Any password a login reads: the rule of new passwords is not the login's business.
fn login_password_schema() -> ObjectBuilder {
    let schema = schemas::text(1, MAX_PASSWORD_CHARS, false)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Password)));
    schemas::with_example(schema, "correct horse battery staple")
}

impl Validate for LoginBody {
    type Valid = (String, String);

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            body::email("email", self.email),
            body::string("password", self.password, 1, MAX_PASSWORD_CHARS),
        )
            .all_valid()
    }
}

/// `{refresh_token}` of a refresh or a logout.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct RefreshTokenBody {
    #[schema(required = true, schema_with = refresh_token_schema)]
    refresh_token: Field,
}

/// Longest refresh token read (the server's are 43 characters).
const MAX_REFRESH_TOKEN_CHARS: usize = 4096;

fn refresh_token_schema() -> ObjectBuilder {
    schemas::text(1, MAX_REFRESH_TOKEN_CHARS, false)
}

impl Validate for RefreshTokenBody {
    type Valid = String;

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        body::string(
            "refresh_token",
            self.refresh_token,
            1,
            MAX_REFRESH_TOKEN_CHARS,
        )
        .all_valid()
    }
}

/// `{token, new_password}` of a password reset.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(default)]
pub(crate) struct ResetPasswordBody {
    #[schema(value_type = String, required = true, pattern = "^[0-9a-fA-F]{64}$")]
    token: Field,
    #[schema(required = true, schema_with = crate::api::openapi::schemas::new_password)]
    new_password: Field,
}

impl Validate for ResetPasswordBody {
    type Valid = (String, String);

    fn validate(self, _: &Config) -> Result<Self::Valid, ApiError> {
        (
            body::hex_token("token", self.token),
            new_password("new_password", self.new_password),
        )
            .all_valid()
    }
}

#[derive(Serialize, utoipa::ToSchema)]
struct Message<'a> {
    message: &'a str,
}

fn message(status: StatusCode, text: &str) -> ApiResult {
    json(status, &Message { message: text })
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0192f3a4-5b6c-7d8e-9f00-112233445566", "email": "ada@example.com", "message": "Registration successful. A verification email has been sent."}))]
struct RegistrationResponse<'a> {
    id: Uuid,
    email: &'a str,
    message: &'a str,
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(example = json!({"access_token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIuLi4ifQ.c2lnbmF0dXJl", "refresh_token": "Q2hhbmdlZCBvbiBldmVyeSByZWZyZXNo", "token_type": "bearer", "expires_in": 900}))]
struct TokensResponse<'a> {
    access_token: &'a str,
    refresh_token: &'a str,
    token_type: &'static str,
    expires_in: i64,
}

fn tokens(issued: &IssuedTokens) -> ApiResult {
    json(
        StatusCode::CREATED,
        &TokensResponse {
            access_token: &issued.access_token,
            refresh_token: &issued.refresh_token,
            token_type: "bearer",
            expires_in: issued.expires_in,
        },
    )
}

/// `POST /api/v1/users`
async fn register(
    state: &App,
    client: ClientInfo,
    Json((email, password)): Json<UserRegistrationBody>,
) -> ApiResult {
    let registration = state.auth.register(&email, &password, &client).await?;
    json(
        StatusCode::CREATED,
        &RegistrationResponse {
            id: registration.user_id,
            email: &registration.email,
            message: "Registration successful. A verification email has been sent.",
        },
    )
}

/// `POST /api/v1/email-verifications`
async fn verify_email(state: &App, Json(token): Json<TokenBody>) -> ApiResult {
    state.auth.verify_email(&token).await?;
    message(StatusCode::CREATED, "Email verified. You can now log in.")
}

/// `POST /api/v1/email-verification-tokens`
async fn resend_verification(
    state: &App,
    client: ClientInfo,
    Json(email): Json<EmailBody>,
) -> ApiResult {
    state.auth.resend_verification(&email, client);
    message(
        StatusCode::CREATED,
        "If the account exists and is not verified yet, a new verification email has been sent.",
    )
}

/// `POST /api/v1/sessions`
async fn login(
    state: &App,
    client: ClientInfo,
    Json((email, password)): Json<LoginBody>,
) -> ApiResult {
    let issued = state.auth.login(&email, &password, &client).await?;
    tokens(&issued)
}

/// `POST /api/v1/tokens`
async fn refresh(state: &App, Json(refresh_token): Json<RefreshTokenBody>) -> ApiResult {
    let issued = state.auth.refresh(&refresh_token).await?;
    tokens(&issued)
}

/// `DELETE /api/v1/sessions/current`
async fn logout(
    state: &App,
    User(claims): User,
    Json(refresh_token): Json<RefreshTokenBody>,
) -> ApiResult {
    state.auth.logout(claims.sub, &refresh_token).await?;
    no_content()
}

/// The one answer of a reset request, whether or not the account exists.
const RESET_REQUESTED: &str =
    "If an account exists for this email, a password reset link has been sent.";

/// `POST /api/v1/password-reset-tokens`
async fn request_password_reset(
    state: &App,
    client: ClientInfo,
    Json(email): Json<EmailBody>,
) -> ApiResult {
    state.auth.request_password_reset(&email, client);
    message(StatusCode::CREATED, RESET_REQUESTED)
}

/// `POST /api/v1/password-resets`
async fn reset_password(
    state: &App,
    Json((token, new_password)): Json<ResetPasswordBody>,
) -> ApiResult {
    state.auth.reset_password(&token, &new_password).await?;
    message(
        StatusCode::CREATED,
        "Your password has been reset. Every session has been signed out.",
    )
}
