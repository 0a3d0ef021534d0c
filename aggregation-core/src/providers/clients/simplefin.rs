//! The SimpleFIN provider ([protocol](https://www.simplefin.org/protocol.html)): bank data
//! for North America through SimpleFIN Bridge, which the end user pays for; no application
//! keys.
//!
//! - Connect: the user pastes a setup token (base64 of a claim URL). The service decodes it,
//!   checks that the URL is `https://` (or `http://` in test mode) on one of the configured
//!   bridge hosts, `POST`s to it once, and keeps the access URL it answers (with its Basic
//!   credentials) encrypted. A token is claimed only once: the bridge refuses it afterwards.
//! - Data: `GET {access_url}/accounts` with the access URL's credentials as HTTP Basic;
//!   `balances-only=1` for the accounts, `account`, `start-date`, `end-date` (Unix seconds)
//!   and `pending=1` for transactions, split into windows the bridge serves
//!   ([`SimplefinConfig::window_days`], 90 by default).
//! - The bridge's `errors` (messages about institutions that need the user's attention)
//!   become per-item errors of the sync statistics (item `simplefin`).
//! - Account types come from the account's name (`checking`, `savings`, `credit card`,
//!   `visa`, `mortgage`, `loan`, `ira`, `401k`, …), else `other`.
//! - Requests go through the SSRF connection guard webhooks use: only public addresses, no
//!   proxies, no redirects, 3 s to connect and 20 s for a whole answer
//!   ([`SimplefinConfig::connect_timeout`], [`SimplefinConfig::request_timeout`]). Test mode
//!   ([`SimplefinConfig::allow_http`]) also accepts plain HTTP and private addresses, for a
//!   fake bridge on loopback.
//!
//! ```
//! use aggregation_core::providers::{SimplefinConfig, SimplefinProvider};
//! let provider = SimplefinProvider::new(SimplefinConfig::default()).expect("a client");
//! # let _ = provider;
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use url::Url;

use crate::outbound::guard::{GuardedResolver, PeerCheckLayer};
use crate::outbound::ssrf::{WebhookHost, host_of, may_connect, may_resolve};
use crate::outbound::{describe_request_error, read_limited};
use crate::providers::{
    ConnectMethod, DateRange, FetchContext, Fetched, Provider, ProviderCredentials, ProviderError,
    ProviderSecret, RequestBudget, SyncItemError, iso_currency,
};
use crate::store::{
    AccountType, NewAccount, NewHolding, NewTransaction, TransactionStatus, TransactionType,
};

/// The hosts a setup token may name unless configured otherwise.
pub const DEFAULT_BRIDGE_HOSTS: &[&str] = &["bridge.simplefin.org", "beta-bridge.simplefin.org"];
/// Largest answer read from the bridge.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Longest access URL kept.
const MAX_ACCESS_URL: usize = 2048;
/// The item of the bridge's own errors in the sync statistics.
const BRIDGE_ITEM: &str = "simplefin";

/// How a [`SimplefinProvider`] is set up.
#[derive(Debug, Clone)]
pub struct SimplefinConfig {
    /// Slug (`simplefin`).
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Hosts a setup token's claim URL (and the access URL it answers) may name, lower case,
    /// spelled as URLs must spell them (another spelling of an address never matches). In
    /// production the port is 443; in test mode an entry may carry a port (`127.0.0.1:8080`,
    /// the sandbox's own origin) that the URLs must then use.
    pub bridge_hosts: Vec<String>,
    /// Test only: accept `http://` claim and access URLs on the allowed hosts, and private
    /// and loopback addresses.
    pub allow_http: bool,
    /// Longest window of one transactions request, in days.
    pub window_days: u32,
    /// How many requests the bridge may be sent per connection (`None`: only the service's
    /// cool-down). SimpleFIN Bridge asks for 24 a day or fewer: the default.
    pub budget: Option<RequestBudget>,
    /// How far back a transactions sync reaches, in windows of `window_days`: an older start
    /// is moved to `window_days × max_windows` days before today (and an end past today to
    /// today), and the sync says so in its errors (at least one window is used).
    pub max_windows: u32,
    /// Longest wait for a connection to the bridge (3 s by default).
    pub connect_timeout: Duration,
    /// Longest wait for one whole answer of the bridge, connection included (20 s by
    /// default): a bridge that accepts and never answers costs at most this, then the
    /// request fails (a sync answers 502).
    pub request_timeout: Duration,
}

impl Default for SimplefinConfig {
    /// `simplefin` on the public bridge hosts, https only, 90-day windows and at most 4 of
    /// them (360 days back), 24 requests a day, 3 s to connect and 20 s per answer.
    fn default() -> Self {
        Self {
            slug: "simplefin".to_owned(),
            name: "SimpleFIN Bridge".to_owned(),
            bridge_hosts: DEFAULT_BRIDGE_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .collect(),
            allow_http: false,
            window_days: 90,
            budget: Some(RequestBudget::daily(24)),
            max_windows: 4,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(20),
        }
    }
}

