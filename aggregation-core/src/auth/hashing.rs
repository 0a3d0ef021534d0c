//! argon2id password hashing, bounded and with reused memory.
//!
//! Each hash needs 19 MiB of argon2 blocks. Allocating them per hash lets a login storm hold
//! one such allocation per blocking thread, and the allocator keeps the freed pages long after
//! the storm. Here at most [`WorkLimits::concurrent`] hashes run at once (see
//! [`crate::work::WorkGate`]), and each running hash borrows its blocks from a pool that never
//! holds more buffers than that. The pool keeps them only while hashes follow one another: the
//! last hash of a burst frees them all, so an idle server (after the start-up's dummy hash, or
//! after a storm) holds none of that memory.

use std::sync::{Arc, Mutex, PoisonError};

use argon2::password_hash::phc::{Output, ParamsString, PasswordHash, Salt};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use rand::RngExt as _;
use subtle::ConstantTimeEq as _;

use super::password::PasswordError;
use crate::config::WorkLimits;
use crate::work::{Occupancy, WorkGate};

/// OWASP's argon2id recommendation: 19 MiB, 2 passes, 1 lane.
const MEMORY_KIB: u32 = 19_456;
const PASSES: u32 = 2;
const LANES: u32 = 1;
const SALT_BYTES: usize = 16;
const OUTPUT_BYTES: usize = 32;

/// Hashes and verifies passwords on the blocking pool within [`WorkLimits`].
#[derive(Debug, Clone)]
pub(crate) struct PasswordHasher {
    gate: WorkGate,
    memory: Arc<MemoryPool>,
}

/// Argon2 block buffers handed from one hash to the next.
#[derive(Debug, Default)]
struct MemoryPool {
    free: Mutex<Vec<Vec<Block>>>,
}

/// The capacity of a new buffer, in 1 KiB blocks: 33 MiB, above the largest threshold (32 MiB)
/// to which glibc's malloc raises its mmap threshold after a large free. An allocation that size
/// is always mapped on its own and unmapped when freed, so a buffer released at idle goes back to
/// the system; a 19 MiB one would, after the first release, come from a thread's heap, which
/// keeps the pages. Only the blocks a hash uses are written, so the rest is address space, not
/// memory.
const NEW_BUFFER_BLOCKS: usize = 33 * 1024;

impl MemoryPool {
    fn take(&self, blocks: usize) -> Vec<Block> {
        let reused = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut buffer =
            reused.unwrap_or_else(|| Vec::with_capacity(blocks.max(NEW_BUFFER_BLOCKS)));
        // Argon2 writes every block before reading it, so stale contents never leak into a hash.
        if buffer.len() < blocks {
            buffer.resize(blocks, Block::new());
        }
        buffer
    }

    /// Returns a buffer for the next hash, or, when `more_to_come` is false (no other hash is
    /// running or waiting), frees it with every pooled one.
    fn give_back(&self, buffer: Vec<Block>, more_to_come: bool) {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if more_to_come {
            free.push(buffer);
        } else {
            let released = std::mem::take(&mut *free);
            drop(free);
            drop(released);
            drop(buffer);
        }
    }
}

fn params() -> Result<Params, PasswordError> {
    Params::new(MEMORY_KIB, PASSES, LANES, Some(OUTPUT_BYTES))
        .map_err(|error| PasswordError::Hashing(error.to_string()))
}

fn hashing_error(error: impl std::fmt::Display) -> PasswordError {
    PasswordError::Hashing(error.to_string())
}

impl PasswordHasher {
    /// A hasher running at most `limits.concurrent` hashes, with `limits.queued` waiting.
    pub(crate) fn new(limits: WorkLimits) -> Self {
        Self {
            gate: WorkGate::new("password hashing", limits),
            memory: Arc::new(MemoryPool::default()),
        }
    }

    /// The pool as one job on the gate sees it.
    fn borrowed_memory(&self) -> Borrowed {
        Borrowed {
            pool: Arc::clone(&self.memory),
            gate: self.gate.occupancy(),
        }
    }

    /// Hashes a new password into a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`).
    pub(crate) async fn hash(&self, password: &str) -> Result<String, PasswordError> {
        let password = password.to_owned();
        let memory = self.borrowed_memory();
        self.gate
            .run(move || hash_with_pool(&memory, password.as_bytes()))
            .await?
    }

