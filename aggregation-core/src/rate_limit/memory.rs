//! In-process bucket storage: one instance of the service, no shared state.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use super::bucket::{self, BucketPolicy, BucketState, Decision};
use super::{Clock, RateLimitStore, RateLimitStoreError, monotonic_clock};

/// Number of shards (a power of two).
const SHARDS: usize = 16;
/// A shard sweeps after at least this many checks.
const MIN_SWEEP_INTERVAL: usize = 64;
/// A full shard evicts this fraction of its cap at once (at least one bucket).
const EVICTION_BATCH_DIVISOR: usize = 64;

/// Default cap on the buckets held by an [`InMemoryRateLimitStore`].
pub(crate) const DEFAULT_MAX_BUCKETS: usize = 100_000;

#[derive(Debug, Clone, Copy)]
struct Slot {
    state: BucketState,
    expires_at: f64,
    /// When the bucket is full again if untouched: from then on forgetting it loses nothing.
    full_at: f64,
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

    /// Make room for one more bucket in a shard holding `cap` or more: drop the buckets that
    /// read as full anyway, then, if that was not enough, evict the ones full again soonest.
    /// Returns how many live (not yet full) buckets were evicted.
    fn make_room(&mut self, now: f64, cap: usize) -> usize {
        self.buckets
            .retain(|_, slot| slot.expires_at > now && slot.full_at > now);
        self.checks_since_sweep = 0;
        self.len_after_sweep = self.buckets.len();
        if self.buckets.len() < cap {
            return 0;
        }
        let excess = self.buckets.len() + 1 - cap;
        let batch = (cap / EVICTION_BATCH_DIVISOR)
            .max(excess)
            .min(self.buckets.len());
        if batch == 0 {
            return 0;
        }
        let mut full_at: Vec<f64> = self.buckets.values().map(|slot| slot.full_at).collect();
        let (_, threshold, _) = full_at.select_nth_unstable_by(batch - 1, f64::total_cmp);
        let threshold = *threshold;
        // Exactly `batch` go: all below the threshold, then ties until the batch is complete.
        let below = full_at.iter().filter(|&&at| at < threshold).count();
        let mut ties = batch - below;
        self.buckets.retain(|_, slot| {
            if slot.full_at < threshold {
                false
            } else if slot.full_at == threshold && ties > 0 {
                ties -= 1;
                false
            } else {
                true
            }
        });
        self.len_after_sweep = self.buckets.len();
        batch
    }

    /// One check at `now`, inserting a new bucket within `cap`; the decision and the number of
    /// live buckets evicted to make room.
    fn check(
        &mut self,
        key: &str,
        policy: &BucketPolicy,
        now: f64,
        cap: usize,
    ) -> (Decision, usize) {
        self.checks_since_sweep += 1;
        if self.checks_since_sweep >= self.len_after_sweep.max(MIN_SWEEP_INTERVAL) {
            self.sweep(now);
        }
        let previous = self
            .buckets
            .get(key)
            .filter(|s| s.expires_at > now)
            .map(|s| s.state);
        let (state, decision) = bucket::check(previous, now, policy);
        let new_slot = Slot {
            state,
            expires_at: state.updated_at + policy.ttl_secs() as f64,
            full_at: state.updated_at + bucket::secs_to_full(state.tokens, policy),
        };
        let mut evicted = 0;
        match self.buckets.get_mut(key) {
            Some(slot) => *slot = new_slot,
            None => {
                if self.buckets.len() >= cap {
                    evicted = self.make_room(now, cap);
                }
                self.buckets.insert(key.to_owned(), new_slot);
            }
        }
        (decision, evicted)
    }
}

