//! A Schwab-compatible sandbox: the OAuth endpoints and the three Trader API endpoints the
//! [`SchwabProvider`](aggregation_core::SchwabProvider) uses, over deterministic demo data,
//! as a `tower::Service`. For tests and demos; it never talks to Schwab.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use aggregation_core::SchwabConfig;
use base64::Engine as _;
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, Utc};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use rand::RngExt as _;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use url::{Url, form_urlencoded};

/// How long an authorization code stays valid.
const CODE_LIFETIME: TimeDelta = TimeDelta::minutes(10);

/// How long an access token stays valid, in seconds (Schwab: 30 minutes).
const ACCESS_TOKEN_SECONDS: i64 = 1800;

/// The largest token request body read.
const MAX_FORM_BODY: usize = 16 * 1024;

/// A security held in the sandbox.
#[derive(Debug, Clone)]
struct Position {
    symbol: String,
    cusip: String,
    description: String,
    asset_type: &'static str,
    instrument_type: &'static str,
    long_quantity: Decimal,
    /// Units sold short (positive, as Schwab reports them).
    short_quantity: Decimal,
    average_price: Decimal,
    price: Decimal,
}

impl Position {
    /// The value from the owner's view: negative for a short position.
    fn market_value(&self) -> Decimal {
        self.long_quantity
            .checked_sub(self.short_quantity)
            .and_then(|quantity| quantity.checked_mul(self.price))
            .unwrap_or(Decimal::MAX)
    }
}

/// One line of a sandbox transaction.
#[derive(Debug, Clone)]
struct TransferItem {
    asset_type: &'static str,
    symbol: String,
    description: String,
    amount: Decimal,
    cost: Decimal,
    price: Option<Decimal>,
    fee_type: Option<&'static str>,
}

impl TransferItem {
    fn fee(fee_type: &'static str, cost: Decimal) -> Self {
        Self {
            asset_type: "CURRENCY",
            symbol: "CURRENCY_USD".to_owned(),
            description: "USD currency".to_owned(),
            amount: Decimal::ZERO,
            cost,
            price: None,
            fee_type: Some(fee_type),
        }
    }

    fn security(position: &Position, amount: Decimal, price: Option<Decimal>) -> Self {
        let cost = price
            .and_then(|price| price.checked_mul(amount))
            .map_or(Decimal::ZERO, |cost| -cost);
        Self {
            asset_type: position.asset_type,
            symbol: position.symbol.clone(),
            description: position.description.clone(),
            amount,
            cost,
            price,
            fee_type: None,
        }
    }

    fn cash(amount: Decimal) -> Self {
        Self {
            asset_type: "CURRENCY",
            symbol: "CURRENCY_USD".to_owned(),
            description: "USD currency".to_owned(),
            amount,
            cost: Decimal::ZERO,
            price: None,
            fee_type: None,
        }
    }
}

/// A sandbox transaction.
#[derive(Debug, Clone)]
struct Transaction {
    activity_id: u64,
    time: DateTime<Utc>,
    kind: &'static str,
    status: &'static str,
    description: String,
    net_amount: Decimal,
    settlement_days: i64,
    items: Vec<TransferItem>,
}

/// A sandbox account.
#[derive(Debug, Clone)]
struct Account {
    number: String,
    hash: String,
    kind: &'static str,
    cash: Decimal,
    positions: Vec<Position>,
    transactions: Vec<Transaction>,
}

/// An issued authorization code.
#[derive(Debug)]
struct IssuedCode {
    redirect_uri: String,
    challenge: Option<String>,
    issued_at: DateTime<Utc>,
    used: bool,
}

#[derive(Debug)]
struct State {
    codes: HashMap<String, IssuedCode>,
    /// Access token → expiry.
    access_tokens: HashMap<String, DateTime<Utc>>,
    refresh_tokens: HashSet<String>,
    /// Refresh tokens already exchanged (rotated away).
    spent_refresh_tokens: HashSet<String>,
    /// How many times a spent refresh token was presented again.
    refresh_token_reuses: usize,
    accounts: Vec<Account>,
    failing: bool,
    token_requests: usize,
}

/// A Schwab-compatible fake API with deterministic demo data, served as a
/// `tower::Service<http::Request<B>>`. Cheap to clone; clones share their state. For tests and
/// demos.
///
/// Paths are relative to the sandbox's root, so a host may mount it under a prefix that it
/// strips. The service never fails: every problem is a JSON error answer.
///
/// ```no_run
/// use aggregation_core::SchwabProvider;
/// use aggregation_sandbox::SchwabSandbox;
///
/// let sandbox = SchwabSandbox::new();
/// // Serve `sandbox.clone()` at http://127.0.0.1:8081, then:
/// let provider = SchwabProvider::new(sandbox.config("http://127.0.0.1:8081"))?;
/// # let _ = provider;
/// # Ok::<(), aggregation_core::providers::ProviderError>(())
/// ```
///
/// Endpoints:
///
/// - `GET /v1/oauth/authorize?response_type=code&client_id&redirect_uri&state[&code_challenge
///   &code_challenge_method=S256]` consents at once: `302` to `redirect_uri?code=…&state=…`.
/// - `POST /v1/oauth/token` (form body, HTTP Basic client authentication) for the
///   `authorization_code` (single-use codes, valid 10 minutes, redirect URI and S256 verifier
///   checked) and `refresh_token` grants. Refresh tokens rotate: each refresh answers a new
///   one and the presented one is spent, so presenting it again is `invalid_grant`.
/// - `GET /trader/v1/accounts/accountNumbers`, `GET /trader/v1/accounts[?fields=positions]`,
///   `GET /trader/v1/accounts/{hashValue}/transactions?startDate&endDate[&types]`, with a
///   bearer access token (valid 30 minutes).
#[derive(Clone)]
pub struct SchwabSandbox {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SchwabSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchwabSandbox").finish_non_exhaustive()
    }
}

