//! `#[derive(Classify)]` on the shapes users write, beside `thiserror`.

use std::io;
use std::time::Duration;

use nika_retry::{Boundary, Classify, ErrorCategory, Layer, TimeoutError};
use nika_retry_tests::ProviderError;

#[test]
fn a_provider_error_with_hints_and_a_transparent_timeout() {
    let rl = ProviderError::RateLimited {
        retry_after_ms: Some(1500),
    };
    assert_eq!(rl.category(), ErrorCategory::RateLimited);
    assert_eq!(rl.retry_after(), Some(Duration::from_millis(1500)));
    assert_eq!(
        ProviderError::RateLimited {
            retry_after_ms: None
        }
        .retry_after(),
        None
    );
    assert_eq!(
        ProviderError::status(503).category(),
        ErrorCategory::Transient
    );
    assert_eq!(ProviderError::status(401).category(), ErrorCategory::Auth);
    assert_eq!(
        ProviderError::status(404).category(),
        ErrorCategory::NotFound
    );
    assert_eq!(
        ProviderError::status(400).category(),
        ErrorCategory::Permanent
    );
    assert_eq!(ProviderError::status(503).retry_after(), None);
    let t = ProviderError::from(TimeoutError::new(
        Boundary::Total,
        Duration::from_secs(1),
        Layer::Provider,
    ));
    assert_eq!(t.category(), ErrorCategory::Permanent);
    // thiserror's Display is untouched.
    assert_eq!(
        ProviderError::status(503).to_string(),
        "api error 503: status 503"
    );
}

