//! SMTP through lettre (Tokio, rustls).

use async_trait::async_trait;
use lettre::message::{Mailbox, header::ContentType};
use lettre::{AsyncSmtpTransport, AsyncTransport as _, Message, Tokio1Executor};

use super::{Email, MailError, Mailer};

/// Sends through an SMTP server.
#[derive(Clone)]
pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

impl SmtpMailer {
    /// A mailer from a lettre URL: `smtp://host:port` (plain), `smtp://host:port?tls=required`
    /// (STARTTLS), `smtps://host:port` (TLS); credentials go in the user-info part.
    pub fn from_url(url: &str, from: &str) -> Result<Self, MailError> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|error| MailError::Transport(error.to_string()))?
            .build();
        let from = from
            .parse::<Mailbox>()
            .map_err(|error| MailError::Address(format!("{from}: {error}")))?;
        Ok(Self { transport, from })
    }
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, email: &Email) -> Result<(), MailError> {
        let to = email
            .to
            .parse::<Mailbox>()
            .map_err(|error| MailError::Address(error.to_string()))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(email.subject.clone())
            .header(ContentType::TEXT_PLAIN)
            .body(email.text.clone())
            .map_err(|error| MailError::Message(error.to_string()))?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|error| MailError::Transport(error.to_string()))
    }
}
