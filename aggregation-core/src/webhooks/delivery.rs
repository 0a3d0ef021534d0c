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
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt as _};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

use super::open_secret;
use super::signing::SigningSecrets;
use super::ssrf::{WebhookHost, may_connect, webhook_host};
use crate::config::Config;
use crate::dates;
use crate::events::{EventBus, WeakEventBus};
use crate::outbound::describe_request_error;
use crate::store::{
    ClaimedDelivery, DeliveryClaim, NextDelivery, Store, StoreError, WebhookAttempt, now,
};

/// Most deliveries in flight at once on this instance, every endpoint together.
pub(crate) const MAX_IN_FLIGHT: usize = 64;
/// Most deliveries of one endpoint in flight at once (on every instance together: the claim
/// counts leases), so a slow endpoint holds at most this many sending slots.
pub(crate) const PER_ENDPOINT_IN_FLIGHT: u32 = 2;
/// Time to connect to a receiver.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time for a receiver's whole answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a claim holds a delivery: longer than its attempt can take (a delivery is claimed
/// only when a slot is free to send it at once, and recorded as soon as it is answered), so
/// no other claimer sends it meanwhile.
const CLAIM_LEASE: Duration = Duration::from_secs(REQUEST_TIMEOUT.as_secs() + 45);
/// How long one pass goes on claiming. An endpoint with a long queue that answers slowly is
/// served two at a time; without this bound the pass (and the job run it is) would last as
/// long as that queue. Afterwards the pass only finishes what is in flight, and the next pass
/// (the job's next run, or the next commit's) takes over.
const PASS_CLAIMS_FOR: Duration = Duration::from_secs(30);
/// How soon a pass that found every sending slot taken (by another pass on this instance)
/// looks again.
const SLOT_POLL: Duration = Duration::from_millis(50);
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
        secret: &SigningSecrets,
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

/// The sending side the job and the passes after commits share: the guarded client, this
/// instance's sending slots ([`MAX_IN_FLIGHT`]), and the bus `webhook.disabled` events are
/// published on. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Deliverer {
    sender: Sender,
    slots: Arc<Semaphore>,
    bus: Arc<OnceLock<WeakEventBus>>,
}

impl Deliverer {
    /// Sends with `sender`.
    pub(crate) fn new(sender: Sender) -> Self {
        Self {
            sender,
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            bus: Arc::default(),
        }
    }

    /// Publishes the events delivery raises on `bus` (the service's) from now on, every
    /// clone included; without keeping the bus alive. A second bus is ignored.
    pub(crate) fn publish_on(&self, bus: &EventBus) {
        let _ = self.bus.set(bus.downgrade());
    }

    /// Every sending slot free right now, taken.
    fn free_slots(&self) -> Vec<OwnedSemaphorePermit> {
        std::iter::from_fn(|| self.slots.clone().try_acquire_owned().ok()).collect()
    }
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
    /// How many deliveries the run attempted (each once).
    pub(crate) fn attempted(&self) -> u32 {
        self.delivered + self.retrying + self.given_up
    }

    fn count(&mut self, attempts: &[WebhookAttempt]) {
        for attempt in attempts {
            match attempt.next {
                NextDelivery::Delivered => self.delivered += 1,
                NextDelivery::RetryAt(_) => self.retrying += 1,
                NextDelivery::GiveUp => self.given_up += 1,
            }
        }
    }
}

/// How a pass after commits hears of more work and of the stop.
pub(crate) struct Wake<'a> {
    /// Signalled when an event with deliveries was committed.
    pub(crate) more: &'a Notify,
    /// Changes when the jobs stop.
    pub(crate) stop: watch::Receiver<bool>,
}

/// Resolves when `more` is signalled, or never without it.
async fn more_work(more: Option<&Notify>) {
    match more {
        Some(more) => more.notified().await,
        None => std::future::pending().await,
    }
}

/// Resolves when `stop` changes, or never without it.
async fn stopping(stop: Option<&mut watch::Receiver<bool>>) {
    match stop {
        // An error: the sender is gone, which stops too.
        Some(stop) => {
            let _ = stop.changed().await;
        }
        None => std::future::pending().await,
    }
}

