//! A Plaid-compatible API: the endpoints the
//! [`PlaidProvider`](aggregation_core::providers::PlaidProvider) uses, over deterministic demo
//! data, as a `tower::Service`. For tests and demos; it never talks to Plaid.
//!
//! - Every API call checks `client_id` and `secret` ([`PlaidSandbox::CLIENT_ID`],
//!   [`PlaidSandbox::SECRET`]) and answers Plaid's error body (`INVALID_API_KEYS`) otherwise.
//! - `POST /link/token/create` answers a link token; `GET /link?token=…` is the Link page:
//!   signing in with `user_good` / `pass_good` finishes with a public token to post to
//!   `POST /api/v1/providers/callback` (in update mode, no token is needed).
//!   `POST /sandbox/public_token/create` makes one without the page, as Plaid's sandbox does.
//! - `POST /item/public_token/exchange`, `/accounts/get` (checking, savings, a credit card, a
//!   brokerage account), `/investments/holdings/get`, `/item/remove`.
//! - `POST /transactions/sync` pages the item's feed three rows at a time. Each time a sync
//!   reaches the end of the feed, the item moves one step on: first the pending coffee posts
//!   (a new id linked by `pending_transaction_id`, with a tip) and the grocery row is
//!   modified; then a duplicate charge is removed and new rows arrive, and the first sync that
//!   pages through that step is answered `TRANSACTIONS_SYNC_MUTATION_DURING_PAGINATION` once.
//! - Webhooks: `POST /sandbox/item/fire_webhook` (or the page's buttons) sends one to the
//!   item's webhook URL, signed with the sandbox's own ES256 key, whose public half
//!   `/webhook_verification_key/get` serves. The key is sandbox-only and published on purpose.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use aggregation_core::providers::PlaidConfig;
use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use rand::RngExt as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use url::form_urlencoded;

/// The webhook signing key (P-256), sandbox-only.
const WEBHOOK_KEY_PEM: &str = include_str!("../keys/plaid-sandbox-webhook-private.pem");
/// Its public point.
const WEBHOOK_KEY_X: &str = "pQUi0TmGQQdrdsoJnW0OVNp6mkzv8MC4DT_kDYia3IE";
const WEBHOOK_KEY_Y: &str = "VhKgygYhJbA83v9W6Mr2pDeLE5bTDFAZIcvkNGqOVxY";
/// Its key id.
const WEBHOOK_KID: &str = "plaid-sandbox-key-1";
/// Rows per `/transactions/sync` page, whatever `count` asks.
const PAGE: usize = 3;
/// Largest request body read.
const MAX_BODY: usize = 64 * 1024;

/// One change of an item's feed.
#[derive(Debug, Clone)]
enum Change {
    Added(Value),
    Modified(Value),
    Removed(&'static str, &'static str),
}

#[derive(Debug, Clone)]
struct Item {
    item_id: String,
    access_token: String,
    webhook: Option<String>,
    /// How far the feed has moved (0, 1 or 2).
    step: usize,
    /// Whether the mutation of step 2 was answered.
    mutated: bool,
    removed: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Link tokens: the webhook they carry and, in update mode, the item's access token.
    link_tokens: HashMap<String, (Option<String>, Option<String>)>,
    /// Public tokens not exchanged yet, with the webhook of their link token.
    public_tokens: HashMap<String, Option<String>>,
    items: Vec<Item>,
    /// Path of every API call, in order.
    requests: Vec<String>,
}

/// The Plaid-compatible sandbox API. Cheap to clone; clones share their state.
#[derive(Debug, Clone)]
pub struct PlaidSandbox {
    base: Arc<String>,
    state: Arc<Mutex<State>>,
    http: reqwest::Client,
}

fn word(prefix: &str) -> String {
    let mut rng = rand::rng();
    let tail: String = (0..24)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)]))
        .collect();
    format!("{prefix}-sandbox-{tail}")
}

