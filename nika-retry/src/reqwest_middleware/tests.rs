use core::time::Duration;

use ::reqwest_middleware::Error;

use super::Retry;
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::layer::Layer;
use crate::vocab::reached::Reached;
use crate::vocab::timeout_error::{Boundary, TimeoutError};

#[derive(Debug, thiserror::Error)]
#[error("a middleware's own failure")]
struct Own;

#[derive(Debug, thiserror::Error)]
#[error("wrapped")]
struct Wrapping(#[source] TimeoutError);

fn read_timeout() -> TimeoutError {
    TimeoutError::new(Boundary::Read, Duration::from_secs(2), Layer::Http)
}

#[test]
fn a_limit_of_ours_in_a_middleware_error_classifies_as_that_limit() {
    let error = Error::middleware(read_timeout());
    assert_eq!(error.category(), ErrorCategory::Transient);
    assert_eq!(error.timeout(), Some(&read_timeout()));
    assert_eq!(error.reached(), read_timeout().reached());
    // Found down the chain too.
    let wrapped = Error::middleware(Wrapping(read_timeout()));
    assert_eq!(wrapped.timeout(), Some(&read_timeout()));
}

#[test]
fn a_middlewares_own_failure_is_permanent_and_may_have_reached() {
    let error = Error::middleware(Own);
    assert_eq!(error.category(), ErrorCategory::Permanent);
    assert_eq!(error.retry_after(), None);
    assert_eq!(error.timeout(), None);
    assert_eq!(error.reached(), Reached::Maybe);
}

#[test]
fn the_builder_keeps_the_layer() {
    assert_eq!(Retry::new(Layer::Provider).layer(), Layer::Provider);
    let retry = Retry::new(Layer::Http).idempotent(false);
    assert_eq!(retry.layer(), Layer::Http);
}
