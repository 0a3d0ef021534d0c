//! One keep-alive connection carries thousands of mixed requests: bodies on `GET`, answers
//! given before the body is read (401, 404, 405, 413, 422), bad ids, nasty JSON, bodies sent
//! in one write or after a pause. The server never closes the connection unless the response
//! before said `Connection: close`; an unread body past 64 KiB gets exactly that answer.
//!
//! The client is raw TCP, so that the case holds the one connection itself and sees every
//! close and reset (a pooling client would hide them by reconnecting).

use std::fmt::Write as _;
use std::time::Duration;

use aggregation_tests::{Target, TestApp, conformance, test_config};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

conformance!(config = small_body_limit; one_connection_carries_mixed_requests);

/// Requests sent over one connection per adapter.
const REQUESTS: usize = 10_000;

/// Every this many requests, one carries an unread body past the drain limit.
const LARGE_EVERY: usize = 1_000;

/// The body limit of the case: small, so that 413 answers come from bodies the server can
/// still drain.
const BODY_LIMIT: usize = 4 * 1024;

/// Bodies past this many unread bytes are not drained (the core's limit).
const DRAIN_LIMIT: usize = 64 * 1024;

/// Far beyond any answer's time; reached only when the server stalls.
const ANSWER_LIMIT: Duration = Duration::from_secs(20);

fn small_body_limit() -> aggregation_core::Config {
    test_config().with_max_body_bytes(BODY_LIMIT)
}

/// Bodies no JSON reader should choke on.
fn nasty_json() -> Vec<Vec<u8>> {
    let deep = format!("{}{}", "[".repeat(5_000), "]".repeat(5_000));
    vec![
        br#"{"email": "a@example.com", "password": "#.to_vec(),
        deep.into_bytes(),
        br#"{"email": 1e999999, "password": -0}"#.to_vec(),
        br#"{"email": "\ud800", "password": "\u0000"}"#.to_vec(),
        b"{\"email\": \"\xff\xfe\", \"password\": \"x\"}".to_vec(),
        br#"{"email": "x", "email": "y"}"#.to_vec(),
        b"\0\0\0\0".to_vec(),
        b"null".to_vec(),
        br#"{"email": ["a@example.com"], "password": {"$gt": ""}}"#.to_vec(),
        format!(r#"{{"email": "{}@example.com"}}"#, "a".repeat(3_000)).into_bytes(),
    ]
}

/// How a request's body goes on the wire.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// `Content-Length`, head and body in one write.
    Whole,
    /// `Content-Length`, the body in a second write after the head.
    Split,
    /// `Content-Length`, the body after a short pause: the answer is ready before it arrives.
    Late,
    /// `Transfer-Encoding: chunked`, in two chunks.
    Chunked,
}

/// One request of the mix and the status it must get.
struct Planned {
    method: &'static str,
    path: String,
    bearer: bool,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    framing: Framing,
    expected: u16,
}

fn plan(index: usize, nasty: &[Vec<u8>]) -> Planned {
    let framing = match index % 7 {
        0 | 3 => Framing::Split,
        1 | 5 => Framing::Chunked,
        4 if index % 21 == 4 => Framing::Late,
        _ => Framing::Whole,
    };
    let json = Some("application/json");
    let filler = |size: usize| {
        let mut body = String::from("{\"filler\": \"");
        body.push_str(&"x".repeat(size));
        body.push_str("\"}");
        body.into_bytes()
    };
    let planned = |method, path: &str, bearer, body, expected| Planned {
        method,
        path: path.to_owned(),
        bearer,
        content_type: json,
        body,
        framing,
        expected,
    };
    if index % LARGE_EVERY == LARGE_EVERY - 1 {
        return Planned {
            framing: Framing::Whole,
            ..planned(
                "GET",
                "/api/v1/accounts",
                false,
                filler(DRAIN_LIMIT + 36 * 1024),
                401,
            )
        };
    }
    match index % 10 {
        // A body on GET, answered 401 before anything reads it.
        0 => planned("GET", "/api/v1/accounts", false, filler(2_000), 401),
        // A malformed id and an unknown one, with a token and a body.
        1 => planned(
            "GET",
            &format!("/api/v1/accounts/not-a-uuid-{index}"),
            true,
            filler(300),
            422,
        ),
        2 => planned(
            "GET",
            "/api/v1/accounts/00000000-0000-4000-8000-000000000000",
            true,
            filler(5_000),
            404,
        ),
        // A method the path does not take.
        3 => planned("PUT", "/api/v1/sessions", false, filler(1_000), 405),
        // A declared length past the body limit.
        4 => planned("POST", "/api/v1/users", false, filler(BODY_LIMIT * 3), 413),
        // Nasty JSON where a body is read.
        5 => {
            let body = nasty[(index / 10) % nasty.len()].clone();
            let expected = if body.len() > BODY_LIMIT { 413 } else { 422 };
            planned("POST", "/api/v1/sessions", false, body, expected)
        }
        // Unknown paths.
        6 => planned("POST", "/api/v1/nowhere", false, filler(700), 404),
        // A JSON body on a path that reads none, with a token: answered 200.
        7 => planned("GET", "/api/v1/accounts", true, filler(1_500), 200),
        // A body of the wrong type.
        8 => Planned {
            content_type: Some("text/plain"),
            ..planned("POST", "/api/v1/sessions", false, b"email=a".to_vec(), 422)
        },
        // No body at all.
        _ => Planned {
            content_type: None,
            ..planned("GET", "/api/v1/accounts", true, Vec::new(), 200)
        },
    }
}

