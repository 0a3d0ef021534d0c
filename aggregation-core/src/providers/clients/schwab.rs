//! The Charles Schwab Trader API (v1) as a [`Provider`].

mod mapping;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{TimeDelta, Utc};
use oauth2::basic::{BasicClient, BasicErrorResponse};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError,
    TokenResponse as _, TokenUrl,
};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::outbound::{describe_request_error, read_limited};
use crate::providers::{
    AuthorizationRequest, DateRange, Fetched, Provider, ProviderCredentials, ProviderError,
    ProviderSecret,
};
use crate::store::{NewAccount, NewHolding, NewTransaction};

/// Connect and whole-request timeout of every call to Schwab.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The access-token lifetime assumed when the token answer does not say (Schwab: 30 minutes).
const DEFAULT_EXPIRES_IN: i64 = 1800;

/// The largest token answer read.
const MAX_TOKEN_BODY: usize = 64 * 1024;

/// The largest data answer read (a year of transactions fits easily).
const MAX_DATA_BODY: usize = 32 * 1024 * 1024;

/// The transaction types asked for: every type Schwab has.
const TRANSACTION_TYPES: &str = "TRADE,RECEIVE_AND_DELIVER,DIVIDEND_OR_INTEREST,ACH_RECEIPT,\
    ACH_DISBURSEMENT,CASH_RECEIPT,CASH_DISBURSEMENT,ELECTRONIC_FUND,WIRE_OUT,WIRE_IN,JOURNAL,\
    MEMORANDUM,MARGIN_CALL,MONEY_MARKET,SMA_ADJUSTMENT";

/// How to reach a Schwab-compatible API. `Debug` never shows the client secret.
#[derive(Clone)]
pub struct SchwabConfig {
    /// The provider's slug in the service (`schwab`).
    pub slug: String,
    /// The provider's display name (`Charles Schwab`).
    pub name: String,
    /// The API root, without the `/v1` or `/trader/v1` part (`https://api.schwabapi.com`); it
    /// may carry a path prefix.
    pub base_url: String,
    /// The app key.
    pub client_id: String,
    /// The app secret.
    pub client_secret: String,
    /// Whether authorizations use PKCE (S256). On by default: Schwab does not document PKCE
    /// for the Trader API, and an OAuth server ignores parameters it does not know, so the
    /// challenge costs nothing where it is not checked and protects the code where it is.
    /// Turn it off only if the server refuses the parameters.
    pub use_pkce: bool,
}

impl SchwabConfig {
    /// A configuration with slug `schwab`, name `Charles Schwab` and PKCE on.
    pub fn new(
        base_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        Self {
            slug: "schwab".to_owned(),
            name: "Charles Schwab".to_owned(),
            base_url: base_url.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            use_pkce: true,
        }
    }
}

impl fmt::Debug for SchwabConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchwabConfig")
            .field("slug", &self.slug)
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("use_pkce", &self.use_pkce)
            .finish()
    }
}

type OAuthClient =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// The Charles Schwab Trader API v1. Holds one HTTP client (no redirects followed, 10-second
/// timeouts), so build it once and share it. `Debug` never shows the client secret.
///
/// OAuth 2.0 authorization-code flow (with PKCE S256 unless turned off) at `{base}/v1/oauth/authorize` and
/// `{base}/v1/oauth/token` with HTTP Basic client authentication; accounts, positions and
/// transactions from `{base}/trader/v1/accounts…` with the bearer access token. The
/// credentials' secret holds the access token, the refresh token and the granted scope; they
/// are renewed (a token refresh) when the access token expires.
///
/// ```no_run
/// # fn demo() -> Result<(), aggregation_core::providers::ProviderError> {
/// use aggregation_core::providers::{AuthorizationRequest, Provider, SchwabConfig, SchwabProvider};
///
/// let provider = SchwabProvider::new(SchwabConfig::new(
///     "https://api.schwabapi.com",
///     "my-app-key",
///     "my-app-secret",
/// ))?;
/// let address = provider.authorization_url(&AuthorizationRequest::new(
///     "anti-forgery-state",
///     "https://127.0.0.1/callback",
/// ))?;
/// # let _ = address;
/// # Ok(()) }
/// ```
///
/// What the answers become:
///
/// - Accounts: `provider_account_id` is the account's `hashValue` (joined from
///   `accountNumbers` on `accountNumber`), the balance is `currentBalances.liquidationValue`
///   (else the aggregated liquidation value, else `cashBalance`) and the available balance
///   `availableFunds` (else `cashAvailableForTrading`). `CASH` and `MARGIN` accounts are
///   brokerage accounts; IRA-like types map to `ira` / `roth_ira`.
/// - Holdings: one per position, keyed by CUSIP (else symbol); quantity is long minus short;
///   cost basis is average price × quantity; the current price is market value / quantity
///   (rounded to 6 places).
/// - Transactions: keyed by `activityId`; `TRADE` is a trade (subtype `BUY` / `SELL`),
///   `DIVIDEND_OR_INTEREST` income, money movements transfers, an activity made only of fee
///   lines a fee; the amount is `netAmount`; the commission is the sum of the fee lines' costs.
///
/// Limitation: option positions are mapped as reported; the cost basis does not apply the
/// contract multiplier.
pub struct SchwabProvider {
    config: SchwabConfig,
    /// The API root without a trailing slash.
    base: String,
    oauth: OAuthClient,
    /// The one HTTP client, for data calls (`http.0`) and token calls.
    http: TokenHttpClient,
}