/// The SimpleFIN provider. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct SimplefinProvider {
    config: SimplefinConfig,
    http: reqwest::Client,
    answers: Arc<Mutex<AnswerCache>>,
}

/// How long one `/accounts` answer serves the syncs of its connection that follow.
pub const ANSWER_REUSE: Duration = Duration::from_secs(5 * 60);
/// Most connections whose answers are kept at once.
const MAX_KEPT_ANSWERS: usize = 256;
/// Most bytes of answers kept at once (one answer larger than a quarter of it is not kept).
const MAX_KEPT_BYTES: usize = 32 * 1024 * 1024;

/// One `/accounts` answer with transactions, kept for the syncs of its connection that
/// follow within [`ANSWER_REUSE`].
struct KeptAnswer {
    fetched_at: tokio::time::Instant,
    /// The sync that fetched it: a forced sync reuses only what it fetched itself.
    sync_id: uuid::Uuid,
    /// The access URL's digest: an answer never serves other credentials.
    access_digest: [u8; 32],
    range: DateRange,
    bytes: usize,
    set: Arc<AccountSet>,
}

/// The kept answers, by connection (so never shared between users), bounded by
/// [`MAX_KEPT_ANSWERS`] and [`MAX_KEPT_BYTES`].
#[derive(Default)]
struct AnswerCache {
    by_connection: HashMap<uuid::Uuid, KeptAnswer>,
    bytes: usize,
}

