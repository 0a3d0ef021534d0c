//! An in-memory mailer for tests and embedding.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

use super::{Email, MailError, Mailer};

/// Keeps every email it is given; tests read them back.
#[derive(Debug, Clone, Default)]
pub struct MemoryMailer {
    sent: Arc<Mutex<Vec<Email>>>,
    arrived: Arc<Notify>,
}

impl MemoryMailer {
    /// An empty mailer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every email sent so far.
    pub fn sent(&self) -> Vec<Email> {
        self.sent
            .lock()
            .map(|sent| sent.clone())
            .unwrap_or_default()
    }

    /// Waits (at most `timeout`) until `count` emails to `to` have been sent, and returns them.
    pub async fn wait_for(&self, to: &str, count: usize, timeout: Duration) -> Vec<Email> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.arrived.notified();
            let matching: Vec<Email> = self
                .sent()
                .into_iter()
                .filter(|email| email.to.eq_ignore_ascii_case(to))
                .collect();
            if matching.len() >= count || tokio::time::Instant::now() >= deadline {
                return matching;
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }
}

#[async_trait]
impl Mailer for MemoryMailer {
    async fn send(&self, email: &Email) -> Result<(), MailError> {
        self.sent
            .lock()
            .map_err(|_| MailError::Transport("memory mailer poisoned".to_owned()))?
            .push(email.clone());
        self.arrived.notify_waiters();
        Ok(())
    }
}
