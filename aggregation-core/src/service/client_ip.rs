//! The client address of each request, resolved once: the [`PeerAddr`] the host put in the
//! extensions, and `X-Forwarded-For` only behind the configured trusted proxies (see
//! [`crate::rate_limit::client_ip`]). The result goes into the extensions as [`ClientIp`] for
//! the rate limiter, sessions and emails.
//!
//! A request without a [`PeerAddr`] has no client address, so every such client shares one
//! rate-limit bucket: the first one in the process logs a warning that says how to pass it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::Request;

use super::PeerAddr;
use super::annotate::{Annotate, AnnotateLayer};
use crate::api::extract::ClientIp;
use crate::config::Config;
use crate::rate_limit::client_ip::client_ip;

/// Set once a request without a [`PeerAddr`] has been warned about, by any service of the
/// process: a host that forgets the address forgets it for every request.
static MISSING_PEER_WARNED: AtomicBool = AtomicBool::new(false);

/// Logs the missing-[`PeerAddr`] warning unless `warned` says it was logged already; whether it
/// logged now.
fn warn_missing_peer_once(warned: &AtomicBool) -> bool {
    if warned.swap(true, Ordering::Relaxed) {
        return false;
    }
    tracing::warn!(
        "a request arrived without the client's address (no aggregation_core::PeerAddr \
         extension), so every such client shares one rate-limit bucket; with axum serve the \
         app with `into_make_service_with_connect_info::<std::net::SocketAddr>()`, with other \
         hosts insert `aggregation_core::PeerAddr` into each request's extensions (logged once)"
    );
    true
}

/// See the [module docs](self).
pub(crate) type ClientIpLayer = AnnotateLayer<ResolveClientIp>;

/// Resolves the client address of each request (see the [module docs](self)).
#[derive(Debug, Clone)]
pub(crate) struct ResolveClientIp {
    config: Arc<Config>,
}

impl ClientIpLayer {
    /// Believes `X-Forwarded-For` from the trusted proxies of `config`.
    pub(crate) fn new(config: Arc<Config>) -> Self {
        AnnotateLayer(ResolveClientIp { config })
    }
}

impl Annotate for ResolveClientIp {
    fn annotate<B>(&self, request: &mut Request<B>) {
        let forwarded: Vec<&str> = request
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        let peer = request
            .extensions()
            .get::<PeerAddr>()
            .map(|peer| peer.0.ip());
        if peer.is_none() {
            warn_missing_peer_once(&MISSING_PEER_WARNED);
        }
        let ip = client_ip(peer, &forwarded, self.config.trusted_proxies());
        request.extensions_mut().insert(ClientIp(ip));
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::net::{IpAddr, SocketAddr};

    use tower::ServiceExt as _;

    use super::*;
    use crate::rate_limit::parse_cidr_list;

    async fn echo(request: Request<()>) -> Result<Option<ClientIp>, Infallible> {
        Ok(request.extensions().get::<ClientIp>().copied())
    }

    fn service(trusted: &str) -> impl tower::Service<Request<()>, Response = Option<ClientIp>> {
        let config = Config::new("http://localhost:8080", vec![7; 32])
            .expect("config")
            .with_trusted_proxies(parse_cidr_list(trusted).expect("cidrs"));
        tower::Layer::layer(
            &ClientIpLayer::new(Arc::new(config)),
            tower::service_fn(echo),
        )
    }

    fn request(peer: Option<&str>, forwarded: Option<&str>) -> Request<()> {
        let mut request = Request::builder();
        if let Some(forwarded) = forwarded {
            request = request.header("x-forwarded-for", forwarded);
        }
        let mut request = request.body(()).expect("request");
        if let Some(peer) = peer {
            let addr: SocketAddr = peer.parse().expect("socket address");
            request.extensions_mut().insert(PeerAddr(addr));
        }
        request
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().expect("ip"))
    }

    #[test]
    fn a_missing_peer_address_is_warned_about_once_with_the_fix() {
        let captured = crate::testing::CapturedLog::default();
        let subscriber = captured.subscriber(tracing::Level::INFO);
        // A flag of its own: the process-wide one may have been set by any other test.
        let warned = AtomicBool::new(false);
        let logged = tracing::subscriber::with_default(subscriber, || {
            [
                warn_missing_peer_once(&warned),
                warn_missing_peer_once(&warned),
                warn_missing_peer_once(&warned),
            ]
        });
        assert_eq!(logged, [true, false, false]);
        let lines = captured.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("WARN"), "{}", lines[0]);
        assert!(
            lines[0].contains("into_make_service_with_connect_info::<std::net::SocketAddr>()"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("aggregation_core::PeerAddr"),
            "{}",
            lines[0]
        );
    }

    #[tokio::test]
    async fn a_request_without_a_peer_sets_the_process_wide_flag() {
        let served = service("10.0.0.0/8").oneshot(request(None, None)).await;
        assert!(matches!(served, Ok(Some(ClientIp(None)))));
        assert!(MISSING_PEER_WARNED.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn the_peer_is_the_client_unless_it_is_a_trusted_proxy() {
        let resolved = |peer, forwarded, trusted| async move {
            service(trusted)
                .oneshot(request(peer, forwarded))
                .await
                .ok()
                .flatten()
        };
        assert_eq!(
            resolved(Some("192.0.2.1:4000"), Some("203.0.113.9"), "10.0.0.0/8").await,
            Some(ClientIp(ip("192.0.2.1")))
        );
        assert_eq!(
            resolved(
                Some("10.0.0.5:4000"),
                Some("198.51.100.7, 203.0.113.9, 10.0.0.2"),
                "10.0.0.0/8"
            )
            .await,
            Some(ClientIp(ip("203.0.113.9")))
        );
        // Without a peer (an in-process call) the client is unknown, whatever the headers say.
        assert_eq!(
            resolved(None, Some("203.0.113.9"), "10.0.0.0/8").await,
            Some(ClientIp(None))
        );
    }
}
