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
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

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
    handle: MailQueueHandle,
}

impl MailQueue {
    /// Starts the draining task on the current Tokio runtime.
    pub(crate) fn start(mailer: Arc<dyn Mailer>) -> Self {
        let (sender, receiver) = mpsc::channel::<Email>(QUEUE_CAPACITY);
        let (close, closing) = watch::channel(false);
        let task = tokio::spawn(drain(mailer, receiver, closing));
        let handle = MailQueueHandle {
            inner: Arc::new(HandleInner {
                close,
                sender: sender.clone(),
                task: tokio::sync::Mutex::new(Some(task)),
            }),
        };
        Self { sender, handle }
    }

    /// Queues an email; never waits.
    pub(crate) fn enqueue(&self, email: Email) {
        match self.sender.try_send(email) {
            Ok(()) => {}
            Err(TrySendError::Full(email)) => {
                tracing::error!(subject = %email.subject, "mail queue full; email dropped");
            }
            Err(TrySendError::Closed(email)) => {
                tracing::error!(
                    subject = %email.subject,
                    "mail queue shut down; email dropped"
                );
            }
        }
    }

    /// Reserves a place in the queue for an email that background work will produce, so that
    /// a shutdown waits for that work (a closed queue still takes reserved emails). `None`, and
    /// logged, when the queue is full or shut down.
    pub(crate) fn reserve(&self) -> Option<MailPermit> {
        match self.sender.clone().try_reserve_owned() {
            Ok(permit) => Some(MailPermit(permit)),
            Err(error) => {
                tracing::error!(error = %error, "mail queue unavailable; email will be dropped");
                None
            }
        }
    }

    /// The host's handle on this queue.
    pub(crate) fn handle(&self) -> MailQueueHandle {
        self.handle.clone()
    }
}

/// A reserved place in the queue; dropping it unused gives the place back.
pub(crate) struct MailPermit(mpsc::OwnedPermit<Email>);

impl MailPermit {
    /// Queues the email in the reserved place; never waits.
    pub(crate) fn send(self, email: Email) {
        self.0.send(email);
    }
}

/// Sends queued emails until the queue is shut down, then sends what is still queued: emails
/// accepted before the shutdown are not lost.
async fn drain(
    mailer: Arc<dyn Mailer>,
    mut receiver: mpsc::Receiver<Email>,
    mut closing: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            // Checked first so that a busy queue still notices the shutdown.
            biased;
            () = shut_down(&mut closing) => break,
            email = receiver.recv() => match email {
                Some(email) => deliver(mailer.as_ref(), &email).await,
                None => return,
            },
        }
    }
    receiver.close();
    while let Some(email) = receiver.recv().await {
        deliver(mailer.as_ref(), &email).await;
    }
}

/// Resolves once the queue is shut down (or its handle is gone).
async fn shut_down(closing: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`; it must not live across the select.
    let _ = closing.wait_for(|closing| *closing).await.map(|_| ());
}

/// Shuts the mail queue down when the host stops, delivering what is still queued; from
/// [`AggregationService::mail_queue`](crate::AggregationService::mail_queue).
///
/// ```
/// # async fn demo(service: aggregation_core::AggregationService) {
/// use std::time::Duration;
/// // After the HTTP server has stopped accepting requests:
/// if let Err(error) = service.mail_queue().shutdown(Duration::from_secs(10)).await {
///     eprintln!("{error}");
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct MailQueueHandle {
    inner: Arc<HandleInner>,
}

struct HandleInner {
    close: watch::Sender<bool>,
    sender: mpsc::Sender<Email>,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for MailQueueHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailQueueHandle")
            .field("queued", &self.queued())
            .finish_non_exhaustive()
    }
}

impl MailQueueHandle {
    /// How many emails wait in the queue (not counting one being sent).
    pub fn queued(&self) -> usize {
        self.inner.sender.max_capacity() - self.inner.sender.capacity()
    }

    /// Stops accepting emails (later ones are dropped and logged) and waits at most `timeout`
    /// for the queued ones to be sent, retries included. On timeout the sending task is
    /// stopped and the emails still queued are lost. Once the queue is shut down, later calls
    /// return at once.
    pub async fn shutdown(&self, timeout: Duration) -> Result<(), MailShutdownError> {
        self.inner.close.send_replace(true);
        let mut task = self.inner.task.lock().await;
        let Some(handle) = task.as_mut() else {
            return Ok(());
        };
        let outcome = match tokio::time::timeout(timeout, &mut *handle).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(MailShutdownError::Task(error.to_string())),
            Err(_) => {
                handle.abort();
                Err(MailShutdownError::TimedOut {
                    timeout,
                    queued: self.queued(),
                })
            }
        };
        *task = None;
        outcome
    }
}