#[derive(Debug, thiserror::Error, Classify)]
#[category(default = transient)]
enum Mixed {
    #[error("status {0}")]
    #[category(http_status = 0, retry_after = 1)]
    Status(u16, Option<Duration>),
    #[error("throttled")]
    #[category(rate_limited, retry_after = wait)]
    Throttled { wait: Duration },
    #[error(transparent)]
    #[category(transparent)]
    Io(#[from] io::Error),
    #[error("source")]
    Wrapped {
        #[source]
        source: io::Error,
    },
    #[error("flaky")]
    Flaky,
}

#[test]
fn tuple_indices_hints_transparent_and_the_enum_default() {
    let s = Mixed::Status(429, Some(Duration::from_secs(3)));
    assert_eq!(
        (s.category(), s.retry_after()),
        (ErrorCategory::RateLimited, Some(Duration::from_secs(3)))
    );
    let s = Mixed::Status(503, None);
    assert_eq!(
        (s.category(), s.retry_after()),
        (ErrorCategory::Transient, None)
    );
    let t = Mixed::Throttled {
        wait: Duration::from_millis(10),
    };
    assert_eq!(t.retry_after(), Some(Duration::from_millis(10)));
    assert_eq!(
        Mixed::from(io::Error::from(io::ErrorKind::NotFound)).category(),
        ErrorCategory::NotFound
    );
    let wrapped = Mixed::Wrapped {
        source: io::ErrorKind::Other.into(),
    };
    assert_eq!(
        wrapped.category(),
        ErrorCategory::Transient,
        "the default, not the source's"
    );
    assert_eq!(Mixed::Flaky.category(), ErrorCategory::Transient);
    assert_eq!(Mixed::Flaky.retry_after(), None);
}

#[derive(Debug, Classify)]
#[category(auth)]
struct Unauthorized;

#[derive(Debug, Classify)]
#[category(transparent)]
struct Wrapper(io::Error);

#[derive(Debug, Classify)]
#[category(http_status = code, retry_after_ms = wait_ms)]
struct Response {
    code: u16,
    wait_ms: u64,
}

#[test]
fn structs_unit_tuple_and_named() {
    assert_eq!(Unauthorized.category(), ErrorCategory::Auth);
    assert_eq!(
        Wrapper(io::ErrorKind::ConnectionReset.into()).category(),
        ErrorCategory::Transient
    );
    let r = Response {
        code: 503,
        wait_ms: 250,
    };
    assert_eq!(
        (r.category(), r.retry_after()),
        (ErrorCategory::Transient, Some(Duration::from_millis(250)))
    );
}

#[derive(Debug, Classify)]
enum Generic<E> {
    #[category(transparent)]
    Inner(E),
    #[category(permanent)]
    Other,
}

#[test]
fn generic_transparent_fields_get_the_bound() {
    let inner: Generic<TimeoutError> = Generic::Inner(TimeoutError::new(
        Boundary::Read,
        Duration::from_secs(1),
        Layer::Http,
    ));
    assert_eq!(inner.category(), ErrorCategory::Transient);
    assert_eq!(
        Generic::<TimeoutError>::Other.category(),
        ErrorCategory::Permanent
    );
    let boxed: Generic<Box<io::Error>> =
        Generic::Inner(Box::new(io::ErrorKind::PermissionDenied.into()));
    assert_eq!(boxed.category(), ErrorCategory::Auth);
}

/// `http_status` reads an `Option<u16>` (no status: no response, transient)
/// and, with feature `reqwest`, a `StatusCode`.
#[derive(Debug, Classify)]
enum StatusShapes {
    #[category(http_status = 0)]
    Maybe(Option<u16>),
    #[category(http_status = status)]
    Typed { status: reqwest::StatusCode },
}

#[test]
fn http_status_from_an_option_and_a_status_code() {
    assert_eq!(
        StatusShapes::Maybe(None).category(),
        ErrorCategory::Transient
    );
    assert_eq!(
        StatusShapes::Maybe(Some(429)).category(),
        ErrorCategory::RateLimited
    );
    assert_eq!(
        StatusShapes::Maybe(Some(400)).category(),
        ErrorCategory::Permanent
    );
    let typed = StatusShapes::Typed {
        status: reqwest::StatusCode::UNAUTHORIZED,
    };
    assert_eq!(typed.category(), ErrorCategory::Auth);
}

/// What `http::classify_response` decided, kept as it said it: the server's
/// `x-should-retry` already folded into the category.
#[derive(Debug, thiserror::Error, Classify)]
enum Kept {
    #[error("api error {status}")]
    #[category(from = category, retry_after = retry_after)]
    Api {
        status: u16,
        category: ErrorCategory,
        retry_after: Option<Duration>,
    },
    #[error("status")]
    #[category(from = 1, retry_after_ms = 0)]
    Tuple(u64, ErrorCategory),
}

#[derive(Debug, Classify)]
#[category(from = 0)]
struct KeptStruct(ErrorCategory);

#[test]
fn from_takes_the_category_a_field_holds_not_the_status() {
    // A 503 the server said not to retry, and a 409 it said to.
    let refused = Kept::Api {
        status: 503,
        category: ErrorCategory::Permanent,
        retry_after: None,
    };
    assert_eq!(refused.category(), ErrorCategory::Permanent);
    assert_eq!(refused.retry_after(), None);
    let retried = Kept::Api {
        status: 409,
        category: ErrorCategory::Transient,
        retry_after: Some(Duration::from_secs(3)),
    };
    assert_eq!(retried.category(), ErrorCategory::Transient);
    assert_eq!(retried.retry_after(), Some(Duration::from_secs(3)));
    let tuple = Kept::Tuple(250, ErrorCategory::RateLimited);
    assert_eq!(tuple.category(), ErrorCategory::RateLimited);
    assert_eq!(tuple.retry_after(), Some(Duration::from_millis(250)));
    assert_eq!(
        KeptStruct(ErrorCategory::Auth).category(),
        ErrorCategory::Auth
    );
    assert_eq!(KeptStruct(ErrorCategory::Auth).retry_after(), None);
}

/// `from` beside `http_status`: the category the field holds, and what the
/// attempt reached from the status.
#[derive(Debug, thiserror::Error, Classify)]
enum KeptWithStatus {
    #[error("api error {status}")]
    #[category(from = category, http_status = status)]
    Api {
        status: u16,
        category: ErrorCategory,
    },
}

#[test]
fn from_beside_http_status_takes_the_category_from_one_and_reached_from_the_other() {
    use nika_retry::Reached;
    let api = |status, category| KeptWithStatus::Api { status, category };
    // A 503 the server said not to retry: permanent, yet it did not act.
    let busy = api(503, ErrorCategory::Permanent);
    assert_eq!(
        (busy.category(), busy.reached()),
        (ErrorCategory::Permanent, Reached::Refused)
    );
    let conflict = api(409, ErrorCategory::Transient);
    assert_eq!(
        (conflict.category(), conflict.reached()),
        (ErrorCategory::Transient, Reached::Maybe)
    );
    // Without the status, only the category speaks: transient is `Maybe`.
    assert_eq!(
        Kept::Api {
            status: 503,
            category: ErrorCategory::Transient,
            retry_after: None
        }
        .reached(),
        Reached::Maybe
    );
}
