//! An Enable Banking-compatible API (<https://enablebanking.com/docs/api/>): the application
//! JWT check, `GET /aspsps`, `POST /auth` with an approval page, `POST /sessions`,
//! `GET`/`DELETE /sessions/{id}`, and `GET /accounts/{uid}/balances` and
//! `/transactions`, over deterministic demo data, as a `tower::Service`. For tests and demos;
//! it never talks to Enable Banking or a bank.
//!
//! What it imitates, on purpose:
//!
//! - Every API request carries `Authorization: Bearer <JWT>` signed RS256 with the registered
//!   application's key: header `kid` = the application id, claims `iss` = `enablebanking.com`,
//!   `aud` = `api.enablebanking.com`, `iat` and `exp`, a lifetime of at most 86,400 seconds
//!   (the API's maximum). Anything else is `401` with the API's error body
//!   (`{message, code, error}`).
//! - Each session gives its accounts new `uid`s, while `identification_hash` and the IBAN stay
//!   the same from one session to the next.
//! - Amounts are positive; `credit_debit_indicator` (`CRDT`/`DBIT`) says which way money went.
//!   Transactions come in pages of [`EnableBankingSandbox::PAGE_SIZE`] rows with a
//!   `continuation_key`.
//! - A session that expired answers `401` `EXPIRED_SESSION`; a deleted one `401`
//!   `CLOSED_SESSION`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use base64::Engine as _;
use bytes::Bytes;
use chrono::{DateTime, NaiveDate, SecondsFormat, TimeDelta, Utc};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, Limited};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rand::RngExt as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use url::{Url, form_urlencoded};
use uuid::Uuid;

/// The sandbox application's private key (PKCS#1). Sandbox-only, published on purpose.
const PRIVATE_KEY_PEM: &str = include_str!("../keys/enablebanking-sandbox-private.pem");
/// The same private key as PKCS#8.
const PRIVATE_KEY_PKCS8_PEM: &str = include_str!("../keys/enablebanking-sandbox-private-pkcs8.pem");
/// The public half the sandbox verifies JWTs with (PKCS#1 `RSA PUBLIC KEY`).
const PUBLIC_KEY_PEM: &str = include_str!("../keys/enablebanking-sandbox-public.pem");

/// How long an authorization code may wait for `POST /sessions`.
const CODE_LIFETIME: TimeDelta = TimeDelta::minutes(10);
/// How far in the future a JWT's `iat` may be (clock skew).
const IAT_SKEW_SECONDS: i64 = 60;
/// The largest request body read.
const MAX_BODY: usize = 64 * 1024;
/// The most authorizations (started, not yet exchanged) kept; the oldest go first.
const MAX_AUTHORIZATIONS: usize = 1024;
/// The most sessions kept; the oldest go first.
const MAX_SESSIONS: usize = 1024;
/// The most entries kept in each request log.
const MAX_LOGGED: usize = 10_000;

/// The balance amounts of one sandbox account: booked closing (`CLBD`), interim available
/// (`ITAV`) and expected (`XPCD`, pending rows included), before and after the pending rows
/// book.
#[derive(Debug, Clone, Copy)]
struct Balances {
    closing: &'static str,
    closing_once_booked: &'static str,
    available: &'static str,
    expected: &'static str,
}

/// One sandbox transaction.
#[derive(Debug, Clone, Copy)]
struct Row {
    /// The bank's `entry_reference` (once booked); `None`: the bank sends none.
    reference: Option<&'static str>,
    days_ago: i64,
    /// Positive, as the API sends amounts.
    amount: &'static str,
    credit: bool,
    counterparty: &'static str,
    remittance: &'static [&'static str],
    /// Pending (`PDNG`, no `entry_reference`, no booking date) until
    /// [`EnableBankingSandbox::book_pending`].
    pending: bool,
    /// The card merchant's ISO 18245 code, for card purchases.
    merchant_category_code: Option<&'static str>,
}

/// What kind of account, and how the bank identifies it.
#[derive(Debug, Clone, Copy)]
enum Identifier {
    /// A current account, by IBAN.
    Iban(&'static str),
    /// A card account, by masked card number (`CPAN`).
    CardNumber(&'static str),
}

/// One sandbox account (the same in every session; only its `uid` changes).
#[derive(Debug, Clone, Copy)]
struct AccountTemplate {
    identifier: Identifier,
    product: &'static str,
    cash_account_type: &'static str,
    credit_limit: Option<&'static str>,
    balances: Balances,
    rows: &'static [Row],
}

const CURRENT_ROWS: &[Row] = &[
    Row {
        reference: Some("SBX-2001"),
        days_ago: 24,
        amount: "2450.00",
        credit: true,
        counterparty: "Acme Oy",
        remittance: &["Salary"],
        pending: false,
        merchant_category_code: None,
    },
    Row {
        reference: Some("SBX-2002"),
        days_ago: 20,
        amount: "950.00",
        credit: false,
        counterparty: "Sandbox Housing Ltd",
        remittance: &["RF18539007547034", "Rent"],
        pending: false,
        merchant_category_code: None,
    },
    Row {
        reference: Some("SBX-2003"),
        days_ago: 14,
        amount: "61.25",
        credit: false,
        counterparty: "Sandbox Energy",
        remittance: &["Electricity invoice"],
        pending: false,
        merchant_category_code: None,
    },
    Row {
        // The bank sends no entry reference for this one.
        reference: None,
        days_ago: 6,
        amount: "42.80",
        credit: false,
        counterparty: "Corner Grocery",
        remittance: &["Card purchase", "CORNER GROCERY"],
        pending: false,
        merchant_category_code: Some("5411"),
    },
    Row {
        reference: Some("SBX-2005"),
        days_ago: 3,
        amount: "25.00",
        credit: true,
        counterparty: "Maria Virtanen",
        remittance: &["Concert tickets"],
        pending: false,
        merchant_category_code: None,
    },
    Row {
        reference: Some("SBX-2006"),
        days_ago: 1,
        amount: "4.75",
        credit: false,
        counterparty: "Blue Cup Coffee",
        remittance: &["Card purchase"],
        pending: true,
        merchant_category_code: Some("5814"),
    },
];

const CARD_ROWS: &[Row] = &[
    Row {
        reference: Some("SBX-3001"),
        days_ago: 12,
        amount: "89.90",
        credit: false,
        counterparty: "Sandbox Books",
        remittance: &["Card purchase"],
        pending: false,
        merchant_category_code: Some("5942"),
    },
    Row {
        reference: Some("SBX-3002"),
        days_ago: 8,
        amount: "200.00",
        credit: true,
        counterparty: "Card repayment",
        remittance: &["Repayment"],
        pending: false,
        merchant_category_code: None,
    },
    Row {
        reference: Some("SBX-3003"),
        days_ago: 2,
        amount: "23.10",
        credit: false,
        counterparty: "City Taxi",
        remittance: &["Card purchase"],
        pending: true,
        merchant_category_code: None,
    },
];

const CURRENT_BALANCES: Balances = Balances {
    closing: "1520.40",
    closing_once_booked: "1515.65",
    available: "1490.00",
    expected: "1515.65",
};

/// The card's money owed is negative; `ITAV` is the credit still available.
const CARD_BALANCES: Balances = Balances {
    closing: "-312.55",
    closing_once_booked: "-335.65",
    available: "4664.35",
    expected: "-335.65",
};

/// A sandbox institution (ASPSP).
#[derive(Debug, Clone, Copy)]
struct Institution {
    name: &'static str,
    country: &'static str,
    bic: &'static str,
    maximum_consent_validity: i64,
    psu_types: &'static [&'static str],
    accounts: [AccountTemplate; 2],
}

static INSTITUTIONS: [Institution; 2] = [
    Institution {
        name: EnableBankingSandbox::FI_BANK,
        country: "FI",
        bic: "SBXNFIHH",
        maximum_consent_validity: EnableBankingSandbox::FI_BANK_CONSENT_SECONDS,
        psu_types: &["personal", "business"],
        accounts: [
            AccountTemplate {
                identifier: Identifier::Iban("FI4950009420028730"),
                product: "Everyday Account",
                cash_account_type: "CACC",
                credit_limit: None,
                balances: CURRENT_BALANCES,
                rows: CURRENT_ROWS,
            },
            AccountTemplate {
                identifier: Identifier::CardNumber("535510******4242"),
                product: "Sandbox Credit Card",
                cash_account_type: "CARD",
                credit_limit: Some("5000.00"),
                balances: CARD_BALANCES,
                rows: CARD_ROWS,
            },
        ],
    },
    Institution {
        name: EnableBankingSandbox::DE_BANK,
        country: "DE",
        bic: "SBXSDEFF",
        maximum_consent_validity: EnableBankingSandbox::DE_BANK_CONSENT_SECONDS,
        psu_types: &["personal"],
        accounts: [
            AccountTemplate {
                identifier: Identifier::Iban("DE27100777770209299700"),
                product: "Girokonto",
                cash_account_type: "CACC",
                credit_limit: None,
                balances: CURRENT_BALANCES,
                rows: CURRENT_ROWS,
            },
            AccountTemplate {
                identifier: Identifier::CardNumber("490012******0815"),
                product: "Kreditkarte",
                cash_account_type: "CARD",
                credit_limit: Some("5000.00"),
                balances: CARD_BALANCES,
                rows: CARD_ROWS,
            },
        ],
    },
];

/// A started authorization (`POST /auth`), until its code is exchanged.
#[derive(Debug)]
struct Authorization {
    institution: usize,
    valid_until: DateTime<Utc>,
    state: String,
    redirect_url: Url,
    psu_type: String,
    /// The code handed out on approval, and when.
    code: Option<(String, DateTime<Utc>)>,
    /// Approved or denied already (the page works once).
    decided: bool,
}

/// An authorized session.
#[derive(Debug)]
struct Session {
    institution: usize,
    psu_type: String,
    valid_until: DateTime<Utc>,
    created: DateTime<Utc>,
    /// Account `uid`s, in the institution's account order.
    account_uids: Vec<String>,
    closed: Option<DateTime<Utc>>,
    /// Expired by [`EnableBankingSandbox::set_sessions_expired`].
    expired_by_switch: bool,
}

#[derive(Debug, Default)]
struct State {
    authorizations: HashMap<String, Authorization>,
    authorization_order: VecDeque<String>,
    /// Authorization code → authorization id.
    codes: HashMap<String, String>,
    sessions: HashMap<String, Session>,
    session_order: VecDeque<String>,
    /// Account `uid` → (session id, account index).
    accounts: HashMap<String, (String, usize)>,
    booked: bool,
    failing: bool,
    rate_limited: bool,
    /// Set by [`EnableBankingSandbox::set_granted_validity`].
    granted_validity: Option<TimeDelta>,
    requests: VecDeque<String>,
    data_requests: VecDeque<DataRequest>,
    deleted_sessions: VecDeque<String>,
    auth_requests: VecDeque<Value>,
}

impl State {
    fn remove_authorization(&mut self, id: &str) -> Option<Authorization> {
        let authorization = self.authorizations.remove(id)?;
        if let Some((code, _)) = &authorization.code {
            self.codes.remove(code);
        }
        self.authorization_order.retain(|kept| kept != id);
        Some(authorization)
    }

