//! The OAuth callback's refusals and reauthorization, through the three fronts and both
//! stores: a user who refuses at the provider (`error=` on the redirect) gets 400 with nothing
//! created and the state spent; an expired Schwab connection (refresh token revoked at the
//! sandbox) answers 409 and raises `connection.expired` until a reauthorization renews that
//! same connection. Also what embedders' providers receive: the chosen institution, the
//! credentials of a connection being reauthorized, and the disconnect hook.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use aggregation_core::AggregationServiceBuilder;
use aggregation_core::providers::{
    AuthorizationRequest, ConnectMethod, DateRange, Fetched, Institution, Provider,
    ProviderCredentials, ProviderError, ProviderSecret,
};
use aggregation_core::store::{NewAccount, NewHolding, NewTransaction};
use aggregation_tests::{Setup, TestApp, conformance};
use http::Method;
use serde_json::{Value, json};

fn sandbox() -> Setup {
    aggregation_tests::sandbox_setup()
}

fn id(value: &Value) -> &str {
    value["id"].as_str().expect("id")
}

async fn callback(app: &TestApp, query: &str) -> aggregation_tests::TestResponse {
    app.call(
        Method::POST,
        &format!("/api/v1/providers/callback{query}"),
        None,
        None,
    )
    .await
}

/// The ids of every transaction of these accounts, sorted.
async fn transaction_ids(app: &TestApp, token: &str, account_ids: &[Value]) -> Vec<String> {
    let mut ids = Vec::new();
    for account in account_ids {
        let account = account.as_str().expect("account id");
        let page = app
            .get(
                &format!("/api/v1/accounts/{account}/transactions?limit=100"),
                Some(token),
            )
            .await
            .expect(200);
        ids.extend(
            page["transactions"]
                .as_array()
                .expect("transactions")
                .iter()
                .filter_map(|transaction| transaction["id"].as_str().map(str::to_owned)),
        );
    }
    ids.sort();
    ids
}

/// `?error=…` instead of `?code=…`: the user said no at the provider.
async fn a_refusal_at_the_provider_is_400_and_creates_nothing(app: TestApp) {
    let (_, token, _) = app.user("refuses@example.com").await;
    let started = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "schwab-sandbox"}),
            Some(&token),
        )
        .await
        .expect(201);
    let state = started["state"].as_str().expect("state");
    let refused = callback(
        &app,
        &format!("?error=access_denied&error_description=The+user+said+no&state={state}"),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    let detail = refused["detail"].as_str().expect("detail");
    assert!(detail.contains("access_denied"), "{detail}");
    assert!(detail.contains("The user said no"), "{detail}");
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        0
    );
    // The state is spent: a code sent with it afterwards is an unknown state.
    let (code, _) = aggregation_tests::authorize(
        started["authorization_url"]
            .as_str()
            .expect("authorization_url"),
    )
    .await;
    let spent = callback(&app, &format!("?code={code}&state={state}"))
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        !spent["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("access_denied")
    );
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        0
    );

    // Any error the provider names, with or without a description; an error wins over a
    // code sent along.
    let started = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "schwab-sandbox"}),
            Some(&token),
        )
        .await
        .expect(201);
    let state = started["state"].as_str().expect("state");
    let refused = callback(
        &app,
        &format!("?code=ignored&error=temporarily_unavailable&state={state}"),
    )
    .await
    .expect_problem(400, "command_validation_failed");
    assert!(
        refused["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("temporarily_unavailable"))
    );
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        0
    );

    // An unknown state with an error is an unknown state; a missing state is 422.
    let unknown = callback(&app, "?error=access_denied&state=unknown")
        .await
        .expect_problem(400, "command_validation_failed");
    assert!(
        !unknown["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("access_denied")
    );
    let body = callback(&app, "?error=access_denied")
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "query.state");
    assert_eq!(body["errors"].as_array().map(Vec::len), Some(1));
    let long = "e".repeat(3000);
    let body = callback(&app, &format!("?error={long}&state=s"))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["field"], "query.error");

    // A refusal while reauthorizing leaves the connection as it was.
    let connection = app.connect_sandbox(&token, None).await;
    let again = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    let state = again["state"].as_str().expect("state");
    callback(&app, &format!("?error=access_denied&state={state}"))
        .await
        .expect_problem(400, "command_validation_failed");
    let after = app
        .get(
            &format!("/api/v1/providers/{}", id(&connection)),
            Some(&token),
        )
        .await
        .expect(200);
    assert_eq!(after["status"], "active");
    assert_eq!(after["updated_at"], connection["updated_at"]);
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        1
    );
}

