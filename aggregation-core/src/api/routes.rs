//! The route table: every path of the API with the methods it answers.

use http::Method;

/// One operation of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Health,
    Register,
    VerifyEmail,
    ResendVerification,
    Login,
    Refresh,
    Logout,
    RequestPasswordReset,
    ResetPassword,
    ListSessions,
    GetSession,
    RevokeSession,
    RevokeAllSessions,
    RotateGlobal,
    RotateUser,
    SecurityConfig,
    JobsStatus,
    ListProviders,
    GetProvider,
    Connect,
    Callback,
    UpdateProvider,
    Disconnect,
    ProviderAccounts,
    ProviderSync,
    ProviderTokenRefresh,
    ListAccounts,
    GetAccount,
    SyncAccounts,
    GetTransaction,
    SyncTransactions,
    AccountTransactions,
    ListHoldings,
    AccountHoldings,
    SyncHoldings,
    LatestSnapshots,
    BalanceHistory,
    AccountSnapshots,
    Import,
    ImportFormats,
}

/// A path template with the endpoints behind each of its methods.
pub(crate) struct Route {
    pub(crate) template: &'static str,
    pub(crate) methods: &'static [(Method, Endpoint)],
}

use Endpoint as E;

/// Every route. Templates use matchit's `{name}` syntax; static segments win over parameters.
pub(crate) const ROUTES: &[Route] = &[
    route("/health", &[(Method::GET, E::Health)]),
    route("/api/v1/users", &[(Method::POST, E::Register)]),
    route(
        "/api/v1/email-verifications",
        &[(Method::POST, E::VerifyEmail)],
    ),
    route(
        "/api/v1/email-verification-tokens",
        &[(Method::POST, E::ResendVerification)],
    ),
    route(
        "/api/v1/sessions",
        &[
            (Method::GET, E::ListSessions),
            (Method::POST, E::Login),
            (Method::DELETE, E::RevokeAllSessions),
        ],
    ),
    route("/api/v1/sessions/current", &[(Method::DELETE, E::Logout)]),
    route(
        "/api/v1/sessions/{id}",
        &[
            (Method::GET, E::GetSession),
            (Method::DELETE, E::RevokeSession),
        ],
    ),
    route("/api/v1/tokens", &[(Method::POST, E::Refresh)]),
    route(
        "/api/v1/password-reset-tokens",
        &[(Method::POST, E::RequestPasswordReset)],
    ),
    route(
        "/api/v1/password-resets",
        &[(Method::POST, E::ResetPassword)],
    ),
    route(
        "/api/v1/admin/security/rotations",
        &[(Method::POST, E::RotateGlobal)],
    ),
    route(
        "/api/v1/admin/users/{user_id}/rotations",
        &[(Method::POST, E::RotateUser)],
    ),
    route(
        "/api/v1/admin/security/config",
        &[(Method::GET, E::SecurityConfig)],
    ),
    route("/api/v1/admin/jobs", &[(Method::GET, E::JobsStatus)]),
    route(
        "/api/v1/providers",
        &[(Method::GET, E::ListProviders), (Method::POST, E::Connect)],
    ),
    route("/api/v1/providers/callback", &[(Method::POST, E::Callback)]),
    route(
        "/api/v1/providers/{id}",
        &[
            (Method::GET, E::GetProvider),
            (Method::PATCH, E::UpdateProvider),
            (Method::DELETE, E::Disconnect),
        ],
    ),
    route(
        "/api/v1/providers/{id}/accounts",
        &[(Method::GET, E::ProviderAccounts)],
    ),
    route(
        "/api/v1/providers/{id}/sync",
        &[(Method::POST, E::ProviderSync)],
    ),
    route(
        "/api/v1/providers/{id}/token-refreshes",
        &[(Method::POST, E::ProviderTokenRefresh)],
    ),
    route("/api/v1/accounts", &[(Method::GET, E::ListAccounts)]),
    route("/api/v1/accounts/syncs", &[(Method::POST, E::SyncAccounts)]),
    route("/api/v1/accounts/{id}", &[(Method::GET, E::GetAccount)]),
    route(
        "/api/v1/accounts/{id}/transactions",
        &[(Method::GET, E::AccountTransactions)],
    ),
    route(
        "/api/v1/accounts/{id}/holdings",
        &[(Method::GET, E::AccountHoldings)],
    ),
    route(
        "/api/v1/accounts/{id}/holdings/syncs",
        &[(Method::POST, E::SyncHoldings)],
    ),
    route(
        "/api/v1/accounts/{id}/balance-history",
        &[(Method::GET, E::BalanceHistory)],
    ),
    route(
        "/api/v1/accounts/{id}/balance-snapshots",
        &[(Method::GET, E::AccountSnapshots)],
    ),
    route(
        "/api/v1/transactions/syncs",
        &[(Method::POST, E::SyncTransactions)],
    ),
    route(
        "/api/v1/transactions/{id}",
        &[(Method::GET, E::GetTransaction)],
    ),
    route("/api/v1/holdings", &[(Method::GET, E::ListHoldings)]),
    route(
        "/api/v1/balance-snapshots",
        &[(Method::GET, E::LatestSnapshots)],
    ),
    route("/api/v1/imports", &[(Method::POST, E::Import)]),
    route(
        "/api/v1/imports/formats",
        &[(Method::GET, E::ImportFormats)],
    ),
];

const fn route(template: &'static str, methods: &'static [(Method, Endpoint)]) -> Route {
    Route { template, methods }
}

/// A matched request: the route, and the path parameters by name.
pub(crate) struct Matched<'p> {
    pub(crate) route: &'static Route,
    pub(crate) params: Vec<(&'p str, &'p str)>,
}

impl Matched<'_> {
    pub(crate) fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(key, _)| *key == name)
            .map_or("", |(_, value)| value)
    }
}

/// The compiled route table.
pub(crate) struct Router {
    inner: matchit::Router<usize>,
}

impl Router {
    pub(crate) fn new() -> Self {
        let mut inner = matchit::Router::new();
        for (index, route) in ROUTES.iter().enumerate() {
            if let Err(error) = inner.insert(route.template, index) {
                // The table is static; a conflict is a programming error caught by the tests.
                tracing::error!(error = %error, template = route.template, "route conflict");
            }
        }
        Self { inner }
    }

    pub(crate) fn find<'p>(&'p self, path: &'p str) -> Option<Matched<'p>> {
        let matched = self.inner.at(path).ok()?;
        let route = ROUTES.get(*matched.value)?;
        Some(Matched {
            route,
            params: matched.params.iter().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_routable_and_static_segments_win() {
        let router = Router::new();
        for route in ROUTES {
            let path = route
                .template
                .replace("{id}", "0192f3c4-0000-7000-8000-000000000000")
                .replace("{user_id}", "0192f3c4-0000-7000-8000-000000000000");
            let matched = router.find(&path).expect("routable");
            assert_eq!(matched.route.template, route.template);
        }
        let current = router.find("/api/v1/sessions/current").expect("routable");
        assert_eq!(current.route.template, "/api/v1/sessions/current");
        let syncs = router.find("/api/v1/accounts/syncs").expect("routable");
        assert_eq!(syncs.route.template, "/api/v1/accounts/syncs");
        let session = router.find("/api/v1/sessions/abc").expect("routable");
        assert_eq!(session.param("id"), "abc");
        assert!(router.find("/api/v2/users").is_none());
    }
}