    fn insert_authorization(&mut self, id: String, authorization: Authorization) {
        while self.authorizations.len() >= MAX_AUTHORIZATIONS {
            let Some(oldest) = self.authorization_order.front().cloned() else {
                break;
            };
            self.remove_authorization(&oldest);
        }
        self.authorization_order.push_back(id.clone());
        self.authorizations.insert(id, authorization);
    }

    fn insert_session(&mut self, id: String, session: Session) {
        while self.sessions.len() >= MAX_SESSIONS {
            let Some(oldest) = self.session_order.pop_front() else {
                break;
            };
            if let Some(gone) = self.sessions.remove(&oldest) {
                for uid in &gone.account_uids {
                    self.accounts.remove(uid);
                }
            }
        }
        for (index, uid) in session.account_uids.iter().enumerate() {
            self.accounts.insert(uid.clone(), (id.clone(), index));
        }
        self.session_order.push_back(id.clone());
        self.sessions.insert(id, session);
    }
}

/// One account-data request (`GET /accounts/{uid}/balances` or `/transactions`) as the sandbox
/// received it: what a test checks the PSU headers and the request count with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataRequest {
    /// `GET /path?query`, as [`EnableBankingSandbox::requests`] logs it.
    pub request: String,
    /// The `Psu-Ip-Address` header, when sent (a sync the user asked for).
    pub psu_ip_address: Option<String>,
    /// The `Psu-User-Agent` header, when sent.
    pub psu_user_agent: Option<String>,
}

/// Pushes onto a bounded log, dropping the oldest entry when full.
fn push_bounded<T>(log: &mut VecDeque<T>, entry: T) {
    if log.len() >= MAX_LOGGED {
        log.pop_front();
    }
    log.push_back(entry);
}

/// An Enable Banking-compatible fake API with deterministic demo data, served as a
/// `tower::Service<http::Request<B>>`. Cheap to clone; clones share their state. For tests and
/// demos.
///
/// Paths are relative to the sandbox's root, so a host may mount it under a prefix that it
/// strips; `base_url` (given to [`EnableBankingSandbox::new`]) is where it is mounted, and the
/// authorization URLs it answers are under it. The service never fails: every problem is an
/// error answer in the API's shape.
///
/// API endpoints (each needs the application JWT, see the module documentation):
///
/// - `GET /aspsps[?country=XX&psu_type=…]`: two institutions, [`Self::FI_BANK`] (Finland, personal and
///   business users, 180 days of consent) and [`Self::DE_BANK`] (Germany, personal users, 90
///   days).
/// - `POST /auth` `{access: {valid_until}, aspsp: {name, country}, state, redirect_url,
///   psu_type?}` → `{url, authorization_id, psu_id_hash}`. `valid_until` must be in the future
///   and at most now + the institution's `maximum_consent_validity`, else `422`.
/// - `POST /sessions` `{code}` → `{session_id, accounts, aspsp, psu_type, access}`; a code works
///   once, for 10 minutes.
/// - `GET /sessions/{id}` (status `AUTHORIZED`, `EXPIRED` or `CLOSED`) and
///   `DELETE /sessions/{id}` (recorded: [`Self::deleted_sessions`]).
/// - `GET /accounts/{uid}/balances`: `CLBD`, `ITAV` and `XPCD` balances.
/// - `GET /accounts/{uid}/transactions[?date_from&date_to&transaction_status&continuation_key]`:
///   pages of [`Self::PAGE_SIZE`] rows.
///
/// The user's side (no JWT): `GET /approval/{authorization_id}` is the approval page, with an
/// Approve link (`…/approve`: `302` to `redirect_url?code=…&state=…`) and a Deny link
/// (`…/deny`: `302` to `redirect_url?error=access_denied&error_description=…&state=…`). Tests
/// can skip the page: [`Self::approve`], [`Self::deny`].
///
/// Each session has a current account (`CACC`, by IBAN, with a pending card payment) and a
/// credit card (`CARD`, by masked card number, money owed: negative balance, with a pending
/// purchase). Pending rows book once [`Self::book_pending`] is called.
#[derive(Clone)]
pub struct EnableBankingSandbox {
    base: Arc<String>,
    key: Arc<DecodingKey>,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for EnableBankingSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnableBankingSandbox")
            .field("base_url", &self.base)
            .field("application_id", &Self::APPLICATION_ID)
            .finish_non_exhaustive()
    }
}

impl EnableBankingSandbox {
    /// The sandbox's registered application id: the `kid` of every JWT it accepts.
    pub const APPLICATION_ID: &'static str = "0b9c6a39-5d3e-4f4e-9b8a-eb5a7d0b0001";
    /// The `iss` claim the API requires.
    pub const JWT_ISSUER: &'static str = "enablebanking.com";
    /// The `aud` claim the API requires.
    pub const JWT_AUDIENCE: &'static str = "api.enablebanking.com";
    /// The longest JWT lifetime (`exp - iat`) the API accepts, in seconds (24 hours).
    pub const MAX_JWT_LIFETIME_SECONDS: i64 = 86_400;
    /// Transactions per page.
    pub const PAGE_SIZE: usize = 3;
    /// The Finnish institution's name (country `FI`).
    pub const FI_BANK: &'static str = "Sandbox Nordic Bank";
    /// The Finnish institution's maximum consent validity, in seconds (180 days).
    pub const FI_BANK_CONSENT_SECONDS: i64 = 180 * 86_400;
    /// The German institution's name (country `DE`).
    pub const DE_BANK: &'static str = "Sandbox Sparkasse";
    /// The German institution's maximum consent validity, in seconds (90 days).
    pub const DE_BANK_CONSENT_SECONDS: i64 = 90 * 86_400;

    /// A sandbox mounted at `base_url` (`http://127.0.0.1:8080/sandbox/enablebanking`): the
    /// approval pages it links to are under it.
    pub fn new(base_url: impl Into<String>) -> Self {
        let public_key = pem_to_der(PUBLIC_KEY_PEM).unwrap_or_default();
        Self {
            base: Arc::new(base_url.into().trim_end_matches('/').to_owned()),
            key: Arc::new(DecodingKey::from_rsa_der(&public_key)),
            state: Arc::default(),
        }
    }

    /// Where the sandbox is mounted (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The sandbox's registered application id ([`Self::APPLICATION_ID`]).
    pub fn application_id(&self) -> &str {
        Self::APPLICATION_ID
    }

    /// The private key of the sandbox's application, PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`),
    /// 2048 bits: what a client signs its JWTs with. Sandbox-only and published, not a secret.
    pub fn private_key_pem(&self) -> &str {
        PRIVATE_KEY_PEM
    }

    /// The same private key as PKCS#8 PEM (`BEGIN PRIVATE KEY`), the form `openssl genrsa`
    /// writes today.
    pub fn private_key_pkcs8_pem(&self) -> &str {
        PRIVATE_KEY_PKCS8_PEM
    }

