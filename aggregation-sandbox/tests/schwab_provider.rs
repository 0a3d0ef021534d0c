//! `SchwabProvider` (of aggregation-core) against the sandbox over real HTTP: the flows and the
//! answer mapping, as a host wires them.

use std::convert::Infallible;
use std::str::FromStr as _;

use aggregation_core::SchwabProvider;
use aggregation_core::providers::{
    AuthorizationRequest, DateRange, Provider as _, ProviderCredentials, ProviderError,
    ProviderSecret,
};
use aggregation_core::store::{AccountType, AssetType, TransactionStatus, TransactionType};
use aggregation_sandbox::SchwabSandbox;
use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rust_decimal::Decimal;
use tokio::net::TcpListener;
use url::Url;

const REDIRECT_URI: &str = "https://app.example/callback";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

/// Serves a tower service on 127.0.0.1 and answers its base URL.
async fn serve<S>(service: S) -> String
where
    S: tower::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<Full<Bytes>>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("loopback bind");
    let address = listener.local_addr().expect("bound address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    format!("http://{address}")
}

async fn sandbox_provider() -> (SchwabSandbox, SchwabProvider) {
    let sandbox = SchwabSandbox::new();
    let base = serve(sandbox.clone()).await;
    let provider = SchwabProvider::new(sandbox.config(base)).expect("sandbox provider");
    (sandbox, provider)
}

/// A field of the Schwab provider's secret (`access_token`, `refresh_token`, `scope`).
fn secret_field(credentials: &ProviderCredentials, name: &str) -> Option<String> {
    credentials.secret.as_json()[name]
        .as_str()
        .map(str::to_owned)
}

/// Schwab credentials holding these tokens.
fn schwab_credentials(access_token: &str, refresh_token: &str) -> ProviderCredentials {
    ProviderCredentials {
        secret: ProviderSecret::from_json(serde_json::json!({
            "access_token": access_token,
            "refresh_token": refresh_token,
        })),
        renew_at: None,
        consent_expires_at: None,
    }
}

async fn connect(sandbox: &SchwabSandbox, provider: &SchwabProvider) -> ProviderCredentials {
    let code = sandbox.issue_code(REDIRECT_URI, Some(CHALLENGE));
    provider
        .exchange_code(&code, REDIRECT_URI, Some(VERIFIER))
        .await
        .expect("code exchange")
}

fn dec(text: &str) -> Decimal {
    Decimal::from_str(text).expect("a decimal")
}

#[tokio::test]
async fn authorize_then_exchange_with_pkce() {
    let (sandbox, provider) = sandbox_provider().await;
    assert!(provider.supports_pkce());
    assert_eq!(provider.slug(), "schwab-sandbox");
    let address = provider
        .authorization_url(
            &AuthorizationRequest::new("state-123", REDIRECT_URI)
                .with_pkce_challenge(Some(CHALLENGE)),
        )
        .unwrap();
    // The user agent visits the address; the sandbox consents and redirects at once.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = client.get(&address).send().await.unwrap();
    assert_eq!(response.status(), http::StatusCode::FOUND);
    let location =
        Url::parse(response.headers()[http::header::LOCATION].to_str().unwrap()).unwrap();
    assert!(location.as_str().starts_with(REDIRECT_URI));
    let pairs: std::collections::HashMap<String, String> =
        location.query_pairs().into_owned().collect();
    assert_eq!(pairs["state"], "state-123");

    let before = Utc::now();
    let tokens = provider
        .exchange_code(&pairs["code"], REDIRECT_URI, Some(VERIFIER))
        .await
        .unwrap();
    assert!(!secret_field(&tokens, "access_token").unwrap().is_empty());
    assert!(secret_field(&tokens, "refresh_token").is_some());
    assert_eq!(secret_field(&tokens, "scope").as_deref(), Some("api"));
    assert!(!format!("{tokens:?}").contains(&secret_field(&tokens, "access_token").unwrap()));
    let lifetime = tokens.renew_at.unwrap() - before;
    assert!(
        lifetime > TimeDelta::seconds(1790) && lifetime <= TimeDelta::seconds(1801),
        "{lifetime}"
    );
    assert_eq!(sandbox.token_requests(), 1);
    // The tokens work.
    let accounts = provider.accounts(&tokens).await.unwrap();
    assert_eq!(accounts.items.len(), 2);

    // The code is single-use.
    let reused = provider
        .exchange_code(&pairs["code"], REDIRECT_URI, Some(VERIFIER))
        .await;
    assert!(
        matches!(reused, Err(ProviderError::InvalidGrant(_))),
        "{reused:?}"
    );
}

