//! External financial providers: the [`Provider`] trait, the registry the service holds and the
//! built-in Charles Schwab provider (feature `schwab`, on by default). Sandboxes that imitate
//! the providers for demos and tests live in the `aggregation-sandbox` crate.
//!
//! A provider does few things: it connects a user (builds the OAuth 2.0 authorization address
//! and exchanges the code, or claims a setup token), answers [`ProviderCredentials`] holding an
//! opaque [`ProviderSecret`] of its own making, renews them when they say so, ends them on
//! disconnect, and fetches accounts, transactions and holdings with them. Everything else
//! (states, encryption,
//! storage, cool-downs, statistics) is the service's, so a provider is small. Embedders add
//! their own with [`AggregationServiceBuilder::provider`](crate::AggregationServiceBuilder::provider).
//!
//! # PKCE
//!
//! Every connect of a provider whose [`Provider::supports_pkce`] is `true` (the default, and
//! Schwab's) gets a fresh S256 verifier. It is stored only encrypted, with the state, bound to
//! the state's digest; the authorization address carries its challenge and the code exchange
//! the verifier.
//!
//! # Credential renewals (token refreshes)
//!
//! Providers may rotate refresh tokens (each refresh answers a new one and spends the old), so
//! presenting one twice gets `invalid_grant`. Refreshes are therefore single-flight per
//! connection: the background job, the syncs, the explicit token-refresh request and the retry
//! after a refused access token all take the connection's in-process lock, read the stored
//! credentials again, and use the tokens another flight stored meanwhile instead of refreshing
//! again. The lock map keeps an entry only while a refresh of that connection runs or waits.
//!
//! Several instances over one database do not share those locks. There the credential write
//! is a compare-and-swap on the ciphertext the refresh started from (every write has a fresh
//! nonce), so the instance that loses reads the winner's tokens instead of overwriting them,
//! and a refused refresh marks the connection `expired` only when the credentials it used are
//! still the stored ones after a grace of 2 seconds (long enough for the winner to store its
//! answer); a later successful refresh from those credentials makes it `active` again.
//!
//! What this does not cover: across instances one refresh token can still reach the provider
//! twice (the loser's copy is refused and ignored). A provider that answers such a reuse by
//! revoking the whole grant (refresh-token reuse detection) will then need the user to
//! authorize again; so will a provider that accepts both copies but invalidates the winner's
//! new refresh token when it issues the loser's (the loser's tokens are discarded). Run the
//! token-refresh job on one instance (it takes a lease) and keep user syncs of one connection
//! on one instance (sticky routing) if your provider behaves so.

mod clients;

#[cfg(feature = "schwab")]
pub use clients::schwab::{SchwabConfig, SchwabProvider};

#[cfg(feature = "simplefin")]
pub use clients::simplefin;

#[cfg(feature = "simplefin")]
pub use clients::simplefin::{SimplefinConfig, SimplefinProvider};

#[cfg(feature = "enablebanking")]
pub use clients::enablebanking;

#[cfg(feature = "enablebanking")]
pub use clients::enablebanking::{EnableBankingConfig, EnableBankingProvider};

#[cfg(feature = "plaid")]
pub use clients::plaid;

#[cfg(feature = "plaid")]
pub use clients::plaid::{PlaidConfig, PlaidProvider};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::store::{NewAccount, NewHolding, NewTransaction};

pub(crate) mod connections;
mod flights;
pub(crate) mod sync;

/// An opaque secret only the provider that issued it reads: OAuth tokens, a SimpleFIN access
/// URL, a session id, in whatever JSON shape the provider chooses. The service never looks
/// inside; it stores the secret encrypted with its keyring (bound to the connection id) and
/// hands it back to the provider. `Debug` never shows it, and nothing logs it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ProviderSecret(serde_json::Value);

impl ProviderSecret {
    /// A secret made of one string (an access URL, a session id).
    pub fn from_string(secret: impl Into<String>) -> Self {
        Self(serde_json::Value::String(secret.into()))
    }