/// Token buckets in this process's memory, at most [`Self::max_buckets`] of them: one instance
/// of the service, no shared state.
///
/// Buckets live in a fixed number of shards, each a `std::sync::Mutex<HashMap>` held only for
/// the few arithmetic operations of one check (never across an `.await`). A check is atomic
/// per bucket.
///
/// # Memory
///
/// A bucket whose TTL has passed is treated as absent (a full bucket, which is what it would
/// hold by then anyway) and is removed by an amortised sweep. Each shard sweeps itself once it
/// has served as many checks as its last sweep left buckets (at least 64), so a sweep costs
/// O(1) per check on average, and a shard at most doubles between sweeps.
///
/// On top of that the store holds at most [`InMemoryRateLimitStore::max_buckets`] buckets
/// (default 100 000, some 20 MB; set it with
/// [`InMemoryRateLimitStore::with_max_buckets`]), split evenly across the shards, so a flood of
/// distinct clients cannot grow the process without bound. When a new bucket finds its shard
/// full:
///
/// 1. every bucket of the shard that has expired **or is already full again** is removed.
///    Neither loses anything: a missing bucket reads as full;
/// 2. if the shard is still full, the buckets that would be **full again soonest** are evicted
///    (1/64 of the shard at once, at least one, so the search is amortised over the next
///    inserts). Among the buckets still holding back a client, these are the ones whose limit
///    would have lapsed first by itself, so evicting them forgives the least. Least recently
///    used is nearly the same order for buckets of one policy, but would evict a long-lived
///    bucket (a slow refill, a throttled login) before a fast one that is about to refill.
///
/// An evicted bucket reads as full at its next check: that is a **fail-open of one bucket**
/// (its client gets its whole burst again). It only happens while the store is at its cap,
/// i.e. under a flood of distinct keys, and is counted by
/// [`InMemoryRateLimitStore::evictions`]. Deployments that must never forget a bucket size the
/// cap for their peak or use the Redis store.
///
/// ```
/// use aggregation_core::rate_limit::{BucketPolicy, InMemoryRateLimitStore, ManualClock, RateLimitStore};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let clock = ManualClock::new(0.0);
/// let store = InMemoryRateLimitStore::with_clock(clock.clock());
/// let policy = BucketPolicy::new(1.0, 6.0, 1).unwrap();
/// assert!(store.check("k", &policy).await.unwrap().allowed);
/// assert!(!store.check("k", &policy).await.unwrap().allowed);
/// clock.advance(10.0); // 6 per minute = one token every 10 s
/// assert!(store.check("k", &policy).await.unwrap().allowed);
/// # });
/// ```
pub struct InMemoryRateLimitStore {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: Clock,
    per_shard_cap: usize,
    evictions: AtomicU64,
}

impl std::fmt::Debug for InMemoryRateLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryRateLimitStore")
            .field("buckets", &self.len())
            .field("max_buckets", &self.max_buckets())
            .finish_non_exhaustive()
    }
}

impl Default for InMemoryRateLimitStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryRateLimitStore {
    /// A store on the process's monotonic clock holding at most 100 000 buckets.
    pub fn new() -> Self {
        Self::with_clock(monotonic_clock())
    }

