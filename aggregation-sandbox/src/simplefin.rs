//! A SimpleFIN-compatible bridge: the claim endpoint and `GET /accounts` the
//! [`SimplefinProvider`](aggregation_core::providers::SimplefinProvider) uses, over
//! deterministic demo data, as a `tower::Service`. For tests and demos; it never talks to a
//! real bridge.
//!
//! - `GET /` (the sandbox page) makes a fresh setup token and shows it.
//! - `POST /claim/{id}` claims a setup token once (403 afterwards) and answers an access URL
//!   with Basic credentials, under the sandbox's base URL.
//! - `GET /access/accounts` answers three accounts of "Sandbox Credit Union" (checking,
//!   savings, a credit card) with `start-date`, `end-date`, `pending`, `account` and
//!   `balances-only` honoured, and one entry in `errors` (an institution that needs the user's
//!   attention). The checking account has a pending card payment; once one transactions
//!   answer carried it, it has booked (under a new id, as real bridges do) in every later
//!   answer.
//! - A second kind of setup token ([`SimplefinSandbox::reconciliation_setup_token`], the
//!   page's second token) reaches the reconciliation scenario instead: a checking and a
//!   savings account with a transfer between them, and a pending restaurant payment that
//!   books with a tip (15 % more, under a new id) by the next answer.
//! - `GET /sample.csv` is a CSV export of the scenario's checking account (two rows the
//!   bridge also has, one older): imported into that account, the next sync recognises them.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use aggregation_core::providers::SimplefinConfig;
use base64::Engine as _;
use bytes::Bytes;
use chrono::{NaiveDate, TimeDelta, Utc};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use rand::RngExt as _;
use serde_json::{Value, json};
use url::{Url, form_urlencoded};

/// The institution of the sandbox accounts.
const ORG: &str = "Sandbox Credit Union";
/// The message the sandbox's `errors` always carries.
pub const SANDBOX_ERROR: &str =
    "Sandbox Savings Bank: the connection needs attention; sign in at the bridge to fix it.";
/// The id of the checking account, whose card payment is pending until it books.
pub const CHECKING_ID: &str = "sbx-checking";
/// The id of the reconciliation scenario's checking account (the tip, a transfer's leg).
pub const RECONCILIATION_CHECKING_ID: &str = "sbx-rec-checking";
/// The id of the reconciliation scenario's savings account (the transfer's other leg).
pub const RECONCILIATION_SAVINGS_ID: &str = "sbx-rec-savings";

/// One sandbox transaction.
#[derive(Debug, Clone)]
struct Row {
    id: &'static str,
    days_ago: i64,
    amount: &'static str,
    description: &'static str,
}

/// One sandbox account.
#[derive(Debug, Clone)]
struct Account {
    id: &'static str,
    name: &'static str,
    balance: &'static str,
    available: Option<&'static str>,
    rows: Vec<Row>,
}

fn accounts() -> Vec<Account> {
    vec![
        Account {
            id: CHECKING_ID,
            name: "Everyday Checking",
            balance: "2450.17",
            available: Some("2395.42"),
            rows: vec![
                Row {
                    id: "sbx-t-pay",
                    days_ago: 20,
                    amount: "2000.00",
                    description: "PAYROLL ACME CORP",
                },
                Row {
                    id: "sbx-t-rent",
                    days_ago: 15,
                    amount: "-1200.00",
                    description: "RENT MAPLE APARTMENTS",
                },
                Row {
                    id: "sbx-t-groc",
                    days_ago: 3,
                    amount: "-84.12",
                    description: "CORNER GROCERY",
                },
            ],
        },
        Account {
            id: "sbx-savings",
            name: "High Yield Savings",
            balance: "10012.34",
            available: None,
            rows: vec![Row {
                id: "sbx-t-int",
                days_ago: 30,
                amount: "12.34",
                description: "INTEREST",
            }],
        },
        Account {
            id: "sbx-visa",
            name: "Rewards Visa",
            balance: "-320.55",
            available: Some("4679.45"),
            rows: vec![
                Row {
                    id: "sbx-t-fuel",
                    days_ago: 5,
                    amount: "-45.00",
                    description: "FUEL STATION 12",
                },
                Row {
                    id: "sbx-t-cardpay",
                    days_ago: 10,
                    amount: "200.00",
                    description: "PAYMENT THANK YOU",
                },
            ],
        },
    ]
}

/// The pending card payment of the checking account: its id while pending, its id once
/// booked, amount, description, and how many days ago it happened.
const PENDING: (&str, &str, &str, &str, i64) = (
    "sbx-t-pending-coffee",
    "sbx-t-booked-coffee",
    "-4.75",
    "BLUE BOTTLE COFFEE",
    1,
);