    /// A secret of any JSON shape.
    pub fn from_json(secret: serde_json::Value) -> Self {
        Self(secret)
    }

    /// A secret serialized from the provider's own type.
    pub fn serialize<T: Serialize>(secret: &T) -> Result<Self, ProviderError> {
        serde_json::to_value(secret)
            .map(Self)
            .map_err(|error| ProviderError::InvalidResponse(format!("secret: {error}")))
    }

    /// The secret read back into the provider's own type. An error names the type, never
    /// the secret's content.
    pub fn deserialize<T: serde::de::DeserializeOwned>(&self) -> Result<T, ProviderError> {
        serde_json::from_value(self.0.clone()).map_err(|_| {
            ProviderError::InvalidCredentials(format!(
                "the stored secret is not a {}",
                std::any::type_name::<T>()
            ))
        })
    }

    /// The secret as a string, when it is one.
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_str()
    }

    /// The secret as JSON.
    pub fn as_json(&self) -> &serde_json::Value {
        &self.0
    }
}

impl fmt::Debug for ProviderSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProviderSecret(<redacted>)")
    }
}

/// The credentials a provider issued for one connection: its opaque [`ProviderSecret`] and
/// the two instants the service acts on. Serialized only to be encrypted with the service's
/// keyring (bound to the connection id); `Debug` never shows the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderCredentials {
    /// What data requests use; only the provider that issued it gives it meaning.
    pub secret: ProviderSecret,
    /// When the secret must be renewed ([`Provider::renew_credentials`]) to keep working:
    /// the service renews it shortly before, and a renewal the provider refuses makes the
    /// connection `expired`. `None`: it never needs renewing.
    pub renew_at: Option<DateTime<Utc>>,
    /// When the user's consent ends: past it the connection is `expired` and needs a
    /// reauthorization, whatever the secret says. `None` when the provider sets no end.
    pub consent_expires_at: Option<DateTime<Utc>>,
}

impl ProviderCredentials {
    /// Credentials made of one secret that never needs renewing and has no consent end
    /// (a SimpleFIN access URL).
    pub fn lasting(secret: ProviderSecret) -> Self {
        Self {
            secret,
            renew_at: None,
            consent_expires_at: None,
        }
    }
}

/// What the authorization address carries. Built with [`AuthorizationRequest::new`] and the
/// `with_*` methods, so later fields do not break providers.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AuthorizationRequest<'a> {
    /// The anti-forgery state value.
    pub state: &'a str,
    /// Where the provider sends the user back.
    pub redirect_uri: &'a str,
    /// The PKCE S256 challenge, when the provider uses PKCE.
    pub pkce_challenge: Option<&'a str>,
    /// The institution the user chose (an id of [`Provider::institutions`]), for a provider
    /// that [needs one](Provider::needs_institution).
    pub institution_id: Option<&'a str>,
    /// On a reauthorization, the credentials of the connection being renewed, when they can
    /// still be read (a provider may keep what it needs again there, such as the
    /// institution).
    pub reauthorizing: Option<&'a ProviderCredentials>,
    /// The user who connects (a [`ConnectMethod::Link`] provider names them to its API, as
    /// Plaid's `user.client_user_id`).
    pub user_id: Option<uuid::Uuid>,
}

impl<'a> AuthorizationRequest<'a> {
    /// A request with this state and redirect URI, nothing else.
    pub fn new(state: &'a str, redirect_uri: &'a str) -> Self {
        Self {
            state,
            redirect_uri,
            pkce_challenge: None,
            institution_id: None,
            reauthorizing: None,
            user_id: None,
        }
    }

    /// For this user.
    pub fn with_user(mut self, user_id: Option<uuid::Uuid>) -> Self {
        self.user_id = user_id;
        self
    }

    /// With a PKCE S256 challenge.
    pub fn with_pkce_challenge(mut self, challenge: Option<&'a str>) -> Self {
        self.pkce_challenge = challenge;
        self
    }

