//! Conformance: listing, reading and revoking sessions (one, or all but the current one).

use aggregation_tests::{PASSWORD, TestApp, conformance};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Method, Request, header};
use http_body_util::Full;
use serde_json::{Value, json};

conformance!(
    sessions_list_newest_first_with_counts,
    session_records_have_every_field,
    device_info_falls_back_to_the_raw_user_agent,
    get_session_is_scoped_to_its_owner,
    session_endpoints_reject_bad_ids_and_missing_tokens,
    revoke_session_ends_its_refresh_token,
    revoke_session_checks_the_reason,
    revoke_all_keeps_the_current_session,
);

/// Logs in once more: (access token, refresh token).
async fn login_again(app: &TestApp, email: &str) -> (String, String) {
    // Sessions are listed by creation time: keep the instants apart.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let tokens = app.login(email, PASSWORD).await;
    (
        tokens["access_token"].as_str().expect("access").to_owned(),
        tokens["refresh_token"]
            .as_str()
            .expect("refresh")
            .to_owned(),
    )
}

/// The id of the session behind an access token.
async fn session_id(app: &TestApp, access: &str) -> String {
    let list = app
        .get("/api/v1/sessions?active_only=false", Some(access))
        .await
        .expect(200);
    let current: Vec<&Value> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter(|session| session["is_current"] == true)
        .collect();
    assert_eq!(current.len(), 1, "exactly one current session: {list}");
    current[0]["id"].as_str().expect("id").to_owned()
}

fn ids(list: &Value) -> Vec<String> {
    list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|session| session["id"].as_str().expect("id").to_owned())
        .collect()
}

fn timestamp(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|at| at.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("RFC 3339 timestamp, got {value}"))
}

async fn refreshes(app: &TestApp, refresh: &str) -> u16 {
    app.post("/api/v1/tokens", &json!({"refresh_token": refresh}), None)
        .await
        .status
        .as_u16()
}

async fn sessions_list_newest_first_with_counts(app: TestApp) {
    let email = "list@example.com";
    let (_, first, _) = app.user(email).await;
    let (second, _) = login_again(&app, email).await;
    let (third, _) = login_again(&app, email).await;
    let first_id = session_id(&app, &first).await;
    let second_id = session_id(&app, &second).await;
    let third_id = session_id(&app, &third).await;

    let list = app.get("/api/v1/sessions", Some(&third)).await.expect(200);
    assert_eq!(
        ids(&list),
        [third_id.clone(), second_id.clone(), first_id.clone()]
    );
    assert_eq!(list["total_count"], 3);
    assert_eq!(list["active_count"], 3);
    let created: Vec<DateTime<Utc>> = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|session| timestamp(&session["created_at"]))
        .collect();
    assert!(created.windows(2).all(|pair| pair[0] >= pair[1]));
    // is_current follows the presented access token, not the newest session.
    let seen_by_first = app.get("/api/v1/sessions", Some(&first)).await.expect(200);
    let current: Vec<bool> = seen_by_first["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|session| session["is_current"] == true)
        .collect();
    assert_eq!(current, [false, false, true]);

    app.delete(&format!("/api/v1/sessions/{second_id}"), None, Some(&third))
        .await
        .expect(204);
    for query in ["", "?active_only=true"] {
        let active = app
            .get(&format!("/api/v1/sessions{query}"), Some(&third))
            .await
            .expect(200);
        assert_eq!(ids(&active), [third_id.clone(), first_id.clone()]);
        assert_eq!(active["total_count"], 2);
        assert_eq!(active["active_count"], 2);
    }
    let all = app
        .get("/api/v1/sessions?active_only=false", Some(&third))
        .await
        .expect(200);
    assert_eq!(
        ids(&all),
        [third_id.clone(), second_id.clone(), first_id.clone()]
    );
    assert_eq!(all["total_count"], 3);
    assert_eq!(all["active_count"], 2);
    let revoked: Vec<bool> = all["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|session| session["is_revoked"] == true)
        .collect();
    assert_eq!(revoked, [false, true, false]);

    // Another user's sessions never show up.
    let (_, other, _) = app.user("list-other@example.com").await;
    let theirs = app.get("/api/v1/sessions", Some(&other)).await.expect(200);
    assert_eq!(theirs["total_count"], 1);
    assert!(!ids(&theirs).contains(&third_id));

    let body = app
        .get("/api/v1/sessions?active_only=maybe", Some(&third))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "query.active_only");
}