/// The reconciliation scenario's accounts: a transfer of 500.00 from checking (6 days ago)
/// to savings (5 days ago), and checking rows the sample file has too.
fn reconciliation_accounts() -> Vec<Account> {
    vec![
        Account {
            id: RECONCILIATION_CHECKING_ID,
            name: "Reconciliation Checking",
            balance: "1369.88",
            available: Some("1323.88"),
            rows: vec![
                Row {
                    id: "sbx-rec-pay",
                    days_ago: 20,
                    amount: "2000.00",
                    description: "PAYROLL ACME CORP",
                },
                Row {
                    id: "sbx-rec-transfer-out",
                    days_ago: 6,
                    amount: "-500.00",
                    description: "ONLINE TRANSFER TO SAVINGS",
                },
                Row {
                    id: "sbx-rec-groc",
                    days_ago: 3,
                    amount: "-84.12",
                    description: "CORNER GROCERY 0231 SPRINGFIELD",
                },
            ],
        },
        Account {
            id: RECONCILIATION_SAVINGS_ID,
            name: "Reconciliation Savings",
            balance: "500.00",
            available: None,
            rows: vec![Row {
                id: "sbx-rec-transfer-in",
                days_ago: 5,
                amount: "500.00",
                description: "ONLINE TRANSFER FROM CHECKING",
            }],
        },
    ]
}

/// The scenario's restaurant payment: its id and amount while pending, its id and amount
/// once booked with a tip, description, and how many days ago it happened.
const TIPPED: (&str, &str, &str, &str, &str, i64) = (
    "sbx-rec-pending-dinner",
    "-40.00",
    "sbx-rec-booked-dinner",
    "-46.00",
    "TRATTORIA ROMA",
    2,
);

/// Which data an access URL sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    /// The demo accounts (checking with a pending coffee, savings, a credit card).
    Demo,
    /// The reconciliation scenario (a transfer pair, a tip).
    Reconciliation,
}

#[derive(Debug, Default)]
struct State {
    /// Setup token claim ids, and whether each was claimed.
    claims: HashMap<String, bool>,
    /// The claim ids of the reconciliation scenario.
    reconciliation_claims: HashSet<String>,
    /// Access credentials (user, password) handed out and still valid, with their data.
    access: HashMap<(String, String), Scenario>,
    /// Whether it booked.
    booked: bool,
    /// Whether the scenario's restaurant payment booked.
    tip_booked: bool,
    /// Answer 500 to everything.
    failing: bool,
    /// The query strings of every `/accounts` request, in order.
    requests: Vec<String>,
}

/// The SimpleFIN-compatible sandbox bridge. Cheap to clone; clones share their state.
#[derive(Debug, Clone)]
pub struct SimplefinSandbox {
    base: Arc<String>,
    state: Arc<Mutex<State>>,
}

impl SimplefinSandbox {
    /// A sandbox served at `base_url` (`http://127.0.0.1:8080/sandbox/simplefin`): claim and
    /// access URLs are made under it.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base: Arc::new(base_url.into().trim_end_matches('/').to_owned()),
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The provider configuration that reaches this sandbox: slug `simplefin-sandbox`, the
    /// base URL's origin (`host:port`) as the only bridge host, plain HTTP and private
    /// addresses allowed, no request budget.
    pub fn config(&self) -> SimplefinConfig {
        let base = Url::parse(&self.base).ok();
        let host = base
            .as_ref()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_default();
        let port = base.as_ref().and_then(Url::port_or_known_default);
        // Pinned to the sandbox's own origin: host and port.
        let origin = match port {
            Some(port) => format!("{host}:{port}"),
            None => host,
        };
        SimplefinConfig {
            slug: "simplefin-sandbox".to_owned(),
            name: "SimpleFIN Bridge (sandbox)".to_owned(),
            bridge_hosts: vec![origin],
            allow_http: true,
            budget: None,
            ..SimplefinConfig::default()
        }
    }

    /// A fresh setup token (base64 of a claim URL), claimable once.
    pub fn setup_token(&self) -> String {
        self.new_setup_token(Scenario::Demo)
    }

    /// A fresh setup token of the reconciliation scenario, claimable once: its access URL
    /// sees the scenario's checking and savings accounts instead of the demo ones.
    pub fn reconciliation_setup_token(&self) -> String {
        self.new_setup_token(Scenario::Reconciliation)
    }