/// A transaction of the feed, dated `days_ago` days before today.
#[expect(
    clippy::too_many_arguments,
    reason = "one demo row, every field named at the call"
)]
fn row(
    id: &str,
    account: &str,
    amount: f64,
    days_ago: i64,
    name: &str,
    merchant: Option<&str>,
    category: (&str, &str),
    pending: bool,
) -> Value {
    let date = (Utc::now().date_naive() - TimeDelta::days(days_ago)).to_string();
    json!({
        "transaction_id": id,
        "account_id": account,
        "amount": amount,
        "iso_currency_code": "USD",
        "unofficial_currency_code": null,
        "date": date,
        "authorized_date": date,
        "name": name,
        "merchant_name": merchant,
        "pending": pending,
        "pending_transaction_id": null,
        "payment_channel": "in store",
        "personal_finance_category": {"primary": category.0, "detailed": category.1, "confidence_level": "HIGH"},
    })
}

/// The feed of an item at `step`: the first rows, then each step's changes.
fn feed(step: usize) -> Vec<Change> {
    let mut log = vec![
        Change::Added(row(
            "sbx-pay",
            "sbx-checking",
            -2450.0,
            14,
            "ACME CORP PAYROLL",
            Some("Acme Corp"),
            ("INCOME", "INCOME_WAGES"),
            false,
        )),
        Change::Added(row(
            "sbx-rent",
            "sbx-checking",
            1650.0,
            12,
            "MAPLE APARTMENTS RENT",
            None,
            ("RENT_AND_UTILITIES", "RENT_AND_UTILITIES_RENT"),
            false,
        )),
        Change::Added(row(
            "sbx-coffee-p",
            "sbx-checking",
            4.75,
            1,
            "BLUE BOTTLE COFFEE 0423",
            Some("Blue Bottle Coffee"),
            ("FOOD_AND_DRINK", "FOOD_AND_DRINK_COFFEE"),
            true,
        )),
        Change::Added(row(
            "sbx-grocery",
            "sbx-checking",
            84.12,
            3,
            "CORNER GROCERY #12",
            Some("Corner Grocery"),
            ("FOOD_AND_DRINK", "FOOD_AND_DRINK_GROCERIES"),
            false,
        )),
        Change::Added(row(
            "sbx-fuel",
            "sbx-card",
            45.0,
            5,
            "SHELL OIL 57444",
            Some("Shell"),
            ("TRANSPORTATION", "TRANSPORTATION_GAS"),
            false,
        )),
        Change::Added(row(
            "sbx-dup",
            "sbx-card",
            19.99,
            6,
            "STREAMFLIX.COM",
            Some("Streamflix"),
            ("ENTERTAINMENT", "ENTERTAINMENT_TV_AND_MOVIES"),
            false,
        )),
    ];
    if step >= 1 {
        let mut posted = row(
            "sbx-coffee",
            "sbx-checking",
            5.5,
            1,
            "BLUE BOTTLE COFFEE 0423",
            Some("Blue Bottle Coffee"),
            ("FOOD_AND_DRINK", "FOOD_AND_DRINK_COFFEE"),
            false,
        );
        posted["pending_transaction_id"] = json!("sbx-coffee-p");
        log.push(Change::Added(posted));
        log.push(Change::Removed("sbx-checking", "sbx-coffee-p"));
        log.push(Change::Modified(row(
            "sbx-grocery",
            "sbx-checking",
            86.4,
            3,
            "CORNER GROCERY #12",
            Some("Corner Grocery"),
            ("FOOD_AND_DRINK", "FOOD_AND_DRINK_GROCERIES"),
            false,
        )));
    }
    if step >= 2 {
        log.push(Change::Removed("sbx-card", "sbx-dup"));
        log.push(Change::Added(row(
            "sbx-lunch-p",
            "sbx-card",
            18.2,
            0,
            "TST* NOODLE BAR",
            Some("Noodle Bar"),
            ("FOOD_AND_DRINK", "FOOD_AND_DRINK_RESTAURANT"),
            true,
        )));
        log.push(Change::Added(row(
            "sbx-interest",
            "sbx-savings",
            -1.23,
            0,
            "INTEREST PAYMENT",
            None,
            ("INCOME", "INCOME_INTEREST_EARNED"),
            false,
        )));
        log.push(Change::Added(row(
            "sbx-card-pay",
            "sbx-card",
            -200.0,
            0,
            "PAYMENT THANK YOU",
            None,
            ("LOAN_PAYMENTS", "LOAN_PAYMENTS_CREDIT_CARD_PAYMENT"),
            false,
        )));
    }
    log
}

