//! Calls with side effects over real HTTP: the loopback fault server, real
//! reqwest. A call that is not idempotent (`Transport::post_once`, the
//! `Mailer` tool) is retried after a refused connection and a 503, never
//! after a failure that may have reached the server: the server counts
//! each effect.

use std::sync::Arc;
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{EventLog, Outcome, RetryEvent, RetryObserver, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Classify, ErrorCategory, Layer, Reached, RetryConfig};
use nika_retry_tests::fault::{Fault, FaultServer, HangingPort, closed_port};
use nika_retry_tests::verb::{HttpError, MailError, Mailer, RequestOptions, Transport};

/// Listens again when a refused attempt is retried (its event comes before
/// the retry's backoff): the retry finds the server back and the attempt
/// before it found it closed, however slow the machine, where a refusal of
/// a fixed period could end before the first connect or outlast the retry.
struct ListenOnRetry(Arc<FaultServer>);

impl RetryObserver for ListenOnRetry {
    fn on_event(&self, event: &RetryEvent) {
        if event.outcome == Outcome::Retrying {
            self.0.listen_again();
        }
    }
}

/// `work` with the server at `server` listening again on its first retry.
async fn listening_on_retry<F: std::future::Future>(
    server: &Arc<FaultServer>,
    work: F,
) -> F::Output {
    observe(Arc::new(ListenOnRetry(server.clone())), work).await
}

fn transport(server: &FaultServer) -> Transport {
    Transport::new(server.url(""), RequestOptions::fast_retries())
}

/// `(layer, attempt, outcome, reason)` of each event.
fn outline(log: &EventLog) -> Vec<(Layer, u32, Outcome, Option<GiveUp>)> {
    log.events()
        .iter()
        .map(|e| (e.layer, e.attempt, e.outcome, e.reason))
        .collect()
}

const MAY_HAVE: Option<GiveUp> = Some(GiveUp::MayHaveTakenEffect);

#[tokio::test]
async fn a_request_committed_then_unanswered_is_repeated_only_by_an_idempotent_call() {
    // The same script twice: the answer to the first request is lost.
    let script = || [Fault::CommitThenDrop, Fault::ok("sent")];
    let idempotent = FaultServer::start(script()).await;
    assert_eq!(
        transport(&idempotent).post("/mail", "hi").await.unwrap(),
        "sent"
    );
    assert_eq!(idempotent.effects(), 2, "the mail went out twice");

    let once = FaultServer::start(script()).await;
    let log = EventLog::new();
    let err = observe(
        log.clone().into(),
        transport(&once).post_once("/mail", "hi"),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, HttpError::Request(_)), "{err:?}");
    assert_eq!(err.reached(), Reached::Maybe);
    assert_eq!((once.requests(), once.effects()), (1, 1));
    assert_eq!(outline(&log), [(Layer::Http, 1, Outcome::GaveUp, MAY_HAVE)]);
}

#[tokio::test]
async fn a_refused_connection_never_left_and_is_retried() {
    // Nothing listens at all: every attempt is refused, each one retried.
    let nobody = Transport::new(
        format!("http://{}", closed_port().await),
        RequestOptions::fast_retries(),
    );
    let log = EventLog::new();
    let err = observe(log.clone().into(), nobody.post_once("/mail", "hi"))
        .await
        .unwrap_err();
    assert_eq!(err.reached(), Reached::No, "{err:?}");
    let exhausted = Some(GiveUp::AttemptsExhausted);
    assert_eq!(
        outline(&log),
        [
            (Layer::Http, 1, Outcome::Retrying, None),
            (Layer::Http, 2, Outcome::Retrying, None),
            (Layer::Http, 3, Outcome::GaveUp, exhausted),
        ]
    );

    // A server that refuses, then listens again: the mail goes out once.
    let server = Arc::new(FaultServer::start([Fault::ok("sent")]).await);
    let client = transport(&server);
    server.refuse();
    let log = EventLog::new();
    let sent = observe(log.clone().into(), client.post_once("/mail", "hi"));
    let sent = listening_on_retry(&server, sent).await;
    assert_eq!(sent.unwrap(), "sent");
    assert_eq!((server.refusal_periods(), server.effects()), (1, 1));
    assert_eq!(outline(&log)[0], (Layer::Http, 1, Outcome::Retrying, None));
}

