//! Conformance: the OpenAPI document states what the server enforces. Each request body has
//! its own component; the values a schema admits are the ones the server takes (dates in the
//! accepted years, UUIDs, the password rule, the providers a connect accepts, the configured
//! redirect URIs, upload names), and what it refuses the server refuses; creations and
//! listings link to the operations taking their ids.

use aggregation_tests::{REDIRECT_URI, TestApp, conformance, sandbox_setup};
use serde_json::{Value, json};

conformance!(setup = sandbox_setup;
    each_body_has_its_own_component_and_ids_are_linked,
    connect_fields_list_exactly_what_a_connect_accepts,
    field_schemas_and_the_server_agree,
);

const DOCUMENT: &str = "/api/v1/openapi.json";

/// The component a `#/components/schemas/...` reference names.
fn component<'a>(document: &'a Value, reference: &Value) -> &'a Value {
    let name = reference
        .as_str()
        .and_then(|reference| reference.strip_prefix("#/components/schemas/"))
        .expect("a schema reference");
    &document["components"]["schemas"][name]
}

/// The JSON request body schema of an operation.
fn json_body<'a>(document: &'a Value, path: &str, method: &str) -> &'a Value {
    let reference = &document["paths"][path][method]["requestBody"]["content"]["application/json"]
        ["schema"]["$ref"];
    component(document, reference)
}

/// The schema of a parameter of an operation.
fn parameter<'a>(document: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
    document["paths"][path][method]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|parameter| parameter["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
}

async fn each_body_has_its_own_component_and_ids_are_linked(app: TestApp) {
    let document = app.get(DOCUMENT, None).await.expect(200);
    let registration = json_body(&document, "/api/v1/users", "post");
    assert!(registration["properties"].get("password").is_some());
    assert!(registration["properties"].get("url").is_none());
    let webhook = json_body(&document, "/api/v1/webhooks", "post");
    assert!(webhook["properties"].get("url").is_some());
    assert!(webhook["properties"].get("password").is_none());

    let created = &document["paths"]["/api/v1/webhooks"]["post"]["responses"]["201"]["links"];
    for operation in ["get_api_v1_webhooks_id", "delete_api_v1_webhooks_id"] {
        assert_eq!(created[operation]["operationId"], operation);
        assert_eq!(
            created[operation]["parameters"]["path.id"],
            "$response.body#/id"
        );
    }
    let listed = &document["paths"]["/api/v1/accounts"]["get"]["responses"]["200"]["links"];
    for operation in [
        "get_api_v1_accounts_id",
        "get_api_v1_accounts_id_transactions",
        "get_api_v1_accounts_id_holdings",
    ] {
        assert_eq!(
            listed[operation]["parameters"]["path.id"],
            "$response.body#/accounts/0/id"
        );
    }
    let sessions = &document["paths"]["/api/v1/sessions"]["get"]["responses"]["200"]["links"];
    assert_eq!(
        sessions["delete_api_v1_sessions_id"]["parameters"]["path.id"],
        "$response.body#/sessions/0/id"
    );

    // A listed connection's id, followed as the link says, reads that connection.
    let (_, access, _) = app.user("linked@example.com").await;
    let connection = app.connect_sandbox(&access, None).await;
    let list = app
        .get("/api/v1/providers", Some(&access))
        .await
        .expect(200);
    let link = &document["paths"]["/api/v1/providers"]["get"]["responses"]["200"]["links"]["get_api_v1_providers_id"];
    let pointer = link["parameters"]["path.id"]
        .as_str()
        .and_then(|expression| expression.strip_prefix("$response.body#"))
        .expect("a body pointer");
    let id = list
        .pointer(pointer)
        .and_then(Value::as_str)
        .expect("an id");
    assert_eq!(id, connection["id"]);
    app.get(&format!("/api/v1/providers/{id}"), Some(&access))
        .await
        .expect(200);
}

