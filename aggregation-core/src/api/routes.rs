//! The route table: one row per endpoint (method, path template, rate limit, summary,
//! handler), kept beside its handler in each resource module. The router, the built-in
//! rate-limit policies ([`PolicyTable::builtin`](crate::rate_limit::PolicyTable::builtin))
//! and any description of the API read these rows.
//!
//! ```
//! let login = aggregation_core::api::routes()
//!     .find(|route| route.method() == "POST" && route.template() == "/api/v1/sessions")
//!     .unwrap();
//! assert_eq!(login.rate_limit().unwrap().policy.max_tokens, 5.0);
//! ```

use http::Method;

use super::handler::HandlerFn;
use super::openapi::OperationDoc;
use crate::rate_limit::{Policy, PolicyTable};

/// Where a request names the provider connection or account its rate-limit bucket is keyed
/// by, for the `user_provider` and `user_account` scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetId {
    /// The `{id}` segment of the path.
    PathId,
    /// The `connection_id` of the JSON body (the bulk syncs, whose path names none). The body
    /// is read for it only under a `user_provider` scope and with a verified user.
    BodyConnectionId,
}

/// The built-in rate limit of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RateLimit {
    /// The policy (its numbers and scope may be overridden, see
    /// [`PolicyTable::with_overrides_toml`](crate::rate_limit::PolicyTable::with_overrides_toml)).
    pub policy: Policy,
    /// Where the request names the connection or account of its bucket.
    pub target: TargetId,
}

/// Limited by `policy`, the bucket's connection or account taken from the path.
pub(crate) const fn limited(policy: Policy) -> Option<RateLimit> {
    Some(RateLimit {
        policy,
        target: TargetId::PathId,
    })
}

/// Limited by `policy`, the bucket's connection taken from the body's `connection_id`.
pub(crate) const fn limited_by_body_connection(policy: Policy) -> Option<RateLimit> {
    Some(RateLimit {
        policy,
        target: TargetId::BodyConnectionId,
    })
}

/// One endpoint of the API.
pub struct Route {
    method: Method,
    template: &'static str,
    summary: &'static str,
    rate_limit: Option<RateLimit>,
    handler: HandlerFn,
    describe: fn(&mut OperationDoc),
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("method", &self.method)
            .field("template", &self.template)
            .field("summary", &self.summary)
            .field("rate_limit", &self.rate_limit)
            .finish_non_exhaustive()
    }
}

impl Route {
    /// A row; written through [`route!`].
    pub(crate) const fn new(
        method: Method,
        template: &'static str,
        handler: HandlerFn,
        rate_limit: Option<RateLimit>,
        summary: &'static str,
        describe: fn(&mut OperationDoc),
    ) -> Self {
        Self {
            method,
            template,
            summary,
            rate_limit,
            handler,
            describe,
        }
    }

    /// The method (`GET`, `POST`, ...).
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The path template in matchit syntax (`/api/v1/accounts/{id}`); static segments win
    /// over parameters.
    pub fn template(&self) -> &'static str {
        self.template
    }

    /// One line saying what the endpoint does.
    pub fn summary(&self) -> &'static str {
        self.summary
    }

    /// The built-in rate limit; `None` when the endpoint is never limited.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        self.rate_limit
    }

    pub(crate) fn handler(&self) -> HandlerFn {
        self.handler
    }

    /// Documents the operation: its extractors' parameters, body and problems, and its
    /// answers.
    pub(crate) fn describe(&self) -> fn(&mut OperationDoc) {
        self.describe
    }
}

/// The built-in policy of every endpoint, as (method, route template, policy): the rate limit
/// of each row of the route table ([`super::routes()`]). The health checks have a disabled one
/// ([`HEALTH_CHECK`](crate::rate_limit::policy::HEALTH_CHECK)): not limited unless an override
/// file enables it.
pub(crate) fn builtin_policies() -> impl Iterator<Item = (&'static str, &'static str, Policy)> {
    super::routes().filter_map(|route| {
        let limit = route.rate_limit()?;
        Some((route.method().as_str(), route.template(), limit.policy))
    })
}

// Written beside the route table, which owns the built-in limits: the rate limiter's own
// module knows policies, not routes.
impl PolicyTable {
    /// The built-in policies: the rate limit of each row of the route table
    /// ([`routes()`](crate::api::routes())).
    pub fn builtin() -> Self {
        Self::from_builtin(builtin_policies())
    }
}

/// A route row:
/// `route!(METHOD "/template" => handler, rate_limit, "summary", [answers])`, `handler` being
/// an `async fn(&App, extractors...) -> ApiResult` (see [`super::handler`]). `answers` lists
/// the success statuses with their JSON body type (`200: AccountList<'static>`, `204`; another
/// media type with `as`: `200: EventStreamText as "text/event-stream"`), then,
/// after `;`, the [`ErrorCode`](crate::problem::ErrorCode)s the handler itself answers beyond
/// those of its extractors and rate limit (`Conflict`). The OpenAPI document is built from
/// these rows.
macro_rules! route {
    ($method:ident $template:literal => $handler:path, $rate_limit:expr, $summary:literal,
        [$($status:literal $(: $body:ty $(as $media:literal)?)?),+ $(; $($code:ident),+)?]) => {
        $crate::api::routes::Route::new(
            ::http::Method::$method,
            $template,
            |app, request| {
                ::std::boxed::Box::pin(async move {
                    $crate::api::handler::Handler::call($handler, &*app, request).await
                })
            },
            $rate_limit,
            $summary,
            |doc| {
                $crate::api::openapi::describe_handler($handler, doc);
                $($crate::api::routes::route!(@answer doc, $status $(: $body $(as $media)?)?);)+
                $($(doc.error($crate::problem::ErrorCode::$code);)+)?
            },
        )
    };
    (@answer $doc:ident, $status:literal: $body:ty) => {
        $doc.json_response::<$body>($status)
    };
    (@answer $doc:ident, $status:literal: $body:ty as $media:literal) => {
        $doc.content_response::<$body>($status, $media)
    };
    (@answer $doc:ident, $status:literal) => {
        $doc.empty_response($status)
    };
}

pub(crate) use route;
