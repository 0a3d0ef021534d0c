//! What every handler works with: the configuration and the use cases, shared by every clone
//! of the service. It lives apart from [`crate::service`] so that handlers depend on it and
//! the service only assembles it.

use std::sync::Arc;

use crate::auth::Auth;
use crate::config::Config;
use crate::events::EventSink;
use crate::providers::connections::Connections;
use crate::store::Store;
use crate::work::WorkGate;

/// The application behind the HTTP edge.
pub(crate) struct App {
    pub(crate) config: Arc<Config>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) auth: Auth,
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) connections: Connections,
    /// Bounds parsing of large OFX uploads (its own worker threads).
    pub(crate) parsing: WorkGate,
}