/// Where step 2's changes start in the feed.
fn step_two_start() -> usize {
    feed(1).len()
}

impl PlaidSandbox {
    /// The `client_id` the sandbox accepts.
    pub const CLIENT_ID: &'static str = "sandbox-client-id";
    /// The `secret` the sandbox accepts.
    pub const SECRET: &'static str = "sandbox-secret";
    /// The Link page's user name.
    pub const USERNAME: &'static str = "user_good";
    /// The Link page's password.
    pub const PASSWORD: &'static str = "pass_good";

    /// A sandbox served at `base_url` (`http://127.0.0.1:8080/sandbox/plaid`).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base: Arc::new(base_url.into().trim_end_matches('/').to_owned()),
            state: Arc::default(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(5))
                .build()
                .unwrap_or_default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The provider configuration that reaches this sandbox: slug `plaid-sandbox`, its keys
    /// and base URL, plain HTTP allowed, and `webhook_url` (where its webhooks go: the
    /// server's `/api/v1/provider-webhooks/plaid-sandbox`).
    pub fn config(&self, webhook_url: Option<String>) -> PlaidConfig {
        let mut config = PlaidConfig::new(Self::CLIENT_ID, Self::SECRET)
            .with_base_url(self.base.as_str())
            .with_allow_http(true)
            .with_webhook_url(webhook_url);
        config.slug = "plaid-sandbox".to_owned();
        config.name = "Plaid (sandbox)".to_owned();
        config
    }

    /// The paths of the API calls served so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    /// A public token, as Link gives after `user_good` signs in.
    pub fn public_token(&self) -> String {
        let token = word("public");
        self.lock().public_tokens.insert(token.clone(), None);
        token
    }

