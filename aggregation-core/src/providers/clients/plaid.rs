//! The Plaid provider ([API reference](https://plaid.com/docs/api/)): bank data for the US,
//! Canada and Europe through Plaid Link, with the application's `client_id` and `secret`.
//!
//! - Connect ([`ConnectMethod::Link`]): `POST /link/token/create` (`user.client_user_id` =
//!   our user id, products `transactions`, the configured webhook and country codes, the
//!   redirect URI for OAuth banks when it is `https`) answers the `link_token` the front end
//!   runs Plaid Link with; the callback's `public_token` goes to
//!   `POST /item/public_token/exchange`, and the `access_token` and `item_id` it answers are
//!   the connection's secret (stored encrypted like every credential). A reauthorization asks
//!   for a link token in update mode (the stored `access_token` given); its callback needs no
//!   exchange.
//! - Accounts from `POST /accounts/get`, types and subtypes mapped to ours; credit and loan
//!   balances (which Plaid reports as the positive amount owed) are negative, as money owed
//!   is everywhere here.
//! - Transactions through `POST /transactions/sync` ([`Provider::change_feed`]): pages are
//!   read while `has_more`, and the whole loop starts again from the first cursor when Plaid
//!   answers `TRANSACTIONS_SYNC_MUTATION_DURING_PAGINATION` (at most
//!   [`PlaidConfig::max_restarts`] times). Plaid's positive amounts are money out: the sign is
//!   flipped. `pending_transaction_id` links a posted row to the pending one it books;
//!   `personal_finance_category.detailed` and `merchant_name` go along for enrichment.
//! - Holdings from `POST /investments/holdings/get`, for investment accounts only.
//! - Disconnect: `POST /item/remove`.
//! - Errors (`error_type`, `error_code`): `ITEM_LOGIN_REQUIRED` (and the other errors that
//!   need the user at Link again) expire the connection; `RATE_LIMIT_EXCEEDED` is
//!   [`ProviderError::RateLimited`] (503 with `Retry-After`); `INVALID_API_KEYS` is a
//!   configuration error, logged once; anything else is a coarse provider error (502) naming
//!   Plaid's `error_code` only.
//! - Requests carry `client_id` and `secret` in the body (and Plaid's `PLAID-CLIENT-ID` /
//!   `PLAID-SECRET` headers), follow no redirects, and wait at most 3 s to connect and 20 s
//!   for a whole answer ([`PlaidConfig::connect_timeout`], [`PlaidConfig::request_timeout`]).
//!
//! ```
//! use aggregation_core::providers::{PlaidConfig, PlaidProvider};
//! let config = PlaidConfig::new("client-id", "secret")
//!     .with_base_url("https://sandbox.plaid.com");
//! let provider = PlaidProvider::new(config).expect("a client");
//! # let _ = provider;
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use url::Url;

use super::non_blank;
use crate::outbound::{describe_request_error, read_limited};
use crate::providers::{
    AuthorizationRequest, ChangedTransaction, Changes, ConnectMethod, DateRange, FetchContext,
    Fetched, Provider, ProviderCredentials, ProviderError, ProviderSecret, ProviderWebhook,
    RemovedTransaction, SyncItemError, WebhookRequest, iso_currency,
};
use crate::store::{
    AccountType, AssetType, NewAccount, NewHolding, NewTransaction, TransactionStatus,
    TransactionType,
};

/// Plaid's production environment.
pub const DEFAULT_BASE_URL: &str = "https://production.plaid.com";
/// Largest answer read from Plaid.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// The Plaid API version the requests are written for.
const API_VERSION: &str = "2020-09-14";
/// Most connections whose investment accounts are remembered at once.
const MAX_KEPT_CONNECTIONS: usize = 1024;

/// How a [`PlaidProvider`] is set up.
#[derive(Clone)]
pub struct PlaidConfig {
    /// Slug (`plaid`).
    pub slug: String,
    /// Display name.
    pub name: String,
    /// The application's `client_id`.
    pub client_id: String,
    /// The application's `secret` (never logged).
    pub secret: String,
    /// The API's base URL ([`DEFAULT_BASE_URL`]; `https://sandbox.plaid.com` for Plaid's
    /// sandbox).
    pub base_url: String,
    /// Where Plaid sends its webhooks (`POST /api/v1/provider-webhooks/plaid` of this
    /// server), given to `/link/token/create`; `None` for none.
    pub webhook_url: Option<String>,
    /// ISO 3166-1 alpha-2 codes Link offers institutions of (`US` by default).
    pub country_codes: Vec<String>,
    /// The name Link shows the user (`client_name`).
    pub client_name: String,
    /// Test only: accept an `http://` base URL.
    pub allow_http: bool,
    /// How many times a sync starts its paging again when Plaid reports the feed changed
    /// under it (3 by default); past that the sync fails and keeps its cursor.
    pub max_restarts: u32,
    /// Transactions asked for per `/transactions/sync` page (Plaid allows 1 to 500; 500 by
    /// default).
    pub page_size: u32,
    /// Longest wait for a connection to Plaid (3 s by default).
    pub connect_timeout: Duration,
    /// Longest wait for one whole answer of Plaid, connection included (20 s by default).
    pub request_timeout: Duration,
}

impl fmt::Debug for PlaidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlaidConfig")
            .field("slug", &self.slug)
            .field("client_id", &self.client_id)
            .field("base_url", &self.base_url)
            .field("webhook_url", &self.webhook_url)
            .field("country_codes", &self.country_codes)
            .finish_non_exhaustive()
    }
}

