//! Bearer token verification, once per request: the `Authorization: Bearer ...` token is
//! verified here and the outcome put in the extensions as a [`Caller`], which the rate
//! limiter's user scopes and the handlers' [`User`](crate::api::extract::User) extractor
//! read. Nothing is refused here: whether a token is required is the endpoint's business.

use std::sync::Arc;

use http::{HeaderMap, Request, header};

use super::annotate::{Annotate, AnnotateLayer};

use crate::api::extract::Caller;
use crate::auth::{AccessClaims, Auth};

/// Verifies access tokens.
pub(crate) trait VerifyToken: Send + Sync + 'static {
    /// The claims of a valid token; `None` for anything forged, expired or malformed.
    fn verify(&self, token: &str) -> Option<AccessClaims>;
}

impl VerifyToken for Auth {
    fn verify(&self, token: &str) -> Option<AccessClaims> {
        self.verify_access_token(token)
    }
}

/// The bearer token of the Authorization header, if there is one.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// See the [module docs](self).
pub(crate) type BearerLayer = AnnotateLayer<VerifyBearer>;

/// Verifies the bearer token of each request (see the [module docs](self)).
#[derive(Clone)]
pub(crate) struct VerifyBearer {
    verifier: Arc<dyn VerifyToken>,
}

impl BearerLayer {
    /// Verifies tokens with `verifier`.
    pub(crate) fn new(verifier: Arc<dyn VerifyToken>) -> Self {
        AnnotateLayer(VerifyBearer { verifier })
    }
}

impl Annotate for VerifyBearer {
    fn annotate<B>(&self, request: &mut Request<B>) {
        let caller = match bearer_token(request.headers()) {
            None => Caller::Anonymous,
            Some(token) => match self.verifier.verify(token) {
                Some(claims) => Caller::Authenticated(Arc::new(claims)),
                None => Caller::InvalidToken,
            },
        };
        request.extensions_mut().insert(caller);
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tower::ServiceExt as _;
    use uuid::Uuid;

    use super::*;

    /// Accepts the token `good` only, counting the verifications.
    #[derive(Default)]
    struct OneToken {
        verified: AtomicUsize,
    }

    impl VerifyToken for OneToken {
        fn verify(&self, token: &str) -> Option<AccessClaims> {
            self.verified.fetch_add(1, Ordering::SeqCst);
            (token == "good").then(|| AccessClaims::for_tests(Uuid::nil(), Uuid::nil()))
        }
    }

    async fn caller_of(verifier: Arc<OneToken>, authorization: Option<&str>) -> Caller {
        let service = tower::Layer::layer(
            &BearerLayer::new(verifier),
            tower::service_fn(|request: Request<()>| async move {
                Ok::<_, Infallible>(request.extensions().get::<Caller>().cloned())
            }),
        );
        let mut request = Request::builder();
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let request = request.body(()).expect("request");
        service
            .oneshot(request)
            .await
            .ok()
            .flatten()
            .expect("a caller in the extensions")
    }

    #[tokio::test]
    async fn tokens_are_verified_once_into_the_extensions() {
        let verifier = Arc::new(OneToken::default());
        let caller = caller_of(verifier.clone(), Some("Bearer good")).await;
        assert_eq!(caller.claims().map(|claims| claims.sub), Some(Uuid::nil()));
        assert_eq!(verifier.verified.load(Ordering::SeqCst), 1);
        assert_eq!(
            caller_of(verifier.clone(), Some("bearer  good "))
                .await
                .claims()
                .map(|c| c.sub),
            Some(Uuid::nil())
        );
        assert_eq!(
            caller_of(verifier.clone(), Some("Bearer forged")).await,
            Caller::InvalidToken
        );
        let verified = verifier.verified.load(Ordering::SeqCst);
        // No bearer token: nothing to verify.
        for authorization in [None, Some("Basic Z29vZA=="), Some("Bearer "), Some("good")] {
            assert_eq!(
                caller_of(verifier.clone(), authorization).await,
                Caller::Anonymous,
                "{authorization:?}"
            );
        }
        assert_eq!(verifier.verified.load(Ordering::SeqCst), verified);
    }
}
