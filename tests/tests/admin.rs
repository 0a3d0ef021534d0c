//! Conformance: the admin role, token rotations, the security configuration and the jobs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use aggregation_core::Config;
use aggregation_core::events::DomainEvent;
use aggregation_core::jobs::{Job, JobContext, JobError, JobsError, RunOutcome};
use aggregation_core::store::{
    NewOneTimeToken, NewRefreshToken, NewSession, Role, RotationScope, TokenCheck, TokenPurpose,
    now,
};
use aggregation_tests::{PASSWORD, SharedDatabase, TestApp, conformance, test_config};
use async_trait::async_trait;
use chrono::TimeDelta;
use http::Method;
use serde_json::{Value, json};
use uuid::Uuid;

conformance!(
    config = admin_config;
    admin_endpoints_need_a_token_and_the_role_in_the_store,
    admin_emails_are_matched_case_insensitively,
    admin_role_waits_for_email_verification,
    security_config_has_defaults,
    global_rotation_has_a_grace_period,
    second_rotation_rejects_tokens_two_steps_behind,
    user_rotation_affects_only_that_user,
    user_rotation_after_a_global_rotation_still_invalidates,
    user_rotation_ends_the_grace_of_a_raised_user,
    unknown_or_malformed_user_ids,
    rotation_reasons_are_validated,
    rotations_are_audited,
    jobs_status_reports_real_runs,
    purge_deletes_expired_rows,
    spawned_jobs_run_and_shut_down_cleanly,
);

const ADMIN: &str = "admin@example.com";
const SECURITY_ROTATIONS: &str = "/api/v1/admin/security/rotations";
const SECURITY_CONFIG: &str = "/api/v1/admin/security/config";
const JOBS: &str = "/api/v1/admin/jobs";

/// Admin email in another case than the registrations use; a 1-second grace.
fn admin_config() -> Config {
    test_config()
        .with_admin_emails(vec![" Admin@Example.COM ".to_owned()])
        .with_rotation_grace(Duration::from_secs(1))
}

fn user_rotations(user_id: &str) -> String {
    format!("/api/v1/admin/users/{user_id}/rotations")
}

/// The admin's (id, access token).
async fn admin(app: &TestApp) -> (String, String) {
    let (id, access, _) = app.user(ADMIN).await;
    (id, access)
}

async fn refresh(app: &TestApp, token: &str) -> aggregation_tests::TestResponse {
    app.post("/api/v1/tokens", &json!({"refresh_token": token}), None)
        .await
}

fn refresh_token(body: &Value) -> String {
    body["refresh_token"]
        .as_str()
        .expect("refresh token")
        .to_owned()
}

async fn rotate_global(app: &TestApp, access: &str) -> Value {
    app.post(
        SECURITY_ROTATIONS,
        &json!({"reason": "signing key leaked"}),
        Some(access),
    )
    .await
    .expect(201)
}

async fn admin_endpoints_need_a_token_and_the_role_in_the_store(app: TestApp) {
    let (user_id, access, _) = app.user("mallory@example.com").await;
    let reason = json!({"reason": "because"});
    let target = user_rotations(&user_id);
    let calls: [(Method, &str, Option<&Value>); 4] = [
        (Method::POST, SECURITY_ROTATIONS, Some(&reason)),
        (Method::POST, &target, Some(&reason)),
        (Method::GET, SECURITY_CONFIG, None),
        (Method::GET, JOBS, None),
    ];
    for (method, path, body) in &calls {
        app.call(method.clone(), path, *body, None)
            .await
            .expect_problem(401, "unauthorized");
        app.call(method.clone(), path, *body, Some("not-a-jwt"))
            .await
            .expect_problem(401, "unauthorized");
        app.call(method.clone(), path, *body, Some(&access))
            .await
            .expect_problem(403, "forbidden");
    }
    // The role is read from the store on every request, not from the token's claims.
    let id = Uuid::parse_str(&user_id).expect("uuid");
    assert!(
        app.store
            .grant_role(id, Role::Admin, now())
            .await
            .expect("grant")
    );
    app.get(SECURITY_CONFIG, Some(&access)).await.expect(200);
    app.get(JOBS, Some(&access)).await.expect(200);
}

