//! The Enable Banking provider ([API](https://enablebanking.com/docs/api/)): bank data for
//! Europe through PSD2 open banking (about 2,500 banks).
//!
//! - Application authentication: every request carries a JWT signed RS256 with the
//!   application's private key (`kid` the application id, `iss` `enablebanking.com`, `aud`
//!   `api.enablebanking.com`), valid for an hour and reused until five minutes before its
//!   end. The key is read once, when the provider is made; a key that cannot sign refuses
//!   the provider.
//! - Institutions: `GET /aspsps?country=XX&psu_type=personal`. An institution's id is its
//!   country and name (`FI:Nordea`); its `max_consent_days` is the bank's
//!   `maximum_consent_validity`.
//! - Connect: `POST /auth` names the bank, asks for `access.valid_until` = now + the bank's
//!   maximum consent (90 days when it says none), and carries our `state` and redirect URI;
//!   the callback's code goes to `POST /sessions`. The session id, the bank and what the
//!   session's accounts are (their `uid`s in this session and stable keys) are the
//!   connection's encrypted secret; the consent's `valid_until` is the connection's expiry.
//!   A reauthorization asks the bank of the stored session again. A disconnect ends the
//!   session (`DELETE /sessions/{id}`).
//! - Accounts: keyed by `identification_hash`, else a digest of the IBAN, so the accounts
//!   (and their records) of a reauthorized connection stay the same although every session
//!   gives them new `uid`s. The IBAN is stored masked. `cash_account_type` gives the type
//!   (`CACC` checking, `SVGS` savings, `CARD` credit card, `LOAN` loan, `MOMA` money market,
//!   `ODFT`/`MGLD` line of credit; else `other`).
//! - Balances (`GET /accounts/{uid}/balances`): the balance is the first of `CLBD`, `ITBD`,
//!   `XPCD`, `OPBD`, `PRCD`, `ITAV`, `CLAV`, ... the bank reports; the available balance the
//!   first of `ITAV`, `CLAV`, `FWAV`, `XPCD`. Each sync records them as a snapshot.
//! - Transactions (`GET /accounts/{uid}/transactions`, following `continuation_key`):
//!   amounts are signed by `credit_debit_indicator` (`DBIT` negative), `PDNG` rows are
//!   pending, the id is `entry_reference` or a digest of the row; the description is the
//!   counterparty's name and the remittance information.
//! - Budget: banks allow about four unattended reads a day, so the provider's request budget
//!   is 4 syncs a day by default ([`EnableBankingConfig::budget`]).
//! - A session the API reports expired, revoked or closed makes the connection `expired`.
//!
//! ```no_run
//! use aggregation_core::providers::{EnableBankingConfig, EnableBankingProvider};
//! let config = EnableBankingConfig::from_key_file(
//!     "cf589be3-3755-465b-a8df-a90a16a31403",
//!     std::path::Path::new("/etc/aggregation/enablebanking.pem"),
//! )
//! .expect("a readable key");
//! let provider = EnableBankingProvider::new(config).expect("a usable key");
//! # let _ = provider;
//! ```

mod jwt;
mod mapping;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{SecondsFormat, TimeDelta, Utc};
use serde::Serialize;
use url::Url;

use self::jwt::ApplicationToken;
use self::mapping::{
    AspspList, AspspRef, AuthStarted, BalanceList, ErrorBody, SessionCreated, SessionSecret,
    TransactionPage,
};
use crate::outbound::{describe_request_error, read_limited};
use crate::providers::{
    AuthorizationRequest, DateRange, FetchContext, Fetched, Institution, Provider,
    ProviderCredentials, ProviderError, ProviderSecret, RequestBudget, SyncItemError,
};
use crate::store::{NewAccount, NewHolding, NewTransaction};

/// The Enable Banking API.
pub const DEFAULT_BASE_URL: &str = "https://api.enablebanking.com";

/// The countries offered by default (ISO 3166-1 alpha-2): the EU, Iceland, Norway and the UK.
pub const DEFAULT_COUNTRIES: &[&str] = &[
    "AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES", "FI", "FR", "GB", "GR", "HR", "HU", "IE",
    "IS", "IT", "LT", "LU", "LV", "MT", "NL", "NO", "PL", "PT", "RO", "SE", "SI", "SK",
];

/// Time to connect to the API.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for one whole answer (banks behind the API can be slow).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Most transaction pages followed for one account and window.
const MAX_PAGES: usize = 200;

