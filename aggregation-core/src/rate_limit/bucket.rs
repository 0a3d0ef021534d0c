//! Token-bucket arithmetic: pure functions over an injected time.
//!
//! The rules are the spec's, word for word:
//!
//! * a bucket starts full;
//! * tokens added since the last check = `elapsed_seconds × refill_rate / 60`, capped at
//!   `max_tokens`;
//! * a request is allowed when `tokens ≥ cost`, and then `cost` is consumed;
//! * when denied, `retry_after = (cost − tokens) / (refill_rate / 60)` seconds;
//! * remaining tokens are reported rounded down;
//! * the state expires after `ceil(max_tokens / refill_rate × 60) + 60` seconds.
//!
//! Divisions by `refill_rate / 60` are computed as `× 60 / refill_rate`, which is the same
//! number without the rounding error of `refill_rate / 60` (so 5 tokens per minute gives a
//! `retry_after` of exactly 12 s, not 12.000000000000002 s).
//!
//! Time is a plain `f64` number of seconds from any fixed origin. If `now` is earlier than
//! the time stored in the state (clock skew between instances, or two threads that read the
//! clock in one order and take the lock in the other), the stored time is used: time never
//! runs backwards for a bucket, and no refill is counted twice.

use serde::{Deserialize, Serialize};

use super::policy::PolicyError;

/// The numbers of one token bucket: capacity, refill speed and the cost of one request.
///
/// Built with [`BucketPolicy::new`], which refuses values the arithmetic cannot use, so every
/// `BucketPolicy` is valid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketPolicy {
    max_tokens: f64,
    refill_rate: f64,
    cost: u32,
}

impl BucketPolicy {
    /// A bucket of `max_tokens` (capacity and burst) refilled at `refill_rate` tokens per
    /// minute, each request costing `cost` tokens.
    ///
    /// # Errors
    /// [`PolicyError::InvalidBucket`] unless `max_tokens ≥ 1` and finite, `refill_rate > 0` and
    /// finite, and `1 ≤ cost ≤ max_tokens` (a larger cost could never be paid).
    pub fn new(max_tokens: f64, refill_rate: f64, cost: u32) -> Result<Self, PolicyError> {
        let invalid = PolicyError::InvalidBucket;
        if !max_tokens.is_finite() || max_tokens < 1.0 {
            return Err(invalid("max_tokens must be a finite number >= 1"));
        }
        if !refill_rate.is_finite() || refill_rate <= 0.0 {
            return Err(invalid("refill_rate must be a finite number > 0"));
        }
        if cost == 0 {
            return Err(invalid("cost must be >= 1"));
        }
        if f64::from(cost) > max_tokens {
            return Err(invalid("cost must not exceed max_tokens"));
        }
        Ok(Self {
            max_tokens,
            refill_rate,
            cost,
        })
    }

    /// Capacity (and burst size) in tokens.
    pub fn max_tokens(&self) -> f64 {
        self.max_tokens
    }

    /// Tokens added per minute.
    pub fn refill_rate(&self) -> f64 {
        self.refill_rate
    }

    /// Tokens one request consumes.
    pub fn cost(&self) -> u32 {
        self.cost
    }

    /// The same bucket with another cost per request.
    ///
    /// # Errors
    /// As [`BucketPolicy::new`].
    pub fn with_cost(self, cost: u32) -> Result<Self, PolicyError> {
        Self::new(self.max_tokens, self.refill_rate, cost)
    }

    /// Seconds a bucket's state is kept after its last check:
    /// `ceil(max_tokens / refill_rate × 60) + 60` (120 for 5 tokens at 5 per minute).
    ///
    /// By then an untouched bucket is full again, so forgetting it is the same as keeping it.
    pub fn ttl_secs(&self) -> u64 {
        // Non-negative and finite by construction; `as` saturates at u64::MAX.
        (self.max_tokens * 60.0 / self.refill_rate).ceil() as u64 + 60
    }

    /// Seconds needed to refill `tokens` tokens.
    fn secs_to_refill(&self, tokens: f64) -> f64 {
        tokens * 60.0 / self.refill_rate
    }
}

/// Seconds until a bucket holding `tokens` is full again if untouched (`0` when it is full).
pub(crate) fn secs_to_full(tokens: f64, policy: &BucketPolicy) -> f64 {
    policy.secs_to_refill(policy.max_tokens - tokens).max(0.0)
}

/// What is stored per bucket between checks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct BucketState {
    /// Tokens left after the last check (fractional).
    pub tokens: f64,
    /// Clock reading (seconds) of the last check.
    pub updated_at: f64,
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Bucket capacity (`max_tokens`, rounded down): the `X-RateLimit-Limit` header.
    pub limit: u64,
    /// Tokens left after this check, rounded down: the `X-RateLimit-Remaining` header.
    pub remaining: u64,
    /// Seconds until the request could be allowed; `0.0` when allowed.
    pub retry_after_secs: f64,
    /// Whole seconds (rounded up) until the bucket is full again: the `X-RateLimit-Reset`
    /// header.
    pub reset_after_secs: u64,
}