    async fn handle<B>(&self, request: Request<B>) -> Response<Full<Bytes>>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let method = request.method().clone();
        let path = request.uri().path().trim_end_matches('/').to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => return text(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
        };
        match (&method, path.as_str()) {
            (&Method::GET, "") => self.page(),
            (&Method::GET, "/link") => self.link_page(&query, None),
            (&Method::POST, "/link") => self.link_submit(&body),
            (&Method::POST, "/page/fire") => {
                let form = form(&body);
                let item = form.get("item_id").cloned().unwrap_or_default();
                let code = form.get("webhook_code").cloned().unwrap_or_default();
                let access = self
                    .lock()
                    .items
                    .iter()
                    .find(|it| it.item_id == item)
                    .map(|it| it.access_token.clone());
                match access {
                    Some(access) => {
                        let sent = self.fire(&access, &code).await;
                        html(&format!(
                            "<p>{}</p><p><a href=\"{}/\">Back</a></p>",
                            escape(&sent.unwrap_or_else(|e| e)),
                            self.base
                        ))
                    }
                    None => text(StatusCode::NOT_FOUND, "no such item"),
                }
            }
            (&Method::POST, api) => {
                let Ok(body) = serde_json::from_slice::<Value>(&body) else {
                    return error(400, "INVALID_REQUEST", "INVALID_BODY");
                };
                self.api(api.trim_start_matches('/'), &body).await
            }
            _ => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    async fn api(&self, path: &str, body: &Value) -> Response<Full<Bytes>> {
        self.lock().requests.push(path.to_owned());
        if body["client_id"] != Self::CLIENT_ID || body["secret"] != Self::SECRET {
            return error(400, "INVALID_INPUT", "INVALID_API_KEYS");
        }
        let access = body["access_token"].as_str().unwrap_or_default().to_owned();
        match path {
            "webhook_verification_key/get" => {
                if body["key_id"] != WEBHOOK_KID {
                    return error(400, "INVALID_INPUT", "INVALID_WEBHOOK_VERIFICATION_KEY_ID");
                }
                reply(&json!({
                    "key": {"alg": "ES256", "crv": "P-256", "kid": WEBHOOK_KID, "kty": "EC",
                            "use": "sig", "x": WEBHOOK_KEY_X, "y": WEBHOOK_KEY_Y,
                            "created_at": 1_764_000_000, "expired_at": null},
                    "request_id": word("req"),
                }))
            }
            "link/token/create" => {
                let token = word("link");
                let update = body["access_token"].as_str().map(str::to_owned);
                if update
                    .as_deref()
                    .is_some_and(|access| self.item(access).is_none())
                {
                    return error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN");
                }
                let webhook = body["webhook"].as_str().map(str::to_owned);
                self.lock()
                    .link_tokens
                    .insert(token.clone(), (webhook, update));
                let expiration = (Utc::now() + TimeDelta::hours(4)).to_rfc3339();
                reply(
                    &json!({"link_token": token, "expiration": expiration, "request_id": word("req")}),
                )
            }
            "sandbox/public_token/create" => {
                let token = word("public");
                let webhook = body["options"]["webhook"].as_str().map(str::to_owned);
                self.lock().public_tokens.insert(token.clone(), webhook);
                reply(&json!({"public_token": token, "request_id": word("req")}))
            }
            "item/public_token/exchange" => {
                let token = body["public_token"].as_str().unwrap_or_default();
                let Some(webhook) = self.lock().public_tokens.remove(token) else {
                    return error(400, "INVALID_INPUT", "INVALID_PUBLIC_TOKEN");
                };
                let item = Item {
                    item_id: word("item"),
                    access_token: word("access"),
                    webhook,
                    step: 0,
                    mutated: false,
                    removed: false,
                };
                let answer = json!({"access_token": item.access_token, "item_id": item.item_id, "request_id": word("req")});
                self.lock().items.push(item);
                reply(&answer)
            }
            "sandbox/item/fire_webhook" => {
                let code = body["webhook_code"].as_str().unwrap_or_default().to_owned();
                match self.fire(&access, &code).await {
                    Ok(_) => reply(&json!({"webhook_fired": true, "request_id": word("req")})),
                    Err(_) => error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN"),
                }
            }
            _ if self.item(&access).is_none() => {
                error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN")
            }
            "item/remove" => {
                if let Some(item) = self
                    .lock()
                    .items
                    .iter_mut()
                    .find(|it| it.access_token == access)
                {
                    item.removed = true;
                }
                reply(&json!({"request_id": word("req")}))
            }
            "accounts/get" => reply(&json!({
                "accounts": accounts(),
                "item": {"item_id": self.item(&access).map(|it| it.item_id)},
                "request_id": word("req"),
            })),
            "investments/holdings/get" => {
                let wanted = body["options"]["account_ids"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let holdings: Vec<Value> = holdings()
                    .into_iter()
                    .filter(|h| wanted.is_empty() || wanted.contains(&h["account_id"]))
                    .collect();
                reply(&json!({
                    "accounts": [],
                    "holdings": holdings,
                    "securities": [
                        {"security_id": "sec-vti", "ticker_symbol": "VTI", "name": "Vanguard Total Stock Market ETF", "type": "etf"},
                        {"security_id": "sec-aapl", "ticker_symbol": "AAPL", "name": "Apple Inc.", "type": "equity"},
                        {"security_id": "sec-cash", "ticker_symbol": "CUR:USD", "name": "U S Dollar", "type": "cash"}
                    ],
                    "request_id": word("req"),
                }))
            }
            "transactions/sync" => self.sync(&access, body),
            _ => error(404, "INVALID_REQUEST", "UNKNOWN_ENDPOINT"),
        }
    }

    fn item(&self, access: &str) -> Option<Item> {
        self.lock()
            .items
            .iter()
            .find(|it| it.access_token == access && !it.removed)
            .cloned()
    }

    fn sync(&self, access: &str, body: &Value) -> Response<Full<Bytes>> {
        let mut state = self.lock();
        let Some(item) = state
            .items
            .iter_mut()
            .find(|it| it.access_token == access && !it.removed)
        else {
            return error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN");
        };
        let log = feed(item.step);
        let start = match body["cursor"].as_str() {
            None | Some("") => 0,
            Some(cursor) => match cursor
                .strip_prefix('c')
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(n) if n <= log.len() => n,
                _ => return error(400, "INVALID_INPUT", "INVALID_CURSOR"),
            },
        };
        if item.step == 2 && !item.mutated && start > step_two_start() {
            // The feed "changed" while the client paged: it must start again.
            item.mutated = true;
            return error(
                400,
                "TRANSACTIONS_ERROR",
                "TRANSACTIONS_SYNC_MUTATION_DURING_PAGINATION",
            );
        }
        let end = (start + PAGE).min(log.len());
        let (mut added, mut modified, mut removed) = (Vec::new(), Vec::new(), Vec::new());
        for change in &log[start..end] {
            match change {
                Change::Added(t) => added.push(t.clone()),
                Change::Modified(t) => modified.push(t.clone()),
                Change::Removed(account, id) => {
                    removed.push(json!({"account_id": account, "transaction_id": id}));
                }
            }
        }
        let has_more = end < log.len();
        if !has_more && item.step < 2 {
            // Caught up: by the next sync, the item has moved on.
            item.step += 1;
        }
        drop(state);
        reply(&json!({
            "added": added, "modified": modified, "removed": removed,
            "next_cursor": format!("c{end}"), "has_more": has_more,
            "transactions_update_status": "HISTORICAL_UPDATE_COMPLETE",
            "request_id": word("req"),
        }))
    }

    /// Sends a webhook of `code` about the item to its webhook URL, signed: what was sent.
    async fn fire(&self, access: &str, code: &str) -> Result<String, String> {
        let item = self.item(access).ok_or_else(|| "no such item".to_owned())?;
        let url = item
            .webhook
            .clone()
            .ok_or_else(|| "the item has no webhook URL".to_owned())?;
        let mut body = json!({"item_id": item.item_id, "environment": "sandbox"});
        match code {
            "SYNC_UPDATES_AVAILABLE" => {
                body["webhook_type"] = json!("TRANSACTIONS");
                body["webhook_code"] = json!(code);
                body["initial_update_complete"] = json!(true);
                body["historical_update_complete"] = json!(true);
            }
            "ITEM_LOGIN_REQUIRED" | "ERROR" => {
                body["webhook_type"] = json!("ITEM");
                body["webhook_code"] = json!("ERROR");
                body["error"] = json!({"error_type": "ITEM_ERROR", "error_code": "ITEM_LOGIN_REQUIRED",
                    "error_message": "the login details of this item have changed", "display_message": null});
            }
            "PENDING_EXPIRATION"
            | "PENDING_DISCONNECT"
            | "USER_PERMISSION_REVOKED"
            | "LOGIN_REPAIRED" => {
                body["webhook_type"] = json!("ITEM");
                body["webhook_code"] = json!(code);
            }
            _ => return Err(format!("unknown webhook code {code:?}")),
        }
        let raw = body.to_string();
        let verification = sign(raw.as_bytes())?;
        let answer = self
            .http
            .post(&url)
            .header(header::CONTENT_TYPE, "application/json")
            .header("Plaid-Verification", verification)
            .body(raw)
            .send()
            .await
            .map_err(|error| format!("the webhook could not be sent: {error}"))?;
        Ok(format!(
            "{code} sent to {url}: HTTP {}",
            answer.status().as_u16()
        ))
    }

    fn page(&self) -> Response<Full<Bytes>> {
        let items = self.lock().items.clone();
        let mut list = String::new();
        for item in items.iter().filter(|it| !it.removed) {
            let mut buttons = String::new();
            for code in [
                "SYNC_UPDATES_AVAILABLE",
                "ITEM_LOGIN_REQUIRED",
                "PENDING_EXPIRATION",
                "USER_PERMISSION_REVOKED",
            ] {
                buttons.push_str(&format!(
                    "<form method=\"post\" action=\"{}/page/fire\" style=\"display:inline\">\
                     <input type=\"hidden\" name=\"item_id\" value=\"{}\">\
                     <input type=\"hidden\" name=\"webhook_code\" value=\"{code}\">\
                     <button>{code}</button></form> ",
                    self.base,
                    escape(&item.item_id)
                ));
            }
            let mutation = if item.mutated {
                "; 1 mutation during paging answered"
            } else {
                ""
            };
            list.push_str(&format!(
                "<li>{} (feed step {} of 2{mutation}) {buttons}</li>",
                escape(&item.item_id),
                item.step
            ));
        }
        html(&format!(
            "<h1>Plaid sandbox</h1>\
             <p>Connect with <code>POST /api/v1/providers {{\"provider_slug\": \"plaid-sandbox\"}}</code>, \
             open <code>{base}/link?token=&lt;link_token&gt;</code>, sign in as <code>user_good</code> / \
             <code>pass_good</code>, then post the public token it shows to \
             <code>POST /api/v1/providers/callback</code>.</p>\
             <p>Each sync that catches up moves an item's feed one step: the pending coffee posts, \
             then a duplicate is removed and new rows arrive (the first sync through that step \
             meets a mutation and starts again).</p><h2>Items</h2><ul>{list}</ul>",
            base = self.base
        ))
    }

    fn link_page(&self, query: &str, problem: Option<&str>) -> Response<Full<Bytes>> {
        let token = form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "token")
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default();
        if !self.lock().link_tokens.contains_key(&token) {
            return text(StatusCode::NOT_FOUND, "unknown link token");
        }
        let problem = problem
            .map(|problem| format!("<p style=\"color:#b00\">{}</p>", escape(problem)))
            .unwrap_or_default();
        html(&format!(
            "<h1>Plaid Link (sandbox)</h1><p>Sandbox Bank: sign in with <code>user_good</code> / \
             <code>pass_good</code>.</p>{problem}\
             <form method=\"post\" action=\"{}/link\">\
             <input type=\"hidden\" name=\"token\" value=\"{}\">\
             <label>Username <input name=\"username\" value=\"user_good\"></label> \
             <label>Password <input name=\"password\" type=\"password\" value=\"pass_good\"></label> \
             <button>Continue</button></form>",
            self.base,
            escape(&token)
        ))
    }