impl std::fmt::Debug for AnswerCache {
    // Never the answers: they are a user's bank data.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerCache")
            .field("connections", &self.by_connection.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl AnswerCache {
    fn drop_stale(&mut self) {
        let before = self.by_connection.len();
        self.by_connection
            .retain(|_, kept| kept.fetched_at.elapsed() < ANSWER_REUSE);
        if self.by_connection.len() != before {
            self.bytes = self.by_connection.values().map(|kept| kept.bytes).sum();
        }
    }

    fn keep(&mut self, connection_id: uuid::Uuid, answer: KeptAnswer) {
        self.remove(connection_id);
        self.drop_stale();
        if answer.bytes > MAX_KEPT_BYTES / 4 {
            return;
        }
        while self.by_connection.len() >= MAX_KEPT_ANSWERS
            || self.bytes + answer.bytes > MAX_KEPT_BYTES
        {
            let oldest = self
                .by_connection
                .iter()
                .min_by_key(|(_, kept)| kept.fetched_at)
                .map(|(id, _)| *id);
            match oldest {
                Some(id) => self.remove(id),
                None => break,
            }
        }
        self.bytes += answer.bytes;
        self.by_connection.insert(connection_id, answer);
    }

    fn remove(&mut self, connection_id: uuid::Uuid) {
        if let Some(kept) = self.by_connection.remove(&connection_id) {
            self.bytes = self.bytes.saturating_sub(kept.bytes);
        }
    }

    /// The kept answer that may serve this context's transactions of `range`.
    fn serving(
        &self,
        context: &FetchContext,
        access_digest: &[u8; 32],
        range: DateRange,
    ) -> Option<Arc<AccountSet>> {
        let kept = self.by_connection.get(&context.connection_id)?;
        let usable = kept.fetched_at.elapsed() < ANSWER_REUSE
            && (!context.fresh || kept.sync_id == context.sync_id)
            && &kept.access_digest == access_digest
            && kept.range.start <= range.start
            && range.end <= kept.range.end;
        usable.then(|| kept.set.clone())
    }
}

fn digest(access_url: &str) -> [u8; 32] {
    Sha256::digest(access_url.as_bytes()).into()
}

impl SimplefinProvider {
    /// A provider with its guarded HTTP client. [`ProviderError::Configuration`] when the
    /// client cannot be built or no host is allowed.
    pub fn new(mut config: SimplefinConfig) -> Result<Self, ProviderError> {
        config.bridge_hosts = config
            .bridge_hosts
            .iter()
            .map(|host| host.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|host| !host.is_empty())
            .collect();
        if config.bridge_hosts.is_empty() {
            return Err(ProviderError::Configuration(
                "no SimpleFIN bridge host is allowed".to_owned(),
            ));
        }
        config.window_days = config.window_days.max(1);
        let allow_private = config.allow_http;
        let http = reqwest::Client::builder()
            .connector_layer(PeerCheckLayer { allow_private })
            .dns_resolver(GuardedResolver { allow_private })
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .build()
            .map_err(|error| ProviderError::Configuration(describe_request_error(&error)))?;
        config.max_windows = config.max_windows.max(1);
        Ok(Self {
            config,
            http,
            answers: Arc::default(),
        })
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, AnswerCache> {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The range a transactions sync asks the bridge for: no earlier than `window_days ×
    /// max_windows` days before today and no later than today, with a note for the sync's
    /// errors when that moved either end. `None` when nothing of it is left.
    fn served_range(&self, range: DateRange) -> (Option<DateRange>, Option<SyncItemError>) {
        let today = Utc::now().date_naive();
        let horizon_days = u64::from(self.config.window_days) * u64::from(self.config.max_windows);
        let earliest = today
            .checked_sub_days(chrono::Days::new(horizon_days))
            .unwrap_or(NaiveDate::MIN);
        let served = DateRange {
            start: range.start.max(earliest),
            end: range.end.min(today),
        };
        let note = (served != range).then(|| SyncItemError {
            item: BRIDGE_ITEM.to_owned(),
            message: format!(
                "the range was narrowed to {} – {}: the bridge is asked for at most {horizon_days} days back, up to today",
                served.start, served.end
            ),
        });
        ((served.start <= served.end).then_some(served), note)
    }

    /// Whether `url` (parsed from `raw`) is one the provider may call: the scheme, a host of
    /// the list written as the list writes it (never another spelling of an address, such as
    /// `2130706433` or `127.1`), the port (443 in production; in test mode the entry's port
    /// when it names one), and an address the SSRF rule allows (a literal private address only
    /// in test mode).
    fn allowed(&self, url: &Url, raw: &str) -> bool {
        let allow_private = self.config.allow_http;
        let scheme_ok = url.scheme() == "https" || (allow_private && url.scheme() == "http");
        let host = url.host_str().map(|host| {
            host.trim_matches(['[', ']'])
                .trim_end_matches('.')
                .to_ascii_lowercase()
        });
        let written = written_host(raw).map(|host| host.trim_end_matches('.').to_ascii_lowercase());
        let spelled_so = written.is_some() && written == host;
        let port = url.port_or_known_default();
        let pinned = self.config.bridge_hosts.iter().any(|entry| {
            let (entry_host, entry_port) = split_port(entry);
            let port_ok = if allow_private {
                entry_port.is_none_or(|entry_port| port == Some(entry_port))
            } else {
                port == Some(443)
            };
            port_ok && host.as_deref() == Some(entry_host)
        });
        let reachable = match host_of(url) {
            Some(WebhookHost::Ip(ip)) => may_connect(ip, allow_private),
            Some(WebhookHost::Name(name)) => may_resolve(&name, allow_private),
            None => false,
        };
        scheme_ok && reachable && spelled_so && pinned && url.fragment().is_none()
    }

    /// The claim URL a setup token stands for, if it is one the provider may call.
    fn claim_url(&self, setup_token: &str) -> Result<Url, ProviderError> {
        let refused = |why: &str| ProviderError::InvalidGrant(why.to_owned());
        let compact: String = setup_token.chars().filter(|c| !c.is_whitespace()).collect();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(compact.trim_end_matches('='))
            .or_else(|_| {
                base64::engine::general_purpose::STANDARD_NO_PAD
                    .decode(compact.trim_end_matches('='))
            })
            .or_else(|_| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(compact.trim_end_matches('='))
            })
            .map_err(|_| refused("the setup token is not base64"))?;
        let text = String::from_utf8(decoded)
            .map_err(|_| refused("the setup token is not base64 of a URL"))?;
        let url = Url::parse(text.trim())
            .map_err(|_| refused("the setup token is not base64 of a URL"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refused("the setup token's URL must not carry credentials"));
        }
        if !self.allowed(&url, text.trim()) {
            return Err(refused(
                "the setup token must name an https:// URL on an allowed SimpleFIN bridge host",
            ));
        }
        Ok(url)
    }

    /// `{access_url}/accounts` without credentials, and the credentials.
    fn accounts_url(&self, access_url: &str) -> Result<(Url, String, String), ProviderError> {
        let mut url = Url::parse(access_url).map_err(|_| {
            ProviderError::InvalidResponse("the stored access URL is not a URL".to_owned())
        })?;
        if !self.allowed(&url, access_url) {
            return Err(ProviderError::Configuration(
                "the stored access URL's host is no longer an allowed bridge host".to_owned(),
            ));
        }
        let user = percent_decode(url.username());
        let password = percent_decode(url.password().unwrap_or(""));
        let cleared = url.set_username("").is_ok() && url.set_password(None).is_ok();
        if !cleared {
            return Err(ProviderError::InvalidResponse(
                "the stored access URL cannot carry credentials".to_owned(),
            ));
        }
        url.set_query(None);
        url.path_segments_mut()
            .map_err(|()| {
                ProviderError::InvalidResponse("the access URL cannot have a path".to_owned())
            })?
            .pop_if_empty()
            .push("accounts");
        Ok((url, user, password))
    }

    /// One `GET /accounts` with these query pairs.
    async fn account_set(
        &self,
        access_url: &str,
        pairs: &[(&str, String)],
        context: Option<&FetchContext>,
    ) -> Result<(AccountSet, usize), ProviderError> {
        let (mut url, user, password) = self.accounts_url(access_url)?;
        if let Some(context) = context {
            context.count_request();
        }
        {
            let mut query = url.query_pairs_mut();
            for (name, value) in pairs {
                query.append_pair(name, value);
            }
        }
        let response = self
            .http
            .get(url)
            .basic_auth(user, Some(password))
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| unreachable_bridge("GET /accounts", &error))?;
        let status = response.status();
        if status == http::StatusCode::FORBIDDEN || status == http::StatusCode::UNAUTHORIZED {
            // The user revoked this application's access at the bridge.
            return Err(ProviderError::InvalidGrant(
                "the bridge refused the access URL (access revoked)".to_owned(),
            ));
        }
        if status == http::StatusCode::PAYMENT_REQUIRED {
            return Err(ProviderError::Http(
                "the bridge answered 402: the user's subscription needs attention".to_owned(),
            ));
        }
        if !status.is_success() {
            return Err(ProviderError::Http(format!(
                "GET /accounts answered {status}"
            )));
        }
        let body = read_limited(response, MAX_BODY)
            .await
            .map_err(|error| ProviderError::Http(format!("GET /accounts: {error}")))?;
        let set = serde_json::from_slice(&body)
            .map_err(|error| ProviderError::InvalidResponse(format!("GET /accounts: {error}")))?;
        Ok((set, body.len()))
    }

    /// The accounts of one `/accounts` answer, with the bridge's errors.
    fn accounts_of(set: &AccountSet) -> Fetched<NewAccount> {
        let mut fetched = Fetched {
            errors: bridge_errors(&set.errors),
            ..Fetched::default()
        };
        for account in &set.accounts {
            match map_account(account.clone()) {
                Ok(account) => fetched.items.push(account),
                Err(error) => fetched.errors.push(error),
            }
        }
        fetched
    }

    /// `GET /accounts`: balances only, or (for an accounts sync that a transactions sync
    /// follows) every account's transactions of the upcoming range too, in one request,
    /// kept for [`ANSWER_REUSE`] to serve that sync.
    async fn fetched_accounts(
        &self,
        credentials: &ProviderCredentials,
        context: Option<&FetchContext>,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        let access_url = SimplefinSecret::of(credentials)?.access_url;
        let access_digest = digest(&access_url);
        let upcoming = context.and_then(|context| {
            let range = self.served_range(context.upcoming_transactions?).0?;
            // One request: the default range is `window_days` back from its end.
            let earliest = range
                .end
                .checked_sub_days(chrono::Days::new(u64::from(self.config.window_days)))
                .unwrap_or(range.start);
            Some((
                context,
                DateRange {
                    start: range.start.max(earliest),
                    end: range.end,
                },
            ))
        });
        let Some((context, range)) = upcoming else {
            let (set, _) = self
                .account_set(&access_url, &[("balances-only", "1".to_owned())], context)
                .await?;
            return Ok(Self::accounts_of(&set));
        };
        let end = range.end.succ_opt().unwrap_or(range.end);
        let (set, bytes) = self
            .account_set(
                &access_url,
                &[
                    ("start-date", unix_start(range.start).to_string()),
                    ("end-date", unix_start(end).to_string()),
                    ("pending", "1".to_owned()),
                ],
                Some(context),
            )
            .await?;
        let fetched = Self::accounts_of(&set);
        self.answers().keep(
            context.connection_id,
            KeptAnswer {
                fetched_at: tokio::time::Instant::now(),
                sync_id: context.sync_id,
                access_digest,
                range,
                bytes,
                set: Arc::new(set),
            },
        );
        Ok(fetched)
    }

    /// One account's transactions in the range: from a kept answer that covers it, else
    /// from the bridge in windows of `window_days`.
    async fn fetched_transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
        context: Option<&FetchContext>,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        let access_url = SimplefinSecret::of(credentials)?.access_url;
        let mut collected = Collected::new(provider_account_id);
        let (served, note) = self.served_range(range);
        collected.fetched.errors.extend(note);
        let Some(range) = served else {
            return Ok(collected.fetched);
        };
        let kept = context
            .and_then(|context| self.answers().serving(context, &digest(&access_url), range));
        if let Some(set) = kept {
            collected.add(&set, Some(range));
            return Ok(collected.fetched);
        }
        for window in windows(range, self.config.window_days) {
            let end = window.end.succ_opt().unwrap_or(window.end);
            let (set, _) = self
                .account_set(
                    &access_url,
                    &[
                        ("account", provider_account_id.to_owned()),
                        ("start-date", unix_start(window.start).to_string()),
                        ("end-date", unix_start(end).to_string()),
                        ("pending", "1".to_owned()),
                    ],
                    context,
                )
                .await?;
            collected.add(&set, None);
        }
        Ok(collected.fetched)
    }
}

/// One account's transactions gathered from one or more `/accounts` answers: each
/// transaction once, each bridge error once.
struct Collected<'a> {
    account_id: &'a str,
    fetched: Fetched<NewTransaction>,
    seen: BTreeSet<String>,
    reported: BTreeSet<String>,
}