    /// The CSV export of the scenario's checking account (`GET /sample.csv`), dated from
    /// today: the payroll and grocery rows the bridge has (described as a bank's export
    /// would, the store number left out), and an older row the bridge no longer serves.
    pub fn sample_csv(&self) -> String {
        let today = Utc::now().date_naive();
        let day = |days_ago: i64| today - TimeDelta::days(days_ago);
        format!(
            "Date,Description,Amount\n{},Payroll ACME Corp,2000.00\n{},Corner Grocery Springfield,-84.12\n\
             {},Library fine,-15.00\n",
            day(20),
            day(3),
            day(40),
        )
    }

    fn new_setup_token(&self, scenario: Scenario) -> String {
        let id: String = {
            let mut rng = rand::rng();
            (0..24)
                .map(|_| {
                    char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)])
                })
                .collect()
        };
        let mut state = self.lock();
        state.claims.insert(id.clone(), false);
        if scenario == Scenario::Reconciliation {
            state.reconciliation_claims.insert(id.clone());
        }
        drop(state);
        base64::engine::general_purpose::STANDARD.encode(format!("{}/claim/{id}", self.base))
    }

    /// Makes every request fail with 500 (or stops doing so).
    pub fn set_failing(&self, failing: bool) {
        self.lock().failing = failing;
    }

    /// Revokes every access URL handed out (as a user disconnecting the app at the bridge).
    pub fn revoke_access(&self) {
        self.lock().access.clear();
    }

    /// Books the pending transaction now.
    pub fn book_pending(&self) {
        self.lock().booked = true;
    }

    /// The query strings of the `/accounts` requests served so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.clone()
    }

    fn handle<B>(&self, request: &Request<B>) -> Response<Full<Bytes>> {
        if self.lock().failing {
            return text(StatusCode::INTERNAL_SERVER_ERROR, "sandbox failure");
        }
        let path = request.uri().path().trim_end_matches('/');
        match (request.method(), path) {
            (&Method::GET, "") => self.page(),
            (&Method::POST, claim) if claim.starts_with("/claim/") => {
                self.claim(&claim["/claim/".len()..])
            }
            (&Method::GET, "/access/accounts") => self.accounts(request),
            (&Method::GET, "/sample.csv") => {
                let mut response = text(StatusCode::OK, &self.sample_csv());
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/csv; charset=utf-8"),
                );
                response
            }
            _ => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    fn page(&self) -> Response<Full<Bytes>> {
        let token = self.setup_token();
        let reconciliation = self.reconciliation_setup_token();
        let body = format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>SimpleFIN sandbox</title></head>\
             <body><h1>SimpleFIN Bridge sandbox</h1>\
             <p>Your setup token (claimable once; reload for another):</p>\
             <pre id=\"setup-token\">{token}</pre>\
             <p>Connect it: <code>POST /api/v1/providers</code> with \
             <code>{{\"provider_slug\": \"simplefin-sandbox\", \"setup_token\": \"{token}\"}}</code>.</p>\
             <h2>Reconciliation scenario</h2>\
             <p>This token's accounts show the reconciler: a transfer between checking and \
             savings, and a restaurant payment that books with a tip by the next sync. \
             <a href=\"sample.csv\">sample.csv</a> overlaps its checking account: import it \
             there before the first transactions sync.</p>\
             <pre id=\"reconciliation-setup-token\">{reconciliation}</pre>\
             </body></html>"
        );
        let mut response = Response::new(Full::new(Bytes::from(body)));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        response
    }

    fn claim(&self, id: &str) -> Response<Full<Bytes>> {
        let mut state = self.lock();
        match state.claims.get_mut(id) {
            Some(claimed) if !*claimed => *claimed = true,
            _ => {
                return text(
                    StatusCode::FORBIDDEN,
                    "setup token unknown or claimed already",
                );
            }
        }
        let mut rng = rand::rng();
        let mut word = || -> String {
            (0..20)
                .map(|_| {
                    char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)])
                })
                .collect()
        };
        let (user, password) = (word(), word());
        let scenario = if state.reconciliation_claims.remove(id) {
            Scenario::Reconciliation
        } else {
            Scenario::Demo
        };
        state
            .access
            .insert((user.clone(), password.clone()), scenario);
        drop(state);
        let Ok(mut access) = Url::parse(&format!("{}/access", self.base)) else {
            return text(StatusCode::INTERNAL_SERVER_ERROR, "bad sandbox base URL");
        };
        if access.set_username(&user).is_err() || access.set_password(Some(&password)).is_err() {
            return text(StatusCode::INTERNAL_SERVER_ERROR, "bad sandbox base URL");
        }
        text(StatusCode::OK, access.as_str())
    }

    fn accounts<B>(&self, request: &Request<B>) -> Response<Full<Bytes>> {
        let scenario =
            basic(request.headers()).and_then(|pair| self.lock().access.get(&pair).copied());
        let Some(scenario) = scenario else {
            return text(StatusCode::FORBIDDEN, "access revoked or unknown");
        };
        let query = request.uri().query().unwrap_or_default().to_owned();
        let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, v)| v.as_str())
        };
        let only: Vec<&str> = pairs
            .iter()
            .filter(|(key, _)| key == "account")
            .map(|(_, value)| value.as_str())
            .collect();
        let balances_only = get("balances-only") == Some("1");
        let pending = get("pending") == Some("1");
        let start = get("start-date").and_then(|v| v.parse::<i64>().ok());
        let end = get("end-date").and_then(|v| v.parse::<i64>().ok());
        let today = Utc::now().date_naive();
        let stamp = |days_ago: i64| -> i64 { midday(today - TimeDelta::days(days_ago)) };
        let within = |at: i64| start.is_none_or(|s| at >= s) && end.is_none_or(|e| at < e);
        let mut state = self.lock();
        state.requests.push(query.clone());
        let booked_now = state.booked;
        let tip_booked_now = state.tip_booked;
        let mut served_pending = false;
        let mut served_tip = false;
        let mut out = Vec::new();
        let listed = match scenario {
            Scenario::Demo => accounts(),
            Scenario::Reconciliation => reconciliation_accounts(),
        };
        for account in listed {
            if !only.is_empty() && !only.contains(&account.id) {
                continue;
            }
            let mut transactions = Vec::new();
            if !balances_only {
                for row in &account.rows {
                    let at = stamp(row.days_ago);
                    if within(at) {
                        transactions.push(json!({
                            "id": row.id, "posted": at, "amount": row.amount,
                            "description": row.description, "transacted_at": at,
                        }));
                    }
                }
                if account.id == RECONCILIATION_CHECKING_ID {
                    let (pending_id, pending_amount, booked_id, booked_amount, description, days) =
                        TIPPED;
                    let at = stamp(days);
                    if within(at) {
                        if tip_booked_now {
                            transactions.push(json!({
                                "id": booked_id, "posted": at, "amount": booked_amount,
                                "description": description, "transacted_at": at,
                            }));
                        } else if pending {
                            served_tip = true;
                            transactions.push(json!({
                                "id": pending_id, "posted": 0, "amount": pending_amount,
                                "description": description, "transacted_at": at,
                                "pending": true,
                            }));
                        }
                    }
                }
                if account.id == CHECKING_ID {
                    let (pending_id, booked_id, amount, description, days_ago) = PENDING;
                    let at = stamp(days_ago);
                    if within(at) {
                        if booked_now {
                            transactions.push(json!({
                                "id": booked_id, "posted": at, "amount": amount,
                                "description": description, "transacted_at": at,
                            }));
                        } else if pending {
                            served_pending = true;
                            transactions.push(json!({
                                "id": pending_id, "posted": 0, "amount": amount,
                                "description": description, "transacted_at": at,
                                "pending": true,
                            }));
                        }
                    }
                }
            }
            let mut entry = json!({
                "org": {"domain": "sandbox-cu.example", "name": ORG, "sfin-url": self.base.as_str()},
                "id": account.id,
                "name": account.name,
                "currency": "USD",
                "balance": account.balance,
                "balance-date": stamp(0),
                "transactions": transactions,
            });
            if let (Some(available), Some(object)) = (account.available, entry.as_object_mut()) {
                object.insert("available-balance".to_owned(), Value::from(available));
            }
            out.push(entry);
        }
        if served_pending {
            // Served once as pending: it has booked by the next answer.
            state.booked = true;
        }
        if served_tip {
            // Likewise, with the tip added.
            state.tip_booked = true;
        }
        drop(state);
        json_response(&json!({"errors": [SANDBOX_ERROR], "accounts": out}))
    }
}

/// Noon UTC of a day, in Unix seconds.
fn midday(day: NaiveDate) -> i64 {
    day.and_hms_opt(12, 0, 0)
        .map_or(0, |at| at.and_utc().timestamp())
}

fn basic(headers: &http::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
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

fn json_response(body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

impl<B> tower::Service<Request<B>> for SimplefinSandbox
where
    B: Send + 'static,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let response = self.handle(&request);
        Box::pin(async move { Ok(response) })
    }
}