impl Default for SchwabSandbox {
    fn default() -> Self {
        Self::new()
    }
}

/// 32 random bytes, base64url without padding: codes and tokens as unguessable as the
/// service's own.
fn random_urlsafe_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn dec(units: i64, scale: u32) -> Decimal {
    Decimal::new(units, scale)
}

/// `SHA-256` of the text, base64url without padding: the S256 PKCE transform.
fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A stable, Schwab-like (64 upper-case hex characters) hash of an account number.
fn account_hash(number: &str) -> String {
    hex::encode_upper(Sha256::digest(
        format!("schwab-sandbox:{number}").as_bytes(),
    ))
}

/// A JSON number with the decimal's value (as the real API sends amounts).
fn number(value: Decimal) -> Value {
    serde_json::Number::from_str(&value.normalize().to_string())
        .map(Value::Number)
        .unwrap_or_else(|_| Value::String(value.to_string()))
}

/// Schwab's timestamp form: `2024-03-05T14:30:00+0000`.
fn timestamp(time: DateTime<Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%S%z").to_string()
}

fn demo_accounts(today: NaiveDate) -> Vec<Account> {
    let at = |days_ago: i64| -> DateTime<Utc> {
        let day = today
            .checked_sub_signed(TimeDelta::days(days_ago))
            .unwrap_or(today);
        day.and_time(NaiveTime::from_hms_opt(14, 30, 0).unwrap_or_default())
            .and_utc()
    };
    let aapl = Position {
        symbol: "AAPL".to_owned(),
        cusip: "037833100".to_owned(),
        description: "APPLE INC".to_owned(),
        asset_type: "EQUITY",
        instrument_type: "COMMON_STOCK",
        long_quantity: dec(50, 0),
        short_quantity: Decimal::ZERO,
        average_price: dec(15025, 2),
        price: dec(19012, 2),
    };
    let vti = Position {
        symbol: "VTI".to_owned(),
        cusip: "922908769".to_owned(),
        description: "VANGUARD TOTAL STOCK MARKET ETF".to_owned(),
        asset_type: "COLLECTIVE_INVESTMENT",
        instrument_type: "EXCHANGE_TRADED_FUND",
        long_quantity: dec(20, 0),
        short_quantity: Decimal::ZERO,
        average_price: dec(21010, 2),
        price: dec(24550, 2),
    };
    let swvxx = Position {
        symbol: "SWVXX".to_owned(),
        cusip: "808515878".to_owned(),
        description: "SCHWAB PRIME ADVANTAGE MONEY INV".to_owned(),
        asset_type: "CASH_EQUIVALENT",
        instrument_type: "MONEY_MARKET_FUND",
        long_quantity: dec(10005, 1),
        short_quantity: Decimal::ZERO,
        average_price: dec(1, 0),
        price: dec(1, 0),
    };
    let msft = Position {
        symbol: "MSFT".to_owned(),
        cusip: "594918104".to_owned(),
        description: "MICROSOFT CORP".to_owned(),
        asset_type: "EQUITY",
        instrument_type: "COMMON_STOCK",
        long_quantity: dec(10, 0),
        short_quantity: Decimal::ZERO,
        average_price: dec(30050, 2),
        price: dec(42045, 2),
    };
    let margin_transactions = vec![
        Transaction {
            activity_id: 90_000_001,
            time: at(55),
            kind: "ACH_RECEIPT",
            status: "VALID",
            description: "ACH DEPOSIT".to_owned(),
            net_amount: dec(5000, 0),
            settlement_days: 0,
            items: vec![TransferItem::cash(dec(5000, 0))],
        },
        Transaction {
            activity_id: 90_000_002,
            time: at(40),
            kind: "TRADE",
            status: "VALID",
            description: "BUY 10 AAPL".to_owned(),
            net_amount: dec(-185565, 2),
            settlement_days: 1,
            items: vec![
                TransferItem::fee("COMMISSION", dec(-65, 2)),
                TransferItem::fee("SEC_FEE", Decimal::ZERO),
                TransferItem::security(&aapl, dec(10, 0), Some(dec(1855, 1))),
            ],
        },
        Transaction {
            activity_id: 90_000_003,
            time: at(20),
            kind: "DIVIDEND_OR_INTEREST",
            status: "VALID",
            description: "VANGUARD TOTAL STOCK MARKET ETF QUALIFIED DIVIDEND".to_owned(),
            net_amount: dec(3210, 2),
            settlement_days: 0,
            items: vec![
                TransferItem::security(&vti, Decimal::ZERO, None),
                TransferItem::cash(dec(3210, 2)),
            ],
        },
        Transaction {
            activity_id: 90_000_004,
            time: at(10),
            kind: "TRADE",
            status: "VALID",
            description: "SELL 5 VTI".to_owned(),
            net_amount: dec(122499, 2),
            settlement_days: 1,
            items: vec![
                TransferItem::fee("SEC_FEE", dec(-1, 2)),
                TransferItem::security(&vti, dec(-5, 0), Some(dec(245, 0))),
            ],
        },
        Transaction {
            activity_id: 90_000_005,
            time: at(1),
            kind: "ACH_DISBURSEMENT",
            status: "PENDING",
            description: "ACH WITHDRAWAL".to_owned(),
            net_amount: dec(-500, 0),
            settlement_days: 0,
            items: vec![TransferItem::cash(dec(-500, 0))],
        },
    ];
    let cash_transactions = vec![
        Transaction {
            activity_id: 90_000_101,
            time: at(50),
            kind: "ACH_RECEIPT",
            status: "VALID",
            description: "ACH DEPOSIT".to_owned(),
            net_amount: dec(3000, 0),
            settlement_days: 0,
            items: vec![TransferItem::cash(dec(3000, 0))],
        },
        Transaction {
            activity_id: 90_000_102,
            time: at(45),
            kind: "TRADE",
            status: "VALID",
            description: "BUY 10 MSFT".to_owned(),
            net_amount: dec(-3005, 0),
            settlement_days: 1,
            items: vec![
                TransferItem::fee("COMMISSION", Decimal::ZERO),
                TransferItem::security(&msft, dec(10, 0), Some(dec(30050, 2))),
            ],
        },
        Transaction {
            activity_id: 90_000_103,
            time: at(15),
            kind: "DIVIDEND_OR_INTEREST",
            status: "VALID",
            description: "MICROSOFT CORP QUALIFIED DIVIDEND".to_owned(),
            net_amount: dec(750, 2),
            settlement_days: 0,
            items: vec![
                TransferItem::security(&msft, Decimal::ZERO, None),
                TransferItem::cash(dec(750, 2)),
            ],
        },
    ];
    vec![
        Account {
            number: "12345678".to_owned(),
            hash: account_hash("12345678"),
            kind: "MARGIN",
            cash: dec(250075, 2),
            positions: vec![aapl, vti, swvxx],
            transactions: margin_transactions,
        },
        Account {
            number: "87654321".to_owned(),
            hash: account_hash("87654321"),
            kind: "CASH",
            cash: dec(1200, 0),
            positions: vec![msft],
            transactions: cash_transactions,
        },
    ]
}