/// How an [`EnableBankingProvider`] is set up. `Debug` never shows the private key.
#[derive(Clone)]
pub struct EnableBankingConfig {
    /// Slug (`enablebanking`).
    pub slug: String,
    /// Display name.
    pub name: String,
    /// The API root (`https://api.enablebanking.com`); it may carry a path prefix.
    pub base_url: String,
    /// The application id (the JWT's `kid`), from the Enable Banking control panel.
    pub application_id: String,
    /// The application's RSA private key, PEM (PKCS#8 or PKCS#1).
    pub private_key_pem: Vec<u8>,
    /// The countries offered.
    pub countries: Vec<String>,
    /// The consent asked for, in days, when a bank does not state its maximum.
    pub default_consent_days: u32,
    /// How many requests a connection may send (`None`: only the service's cool-down); by
    /// default 4 a day for the background job's syncs alone.
    pub budget: Option<RequestBudget>,
}

impl fmt::Debug for EnableBankingConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnableBankingConfig")
            .field("slug", &self.slug)
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("application_id", &self.application_id)
            .field("private_key_pem", &"<redacted>")
            .field("countries", &self.countries)
            .field("default_consent_days", &self.default_consent_days)
            .field("budget", &self.budget)
            .finish()
    }
}

impl EnableBankingConfig {
    /// `enablebanking` on the public API with this application's id and private key (PEM),
    /// every country, 4 unattended requests a day (PSD2's cap on access without the user:
    /// the background job's syncs spend it; the syncs a user asks for are not limited).
    pub fn new(application_id: impl Into<String>, private_key_pem: impl Into<Vec<u8>>) -> Self {
        Self {
            slug: "enablebanking".to_owned(),
            name: "Enable Banking".to_owned(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            application_id: application_id.into(),
            private_key_pem: private_key_pem.into(),
            countries: DEFAULT_COUNTRIES.iter().map(|c| (*c).to_owned()).collect(),
            default_consent_days: 90,
            budget: Some(RequestBudget::daily(4).unattended_only()),
        }
    }

    /// [`new`](Self::new) with the private key read from a PEM file.
    /// [`ProviderError::Configuration`] when the file cannot be read.
    pub fn from_key_file(
        application_id: impl Into<String>,
        key_file: &Path,
    ) -> Result<Self, ProviderError> {
        let pem = std::fs::read(key_file).map_err(|error| {
            ProviderError::Configuration(format!("cannot read {}: {error}", key_file.display()))
        })?;
        Ok(Self::new(application_id, pem))
    }

    /// With another API root (a sandbox).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }
}

/// Institutions of one country with when they were fetched: the bank a connect names is
/// looked up here for its maximum consent.
type AspspCache = HashMap<String, (tokio::time::Instant, Arc<Vec<mapping::Aspsp>>)>;

/// How long the provider keeps a country's banks for connects.
const ASPSP_TTL: Duration = Duration::from_secs(3600);

/// The Enable Banking provider. See the [module documentation](self).
#[derive(Clone)]
pub struct EnableBankingProvider {
    slug: String,
    name: String,
    countries: Vec<String>,
    default_consent_days: u32,
    budget: Option<RequestBudget>,
    base: Url,
    token: Arc<ApplicationToken>,
    http: reqwest::Client,
    aspsps: Arc<Mutex<AspspCache>>,
}

impl fmt::Debug for EnableBankingProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnableBankingProvider")
            .field("slug", &self.slug)
            .field("base", &self.base.as_str())
            .field("application_id", &self.token.application_id())
            .finish_non_exhaustive()
    }
}

/// Which request failed, for error messages (never with ids or tokens).
#[derive(Clone, Copy)]
enum Call {
    Aspsps,
    Auth,
    Sessions,
    DeleteSession,
    Balances,
    Transactions,
}

impl Call {
    fn name(self) -> &'static str {
        match self {
            Self::Aspsps => "GET /aspsps",
            Self::Auth => "POST /auth",
            Self::Sessions => "POST /sessions",
            Self::DeleteSession => "DELETE /sessions",
            Self::Balances => "GET /accounts/balances",
            Self::Transactions => "GET /accounts/transactions",
        }
    }
}

