//! The whole API as one `tower::Service` over `http` types.
//!
//! A request walks down once through `tower` layers, each in its own module:
//!
//! 0. `service::keep_alive`: an HTTP/1 answer given before the request body was read waits
//!    for the rest of a small body, or says `Connection: close`;
//! 1. `service::trace`: trace context (`traceparent`), the request's tracing span, the access
//!    log and (feature `metrics`) the request metrics;
//! 2. `service::problem`: every failure below becomes a problem-details response here;
//! 3. `service::client_ip`: the client address behind trusted proxies;
//! 4. `service::bearer`: the bearer token, verified once;
//! 5. `api::router`: the resource of the path ([`crate::api::routes()`]), or 404;
//! 6. `service::rate_limit`: the matched endpoint's rate limit;
//! 7. `api::router` again: the row of the method (405 otherwise), its extractors and handler.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt as _;

use crate::admin::AdminError;
use crate::api::router::{ApiState, Dispatch, Router, RouterLayer};
use crate::api::{RequestBody, ResponseBody};
use crate::app::App;
use crate::config::Config;
use crate::events::{EventSink, SinkRateLimitEvents, TracingEventSink};
use crate::jobs::JobRunner;
use crate::mail::{MailQueue, MailQueueHandle, Mailer};
use crate::providers::{Provider, Providers};
use crate::rate_limit::{
    InMemoryRateLimitStore, PolicyTable, RateLimitStore, RateLimiter, WatchedRateLimitStore,
    rate_limit_outage,
};
use crate::store::{GuardedStore, Store};

mod annotate;
pub(crate) mod bearer;
pub(crate) mod client_ip;
mod keep_alive;
#[cfg(all(test, feature = "sqlite"))]
mod outage_tests;
pub(crate) mod problem;
pub(crate) mod rate_limit;
pub(crate) mod trace;

use annotate::Annotated;
use bearer::{BearerLayer, VerifyBearer};
use client_ip::{ClientIpLayer, ResolveClientIp};
use keep_alive::{KeepAlive, KeepAliveLayer};
use problem::{ProblemLayer, Problems};
use rate_limit::{RateLimit, RateLimitLayer};
use trace::{Trace, TraceLayer};

/// The client's socket address, put into request extensions by the host (the adapters do it).
/// Without it, rate limiting by IP treats all such requests as one client (the first such
/// request logs a warning).
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

/// The layers and the router, as composed by [`AggregationServiceBuilder::build`].
type Stack = KeepAlive<
    Trace<
        Problems<Annotated<Annotated<Router<RateLimit<Dispatch>>, VerifyBearer>, ResolveClientIp>>,
    >,
>;

/// The aggregation API as a `tower::Service<http::Request<B>>`.
///
/// Cheap to clone; every failure is already a problem-details response, so `Error` is
/// [`Infallible`]. Build it with [`AggregationService::builder`].
#[derive(Clone)]
pub struct AggregationService {
    app: Arc<App>,
    /// What the HTTP edge keeps beside the app (the open event streams among it).
    api: ApiState,
    mail: MailQueueHandle,
    stack: Stack,
    #[cfg(feature = "metrics")]
    metrics: crate::metrics::Metrics,
}