async fn admin_role_waits_for_email_verification(app: TestApp) {
    let admin_id = app.register(ADMIN).await;
    let id = Uuid::parse_str(&admin_id).expect("uuid");
    // Whoever registers the address first has not proven they own it.
    let roles = app.store.user_roles(id).await.expect("roles");
    assert!(!roles.contains(&Role::Admin));
    assert_eq!(
        app.service.grant_configured_admins().await.expect("grant"),
        0,
        "unverified accounts are skipped at start-up too"
    );
    let token = app.email_token(ADMIN, 1).await;
    app.post(
        "/api/v1/email-verifications",
        &json!({"token": token}),
        None,
    )
    .await
    .expect(201);
    let roles = app.store.user_roles(id).await.expect("roles");
    assert!(roles.contains(&Role::Admin));
    let access = app.login(ADMIN, PASSWORD).await["access_token"]
        .as_str()
        .expect("access")
        .to_owned();
    app.get(SECURITY_CONFIG, Some(&access)).await.expect(200);
}

async fn admin_emails_are_matched_case_insensitively(app: TestApp) {
    let (admin_id, access) = admin(&app).await;
    let roles = app
        .store
        .user_roles(Uuid::parse_str(&admin_id).expect("uuid"))
        .await
        .expect("roles");
    assert!(roles.contains(&Role::Admin));
    app.get(SECURITY_CONFIG, Some(&access)).await.expect(200);
    // The host-side grant: unknown email is an error, a second grant is a no-op.
    let error = app
        .service
        .grant_admin("nobody@example.com")
        .await
        .expect_err("unknown email");
    assert!(error.to_string().contains("nobody@example.com"));
    assert!(!app.service.grant_admin(ADMIN).await.expect("known"));
    assert_eq!(
        app.service.grant_configured_admins().await.expect("grant"),
        0
    );
    app.register_verified("ops@example.com").await;
    assert!(
        aggregation_core::admin::grant_admin_by_email(&*app.store, " OPS@example.com")
            .await
            .expect("granted")
    );
}

async fn security_config_has_defaults(app: TestApp) {
    let (_, access) = admin(&app).await;
    let config = app.get(SECURITY_CONFIG, Some(&access)).await.expect(200);
    assert_eq!(
        config,
        json!({
            "global_min_token_version": 0,
            "grace_period_seconds": 1,
            "last_rotation_at": null,
            "last_rotation_reason": null,
        })
    );
    let rotation = rotate_global(&app, &access).await;
    assert_eq!(rotation["previous_version"], 0);
    assert_eq!(rotation["new_version"], 1);
    assert_eq!(rotation["grace_period_seconds"], 1);
    assert!(rotation["message"].as_str().is_some_and(|m| !m.is_empty()));
    let config = app.get(SECURITY_CONFIG, Some(&access)).await.expect(200);
    assert_eq!(config["global_min_token_version"], 1);
    assert_eq!(config["last_rotation_reason"], "signing key leaked");
    assert!(
        config["last_rotation_at"]
            .as_str()
            .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
            .is_some()
    );
}

async fn global_rotation_has_a_grace_period(app: TestApp) {
    let (_, access) = admin(&app).await;
    let (_, _, early) = app.user("erin@example.com").await;
    let late = refresh_token(&app.login("erin@example.com", PASSWORD).await);
    rotate_global(&app, &access).await;
    // Inside the grace period a token one step behind still works, and its successor carries
    // the new version.
    let renewed = refresh(&app, &early).await.expect(201);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    refresh(&app, &late)
        .await
        .expect_problem(401, "unauthorized");
    refresh(&app, &refresh_token(&renewed)).await.expect(201);
    // A token issued after the rotation works.
    let fresh = refresh_token(&app.login("erin@example.com", PASSWORD).await);
    refresh(&app, &fresh).await.expect(201);
}