impl EnableBankingProvider {
    /// A provider with its HTTP client and signer. [`ProviderError::Configuration`] when the
    /// base URL is not an http(s) URL, or the key cannot sign.
    pub fn new(config: EnableBankingConfig) -> Result<Self, ProviderError> {
        let base = super::api_base_url(&config.base_url, "Enable Banking", true)?;
        let token = ApplicationToken::new(&config.application_id, &config.private_key_pem)?;
        let http = super::api_client(CONNECT_TIMEOUT, REQUEST_TIMEOUT)?;
        Ok(Self {
            slug: config.slug,
            name: config.name,
            countries: config
                .countries
                .iter()
                .map(|country| country.trim().to_ascii_uppercase())
                .collect(),
            default_consent_days: config.default_consent_days.max(1),
            budget: config.budget,
            base,
            token: Arc::new(token),
            http,
            aspsps: Arc::default(),
        })
    }

    /// `{base}{path}` (path without a leading slash).
    fn url(&self, path: &str) -> Result<Url, ProviderError> {
        self.base
            .join(path)
            .map_err(|_| ProviderError::Configuration(format!("bad request path {path:?}")))
    }

    /// Sends a request with the application JWT and reads a JSON answer. A session the API
    /// says is over is [`ProviderError::Unauthorized`] (the service then marks the connection
    /// expired); a refused JWT is a configuration error; other failures are
    /// [`ProviderError::Http`].
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        call: Call,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ProviderError> {
        let body = self.send_raw(call, request).await?;
        serde_json::from_slice(&body)
            .map_err(|error| ProviderError::InvalidResponse(format!("{}: {error}", call.name())))
    }