impl std::fmt::Debug for AggregationService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregationService")
            .field("config", &self.app.config)
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
    #[cfg(feature = "redis")]
    event_relay: Option<crate::events::RedisEventRelay>,
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
            #[cfg(feature = "redis")]
            event_relay: None,
        }
    }

    /// The configuration the service runs with.
    pub fn config(&self) -> &Config {
        &self.app.config
    }

    /// The background jobs of this service, to [`JobRunner::spawn`] on the current runtime (or
    /// to run one at a time with [`JobRunner::run_once`]).
    pub fn jobs(&self) -> JobRunner {
        let runner = JobRunner::new(
            self.app.store.clone(),
            self.app.config.clone(),
            self.app.connections.clone(),
        )
        .with_user_data(self.app.user_data.clone());
        #[cfg(feature = "metrics")]
        let runner = runner.with_metrics(self.metrics.clone());
        // Committed events wake webhook delivery once the runner is spawned.
        #[cfg(feature = "webhooks")]
        let runner = runner.with_event_bus(self.app.bus.clone());
        runner
    }

    /// The request and job metrics of this service (and of its [`AggregationService::jobs`]),
    /// to expose where the host likes; see [`crate::metrics`].
    #[cfg(feature = "metrics")]
    pub fn metrics(&self) -> crate::metrics::Metrics {
        self.metrics.clone()
    }

    /// Ends every open event stream (`GET /api/v1/events`), and every one opened from now on,
    /// after its current frame: for a host's graceful shutdown, which would otherwise wait for
    /// streams that never end by themselves.
    pub fn end_event_streams(&self) {
        self.api.streams().close_all();
    }

    /// The outgoing mail queue, to [`MailQueueHandle::shutdown`] when the host stops so that
    /// queued emails are still sent.
    pub fn mail_queue(&self) -> MailQueueHandle {
        self.mail.clone()
    }

    /// Grants the `admin` role to the account with this email; see
    /// [`crate::admin::grant_admin_by_email`].
    pub async fn grant_admin(&self, email: &str) -> Result<bool, AdminError> {
        self.app.admin.grant_admin_by_email(email).await
    }

    /// Grants the `admin` role to every existing account among [`Config::admin_emails`] whose
    /// email is verified (other accounts receive it when they verify their email); the number
    /// granted now. For a host's start-up.
    pub async fn grant_configured_admins(&self) -> Result<usize, AdminError> {
        self.app.admin.grant_configured_admins().await
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

    /// Where rate-limit buckets live (default: in process). Use `RedisRateLimitStore`
    /// (feature `redis`) to share limits across instances. The per-account failed-login throttle
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

    /// Offers a provider (replacing one with the same slug), such as `SchwabProvider`
    /// (feature `schwab`) or your own.
    pub fn provider(mut self, provider: impl Provider) -> Self {
        self.providers.insert(Arc::new(provider));
        self
    }

    /// Shares events with the other instances on the same Redis and key prefix, so an event
    /// raised on one instance reaches the event streams open on another (see
    /// [`RedisEventRelay`](crate::events::RedisEventRelay)).
    #[cfg(feature = "redis")]
    pub fn event_relay(mut self, relay: crate::events::RedisEventRelay) -> Self {
        self.event_relay = Some(relay);
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
        // Every backend gets the circuit breaker and the outage log, the jobs' calls included.
        let store: Arc<dyn Store> = Arc::new(GuardedStore::new(store));
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
        // Its outages are logged once, not per request (the limiter and throttle fail open):
        // the limiter writes the first line with the endpoint when it meets the outage first.
        let limits_outage = rate_limit_outage();
        let watched_limits: Arc<dyn RateLimitStore> = Arc::new(WatchedRateLimitStore::new(
            limits.clone(),
            limits_outage.clone(),
        ));
        // The login throttle keeps its buckets beside the endpoints' (shared through Redis
        // when that is the store), whatever the policies.
        let app = Arc::new(App::new(
            config.clone(),
            store,
            mail,
            self.events.clone(),
            watched_limits,
            self.providers,
        ));
        #[cfg(feature = "redis")]
        if let Some(relay) = self.event_relay {
            app.bus.attach_relay(relay);
        }
        let limiter = RateLimiter::new(
            self.rate_limit_policies,
            limits,
            Arc::new(SinkRateLimitEvents(self.events)),
        )
        .sharing_outage(limits_outage);
        #[cfg(feature = "metrics")]
        let metrics = crate::metrics::Metrics::default();
        let api = ApiState::default();
        let stack = tower::ServiceBuilder::new()
            .layer(KeepAliveLayer::new())
            .layer(TraceLayer::new(
                #[cfg(feature = "metrics")]
                metrics.clone(),
            ))
            .layer(ProblemLayer::new(config.base_url()))
            .layer(ClientIpLayer::new(config.clone()))
            .layer(BearerLayer::new(Arc::new(app.auth.clone())))
            .layer(RouterLayer::new())
            .layer(RateLimitLayer::new(limiter, config.max_body_bytes()))
            .service(Dispatch::new(app.clone(), api.clone()));
        Ok(AggregationService {
            app,
            api,
            mail: mail_handle,
            stack,
            #[cfg(feature = "metrics")]
            metrics,
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
        let request: Request<RequestBody> =
            request.map(|body| body.map_err(Into::into).boxed_unsync());
        let response = tower::Service::call(&mut self.stack, request);
        Box::pin(response)
    }
}
