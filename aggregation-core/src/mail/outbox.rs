//! A mailer that writes each email as an `.eml` file into a folder.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{Email, MailError, Mailer};

/// Writes each email as an RFC 5322 `.eml` file and logs where; for development and
/// evaluation without a mail server.
#[derive(Debug, Clone)]
pub struct OutboxMailer {
    dir: PathBuf,
    from: String,
}

impl OutboxMailer {
    /// A mailer writing into `dir` (created when missing) with `from` as the sender.
    pub fn new(dir: impl Into<PathBuf>, from: impl Into<String>) -> Self {
        Self {
            dir: dir.into(),
            from: from.into(),
        }
    }

    /// The folder emails are written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Header values must not carry line breaks (header injection).
fn header_value(value: &str) -> String {
    value.replace(['\r', '\n'], " ")
}

#[async_trait]
impl Mailer for OutboxMailer {
    async fn send(&self, email: &Email) -> Result<(), MailError> {
        tokio::fs::create_dir_all(&self.dir)
            .await
            .map_err(|error| MailError::Transport(error.to_string()))?;
        let now = chrono::Utc::now();
        let id = uuid::Uuid::now_v7();
        let body = email.text.replace("\r\n", "\n").replace('\n', "\r\n");
        let message = format!(
            "From: {}\r\nTo: {}\r\nSubject: {}\r\nDate: {}\r\nMessage-ID: <{id}@aggregation>\r\n\
             MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Transfer-Encoding: 8bit\r\n\r\n{body}\r\n",
            header_value(&self.from),
            header_value(&email.to),
            header_value(&email.subject),
            now.to_rfc2822(),
        );
        let path = self
            .dir
            .join(format!("{}-{id}.eml", now.format("%Y%m%dT%H%M%S")));
        tokio::fs::write(&path, message)
            .await
            .map_err(|error| MailError::Transport(error.to_string()))?;
        tracing::info!(path = %path.display(), "email written to the outbox");
        Ok(())
    }
}