    fn link_submit(&self, body: &[u8]) -> Response<Full<Bytes>> {
        let form = form(body);
        let token = form.get("token").cloned().unwrap_or_default();
        let Some((webhook, update)) = self.lock().link_tokens.get(&token).cloned() else {
            return text(StatusCode::NOT_FOUND, "unknown link token");
        };
        if form.get("username").map(String::as_str) != Some(Self::USERNAME)
            || form.get("password").map(String::as_str) != Some(Self::PASSWORD)
        {
            let query = format!(
                "token={}",
                form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>()
            );
            return self.link_page(
                &query,
                Some("Those credentials are not right: use user_good / pass_good."),
            );
        }
        self.lock().link_tokens.remove(&token);
        if update.is_some() {
            return html(
                "<h1>Plaid Link (sandbox)</h1><p>Signed in again. Finish with \
                 <code>POST /api/v1/providers/callback {\"state\": \"&lt;state&gt;\"}</code> (no public token in update mode).</p>",
            );
        }
        let public = word("public");
        self.lock().public_tokens.insert(public.clone(), webhook);
        html(&format!(
            "<h1>Plaid Link (sandbox)</h1><p>Connected. Your public token:</p>\
             <pre id=\"public-token\">{public}</pre>\
             <p>Finish with <code>POST /api/v1/providers/callback \
             {{\"state\": \"&lt;state&gt;\", \"public_token\": \"{public}\"}}</code>.</p>"
        ))
    }
}

