//! Conformance: unknown routes, wrong methods, trace ids and bodies rejected before a handler.

use aggregation_tests::{TestApp, TestResponse, conformance};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;

conformance!(
    unknown_paths_are_404_problems,
    wrong_methods_are_405_with_allow,
    incoming_traceparent_sets_the_trace_id,
    trace_ids_are_generated_without_traceparent,
    malformed_traceparent_is_replaced,
    malformed_json_is_422,
    wrong_content_type_is_422,
);

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Sends a request with these headers and this raw body.
async fn raw(
    app: &TestApp,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &'static str,
) -> TestResponse {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    app.send(
        builder
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("request"),
    )
    .await
}

/// The (trace id, parent id) of the response's `traceparent`, checked for W3C shape.
fn response_traceparent(response: &TestResponse) -> (String, String) {
    let value = response
        .header("traceparent")
        .unwrap_or_else(|| panic!("traceparent header on {}", response.status));
    let parts: Vec<&str> = value.split('-').collect();
    assert_eq!(parts.len(), 4, "traceparent {value}");
    let lower_hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    assert_eq!(parts[0], "00", "version of {value}");
    assert!(lower_hex(parts[1], 32), "trace id of {value}");
    assert!(lower_hex(parts[2], 16), "parent id of {value}");
    assert!(lower_hex(parts[3], 2), "flags of {value}");
    (parts[1].to_owned(), parts[2].to_owned())
}

fn is_trace_id(value: &str) -> bool {
    value.len() == 32
        && value
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && value.bytes().any(|b| b != b'0')
}

async fn unknown_paths_are_404_problems(app: TestApp) {
    let (_, access, _) = app.user("wanderer@example.com").await;
    for (method, path, bearer) in [
        (Method::GET, "/api/v1/nope", None),
        (Method::GET, "/api/v1/nope", Some(access.as_str())),
        (Method::POST, "/api/v1/sessions/current/extra", None),
        (
            Method::DELETE,
            "/api/v1/accounts/x/y/z/w",
            Some(access.as_str()),
        ),
        (Method::GET, "/api/v2/sessions", Some(access.as_str())),
    ] {
        let response = app.call(method.clone(), path, None, bearer).await;
        let body = response.expect_problem(404, "not_found");
        assert_eq!(body["instance"], path, "{method} {path}");
        assert_eq!(body["type"], "http://aggregation.test/errors/not_found");
        assert_eq!(body["title"], "Not Found");
        assert!(body.get("errors").is_none());
        assert!(response.header("allow").is_none());
    }
    // The query is not part of the instance.
    let body = app
        .get("/api/v1/nope?page=2", None)
        .await
        .expect_problem(404, "not_found");
    assert_eq!(body["instance"], "/api/v1/nope");
}

fn allowed(response: &TestResponse) -> Vec<String> {
    let mut methods: Vec<String> = response
        .header("allow")
        .unwrap_or_else(|| panic!("Allow header on {}", response.status))
        .split(',')
        .map(|method| method.trim().to_owned())
        .filter(|method| !method.is_empty())
        .collect();
    methods.sort_unstable();
    methods
}

async fn wrong_methods_are_405_with_allow(app: TestApp) {
    let session = format!("/api/v1/sessions/{}", uuid::Uuid::new_v4());
    let cases: [(Method, &str, &[&str]); 6] = [
        (Method::GET, "/api/v1/users", &["POST"]),
        (Method::PUT, "/api/v1/tokens", &["POST"]),
        (
            Method::PATCH,
            "/api/v1/sessions",
            &["DELETE", "GET", "POST"],
        ),
        (Method::POST, &session, &["DELETE", "GET"]),
        (Method::GET, "/api/v1/sessions/current", &["DELETE"]),
        (Method::DELETE, "/api/v1/imports/formats", &["GET"]),
    ];
    for (method, path, expected) in cases {
        let response = app.call(method.clone(), path, None, None).await;
        let body = response.expect_problem(405, "method_not_allowed");
        assert_eq!(allowed(&response), expected, "{method} {path}");
        assert_eq!(body["instance"], path);
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|detail| detail.contains(method.as_str())),
            "detail names the method: {body}"
        );
    }
    // The method is checked before the body: a wrong method with a broken body is still 405.
    let response = raw(
        &app,
        Method::PUT,
        "/api/v1/users",
        &[("content-type", "application/json")],
        "{\"email\": ",
    )
    .await;
    response.expect_problem(405, "method_not_allowed");
    assert_eq!(allowed(&response), ["POST"]);
}

