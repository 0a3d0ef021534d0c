//! Conformance: a connect naming a provider the server does not offer is 404 before the
//! server's redirect configuration is looked at.

use aggregation_tests::{Setup, TestApp, conformance};
use serde_json::json;

/// The sandbox provider offered, but no redirect URI configured.
fn sandbox_without_redirect_uris() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    setup.config = setup.config.with_oauth_redirect_uris(Vec::new());
    setup
}

conformance!(setup = sandbox_without_redirect_uris;
    an_unknown_provider_is_404_before_the_redirect_configuration,
);

async fn an_unknown_provider_is_404_before_the_redirect_configuration(app: TestApp) {
    let (_, token, _) = app.user("connect-order@example.com").await;
    let path = "/api/v1/providers";
    for body in [
        json!({"provider_slug": "nope"}),
        json!({"provider_slug": "nope", "redirect_uri": "https://evil.example/cb"}),
    ] {
        app.post(path, &body, Some(&token))
            .await
            .expect_problem(404, "not_found");
    }
    // The shape of the body is still judged first.
    let body = app
        .post(
            path,
            &json!({"provider_slug": "nope", "alias": 7}),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "alias");
    // An offered provider reaches the redirect configuration.
    let body = app
        .post(
            path,
            &json!({"provider_slug": "schwab-sandbox"}),
            Some(&token),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "redirect_uri");
    assert_eq!(body["errors"][0]["code"], "not_configured");
}
