//! The bare handler that `benches/load/accounts-overhead.sh` measures the reference server
//! against: `GET /api/v1/accounts` with nothing but axum, sqlx over the same SQLite file, and
//! the same HS256 check of the same access token. Whatever the reference server serves below
//! this server's rate is the cost of its layers, its routing and its store wrapper.
//!
//! Configured from the environment, all required: `BARE_BIND` (host:port), `BARE_DATABASE_URL`
//! (the `sqlite://` file the reference server migrated), `BARE_JWT_SECRET`, `BARE_JWT_ISSUER`
//! and `BARE_JWT_AUDIENCE` (the reference server's base URL and that URL plus `/api/v1`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::str::FromStr as _;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use http::{HeaderMap, StatusCode, header};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use uuid::Uuid;

/// The reference server's query for the caller's accounts with no filter.
const ACCOUNTS_QUERY: &str = "SELECT a.id, a.connection_id, a.provider_account_id, \
     a.account_number_masked, a.name, a.account_type, a.currency, a.balance_amount, \
     a.available_balance_amount, a.is_active, a.last_synced_at, a.created_at, a.updated_at \
     FROM accounts a JOIN connections c ON c.id = a.connection_id AND c.user_id = ? \
     WHERE 1 = 1 ORDER BY a.name, a.id";

/// The access token claims, as the reference server reads them.
#[derive(Deserialize)]
#[expect(
    dead_code,
    reason = "decoded like the reference server does, though unused"
)]
struct Claims {
    sub: Uuid,
    email: String,
    roles: Vec<String>,
    session_id: Uuid,
    iat: i64,
    exp: i64,
    jti: Uuid,
    iss: String,
    aud: String,
}

#[derive(sqlx::FromRow)]
struct AccountRow {
    id: Uuid,
    connection_id: Uuid,
    provider_account_id: String,
    account_number_masked: Option<String>,
    name: String,
    account_type: String,
    currency: String,
    balance_amount: String,
    available_balance_amount: Option<String>,
    is_active: bool,
    last_synced_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Serialize)]
struct AccountJson<'a> {
    id: Uuid,
    connection_id: Uuid,
    provider_account_id: &'a str,
    account_number_masked: Option<&'a str>,
    name: &'a str,
    account_type: &'a str,
    currency: &'a str,
    #[serde(with = "rust_decimal::serde::str")]
    balance_amount: Decimal,
    #[serde(with = "rust_decimal::serde::str_option")]
    available_balance_amount: Option<Decimal>,
    is_active: bool,
    last_synced_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Serialize)]
struct AccountList<'a> {
    accounts: Vec<AccountJson<'a>>,
    total_count: usize,
    active_count: usize,
    total_balance_by_currency: BTreeMap<&'a str, String>,
}

struct Bare {
    pool: sqlx::SqlitePool,
    key: DecodingKey,
    validation: Validation,
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn decimal(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap_or_default()
}

async fn accounts(State(bare): State<Arc<Bare>>, headers: HeaderMap) -> Response {
    let Some(claims) = bearer(&headers)
        .and_then(|token| jsonwebtoken::decode::<Claims>(token, &bare.key, &bare.validation).ok())
    else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let rows: Vec<AccountRow> = match sqlx::query_as(ACCOUNTS_QUERY)
        .bind(claims.claims.sub)
        .fetch_all(&bare.pool)
        .await
    {
        Ok(rows) => rows,
        Err(_) => return StatusCode::SERVICE_UNAVAILABLE.into_response(),
    };
    let mut sums: BTreeMap<&str, Decimal> = BTreeMap::new();
    let accounts: Vec<AccountJson<'_>> = rows
        .iter()
        .map(|row| {
            let balance_amount = decimal(&row.balance_amount);
            let sum = sums.entry(&row.currency).or_default();
            *sum = sum.saturating_add(balance_amount);
            AccountJson {
                id: row.id,
                connection_id: row.connection_id,
                provider_account_id: &row.provider_account_id,
                account_number_masked: row.account_number_masked.as_deref(),
                name: &row.name,
                account_type: &row.account_type,
                currency: &row.currency,
                balance_amount,
                available_balance_amount: row.available_balance_amount.as_deref().map(decimal),
                is_active: row.is_active,
                last_synced_at: row.last_synced_at,
                created_at: row.created_at,
                updated_at: row.updated_at,
            }
        })
        .collect();
    let list = AccountList {
        total_count: accounts.len(),
        active_count: accounts.iter().filter(|account| account.is_active).count(),
        accounts,
        total_balance_by_currency: sums
            .into_iter()
            .map(|(currency, sum)| (currency, sum.to_string()))
            .collect(),
    };
    match serde_json::to_vec(&list) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn required(variable: &str) -> Result<String, String> {
    std::env::var(variable).map_err(|_| format!("{variable} is not set"))
}

async fn run() -> Result<(), String> {
    let bind: SocketAddr = required("BARE_BIND")?
        .parse()
        .map_err(|error| format!("BARE_BIND: {error}"))?;
    let options = SqliteConnectOptions::from_str(&required("BARE_DATABASE_URL")?)
        .map_err(|error| format!("BARE_DATABASE_URL: {error}"))?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .map_err(|error| format!("BARE_DATABASE_URL: {error}"))?;
    let mut validation = Validation::new(Algorithm::HS256);
    validation.leeway = 5;
    validation.set_issuer(&[required("BARE_JWT_ISSUER")?]);
    validation.set_audience(&[required("BARE_JWT_AUDIENCE")?]);
    validation.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
    let bare = Arc::new(Bare {
        pool,
        key: DecodingKey::from_secret(required("BARE_JWT_SECRET")?.as_bytes()),
        validation,
    });
    let app = axum::Router::new()
        .route("/api/v1/accounts", axum::routing::get(accounts))
        .with_state(bare);
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|error| format!("BARE_BIND: {error}"))?;
    axum::serve(listener, app)
        .await
        .map_err(|error| error.to_string())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bare-accounts: {error}");
            ExitCode::FAILURE
        }
    }
}
