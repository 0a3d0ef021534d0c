//! The connection guard of outbound requests to addresses a user named (webhook receivers,
//! a SimpleFIN bridge): the resolver ([`GuardedResolver`]) hands the connector only the
//! addresses of a name the SSRF rule (`outbound/ssrf.rs`) allows, and the connector
//! ([`PeerCheck`]) refuses any connection whose peer address it does not allow, whatever
//! resolved it (a DNS answer that changes between a check and the connection).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

use crate::outbound::ssrf::{may_connect, may_resolve};

/// An error of the client's connector.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A destination webhooks may not reach (logged at debug level, never recorded).
#[derive(Debug, thiserror::Error)]
enum Refused {
    /// Every address of a host name was refused, or the name itself.
    #[error("{0} resolves only to addresses the SSRF rule refuses")]
    Host(String),
    /// The connection's peer is an address the SSRF rule refuses.
    #[error("connected to {0}, an address the SSRF rule refuses")]
    Peer(SocketAddr),
    /// The connection does not say where it goes: refused rather than trusted.
    #[error("the connection does not tell its peer address")]
    UnknownPeer,
}

/// Resolves host names to the addresses the SSRF rule allows, and only those.
pub(crate) struct GuardedResolver {
    /// Whether private and loopback addresses may be reached.
    pub(crate) allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            if !may_resolve(&host, allow_private) {
                return Err(Box::new(Refused::Host(host)) as BoxError);
            }
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed: Vec<SocketAddr> = resolved
                .filter(|address| may_connect(address.ip(), allow_private))
                .collect();
            if allowed.is_empty() {
                return Err(Box::new(Refused::Host(host)) as BoxError);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Wraps the client's connector in a [`PeerCheck`].
#[derive(Clone)]
pub(crate) struct PeerCheckLayer {
    /// Whether private and loopback addresses may be reached.
    pub(crate) allow_private: bool,
}

impl<S> tower::Layer<S> for PeerCheckLayer {
    type Service = PeerCheck<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PeerCheck {
            inner,
            allow_private: self.allow_private,
        }
    }
}

/// The connector check: a connection whose peer address the SSRF rule does not allow is
/// dropped before anything is written to it. It sees every address actually dialled, literal
/// or resolved.
#[derive(Clone)]
pub(crate) struct PeerCheck<S> {
    inner: S,
    allow_private: bool,
}

impl<S, Destination> tower::Service<Destination> for PeerCheck<S>
where
    S: tower::Service<Destination, Error = BoxError>,
    S::Response: Connection + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, destination: Destination) -> Self::Future {
        let connecting = self.inner.call(destination);
        let allow_private = self.allow_private;
        Box::pin(async move {
            let connection = connecting.await?;
            let mut extras = http::Extensions::new();
            connection.connected().get_extras(&mut extras);
            match extras.get::<HttpInfo>().map(HttpInfo::remote_addr) {
                Some(peer) if may_connect(peer.ip(), allow_private) => Ok(connection),
                Some(peer) => Err(Box::new(Refused::Peer(peer)) as BoxError),
                None => Err(Box::new(Refused::UnknownPeer) as BoxError),
            }
        })
    }
}
