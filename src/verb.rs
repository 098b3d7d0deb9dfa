//! A small verb crate, written as a user of nika-retry writes one: the HTTP
//! transport (L1), a provider calling an LLM API over it (L2), with a
//! streamed completion too, a tool that calls an HTTP service (L2), a
//! mailer (a tool with a side effect, not idempotent), and a
//! task runner that puts a workflow task's YAML policy in force. The
//! integration tests and the demo drive it against the
//! [fault server](crate::fault).

use std::time::Duration;

mod mail;

pub use mail::{MailError, Mailer};

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::stream::{Started, started_when};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, ErrorCategory, Layer, RetryConfig, TimeoutError, retry, timeout};

/// Per-request options of the transport (the http layer, L1, is configured per request).
#[derive(Clone, Debug)]
pub struct RequestOptions {
    /// Bounds setting up a connection (the connector of the client).
    pub connect_timeout: Duration,
    /// Cuts an attempt that has gone this long without progress.
    pub read_timeout: Duration,
    /// Replaces the http layer defaults when set.
    pub retry: Option<RetryConfig>,
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            retry: None,
        }
    }
}

impl RequestOptions {
    /// Http-layer retries 10 ms apart, exactly (no jitter), and a 5 s read
    /// timeout, out of reach of a loaded machine: for tests that count
    /// requests and read outlines.
    pub fn fast_retries() -> RequestOptions {
        let retry = RetryConfig::for_layer(Layer::Http)
            .with_initial_backoff(Duration::from_millis(10))
            .and_then(|c| c.with_jitter(0.0))
            .expect("10 ms and no jitter are valid");
        RequestOptions {
            read_timeout: Duration::from_secs(5),
            retry: Some(retry),
            ..RequestOptions::default()
        }
    }

    /// These options with a single http-layer attempt, to count the
    /// retries of the layer above.
    pub fn single_attempt(mut self) -> RequestOptions {
        let once = RetryConfig::for_layer(Layer::Http).with_max_attempts(1);
        self.retry = Some(once.expect("1 attempt is valid"));
        self
    }

    /// These options with this read timeout.
    pub fn with_read_timeout(mut self, read_timeout: Duration) -> RequestOptions {
        self.read_timeout = read_timeout;
        self
    }
}

/// What the transport fails with.
#[derive(Debug, thiserror::Error, Classify)]
pub enum HttpError {
    /// Refused, reset, timed out in reqwest, or a broken body.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// A non-success status, with the server's wait hint.
    #[error("HTTP {status}")]
    #[category(from = category, http_status = status, retry_after = retry_after)]
    Status {
        /// The status code.
        status: u16,
        /// What `classify_response` made of it: the status's category,
        /// unless the server's `x-should-retry` said otherwise.
        category: ErrorCategory,
        /// From `Retry-After` and friends.
        retry_after: Option<Duration>,
        /// The response body.
        body: String,
    },
    /// The read timeout of an attempt, or a total deadline.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// The L1 transport.
pub struct Transport {
    client: reqwest::Client,
    base: String,
    options: RequestOptions,
    /// The upstream whose rate-limit headers every response reports.
    observed: Option<Upstream>,
}

impl Transport {
    /// A transport to `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: impl Into<String>, options: RequestOptions) -> Transport {
        // The connector takes the connect limit of `post`'s #[timeout].
        let client = nika_retry::http::client_builder()
            .build()
            .expect("a plain HTTP client builds");
        Transport {
            client,
            base: base.into(),
            options,
            observed: None,
        }
    }

