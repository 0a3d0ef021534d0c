//! The shape shared by the layers that only add to a request's extensions before passing it
//! on ([client IP](super::client_ip), [bearer token](super::bearer)): each says what it adds
//! ([`Annotate`]), and one `Layer`/`Service` pair does the rest. They stay named types (not
//! `MapRequest` closures) so the service's layer stack can be named without boxing.

use std::task::{Context, Poll};

use http::Request;

/// What a layer adds to each request.
pub(crate) trait Annotate: Clone {
    /// Adds to `request` (its extensions) before it goes on.
    fn annotate<B>(&self, request: &mut Request<B>);
}

/// Applies an [`Annotate`] to every request.
#[derive(Debug, Clone)]
pub(crate) struct AnnotateLayer<A>(pub(crate) A);

impl<S, A: Annotate> tower::Layer<S> for AnnotateLayer<A> {
    type Service = Annotated<S, A>;

    fn layer(&self, inner: S) -> Annotated<S, A> {
        Annotated {
            annotator: self.0.clone(),
            inner,
        }
    }
}

/// See [`AnnotateLayer`].
#[derive(Debug, Clone)]
pub(crate) struct Annotated<S, A> {
    annotator: A,
    inner: S,
}

impl<S, A, B> tower::Service<Request<B>> for Annotated<S, A>
where
    S: tower::Service<Request<B>>,
    A: Annotate,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> S::Future {
        self.annotator.annotate(&mut request);
        self.inner.call(request)
    }
}