    /// With the institution the user chose.
    pub fn with_institution(mut self, institution_id: Option<&'a str>) -> Self {
        self.institution_id = institution_id;
        self
    }

    /// For the reauthorization of a connection holding these credentials.
    pub fn with_reauthorizing(mut self, credentials: Option<&'a ProviderCredentials>) -> Self {
        self.reauthorizing = credentials;
        self
    }
}

/// An inclusive range of dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    /// First day.
    pub start: NaiveDate,
    /// Last day.
    pub end: NaiveDate,
}

/// One item a provider answered that could not be used, reported in the sync statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SyncItemError {
    /// Which item (a provider id, or an account).
    pub item: String,
    /// What was wrong.
    pub message: String,
}

/// A provider's answer: the usable items and the ones it could not map.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched<T> {
    /// Items mapped to records.
    pub items: Vec<T>,
    /// Items skipped, with why.
    pub errors: Vec<SyncItemError>,
}

// By hand: the derive would require `T: Default`.
impl<T> Default for Fetched<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            errors: Vec::new(),
        }
    }
}

/// `text` as an upper-case ISO 4217 code: three ASCII letters, else why not.
#[cfg(any(feature = "simplefin", feature = "enablebanking", feature = "plaid"))]
pub(crate) fn iso_currency(text: &str) -> Result<String, String> {
    let code = text.trim();
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(code.to_ascii_uppercase())
    } else {
        Err(format!("currency {code:?} is not an ISO 4217 code"))
    }
}

/// How a user connects a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnectMethod {
    /// The OAuth 2.0 authorization-code flow: `POST /providers` answers an authorization
    /// address and the callback finishes.
    #[serde(rename = "oauth")]
    OAuth,
    /// The user pastes a setup token the provider gave them; one request claims it and
    /// finishes ([`Provider::claim_setup_token`]).
    SetupToken,
    /// A token for the provider's own widget (Plaid Link): `POST /providers` answers a
    /// `link_token` ([`Provider::begin_authorization`] makes it), the front end runs the
    /// widget with it, and the callback brings the `public_token` the widget gave
    /// ([`Provider::exchange_public_token`]). A reauthorization answers a link token for the
    /// same credentials (update mode), and its callback needs no token: the stored
    /// credentials stay and the connection is `active` again.
    Link,
}

impl ConnectMethod {
    /// The name the API shows (`oauth`, `setup_token`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OAuth => "oauth",
            Self::SetupToken => "setup_token",
            Self::Link => "link",
        }
    }
}

/// How many data requests a provider tolerates per connection: a token bucket of `requests`
/// tokens, refilled evenly over `per` (one token every `per / requests`), full when the
/// connection is new. Every HTTP data request the provider sends (what it counts with
/// [`FetchContext::count_request`]) spends one token; a sync starts only while a token is
/// left, and the user's sync is refused otherwise (429 with `Retry-After` until the next
/// token) while a background one is skipped. A sync that starts runs to its end: requests it
/// sends beyond the tokens left are owed, and the bucket refills from below zero. The bucket
/// is kept in the store, so it holds across instances and restarts.
///
/// Built with [`RequestBudget::new`] or [`RequestBudget::daily`];
/// [`unattended_only`](Self::unattended_only) limits only the syncs the background job runs.
///
/// ```
/// use aggregation_core::providers::{BudgetScope, RequestBudget};
/// // SimpleFIN Bridge: 24 requests a day.
/// let bridge = RequestBudget::daily(24);
/// assert_eq!(bridge.scope, BudgetScope::EverySync);
/// // PSD2: 4 unattended reads a day; what the user asks for is not limited.
/// let psd2 = RequestBudget::daily(4).unattended_only();
/// assert_eq!(psd2.scope, BudgetScope::UnattendedSyncs);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestBudget {
    /// The bucket's capacity: requests allowed within `per` (at least one is used).
    pub requests: u32,
    /// The time the bucket takes to refill from empty.
    pub per: std::time::Duration,
    /// Which syncs spend the budget.
    pub scope: BudgetScope,
}

