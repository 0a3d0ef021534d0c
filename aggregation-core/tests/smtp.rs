//! `SmtpMailer` against a minimal SMTP server on loopback: the message really goes over SMTP,
//! with its sender, recipient, subject and body.
#![cfg(feature = "smtp")]

use aggregation_core::mail::{Email, Mailer, SmtpMailer};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpListener;

/// Accepts one connection, answers the SMTP dialogue, and returns every line the client sent.
async fn smtp_sink(listener: TcpListener) -> Vec<String> {
    let (socket, _) = listener.accept().await.expect("client connects");
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut seen = Vec::new();
    write
        .write_all(b"220 sink.test ESMTP\r\n")
        .await
        .expect("greeting");
    let mut in_data = false;
    while let Ok(Some(line)) = lines.next_line().await {
        seen.push(line.clone());
        let reply: &[u8] = if in_data {
            if line == "." {
                in_data = false;
                b"250 queued\r\n"
            } else {
                continue;
            }
        } else {
            let verb = line
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_ascii_uppercase();
            match verb.as_str() {
                "EHLO" | "HELO" => b"250-sink.test\r\n250 8BITMIME\r\n",
                "DATA" => {
                    in_data = true;
                    b"354 end with <CRLF>.<CRLF>\r\n"
                }
                "QUIT" => {
                    let _ = write.write_all(b"221 bye\r\n").await;
                    break;
                }
                _ => b"250 ok\r\n",
            }
        };
        if write.write_all(reply).await.is_err() {
            break;
        }
        if seen.iter().any(|line| line == ".") && !in_data {
            // The message is in; a pooled client may keep the connection open.
            break;
        }
    }
    seen
}

#[tokio::test]
async fn smtp_mailer_delivers_over_smtp() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let sink = tokio::spawn(smtp_sink(listener));
    let mailer = SmtpMailer::from_url(
        &format!("smtp://127.0.0.1:{port}"),
        "Aggregation <noreply@example.com>",
    )
    .expect("mailer");
    mailer
        .send(&Email::new(
            "ada@example.com",
            "Verify your email address",
            "Your token: 0123abcd",
        ))
        .await
        .expect("delivered");
    let lines = tokio::time::timeout(std::time::Duration::from_secs(10), sink)
        .await
        .expect("dialogue ends")
        .expect("sink task");
    let text = lines.join("\n");
    assert!(text.contains("MAIL FROM:<noreply@example.com>"), "{text}");
    assert!(text.contains("RCPT TO:<ada@example.com>"), "{text}");
    assert!(
        text.contains("Subject: Verify your email address"),
        "{text}"
    );
    assert!(text.contains("Your token: 0123abcd"), "{text}");
}

#[tokio::test]
async fn a_bad_sender_address_is_refused_up_front() {
    assert!(SmtpMailer::from_url("smtp://127.0.0.1:2525", "not an address").is_err());
}