impl PlaidConfig {
    /// `plaid` with these keys, on production, for the US, 3 restarts, 500 per page, 3 s to
    /// connect and 20 s per answer.
    pub fn new(client_id: impl Into<String>, secret: impl Into<String>) -> Self {
        Self {
            slug: "plaid".to_owned(),
            name: "Plaid".to_owned(),
            client_id: client_id.into(),
            secret: secret.into(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            webhook_url: None,
            country_codes: vec!["US".to_owned()],
            client_name: "Aggregation".to_owned(),
            allow_http: false,
            max_restarts: 3,
            page_size: 500,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(20),
        }
    }

    /// With another base URL (Plaid's sandbox, or a stand-in).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// With the URL Plaid sends webhooks to.
    pub fn with_webhook_url(mut self, webhook_url: Option<String>) -> Self {
        self.webhook_url = webhook_url;
        self
    }

    /// With these country codes.
    pub fn with_country_codes(mut self, country_codes: Vec<String>) -> Self {
        self.country_codes = country_codes;
        self
    }

    /// Test only: accept an `http://` base URL.
    pub fn with_allow_http(mut self, allow_http: bool) -> Self {
        self.allow_http = allow_http;
        self
    }
}

/// The Plaid provider. See the [module documentation](self).
#[derive(Clone)]
pub struct PlaidProvider {
    slug: String,
    name: String,
    client_id: String,
    secret: String,
    base: Url,
    webhook_url: Option<String>,
    country_codes: Vec<String>,
    client_name: String,
    max_restarts: u32,
    page_size: u32,
    http: reqwest::Client,
    /// Per connection, its investment accounts as the last accounts fetch saw them: a
    /// holdings fetch of another account sends nothing.
    investment_accounts: Arc<Mutex<HashMap<uuid::Uuid, HashSet<String>>>>,
    /// Webhook verification keys by `kid`.
    keys: Arc<Mutex<HashMap<String, CachedKey>>>,
    /// Whether Plaid's refusal of the keys (`INVALID_API_KEYS`) was logged: once per provider.
    keys_refused_logged: Arc<AtomicBool>,
}

/// A webhook verification key as fetched.
#[derive(Clone)]
struct CachedKey {
    key: jsonwebtoken::DecodingKey,
    fetched_at: tokio::time::Instant,
    /// When Plaid says the key stopped being used (Unix seconds), if it did.
    expired_at: Option<i64>,
}

/// Most verification keys kept at once (Plaid rotates a few).
const MAX_KEYS: usize = 16;
/// How long a fetched key is used before it is asked for again (its expiry may have been set
/// meanwhile).
const KEY_TTL: Duration = Duration::from_secs(3600);
/// The oldest `iat` a webhook may carry.
const MAX_WEBHOOK_AGE_SECS: i64 = 5 * 60;
/// How far in the future an `iat` may be (clock skew).
const MAX_WEBHOOK_SKEW_SECS: i64 = 60;

/// The claims of a `Plaid-Verification` JWT.
#[derive(Deserialize)]
struct WebhookClaims {
    iat: i64,
    request_body_sha256: String,
}

/// What `/webhook_verification_key/get` answers.
#[derive(Deserialize)]
struct KeyAnswer {
    key: PlaidJwk,
}

#[derive(Deserialize)]
struct PlaidJwk {
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    kty: Option<String>,
    x: String,
    y: String,
    #[serde(default)]
    expired_at: Option<i64>,
}

/// The fields of a Plaid webhook body the service acts on.
#[derive(Deserialize)]
struct WebhookBody {
    #[serde(default)]
    webhook_type: Option<String>,
    #[serde(default)]
    webhook_code: Option<String>,
    #[serde(default)]
    item_id: Option<String>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

impl fmt::Debug for PlaidProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlaidProvider")
            .field("slug", &self.slug)
            .field("base", &self.base.as_str())
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// The connection's secret: what the public token was exchanged for.
#[derive(Serialize, Deserialize)]
struct ItemSecret {
    access_token: String,
    item_id: String,
}

/// Why a Plaid call failed, before it becomes a [`ProviderError`].
enum Failure {
    /// The feed changed while it was paged: start again.
    Mutation,
    /// Anything else.
    Provider(ProviderError),
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Self {
        Self::Provider(error)
    }
}

/// Plaid's error body.
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    error_type: Option<String>,
    #[serde(default)]
    error_code: Option<String>,
}

/// Error codes that need the user at Link again (update mode).
const RELINK_CODES: &[&str] = &[
    "ITEM_LOGIN_REQUIRED",
    "INVALID_ACCESS_TOKEN",
    "ITEM_LOCKED",
    "ITEM_NOT_FOUND",
    "ACCESS_NOT_GRANTED",
    "USER_PERMISSION_REVOKED",
];

/// Error codes of a holdings request for an item without investment accounts: no holdings.
const NO_HOLDINGS_CODES: &[&str] = &[
    "NO_INVESTMENT_ACCOUNTS",
    "NO_INVESTMENT_AUTH_ACCOUNTS",
    "PRODUCTS_NOT_SUPPORTED",
    "PRODUCT_NOT_ENABLED",
    "ADDITIONAL_CONSENT_REQUIRED",
    "INVALID_PRODUCT",
];

/// What a failed answer means. A refusal of the keys is logged the first time `logged` sees
/// one.
fn failure_of(
    call: &str,
    status: u16,
    retry_after: Option<u64>,
    body: &[u8],
    logged: &AtomicBool,
) -> Failure {
    let error: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
    let code = error.error_code.as_deref().unwrap_or("");
    let kind = error.error_type.as_deref().unwrap_or("");
    if code == "TRANSACTIONS_SYNC_MUTATION_DURING_PAGINATION" {
        return Failure::Mutation;
    }
    if RELINK_CODES.contains(&code) {
        return Failure::Provider(ProviderError::Unauthorized);
    }
    if kind == "RATE_LIMIT_EXCEEDED" || code.ends_with("RATE_LIMIT") || status == 429 {
        return Failure::Provider(ProviderError::RateLimited {
            retry_after_secs: retry_after.unwrap_or(60).clamp(1, 3600),
        });
    }
    if code == "INVALID_API_KEYS" || code == "UNAUTHORIZED_ENVIRONMENT" {
        if !logged.swap(true, Ordering::Relaxed) {
            tracing::error!(
                error_code = code,
                "Plaid refused the configured client id and secret (AGG_PLAID_CLIENT_ID, AGG_PLAID_SECRET, AGG_PLAID_BASE_URL)"
            );
        }
        return Failure::Provider(ProviderError::Configuration(
            "Plaid refused the application's keys".to_owned(),
        ));
    }
    if code == "INVALID_PUBLIC_TOKEN" {
        return Failure::Provider(ProviderError::InvalidGrant(
            "Plaid did not accept the public token (it is expired, used or not Link's)".to_owned(),
        ));
    }
    let named = if code.is_empty() {
        format!("HTTP {status}")
    } else {
        // Plaid's codes are upper-case identifiers; anything else is not echoed.
        let clean: String = code
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        clean
    };
    Failure::Provider(ProviderError::Http(format!(
        "{call}: Plaid answered {named}"
    )))
}

impl PlaidProvider {
    /// A provider with its HTTP client. [`ProviderError::Configuration`] when the base URL
    /// is not an `https` URL (or `http` with [`PlaidConfig::allow_http`]), or the keys are
    /// empty.
    pub fn new(config: PlaidConfig) -> Result<Self, ProviderError> {
        let base = super::api_base_url(&config.base_url, "Plaid", config.allow_http)?;
        if config.client_id.trim().is_empty() || config.secret.trim().is_empty() {
            return Err(ProviderError::Configuration(
                "Plaid needs a client id and a secret".to_owned(),
            ));
        }
        let http = super::api_client(config.connect_timeout, config.request_timeout)?;
        Ok(Self {
            slug: config.slug,
            name: config.name,
            client_id: config.client_id.trim().to_owned(),
            secret: config.secret.trim().to_owned(),
            base,
            webhook_url: config.webhook_url.filter(|url| !url.trim().is_empty()),
            country_codes: config
                .country_codes
                .iter()
                .map(|country| country.trim().to_ascii_uppercase())
                .filter(|country| !country.is_empty())
                .collect(),
            client_name: config.client_name,
            max_restarts: config.max_restarts,
            page_size: config.page_size.clamp(1, 500),
            http,
            investment_accounts: Arc::default(),
            keys: Arc::default(),
            keys_refused_logged: Arc::default(),
        })
    }