impl fmt::Debug for SchwabProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchwabProvider")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why an HTTP exchange with the token endpoint failed before an OAuth answer was read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TransportError(String);

impl SchwabProvider {
    /// Builds the provider and its HTTP client. Fails with
    /// [`ProviderError::Configuration`] when the base URL is not an absolute `http(s)` URL or
    /// the HTTP client cannot be built.
    pub fn new(config: SchwabConfig) -> Result<Self, ProviderError> {
        let base = config.base_url.trim().trim_end_matches('/').to_owned();
        let parsed = Url::parse(&base)
            .map_err(|error| ProviderError::Configuration(format!("base URL {base:?}: {error}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(ProviderError::Configuration(format!(
                "base URL {base:?} is not an http(s) URL"
            )));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(ProviderError::Configuration(format!(
                "base URL {base:?} must not have a query or fragment"
            )));
        }
        let auth_url = AuthUrl::new(format!("{base}/v1/oauth/authorize"))
            .map_err(|error| ProviderError::Configuration(error.to_string()))?;
        let token_url = TokenUrl::new(format!("{base}/v1/oauth/token"))
            .map_err(|error| ProviderError::Configuration(error.to_string()))?;
        let oauth = BasicClient::new(ClientId::new(config.client_id.clone()))
            .set_client_secret(ClientSecret::new(config.client_secret.clone()))
            .set_auth_uri(auth_url)
            .set_token_uri(token_url);
        let http = super::api_client(TIMEOUT, TIMEOUT)?;
        Ok(Self {
            config,
            base,
            oauth,
            http: TokenHttpClient(http),
        })
    }

    /// The configuration the provider was built with.
    pub fn config(&self) -> &SchwabConfig {
        &self.config
    }

    fn data_url(&self, path: &str) -> Result<Url, ProviderError> {
        Url::parse(&format!("{}{path}", self.base))
            .map_err(|error| ProviderError::Configuration(error.to_string()))
    }

    /// `GET`s a data endpoint with the bearer token and returns the body of a 2xx answer.
    async fn get(&self, url: Url, access_token: &str) -> Result<Vec<u8>, ProviderError> {
        let path = url.path().to_owned();
        let response = self
            .http
            .0
            .get(url)
            .bearer_auth(access_token)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| {
                ProviderError::Http(format!("GET {path}: {}", describe_request_error(&error)))
            })?;
        let status = response.status();
        if status == http::StatusCode::UNAUTHORIZED {
            return Err(ProviderError::Unauthorized);
        }
        if status.is_redirection() {
            return Err(ProviderError::Http(format!(
                "GET {path} answered {status}; redirects are not followed"
            )));
        }
        if !status.is_success() {
            return Err(ProviderError::Http(format!("GET {path} answered {status}")));
        }
        read_limited(response, MAX_DATA_BODY)
            .await
            .map_err(|error| ProviderError::Http(format!("GET {path}: {error}")))
    }

    /// The account-number table and the accounts with positions, fetched together.
    async fn accounts_with_positions(
        &self,
        access_token: &str,
    ) -> Result<(HashMap<String, String>, Vec<serde_json::Value>), ProviderError> {
        let numbers_url = self.data_url("/trader/v1/accounts/accountNumbers")?;
        let mut accounts_url = self.data_url("/trader/v1/accounts")?;
        accounts_url
            .query_pairs_mut()
            .append_pair("fields", "positions");
        let (numbers, accounts) = tokio::try_join!(
            self.get(numbers_url, access_token),
            self.get(accounts_url, access_token)
        )?;
        Ok((
            mapping::parse_account_numbers(&numbers)?,
            mapping::parse_accounts(&accounts)?,
        ))
    }

    fn redirect_url(redirect_uri: &str) -> Result<RedirectUrl, ProviderError> {
        RedirectUrl::new(redirect_uri.to_owned()).map_err(|error| {
            ProviderError::Configuration(format!("redirect URI {redirect_uri:?}: {error}"))
        })
    }
}