    /// The public key the sandbox verifies JWTs with, PKCS#1 PEM (`BEGIN RSA PUBLIC KEY`).
    pub fn public_key_pem(&self) -> &str {
        PUBLIC_KEY_PEM
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes every request fail with `500` and the API's error body (or stops doing so).
    pub fn set_failing(&self, failing: bool) {
        self.lock().failing = failing;
    }

    /// Makes balance and transaction requests answer `429` `ASPSP_RATE_LIMIT_EXCEEDED`, as a
    /// bank does once its daily allowance of unattended reads is spent (or stops doing so).
    pub fn set_rate_limited(&self, rate_limited: bool) {
        self.lock().rate_limited = rate_limited;
    }

    /// `true` expires every session that exists now: their data calls answer `401`
    /// `EXPIRED_SESSION` and `GET /sessions/{id}` says `EXPIRED`, as when the user's consent
    /// ran out or was revoked at the bank. Sessions authorized later are not affected, so a
    /// reauthorization works. `false` brings the sessions it expired back.
    pub fn set_sessions_expired(&self, expired: bool) {
        let mut state = self.lock();
        for session in state.sessions.values_mut() {
            session.expired_by_switch = expired;
        }
    }

    /// `Some(validity)`: sessions created from now on are granted until now + `validity`
    /// (negative: a consent that has already ended) instead of the `valid_until` the client
    /// asked for, as a bank that grants less than asked does. `None` restores that.
    pub fn set_granted_validity(&self, validity: Option<TimeDelta>) {
        self.lock().granted_validity = validity;
    }

    /// Books the pending rows: from now on they answer `BOOK` with a booking date and an
    /// `entry_reference`, and the closing balances include them.
    pub fn book_pending(&self) {
        self.lock().booked = true;
    }

    /// The requests served so far, in order, as `METHOD /path?query` (never a header, so
    /// never the JWT). The last 10,000 are kept.
    pub fn requests(&self) -> Vec<String> {
        self.lock().requests.iter().cloned().collect()
    }

    /// The account-data requests served so far, in order, with their PSU headers. The last
    /// 10,000 are kept.
    pub fn data_requests(&self) -> Vec<DataRequest> {
        self.lock().data_requests.iter().cloned().collect()
    }

    /// The ids of the sessions ended with `DELETE /sessions/{id}`, in order.
    pub fn deleted_sessions(&self) -> Vec<String> {
        self.lock().deleted_sessions.iter().cloned().collect()
    }

    /// The JSON bodies of the `POST /auth` requests accepted so far, in order (to check the
    /// `valid_until`, `state` and `redirect_url` a client sent).
    pub fn auth_requests(&self) -> Vec<Value> {
        self.lock().auth_requests.iter().cloned().collect()
    }

    /// The ids of the sessions that are neither closed nor expired, oldest first.
    pub fn active_sessions(&self) -> Vec<String> {
        let state = self.lock();
        let now = Utc::now();
        state
            .session_order
            .iter()
            .filter(|id| {
                state
                    .sessions
                    .get(*id)
                    .is_some_and(|session| session.problem(now).is_none())
            })
            .cloned()
            .collect()
    }

    /// Approves an authorization as the user would on the approval page: `authorization_url`
    /// is the `url` `POST /auth` answered. Returns the redirect's `Location`
    /// (`redirect_url?code=…&state=…`), or `None` for an unknown or already decided
    /// authorization.
    pub fn approve(&self, authorization_url: &str) -> Option<String> {
        let id = authorization_id(authorization_url)?;
        self.decide(&id, true).map(|location| location.to_string())
    }

    /// Refuses an authorization as the user would on the approval page. Returns the
    /// redirect's `Location` (`redirect_url?error=access_denied&error_description=…&state=…`),
    /// or `None` for an unknown or already decided authorization.
    pub fn deny(&self, authorization_url: &str) -> Option<String> {
        let id = authorization_id(authorization_url)?;
        self.decide(&id, false).map(|location| location.to_string())
    }

    fn decide(&self, authorization_id: &str, approve: bool) -> Option<Url> {
        let mut state = self.lock();
        let authorization = state.authorizations.get_mut(authorization_id)?;
        if authorization.decided {
            return None;
        }
        authorization.decided = true;
        let mut location = authorization.redirect_url.clone();
        if approve {
            let code = random_token();
            authorization.code = Some((code.clone(), Utc::now()));
            location
                .query_pairs_mut()
                .append_pair("code", &code)
                .append_pair("state", &authorization.state);
            state.codes.insert(code, authorization_id.to_owned());
        } else {
            location
                .query_pairs_mut()
                .append_pair("error", "access_denied")
                .append_pair("error_description", "The user refused access at the bank")
                .append_pair("state", &authorization.state);
            let id = authorization_id.to_owned();
            state.remove_authorization(&id);
        }
        Some(location)
    }

    async fn handle<B>(&self, request: Request<B>) -> Response<Full<Bytes>>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let logged = format!(
            "{} {}",
            parts.method,
            parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.path(), |path| path.as_str())
        );
        {
            let mut state = self.lock();
            if parts.method == Method::GET && parts.uri.path().contains("/accounts/") {
                let header = |name: &str| {
                    parts
                        .headers
                        .get(name)
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_owned)
                };
                let entry = DataRequest {
                    request: logged.clone(),
                    psu_ip_address: header("psu-ip-address"),
                    psu_user_agent: header("psu-user-agent"),
                };
                push_bounded(&mut state.data_requests, entry);
            }
            push_bounded(&mut state.requests, logged);
            if state.failing {
                return api_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Some("ASPSP_ERROR"),
                    "Internal server error (sandbox failure switch)",
                );
            }
        }
        let path = parts.uri.path().trim_end_matches('/');
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        match (segments.as_slice(), &parts.method) {
            (["approval", id], &Method::GET) => return self.approval_page(id),
            (["approval", id, decision @ ("approve" | "deny")], &Method::GET) => {
                return match self.decide(id, *decision == "approve") {
                    Some(location) => redirect(&location),
                    None => html(
                        StatusCode::NOT_FOUND,
                        "<p>This authorization is unknown or was decided already.</p>",
                    ),
                };
            }
            (["approval", ..], _) => {
                return api_error(StatusCode::METHOD_NOT_ALLOWED, None, "Method Not Allowed");
            }
            _ => {}
        }
        if let Err(refusal) = self.verify_jwt(&parts.headers) {
            return *refusal;
        }
        let query = query_pairs(parts.uri.query());
        match (segments.as_slice(), &parts.method) {
            (["aspsps"], &Method::GET) => aspsps(&query),
            (["auth"], &Method::POST) => match read_json(body).await {
                Ok(request) => self.start_authorization(&request),
                Err(refusal) => *refusal,
            },
            (["sessions"], &Method::POST) => match read_json(body).await {
                Ok(request) => self.create_session(&request),
                Err(refusal) => *refusal,
            },
            (["sessions", id], &Method::GET) => self.get_session(id),
            (["sessions", id], &Method::DELETE) => self.delete_session(id),
            (["accounts", uid, "balances"], &Method::GET) => self.balances(uid),
            (["accounts", uid, "transactions"], &Method::GET) => self.transactions(uid, &query),
            (
                ["aspsps" | "auth" | "sessions"]
                | ["sessions", _]
                | ["accounts", _, "balances" | "transactions"],
                _,
            ) => api_error(StatusCode::METHOD_NOT_ALLOWED, None, "Method Not Allowed"),
            _ => api_error(StatusCode::NOT_FOUND, None, "Not Found"),
        }
    }

    /// Checks the application JWT as the API does.
    fn verify_jwt(&self, headers: &http::HeaderMap) -> Result<(), Box<Response<Full<Bytes>>>> {
        let unauthorized = |message: &str| {
            Box::new(api_error(
                StatusCode::UNAUTHORIZED,
                Some("UNAUTHORIZED_ACCESS"),
                message,
            ))
        };
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(Box::new(api_error(
                StatusCode::UNAUTHORIZED,
                Some("AUTHORIZATION_NOT_PROVIDED"),
                "Authorization header is not provided",
            )));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|value| value.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .ok_or_else(|| unauthorized("Authorization header must be Bearer <JWT>"))?;
        let jwt_header =
            jsonwebtoken::decode_header(token).map_err(|_| unauthorized("Malformed JWT"))?;
        if jwt_header.alg != Algorithm::RS256 {
            return Err(unauthorized("Only RS256 JWTs are supported"));
        }
        if jwt_header.kid.as_deref() != Some(Self::APPLICATION_ID) {
            return Err(unauthorized("Unknown application id in JWT kid"));
        }
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = 0;
        validation.set_issuer(&[Self::JWT_ISSUER]);
        validation.set_audience(&[Self::JWT_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Value>(token, &self.key, &validation)
            .map_err(|error| {
                unauthorized(match error.kind() {
                    ErrorKind::ExpiredSignature => "JWT is expired",
                    ErrorKind::InvalidSignature => "JWT signature is invalid",
                    ErrorKind::InvalidIssuer => "JWT iss must be enablebanking.com",
                    ErrorKind::InvalidAudience => "JWT aud must be api.enablebanking.com",
                    ErrorKind::MissingRequiredClaim(_) => {
                        "JWT must carry the iss, aud, iat and exp claims"
                    }
                    _ => "Invalid JWT",
                })
            })?
            .claims;
        let (Some(iat), Some(exp)) = (
            claims.get("iat").and_then(Value::as_i64),
            claims.get("exp").and_then(Value::as_i64),
        ) else {
            return Err(unauthorized("JWT iat and exp must be integers"));
        };
        if iat > Utc::now().timestamp() + IAT_SKEW_SECONDS {
            return Err(unauthorized("JWT iat is in the future"));
        }
        if exp <= iat {
            return Err(unauthorized("JWT exp must be after iat"));
        }
        if exp - iat > Self::MAX_JWT_LIFETIME_SECONDS {
            return Err(unauthorized(
                "JWT lifetime exceeds the maximum of 86400 seconds",
            ));
        }
        Ok(())
    }

    fn start_authorization(&self, request: &Value) -> Response<Full<Bytes>> {
        let invalid = |message: &str| {
            api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("WRONG_REQUEST_PARAMETERS"),
                message,
            )
        };
        let aspsp = request.get("aspsp");
        let name = aspsp.and_then(|a| a.get("name")).and_then(Value::as_str);
        let country = aspsp.and_then(|a| a.get("country")).and_then(Value::as_str);
        let Some(index) = INSTITUTIONS
            .iter()
            .position(|i| Some(i.name) == name && Some(i.country) == country)
        else {
            return api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("WRONG_ASPSP_PROVIDED"),
                "Wrong ASPSP name provided",
            );
        };
        let institution = &INSTITUTIONS[index];
        let Some(valid_until) = request
            .get("access")
            .and_then(|access| access.get("valid_until"))
            .and_then(Value::as_str)
            .and_then(|text| DateTime::parse_from_rfc3339(text.trim()).ok())
            .map(|time| time.with_timezone(&Utc))
        else {
            return invalid("access.valid_until must be an RFC 3339 date-time");
        };
        let now = Utc::now();
        if valid_until <= now {
            return invalid("access.valid_until must be in the future");
        }
        if valid_until > now + TimeDelta::seconds(institution.maximum_consent_validity) {
            return invalid(&format!(
                "access.valid_until exceeds the ASPSP's maximum_consent_validity of {} seconds",
                institution.maximum_consent_validity
            ));
        }
        let Some(state_value) = request.get("state").and_then(Value::as_str) else {
            return invalid("state is required");
        };
        let redirect_url = request
            .get("redirect_url")
            .and_then(Value::as_str)
            .and_then(|text| Url::parse(text).ok())
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
        let Some(redirect_url) = redirect_url else {
            return api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("REDIRECT_URI_NOT_ALLOWED"),
                "Redirect URI not allowed",
            );
        };
        let psu_type = match request.get("psu_type") {
            None | Some(Value::Null) => "personal",
            Some(value) => match value.as_str() {
                Some(psu_type) if institution.psu_types.contains(&psu_type) => psu_type,
                _ => return invalid("psu_type is not supported by the ASPSP"),
            },
        };
        let id = Uuid::new_v4().to_string();
        let url = format!("{}/approval/{id}", self.base);
        let mut state = self.lock();
        push_bounded(&mut state.auth_requests, request.clone());
        state.insert_authorization(
            id.clone(),
            Authorization {
                institution: index,
                valid_until,
                state: state_value.to_owned(),
                redirect_url,
                psu_type: psu_type.to_owned(),
                code: None,
                decided: false,
            },
        );
        drop(state);
        json_response(
            StatusCode::OK,
            &json!({
                "url": url,
                "authorization_id": id,
                "psu_id_hash": hex::encode(Sha256::digest(format!("psu:{id}").as_bytes())),
            }),
        )
    }

    fn approval_page(&self, id: &str) -> Response<Full<Bytes>> {
        let state = self.lock();
        let Some(authorization) = state.authorizations.get(id).filter(|a| !a.decided) else {
            return html(
                StatusCode::NOT_FOUND,
                "<p>This authorization is unknown or was decided already.</p>",
            );
        };
        let institution = &INSTITUTIONS[authorization.institution];
        // Every value shown is the sandbox's own (institution names, a date, a UUID).
        let body = format!(
            "<h1>{name} (sandbox)</h1>\
             <p>An application asks to read your accounts, balances and transactions at \
             {name} until {until}.</p>\
             <p><a id=\"approve\" href=\"{base}/approval/{id}/approve\">Approve</a> \
             <a id=\"deny\" href=\"{base}/approval/{id}/deny\">Deny</a></p>",
            name = institution.name,
            until = authorization.valid_until.format("%Y-%m-%d %H:%M UTC"),
            base = self.base,
            id = Uuid::parse_str(id)
                .map(|u| u.to_string())
                .unwrap_or_default(),
        );
        html(StatusCode::OK, &body)
    }

    fn create_session(&self, request: &Value) -> Response<Full<Bytes>> {
        let wrong_code = || {
            api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("WRONG_AUTHORIZATION_CODE"),
                "Wrong authorization code provided",
            )
        };
        let Some(code) = request.get("code").and_then(Value::as_str) else {
            return wrong_code();
        };
        let mut state = self.lock();
        let Some(authorization_id) = state.codes.remove(code) else {
            return wrong_code();
        };
        let Some(authorization) = state.remove_authorization(&authorization_id) else {
            return wrong_code();
        };
        let now = Utc::now();
        let issued = authorization.code.as_ref().map_or(now, |(_, at)| *at);
        if now - issued > CODE_LIFETIME {
            return api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("EXPIRED_AUTHORIZATION_CODE"),
                "Authorization code is expired",
            );
        }
        let institution = &INSTITUTIONS[authorization.institution];
        let valid_until = state
            .granted_validity
            .map_or(authorization.valid_until, |validity| now + validity);
        let session_id = Uuid::new_v4().to_string();
        let account_uids: Vec<String> = institution
            .accounts
            .iter()
            .map(|_| Uuid::new_v4().to_string())
            .collect();
        let accounts: Vec<Value> = institution
            .accounts
            .iter()
            .zip(&account_uids)
            .map(|(account, uid)| account_json(institution, account, uid))
            .collect();
        let body = json!({
            "session_id": session_id,
            "accounts": accounts,
            "aspsp": {"name": institution.name, "country": institution.country},
            "psu_type": authorization.psu_type,
            "access": {"valid_until": timestamp(valid_until)},
        });
        state.insert_session(
            session_id,
            Session {
                institution: authorization.institution,
                psu_type: authorization.psu_type,
                valid_until,
                created: now,
                account_uids,
                closed: None,
                expired_by_switch: false,
            },
        );
        drop(state);
        json_response(StatusCode::OK, &body)
    }

    fn get_session(&self, id: &str) -> Response<Full<Bytes>> {
        let state = self.lock();
        let Some(session) = state.sessions.get(id) else {
            return session_missing();
        };
        let institution = &INSTITUTIONS[session.institution];
        let status = match session.problem(Utc::now()) {
            None => "AUTHORIZED",
            Some(SessionProblem::Closed) => "CLOSED",
            Some(SessionProblem::Expired) => "EXPIRED",
        };
        let accounts_data: Vec<Value> = institution
            .accounts
            .iter()
            .zip(&session.account_uids)
            .map(|(account, uid)| {
                let hash = identification_hash(institution, account);
                json!({"uid": uid, "identification_hash": hash, "identification_hashes": [hash]})
            })
            .collect();
        let mut body = json!({
            "status": status,
            "accounts": session.account_uids,
            "accounts_data": accounts_data,
            "aspsp": {"name": institution.name, "country": institution.country},
            "psu_type": session.psu_type,
            "psu_id_hash": hex::encode(Sha256::digest(format!("psu:{id}").as_bytes())),
            "access": {"valid_until": timestamp(session.valid_until)},
            "created": timestamp(session.created),
            "authorized": timestamp(session.created),
        });
        if let (Some(closed), Some(object)) = (session.closed, body.as_object_mut()) {
            object.insert("closed".to_owned(), Value::from(timestamp(closed)));
        }
        drop(state);
        json_response(StatusCode::OK, &body)
    }

    fn delete_session(&self, id: &str) -> Response<Full<Bytes>> {
        let mut state = self.lock();
        let Some(session) = state.sessions.get_mut(id) else {
            return session_missing();
        };
        if session.closed.is_some() {
            return api_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("WRONG_SESSION_STATUS"),
                "Session is closed already",
            );
        }
        session.closed = Some(Utc::now());
        push_bounded(&mut state.deleted_sessions, id.to_owned());
        drop(state);
        json_response(StatusCode::OK, &json!({"message": "OK"}))
    }

    /// The institution and account template of an account `uid` whose session is usable, or
    /// the API's refusal.
    fn usable_account(
        &self,
        state: &State,
        uid: &str,
    ) -> Result<(&'static Institution, &'static AccountTemplate), Box<Response<Full<Bytes>>>> {
        let Some((session, index)) = state
            .accounts
            .get(uid)
            .and_then(|(session_id, index)| Some((state.sessions.get(session_id)?, *index)))
        else {
            return Err(Box::new(api_error(
                StatusCode::NOT_FOUND,
                Some("ACCOUNT_DOES_NOT_EXIST"),
                "No account found matching provided id",
            )));
        };
        match session.problem(Utc::now()) {
            Some(SessionProblem::Closed) => Err(Box::new(api_error(
                StatusCode::UNAUTHORIZED,
                Some("CLOSED_SESSION"),
                "Session is closed",
            ))),
            Some(SessionProblem::Expired) => Err(Box::new(api_error(
                StatusCode::UNAUTHORIZED,
                Some("EXPIRED_SESSION"),
                "Session is expired",
            ))),
            None if state.rate_limited => Err(Box::new(api_error(
                StatusCode::TOO_MANY_REQUESTS,
                Some("ASPSP_RATE_LIMIT_EXCEEDED"),
                "ASPSP rate limit exceeded",
            ))),
            None => {
                let institution = &INSTITUTIONS[session.institution];
                institution
                    .accounts
                    .get(index)
                    .map(|account| (institution, account))
                    .ok_or_else(|| {
                        Box::new(api_error(
                            StatusCode::NOT_FOUND,
                            Some("ACCOUNT_DOES_NOT_EXIST"),
                            "No account found matching provided id",
                        ))
                    })
            }
        }
    }

    fn balances(&self, uid: &str) -> Response<Full<Bytes>> {
        let state = self.lock();
        let (_, account) = match self.usable_account(&state, uid) {
            Ok(found) => found,
            Err(refusal) => return *refusal,
        };
        let booked = state.booked;
        drop(state);
        let today = Utc::now().date_naive();
        let amounts = account.balances;
        let closing = if booked {
            amounts.closing_once_booked
        } else {
            amounts.closing
        };
        let balance = |name: &str, kind: &str, amount: &str, reference: NaiveDate| {
            json!({
                "name": name,
                "balance_amount": {"currency": "EUR", "amount": amount},
                "balance_type": kind,
                "last_change_date_time": timestamp(Utc::now()),
                "reference_date": reference.to_string(),
            })
        };
        json_response(
            StatusCode::OK,
            &json!({"balances": [
                balance("Booked balance", "CLBD", closing, today - TimeDelta::days(1)),
                balance("Available balance", "ITAV", amounts.available, today),
                balance("Expected balance", "XPCD", amounts.expected, today),
            ]}),
        )
    }

    fn transactions(&self, uid: &str, query: &HashMap<String, String>) -> Response<Full<Bytes>> {
        let invalid = |error: &str, message: &str| {
            api_error(StatusCode::UNPROCESSABLE_ENTITY, Some(error), message)
        };
        let date = |name: &str| -> Result<Option<NaiveDate>, ()> {
            query
                .get(name)
                .map(|text| NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| ()))
                .transpose()
        };
        let (Ok(from), Ok(to)) = (date("date_from"), date("date_to")) else {
            return invalid(
                "WRONG_REQUEST_PARAMETERS",
                "date_from and date_to must be dates (YYYY-MM-DD)",
            );
        };
        let today = Utc::now().date_naive();
        if from.is_none() && to.is_some() {
            return invalid(
                "DATE_TO_WITHOUT_DATE_FROM",
                "date_from must be provided if date_to provided",
            );
        }
        if from.is_some_and(|from| from > today) {
            return invalid("DATE_FROM_IN_FUTURE", "date_from can not be in the future");
        }
        if let (Some(from), Some(to)) = (from, to)
            && from > to
        {
            return invalid(
                "WRONG_DATE_INTERVAL",
                "date_from should be less than or equal date_to",
            );
        }
        let status_filter = match query.get("transaction_status").map(String::as_str) {
            None => None,
            Some(status @ ("BOOK" | "PDNG")) => Some(status),
            Some(_) => {
                return invalid(
                    "WRONG_REQUEST_PARAMETERS",
                    "transaction_status must be BOOK or PDNG",
                );
            }
        };
        let window = ContinuationWindow {
            uid,
            from: query.get("date_from").map_or("", String::as_str),
            to: query.get("date_to").map_or("", String::as_str),
        };
        let offset = match query.get("continuation_key") {
            None => 0,
            Some(key) => match window.offset(key) {
                Some(offset) => offset,
                None => {
                    return invalid("WRONG_CONTINUATION_KEY", "Wrong continuation key provided");
                }
            },
        };
        let state = self.lock();
        let (_, account) = match self.usable_account(&state, uid) {
            Ok(found) => found,
            Err(refusal) => return *refusal,
        };
        let booked = state.booked;
        drop(state);
        let rows: Vec<Value> = account
            .rows
            .iter()
            .filter_map(|row| {
                let (value, day, status) = transaction_json(row, booked, today);
                let inside = from.is_none_or(|from| day >= from) && to.is_none_or(|to| day <= to);
                (inside && status_filter.is_none_or(|wanted| wanted == status)).then_some(value)
            })
            .collect();
        let page: Vec<Value> = rows
            .iter()
            .skip(offset)
            .take(Self::PAGE_SIZE)
            .cloned()
            .collect();
        let next = offset + Self::PAGE_SIZE;
        let continuation_key = (next < rows.len()).then(|| window.key(next));
        json_response(
            StatusCode::OK,
            &json!({"transactions": page, "continuation_key": continuation_key}),
        )
    }
}