    /// The verification key `kid`: from the cache while it is fresh, else from
    /// `/webhook_verification_key/get`. A key Plaid says expired is refused.
    async fn verification_key(
        &self,
        kid: &str,
    ) -> Result<jsonwebtoken::DecodingKey, ProviderError> {
        let rejected = |why: &str| ProviderError::WebhookRejected(why.to_owned());
        let now = chrono::Utc::now().timestamp();
        let cached = self
            .keys
            .lock()
            .ok()
            .and_then(|keys| keys.get(kid).cloned())
            .filter(|cached| cached.fetched_at.elapsed() < KEY_TTL);
        let cached = match cached {
            Some(cached) => cached,
            None => {
                let answer: KeyAnswer = self
                    .call("webhook_verification_key/get", json!({ "key_id": kid }))
                    .await
                    .map_err(|error| match error {
                        ProviderError::Http(_) | ProviderError::InvalidResponse(_) => {
                            rejected("the key id is not one of Plaid's")
                        }
                        other => other,
                    })?;
                let jwk = answer.key;
                let shape_ok = jwk.alg.as_deref().is_none_or(|alg| alg == "ES256")
                    && jwk.crv.as_deref().is_none_or(|crv| crv == "P-256")
                    && jwk.kty.as_deref().is_none_or(|kty| kty == "EC");
                if !shape_ok {
                    return Err(rejected("the key is not an ES256 key"));
                }
                let key = jsonwebtoken::DecodingKey::from_ec_components(&jwk.x, &jwk.y)
                    .map_err(|_| rejected("the key could not be read"))?;
                let fetched = CachedKey {
                    key,
                    fetched_at: tokio::time::Instant::now(),
                    expired_at: jwk.expired_at,
                };
                if let Ok(mut keys) = self.keys.lock() {
                    if keys.len() >= MAX_KEYS && !keys.contains_key(kid) {
                        // Drop the oldest.
                        if let Some(oldest) = keys
                            .iter()
                            .min_by_key(|(_, key)| key.fetched_at)
                            .map(|(kid, _)| kid.clone())
                        {
                            keys.remove(&oldest);
                        }
                    }
                    keys.insert(kid.to_owned(), fetched.clone());
                }
                fetched
            }
        };
        if cached.expired_at.is_some_and(|expired| expired <= now) {
            return Err(rejected("the key has expired"));
        }
        Ok(cached.key)
    }

    /// `POST {base}{path}` with the keys added to `body`; the JSON answer.
    async fn post<T: DeserializeOwned>(&self, path: &str, mut body: Value) -> Result<T, Failure> {
        let url = self
            .base
            .join(path)
            .map_err(|_| ProviderError::Configuration(format!("bad Plaid path {path}")))?;
        if let Value::Object(fields) = &mut body {
            fields.insert("client_id".to_owned(), Value::from(self.client_id.as_str()));
            fields.insert("secret".to_owned(), Value::from(self.secret.as_str()));
        }
        let call = format!("POST /{path}");
        let response = self
            .http
            .post(url)
            .header("PLAID-CLIENT-ID", &self.client_id)
            .header("PLAID-SECRET", &self.secret)
            .header("Plaid-Version", API_VERSION)
            .json(&body)
            .send()
            .await
            .map_err(|error| {
                ProviderError::Http(format!("{call}: {}", describe_request_error(&error)))
            })?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        let bytes = read_limited(response, MAX_BODY)
            .await
            .map_err(|error| ProviderError::Http(format!("{call}: {error}")))?;
        if !status.is_success() {
            return Err(failure_of(
                &call,
                status.as_u16(),
                retry_after,
                &bytes,
                &self.keys_refused_logged,
            ));
        }
        serde_json::from_slice(&bytes).map_err(|error| {
            Failure::Provider(ProviderError::InvalidResponse(format!("{call}: {error}")))
        })
    }