impl RequestBudget {
    /// `requests` within every `per`, spent by every sync.
    pub fn new(requests: u32, per: std::time::Duration) -> Self {
        Self {
            requests,
            per,
            scope: BudgetScope::EverySync,
        }
    }

    /// `requests` a day, spent by every sync.
    pub fn daily(requests: u32) -> Self {
        Self::new(requests, std::time::Duration::from_secs(24 * 3600))
    }

    /// The same budget, spent only by the syncs the background job runs: a sync the user
    /// asks for (with the user present, [`FetchContext::present_user`]) is not limited by it.
    pub fn unattended_only(mut self) -> Self {
        self.scope = BudgetScope::UnattendedSyncs;
        self
    }

    /// Whether a sync with the user present (or not) spends this budget.
    pub(crate) fn applies(&self, user_present: bool) -> bool {
        match self.scope {
            BudgetScope::EverySync => true,
            BudgetScope::UnattendedSyncs => !user_present,
        }
    }

    /// The time one request costs: the bucket gains one token per interval.
    pub(crate) fn interval(&self) -> std::time::Duration {
        self.per
            .checked_div(self.requests.max(1))
            .unwrap_or_default()
    }
}

/// Which syncs spend a [`RequestBudget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BudgetScope {
    /// Every sync, the user's and the background job's.
    EverySync,
    /// Only the background job's syncs (PSD2's unattended access).
    UnattendedSyncs,
}

/// The user who asked for a sync through the API, as the provider may need to tell it
/// (PSD2's PSU headers): the client address the service resolved (behind trusted proxies) and
/// the `User-Agent` the client sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PresentUser {
    /// The client's IP address, when known.
    pub ip: Option<std::net::IpAddr>,
    /// The client's `User-Agent`, when it sent one.
    pub user_agent: Option<String>,
}

impl PresentUser {
    /// A present user with this address and user agent.
    pub fn new(ip: Option<std::net::IpAddr>, user_agent: Option<String>) -> Self {
        Self { ip, user_agent }
    }
}

/// What a data request of one sync is made for: which connection, whether the user is
/// present, whether an answer fetched earlier may serve it, and the counter of requests the
/// provider sends (what its [`RequestBudget`] is charged). Built by the service for every
/// sync; [`FetchContext::new`] builds one for a provider's own tests.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetchContext {
    /// The connection synced: a provider that keeps answers for a while keys them by it
    /// (never sharing one between connections, so never between users).
    pub connection_id: uuid::Uuid,
    /// This sync: several calls of one sync share it.
    pub sync_id: uuid::Uuid,
    /// The user who asked for the sync through the API; `None` for a background sync.
    pub present_user: Option<PresentUser>,
    /// `force`: the answer must come from the provider now, not from an answer it gave an
    /// earlier sync.
    pub fresh: bool,
    /// For an accounts fetch: the range a transactions sync that follows would ask for by
    /// default. A provider whose accounts answer can carry those transactions in the same
    /// request (SimpleFIN) may fetch them there and serve that sync from it.
    pub upcoming_transactions: Option<DateRange>,
    sent: Arc<std::sync::atomic::AtomicU32>,
}

impl FetchContext {
    /// A context for a connection's sync, counting from zero.
    pub fn new(connection_id: uuid::Uuid, present_user: Option<PresentUser>, fresh: bool) -> Self {
        Self {
            connection_id,
            sync_id: uuid::Uuid::now_v7(),
            present_user,
            fresh,
            upcoming_transactions: None,
            sent: Arc::default(),
        }
    }

    /// With the range a following transactions sync would ask for by default.
    pub fn with_upcoming_transactions(mut self, range: Option<DateRange>) -> Self {
        self.upcoming_transactions = range;
        self
    }

