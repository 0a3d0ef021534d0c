//! Policies: which bucket applies to which endpoint, the built-in table and TOML overrides.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::bucket::BucketPolicy;

/// Errors building or overriding a policy table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A bucket's numbers cannot be used (see [`BucketPolicy::new`]).
    #[error("invalid rate-limit bucket: {0}")]
    InvalidBucket(&'static str),
    /// An endpoint's policy has numbers that cannot be used.
    #[error("invalid rate-limit policy for {endpoint}: {reason}")]
    Invalid {
        /// `METHOD /route/template`.
        endpoint: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The override file names an endpoint the table does not have.
    #[error("rate-limit override for unknown endpoint {endpoint}")]
    UnknownRoute {
        /// `METHOD /route/template` as written in the file.
        endpoint: String,
    },
    /// The override file names the same endpoint twice.
    #[error("rate-limit override for {endpoint} appears more than once")]
    Duplicate {
        /// `METHOD /route/template`.
        endpoint: String,
    },
    /// The override file is not valid TOML or does not have the expected shape.
    #[error("rate-limit override file: {0}")]
    Toml(String),
}

/// Whose requests share a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Scope {
    /// The client IP address (behind trusted proxies, see [`parse_cidr_list`](super::parse_cidr_list)).
    #[serde(rename(serialize = "IP", deserialize = "ip"), alias = "IP")]
    Ip,
    /// The authenticated user; the client IP when the request carries no verified token.
    #[serde(rename(serialize = "USER", deserialize = "user"), alias = "USER")]
    User,
    /// The authenticated user and the provider connection; the client IP without a user.
    #[serde(
        rename(serialize = "USER_PROVIDER", deserialize = "user_provider"),
        alias = "USER_PROVIDER"
    )]
    UserProvider,
    /// The authenticated user and the account (holdings sync); the client IP without a user.
    #[serde(
        rename(serialize = "USER_ACCOUNT", deserialize = "user_account"),
        alias = "USER_ACCOUNT"
    )]
    UserAccount,
    /// One bucket shared by every caller.
    #[serde(rename(serialize = "GLOBAL", deserialize = "global"), alias = "GLOBAL")]
    Global,
}

impl Scope {
    /// The spec's name, used in events: `IP`, `USER`, `USER_PROVIDER`, `USER_ACCOUNT`,
    /// `GLOBAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ip => "IP",
            Self::User => "USER",
            Self::UserProvider => "USER_PROVIDER",
            Self::UserAccount => "USER_ACCOUNT",
            Self::Global => "GLOBAL",
        }
    }

    /// The lower-case name used in bucket keys and override files.
    pub fn key_str(self) -> &'static str {
        match self {
            Self::Ip => "ip",
            Self::User => "user",
            Self::UserProvider => "user_provider",
            Self::UserAccount => "user_account",
            Self::Global => "global",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The limit of one endpoint (spec: max_tokens, refill_rate, scope, cost, enabled flag).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// Capacity and burst, in tokens.
    pub max_tokens: f64,
    /// Tokens added per minute (fractions allowed).
    pub refill_rate: f64,
    /// Whose requests share a bucket.
    pub scope: Scope,
    /// Tokens one request consumes (default 1).
    pub cost: u32,
    /// `false`: the endpoint is not limited.
    pub enabled: bool,
}

impl Policy {
    /// An enabled policy costing 1 token per request.
    pub const fn new(max_tokens: f64, refill_rate: f64, scope: Scope) -> Self {
        Self {
            max_tokens,
            refill_rate,
            scope,
            cost: 1,
            enabled: true,
        }
    }

    /// The same numbers, switched off: the endpoint is not limited until an override file
    /// sets `enabled = true`.
    pub const fn disabled(self) -> Self {
        Self {
            enabled: false,
            ..self
        }
    }