fn accounts() -> Value {
    json!([
        {"account_id": "sbx-checking", "name": "Plaid Checking", "official_name": "Plaid Gold Standard 0% Interest Checking",
         "mask": "0000", "type": "depository", "subtype": "checking",
         "balances": {"current": 2450.17, "available": 2395.42, "limit": null, "iso_currency_code": "USD", "unofficial_currency_code": null}},
        {"account_id": "sbx-savings", "name": "Plaid Saving", "official_name": "Plaid Silver Standard 0.1% Interest Saving",
         "mask": "1111", "type": "depository", "subtype": "savings",
         "balances": {"current": 10012.34, "available": 10012.34, "limit": null, "iso_currency_code": "USD", "unofficial_currency_code": null}},
        {"account_id": "sbx-card", "name": "Plaid Credit Card", "official_name": "Plaid Diamond 12.5% APR Interest Credit Card",
         "mask": "3333", "type": "credit", "subtype": "credit card",
         "balances": {"current": 410.55, "available": 4589.45, "limit": 5000, "iso_currency_code": "USD", "unofficial_currency_code": null}},
        {"account_id": "sbx-brokerage", "name": "Plaid Brokerage", "official_name": null,
         "mask": "5555", "type": "investment", "subtype": "brokerage",
         "balances": {"current": 15234.1, "available": null, "limit": null, "iso_currency_code": "USD", "unofficial_currency_code": null}}
    ])
}

