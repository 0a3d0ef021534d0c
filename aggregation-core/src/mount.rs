//! Which paths a framework adapter hands to the service, shared by aggregation-axum and
//! aggregation-actix so both mount alike.

/// Which paths an adapter's `router_with` hands to the service.
///
/// [`Mount::api`] (what the adapters' `router` mounts) is `/api/v1` and every path under it;
/// the host app keeps every other path, its own fallback included. The service routes on the
/// full path, so adapters never strip the prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mount {
    health: bool,
    fallback: bool,
}

impl Mount {
    /// The prefix of every API path.
    pub const API_PREFIX: &'static str = "/api/v1";

    /// The health checks [`Mount::with_health`] hands to the service: `/health` (the store
    /// answers), `/health/live` (the process serves) and `/health/ready` (the store and the
    /// rate-limit store answer).
    pub const HEALTH_PATHS: [&'static str; 3] = ["/health", "/health/live", "/health/ready"];

    /// `/api/v1` and every path under it.
    #[must_use]
    pub const fn api() -> Self {
        Self {
            health: false,
            fallback: false,
        }
    }

    /// Also the health checks, [`Mount::HEALTH_PATHS`].
    #[must_use]
    pub const fn with_health(self) -> Self {
        Self {
            health: true,
            ..self
        }
    }

    /// Also every path no other route of the app matches, answered with the service's own 404
    /// problem: for an app that serves the API and little else (the reference server). In axum
    /// the router then has a fallback, so it cannot be merged with a router that has one.
    #[must_use]
    pub const fn with_fallback(self) -> Self {
        Self {
            fallback: true,
            ..self
        }
    }

    /// Whether the health checks ([`Mount::HEALTH_PATHS`]) are mounted.
    pub const fn health(&self) -> bool {
        self.health
    }

    /// Whether every unrouted path is handed to the service.
    pub const fn fallback(&self) -> bool {
        self.fallback
    }
}
