#![doc = include_str!("../README.md")]

use std::convert::Infallible;
use std::error::Error as StdError;
use std::io;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};

use actix_http::ConnectionType;
use actix_http::body::{BodySize, MessageBody};
use actix_http::error::PayloadError;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse, fn_service};
use actix_web::http::{Version as ActixVersion, header as actix_header};
use actix_web::web::{self, ServiceConfig};
use actix_web::{HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::{Either, select};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;
use tower::{Service, ServiceExt};

#[doc(no_inline)]
pub use aggregation_core::{
    AggregationService, AggregationServiceBuilder, Config, Mount, PeerAddr,
};

/// Number of payload chunks that may wait between actix and the service.
const CHANNEL_CAPACITY: usize = 2;

const API_PREFIX: &str = Mount::API_PREFIX;

/// Mounts `service` under `/api/v1` in an actix-web app or scope: [`router_with`] and
/// [`Mount::api`]. `App::new().configure(router(service))` sends every method on those paths
/// to it; the app's other services and its default service answer the rest.
///
/// `service` is an [`AggregationService`], possibly wrapped in tower layers. The core sees each
/// client's address as a [`PeerAddr`] request extension.
pub fn router<S, RB>(service: S) -> impl FnOnce(&mut ServiceConfig) + Clone
where
    S: Service<http::Request<RequestBody>, Response = http::Response<RB>, Error = Infallible>
        + Clone
        + 'static,
    S::Future: 'static,
    RB: Body<Data = Bytes> + 'static,
    RB::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    router_with(service, Mount::api())
}

/// Mounts `service` on the paths `mount` names, for `App::configure`. The service sees each
/// request's full path.
///
/// ```
/// # fn demo(service: aggregation_core::AggregationService) {
/// use aggregation_actix::{Mount, router_with};
///
/// let app = actix_web::App::new()
///     .route("/", actix_web::web::get().to(|| async { "my app" }))
///     .configure(router_with(service, Mount::api().with_health()))
///     .default_service(actix_web::web::to(|| async {
///         actix_web::HttpResponse::NotFound().body("not here")
///     }));
/// # drop(app);
/// # }
/// ```
pub fn router_with<S, RB>(service: S, mount: Mount) -> impl FnOnce(&mut ServiceConfig) + Clone
where
    S: Service<http::Request<RequestBody>, Response = http::Response<RB>, Error = Infallible>
        + Clone
        + 'static,
    S::Future: 'static,
    RB: Body<Data = Bytes> + 'static,
    RB::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    move |cfg: &mut ServiceConfig| {
        let to_service =
            |service: S| fn_service(move |req: ServiceRequest| handle(service.clone(), req));
        // A resource without routes hands every method to its default service.
        cfg.service(
            web::resource([API_PREFIX.to_owned(), format!("{API_PREFIX}/{{path:.*}}")])
                .default_service(to_service(service.clone())),
        );
        if mount.health() {
            cfg.service(
                web::resource(Mount::HEALTH_PATHS).default_service(to_service(service.clone())),
            );
        }
        if mount.fallback() {
            cfg.default_service(to_service(service));
        }
    }
}

async fn handle<S, RB>(
    mut service: S,
    req: ServiceRequest,
) -> Result<ServiceResponse, actix_web::Error>
where
    S: Service<http::Request<RequestBody>, Response = http::Response<RB>, Error = Infallible>,
    RB: Body<Data = Bytes> + 'static,
    RB::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let (http_req, payload) = req.into_parts();
    // Cannot fail in practice: http 0.2 and 1.x validate these parts identically.
    let request = to_http_request(&http_req, payload).map_err(actix_web::error::ErrorBadRequest)?;
    let Ok(ready) = service.ready().await;
    let Ok(response) = ready.call(request).await;
    let response =
        to_actix_response(response).map_err(actix_web::error::ErrorInternalServerError)?;
    Ok(ServiceResponse::new(
        http_req,
        response.map_into_boxed_body(),
    ))
}

fn to_http_request(
    req: &HttpRequest,
    payload: Payload,
) -> Result<http::Request<RequestBody>, Box<dyn StdError + Send + Sync>> {
    let (mut head, ()) = http::Request::new(()).into_parts();
    head.method = http::Method::from_bytes(req.method().as_str().as_bytes())?;
    head.uri = http::Uri::try_from(req.uri().to_string())?;
    head.version = to_http_version(req.version());
    head.headers.reserve(req.headers().len());
    for (name, value) in req.headers() {
        head.headers.append(
            http::HeaderName::from_bytes(name.as_str().as_bytes())?,
            http::HeaderValue::from_bytes(value.as_bytes())?,
        );
    }
    if let Some(addr) = req.peer_addr() {
        head.extensions.insert(PeerAddr(addr));
    }
    let body = RequestBody::new(payload, content_length(req.headers()));
    Ok(http::Request::from_parts(head, body))
}