async fn incoming_traceparent_sets_the_trace_id(app: TestApp) {
    let incoming = format!("00-{TRACE_ID}-00f067aa0ba902b7-01");
    for (method, path, status, code) in [
        (Method::GET, "/api/v1/nope", 404, "not_found"),
        (Method::PUT, "/api/v1/users", 405, "method_not_allowed"),
        (Method::GET, "/api/v1/sessions", 401, "unauthorized"),
    ] {
        let response = raw(&app, method, path, &[("traceparent", &incoming)], "").await;
        let body = response.expect_problem(status, code);
        assert_eq!(body["trace_id"], TRACE_ID, "{path}");
        let (trace_id, _) = response_traceparent(&response);
        assert_eq!(trace_id, TRACE_ID, "{path}");
    }
    // Successful responses carry it too.
    let response = raw(
        &app,
        Method::GET,
        "/health",
        &[("traceparent", &incoming)],
        "",
    )
    .await;
    response.expect(200);
    assert_eq!(response_traceparent(&response).0, TRACE_ID);
}

async fn trace_ids_are_generated_without_traceparent(app: TestApp) {
    let mut seen = Vec::new();
    for _ in 0..2 {
        let response = app.get("/api/v1/nope", None).await;
        let body = response.expect_problem(404, "not_found");
        let trace_id = body["trace_id"].as_str().expect("trace_id").to_owned();
        assert!(is_trace_id(&trace_id), "trace id {trace_id}");
        assert_eq!(response_traceparent(&response).0, trace_id);
        seen.push(trace_id);
    }
    assert_ne!(seen[0], seen[1], "each request gets its own trace");
    let response = app.get("/health", None).await;
    response.expect(200);
    assert!(is_trace_id(&response_traceparent(&response).0));
}

async fn malformed_traceparent_is_replaced(app: TestApp) {
    for incoming in [
        "garbage",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
    ] {
        let response = raw(
            &app,
            Method::GET,
            "/api/v1/nope",
            &[("traceparent", incoming)],
            "",
        )
        .await;
        let body = response.expect_problem(404, "not_found");
        let trace_id = body["trace_id"].as_str().expect("trace_id");
        assert!(is_trace_id(trace_id), "{incoming}: {trace_id}");
        assert!(!incoming.contains(trace_id), "{incoming} was not replaced");
        assert_eq!(response_traceparent(&response).0, trace_id);
    }
}

async fn malformed_json_is_422(app: TestApp) {
    let json_type = [("content-type", "application/json")];
    for (path, body) in [
        ("/api/v1/users", "{\"email\": \"a@example.com\","),
        ("/api/v1/tokens", "not json at all"),
        (
            "/api/v1/password-reset-tokens",
            "{\"email\": \"a@example.com\"} trailing",
        ),
        ("/api/v1/email-verifications", "\u{feff}{]"),
    ] {
        let response = raw(&app, Method::POST, path, &json_type, body).await;
        let problem = response.expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], "body", "{path}");
        assert_eq!(problem["errors"][0]["code"], "malformed_json", "{path}");
        assert_eq!(problem["instance"], path);
    }
    // Well-formed JSON of the wrong shape is 422 too, never 400 or 500.
    for body in ["[]", "\"text\"", "null", "42"] {
        raw(&app, Method::POST, "/api/v1/tokens", &json_type, body)
            .await
            .expect_problem(422, "validation_failed");
    }
    // A JSON body on an authenticated route is parsed only after the token is checked.
    raw(&app, Method::DELETE, "/api/v1/sessions", &json_type, "{")
        .await
        .expect_problem(401, "unauthorized");
    let (_, access, _) = app.user("jsonless@example.com").await;
    let bearer = format!("Bearer {access}");
    let response = raw(
        &app,
        Method::DELETE,
        "/api/v1/sessions",
        &[
            ("content-type", "application/json"),
            ("authorization", &bearer),
        ],
        "{\"reason\": ",
    )
    .await;
    let problem = response.expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["code"], "malformed_json");
}

async fn wrong_content_type_is_422(app: TestApp) {
    let body = "{\"refresh_token\": \"abc\"}";
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|value| (header::CONTENT_TYPE.as_str(), value))
            .into_iter()
            .collect();
        let response = raw(&app, Method::POST, "/api/v1/tokens", &headers, body).await;
        let problem = response.expect_problem(422, "validation_failed");
        assert_eq!(
            problem["errors"][0]["field"], "header.content-type",
            "{content_type:?}"
        );
    }
    // JSON with parameters or a +json suffix is still JSON.
    for content_type in [
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/merge-patch+json",
    ] {
        raw(
            &app,
            Method::POST,
            "/api/v1/tokens",
            &[("content-type", content_type)],
            body,
        )
        .await
        .expect_problem(401, "unauthorized");
    }
}