impl SchwabSandbox {
    /// The sandbox's client id (app key).
    pub const CLIENT_ID: &'static str = "sandbox-client";
    /// The sandbox's client secret (app secret).
    pub const CLIENT_SECRET: &'static str = "sandbox-secret";

    /// A sandbox with the demo data: a `MARGIN` account (`12345678`: AAPL, the VTI ETF and the
    /// SWVXX money-market fund) and a `CASH` account (`87654321`: MSFT), each with a handful of
    /// transactions over the last 60 days (deposits, trades with fees, dividends).
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                codes: HashMap::new(),
                access_tokens: HashMap::new(),
                refresh_tokens: HashSet::new(),
                spent_refresh_tokens: HashSet::new(),
                refresh_token_reuses: 0,
                accounts: demo_accounts(Utc::now().date_naive()),
                failing: false,
                token_requests: 0,
            })),
        }
    }

    /// A provider configuration for this sandbox served at `base_url`: slug `schwab-sandbox`,
    /// name `Schwab Sandbox`, the sandbox's client credentials, PKCE on.
    pub fn config(&self, base_url: impl Into<String>) -> SchwabConfig {
        SchwabConfig {
            slug: "schwab-sandbox".to_owned(),
            name: "Schwab Sandbox".to_owned(),
            base_url: base_url.into(),
            client_id: Self::CLIENT_ID.to_owned(),
            client_secret: Self::CLIENT_SECRET.to_owned(),
            use_pkce: true,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// For tests: every refresh token stops working (the next refresh is `invalid_grant`).
    pub fn revoke_refresh_tokens(&self) {
        self.lock().refresh_tokens.clear();
    }

    /// For tests: every access token issued so far expires now (data calls answer 401).
    pub fn expire_access_tokens(&self) {
        self.lock().access_tokens.clear();
    }

    /// For tests: removes the position with this symbol (from the first account holding it);
    /// whether there was one.
    pub fn remove_position(&self, symbol: &str) -> bool {
        let mut state = self.lock();
        for account in &mut state.accounts {
            if let Some(index) = account.positions.iter().position(|p| p.symbol == symbol) {
                account.positions.remove(index);
                return true;
            }
        }
        false
    }

    /// For tests: sets the quantity of the position with this symbol (in the first account
    /// holding it); whether there was one.
    pub fn set_position_quantity(&self, symbol: &str, quantity: Decimal) -> bool {
        let mut state = self.lock();
        let position = state
            .accounts
            .iter_mut()
            .flat_map(|account| account.positions.iter_mut())
            .find(|position| position.symbol == symbol);
        match position {
            Some(position) => {
                position.long_quantity = quantity;
                true
            }
            None => false,
        }
    }

    /// For tests: turns the position with this symbol (in the first account holding it) into
    /// a short one of `quantity` units (positive, as Schwab reports short quantities; its
    /// `marketValue` is then reported positive too, and the account's liquidation value drops
    /// by it); whether there was one.
    pub fn set_short_quantity(&self, symbol: &str, quantity: Decimal) -> bool {
        let mut state = self.lock();
        let position = state
            .accounts
            .iter_mut()
            .flat_map(|account| account.positions.iter_mut())
            .find(|position| position.symbol == symbol);
        match position {
            Some(position) => {
                position.long_quantity = Decimal::ZERO;
                position.short_quantity = quantity;
                true
            }
            None => false,
        }
    }

    /// For tests: adds a settled cash transaction dated now to the account at `account_index`
    /// (0: the margin account, 1: the cash account): an `ACH_RECEIPT` for a positive amount,
    /// an `ACH_DISBURSEMENT` otherwise. An existing activity id is replaced. Whether the
    /// account exists.
    pub fn add_transaction(
        &self,
        account_index: usize,
        activity_id: u64,
        net_amount: Decimal,
        description: &str,
    ) -> bool {
        let mut state = self.lock();
        let Some(account) = state.accounts.get_mut(account_index) else {
            return false;
        };
        account
            .transactions
            .retain(|transaction| transaction.activity_id != activity_id);
        account.transactions.push(Transaction {
            activity_id,
            time: Utc::now(),
            kind: if net_amount.is_sign_positive() {
                "ACH_RECEIPT"
            } else {
                "ACH_DISBURSEMENT"
            },
            status: "VALID",
            description: description.to_owned(),
            net_amount,
            settlement_days: 0,
            items: vec![TransferItem::cash(net_amount)],
        });
        true
    }

    /// For tests: while `true`, the data endpoints answer `500`.
    pub fn set_failing(&self, failing: bool) {
        self.lock().failing = failing;
    }

    /// For tests: how many times a refresh token that was already exchanged (each is good for
    /// one refresh: the answer carries its successor) was presented again. Such a request is
    /// refused with `invalid_grant`.
    pub fn refresh_token_reuses(&self) -> usize {
        self.lock().refresh_token_reuses
    }

    /// For tests: how many requests the token endpoint has received.
    pub fn token_requests(&self) -> usize {
        self.lock().token_requests
    }

    /// For tests: issues an authorization code as the authorize endpoint would, without the
    /// redirect. `code_challenge` is an S256 challenge.
    pub fn issue_code(&self, redirect_uri: &str, code_challenge: Option<&str>) -> String {
        let code = random_urlsafe_token();
        let now = Utc::now();
        let mut state = self.lock();
        state
            .codes
            .retain(|_, issued| now - issued.issued_at < CODE_LIFETIME);
        state.codes.insert(
            code.clone(),
            IssuedCode {
                redirect_uri: redirect_uri.to_owned(),
                challenge: code_challenge.map(str::to_owned),
                issued_at: now,
                used: false,
            },
        );
        code
    }

    /// The hash values of the accounts, in order (0: margin, 1: cash). For tests.
    pub fn account_hashes(&self) -> Vec<String> {
        self.lock()
            .accounts
            .iter()
            .map(|account| account.hash.clone())
            .collect()
    }
}

impl<B> tower::Service<Request<B>> for SchwabSandbox
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let sandbox = self.clone();
        Box::pin(async move { Ok(sandbox.handle(request).await) })
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response<Full<Bytes>> {
    json_response(
        status,
        &json!({ "error": error, "error_description": description }),
    )
}

fn api_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json_response(
        status,
        &json!({
            "message": message,
            "errors": [{ "status": status.as_u16().to_string(), "title": message }],
        }),
    )
}