    /// The bucket numbers of this policy.
    ///
    /// # Errors
    /// [`PolicyError::InvalidBucket`] as [`BucketPolicy::new`].
    pub fn bucket(&self) -> Result<BucketPolicy, PolicyError> {
        BucketPolicy::new(self.max_tokens, self.refill_rate, self.cost)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    method: String,
    policy: Policy,
    bucket: BucketPolicy,
}

/// Policies keyed by (method, route template): which bucket applies to which endpoint, the
/// built-in table and TOML overrides.
///
/// An endpoint is a method plus a route template (`"GET"`, `"/api/v1/accounts/{id}"`): the
/// template the router matched, not the path as requested. Every endpoint of the service has a
/// built-in policy; those of `GET /health`, `GET /health/live` and `GET /health/ready` are
/// disabled (100 tokens, 100 per minute, per IP once enabled), since load balancers and probes
/// poll them. [`PolicyTable::with_overrides_toml`] changes them.
///
/// # Override file (`AGG_RATE_LIMITS=/path/to/file.toml`)
///
/// ```toml
/// # One [[policy]] table per endpoint to change. `method` and `route` name an endpoint of the
/// # built-in table (an unknown one is an error); every other key is optional and keeps the
/// # built-in value when left out.
/// [[policy]]
/// method = "POST"
/// route = "/api/v1/sessions"
/// max_tokens = 10      # capacity and burst (number >= 1)
/// refill_rate = 2.5    # tokens per minute (number > 0, fractions allowed)
/// scope = "ip"         # ip | user | user_provider | user_account | global
/// cost = 1             # tokens per request (integer, 1..=max_tokens)
/// enabled = true       # false: the endpoint is not limited
///
/// [[policy]]
/// method = "GET"
/// route = "/api/v1/accounts"
/// enabled = false
///
/// # The health checks are not limited unless enabled here.
/// [[policy]]
/// method = "GET"
/// route = "/health/ready"
/// enabled = true
/// max_tokens = 20
/// refill_rate = 60
/// ```
///
/// Unknown keys, a duplicate endpoint and invalid numbers are errors naming the endpoint.
///
/// ```
/// use aggregation_core::rate_limit::{PolicyTable, Scope};
///
/// let table = PolicyTable::builtin()
///     .with_overrides_toml(r#"
///         [[policy]]
///         method = "POST"
///         route = "/api/v1/sessions"
///         max_tokens = 10
///     "#)
///     .unwrap();
/// let login = table.get("POST", "/api/v1/sessions").unwrap();
/// assert_eq!((login.max_tokens, login.refill_rate, login.scope), (10.0, 5.0, Scope::Ip));
/// let health = table.get("GET", "/health").unwrap();
/// assert!(!health.enabled && table.active("GET", "/health").is_none());
/// ```
///
/// Lookups take the method case-insensitively and the route template exactly, and do not
/// allocate.
#[derive(Debug, Clone, Default)]
pub struct PolicyTable {
    routes: HashMap<String, Vec<Entry>>,
}

/// `POST /api/v1/sessions`: 5 tokens, 5 per minute, per IP.
pub(crate) const AUTH_LOGIN: Policy = Policy::new(5.0, 5.0, Scope::Ip);
/// `POST /api/v1/users`: 3 tokens, 3 per minute, per IP.
pub(crate) const AUTH_REGISTER: Policy = Policy::new(3.0, 3.0, Scope::Ip);
/// Password reset and email verification: 3 tokens, 1 per minute, per IP.
pub(crate) const AUTH_EMAIL_FLOW: Policy = Policy::new(3.0, 1.0, Scope::Ip);
/// `POST /api/v1/tokens` (refresh): 10 tokens, 10 per minute, per IP.
pub(crate) const AUTH_TOKEN_REFRESH: Policy = Policy::new(10.0, 10.0, Scope::Ip);
/// `POST /api/v1/providers` (connect): 5 tokens, 5 per minute, per user.
pub(crate) const PROVIDER_CONNECT: Policy = Policy::new(5.0, 5.0, Scope::User);
/// `POST /api/v1/providers/callback`: 5 tokens, 5 per minute, per IP.
pub(crate) const PROVIDER_CALLBACK: Policy = Policy::new(5.0, 5.0, Scope::Ip);
/// `POST /api/v1/provider-webhooks/{slug}`: 60 tokens, 60 per minute, per IP (a provider
/// sends from few addresses, and an unverified flood costs each sender its own bucket).
pub(crate) const PROVIDER_WEBHOOK: Policy = Policy::new(60.0, 60.0, Scope::Ip);
/// Connection and account/transaction syncs: 10 tokens, 5 per minute, per user and provider.
pub(crate) const PROVIDER_SYNC: Policy = Policy::new(10.0, 5.0, Scope::UserProvider);
/// Holdings sync: 10 tokens, 5 per minute, per user and account.
pub(crate) const HOLDINGS_SYNC: Policy = Policy::new(10.0, 5.0, Scope::UserAccount);
/// Reads: 100 tokens, 100 per minute, per user.
pub(crate) const API_READ: Policy = Policy::new(100.0, 100.0, Scope::User);
/// The export of a user's own data: 2 tokens, 2 an hour, per user.
pub(crate) const USER_EXPORT: Policy = Policy::new(2.0, 2.0 / 60.0, Scope::User);
/// Public reads: 100 tokens, 100 per minute, per IP.
pub(crate) const PUBLIC_READ: Policy = Policy::new(100.0, 100.0, Scope::Ip);
/// Other writes: 50 tokens, 50 per minute, per user.
pub(crate) const API_WRITE: Policy = Policy::new(50.0, 50.0, Scope::User);
/// `/health`, `/health/live`, `/health/ready`: off, since load balancers and probes poll
/// them; once enabled (`enabled = true` in the override file), 100 tokens, 100 per minute,
/// per IP.
pub(crate) const HEALTH_CHECK: Policy = Policy::new(100.0, 100.0, Scope::Ip).disabled();

fn endpoint_name(method: &str, route: &str) -> String {
    format!("{} {route}", method.to_ascii_uppercase())
}

impl PolicyTable {
    /// A table of built-in policies, as (method, route template, policy): the route table
    /// hands its rows' limits here ([`PolicyTable::builtin`]), so this module needs no routes.
    pub(crate) fn from_builtin<'a>(
        endpoints: impl IntoIterator<Item = (&'a str, &'a str, Policy)>,
    ) -> Self {
        let mut table = Self::default();
        for (method, route, policy) in endpoints {
            // The built-in numbers are valid (checked by a unit test); an invalid one would be
            // skipped rather than panic.
            if let Err(e) = table.insert(method, route, policy) {
                debug_assert!(false, "invalid built-in policy: {e}");
            }
        }
        table
    }

