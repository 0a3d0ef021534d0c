//! One provider token refresh at a time per connection, within this process.
//!
//! A provider that rotates refresh tokens accepts each one once; two refreshes racing with the
//! same token leave one of them refused (`invalid_grant`), which would mark a healthy
//! connection `expired`. Every refresh path (the background job, a sync, the explicit
//! token-refresh request, the retry after a refused access token) takes the connection's
//! flight first, then re-reads the stored credentials and refreshes only if nobody else did
//! meanwhile.
//!
//! The map holds an entry only while some task holds or waits for that connection's flight:
//! the last one out removes it, so its size is bounded by the refreshes in progress, whatever
//! ids callers bring.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;
use uuid::Uuid;

type Entries = HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>;

/// The per-connection refresh locks of one service.
#[derive(Debug, Default, Clone)]
pub(crate) struct RefreshFlights {
    entries: Arc<Mutex<Entries>>,
}

/// The flight of one connection; released (and its entry removed when nobody else waits) on
/// drop.
#[derive(Debug)]
pub(crate) struct Flight {
    entries: Arc<Mutex<Entries>>,
    connection_id: Uuid,
    guard: Option<OwnedMutexGuard<()>>,
}

/// Waiting for a connection's flight took longer than allowed.
#[derive(Debug, thiserror::Error)]
#[error("another token refresh of this connection is still running")]
pub(crate) struct FlightTimeout;

fn lock(entries: &Mutex<Entries>) -> MutexGuard<'_, Entries> {
    entries.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RefreshFlights {
    /// Takes the flight of `connection_id`, waiting at most `wait` for the current holder.
    pub(crate) async fn acquire(
        &self,
        connection_id: Uuid,
        wait: Duration,
    ) -> Result<Flight, FlightTimeout> {
        let mutex = lock(&self.entries)
            .entry(connection_id)
            .or_default()
            .clone();
        // Built before waiting, so a timed-out (or cancelled) wait still removes the entry
        // when it was the last one.
        let mut flight = Flight {
            entries: self.entries.clone(),
            connection_id,
            guard: None,
        };
        let guard = tokio::time::timeout(wait, mutex.lock_owned())
            .await
            .map_err(|_| FlightTimeout)?;
        flight.guard = Some(guard);
        Ok(flight)
    }

    /// How many connections have an entry (held or awaited flights).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut entries = lock(&self.entries);
        // Released under the map's lock, so nobody can take a new handle between the release
        // and the count below.
        drop(self.guard.take());
        // Handles are cloned only under the map's lock; one left (the map's) means nobody
        // holds or awaits this flight any more.
        if entries
            .get(&self.connection_id)
            .is_some_and(|mutex| Arc::strong_count(mutex) == 1)
        {
            entries.remove(&self.connection_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn one_flight_per_connection_and_entries_go_away() {
        let flights = RefreshFlights::default();
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = flights.acquire(a, WAIT).await.unwrap();
        // Another connection is not held up.
        let other = flights.acquire(b, WAIT).await.unwrap();
        assert_eq!(flights.len(), 2);
        // The same connection waits.
        assert!(flights.acquire(a, Duration::from_millis(50)).await.is_err());
        assert_eq!(
            flights.len(),
            2,
            "a timed-out wait leaves the holder's entry"
        );
        let waiter = {
            let flights = flights.clone();
            tokio::spawn(async move { flights.acquire(a, WAIT).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(first);
        waiter.await.unwrap().unwrap();
        drop(other);
        assert_eq!(flights.len(), 0, "no entry outlives its flights");

        // A waiter that goes away (a client that hung up) leaves nothing either.
        let holder = flights.acquire(a, WAIT).await.unwrap();
        let waiter = {
            let flights = flights.clone();
            tokio::spawn(async move { flights.acquire(a, WAIT).await.map(drop) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        waiter.abort();
        assert!(waiter.await.is_err());
        drop(holder);
        assert_eq!(flights.len(), 0);
        let holder = flights.acquire(a, WAIT).await.unwrap();
        assert!(flights.acquire(a, Duration::from_millis(10)).await.is_err());
        drop(holder);
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test]
    async fn many_connections_leave_nothing_behind() {
        let flights = RefreshFlights::default();
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let flights = flights.clone();
                let id = if i % 2 == 0 {
                    Uuid::nil()
                } else {
                    Uuid::now_v7()
                };
                tokio::spawn(async move {
                    let flight = flights.acquire(id, WAIT).await.unwrap();
                    tokio::task::yield_now().await;
                    drop(flight);
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(flights.len(), 0);
    }
}