async fn second_rotation_rejects_tokens_two_steps_behind(app: TestApp) {
    let (_, access) = admin(&app).await;
    let (_, _, oldest) = app.user("frank@example.com").await;
    rotate_global(&app, &access).await;
    let middle = refresh_token(&app.login("frank@example.com", PASSWORD).await);
    let second = rotate_global(&app, &access).await;
    assert_eq!(second["previous_version"], 1);
    assert_eq!(second["new_version"], 2);
    // Still inside the grace period: one step behind passes, two steps behind does not.
    refresh(&app, &oldest)
        .await
        .expect_problem(401, "unauthorized");
    refresh(&app, &middle).await.expect(201);
}

async fn user_rotation_affects_only_that_user(app: TestApp) {
    let (admin_id, access) = admin(&app).await;
    let (grace_id, _, grace_token) = app.user("grace@example.com").await;
    let (_, _, heidi_token) = app.user("heidi@example.com").await;
    let rotation = app
        .post(
            &user_rotations(&grace_id),
            &json!({"reason": "lost laptop"}),
            Some(&access),
        )
        .await
        .expect(201);
    assert_eq!(rotation["user_id"], grace_id.as_str());
    assert_eq!(rotation["previous_version"], 0);
    assert_eq!(rotation["new_version"], 1);
    assert!(rotation["message"].as_str().is_some_and(|m| !m.is_empty()));
    refresh(&app, &grace_token)
        .await
        .expect_problem(401, "unauthorized");
    refresh(&app, &heidi_token).await.expect(201);
    // Tokens issued after the rotation keep working, through several refreshes.
    let fresh = refresh_token(&app.login("grace@example.com", PASSWORD).await);
    let next = refresh(&app, &fresh).await.expect(201);
    refresh(&app, &refresh_token(&next)).await.expect(201);
    // The global configuration did not move.
    let config = app.get(SECURITY_CONFIG, Some(&access)).await.expect(200);
    assert_eq!(config["global_min_token_version"], 0);
    let _ = admin_id;
}

async fn user_rotation_after_a_global_rotation_still_invalidates(app: TestApp) {
    let (_, access) = admin(&app).await;
    let (ivan_id, _, _) = app.user("ivan@example.com").await;
    rotate_global(&app, &access).await;
    // Issued after the global rotation: stamped with the global minimum 1.
    let stamped = refresh_token(&app.login("ivan@example.com", PASSWORD).await);
    let rotation = app
        .post(
            &user_rotations(&ivan_id),
            &json!({"reason": "suspicious activity"}),
            Some(&access),
        )
        .await
        .expect(201);
    assert_eq!(rotation["previous_version"], 0);
    assert_eq!(rotation["new_version"], 2);
    refresh(&app, &stamped)
        .await
        .expect_problem(401, "unauthorized");
    let fresh = refresh_token(&app.login("ivan@example.com", PASSWORD).await);
    let renewed = refresh(&app, &fresh).await.expect(201);
    let spare = refresh_token(&app.login("ivan@example.com", PASSWORD).await);
    // A later global rotation still reaches the individually rotated user: it raises their
    // minimum (2 to 3), with the same grace as everyone's tokens one step behind.
    rotate_global(&app, &access).await;
    refresh(&app, &stamped)
        .await
        .expect_problem(401, "unauthorized");
    let graced = refresh(&app, &refresh_token(&renewed)).await.expect(201);
    refresh(&app, &refresh_token(&graced)).await.expect(201);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    refresh(&app, &spare)
        .await
        .expect_problem(401, "unauthorized");
    let after = refresh_token(&app.login("ivan@example.com", PASSWORD).await);
    refresh(&app, &after).await.expect(201);
    // The raise is audited on its own row.
    let audit = app.store.token_rotations(10).await.expect("audit");
    let ivan = Uuid::parse_str(&ivan_id).expect("uuid");
    let raised: Vec<(i64, i64)> = audit
        .iter()
        .filter(|row| row.scope == RotationScope::Global && row.user_id == Some(ivan))
        .map(|row| (row.previous_version, row.new_version))
        .collect();
    assert_eq!(raised, [(2, 3)]);
    assert_eq!(audit.len(), 4);
}

