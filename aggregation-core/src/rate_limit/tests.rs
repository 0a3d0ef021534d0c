//! Tests of the limiter, and property tests of the bucket and the in-memory store against a
//! model written from the spec's text.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;

use super::bucket::BucketState;
use super::*;

// ---------------------------------------------------------------------------------------
// Model: the spec's sentences, one by one.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
struct ModelOutcome {
    allowed: bool,
    remaining: u64,
    retry_after: f64,
    reset_after: f64,
}

#[derive(Debug, Default)]
struct Model {
    /// (tokens, time of last check)
    state: Option<(f64, f64)>,
}

impl Model {
    fn step(&mut self, now: f64, max_tokens: f64, refill_rate: f64, cost: f64) -> ModelOutcome {
        // "Bucket state expires after ceil(max_tokens / refill_rate * 60) + 60 seconds."
        let ttl = (max_tokens / refill_rate * 60.0).ceil() + 60.0;
        if let Some((_, last)) = self.state
            && now - last >= ttl
        {
            self.state = None;
        }
        // "A bucket starts full. Tokens added since the last check equal elapsed seconds
        // times refill_rate divided by 60, capped at max_tokens."
        let tokens = match self.state {
            None => max_tokens,
            Some((tokens, last)) => (tokens + (now - last) * refill_rate / 60.0).min(max_tokens),
        };
        // "A request is allowed when tokens >= cost, and then cost is consumed."
        let allowed = tokens >= cost;
        let left = if allowed { tokens - cost } else { tokens };
        self.state = Some((left, now));
        // "When denied, retry_after = (cost - tokens) divided by (refill_rate / 60) seconds."
        let retry_after = if allowed {
            0.0
        } else {
            (cost - tokens) / (refill_rate / 60.0)
        };
        ModelOutcome {
            allowed,
            // "Remaining tokens are reported rounded down."
            remaining: left.floor() as u64,
            retry_after,
            // Seconds until full again.
            reset_after: (max_tokens - left) / (refill_rate / 60.0),
        }
    }
}

