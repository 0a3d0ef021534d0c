//! The whole API as one `tower::Service` over `http` types.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::BodyExt as _;
use serde::Serialize;

use crate::admin::{Admin, AdminError};
use crate::api::routes::{Endpoint, Router};
use crate::api::{self, ApiResult, RequestBody, RequestContext, ResponseBody, json, read_body};
use crate::auth::Auth;
use crate::config::Config;
use crate::crypto::{random_span_id, random_trace_id};
use crate::events::{EventSink, SinkRateLimitEvents, TracingEventSink};
use crate::import::statement::Imports;
use crate::jobs::JobRunner;
use crate::mail::{MailQueue, MailQueueHandle, Mailer};
use crate::problem::{ApiError, ErrorCode, PROBLEM_CONTENT_TYPE};
use crate::providers::connections::Connections;
use crate::providers::{Provider, Providers};
use crate::rate_limit::{
    Decision, InMemoryRateLimitStore, PolicyTable, RateLimitStore, RateLimiter, RequestIdentity,
    Scope, body_connection_id, canonical_id, client_ip,
};
use crate::records::Records;
use crate::sessions::Sessions;
use crate::store::Store;
use crate::work::WorkGate;

/// The client's socket address, put into request extensions by the host (the adapters do it).
/// Without it, rate limiting by IP treats all such requests as one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// Why the service could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No store was given.
    #[error("a store is required: call .store(...)")]
    MissingStore,
    /// No mailer was given.
    #[error("a mailer is required: call .mailer(...)")]
    MissingMailer,
    /// `build` was called outside a Tokio runtime (the mail queue needs one).
    #[error("the service must be built inside a Tokio runtime")]
    NoRuntime,
}

/// Shared state behind every clone of the service.
pub(crate) struct State {
    pub(crate) config: Arc<Config>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) auth: Auth,
    pub(crate) connections: Connections,
    pub(crate) sessions: Sessions,
    pub(crate) imports: Imports,
    pub(crate) admin: Admin,
    pub(crate) records: Records,
    limiter: RateLimiter,
    router: Router,
    mail: MailQueueHandle,
}

/// The aggregation API as a `tower::Service<http::Request<B>>`.
///
/// Cheap to clone; every failure is already a problem-details response, so `Error` is
/// [`Infallible`]. Build it with [`AggregationService::builder`].
#[derive(Clone)]
pub struct AggregationService {
    state: Arc<State>,
}

impl std::fmt::Debug for AggregationService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregationService")
            .field("config", &self.state.config)
            .finish_non_exhaustive()
    }
}

/// Assembles an [`AggregationService`].
#[must_use]
pub struct AggregationServiceBuilder {
    config: Config,
    store: Option<Arc<dyn Store>>,
    mailer: Option<Arc<dyn Mailer>>,
    events: Arc<dyn EventSink>,
    rate_limit_store: Option<Arc<dyn RateLimitStore>>,
    rate_limit_policies: PolicyTable,
    providers: Providers,
}

impl AggregationService {
    /// Starts building a service with this configuration.
    pub fn builder(config: Config) -> AggregationServiceBuilder {
        AggregationServiceBuilder {
            config,
            store: None,
            mailer: None,
            events: Arc::new(TracingEventSink),
            rate_limit_store: None,
            rate_limit_policies: PolicyTable::builtin(),
            providers: Providers::new(),
        }
    }

    /// The configuration the service runs with.
    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// The background jobs of this service, to [`JobRunner::spawn`] on the current runtime (or
    /// to run one at a time with [`JobRunner::run_once`]).
    pub fn jobs(&self) -> JobRunner {
        JobRunner::new(
            self.state.store.clone(),
            self.state.config.clone(),
            self.state.connections.clone(),
        )
    }

    /// The outgoing mail queue, to [`MailQueueHandle::shutdown`] when the host stops so that
    /// queued emails are still sent.
    pub fn mail_queue(&self) -> MailQueueHandle {
        self.state.mail.clone()
    }

    /// Grants the `admin` role to the account with this email; see
    /// [`crate::admin::grant_admin_by_email`].
    pub async fn grant_admin(&self, email: &str) -> Result<bool, AdminError> {
        self.state.admin.grant_admin_by_email(email).await
    }

    /// Grants the `admin` role to every existing account among [`Config::admin_emails`] whose
    /// email is verified (other accounts receive it when they verify their email); the number
    /// granted now. For a host's start-up.
    pub async fn grant_configured_admins(&self) -> Result<usize, AdminError> {
        self.state.admin.grant_configured_admins().await
    }
}