    /// [`post`](Self::post) for calls where a feed mutation cannot happen.
    async fn call<T: DeserializeOwned>(&self, path: &str, body: Value) -> Result<T, ProviderError> {
        self.post(path, body)
            .await
            .map_err(|failure| match failure {
                Failure::Provider(error) => error,
                Failure::Mutation => {
                    ProviderError::Http(format!("POST /{path}: Plaid answered a feed mutation"))
                }
            })
    }

    /// The stored secret.
    fn item(credentials: &ProviderCredentials) -> Result<ItemSecret, ProviderError> {
        credentials.secret.deserialize()
    }

    /// Remembers which accounts of a connection are investment accounts.
    fn remember_investments(&self, connection_id: uuid::Uuid, accounts: HashSet<String>) {
        if let Ok(mut kept) = self.investment_accounts.lock() {
            if kept.len() >= MAX_KEPT_CONNECTIONS && !kept.contains_key(&connection_id) {
                kept.clear();
            }
            kept.insert(connection_id, accounts);
        }
    }

    /// Whether `account` of the connection is not an investment account, as far as known.
    fn surely_not_investment(&self, connection_id: uuid::Uuid, account: &str) -> bool {
        self.investment_accounts
            .lock()
            .ok()
            .and_then(|kept| kept.get(&connection_id).map(|set| !set.contains(account)))
            .unwrap_or(false)
    }

    /// Every change of the feed after `cursor`, paging while `has_more`; the loop starts
    /// again from `cursor` when the feed changes under it.
    async fn changes_since(
        &self,
        item: &ItemSecret,
        cursor: Option<&str>,
        context: &FetchContext,
    ) -> Result<Changes, ProviderError> {
        for _attempt in 0..=self.max_restarts {
            match self.page_through(item, cursor, context).await {
                Ok(changes) => return Ok(changes),
                Err(Failure::Mutation) => {
                    tracing::debug!(
                        "Plaid's transaction feed changed during paging; starting again"
                    );
                }
                Err(Failure::Provider(error)) => return Err(error),
            }
        }
        Err(ProviderError::Http(
            "POST /transactions/sync: Plaid's feed kept changing during paging".to_owned(),
        ))
    }