impl Decision {
    /// The `Retry-After` header and the body's `retry_after`: `max(1, ceil(retry_after))`.
    pub fn retry_after_header(&self) -> u64 {
        // Finite and non-negative by construction; `as` saturates.
        (self.retry_after_secs.ceil() as u64).max(1)
    }

    /// The decision reported when the store failed: allowed, with a full bucket
    /// (`remaining = limit`, `retry_after_secs = 0`, `reset_after_secs = 0`).
    pub fn fail_open(policy: &BucketPolicy) -> Self {
        let limit = policy.max_tokens.floor() as u64;
        Self {
            allowed: true,
            limit,
            remaining: limit,
            retry_after_secs: 0.0,
            reset_after_secs: 0,
        }
    }
}

/// Tokens in the bucket at `now_secs`, before this request pays, and the time the new state
/// records (`max(now, state.updated_at)`).
///
/// A missing state is a full bucket.
pub(crate) fn available_tokens(
    state: Option<BucketState>,
    now_secs: f64,
    policy: &BucketPolicy,
) -> (f64, f64) {
    match state {
        None => (policy.max_tokens, now_secs),
        Some(state) => {
            let now = now_secs.max(state.updated_at);
            let elapsed = now - state.updated_at;
            let refilled = state.tokens + elapsed * policy.refill_rate / 60.0;
            (refilled.min(policy.max_tokens), now)
        }
    }
}

/// Decide on a request given the tokens available before it pays; returns the tokens left
/// afterwards and the decision.
///
/// Shared by every store: the Redis script computes `available` atomically on the server
/// with the same formula as [`available_tokens`] and this function derives the rest.
pub(crate) fn decide(available: f64, policy: &BucketPolicy) -> (f64, Decision) {
    let cost = f64::from(policy.cost);
    let allowed = available >= cost;
    let left = if allowed { available - cost } else { available };
    let retry_after_secs = if allowed {
        0.0
    } else {
        policy.secs_to_refill(cost - available)
    };
    let reset_after_secs = policy
        .secs_to_refill(policy.max_tokens - left)
        .max(0.0)
        .ceil() as u64;
    let decision = Decision {
        allowed,
        limit: policy.max_tokens.floor() as u64,
        remaining: left.max(0.0).floor() as u64,
        retry_after_secs,
        reset_after_secs,
    };
    (left, decision)
}

/// The decision a request would get given the tokens available now, **without paying**: for
/// [`RateLimitStore::peek`](super::RateLimitStore::peek). `remaining` is the tokens available
/// (rounded down), `reset_after_secs` the time until the bucket is full from there.
pub(crate) fn peek(available: f64, policy: &BucketPolicy) -> Decision {
    let cost = f64::from(policy.cost);
    let allowed = available >= cost;
    Decision {
        allowed,
        limit: policy.max_tokens.floor() as u64,
        remaining: available.max(0.0).floor() as u64,
        retry_after_secs: if allowed {
            0.0
        } else {
            policy.secs_to_refill(cost - available)
        },
        reset_after_secs: secs_to_full(available, policy).ceil() as u64,
    }
}

