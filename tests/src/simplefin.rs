//! The SimpleFIN fake bridge the conformance files share: the sandbox bridge served over
//! plain HTTP on loopback, and a provider allowed to reach it (test mode, no request budget).

use aggregation_core::AggregationServiceBuilder;
use aggregation_core::providers::{SimplefinConfig, SimplefinProvider};
use aggregation_sandbox::SimplefinSandbox;

use crate::Setup;

/// The provider's configuration for a bridge on loopback: plain HTTP, no request budget.
pub fn provider_config() -> SimplefinConfig {
    SimplefinConfig {
        bridge_hosts: vec!["127.0.0.1".to_owned()],
        allow_http: true,
        budget: None,
        ..SimplefinConfig::default()
    }
}

/// Adds the SimpleFIN provider of [`provider_config`].
pub fn with_simplefin(builder: AggregationServiceBuilder) -> AggregationServiceBuilder {
    builder.provider(SimplefinProvider::new(provider_config()).expect("provider"))
}

/// The sandbox setup with the SimpleFIN provider of [`with_simplefin`] and no sandboxes of
/// its own (each case serves its own [`bridge`]).
pub fn setup() -> Setup {
    let mut setup = crate::sandbox_setup();
    setup.sandbox = None;
    setup.builder_hook = Some(with_simplefin);
    setup
}

/// A fake bridge on a loopback socket, stopped when dropped.
pub struct Bridge {
    /// The bridge, to script its answers and issue setup tokens.
    pub sandbox: SimplefinSandbox,
    /// The server task.
    pub task: tokio::task::JoinHandle<()>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `sandbox` (whose URLs name `listener`'s address, or a proxy in front of it) under
/// `/simplefin` on `listener`.
pub fn serve(listener: tokio::net::TcpListener, sandbox: SimplefinSandbox) -> Bridge {
    let app = axum::Router::new().nest_service("/simplefin", sandbox.clone());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Bridge { sandbox, task }
}

/// A fake bridge on a fresh loopback port.
pub async fn bridge() -> Bridge {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("address");
    serve(
        listener,
        SimplefinSandbox::new(format!("http://{address}/simplefin")),
    )
}
