//! One table of fault scripts, each with the requests it takes and what the
//! caller gets, run through an annotated fn, through the `tower` layer and
//! through the `reqwest_middleware` middleware: the adapters make the
//! engine's decisions, not a copy of them, so every column must agree.

mod tower_support;

use std::time::{Duration, SystemTime};

use http::{Method, Response};
use hyper::body::Incoming;
use nika_retry::http::{response_category, retry_hint, status_reached};
use nika_retry::reqwest_middleware::Retry;
use nika_retry::tower::RetryLayer;
use nika_retry::{Classify, ErrorCategory, Layer, Reached, retry};
use nika_retry_tests::fault::{Fault, FaultServer};
use tower_support::{HttpError, client, quick, request, status, through};

/// One case: a script, the layer and method it is sent with, and what
/// every column must see.
struct Case {
    name: &'static str,
    layer: Layer,
    method: Method,
    script: Vec<Fault>,
    /// The requests the server gets.
    requests: usize,
    /// The status the caller ends with (0: an error without one).
    status: u16,
}

fn headers(status: u16, headers: &[(&str, &str)]) -> Fault {
    let headers = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    Fault::WithHeaders(status, headers.collect())
}

fn cases() -> Vec<Case> {
    let case = |name, layer, method, script: Vec<Fault>, requests, status| Case {
        name,
        layer,
        method,
        script,
        requests,
        status,
    };
    let ok = || Fault::ok("ok");
    use Layer::{Http, Provider, Tool};
    vec![
        case(
            "http: 5xx until the 3rd",
            Http,
            Method::GET,
            vec![Fault::Status(503), Fault::Status(502), ok()],
            3,
            200,
        ),
        case(
            "http: 5xx throughout",
            Http,
            Method::GET,
            vec![Fault::Status(500)],
            3,
            500,
        ),
        case(
            "http: 429 is the provider's",
            Http,
            Method::GET,
            vec![headers(429, &[("retry-after-ms", "5")]), ok()],
            1,
            429,
        ),
        case(
            "http: 404 is permanent",
            Http,
            Method::GET,
            vec![Fault::Status(404), ok()],
            1,
            404,
        ),
        case(
            "http: a POST's 502 may have been acted on",
            Http,
            Method::POST,
            vec![Fault::Status(502), ok()],
            1,
            502,
        ),
        case(
            "http: a POST's 503 was refused",
            Http,
            Method::POST,
            vec![Fault::Status(503), ok()],
            2,
            200,
        ),
        case(
            "http: x-should-retry: false",
            Http,
            Method::GET,
            vec![headers(503, &[("x-should-retry", "false")]), ok()],
            1,
            503,
        ),
        case(
            "http: x-should-retry: true",
            Http,
            Method::GET,
            vec![headers(409, &[("x-should-retry", "true")]), ok()],
            2,
            200,
        ),
        case(
            "http: a hint above 30 s gives up",
            Http,
            Method::GET,
            vec![headers(503, &[("retry-after", "100")]), ok()],
            1,
            503,
        ),
        case(
            // The head is a 200: what breaks in the body is the caller's to
            // read, after the layer (and the fn, which reads only the head).
            "http: a reset after a 200's head",
            Http,
            Method::GET,
            vec![Fault::Reset, ok()],
            1,
            200,
        ),
        case(
            "provider: 429 with a hint",
            Provider,
            Method::GET,
            vec![headers(429, &[("retry-after-ms", "5")]), ok()],
            2,
            200,
        ),
        case(
            "provider: 5xx throughout",
            Provider,
            Method::GET,
            vec![Fault::Status(503)],
            3,
            503,
        ),
        case(
            "tool: never by itself",
            Tool,
            Method::GET,
            vec![Fault::Status(503), ok()],
            1,
            503,
        ),
    ]
}

/// A failure status as an annotated fn's error: what `classify_response`
/// reads, kept in the error.
#[derive(Debug)]
struct Failed {
    status: u16,
    category: ErrorCategory,
    hint: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
enum FnError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("HTTP {}", .0.status)]
    Status(Failed),
}

