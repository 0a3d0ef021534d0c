//! Sending due webhook deliveries: the work of the `deliver_webhooks` job, and of the passes
//! that start right after an event's commit (`wake.rs`).
//!
//! One HTTP client serves every delivery, and every address it dials is checked against the
//! SSRF rule (`ssrf.rs`) three times over: the URL is parsed and judged before sending, as the
//! client parses it (a literal address in any spelling); the resolver (`GuardedResolver`, in `outbound::guard`)
//! hands the connector only allowed addresses of a name; and the connector (`PeerCheck`)
//! refuses any connection whose peer address is not allowed, whatever resolved it (a DNS
//! answer that changes between a check and the connection, a row stored before the rule
//! changed). Redirects are not followed, proxies from the environment are not used, and every
//! request is bounded by short timeouts.
//!
//! What an attempt records for the user is coarse ([`DeliveryFailure`]): whether a name
//! exists, what it resolves to, or what the operating system said is logged at debug level
//! only, so the deliveries list cannot be used to probe the internal network.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt as _};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

use super::signing::SigningSecrets;
use super::{open_secret, webhook_disabled_events};
use crate::config::Config;
use crate::dates;
use crate::events::{EventBus, WeakEventBus};
use crate::outbound::describe_request_error;
use crate::outbound::guard::{GuardedResolver, PeerCheckLayer};
use crate::outbound::ssrf::check_url;
use crate::store::{
    ClaimedDelivery, DeliveryClaim, NextDelivery, Store, StoreError, WebhookAttempt, now,
};

/// Most deliveries in flight at once on this instance, every endpoint together.
pub(crate) const MAX_IN_FLIGHT: usize = 64;
/// Most deliveries of one endpoint in flight at once (on every instance together: the claim
/// counts leases), so a slow endpoint holds at most this many sending slots.
pub(crate) const PER_ENDPOINT_IN_FLIGHT: u32 = 2;
/// Most deliveries of one user's endpoints together in flight at once (on every instance
/// together), so that one user's failing or hanging endpoints, however many, hold at most
/// this many of the [`MAX_IN_FLIGHT`] slots: sixteen such users would be needed to fill an
/// instance, and every other user's first delivery is claimed by the next claim.
pub(crate) const PER_USER_IN_FLIGHT: u32 = 4;
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

/// Why an attempt did not deliver, as the deliveries list records it (`error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeliveryFailure {
    /// No connection: the name did not resolve, or only to addresses webhooks may not reach,
    /// the address is not one they may reach, the receiver refused, or TLS failed.
    ConnectFailed,
    /// No connection or no answer in time.
    Timeout,
    /// Connected, but the exchange broke off before an answer came.
    RequestFailed,
    /// The receiver answered with a status other than 2xx (recorded beside it).
    HttpStatus,
    /// The service could not sign the delivery (its secret is unreadable).
    InternalError,
}

impl DeliveryFailure {
    /// The recorded code.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ConnectFailed => "connect_failed",
            Self::Timeout => "timeout",
            Self::RequestFailed => "request_failed",
            Self::HttpStatus => "http_status",
            Self::InternalError => "internal_error",
        }
    }

    /// The failure a request error stands for.
    fn of(error: &reqwest::Error) -> Self {
        if error.is_timeout() {
            Self::Timeout
        } else if error.is_connect() {
            Self::ConnectFailed
        } else {
            Self::RequestFailed
        }
    }
}