    /// One POST: connect, send, read. Retried on connection failures and 5xx,
    /// waiting at least `Retry-After`; 429 is left to the provider layer.
    ///
    /// Every attempt of one call sends the call's `Idempotency-Key` and its
    /// `X-Retry-Count` (0 on the first attempt), as the Stainless-generated
    /// LLM SDKs do, so the server can tell a retry from a new request.
    #[retry(layer = "http", config = self.options.retry.clone())]
    #[timeout(connect = self.options.connect_timeout, read = self.options.read_timeout)]
    pub async fn post(&self, path: &str, body: &str) -> Result<String, HttpError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.post(url).body(body.to_owned());
        if let Some(attempt) = nika_retry::current_attempt() {
            request = request
                .header("Idempotency-Key", attempt.idempotency_key.to_string())
                .header("X-Retry-Count", attempt.total_retries);
        }
        let response = request.send().await?;
        if let Some(upstream) = &self.observed {
            upstream.observe(response.headers());
        }
        let (category, retry_after) = nika_retry::http::classify_response(&response);
        let status = response.status();
        let body = response.text().await?;
        if status.is_success() {
            return Ok(body);
        }
        Err(HttpError::Status {
            status: status.as_u16(),
            category,
            retry_after,
            body,
        })
    }
}

/// What the provider fails with: a provider crate's `ProviderError`.
#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    /// HTTP 429 with `insufficient_quota`: the key's quota or credit is
    /// spent. Not retried, and no hold: waiting does not bring credit back.
    #[error("quota exhausted: {message}")]
    #[category(permanent)]
    QuotaExhausted {
        /// The body's message.
        message: String,
    },
    /// The model's upstream is held (a 429 of another call, its rate-limit
    /// headers) longer than this call may wait.
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
    /// HTTP 429, with the provider's hint from its JSON body.
    #[error("rate limited")]
    #[category(rate_limited, retry_after_ms = retry_after_ms)]
    RateLimited {
        /// The wait the provider asked for.
        retry_after_ms: Option<u64>,
    },
    /// Any other API failure, with the server's hint: a 503 whose
    /// `Retry-After` was above the http layer's cap is still waited here.
    #[error("api error {status}: {message}")]
    #[category(from = category, http_status = status, retry_after = retry_after)]
    Api {
        /// The status.
        status: u16,
        /// Its category, as the transport's error had it.
        category: ErrorCategory,
        /// The body.
        message: String,
        /// The wait the server asked for.
        retry_after: Option<Duration>,
    },
    /// The transport gave up (its own retries spent), or a streamed body
    /// broke (reset, cut).
    #[error(transparent)]
    #[category(transparent)]
    Transport(HttpError),
    /// A streamed body that is not server-sent events (bad UTF-8, a line
    /// the parser refuses).
    #[error("malformed event stream: {0}")]
    #[category(permanent)]
    Malformed(String),
    /// A time limit of the provider call.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

impl From<HttpError> for ProviderError {
    fn from(error: HttpError) -> Self {
        match error {
            HttpError::Status {
                status: 429, body, ..
            } if quota_exhausted(&body) => ProviderError::QuotaExhausted {
                message: error_message(429, &body),
            },
            HttpError::Status {
                category: ErrorCategory::RateLimited,
                body,
                retry_after,
                ..
            } => ProviderError::RateLimited {
                retry_after_ms: serde_json::from_str::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["error"]["retry_after_ms"].as_u64())
                    .or(retry_after.map(|d| d.as_millis().try_into().unwrap_or(u64::MAX))),
            },
            HttpError::Status {
                status,
                category,
                body,
                retry_after,
            } => ProviderError::Api {
                status,
                category,
                message: error_message(status, &body),
                retry_after,
            },
            other => ProviderError::Transport(other),
        }
    }
}

/// Whether a 429's body says the quota, not the rate, ran out (OpenAI's
/// `insufficient_quota`, as its `code` or `type`).
fn quota_exhausted(body: &str) -> bool {
    let json = serde_json::from_str::<serde_json::Value>(body).ok();
    json.is_some_and(|v| {
        [&v["error"]["code"], &v["error"]["type"]]
            .iter()
            .any(|field| field.as_str() == Some("insufficient_quota"))
    })
}

/// What an error response says: the JSON body's `error.message`, else the
/// body, else the status's reason phrase (an empty body says nothing).
fn error_message(status: u16, body: &str) -> String {
    let json = serde_json::from_str::<serde_json::Value>(body).ok();
    match json.as_ref().and_then(|v| v["error"]["message"].as_str()) {
        Some(message) => message.to_owned(),
        None if !body.trim().is_empty() => body.trim().to_owned(),
        None => reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message")
            .to_owned(),
    }
}

