//! [`SlowStore`]: a store some of whose calls run out of time, like the calls of a user whose
//! reads are heavy, while every other call is answered as usual.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use uuid::Uuid;

use crate::events::{Event, RaiseEvents};
use crate::store::*;

/// Makes the named methods of a [`Store`] slow: each call to one of them waits `delay` and
/// then fails with what `fail` makes of the call count (the first call is 1), without reaching
/// the store; every other method is the inner store's. For tests of what one user's slow
/// queries do to everybody else (the conformance suite's breaker case).
///
/// ```
/// # #[cfg(feature = "sqlite")]
/// # async fn demo() -> Result<(), aggregation_core::store::StoreError> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use aggregation_core::store::{SqliteStore, StoreError};
/// use aggregation_core::testing::SlowStore;
///
/// let store = SlowStore::new(
///     Arc::new(SqliteStore::in_memory().await?),
///     &["balances_at"],
///     Duration::from_millis(50),
///     |_| StoreError::Busy("canceling statement due to statement timeout".to_owned()),
/// );
/// # let _ = store;
/// # Ok(()) }
/// ```
pub struct SlowStore {
    inner: Arc<dyn Store>,
    slow: Vec<&'static str>,
    delay: Duration,
    fail: fn(u64) -> StoreError,
    calls: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for SlowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowStore")
            .field("slow", &self.slow)
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

impl SlowStore {
    /// Wraps `inner`: calls to the methods named in `slow` wait `delay`, then fail with
    /// `fail(n)` for the `n`th such call.
    pub fn new(
        inner: Arc<dyn Store>,
        slow: &[&'static str],
        delay: Duration,
        fail: fn(u64) -> StoreError,
    ) -> Self {
        Self {
            inner,
            slow: slow.to_vec(),
            delay,
            fail,
            calls: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many slow calls were made.
    pub fn slow_calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Runs `call` unless `method` is slow.
    async fn call<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if !self.slow.contains(&method) {
            return call.await;
        }
        let count = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            .saturating_add(1);
        tokio::time::sleep(self.delay).await;
        Err((self.fail)(count))
    }
}

/// Implements an aggregate trait for [`SlowStore`]: each method passes the inner store's
/// through [`SlowStore::call`].
macro_rules! slowed {
    ($trait:ident { $(fn $name:ident($($arg:ident: $ty:ty),*) -> $ok:ty;)+ }) => {
        #[async_trait]
        impl $trait for SlowStore {
            $(
                async fn $name(&self, $($arg: $ty),*) -> Result<$ok, StoreError> {
                    self.call(stringify!($name), self.inner.$name($($arg),*)).await
                }
            )+
        }
    };
}

crate::store::for_each_store_trait!(slowed);