/// Why a session cannot serve data.
enum SessionProblem {
    Closed,
    Expired,
}

impl Session {
    fn problem(&self, now: DateTime<Utc>) -> Option<SessionProblem> {
        if self.closed.is_some() {
            Some(SessionProblem::Closed)
        } else if self.expired_by_switch || self.valid_until <= now {
            Some(SessionProblem::Expired)
        } else {
            None
        }
    }
}

/// What a continuation key is bound to: the account and the requested dates. The key carries
/// them with the offset (no server state to bound), and is refused for another window.
struct ContinuationWindow<'a> {
    uid: &'a str,
    from: &'a str,
    to: &'a str,
}

impl ContinuationWindow<'_> {
    fn key(&self, offset: usize) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(format!("{}|{}|{}|{offset}", self.uid, self.from, self.to))
    }

    fn offset(&self, key: &str) -> Option<usize> {
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(key)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let mut fields = text.split('|');
        let (uid, from, to, offset) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        (fields.next().is_none() && uid == self.uid && from == self.from && to == self.to)
            .then(|| offset.parse().ok())
            .flatten()
    }
}

/// The authorization id at the end of an approval URL (`…/approval/{id}`).
fn authorization_id(authorization_url: &str) -> Option<String> {
    let url = Url::parse(authorization_url).ok()?;
    let mut segments = url.path_segments()?.rev();
    let id = segments.next()?;
    (segments.next()? == "approval").then(|| id.to_owned())
}