    /// One pass over the feed's pages.
    async fn page_through(
        &self,
        item: &ItemSecret,
        start: Option<&str>,
        context: &FetchContext,
    ) -> Result<Changes, Failure> {
        let mut changes = Changes::default();
        let mut cursor = start.map(str::to_owned);
        // Bounded: a feed that never stops saying `has_more` ends the sync as an error.
        for _page in 0..10_000 {
            let mut body = json!({
                "access_token": item.access_token,
                "count": self.page_size,
            });
            if let Some(cursor) = cursor.as_deref().filter(|cursor| !cursor.is_empty()) {
                body["cursor"] = Value::from(cursor);
            }
            context.count_request();
            let page: SyncPage = self.post("transactions/sync", body).await?;
            for transaction in page.added.into_iter().chain(page.modified) {
                match map_transaction(transaction) {
                    Ok(changed) => changes.transactions.push(changed),
                    Err(error) => changes.errors.push(error),
                }
            }
            changes
                .removed
                .extend(page.removed.into_iter().map(|removed| RemovedTransaction {
                    provider_account_id: removed.account_id,
                    provider_transaction_id: removed.transaction_id,
                }));
            cursor = Some(page.next_cursor);
            if !page.has_more {
                changes.next_cursor = cursor.unwrap_or_default();
                return Ok(changes);
            }
        }
        Err(Failure::Provider(ProviderError::InvalidResponse(
            "POST /transactions/sync: more pages than a sync reads".to_owned(),
        )))
    }
}

/// The tag of an item in a stored cursor: a cursor is used only with the item it was made
/// for (a new item behind the same connection starts the feed again). A digest, so the
/// stored cursor does not carry the item id itself.
fn item_tag(item_id: &str) -> String {
    let digest = Sha256::digest(item_id.as_bytes());
    hex::encode(&digest[..8])
}

/// One `/transactions/sync` page.
#[derive(Deserialize)]
struct SyncPage {
    #[serde(default)]
    added: Vec<PlaidTransaction>,
    #[serde(default)]
    modified: Vec<PlaidTransaction>,
    #[serde(default)]
    removed: Vec<PlaidRemoved>,
    next_cursor: String,
    has_more: bool,
}

#[derive(Deserialize)]
struct PlaidRemoved {
    transaction_id: String,
    #[serde(default)]
    account_id: Option<String>,
}

#[derive(Deserialize)]
struct PlaidTransaction {
    transaction_id: String,
    account_id: String,
    amount: serde_json::Number,
    #[serde(default)]
    iso_currency_code: Option<String>,
    #[serde(default)]
    unofficial_currency_code: Option<String>,
    date: NaiveDate,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    merchant_name: Option<String>,
    #[serde(default)]
    pending: bool,
    #[serde(default)]
    pending_transaction_id: Option<String>,
    #[serde(default)]
    payment_channel: Option<String>,
    #[serde(default)]
    personal_finance_category: Option<PersonalFinanceCategory>,
}

#[derive(Deserialize)]
struct PersonalFinanceCategory {
    #[serde(default)]
    primary: Option<String>,
    #[serde(default)]
    detailed: Option<String>,
}

/// A JSON number as a decimal.
fn decimal(number: &serde_json::Number) -> Option<Decimal> {
    let text = number.to_string();
    Decimal::from_str(&text)
        .or_else(|_| Decimal::from_scientific(&text))
        .ok()
}

/// A JSON number as an amount of money: at least two decimals (`1200.4` is `1200.40`).
fn money(number: &serde_json::Number) -> Option<Decimal> {
    decimal(number).map(|mut amount| {
        if amount.scale() < 2 {
            amount.rescale(2);
        }
        amount
    })
}

/// A Plaid transaction as ours: the sign flipped (Plaid's positive is money out).
fn map_transaction(transaction: PlaidTransaction) -> Result<ChangedTransaction, SyncItemError> {
    let item = |message: String| SyncItemError {
        item: transaction.transaction_id.clone(),
        message,
    };
    let amount = money(&transaction.amount)
        .ok_or_else(|| item("the amount is not a decimal number".to_owned()))?;
    let currency = transaction
        .iso_currency_code
        .as_deref()
        .or(transaction.unofficial_currency_code.as_deref())
        .ok_or_else(|| item("the transaction has no currency".to_owned()))
        .and_then(|code| iso_currency(code).map_err(item))?;
    let category = transaction
        .personal_finance_category
        .as_ref()
        .and_then(|category| category.detailed.clone());
    let primary = transaction
        .personal_finance_category
        .as_ref()
        .and_then(|category| category.primary.as_deref());
    let transaction_type = match primary {
        Some("INCOME") => TransactionType::Income,
        Some("TRANSFER_IN" | "TRANSFER_OUT" | "LOAN_PAYMENTS") => TransactionType::Transfer,
        Some("BANK_FEES") => TransactionType::Fee,
        _ => TransactionType::Other,
    };
    let merchant_name = non_blank(transaction.merchant_name);
    let description = non_blank(transaction.name).or_else(|| merchant_name.clone());
    let row = NewTransaction {
        provider_transaction_id: transaction.transaction_id,
        transaction_type,
        subtype: non_blank(transaction.payment_channel),
        status: if transaction.pending {
            TransactionStatus::Pending
        } else {
            TransactionStatus::Settled
        },
        amount: -amount,
        currency,
        description,
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: transaction.date,
        settlement_date: None,
        pending_transaction_id: non_blank(transaction.pending_transaction_id),
        merchant_code: None,
    };
    Ok(ChangedTransaction::new(transaction.account_id, row)
        .with_enrichment(category, merchant_name))
}

#[derive(Deserialize)]
struct AccountsAnswer {
    accounts: Vec<PlaidAccount>,
}

#[derive(Deserialize)]
struct PlaidAccount {
    account_id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    official_name: Option<String>,
    #[serde(default)]
    mask: Option<String>,
    #[serde(rename = "type")]
    account_type: String,
    #[serde(default)]
    subtype: Option<String>,
    balances: PlaidBalances,
}

#[derive(Deserialize)]
struct PlaidBalances {
    #[serde(default)]
    current: Option<serde_json::Number>,
    #[serde(default)]
    available: Option<serde_json::Number>,
    #[serde(default)]
    iso_currency_code: Option<String>,
    #[serde(default)]
    unofficial_currency_code: Option<String>,
}

/// Plaid's account type and subtype as ours, and whether the balance is an amount owed.
pub(crate) fn account_type_of(kind: &str, subtype: Option<&str>) -> (AccountType, bool) {
    let subtype = subtype.unwrap_or("").to_ascii_lowercase();
    match kind.to_ascii_lowercase().as_str() {
        "depository" => (
            match subtype.as_str() {
                "checking" => AccountType::Checking,
                "savings" => AccountType::Savings,
                "money market" => AccountType::MoneyMarket,
                "cd" => AccountType::Cd,
                "hsa" => AccountType::Hsa,
                _ => AccountType::Other,
            },
            false,
        ),
        "credit" => (AccountType::CreditCard, true),
        "loan" => (
            match subtype.as_str() {
                "mortgage" => AccountType::Mortgage,
                "home equity" | "line of credit" | "overdraft" => AccountType::LineOfCredit,
                _ => AccountType::Loan,
            },
            true,
        ),
        "investment" | "brokerage" => (
            match subtype.as_str() {
                "401k" => AccountType::Plan401k,
                "403b" | "403B" => AccountType::Plan403b,
                "ira" | "sep ira" | "simple ira" | "sarsep" => AccountType::Ira,
                "roth" | "roth ira" => AccountType::RothIra,
                "hsa" => AccountType::Hsa,
                _ => AccountType::Brokerage,
            },
            false,
        ),
        _ => (AccountType::Other, false),
    }
}

/// A Plaid account as ours.
fn map_account(account: PlaidAccount) -> Result<NewAccount, SyncItemError> {
    let item = |message: String| SyncItemError {
        item: account.account_id.clone(),
        message,
    };
    let (account_type, owed) = account_type_of(&account.account_type, account.subtype.as_deref());
    let currency = account
        .balances
        .iso_currency_code
        .as_deref()
        .or(account.balances.unofficial_currency_code.as_deref())
        .ok_or_else(|| item("the account has no currency".to_owned()))
        .and_then(|code| iso_currency(code).map_err(item))?;
    let current = account
        .balances
        .current
        .as_ref()
        .map(|number| money(number).ok_or_else(|| item("the balance is not a number".to_owned())))
        .transpose()?
        .unwrap_or(Decimal::ZERO);
    let available = account.balances.available.as_ref().and_then(money);
    Ok(NewAccount {
        name: non_blank(account.name)
            .or_else(|| non_blank(account.official_name))
            .unwrap_or_else(|| "Plaid account".to_owned()),
        provider_account_id: account.account_id,
        account_number: non_blank(account.mask),
        account_type,
        currency,
        // Plaid reports what is owed on credit and loans as a positive amount.
        balance_amount: if owed { -current.abs() } else { current },
        // For credit, `available` is the credit left, not money the user has.
        available_balance_amount: if owed { None } else { available },
        is_active: true,
    })
}

#[derive(Deserialize)]
struct HoldingsAnswer {
    #[serde(default)]
    holdings: Vec<PlaidHolding>,
    #[serde(default)]
    securities: Vec<PlaidSecurity>,
}

#[derive(Deserialize)]
struct PlaidHolding {
    account_id: String,
    security_id: String,
    quantity: serde_json::Number,
    #[serde(default)]
    institution_price: Option<serde_json::Number>,
    #[serde(default)]
    institution_value: Option<serde_json::Number>,
    #[serde(default)]
    cost_basis: Option<serde_json::Number>,
    #[serde(default)]
    iso_currency_code: Option<String>,
    #[serde(default)]
    unofficial_currency_code: Option<String>,
}

#[derive(Deserialize)]
struct PlaidSecurity {
    security_id: String,
    #[serde(default)]
    ticker_symbol: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "type")]
    security_type: Option<String>,
}

