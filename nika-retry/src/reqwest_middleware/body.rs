//! A response's body read as [`ReadBody`] says, inside the attempt, and
//! handed back as a `reqwest::Response` again.

use ::reqwest_middleware::Error;
use reqwest::{Response, ResponseBuilderExt};

use crate::adapter::ReadBody;
use crate::vocab::timeout_error::TimeoutError;

/// The body's errors, reqwest's and the limits': what `reqwest::Body::wrap`
/// takes, and what a `reqwest::Error` of the body then has as its source.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `response` with its body read (or held) by `read`, inside the attempt.
pub(super) async fn read(
    response: Response,
    read: &ReadBody,
) -> ::reqwest_middleware::Result<Response> {
    let url = response.url().clone();
    let success = response.status().as_u16() < 400;
    let (mut parts, body) = http::Response::<reqwest::Body>::from(response).into_parts();
    let body = read
        .read::<reqwest::Body, BoxError>(body, success)
        .await
        .map_err(attempt_error)?;
    // reqwest keeps the URL in an extension of its own, set by its builder.
    if let Ok(marker) = http::Response::builder().url(url).body(()) {
        parts.extensions.extend(marker.into_parts().0.extensions);
    }
    let body = reqwest::Body::wrap(body);
    Ok(Response::from(http::Response::from_parts(parts, body)))
}

/// What failed the body inside the attempt, as the middleware's error:
/// reqwest's own as it came (classified as reqwest's), a limit as ours.
fn attempt_error(error: BoxError) -> Error {
    let error = match error.downcast::<reqwest::Error>() {
        Ok(error) => return Error::Reqwest(*error),
        Err(error) => error,
    };
    match error.downcast::<TimeoutError>() {
        Ok(timeout) => Error::middleware(*timeout),
        Err(other) => Error::middleware(Other(other)),
    }
}

/// Any other failure of the body (none is known: the body's errors are
/// reqwest's, its limits ours).
#[derive(Debug)]
struct Other(BoxError);

impl core::fmt::Display for Other {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Other {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