    /// Whether `password` matches the stored PHC `hash`. A malformed hash never matches.
    pub(crate) async fn verify(&self, hash: &str, password: &str) -> Result<bool, PasswordError> {
        let hash = hash.to_owned();
        let password = password.to_owned();
        let memory = self.borrowed_memory();
        self.gate
            .run(move || verify_with_pool(&memory, &hash, password.as_bytes()))
            .await
            .map_err(PasswordError::from)
    }
}

/// The memory pool, taken from a job running on the hashing gate.
struct Borrowed {
    pool: Arc<MemoryPool>,
    gate: Occupancy,
}

fn hash_into(
    memory: &Borrowed,
    argon2: &Argon2<'_>,
    params: &Params,
    password: &[u8],
    salt: &[u8],
    out: &mut [u8],
) -> Result<(), argon2::Error> {
    let mut blocks = memory.pool.take(params.block_count());
    let result = blocks
        .get_mut(..params.block_count())
        .ok_or(argon2::Error::MemoryTooLittle)
        .and_then(|blocks| argon2.hash_password_into_with_memory(password, salt, out, blocks));
    // This job is still counted until it returns: anything beyond it runs or waits.
    memory.pool.give_back(blocks, memory.gate.admitted() > 1);
    result
}

fn hash_with_pool(memory: &Borrowed, password: &[u8]) -> Result<String, PasswordError> {
    let params = params()?;
    let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
    let mut salt = [0u8; SALT_BYTES];
    rand::rng().fill(&mut salt);
    let mut out = [0u8; OUTPUT_BYTES];
    hash_into(memory, &argon2, &params, password, &salt, &mut out).map_err(hashing_error)?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(hashing_error)?,
        salt: Some(Salt::new(&salt).map_err(hashing_error)?),
        hash: Some(Output::new(&out).map_err(hashing_error)?),
    };
    Ok(phc.to_string())
}

fn verify_with_pool(memory: &Borrowed, hash: &str, password: &[u8]) -> bool {
    let Ok(phc) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (&phc.salt, &phc.hash) else {
        return false;
    };
    let Ok(algorithm) = Algorithm::try_from(phc.algorithm.as_str()) else {
        return false;
    };
    let Ok(version) = phc
        .version
        .map_or(Ok(Version::default()), Version::try_from)
    else {
        return false;
    };
    let Ok(params) = Params::try_from(&phc) else {
        return false;
    };
    // A stored hash asking for far more memory than ours would let one row exhaust the host.
    if params.m_cost() > MEMORY_KIB.saturating_mul(4) {
        return false;
    }
    let argon2 = Argon2::new(algorithm, version, params.clone());
    let mut out = vec![0u8; expected.len()];
    if hash_into(memory, &argon2, &params, password, salt, &mut out).is_err() {
        return false;
    }
    bool::from(out.as_slice().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};

    fn hasher() -> PasswordHasher {
        PasswordHasher::new(WorkLimits {
            concurrent: 2,
            queued: 4,
        })
    }

    #[tokio::test]
    async fn hashes_verify_and_reject() {
        let hasher = hasher();
        let hash = hasher.hash("Str0ng!pass").await.expect("hashing works");
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(hasher.verify(&hash, "Str0ng!pass").await.expect("ran"));
        assert!(!hasher.verify(&hash, "Str0ng!pasS").await.expect("ran"));
        assert!(
            !hasher
                .verify("not a hash", "Str0ng!pass")
                .await
                .expect("ran")
        );
        // Idle again: the buffers went back to the system.
        assert_eq!(hasher.memory.free.lock().expect("unpoisoned").len(), 0);
    }

    #[tokio::test]
    async fn hashes_interoperate_with_the_argon2_crate() {
        let hasher = hasher();
        let ours = hasher.hash("Str0ng!pass").await.expect("hashing works");
        let theirs = Argon2::default();
        assert!(
            theirs
                .verify_password(b"Str0ng!pass", ours.as_str())
                .is_ok()
        );
        let params = params().expect("valid params");
        let stock = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(b"Other!pass1")
            .expect("stock hashing works")
            .to_string();
        assert!(hasher.verify(&stock, "Other!pass1").await.expect("ran"));
        assert!(!hasher.verify(&stock, "Other!pass2").await.expect("ran"));
    }
}