#[tokio::test]
async fn reqwests_own_connect_timeout_never_left() {
    // Not refused (the io kind would say so): the connect hangs, and
    // reqwest's own `connect_timeout` ends it.
    let hanging = HangingPort::start().await;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let err = client
        .post(hanging.url())
        .body("hi")
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect() && err.is_timeout(), "{err:?}");
    assert_eq!(err.reached(), Reached::No, "{err:?}");
    assert_eq!(err.category(), ErrorCategory::Transient);
}

#[tokio::test]
async fn the_connection_after_a_scripted_refusal_is_refused() {
    // The first call's answer closes its connection and the listener: the
    // second call's first connect is refused, its retry goes through.
    let server = Arc::new(
        FaultServer::start([
            Fault::then_refuse(Fault::ok("first"), Duration::MAX),
            Fault::ok("second"),
        ])
        .await,
    );
    let transport = transport(&server);
    assert_eq!(transport.post_once("/mail", "1").await.unwrap(), "first");
    let log = EventLog::new();
    let second = observe(log.clone().into(), transport.post_once("/mail", "2"));
    let second = listening_on_retry(&server, second).await;
    assert_eq!(second.unwrap(), "second");
    assert_eq!((server.requests(), server.effects()), (2, 2));
    assert_eq!(
        outline(&log),
        [
            (Layer::Http, 1, Outcome::Retrying, None),
            (Layer::Http, 2, Outcome::Recovered, None),
        ]
    );
}

#[tokio::test]
async fn a_503_or_429_is_refused_and_retried_a_500_or_a_reset_may_have_taken_effect() {
    for (fault, reached, requests) in [
        (Fault::Status(503), Reached::Refused, 2),
        (Fault::WithHeaders(408, vec![]), Reached::Refused, 2),
        (Fault::Status(500), Reached::Maybe, 1),
        (Fault::Status(502), Reached::Maybe, 1),
        (Fault::Reset, Reached::Maybe, 1),
    ] {
        let server = FaultServer::start([fault.clone(), Fault::ok("sent")]).await;
        let result = transport(&server).post_once("/mail", "hi").await;
        assert_eq!(server.requests(), requests, "{fault:?}");
        match result {
            Ok(sent) => assert_eq!((sent.as_str(), reached), ("sent", Reached::Refused)),
            Err(err) => assert_eq!(err.reached(), reached, "{fault:?}: {err:?}"),
        }
    }
    // A 429 is left to the provider layer by the http one; classified, it is refused.
    let server = FaultServer::start([Fault::WithHeaders(429, vec![])]).await;
    let err = transport(&server)
        .post_once("/mail", "hi")
        .await
        .unwrap_err();
    assert_eq!(err.reached(), Reached::Refused, "{err:?}");
}

/// A task that opts its tools in to 3 attempts.
fn opted_in() -> TaskPolicy {
    let retry = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(3)
        .unwrap();
    TaskPolicy::new().with_retry(retry)
}

#[tokio::test]
async fn the_mailer_opted_in_by_its_task_sends_each_mail_once() {
    // The mail server takes the mail, then its answer is lost: not retried,
    // at either layer, although the task opts the tool in.
    let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("sent")]).await;
    let mailer = Mailer::new(transport(&server));
    let log = EventLog::new();
    let sent = observe(
        Arc::new(log.clone()),
        scope(opted_in(), mailer.send("ops@example.com", "disk full")),
    )
    .await;
    let err = sent.unwrap_err();
    assert!(matches!(err, MailError::Http(_)), "{err:?}");
    assert_eq!(server.effects(), 1);
    assert_eq!(
        outline(&log),
        [
            (Layer::Http, 1, Outcome::GaveUp, MAY_HAVE),
            (Layer::Tool, 1, Outcome::GaveUp, MAY_HAVE),
        ]
    );
    assert!(log.to_string().contains("Mailer::send"), "{log}");

    // The http layer's one attempt refused, then the task's retry of the
    // tool, whose connection goes through: sent once.
    let server = Arc::new(FaultServer::start([Fault::ok("sent")]).await);
    let mailer = Mailer::new(Transport::new(
        server.url(""),
        RequestOptions::fast_retries().single_attempt(),
    ));
    server.refuse();
    let sent = scope(opted_in(), mailer.send("ops@example.com", "disk full"));
    let sent = listening_on_retry(&server, sent).await;
    assert_eq!(sent.unwrap(), "sent");
    assert_eq!((server.refusal_periods(), server.effects()), (1, 1));
}
