//! The reference server as an operator runs it: its configuration, its start-up and its
//! shutdown. Each test starts the real binary in a temporary folder, with a temporary SQLite
//! database and a free port; every wait is bounded.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_aggregation-server");
/// Long enough for a debug build on a busy machine; only reached when something is broken.
const TIMEOUT: Duration = Duration::from_secs(60);
const PASSWORD: &str = "Str0ng!Passw0rd";

/// A temporary folder the server runs in: database, generated secrets and outbox.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn outbox(&self) -> PathBuf {
        self.path().join("outbox")
    }

    /// The server command with only the given settings: none inherited from the environment
    /// running the tests.
    fn command(&self, env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(BINARY);
        command.current_dir(self.path());
        for (name, _) in std::env::vars() {
            if name.starts_with("AGG_") {
                command.env_remove(name);
            }
        }
        let database = format!(
            "sqlite://{}?mode=rwc",
            self.path().join("aggregation.db").display()
        );
        command
            .env("AGG_DATABASE_URL", database)
            .env("AGG_BIND", "127.0.0.1:0")
            .env("AGG_OUTBOX_DIR", self.outbox())
            .env("AGG_JWT_SECRET", "a-test-secret-of-at-least-32-bytes-long")
            .env("AGG_RATE_LIMITS", "off")
            .env("NO_COLOR", "1");
        for (name, value) in env {
            command.env(name, value);
        }
        command.stdin(Stdio::null());
        command
    }

    /// Runs a command that is expected to end on its own, killing it after [`TIMEOUT`].
    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut child = self
            .command(env)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("server binary starts");
        let stdout = drain(child.stdout.take().expect("piped"));
        let stderr = drain(child.stderr.take().expect("piped"));
        let status = wait(&mut child, TIMEOUT);
        Output {
            status,
            stdout: join(stdout),
            stderr: join(stderr),
        }
    }

    /// Starts the server and waits for its "listening on" line.
    fn start(&self, env: &[(&str, &str)]) -> Server {
        let mut child = self
            .command(env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("server binary starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().expect("piped")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("piped")),
        ] {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().expect("not poisoned").push(line);
                }
            });
        }
        let mut server = Server {
            child,
            lines,
            address: None,
        };
        let line = server.wait_for_line(|line| line.contains("listening on http://"));
        let address = line
            .split("listening on http://")
            .nth(1)
            // Ends at a space (text lines) or at the closing quote (JSON lines).
            .and_then(|rest| rest.split(|c: char| c.is_whitespace() || c == '"').next())
            .and_then(|address| address.parse::<SocketAddr>().ok())
            .unwrap_or_else(|| panic!("an address in {line:?}"));
        assert_ne!(address.port(), 0, "the real port is logged");
        server.address = Some(address);
        server
    }

    /// The verification token mailed to `to`, read from the outbox.
    fn verification_token(&self, to: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let token = self
                .emails()
                .into_iter()
                .filter(|text| {
                    text.contains(&format!("To: {to}\r\n")) && text.contains("Verify your email")
                })
                .find_map(|text| {
                    text.lines()
                        .map(str::trim)
                        .find(|line| {
                            line.len() == 64 && line.bytes().all(|b| b.is_ascii_hexdigit())
                        })
                        .map(str::to_owned)
                });
            if let Some(token) = token {
                return token;
            }
            assert!(Instant::now() < deadline, "no verification email to {to}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every email in the outbox.
    fn emails(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.outbox()) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "eml"))
            .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
            .collect()
    }
}

fn drain(mut stream: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes);
        bytes
    })
}

fn join(reader: std::thread::JoinHandle<Vec<u8>>) -> Vec<u8> {
    reader.join().expect("reader thread")
}