/// An LLM provider over the transport, for one model: its calls share the
/// model's [`Upstream`] (a 429 to one holds them all; every response's
/// rate-limit headers pace them).
pub struct Provider {
    transport: Transport,
    stream_total: Option<Duration>,
    upstream: Upstream,
    shared: bool,
}

impl Provider {
    /// A provider over `transport`, for the model `default`.
    pub fn new(transport: Transport) -> Provider {
        Provider::for_model(transport, "default")
    }

    /// A provider over `transport`, for `model`: one upstream per model,
    /// which is where a provider's rate limits count.
    pub fn for_model(mut transport: Transport, model: &str) -> Provider {
        let upstream = Upstream::new(format!("provider/{model}"));
        transport.observed = Some(upstream.clone());
        Provider {
            transport,
            stream_total: None,
            upstream,
            shared: true,
        }
    }

    /// This provider with its model's limits declared (`Upstream::with_quota`):
    /// its upstream paces from the first call, with no cold start.
    pub fn with_quota(mut self, quota: nika_retry::upstream::Quota) -> Provider {
        self.upstream = Upstream::new(self.upstream.name().to_owned()).with_quota(quota);
        if self.shared {
            self.transport.observed = Some(self.upstream.clone());
        }
        self
    }

    /// This provider with each call on an upstream of its own, as without
    /// sharing: a 429 holds only the call that got it (to compare with).
    pub fn unshared(mut self) -> Provider {
        self.transport.observed = None;
        self.shared = false;
        self
    }

    /// The model's upstream, which every call shares (unless
    /// [unshared](Provider::unshared)).
    pub fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// The upstream a call passes: the model's, or a fresh one when
    /// [unshared](Provider::unshared).
    fn call_upstream(&self) -> Upstream {
        match self.shared {
            true => self.upstream.clone(),
            false => Upstream::new(self.upstream.name().to_owned()),
        }
    }

    /// Bounds a whole [`stream`](Provider::stream) call, its retries and its
    /// streamed body, by `total`.
    pub fn with_stream_total(mut self, total: Duration) -> Provider {
        self.stream_total = Some(total);
        self
    }

    /// One streamed completion: server-sent events, one content event per
    /// token, other events (a ping, a usage chunk) as metadata.
    ///
    /// Returns once the first token is in: the request is retried as long as
    /// nothing was shown (a 5xx or a 429, a connection refused, a body cut
    /// or stalled before its first token, metadata included), and never
    /// after. The stream then carries the transport's read timeout (an
    /// inactivity limit: a stream that keeps delivering is never cut) and
    /// the [stream total](Provider::with_stream_total), if any. Each attempt
    /// sends the call's `Idempotency-Key` and `X-Retry-Count`.
    #[retry(layer = "provider", upstream = self.call_upstream())]
    #[timeout(read = self.transport.options.read_timeout, total = self.stream_total)]
    pub async fn stream(
        &self,
        prompt: &str,
    ) -> Result<Started<impl Stream<Item = Result<Chunk, ProviderError>> + use<>>, ProviderError>
    {
        let transport = &self.transport;
        let mut request = transport
            .client
            .post(format!("{}/v1/stream", transport.base))
            .header("Accept", "text/event-stream")
            .body(prompt.to_owned());
        if let Some(attempt) = nika_retry::current_attempt() {
            request = request
                .header("Idempotency-Key", attempt.idempotency_key.to_string())
                .header("X-Retry-Count", attempt.total_retries);
        }
        let response = request.send().await.map_err(HttpError::from)?;
        if let Some(upstream) = &transport.observed {
            upstream.observe(response.headers());
        }
        let status = response.status();
        if !status.is_success() {
            let (category, retry_after) = nika_retry::http::classify_response(&response);
            let body = response.text().await.map_err(HttpError::from)?;
            return Err(HttpError::Status {
                status: status.as_u16(),
                category,
                retry_after,
                body,
            }
            .into());
        }
        let chunks = response.bytes_stream().eventsource().map(Chunk::parse);
        started_when(chunks, Chunk::is_token).await
    }