fn query_pairs(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// The client id and secret of an HTTP Basic header (each form-url-decoded, RFC 6749 §2.3.1).
fn basic_credentials(headers: &http::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let unescape = |text: &str| -> String {
        form_urlencoded::parse(format!("x={text}").as_bytes())
            .next()
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default()
    };
    Some((unescape(id), unescape(secret)))
}

fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|token| !token.is_empty())
}

fn parse_instant(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|time| time.with_timezone(&Utc))
}

impl SchwabSandbox {
    async fn handle<B>(&self, request: Request<B>) -> Response<Full<Bytes>>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path().trim_end_matches('/');
        let query = parts.uri.query();
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        match (segments.as_slice(), &parts.method) {
            (["v1", "oauth", "authorize"], &Method::GET) => self.authorize(query),
            (["v1", "oauth", "token"], &Method::POST) => {
                self.lock().token_requests += 1;
                let form = match Limited::new(body, MAX_FORM_BODY).collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(_) => {
                        return oauth_error(
                            StatusCode::BAD_REQUEST,
                            "invalid_request",
                            "the request body could not be read",
                        );
                    }
                };
                self.token(&parts.headers, &form)
            }
            (["trader", "v1", "accounts", "accountNumbers"], &Method::GET) => {
                self.data(&parts.headers, |state| {
                    let numbers: Vec<Value> = state
                        .accounts
                        .iter()
                        .map(|a| json!({ "accountNumber": a.number, "hashValue": a.hash }))
                        .collect();
                    Ok(Value::Array(numbers))
                })
            }
            (["trader", "v1", "accounts"], &Method::GET) => {
                let with_positions = query_pairs(query)
                    .get("fields")
                    .is_some_and(|fields| fields.split(',').any(|f| f.trim() == "positions"));
                self.data(&parts.headers, |state| {
                    let accounts: Vec<Value> = state
                        .accounts
                        .iter()
                        .map(|a| account_json(a, with_positions))
                        .collect();
                    Ok(Value::Array(accounts))
                })
            }
            (["trader", "v1", "accounts", hash, "transactions"], &Method::GET) => {
                let hash = (*hash).to_owned();
                let query = query_pairs(query);
                self.data(&parts.headers, move |state| {
                    transactions_json(state, &hash, &query)
                })
            }
            (
                ["v1", "oauth", "authorize" | "token"]
                | ["trader", "v1", "accounts"]
                | ["trader", "v1", "accounts", "accountNumbers"]
                | ["trader", "v1", "accounts", _, "transactions"],
                _,
            ) => api_error(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed"),
            _ => api_error(StatusCode::NOT_FOUND, "Not found"),
        }
    }

    fn authorize(&self, query: Option<&str>) -> Response<Full<Bytes>> {
        let query = query_pairs(query);
        let get = |name: &str| query.get(name).map(String::as_str).unwrap_or_default();
        if get("client_id") != Self::CLIENT_ID {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_client",
                "unknown client_id",
            );
        }
        let Ok(mut location) = Url::parse(get("redirect_uri")) else {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "redirect_uri must be an absolute URL",
            );
        };
        if get("response_type") != "code" {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_response_type",
                "response_type must be code",
            );
        }
        let challenge = query.get("code_challenge").map(String::as_str);
        if let Some(challenge) = challenge {
            if get("code_challenge_method") != "S256" {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "code_challenge_method must be S256",
                );
            }
            if challenge.is_empty() {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "code_challenge is empty",
                );
            }
        }
        let code = self.issue_code(get("redirect_uri"), challenge);
        {
            let mut pairs = location.query_pairs_mut();
            pairs.append_pair("code", &code);
            if let Some(state) = query.get("state") {
                pairs.append_pair("state", state);
            }
        }
        let Ok(value) = HeaderValue::from_str(location.as_str()) else {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "redirect_uri is not usable",
            );
        };
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = StatusCode::FOUND;
        response.headers_mut().insert(header::LOCATION, value);
        response
    }

    fn token(&self, headers: &http::HeaderMap, form: &[u8]) -> Response<Full<Bytes>> {
        let authenticated = basic_credentials(headers)
            .is_some_and(|(id, secret)| id == Self::CLIENT_ID && secret == Self::CLIENT_SECRET);
        if !authenticated {
            return oauth_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                "client authentication failed",
            );
        }
        let form: HashMap<String, String> = form_urlencoded::parse(form).into_owned().collect();
        let get = |name: &str| form.get(name).map(String::as_str);
        let now = Utc::now();
        let mut state = self.lock();
        match get("grant_type") {
            Some("authorization_code") => {
                let Some(code) = get("code").and_then(|code| state.codes.get_mut(code)) else {
                    return invalid_grant("unknown authorization code");
                };
                if code.used {
                    return invalid_grant("the authorization code was used already");
                }
                code.used = true;
                if now - code.issued_at >= CODE_LIFETIME {
                    return invalid_grant("the authorization code expired");
                }
                if get("redirect_uri") != Some(code.redirect_uri.as_str()) {
                    return invalid_grant("redirect_uri does not match the authorization");
                }
                if let Some(challenge) = &code.challenge {
                    match get("code_verifier") {
                        Some(verifier) if s256(verifier) == *challenge => {}
                        Some(_) => return invalid_grant("code_verifier does not match"),
                        None => return invalid_grant("code_verifier is missing"),
                    }
                }
                issue_tokens(&mut state, now)
            }
            Some("refresh_token") => {
                let Some(token) = get("refresh_token") else {
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_request",
                        "refresh_token is missing",
                    );
                };
                if !state.refresh_tokens.remove(token) {
                    if state.spent_refresh_tokens.contains(token) {
                        state.refresh_token_reuses += 1;
                        return invalid_grant("the refresh token was used already");
                    }
                    return invalid_grant("unknown or revoked refresh token");
                }
                state.spent_refresh_tokens.insert(token.to_owned());
                issue_tokens(&mut state, now)
            }
            _ => oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "grant_type must be authorization_code or refresh_token",
            ),
        }
    }

    /// Answers a data endpoint: `500` while failing, `401` without a live access token, else
    /// the JSON the closure builds.
    fn data(
        &self,
        headers: &http::HeaderMap,
        answer: impl FnOnce(&State) -> Result<Value, (StatusCode, String)>,
    ) -> Response<Full<Bytes>> {
        let state = self.lock();
        if state.failing {
            return api_error(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error");
        }
        let live = bearer_token(headers)
            .and_then(|token| state.access_tokens.get(token))
            .is_some_and(|expires| *expires > Utc::now());
        if !live {
            return api_error(StatusCode::UNAUTHORIZED, "Unauthorized");
        }
        match answer(&state) {
            Ok(body) => json_response(StatusCode::OK, &body),
            Err((status, message)) => api_error(status, &message),
        }
    }
}