impl<'a> Collected<'a> {
    fn new(account_id: &'a str) -> Self {
        Self {
            account_id,
            fetched: Fetched::default(),
            seen: BTreeSet::new(),
            reported: BTreeSet::new(),
        }
    }

    /// Adds the account's transactions of one answer (only those dated within `only`, for
    /// an answer fetched for a wider range).
    fn add(&mut self, set: &AccountSet, only: Option<DateRange>) {
        for message in &set.errors {
            if self.reported.insert(message.clone()) {
                self.fetched
                    .errors
                    .extend(bridge_errors(std::slice::from_ref(message)));
            }
        }
        let item_error = |message: String| SyncItemError {
            item: self.account_id.to_owned(),
            message,
        };
        for value in &set.accounts {
            if value.get("id").and_then(serde_json::Value::as_str) != Some(self.account_id) {
                continue;
            }
            let account: Account = match serde_json::from_value(value.clone()) {
                Ok(account) => account,
                Err(error) => {
                    let error = item_error(format!("unreadable account: {error}"));
                    self.fetched.errors.push(error);
                    continue;
                }
            };
            let currency = match iso_currency(&account.currency) {
                Ok(currency) => currency,
                Err(message) => {
                    let error = item_error(message);
                    self.fetched.errors.push(error);
                    continue;
                }
            };
            for transaction in account.transactions {
                match map_transaction(transaction, &currency) {
                    Ok(row)
                        if only.is_some_and(|range| {
                            row.transaction_date < range.start || row.transaction_date > range.end
                        }) => {}
                    // A transaction on a window's edge may come twice.
                    Ok(row) if self.seen.insert(row.provider_transaction_id.clone()) => {
                        self.fetched.items.push(row);
                    }
                    Ok(_) => {}
                    Err(error) => self.fetched.errors.push(error),
                }
            }
        }
    }
}

