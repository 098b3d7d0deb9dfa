//! Non-idempotence inward (docs/side-effects.md;
//! issue 44.1): a call that is not idempotent makes every annotated call
//! nested in its attempts not idempotent either. A transport fn that says
//! nothing, under a mailer tool marked `idempotent = false`, does not
//! repeat a mail whose answer was lost; the same transport alone does; a
//! nested fn that says `idempotent = true` (it sends the idempotency key to
//! a server that deduplicates on it) stands. Over real HTTP: the loopback
//! fault server counts each effect.

use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{EventLog, Outcome, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Classify, Layer, RetryConfig, TimeoutError, retry};
use nika_retry_tests::fault::{Fault, FaultServer, closed_port};

#[derive(Debug, thiserror::Error, Classify)]
enum MailError {
    /// Refused: never left, retried; a lost answer: may have arrived.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// 429, 503, 408: the server did not act (`Reached::Refused`), retried.
    #[error("HTTP {0}")]
    #[category(http_status = 0)]
    Status(u16),
    /// The task's deadline (none here).
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// The wire: one POST per attempt, 10 ms between attempts.
struct Wire {
    client: reqwest::Client,
    url: String,
}

impl Wire {
    async fn send(&self, mail: &str) -> Result<String, MailError> {
        let response = self
            .client
            .post(&self.url)
            .body(mail.to_owned())
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            return Err(MailError::Status(status.as_u16()));
        }
        Ok(response.text().await?)
    }

    /// Says nothing about repeating itself: idempotent alone, not under a
    /// call that is not.
    #[retry(layer = "http", backoff = "10ms", jitter = 0.0)]
    async fn post(&self, mail: &str) -> Result<String, MailError> {
        self.send(mail).await
    }

    /// Says it is idempotent (its server deduplicates on the key): it
    /// stands under a call that is not.
    #[retry(layer = "http", backoff = "10ms", jitter = 0.0, idempotent = true)]
    async fn post_deduplicated(&self, mail: &str) -> Result<String, MailError> {
        self.send(mail).await
    }
}

struct Mailer {
    wire: Wire,
    /// What `send_as` says.
    idempotent: bool,
}

impl Mailer {
    /// The tool: a repeated attempt would send a second mail.
    #[retry(layer = "tool", idempotent = false)]
    async fn send(&self, mail: &str) -> Result<String, MailError> {
        self.wire.post(mail).await
    }

    /// The same, through an unmarked provider-layer relay over the wire:
    /// the `false` crosses two layers.
    #[retry(layer = "tool", idempotent = false)]
    async fn send_through_relay(&self, mail: &str) -> Result<String, MailError> {
        self.relay(mail).await
    }

    #[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
    async fn relay(&self, mail: &str) -> Result<String, MailError> {
        self.wire.post(mail).await
    }

    /// The same through a relay that says `idempotent = true`: the wire
    /// under it inherits that, not the tool's `false`.
    #[retry(layer = "tool", idempotent = false)]
    async fn send_through_deduplicating_relay(&self, mail: &str) -> Result<String, MailError> {
        self.deduplicating_relay(mail).await
    }

    #[retry(layer = "provider", backoff = "10ms", jitter = 0.0, idempotent = true)]
    async fn deduplicating_relay(&self, mail: &str) -> Result<String, MailError> {
        self.wire.post(mail).await
    }

    /// Over the wire's fn that says `idempotent = true` itself.
    #[retry(layer = "tool", idempotent = false)]
    async fn send_deduplicated(&self, mail: &str) -> Result<String, MailError> {
        self.wire.post_deduplicated(mail).await
    }

    /// `idempotent = EXPR`: what it evaluates to goes inward too.
    #[retry(layer = "tool", idempotent = self.idempotent)]
    async fn send_as(&self, mail: &str) -> Result<String, MailError> {
        self.wire.post(mail).await
    }
}

/// A server that commits the first mail and drops its answer, then
/// answers; a mailer on it.
async fn lost_then_sent() -> (FaultServer, Mailer) {
    let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("sent")]).await;
    let wire = Wire {
        client: reqwest::Client::new(),
        url: server.url("/mail"),
    };
    let mailer = Mailer {
        wire,
        idempotent: false,
    };
    (server, mailer)
}

/// `fut` in a task that opts its tools in to 3 attempts, as a workflow would.
async fn opted_in<T>(fut: impl Future<Output = Result<T, MailError>>) -> Result<T, MailError> {
    let retry = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(3)
        .and_then(|c| c.with_initial_backoff(Duration::from_millis(10)))
        .unwrap();
    scope(TaskPolicy::new().with_retry(retry), fut).await
}