    /// A table with no policy: nothing is limited (`AGG_RATE_LIMITS=off`).
    pub fn disabled() -> Self {
        Self::default()
    }

    /// Add or replace the policy of an endpoint. `method` is taken case-insensitively.
    ///
    /// # Errors
    /// [`PolicyError::Invalid`] when the numbers cannot be used (a disabled policy is
    /// checked too, so enabling it later cannot fail).
    pub fn insert(&mut self, method: &str, route: &str, policy: Policy) -> Result<(), PolicyError> {
        let bucket = policy.bucket().map_err(|e| PolicyError::Invalid {
            endpoint: endpoint_name(method, route),
            reason: match e {
                PolicyError::InvalidBucket(reason) => reason,
                _ => "invalid numbers",
            },
        })?;
        let entries = self.routes.entry(route.to_owned()).or_default();
        let entry = Entry {
            method: method.to_ascii_uppercase(),
            policy,
            bucket,
        };
        match entries
            .iter_mut()
            .find(|e| e.method.eq_ignore_ascii_case(method))
        {
            Some(existing) => *existing = entry,
            None => entries.push(entry),
        }
        Ok(())
    }

    fn entry(&self, method: &str, route: &str) -> Option<&Entry> {
        self.routes
            .get(route)?
            .iter()
            .find(|e| e.method.eq_ignore_ascii_case(method))
    }

    /// The policy of an endpoint, enabled or not; `None` when it has none.
    pub fn get(&self, method: &str, route: &str) -> Option<&Policy> {
        self.entry(method, route).map(|e| &e.policy)
    }

    /// The policy and bucket numbers that apply to an endpoint: `None` when it has no policy
    /// or a disabled one (the endpoint is not limited).
    pub fn active(&self, method: &str, route: &str) -> Option<(&Policy, &BucketPolicy)> {
        self.entry(method, route)
            .filter(|e| e.policy.enabled)
            .map(|e| (&e.policy, &e.bucket))
    }