/// oauth2's HTTP client: the provider's reqwest client (redirects not followed).
struct TokenHttpClient(reqwest::Client);

impl<'c> oauth2::AsyncHttpClient<'c> for TokenHttpClient {
    type Error = TransportError;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<oauth2::HttpResponse, TransportError>> + Send + 'c>,
    >;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(send_token_request(&self.0, request))
    }
}

/// Sends one token-endpoint request over reqwest, redirects not followed. A 3xx or 5xx
/// answer is a transport failure; 2xx and 4xx answers go back to oauth2 to be read.
async fn send_token_request(
    http: &reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, TransportError> {
    let request = reqwest::Request::try_from(request)
        .map_err(|error| TransportError(describe_request_error(&error)))?;
    let response = http
        .execute(request)
        .await
        .map_err(|error| TransportError(describe_request_error(&error)))?;
    let status = response.status();
    if status.is_redirection() {
        return Err(TransportError(format!(
            "the token endpoint answered {status}; redirects are not followed"
        )));
    }
    if status.is_server_error() {
        return Err(TransportError(format!(
            "the token endpoint answered {status}"
        )));
    }
    let headers = response.headers().clone();
    let body = read_limited(response, MAX_TOKEN_BODY)
        .await
        .map_err(TransportError)?;
    let mut answer = http::Response::new(body);
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}

/// Whether a token-endpoint refusal means the grant is gone. Besides `invalid_grant`, Schwab
/// answers an expired refresh token with `unsupported_token_type` and a description naming
/// `refresh_token_authentication_error`.
fn is_invalid_grant(code: &str, description: Option<&str>) -> bool {
    code == "invalid_grant"
        || code == "refresh_token_authentication_error"
        || (code == "unsupported_token_type"
            && description.is_some_and(|text| {
                text.contains("refresh_token_authentication_error")
                    || text.contains("Failed refresh token authentication")
            }))
}

fn token_error(error: RequestTokenError<TransportError, BasicErrorResponse>) -> ProviderError {
    match error {
        RequestTokenError::ServerResponse(response) => {
            let code = response.error().to_string();
            let description = response.error_description().map(String::as_str);
            if is_invalid_grant(&code, description) {
                ProviderError::InvalidGrant(description.unwrap_or(&code).to_owned())
            } else {
                ProviderError::Http(match description {
                    Some(description) => {
                        format!("the token endpoint refused the request: {code}: {description}")
                    }
                    None => format!("the token endpoint refused the request: {code}"),
                })
            }
        }
        RequestTokenError::Request(error) => ProviderError::Http(error.0),
        // The body is not quoted: it may hold tokens.
        RequestTokenError::Parse(error, _) => {
            ProviderError::InvalidResponse(format!("token answer: {error}"))
        }
        RequestTokenError::Other(message) => {
            ProviderError::InvalidResponse(format!("token answer: {message}"))
        }
    }
}

/// What a Schwab connection's [`ProviderSecret`] holds. The field names are those of the
/// credentials stored before secrets were opaque, so those read as this.
#[derive(Serialize, Deserialize)]
struct SchwabSecret {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

impl SchwabSecret {
    fn of(credentials: &ProviderCredentials) -> Result<Self, ProviderError> {
        credentials.secret.deserialize()
    }
}

fn credentials_from(
    answer: &oauth2::basic::BasicTokenResponse,
    previous_refresh_token: Option<&str>,
) -> Result<ProviderCredentials, ProviderError> {
    let now = Utc::now();
    let lifetime = answer
        .expires_in()
        .and_then(|duration| TimeDelta::from_std(duration).ok())
        .unwrap_or_else(|| TimeDelta::seconds(DEFAULT_EXPIRES_IN));
    let expires_at = now
        .checked_add_signed(lifetime)
        .unwrap_or_else(|| now + TimeDelta::seconds(DEFAULT_EXPIRES_IN));
    let scope = answer.scopes().map(|scopes| {
        scopes
            .iter()
            .map(|scope| scope.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    });
    let secret = SchwabSecret {
        access_token: answer.access_token().secret().clone(),
        // A refresh answered without a new refresh token keeps the old one.
        refresh_token: answer
            .refresh_token()
            .map(|token| token.secret().clone())
            .or_else(|| previous_refresh_token.map(str::to_owned)),
        scope,
    };
    Ok(ProviderCredentials {
        secret: ProviderSecret::serialize(&secret)?,
        renew_at: Some(expires_at),
        consent_expires_at: None,
    })
}

#[async_trait]
impl Provider for SchwabProvider {
    fn slug(&self) -> &str {
        &self.config.slug
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    fn supports_pkce(&self) -> bool {
        self.config.use_pkce
    }

    fn countries(&self) -> Vec<String> {
        vec!["US".to_owned()]
    }

    fn authorization_url(
        &self,
        request: &AuthorizationRequest<'_>,
    ) -> Result<String, ProviderError> {
        let state = request.state.to_owned();
        let mut authorization = self
            .oauth
            .authorize_url(|| CsrfToken::new(state))
            .set_redirect_uri(Cow::Owned(Self::redirect_url(request.redirect_uri)?));
        if let Some(challenge) = request.pkce_challenge {
            // oauth2 builds challenges only from a verifier; the service holds the verifier and
            // hands over the S256 challenge, which the type reads from its serialized form.
            let challenge: PkceCodeChallenge = serde_json::from_value(serde_json::json!({
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }))
            .map_err(|error| ProviderError::Configuration(error.to_string()))?;
            authorization = authorization.set_pkce_challenge(challenge);
        }
        let (url, _state) = authorization.url();
        Ok(url.into())
    }

    async fn exchange_code(
        &self,
        code: &str,
        redirect_uri: &str,
        pkce_verifier: Option<&str>,
    ) -> Result<ProviderCredentials, ProviderError> {
        let mut request = self
            .oauth
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_redirect_uri(Cow::Owned(Self::redirect_url(redirect_uri)?));
        if let Some(verifier) = pkce_verifier {
            request = request.set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()));
        }
        let answer = request
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        credentials_from(&answer, None)
    }

    async fn renew_credentials(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<ProviderCredentials, ProviderError> {
        let Some(refresh_token) = SchwabSecret::of(credentials)?.refresh_token else {
            // Nothing renews these: the user must authorize again.
            return Err(ProviderError::Unsupported(
                "renewal without a refresh token",
            ));
        };
        let token = RefreshToken::new(refresh_token.clone());
        let answer = self
            .oauth
            .exchange_refresh_token(&token)
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        credentials_from(&answer, Some(&refresh_token))
    }

    async fn accounts(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        let access_token = SchwabSecret::of(credentials)?.access_token;
        let (hashes, entries) = self.accounts_with_positions(&access_token).await?;
        Ok(mapping::map_accounts(&hashes, entries))
    }

    async fn transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        let access_token = SchwabSecret::of(credentials)?.access_token;
        if range.start > range.end {
            return Ok(Fetched::default());
        }
        let mut url = self.data_url("/trader/v1/accounts")?;
        url.path_segments_mut()
            .map_err(|()| ProviderError::Configuration("the base URL cannot have a path".into()))?
            .push(provider_account_id)
            .push("transactions");
        url.query_pairs_mut()
            .append_pair("startDate", &format!("{}T00:00:00.000Z", range.start))
            .append_pair("endDate", &format!("{}T23:59:59.999Z", range.end))
            .append_pair("types", TRANSACTION_TYPES);
        let body = self.get(url, &access_token).await?;
        mapping::map_transactions(&body)
    }

    async fn holdings(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        let access_token = SchwabSecret::of(credentials)?.access_token;
        let (hashes, entries) = self.accounts_with_positions(&access_token).await?;
        let account_number = hashes
            .iter()
            .find(|(_, hash)| hash.as_str() == provider_account_id)
            .map(|(number, _)| number.clone())
            .ok_or_else(|| {
                ProviderError::InvalidResponse(format!(
                    "account {provider_account_id} is not among the provider's accounts"
                ))
            })?;
        let positions = mapping::positions_of(entries, &account_number).ok_or_else(|| {
            ProviderError::InvalidResponse(format!(
                "account {provider_account_id} is missing from the accounts answer"
            ))
        })?;
        Ok(mapping::map_holdings(positions))
    }
}
