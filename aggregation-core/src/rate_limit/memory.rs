//! In-process bucket storage: one instance of the service, no shared state.
//!
//! Buckets live in a fixed number of shards, each a `std::sync::Mutex<HashMap>` held only for
//! the few arithmetic operations of one check (never across an `.await`). A check is atomic
//! per bucket.
//!
//! Memory is bounded by the buckets touched within their TTL: a bucket whose TTL has passed
//! is treated as absent (a full bucket, which is what it would hold by then anyway) and is
//! removed by an amortised sweep. Each shard sweeps itself once it has served as many checks
//! as its last sweep left buckets (at least 64), so a sweep costs O(1) per check on average,
//! and a shard at most doubles between sweeps.
//!
//! ```
//! use aggregation_core::rate_limit::{bucket::BucketPolicy, ManualClock, InMemoryRateLimitStore, RateLimitStore};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let clock = ManualClock::new(0.0);
//! let store = InMemoryRateLimitStore::with_clock(clock.clock());
//! let policy = BucketPolicy::new(1.0, 6.0, 1).unwrap();
//! assert!(store.check("k", &policy).await.unwrap().allowed);
//! assert!(!store.check("k", &policy).await.unwrap().allowed);
//! clock.advance(10.0); // 6 per minute = one token every 10 s
//! assert!(store.check("k", &policy).await.unwrap().allowed);
//! # });
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use super::bucket::{self, BucketPolicy, BucketState, Decision};
use super::{Clock, RateLimitStore, RateLimitStoreError, monotonic_clock};

/// Number of shards (a power of two).
const SHARDS: usize = 16;
/// A shard sweeps after at least this many checks.
const MIN_SWEEP_INTERVAL: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Slot {
    state: BucketState,
    expires_at: f64,
}

#[derive(Debug, Default)]
struct Shard {
    buckets: HashMap<String, Slot>,
    checks_since_sweep: usize,
    /// Buckets left by the last sweep: the next one runs after as many checks (at least
    /// [`MIN_SWEEP_INTERVAL`]), so its cost (at most that many plus the checks since) is
    /// O(1) per check.
    len_after_sweep: usize,
}

impl Shard {
    fn sweep(&mut self, now: f64) -> usize {
        let before = self.buckets.len();
        self.buckets.retain(|_, slot| slot.expires_at > now);
        self.checks_since_sweep = 0;
        self.len_after_sweep = self.buckets.len();
        before - self.buckets.len()
    }
}

/// Token buckets in this process's memory.
pub struct InMemoryRateLimitStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: Clock,
}

impl std::fmt::Debug for InMemoryRateLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryRateLimitStore")
            .field("buckets", &self.len())
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryRateLimitStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryRateLimitStore {
    /// A store on the process's monotonic clock ([`monotonic_clock`]).
    pub fn new() -> Self {
        Self::with_clock(monotonic_clock())
    }

    /// A store reading time (seconds) from `clock`; tests pass a
    /// [`ManualClock`](super::ManualClock).
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            clock,
        }
    }

    fn shard(&self, key: &str) -> &Mutex<Shard> {
        // Keyed SipHash: clients cannot aim all their keys at one shard.
        let index = self.hasher.hash_one(key) as usize & (SHARDS - 1);
        &self.shards[index]
    }

    /// Number of buckets held, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .buckets
                    .len()
            })
            .sum()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remove every expired bucket now; returns how many were removed. Not needed for
    /// correctness or boundedness (checks sweep by themselves); useful for a periodic job or a
    /// test.
    pub fn sweep_expired(&self) -> usize {
        let now = (self.clock)();
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).sweep(now))
            .sum()
    }

    /// The check, synchronously (the trait method only wraps this).
    pub fn check_now(&self, key: &str, policy: &BucketPolicy) -> Decision {
        let now = (self.clock)();
        let mut shard = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shard.checks_since_sweep += 1;
        if shard.checks_since_sweep >= shard.len_after_sweep.max(MIN_SWEEP_INTERVAL) {
            shard.sweep(now);
        }
        let slot = shard.buckets.get_mut(key);
        let previous = slot
            .as_ref()
            .filter(|s| s.expires_at > now)
            .map(|s| s.state);
        let (state, decision) = bucket::check(previous, now, policy);
        let new_slot = Slot {
            state,
            expires_at: state.updated_at + policy.ttl_secs() as f64,
        };
        match slot {
            Some(slot) => *slot = new_slot,
            None => {
                shard.buckets.insert(key.to_owned(), new_slot);
            }
        }
        decision
    }
}

#[async_trait]
impl RateLimitStore for InMemoryRateLimitStore {
    async fn check(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        Ok(self.check_now(key, policy))
    }
}

#[cfg(test)]
mod tests {
    use super::super::ManualClock;
    use super::*;

    #[test]
    fn expired_buckets_start_full_and_are_evicted() {
        let clock = ManualClock::new(1_000.0);
        let store = InMemoryRateLimitStore::with_clock(clock.clock());
        let login = BucketPolicy::new(5.0, 5.0, 1).unwrap();
        for i in 0..1_000 {
            assert!(store.check_now(&format!("ip:{i}"), &login).allowed);
        }
        assert_eq!(store.len(), 1_000);
        // Still alive at TTL - 1 s.
        clock.advance(119.0);
        assert_eq!(store.sweep_expired(), 0);
        clock.advance(1.0);
        assert_eq!(store.sweep_expired(), 1_000);
        assert!(store.is_empty());
    }

    #[test]
    fn checks_sweep_by_themselves() {
        let clock = ManualClock::new(0.0);
        let store = InMemoryRateLimitStore::with_clock(clock.clock());
        let p = BucketPolicy::new(1.0, 60.0, 1).unwrap(); // TTL 61 s
        for round in 0..20u32 {
            for i in 0..500u32 {
                store.check_now(&format!("{round}:{i}"), &p);
            }
            clock.advance(100.0);
        }
        // Without eviction there would be 10 000 buckets; each shard holds at most about two
        // rounds' worth (its own share of 1 000).
        let len = store.len();
        assert!(len <= 1_000 + SHARDS * MIN_SWEEP_INTERVAL, "{len}");
        clock.advance(100.0);
        store.sweep_expired();
        assert!(store.is_empty());
    }

    #[test]
    fn expiry_matches_a_full_bucket() {
        let clock = ManualClock::new(0.0);
        let store = InMemoryRateLimitStore::with_clock(clock.clock());
        let p = BucketPolicy::new(2.0, 1.0, 1).unwrap(); // TTL 180 s
        store.check_now("k", &p);
        store.check_now("k", &p);
        assert!(!store.check_now("k", &p).allowed);
        clock.advance(500.0);
        let d = store.check_now("k", &p);
        assert!(d.allowed);
        assert_eq!(d.remaining, 1);
    }

    #[test]
    fn concurrent_checks_allow_exactly_capacity() {
        let store = std::sync::Arc::new(InMemoryRateLimitStore::with_clock(
            ManualClock::new(0.0).clock(),
        ));
        let p = BucketPolicy::new(100.0, 1.0, 1).unwrap();
        let allowed: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let store = &store;
                    s.spawn(move || {
                        (0..50)
                            .filter(|_| store.check_now("shared", &p).allowed)
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(allowed, 100);
    }
}