async fn connect_fields_list_exactly_what_a_connect_accepts(app: TestApp) {
    let document = app.get(DOCUMENT, None).await.expect(200);
    let connect = json_body(&document, "/api/v1/providers", "post");
    let slugs = component(&document, &connect["properties"]["provider_slug"]["$ref"]);
    let slugs: Vec<&str> = slugs["enum"]
        .as_array()
        .expect("an enum of slugs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!slugs.is_empty());
    assert!(!slugs.contains(&"file_import"));
    let (_, access, _) = app.user("connect@example.com").await;
    for slug in &slugs {
        app.post(
            "/api/v1/providers",
            &json!({"provider_slug": slug}),
            Some(&access),
        )
        .await
        .expect(201);
    }
    app.post(
        "/api/v1/providers",
        &json!({"provider_slug": "file_import"}),
        Some(&access),
    )
    .await
    .expect_problem(400, "command_validation_failed");

    let redirect = connect["properties"]["redirect_uri"].to_string();
    let name = redirect
        .split("#/components/schemas/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a redirect URI component");
    let allowed = &document["components"]["schemas"][name]["enum"];
    assert_eq!(
        *allowed,
        json!([REDIRECT_URI, "https://app.example.com/other"])
    );
    app.post(
        "/api/v1/providers",
        &json!({"provider_slug": slugs[0], "redirect_uri": "https://app.example.com/else"}),
        Some(&access),
    )
    .await
    .expect_problem(422, "validation_failed");
}

async fn field_schemas_and_the_server_agree(app: TestApp) {
    let document = app.get(DOCUMENT, None).await.expect(200);
    let password = &json_body(&document, "/api/v1/users", "post")["properties"]["password"];
    assert_eq!(
        password["pattern"],
        r"^(?=[\s\S]*\p{Lu})(?=[\s\S]*\p{Ll})(?=[\s\S]*\p{N})(?=[\s\S]*[^\p{L}\p{N}])[\s\S]{8,128}$"
    );
    // Letters are general categories, as the pattern's `\p{..}` classes: a circled letter is
    // a symbol, a combining accent neither letter nor digit.
    let problem = app
        .post(
            "/api/v1/users",
            &json!({"email": "circled@example.com", "password": "Ⓐbcdefg1!"}),
            None,
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["code"], "too_weak");
    app.post(
        "/api/v1/users",
        &json!({"email": "accent@example.com", "password": "Abcdefg1\u{301}"}),
        None,
    )
    .await
    .expect(201);

    let start = &parameter(
        &document,
        "/api/v1/accounts/{id}/transactions",
        "get",
        "start_date",
    )["schema"];
    assert_eq!(start["format"], "date");
    assert!(
        start["pattern"]
            .as_str()
            .is_some_and(|p| p.contains("2200"))
    );
    let history = parameter(
        &document,
        "/api/v1/accounts/{id}/balance-history",
        "get",
        "start_date",
    );
    assert_eq!(history["required"], true);
    let resume = &parameter(&document, "/api/v1/events", "get", "Last-Event-ID")["schema"];
    assert_eq!(resume["format"], "uuid");
    assert!(resume["pattern"].is_string());
    let sync = json_body(&document, "/api/v1/transactions/syncs", "post");
    assert!(sync["properties"]["account_id"]["pattern"].is_string());
    let upload = &document["paths"]["/api/v1/imports"]["post"]["requestBody"]["content"]["multipart/form-data"];
    // The format comes from the content first (decisions.md "More statement formats"), so
    // the file name is not held to an extension; the parts besides `file` are described.
    let disposition = &upload["encoding"]["file"]["headers"]["Content-Disposition"];
    assert!(
        disposition["schema"]["pattern"]
            .as_str()
            .is_some_and(|pattern| pattern.contains("name=\"file\""))
    );
    assert_eq!(
        upload["schema"]["properties"]["currency"]["pattern"],
        "^[A-Z]{3}$"
    );
    assert_eq!(
        upload["schema"]["properties"]["format"]["enum"]
            .as_array()
            .map(Vec::len),
        Some(9)
    );

    // What those schemas refuse, the server refuses: an empty filter, a date not shaped
    // `YYYY-MM-DD`, an empty id.
    let (_, access, _) = app.user("agree@example.com").await;
    for (query, field) in [
        ("/api/v1/accounts?account_type=", "query.account_type"),
        ("/api/v1/holdings?asset_type=", "query.asset_type"),
        (
            "/api/v1/accounts/0192f3a4-5b6c-7d8e-9f00-112233445566/transactions?start_date=2024-1-05",
            "query.start_date",
        ),
    ] {
        let problem = app
            .get(query, Some(&access))
            .await
            .expect_problem(422, "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{query}");
    }
    let problem = app
        .post(
            "/api/v1/transactions/syncs",
            &json!({"connection_id": "0192f3a4-5b6c-7d8e-9f00-112233445566", "account_id": ""}),
            Some(&access),
        )
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "account_id");
}