async fn session_records_have_every_field(app: TestApp) {
    let (_, access, _) = app.user("fields@example.com").await;
    let list = app.get("/api/v1/sessions", Some(&access)).await.expect(200);
    let record = &list["sessions"][0];
    let mut keys: Vec<&str> = record
        .as_object()
        .expect("record object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "created_at",
            "device_info",
            "expires_at",
            "id",
            "ip_address",
            "is_current",
            "is_revoked",
            "last_activity_at",
            "location",
        ]
    );
    assert!(
        record["id"]
            .as_str()
            .is_some_and(|id| uuid::Uuid::parse_str(id).is_ok())
    );
    assert_eq!(record["device_info"], "Firefox 128 on Linux");
    assert_eq!(record["ip_address"], "127.0.0.1");
    assert_eq!(record["location"], Value::Null);
    assert_eq!(record["is_current"], true);
    assert_eq!(record["is_revoked"], false);
    let created = timestamp(&record["created_at"]);
    let active = timestamp(&record["last_activity_at"]);
    let expires = timestamp(&record["expires_at"]);
    assert!(active >= created);
    // The session lives as long as its refresh token: 30 days.
    let lifetime = expires - created;
    assert!(
        (lifetime - chrono::Duration::days(30)).num_seconds().abs() <= 60,
        "lifetime {lifetime}"
    );
    let id = record["id"].as_str().expect("id");
    let single = app
        .get(&format!("/api/v1/sessions/{id}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(&single, record);
}

/// Logs in with this User-Agent (none when `None`): the session's `device_info`.
async fn device_info_for(app: &TestApp, email: &str, user_agent: Option<&str>) -> Value {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/sessions")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(user_agent) = user_agent {
        builder = builder.header(header::USER_AGENT, user_agent);
    }
    let body = json!({"email": email, "password": PASSWORD}).to_string();
    let tokens = app
        .send(builder.body(Full::new(Bytes::from(body))).expect("request"))
        .await
        .expect(201);
    let access = tokens["access_token"].as_str().expect("access");
    let list = app.get("/api/v1/sessions", Some(access)).await.expect(200);
    let current = list["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|session| session["is_current"] == true)
        .expect("current session")
        .clone();
    current["device_info"].clone()
}

async fn device_info_falls_back_to_the_raw_user_agent(app: TestApp) {
    let email = "devices@example.com";
    app.register_verified(email).await;
    let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 \
                  (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36";
    assert_eq!(
        device_info_for(&app, email, Some(chrome)).await,
        "Chrome 126 on Windows"
    );
    assert_eq!(
        device_info_for(&app, email, Some("ledger-sync/2.1")).await,
        "ledger-sync/2.1"
    );
    let long = format!("custom-agent-{}", "z".repeat(300));
    let stored = device_info_for(&app, email, Some(&long)).await;
    assert_eq!(stored.as_str(), Some(&long[..255]));
    assert_eq!(device_info_for(&app, email, None).await, Value::Null);
}

async fn get_session_is_scoped_to_its_owner(app: TestApp) {
    let (_, access, _) = app.user("owner@example.com").await;
    let (_, other_access, other_refresh) = app.user("intruder@example.com").await;
    let own = session_id(&app, &access).await;
    let foreign = session_id(&app, &other_access).await;

    let record = app
        .get(&format!("/api/v1/sessions/{own}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(record["id"], own.as_str());
    assert_eq!(record["is_current"], true);

    let path = format!("/api/v1/sessions/{foreign}");
    let body = app
        .get(&path, Some(&access))
        .await
        .expect_problem(404, "not_found");
    assert_eq!(body["instance"], path.as_str());
    assert_eq!(body["detail"], "Session not found.");
    // A foreign session reads exactly like one that does not exist.
    let unknown = app
        .get(
            &format!("/api/v1/sessions/{}", uuid::Uuid::new_v4()),
            Some(&access),
        )
        .await
        .expect_problem(404, "not_found");
    assert_eq!(unknown["detail"], body["detail"]);
    assert_eq!(unknown["title"], body["title"]);

    // Nor can it be revoked: the owner's refresh token keeps working.
    app.delete(&path, None, Some(&access))
        .await
        .expect_problem(404, "not_found");
    app.delete(
        &format!("/api/v1/sessions/{}", uuid::Uuid::new_v4()),
        None,
        Some(&access),
    )
    .await
    .expect_problem(404, "not_found");
    assert_eq!(refreshes(&app, &other_refresh).await, 201);
}

async fn session_endpoints_reject_bad_ids_and_missing_tokens(app: TestApp) {
    let (_, access, _) = app.user("strict@example.com").await;
    let own = session_id(&app, &access).await;
    for method in [Method::GET, Method::DELETE] {
        let body = app
            .call(
                method.clone(),
                "/api/v1/sessions/not-a-uuid",
                None,
                Some(&access),
            )
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(body["errors"][0]["field"], "path.id", "{method}");
        assert_eq!(body["instance"], "/api/v1/sessions/not-a-uuid");
    }
    let paths = [
        ("GET", "/api/v1/sessions".to_owned()),
        ("DELETE", "/api/v1/sessions".to_owned()),
        ("GET", format!("/api/v1/sessions/{own}")),
        ("DELETE", format!("/api/v1/sessions/{own}")),
    ];
    for (method, path) in &paths {
        let method: Method = method.parse().expect("method");
        for bearer in [None, Some("not.a.jwt"), Some("")] {
            let response = app.call(method.clone(), path, None, bearer).await;
            let body = response.expect_problem(401, "unauthorized");
            assert_eq!(
                response.header("www-authenticate"),
                Some("Bearer"),
                "{method} {path}"
            );
            assert_eq!(body["instance"], path.as_str());
        }
    }
    // None of that revoked anything.
    let record = app
        .get(&format!("/api/v1/sessions/{own}"), Some(&access))
        .await
        .expect(200);
    assert_eq!(record["is_revoked"], false);
}

async fn revoke_session_ends_its_refresh_token(app: TestApp) {
    let email = "revoker@example.com";
    let (_, current, current_refresh) = app.user(email).await;
    let (other, other_refresh) = login_again(&app, email).await;
    let other_id = session_id(&app, &other).await;
    let path = format!("/api/v1/sessions/{other_id}");

    let response = app.delete(&path, None, Some(&current)).await;
    response.expect(204);
    assert!(response.body.is_empty());
    assert_eq!(refreshes(&app, &other_refresh).await, 401);
    assert_eq!(refreshes(&app, &current_refresh).await, 201);
    let record = app.get(&path, Some(&current)).await.expect(200);
    assert_eq!(record["is_revoked"], true);
    assert_eq!(record["is_current"], false);

    // Revoking again is not an error.
    let again = app.delete(&path, None, Some(&current)).await;
    again.expect(204);
    assert!(again.body.is_empty());

    // A session may revoke itself; its refresh token then fails too.
    let (third, third_refresh) = login_again(&app, email).await;
    let third_id = session_id(&app, &third).await;
    app.delete(&format!("/api/v1/sessions/{third_id}"), None, Some(&third))
        .await
        .expect(204);
    assert_eq!(refreshes(&app, &third_refresh).await, 401);
}

async fn revoke_session_checks_the_reason(app: TestApp) {
    let email = "reasons@example.com";
    let (_, current, _) = app.user(email).await;
    let (first, first_refresh) = login_again(&app, email).await;
    let (second, second_refresh) = login_again(&app, email).await;
    let first_path = format!("/api/v1/sessions/{}", session_id(&app, &first).await);
    let second_path = format!("/api/v1/sessions/{}", session_id(&app, &second).await);

    let body = app
        .delete(
            &first_path,
            Some(&json!({"reason": "x".repeat(256)})),
            Some(&current),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "reason");
    app.delete(&first_path, Some(&json!({"reason": 7})), Some(&current))
        .await
        .expect_problem(422, "validation_failed");
    // The refused requests revoked nothing.
    assert_eq!(refreshes(&app, &first_refresh).await, 201);

    app.delete(
        &first_path,
        Some(&json!({"reason": "x".repeat(255)})),
        Some(&current),
    )
    .await
    .expect(204);
    app.delete(
        &second_path,
        Some(&json!({"reason": "lost my phone"})),
        Some(&current),
    )
    .await
    .expect(204);
    assert_eq!(refreshes(&app, &second_refresh).await, 401);
    // An empty object is a body without a reason.
    app.delete(&second_path, Some(&json!({})), Some(&current))
        .await
        .expect(204);
}

async fn revoke_all_keeps_the_current_session(app: TestApp) {
    let email = "everywhere@example.com";
    let (_, current, current_refresh) = app.user(email).await;
    let (_, first_refresh) = login_again(&app, email).await;
    let (_, second_refresh) = login_again(&app, email).await;
    let (already, already_refresh) = login_again(&app, email).await;
    let already_id = session_id(&app, &already).await;
    app.delete(
        &format!("/api/v1/sessions/{already_id}"),
        None,
        Some(&current),
    )
    .await
    .expect(204);
    let (_, neighbour, neighbour_refresh) = app.user("neighbour@example.com").await;

    let body = app
        .delete(
            "/api/v1/sessions",
            Some(&json!({"reason": "x".repeat(256)})),
            Some(&current),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "reason");

    let body = app
        .delete(
            "/api/v1/sessions",
            Some(&json!({"reason": "signed out everywhere"})),
            Some(&current),
        )
        .await
        .expect(200);
    // The session revoked before does not count again.
    assert_eq!(body["revoked_count"], 2);
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    for refresh in [&first_refresh, &second_refresh, &already_refresh] {
        assert_eq!(refreshes(&app, refresh).await, 401);
    }
    assert_eq!(refreshes(&app, &current_refresh).await, 201);

    let active = app
        .get("/api/v1/sessions", Some(&current))
        .await
        .expect(200);
    assert_eq!(active["total_count"], 1);
    assert_eq!(active["active_count"], 1);
    assert_eq!(active["sessions"][0]["is_current"], true);
    assert_eq!(active["sessions"][0]["is_revoked"], false);
    let all = app
        .get("/api/v1/sessions?active_only=false", Some(&current))
        .await
        .expect(200);
    assert_eq!(all["total_count"], 4);
    assert_eq!(all["active_count"], 1);

    // Nothing left to revoke, and no body is needed.
    let body = app
        .delete("/api/v1/sessions", None, Some(&current))
        .await
        .expect(200);
    assert_eq!(body["revoked_count"], 0);
    // Other users are untouched.
    assert_eq!(refreshes(&app, &neighbour_refresh).await, 201);
    let theirs = app
        .get("/api/v1/sessions", Some(&neighbour))
        .await
        .expect(200);
    assert_eq!(theirs["active_count"], 1);
}
