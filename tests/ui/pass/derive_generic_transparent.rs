//! A generic enum whose transparent field's type is a parameter.
use nika_retry::{Classify, ErrorCategory, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error<E>
where
    E: std::error::Error + 'static,
{
    #[error(transparent)]
    #[category(transparent)]
    Inner(E),
    #[error("gone")]
    #[category(not_found)]
    Gone,
    #[error("wrapped: {source}")]
    #[category(transparent)]
    Boxed { source: Box<Wrapped<E>> },
}

#[derive(Debug, thiserror::Error, Classify)]
#[error("wrapped")]
#[category(permanent)]
struct Wrapped<E: std::fmt::Debug>(E);

fn category<E: Classify>(error: &E) -> ErrorCategory {
    error.category()
}

fn main() {
    let e: Error<std::io::Error> = Error::Inner(std::io::ErrorKind::PermissionDenied.into());
    assert_eq!(category(&e), ErrorCategory::Auth);
    assert_eq!(category(&Error::<TimeoutError>::Gone), ErrorCategory::NotFound);
}