    /// Counts one HTTP data request sent to the provider: call it before each one, whether it
    /// succeeds or not.
    pub fn count_request(&self) {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The requests counted so far (by this context and its clones).
    pub fn requests_sent(&self) -> u32 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One institution a provider connects to, for providers that need the user to pick one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Institution {
    /// The provider's id of the institution: what a connect's `institution_id` names.
    pub id: String,
    /// Its name.
    pub name: String,
    /// ISO 3166-1 alpha-2 country code.
    pub country: String,
    /// A logo, when the provider has one.
    pub logo_url: Option<String>,
    /// The longest consent the institution grants, in days, when known.
    pub max_consent_days: Option<u32>,
}

/// Why a provider call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The provider refused the grant (`invalid_grant`): the code was bad or used, or the
    /// refresh token is no longer valid. The user must authorize again.
    #[error("the provider refused the grant: {0}")]
    InvalidGrant(String),
    /// The provider refused the access token (401): refresh it, or authorize again.
    #[error("the provider refused the access token")]
    Unauthorized,
    /// The provider limits the rate of requests and this one went over it: retry after
    /// this many seconds (answered 503 with `Retry-After`).
    #[error("the provider's rate limit was reached; retry in {retry_after_secs} s")]
    RateLimited {
        /// When to try again.
        retry_after_secs: u64,
    },
    /// The provider does not do this (for example, OAuth for a file-import provider).
    #[error("the provider does not support {0}")]
    Unsupported(&'static str),
    /// The request could not be sent or the provider answered an error status.
    #[error("the provider request failed: {0}")]
    Http(String),
    /// The provider answered something that could not be read.
    #[error("the provider's answer could not be read: {0}")]
    InvalidResponse(String),
    /// The provider is misconfigured (a bad URL, for example).
    #[error("the provider is misconfigured: {0}")]
    Configuration(String),
    /// The stored credentials are not what this provider issues (damaged, or another
    /// provider's).
    #[error("the stored credentials cannot be used: {0}")]
    InvalidCredentials(String),
    /// An inbound webhook could not be verified as the provider's (answered 401, nothing
    /// done).
    #[error("the webhook could not be verified: {0}")]
    WebhookRejected(String),
}

/// An inbound provider webhook as the service received it
/// (`POST /api/v1/provider-webhooks/{slug}`): its headers, names in lower case, and its raw
/// body (what a signature covers).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WebhookRequest<'a> {
    /// Header names (lower case) and values; a header sent twice keeps its last value.
    pub headers: &'a BTreeMap<String, String>,
    /// The body, byte for byte.
    pub body: &'a [u8],
}

impl<'a> WebhookRequest<'a> {
    /// A request with these headers and body.
    pub fn new(headers: &'a BTreeMap<String, String>, body: &'a [u8]) -> Self {
        Self { headers, body }
    }

    /// The value of a header, by its name in any case.
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// What a verified provider webhook asks of the service ([`Provider::verify_webhook`]).
/// `key` is what [`Provider::webhook_key`] answered for the connection concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderWebhook {
    /// New data is ready: sync that connection in the background (at most one sync queued
    /// per connection).
    SyncAvailable {
        /// The connection's webhook key.
        key: String,
    },
    /// The user must sign in at the provider again: the connection becomes `expired` and
    /// `connection.expired` is raised.
    LoginRequired {
        /// The connection's webhook key.
        key: String,
    },
    /// The user's access ends soon: `connection.expiring` is raised.
    Expiring {
        /// The connection's webhook key.
        key: String,
        /// Why, in the provider's words (`PENDING_EXPIRATION`).
        reason: String,
    },
    /// The user revoked the access at the provider: the connection becomes `revoked` and
    /// `connection.revoked` is raised (a disconnected or already revoked one stays as it is).
    Revoked {
        /// The connection's webhook key.
        key: String,
    },
    /// Verified, and nothing to do (a type the service does not act on).
    Ignored,
}

/// An external financial data provider.
#[async_trait]
pub trait Provider: Send + Sync + 'static {
    /// The provider's slug, unique in a service (`schwab`).
    fn slug(&self) -> &str;

    /// A human-readable name.
    fn name(&self) -> &str;