/// A refresh token the provider revoked expires the connection (`connection.expired`, reason
/// `refresh_refused`); its syncs answer 409 naming reauthorization; a reauthorization renews
/// the same connection, accounts and records kept, and syncs work again.
async fn reauthorization_renews_an_expired_connection(app: TestApp) {
    let (_, token, _) = app.user("renews@example.com").await;
    let connection = app.connect_sandbox(&token, None).await;
    let sync_path = format!("/api/v1/providers/{}/sync", id(&connection));
    app.post(&sync_path, &json!({}), Some(&token))
        .await
        .expect(201);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let account_ids: Vec<Value> = accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .map(|account| account["id"].clone())
        .collect();
    assert!(!account_ids.is_empty());
    let transactions_before = transaction_ids(&app, &token, &account_ids).await;
    assert!(!transactions_before.is_empty());

    // The provider stops taking the access token and refuses the refresh token: the sync
    // that finds out fails as a token refresh does (502) and the connection is expired.
    app.sandbox().revoke_refresh_tokens();
    app.sandbox().expire_access_tokens();
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(502, "provider_error");
    app.expect_expired(&token, &connection).await;
    assert_eq!(
        app.expiries(&connection).await,
        [json!({
            "connection_id": connection["id"],
            "provider": "schwab-sandbox",
            "reason": "refresh_refused",
        })]
    );
    let conflict = app
        .post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect_problem(409, "conflict");
    assert!(
        conflict["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("reauthorizations"))
    );

    // Reauthorize: the callback renews that very connection.
    let started = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    assert_eq!(started["expires_in"], 600);
    let (code, state) = aggregation_tests::authorize(
        started["authorization_url"]
            .as_str()
            .expect("authorization_url"),
    )
    .await;
    assert_eq!(state, started["state"].as_str().expect("state"));
    let renewed = callback(&app, &format!("?code={code}&state={state}"))
        .await
        .expect(201);
    assert_eq!(renewed["id"], connection["id"]);
    assert_eq!(renewed["status"], "active");
    assert_eq!(renewed["needs_reauthentication"], false);
    assert_eq!(
        app.get("/api/v1/providers", Some(&token)).await.expect(200)["total_count"],
        1
    );

    // Syncs work again, over the same accounts and records.
    app.post(&sync_path, &json!({"force": true}), Some(&token))
        .await
        .expect(201);
    let accounts = app.get("/api/v1/accounts", Some(&token)).await.expect(200);
    let after_ids: Vec<Value> = accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .map(|account| account["id"].clone())
        .collect();
    assert_eq!(after_ids, account_ids);
    assert_eq!(
        transaction_ids(&app, &token, &account_ids).await,
        transactions_before
    );
    assert_eq!(app.expiries(&connection).await.len(), 1);
}

conformance!(setup = sandbox;
    a_refusal_at_the_provider_is_400_and_creates_nothing,
    reauthorization_renews_an_expired_connection,
);

/// Secrets the [`Recorder`] provider was asked to disconnect.
static DISCONNECTED: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

fn disconnects_of(secret: &str) -> usize {
    DISCONNECTED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(secret)
        .copied()
        .unwrap_or_default()
}

/// The disconnects of `secret` once there is at least one (the provider is called in the
/// background after the `DELETE` is answered), or none after 10 s.
async fn disconnects_once_called(secret: &str) -> usize {
    aggregation_tests::eventually(|| disconnects_of(secret) > 0).await;
    disconnects_of(secret)
}

/// An embedder's OAuth provider that needs an institution: its authorization address shows
/// what it received, its secret is the code it was given, and it records disconnects
/// (failing those of secrets starting with `fail-`).
struct Recorder;

#[async_trait::async_trait]
impl Provider for Recorder {
    fn slug(&self) -> &str {
        "recorder"
    }

    fn name(&self) -> &str {
        "Recorder"
    }

    fn needs_institution(&self) -> bool {
        true
    }

    fn countries(&self) -> Vec<String> {
        vec!["DE".to_owned()]
    }

    fn supports_pkce(&self) -> bool {
        false
    }

    async fn institutions(&self, country: &str) -> Result<Vec<Institution>, ProviderError> {
        Ok(vec![Institution {
            id: "bank-1".to_owned(),
            name: "Bank One".to_owned(),
            country: country.to_owned(),
            logo_url: None,
            max_consent_days: Some(90),
        }])
    }

    fn authorization_url(
        &self,
        request: &AuthorizationRequest<'_>,
    ) -> Result<String, ProviderError> {
        let previous = request
            .reauthorizing
            .and_then(|credentials| credentials.secret.as_str())
            .unwrap_or("none");
        Ok(format!(
            "https://bank.example/authorize?institution={}&previous={previous}&state={}",
            request.institution_id.unwrap_or("none"),
            request.state
        ))
    }

    async fn exchange_code(
        &self,
        code: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<ProviderCredentials, ProviderError> {
        Ok(ProviderCredentials::lasting(ProviderSecret::from_string(
            code,
        )))
    }

    async fn disconnect(&self, credentials: &ProviderCredentials) -> Result<(), ProviderError> {
        let secret = credentials.secret.as_str().unwrap_or_default().to_owned();
        let failing = secret.starts_with("fail-");
        *DISCONNECTED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(secret)
            .or_default() += 1;
        if failing {
            return Err(ProviderError::Http(
                "the session could not be ended".to_owned(),
            ));
        }
        Ok(())
    }

    async fn accounts(
        &self,
        _: &ProviderCredentials,
    ) -> Result<Fetched<NewAccount>, ProviderError> {
        Ok(Fetched {
            items: Vec::new(),
            errors: Vec::new(),
        })
    }

    async fn transactions(
        &self,
        _: &ProviderCredentials,
        _: &str,
        _: DateRange,
    ) -> Result<Fetched<NewTransaction>, ProviderError> {
        Ok(Fetched {
            items: Vec::new(),
            errors: Vec::new(),
        })
    }

    async fn holdings(
        &self,
        _: &ProviderCredentials,
        _: &str,
    ) -> Result<Fetched<NewHolding>, ProviderError> {
        Ok(Fetched {
            items: Vec::new(),
            errors: Vec::new(),
        })
    }
}

fn with_recorder(builder: AggregationServiceBuilder) -> AggregationServiceBuilder {
    builder.provider(Recorder)
}

fn recorder() -> Setup {
    let mut setup = aggregation_tests::sandbox_setup();
    setup.sandbox = None;
    setup.builder_hook = Some(with_recorder);
    setup
}

/// Connects the recorder for the user with the institution; the provider's secret is `code`.
async fn connect_recorder(app: &TestApp, token: &str, alias: &str, code: &str) -> Value {
    let started = app
        .post(
            "/api/v1/providers",
            &json!({"provider_slug": "recorder", "alias": alias, "institution_id": "bank-1"}),
            Some(token),
        )
        .await
        .expect(201);
    let url = started["authorization_url"].as_str().expect("url");
    assert!(url.contains("institution=bank-1"), "{url}");
    assert!(url.contains("previous=none"), "{url}");
    let state = started["state"].as_str().expect("state");
    callback(app, &format!("?code={code}&state={state}"))
        .await
        .expect(201)
}

/// The institution chosen reaches the provider's authorization address; a reauthorization
/// hands it the connection's credentials; a disconnect asks the provider to end them once,
/// and a provider that fails to does not stop the disconnect.
async fn providers_get_institutions_credentials_and_disconnects(app: TestApp) {
    let (_, token, _) = app.user("recorder@example.com").await;
    assert_eq!(
        app.get("/api/v1/supported-providers", Some(&token))
            .await
            .expect(200)["providers"][0]["connect"],
        json!(ConnectMethod::OAuth.as_str())
    );
    let secret = format!("ok-{}", uuid::Uuid::new_v4().simple());
    let connection = connect_recorder(&app, &token, "First", &secret).await;

    let again = app
        .post(
            &format!("/api/v1/providers/{}/reauthorizations", id(&connection)),
            &json!({}),
            Some(&token),
        )
        .await
        .expect(201);
    let url = again["authorization_url"].as_str().expect("url");
    assert!(url.contains(&format!("previous={secret}")), "{url}");

    let path = format!("/api/v1/providers/{}", id(&connection));
    app.delete(&path, None, Some(&token)).await.expect(204);
    assert_eq!(disconnects_once_called(&secret).await, 1);
    app.delete(&path, None, Some(&token)).await.expect(204);
    assert_eq!(disconnects_of(&secret), 1, "ended once");

    let failing = format!("fail-{}", uuid::Uuid::new_v4().simple());
    let connection = connect_recorder(&app, &token, "Second", &failing).await;
    let path = format!("/api/v1/providers/{}", id(&connection));
    app.delete(&path, None, Some(&token)).await.expect(204);
    assert_eq!(disconnects_once_called(&failing).await, 1);
    let gone = app.get(&path, Some(&token)).await.expect(200);
    assert_eq!(gone["status"], "disconnected");
}

mod embedded {
    use super::*;
    conformance!(setup = recorder; providers_get_institutions_credentials_and_disconnects);
}
