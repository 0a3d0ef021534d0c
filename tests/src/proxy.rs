//! A TCP proxy the tests control, to put faults between the service and a backing service
//! (PostgreSQL, Redis): pass bytes through, refuse (accept and close at once), blackhole
//! (accept and never answer), and back to pass. Every change of mode ends the connections open
//! until then, as a restarted or hung server would: the clients must connect again, and meet
//! the new mode.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the proxy does with connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Bytes pass both ways.
    Pass,
    /// Accepts a connection and closes it at once (a server restarting, a proxy in front of a
    /// dead one).
    Refuse,
    /// Accepts a connection and never answers nor closes it (a hung server, a firewall
    /// dropping packets after the handshake).
    Blackhole,
}

/// A running proxy in front of one upstream address; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    address: SocketAddr,
    mode: watch::Sender<Fault>,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy on a loopback port in front of `upstream`, in [`Fault::Pass`].
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        let (mode, _) = watch::channel(Fault::Pass);
        let accepted = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(accept(listener, upstream, mode.clone(), accepted.clone()));
        Self {
            address,
            mode,
            accepted,
            task,
        }
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Switches to `fault`, ending every connection open until now.
    pub fn set(&self, fault: Fault) {
        self.mode.send_replace(fault);
    }

    /// Connections accepted so far, whatever became of them.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// `url` (`postgres://…`, `redis://…`) with its host and port replaced by the proxy's.
    pub fn url_through(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let user = authority
            .rsplit_once('@')
            .map_or(String::new(), |(user, _)| format!("{user}@"));
        format!("{scheme}://{user}{}{tail}", self.address)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The address a URL's host and port name (`default_port` when it gives none).
pub async fn upstream_of(url: &str, default_port: u16) -> SocketAddr {
    let (_, rest) = url.split_once("://").expect("a URL with a scheme");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let with_port = if host_port.ends_with(']') || !host_port.contains(':') {
        format!("{host_port}:{default_port}")
    } else {
        host_port.to_owned()
    };
    tokio::net::lookup_host(with_port)
        .await
        .expect("resolve the upstream")
        .next()
        .expect("an upstream address")
}

async fn accept(
    listener: TcpListener,
    upstream: SocketAddr,
    mode: watch::Sender<Fault>,
    accepted: Arc<AtomicUsize>,
) {
    while let Ok((client, _)) = listener.accept().await {
        accepted.fetch_add(1, Ordering::SeqCst);
        let mut changed = mode.subscribe();
        let fault = *changed.borrow_and_update();
        tokio::spawn(async move {
            match fault {
                Fault::Refuse => drop(client),
                Fault::Blackhole => {
                    // Held, never read or written, until the mode changes (or the proxy stops).
                    let _ = changed.changed().await;
                    drop(client);
                }
                Fault::Pass => {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    pass(client, server, changed).await;
                }
            }
        });
    }
}

async fn pass(mut client: TcpStream, mut server: TcpStream, mut changed: watch::Receiver<Fault>) {
    // The change first: once the mode has changed, not one more byte passes, so a request
    // sent after `FaultProxy::set` never reaches the upstream through an older connection.
    tokio::select! {
        biased;
        _ = changed.changed() => {}
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
    }
}