/// A row as the API answers it, with the date the window filters on and its status.
fn transaction_json(row: &Row, booked: bool, today: NaiveDate) -> (Value, NaiveDate, &'static str) {
    let happened = today - TimeDelta::days(row.days_ago);
    let pending = row.pending && !booked;
    let counterparty = json!({"name": row.counterparty});
    let mut value = json!({
        "transaction_amount": {"currency": "EUR", "amount": row.amount},
        "credit_debit_indicator": if row.credit { "CRDT" } else { "DBIT" },
        "status": if pending { "PDNG" } else { "BOOK" },
        "transaction_date": happened.to_string(),
        "remittance_information": row.remittance,
    });
    let Some(object) = value.as_object_mut() else {
        return (value, happened, "BOOK");
    };
    object.insert(
        if row.credit { "debtor" } else { "creditor" }.to_owned(),
        counterparty,
    );
    if let Some(code) = row.merchant_category_code {
        object.insert("merchant_category_code".to_owned(), json!(code));
    }
    if pending {
        return (value, happened, "PDNG");
    }
    // A pending row books the day after it happened (today at the latest).
    let booking = if row.pending {
        (happened + TimeDelta::days(1)).min(today)
    } else {
        happened
    };
    object.insert("booking_date".to_owned(), Value::from(booking.to_string()));
    object.insert("value_date".to_owned(), Value::from(booking.to_string()));
    if let Some(reference) = row.reference {
        object.insert("entry_reference".to_owned(), Value::from(reference));
    }
    (value, booking, "BOOK")
}

/// An account as `POST /sessions` answers it.
fn account_json(institution: &Institution, account: &AccountTemplate, uid: &str) -> Value {
    let (account_id, all_ids) = match account.identifier {
        Identifier::Iban(iban) => (
            json!({"iban": iban}),
            json!([{"identification": iban, "scheme_name": "IBAN"}]),
        ),
        Identifier::CardNumber(pan) => {
            let id = json!({"identification": pan, "scheme_name": "CPAN"});
            (json!({"other": id}), json!([id]))
        }
    };
    let hash = identification_hash(institution, account);
    let mut value = json!({
        "account_id": account_id,
        "all_account_ids": all_ids,
        "account_servicer": {"bic_fi": institution.bic, "name": institution.name},
        "name": "Sandbox User",
        "details": account.product,
        "usage": "PRIV",
        "cash_account_type": account.cash_account_type,
        "product": account.product,
        "currency": "EUR",
        "psu_status": "Account Holder",
        "uid": uid,
        "identification_hash": hash,
        "identification_hashes": [hash],
    });
    if let (Some(limit), Some(object)) = (account.credit_limit, value.as_object_mut()) {
        object.insert(
            "credit_limit".to_owned(),
            json!({"currency": "EUR", "amount": limit}),
        );
    }
    value
}

/// A stable hash of the account's identification, the same in every session.
fn identification_hash(institution: &Institution, account: &AccountTemplate) -> String {
    let identification = match account.identifier {
        Identifier::Iban(iban) => iban,
        Identifier::CardNumber(pan) => pan,
    };
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(
        format!(
            "{}|{}|{identification}",
            institution.country, institution.name
        )
        .as_bytes(),
    ))
}

/// `GET /aspsps`: every institution, or those of `country` (and `psu_type`).
fn aspsps(query: &HashMap<String, String>) -> Response<Full<Bytes>> {
    let country = query.get("country").map(|c| c.to_ascii_uppercase());
    let psu_type = query.get("psu_type").map(String::as_str);
    let list: Vec<Value> = INSTITUTIONS
        .iter()
        .filter(|i| country.as_deref().is_none_or(|c| c == i.country))
        .filter(|i| psu_type.is_none_or(|wanted| i.psu_types.contains(&wanted)))
        .map(|i| {
            json!({
                "name": i.name,
                "country": i.country,
                "logo": format!(
                    "https://enablebanking.com/brands/{}/{}/",
                    i.country,
                    i.name.replace(' ', "%20")
                ),
                "psu_types": i.psu_types,
                "auth_methods": i.psu_types.iter().map(|psu_type| json!({
                    "name": "redirect",
                    "title": "Sandbox sign-in",
                    "psu_type": psu_type,
                    "approach": "REDIRECT",
                    "hidden_method": false,
                })).collect::<Vec<_>>(),
                "maximum_consent_validity": i.maximum_consent_validity,
                "sandbox": {"users": []},
                "beta": false,
                "bic": i.bic,
                "required_psu_headers": [],
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({"aspsps": list}))
}

/// The DER bytes of a PEM document's first block.
fn pem_to_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|line| !line.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|line| !line.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

/// 32 random bytes, base64url without padding.
fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The API's date-time form: RFC 3339 with microseconds and an offset.
fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, false)
}

fn query_pairs(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

async fn read_json<B>(body: B) -> Result<Value, Box<Response<Full<Bytes>>>>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let bytes = Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .map_err(|_| {
            Box::new(api_error(
                StatusCode::BAD_REQUEST,
                Some("WRONG_REQUEST_PARAMETERS"),
                "The request body could not be read",
            ))
        })?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value @ Value::Object(_)) => Ok(value),
        _ => Err(Box::new(api_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("WRONG_REQUEST_PARAMETERS"),
            "The request body must be a JSON object",
        ))),
    }
}