/// Plaid's security type as ours.
fn asset_type_of(kind: Option<&str>) -> AssetType {
    match kind.unwrap_or("") {
        "equity" => AssetType::Equity,
        "etf" => AssetType::Etf,
        "mutual fund" => AssetType::MutualFund,
        "fixed income" => AssetType::FixedIncome,
        "derivative" => AssetType::Option,
        "cash" => AssetType::CashEquivalent,
        "cryptocurrency" => AssetType::Cryptocurrency,
        _ => AssetType::Other,
    }
}

/// The holdings of one account from a holdings answer.
fn map_holdings(answer: HoldingsAnswer, account: &str) -> Fetched<NewHolding> {
    let securities: HashMap<&str, &PlaidSecurity> = answer
        .securities
        .iter()
        .map(|security| (security.security_id.as_str(), security))
        .collect();
    let mut fetched = Fetched::default();
    for holding in answer.holdings.iter().filter(|h| h.account_id == account) {
        let item = |message: &str| SyncItemError {
            item: holding.security_id.clone(),
            message: message.to_owned(),
        };
        let security = securities.get(holding.security_id.as_str());
        let currency = match holding
            .iso_currency_code
            .as_deref()
            .or(holding.unofficial_currency_code.as_deref())
            .map(iso_currency)
        {
            Some(Ok(code)) => code,
            _ => {
                fetched.errors.push(item("the holding has no ISO currency"));
                continue;
            }
        };
        let Some(quantity) = decimal(&holding.quantity) else {
            fetched.errors.push(item("the quantity is not a number"));
            continue;
        };
        let price = holding.institution_price.as_ref().and_then(decimal);
        let value = holding
            .institution_value
            .as_ref()
            .and_then(money)
            .or_else(|| price.and_then(|price| price.checked_mul(quantity)))
            .unwrap_or(Decimal::ZERO);
        let cost_basis = holding.cost_basis.as_ref().and_then(money);
        let symbol = security
            .and_then(|security| non_blank(security.ticker_symbol.clone()))
            .or_else(|| security.and_then(|security| non_blank(security.name.clone())))
            .unwrap_or_else(|| holding.security_id.clone());
        fetched.items.push(NewHolding {
            provider_holding_id: holding.security_id.clone(),
            symbol,
            security_name: security.and_then(|security| non_blank(security.name.clone())),
            asset_type: asset_type_of(security.and_then(|s| s.security_type.as_deref())),
            quantity,
            cost_basis,
            market_value: value,
            currency,
            average_price: cost_basis.and_then(|basis| {
                (!quantity.is_zero())
                    .then(|| basis.checked_div(quantity))
                    .flatten()
            }),
            current_price: price,
            unrealized_gain_loss: cost_basis.and_then(|basis| value.checked_sub(basis)),
        });
    }
    fetched
}

#[derive(Deserialize)]
struct LinkTokenAnswer {
    link_token: String,
}

#[derive(Deserialize)]
struct ExchangeAnswer {
    access_token: String,
    item_id: String,
}

