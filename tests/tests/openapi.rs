//! Conformance: the OpenAPI document is public, describes every route, and is cacheable with
//! a strong `ETag` (`If-None-Match` answers 304 without a body).

use std::collections::BTreeSet;

use aggregation_tests::{BASE_URL, TestApp, conformance};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;

conformance!(
    the_document_describes_every_route,
    a_current_etag_answers_304,
    a_stale_etag_answers_the_document,
);

const DOCUMENT: &str = "/api/v1/openapi.json";

async fn conditional_get(app: &TestApp, if_none_match: &str) -> aggregation_tests::TestResponse {
    app.send(
        Request::builder()
            .method(Method::GET)
            .uri(DOCUMENT)
            .header(header::IF_NONE_MATCH, if_none_match)
            .body(Full::new(Bytes::new()))
            .expect("request"),
    )
    .await
}

async fn the_document_describes_every_route(app: TestApp) {
    let response = app.get(DOCUMENT, None).await;
    let document = response.expect(200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(
        document["servers"][0]["url"],
        BASE_URL.trim_end_matches('/')
    );
    let documented: BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("path item")
                .keys()
                .map(move |method| (method.to_uppercase(), path.clone()))
        })
        .collect();
    let routed: BTreeSet<(String, String)> = aggregation_core::api::routes()
        .map(|route| (route.method().to_string(), route.template().to_owned()))
        .collect();
    assert_eq!(documented, routed);
    assert!(documented.contains(&("GET".to_owned(), DOCUMENT.to_owned())));
}

async fn a_current_etag_answers_304(app: TestApp) {
    let first = app.get(DOCUMENT, None).await;
    first.expect(200);
    let etag = first.header("etag").expect("ETag").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
        "a strong ETag: {etag}"
    );
    assert!(first.header("cache-control").is_some());
    for if_none_match in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_owned(),
    ] {
        let again = conditional_get(&app, &if_none_match).await;
        assert_eq!(again.status.as_u16(), 304, "If-None-Match: {if_none_match}");
        assert!(again.body.is_empty());
        assert_eq!(again.header("etag"), Some(etag.as_str()));
        assert_eq!(again.header("cache-control"), first.header("cache-control"));
    }
}

async fn a_stale_etag_answers_the_document(app: TestApp) {
    let first = app.get(DOCUMENT, None).await;
    let response = conditional_get(&app, "\"0123456789abcdef\"").await;
    response.expect(200);
    assert_eq!(response.body, first.body);
    assert_eq!(response.header("etag"), first.header("etag"));
}