    /// Every (method, route template, policy), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &Policy)> {
        self.routes.iter().flat_map(|(route, entries)| {
            entries
                .iter()
                .map(move |e| (e.method.as_str(), route.as_str(), &e.policy))
        })
    }

    /// Number of endpoints with a policy (enabled or not).
    pub fn len(&self) -> usize {
        self.routes.values().map(Vec::len).sum()
    }

    /// Whether the table has no policy at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Apply an override file (format in the [type docs](Self)) on top of this table.
    ///
    /// All or nothing: on error the table is not returned.
    ///
    /// # Errors
    /// [`PolicyError::Toml`] for a file that does not parse or has unknown keys,
    /// [`PolicyError::UnknownRoute`] for an endpoint without a policy in this table,
    /// [`PolicyError::Duplicate`] for an endpoint named twice, [`PolicyError::Invalid`] for
    /// numbers that cannot be used.
    pub fn with_overrides_toml(mut self, toml_text: &str) -> Result<Self, PolicyError> {
        let file: OverrideFile =
            toml::from_str(toml_text).map_err(|e| PolicyError::Toml(e.to_string()))?;
        let mut seen: Vec<(String, String)> = Vec::with_capacity(file.policy.len());
        for o in file.policy {
            let endpoint = endpoint_name(&o.method, &o.route);
            let Some(current) = self.get(&o.method, &o.route).copied() else {
                return Err(PolicyError::UnknownRoute { endpoint });
            };
            let method = o.method.to_ascii_uppercase();
            if seen.iter().any(|(m, r)| *m == method && *r == o.route) {
                return Err(PolicyError::Duplicate { endpoint });
            }
            let updated = Policy {
                max_tokens: o.max_tokens.unwrap_or(current.max_tokens),
                refill_rate: o.refill_rate.unwrap_or(current.refill_rate),
                scope: o.scope.unwrap_or(current.scope),
                cost: o.cost.unwrap_or(current.cost),
                enabled: o.enabled.unwrap_or(current.enabled),
            };
            self.insert(&method, &o.route, updated)?;
            seen.push((method, o.route));
        }
        Ok(self)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideFile {
    #[serde(default)]
    policy: Vec<Override>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Override {
    method: String,
    route: String,
    max_tokens: Option<f64>,
    refill_rate: Option<f64>,
    scope: Option<Scope>,
    cost: Option<u32>,
    enabled: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes::builtin_policies;

    #[test]
    fn builtin_policies_example_holds() {
        assert!(
            builtin_policies().any(|endpoint| endpoint == ("POST", "/api/v1/sessions", AUTH_LOGIN))
        );
        // The health checks have a policy, off by default: probes poll them.
        for health in ["/health", "/health/live", "/health/ready"] {
            assert!(
                builtin_policies().any(|endpoint| endpoint == ("GET", health, HEALTH_CHECK)),
                "{health}"
            );
        }
        let health = PolicyTable::builtin()
            .get("GET", "/health")
            .copied()
            .expect("a policy");
        assert_eq!((health.enabled, health.scope), (false, Scope::Ip));
    }

    #[test]
    fn builtin_table_is_complete_and_valid() {
        let t = PolicyTable::builtin();
        assert_eq!(t.len(), builtin_policies().count());
        for (m, r, p) in builtin_policies() {
            assert!(p.bucket().is_ok(), "{m} {r}");
            assert_eq!(t.active(m, r).is_some(), p.enabled, "{m} {r}");
        }
        let p = t.get("post", "/api/v1/sessions").unwrap();
        assert_eq!(*p, AUTH_LOGIN);
        assert_eq!(
            t.get("GET", "/api/v1/imports/formats").unwrap().scope,
            Scope::Ip
        );
        assert_eq!(
            t.get("POST", "/api/v1/accounts/{id}/holdings/syncs")
                .unwrap()
                .scope,
            Scope::UserAccount
        );
        assert!(t.get("GET", "/health").is_some_and(|p| !p.enabled));
        assert!(t.active("GET", "/health/ready").is_none());
        assert!(t.get("GET", "/api/v1/users").is_none());
        assert!(
            PolicyTable::disabled()
                .active("POST", "/api/v1/sessions")
                .is_none()
        );
    }

    #[test]
    fn partial_override_keeps_other_fields() {
        let t = PolicyTable::builtin()
            .with_overrides_toml(
                r#"
                [[policy]]
                method = "post"
                route = "/api/v1/users"
                refill_rate = 0.5
                cost = 2

                [[policy]]
                method = "GET"
                route = "/api/v1/accounts"
                enabled = false

                [[policy]]
                method = "GET"
                route = "/api/v1/holdings"
                scope = "GLOBAL"
                max_tokens = 1000
                "#,
            )
            .unwrap();
        let p = t.get("POST", "/api/v1/users").unwrap();
        assert_eq!(
            *p,
            Policy {
                max_tokens: 3.0,
                refill_rate: 0.5,
                scope: Scope::Ip,
                cost: 2,
                enabled: true
            }
        );
        assert!(t.get("GET", "/api/v1/accounts").is_some());
        assert!(t.active("GET", "/api/v1/accounts").is_none());
        let h = t.get("GET", "/api/v1/holdings").unwrap();
        assert_eq!(
            (h.scope, h.max_tokens, h.refill_rate),
            (Scope::Global, 1000.0, 100.0)
        );
        assert_eq!(t.len(), builtin_policies().count());
    }

    #[test]
    fn health_checks_are_limited_only_once_enabled() {
        let t = PolicyTable::builtin()
            .with_overrides_toml(
                r#"
                [[policy]]
                method = "GET"
                route = "/health"
                enabled = true
                max_tokens = 2
                "#,
            )
            .unwrap();
        let (policy, _) = t.active("GET", "/health").expect("enabled");
        assert_eq!(
            (policy.max_tokens, policy.refill_rate, policy.scope),
            (2.0, 100.0, Scope::Ip)
        );
        assert!(
            t.active("GET", "/health/ready").is_none(),
            "only the one named"
        );
    }

    #[test]
    fn empty_override_file_changes_nothing() {
        let t = PolicyTable::builtin().with_overrides_toml("").unwrap();
        assert_eq!(t.len(), builtin_policies().count());
    }

    #[test]
    fn override_errors_name_the_problem() {
        let err = |s: &str| PolicyTable::builtin().with_overrides_toml(s).unwrap_err();

        let e = err("[[policy]]\nmethod = \"GET\"\nroute = \"/api/v1/nope\"\n");
        assert!(
            matches!(&e, PolicyError::UnknownRoute { endpoint } if endpoint == "GET /api/v1/nope")
        );
        assert!(e.to_string().contains("GET /api/v1/nope"), "{e}");

        let e = err("[[policy]]\nmethod = \"POST\"\nroute = \"/health\"\n");
        assert!(matches!(e, PolicyError::UnknownRoute { .. }));

        let e = err(
            "[[policy]]\nmethod = \"POST\"\nroute = \"/api/v1/sessions\"\ncost = 1\n\
             [[policy]]\nmethod = \"post\"\nroute = \"/api/v1/sessions\"\ncost = 2\n",
        );
        assert!(
            matches!(&e, PolicyError::Duplicate { endpoint } if endpoint == "POST /api/v1/sessions")
        );

        let e =
            err("[[policy]]\nmethod = \"POST\"\nroute = \"/api/v1/sessions\"\nrefill_rate = 0\n");
        assert!(
            matches!(&e, PolicyError::Invalid { endpoint, .. } if endpoint == "POST /api/v1/sessions"),
            "{e}"
        );
        assert!(e.to_string().contains("refill_rate"), "{e}");

        let e = err("[[policy]]\nmethod = \"POST\"\nroute = \"/api/v1/sessions\"\ncost = 6\n");
        assert!(matches!(e, PolicyError::Invalid { .. }), "{e}");

        let e = err("[[policy]]\nmethod = \"POST\"\nroute = \"/api/v1/sessions\"\nburst = 6\n");
        assert!(
            matches!(&e, PolicyError::Toml(m) if m.contains("burst")),
            "{e}"
        );

        let e = err(
            "[[policy]]\nmethod = \"POST\"\nroute = \"/api/v1/sessions\"\nscope = \"planet\"\n",
        );
        assert!(matches!(e, PolicyError::Toml(_)), "{e}");

        let e = err("[[policy]]\nroute = \"/api/v1/sessions\"\n");
        assert!(
            matches!(&e, PolicyError::Toml(m) if m.contains("method")),
            "{e}"
        );

        let e = err("this is not toml");
        assert!(matches!(e, PolicyError::Toml(_)));

        let e = err("[[policy]]\nmethod = \"POST\"\nroute = \"/api/v1/sessions\"\ncost = -1\n");
        assert!(matches!(e, PolicyError::Toml(_)));
    }

    #[test]
    fn scope_names() {
        assert_eq!(Scope::UserProvider.as_str(), "USER_PROVIDER");
        assert_eq!(Scope::UserAccount.key_str(), "user_account");
        assert_eq!(Scope::Ip.to_string(), "IP");
    }
}
