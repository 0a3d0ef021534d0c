//! What every handler works with: the configuration and the use cases, shared by every clone
//! of the service. It lives apart from [`crate::service`] so that handlers depend on it and
//! the service only assembles it.

use std::sync::Arc;

use crate::admin::Admin;
use crate::auth::Auth;
use crate::config::Config;
use crate::events::{EventBus, EventSink, Events};
use crate::import::statement::Imports;
use crate::mail::MailQueue;
use crate::providers::Providers;
use crate::providers::connections::Connections;
use crate::rate_limit::RateLimitStore;
use crate::records::Records;
use crate::records::matches::Matches;
use crate::sessions::Sessions;
use crate::store::Store;
use crate::user_data::{ErasedUsers, UserData};
use crate::user_slots::{BUSY_USERS, HEAVY_READS_PER_USER, IMPORTS_PER_USER, UserSlots};
use crate::webhooks::Webhooks;
use crate::work::WorkGate;

/// The application behind the HTTP edge.
pub(crate) struct App {
    pub(crate) config: Arc<Config>,
    pub(crate) store: Arc<dyn Store>,
    /// Where rate-limit buckets live; the readiness check pings it.
    pub(crate) limits: Arc<dyn RateLimitStore>,
    pub(crate) auth: Auth,
    pub(crate) connections: Connections,
    pub(crate) sessions: Sessions,
    pub(crate) imports: Imports,
    pub(crate) admin: Admin,
    pub(crate) records: Records,
    pub(crate) matches: Matches,
    pub(crate) webhooks: Webhooks,
    /// Committed durable events, published in process after each commit (the use cases hold
    /// clones; the event stream and the webhook deliverer subscribe here).
    pub(crate) bus: EventBus,
    /// The imports running per user on this instance.
    pub(crate) running_imports: UserSlots,
    /// The heavy reads (net worth, portfolio, export) running per user on this instance.
    pub(crate) heavy_reads: UserSlots,
    /// Users' own data: profile, export reads and erasure.
    pub(crate) user_data: UserData,
}

impl App {
    /// Assembles the use cases. `limits` keeps the buckets of the per-account login throttle
    /// (beside the endpoints' when it is also the rate limiter's store).
    pub(crate) fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        mail: MailQueue,
        events: Arc<dyn EventSink>,
        limits: Arc<dyn RateLimitStore>,
        providers: Providers,
    ) -> Self {
        let bus = EventBus::default();
        let events = Events::new(events, bus.clone());
        let auth = Auth::new(
            store.clone(),
            config.clone(),
            mail.clone(),
            events.clone(),
            limits.clone(),
        );
        let connections = Connections::new(
            store.clone(),
            Arc::new(providers),
            config.clone(),
            events.clone(),
        );
        let parsing = WorkGate::new("OFX parsing", config.parsing_limits());
        let sessions = Sessions::new(store.clone(), events.clone());
        let imports = Imports::new(store.clone(), events.clone(), parsing)
            .with_account_limit(config.max_accounts_per_user());
        let matches = Matches::new(store.clone(), events.clone());
        let erased = ErasedUsers::new(&config);
        erased.follow(&bus);
        let user_data = UserData::new(
            store.clone(),
            config.clone(),
            connections.clone(),
            mail,
            events.clone(),
            erased,
        );
        let admin = Admin::new(store.clone(), config.clone(), events);
        let records = Records::new(store.clone());
        let webhooks = Webhooks::new(store.clone(), config.clone());
        Self {
            config,
            store,
            limits,
            auth,
            connections,
            sessions,
            imports,
            admin,
            records,
            matches,
            webhooks,
            bus,
            running_imports: UserSlots::new(IMPORTS_PER_USER, BUSY_USERS),
            heavy_reads: UserSlots::new(HEAVY_READS_PER_USER, BUSY_USERS),
            user_data,
        }
    }

    /// An app over an in-memory SQLite store, for unit tests of the HTTP edge.
    #[cfg(all(test, feature = "sqlite"))]
    pub(crate) async fn for_tests(config: Config) -> Arc<Self> {
        let store = crate::store::SqliteStore::in_memory()
            .await
            .expect("in-memory SQLite store");
        Arc::new(Self::new(
            Arc::new(config),
            Arc::new(store),
            MailQueue::start(Arc::new(crate::mail::MemoryMailer::new())),
            Arc::new(crate::events::MemoryEventSink::new()),
            Arc::new(crate::rate_limit::InMemoryRateLimitStore::new()),
            Providers::new(),
        ))
    }
}