    /// A store reading time (seconds) from `clock`, holding at most 100 000 buckets; tests pass a `ManualClock` (feature `testing`).
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            clock,
            per_shard_cap: DEFAULT_MAX_BUCKETS.div_ceil(SHARDS),
            evictions: AtomicU64::new(0),
        }
    }

    /// This store, holding at most `max_buckets` buckets: rounded up to a multiple of the
    /// number of shards (16), at least one per shard. Buckets held now are not dropped.
    ///
    /// ```
    /// use aggregation_core::rate_limit::InMemoryRateLimitStore;
    ///
    /// let store = InMemoryRateLimitStore::new().with_max_buckets(10_000);
    /// assert_eq!(store.max_buckets(), 10_000);
    /// assert_eq!(InMemoryRateLimitStore::new().with_max_buckets(100).max_buckets(), 112);
    /// ```
    pub fn with_max_buckets(mut self, max_buckets: usize) -> Self {
        self.per_shard_cap = max_buckets.div_ceil(SHARDS).max(1);
        self
    }

    /// The most buckets this store holds.
    pub fn max_buckets(&self) -> usize {
        self.per_shard_cap.saturating_mul(SHARDS)
    }

    /// Buckets evicted so far while not yet full, because their shard was at its cap: each
    /// was a fail-open of one bucket (see [`InMemoryRateLimitStore`], "Memory").
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
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

    /// The peek, synchronously (the trait method only wraps this): the decision a check would
    /// get now, changing nothing.
    pub fn peek_now(&self, key: &str, policy: &BucketPolicy) -> Decision {
        let now = (self.clock)();
        let previous = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .buckets
            .get(key)
            .filter(|s| s.expires_at > now)
            .map(|s| s.state);
        bucket::peek(bucket::available_tokens(previous, now, policy).0, policy)
    }

    /// The check, synchronously (the trait method only wraps this).
    pub fn check_now(&self, key: &str, policy: &BucketPolicy) -> Decision {
        let now = (self.clock)();
        let (decision, evicted) = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(key, policy, now, self.per_shard_cap);
        if evicted > 0 {
            self.evictions.fetch_add(evicted as u64, Ordering::Relaxed);
            tracing::debug!(
                evicted,
                max_buckets = self.max_buckets(),
                "in-memory rate-limit store at its cap; buckets evicted (fail-open)"
            );
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

    async fn peek(
        &self,
        key: &str,
        policy: &BucketPolicy,
    ) -> Result<Decision, RateLimitStoreError> {
        Ok(self.peek_now(key, policy))
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
    fn peeking_changes_nothing() {
        let clock = ManualClock::new(0.0);
        let store = InMemoryRateLimitStore::with_clock(clock.clock());
        let p = BucketPolicy::new(2.0, 1.0, 1).unwrap();
        assert_eq!(store.peek_now("k", &p).remaining, 2);
        assert!(store.is_empty(), "a peek stores nothing");
        store.check_now("k", &p);
        store.check_now("k", &p);
        for _ in 0..3 {
            let d = store.peek_now("k", &p);
            assert!(!d.allowed);
            assert_eq!(d.retry_after_header(), 60);
        }
        clock.advance(60.0);
        let d = store.peek_now("k", &p);
        assert!(d.allowed);
        assert_eq!(d.remaining, 1);
        // The peeks did not pay: the check sees the same token.
        assert!(store.check_now("k", &p).allowed);
        assert!(!store.peek_now("k", &p).allowed);
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

    fn shard_with(now: f64, cap: usize, buckets: &[(&str, &BucketPolicy, u32)]) -> Shard {
        let mut shard = Shard::default();
        for (key, policy, checks) in buckets {
            for _ in 0..*checks {
                let (_, evicted) = shard.check(key, policy, now, cap);
                assert_eq!(evicted, 0);
            }
        }
        shard
    }

    #[test]
    fn a_full_shard_first_drops_buckets_that_read_as_full() {
        let slow = BucketPolicy::new(10.0, 1.0, 1).unwrap(); // a token every 60 s
        let fast = BucketPolicy::new(5.0, 60.0, 1).unwrap(); // a token every second
        let mut shard = shard_with(
            0.0,
            3,
            &[("slow", &slow, 5), ("fast", &fast, 1), ("other", &slow, 1)],
        );
        // 2 s later `fast` is full again: forgetting it is lossless, nothing live goes.
        let (decision, evicted) = shard.check("new", &slow, 2.0, 3);
        assert!(decision.allowed);
        assert_eq!(evicted, 0);
        assert_eq!(shard.buckets.len(), 3);
        assert!(!shard.buckets.contains_key("fast"));
        // `slow` kept its state: 5 of 10 tokens used.
        let (decision, _) = shard.check("slow", &slow, 2.0, 3);
        assert_eq!(decision.remaining, 4);
    }

    #[test]
    fn a_full_shard_evicts_the_bucket_full_again_soonest() {
        let p = BucketPolicy::new(10.0, 1.0, 1).unwrap(); // a token every 60 s
        let mut shard = shard_with(
            0.0,
            3,
            &[
                ("three_used", &p, 3),
                ("one_used", &p, 1),
                ("five_used", &p, 5),
            ],
        );
        let (decision, evicted) = shard.check("new", &p, 1.0, 3);
        assert!(decision.allowed);
        assert_eq!(evicted, 1);
        assert_eq!(shard.buckets.len(), 3);
        // `one_used` would have been full first (60 s): it went.
        assert!(!shard.buckets.contains_key("one_used"));
        assert!(shard.buckets.contains_key("three_used"));
        assert!(shard.buckets.contains_key("five_used"));
        // The evicted bucket reads as full: a fail-open of one bucket.
        let (decision, evicted) = shard.check("one_used", &p, 1.0, 3);
        assert_eq!(decision.remaining, 9);
        assert_eq!(evicted, 1);
        assert!(!shard.buckets.contains_key("new"));
    }

    #[test]
    fn eviction_ties_remove_exactly_the_batch() {
        let p = BucketPolicy::new(10.0, 1.0, 1).unwrap();
        let keys: Vec<String> = (0..128).map(|i| format!("k{i}")).collect();
        let mut shard = Shard::default();
        for key in &keys {
            shard.check(key, &p, 0.0, 128);
        }
        // All tie; a cap of 128 evicts 128 / 64 = 2 at once.
        let (_, evicted) = shard.check("new", &p, 0.0, 128);
        assert_eq!(evicted, 2);
        assert_eq!(shard.buckets.len(), 127);
        // The next insert finds room.
        let (_, evicted) = shard.check("newer", &p, 0.0, 128);
        assert_eq!(evicted, 0);
        assert_eq!(shard.buckets.len(), 128);
    }

    #[test]
    fn the_store_never_holds_more_than_its_cap() {
        let clock = ManualClock::new(0.0);
        let store = InMemoryRateLimitStore::with_clock(clock.clock()).with_max_buckets(64);
        assert_eq!(store.max_buckets(), 64);
        let p = BucketPolicy::new(3.0, 1.0, 1).unwrap(); // full 180 s after being emptied
        let slow = BucketPolicy::new(3.0, 0.1, 1).unwrap(); // full 600 s after one request
        // The flood's buckets are full again later than the victim's: the victim goes first.
        for _ in 0..3 {
            assert!(store.check_now("victim", &p).allowed);
        }
        assert!(!store.check_now("victim", &p).allowed);
        for i in 0..5_000 {
            assert!(store.check_now(&format!("flood:{i}"), &slow).allowed);
            assert!(store.len() <= 64);
        }
        assert!(store.evictions() > 0);
        // Evicted: its whole bucket again (fail-open of one bucket).
        let d = store.check_now("victim", &p);
        assert!(d.allowed);
        assert_eq!(d.remaining, 2);

        // The other way round, a spent bucket outlives a flood of buckets full sooner.
        let store = InMemoryRateLimitStore::with_clock(clock.clock()).with_max_buckets(64);
        for _ in 0..3 {
            store.check_now("spent", &slow);
        }
        for i in 0..5_000 {
            store.check_now(&format!("flood:{i}"), &p);
        }
        assert!(store.evictions() > 0);
        assert!(!store.check_now("spent", &slow).allowed);
        // Without a flood nothing is evicted.
        let roomy = InMemoryRateLimitStore::with_clock(clock.clock());
        assert_eq!(roomy.max_buckets(), DEFAULT_MAX_BUCKETS);
        for i in 0..5_000 {
            roomy.check_now(&format!("k{i}"), &p);
        }
        assert_eq!((roomy.len(), roomy.evictions()), (5_000, 0));
        assert_eq!(
            InMemoryRateLimitStore::new()
                .with_max_buckets(0)
                .max_buckets(),
            SHARDS
        );
    }
}