fn assert_matches_model(d: &Decision, m: &ModelOutcome, max_tokens: f64, step: usize) {
    assert_eq!(d.allowed, m.allowed, "step {step}: allowed");
    assert_eq!(d.remaining, m.remaining, "step {step}: remaining");
    assert_eq!(d.limit, max_tokens.floor() as u64, "step {step}: limit");
    let tol = 1e-6 * m.retry_after.abs().max(1.0);
    assert!(
        (d.retry_after_secs - m.retry_after).abs() <= tol,
        "step {step}: retry_after {} vs model {}",
        d.retry_after_secs,
        m.retry_after
    );
    // reset is ceil(model): allow for the rounding of the two division forms at an integer.
    let reset = d.reset_after_secs as f64;
    assert!(
        reset >= m.reset_after - 1e-6 && reset < m.reset_after + 1.0 + 1e-6,
        "step {step}: reset_after {reset} vs model {}",
        m.reset_after
    );
    if !d.allowed {
        assert_eq!(
            d.retry_after_header(),
            (m.retry_after - 1e-9).ceil().max(1.0) as u64
        );
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    max_tokens: f64,
    refill_rate: f64,
    /// (seconds since the previous request, cost)
    requests: Vec<(f64, u32)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let max_tokens = prop_oneof![(1u32..=20).prop_map(f64::from), 1.0f64..100.0];
    let refill_rate = prop_oneof![(1u32..=120).prop_map(f64::from), 0.01f64..500.0];
    let gap = prop_oneof![
        3 => Just(0.0),
        4 => 0.0f64..5.0,
        2 => 0.0f64..120.0,
        1 => 0.0f64..100_000.0,
    ];
    (
        max_tokens,
        refill_rate,
        prop::collection::vec((gap, 1u32..=6), 1..80),
    )
        .prop_map(|(max_tokens, refill_rate, requests)| Scenario {
            max_tokens,
            refill_rate,
            requests,
        })
}

fn cost_for(s: &Scenario, raw: u32) -> u32 {
    raw.min(s.max_tokens.floor() as u32).max(1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn bucket_matches_the_spec_model(s in scenario(), start in 0.0f64..1e9) {
        let mut model = Model::default();
        let mut state = None;
        let mut now = start;
        for (i, &(gap, raw_cost)) in s.requests.iter().enumerate() {
            now += gap;
            let cost = cost_for(&s, raw_cost);
            let policy = BucketPolicy::new(s.max_tokens, s.refill_rate, cost).unwrap();
            let expected = model.step(now, s.max_tokens, s.refill_rate, f64::from(cost));
            // The pure function has no expiry: the store forgets; emulate it as the store does.
            let alive = state.filter(|st: &BucketState| now < st.updated_at + policy.ttl_secs() as f64);
            let (next, decision) = bucket::check(alive, now, &policy);
            assert_matches_model(&decision, &expected, s.max_tokens, i);
            state = Some(next);
        }
    }

    #[test]
    fn in_memory_store_matches_the_spec_model(s in scenario(), start in 0.0f64..1e9) {
        let clock = ManualClock::new(start);
        let store = InMemoryRateLimitStore::with_clock(clock.clock());
        let mut model = Model::default();
        let mut other = Model::default();
        for (i, &(gap, raw_cost)) in s.requests.iter().enumerate() {
            clock.advance(gap);
            let now = clock.now();
            let cost = cost_for(&s, raw_cost);
            let policy = BucketPolicy::new(s.max_tokens, s.refill_rate, cost).unwrap();
            let expected = model.step(now, s.max_tokens, s.refill_rate, f64::from(cost));
            let decision = store.check_now("rl:ip:192.0.2.1:POST:/x", &policy);
            assert_matches_model(&decision, &expected, s.max_tokens, i);
            // A second key every third request stays independent.
            if i % 3 == 0 {
                let expected = other.step(now, s.max_tokens, s.refill_rate, 1.0);
                let policy = policy.with_cost(1).unwrap();
                let decision = store.check_now("rl:ip:192.0.2.2:POST:/x", &policy);
                assert_matches_model(&decision, &expected, s.max_tokens, i);
            }
        }
    }

    #[test]
    fn cidr_contains_agrees_with_prefix_comparison(a in any::<u32>(), b in any::<u32>(), len in 0u8..=32) {
        let cidr = parse_cidr(&format!("{}/{len}", std::net::Ipv4Addr::from(a))).unwrap();
        let shift = 32 - u32::from(len);
        let same = u64::from(a) >> shift == u64::from(b) >> shift;
        prop_assert_eq!(cidr.contains(&IpAddr::from(std::net::Ipv4Addr::from(b))), same);
    }

    #[test]
    fn client_ip_never_returns_an_address_not_in_input(
        peer in any::<[u8; 4]>(),
        header in "[0-9., a-z:]{0,40}",
        trust_all in any::<bool>(),
    ) {
        let peer = IpAddr::from(peer);
        let trusted = if trust_all { parse_cidr_list("0.0.0.0/0").unwrap() } else { Vec::new() };
        let ip = client_ip::client_ip(Some(peer), &[header.as_str()], &trusted).unwrap();
        if trust_all {
            let from_header = header.split(',').any(|e| {
                let e = e.trim();
                let parsed = e
                    .parse::<IpAddr>()
                    .ok()
                    .or_else(|| e.parse::<std::net::SocketAddr>().ok().map(|s| s.ip()))
                    .or_else(|| e.strip_prefix('[')?.strip_suffix(']')?.parse().ok());
                parsed.map(|a| a.to_canonical()) == Some(ip)
            });
            prop_assert!(ip == peer || from_header);
        } else {
            prop_assert_eq!(ip, peer);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The limiter.
// ---------------------------------------------------------------------------------------

/// Records the keys it is asked about and answers from an in-memory store.
struct KeyRecorder {
    inner: InMemoryRateLimitStore,
    keys: Mutex<Vec<String>>,
}

#[async_trait]
impl RateLimitStore for KeyRecorder {
    async fn check(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        self.keys.lock().unwrap().push(key.to_owned());
        self.inner.check(key, policy).await
    }
}

struct Broken;

#[async_trait]
impl RateLimitStore for Broken {
    async fn check(&self, _: &str, _: &BucketPolicy) -> Result<Decision, RateLimitStoreError> {
        Err(RateLimitStoreError::Backend("connection refused".into()))
    }
}

fn limiter_with(store: Arc<dyn RateLimitStore>) -> (RateLimiter, Arc<RecordingEvents>) {
    let events = Arc::new(RecordingEvents::new());
    (
        RateLimiter::new(PolicyTable::builtin(), store, events.clone()),
        events,
    )
}

fn ip_identity(ip: &str) -> RequestIdentity {
    RequestIdentity {
        client_ip: Some(ip.parse().unwrap()),
        ..RequestIdentity::default()
    }
}

#[tokio::test]
async fn sixth_login_is_denied_and_events_are_emitted() {
    let clock = ManualClock::new(0.0);
    let (limiter, events) =
        limiter_with(Arc::new(InMemoryRateLimitStore::with_clock(clock.clock())));
    let who = ip_identity("203.0.113.9");
    for i in 0..5 {
        let d = limiter
            .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
            .await
            .unwrap();
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining), (5, 4 - i));
    }
    let d = limiter
        .check("POST", "/api/v1/sessions", "/api/v1/sessions?x=1", &who)
        .await
        .unwrap();
    assert!(!d.allowed);
    assert_eq!(d.retry_after_secs, 12.0);
    assert_eq!(d.retry_after_header(), 12);
    assert_eq!(d.reset_after_secs, 60);

    // Another IP has its own bucket.
    let other = limiter
        .check(
            "POST",
            "/api/v1/sessions",
            "/api/v1/sessions",
            &ip_identity("203.0.113.10"),
        )
        .await
        .unwrap();
    assert!(other.allowed);

    let events = events.take();
    assert_eq!(events.len(), 14);
    assert_eq!(
        events[0],
        RateLimitEvent::Attempted {
            endpoint: "POST /api/v1/sessions".into(),
            identifier: "203.0.113.9".into(),
            scope: "IP".into(),
            cost: 1,
        }
    );
    assert!(matches!(
        &events[1],
        RateLimitEvent::Allowed {
            remaining_tokens: 4,
            ..
        }
    ));
    match &events[11] {
        RateLimitEvent::Denied {
            retry_after,
            execution_time_ms,
            endpoint,
            ..
        } => {
            assert_eq!(*retry_after, 12.0);
            assert!(*execution_time_ms >= 0.0);
            assert_eq!(endpoint, "POST /api/v1/sessions");
        }
        e => panic!("expected a denial, got {e:?}"),
    }
    // 12 s later one more login is allowed.
    clock.advance(12.0);
    assert!(
        limiter
            .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn keys_follow_scope_identifier_method_and_path() {
    let store = Arc::new(KeyRecorder {
        inner: InMemoryRateLimitStore::new(),
        keys: Mutex::new(Vec::new()),
    });
    let (limiter, events) = limiter_with(store.clone());
    let anon = ip_identity("2001:db8::1");
    let user = RequestIdentity {
        user_id: Some("u-1".into()),
        ..anon.clone()
    };
    // Another spelling of a UUID is keyed in canonical form.
    let provider = "0192F3C4-0000-7000-8000-0000000000C1";
    let provider_path = format!("/api/v1/providers/urn:uuid:{provider}/sync");
    let user_provider = RequestIdentity {
        provider_or_account_id: Some(provider.into()),
        ..user.clone()
    };

    // Ids that are not UUIDs leave the template's placeholder.
    let path = "/api/v1/accounts/a1/transactions?limit=5";
    let tpl = "/api/v1/accounts/{id}/transactions";
    limiter.check("get", tpl, path, &user).await.unwrap();
    limiter.check("GET", tpl, path, &anon).await.unwrap(); // USER falls back to IP
    limiter
        .check(
            "POST",
            "/api/v1/providers/{id}/sync",
            &provider_path,
            &user_provider,
        )
        .await
        .unwrap();
    limiter
        .check(
            "POST",
            "/api/v1/providers/{id}/sync",
            "/api/v1/providers/p:9/sync",
            &anon,
        )
        .await
        .unwrap();
    // The bulk syncs name the connection in the body; the service reads it from there.
    let body = br#"{"connection_id": "0192F3C4-0000-7000-8000-0000000000C2"}"#;
    let bulk = RequestIdentity {
        provider_or_account_id: body_connection_id(body),
        ..user.clone()
    };
    limiter
        .check(
            "POST",
            "/api/v1/accounts/syncs",
            "/api/v1/accounts/syncs",
            &bulk,
        )
        .await
        .unwrap();
    // Without a readable connection id: the user alone.
    limiter
        .check(
            "POST",
            "/api/v1/accounts/syncs",
            "/api/v1/accounts/syncs",
            &user,
        )
        .await
        .unwrap();
    let holdings = RequestIdentity {
        provider_or_account_id: Some("acc-7".into()),
        ..user.clone()
    };
    limiter
        .check(
            "POST",
            "/api/v1/accounts/{id}/holdings/syncs",
            "/api/v1/accounts/acc-7/holdings/syncs",
            &holdings,
        )
        .await
        .unwrap();
    limiter
        .check(
            "GET",
            "/api/v1/imports/formats",
            "/api/v1/imports/formats",
            &user,
        )
        .await
        .unwrap();
    limiter
        .check(
            "POST",
            "/api/v1/sessions",
            "/api/v1/sessions",
            &RequestIdentity::default(),
        )
        .await
        .unwrap();

    assert_eq!(
        *store.keys.lock().unwrap(),
        [
            "rl:user:u-1:GET:/api/v1/accounts/{id}/transactions",
            "rl:ip:2001:db8::/64:GET:/api/v1/accounts/{id}/transactions",
            "rl:user_provider:u-1:0192f3c4-0000-7000-8000-0000000000c1:POST:/api/v1/providers/0192f3c4-0000-7000-8000-0000000000c1/sync",
            "rl:ip:2001:db8::/64:POST:/api/v1/providers/{id}/sync",
            "rl:user_provider:u-1:0192f3c4-0000-7000-8000-0000000000c2:POST:/api/v1/accounts/syncs",
            "rl:user_provider:u-1:POST:/api/v1/accounts/syncs",
            "rl:user_account:u-1:POST:/api/v1/accounts/{id}/holdings/syncs",
            "rl:ip:2001:db8::/64:GET:/api/v1/imports/formats",
            "rl:ip:unknown:POST:/api/v1/sessions",
        ]
    );
    let scopes: Vec<String> = events
        .take()
        .into_iter()
        .filter_map(|e| match e {
            RateLimitEvent::Attempted { scope, .. } => Some(scope),
            _ => None,
        })
        .collect();
    assert_eq!(
        scopes,
        [
            "USER",
            "IP",
            "USER_PROVIDER",
            "IP",
            "USER_PROVIDER",
            "USER_PROVIDER",
            "USER_ACCOUNT",
            "IP",
            "IP"
        ]
    );
}

#[test]
fn global_scope_and_key_helpers() {
    let who = ip_identity("::ffff:192.0.2.1");
    assert_eq!(
        resolve_identifier(Scope::Global, &who),
        (Scope::Global, "global".into())
    );
    assert_eq!(
        resolve_identifier(Scope::Ip, &who),
        (Scope::Ip, "192.0.2.1".into())
    );
    let empty_user = RequestIdentity {
        user_id: Some(String::new()),
        ..who.clone()
    };
    assert_eq!(resolve_identifier(Scope::User, &empty_user).0, Scope::Ip);
    assert_eq!(
        bucket_key(Scope::Global, "global", "delete", "/a/b#frag"),
        "rl:global:global:DELETE:/a/b"
    );
    assert_eq!(escape_key_part("a%b:c"), "a%25b%3Ac");
    let escaped_user = RequestIdentity {
        user_id: Some("u:1".into()),
        provider_or_account_id: Some("0192F3C40000700080000000000000C1".into()),
        ..who.clone()
    };
    assert_eq!(
        resolve_identifier(Scope::UserProvider, &escaped_user),
        (
            Scope::UserProvider,
            "u%3A1:0192f3c4-0000-7000-8000-0000000000c1".into()
        )
    );
    let junk = RequestIdentity {
        provider_or_account_id: Some("p:9".into()),
        ..escaped_user.clone()
    };
    assert_eq!(
        resolve_identifier(Scope::UserAccount, &junk),
        (Scope::UserAccount, "u%3A1".into())
    );
}

#[test]
fn ipv6_clients_are_keyed_by_their_64_prefix() {
    for (address, identifier) in [
        ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::1", "::/64"),
        ("fe80::1:2:3:4", "fe80::/64"),
        // IPv4-mapped addresses are IPv4 clients.
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("198.51.100.7", "198.51.100.7"),
    ] {
        assert_eq!(
            resolve_identifier(Scope::Ip, &ip_identity(address)),
            (Scope::Ip, identifier.to_owned()),
            "{address}"
        );
    }
    // A user without a verified token falls back to the same prefix.
    assert_eq!(
        resolve_identifier(Scope::User, &ip_identity("2001:db8:1:2::9")).1,
        "2001:db8:1:2::/64"
    );
}

#[test]
fn keyed_paths_are_canonical() {
    let template = "/api/v1/accounts/{id}";
    let id = "0192f3c4-0000-7000-8000-0000000000c1";
    for spelling in [
        id.to_owned(),
        id.to_uppercase(),
        id.replace('-', ""),
        format!("urn:uuid:{id}"),
        format!("{{{id}}}"),
    ] {
        assert_eq!(
            keyed_path(template, &format!("/api/v1/accounts/{spelling}?x=1#f")),
            format!("/api/v1/accounts/{id}"),
            "{spelling}"
        );
    }
    for junk in [
        "x",
        "",
        "p:9",
        "0192f3c4",
        "%30192f3c4-0000-7000-8000-0000000000c1",
    ] {
        assert_eq!(
            keyed_path(template, &format!("/api/v1/accounts/{junk}")),
            template
        );
    }
    // Segments that do not line up with the template: the template.
    assert_eq!(
        keyed_path(template, &format!("/api/v1/accounts/{id}/x")),
        template
    );
    assert_eq!(keyed_path(template, "/"), template);
    assert_eq!(
        keyed_path(
            "/api/v1/admin/users/{user_id}/rotations",
            &format!("/api/v1/admin/users/{}/rotations", id.to_uppercase())
        ),
        format!("/api/v1/admin/users/{id}/rotations")
    );
    // Idempotent; static templates are kept as they are.
    let keyed = keyed_path(template, &format!("/api/v1/accounts/{id}"));
    assert_eq!(keyed_path(template, &keyed), keyed);
    assert_eq!(
        keyed_path("/api/v1/sessions", "/api/v1/SESSIONS"),
        "/api/v1/sessions"
    );
}

#[tokio::test]
async fn junk_ids_share_one_bucket() {
    let store = Arc::new(InMemoryRateLimitStore::new());
    let table = PolicyTable::builtin()
        .with_overrides_toml(
            "[[policy]]\nmethod='GET'\nroute='/api/v1/accounts/{id}'\nmax_tokens=3\nrefill_rate=3\nscope='user_account'\n",
        )
        .unwrap();
    let limiter = RateLimiter::new(table, store.clone(), Arc::new(NoopEvents));
    let user = RequestIdentity {
        user_id: Some("u-1".into()),
        ..ip_identity("192.0.2.1")
    };
    let mut denied = 0;
    for i in 0..4_000 {
        let junk = format!("junk-{i}");
        let who = RequestIdentity {
            provider_or_account_id: Some(junk.clone()),
            ..user.clone()
        };
        let d = limiter
            .check(
                "GET",
                "/api/v1/accounts/{id}",
                &format!("/api/v1/accounts/{junk}"),
                &who,
            )
            .await
            .unwrap();
        denied += usize::from(!d.allowed);
    }
    assert_eq!(store.len(), 1, "one bucket for every junk id");
    assert_eq!(denied, 4_000 - 3);
    // Every spelling of one UUID shares a second bucket.
    let id = "0192f3c4-0000-7000-8000-0000000000c1";
    for spelling in [
        id.to_owned(),
        id.to_uppercase(),
        id.replace('-', ""),
        format!("urn:uuid:{id}"),
    ] {
        let who = RequestIdentity {
            provider_or_account_id: Some(spelling.clone()),
            ..user.clone()
        };
        limiter
            .check(
                "GET",
                "/api/v1/accounts/{id}",
                &format!("/api/v1/accounts/{spelling}"),
                &who,
            )
            .await
            .unwrap();
    }
    assert_eq!(store.len(), 2);
}

#[tokio::test]
async fn unlimited_endpoints_return_none() {
    let (limiter, events) = limiter_with(Arc::new(InMemoryRateLimitStore::new()));
    let who = ip_identity("192.0.2.1");
    assert!(
        limiter
            .check("GET", "/health", "/health", &who)
            .await
            .is_none()
    );
    assert!(
        limiter
            .check("PUT", "/api/v1/sessions", "/api/v1/sessions", &who)
            .await
            .is_none()
    );
    assert!(events.take().is_empty());

    let off = RateLimiter::new(
        PolicyTable::disabled(),
        Arc::new(InMemoryRateLimitStore::new()),
        Arc::new(NoopEvents),
    );
    assert!(
        off.check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
            .await
            .is_none()
    );

    let table = PolicyTable::builtin()
        .with_overrides_toml("[[policy]]\nmethod='POST'\nroute='/api/v1/sessions'\nenabled=false\n")
        .unwrap();
    let limiter = RateLimiter::new(
        table,
        Arc::new(InMemoryRateLimitStore::new()),
        Arc::new(NoopEvents),
    );
    for _ in 0..10 {
        assert!(
            limiter
                .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
                .await
                .is_none()
        );
    }
}

#[tokio::test]
async fn store_errors_fail_open() {
    let (limiter, events) = limiter_with(Arc::new(Broken));
    let who = ip_identity("192.0.2.1");
    for _ in 0..10 {
        let d = limiter
            .check("POST", "/api/v1/users", "/api/v1/users", &who)
            .await
            .unwrap();
        assert!(d.allowed);
        assert_eq!((d.limit, d.remaining, d.reset_after_secs), (3, 3, 0));
    }
    let events = events.take();
    assert_eq!(events.len(), 20);
    assert!(matches!(
        &events[1],
        RateLimitEvent::Allowed {
            remaining_tokens: 3,
            ..
        }
    ));
}

/// An in-memory store that can be taken down and brought back.
#[derive(Default)]
struct Switchable {
    inner: InMemoryRateLimitStore,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl RateLimitStore for Switchable {
    async fn check(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(RateLimitStoreError::Backend("connection refused".into()));
        }
        self.inner.check(key, policy).await
    }
}

#[tokio::test]
async fn an_outage_writes_the_fail_open_record_once_and_one_line_when_it_ends() {
    let captured = crate::testing::CapturedLog::default();
    let _guard = tracing::subscriber::set_default(captured.subscriber(tracing::Level::DEBUG));
    let store = Arc::new(Switchable::default());
    let (limiter, _events) = limiter_with(store.clone());
    let who = ip_identity("192.0.2.44");
    let check = || limiter.check("POST", "/api/v1/users", "/api/v1/users", &who);

    check().await.unwrap();
    assert!(captured.lines().is_empty(), "{:#?}", captured.lines());

    store.down.store(true, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..20 {
        assert!(check().await.unwrap().allowed);
    }
    let lines = captured.lines();
    // The first failure in full; the other nineteen, within 10 s, add nothing.
    assert_eq!(lines.len(), 1, "{lines:#?}");
    for expected in [
        "ERROR",
        "endpoint=POST /api/v1/users",
        "identifier=192.0.2.44",
        "error=rate-limit store error: connection refused",
        "layer=\"rate_limit\"",
        "result=\"fail_open\"",
    ] {
        assert!(lines[0].contains(expected), "{expected} in {}", lines[0]);
    }

    store.down.store(false, std::sync::atomic::Ordering::SeqCst);
    check().await.unwrap();
    check().await.unwrap();
    let lines = captured.lines();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[1].contains("rate-limit store outage ended"),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("20 calls failed"), "{}", lines[1]);
}

#[test]
fn events_serialize_with_spec_names() {
    let e = RateLimitEvent::Denied {
        endpoint: "POST /api/v1/users".into(),
        identifier: "192.0.2.1".into(),
        scope: Scope::Ip.as_str().into(),
        retry_after: 20.0,
        execution_time_ms: 0.25,
    };
    let v = toml::Value::try_from(&e).unwrap();
    let t = v.as_table().unwrap();
    assert_eq!(t["event"].as_str(), Some("RateLimitCheckDenied"));
    assert_eq!(e.name(), "RateLimitCheckDenied");
    assert_eq!(t["endpoint"].as_str(), Some("POST /api/v1/users"));
    assert_eq!(t["identifier"].as_str(), Some("192.0.2.1"));
    assert_eq!(t["scope"].as_str(), Some("IP"));
    assert_eq!(t["retry_after"].as_float(), Some(20.0));
    assert_eq!(t["execution_time_ms"].as_float(), Some(0.25));

    let a = RateLimitEvent::Allowed {
        endpoint: "GET /api/v1/accounts".into(),
        identifier: "u".into(),
        scope: "USER".into(),
        remaining_tokens: 99,
        execution_time_ms: 1.0,
    };
    let v = toml::Value::try_from(&a).unwrap();
    assert_eq!(v["event"].as_str(), Some("RateLimitCheckAllowed"));
    assert_eq!(v["remaining_tokens"].as_integer(), Some(99));
    let v = toml::Value::try_from(RateLimitEvent::Attempted {
        endpoint: String::new(),
        identifier: String::new(),
        scope: String::new(),
        cost: 2,
    })
    .unwrap();
    assert_eq!(v["event"].as_str(), Some("RateLimitCheckAttempted"));
    assert_eq!(v["cost"].as_integer(), Some(2));
    // Scope serializes with the spec's names.
    assert_eq!(
        toml::Value::try_from(Scope::UserProvider).unwrap().as_str(),
        Some("USER_PROVIDER")
    );
}

#[test]
fn manual_clock() {
    let c = ManualClock::new(1.5);
    let f = c.clock();
    c.advance(2.0);
    assert_eq!(f(), 3.5);
    c.set(10.0);
    assert_eq!(c.now(), 10.0);
    let m = monotonic_clock();
    let (a, b) = (m(), m());
    assert!(b >= a);
    assert!(wall_clock()() > 1.6e9);
}

#[test]
fn every_route_and_method_has_a_builtin_policy() {
    // Not limited by default on purpose (load balancers and probes poll them), but they have
    // a policy an override file can enable.
    let unlimited = [
        ("GET", "/health"),
        ("GET", "/health/live"),
        ("GET", "/health/ready"),
    ];
    let table = PolicyTable::builtin();
    let mut missing = Vec::new();
    let mut routed = Vec::new();
    for route in crate::api::routes() {
        let endpoint = (route.method().as_str(), route.template());
        routed.push(endpoint);
        let limited = table.active(endpoint.0, endpoint.1).is_some();
        if table.get(endpoint.0, endpoint.1).is_none() || limited == unlimited.contains(&endpoint) {
            missing.push(format!("{} {}", endpoint.0, endpoint.1));
        }
    }
    assert!(
        missing.is_empty(),
        "routes without a policy, or limited by default when they should not be: {missing:?}"
    );
    // And no policy names an endpoint that does not exist (a renamed route keeps its limit).
    let stale: Vec<String> = crate::api::routes::builtin_policies()
        .filter(|(method, route, _)| !routed.contains(&(*method, *route)))
        .map(|(method, route, _)| format!("{method} {route}"))
        .collect();
    assert!(stale.is_empty(), "policies without a route: {stale:?}");
    for (method, route) in unlimited {
        assert!(routed.contains(&(method, route)));
        let policy = table.get(method, route).expect("a policy");
        assert!(!policy.enabled, "{method} {route}");
    }
}

#[test]
fn per_connection_scopes_can_find_their_id() {
    use crate::api::TargetId;
    // A USER_PROVIDER / USER_ACCOUNT policy needs the id from the path or, for the bulk syncs,
    // from the body; otherwise every connection of a user would share one bucket.
    for route in crate::api::routes() {
        let method = route.method();
        let Some(policy) = PolicyTable::builtin()
            .get(method.as_str(), route.template())
            .copied()
        else {
            continue;
        };
        if matches!(policy.scope, Scope::UserProvider | Scope::UserAccount) {
            let in_body = route
                .rate_limit()
                .is_some_and(|limit| limit.target == TargetId::BodyConnectionId);
            assert!(
                route.template().contains("{id}") || in_body,
                "{method} {} cannot name its connection or account",
                route.template()
            );
        }
    }
}

#[test]
fn connection_ids_are_read_from_json_objects_only() {
    let id = "0192f3c4-0000-7000-8000-0000000000c2";
    for body in [
        format!(r#"{{"connection_id":"{id}"}}"#),
        format!(
            r#"{{"force":true,"connection_id":"{}"}}"#,
            id.to_uppercase()
        ),
        format!(r#"{{"connection_id":"{{{id}}}"}}"#),
        format!(r#"{{"connection_id":"{}"}}"#, id.replace('-', "")),
    ] {
        assert_eq!(
            body_connection_id(body.as_bytes()).as_deref(),
            Some(id),
            "{body}"
        );
    }
    for body in [
        "",
        "null",
        "[]",
        r#""0192f3c4-0000-7000-8000-0000000000c2""#,
        "{}",
        r#"{"connection_id":null}"#,
        r#"{"connection_id":42}"#,
        r#"{"connection_id":"p:9"}"#,
        r#"{"connection_id":"0192f3c4-0000-7000-8000-0000000000c2""#,
    ] {
        assert_eq!(body_connection_id(body.as_bytes()), None, "{body}");
    }
}

#[test]
fn module_example_holds() {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(async {
            let limiter = RateLimiter::new(
                PolicyTable::builtin(),
                Arc::new(InMemoryRateLimitStore::new()),
                Arc::new(TracingEvents),
            );
            let who = RequestIdentity {
                client_ip: Some("203.0.113.9".parse().unwrap()),
                ..Default::default()
            };
            for _ in 0..5 {
                let d = limiter
                    .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
                    .await
                    .unwrap();
                assert!(d.allowed);
            }
            let sixth = limiter
                .check("POST", "/api/v1/sessions", "/api/v1/sessions", &who)
                .await
                .unwrap();
            assert!(!sixth.allowed);
            assert_eq!(sixth.retry_after_header(), 12);
            // Not limited: no policy.
            assert!(
                limiter
                    .check("GET", "/health", "/health", &who)
                    .await
                    .is_none()
            );
        });
}

#[test]
fn body_connection_id_example_holds() {
    let body = br#"{"connection_id": "0192F3C4-0000-7000-8000-00000000000A", "force": true}"#;
    assert_eq!(
        body_connection_id(body).as_deref(),
        Some("0192f3c4-0000-7000-8000-00000000000a")
    );
    assert_eq!(body_connection_id(br#"{"connection_id": 7}"#), None);
    assert_eq!(body_connection_id(b"[]"), None);
}

#[test]
fn canonical_id_example_holds() {
    let id = "0192f3c4-0000-7000-8000-00000000000a";
    for spelling in [
        "0192F3C4-0000-7000-8000-00000000000A",
        "0192f3c400007000800000000000000a",
        "urn:uuid:0192f3c4-0000-7000-8000-00000000000a",
        "{0192f3c4-0000-7000-8000-00000000000a}",
    ] {
        assert_eq!(canonical_id(spelling).as_deref(), Some(id));
    }
    assert_eq!(canonical_id("p:9"), None);
}

#[test]
fn keyed_path_example_holds() {
    let template = "/api/v1/accounts/{id}/transactions";
    assert_eq!(
        keyed_path(
            template,
            "/api/v1/accounts/urn:uuid:0192F3C4-0000-7000-8000-00000000000A/transactions?limit=5"
        ),
        "/api/v1/accounts/0192f3c4-0000-7000-8000-00000000000a/transactions"
    );
    assert_eq!(
        keyed_path(template, "/api/v1/accounts/junk/transactions"),
        template
    );
    assert_eq!(
        keyed_path("/api/v1/sessions", "/api/v1/sessions"),
        "/api/v1/sessions"
    );
}

#[test]
fn ip_identifier_example_holds() {
    assert_eq!(ip_identifier("203.0.113.9".parse().unwrap()), "203.0.113.9");
    assert_eq!(
        ip_identifier("::ffff:203.0.113.9".parse().unwrap()),
        "203.0.113.9"
    );
    assert_eq!(
        ip_identifier("2001:db8:1:2:aaaa::7".parse().unwrap()),
        "2001:db8:1:2::/64"
    );
}