async fn user_rotation_ends_the_grace_of_a_raised_user(app: TestApp) {
    let (_, access) = admin(&app).await;
    let (judy_id, _, _) = app.user("judy@example.com").await;
    let rotate_judy = || async {
        app.post(
            &user_rotations(&judy_id),
            &json!({"reason": "phishing"}),
            Some(&access),
        )
        .await
        .expect(201)
    };
    rotate_judy().await;
    let own_minimum = refresh_token(&app.login("judy@example.com", PASSWORD).await);
    let global = rotate_global(&app, &access).await;
    assert_eq!(global["new_version"], 1);
    let after_global = refresh_token(&app.login("judy@example.com", PASSWORD).await);
    // Rotated again within the grace period: neither the graced token nor the one issued
    // after the global rotation passes.
    let rotation = rotate_judy().await;
    assert_eq!(
        (&rotation["previous_version"], &rotation["new_version"]),
        (&json!(2), &json!(3))
    );
    refresh(&app, &own_minimum)
        .await
        .expect_problem(401, "unauthorized");
    refresh(&app, &after_global)
        .await
        .expect_problem(401, "unauthorized");
    let fresh = refresh_token(&app.login("judy@example.com", PASSWORD).await);
    refresh(&app, &fresh).await.expect(201);
}

async fn unknown_or_malformed_user_ids(app: TestApp) {
    let (_, access) = admin(&app).await;
    let unknown = Uuid::new_v4().to_string();
    let body = app
        .post(
            &user_rotations(&unknown),
            &json!({"reason": "x"}),
            Some(&access),
        )
        .await
        .expect_problem(404, "not_found");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains(&unknown))
    );
    let body = app
        .post(
            &user_rotations("not-a-uuid"),
            &json!({"reason": "x"}),
            Some(&access),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "path.user_id");
    // Nothing was recorded.
    assert!(
        app.store
            .token_rotations(10)
            .await
            .expect("audit")
            .is_empty()
    );
}

async fn rotation_reasons_are_validated(app: TestApp) {
    let (admin_id, access) = admin(&app).await;
    let target = user_rotations(&admin_id);
    for path in [SECURITY_ROTATIONS, target.as_str()] {
        for body in [
            json!({}),
            json!({"reason": ""}),
            json!({"reason": "   "}),
            json!({"reason": 7}),
            json!({"reason": "r".repeat(501)}),
        ] {
            let problem = app
                .post(path, &body, Some(&access))
                .await
                .expect_problem(422, "validation_failed");
            assert_eq!(problem["errors"][0]["field"], "reason");
        }
        app.call(Method::POST, path, None, Some(&access))
            .await
            .expect_problem(422, "validation_failed");
    }
    assert!(
        app.store
            .token_rotations(10)
            .await
            .expect("audit")
            .is_empty()
    );
    app.post(
        SECURITY_ROTATIONS,
        &json!({"reason": "é".repeat(500)}),
        Some(&access),
    )
    .await
    .expect(201);
}