impl AggregationServiceBuilder {
    /// The store (SQLite, PostgreSQL, or your own).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The store, already shared.
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The mailer (SMTP, outbox folder, in memory, or your own).
    pub fn mailer(mut self, mailer: impl Mailer) -> Self {
        self.mailer = Some(Arc::new(mailer));
        self
    }

    /// Where domain events go (default: [`TracingEventSink`]).
    pub fn events(mut self, sink: impl EventSink) -> Self {
        self.events = Arc::new(sink);
        self
    }

    /// Where rate-limit buckets live (default: in process). Use
    /// [`RedisRateLimitStore`](crate::rate_limit::RedisRateLimitStore) to share limits across
    /// instances. The per-account failed-login throttle
    /// ([`Config::with_login_failure_limit`]) keeps its buckets here too.
    pub fn rate_limit_store(mut self, store: Arc<dyn RateLimitStore>) -> Self {
        self.rate_limit_store = Some(store);
        self
    }

    /// The rate-limit policies (default: [`PolicyTable::builtin`]; [`PolicyTable::disabled`]
    /// turns limiting off).
    pub fn rate_limit_policies(mut self, policies: PolicyTable) -> Self {
        self.rate_limit_policies = policies;
        self
    }

    /// Offers a provider (replacing one with the same slug), such as
    /// [`SchwabProvider`](crate::providers::SchwabProvider) or your own.
    pub fn provider(mut self, provider: impl Provider) -> Self {
        self.providers.insert(Arc::new(provider));
        self
    }

    /// Offers a provider that is already shared.
    pub fn shared_provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.providers.insert(provider);
        self
    }

    /// Builds the service. Must run inside a Tokio runtime: the mail queue's task starts here.
    pub fn build(self) -> Result<AggregationService, BuildError> {
        let store = self.store.ok_or(BuildError::MissingStore)?;
        let mailer = self.mailer.ok_or(BuildError::MissingMailer)?;
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(BuildError::NoRuntime);
        }
        let config = Arc::new(self.config);
        let mail = MailQueue::start(mailer);
        let mail_handle = mail.handle();
        let limits = self
            .rate_limit_store
            .unwrap_or_else(|| Arc::new(InMemoryRateLimitStore::new()));
        // The login throttle keeps its buckets beside the endpoints' (shared through Redis
        // when that is the store), whatever the policies.
        let auth = Auth::new(
            store.clone(),
            config.clone(),
            mail,
            self.events.clone(),
            limits.clone(),
        );
        let limiter = RateLimiter::new(
            self.rate_limit_policies,
            limits,
            Arc::new(SinkRateLimitEvents(self.events.clone())),
        );
        let connections = Connections::new(
            store.clone(),
            Arc::new(self.providers),
            config.clone(),
            self.events.clone(),
        );
        let parsing = WorkGate::new("OFX parsing", config.parsing_limits());
        let sessions = Sessions::new(store.clone(), self.events.clone());
        let imports = Imports::new(store.clone(), self.events.clone(), parsing);
        let admin = Admin::new(store.clone(), config.clone(), self.events.clone());
        let records = Records::new(store.clone());
        Ok(AggregationService {
            state: Arc::new(State {
                config,
                store,
                auth,
                connections,
                sessions,
                imports,
                admin,
                records,
                limiter,
                router: Router::new(),
                mail: mail_handle,
            }),
        })
    }
}

impl<B> tower::Service<Request<B>> for AggregationService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let state = self.state.clone();
        let request = request.map(|body| body.map_err(Into::into).boxed_unsync());
        Box::pin(async move { Ok(state.handle(request).await) })
    }
}