fn session_missing() -> Response<Full<Bytes>> {
    api_error(
        StatusCode::NOT_FOUND,
        Some("SESSION_DOES_NOT_EXIST"),
        "No session found matching provided id",
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The API's error body: `{message, code, error?}`.
fn api_error(status: StatusCode, error: Option<&str>, message: &str) -> Response<Full<Bytes>> {
    let mut body = json!({"message": message, "code": status.as_u16()});
    if let (Some(error), Some(object)) = (error, body.as_object_mut()) {
        object.insert("error".to_owned(), Value::from(error));
    }
    json_response(status, &body)
}

fn html(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\">\
         <title>Enable Banking sandbox</title></head><body>{body}</body></html>"
    );
    let mut response = Response::new(Full::new(Bytes::from(page)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

fn redirect(location: &Url) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::default());
    *response.status_mut() = StatusCode::FOUND;
    if let Ok(value) = HeaderValue::from_str(location.as_str()) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

impl<B> tower::Service<Request<B>> for EnableBankingSandbox
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
    use jsonwebtoken::{EncodingKey, Header};
    use tower::ServiceExt as _;

    const FOREIGN_KEY_PEM: &str = include_str!("../keys/test-foreign-private.pem");
    const BASE: &str = "http://sandbox.test/eb";

    fn sandbox() -> EnableBankingSandbox {
        EnableBankingSandbox::new(format!("{BASE}/"))
    }

    fn now() -> i64 {
        Utc::now().timestamp()
    }

    fn claims() -> Value {
        json!({
            "iss": "enablebanking.com",
            "aud": "api.enablebanking.com",
            "iat": now(),
            "exp": now() + 3600,
        })
    }

    fn sign(kid: &str, claims: &Value, key_pem: &str) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_owned());
        let der = pem_to_der(key_pem).unwrap();
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_rsa_der(&der)).unwrap()
    }

    fn jwt() -> String {
        sign(
            EnableBankingSandbox::APPLICATION_ID,
            &claims(),
            PRIVATE_KEY_PEM,
        )
    }

    async fn send(
        sandbox: &EnableBankingSandbox,
        request: Request<Full<Bytes>>,
    ) -> (StatusCode, http::HeaderMap, Bytes) {
        let response = sandbox.clone().oneshot(request).await.unwrap();
        let (parts, body) = response.into_parts();
        (
            parts.status,
            parts.headers,
            body.collect().await.unwrap().to_bytes(),
        )
    }

    async fn api_with(
        sandbox: &EnableBankingSandbox,
        method: Method,
        uri: &str,
        body: Option<Value>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = body.map_or_else(Full::default, |b| Full::new(Bytes::from(b.to_string())));
        let (status, _, bytes) = send(sandbox, builder.body(body).unwrap()).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn api(
        sandbox: &EnableBankingSandbox,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        api_with(sandbox, method, uri, body, Some(&jwt())).await
    }

    /// `GET uri` with a valid application JWT.
    async fn get(sandbox: &EnableBankingSandbox, uri: &str) -> (StatusCode, Value) {
        api(sandbox, Method::GET, uri, None).await
    }

    fn auth_body(bank: &str, country: &str, days: i64) -> Value {
        json!({
            "access": {"valid_until": timestamp(Utc::now() + TimeDelta::days(days))},
            "aspsp": {"name": bank, "country": country},
            "state": "state-123",
            "redirect_url": "https://app.test/callback?keep=1",
            "psu_type": "personal",
        })
    }

    /// Starts an authorization at the Finnish bank and returns its approval URL.
    async fn start(sandbox: &EnableBankingSandbox) -> String {
        let (status, body) = api(
            sandbox,
            Method::POST,
            "/auth",
            Some(auth_body(EnableBankingSandbox::FI_BANK, "FI", 180)),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["url"].as_str().unwrap().to_owned()
    }

    fn query_of(location: &str) -> HashMap<String, String> {
        query_pairs(Url::parse(location).unwrap().query())
    }

    /// A full authorization: the session's JSON.
    async fn session(sandbox: &EnableBankingSandbox) -> Value {
        let url = start(sandbox).await;
        let location = sandbox.approve(&url).unwrap();
        let code = query_of(&location)["code"].clone();
        let (status, body) = api(
            sandbox,
            Method::POST,
            "/sessions",
            Some(json!({"code": code})),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    fn uid(session: &Value, cash_account_type: &str) -> String {
        session["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["cash_account_type"] == cash_account_type)
            .unwrap()["uid"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn a_well_formed_jwt_is_accepted_up_to_the_maximum_lifetime() {
        let sandbox = sandbox();
        let (status, _) = get(&sandbox, "/aspsps").await;
        assert_eq!(status, StatusCode::OK);
        let mut longest = claims();
        longest["exp"] = json!(now() + EnableBankingSandbox::MAX_JWT_LIFETIME_SECONDS);
        let token = sign(
            EnableBankingSandbox::APPLICATION_ID,
            &longest,
            PRIVATE_KEY_PEM,
        );
        let (status, _) = api_with(&sandbox, Method::GET, "/aspsps", None, Some(&token)).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn bad_jwts_are_refused_with_the_api_error_body() {
        let sandbox = sandbox();
        let (status, body) = api_with(&sandbox, Method::GET, "/aspsps", None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"], "AUTHORIZATION_NOT_PROVIDED");
        assert_eq!(body["code"], 401);

        let app = EnableBankingSandbox::APPLICATION_ID;
        let with = |field: &str, value: Value| {
            let mut claims = claims();
            claims[field] = value;
            claims
        };
        let mut without_iat = claims();
        without_iat.as_object_mut().unwrap().remove("iat");
        let cases = [
            ("foreign key", sign(app, &claims(), FOREIGN_KEY_PEM)),
            ("wrong kid", sign("another-app", &claims(), PRIVATE_KEY_PEM)),
            (
                "wrong aud",
                sign(app, &with("aud", json!("api.tilisy.com")), PRIVATE_KEY_PEM),
            ),
            (
                "wrong iss",
                sign(app, &with("iss", json!("example.com")), PRIVATE_KEY_PEM),
            ),
            (
                "expired",
                sign(
                    app,
                    &json!({"iss": "enablebanking.com", "aud": "api.enablebanking.com",
                            "iat": now() - 7200, "exp": now() - 3600}),
                    PRIVATE_KEY_PEM,
                ),
            ),
            (
                "lifetime over 24 hours",
                sign(app, &with("exp", json!(now() + 86_401)), PRIVATE_KEY_PEM),
            ),
            (
                "issued in the future",
                sign(
                    app,
                    &json!({"iss": "enablebanking.com", "aud": "api.enablebanking.com",
                            "iat": now() + 600, "exp": now() + 1200}),
                    PRIVATE_KEY_PEM,
                ),
            ),
            ("no iat", sign(app, &without_iat, PRIVATE_KEY_PEM)),
            ("garbage", "not.a.jwt".to_owned()),
        ];
        for (case, token) in cases {
            let (status, body) =
                api_with(&sandbox, Method::GET, "/aspsps", None, Some(&token)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}");
            assert_eq!(body["error"], "UNAUTHORIZED_ACCESS", "{case}");
            assert!(
                body["message"].as_str().is_some_and(|m| !m.is_empty()),
                "{case}"
            );
        }

        // HS256 with the application id as kid: refused (only RS256).
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(app.to_owned());
        let hs = jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(b"s")).unwrap();
        let (status, _) = api_with(&sandbox, Method::GET, "/aspsps", None, Some(&hs)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);

        // Not a bearer scheme.
        let request = Request::get("/aspsps")
            .header(header::AUTHORIZATION, format!("Basic {}", jwt()))
            .body(Full::default())
            .unwrap();
        let (status, _, _) = send(&sandbox, request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn aspsps_lists_the_two_institutions_by_country() {
        let sandbox = sandbox();
        let (_, all) = get(&sandbox, "/aspsps").await;
        assert_eq!(all["aspsps"].as_array().unwrap().len(), 2);
        let (_, fi) = get(&sandbox, "/aspsps?country=FI").await;
        let fi = fi["aspsps"].as_array().unwrap();
        assert_eq!(fi.len(), 1);
        assert_eq!(fi[0]["name"], EnableBankingSandbox::FI_BANK);
        assert_eq!(
            fi[0]["maximum_consent_validity"],
            EnableBankingSandbox::FI_BANK_CONSENT_SECONDS
        );
        assert!(fi[0]["logo"].as_str().unwrap().starts_with("https://"));
        assert_eq!(fi[0]["psu_types"], json!(["personal", "business"]));
        let (_, de) = get(&sandbox, "/aspsps?country=DE").await;
        assert_eq!(de["aspsps"][0]["name"], EnableBankingSandbox::DE_BANK);
        assert_eq!(
            de["aspsps"][0]["maximum_consent_validity"],
            EnableBankingSandbox::DE_BANK_CONSENT_SECONDS
        );
        let (_, se) = get(&sandbox, "/aspsps?country=SE").await;
        assert_eq!(se["aspsps"], json!([]));
        let (_, business) = get(&sandbox, "/aspsps?psu_type=business").await;
        assert_eq!(business["aspsps"].as_array().unwrap().len(), 1);
        assert_eq!(business["aspsps"][0]["name"], EnableBankingSandbox::FI_BANK);
    }

    #[tokio::test]
    async fn auth_checks_the_consent_length_institution_and_redirect() {
        let sandbox = sandbox();
        let cases = [
            (
                auth_body(EnableBankingSandbox::DE_BANK, "DE", 91),
                "WRONG_REQUEST_PARAMETERS",
            ),
            (
                auth_body(EnableBankingSandbox::FI_BANK, "FI", 181),
                "WRONG_REQUEST_PARAMETERS",
            ),
            (
                auth_body(EnableBankingSandbox::FI_BANK, "FI", -1),
                "WRONG_REQUEST_PARAMETERS",
            ),
            (auth_body("Nordea", "FI", 30), "WRONG_ASPSP_PROVIDED"),
            (
                auth_body(EnableBankingSandbox::FI_BANK, "DE", 30),
                "WRONG_ASPSP_PROVIDED",
            ),
        ];
        for (body, error) in cases {
            let (status, answer) = api(&sandbox, Method::POST, "/auth", Some(body)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
            assert_eq!(answer["error"], error);
        }
        let mut business_de = auth_body(EnableBankingSandbox::DE_BANK, "DE", 30);
        business_de["psu_type"] = json!("business");
        let mut bad_redirect = auth_body(EnableBankingSandbox::FI_BANK, "FI", 30);
        bad_redirect["redirect_url"] = json!("javascript:alert(1)");
        let mut no_state = auth_body(EnableBankingSandbox::FI_BANK, "FI", 30);
        no_state.as_object_mut().unwrap().remove("state");
        for body in [business_de, bad_redirect, no_state] {
            let (status, _) = api(&sandbox, Method::POST, "/auth", Some(body)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        }
        let request = Request::post("/auth")
            .header(header::AUTHORIZATION, format!("Bearer {}", jwt()))
            .body(Full::new(Bytes::from_static(b"[1, 2")))
            .unwrap();
        let (status, _, _) = send(&sandbox, request).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(sandbox.auth_requests().is_empty());
        let (status, _) = api(
            &sandbox,
            Method::POST,
            "/auth",
            Some(auth_body(EnableBankingSandbox::DE_BANK, "DE", 90)),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(sandbox.auth_requests().len(), 1);
    }

    #[tokio::test]
    async fn the_approval_page_redirects_with_code_and_state() {
        let sandbox = sandbox();
        let url = start(&sandbox).await;
        assert!(url.starts_with(&format!("{BASE}/approval/")), "{url}");
        let path = url.trim_start_matches(BASE);
        let (status, headers, page) =
            send(&sandbox, Request::get(path).body(Full::default()).unwrap()).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
        let page = String::from_utf8(page.to_vec()).unwrap();
        assert!(page.contains(&format!("href=\"{url}/approve\"")), "{page}");
        assert!(page.contains(&format!("href=\"{url}/deny\"")), "{page}");

        let approve = format!("{path}/approve");
        let (status, headers, _) = send(
            &sandbox,
            Request::get(&approve).body(Full::default()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::FOUND);
        let location = headers[header::LOCATION].to_str().unwrap();
        assert!(
            location.starts_with("https://app.test/callback?"),
            "{location}"
        );
        let query = query_of(location);
        assert_eq!(query["state"], "state-123");
        assert_eq!(query["keep"], "1");
        assert!(query["code"].len() >= 32);

        // Decided once: the page and its links are gone.
        let (status, _, _) = send(
            &sandbox,
            Request::get(&approve).body(Full::default()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(sandbox.approve(&url), None);

        // The code works once.
        let code = json!({"code": query["code"]});
        let (status, session) = api(&sandbox, Method::POST, "/sessions", Some(code.clone())).await;
        assert_eq!(status, StatusCode::OK, "{session}");
        let (status, again) = api(&sandbox, Method::POST, "/sessions", Some(code)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(again["error"], "WRONG_AUTHORIZATION_CODE");
    }

    #[tokio::test]
    async fn a_code_expires_after_ten_minutes() {
        let sandbox = sandbox();
        let url = start(&sandbox).await;
        let location = sandbox.approve(&url).unwrap();
        let code = query_of(&location)["code"].clone();
        {
            let mut state = sandbox.lock();
            let id = state.codes[&code].clone();
            let authorization = state.authorizations.get_mut(&id).unwrap();
            authorization.code = Some((code.clone(), Utc::now() - TimeDelta::minutes(11)));
        }
        let (status, body) = api(
            &sandbox,
            Method::POST,
            "/sessions",
            Some(json!({"code": code})),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(body["error"], "EXPIRED_AUTHORIZATION_CODE");
        assert!(sandbox.active_sessions().is_empty());
    }

    #[tokio::test]
    async fn deny_redirects_with_access_denied() {
        let sandbox = sandbox();
        let url = start(&sandbox).await;
        let location = sandbox.deny(&url).unwrap();
        let query = query_of(&location);
        assert_eq!(query["error"], "access_denied");
        assert!(!query["error_description"].is_empty());
        assert_eq!(query["state"], "state-123");
        assert!(!query.contains_key("code"));
        assert_eq!(sandbox.approve(&url), None);
        assert_eq!(sandbox.deny("not a url"), None);
        assert_eq!(sandbox.approve(&format!("{BASE}/approval/unknown")), None);
    }

    #[tokio::test]
    async fn sessions_give_new_uids_and_stable_identification_hashes() {
        let sandbox = sandbox();
        let first = session(&sandbox).await;
        assert_eq!(first["aspsp"]["name"], EnableBankingSandbox::FI_BANK);
        assert_eq!(first["psu_type"], "personal");
        let valid_until = first["access"]["valid_until"].as_str().unwrap();
        assert!(DateTime::parse_from_rfc3339(valid_until).is_ok());
        let accounts = first["accounts"].as_array().unwrap();
        assert_eq!(accounts.len(), 2);
        let current = &accounts[0];
        assert_eq!(current["cash_account_type"], "CACC");
        assert_eq!(current["account_id"]["iban"], "FI4950009420028730");
        let card = &accounts[1];
        assert_eq!(card["cash_account_type"], "CARD");
        assert_eq!(card["account_id"]["other"]["scheme_name"], "CPAN");
        assert_eq!(card["credit_limit"]["amount"], "5000.00");

        let second = session(&sandbox).await;
        assert_ne!(first["session_id"], second["session_id"]);
        for (a, b) in accounts.iter().zip(second["accounts"].as_array().unwrap()) {
            assert_ne!(a["uid"], b["uid"]);
            assert_eq!(a["identification_hash"], b["identification_hash"]);
            assert_eq!(a["account_id"], b["account_id"]);
        }

        let id = first["session_id"].as_str().unwrap();
        let (status, stored) = get(&sandbox, &format!("/sessions/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(stored["status"], "AUTHORIZED");
        assert_eq!(stored["accounts"][0], current["uid"]);
        assert_eq!(
            stored["accounts_data"][1]["identification_hash"],
            card["identification_hash"]
        );
        assert_eq!(sandbox.active_sessions().len(), 2);
    }

    #[tokio::test]
    async fn balances_offer_several_types_and_the_card_owes_money() {
        let sandbox = sandbox();
        let session = session(&sandbox).await;
        let current = uid(&session, "CACC");
        let (status, body) = get(&sandbox, &format!("/accounts/{current}/balances")).await;
        assert_eq!(status, StatusCode::OK);
        let types: Vec<&str> = body["balances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["balance_type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["CLBD", "ITAV", "XPCD"]);
        assert_eq!(body["balances"][0]["balance_amount"]["amount"], "1520.40");
        assert_eq!(body["balances"][0]["balance_amount"]["currency"], "EUR");

        let card = uid(&session, "CARD");
        let (_, body) = get(&sandbox, &format!("/accounts/{card}/balances")).await;
        assert_eq!(body["balances"][0]["balance_amount"]["amount"], "-312.55");

        let (status, body) = get(&sandbox, "/accounts/nope/balances").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"], "ACCOUNT_DOES_NOT_EXIST");
    }

    /// Every row of an account, following `continuation_key`; also the number of pages.
    async fn all_rows(
        sandbox: &EnableBankingSandbox,
        uid: &str,
        query: &str,
    ) -> (Vec<Value>, usize) {
        let mut rows = Vec::new();
        let mut pages = 0;
        let mut key: Option<String> = None;
        loop {
            let mut uri = format!("/accounts/{uid}/transactions?{query}");
            if let Some(key) = &key {
                uri.push_str(&format!("&continuation_key={key}"));
            }
            let (status, body) = get(sandbox, &uri).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            pages += 1;
            let page = body["transactions"].as_array().unwrap();
            assert!(page.len() <= EnableBankingSandbox::PAGE_SIZE);
            rows.extend(page.iter().cloned());
            match body["continuation_key"].as_str() {
                Some(next) => key = Some(next.to_owned()),
                None => return (rows, pages),
            }
        }
    }

    #[tokio::test]
    async fn transactions_page_through_continuation_keys() {
        let sandbox = sandbox();
        let session = session(&sandbox).await;
        let current = uid(&session, "CACC");
        let from = (Utc::now().date_naive() - TimeDelta::days(90)).to_string();
        let (rows, pages) = all_rows(&sandbox, &current, &format!("date_from={from}")).await;
        assert_eq!((rows.len(), pages), (6, 2));
        assert!(
            rows.iter()
                .any(|r| r.get("entry_reference").is_none() && r["status"] == "BOOK")
        );
        assert!(rows.iter().any(|r| r["credit_debit_indicator"] == "CRDT"));
        assert!(rows.iter().all(|r| {
            !r["transaction_amount"]["amount"]
                .as_str()
                .unwrap()
                .starts_with('-')
        }));
        let pending: Vec<&Value> = rows.iter().filter(|r| r["status"] == "PDNG").collect();
        assert_eq!(pending.len(), 1);
        assert!(pending[0].get("entry_reference").is_none());
        assert!(pending[0].get("booking_date").is_none());
        let rent = rows
            .iter()
            .find(|r| r["entry_reference"] == "SBX-2002")
            .unwrap();
        assert_eq!(rent["creditor"]["name"], "Sandbox Housing Ltd");
        assert_eq!(rent["remittance_information"][1], "Rent");
        assert!(rent["booking_date"].is_string() && rent["value_date"].is_string());
        let salary = rows
            .iter()
            .find(|r| r["entry_reference"] == "SBX-2001")
            .unwrap();
        assert_eq!(salary["debtor"]["name"], "Acme Oy");

        // Exactly one page: no key.
        let card = uid(&session, "CARD");
        let (rows, pages) = all_rows(&sandbox, &card, "").await;
        assert_eq!((rows.len(), pages), (3, 1));

        // A window and a status filter.
        let last_week = (Utc::now().date_naive() - TimeDelta::days(7)).to_string();
        let (rows, _) = all_rows(&sandbox, &current, &format!("date_from={last_week}")).await;
        assert_eq!(rows.len(), 3);
        let (rows, _) = all_rows(&sandbox, &current, "transaction_status=PDNG").await;
        assert_eq!(rows.len(), 1);
    }

    #[tokio::test]
    async fn transactions_refuse_bad_windows_and_keys() {
        let sandbox = sandbox();
        let session = session(&sandbox).await;
        let current = uid(&session, "CACC");
        let card = uid(&session, "CARD");
        let (_, first) = get(&sandbox, &format!("/accounts/{current}/transactions")).await;
        let key = first["continuation_key"].as_str().unwrap().to_owned();
        let tomorrow = (Utc::now().date_naive() + TimeDelta::days(1)).to_string();
        let cases = [
            (
                format!("/accounts/{card}/transactions?continuation_key={key}"),
                "WRONG_CONTINUATION_KEY",
            ),
            (
                format!(
                    "/accounts/{current}/transactions?date_from=2020-01-01&continuation_key={key}"
                ),
                "WRONG_CONTINUATION_KEY",
            ),
            (
                format!("/accounts/{current}/transactions?continuation_key=%%%"),
                "WRONG_CONTINUATION_KEY",
            ),
            (
                format!("/accounts/{current}/transactions?date_to=2020-01-01"),
                "DATE_TO_WITHOUT_DATE_FROM",
            ),
            (
                format!("/accounts/{current}/transactions?date_from={tomorrow}"),
                "DATE_FROM_IN_FUTURE",
            ),
            (
                format!("/accounts/{current}/transactions?date_from=2020-02-01&date_to=2020-01-01"),
                "WRONG_DATE_INTERVAL",
            ),
            (
                format!("/accounts/{current}/transactions?date_from=01.02.2020"),
                "WRONG_REQUEST_PARAMETERS",
            ),
            (
                format!("/accounts/{current}/transactions?transaction_status=X"),
                "WRONG_REQUEST_PARAMETERS",
            ),
        ];
        for (uri, error) in cases {
            let (status, body) = get(&sandbox, &uri).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{uri}");
            assert_eq!(body["error"], error, "{uri}");
        }
    }

    #[tokio::test]
    async fn pending_rows_book_on_a_later_call() {
        let sandbox = sandbox();
        let session = session(&sandbox).await;
        let current = uid(&session, "CACC");
        let (before, _) = all_rows(&sandbox, &current, "").await;
        assert_eq!(before.iter().filter(|r| r["status"] == "PDNG").count(), 1);
        sandbox.book_pending();
        let (after, _) = all_rows(&sandbox, &current, "").await;
        assert_eq!(after.len(), before.len());
        assert!(after.iter().all(|r| r["status"] == "BOOK"));
        let coffee = after
            .iter()
            .find(|r| r["entry_reference"] == "SBX-2006")
            .unwrap();
        assert_eq!(coffee["creditor"]["name"], "Blue Cup Coffee");
        assert!(coffee["booking_date"].is_string());
        let (_, balances) = get(&sandbox, &format!("/accounts/{current}/balances")).await;
        assert_eq!(
            balances["balances"][0]["balance_amount"]["amount"],
            "1515.65"
        );
    }

    #[tokio::test]
    async fn the_expired_switch_expires_existing_sessions_only() {
        let sandbox = sandbox();
        let old = session(&sandbox).await;
        let old_uid = uid(&old, "CACC");
        sandbox.set_sessions_expired(true);
        for path in ["balances", "transactions"] {
            let (status, body) = get(&sandbox, &format!("/accounts/{old_uid}/{path}")).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
            assert_eq!(body["error"], "EXPIRED_SESSION");
        }
        let id = old["session_id"].as_str().unwrap();
        let (_, stored) = get(&sandbox, &format!("/sessions/{id}")).await;
        assert_eq!(stored["status"], "EXPIRED");
        assert!(sandbox.active_sessions().is_empty());

        // A reauthorization works at once.
        let renewed = session(&sandbox).await;
        let renewed_uid = uid(&renewed, "CACC");
        let (status, _) = get(&sandbox, &format!("/accounts/{renewed_uid}/balances")).await;
        assert_eq!(status, StatusCode::OK);

        sandbox.set_sessions_expired(false);
        let (status, _) = get(&sandbox, &format!("/accounts/{old_uid}/balances")).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn the_rate_limit_switch_answers_429_on_data_calls() {
        let sandbox = sandbox();
        let session = session(&sandbox).await;
        let current = uid(&session, "CACC");
        sandbox.set_rate_limited(true);
        for path in ["balances", "transactions"] {
            let (status, body) = get(&sandbox, &format!("/accounts/{current}/{path}")).await;
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(body["error"], "ASPSP_RATE_LIMIT_EXCEEDED");
        }
        let (status, _) = get(&sandbox, "/aspsps").await;
        assert_eq!(status, StatusCode::OK);
        sandbox.set_rate_limited(false);
        let (status, _) = get(&sandbox, &format!("/accounts/{current}/balances")).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test]
    async fn deleted_sessions_are_recorded_and_closed() {
        let sandbox = sandbox();
        let session = session(&sandbox).await;
        let id = session["session_id"].as_str().unwrap();
        let current = uid(&session, "CACC");
        let (status, body) = api(&sandbox, Method::DELETE, &format!("/sessions/{id}"), None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["message"], "OK");
        assert_eq!(sandbox.deleted_sessions(), [id.to_owned()]);
        let (status, body) = get(&sandbox, &format!("/accounts/{current}/transactions")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"], "CLOSED_SESSION");
        let (_, stored) = get(&sandbox, &format!("/sessions/{id}")).await;
        assert_eq!(stored["status"], "CLOSED");
        assert!(stored["closed"].is_string());
        let (status, _) = api(&sandbox, Method::DELETE, &format!("/sessions/{id}"), None).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        let (status, body) = api(&sandbox, Method::DELETE, "/sessions/unknown", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"], "SESSION_DOES_NOT_EXIST");
        assert_eq!(sandbox.deleted_sessions().len(), 1);
    }

    #[tokio::test]
    async fn failing_answers_500_and_requests_are_logged_without_the_jwt() {
        let sandbox = sandbox();
        let token = jwt();
        api_with(
            &sandbox,
            Method::GET,
            "/aspsps?country=FI",
            None,
            Some(&token),
        )
        .await;
        sandbox.set_failing(true);
        let (status, body) = get(&sandbox, "/aspsps").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["code"], 500);
        sandbox.set_failing(false);
        let (status, _) = get(&sandbox, "/aspsps").await;
        assert_eq!(status, StatusCode::OK);
        let requests = sandbox.requests();
        assert_eq!(
            requests,
            ["GET /aspsps?country=FI", "GET /aspsps", "GET /aspsps"]
        );
        assert!(requests.iter().all(|r| !r.contains(&token)));
    }

    #[tokio::test]
    async fn unknown_paths_and_methods() {
        let sandbox = sandbox();
        let (status, _) = get(&sandbox, "/payments").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = api(&sandbox, Method::POST, "/aspsps", None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        let (status, _) = get(&sandbox, "/sessions/unknown").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (status, _) = api(&sandbox, Method::POST, "/sessions", Some(json!({}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        let (status, _, _) = send(
            &sandbox,
            Request::get("/approval/unknown")
                .body(Full::default())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[test]
    fn a_session_expires_at_its_valid_until() {
        let now = Utc::now();
        let mut session = Session {
            institution: 0,
            psu_type: "personal".to_owned(),
            valid_until: now + TimeDelta::seconds(1),
            created: now,
            account_uids: Vec::new(),
            closed: None,
            expired_by_switch: false,
        };
        assert!(session.problem(now).is_none());
        assert!(matches!(
            session.problem(now + TimeDelta::seconds(1)),
            Some(SessionProblem::Expired)
        ));
        session.closed = Some(now);
        assert!(matches!(session.problem(now), Some(SessionProblem::Closed)));
    }

    #[test]
    fn state_maps_are_bounded() {
        let mut state = State::default();
        let now = Utc::now();
        for n in 0..MAX_SESSIONS + 5 {
            state.insert_session(
                format!("s{n}"),
                Session {
                    institution: 0,
                    psu_type: "personal".to_owned(),
                    valid_until: now,
                    created: now,
                    account_uids: vec![format!("a{n}"), format!("b{n}")],
                    closed: None,
                    expired_by_switch: false,
                },
            );
        }
        assert_eq!(state.sessions.len(), MAX_SESSIONS);
        assert_eq!(state.accounts.len(), 2 * MAX_SESSIONS);
        assert!(!state.sessions.contains_key("s0") && !state.accounts.contains_key("a0"));
        for n in 0..MAX_AUTHORIZATIONS + 5 {
            let code = format!("code{n}");
            state.codes.insert(code.clone(), format!("z{n}"));
            state.insert_authorization(
                format!("z{n}"),
                Authorization {
                    institution: 0,
                    valid_until: now,
                    state: String::new(),
                    redirect_url: Url::parse("https://app.test/").unwrap(),
                    psu_type: "personal".to_owned(),
                    code: Some((code, now)),
                    decided: true,
                },
            );
        }
        assert_eq!(state.authorizations.len(), MAX_AUTHORIZATIONS);
        assert_eq!(state.codes.len(), MAX_AUTHORIZATIONS);
        let mut log = VecDeque::new();
        for n in 0..MAX_LOGGED + 3 {
            push_bounded(&mut log, n);
        }
        assert_eq!((log.len(), log.front().copied()), (MAX_LOGGED, Some(3)));
    }

    #[test]
    fn debug_shows_no_key_and_the_keys_match() {
        let sandbox = sandbox();
        let debug = format!("{sandbox:?}");
        assert!(debug.contains(EnableBankingSandbox::APPLICATION_ID));
        assert!(!debug.contains("PRIVATE"));
        assert!(
            sandbox
                .private_key_pem()
                .starts_with("-----BEGIN RSA PRIVATE KEY-----")
        );
        assert!(
            sandbox
                .private_key_pkcs8_pem()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        assert_eq!(sandbox.base_url(), BASE);
        assert_eq!(
            sandbox.application_id(),
            EnableBankingSandbox::APPLICATION_ID
        );
        // The PKCS#8 document wraps the PKCS#1 key (its DER ends with it).
        let pkcs1 = pem_to_der(sandbox.private_key_pem()).unwrap();
        let pkcs8 = pem_to_der(sandbox.private_key_pkcs8_pem()).unwrap();
        assert!(pkcs8.ends_with(&pkcs1));
    }
}