async fn rotations_are_audited(app: TestApp) {
    let (admin_id, access) = admin(&app).await;
    let (judy_id, _, _) = app.user("judy@example.com").await;
    rotate_global(&app, &access).await;
    app.post(
        &user_rotations(&judy_id),
        &json!({"reason": "account takeover"}),
        Some(&access),
    )
    .await
    .expect(201);
    let audit = app.store.token_rotations(10).await.expect("audit");
    assert_eq!(audit.len(), 2);
    let admin_id = Uuid::parse_str(&admin_id).expect("uuid");
    let (user, global) = (&audit[0], &audit[1]);
    assert_eq!(user.scope, RotationScope::User);
    assert_eq!(user.user_id, Some(Uuid::parse_str(&judy_id).expect("uuid")));
    assert_eq!((user.previous_version, user.new_version), (0, 2));
    assert_eq!(user.reason, "account takeover");
    assert_eq!(user.initiated_by, Some(admin_id));
    assert_eq!(global.scope, RotationScope::Global);
    assert_eq!(global.user_id, None);
    assert_eq!((global.previous_version, global.new_version), (0, 1));
    assert_eq!(global.reason, "signing key leaked");
    assert_eq!(global.initiated_by, Some(admin_id));
    assert!(global.created_at <= user.created_at);
    assert!(now() - global.created_at < TimeDelta::minutes(1));
    let rotations: Vec<(&str, Option<Uuid>, i64, i64)> = app
        .events
        .events()
        .into_iter()
        .filter_map(|event| match event {
            DomainEvent::TokenVersionRotated {
                scope,
                user_id,
                previous_version,
                new_version,
                initiated_by,
            } if initiated_by == admin_id => Some((scope, user_id, previous_version, new_version)),
            _ => None,
        })
        .collect();
    assert_eq!(
        rotations,
        [
            ("global", None, 0, 1),
            ("user", Some(Uuid::parse_str(&judy_id).expect("uuid")), 0, 2)
        ]
    );
}

async fn jobs_status_reports_real_runs(app: TestApp) {
    let (_, access) = admin(&app).await;
    let before = app.get(JOBS, Some(&access)).await.expect(200);
    assert_eq!(before["healthy"], true);
    let names: Vec<&str> = before["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|job| job["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "refresh_provider_tokens",
            "purge_expired",
            "sync_connections",
            "deliver_webhooks"
        ]
    );
    assert_eq!(before["jobs"][1]["runs"], 0);
    assert_eq!(before["jobs"][1]["last_success_at"], Value::Null);

    let runner = app.service.jobs();
    for name in [
        "purge_expired",
        "refresh_provider_tokens",
        "sync_connections",
        "deliver_webhooks",
    ] {
        let outcome = runner.run_once(name).await.expect("runs");
        assert!(
            matches!(outcome, RunOutcome::Succeeded(_)),
            "{name}: {outcome}"
        );
    }
    assert!(matches!(
        runner.run_once("no_such_job").await,
        Err(JobsError::UnknownJob(_))
    ));
    let status = app.get(JOBS, Some(&access)).await.expect(200);
    assert_eq!(status["healthy"], true);
    let jobs = status["jobs"].as_array().expect("jobs");
    for job in jobs {
        assert_eq!(job["runs"], 1, "{job}");
        assert_eq!(job["failures"], 0);
        assert_eq!(job["running"], false);
        assert_eq!(job["last_error"], Value::Null);
        assert!(job["last_started_at"].is_string());
        assert!(job["last_finished_at"].is_string());
        assert!(job["last_success_at"].is_string());
    }
    let (refresh_job, purge, sync) = (&jobs[0], &jobs[1], &jobs[2]);
    assert_eq!(refresh_job["enabled"], true);
    assert_eq!(refresh_job["interval_seconds"], 300);
    assert_eq!(purge["enabled"], true);
    assert_eq!(purge["interval_seconds"], 3600);
    assert!(purge["next_run_at"].is_string());
    assert_eq!(sync["enabled"], false);
    assert_eq!(sync["interval_seconds"], Value::Null);
    assert_eq!(sync["next_run_at"], Value::Null);
    let webhooks = &jobs[3];
    assert_eq!(webhooks["enabled"], true);
    assert_eq!(webhooks["interval_seconds"], 5);
}