    async fn send_raw(
        &self,
        call: Call,
        request: reqwest::RequestBuilder,
    ) -> Result<Vec<u8>, ProviderError> {
        let response = request
            .bearer_auth(self.token.bearer()?)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| {
                ProviderError::Http(format!(
                    "{}: {}",
                    call.name(),
                    describe_request_error(&error)
                ))
            })?;
        let status = response.status();
        let body = read_limited(response, MAX_BODY)
            .await
            .map_err(|error| ProviderError::Http(format!("{}: {error}", call.name())))?;
        if status.is_success() {
            return Ok(body);
        }
        let error: ErrorBody = serde_json::from_slice(&body).unwrap_or_default();
        let said = error
            .message
            .as_deref()
            .or(error.error.as_deref())
            .unwrap_or("no message");
        if mapping::ends_session(error.error.as_deref()) {
            // The consent expired or was revoked: the service finds it cannot be renewed
            // and marks the connection `expired`.
            tracing::info!(
                error = error.error.as_deref().unwrap_or_default(),
                "{} found the Enable Banking session over",
                call.name()
            );
            return Err(ProviderError::Unauthorized);
        }
        match (call, status) {
            (Call::Sessions, s) if s.is_client_error() && s != http::StatusCode::UNAUTHORIZED => {
                Err(ProviderError::InvalidGrant(format!(
                    "Enable Banking refused the authorization code ({status}: {said})"
                )))
            }
            (_, http::StatusCode::UNAUTHORIZED | http::StatusCode::FORBIDDEN) => {
                Err(ProviderError::Configuration(format!(
                    "Enable Banking refused the application's credentials ({status}: {said}); \
                     check the application id and its key"
                )))
            }
            _ => Err(ProviderError::Http(format!(
                "{} answered {status}: {said}",
                call.name()
            ))),
        }
    }

    /// The banks of one country a person can connect, from the provider's own cache within
    /// the hour.
    async fn aspsps(&self, country: &str) -> Result<Arc<Vec<mapping::Aspsp>>, ProviderError> {
        let country = country.to_ascii_uppercase();
        let cached = self
            .aspsps
            .lock()
            .ok()
            .and_then(|cache| cache.get(&country).cloned())
            .filter(|(at, _)| at.elapsed() < ASPSP_TTL)
            .map(|(_, list)| list);
        if let Some(list) = cached {
            return Ok(list);
        }
        let mut url = self.url("aspsps")?;
        url.query_pairs_mut()
            .append_pair("country", &country)
            .append_pair("psu_type", "personal");
        let list: AspspList = self.send(Call::Aspsps, self.http.get(url)).await?;
        let list: Arc<Vec<mapping::Aspsp>> = Arc::new(
            list.aspsps
                .into_iter()
                .filter(|aspsp| {
                    aspsp.serves_persons() && aspsp.country.eq_ignore_ascii_case(&country)
                })
                .collect(),
        );
        if let Ok(mut cache) = self.aspsps.lock() {
            cache.retain(|_, (at, _)| at.elapsed() < ASPSP_TTL);
            cache.insert(country, (tokio::time::Instant::now(), list.clone()));
        }
        Ok(list)
    }

    /// The institutions of one country.
    pub(crate) async fn list_institutions(
        &self,
        country: &str,
    ) -> Result<Vec<Institution>, ProviderError> {
        Ok(self
            .aspsps(country)
            .await?
            .iter()
            .map(mapping::Aspsp::institution)
            .collect())
    }

    /// `POST /auth` for the bank `aspsp`: the address the user is sent to.
    async fn start_auth(
        &self,
        aspsp: &AspspRef,
        state: &str,
        redirect_uri: &str,
    ) -> Result<String, ProviderError> {
        let known = self.aspsps(&aspsp.country).await?;
        let bank = known
            .iter()
            .find(|bank| bank.name == aspsp.name)
            .ok_or_else(|| {
                ProviderError::InvalidGrant(format!(
                    "Enable Banking does not list the bank {:?} in {}",
                    aspsp.name, aspsp.country
                ))
            })?;
        let consent = bank
            .maximum_consent_validity
            .map(consent_validity)
            .unwrap_or_else(|| TimeDelta::days(i64::from(self.default_consent_days)));
        let valid_until = Utc::now()
            .checked_add_signed(consent)
            .unwrap_or_else(Utc::now)
            .to_rfc3339_opts(SecondsFormat::Secs, true);
        #[derive(Serialize)]
        struct AuthAccess<'a> {
            valid_until: &'a str,
        }
        #[derive(Serialize)]
        struct AuthBody<'a> {
            access: AuthAccess<'a>,
            aspsp: &'a AspspRef,
            state: &'a str,
            redirect_url: &'a str,
            psu_type: &'a str,
        }
        let body = AuthBody {
            access: AuthAccess {
                valid_until: &valid_until,
            },
            aspsp,
            state,
            redirect_url: redirect_uri,
            psu_type: "personal",
        };
        let started: AuthStarted = self
            .send(Call::Auth, self.http.post(self.url("auth")?).json(&body))
            .await?;
        Ok(started.url)
    }

    /// `POST /sessions` with the code: the session's secret and when its consent ends.
    async fn create_session(
        &self,
        code: &str,
    ) -> Result<(SessionSecret, Option<chrono::DateTime<Utc>>), ProviderError> {
        let created: SessionCreated = self
            .send(
                Call::Sessions,
                self.http
                    .post(self.url("sessions")?)
                    .json(&serde_json::json!({ "code": code })),
            )
            .await?;
        let (accounts, errors) = mapping::session_accounts(created.accounts);
        for error in &errors {
            tracing::warn!(item = %error.item, message = %error.message, "an Enable Banking account of a new session was not usable");
        }
        let valid_until = created.access.and_then(|access| access.valid_until);
        Ok((
            SessionSecret {
                session_id: created.session_id,
                aspsp: created.aspsp,
                accounts,
            },
            valid_until,
        ))
    }

    /// `DELETE /sessions/{id}`.
    async fn delete_session(&self, session_id: &str) -> Result<(), ProviderError> {
        let url = self.url(&format!("sessions/{}", segment(session_id)))?;
        self.send_raw(Call::DeleteSession, self.http.delete(url))
            .await
            .map(drop)
    }

    /// A `GET` of account data, counted on the sync's context. With the user present it
    /// carries the PSU headers (PSD2: access the user asks for is not limited like unattended
    /// access, and the bank is told who asks).
    fn data_request(&self, url: Url, context: Option<&FetchContext>) -> reqwest::RequestBuilder {
        let mut request = self.http.get(url);
        let Some(context) = context else {
            return request;
        };
        context.count_request();
        if let Some(user) = &context.present_user {
            if let Some(ip) = user.ip {
                request = request.header("Psu-Ip-Address", ip.to_string());
            }
            let agent = user
                .user_agent
                .as_deref()
                .and_then(|agent| http::HeaderValue::from_str(agent).ok());
            if let Some(agent) = agent {
                request = request.header("Psu-User-Agent", agent);
            }
        }
        request
    }

    /// The session's accounts with their balances.
    async fn session_balances(
        &self,
        secret: &SessionSecret,
        context: Option<&FetchContext>,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        let mut fetched = Fetched::default();
        for account in &secret.accounts {
            let url = self.url(&format!("accounts/{}/balances", segment(&account.uid)))?;
            let balances: Result<BalanceList, _> = self
                .send(Call::Balances, self.data_request(url, context))
                .await;
            match balances {
                Ok(list) => match mapping::account_record(account, &list.balances) {
                    Ok(record) => fetched.items.push(record),
                    Err(error) => fetched.errors.push(error),
                },
                Err(error @ (ProviderError::Http(_) | ProviderError::InvalidResponse(_))) => {
                    fetched.errors.push(SyncItemError {
                        item: account.key.clone(),
                        message: error.to_string(),
                    });
                }
                Err(error) => return Err(error),
            }
        }
        if fetched.items.is_empty() && !fetched.errors.is_empty() {
            return Err(ProviderError::Http(format!(
                "no account's balances could be read: {}",
                fetched.errors[0].message
            )));
        }
        Ok(fetched)
    }

    /// One account's transactions in the range, every page.
    async fn account_transactions(
        &self,
        secret: &SessionSecret,
        key: &str,
        range: DateRange,
        context: Option<&FetchContext>,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        let account = secret
            .accounts
            .iter()
            .find(|account| account.key == key)
            .ok_or_else(|| {
                ProviderError::Http(
                    "the account is not part of the current Enable Banking session".to_owned(),
                )
            })?;
        let mut fetched = Fetched::default();
        let mut seen = HashMap::new();
        let mut ids = std::collections::HashSet::new();
        let mut continuation: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut url = self.url(&format!("accounts/{}/transactions", segment(&account.uid)))?;
            {
                let mut query = url.query_pairs_mut();
                query
                    .append_pair("date_from", &range.start.to_string())
                    .append_pair("date_to", &range.end.to_string());
                if let Some(key) = &continuation {
                    query.append_pair("continuation_key", key);
                }
            }
            let page: TransactionPage = self
                .send(Call::Transactions, self.data_request(url, context))
                .await?;
            for value in page.transactions {
                match mapping::map_transaction(value, account.currency.as_deref(), &mut seen) {
                    Ok(Some(row)) => {
                        // A bank may repeat a row on a page boundary.
                        if ids.insert(row.provider_transaction_id.clone()) {
                            fetched.items.push(row);
                        }
                    }
                    Ok(None) => {}
                    Err(error) => fetched.errors.push(error),
                }
            }
            match page.continuation_key.filter(|key| !key.is_empty()) {
                Some(next) if continuation.as_ref() != Some(&next) => continuation = Some(next),
                _ => return Ok(fetched),
            }
        }
        fetched.errors.push(SyncItemError {
            item: key.to_owned(),
            message: format!("more than {MAX_PAGES} pages of transactions; the rest was not read"),
        });
        Ok(fetched)
    }
}