/// What a SimpleFIN connection's [`ProviderSecret`] holds: the access URL with its Basic
/// credentials. Credentials stored before secrets were opaque named it `access_token`.
#[derive(Serialize, Deserialize)]
struct SimplefinSecret {
    #[serde(alias = "access_token")]
    access_url: String,
}

impl SimplefinSecret {
    fn of(credentials: &ProviderCredentials) -> Result<Self, ProviderError> {
        credentials.secret.deserialize()
    }
}

/// A request that got no answer, as the client sees it: a fixed message (the detail, such as
/// an OS error naming a refused port, is only logged, so nobody probes ports through it).
fn unreachable_bridge(call: &str, error: &reqwest::Error) -> ProviderError {
    tracing::warn!(call, error = %describe_request_error(error), "the SimpleFIN bridge could not be reached");
    ProviderError::Http(format!(
        "{call}: the SimpleFIN bridge could not be reached or did not answer in time"
    ))
}

/// The host as written in a URL's text (between `://` and the path, without credentials and
/// port), to compare with the parsed host: a parser rewrites `2130706433` to `127.0.0.1`.
fn written_host(raw: &str) -> Option<&str> {
    let (_, rest) = raw.split_once("://")?;
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    Some(split_port(host_port).0)
}

/// `host:port` split (a bracketed IPv6 host loses its brackets); no port when none is written.
fn split_port(text: &str) -> (&str, Option<u16>) {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        let port = after.strip_prefix(':').and_then(|port| port.parse().ok());
        return (host, port);
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, port.parse().ok()),
        _ => (text, None),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The bridge's answer to `GET /accounts`.
