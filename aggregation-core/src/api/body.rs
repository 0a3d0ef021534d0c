//! [`ResponseBody`]: what every response carries. Almost every answer is one buffer sent as a
//! single frame; the event stream (`GET /api/v1/events`) is a body that yields frames as they
//! happen, and the hosts forward them as they come.

use std::convert::Infallible;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use http_body::{Body, Frame, SizeHint};

/// A streamed body, boxed once.
type BoxedStream = Pin<Box<dyn Stream<Item = Bytes> + Send>>;

/// The body of every response of the service: either whole bytes, sent as one frame with an
/// exact size, or a stream of chunks, each sent as its own frame as soon as it is produced.
///
/// It never fails (`Error = Infallible`) and is `Send` but not `Sync`.
///
/// ```
/// use aggregation_core::ResponseBody;
/// use http_body::Body as _;
///
/// let body = ResponseBody::full("{}");
/// assert_eq!(body.size_hint().exact(), Some(2));
/// ```
pub struct ResponseBody {
    kind: Kind,
}

enum Kind {
    /// The whole body; `None` once its frame was taken.
    Full(Option<Bytes>),
    /// Chunks as they come; empty chunks are skipped.
    Stream(BoxedStream),
}

impl ResponseBody {
    /// A body of these bytes, sent as one frame.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        Self {
            kind: Kind::Full((!bytes.is_empty()).then_some(bytes)),
        }
    }

    /// An empty body.
    pub fn empty() -> Self {
        Self {
            kind: Kind::Full(None),
        }
    }

    /// A body whose chunks come from `stream`, each a frame of its own; the body ends with the
    /// stream. Dropping the body drops the stream (a disconnected client ends it).
    pub fn stream(stream: impl Stream<Item = Bytes> + Send + 'static) -> Self {
        Self {
            kind: Kind::Stream(Box::pin(stream)),
        }
    }

    /// Whether the body is streamed rather than whole.
    pub fn is_stream(&self) -> bool {
        matches!(self.kind, Kind::Stream(_))
    }
}

impl Default for ResponseBody {
    fn default() -> Self {
        Self::empty()
    }
}

impl From<Bytes> for ResponseBody {
    fn from(bytes: Bytes) -> Self {
        Self::full(bytes)
    }
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Full(bytes) => f
                .debug_struct("ResponseBody")
                .field("len", &bytes.as_ref().map_or(0, Bytes::len))
                .finish(),
            Kind::Stream(_) => f.write_str("ResponseBody(stream)"),
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().kind {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Kind::Stream(stream) => loop {
                match stream.as_mut().poll_next(cx) {
                    Poll::Ready(Some(chunk)) if chunk.is_empty() => {}
                    Poll::Ready(Some(chunk)) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, Bytes::len) as u64),
            Kind::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::stream;
    use http_body_util::BodyExt as _;

    use super::*;

    #[tokio::test]
    async fn a_full_body_is_one_frame_of_exact_size() {
        let mut body = ResponseBody::full(Bytes::from_static(b"hello"));
        assert_eq!(body.size_hint().exact(), Some(5));
        assert!(!body.is_end_stream());
        let frame = body.frame().await.expect("a frame").expect("infallible");
        assert_eq!(
            frame.into_data().expect("data"),
            Bytes::from_static(b"hello")
        );
        assert!(body.is_end_stream());
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn an_empty_body_ends_at_once() {
        let body = ResponseBody::full(Bytes::new());
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(ResponseBody::empty().collect().await.is_ok());
    }

    #[tokio::test]
    async fn a_stream_yields_each_chunk_as_a_frame_and_skips_empty_ones() {
        let chunks = vec![
            Bytes::from_static(b"a"),
            Bytes::new(),
            Bytes::from_static(b"b"),
        ];
        let mut body = ResponseBody::stream(stream::iter(chunks));
        assert!(body.is_stream());
        assert_eq!(body.size_hint().exact(), None);
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            frames.push(frame.expect("infallible").into_data().expect("data"));
        }
        assert_eq!(frames, [Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
    }
}