/// Waits for the process to end; kills it and fails the test after `timeout`.
fn wait(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("process state") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running server; killed when dropped, so a failing test leaves no process behind.
struct Server {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    address: Option<SocketAddr>,
}

impl Server {
    fn address(&self) -> SocketAddr {
        self.address.expect("started")
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("not poisoned").clone()
    }

    fn wait_for_line(&mut self, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(line) = self.lines().into_iter().find(|line| matches(line)) {
                return line;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the server exited ({status}); output:\n{}",
                    self.lines().join("\n")
                );
            }
            assert!(
                Instant::now() < deadline,
                "line not logged; output:\n{}",
                self.lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and returns the exit status.
    fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM delivered");
        let status = wait(&mut self.child, TIMEOUT);
        // The reader threads end with the process; give them a moment to take the last lines.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.lines().iter().any(|line| line.contains("stopped")) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        (status, self.lines())
    }

    /// One HTTP/1.0 request (so the body is never chunked); returns the status and body.
    fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (u16, String) {
        let (status, _, body) = self.request_with_head(method, path, token, body);
        (status, body)
    }

    /// [`Self::request`], with the response head (status line and headers) too.
    fn request_with_head(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (u16, String, String) {
        self.request_as(method, path, token, "application/json", body)
    }

    /// [`Self::request_with_head`] with a body of `content_type`.
    fn request_as(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        content_type: &str,
        body: Option<&str>,
    ) -> (u16, String, String) {
        let mut stream =
            TcpStream::connect_timeout(&self.address(), TIMEOUT).expect("server reachable");
        stream.set_read_timeout(Some(TIMEOUT)).expect("timeout set");
        stream
            .set_write_timeout(Some(TIMEOUT))
            .expect("timeout set");
        let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {}\r\n", self.address());
        if let Some(token) = token {
            request.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.unwrap_or_default();
        if !body.is_empty() {
            request.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).expect("request sent");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response read");
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("a status line in {response:?}"));
        let (head, body) = response
            .split_once("\r\n\r\n")
            .map(|(head, body)| (head.to_owned(), body.to_owned()))
            .unwrap_or_default();
        (status, head, body)
    }

    /// Registers `email` and verifies it with the token from the outbox.
    fn register_and_verify(&self, workspace: &Workspace, email: &str) {
        let body = format!(r#"{{"email":"{email}","password":"{PASSWORD}"}}"#);
        let (status, response) = self.request("POST", "/api/v1/users", None, Some(&body));
        assert_eq!(status, 201, "registration of {email}: {response}");
        let token = workspace.verification_token(email);
        let body = format!(r#"{{"token":"{token}"}}"#);
        let (status, response) =
            self.request("POST", "/api/v1/email-verifications", None, Some(&body));
        assert_eq!(status, 201, "verification of {email}: {response}");
    }

    /// Logs in and returns the access token.
    fn login(&self, email: &str) -> String {
        let body = format!(r#"{{"email":"{email}","password":"{PASSWORD}"}}"#);
        let (status, response) = self.request("POST", "/api/v1/sessions", None, Some(&body));
        assert_eq!(status, 201, "login of {email}: {response}");
        let json: serde_json::Value = serde_json::from_str(&response).expect("JSON tokens");
        json["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }

    fn admin_config_status(&self, token: &str) -> u16 {
        self.request("GET", "/api/v1/admin/security/config", Some(token), None)
            .0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn help_lists_every_setting() {
    let output = Workspace::new().run(&[], &["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    // The table of decisions.md "Reference server configuration".
    for variable in [
        "AGG_BIND",
        "AGG_DATABASE_URL",
        "AGG_BASE_URL",
        "AGG_JWT_SECRET",
        "AGG_ENCRYPTION_KEYS",
        "AGG_SMTP_URL",
        "AGG_OUTBOX_DIR",
        "AGG_MAIL_FROM",
        "AGG_ADMIN_EMAILS",
        "AGG_ROTATION_GRACE_SECONDS",
        "AGG_RATE_LIMITS",
        "AGG_REDIS_URL",
        "AGG_TRUSTED_PROXIES",
        "AGG_RATE_LIMIT_MAX_BUCKETS",
        "AGG_LOGIN_MAX_FAILURES",
        "AGG_LOGIN_FAILURE_WINDOW_SECONDS",
        "AGG_MAX_UPLOAD_BYTES",
        "AGG_OAUTH_REDIRECT_URIS",
        "AGG_OAUTH_STATE_TTL",
        "AGG_OAUTH_CALLBACK_REQUIRES_AUTH",
        "AGG_SCHWAB_BASE_URL",
        "AGG_SCHWAB_CLIENT_ID",
        "AGG_SCHWAB_CLIENT_SECRET",
        "AGG_SANDBOX",
        "AGG_LOG",
        "AGG_LOG_FORMAT",
        "AGG_METRICS",
        "AGG_SESSION_MAX_DAYS",
        "AGG_SHUTDOWN_SECONDS",
        "AGG_HEADER_TIMEOUT_SECONDS",
        "AGG_BODY_TIMEOUT_SECONDS",
        "AGG_MAX_CONNECTIONS",
        "AGG_MAX_ACCOUNTS_PER_USER",
        "AGG_HASH_CONCURRENCY",
        "AGG_HASH_QUEUE",
    ] {
        assert!(
            help.contains(&format!("[env: {variable}")),
            "--help does not list {variable}:\n{help}"
        );
    }
    // And every variable the server reads, the providers' included, as its source declares them.
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/main.rs"))
        .expect("the server's source");
    let declared: Vec<&str> = source
        .split("env = \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert!(declared.len() > 40, "{declared:?}");
    for variable in declared {
        assert!(
            help.contains(&format!("[env: {variable}")),
            "--help does not list {variable}:\n{help}"
        );
    }
    assert!(help.contains("grant-admin"), "the subcommand is listed");
    assert!(help.contains("openapi"), "the subcommand is listed");
}

#[test]
fn openapi_prints_the_document_and_starts_nothing() {
    let workspace = Workspace::new();
    let output = workspace.run(
        &[
            ("AGG_BASE_URL", "https://api.example.com"),
            // Never opened: the document needs no database.
            ("AGG_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none"),
        ],
        &["openapi"],
    );
    assert!(output.status.success(), "{output:?}");
    let document: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is the JSON document");
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["servers"][0]["url"], "https://api.example.com");
    assert!(document["paths"]["/api/v1/openapi.json"]["get"].is_object());
    assert!(
        !workspace.path().join("data").exists(),
        "no secrets generated"
    );
}

/// Starts the server with `env` and expects it to refuse to start with a message naming
/// `variable`.
fn assert_refused(workspace: &Workspace, env: &[(&str, &str)], variable: &str) {
    let output = workspace.run(env, &[]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{env:?} was accepted:\n{text}");
    assert!(
        text.contains(&format!("{variable}:")),
        "{env:?}: the message does not name {variable}:\n{text}"
    );
    assert!(
        !text.contains("listening on"),
        "{env:?}: the server started:\n{text}"
    );
}

#[test]
fn a_bad_enable_banking_setting_stops_the_start_naming_the_variable() {
    let workspace = Workspace::new();
    let garbage = workspace.path().join("garbage.pem");
    std::fs::write(
        &garbage,
        "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n",
    )
    .expect("written");
    let garbage = garbage.display().to_string();
    let missing = workspace.path().join("missing.pem").display().to_string();
    let keys = concat!(env!("CARGO_MANIFEST_DIR"), "/../aggregation-sandbox/keys");
    let public = format!("{keys}/enablebanking-sandbox-public.pem");
    let private = format!("{keys}/enablebanking-sandbox-private.pem");
    let app = ("AGG_ENABLEBANKING_APP_ID", "app-1");
    let cases: [(&[(&str, &str)], &str); 6] = [
        (
            &[app, ("AGG_ENABLEBANKING_KEY_FILE", &garbage)],
            "AGG_ENABLEBANKING_KEY_FILE",
        ),
        (
            &[app, ("AGG_ENABLEBANKING_KEY_FILE", &missing)],
            "AGG_ENABLEBANKING_KEY_FILE",
        ),
        (
            &[app, ("AGG_ENABLEBANKING_KEY_FILE", &public)],
            "AGG_ENABLEBANKING_KEY_FILE",
        ),
        (&[app], "AGG_ENABLEBANKING_KEY_FILE"),
        (
            &[("AGG_ENABLEBANKING_KEY_FILE", &private)],
            "AGG_ENABLEBANKING_APP_ID",
        ),
        (
            &[
                app,
                ("AGG_ENABLEBANKING_KEY_FILE", &private),
                ("AGG_ENABLEBANKING_BASE_URL", "ftp://api.example"),
            ],
            "AGG_ENABLEBANKING_BASE_URL",
        ),
    ];
    for (env, variable) in cases {
        assert_refused(&workspace, env, variable);
    }
}

/// A key file its group or others may read is warned about at start; one only its owner
/// reads is not.
#[cfg(unix)]
#[test]
fn an_enable_banking_key_file_readable_by_others_is_warned_about() {
    use std::os::unix::fs::PermissionsExt as _;
    let workspace = Workspace::new();
    let warning = "readable by its group or others";
    for (mode, warned) in [(0o644, true), (0o640, true), (0o600, false)] {
        // Not a key, so the start stops right after the check (no server left running).
        let key = workspace.path().join(format!("key-{mode:o}.pem"));
        std::fs::write(&key, "not a key").expect("written");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let key = key.display().to_string();
        let output = workspace.run(
            &[
                ("AGG_ENABLEBANKING_APP_ID", "app-1"),
                ("AGG_ENABLEBANKING_KEY_FILE", &key),
            ],
            &[],
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.status.success(), "{text}");
        assert_eq!(text.contains(warning), warned, "mode {mode:o}:\n{text}");
    }
}

#[test]
fn a_malformed_setting_stops_the_start_naming_the_variable() {
    let workspace = Workspace::new();
    let bad_policies = workspace.path().join("policies.toml");
    std::fs::write(&bad_policies, "[[[ not toml").expect("written");
    let bad_policies = bad_policies.display().to_string();
    let missing_policies = workspace.path().join("missing.toml").display().to_string();
    let cases: [(&str, &str); 25] = [
        ("AGG_SESSION_MAX_DAYS", "forever"),
        ("AGG_MAX_CONNECTIONS", "0"),
        ("AGG_MAX_CONNECTIONS", "many"),
        ("AGG_MAX_ACCOUNTS_PER_USER", "0"),
        ("AGG_MAX_ACCOUNTS_PER_USER", "-5"),
        ("AGG_SHUTDOWN_SECONDS", "-1"),
        ("AGG_HEADER_TIMEOUT_SECONDS", "1.5"),
        ("AGG_HASH_CONCURRENCY", "0"),
        ("AGG_BIND", "localhost"),
        ("AGG_BIND", "127.0.0.1:99999"),
        ("AGG_LOG", "aggregation_core=loud"),
        ("AGG_LOG_FORMAT", "xml"),
        ("AGG_METRICS", "maybe"),
        ("AGG_ROTATION_GRACE_SECONDS", "-1"),
        ("AGG_ROTATION_GRACE_SECONDS", "five"),
        ("AGG_MAIL_FROM", "not a mailbox"),
        ("AGG_MAIL_FROM", "Aggregation <noreply>"),
        ("AGG_RATE_LIMITS", &missing_policies),
        ("AGG_RATE_LIMITS", &bad_policies),
        ("AGG_OAUTH_CALLBACK_REQUIRES_AUTH", "maybe"),
        ("AGG_SANDBOX", "yes"),
        ("AGG_RATE_LIMIT_MAX_BUCKETS", "many"),
        ("AGG_LOGIN_MAX_FAILURES", "-1"),
        ("AGG_LOGIN_FAILURE_WINDOW_SECONDS", "0"),
        ("AGG_LOGIN_FAILURE_WINDOW_SECONDS", "99999999"),
    ];
    for (variable, value) in cases {
        assert_refused(&workspace, &[(variable, value)], variable);
    }
    let output = workspace.run(&[], &["grant-admin", "nobody@example.com"]);
    assert!(!output.status.success(), "an unknown email is an error");
}

#[test]
fn serves_grants_admins_drains_mail_and_stops_on_sigterm() {
    let workspace = Workspace::new();
    let server = workspace.start(&[]);
    let listening: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|line| line.contains("listening on"))
        .collect();
    assert_eq!(listening.len(), 1, "one line names the address");

    let (status, body) = server.request("GET", "/health", None, None);
    assert_eq!(status, 200, "{body}");

    server.register_and_verify(&workspace, "ada@example.com");
    server.register_and_verify(&workspace, "bob@example.com");
    let token = server.login("ada@example.com");
    assert_eq!(server.admin_config_status(&token), 403, "not an admin yet");

    let output = workspace.run(&[], &["grant-admin", "ada@example.com"]);
    assert!(
        output.status.success(),
        "grant-admin failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let token = server.login("ada@example.com");
    assert_eq!(
        server.admin_config_status(&token),
        200,
        "granted by grant-admin"
    );
    let token = server.login("bob@example.com");
    assert_eq!(server.admin_config_status(&token), 403);

    // Mail queued just before the signal is still sent.
    let body = format!(r#"{{"email":"carol@example.com","password":"{PASSWORD}"}}"#);
    let (status, _) = server.request("POST", "/api/v1/users", None, Some(&body));
    assert_eq!(status, 201);
    let (status, lines) = server.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status}");
    assert!(lines.iter().any(|line| line.contains("stopped")));
    assert!(
        workspace
            .emails()
            .iter()
            .any(|email| email.contains("To: carol@example.com\r\n")),
        "the email queued before shutdown was written"
    );

    // bob registered before AGG_ADMIN_EMAILS named him: the start-up grants the role.
    let server = workspace.start(&[("AGG_ADMIN_EMAILS", "bob@example.com")]);
    let token = server.login("bob@example.com");
    assert_eq!(
        server.admin_config_status(&token),
        200,
        "granted at start-up"
    );
    let (status, _) = server.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status}");
}

impl Server {
    /// A raw connection to the server.
    fn connect(&self) -> TcpStream {
        let stream =
            TcpStream::connect_timeout(&self.address(), TIMEOUT).expect("server reachable");
        stream.set_read_timeout(Some(TIMEOUT)).expect("timeout set");
        stream
    }
}

/// Reads until the server closes the connection; what it sent.
fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    // A reset instead of a clean close also ends the wait; both mean the server let go.
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn slow_clients_are_cut_off() {
    let workspace = Workspace::new();
    let server = workspace.start(&[
        ("AGG_HEADER_TIMEOUT_SECONDS", "1"),
        ("AGG_BODY_TIMEOUT_SECONDS", "1"),
    ]);
    // A request head that never ends: the connection is closed (hyper may answer 408 first).
    let mut trickle = server.connect();
    trickle
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
        .expect("partial head sent");
    let started = Instant::now();
    let answer = read_until_closed(&mut trickle);
    assert!(
        started.elapsed() < TIMEOUT,
        "the connection was closed by the server"
    );
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "no response but a timeout: {answer:?}"
    );

    // A body that never arrives in full: the API answers with its problem for an unreadable
    // body instead of waiting for the rest.
    let mut trickle = server.connect();
    trickle
        .write_all(
            b"POST /api/v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"email\"",
        )
        .expect("partial request sent");
    let answer = read_until_closed(&mut trickle);
    assert!(answer.starts_with("HTTP/1.1 422"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");

    // The server itself is fine.
    let (status, _) = server.request("GET", "/health", None, None);
    assert_eq!(status, 200);
}

#[test]
fn shutdown_abandons_requests_past_its_deadline() {
    let workspace = Workspace::new();
    let server = workspace.start(&[
        ("AGG_SHUTDOWN_SECONDS", "1"),
        ("AGG_BODY_TIMEOUT_SECONDS", "600"),
    ]);
    // A request in flight for as long as its body is missing.
    let mut stuck = server.connect();
    stuck
        .write_all(
            b"POST /api/v1/users HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{",
        )
        .expect("partial request sent");
    // The request reaches the service before the signal.
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let (status, lines) = server.terminate();
    assert!(status.success(), "exits 0 after the deadline, got {status}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "stopped at the 1 s deadline, not after the 600 s body timeout"
    );
    assert!(
        lines.iter().any(|line| line.contains("abandoning")),
        "the abandonment is logged:\n{}",
        lines.join("\n")
    );
    drop(stuck);
}

#[test]
fn the_sandbox_callback_needs_the_connecting_users_token_by_default() {
    let workspace = Workspace::new();
    let server = workspace.start(&[("AGG_SANDBOX", "1")]);
    server.register_and_verify(&workspace, "dora@example.com");
    server.register_and_verify(&workspace, "eve@example.com");
    let token = server.login("dora@example.com");
    let intruder = server.login("eve@example.com");
    let (status, body) = server.request(
        "POST",
        "/api/v1/providers",
        Some(&token),
        Some(r#"{"provider_slug":"schwab-sandbox"}"#),
    );
    assert_eq!(status, 201, "{body}");
    let started: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let url = started["authorization_url"]
        .as_str()
        .expect("authorization_url");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let path = &url[url.find("/sandbox/").expect("served by the server")..];
    let (status, head, _) = server.request_with_head("GET", path, None, None);
    assert_eq!(status, 302, "{head}");
    let location = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .expect("a Location header");
    let query = &location[location.find('?').expect("a query")..];
    let callback = format!("/api/v1/providers/callback{query}");
    let (status, body) = server.request("POST", &callback, None, None);
    assert_eq!(
        status, 401,
        "AGG_OAUTH_CALLBACK_REQUIRES_AUTH is on by default: {body}"
    );
    let (status, body) = server.request("POST", &callback, Some(&token), None);
    assert_eq!(status, 201, "{body}");
    // The state is spent: a replay, whoever sends it, is an unknown state.
    let (status, body) = server.request("POST", &callback, Some(&intruder), None);
    assert_eq!(status, 400, "{body}");
}

/// The header `name` of a response head, if present.
fn head_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[test]
fn json_logs_tie_each_line_to_its_request_and_metrics_are_served_when_asked() {
    let workspace = Workspace::new();
    let mut server = workspace.start(&[("AGG_LOG_FORMAT", "json"), ("AGG_METRICS", "1")]);

    for path in ["/health/live", "/health/ready"] {
        let (status, body) = server.request("GET", path, None, None);
        assert_eq!(
            (status, body.as_str()),
            (200, r#"{"status":"ok"}"#),
            "{path}"
        );
    }
    let (status, body) = server.request("GET", "/api/v1/nope", None, None);
    assert_eq!(status, 404, "{body}");
    let problem: serde_json::Value = serde_json::from_str(&body).expect("a problem");
    let trace_id = problem["trace_id"].as_str().expect("trace_id").to_owned();

    // The access log line of that request, in the span that carries its trace id.
    let line = server.wait_for_line(|line| line.contains(&trace_id) && line.contains("elapsed_ms"));
    let entry: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(entry["message"], "request", "{line}");
    assert_eq!(entry["status"], 404, "{line}");
    assert_eq!(entry["span"]["name"], "request", "{line}");
    assert_eq!(entry["span"]["trace_id"], trace_id.as_str(), "{line}");
    assert_eq!(entry["span"]["path"], "/api/v1/nope", "{line}");
    // Every line the server wrote is one JSON object.
    for line in server.lines() {
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(&line);
        assert!(
            parsed.as_ref().is_ok_and(serde_json::Value::is_object),
            "not a JSON object: {line}"
        );
    }

    let (status, head, metrics) = server.request_with_head("GET", "/metrics", None, None);
    assert_eq!(status, 200, "{metrics}");
    assert_eq!(
        head_value(&head, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    for expected in [
        r#"aggregation_http_requests_total{method="GET",route="/health/live",status="200"} 1"#,
        r#"aggregation_http_requests_total{method="GET",route="/health/ready",status="200"} 1"#,
        r#"aggregation_http_requests_total{method="GET",route="unmatched",status="404"} 1"#,
        "# TYPE aggregation_http_request_duration_seconds histogram",
        "# TYPE aggregation_job_runs_total counter",
    ] {
        assert!(
            metrics.lines().any(|line| line == expected),
            "{expected} missing from:\n{metrics}"
        );
    }
    let (status, _) = server.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status}");
}

#[test]
fn without_agg_metrics_the_metrics_path_is_the_apis_404() {
    let workspace = Workspace::new();
    let server = workspace.start(&[]);
    let (status, head, body) = server.request_with_head("GET", "/metrics", None, None);
    assert_eq!(status, 404, "{body}");
    assert_eq!(
        head_value(&head, "content-type"),
        Some("application/problem+json")
    );
    // Text logs by default: the start-up line is not JSON.
    assert!(
        server
            .lines()
            .iter()
            .any(|line| line.contains("listening on") && !line.starts_with('{'))
    );
}

/// Waits (up to [`TIMEOUT`]) for the server to end the connection: whether it did, rather than
/// the wait running out.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(error) => !matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Sends `GET /health` on a kept-alive connection and reads its answer; the status.
fn health_on(stream: &mut TcpStream) -> u16 {
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("request sent");
    read_answer(stream)
}

/// Reads one `Content-Length` answer off a kept-alive connection; its status.
fn read_answer(stream: &mut TcpStream) -> u16 {
    let mut bytes = Vec::new();
    let mut byte = [0_u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        let read = stream.read(&mut byte).expect("answer read");
        assert_eq!(read, 1, "the connection closed before the answer");
        bytes.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&bytes).into_owned();
    let length: usize = head_value(&head, "content-length")
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("a Content-Length in {head:?}"));
    let mut body = vec![0_u8; length];
    stream.read_exact(&mut body).expect("body read");
    head.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line in {head:?}"))
}

#[test]
fn connections_beyond_the_cap_wait_until_one_closes() {
    let workspace = Workspace::new();
    let server = workspace.start(&[
        ("AGG_MAX_CONNECTIONS", "2"),
        // Far longer than the test: the held connections are not closed as idle meanwhile.
        ("AGG_HEADER_TIMEOUT_SECONDS", "300"),
    ]);
    let mut first = server.connect();
    let mut second = server.connect();
    assert_eq!(health_on(&mut first), 200);
    assert_eq!(health_on(&mut second), 200);
    // The third connection is made (the kernel queues it) but not served while both slots
    // are held.
    let mut third = server.connect();
    third
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("request sent");
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout set");
    let mut byte = [0_u8; 1];
    let early = third.read(&mut byte);
    assert!(
        early.as_ref().is_err_and(|error| matches!(
            error.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "no answer while the cap is reached, got {early:?}"
    );
    // A slot frees: the waiting connection is served.
    drop(first);
    third.set_read_timeout(Some(TIMEOUT)).expect("timeout set");
    assert_eq!(read_answer(&mut third), 200);
    assert_eq!(
        health_on(&mut second),
        200,
        "the held connection still works"
    );
}

#[test]
fn a_connection_that_never_shows_its_protocol_is_closed() {
    let workspace = Workspace::new();
    let server = workspace.start(&[("AGG_HEADER_TIMEOUT_SECONDS", "1")]);
    // Nothing at all.
    let mut silent = server.connect();
    assert!(
        closed_by_server(&mut silent),
        "a silent connection is closed"
    );
    // The start of the HTTP/2 preface, then nothing: HTTP/1 or HTTP/2 cannot be told yet.
    let mut undecided = server.connect();
    undecided
        .write_all(b"PRI * HTTP/2.0\r\n")
        .expect("partial preface sent");
    assert!(
        closed_by_server(&mut undecided),
        "a connection stuck in the preface is closed"
    );
    // An idle HTTP/1 keep-alive connection ends too.
    let mut idle = server.connect();
    assert_eq!(health_on(&mut idle), 200);
    assert!(closed_by_server(&mut idle), "an idle connection is closed");
}

/// HTTP/2 frame types the idle test reads or writes.
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;

fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len())
        .expect("small frame")
        .to_be_bytes();
    let mut bytes = vec![length[1], length[2], length[3], kind, flags, 0, 0, 0, 0];
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn an_idle_http2_connection_is_pinged_then_closed() {
    let workspace = Workspace::new();
    let server = workspace.start(&[("AGG_HEADER_TIMEOUT_SECONDS", "1")]);
    let mut stream = server.connect();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(SETTINGS, 0, &[]));
    stream.write_all(&hello).expect("preface sent");
    // A client that answers everything and sends no request: the server pings it, and then
    // ends the connection as idle.
    let (mut pings, mut goaway) = (0, false);
    loop {
        let mut header = [0_u8; 9];
        if stream.read_exact(&mut header).is_err() {
            break;
        }
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0_u8; length];
        if stream.read_exact(&mut payload).is_err() {
            break;
        }
        let (kind, flags) = (header[3], header[4]);
        let reply = match kind {
            SETTINGS if flags & ACK == 0 => Some(frame(SETTINGS, ACK, &[])),
            PING if flags & ACK == 0 => {
                pings += 1;
                Some(frame(PING, ACK, &payload))
            }
            GOAWAY => {
                goaway = true;
                None
            }
            _ => None,
        };
        if let Some(reply) = reply
            && stream.write_all(&reply).is_err()
        {
            break;
        }
    }
    assert!(pings > 0, "the server pings an idle HTTP/2 connection");
    assert!(goaway, "the idle connection ends with GOAWAY");
}

/// One HTML form of a sandbox page: the path it posts to and its inputs, as a browser would
/// submit them.
struct HtmlForm {
    action: String,
    fields: Vec<(String, String)>,
}

impl HtmlForm {
    /// The value of input `name`.
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The fields as `application/x-www-form-urlencoded`, with `changes` replacing values.
    fn encoded(&self, changes: &[(&str, &str)]) -> String {
        let percent = |text: &str| -> String {
            text.bytes()
                .map(|byte| {
                    if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
                        char::from(byte).to_string()
                    } else {
                        format!("%{byte:02X}")
                    }
                })
                .collect()
        };
        self.fields
            .iter()
            .map(|(key, value)| {
                let value = changes
                    .iter()
                    .find(|(changed, _)| changed == key)
                    .map_or(value.as_str(), |(_, new)| *new);
                format!("{}={}", percent(key), percent(value))
            })
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// The attribute `name` of an HTML tag's text, unescaped.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let marker = format!(" {name}=\"");
    let start = tag.find(&marker)? + marker.len();
    let end = start + tag[start..].find('"')?;
    Some(
        tag[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// The forms of an HTML page, in order.
fn forms(html: &str) -> Vec<HtmlForm> {
    html.split("<form")
        .skip(1)
        .map(|rest| {
            let form = rest.split("</form>").next().unwrap_or(rest);
            let tag = form.split('>').next().unwrap_or_default();
            let fields = form
                .split("<input")
                .skip(1)
                .filter_map(|input| {
                    let tag = input.split('>').next()?;
                    Some((
                        attribute(tag, "name")?,
                        attribute(tag, "value").unwrap_or_default(),
                    ))
                })
                .collect();
            HtmlForm {
                action: attribute(tag, "action").unwrap_or_default(),
                fields,
            }
        })
        .collect()
}

/// `GET /api/v1/events` held open: what it streamed so far.
struct EventStream {
    stream: TcpStream,
    seen: String,
}

impl EventStream {
    fn open(server: &Server, token: &str) -> Self {
        let mut stream = server.connect();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout set");
        let request = format!(
            "GET /api/v1/events HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             Accept: text/event-stream\r\n\r\n",
            server.address()
        );
        stream.write_all(request.as_bytes()).expect("request sent");
        let mut events = Self {
            stream,
            seen: String::new(),
        };
        events.wait_for(": connected", 1);
        assert!(events.seen.starts_with("HTTP/1.0 200"), "{}", events.seen);
        events
    }

    /// Reads until `needle` was streamed `times` times.
    fn wait_for(&mut self, needle: &str, times: usize) {
        let deadline = Instant::now() + TIMEOUT;
        while self.seen.matches(needle).count() < times {
            assert!(
                Instant::now() < deadline,
                "{needle:?} not streamed {times} times; streamed:\n{}",
                self.seen
            );
            let mut buffer = [0_u8; 4096];
            match self.stream.read(&mut buffer) {
                Ok(0) => panic!("the event stream ended:\n{}", self.seen),
                Ok(read) => self
                    .seen
                    .push_str(&String::from_utf8_lossy(&buffer[..read])),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(error) => panic!("the event stream failed: {error}"),
            }
        }
    }
}

impl Server {
    /// A JSON request that must answer `expected`: its JSON body (`null` when empty).
    fn json(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<serde_json::Value>,
        expected: u16,
    ) -> serde_json::Value {
        let body = body.map(|body| body.to_string());
        let (status, answer) = self.request(method, path, Some(token), body.as_deref());
        assert_eq!(status, expected, "{method} {path}: {answer}");
        if answer.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::from_str(&answer).unwrap_or_else(|_| panic!("JSON from {path}: {answer}"))
        }
    }

    /// An HTML page of the server (a sandbox's): its text.
    fn page(&self, path: &str) -> String {
        let (status, body) = self.request("GET", path, None, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// Submits `form` as a browser does, with `changes` to its values: the page answered.
    fn submit(&self, form: &HtmlForm, changes: &[(&str, &str)]) -> String {
        let origin = format!("http://{}", self.address());
        let path = form
            .action
            .strip_prefix(&origin)
            .unwrap_or_else(|| panic!("the form posts to this server: {}", form.action));
        let (status, _, body) = self.request_as(
            "POST",
            path,
            None,
            "application/x-www-form-urlencoded",
            Some(&form.encoded(changes)),
        );
        assert_eq!(status, 200, "POST {path}: {body}");
        body
    }

    /// `POST /api/v1/provider-webhooks/{slug}` with this `Plaid-Verification` header: the
    /// status.
    fn post_webhook(&self, slug: &str, body: &str, verification: Option<&str>) -> u16 {
        let mut stream = self.connect();
        let mut request = format!(
            "POST /api/v1/provider-webhooks/{slug} HTTP/1.0\r\nHost: {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n",
            self.address(),
            body.len()
        );
        if let Some(verification) = verification {
            request.push_str(&format!("Plaid-Verification: {verification}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).expect("request sent");
        read_answer_status(&read_until_closed(&mut stream))
    }

    /// Every transaction of the user, over their accounts.
    fn transactions(&self, token: &str) -> Vec<serde_json::Value> {
        let accounts = self.json("GET", "/api/v1/accounts", token, None, 200);
        let mut rows = Vec::new();
        for account in accounts["accounts"].as_array().expect("accounts") {
            let id = account["id"].as_str().expect("id");
            let path = format!("/api/v1/accounts/{id}/transactions?limit=100");
            let listed = self.json("GET", &path, token, None, 200);
            rows.extend(listed["transactions"].as_array().expect("rows").clone());
        }
        rows
    }

    /// Signs in at the Plaid sandbox's Link page for `link_token`: the page it ends on.
    fn plaid_link(&self, link_token: &str) -> String {
        let page = self.page(&format!("/sandbox/plaid/link?token={link_token}"));
        let form = forms(&page).into_iter().next().expect("the Link form");
        assert_eq!(form.field("token"), Some(link_token), "{page}");
        // A wrong password is refused on the page itself.
        let refused = self.submit(&form, &[("password", "wrong")]);
        assert!(refused.contains("not right"), "{refused}");
        assert!(!refused.contains("public-token"), "{refused}");
        assert_eq!(form.field("username"), Some("user_good"), "{page}");
        self.submit(&form, &[])
    }
}

fn read_answer_status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line in {answer:?}"))
}

/// The row of `rows` with this description.
fn row<'a>(rows: &'a [serde_json::Value], description: &str) -> &'a serde_json::Value {
    rows.iter()
        .find(|row| row["description"] == description)
        .unwrap_or_else(|| panic!("{description} in {rows:?}"))
}

/// The whole Plaid flow of the README's "Connecting Plaid", offline: the reference server
/// with `AGG_SANDBOX=1`, driven only through HTTP (the Link page's form submitted as a
/// browser would): a link token, Link, the public token's exchange, syncs through which a
/// pending row posts, a row is modified and one removed (the last meeting a mutation during
/// paging), webhooks the sandbox signs with its own ES256 key (a sync, an expiring and an
/// expired item, a revocation) and forged ones refused, reauthorization in update mode, and
/// the disconnect that removes the item at Plaid.
fn plaid_sandbox_flow(env: &[(&str, &str)]) {
    use serde_json::json;
    let workspace = Workspace::new();
    let mut settings = vec![("AGG_SANDBOX", "1")];
    settings.extend_from_slice(env);
    let server = workspace.start(&settings);
    server.register_and_verify(&workspace, "pat@example.com");
    let token = server.login("pat@example.com");

    let offered = server.json("GET", "/api/v1/supported-providers", &token, None, 200);
    let sandbox = offered["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .find(|provider| provider["slug"] == "plaid-sandbox")
        .cloned()
        .unwrap_or_else(|| panic!("plaid-sandbox offered: {offered}"));
    assert_eq!(sandbox["connect"], "link", "{sandbox}");

    // 1. The link token, 2. Link, 3. the callback with the public token.
    let link = server.json(
        "POST",
        "/api/v1/providers",
        &token,
        Some(json!({"provider_slug": "plaid-sandbox", "alias": "Sandbox Bank"})),
        201,
    );
    let link_token = link["link_token"].as_str().expect("link_token");
    assert!(link["expires_in"].as_u64().is_some_and(|s| s > 0), "{link}");
    let done = server.plaid_link(link_token);
    let public_token = done
        .split("<pre id=\"public-token\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("a public token on {done}"))
        .to_owned();
    let connection = server.json(
        "POST",
        "/api/v1/providers/callback",
        &token,
        Some(json!({"state": link["state"], "public_token": public_token})),
        201,
    );
    assert_eq!(connection["status"], "active", "{connection}");
    assert_eq!(connection["provider_slug"], "plaid-sandbox");
    assert!(!connection.to_string().contains("access-sandbox"));
    let id = connection["id"].as_str().expect("id").to_owned();
    let sync_path = format!("/api/v1/providers/{id}/sync");
    let sync = || {
        server.json(
            "POST",
            &sync_path,
            &token,
            Some(json!({"force": true})),
            201,
        )
    };

    // 4. The first sync: accounts, the feed's first rows, the brokerage account's holdings.
    let synced = sync();
    assert_eq!(synced["accounts"]["created"], 4, "{synced}");
    assert_eq!(synced["transactions"]["created"], 6, "{synced}");
    assert_eq!(synced["holdings"]["created"], 3, "{synced}");
    let accounts = server.json("GET", "/api/v1/accounts", &token, None, 200);
    let card = accounts["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .find(|account| account["account_type"] == "credit_card")
        .cloned()
        .unwrap_or_else(|| panic!("a card in {accounts}"));
    assert_eq!(card["balance_amount"], "-410.55", "owed is negative");
    let rows = server.transactions(&token);
    assert_eq!(rows.len(), 6, "{rows:?}");
    let coffee = row(&rows, "BLUE BOTTLE COFFEE 0423").clone();
    assert_eq!(coffee["status"], "pending", "{coffee}");
    assert_eq!(coffee["amount"], "-4.75", "money out is negative");
    assert_eq!(coffee["category"], "FOOD_AND_DRINK_COFFEE", "{coffee}");
    assert_eq!(coffee["merchant_name"], "Blue Bottle Coffee", "{coffee}");
    assert_eq!(row(&rows, "ACME CORP PAYROLL")["amount"], "2450.00");

    // The next sync: the coffee posts (with a tip) keeping its row, the grocery row changes.
    let synced = sync();
    assert_eq!(synced["transactions"]["created"], 0, "{synced}");
    assert_eq!(synced["transactions"]["updated"], 2, "{synced}");
    let rows = server.transactions(&token);
    assert_eq!(rows.len(), 6, "{rows:?}");
    let posted = row(&rows, "BLUE BOTTLE COFFEE 0423");
    assert_eq!(
        posted["id"], coffee["id"],
        "the posted row took the pending one over"
    );
    assert_eq!(posted["status"], "settled", "{posted}");
    assert_eq!(posted["amount"], "-5.50", "{posted}");
    assert_eq!(row(&rows, "CORNER GROCERY #12")["amount"], "-86.40");

    // The next: the duplicate charge goes and new rows arrive; the feed changes while it is
    // paged, and the sync starts its loop again from its first cursor.
    let synced = sync();
    assert_eq!(synced["transactions"]["created"], 3, "{synced}");
    assert_eq!(synced["transactions"]["removed"], 1, "{synced}");
    let rows = server.transactions(&token);
    assert_eq!(rows.len(), 8, "{rows:?}");
    assert!(
        rows.iter()
            .all(|row| row["description"] != "STREAMFLIX.COM")
    );
    assert_eq!(row(&rows, "TST* NOODLE BAR")["status"], "pending");
    assert_eq!(row(&rows, "INTEREST PAYMENT")["amount"], "1.23");
    let items = server.page("/sandbox/plaid/");
    assert!(items.contains("feed step 2 of 2"), "{items}");
    assert!(
        items.contains("1 mutation during paging answered"),
        "{items}"
    );
    // Caught up: nothing more.
    let synced = sync();
    for count in ["created", "updated", "removed"] {
        assert_eq!(synced["transactions"][count], 0, "{count}: {synced}");
    }

    // Webhooks, signed by the sandbox, sent from its page's buttons.
    let mut events = EventStream::open(&server, &token);
    let fire = |code: &str| {
        let page = server.page("/sandbox/plaid/");
        let form = forms(&page)
            .into_iter()
            .find(|form| form.field("webhook_code") == Some(code))
            .unwrap_or_else(|| panic!("a {code} button on {page}"));
        let sent = server.submit(&form, &[]);
        assert!(sent.contains("HTTP 200"), "{code}: {sent}");
        form.field("item_id").expect("item_id").to_owned()
    };
    fire("SYNC_UPDATES_AVAILABLE");
    events.wait_for("event: sync.completed", 1);
    fire("PENDING_EXPIRATION");
    events.wait_for("event: connection.expiring", 1);
    let item_id = fire("ITEM_LOGIN_REQUIRED");
    events.wait_for("event: connection.expired", 1);
    let expired = server.json("GET", &format!("/api/v1/providers/{id}"), &token, None, 200);
    assert_eq!(expired["status"], "expired", "{expired}");
    assert_eq!(expired["needs_reauthentication"], true, "{expired}");
    server.json(
        "POST",
        &sync_path,
        &token,
        Some(json!({"force": true})),
        409,
    );

    // Reauthorization: a link token in update mode for the same item, no public token.
    let update = server.json(
        "POST",
        &format!("/api/v1/providers/{id}/reauthorizations"),
        &token,
        Some(json!({})),
        201,
    );
    let done = server.plaid_link(update["link_token"].as_str().expect("link_token"));
    assert!(done.contains("Signed in again"), "{done}");
    let renewed = server.json(
        "POST",
        "/api/v1/providers/callback",
        &token,
        Some(json!({"state": update["state"]})),
        201,
    );
    assert_eq!(renewed["id"], id.as_str(), "{renewed}");
    assert_eq!(renewed["status"], "active", "{renewed}");
    let synced = sync();
    assert_eq!(synced["transactions"]["created"], 0, "{synced}");

    // Forged webhooks are 401 and change nothing.
    let forged = json!({"webhook_type": "ITEM", "webhook_code": "USER_PERMISSION_REVOKED",
                        "item_id": item_id, "environment": "sandbox"})
    .to_string();
    for verification in [None, Some("not.a.jwt"), Some("")] {
        let status = server.post_webhook("plaid-sandbox", &forged, verification);
        assert_eq!(status, 401, "{verification:?}");
    }
    let still = server.json("GET", &format!("/api/v1/providers/{id}"), &token, None, 200);
    assert_eq!(still["status"], "active", "{still}");

    // Revoked at Plaid, then disconnected: the item is removed at Plaid in the background.
    fire("USER_PERMISSION_REVOKED");
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let now = server.json("GET", &format!("/api/v1/providers/{id}"), &token, None, 200);
        if now["status"] == "revoked" {
            break;
        }
        assert!(Instant::now() < deadline, "not revoked: {now}");
        std::thread::sleep(Duration::from_millis(50));
    }
    server.json(
        "DELETE",
        &format!("/api/v1/providers/{id}"),
        &token,
        None,
        204,
    );
    let deadline = Instant::now() + TIMEOUT;
    while server.page("/sandbox/plaid/").contains(&item_id) {
        assert!(
            Instant::now() < deadline,
            "the item was not removed at Plaid"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_plaid_sandbox_runs_the_whole_flow_offline() {
    plaid_sandbox_flow(&[]);
}

#[test]
fn the_plaid_sandbox_runs_the_whole_flow_offline_on_postgresql() {
    let Ok(url) = std::env::var("AGG_TEST_DATABASE_URL") else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let schema = format!("plaid_sandbox_{}_{nanos}", std::process::id());
    plaid_sandbox_flow(&[("AGG_DATABASE_URL", &url), ("AGG_DATABASE_SCHEMA", &schema)]);
}