#[derive(Debug, Deserialize)]
struct AccountSet {
    #[serde(default)]
    errors: Vec<String>,
    #[serde(default)]
    accounts: Vec<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Account {
    id: String,
    name: String,
    currency: String,
    balance: String,
    #[serde(rename = "available-balance")]
    available_balance: Option<String>,
    #[serde(default)]
    transactions: Vec<serde_json::Value>,
    #[serde(default)]
    org: Option<Org>,
}

#[derive(Debug, Deserialize)]
struct Org {
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Transaction {
    id: String,
    #[serde(default)]
    posted: i64,
    amount: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    payee: Option<String>,
    #[serde(default)]
    transacted_at: Option<i64>,
    #[serde(default)]
    pending: Option<bool>,
}

/// The bridge's errors as sync item errors.
fn bridge_errors(errors: &[String]) -> Vec<SyncItemError> {
    errors
        .iter()
        .map(|message| SyncItemError {
            item: BRIDGE_ITEM.to_owned(),
            message: message.clone(),
        })
        .collect()
}

/// The kind of account a SimpleFIN account's name suggests, `other` when none does.
pub(crate) fn account_type_of(name: &str) -> AccountType {
    let name = name.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| name.contains(word));
    if has(&[
        "credit card",
        "visa",
        "mastercard",
        "amex",
        "american express",
        "discover card",
    ]) {
        AccountType::CreditCard
    } else if has(&["mortgage"]) {
        AccountType::Mortgage
    } else if has(&["line of credit", "heloc"]) {
        AccountType::LineOfCredit
    } else if has(&["loan"]) {
        AccountType::Loan
    } else if has(&["money market"]) {
        AccountType::MoneyMarket
    } else if has(&["roth"]) {
        AccountType::RothIra
    } else if has(&["ira"]) && !name.contains("miracle") {
        AccountType::Ira
    } else if has(&["401k", "401(k)"]) {
        AccountType::Plan401k
    } else if has(&["403b", "403(b)"]) {
        AccountType::Plan403b
    } else if has(&["hsa", "health savings"]) {
        AccountType::Hsa
    } else if has(&["certificate", " cd"]) || name.starts_with("cd") {
        AccountType::Cd
    } else if has(&["savings"]) {
        AccountType::Savings
    } else if has(&["checking", "chequing"]) {
        AccountType::Checking
    } else if has(&["brokerage", "investment"]) {
        AccountType::Brokerage
    } else {
        AccountType::Other
    }
}

fn decimal(text: &str, what: &str) -> Result<Decimal, String> {
    text.trim()
        .parse::<Decimal>()
        .map_err(|_| format!("{what} {text:?} is not a decimal number"))
}

fn map_account(value: serde_json::Value) -> Result<NewAccount, SyncItemError> {
    let id = value
        .get("id")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("(no id)")
        .to_owned();
    let fail = |message: String| SyncItemError {
        item: id.clone(),
        message,
    };
    let account: Account = serde_json::from_value(value)
        .map_err(|error| fail(format!("unreadable account: {error}")))?;
    let balance = decimal(&account.balance, "balance").map_err(fail)?;
    let available = account
        .available_balance
        .as_deref()
        .map(|text| decimal(text, "available-balance"))
        .transpose()
        .map_err(fail)?;
    let currency = iso_currency(&account.currency).map_err(fail)?;
    let name = match account.org.as_ref().and_then(|org| org.name.as_deref()) {
        Some(org) if !account.name.contains(org) => format!("{} ({org})", account.name),
        _ => account.name.clone(),
    };
    Ok(NewAccount {
        provider_account_id: account.id,
        account_number: None,
        account_type: account_type_of(&account.name),
        name,
        currency,
        balance_amount: balance,
        available_balance_amount: available,
        is_active: true,
    })
}

fn day_of(seconds: i64) -> Option<NaiveDate> {
    DateTime::<Utc>::from_timestamp(seconds, 0).map(|at| at.date_naive())
}

fn map_transaction(
    value: serde_json::Value,
    currency: &str,
) -> Result<NewTransaction, SyncItemError> {
    let id = value
        .get("id")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("(no id)")
        .to_owned();
    let fail = |message: String| SyncItemError {
        item: id.clone(),
        message,
    };
    let transaction: Transaction = serde_json::from_value(value)
        .map_err(|error| fail(format!("unreadable transaction: {error}")))?;
    let amount = decimal(&transaction.amount, "amount").map_err(fail)?;
    let pending = transaction.pending.unwrap_or(false) || transaction.posted <= 0;
    let posted = (transaction.posted > 0)
        .then(|| day_of(transaction.posted))
        .flatten();
    let transacted = transaction.transacted_at.and_then(day_of);
    let date = if pending {
        transacted.or(posted)
    } else {
        posted.or(transacted)
    }
    .ok_or_else(|| fail("the transaction has no date".to_owned()))?;
    let description = transaction
        .description
        .filter(|text| !text.trim().is_empty())
        .or(transaction.payee);
    Ok(NewTransaction {
        provider_transaction_id: transaction.id,
        transaction_type: TransactionType::Other,
        subtype: None,
        status: if pending {
            TransactionStatus::Pending
        } else {
            TransactionStatus::Settled
        },
        amount,
        currency: currency.to_owned(),
        description,
        symbol: None,
        security_name: None,
        quantity: None,
        unit_price: None,
        commission: None,
        transaction_date: date,
        settlement_date: if pending { None } else { posted },
        pending_transaction_id: None,
        merchant_code: None,
    })
}

/// Splits an inclusive range into inclusive windows of at most `days` days.
pub(crate) fn windows(range: DateRange, days: u32) -> Vec<DateRange> {
    let mut out = Vec::new();
    let mut start = range.start;
    let span = TimeDelta::days(i64::from(days.max(1)) - 1);
    while start <= range.end {
        let end = start
            .checked_add_signed(span)
            .map_or(range.end, |end| end.min(range.end));
        out.push(DateRange { start, end });
        match end.succ_opt() {
            Some(next) => start = next,
            None => break,
        }
    }
    out
}

fn unix_start(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0)
        .map_or(0, |at| at.and_utc().timestamp())
}