    /// Whether connections are made through the OAuth 2.0 authorization-code flow. When
    /// `false` (and [`connect_method`](Self::connect_method) is `OAuth`), connect and
    /// callback refuse the provider and nothing else is called.
    fn supports_oauth(&self) -> bool {
        true
    }

    /// How a user connects: [`ConnectMethod::OAuth`] (the default) or
    /// [`ConnectMethod::SetupToken`]. A setup-token provider implements
    /// [`claim_setup_token`](Self::claim_setup_token); its OAuth methods are never called.
    fn connect_method(&self) -> ConnectMethod {
        ConnectMethod::OAuth
    }

    /// ISO 3166-1 alpha-2 codes of the countries it serves (shown by
    /// `GET /supported-providers`). Default: none said.
    fn countries(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether a connect must name an institution from [`institutions`](Self::institutions).
    fn needs_institution(&self) -> bool {
        false
    }

    /// The country whose [`institutions`](Self::institutions) list holds `institution_id`, when
    /// the id says (`FI:Nordea`): a connect then checks that one list. Default `None`: every
    /// country's list is searched.
    fn institution_country(&self, institution_id: &str) -> Option<String> {
        let _ = institution_id;
        None
    }

    /// The institutions of one country (upper-case ISO code) a user may pick. Default:
    /// [`ProviderError::Unsupported`]. The service caches the answer for an hour.
    async fn institutions(&self, country: &str) -> Result<Vec<Institution>, ProviderError> {
        let _ = country;
        Err(ProviderError::Unsupported("institutions"))
    }

    /// Claims a setup token and answers the credentials it grants (a
    /// [`ConnectMethod::SetupToken`] provider). [`ProviderError::InvalidGrant`] when the token
    /// is malformed, names a place the provider may not call, or was refused or claimed
    /// already (the user's mistake: 400); any other error is the provider's (502).
    async fn claim_setup_token(
        &self,
        setup_token: &str,
    ) -> Result<ProviderCredentials, ProviderError> {
        let _ = setup_token;
        Err(ProviderError::Unsupported("setup tokens"))
    }

    /// How many data requests the provider allows per connection, if it limits that (see
    /// [`RequestBudget`]: a token bucket the service keeps in the store, charged with the
    /// requests the provider counts on the sync's [`FetchContext`]). Default: no limit beyond
    /// the service's sync cool-down.
    fn request_budget(&self) -> Option<RequestBudget> {
        None
    }

    /// Whether the authorization uses PKCE (S256, RFC 7636). Default `true`: the service then
    /// makes a fresh verifier per connect, keeps it encrypted with the state, hands its
    /// challenge to [`authorization_url`](Self::authorization_url) and the verifier to
    /// [`exchange_code`](Self::exchange_code). Authorization servers ignore parameters they do
    /// not know (RFC 6749 §3.1), so only a provider whose server refuses PKCE parameters needs
    /// to answer `false`.
    fn supports_pkce(&self) -> bool {
        true
    }

    /// The address to send the user to (an OAuth provider). Default:
    /// [`ProviderError::Unsupported`].
    fn authorization_url(
        &self,
        request: &AuthorizationRequest<'_>,
    ) -> Result<String, ProviderError> {
        let _ = request;
        Err(ProviderError::Unsupported("OAuth"))
    }

    /// Starts an authorization and answers the address to send the user to: what the service
    /// calls. Default: [`authorization_url`](Self::authorization_url). A provider whose API
    /// must be asked for that address (Enable Banking's `POST /auth`) overrides this one.
    async fn begin_authorization(
        &self,
        request: &AuthorizationRequest<'_>,
    ) -> Result<String, ProviderError> {
        self.authorization_url(request)
    }

    /// Exchanges an authorization code for credentials, sending the redirect URI (and PKCE
    /// verifier) that the authorization used (an OAuth provider). Default:
    /// [`ProviderError::Unsupported`].
    async fn exchange_code(
        &self,
        code: &str,
        redirect_uri: &str,
        pkce_verifier: Option<&str>,
    ) -> Result<ProviderCredentials, ProviderError> {
        let _ = (code, redirect_uri, pkce_verifier);
        Err(ProviderError::Unsupported("OAuth"))
    }

    /// Exchanges the `public_token` the provider's widget gave the front end for credentials
    /// (a [`ConnectMethod::Link`] provider). [`ProviderError::InvalidGrant`] when the
    /// provider refuses the token (400). Default: [`ProviderError::Unsupported`].
    async fn exchange_public_token(
        &self,
        public_token: &str,
    ) -> Result<ProviderCredentials, ProviderError> {
        let _ = public_token;
        Err(ProviderError::Unsupported("link tokens"))
    }

    /// Whether transactions come as a change feed ([`fetch_changes`](Self::fetch_changes))
    /// rather than by date range ([`transactions`](Self::transactions)). Default `false`.
    fn change_feed(&self) -> bool {
        false
    }

    /// The transaction changes of every account of the credentials since `cursor` (`None`:
    /// from the start), with the cursor to store for the next sync (a
    /// [`change_feed`](Self::change_feed) provider). The provider pages through the feed
    /// itself and answers only a complete set of changes; the service stores the answer's
    /// cursor in the same store transaction as the rows, so a sync that fails keeps the old
    /// cursor. Count each request with [`FetchContext::count_request`]. Default:
    /// [`ProviderError::Unsupported`].
    async fn fetch_changes(
        &self,
        credentials: &ProviderCredentials,
        cursor: Option<&str>,
        context: &FetchContext,
    ) -> Result<Changes, ProviderError> {
        let _ = (credentials, cursor, context);
        Err(ProviderError::Unsupported("a transaction change feed"))
    }

    /// Whether the provider sends webhooks to `POST /api/v1/provider-webhooks/{slug}` (the
    /// slug is 404 there otherwise). Default `false`.
    fn receives_webhooks(&self) -> bool {
        false
    }

    /// What the provider's webhooks name a connection holding these credentials by (Plaid's
    /// `item_id`); kept only as a digest. Default `None`.
    fn webhook_key(&self, credentials: &ProviderCredentials) -> Option<String> {
        let _ = credentials;
        None
    }

    /// Verifies an inbound webhook as the provider's (signature, freshness, body digest) and
    /// says what it asks for. [`ProviderError::WebhookRejected`] for anything unverified
    /// (answered 401, nothing done); another error when the provider could not be asked
    /// for what verification needs (answered 401 all the same). Default:
    /// [`ProviderError::Unsupported`].
    async fn verify_webhook(
        &self,
        request: &WebhookRequest<'_>,
    ) -> Result<ProviderWebhook, ProviderError> {
        let _ = request;
        Err(ProviderError::Unsupported("webhooks"))
    }

    /// Renews credentials whose [`renew_at`](ProviderCredentials::renew_at) is near (an
    /// OAuth refresh, for example) and answers the new ones, which replace the old.
    /// [`ProviderError::InvalidGrant`] (or the default [`ProviderError::Unsupported`]) means
    /// they cannot be renewed: the connection becomes `expired` and needs a reauthorization.
    async fn renew_credentials(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<ProviderCredentials, ProviderError> {
        let _ = credentials;
        Err(ProviderError::Unsupported("credential renewal"))
    }

    /// Ends what the credentials grant at the provider (a session, a consent) when the user
    /// disconnects. Called in the background once the disconnection is stored (the
    /// `DELETE` is answered without waiting for it); a failure is logged and does not undo
    /// it. Default: nothing to end.
    async fn disconnect(&self, credentials: &ProviderCredentials) -> Result<(), ProviderError> {
        let _ = credentials;
        Ok(())
    }

    /// The accounts the credentials reach. `provider_account_id` must be stable and is what
    /// [`transactions`](Self::transactions) and [`holdings`](Self::holdings) receive.
    async fn accounts(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<Fetched<NewAccount>, ProviderError>;

    /// Transactions of one account within a date range.
    async fn transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
    ) -> Result<Fetched<NewTransaction>, ProviderError>;

    /// Current positions of one account.
    async fn holdings(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
    ) -> Result<Fetched<NewHolding>, ProviderError>;

    /// What the service calls for a sync's accounts. Default: counts one request on the
    /// context and calls [`accounts`](Self::accounts). A provider that sends another number
    /// of requests, reuses answers or sends headers about the present user overrides it
    /// (and counts each request it sends with [`FetchContext::count_request`]).
    async fn fetch_accounts(
        &self,
        credentials: &ProviderCredentials,
        context: &FetchContext,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        context.count_request();
        self.accounts(credentials).await
    }

    /// What the service calls for a sync's transactions of one account. Default: counts one
    /// request and calls [`transactions`](Self::transactions); see
    /// [`fetch_accounts`](Self::fetch_accounts).
    async fn fetch_transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
        context: &FetchContext,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        context.count_request();
        self.transactions(credentials, provider_account_id, range)
            .await
    }

    /// What the service calls for a sync's holdings of one account. Default: counts one
    /// request and calls [`holdings`](Self::holdings); see
    /// [`fetch_accounts`](Self::fetch_accounts).
    async fn fetch_holdings(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        context: &FetchContext,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        context.count_request();
        self.holdings(credentials, provider_account_id).await
    }
}

/// One transaction a change feed added or modified.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ChangedTransaction {
    /// The account it belongs to (an [`NewAccount::provider_account_id`]).
    pub provider_account_id: String,
    /// The row, sign and status as the service keeps them (negative is money out).
    pub transaction: NewTransaction,
    /// The provider's category (Plaid's `personal_finance_category.detailed`), for
    /// enrichment with source `provider`.
    pub category: Option<String>,
    /// The provider's merchant name, for enrichment.
    pub merchant_name: Option<String>,
}