fn invalid_grant(description: &str) -> Response<Full<Bytes>> {
    oauth_error(StatusCode::BAD_REQUEST, "invalid_grant", description)
}

fn issue_tokens(state: &mut State, now: DateTime<Utc>) -> Response<Full<Bytes>> {
    let access_token = random_urlsafe_token();
    let refresh_token = random_urlsafe_token();
    state.access_tokens.retain(|_, expires| *expires > now);
    state.access_tokens.insert(
        access_token.clone(),
        now + TimeDelta::seconds(ACCESS_TOKEN_SECONDS),
    );
    state.refresh_tokens.insert(refresh_token.clone());
    json_response(
        StatusCode::OK,
        &json!({
            "access_token": access_token,
            "refresh_token": refresh_token,
            "token_type": "Bearer",
            "expires_in": ACCESS_TOKEN_SECONDS,
            "scope": "api",
            "id_token": "sandbox-id-token",
        }),
    )
}

fn account_json(account: &Account, with_positions: bool) -> Value {
    let market_value = account
        .positions
        .iter()
        .fold(Decimal::ZERO, |sum, position| {
            sum.checked_add(position.market_value()).unwrap_or(sum)
        });
    let liquidation = account
        .cash
        .checked_add(market_value)
        .unwrap_or(account.cash);
    let mut balances = json!({
        "accruedInterest": 0,
        "cashBalance": number(account.cash),
        "cashReceipts": 0,
        "longMarketValue": number(market_value),
        "liquidationValue": number(liquidation),
        "moneyMarketFund": 0,
        "pendingDeposits": 0,
        "savings": 0,
    });
    if account.kind == "MARGIN" {
        balances["availableFunds"] = number(account.cash);
        balances["buyingPower"] = number(account.cash.checked_mul(dec(2, 0)).unwrap_or_default());
        balances["equity"] = number(liquidation);
    } else {
        balances["cashAvailableForTrading"] = number(account.cash);
        balances["cashAvailableForWithdrawal"] = number(account.cash);
        balances["totalCash"] = number(account.cash);
    }
    let mut securities = json!({
        "type": account.kind,
        "accountNumber": account.number,
        "roundTrips": 0,
        "isDayTrader": false,
        "isClosingOnlyRestricted": false,
        "pfcbFlag": false,
        "initialBalances": { "cashBalance": number(account.cash) },
        "currentBalances": balances,
        "projectedBalances": {},
    });
    if with_positions {
        securities["positions"] = account.positions.iter().map(position_json).collect();
    }
    json!({
        "securitiesAccount": securities,
        "aggregatedBalance": {
            "currentLiquidationValue": number(liquidation),
            "liquidationValue": number(liquidation),
        },
    })
}

