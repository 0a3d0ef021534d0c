//! Statement uploads (`POST /api/v1/imports`), shared by the import and event cases.

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;

use crate::{TestApp, TestResponse};

/// The multipart boundary of [`multipart`].
pub const BOUNDARY: &str = "----aggregation-test-boundary-7d3f";

/// A bank statement (QFX, OFX 1.x SGML) with a few transactions, for import cases.
pub const BANK_QFX: &str = "OFXHEADER:100\r
DATA:OFXSGML\r
VERSION:102\r
SECURITY:NONE\r
ENCODING:USASCII\r
CHARSET:1252\r
COMPRESSION:NONE\r
OLDFILEUID:NONE\r
NEWFILEUID:NONE\r
\r
<OFX>
<SIGNONMSGSRSV1>
<SONRS>
<STATUS>
<CODE>0
<SEVERITY>INFO
</STATUS>
<DTSERVER>20240131120000[-5:EST]
<LANGUAGE>ENG
<FI>
<ORG>First Bank
<FID>1234
</FI>
<INTU.BID>1234
</SONRS>
</SIGNONMSGSRSV1>
<BANKMSGSRSV1>
<STMTTRNRS>
<TRNUID>1
<STATUS>
<CODE>0
<SEVERITY>INFO
</STATUS>
<STMTRS>
<CURDEF>USD
<BANKACCTFROM>
<BANKID>021000021
<ACCTID>123456789
<ACCTTYPE>CHECKING
</BANKACCTFROM>
<BANKTRANLIST>
<DTSTART>20240101
<DTEND>20240131
<STMTTRN>
<TRNTYPE>DEBIT
<DTPOSTED>20240105120000[-5:EST]
<TRNAMT>-42.50
<FITID>20240105-1
<NAME>Grocery Store
<MEMO>Card 1234
</STMTTRN>
<STMTTRN>
<TRNTYPE>DIRECTDEP
<DTPOSTED>20240115
<TRNAMT>2000.00
<FITID>20240115-1
<NAME>ACME PAYROLL
</STMTTRN>
<STMTTRN>
<TRNTYPE>SRVCHG
<DTPOSTED>20240131
<TRNAMT>-5.00
<FITID>20240131-1
<NAME>Monthly fee
</STMTTRN>
</BANKTRANLIST>
<LEDGERBAL>
<BALAMT>1952.50
<DTASOF>20240131
</LEDGERBAL>
<AVAILBAL>
<BALAMT>1900.00
<DTASOF>20240131
</AVAILBAL>
</STMTRS>
</STMTTRNRS>
</BANKMSGSRSV1>
</OFX>
";

/// A multipart body with one part per `(name, file name, content)`.
pub fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file_name, content) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match file_name {
            Some(file_name) => body.extend_from_slice(
                format!(
                    "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            ),
            None => body.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
            ),
        }
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

/// The head of `POST /api/v1/imports` with `content_type` and an optional bearer token.
fn imports_request(content_type: &str, bearer: Option<&str>) -> http::request::Builder {
    let builder = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/imports")
        .header(header::CONTENT_TYPE, content_type);
    match bearer {
        Some(token) => builder.header(header::AUTHORIZATION, format!("Bearer {token}")),
        None => builder,
    }
}

/// Sends `body` with `content_type` to `POST /api/v1/imports`.
pub async fn post_imports(
    app: &TestApp,
    content_type: &str,
    body: Vec<u8>,
    bearer: Option<&str>,
) -> TestResponse {
    let request = imports_request(content_type, bearer)
        .body(Full::new(Bytes::from(body)))
        .expect("request");
    app.send(request).await
}

/// Starts an upload of `content` and holds it after the first half of its body: the import is
/// admitted (its slot taken) and left reading, until the guard is dropped.
pub async fn hold_upload(
    app: &TestApp,
    file_name: &str,
    content: &str,
    bearer: &str,
) -> crate::HeldRequest {
    let body = multipart(&[("file", Some(file_name), content.as_bytes())]);
    let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
    let request = imports_request(&content_type, Some(bearer))
        .header(header::CONTENT_LENGTH, body.len())
        .body(())
        .expect("request");
    let half = Bytes::from(body[..body.len() / 2].to_vec());
    app.hold_request(request, half).await
}

/// Uploads `content` as the `file` part named `file_name`.
pub async fn upload(app: &TestApp, file_name: &str, content: &str, bearer: &str) -> TestResponse {
    post_imports(
        app,
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart(&[("file", Some(file_name), content.as_bytes())]),
        Some(bearer),
    )
    .await
}

/// Uploads `content` as the `file` part named `file_name` (no file name when `None`), followed
/// by the text parts `parts` (`("account_name", "Checking")`, `("dry_run", "true")`, …).
pub async fn upload_with(
    app: &TestApp,
    file_name: Option<&str>,
    content: &[u8],
    parts: &[(&str, &str)],
    bearer: &str,
) -> TestResponse {
    let mut all: Vec<(&str, Option<&str>, &[u8])> = vec![("file", file_name, content)];
    all.extend(
        parts
            .iter()
            .map(|(name, value)| (*name, None, value.as_bytes())),
    );
    post_imports(
        app,
        &format!("multipart/form-data; boundary={BOUNDARY}"),
        multipart(&all),
        Some(bearer),
    )
    .await
}
