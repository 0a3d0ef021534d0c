//! Outgoing email: a [`Mailer`] trait with SMTP, outbox-folder and in-memory implementations,
//! and the queue that keeps sending off the request path.
//!
//! ```
//! # async fn demo() {
//! use aggregation_core::mail::{Email, Mailer, MemoryMailer};
//! let mailer = MemoryMailer::new();
//! mailer.send(&Email::new("ada@example.com", "Hello", "Text")).await.expect("memory never fails");
//! assert_eq!(mailer.sent().len(), 1);
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

mod memory;
mod outbox;
#[cfg(feature = "smtp")]
mod smtp;

pub use memory::MemoryMailer;
pub use outbox::OutboxMailer;
#[cfg(feature = "smtp")]
pub use smtp::SmtpMailer;

/// One plain-text email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    /// Recipient address.
    pub to: String,
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub text: String,
}

impl Email {
    /// Builds an email.
    pub fn new(to: impl Into<String>, subject: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            to: to.into(),
            subject: subject.into(),
            text: text.into(),
        }
    }
}

/// Why an email could not be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MailError {
    /// An address could not be parsed.
    #[error("invalid address: {0}")]
    Address(String),
    /// The message could not be built.
    #[error("invalid message: {0}")]
    Message(String),
    /// The transport (SMTP server, file system) failed.
    #[error("transport failure: {0}")]
    Transport(String),
}

/// Sends emails. Implementations must be cheap to share; they are called from a background task.
#[async_trait]
pub trait Mailer: Send + Sync + 'static {
    /// Sends one email.
    async fn send(&self, email: &Email) -> Result<(), MailError>;
}

/// How many emails may wait in the queue before new ones are dropped (and logged).
const QUEUE_CAPACITY: usize = 1024;
/// Attempts per email before it is given up (and logged).
const ATTEMPTS: u32 = 3;

/// A bounded queue drained by a background task, so that response times never depend on the
/// mail server.
#[derive(Clone)]
pub(crate) struct MailQueue {
    sender: mpsc::Sender<Email>,
}

impl MailQueue {
    /// Starts the draining task on the current Tokio runtime.
    pub(crate) fn start(mailer: Arc<dyn Mailer>) -> Self {
        let (sender, mut receiver) = mpsc::channel::<Email>(QUEUE_CAPACITY);
        tokio::spawn(async move {
            while let Some(email) = receiver.recv().await {
                deliver(mailer.as_ref(), &email).await;
            }
        });
        Self { sender }
    }

    /// Queues an email; never waits.
    pub(crate) fn enqueue(&self, email: Email) {
        if let Err(error) = self.sender.try_send(email) {
            tracing::error!(error = %error, "mail queue full or closed; email dropped");
        }
    }
}

async fn deliver(mailer: &dyn Mailer, email: &Email) {
    for attempt in 1..=ATTEMPTS {
        match mailer.send(email).await {
            Ok(()) => return,
            Err(error) if attempt < ATTEMPTS => {
                tracing::warn!(error = %error, attempt, "sending email failed; retrying");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
            }
            Err(error) => {
                tracing::error!(error = %error, subject = %email.subject, "sending email failed; giving up");
            }
        }
    }
}
