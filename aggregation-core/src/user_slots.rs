//! Per-user concurrency: how many heavy operations of one user run at once on this instance.
//!
//! An import or a net worth history costs seconds of a database connection and a core; two
//! of them from one user are plenty for any real client, and more only take turns from other
//! users. A [`UserSlots`] counts the running operations per user and refuses one more at once
//! (the HTTP edge answers 429 with `Retry-After`) instead of queueing it: a queue would still
//! hold the request, its body and its connection.
//!
//! The map holds an entry only for a user with an operation running (an entry goes when its
//! last slot is dropped), and at most [`UserSlots::new`]'s `max_users` entries: beyond them
//! the instance is busy for everyone new. It is in process, so the bound is per instance.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use uuid::Uuid;

/// How many imports of one user run at once on an instance.
pub(crate) const IMPORTS_PER_USER: usize = 2;

/// How many heavy reads (net worth, portfolio) of one user run at once on an instance.
pub(crate) const HEAVY_READS_PER_USER: usize = 2;

/// How many users may have one operation of a kind running at once on an instance: far more
/// than the database can serve at once, so only a flood reaches it.
pub(crate) const BUSY_USERS: usize = 10_000;

/// Why a slot was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SlotRefused {
    /// The user has as many operations of this kind running as allowed.
    #[error("{running} already running for this user")]
    UserBusy {
        /// How many are running (the per-user limit).
        running: usize,
    },
    /// As many users as the map holds have one running.
    #[error("too many users have one running on this instance")]
    InstanceBusy,
}

/// Running operations of one kind, counted per user. Cheap to clone; clones share counts.
#[derive(Debug, Clone)]
pub(crate) struct UserSlots {
    running: Arc<Mutex<HashMap<Uuid, usize>>>,
    per_user: usize,
    max_users: usize,
}

impl UserSlots {
    /// At most `per_user` operations of one user at once (at least 1), and at most
    /// `max_users` users with one running (at least 1).
    pub(crate) fn new(per_user: usize, max_users: usize) -> Self {
        Self {
            running: Arc::default(),
            per_user: per_user.max(1),
            max_users: max_users.max(1),
        }
    }

    /// A slot for one more operation of `user`, held until dropped.
    pub(crate) fn try_acquire(&self, user: Uuid) -> Result<UserSlot, SlotRefused> {
        self.try_acquire_up_to(user, self.per_user)
    }

    /// Like [`try_acquire`](Self::try_acquire) with a per-user limit of the caller's (a
    /// configured one that may change between calls).
    pub(crate) fn try_acquire_up_to(
        &self,
        user: Uuid,
        cap: usize,
    ) -> Result<UserSlot, SlotRefused> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let users = running.len();
        match running.get_mut(&user) {
            Some(count) if *count >= cap => return Err(SlotRefused::UserBusy { running: *count }),
            Some(count) => *count += 1,
            None if cap == 0 => return Err(SlotRefused::UserBusy { running: 0 }),
            None if users >= self.max_users => return Err(SlotRefused::InstanceBusy),
            None => {
                running.insert(user, 1);
            }
        }
        Ok(UserSlot {
            slots: self.clone(),
            user,
        })
    }

    /// How many operations of `user` are running.
    #[cfg(test)]
    pub(crate) fn running(&self, user: Uuid) -> usize {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.get(&user).copied().unwrap_or(0)
    }

    /// How many users have one running (the map's size).
    #[cfg(test)]
    pub(crate) fn users(&self) -> usize {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One running operation, counted until dropped.
#[derive(Debug)]
pub(crate) struct UserSlot {
    slots: UserSlots,
    user: Uuid,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        let mut running = self
            .slots
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_gets_at_most_the_limit_and_others_are_not_affected() {
        let slots = UserSlots::new(2, 10);
        let (ada, bob) = (Uuid::now_v7(), Uuid::now_v7());
        let first = slots.try_acquire(ada).expect("first");
        let second = slots.try_acquire(ada).expect("second");
        assert_eq!(
            slots.try_acquire(ada).err(),
            Some(SlotRefused::UserBusy { running: 2 })
        );
        let bobs = slots.try_acquire(bob).expect("another user");
        drop(first);
        let third = slots.try_acquire(ada).expect("a freed slot is given again");
        drop((second, third, bobs));
        assert_eq!(slots.users(), 0, "idle users leave the map");
        assert_eq!(slots.running(ada), 0);
    }

    #[test]
    fn the_map_is_bounded() {
        let slots = UserSlots::new(1, 2);
        let held: Vec<UserSlot> = (0..2)
            .map(|_| slots.try_acquire(Uuid::now_v7()).expect("room"))
            .collect();
        assert_eq!(
            slots.try_acquire(Uuid::now_v7()).err(),
            Some(SlotRefused::InstanceBusy)
        );
        drop(held);
        assert!(slots.try_acquire(Uuid::now_v7()).is_ok());
    }
}