/// `(layer, attempt, outcome, reason)` of each decision.
fn outline(log: &EventLog) -> Vec<(Layer, u32, Outcome, Option<GiveUp>)> {
    log.events()
        .iter()
        .map(|e| (e.layer, e.attempt, e.outcome, e.reason))
        .collect()
}

const MAY_HAVE: Option<GiveUp> = Some(GiveUp::MayHaveTakenEffect);

#[tokio::test]
async fn a_mailer_tool_over_an_unmarked_transport_sends_a_lost_mail_once() {
    let (server, mailer) = lost_then_sent().await;
    let log = EventLog::new();
    let error = observe(log.clone().into(), opted_in(mailer.send("hi")))
        .await
        .unwrap_err();
    assert!(matches!(error, MailError::Request(_)), "{error:?}");
    assert_eq!((server.requests(), server.effects()), (1, 1), "sent once");
    assert_eq!(
        outline(&log),
        [
            (Layer::Http, 1, Outcome::GaveUp, MAY_HAVE),
            (Layer::Tool, 1, Outcome::GaveUp, MAY_HAVE),
        ]
    );
    let line = log.events()[0].to_string();
    assert!(line.contains("is not idempotent"), "{line}");
}

#[tokio::test]
async fn the_same_transport_alone_repeats_the_lost_mail() {
    let (server, mailer) = lost_then_sent().await;
    assert_eq!(mailer.wire.post("hi").await.unwrap(), "sent");
    assert_eq!((server.requests(), server.effects()), (2, 2), "sent twice");
}

#[tokio::test]
async fn the_false_crosses_an_unmarked_layer_between() {
    let (server, mailer) = lost_then_sent().await;
    mailer.send_through_relay("hi").await.unwrap_err();
    assert_eq!((server.requests(), server.effects()), (1, 1), "sent once");
}

#[tokio::test]
async fn a_nested_fn_that_says_idempotent_true_is_retried() {
    let (server, mailer) = lost_then_sent().await;
    assert_eq!(mailer.send_deduplicated("hi").await.unwrap(), "sent");
    assert_eq!(server.requests(), 2, "the wire's own `true` stands");

    // A relay that says `true` between: the wire under it inherits `true`,
    // and retries the lost answer itself.
    let (server, mailer) = lost_then_sent().await;
    let log = EventLog::new();
    let sent = observe(
        log.clone().into(),
        mailer.send_through_deduplicating_relay("hi"),
    )
    .await;
    assert_eq!(sent.unwrap(), "sent");
    assert_eq!(server.requests(), 2);
    assert_eq!(
        outline(&log),
        [
            (Layer::Http, 1, Outcome::Retrying, None),
            (Layer::Http, 2, Outcome::Recovered, None),
        ],
        "retried by the wire, under the relay"
    );
}

#[tokio::test]
async fn an_expression_goes_inward_as_it_evaluates() {
    let (server, mailer) = lost_then_sent().await;
    mailer.send_as("hi").await.unwrap_err();
    assert_eq!(server.requests(), 1, "`self.idempotent` is false");

    let (server, mut mailer) = lost_then_sent().await;
    mailer.idempotent = true;
    assert_eq!(mailer.send_as("hi").await.unwrap(), "sent");
    assert_eq!(server.requests(), 2, "`self.idempotent` is true");
}

#[tokio::test]
async fn a_refused_connection_is_still_retried_under_the_mailer() {
    // Nothing listens: every connect is refused, and a request that never
    // left is retried by the wire although the mailer is not idempotent.
    let mailer = Mailer {
        wire: Wire {
            client: reqwest::Client::new(),
            url: format!("http://{}/mail", closed_port().await),
        },
        idempotent: false,
    };
    let log = EventLog::new();
    observe(log.clone().into(), mailer.send("hi"))
        .await
        .unwrap_err();
    let http: Vec<_> = outline(&log)
        .into_iter()
        .filter(|(layer, ..)| *layer == Layer::Http)
        .collect();
    let exhausted = Some(GiveUp::AttemptsExhausted);
    assert_eq!(
        http,
        [
            (Layer::Http, 1, Outcome::Retrying, None),
            (Layer::Http, 2, Outcome::Retrying, None),
            (Layer::Http, 3, Outcome::GaveUp, exhausted),
        ]
    );
}