fn position_json(position: &Position) -> Value {
    let market_value = position.market_value();
    let cost = position
        .average_price
        .checked_mul(position.long_quantity)
        .unwrap_or_default();
    let short_proceeds = position
        .average_price
        .checked_mul(position.short_quantity)
        .unwrap_or_default();
    let mut value = json!({
        "shortQuantity": number(position.short_quantity),
        "averagePrice": number(position.average_price),
        "currentDayProfitLoss": 0,
        "currentDayProfitLossPercentage": 0,
        "longQuantity": number(position.long_quantity),
        "settledLongQuantity": number(position.long_quantity),
        "settledShortQuantity": number(position.short_quantity),
        "instrument": {
            "assetType": position.asset_type,
            "cusip": position.cusip,
            "symbol": position.symbol,
            "description": position.description,
            "type": position.instrument_type,
            "netChange": 0,
        },
        // Reported as a magnitude, short positions included.
        "marketValue": number(market_value.abs()),
        "maintenanceRequirement": 0,
        "averageLongPrice": number(position.average_price),
        "longOpenProfitLoss": number(market_value.checked_sub(cost).unwrap_or_default()),
        "previousSessionLongQuantity": number(position.long_quantity),
        "currentDayCost": 0,
    });
    if !position.short_quantity.is_zero() {
        value["averageShortPrice"] = number(position.average_price);
        value["shortOpenProfitLoss"] =
            number(short_proceeds.checked_add(market_value).unwrap_or_default());
    }
    value
}

fn transaction_json(account: &Account, transaction: &Transaction) -> Value {
    let settlement = transaction
        .time
        .date_naive()
        .checked_add_signed(TimeDelta::days(transaction.settlement_days))
        .unwrap_or(transaction.time.date_naive());
    let items: Vec<Value> = transaction
        .items
        .iter()
        .map(|item| {
            let mut value = json!({
                "instrument": {
                    "assetType": item.asset_type,
                    "status": "ACTIVE",
                    "symbol": item.symbol,
                    "description": item.description,
                },
                "amount": number(item.amount),
                "cost": number(item.cost),
            });
            if let Some(price) = item.price {
                value["price"] = number(price);
            }
            if let Some(fee_type) = item.fee_type {
                value["feeType"] = json!(fee_type);
            }
            value
        })
        .collect();
    json!({
        "activityId": transaction.activity_id,
        "time": timestamp(transaction.time),
        "description": transaction.description,
        "accountNumber": account.number,
        "type": transaction.kind,
        "status": transaction.status,
        "subAccount": "CASH",
        "tradeDate": timestamp(transaction.time),
        "settlementDate": format!("{settlement}T05:00:00+0000"),
        "netAmount": number(transaction.net_amount),
        "activityType": if transaction.kind == "TRADE" { "EXECUTION" } else { "TRANSFER" },
        "transferItems": items,
    })
}