/// The longest consent asked for: far beyond any bank's, and within what a timestamp holds.
const MAX_CONSENT: TimeDelta = TimeDelta::days(100 * 366);

/// A bank's `maximum_consent_validity` (seconds, of any size) as a duration, at most
/// [`MAX_CONSENT`].
fn consent_validity(seconds: u64) -> TimeDelta {
    i64::try_from(seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .map_or(MAX_CONSENT, |validity| validity.min(MAX_CONSENT))
}

/// A path segment with the characters a URL path may not carry escaped.
fn segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// The stored secret of a connection.
fn session_of(credentials: &ProviderCredentials) -> Result<SessionSecret, ProviderError> {
    credentials.secret.deserialize::<SessionSecret>()
}

#[async_trait]
impl Provider for EnableBankingProvider {
    fn slug(&self) -> &str {
        &self.slug
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn countries(&self) -> Vec<String> {
        self.countries.clone()
    }

    fn needs_institution(&self) -> bool {
        true
    }

    fn institution_country(&self, institution_id: &str) -> Option<String> {
        mapping::parse_institution_id(institution_id).map(|aspsp| aspsp.country)
    }

    async fn institutions(&self, country: &str) -> Result<Vec<Institution>, ProviderError> {
        self.list_institutions(country).await
    }

    fn request_budget(&self) -> Option<RequestBudget> {
        self.budget
    }

    fn supports_pkce(&self) -> bool {
        // The redirect goes through Enable Banking, which takes no PKCE parameters.
        false
    }

    async fn begin_authorization(
        &self,
        request: &AuthorizationRequest<'_>,
    ) -> Result<String, ProviderError> {
        let aspsp = match (request.institution_id, request.reauthorizing) {
            (Some(id), _) => mapping::parse_institution_id(id).ok_or_else(|| {
                ProviderError::InvalidGrant(format!("{id:?} is not an Enable Banking institution"))
            })?,
            (None, Some(credentials)) => session_of(credentials)?.aspsp.ok_or_else(|| {
                ProviderError::InvalidGrant(
                    "the connection does not say its bank; connect it again".to_owned(),
                )
            })?,
            (None, None) => {
                return Err(ProviderError::InvalidGrant(
                    "Enable Banking connects one bank: name its institution".to_owned(),
                ));
            }
        };
        self.start_auth(&aspsp, request.state, request.redirect_uri)
            .await
    }

    async fn exchange_code(
        &self,
        code: &str,
        _redirect_uri: &str,
        _pkce_verifier: Option<&str>,
    ) -> Result<ProviderCredentials, ProviderError> {
        let (secret, valid_until) = self.create_session(code).await?;
        Ok(ProviderCredentials {
            secret: ProviderSecret::serialize(&secret)?,
            renew_at: None,
            consent_expires_at: valid_until,
        })
    }

    async fn disconnect(&self, credentials: &ProviderCredentials) -> Result<(), ProviderError> {
        let session = session_of(credentials)?;
        self.delete_session(&session.session_id).await
    }

    async fn accounts(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        self.session_balances(&session_of(credentials)?, None).await
    }

    async fn transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        self.account_transactions(&session_of(credentials)?, provider_account_id, range, None)
            .await
    }

    async fn fetch_accounts(
        &self,
        credentials: &ProviderCredentials,
        context: &FetchContext,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        self.session_balances(&session_of(credentials)?, Some(context))
            .await
    }

    async fn fetch_transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
        context: &FetchContext,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        self.account_transactions(
            &session_of(credentials)?,
            provider_account_id,
            range,
            Some(context),
        )
        .await
    }

    async fn fetch_holdings(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        _: &FetchContext,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        // No request is sent for holdings.
        self.holdings(credentials, provider_account_id).await
    }

    async fn holdings(
        &self,
        _: &ProviderCredentials,
        _: &str,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        // Bank accounts hold no securities through this API.
        Ok(Fetched::default())
    }
}