#[tokio::test]
async fn wrong_or_missing_verifier_and_wrong_redirect_are_invalid_grants() {
    let (sandbox, provider) = sandbox_provider().await;
    let code = sandbox.issue_code(REDIRECT_URI, Some(CHALLENGE));
    let wrong = provider
        .exchange_code(
            &code,
            REDIRECT_URI,
            Some("wrong-verifier-wrong-verifier-wrong-verifier"),
        )
        .await;
    assert!(
        matches!(wrong, Err(ProviderError::InvalidGrant(_))),
        "{wrong:?}"
    );

    let code = sandbox.issue_code(REDIRECT_URI, Some(CHALLENGE));
    let missing = provider.exchange_code(&code, REDIRECT_URI, None).await;
    assert!(
        matches!(missing, Err(ProviderError::InvalidGrant(_))),
        "{missing:?}"
    );

    let code = sandbox.issue_code(REDIRECT_URI, None);
    let other = provider
        .exchange_code(&code, "https://elsewhere.example/cb", None)
        .await;
    assert!(
        matches!(other, Err(ProviderError::InvalidGrant(_))),
        "{other:?}"
    );

    let unknown = provider.exchange_code("made-up", REDIRECT_URI, None).await;
    let Err(ProviderError::InvalidGrant(message)) = unknown else {
        panic!("{unknown:?}")
    };
    assert_eq!(message, "unknown authorization code");
}

#[tokio::test]
async fn wrong_client_secret_is_an_http_error() {
    let sandbox = SchwabSandbox::new();
    let base = serve(sandbox.clone()).await;
    let mut config = sandbox.config(base);
    config.client_secret = "not-the-secret".to_owned();
    let provider = SchwabProvider::new(config).unwrap();
    let code = sandbox.issue_code(REDIRECT_URI, None);
    let result = provider.exchange_code(&code, REDIRECT_URI, None).await;
    let Err(ProviderError::Http(message)) = result else {
        panic!("{result:?}")
    };
    assert!(message.contains("invalid_client"), "{message}");
}

#[tokio::test]
async fn refresh_rotates_and_revoked_is_an_invalid_grant() {
    let (sandbox, provider) = sandbox_provider().await;
    let first = connect(&sandbox, &provider).await;
    let old_refresh = secret_field(&first, "refresh_token").unwrap();
    let second = provider.renew_credentials(&first).await.unwrap();
    assert_ne!(
        secret_field(&second, "access_token"),
        secret_field(&first, "access_token")
    );
    let new_refresh = secret_field(&second, "refresh_token").unwrap();
    assert_ne!(new_refresh, old_refresh);
    provider.accounts(&second).await.unwrap();
    // The rotated-out token no longer works.
    let stale = provider.renew_credentials(&first).await;
    assert!(
        matches!(stale, Err(ProviderError::InvalidGrant(_))),
        "{stale:?}"
    );

    sandbox.revoke_refresh_tokens();
    let revoked = provider
        .renew_credentials(&schwab_credentials("made-up", &new_refresh))
        .await;
    assert!(
        matches!(revoked, Err(ProviderError::InvalidGrant(_))),
        "{revoked:?}"
    );
    assert_eq!(sandbox.token_requests(), 4);
}

#[tokio::test]
async fn accounts_map_from_the_sandbox() {
    let (sandbox, provider) = sandbox_provider().await;
    let tokens = connect(&sandbox, &provider).await;
    let fetched = provider.accounts(&tokens).await.unwrap();
    assert!(fetched.errors.is_empty(), "{:?}", fetched.errors);
    let hashes = sandbox.account_hashes();
    let [margin, cash] = fetched.items.as_slice() else {
        panic!("{:?}", fetched.items)
    };
    assert_eq!(margin.provider_account_id, hashes[0]);
    assert_eq!(margin.account_number.as_deref(), Some("12345678"));
    assert_eq!(margin.name, "Schwab Brokerage ****5678");
    assert_eq!(margin.account_type, AccountType::Brokerage);
    assert_eq!(margin.currency, "USD");
    // Cash 2500.75 + AAPL 50 × 190.12 + VTI 20 × 245.50 + SWVXX 1000.5 × 1.
    assert_eq!(margin.balance_amount.to_string(), "17917.25");
    assert_eq!(
        margin.available_balance_amount.unwrap().to_string(),
        "2500.75"
    );
    assert_eq!(cash.provider_account_id, hashes[1]);
    assert_eq!(cash.name, "Schwab Brokerage ****4321");
    assert_eq!(cash.balance_amount.to_string(), "5404.5");
    assert_eq!(cash.available_balance_amount, Some(dec("1200")));
}