/// A client builder with every setting of deliveries but the resolver: the connector check,
/// no proxies, no redirects, the timeouts.
fn guarded_client(allow_private: bool) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connector_layer(PeerCheckLayer { allow_private })
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(USER_AGENT)
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
        let http = guarded_client(allow_private)
            .dns_resolver(GuardedResolver { allow_private })
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
    ) -> Result<u16, DeliveryFailure> {
        // Judged again: the row may predate the rule, or the host's setting may have changed.
        let url = check_url(&delivery.url, self.allow_private).map_err(|refusal| {
            tracing::debug!(
                endpoint_id = %delivery.endpoint_id,
                refusal = refusal.code,
                "webhook URL refused before connecting"
            );
            DeliveryFailure::ConnectFailed
        })?;
        let id = delivery.event_id.to_string();
        let timestamp = chrono::Utc::now().timestamp();
        let signature = secret.sign(&id, timestamp, delivery.payload.as_bytes());
        let response = self
            .http
            .post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(delivery.payload.clone())
            .send()
            .await
            .map_err(|error| {
                tracing::debug!(
                    endpoint_id = %delivery.endpoint_id,
                    error = %describe_request_error(&error),
                    "webhook request failed"
                );
                DeliveryFailure::of(&error)
            })?;
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
                        per_user: PER_USER_IN_FLIGHT,
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
    let mut raised = Vec::new();
    store
        .record_webhook_attempts(
            attempts,
            disable_failing_since,
            &webhook_disabled_events,
            &mut raised,
        )
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
            Err(DeliveryFailure::InternalError)
        }
    };
    let attempted_at = now();
    let (status_code, failure) = match result {
        Ok(status) if (200..300).contains(&status) => (Some(status), None),
        Ok(status) => (Some(status), Some(DeliveryFailure::HttpStatus)),
        Err(failure) => (None, Some(failure)),
    };
    let error = failure.map(|failure| failure.as_str().to_owned());
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
            error = failure.map_or("", DeliveryFailure::as_str),
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
    use std::net::SocketAddr;

    use reqwest::dns::Resolve as _;

    use super::*;

    #[tokio::test]
    async fn the_resolver_hands_out_only_allowed_addresses() {
        let name = |host: &str| host.parse::<reqwest::dns::Name>().expect("a host name");
        for (host, allow_private) in [
            ("localhost", false),
            ("LOCALHOST.", false),
            ("metadata.google.internal", true),
        ] {
            let refused = GuardedResolver { allow_private }.resolve(name(host)).await;
            let Err(error) = refused else {
                panic!("{host} must not resolve for webhooks");
            };
            assert!(
                error
                    .to_string()
                    .to_ascii_lowercase()
                    .contains(&host.to_ascii_lowercase()),
                "{error}"
            );
        }
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

    /// A resolver that answers loopback for every name: what DNS rebinding looks like.
    struct AnswersLoopback;

    impl reqwest::dns::Resolve for AnswersLoopback {
        fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
            Box::pin(async {
                let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
                Ok(Box::new(std::iter::once(loopback)) as reqwest::dns::Addrs)
            })
        }
    }

    fn delivery_to(url: &str) -> ClaimedDelivery {
        ClaimedDelivery {
            endpoint_id: uuid::Uuid::now_v7(),
            event_id: uuid::Uuid::now_v7(),
            payload: "{}".to_owned(),
            attempt_count: 0,
            created_at: now(),
            url: url.to_owned(),
            encrypted_secret: Vec::new(),
            secret_key_id: String::new(),
            previous_secret: None,
        }
    }

    /// A loopback listener nobody accepts from yet: a connection attempt stays queued.
    fn idle_listener() -> (std::net::TcpListener, u16) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        (listener, port)
    }

    #[tokio::test]
    async fn refused_urls_are_not_dialled_in_any_spelling() {
        let (listener, port) = idle_listener();
        listener.set_nonblocking(true).expect("non-blocking");
        let config = Config::new("https://api.example.com", vec![0; 32]).expect("config");
        let public_only = Sender::new(&config).expect("client");
        let private_allowed =
            Sender::new(&config.clone().with_webhook_allow_private(true)).expect("client");
        let secret = SigningSecrets {
            current: super::super::signing::SigningSecret::generate(),
            previous: None,
        };
        for url in [
            format!("http://127.0.0.1:{port}/hooks"),
            format!("http://2130706433:{port}/hooks"),
            format!("http://0x7f000001:{port}/hooks"),
            format!("http://0x7f.0.0.1:{port}/hooks"),
            format!("http://127.1:{port}/hooks"),
            format!("http://0177.0.0.01:{port}/hooks"),
            format!("http://127.0.0.1.:{port}/hooks"),
            format!("http://0:{port}/hooks"),
            format!("http://[::ffff:127.0.0.1]:{port}/hooks"),
            format!("http://localhost:{port}/hooks"),
            format!("http://LOCALHOST.:{port}/hooks"),
        ] {
            let failure = public_only.send(&delivery_to(&url), &secret).await;
            assert_eq!(failure, Err(DeliveryFailure::ConnectFailed), "{url}");
        }
        for url in [
            format!("http://0:{port}/hooks"),
            format!("http://0.0.0.0:{port}/hooks"),
            "http://2852039166/latest/meta-data".to_owned(),
            "http://169.254.169.254./latest/meta-data".to_owned(),
            "http://[::ffff:a9fe:a9fe]/latest/meta-data".to_owned(),
            "http://[fd00:ec2::254]/latest/meta-data".to_owned(),
            "http://1684301000/latest/meta-data".to_owned(),
            "http://metadata.google.internal/computeMetadata/v1/".to_owned(),
        ] {
            let failure = private_allowed.send(&delivery_to(&url), &secret).await;
            assert_eq!(failure, Err(DeliveryFailure::ConnectFailed), "{url}");
        }
        let dialled = listener.accept();
        assert!(
            matches!(&dialled, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
            "nothing may have connected: {dialled:?}"
        );
    }

    /// What the listener read from the one connection made to it.
    fn bytes_sent(listener: &std::net::TcpListener) -> usize {
        use std::io::Read as _;
        let (mut connection, _) = listener.accept().expect("the dial reached the listener");
        let mut sent = Vec::new();
        connection.read_to_end(&mut sent).expect("read");
        sent.len()
    }

    #[tokio::test]
    async fn the_connector_refuses_a_private_peer_whatever_resolved_it() {
        let secret_free_post = |client: &reqwest::Client, url: String| {
            let request = client.post(url).body("{}").send();
            async move { request.await.map(|response| response.status().as_u16()) }
        };

        // A name that resolves to loopback (rebinding), past a resolver that does not check.
        let (listener, port) = idle_listener();
        let rebinding = guarded_client(false)
            .dns_resolver(AnswersLoopback)
            .build()
            .expect("client");
        let error = secret_free_post(&rebinding, format!("http://rebound.example:{port}/hook"))
            .await
            .expect_err("refused at connect time");
        assert_eq!(DeliveryFailure::of(&error), DeliveryFailure::ConnectFailed);
        assert_eq!(bytes_sent(&listener), 0, "nothing was written");

        // A literal address, which no resolver sees.
        let (listener, port) = idle_listener();
        let literal = guarded_client(false).build().expect("client");
        let error = secret_free_post(&literal, format!("http://2130706433:{port}/hook"))
            .await
            .expect_err("refused at connect time");
        assert_eq!(DeliveryFailure::of(&error), DeliveryFailure::ConnectFailed);
        assert_eq!(bytes_sent(&listener), 0, "nothing was written");
    }

    #[tokio::test]
    async fn the_connector_lets_allowed_peers_through() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("bound").port();
        let receiver = tokio::spawn(async move {
            let (mut connection, _) = listener.accept().await.expect("a connection");
            let mut request = Vec::new();
            let mut chunk = [0_u8; 1024];
            while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                let read = connection.read(&mut chunk).await.expect("read");
                assert!(read > 0, "the request ended early");
                request.extend_from_slice(&chunk[..read]);
            }
            connection
                .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                .await
                .expect("write");
        });
        let client = guarded_client(true)
            .dns_resolver(AnswersLoopback)
            .build()
            .expect("client");
        let response = client
            .get(format!("http://receiver.example:{port}/hook"))
            .send()
            .await
            .expect("loopback is allowed here");
        assert_eq!(response.status().as_u16(), 204);
        receiver.await.expect("the receiver answered");
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