fn transactions_json(
    state: &State,
    hash: &str,
    query: &HashMap<String, String>,
) -> Result<Value, (StatusCode, String)> {
    let Some(account) = state.accounts.iter().find(|account| account.hash == hash) else {
        return Err((StatusCode::NOT_FOUND, "Account not found".to_owned()));
    };
    let bound = |name: &str| -> Result<DateTime<Utc>, (StatusCode, String)> {
        query
            .get(name)
            .and_then(|text| parse_instant(text))
            .ok_or_else(|| {
                (
                    StatusCode::BAD_REQUEST,
                    format!("{name} must be an ISO-8601 date-time"),
                )
            })
    };
    let (start, end) = (bound("startDate")?, bound("endDate")?);
    let types: Option<HashSet<&str>> = query
        .get("types")
        .map(|types| types.split(',').map(str::trim).collect());
    let mut matching: Vec<&Transaction> = account
        .transactions
        .iter()
        .filter(|t| t.time >= start && t.time <= end)
        .filter(|t| types.as_ref().is_none_or(|types| types.contains(t.kind)))
        .collect();
    matching.sort_by_key(|t| std::cmp::Reverse(t.time));
    Ok(matching
        .into_iter()
        .map(|transaction| transaction_json(account, transaction))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    async fn call(
        sandbox: &SchwabSandbox,
        request: Request<Full<Bytes>>,
    ) -> (StatusCode, http::HeaderMap, Value) {
        let response = sandbox.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        (parts.status, parts.headers, value)
    }

    fn get(uri: &str) -> Request<Full<Bytes>> {
        Request::get(uri).body(Full::default()).unwrap()
    }

    fn basic() -> String {
        let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            SchwabSandbox::CLIENT_ID,
            SchwabSandbox::CLIENT_SECRET
        ));
        format!("Basic {credentials}")
    }

    fn token_request(form: &str, authorization: Option<&str>) -> Request<Full<Bytes>> {
        let mut builder = Request::post("/v1/oauth/token")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(authorization) = authorization {
            builder = builder.header(header::AUTHORIZATION, authorization);
        }
        builder
            .body(Full::new(Bytes::from(form.to_owned())))
            .unwrap()
    }

    #[test]
    fn s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[tokio::test]
    async fn authorize_redirects_with_code_and_state() {
        let sandbox = SchwabSandbox::new();
        let (status, headers, _) = call(
            &sandbox,
            get(
                "/v1/oauth/authorize?response_type=code&client_id=sandbox-client\
                 &redirect_uri=https%3A%2F%2Fapp.example%2Fcb%3Fx%3D1&state=a%20b%26c",
            ),
        )
        .await;
        assert_eq!(status, StatusCode::FOUND);
        let location = Url::parse(headers[header::LOCATION].to_str().unwrap()).unwrap();
        assert_eq!(location.host_str(), Some("app.example"));
        assert_eq!(location.path(), "/cb");
        let pairs = query_pairs(location.query());
        assert_eq!(pairs["x"], "1");
        assert_eq!(pairs["state"], "a b&c");
        assert_eq!(pairs["code"].len(), 43);
    }

    #[tokio::test]
    async fn authorize_refuses_bad_requests() {
        let sandbox = SchwabSandbox::new();
        for uri in [
            "/v1/oauth/authorize?response_type=code&client_id=other&redirect_uri=https://a.b/",
            "/v1/oauth/authorize?response_type=code&client_id=sandbox-client",
            "/v1/oauth/authorize?response_type=token&client_id=sandbox-client&redirect_uri=https://a.b/",
            "/v1/oauth/authorize?response_type=code&client_id=sandbox-client&redirect_uri=https://a.b/&code_challenge=x&code_challenge_method=plain",
            "/v1/oauth/authorize",
        ] {
            let (status, _, body) = call(&sandbox, get(uri)).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
            assert!(body["error"].is_string(), "{uri}");
        }
    }

    #[tokio::test]
    async fn token_endpoint_requires_client_authentication() {
        let sandbox = SchwabSandbox::new();
        let code = sandbox.issue_code("https://a.b/", None);
        let form =
            format!("grant_type=authorization_code&code={code}&redirect_uri=https%3A%2F%2Fa.b%2F");
        let wrong = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("sandbox-client:nope")
        );
        for authorization in [
            None,
            Some(wrong.as_str()),
            Some("Basic !!!"),
            Some("Bearer x"),
        ] {
            let (status, _, body) = call(&sandbox, token_request(&form, authorization)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert_eq!(body["error"], "invalid_client");
        }
        let (status, _, body) = call(&sandbox, token_request(&form, Some(&basic()))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["token_type"], "Bearer");
        assert_eq!(body["expires_in"], 1800);
        assert_eq!(sandbox.token_requests(), 5);
    }

    #[tokio::test]
    async fn token_endpoint_checks_the_grant() {
        let sandbox = SchwabSandbox::new();
        let code = sandbox.issue_code("https://a.b/", None);
        for form in [
            "grant_type=authorization_code&code=unknown&redirect_uri=https%3A%2F%2Fa.b%2F"
                .to_owned(),
            format!(
                "grant_type=authorization_code&code={code}&redirect_uri=https%3A%2F%2Fother%2F"
            ),
            // The failed attempt used the code up.
            format!("grant_type=authorization_code&code={code}&redirect_uri=https%3A%2F%2Fa.b%2F"),
            "grant_type=refresh_token&refresh_token=unknown".to_owned(),
        ] {
            let (status, _, body) = call(&sandbox, token_request(&form, Some(&basic()))).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{form}");
            assert_eq!(body["error"], "invalid_grant", "{form}");
        }
        let (status, _, body) = call(
            &sandbox,
            token_request("grant_type=password", Some(&basic())),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"], "unsupported_grant_type");
    }

    #[tokio::test]
    async fn refresh_tokens_rotate_and_a_spent_one_is_refused() {
        let sandbox = SchwabSandbox::new();
        let code = sandbox.issue_code("https://a.b/", None);
        let form =
            format!("grant_type=authorization_code&code={code}&redirect_uri=https%3A%2F%2Fa.b%2F");
        let (_, _, first) = call(&sandbox, token_request(&form, Some(&basic()))).await;
        let first = first["refresh_token"].as_str().unwrap().to_owned();
        let refresh = |token: &str| format!("grant_type=refresh_token&refresh_token={token}");
        let (status, _, second) =
            call(&sandbox, token_request(&refresh(&first), Some(&basic()))).await;
        assert_eq!(status, StatusCode::OK);
        let second = second["refresh_token"].as_str().unwrap().to_owned();
        assert_ne!(first, second);
        assert_eq!(sandbox.refresh_token_reuses(), 0);
        let (status, _, body) =
            call(&sandbox, token_request(&refresh(&first), Some(&basic()))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"], "invalid_grant");
        assert_eq!(sandbox.refresh_token_reuses(), 1);
        let (status, _, _) = call(&sandbox, token_request(&refresh(&second), Some(&basic()))).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn expired_codes_are_refused() {
        let sandbox = SchwabSandbox::new();
        let code = sandbox.issue_code("https://a.b/", None);
        if let Some(issued) = sandbox.lock().codes.get_mut(&code) {
            issued.issued_at -= TimeDelta::minutes(11);
        }
        let form =
            format!("grant_type=authorization_code&code={code}&redirect_uri=https%3A%2F%2Fa.b%2F");
        let (status, _, body) = call(&sandbox, token_request(&form, Some(&basic()))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error_description"], "the authorization code expired");
    }

    #[tokio::test]
    async fn unknown_paths_methods_and_garbage() {
        let sandbox = SchwabSandbox::new();
        let (status, _, body) = call(&sandbox, get("/nope")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["message"], "Not found");
        let (status, _, _) = call(&sandbox, get("/v1/oauth/token")).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        let (status, _, _) = call(&sandbox, get("/trader/v1/accounts/x/y/z")).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _, _) = call(&sandbox, get("/trader/v1/accounts")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let huge = "a".repeat(MAX_FORM_BODY + 1);
        let (status, _, body) = call(&sandbox, token_request(&huge, Some(&basic()))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"], "invalid_request");
        let garbage = token_request("%%%&&==\u{0}grant_type", Some(&basic()));
        let (status, _, _) = call(&sandbox, garbage).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn data_endpoints_need_a_live_token_and_filter_by_date() {
        let sandbox = SchwabSandbox::new();
        let code = sandbox.issue_code("https://a.b/", None);
        let form =
            format!("grant_type=authorization_code&code={code}&redirect_uri=https%3A%2F%2Fa.b%2F");
        let (_, _, tokens) = call(&sandbox, token_request(&form, Some(&basic()))).await;
        let bearer = format!("Bearer {}", tokens["access_token"].as_str().unwrap());
        let authorized = |uri: &str| {
            Request::get(uri)
                .header(header::AUTHORIZATION, bearer.as_str())
                .body(Full::default())
                .unwrap()
        };
        let (status, _, accounts) = call(&sandbox, authorized("/trader/v1/accounts")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(accounts[0]["securitiesAccount"].get("positions").is_none());
        let (_, _, accounts) =
            call(&sandbox, authorized("/trader/v1/accounts?fields=positions")).await;
        assert_eq!(
            accounts[0]["securitiesAccount"]["positions"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        assert_eq!(
            accounts[1]["securitiesAccount"]["positions"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            accounts[0]["securitiesAccount"]["positions"][0]["averagePrice"],
            json!(150.25)
        );

        let hash = &sandbox.account_hashes()[0];
        let today = Utc::now().date_naive();
        let range = |from: i64, to: i64| {
            format!(
                "/trader/v1/accounts/{hash}/transactions?startDate={}T00:00:00.000Z&endDate={}T23:59:59.999Z",
                today - TimeDelta::days(from),
                today - TimeDelta::days(to)
            )
        };
        let (status, _, all) = call(&sandbox, authorized(&range(60, 0))).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(all.as_array().unwrap().len(), 5);
        let (_, _, some) = call(&sandbox, authorized(&range(45, 15))).await;
        let ids: Vec<&Value> = some
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["activityId"])
            .collect();
        assert_eq!(ids, [&json!(90_000_003), &json!(90_000_002)]);
        let (_, _, trades) = call(
            &sandbox,
            authorized(&format!("{}&types=TRADE", range(60, 0))),
        )
        .await;
        assert_eq!(trades.as_array().unwrap().len(), 2);
        let (status, _, _) = call(
            &sandbox,
            authorized(&format!(
                "/trader/v1/accounts/{hash}/transactions?startDate=yesterday"
            )),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let (status, _, _) = call(
            &sandbox,
            authorized("/trader/v1/accounts/UNKNOWN/transactions?startDate=2024-01-01T00:00:00Z&endDate=2024-01-02T00:00:00Z"),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        sandbox.set_failing(true);
        let (status, _, _) = call(&sandbox, authorized("/trader/v1/accounts/accountNumbers")).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        sandbox.set_failing(false);
        sandbox.expire_access_tokens();
        let (status, _, _) = call(&sandbox, authorized("/trader/v1/accounts/accountNumbers")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn test_controls() {
        let sandbox = SchwabSandbox::new();
        assert!(sandbox.set_position_quantity("MSFT", dec(7, 0)));
        assert!(!sandbox.set_position_quantity("NOPE", dec(7, 0)));
        assert!(sandbox.remove_position("VTI"));
        assert!(!sandbox.remove_position("VTI"));
        assert!(sandbox.add_transaction(1, 1, dec(-5, 0), "withdrawal"));
        assert!(!sandbox.add_transaction(2, 1, dec(5, 0), "nowhere"));
        let state = sandbox.lock();
        assert_eq!(state.accounts[1].positions[0].long_quantity, dec(7, 0));
        assert_eq!(state.accounts[0].positions.len(), 2);
        assert_eq!(state.accounts[1].transactions.len(), 4);
        assert_eq!(state.accounts[1].transactions[3].kind, "ACH_DISBURSEMENT");
    }
}
