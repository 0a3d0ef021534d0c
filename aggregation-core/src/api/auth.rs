//! Registration, email verification, login, refresh, logout and password reset.

use bytes::Bytes;
use http::StatusCode;
use serde::Serialize;
use uuid::Uuid;

use super::extract::JsonFields;
use super::{ApiResult, RequestContext, json, no_content, require_user};
use crate::auth::IssuedTokens;
use crate::auth::password::{MAX_PASSWORD_CHARS, check_password_rule};
use crate::service::State;

#[derive(Serialize)]
struct Message<'a> {
    message: &'a str,
}

fn message(status: StatusCode, text: &str) -> ApiResult {
    json(status, &Message { message: text })
}

#[derive(Serialize)]
struct RegistrationResponse<'a> {
    id: Uuid,
    email: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
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
pub(crate) async fn register(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let email = fields.email("email");
    let password = fields.string("password", 0, usize::MAX);
    if let Some(error) = password
        .as_deref()
        .and_then(|password| check_password_rule("password", password))
    {
        fields.add_error(error);
    }
    fields.finish()?;
    let (Some(email), Some(password)) = (email, password) else {
        return Err(crate::problem::ApiError::internal());
    };
    let registration = state
        .auth
        .register(&email, &password, &ctx.client_info())
        .await?;
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
pub(crate) async fn verify_email(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let token = fields.hex_token("token");
    fields.finish()?;
    let token = token.unwrap_or_default();
    state.auth.verify_email(&token).await?;
    message(StatusCode::CREATED, "Email verified. You can now log in.")
}

/// `POST /api/v1/email-verification-tokens`
pub(crate) async fn resend_verification(
    state: &State,
    ctx: &RequestContext,
    body: Bytes,
) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let email = fields.email("email");
    fields.finish()?;
    state
        .auth
        .resend_verification(&email.unwrap_or_default(), ctx.client_info());
    message(
        StatusCode::CREATED,
        "If the account exists and is not verified yet, a new verification email has been sent.",
    )
}

/// `POST /api/v1/sessions`
pub(crate) async fn login(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let email = fields.email("email");
    let password = fields.string("password", 1, MAX_PASSWORD_CHARS);
    fields.finish()?;
    let issued = state
        .auth
        .login(
            &email.unwrap_or_default(),
            &password.unwrap_or_default(),
            &ctx.client_info(),
        )
        .await?;
    tokens(&issued)
}

/// `POST /api/v1/tokens`
pub(crate) async fn refresh(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let refresh_token = fields.string("refresh_token", 1, 4096);
    fields.finish()?;
    let issued = state
        .auth
        .refresh(&refresh_token.unwrap_or_default())
        .await?;
    tokens(&issued)
}

/// `DELETE /api/v1/sessions/current`
pub(crate) async fn logout(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let claims = require_user(ctx)?;
    let mut fields = JsonFields::parse(ctx, &body)?;
    let refresh_token = fields.string("refresh_token", 1, 4096);
    fields.finish()?;
    state
        .auth
        .logout(claims.sub, &refresh_token.unwrap_or_default())
        .await?;
    no_content()
}

/// The one answer of a reset request, whether or not the account exists.
const RESET_REQUESTED: &str =
    "If an account exists for this email, a password reset link has been sent.";

/// `POST /api/v1/password-reset-tokens`
pub(crate) async fn request_password_reset(
    state: &State,
    ctx: &RequestContext,
    body: Bytes,
) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let email = fields.email("email");
    fields.finish()?;
    state
        .auth
        .request_password_reset(&email.unwrap_or_default(), ctx.client_info());
    message(StatusCode::CREATED, RESET_REQUESTED)
}

/// `POST /api/v1/password-resets`
pub(crate) async fn reset_password(state: &State, ctx: &RequestContext, body: Bytes) -> ApiResult {
    let mut fields = JsonFields::parse(ctx, &body)?;
    let token = fields.hex_token("token");
    let new_password = fields.string("new_password", 0, usize::MAX);
    if let Some(error) = new_password
        .as_deref()
        .and_then(|password| check_password_rule("new_password", password))
    {
        fields.add_error(error);
    }
    fields.finish()?;
    state
        .auth
        .reset_password(
            &token.unwrap_or_default(),
            &new_password.unwrap_or_default(),
        )
        .await?;
    message(
        StatusCode::CREATED,
        "Your password has been reset. Every session has been signed out.",
    )
}
