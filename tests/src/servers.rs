//! Real servers on loopback sockets for the adapter targets.

use std::net::SocketAddr;

use aggregation_core::AggregationService;

/// Stops a server when the test ends.
pub(crate) enum ServerGuard {
    /// The bare service has no server.
    None,
    /// An axum server task.
    Axum(tokio::task::JoinHandle<()>),
    /// An actix server running on its own thread and system.
    Actix(actix_web::dev::ServerHandle),
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        match self {
            Self::None => {}
            Self::Axum(task) => task.abort(),
            Self::Actix(handle) => {
                // Stopping returns a future that the actix system drives by itself.
                drop(handle.stop(false));
            }
        }
    }
}

pub(crate) async fn start_axum(service: AggregationService) -> (String, ServerGuard) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    // The suite also sends `/health` and paths outside `/api/v1` (expecting the service's 404
    // problem), so the service answers every path, as in the reference server.
    let mount = aggregation_axum::Mount::api().with_fallback();
    let app = aggregation_axum::router_with(service, mount)
        .into_make_service_with_connect_info::<SocketAddr>();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}"), ServerGuard::Axum(task))
}

/// Serves a provider sandbox on a loopback socket; its base URL.
pub(crate) async fn start_sandbox(
    sandbox: aggregation_sandbox::SchwabSandbox,
) -> (String, ServerGuard) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let app = axum::Router::new().fallback_service(sandbox);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}"), ServerGuard::Axum(task))
}

pub(crate) fn start_actix(service: AggregationService) -> (String, ServerGuard) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let system = actix_web::rt::System::new();
        system.block_on(async move {
            let server = actix_web::HttpServer::new(move || {
                // Every path, as for axum above.
                let mount = aggregation_actix::Mount::api().with_fallback();
                actix_web::App::new()
                    .configure(aggregation_actix::router_with(service.clone(), mount))
            })
            .workers(1)
            .disable_signals()
            .listen(listener)
            .expect("listen")
            .run();
            let _ = sender.send(server.handle());
            let _ = server.await;
        });
    });
    let handle = receiver.recv().expect("actix server started");
    (format!("http://{address}"), ServerGuard::Actix(handle))
}