fn holdings() -> Vec<Value> {
    vec![
        json!({"account_id": "sbx-brokerage", "security_id": "sec-vti", "quantity": 40, "institution_price": 290.5,
               "institution_value": 11620.0, "cost_basis": 9800.0, "iso_currency_code": "USD", "unofficial_currency_code": null}),
        json!({"account_id": "sbx-brokerage", "security_id": "sec-aapl", "quantity": 15, "institution_price": 220.94,
               "institution_value": 3314.1, "cost_basis": 2700.0, "iso_currency_code": "USD", "unofficial_currency_code": null}),
        json!({"account_id": "sbx-brokerage", "security_id": "sec-cash", "quantity": 300, "institution_price": 1,
               "institution_value": 300.0, "cost_basis": 300.0, "iso_currency_code": "USD", "unofficial_currency_code": null}),
    ]
}

/// A `Plaid-Verification` JWT over `body`, signed with the sandbox key.
fn sign(body: &[u8]) -> Result<String, String> {
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(WEBHOOK_KID.to_owned());
    let claims = json!({
        "iat": Utc::now().timestamp(),
        "request_body_sha256": hex::encode(Sha256::digest(body)),
    });
    use base64::Engine as _;
    let inner: String = WEBHOOK_KEY_PEM
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(inner)
        .map_err(|error| format!("the sandbox key: {error}"))?;
    let key = jsonwebtoken::EncodingKey::from_ec_der(&der);
    jsonwebtoken::encode(&header, &claims, &key).map_err(|error| format!("signing: {error}"))
}

fn form(body: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn error(status: u16, kind: &str, code: &str) -> Response<Full<Bytes>> {
    let mut response = reply(&json!({
        "error_type": kind, "error_code": code,
        "error_message": format!("sandbox: {code}"), "display_message": null,
        "request_id": word("req"),
    }));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    response
}

fn reply(body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn html(body: &str) -> Response<Full<Bytes>> {
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Plaid sandbox</title></head><body>{body}</body></html>"
    );
    let mut response = Response::new(Full::new(Bytes::from(page)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl<B> tower::Service<Request<B>> for PlaidSandbox
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_feed_moves_in_steps_and_the_key_signs() {
        assert_eq!(feed(0).len(), 6);
        assert_eq!(feed(1).len(), 9);
        assert_eq!(feed(2).len(), 13);
        assert!(step_two_start() + PAGE < feed(2).len());
        let token = sign(b"{}").expect("signed");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let key = jsonwebtoken::DecodingKey::from_ec_components(WEBHOOK_KEY_X, WEBHOOK_KEY_Y)
            .expect("public key");
        let claims = jsonwebtoken::decode::<Value>(&token, &key, &validation).expect("verified");
        assert_eq!(
            claims.claims["request_body_sha256"],
            hex::encode(Sha256::digest(b"{}"))
        );
    }
}
