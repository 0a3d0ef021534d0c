//! Sending due webhook deliveries: the work of the `deliver_webhooks` job, and of the passes
//! that start right after an event's commit (`wake.rs`).
//!
//! One HTTP client serves every delivery. Its resolver ([`GuardedResolver`]) resolves the
//! endpoint's host name and hands the connector only the addresses the SSRF rule allows, so
//! the request goes to an address that was vetted in the same step (a DNS answer that changes
//! between a check and the connection cannot slip a private address in). A literal address
//! never reaches a resolver and is checked before sending. Redirects are not followed, proxies
//! from the environment are not used, and every request is bounded by short timeouts.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt as _;

use super::ssrf::{WebhookHost, may_connect, webhook_host};
use super::{open_secret, signing::SigningSecret};
use crate::config::Config;
use crate::dates;
use crate::outbound::describe_request_error;
use crate::store::{ClaimedDelivery, NextDelivery, Store, StoreError, WebhookAttempt, now};

/// Most deliveries one run claims.
pub(crate) const BATCH: u32 = 200;
/// Deliveries sent at once within a run.
const CONCURRENCY: usize = 16;
/// Time to connect to a receiver.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for a receiver's whole answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a claim holds its deliveries: longer than a run's requests can take (every one
/// timing out), so no other run sends them meanwhile.
const CLAIM_LEASE: Duration = Duration::from_secs(
    (BATCH as u64).div_ceil(CONCURRENCY as u64) * REQUEST_TIMEOUT.as_secs() + 60,
);
/// The `User-Agent` of deliveries.
const USER_AGENT: &str = concat!("aggregation-webhooks/", env!("CARGO_PKG_VERSION"));

/// Resolves host names to the addresses the SSRF rule allows, and only those.
struct GuardedResolver {
    allow_private: bool,
}