async fn purge_deletes_expired_rows(app: TestApp) {
    let (user_id, _, live_refresh) = app.user("ken@example.com").await;
    let user_id = Uuid::parse_str(&user_id).expect("uuid");
    let at = now();
    let expired_token = vec![1_u8; 32];
    app.store
        .insert_one_time_token(&NewOneTimeToken {
            digest: expired_token.clone(),
            purpose: TokenPurpose::PasswordReset,
            user_id,
            created_at: at - TimeDelta::hours(2),
            expires_at: at - TimeDelta::hours(1),
            ip_address: None,
            user_agent: None,
        })
        .await
        .expect("seed token");
    let live_token = vec![2_u8; 32];
    app.store
        .insert_one_time_token(&NewOneTimeToken {
            digest: live_token.clone(),
            purpose: TokenPurpose::PasswordReset,
            user_id,
            created_at: at,
            expires_at: at + TimeDelta::hours(1),
            ip_address: None,
            user_agent: None,
        })
        .await
        .expect("seed token");
    // A session that expired 40 days ago, and one that expired yesterday (kept: retention).
    let seed_session = |id: Uuid, digest: u8, age_days: i64| {
        let store = app.store.clone();
        async move {
            let created_at = at - TimeDelta::days(age_days + 30);
            let expires_at = at - TimeDelta::days(age_days);
            store
                .create_session(
                    &NewSession {
                        id,
                        user_id,
                        device_info: None,
                        ip_address: None,
                        user_agent: None,
                        created_at,
                        expires_at,
                    },
                    &NewRefreshToken {
                        digest: vec![digest; 32],
                        session_id: id,
                        user_id,
                        token_version: 0,
                        issued_at: created_at,
                        expires_at,
                    },
                )
                .await
                .expect("seed session");
        }
    };
    let (old, recent) = (Uuid::now_v7(), Uuid::now_v7());
    seed_session(old, 3, 40).await;
    seed_session(recent, 4, 1).await;

    let outcome = app
        .service
        .jobs()
        .run_once("purge_expired")
        .await
        .expect("runs");
    assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome}");

    let store = &app.store;
    assert_eq!(
        store
            .check_one_time_token(&expired_token, TokenPurpose::PasswordReset, now())
            .await
            .expect("check"),
        TokenCheck::Unknown
    );
    assert!(matches!(
        store
            .check_one_time_token(&live_token, TokenPurpose::PasswordReset, now())
            .await
            .expect("check"),
        TokenCheck::Valid { .. }
    ));
    assert!(
        store
            .session_for_user(user_id, old)
            .await
            .expect("read")
            .is_none()
    );
    assert!(store.refresh_token(&[3; 32]).await.expect("read").is_none());
    assert!(
        store
            .session_for_user(user_id, recent)
            .await
            .expect("read")
            .is_some()
    );
    // The recent session stays, but its expired refresh token goes.
    assert!(store.refresh_token(&[4; 32]).await.expect("read").is_none());
    // Live sessions and tokens are untouched.
    refresh(&app, &live_refresh).await.expect(201);
}

/// Counts its runs; each run takes `pause`.
struct Counter {
    runs: Arc<AtomicUsize>,
    finished: Arc<AtomicBool>,
    pause: Duration,
}

#[async_trait]
impl Job for Counter {
    async fn run(&self, _ctx: &JobContext) -> Result<String, JobError> {
        self.finished.store(false, Ordering::SeqCst);
        self.runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.pause).await;
        self.finished.store(true, Ordering::SeqCst);
        Ok("counted".to_owned())
    }
}