fn to_http_version(version: ActixVersion) -> http::Version {
    match version {
        ActixVersion::HTTP_09 => http::Version::HTTP_09,
        ActixVersion::HTTP_10 => http::Version::HTTP_10,
        ActixVersion::HTTP_2 => http::Version::HTTP_2,
        ActixVersion::HTTP_3 => http::Version::HTTP_3,
        _ => http::Version::HTTP_11,
    }
}

/// Declared request length, only when the body is not transfer-encoded.
fn content_length(headers: &actix_header::HeaderMap) -> Option<u64> {
    if headers.contains_key(actix_header::TRANSFER_ENCODING) {
        return None;
    }
    headers
        .get(actix_header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn to_actix_response<RB>(
    response: http::Response<RB>,
) -> Result<HttpResponse<ResponseBody<RB>>, Box<dyn StdError + Send + Sync>>
where
    RB: Body<Data = Bytes>,
    RB::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let (parts, body) = response.into_parts();
    // A length the service declared wins over the body's own hint (e.g. HEAD responses).
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let size = match declared.or_else(|| body.size_hint().exact()) {
        Some(len) => BodySize::Sized(len),
        None => BodySize::Stream,
    };
    let status = actix_web::http::StatusCode::from_u16(parts.status.as_u16())?;
    let mut res = HttpResponse::with_body(
        status,
        ResponseBody {
            body: Box::pin(body),
            size,
        },
    );
    let headers = res.headers_mut();
    for (name, value) in &parts.headers {
        headers.append(
            actix_header::HeaderName::from_bytes(name.as_str().as_bytes())?,
            actix_header::HeaderValue::from_bytes(value.as_bytes())?,
        );
    }
    // actix writes the `Connection` header itself; honour a service's request to close.
    let close = parts
        .headers
        .get_all(http::header::CONNECTION)
        .iter()
        .any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
        });
    if close {
        res.head_mut().set_connection_type(ConnectionType::Close);
    }
    Ok(res)
}

/// Streaming request body handed to the service: an [`http_body::Body`] fed from actix's
/// (`!Send`) payload by a local task through a bounded channel.
///
/// The task reads the next chunk only once the channel has room, so a slow service never
/// makes the adapter buffer the upload; it stops as soon as this body is dropped.
#[derive(Debug)]
pub struct RequestBody {
    rx: Option<mpsc::Receiver<Result<Bytes, PayloadError>>>,
    remaining: Option<u64>,
}

impl RequestBody {
    fn new(payload: Payload, content_length: Option<u64>) -> Self {
        if let Payload::None = payload {
            return Self {
                rx: None,
                remaining: Some(0),
            };
        }
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        actix_web::rt::spawn(feed(payload, tx));
        Self {
            rx: Some(rx),
            remaining: content_length,
        }
    }
}

async fn feed(mut payload: Payload, tx: mpsc::Sender<Result<Bytes, PayloadError>>) {
    // Reserve room first, then read: at most CHANNEL_CAPACITY chunks are ever in flight.
    while let Ok(permit) = tx.reserve().await {
        match select(payload.next(), pin!(tx.closed())).await {
            Either::Left((Some(item), _)) => {
                let failed = item.is_err();
                permit.send(item);
                if failed {
                    break;
                }
            }
            // End of payload, or the service dropped the body.
            Either::Left((None, _)) | Either::Right(_) => break,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = PayloadError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, PayloadError>>> {
        let Some(rx) = self.rx.as_mut() else {
            return Poll::Ready(None);
        };
        match ready!(rx.poll_recv(cx)) {
            Some(Ok(chunk)) => {
                if let Some(rem) = self.remaining.as_mut() {
                    *rem = rem.saturating_sub(chunk.len() as u64);
                }
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
            Some(Err(err)) => {
                self.rx = None;
                Poll::Ready(Some(Err(err)))
            }
            None => {
                self.rx = None;
                self.remaining = Some(0);
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.remaining
            .map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// Response body streamed back to actix: data frames pass through, trailers are dropped.
struct ResponseBody<B> {
    body: Pin<Box<B>>,
    size: BodySize,
}

impl<B> MessageBody for ResponseBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Error = io::Error;

    fn size(&self) -> BodySize {
        self.size
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, io::Error>>> {
        let this = self.get_mut();
        loop {
            match ready!(this.body.as_mut().poll_frame(cx)) {
                None => return Poll::Ready(None),
                // actix logs the error and closes the connection.
                Some(Err(err)) => return Poll::Ready(Some(Err(io::Error::other(err)))),
                // Empty chunks would read as end-of-body to the chunked encoder: skip them.
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => return Poll::Ready(Some(Ok(data))),
                    _ => continue,
                },
            }
        }
    }
}
