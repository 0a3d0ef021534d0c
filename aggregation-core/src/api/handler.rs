//! How a handler is called: its arguments are extractors, taken from the request in order.
//!
//! A handler is an `async fn(&App, A1, ..., An) -> ApiResult`. Every argument but the last
//! implements [`FromParts`] (headers, path, query, extensions); the last may also consume the
//! body ([`FromRequest`]). The order of the checks is the order of the arguments, with one
//! exception kept from the first design of the API: a body extractor reads the body (413 when
//! it is too large) before any other extractor runs, and judges it at its own position.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::Request;
use http::request::Parts;

use super::{ApiResult, RequestBody};
use crate::app::App;
use crate::problem::ApiError;

/// What a route row calls: the request, with the app it runs against.
pub(crate) type HandlerFn = fn(Arc<App>, Request<RequestBody>) -> HandlerFuture;

/// The future of a handler call.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = ApiResult> + Send>>;

/// An extractor that needs only the request head.
pub(crate) trait FromParts: Sized {
    /// The value, or the error the request is answered with.
    fn from_parts(parts: &Parts, app: &App) -> impl Future<Output = Result<Self, ApiError>> + Send;
}

/// An extractor that may consume the body: implemented by body extractors, and by every
/// [`FromParts`] extractor through [`ViaParts`].
pub(crate) trait FromRequest<Via>: Sized {
    /// The body as read before any other extractor runs.
    type Read: Send;

    /// Reads what must be read first (for JSON, the whole body within the limit).
    fn read(
        body: RequestBody,
        parts: &Parts,
        app: &App,
    ) -> impl Future<Output = Result<Self::Read, ApiError>> + Send;

    /// The value, at the extractor's position among the handler's arguments.
    fn from_read(
        read: Self::Read,
        parts: &Parts,
        app: &App,
    ) -> impl Future<Output = Result<Self, ApiError>> + Send;
}

/// Marks the [`FromRequest`] implementation of a [`FromParts`] extractor.
pub(crate) enum ViaParts {}

/// Marks the [`FromRequest`] implementation of an extractor that consumes the body.
pub(crate) enum ViaBody {}

impl<T: FromParts + Send> FromRequest<ViaParts> for T {
    type Read = ();

    async fn read(_: RequestBody, _: &Parts, _: &App) -> Result<(), ApiError> {
        Ok(())
    }

    fn from_read(
        (): (),
        parts: &Parts,
        app: &App,
    ) -> impl Future<Output = Result<Self, ApiError>> + Send {
        T::from_parts(parts, app)
    }
}

/// An extractor whose failure the handler decides when to report (a check that must come
/// after the body's).
impl<T: FromParts + Send> FromParts for Result<T, ApiError> {
    async fn from_parts(parts: &Parts, app: &App) -> Result<Self, ApiError> {
        Ok(T::from_parts(parts, app).await)
    }
}

/// An async function of the app and extractors, callable with a request.
pub(crate) trait Handler<'a, Args>: Sized {
    /// Extracts the arguments in order and runs the handler.
    fn call(
        self,
        app: &'a App,
        request: Request<RequestBody>,
    ) -> impl Future<Output = ApiResult> + Send + 'a;
}

impl<'a, F, Fut> Handler<'a, ()> for F
where
    F: FnOnce(&'a App) -> Fut + Send + 'a,
    Fut: Future<Output = ApiResult> + Send + 'a,
{
    fn call(
        self,
        app: &'a App,
        _request: Request<RequestBody>,
    ) -> impl Future<Output = ApiResult> + Send + 'a {
        self(app)
    }
}

macro_rules! handler {
    ($($part:ident $part_value:ident,)* ; $last:ident $last_value:ident) => {
        impl<'a, F, Fut, Via, $($part,)* $last> Handler<'a, (Via, $($part,)* $last,)> for F
        where
            F: FnOnce(&'a App, $($part,)* $last) -> Fut + Send + 'a,
            Fut: Future<Output = ApiResult> + Send + 'a,
            $($part: FromParts + Send + 'a,)*
            $last: FromRequest<Via> + Send + 'a,
            Via: 'a,
        {
            fn call(
                self,
                app: &'a App,
                request: Request<RequestBody>,
            ) -> impl Future<Output = ApiResult> + Send + 'a {
                async move {
                    let (parts, body) = request.into_parts();
                    let read = $last::read(body, &parts, app).await?;
                    $(let $part_value = $part::from_parts(&parts, app).await?;)*
                    let $last_value = $last::from_read(read, &parts, app).await?;
                    self(app, $($part_value,)* $last_value).await
                }
            }
        }
    };
}

handler!(; T1 t1);
handler!(T1 t1,; T2 t2);
handler!(T1 t1, T2 t2,; T3 t3);
handler!(T1 t1, T2 t2, T3 t3,; T4 t4);

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use bytes::Bytes;
    use http::StatusCode;
    use http_body_util::BodyExt as _;

    use super::*;
    use crate::api::auth::EmailBody;
    use crate::api::extract::{Caller, Json, User, buffered_body};
    use crate::api::json;
    use crate::config::Config;
    use crate::problem::ErrorCode;

    /// Needs a user and a JSON `{email}`; answers the email.
    async fn email_of_user(_: &App, _: User, Json(email): Json<EmailBody>) -> ApiResult {
        json(StatusCode::OK, &email)
    }

    fn request(body: &'static str, caller: Caller) -> Request<RequestBody> {
        let mut request = Request::builder()
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(buffered_body(Bytes::from_static(body.as_bytes())))
            .expect("request");
        request.extensions_mut().insert(caller);
        request
    }

    fn user() -> Caller {
        Caller::Authenticated(std::sync::Arc::new(crate::auth::AccessClaims::for_tests(
            uuid::Uuid::nil(),
            uuid::Uuid::nil(),
        )))
    }

    #[tokio::test]
    async fn the_body_is_read_first_and_judged_in_its_place() {
        let config = Config::new("http://localhost:8080", vec![7; 32])
            .expect("config")
            .with_max_body_bytes(20);
        let app = App::for_tests(config).await;
        let call = |body, caller| email_of_user.call(&app, request(body, caller));
        // Too large: 413 before the token is looked at.
        let error = call(r#"{"email": "ada@example.com"}"#, Caller::Anonymous)
            .await
            .expect_err("413");
        assert_eq!(error.code(), ErrorCode::PayloadTooLarge);
        // Within the limit: the token (401) before the body's fields (422).
        let error = call(r#"{"email": 1}"#, Caller::InvalidToken)
            .await
            .expect_err("401");
        assert_eq!(error.code(), ErrorCode::Unauthorized);
        let error = call(r#"{"email": 1}"#, user()).await.expect_err("422");
        assert_eq!(error.errors()[0].field, "email");
        let response = call(r#"{"email":"a@b.co"}"#, user()).await.expect("200");
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(body, Bytes::from_static(br#""a@b.co""#));
    }
}