#[tokio::test]
async fn holdings_map_from_the_sandbox() {
    let (sandbox, provider) = sandbox_provider().await;
    let tokens = connect(&sandbox, &provider).await;
    let hashes = sandbox.account_hashes();
    let fetched = provider.holdings(&tokens, &hashes[0]).await.unwrap();
    assert!(fetched.errors.is_empty(), "{:?}", fetched.errors);
    let [aapl, vti, swvxx] = fetched.items.as_slice() else {
        panic!("{:?}", fetched.items)
    };
    assert_eq!(aapl.provider_holding_id, "037833100");
    assert_eq!(aapl.symbol, "AAPL");
    assert_eq!(aapl.asset_type, AssetType::Equity);
    assert_eq!(aapl.quantity, dec("50"));
    assert_eq!(aapl.average_price.unwrap().to_string(), "150.25");
    assert_eq!(aapl.cost_basis.unwrap().to_string(), "7512.5");
    assert_eq!(aapl.market_value.to_string(), "9506");
    assert_eq!(aapl.current_price.unwrap().to_string(), "190.12");
    assert_eq!(aapl.unrealized_gain_loss.unwrap().to_string(), "1993.5");
    assert_eq!(vti.asset_type, AssetType::Etf);
    assert_eq!(vti.current_price.unwrap().to_string(), "245.5");
    assert_eq!(swvxx.asset_type, AssetType::CashEquivalent);
    assert_eq!(swvxx.quantity.to_string(), "1000.5");

    assert!(sandbox.remove_position("VTI"));
    assert!(sandbox.set_position_quantity("AAPL", dec("12.345")));
    let fetched = provider.holdings(&tokens, &hashes[0]).await.unwrap();
    let symbols: Vec<&str> = fetched.items.iter().map(|h| h.symbol.as_str()).collect();
    assert_eq!(symbols, ["AAPL", "SWVXX"]);
    assert_eq!(fetched.items[0].quantity.to_string(), "12.345");

    let cash = provider.holdings(&tokens, &hashes[1]).await.unwrap();
    assert_eq!(cash.items.len(), 1);
    assert_eq!(cash.items[0].symbol, "MSFT");

    let unknown = provider.holdings(&tokens, "NOT-A-HASH").await;
    assert!(
        matches!(unknown, Err(ProviderError::InvalidResponse(_))),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn transactions_map_and_filter_by_date() {
    let (sandbox, provider) = sandbox_provider().await;
    let tokens = connect(&sandbox, &provider).await;
    let hashes = sandbox.account_hashes();
    let today = Utc::now().date_naive();
    let range = |from: i64, to: i64| DateRange {
        start: today - TimeDelta::days(from),
        end: today - TimeDelta::days(to),
    };
    let all = provider
        .transactions(&tokens, &hashes[0], range(60, 0))
        .await
        .unwrap();
    assert!(all.errors.is_empty(), "{:?}", all.errors);
    assert_eq!(all.items.len(), 5);
    let by_id = |id: &str| {
        all.items
            .iter()
            .find(|t| t.provider_transaction_id == id)
            .unwrap()
    };
    let buy = by_id("90000002");
    assert_eq!(buy.transaction_type, TransactionType::Trade);
    assert_eq!(buy.subtype.as_deref(), Some("BUY"));
    assert_eq!(buy.status, TransactionStatus::Settled);
    assert_eq!(buy.amount.to_string(), "-1855.65");
    assert_eq!(buy.symbol.as_deref(), Some("AAPL"));
    assert_eq!(buy.security_name.as_deref(), Some("APPLE INC"));
    assert_eq!(buy.quantity, Some(dec("10")));
    assert_eq!(buy.unit_price.unwrap().to_string(), "185.5");
    assert_eq!(buy.commission.unwrap().to_string(), "0.65");
    assert_eq!(buy.transaction_date, today - TimeDelta::days(40));
    assert_eq!(buy.settlement_date, Some(today - TimeDelta::days(39)));
    let sell = by_id("90000004");
    assert_eq!(sell.subtype.as_deref(), Some("SELL"));
    assert_eq!(sell.quantity, Some(dec("-5")));
    assert_eq!(sell.amount.to_string(), "1224.99");
    assert_eq!(sell.commission.unwrap().to_string(), "0.01");
    let dividend = by_id("90000003");
    assert_eq!(dividend.transaction_type, TransactionType::Income);
    assert_eq!(dividend.symbol.as_deref(), Some("VTI"));
    assert_eq!(dividend.amount.to_string(), "32.1");
    let deposit = by_id("90000001");
    assert_eq!(deposit.transaction_type, TransactionType::Transfer);
    assert_eq!(deposit.amount, dec("5000"));
    let withdrawal = by_id("90000005");
    assert_eq!(withdrawal.status, TransactionStatus::Pending);
    assert_eq!(withdrawal.amount, dec("-500"));

    // The range is inclusive on both days.
    let window = provider
        .transactions(&tokens, &hashes[0], range(40, 20))
        .await
        .unwrap();
    let mut ids: Vec<&str> = window
        .items
        .iter()
        .map(|t| t.provider_transaction_id.as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["90000002", "90000003"]);
    let empty = provider
        .transactions(&tokens, &hashes[0], range(100, 70))
        .await
        .unwrap();
    assert!(empty.items.is_empty());
    let backwards = provider
        .transactions(&tokens, &hashes[0], range(0, 60))
        .await
        .unwrap();
    assert!(backwards.items.is_empty());

    assert!(sandbox.add_transaction(1, 424_242, dec("123.45"), "TEST DEPOSIT"));
    let cash = provider
        .transactions(&tokens, &hashes[1], range(0, 0))
        .await
        .unwrap();
    assert_eq!(cash.items.len(), 1);
    assert_eq!(cash.items[0].provider_transaction_id, "424242");
    assert_eq!(cash.items[0].amount.to_string(), "123.45");
    assert_eq!(cash.items[0].description.as_deref(), Some("TEST DEPOSIT"));
}

#[tokio::test]
async fn expired_or_unknown_access_tokens_are_unauthorized() {
    let (sandbox, provider) = sandbox_provider().await;
    let tokens = connect(&sandbox, &provider).await;
    let hash = sandbox.account_hashes()[0].clone();
    let unknown = provider
        .accounts(&schwab_credentials("not-a-token", "none"))
        .await;
    assert!(
        matches!(unknown, Err(ProviderError::Unauthorized)),
        "{unknown:?}"
    );
    sandbox.expire_access_tokens();
    let accounts = provider.accounts(&tokens).await;
    assert!(
        matches!(accounts, Err(ProviderError::Unauthorized)),
        "{accounts:?}"
    );
    let holdings = provider.holdings(&tokens, &hash).await;
    assert!(
        matches!(holdings, Err(ProviderError::Unauthorized)),
        "{holdings:?}"
    );
    let today = Utc::now().date_naive();
    let range = DateRange {
        start: today,
        end: today,
    };
    let transactions = provider.transactions(&tokens, &hash, range).await;
    assert!(
        matches!(transactions, Err(ProviderError::Unauthorized)),
        "{transactions:?}"
    );
    // A refresh brings access back.
    let refreshed = provider.renew_credentials(&tokens).await.unwrap();
    provider.accounts(&refreshed).await.unwrap();
}

#[tokio::test]
async fn failing_data_endpoints_are_http_errors() {
    let (sandbox, provider) = sandbox_provider().await;
    let tokens = connect(&sandbox, &provider).await;
    sandbox.set_failing(true);
    let result = provider.accounts(&tokens).await;
    let Err(ProviderError::Http(message)) = result else {
        panic!("{result:?}")
    };
    assert!(message.contains("500"), "{message}");
    sandbox.set_failing(false);
    provider.accounts(&tokens).await.unwrap();
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let sandbox = SchwabSandbox::new();
    let sandbox_base = serve(sandbox.clone()).await;
    // Everything at this server redirects (307 keeps the method and body) to the sandbox.
    let redirector = tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let target = format!("{sandbox_base}{}", request.uri());
        async move {
            let mut response = http::Response::new(Full::new(Bytes::new()));
            *response.status_mut() = http::StatusCode::TEMPORARY_REDIRECT;
            response.headers_mut().insert(
                http::header::LOCATION,
                http::HeaderValue::from_str(&target).unwrap(),
            );
            Ok::<_, Infallible>(response)
        }
    });
    let base = serve(redirector).await;
    let provider = SchwabProvider::new(sandbox.config(base)).unwrap();
    let code = sandbox.issue_code(REDIRECT_URI, Some(CHALLENGE));
    let exchange = provider
        .exchange_code(&code, REDIRECT_URI, Some(VERIFIER))
        .await;
    let Err(ProviderError::Http(message)) = exchange else {
        panic!("{exchange:?}")
    };
    assert!(message.contains("307"), "{message}");
    assert_eq!(sandbox.token_requests(), 0);
    let refresh = provider
        .renew_credentials(&schwab_credentials("made-up", "anything"))
        .await;
    assert!(
        matches!(refresh, Err(ProviderError::Http(_))),
        "{refresh:?}"
    );
    assert_eq!(sandbox.token_requests(), 0);

    // A data call is not followed either, so the bearer token never leaves for elsewhere.
    let direct = SchwabProvider::new(sandbox.config(serve(sandbox.clone()).await)).unwrap();
    let tokens = connect(&sandbox, &direct).await;
    let accounts = provider.accounts(&tokens).await;
    let Err(ProviderError::Http(message)) = accounts else {
        panic!("{accounts:?}")
    };
    assert!(message.contains("redirect"), "{message}");
}