#[async_trait]
impl Provider for PlaidProvider {
    fn slug(&self) -> &str {
        &self.slug
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn connect_method(&self) -> ConnectMethod {
        ConnectMethod::Link
    }

    fn countries(&self) -> Vec<String> {
        self.country_codes.clone()
    }

    fn supports_pkce(&self) -> bool {
        false
    }

    fn change_feed(&self) -> bool {
        true
    }

    fn receives_webhooks(&self) -> bool {
        true
    }

    fn webhook_key(&self, credentials: &ProviderCredentials) -> Option<String> {
        Self::item(credentials).ok().map(|item| item.item_id)
    }

    /// The `Plaid-Verification` JWT: alg ES256 only, the key by `kid`, `iat` at most 5
    /// minutes old, and the SHA-256 of the raw body equal to `request_body_sha256`
    /// (compared in constant time).
    async fn verify_webhook(
        &self,
        request: &WebhookRequest<'_>,
    ) -> Result<ProviderWebhook, ProviderError> {
        let rejected = |why: &str| ProviderError::WebhookRejected(why.to_owned());
        let token = request
            .header("plaid-verification")
            .map(str::trim)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| rejected("no Plaid-Verification header"))?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| rejected("the JWT header is not readable"))?;
        if header.alg != jsonwebtoken::Algorithm::ES256 {
            return Err(rejected("the JWT is not signed with ES256"));
        }
        let kid = header
            .kid
            .filter(|kid| !kid.is_empty() && kid.len() <= 200)
            .ok_or_else(|| rejected("the JWT names no key"))?;
        let key = self.verification_key(&kid).await?;
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_aud = false;
        let claims = jsonwebtoken::decode::<WebhookClaims>(token, &key, &validation)
            .map_err(|_| rejected("the JWT's signature does not verify"))?
            .claims;
        let age = chrono::Utc::now().timestamp().saturating_sub(claims.iat);
        if !(-MAX_WEBHOOK_SKEW_SECS..=MAX_WEBHOOK_AGE_SECS).contains(&age) {
            return Err(rejected("the JWT is too old"));
        }
        let digest = hex::encode(Sha256::digest(request.body));
        let claimed = claims.request_body_sha256.to_ascii_lowercase();
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            digest.as_bytes(),
            claimed.as_bytes(),
        )) {
            return Err(rejected("the body is not the one signed"));
        }
        let body: WebhookBody = serde_json::from_slice(request.body)
            .map_err(|_| rejected("the body is not a Plaid webhook"))?;
        let Some(key) = body.item_id.filter(|item| !item.is_empty()) else {
            return Ok(ProviderWebhook::Ignored);
        };
        let error_code = body
            .error
            .as_ref()
            .and_then(|error| error.error_code.as_deref());
        Ok(
            match (body.webhook_type.as_deref(), body.webhook_code.as_deref()) {
                (Some("TRANSACTIONS"), Some("SYNC_UPDATES_AVAILABLE")) => {
                    ProviderWebhook::SyncAvailable { key }
                }
                (Some("ITEM"), Some("ERROR")) if error_code == Some("ITEM_LOGIN_REQUIRED") => {
                    ProviderWebhook::LoginRequired { key }
                }
                (Some("ITEM"), Some(code @ ("PENDING_EXPIRATION" | "PENDING_DISCONNECT"))) => {
                    ProviderWebhook::Expiring {
                        key,
                        reason: code.to_ascii_lowercase(),
                    }
                }
                (Some("ITEM"), Some("USER_PERMISSION_REVOKED")) => ProviderWebhook::Revoked { key },
                _ => ProviderWebhook::Ignored,
            },
        )
    }

    /// `POST /link/token/create`: the link token (update mode on a reauthorization).
    async fn begin_authorization(
        &self,
        request: &AuthorizationRequest<'_>,
    ) -> Result<String, ProviderError> {
        let user = request.user_id.map(|id| id.to_string()).ok_or_else(|| {
            ProviderError::Configuration("a link token needs the user".to_owned())
        })?;
        let mut body = json!({
            "client_name": self.client_name,
            "language": "en",
            "country_codes": self.country_codes,
            "user": { "client_user_id": user },
        });
        match request.reauthorizing {
            Some(credentials) => {
                body["access_token"] = Value::from(Self::item(credentials)?.access_token);
            }
            None => body["products"] = json!(["transactions"]),
        }
        if let Some(webhook) = &self.webhook_url {
            body["webhook"] = Value::from(webhook.as_str());
        }
        // Plaid accepts only registered https redirect URIs (for OAuth banks).
        if request.redirect_uri.starts_with("https://") {
            body["redirect_uri"] = Value::from(request.redirect_uri);
        }
        let answer: LinkTokenAnswer = self.call("link/token/create", body).await?;
        Ok(answer.link_token)
    }

    /// `POST /item/public_token/exchange`.
    async fn exchange_public_token(
        &self,
        public_token: &str,
    ) -> Result<ProviderCredentials, ProviderError> {
        let answer: ExchangeAnswer = self
            .call(
                "item/public_token/exchange",
                json!({ "public_token": public_token }),
            )
            .await?;
        let secret = ProviderSecret::serialize(&ItemSecret {
            access_token: answer.access_token,
            item_id: answer.item_id,
        })?;
        Ok(ProviderCredentials::lasting(secret))
    }

    /// `POST /item/remove`.
    async fn disconnect(&self, credentials: &ProviderCredentials) -> Result<(), ProviderError> {
        let item = Self::item(credentials)?;
        let _: Value = self
            .call("item/remove", json!({ "access_token": item.access_token }))
            .await?;
        Ok(())
    }

    async fn accounts(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        let item = Self::item(credentials)?;
        let answer: AccountsAnswer = self
            .call("accounts/get", json!({ "access_token": item.access_token }))
            .await?;
        let mut fetched = Fetched::default();
        for account in answer.accounts {
            match map_account(account) {
                Ok(account) => fetched.items.push(account),
                Err(error) => fetched.errors.push(error),
            }
        }
        Ok(fetched)
    }

    async fn fetch_accounts(
        &self,
        credentials: &ProviderCredentials,
        context: &FetchContext,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        context.count_request();
        let fetched = self.accounts(credentials).await?;
        let investments = fetched
            .items
            .iter()
            .filter(|account| {
                matches!(
                    account.account_type,
                    AccountType::Brokerage
                        | AccountType::Ira
                        | AccountType::RothIra
                        | AccountType::Plan401k
                        | AccountType::Plan403b
                ) || (account.account_type == AccountType::Hsa)
            })
            .map(|account| account.provider_account_id.clone())
            .collect();
        self.remember_investments(context.connection_id, investments);
        Ok(fetched)
    }

    /// Not used: Plaid's transactions come from the change feed.
    async fn transactions(
        &self,
        _credentials: &ProviderCredentials,
        _provider_account_id: &str,
        _range: DateRange,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        Err(ProviderError::Unsupported(
            "transactions by date range (Plaid has a change feed)",
        ))
    }

    async fn fetch_changes(
        &self,
        credentials: &ProviderCredentials,
        cursor: Option<&str>,
        context: &FetchContext,
    ) -> Result<Changes, ProviderError> {
        let item = Self::item(credentials)?;
        let tag = item_tag(&item.item_id);
        // A cursor of another item (the connection was linked again) is not used.
        let start = cursor
            .and_then(|stored| stored.split_once(':'))
            .filter(|(stored_tag, _)| *stored_tag == tag)
            .map(|(_, cursor)| cursor);
        let mut changes = self.changes_since(&item, start, context).await?;
        changes.next_cursor = format!("{tag}:{}", changes.next_cursor);
        Ok(changes)
    }

    async fn holdings(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        let item = Self::item(credentials)?;
        let answer = self
            .post::<HoldingsAnswer>(
                "investments/holdings/get",
                json!({
                    "access_token": item.access_token,
                    "options": { "account_ids": [provider_account_id] },
                }),
            )
            .await;
        match answer {
            Ok(answer) => Ok(map_holdings(answer, provider_account_id)),
            Err(Failure::Provider(ProviderError::Http(message)))
                if NO_HOLDINGS_CODES.iter().any(|code| message.ends_with(code)) =>
            {
                Ok(Fetched::default())
            }
            Err(Failure::Provider(error)) => Err(error),
            Err(Failure::Mutation) => Err(ProviderError::Http(
                "POST /investments/holdings/get: unexpected answer".to_owned(),
            )),
        }
    }

    async fn fetch_holdings(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        context: &FetchContext,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        if self.surely_not_investment(context.connection_id, provider_account_id) {
            return Ok(Fetched::default());
        }
        context.count_request();
        self.holdings(credentials, provider_account_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`failure_of`] with a flag of its own.
    fn fail(call: &str, status: u16, retry_after: Option<u64>, body: &[u8]) -> Failure {
        failure_of(call, status, retry_after, body, &AtomicBool::new(false))
    }

    #[test]
    fn refused_keys_are_a_configuration_error_logged_once() {
        let captured = crate::testing::CapturedLog::default();
        let _guard = tracing::subscriber::set_default(captured.subscriber(tracing::Level::INFO));
        let body = serde_json::to_vec(&json!({"error_type": "INVALID_INPUT",
            "error_code": "INVALID_API_KEYS", "error_message": "x", "display_message": null}))
        .expect("json");
        let logged = AtomicBool::new(false);
        for _ in 0..3 {
            assert!(matches!(
                failure_of("POST /accounts/get", 400, None, &body, &logged),
                Failure::Provider(ProviderError::Configuration(_))
            ));
        }
        let lines = captured.lines();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].contains("ERROR"), "{}", lines[0]);
        assert!(lines[0].contains("AGG_PLAID_CLIENT_ID"), "{}", lines[0]);
        assert!(!lines[0].contains("\"x\""), "{}", lines[0]);
    }

    #[test]
    fn types_and_owed_balances_map() {
        assert_eq!(
            account_type_of("depository", Some("checking")),
            (AccountType::Checking, false)
        );
        assert_eq!(
            account_type_of("credit", Some("credit card")),
            (AccountType::CreditCard, true)
        );
        assert_eq!(
            account_type_of("loan", Some("mortgage")),
            (AccountType::Mortgage, true)
        );
        assert_eq!(
            account_type_of("investment", Some("401k")),
            (AccountType::Plan401k, false)
        );
        let card: PlaidAccount = serde_json::from_value(json!({
            "account_id": "c1", "name": "Card", "type": "credit", "subtype": "credit card",
            "balances": {"current": 120.5, "available": 879.5, "iso_currency_code": "USD"}
        }))
        .expect("account");
        let card = map_account(card).expect("mapped");
        assert_eq!(card.balance_amount, Decimal::new(-1205, 1));
        assert_eq!(card.available_balance_amount, None);
    }

    #[test]
    fn amounts_flip_and_links_carry() {
        let posted: PlaidTransaction = serde_json::from_value(json!({
            "transaction_id": "t2", "account_id": "a1", "amount": 4.35,
            "iso_currency_code": "usd", "date": "2026-11-02", "name": "BLUE BOTTLE",
            "merchant_name": "Blue Bottle Coffee", "pending": false,
            "pending_transaction_id": "t1",
            "personal_finance_category": {"primary": "FOOD_AND_DRINK", "detailed": "FOOD_AND_DRINK_COFFEE"}
        }))
        .expect("transaction");
        let changed = map_transaction(posted).expect("mapped");
        assert_eq!(changed.transaction.amount, Decimal::new(-435, 2));
        assert_eq!(changed.transaction.currency, "USD");
        assert_eq!(changed.transaction.status, TransactionStatus::Settled);
        assert_eq!(
            changed.transaction.pending_transaction_id.as_deref(),
            Some("t1")
        );
        assert_eq!(changed.category.as_deref(), Some("FOOD_AND_DRINK_COFFEE"));
        assert_eq!(changed.merchant_name.as_deref(), Some("Blue Bottle Coffee"));
    }

    #[test]
    fn errors_map_to_what_the_service_does() {
        let body = |code: &str, kind: &str| {
            serde_json::to_vec(&json!({"error_type": kind, "error_code": code, "error_message": "x", "display_message": null}))
                .expect("json")
        };
        assert!(matches!(
            fail("c", 400, None, &body("ITEM_LOGIN_REQUIRED", "ITEM_ERROR")),
            Failure::Provider(ProviderError::Unauthorized)
        ));
        assert!(matches!(
            fail(
                "c",
                429,
                Some(7),
                &body("RATE_LIMIT", "RATE_LIMIT_EXCEEDED")
            ),
            Failure::Provider(ProviderError::RateLimited {
                retry_after_secs: 7
            })
        ));
        assert!(matches!(
            fail("c", 400, None, &body("INVALID_API_KEYS", "INVALID_INPUT")),
            Failure::Provider(ProviderError::Configuration(_))
        ));
        assert!(matches!(
            fail(
                "c",
                400,
                None,
                &body(
                    "TRANSACTIONS_SYNC_MUTATION_DURING_PAGINATION",
                    "TRANSACTIONS_ERROR"
                )
            ),
            Failure::Mutation
        ));
        match fail("c", 500, None, b"<html>secret detail</html>") {
            Failure::Provider(ProviderError::Http(message)) => {
                assert_eq!(message, "c: Plaid answered HTTP 500");
            }
            _ => panic!("a coarse error"),
        }
    }

    #[test]
    fn a_cursor_is_tagged_with_its_item() {
        assert_eq!(item_tag("item-1"), item_tag("item-1"));
        assert_ne!(item_tag("item-1"), item_tag("item-2"));
        assert_eq!(item_tag("item-1").len(), 16);
    }
}
