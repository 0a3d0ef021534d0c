//! A webhook receiver on a loopback socket that verifies Standard Webhooks signatures the
//! way a real receiver would, and records what it got.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, KeyInit as _, Mac as _};
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use sha2::Sha256;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature`.
    pub signature: String,
    /// `content-type`.
    pub content_type: String,
    /// The raw body.
    pub body: Bytes,
    /// Whether the signature verified with the receiver's secret at that time.
    pub verified: bool,
    /// The status the receiver answered.
    pub answered: u16,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

#[derive(Default)]
struct Inner {
    secret: Option<String>,
    answers: VecDeque<u16>,
    received: Vec<Received>,
}

/// A running receiver, stopped when dropped.
pub struct Receiver {
    /// Its URL (`http://127.0.0.1:{port}/hooks`).
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether `signature` (a `webhook-signature` header: space-separated `v1,<base64>`) holds a
/// valid signature of the message under `secret` (`whsec_<base64>`), as the Standard Webhooks
/// specification tells receivers to check it.
pub fn verify_signature(
    secret: &str,
    id: &str,
    timestamp: &str,
    body: &[u8],
    signature: &str,
) -> bool {
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|key| base64::engine::general_purpose::STANDARD.decode(key).ok())
    else {
        return false;
    };
    signature
        .split(' ')
        .filter_map(|part| part.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, encoded)| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        .any(|expected| {
            let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else {
                return false;
            };
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.as_bytes());
            mac.update(b".");
            mac.update(body);
            mac.verify_slice(&expected).is_ok()
        })
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut inner = inner.lock().expect("receiver state");
    let (id, timestamp, signature) = (
        header(&headers, "webhook-id"),
        header(&headers, "webhook-timestamp"),
        header(&headers, "webhook-signature"),
    );
    let verified = inner
        .secret
        .as_deref()
        .is_some_and(|secret| verify_signature(secret, &id, &timestamp, &body, &signature));
    // A receiver refuses what it cannot verify; otherwise the next scripted answer, or 204.
    let answered = if verified {
        inner.answers.pop_front().unwrap_or(204)
    } else {
        401
    };
    inner.received.push(Received {
        id,
        timestamp,
        signature,
        content_type: header(&headers, "content-type"),
        body,
        verified,
        answered,
    });
    StatusCode::from_u16(answered).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl Receiver {
    /// Starts a receiver on a loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let address = listener.local_addr().expect("local address");
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/hooks", axum::routing::post(receive))
            .with_state(inner.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{address}/hooks"),
            inner,
            task,
        }
    }

    /// Verifies signatures with this secret from now on (until then every request is 401).
    pub fn trust(&self, secret: &str) {
        self.inner.lock().expect("receiver state").secret = Some(secret.to_owned());
    }

    /// Answers the next verified requests with these statuses, in order (then 204).
    pub fn answer_with(&self, statuses: &[u16]) {
        self.inner
            .lock()
            .expect("receiver state")
            .answers
            .extend(statuses.iter().copied());
    }

    /// What it received so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().expect("receiver state").received.clone()
    }
}

/// An endpoint that accepts connections and never answers (a receiver that hangs), counting
/// the connections it holds. Stopped, every connection closed, when dropped.
pub struct Hanging {
    /// Its URL (`http://127.0.0.1:{port}/hooks`).
    pub url: String,
    connections: Arc<Mutex<Vec<tokio::net::TcpStream>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hanging {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hanging {
    /// Starts one on a loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let address = listener.local_addr().expect("local address");
        let connections = Arc::new(Mutex::new(Vec::new()));
        let held = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                held.lock().expect("connections").push(stream);
            }
        });
        Self {
            url: format!("http://{address}/hooks"),
            connections,
            task,
        }
    }

    /// How many connections it accepted so far (each an attempt that never gets an answer).
    pub fn connections(&self) -> usize {
        self.connections.lock().expect("connections").len()
    }
}