#[cfg(test)]
const TEST_KEY: &str = include_str!("enablebanking/test-key.pem");
#[cfg(test)]
const TEST_PUBLIC_KEY: &str = include_str!("enablebanking/test-key.pub.pem");

#[cfg(test)]
mod tests {
    use super::*;

    fn config(base_url: &str) -> EnableBankingConfig {
        EnableBankingConfig::new("app-1", TEST_KEY.as_bytes()).with_base_url(base_url)
    }

    #[test]
    fn requests_go_under_the_base_url_and_its_prefix() {
        let provider = EnableBankingProvider::new(config("http://127.0.0.1:9/sandbox/eb"))
            .expect("a provider");
        assert_eq!(
            provider.url("aspsps").expect("url").as_str(),
            "http://127.0.0.1:9/sandbox/eb/aspsps"
        );
        let uid = segment("a/b c?");
        assert_eq!(uid, "a%2Fb%20c%3F");
        assert_eq!(
            provider
                .url(&format!("accounts/{uid}/balances"))
                .expect("url")
                .path(),
            "/sandbox/eb/accounts/a%2Fb%20c%3F/balances"
        );
        assert!(provider.needs_institution());
        assert_eq!(provider.slug(), "enablebanking");
        assert_eq!(
            provider.request_budget().map(|budget| budget.requests),
            Some(4)
        );
        assert!(!format!("{:?}", config("http://x")).contains("PRIVATE"));
    }

    #[test]
    fn consent_validity_of_any_size_is_clamped() {
        assert_eq!(consent_validity(3600), TimeDelta::hours(1));
        assert_eq!(consent_validity(0), TimeDelta::zero());
        for huge in [9_300_000_000_000_000, i64::MAX as u64, u64::MAX] {
            assert_eq!(consent_validity(huge), MAX_CONSENT, "{huge}");
        }
    }

    #[test]
    fn bad_settings_refuse_the_provider() {
        for base in ["ftp://example.com", "not a url", "mailto:x@example.com"] {
            assert!(
                matches!(
                    EnableBankingProvider::new(config(base)),
                    Err(ProviderError::Configuration(_))
                ),
                "{base}"
            );
        }
        let wrong_key = EnableBankingConfig::new("app-1", TEST_PUBLIC_KEY.as_bytes());
        assert!(matches!(
            EnableBankingProvider::new(wrong_key),
            Err(ProviderError::Configuration(_))
        ));
        assert!(matches!(
            EnableBankingConfig::from_key_file("app-1", Path::new("/nonexistent/key.pem")),
            Err(ProviderError::Configuration(_))
        ));
    }
}