/// A delivery pass: claims due deliveries as sending slots and endpoint caps allow, sends each
/// at once, records each attempt as soon as it is answered, and claims again whenever a slot
/// frees (so one endpoint's next delivery, or another endpoint's, goes out while a slow
/// endpoint still holds its two). It never waits for a slow endpoint before claiming for the
/// others, and it ends once nothing it claimed is in flight and nothing more can be claimed.
///
/// Each delivery is attempted at most once per pass: only deliveries due when the pass
/// started are claimed (a failed one is due again later), unless `wake` reports newly
/// committed events, which moves that horizon to the present. A pass claims for at most
/// [`PASS_CLAIMS_FOR`], then finishes what is in flight. The job runs without `wake`;
/// the pass after commits with it, and stops claiming once `wake.stop` changes (what is in
/// flight is still recorded).
///
/// Concurrent passes (the job, the pass after commits, other instances) each send only what
/// they claimed: the claim leases every row it returns.
pub(crate) async fn deliver_due(
    store: &dyn Store,
    config: &Config,
    deliverer: &Deliverer,
    wake: Option<Wake<'_>>,
) -> Result<DeliveryRun, StoreError> {
    let (more, mut stop) = match wake {
        Some(Wake { more, stop }) => (Some(more), Some(stop)),
        None => (None, None),
    };
    let mut run = DeliveryRun::default();
    let claim_until = tokio::time::Instant::now() + PASS_CLAIMS_FOR;
    let mut due_by = now();
    let mut in_flight = FuturesUnordered::new();
    let mut claim = true;
    let mut stopped = false;
    // Every slot was taken when the pass last tried to claim: it looks again shortly rather
    // than end with due deliveries unclaimed.
    let mut starved = false;
    loop {
        // Once it stops claiming, the pass leaves the requests of later commits to the next.
        let claiming = !stopped && tokio::time::Instant::now() < claim_until;
        if claim && claiming {
            claim = false;
            let mut slots = deliverer.free_slots();
            starved = slots.is_empty();
            if !starved {
                let at = now();
                let claimed = store
                    .claim_webhook_deliveries(&DeliveryClaim {
                        now: at,
                        due_by,
                        lease_until: dates::later(at, dates::delta(CLAIM_LEASE)),
                        limit: u32::try_from(slots.len()).unwrap_or(u32::MAX),
                        per_endpoint: PER_ENDPOINT_IN_FLIGHT,
                    })
                    .await;
                match claimed {
                    Ok(claimed) => {
                        for delivery in claimed {
                            let Some(slot) = slots.pop() else { break };
                            in_flight.push(sending(config, &deliverer.sender, delivery, slot));
                        }
                    }
                    // Nothing of ours in flight: nothing lost, the caller hears of it.
                    Err(error) if in_flight.is_empty() => return Err(error),
                    // What is in flight is still recorded; the next pass claims again.
                    Err(error) => {
                        tracing::warn!(error = %error, "claiming webhook deliveries failed");
                    }
                }
            }
        }
        if in_flight.is_empty() && !(starved && claiming) {
            return Ok(run);
        }
        tokio::select! {
            Some(first) = in_flight.next() => {
                // Whatever else finished meanwhile is recorded in the same transaction.
                let mut finished = vec![first];
                while let Some(Some(attempt)) = in_flight.next().now_or_never() {
                    finished.push(attempt);
                }
                record(store, config, deliverer, &finished).await?;
                run.count(&finished);
                claim = true;
            }
            () = more_work(more), if claiming => {
                due_by = now();
                claim = true;
            }
            () = tokio::time::sleep(SLOT_POLL), if starved && claiming => claim = true,
            () = stopping(stop.as_mut()), if !stopped => stopped = true,
        }
    }
}

/// One delivery sent while it holds its sending slot.
async fn sending(
    config: &Config,
    sender: &Sender,
    delivery: ClaimedDelivery,
    slot: OwnedSemaphorePermit,
) -> WebhookAttempt {
    let attempt = attempt(config, sender, delivery).await;
    drop(slot);
    attempt
}

/// Records finished attempts (an endpoint failing for too long is disabled on the way) and
/// publishes the events that raised. Should recording fail, the leases lapse and the
/// deliveries are sent again (at least once).
async fn record(
    store: &dyn Store,
    config: &Config,
    deliverer: &Deliverer,
    attempts: &[WebhookAttempt],
) -> Result<(), StoreError> {
    let disable_failing_since = dates::earlier(now(), dates::delta(config.webhook_disable_after()));
    let raised = store
        .record_webhook_attempts(attempts, disable_failing_since)
        .await?;
    for event in &raised {
        tracing::warn!(
            user_id = ?event.user_id,
            data = %event.data,
            "webhook endpoint disabled after failing every attempt"
        );
    }
    if !raised.is_empty()
        && let Some(bus) = deliverer.bus.get().and_then(WeakEventBus::upgrade)
    {
        bus.publish(&raised);
    }
    Ok(())
}

/// The secrets that sign a delivery: the endpoint's current one, and the previous one while
/// it still signs. A previous secret that cannot be read is left out (the current one signs).
fn secrets(
    config: &Config,
    delivery: &ClaimedDelivery,
) -> Result<SigningSecrets, crate::crypto::CryptoError> {
    let current = open_secret(
        config,
        delivery.endpoint_id,
        &delivery.secret_key_id,
        &delivery.encrypted_secret,
    )?;
    let previous = delivery
        .previous_secret
        .as_ref()
        .and_then(|(ciphertext, key_id)| {
            open_secret(config, delivery.endpoint_id, key_id, ciphertext)
                .inspect_err(|error| {
                    tracing::warn!(endpoint_id = %delivery.endpoint_id, error = %error,
                        "previous webhook secret unreadable");
                })
                .ok()
        });
    Ok(SigningSecrets { current, previous })
}

/// One attempt at one delivery: what to record.
async fn attempt(config: &Config, sender: &Sender, delivery: ClaimedDelivery) -> WebhookAttempt {
    let result = match secrets(config, &delivery) {
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
                previous_secret: None,
            };
            let error = sender
                .send(
                    &delivery,
                    &SigningSecrets {
                        current: super::super::signing::SigningSecret::generate(),
                        previous: None,
                    },
                )
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