/// The trace id of an incoming W3C `traceparent` header, when it is well formed.
fn incoming_trace_id(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get("traceparent")?.to_str().ok()?;
    let mut parts = value.trim().split('-');
    let (version, trace_id, parent_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    let valid = hex(version, 2)
        && version != "ff"
        && hex(trace_id, 32)
        && trace_id.bytes().any(|b| b != b'0')
        && hex(parent_id, 16)
        && hex(flags, 2);
    valid.then(|| trace_id.to_ascii_lowercase())
}

/// A request body that was already read, for a handler that reads it again.
fn buffered_body(bytes: Bytes) -> RequestBody {
    http_body_util::Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
}

impl State {
    async fn handle(&self, request: Request<RequestBody>) -> Response<ResponseBody> {
        let started = Instant::now();
        let (parts, body) = request.into_parts();
        let trace_id = incoming_trace_id(&parts.headers).unwrap_or_else(random_trace_id);
        let forwarded: Vec<&str> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        let peer = parts.extensions.get::<PeerAddr>().map(|peer| peer.0.ip());
        let client_ip = client_ip::client_ip(peer, &forwarded, self.config.trusted_proxies());
        let mut ctx = RequestContext {
            client_ip,
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers: parts.headers,
            claims: None,
        };
        // Verified once: the rate limiter's USER scope and the handlers both use it.
        ctx.claims = ctx
            .bearer_token()
            .and_then(|token| self.auth.verify_access_token(token));
        let (result, decision) = self.dispatch(&ctx, body).await;
        let mut response = match result {
            Ok(response) => response,
            Err(error) => self.problem(&ctx, &trace_id, &error),
        };
        if let Some(decision) = decision {
            let headers = response.headers_mut();
            headers.insert("x-ratelimit-limit", HeaderValue::from(decision.limit));
            headers.insert(
                "x-ratelimit-remaining",
                HeaderValue::from(decision.remaining),
            );
            headers.insert(
                "x-ratelimit-reset",
                HeaderValue::from(decision.reset_after_secs),
            );
        }
        if let Ok(value) = HeaderValue::from_str(&format!("00-{trace_id}-{}-01", random_span_id()))
        {
            response.headers_mut().insert("traceparent", value);
        }
        tracing::info!(
            method = %ctx.method,
            path = %ctx.path,
            status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            trace_id = %trace_id,
            "request"
        );
        response
    }

    fn problem(
        &self,
        ctx: &RequestContext,
        trace_id: &str,
        error: &ApiError,
    ) -> Response<ResponseBody> {
        let body = serde_json::to_vec(&error.to_body(self.config.base_url(), &ctx.path, trace_id))
            .unwrap_or_default();
        let mut response = Response::new(ResponseBody::new(Bytes::from(body)));
        *response.status_mut() = error.status();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(PROBLEM_CONTENT_TYPE),
        );
        for (name, value) in error.headers() {
            headers.append(name.clone(), value.clone());
        }
        response
    }

    /// Routes, rate-limits and runs one request; the decision, when the endpoint is limited.
    async fn dispatch(
        &self,
        ctx: &RequestContext,
        mut body: RequestBody,
    ) -> (ApiResult, Option<Decision>) {
        let Some(matched) = self.router.find(&ctx.path) else {
            let error = ApiError::new(ErrorCode::NotFound, format!("No resource at {}.", ctx.path));
            return (Err(error), None);
        };
        let mut identity = RequestIdentity {
            client_ip: ctx.client_ip,
            // Only a token whose signature verifies may name the user.
            user_id: ctx.claims.as_ref().map(|claims| claims.sub.to_string()),
            // Canonical, or none when the id is not a UUID: every spelling of one id shares a
            // bucket, and junk ids share the user's.
            provider_or_account_id: canonical_id(matched.param("id")),
        };
        let mut unreadable = None;
        if identity.user_id.is_some()
            && identity.provider_or_account_id.is_none()
            && self.keyed_by_body_connection(&ctx.method, &matched)
        {
            // The bulk syncs name their connection in the body: buffer it (within the usual
            // limit) to key the bucket, then hand the very same bytes to the handler.
            match read_body(&ctx.headers, body, self.config.max_body_bytes()).await {
                Ok(bytes) => {
                    identity.provider_or_account_id = body_connection_id(&bytes);
                    body = buffered_body(bytes);
                }
                Err(error) => {
                    // Still charged to the user's bucket below, so oversized bodies are no
                    // way around the limit.
                    unreadable = Some(error);
                    body = buffered_body(Bytes::new());
                }
            }
        }
        // The limiter keys the bucket by the template with canonical ids, not the raw path.
        let decision = self
            .limiter
            .check(
                ctx.method.as_str(),
                matched.route.template,
                &ctx.path,
                &identity,
            )
            .await;
        if let Some(denied) = decision.filter(|decision| !decision.allowed) {
            let error = ApiError::rate_limited(denied.retry_after_header());
            return (Err(error), Some(denied));
        }
        if let Some(error) = unreadable {
            return (Err(error), decision);
        }
        (self.route(ctx, &matched, body).await, decision)
    }

    /// Whether the rate-limit bucket of this request is keyed by the `connection_id` of its
    /// body: a bulk sync under a `UserProvider` policy (the path names no connection).
    fn keyed_by_body_connection(
        &self,
        method: &http::Method,
        matched: &crate::api::routes::Matched<'_>,
    ) -> bool {
        let body_names_connection = matched.route.methods.iter().any(|(m, endpoint)| {
            m == method
                && matches!(
                    endpoint,
                    Endpoint::SyncAccounts | Endpoint::SyncTransactions
                )
        });
        body_names_connection
            && self
                .limiter
                .policies()
                .active(method.as_str(), matched.route.template)
                .is_some_and(|(policy, _)| policy.scope == Scope::UserProvider)
    }

    async fn route(
        &self,
        ctx: &RequestContext,
        matched: &crate::api::routes::Matched<'_>,
        body: RequestBody,
    ) -> ApiResult {
        let Some(endpoint) = matched
            .route
            .methods
            .iter()
            .find(|(method, _)| *method == ctx.method)
            .map(|(_, endpoint)| *endpoint)
        else {
            let allow = matched
                .route
                .methods
                .iter()
                .map(|(method, _)| method.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{} is not allowed here; allowed: {allow}.", ctx.method),
            )
            .with_header(
                header::ALLOW,
                HeaderValue::from_str(&allow).unwrap_or(HeaderValue::from_static("GET")),
            ));
        };
        let limit = self.config.max_body_bytes();
        use Endpoint as E;
        match endpoint {
            E::Health => {
                self.store.ping().await?;
                json(StatusCode::OK, &Health { status: "ok" })
            }
            E::Register => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::register(self, ctx, body).await
            }
            E::VerifyEmail => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::verify_email(self, ctx, body).await
            }
            E::ResendVerification => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::resend_verification(self, ctx, body).await
            }
            E::Login => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::login(self, ctx, body).await
            }
            E::Refresh => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::refresh(self, ctx, body).await
            }
            E::Logout => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::logout(self, ctx, body).await
            }
            E::RequestPasswordReset => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::request_password_reset(self, ctx, body).await
            }
            E::ResetPassword => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::auth::reset_password(self, ctx, body).await
            }
            E::ListSessions => api::sessions::list(self, ctx).await,
            E::GetSession => api::sessions::get(self, ctx, matched.param("id")).await,
            E::RevokeSession => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::sessions::revoke(self, ctx, matched.param("id"), body).await
            }
            E::RevokeAllSessions => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::sessions::revoke_all(self, ctx, body).await
            }
            E::ImportFormats => api::imports::formats(self),
            E::Import => api::imports::import(self, ctx, body).await,
            E::ListAccounts => api::accounts::list(self, ctx).await,
            E::GetAccount => api::accounts::get(self, ctx, matched.param("id")).await,
            E::ProviderAccounts => {
                api::accounts::list_for_connection(self, ctx, matched.param("id")).await
            }
            E::GetTransaction => api::transactions::get(self, ctx, matched.param("id")).await,
            E::AccountTransactions => {
                api::transactions::list_for_account(self, ctx, matched.param("id")).await
            }
            E::ListHoldings => api::holdings::list(self, ctx).await,
            E::AccountHoldings => {
                api::holdings::list_for_account(self, ctx, matched.param("id")).await
            }
            E::LatestSnapshots => api::snapshots::latest(self, ctx).await,
            E::BalanceHistory => api::snapshots::history(self, ctx, matched.param("id")).await,
            E::AccountSnapshots => {
                api::snapshots::list_for_account(self, ctx, matched.param("id")).await
            }
            E::RotateGlobal => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::admin::rotate_global(self, ctx, body).await
            }
            E::RotateUser => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::admin::rotate_user(self, ctx, matched.param("user_id"), body).await
            }
            E::SecurityConfig => api::admin::security_config(self, ctx).await,
            E::JobsStatus => api::admin::jobs_status(self, ctx).await,
            E::ListProviders => api::providers::list(self, ctx).await,
            E::GetProvider => api::providers::get(self, ctx, matched.param("id")).await,
            E::Connect => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::providers::connect(self, ctx, body).await
            }
            E::Callback => api::providers::callback(self, ctx).await,
            E::UpdateProvider => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::providers::update(self, ctx, matched.param("id"), body).await
            }
            E::Disconnect => api::providers::disconnect(self, ctx, matched.param("id")).await,
            E::ProviderTokenRefresh => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::providers::refresh_tokens(self, ctx, matched.param("id"), body).await
            }
            E::ProviderSync => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::syncs::connection(self, ctx, matched.param("id"), body).await
            }
            E::SyncAccounts => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::syncs::accounts(self, ctx, body).await
            }
            E::SyncTransactions => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::syncs::transactions(self, ctx, body).await
            }
            E::SyncHoldings => {
                let body = read_body(&ctx.headers, body, limit).await?;
                api::syncs::holdings(self, ctx, matched.param("id"), body).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::incoming_trace_id;

    #[test]
    fn traceparent_is_validated() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
        );
        assert_eq!(
            incoming_trace_id(&headers).as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        headers.insert(
            "traceparent",
            http::HeaderValue::from_static(
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            ),
        );
        assert_eq!(incoming_trace_id(&headers), None);
        headers.insert("traceparent", http::HeaderValue::from_static("garbage"));
        assert_eq!(incoming_trace_id(&headers), None);
    }
}