/// Every address of a host name was refused.
#[derive(Debug, thiserror::Error)]
#[error("{0} resolves only to addresses webhooks may not reach")]
struct RefusedHost(String);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed: Vec<SocketAddr> = resolved
                .filter(|address| may_connect(address.ip(), allow_private))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(RefusedHost(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The HTTP side of deliveries: one guarded client.
#[derive(Clone)]
pub(crate) struct Sender {
    http: reqwest::Client,
    allow_private: bool,
}

impl Sender {
    /// A client that reaches only what `config` allows.
    pub(crate) fn new(config: &Config) -> Result<Self, String> {
        let allow_private = config.webhook_allow_private();
        let http = reqwest::Client::builder()
            .dns_resolver(GuardedResolver { allow_private })
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(USER_AGENT)
            .build()
            .map_err(|error| describe_request_error(&error))?;
        Ok(Self {
            http,
            allow_private,
        })
    }

    /// POSTs one signed delivery: the answer's status, or why none came.
    async fn send(
        &self,
        delivery: &ClaimedDelivery,
        secret: &SigningSecret,
    ) -> Result<u16, String> {
        if let Ok(WebhookHost::Ip(ip)) = webhook_host(&delivery.url)
            && !may_connect(ip, self.allow_private)
        {
            return Err(format!("{ip} is not an address webhooks may reach"));
        }
        let id = delivery.event_id.to_string();
        let timestamp = chrono::Utc::now().timestamp();
        let signature = secret.sign(&id, timestamp, delivery.payload.as_bytes());
        let response = self
            .http
            .post(&delivery.url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(delivery.payload.clone())
            .send()
            .await
            .map_err(|error| describe_request_error(&error))?;
        Ok(response.status().as_u16())
    }
}

/// The wait before attempt `next_attempt` (2 for the first retry): the first retry delay,
/// doubled for each later attempt, at most the longest delay.
pub(crate) fn retry_delay(config: &Config, next_attempt: i32) -> Duration {
    let doublings = u32::try_from(next_attempt.saturating_sub(2))
        .unwrap_or(0)
        .min(30);
    config
        .webhook_first_retry()
        .saturating_mul(1 << doublings)
        .min(config.webhook_max_retry_delay())
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DeliveryRun {
    /// Answered 2xx.
    pub(crate) delivered: u32,
    /// Failed and due again later.
    pub(crate) retrying: u32,
    /// Failed past the maximum age: given up.
    pub(crate) given_up: u32,
}

impl DeliveryRun {
    /// How many deliveries the run claimed (each had one attempt).
    pub(crate) fn claimed(&self) -> u32 {
        self.delivered + self.retrying + self.given_up
    }
}

/// Claims the due deliveries (at most [`BATCH`]), sends them, and records every attempt.
/// Concurrent callers (the job, wake passes, other instances) each send only what they
/// claimed: the claim leases every row it returns.
pub(crate) async fn deliver_due(
    store: &dyn Store,
    config: &Config,
    sender: &Sender,
) -> Result<DeliveryRun, StoreError> {
    let at = now();
    let claimed = store
        .claim_webhook_deliveries(at, dates::later(at, dates::delta(CLAIM_LEASE)), BATCH)
        .await?;
    let attempts: Vec<WebhookAttempt> = futures_util::stream::iter(claimed)
        .map(|delivery| attempt(config, sender, delivery))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    // Recorded together; should that fail, the claims' leases lapse and the deliveries are
    // sent again (at least once).
    store.record_webhook_attempts(&attempts).await?;
    let mut run = DeliveryRun::default();
    for attempt in &attempts {
        match attempt.next {
            NextDelivery::Delivered => run.delivered += 1,
            NextDelivery::RetryAt(_) => run.retrying += 1,
            NextDelivery::GiveUp => run.given_up += 1,
        }
    }
    Ok(run)
}

/// One attempt at one delivery: what to record.
async fn attempt(config: &Config, sender: &Sender, delivery: ClaimedDelivery) -> WebhookAttempt {
    let result = match open_secret(
        config,
        delivery.endpoint_id,
        &delivery.secret_key_id,
        &delivery.encrypted_secret,
    ) {
        Ok(secret) => sender.send(&delivery, &secret).await,
        Err(error) => {
            tracing::error!(endpoint_id = %delivery.endpoint_id, error = %error, "webhook secret unreadable");
            Err("the endpoint's secret could not be read".to_owned())
        }
    };
    let attempted_at = now();
    let (status_code, error) = match result {
        Ok(status) => (Some(status), None),
        Err(error) => (None, Some(error)),
    };
    let expires = dates::later(delivery.created_at, dates::delta(config.webhook_max_age()));
    let next = if status_code.is_some_and(|status| (200..300).contains(&status)) {
        NextDelivery::Delivered
    } else {
        let retry_at = dates::later(
            attempted_at,
            dates::delta(retry_delay(config, delivery.attempt_count + 2)),
        );
        if retry_at > expires {
            NextDelivery::GiveUp
        } else {
            NextDelivery::RetryAt(retry_at)
        }
    };
    if next != NextDelivery::Delivered {
        tracing::info!(
            endpoint_id = %delivery.endpoint_id,
            event_id = %delivery.event_id,
            status = ?status_code,
            error = error.as_deref().unwrap_or(""),
            given_up = next == NextDelivery::GiveUp,
            "webhook delivery failed"
        );
    }
    WebhookAttempt {
        endpoint_id: delivery.endpoint_id,
        event_id: delivery.event_id,
        attempted_at,
        status_code,
        error,
        next,
    }
}

#[cfg(test)]
mod tests {
    use reqwest::dns::Resolve as _;

    use super::*;

    #[tokio::test]
    async fn the_resolver_hands_out_only_allowed_addresses() {
        let name = |host: &str| host.parse::<reqwest::dns::Name>().expect("a host name");
        let refused = GuardedResolver {
            allow_private: false,
        }
        .resolve(name("localhost"))
        .await;
        let Err(error) = refused else {
            panic!("localhost must not resolve for webhooks");
        };
        assert!(error.to_string().contains("localhost"), "{error}");
        let allowed: Vec<SocketAddr> = GuardedResolver {
            allow_private: true,
        }
        .resolve(name("localhost"))
        .await
        .map_err(|error| error.to_string())
        .expect("allowed")
        .collect();
        assert!(!allowed.is_empty());
        assert!(allowed.iter().all(|address| address.ip().is_loopback()));
    }

    #[tokio::test]
    async fn literal_private_addresses_are_refused_before_sending() {
        let config = Config::new("https://api.example.com", vec![0; 32]).expect("config");
        let sender = Sender::new(&config).expect("client");
        for url in ["http://127.0.0.1:9/hooks", "http://[::ffff:10.0.0.1]/hooks"] {
            let delivery = ClaimedDelivery {
                endpoint_id: uuid::Uuid::now_v7(),
                event_id: uuid::Uuid::now_v7(),
                payload: "{}".to_owned(),
                attempt_count: 0,
                created_at: now(),
                url: url.to_owned(),
                encrypted_secret: Vec::new(),
                secret_key_id: String::new(),
            };
            let error = sender
                .send(&delivery, &SigningSecret::generate())
                .await
                .expect_err("refused");
            assert!(
                error.contains("not an address webhooks may reach"),
                "{error}"
            );
        }
    }

    #[test]
    fn retries_back_off_exponentially_up_to_the_longest_delay() {
        let config = Config::new("https://api.example.com", vec![0; 32]).expect("config");
        let delays: Vec<u64> = (2..=12)
            .map(|attempt| retry_delay(&config, attempt).as_secs())
            .collect();
        assert_eq!(
            delays,
            [10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600]
        );
        assert_eq!(retry_delay(&config, i32::MAX).as_secs(), 3600);
        let immediate = config.with_webhook_retry_delays(Duration::ZERO, Duration::from_secs(60));
        assert_eq!(retry_delay(&immediate, 5), Duration::ZERO);
    }
}