#[async_trait]
impl Provider for SimplefinProvider {
    fn slug(&self) -> &str {
        &self.config.slug
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    fn connect_method(&self) -> ConnectMethod {
        ConnectMethod::SetupToken
    }

    fn supports_oauth(&self) -> bool {
        false
    }

    fn countries(&self) -> Vec<String> {
        vec!["US".to_owned(), "CA".to_owned()]
    }

    fn request_budget(&self) -> Option<RequestBudget> {
        self.config.budget
    }

    async fn claim_setup_token(
        &self,
        setup_token: &str,
    ) -> Result<ProviderCredentials, ProviderError> {
        let url = self.claim_url(setup_token)?;
        let response = self
            .http
            .post(url)
            .header(http::header::CONTENT_LENGTH, "0")
            .send()
            .await
            .map_err(|error| unreachable_bridge("claim", &error))?;
        let status = response.status();
        if status.is_client_error() {
            return Err(ProviderError::InvalidGrant(format!(
                "the bridge refused the setup token ({status}): it was claimed already or is not valid"
            )));
        }
        if !status.is_success() {
            return Err(ProviderError::Http(format!("claim answered {status}")));
        }
        let body = read_limited(response, MAX_ACCESS_URL)
            .await
            .map_err(|error| ProviderError::Http(format!("claim: {error}")))?;
        let access = String::from_utf8(body)
            .map_err(|_| ProviderError::InvalidResponse("the access URL is not text".to_owned()))?;
        let access = access.trim().to_owned();
        let parsed = Url::parse(&access).map_err(|_| {
            ProviderError::InvalidResponse("the claim did not answer a URL".to_owned())
        })?;
        if !self.allowed(&parsed, &access) || parsed.username().is_empty() {
            return Err(ProviderError::InvalidResponse(
                "the claim answered an access URL on a host or scheme that is not allowed"
                    .to_owned(),
            ));
        }
        // An access URL lasts until the user revokes it at the bridge.
        Ok(ProviderCredentials::lasting(ProviderSecret::serialize(
            &SimplefinSecret { access_url: access },
        )?))
    }

    async fn accounts(
        &self,
        credentials: &ProviderCredentials,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        self.fetched_accounts(credentials, None).await
    }

    async fn transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        self.fetched_transactions(credentials, provider_account_id, range, None)
            .await
    }

    async fn fetch_accounts(
        &self,
        credentials: &ProviderCredentials,
        context: &FetchContext,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        self.fetched_accounts(credentials, Some(context)).await
    }