/// One check: the new state to store and the decision.
///
/// `state` is what the store held for this bucket (`None` when it had nothing, or the state
/// had expired), `now_secs` the clock reading in seconds.
pub(crate) fn check(
    state: Option<BucketState>,
    now_secs: f64,
    policy: &BucketPolicy,
) -> (BucketState, Decision) {
    let (available, now) = available_tokens(state, now_secs, policy);
    let (tokens, decision) = decide(available, policy);
    (
        BucketState {
            tokens,
            updated_at: now,
        },
        decision,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_example_holds() {
        let login = BucketPolicy::new(5.0, 5.0, 1).unwrap();
        let mut state = None;
        for _ in 0..5 {
            let (next, decision) = check(state, 0.0, &login);
            assert!(decision.allowed);
            state = Some(next);
        }
        let (_, sixth) = check(state, 0.0, &login);
        assert!(!sixth.allowed);
        assert_eq!(sixth.retry_after_secs, 12.0);
        assert_eq!(sixth.retry_after_header(), 12);
    }

    fn login() -> BucketPolicy {
        BucketPolicy::new(5.0, 5.0, 1).unwrap()
    }

    #[test]
    fn sixth_login_in_a_minute_is_denied_for_12_seconds() {
        let p = login();
        let mut state = None;
        for i in 0..5u64 {
            let (s, d) = check(state, 100.0 + i as f64 * 0.1, &p);
            assert!(d.allowed, "request {i}");
            assert_eq!(d.remaining, 4 - i);
            assert_eq!(d.limit, 5);
            state = Some(s);
        }
        // 0.4 s elapsed in total: 0.4 × 5 / 60 = 0.0333 tokens refilled.
        let (s, d) = check(state, 100.4, &p);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert!((d.retry_after_secs - (1.0 - 0.4 * 5.0 / 60.0) * 12.0).abs() < 1e-9);
        assert_eq!(d.retry_after_header(), 12);
        // Immediately after five requests at the same instant: exactly 12 s.
        let mut state = None;
        for _ in 0..5 {
            state = Some(check(state, 0.0, &p).0);
        }
        let (_, d) = check(state, 0.0, &p);
        assert_eq!(d.retry_after_secs, 12.0);
        assert_eq!(d.retry_after_header(), 12);
        assert_eq!(d.reset_after_secs, 60);
        // 12 s later one token is back.
        let (_, d) = check(Some(s), 100.4 + 12.0, &p);
        assert!(d.allowed);
    }

    #[test]
    fn ttl_matches_the_spec() {
        assert_eq!(login().ttl_secs(), 120);
        assert_eq!(BucketPolicy::new(3.0, 1.0, 1).unwrap().ttl_secs(), 240);
        assert_eq!(BucketPolicy::new(10.0, 5.0, 1).unwrap().ttl_secs(), 180);
        // 10 / 0.7 × 60 = 857.14… → 858
        assert_eq!(BucketPolicy::new(10.0, 0.7, 1).unwrap().ttl_secs(), 918);
    }

    #[test]
    fn remaining_is_floored_and_refill_capped() {
        let p = BucketPolicy::new(3.0, 1.0, 1).unwrap();
        let (s, d) = check(None, 0.0, &p);
        assert_eq!(d.remaining, 2);
        // 30 s at 1/min = 0.5 token: 2.5 available, 1.5 left → 1.
        let (s, d) = check(Some(s), 30.0, &p);
        assert!(d.allowed);
        assert_eq!(d.remaining, 1);
        assert!((s.tokens - 1.5).abs() < 1e-12);
        // reset: 1.5 tokens missing at 1/min = 90 s.
        assert_eq!(d.reset_after_secs, 90);
        // A day later the bucket is full, not overflowing.
        let (s, d) = check(Some(s), 86_400.0, &p);
        assert_eq!(d.remaining, 2);
        assert_eq!(s.tokens, 2.0);
    }

    #[test]
    fn fractional_refill_rates_work() {
        let p = BucketPolicy::new(2.0, 0.5, 1).unwrap();
        let (s, _) = check(None, 0.0, &p);
        let (s, _) = check(Some(s), 0.0, &p);
        let (_, d) = check(Some(s), 60.0, &p);
        // 60 s at 0.5/min = 0.5 token: denied, 0.5 token missing = 60 s.
        assert!(!d.allowed);
        assert!((d.retry_after_secs - 60.0).abs() < 1e-9);
        assert_eq!(d.reset_after_secs, 180);
    }

    #[test]
    fn clock_going_backwards_does_not_refill_twice() {
        let p = login();
        let (s, _) = check(None, 100.0, &p);
        let (s2, d) = check(Some(s), 90.0, &p);
        assert!(d.allowed);
        assert_eq!(s2.updated_at, 100.0);
        assert_eq!(s2.tokens, 3.0);
    }

    #[test]
    fn cost_above_one() {
        let p = BucketPolicy::new(5.0, 5.0, 3).unwrap();
        let (s, d) = check(None, 0.0, &p);
        assert!(d.allowed);
        assert_eq!(d.remaining, 2);
        let (_, d) = check(Some(s), 0.0, &p);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_secs, 12.0);
    }

    #[test]
    fn invalid_policies_are_refused() {
        assert!(BucketPolicy::new(0.0, 1.0, 1).is_err());
        assert!(BucketPolicy::new(f64::NAN, 1.0, 1).is_err());
        assert!(BucketPolicy::new(5.0, 0.0, 1).is_err());
        assert!(BucketPolicy::new(5.0, f64::INFINITY, 1).is_err());
        assert!(BucketPolicy::new(5.0, 1.0, 0).is_err());
        assert!(BucketPolicy::new(5.0, 1.0, 6).is_err());
    }

    #[test]
    fn peeking_pays_nothing() {
        let p = BucketPolicy::new(2.0, 1.0, 1).unwrap();
        let d = peek(2.0, &p);
        assert!(d.allowed);
        assert_eq!((d.remaining, d.reset_after_secs), (2, 0));
        let d = peek(0.5, &p);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.retry_after_secs, 30.0);
        assert_eq!(d.reset_after_secs, 90);
    }

    #[test]
    fn retry_after_header_is_at_least_one() {
        let d = Decision {
            allowed: false,
            limit: 5,
            remaining: 0,
            retry_after_secs: 0.2,
            reset_after_secs: 1,
        };
        assert_eq!(d.retry_after_header(), 1);
        let d = Decision {
            retry_after_secs: 1.01,
            ..d
        };
        assert_eq!(d.retry_after_header(), 2);
    }
}
