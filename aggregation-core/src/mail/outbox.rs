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

/// Creates `path` readable and writable by its owner only: an email holds one-time tokens.
async fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path).await?;
    file.write_all(contents).await?;
    file.flush().await
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
        write_private(&path, message.as_bytes())
            .await
            .map_err(|error| MailError::Transport(error.to_string()))?;
        tracing::info!(path = %path.display(), "email written to the outbox");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> Self {
            Self(std::env::temp_dir().join(format!("aggregation-outbox-{}", uuid::Uuid::new_v4())))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn eml_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("outbox folder exists")
            .map(|entry| entry.expect("readable entry").path())
            .collect();
        files.sort();
        files
    }

    #[tokio::test]
    async fn writes_one_eml_per_email_with_headers_and_body() {
        let temp = TempDir::new();
        let mailer = OutboxMailer::new(&temp.0, "Aggregation <noreply@example.com>");
        mailer
            .send(&Email::new(
                "ada@example.com",
                "Verify your email address",
                "Line one\nLine two",
            ))
            .await
            .expect("written");
        let files = eml_files(&temp.0);
        assert_eq!(files.len(), 1);
        let path = &files[0];
        assert_eq!(path.extension().and_then(|e| e.to_str()), Some("eml"));
        let text = std::fs::read_to_string(path).expect("readable");
        let (headers, body) = text
            .split_once("\r\n\r\n")
            .expect("headers, blank line, body");
        let headers: Vec<&str> = headers.split("\r\n").collect();
        assert!(headers.contains(&"From: Aggregation <noreply@example.com>"));
        assert!(headers.contains(&"To: ada@example.com"));
        assert!(headers.contains(&"Subject: Verify your email address"));
        assert!(headers.contains(&"Content-Type: text/plain; charset=utf-8"));
        assert!(headers.iter().any(|h| h.starts_with("Date: ")));
        assert!(headers.iter().any(|h| h.starts_with("Message-ID: <")));
        assert_eq!(body, "Line one\r\nLine two\r\n", "CRLF line ends");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "only the owner reads one-time tokens");
        }
    }

    #[tokio::test]
    async fn creates_the_folder_when_missing() {
        let temp = TempDir::new();
        let nested = temp.0.join("a").join("outbox");
        assert!(!nested.exists());
        let mailer = OutboxMailer::new(&nested, "noreply@localhost");
        assert_eq!(mailer.dir(), nested.as_path());
        mailer
            .send(&Email::new("ada@example.com", "Hello", "Text"))
            .await
            .expect("written");
        assert_eq!(eml_files(&nested).len(), 1);
    }

    #[tokio::test]
    async fn file_names_are_unique_within_the_same_second() {
        let temp = TempDir::new();
        let mailer = OutboxMailer::new(&temp.0, "noreply@localhost");
        for n in 0..20 {
            mailer
                .send(&Email::new("ada@example.com", format!("n{n}"), "Text"))
                .await
                .expect("written");
        }
        let files = eml_files(&temp.0);
        assert_eq!(files.len(), 20, "no email overwrote another");
        let mut subjects: Vec<String> = files
            .iter()
            .map(|path| {
                let text = std::fs::read_to_string(path).expect("readable");
                text.lines()
                    .find_map(|line| line.strip_prefix("Subject: ").map(str::to_owned))
                    .expect("a subject")
            })
            .collect();
        subjects.sort();
        let mut expected: Vec<String> = (0..20).map(|n| format!("n{n}")).collect();
        expected.sort();
        assert_eq!(subjects, expected);
    }

    #[tokio::test]
    async fn line_breaks_in_headers_cannot_inject_headers() {
        let temp = TempDir::new();
        let mailer = OutboxMailer::new(&temp.0, "noreply@localhost");
        mailer
            .send(&Email::new(
                "ada@example.com\r\nBcc: eve@example.com",
                "Hi\nX-Injected: yes",
                "Text",
            ))
            .await
            .expect("written");
        let text = std::fs::read_to_string(&eml_files(&temp.0)[0]).expect("readable");
        let headers = text.split("\r\n\r\n").next().expect("headers");
        assert!(!headers.lines().any(|line| line.starts_with("Bcc:")));
        assert!(!headers.lines().any(|line| line.starts_with("X-Injected:")));
    }
}