/// What went wrong on the connection.
enum Failure {
    /// Writing or reading failed with a reset.
    Reset(std::io::Error),
    /// The server closed the connection without having said `Connection: close`.
    UnannouncedClose,
    /// No answer within [`ANSWER_LIMIT`].
    Stalled,
    /// The answer could not be parsed.
    Garbled(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Reset(error) => write!(f, "reset: {error}"),
            Self::UnannouncedClose => f.write_str("closed without Connection: close"),
            Self::Stalled => write!(f, "no answer within {ANSWER_LIMIT:?}"),
            Self::Garbled(text) => write!(f, "unreadable answer: {text:?}"),
        }
    }
}

/// An answer as read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    closes: bool,
}

/// The one connection, and what has been read from it but not used yet.
struct Connection {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(address: &str) -> Self {
        let stream = TcpStream::connect(address).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream,
            buffer: Vec::new(),
        }
    }

    async fn send(&mut self, request: &Planned, token: &str) -> Result<(), Failure> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: aggregation.test\r\nUser-Agent: keep-alive-case\r\n",
            request.method, request.path
        );
        if request.bearer {
            let _ = write!(head, "Authorization: Bearer {token}\r\n");
        }
        if let Some(content_type) = request.content_type {
            let _ = write!(head, "Content-Type: {content_type}\r\n");
        }
        let body = match request.framing {
            Framing::Chunked if !request.body.is_empty() => {
                head.push_str("Transfer-Encoding: chunked\r\n\r\n");
                let (first, second) = request.body.split_at(request.body.len() / 2);
                let mut body = Vec::with_capacity(request.body.len() + 32);
                for chunk in [first, second] {
                    if !chunk.is_empty() {
                        body.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                        body.extend_from_slice(chunk);
                        body.extend_from_slice(b"\r\n");
                    }
                }
                body.extend_from_slice(b"0\r\n\r\n");
                body
            }
            _ if request.body.is_empty() => {
                head.push_str("\r\n");
                Vec::new()
            }
            _ => {
                let _ = write!(head, "Content-Length: {}\r\n\r\n", request.body.len());
                request.body.clone()
            }
        };
        match request.framing {
            Framing::Whole => {
                let mut bytes = head.into_bytes();
                bytes.extend_from_slice(&body);
                self.write(&bytes).await
            }
            Framing::Split | Framing::Chunked => {
                self.write(head.as_bytes()).await?;
                tokio::task::yield_now().await;
                self.write(&body).await
            }
            Framing::Late => {
                self.write(head.as_bytes()).await?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                self.write(&body).await
            }
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.stream.write_all(bytes).await.map_err(Failure::Reset)
    }

    /// Reads more bytes; `Ok(false)` at the end of the stream.
    async fn fill(&mut self) -> Result<bool, Failure> {
        let mut chunk = [0_u8; 16 * 1024];
        let read = tokio::time::timeout(ANSWER_LIMIT, self.stream.read(&mut chunk))
            .await
            .map_err(|_| Failure::Stalled)?
            .map_err(Failure::Reset)?;
        self.buffer.extend_from_slice(&chunk[..read]);
        Ok(read > 0)
    }

    async fn answer(&mut self) -> Result<Answer, Failure> {
        let head_end = loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                break end;
            }
            if !self.fill().await? {
                return Err(Failure::UnannouncedClose);
            }
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        self.buffer.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or_else(|| Failure::Garbled(head.clone()))?;
        let mut length = 0;
        let mut chunked = false;
        let mut closes = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else {
                return Err(Failure::Garbled(head.clone()));
            };
            let value = value.trim();
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => {
                    length = value.parse().map_err(|_| Failure::Garbled(head.clone()))?;
                }
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "connection" => {
                    closes = value
                        .split(',')
                        .any(|token| token.trim().eq_ignore_ascii_case("close"));
                }
                _ => {}
            }
        }
        if chunked {
            self.skip_chunked().await?;
        } else {
            while self.buffer.len() < length {
                if !self.fill().await? {
                    return Err(Failure::UnannouncedClose);
                }
            }
            self.buffer.drain(..length);
        }
        Ok(Answer { status, closes })
    }

    async fn skip_chunked(&mut self) -> Result<(), Failure> {
        loop {
            let line_end = loop {
                if let Some(end) = find(&self.buffer, b"\r\n") {
                    break end;
                }
                if !self.fill().await? {
                    return Err(Failure::UnannouncedClose);
                }
            };
            let size_text = String::from_utf8_lossy(&self.buffer[..line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| Failure::Garbled(size_text.clone()))?;
            while self.buffer.len() < line_end + 2 + size + 2 {
                if !self.fill().await? {
                    return Err(Failure::UnannouncedClose);
                }
            }
            self.buffer.drain(..line_end + 2 + size + 2);
            if size == 0 {
                return Ok(());
            }
        }
    }

    /// After an answer with `Connection: close`: the server ends the connection (a reset is
    /// fine here: the unread body it dropped makes the kernel send one).
    async fn expect_closed(&mut self) {
        loop {
            match self.fill().await {
                Ok(false) | Err(Failure::Reset(_)) => return,
                Ok(true) => assert!(
                    self.buffer.is_empty(),
                    "bytes after a Connection: close answer: {:?}",
                    String::from_utf8_lossy(&self.buffer)
                ),
                Err(failure) => panic!("the announced close did not come: {failure}"),
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

async fn one_connection_carries_mixed_requests(app: TestApp) {
    let Some(base) = app.base_url() else {
        assert_eq!(app.target, Target::Bare);
        eprintln!("skipping: the bare service has no connection to keep alive");
        return;
    };
    let address = base.trim_start_matches("http://").to_owned();
    let (_, token, _) = app.user("keep-alive@example.com").await;
    let nasty = nasty_json();
    let mut connection = Connection::open(&address).await;
    let mut failures = Vec::new();
    let mut announced_closes = 0;
    let mut connections = 1;
    for index in 0..REQUESTS {
        let request = plan(index, &nasty);
        let large = request.body.len() > DRAIN_LIMIT;
        let sent = connection.send(&request, &token).await;
        let answer = match (sent, large) {
            // The server may stop reading an oversized body and answer first.
            (Ok(()), _) | (Err(Failure::Reset(_)), true) => connection.answer().await,
            (Err(failure), _) => Err(failure),
        };
        match answer {
            Ok(answer) => {
                assert_eq!(
                    answer.status,
                    request.expected,
                    "request {index}: {} {} ({:?}, {} body bytes)",
                    request.method,
                    request.path,
                    request.framing,
                    request.body.len()
                );
                if large {
                    assert!(
                        answer.closes,
                        "an unread body past 64 KiB announces the close"
                    );
                }
                if answer.closes {
                    announced_closes += 1;
                    connection.expect_closed().await;
                    connection = Connection::open(&address).await;
                    connections += 1;
                }
            }
            Err(failure) => {
                failures.push(format!(
                    "request {index} ({} {}, {:?}): {failure}",
                    request.method, request.path, request.framing
                ));
                connection = Connection::open(&address).await;
                connections += 1;
            }
        }
    }
    eprintln!(
        "{:?}: {REQUESTS} requests, {connections} connections, {announced_closes} announced \
         closes, {} resets or unannounced closes",
        app.target,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {REQUESTS} requests failed on the connection; first ones:\n{}",
        failures.len(),
        failures
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        announced_closes,
        REQUESTS / LARGE_EVERY,
        "only the oversized unread bodies close the connection"
    );
}