/// Why [`MailQueueHandle::shutdown`] could not deliver every queued email.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MailShutdownError {
    /// The queue was not drained in time; `queued` emails were never attempted.
    #[error("mail queue not drained within {timeout:?}; {queued} queued emails dropped")]
    TimedOut {
        /// The time allowed.
        timeout: Duration,
        /// Emails left in the queue.
        queued: usize,
    },
    /// The sending task had ended abnormally (a mailer panicked).
    #[error("mail sending task failed: {0}")]
    Task(String),
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

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// Takes its time per email, so that emails are still queued when the shutdown starts.
    struct SlowMailer {
        delay: Duration,
        inner: MemoryMailer,
    }

    #[async_trait]
    impl Mailer for SlowMailer {
        async fn send(&self, email: &Email) -> Result<(), MailError> {
            tokio::time::sleep(self.delay).await;
            self.inner.send(email).await
        }
    }

    fn slow_queue(delay: Duration) -> (MailQueue, MemoryMailer) {
        let memory = MemoryMailer::new();
        let queue = MailQueue::start(Arc::new(SlowMailer {
            delay,
            inner: memory.clone(),
        }));
        (queue, memory)
    }

    #[tokio::test]
    async fn shutdown_waits_for_an_email_reserved_before_it() {
        let (queue, memory) = slow_queue(Duration::from_millis(1));
        let permit = queue.reserve().expect("an empty queue has room");
        let producer = tokio::spawn(async move {
            // Background work (a password reset's store calls) still running at shutdown.
            tokio::time::sleep(Duration::from_millis(200)).await;
            permit.send(Email::new("ada@example.com", "late", "text"));
        });
        queue
            .handle()
            .shutdown(Duration::from_secs(10))
            .await
            .expect("drained in time");
        producer.await.expect("producer task");
        let subjects: Vec<String> = memory.sent().into_iter().map(|e| e.subject).collect();
        assert_eq!(subjects, ["late"]);
        assert!(
            queue.reserve().is_none(),
            "a shut-down queue reserves nothing"
        );
    }

    #[tokio::test]
    async fn shutdown_delivers_every_email_queued_before_it() {
        let (queue, memory) = slow_queue(Duration::from_millis(20));
        for n in 0..10 {
            queue.enqueue(Email::new("ada@example.com", format!("n{n}"), "text"));
        }
        assert!(
            queue.handle().queued() > 0,
            "the slow mailer keeps emails queued"
        );
        queue
            .handle()
            .shutdown(Duration::from_secs(10))
            .await
            .expect("drained in time");
        let subjects: Vec<String> = memory.sent().into_iter().map(|e| e.subject).collect();
        let expected: Vec<String> = (0..10).map(|n| format!("n{n}")).collect();
        assert_eq!(subjects, expected, "every email, in order");
        assert_eq!(queue.handle().queued(), 0);
    }

    #[tokio::test]
    async fn emails_after_shutdown_are_dropped_and_shutdown_is_idempotent() {
        let memory = MemoryMailer::new();
        let queue = MailQueue::start(Arc::new(memory.clone()));
        queue.enqueue(Email::new("ada@example.com", "before", "text"));
        let handle = queue.handle();
        handle
            .shutdown(Duration::from_secs(5))
            .await
            .expect("drained in time");
        queue.enqueue(Email::new("ada@example.com", "after", "text"));
        handle
            .shutdown(Duration::from_secs(5))
            .await
            .expect("a second shutdown returns at once");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let subjects: Vec<String> = memory.sent().into_iter().map(|e| e.subject).collect();
        assert_eq!(subjects, ["before"]);
    }

    #[tokio::test]
    async fn shutdown_waits_no_longer_than_its_timeout() {
        let (queue, memory) = slow_queue(Duration::from_secs(30));
        for n in 0..3 {
            queue.enqueue(Email::new("ada@example.com", format!("n{n}"), "text"));
        }
        let started = Instant::now();
        let outcome = queue.handle().shutdown(Duration::from_millis(200)).await;
        assert!(started.elapsed() < Duration::from_secs(5), "bounded wait");
        match outcome {
            Err(MailShutdownError::TimedOut { queued, .. }) => {
                assert_eq!(queued, 2, "one was being sent, two never started");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(memory.sent().is_empty());
    }

    #[tokio::test]
    async fn a_failing_email_is_retried_during_the_drain() {
        /// Fails the first attempt of every email.
        struct Flaky {
            failed: std::sync::Mutex<Vec<String>>,
            inner: MemoryMailer,
        }
        #[async_trait]
        impl Mailer for Flaky {
            async fn send(&self, email: &Email) -> Result<(), MailError> {
                {
                    let mut failed = self.failed.lock().expect("not poisoned");
                    if !failed.contains(&email.subject) {
                        failed.push(email.subject.clone());
                        return Err(MailError::Transport("temporary".to_owned()));
                    }
                }
                self.inner.send(email).await
            }
        }
        let memory = MemoryMailer::new();
        let queue = MailQueue::start(Arc::new(Flaky {
            failed: std::sync::Mutex::new(Vec::new()),
            inner: memory.clone(),
        }));
        queue.enqueue(Email::new("ada@example.com", "retried", "text"));
        queue
            .handle()
            .shutdown(Duration::from_secs(10))
            .await
            .expect("drained in time");
        assert_eq!(memory.sent().len(), 1);
    }
}