impl Classify for FnError {
    fn category(&self) -> ErrorCategory {
        match self {
            FnError::Http(e) => e.category(),
            FnError::Status(f) => f.category,
        }
    }
    fn retry_after(&self) -> Option<Duration> {
        match self {
            FnError::Http(e) => e.retry_after(),
            FnError::Status(f) => f.hint,
        }
    }
    fn reached(&self) -> Reached {
        match self {
            FnError::Http(e) => e.reached(),
            FnError::Status(f) => status_reached(f.status),
        }
    }
}

/// One request with hyper-util's client, a status of 400 or more an error.
async fn once(method: &Method, url: &str) -> Result<u16, FnError> {
    let client = client();
    let response: Response<Incoming> = client
        .request(request(method.clone(), url))
        .await
        .map_err(HttpError::from)?;
    let status = response.status().as_u16();
    if status < 400 {
        return Ok(status);
    }
    Err(FnError::Status(Failed {
        status,
        category: response_category(status, response.headers()),
        hint: retry_hint(response.headers(), SystemTime::now()),
    }))
}

#[retry(layer = "http", backoff = "1ms", max_backoff = "1ms", idempotent = method.is_idempotent())]
async fn http_fn(method: &Method, url: &str) -> Result<u16, FnError> {
    once(method, url).await
}

#[retry(layer = "provider", backoff = "1ms", max_backoff = "1ms", idempotent = method.is_idempotent())]
async fn provider_fn(method: &Method, url: &str) -> Result<u16, FnError> {
    once(method, url).await
}

#[retry(layer = "tool", idempotent = method.is_idempotent())]
async fn tool_fn(method: &Method, url: &str) -> Result<u16, FnError> {
    once(method, url).await
}

/// The annotated fn of `case`'s layer.
async fn annotated(case: &Case, url: &str) -> u16 {
    let result = match case.layer {
        Layer::Http => http_fn(&case.method, url).await,
        Layer::Provider => provider_fn(&case.method, url).await,
        _ => tool_fn(&case.method, url).await,
    };
    match result {
        Ok(status) | Err(FnError::Status(Failed { status, .. })) => status,
        Err(FnError::Http(_)) => 0,
    }
}

/// A `RetryLayer` of `case`'s layer over hyper-util's client, with the
/// annotated fns' backoffs.
async fn tower_layer(case: &Case, url: &str) -> u16 {
    let layer = match case.layer {
        // The tool layer's one attempt: a config would opt it in.
        Layer::Tool => RetryLayer::new(Layer::Tool),
        layer => RetryLayer::new(layer).config(quick(layer)),
    };
    let mut service = through(layer);
    status(&mut service, request(case.method.clone(), url))
        .await
        .unwrap_or(0)
}

/// A `reqwest_middleware::Retry` of `case`'s layer in a reqwest client,
/// with the annotated fns' backoffs.
async fn middleware(case: &Case, url: &str) -> u16 {
    let retry = match case.layer {
        Layer::Tool => Retry::new(Layer::Tool),
        layer => Retry::new(layer).config(quick(layer)),
    };
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(retry)
        .build();
    let response = client.request(case.method.clone(), url).send().await;
    response.map_or(0, |r| r.status().as_u16())
}

/// Runs every case through `column`, each against a fresh fault server;
/// the rows that disagree with the table.
async fn disagreements(name: &str, column: impl AsyncFn(&Case, String) -> u16) -> Vec<String> {
    let mut wrong = Vec::new();
    for case in cases() {
        let server = FaultServer::start(case.script.clone()).await;
        let status = column(&case, server.url("/")).await;
        let requests = server.requests();
        if (requests, status) != (case.requests, case.status) {
            wrong.push(format!(
                "{name}, {}: {requests} requests, status {status} (the table: {}, {})",
                case.name, case.requests, case.status
            ));
        }
    }
    wrong
}

#[tokio::test]
async fn an_annotated_fn_follows_the_table() {
    let wrong = disagreements("#[retry]", async |case, url| annotated(case, &url).await).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn the_tower_layer_follows_the_table() {
    let wrong = disagreements("tower", async |case, url| tower_layer(case, &url).await).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn the_reqwest_middleware_follows_the_table() {
    let wrong = disagreements("reqwest_middleware", async |case, url| {
        middleware(case, &url).await
    })
    .await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
