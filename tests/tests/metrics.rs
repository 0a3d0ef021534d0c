//! Conformance: the service counts what it answers (feature `metrics`), by route template and
//! never by raw path, and counts its job runs.

use aggregation_core::jobs::RunOutcome;
use aggregation_tests::{TestApp, conformance};
use http::Method;

conformance!(requests_are_counted_by_route_template, job_runs_are_counted);

/// The sample lines of the rendered metrics.
fn samples(app: &TestApp) -> Vec<String> {
    app.service
        .metrics()
        .render()
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[track_caller]
fn assert_sample(samples: &[String], expected: &str) {
    assert!(
        samples.iter().any(|line| line == expected),
        "{expected} missing from:\n{}",
        samples.join("\n")
    );
}

async fn requests_are_counted_by_route_template(app: TestApp) {
    let id = "0192f3c4-0000-7000-8000-000000000000";
    for _ in 0..2 {
        app.get("/health/live", None).await.expect(200);
    }
    app.get(&format!("/api/v1/accounts/{id}"), None)
        .await
        .expect_problem(401, "unauthorized");
    app.get("/api/v1/no-such-thing", None)
        .await
        .expect_problem(404, "not_found");
    app.call(Method::PUT, "/api/v1/users", None, None)
        .await
        .expect_problem(405, "method_not_allowed");

    let samples = samples(&app);
    for expected in [
        r#"aggregation_http_requests_total{method="GET",route="/health/live",status="200"} 2"#,
        r#"aggregation_http_requests_total{method="GET",route="/api/v1/accounts/{id}",status="401"} 1"#,
        r#"aggregation_http_requests_total{method="GET",route="unmatched",status="404"} 1"#,
        r#"aggregation_http_requests_total{method="PUT",route="/api/v1/users",status="405"} 1"#,
        r#"aggregation_http_request_duration_seconds_count{method="GET",route="/health/live"} 2"#,
        r#"aggregation_http_request_duration_seconds_bucket{method="GET",route="/health/live",le="+Inf"} 2"#,
        // Every request has been answered by the time its client reads the answer.
        "aggregation_http_requests_in_flight 0",
    ] {
        assert_sample(&samples, expected);
    }
    // Raw paths never become labels: the label set stays bounded whatever clients send.
    assert!(
        samples
            .iter()
            .all(|line| !line.contains(id) && !line.contains("no-such-thing")),
        "{}",
        samples.join("\n")
    );
}

async fn job_runs_are_counted(app: TestApp) {
    let runner = app.service.jobs();
    let outcome = runner.run_once("purge_expired").await.expect("runs");
    assert!(matches!(outcome, RunOutcome::Succeeded(_)), "{outcome}");
    let samples = samples(&app);
    assert_sample(
        &samples,
        r#"aggregation_job_runs_total{job="purge_expired",outcome="succeeded"} 1"#,
    );
    assert_sample(
        &samples,
        r#"aggregation_job_runs_total{job="purge_expired",outcome="failed"} 0"#,
    );
    assert_sample(
        &samples,
        r#"aggregation_job_run_duration_seconds_count{job="purge_expired"} 1"#,
    );
}