    async fn fetch_transactions(
        &self,
        credentials: &ProviderCredentials,
        provider_account_id: &str,
        range: DateRange,
        context: &FetchContext,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        self.fetched_transactions(credentials, provider_account_id, range, Some(context))
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
        // The bridge's holdings are not mapped: bank accounts have none.
        Ok(Fetched::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(allow_http: bool) -> SimplefinProvider {
        SimplefinProvider::new(SimplefinConfig {
            bridge_hosts: vec!["bridge.example".to_owned(), "127.0.0.1".to_owned()],
            allow_http,
            ..SimplefinConfig::default()
        })
        .expect("a provider")
    }

    fn token(url: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(url)
    }

    #[test]
    fn claim_urls_must_be_https_on_an_allowed_host() {
        let strict = provider(false);
        assert!(
            strict
                .claim_url(&token("https://bridge.example/claim/abc"))
                .is_ok()
        );
        assert!(
            strict
                .claim_url(&token("https://BRIDGE.example./claim/abc"))
                .is_ok()
        );
        for refused in [
            "http://bridge.example/claim/abc",
            "https://evil.example/claim/abc",
            "https://bridge.example.evil.example/claim",
            "https://user:pw@bridge.example/claim",
            "https://127.0.0.1/claim",
            "file:///etc/passwd",
            "not a url",
        ] {
            let error = strict.claim_url(&token(refused));
            assert!(
                matches!(error, Err(ProviderError::InvalidGrant(_))),
                "{refused}"
            );
        }
        assert!(matches!(
            strict.claim_url("%%% not base64"),
            Err(ProviderError::InvalidGrant(_))
        ));
        let test_mode = provider(true);
        assert!(
            test_mode
                .claim_url(&token("http://127.0.0.1:9/claim/abc"))
                .is_ok()
        );
        assert!(
            test_mode
                .claim_url(&token("http://localhost/claim/abc"))
                .is_err()
        );
    }

    #[test]
    fn claim_urls_are_pinned_to_scheme_host_and_port() {
        let strict = provider(false);
        assert!(
            strict
                .claim_url(&token("https://bridge.example:443/claim/abc"))
                .is_ok()
        );
        assert!(
            strict
                .claim_url(&token("https://bridge.example:8443/claim/abc"))
                .is_err()
        );
        let pinned = SimplefinProvider::new(SimplefinConfig {
            bridge_hosts: vec!["127.0.0.1:4000".to_owned()],
            allow_http: true,
            ..SimplefinConfig::default()
        })
        .expect("a provider");
        assert!(
            pinned
                .claim_url(&token("http://127.0.0.1:4000/claim/abc"))
                .is_ok()
        );
        for refused in [
            "http://127.0.0.1:4001/claim/abc",
            "http://127.0.0.1/claim/abc",
            "http://2130706433:4000/claim/abc",
            "http://127.1:4000/claim/abc",
            "http://0x7f.1:4000/claim/abc",
            "http://0177.0.0.1:4000/claim/abc",
            "http://127.0.0.1.:4001/claim/abc",
        ] {
            assert!(pinned.claim_url(&token(refused)).is_err(), "{refused}");
        }
        let test_mode = provider(true);
        for refused in [
            "http://2130706433/claim",
            "http://127.1/claim",
            "http://0x7f.1/claim",
        ] {
            assert!(test_mode.claim_url(&token(refused)).is_err(), "{refused}");
        }
    }

    #[test]
    fn windows_cover_the_range_without_overlap() {
        let day = |d: &str| d.parse::<NaiveDate>().expect("a date");
        let range = DateRange {
            start: day("2026-01-01"),
            end: day("2026-07-01"),
        };
        let parts = windows(range, 90);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[0].start, day("2026-01-01"));
        assert_eq!(parts[0].end, day("2026-03-31"));
        assert_eq!(parts[1].start, day("2026-04-01"));
        assert_eq!(parts[2].end, day("2026-07-01"));
        let single = DateRange {
            start: day("2026-01-01"),
            end: day("2026-01-01"),
        };
        assert_eq!(windows(single, 90), vec![single]);
    }

    #[test]
    fn account_types_come_from_names() {
        assert_eq!(account_type_of("Everyday Checking"), AccountType::Checking);
        assert_eq!(account_type_of("High Yield Savings"), AccountType::Savings);
        assert_eq!(
            account_type_of("Rewards Visa Signature"),
            AccountType::CreditCard
        );
        assert_eq!(account_type_of("Home Mortgage"), AccountType::Mortgage);
        assert_eq!(account_type_of("Auto Loan"), AccountType::Loan);
        assert_eq!(account_type_of("Roth IRA"), AccountType::RothIra);
        assert_eq!(account_type_of("Gift card balance"), AccountType::Other);
    }

    #[test]
    fn transactions_map_pending_and_posted() {
        let pending = serde_json::json!({
            "id": "t1", "posted": 0, "amount": "-12.50", "description": "COFFEE",
            "transacted_at": 1_767_225_600, "pending": true
        });
        let row = map_transaction(pending, "USD").expect("maps");
        assert_eq!(row.status, TransactionStatus::Pending);
        assert_eq!(row.transaction_date.to_string(), "2026-01-01");
        assert_eq!(row.settlement_date, None);
        let posted = serde_json::json!({
            "id": "t2", "posted": 1_767_312_000, "amount": "100.00", "description": "",
            "payee": "Employer"
        });
        let row = map_transaction(posted, "USD").expect("maps");
        assert_eq!(row.status, TransactionStatus::Settled);
        assert_eq!(row.description.as_deref(), Some("Employer"));
        assert!(map_transaction(serde_json::json!({"id": "t3", "amount": "x"}), "USD").is_err());
    }

    #[test]
    fn secrets_hold_the_access_url_in_either_shape() {
        let claimed = ProviderSecret::serialize(&SimplefinSecret {
            access_url: "https://u:p@bridge.example/simplefin".to_owned(),
        })
        .expect("a secret");
        let legacy = ProviderSecret::from_json(serde_json::json!({
            "access_token": "https://u:p@bridge.example/simplefin"
        }));
        for secret in [claimed, legacy] {
            let read = SimplefinSecret::of(&ProviderCredentials::lasting(secret)).expect("reads");
            assert_eq!(read.access_url, "https://u:p@bridge.example/simplefin");
        }
        let foreign = ProviderCredentials::lasting(ProviderSecret::from_string("x"));
        assert!(matches!(
            SimplefinSecret::of(&foreign),
            Err(ProviderError::InvalidCredentials(_))
        ));
    }

    #[test]
    fn access_urls_lose_their_credentials_to_basic_auth() {
        let provider = provider(true);
        let (url, user, password) = provider
            .accounts_url("http://us%40er:p%3Ass@127.0.0.1:8/simplefin")
            .expect("an accounts URL");
        assert_eq!(url.as_str(), "http://127.0.0.1:8/simplefin/accounts");
        assert_eq!((user.as_str(), password.as_str()), ("us@er", "p:ss"));
        assert!(
            provider
                .accounts_url("http://u:p@evil.example/simplefin")
                .is_err()
        );
    }
}