    /// One completion. Retries 5xx and 429 (waiting out `retry_after_ms`),
    /// 3 attempts, 1 s then 4 s; a task's `retry:` block replaces that.
    /// Every attempt first passes the model's upstream.
    #[retry(layer = "provider", upstream = self.call_upstream())]
    pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
        Ok(self.transport.post("/v1/complete", prompt).await?)
    }
}

/// One event of a [streamed completion](Provider::stream).
#[derive(Clone, Debug, PartialEq)]
pub enum Chunk {
    /// Content: a piece of the completion (an event without a name).
    Token(String),
    /// Anything else the provider sends (a ping, a usage chunk), by the
    /// event's name: not content.
    Meta {
        /// The event's name.
        event: String,
        /// Its data.
        data: String,
    },
}

impl Chunk {
    /// Whether this is content, the predicate of
    /// [`started_when`](nika_retry::stream::started_when).
    pub fn is_token(&self) -> bool {
        matches!(self, Chunk::Token(_))
    }

    /// The chunk of one parsed event; a broken body is the transport's
    /// error (transient: before the first token, worth another attempt).
    fn parse(
        event: Result<Event, EventStreamError<reqwest::Error>>,
    ) -> Result<Chunk, ProviderError> {
        match event {
            Ok(event) if event.event == "message" => Ok(Chunk::Token(event.data)),
            Ok(event) => Ok(Chunk::Meta {
                event: event.event,
                data: event.data,
            }),
            Err(EventStreamError::Transport(error)) => Err(HttpError::Request(error).into()),
            Err(malformed) => Err(ProviderError::Malformed(malformed.to_string())),
        }
    }
}

/// What a tool fails with.
#[derive(Debug, thiserror::Error, Classify)]
pub enum ToolError {
    /// The tool's service is down: transient, but tool failures are not
    /// retried unless the task opts in.
    #[error("tool unavailable: {0}")]
    #[category(transient)]
    Unavailable(String),
    /// The tool refused its input.
    #[error("tool failed: {0}")]
    #[category(permanent)]
    Failed(String),
    /// The tool took too long.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// A tool behind an HTTP service.
pub struct HttpTool {
    transport: Transport,
}

impl HttpTool {
    /// A tool over `transport`.
    pub fn new(transport: Transport) -> HttpTool {
        HttpTool { transport }
    }

    /// Runs the tool once; never retried by itself (tool failures are
    /// semantic: a retry would mask them), only by a task that opts in.
    #[retry(layer = "tool")]
    #[timeout(attempt = "5s")]
    pub async fn run(&self, input: &str) -> Result<String, ToolError> {
        match self.transport.post("/tool", input).await {
            Ok(out) => Ok(out),
            Err(HttpError::Status { status, body, .. }) if status < 500 => {
                Err(ToolError::Failed(error_message(status, &body)))
            }
            Err(e) => Err(ToolError::Unavailable(e.to_string())),
        }
    }
}

/// A workflow task, as the YAML gives it.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Task {
    /// The task's name.
    pub id: String,
    /// `infer` (the provider) or `tool`.
    pub verb: String,
    /// The prompt or tool input.
    pub input: String,
    /// The task's `retry:`, `timeout:` and `budget:`.
    #[serde(flatten)]
    pub policy: TaskPolicy,
}

/// What a task fails with.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The tool failed.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// The task's `timeout:` expired.
    #[error(transparent)]
    Timeout(#[from] TimeoutError),
    /// The verb is not known.
    #[error("unknown verb `{0}`")]
    UnknownVerb(String),
}

/// Runs `task` with its policy in force.
pub async fn run_task(
    task: &Task,
    provider: &Provider,
    tool: &HttpTool,
) -> Result<String, TaskError> {
    scope(task.policy.clone(), async {
        match task.verb.as_str() {
            "infer" => Ok(provider.complete(&task.input).await?),
            "tool" => Ok(tool.run(&task.input).await?),
            other => Err(TaskError::UnknownVerb(other.to_owned())),
        }
    })
    .await
}