async fn spawned_jobs_run_and_shut_down_cleanly(app: TestApp) {
    let runs = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let handle = app
        .service
        .jobs()
        .with_job(
            "counter",
            Some(Duration::from_millis(200)),
            Counter {
                runs: runs.clone(),
                finished: finished.clone(),
                pause: Duration::from_millis(150),
            },
        )
        .spawn();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while runs.load(Ordering::SeqCst) < 3 {
        assert!(tokio::time::Instant::now() < deadline, "the job never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let a run start, then stop while it is in flight: it finishes and is recorded.
    while finished.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    handle.shutdown().await;
    assert!(finished.load(Ordering::SeqCst));
    let started = runs.load(Ordering::SeqCst);
    let records = app.store.job_runs().await.expect("records");
    let record = records
        .iter()
        .find(|record| record.name == "counter")
        .expect("recorded");
    assert_eq!(record.runs, i64::try_from(started).expect("small"));
    assert_eq!(record.lease_owner, None);
    // The built-in jobs ran on their schedule too (never run before, so due at once).
    assert!(
        records
            .iter()
            .any(|record| record.name == "purge_expired" && record.runs == 1)
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(runs.load(Ordering::SeqCst), started, "stopped for good");
}

/// Two service instances over separate pools to one database: of two simultaneous runs of one
/// job, exactly one runs; a lease left by a dead instance lapses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_on_one_instance_at_a_time() {
    let shared = SharedDatabase::open().await;
    let config = || test_config().with_job_lease_ttl(Duration::from_millis(600));
    let first = SharedDatabase::service(&shared.first, config());
    let second = SharedDatabase::service(&shared.second, config());
    let runs = Arc::new(AtomicUsize::new(0));
    let job = || Counter {
        runs: runs.clone(),
        finished: Arc::new(AtomicBool::new(false)),
        pause: Duration::from_millis(1500),
    };
    let one = first.jobs().with_job("slow", None, job());
    let two = second.jobs().with_job("slow", None, job());
    let (a, b) = tokio::join!(one.run_once("slow"), two.run_once("slow"));
    let outcomes = [a.expect("first"), b.expect("second")];
    let ran = outcomes
        .iter()
        .filter(|outcome| matches!(outcome, RunOutcome::Succeeded(_)))
        .count();
    let skipped = outcomes
        .iter()
        .filter(|outcome| **outcome == RunOutcome::Skipped)
        .count();
    assert_eq!(
        (ran, skipped),
        (1, 1),
        "{:?} on {:?}",
        outcomes,
        shared.backend
    );
    assert!(outcomes.iter().any(|o| o.to_string() == "skipped: leased"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The run outlived the lease lifetime: the heartbeat kept the lease, so it was recorded.
    let record = shared
        .first
        .job_runs()
        .await
        .expect("records")
        .into_iter()
        .find(|record| record.name == "slow")
        .expect("recorded");
    assert_eq!((record.runs, record.failures), (1, 0));
    assert!(record.last_success_at.is_some());

    // An instance that died mid-run leaves its lease behind; it lapses after its lifetime.
    let at = now();
    assert!(
        shared
            .first
            .try_acquire_job_lease(
                "slow",
                "dead-instance",
                at,
                at + TimeDelta::milliseconds(600),
                at + TimeDelta::days(1),
            )
            .await
            .expect("lease")
    );
    assert_eq!(
        two.run_once("slow").await.expect("attempt"),
        RunOutcome::Skipped
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let short = second.jobs().with_job(
        "slow",
        None,
        Counter {
            runs: runs.clone(),
            finished: Arc::new(AtomicBool::new(false)),
            pause: Duration::from_millis(10),
        },
    );
    assert!(matches!(
        short.run_once("slow").await.expect("attempt"),
        RunOutcome::Succeeded(_)
    ));
    // The dead instance cannot record over the new owner's run.
    assert!(
        !shared
            .first
            .finish_job_run("slow", "dead-instance", now(), Some("late"))
            .await
            .expect("finish")
    );
    drop((one, two, short, first, second));
    shared.cleanup().await;
}