impl ChangedTransaction {
    /// A changed transaction of this account, without category or merchant.
    pub fn new(provider_account_id: impl Into<String>, transaction: NewTransaction) -> Self {
        Self {
            provider_account_id: provider_account_id.into(),
            transaction,
            category: None,
            merchant_name: None,
        }
    }

    /// With the provider's category and merchant name.
    pub fn with_enrichment(
        mut self,
        category: Option<String>,
        merchant_name: Option<String>,
    ) -> Self {
        self.category = category;
        self.merchant_name = merchant_name;
        self
    }
}

/// One transaction a change feed removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedTransaction {
    /// The account it belonged to, when the provider says.
    pub provider_account_id: Option<String>,
    /// The provider's id of the transaction.
    pub provider_transaction_id: String,
}

/// What a change feed answered since a cursor ([`Provider::fetch_changes`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// Added and modified transactions, in the provider's order (a later one for the same
    /// id wins).
    pub transactions: Vec<ChangedTransaction>,
    /// Removed transactions: deleted, counted as `removed`.
    pub removed: Vec<RemovedTransaction>,
    /// The cursor after these changes.
    pub next_cursor: String,
    /// Items skipped, with why.
    pub errors: Vec<SyncItemError>,
}

/// The providers a service offers, by slug.
#[derive(Clone, Default)]
pub(crate) struct Providers {
    by_slug: BTreeMap<String, Arc<dyn Provider>>,
}

impl fmt::Debug for Providers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_slug.keys()).finish()
    }
}

impl Providers {
    /// No providers.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds a provider, replacing one with the same slug.
    pub(crate) fn insert(&mut self, provider: Arc<dyn Provider>) {
        self.by_slug.insert(provider.slug().to_owned(), provider);
    }

    /// The provider with this slug.
    pub(crate) fn get(&self, slug: &str) -> Option<&Arc<dyn Provider>> {
        self.by_slug.get(slug)
    }

    /// The slugs of every provider, in order.
    pub(crate) fn slugs(&self) -> impl Iterator<Item = &str> {
        self.by_slug.keys().map(String::as_str)
    }

    /// Every provider, by slug.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<dyn Provider>> {
        self.by_slug.values()
    }
}
