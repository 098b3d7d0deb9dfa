//! Soak of a call with side effects: 10 000 mails through the `Mailer`
//! tool (not idempotent, over `Transport::post_once`, not idempotent
//! either), opted in to retries by its task, against a fault server that
//! mixes in, at random, mails committed whose answer is lost and
//! connections refused before a mail. Every mail must take effect exactly
//! once, and every refused connection must still be retried. Then the same
//! through a mailer over `Transport::post`, which says nothing about
//! repeating itself: it inherits the tool's `false` (docs/side-effects.md,
//! Inward). Loopback only; bounded (RELIABILITY.md records a run).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, RetryEvent, RetryObserver, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Layer, RetryConfig, retry, timeout};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{MailError, Mailer, RequestOptions, Transport};
use tokio::time::Instant;

const CALLS: usize = 10_000;
/// Out of 100 calls: answers lost after the commit, connections refused first.
const DROPPED: u64 = 10;
const REFUSED: u64 = 10;
/// Refused until the refused connect's retry is decided (its event comes
/// before the retry's backoff: [`ListenOnRetry`]), so that the retry finds
/// the listener back however slow the machine. A period of 5 ms failed on a
/// loaded machine: it outlasted the 10 ms retries and the third attempt's
/// give-up said `AttemptsExhausted`.
const REFUSAL: Duration = Duration::MAX;

/// Listens again when the http layer retries a refused connect.
struct ListenOnRetry(Arc<FaultServer>);

impl RetryObserver for ListenOnRetry {
    fn on_event(&self, event: &RetryEvent) {
        if event.layer == Layer::Http && event.outcome == Outcome::Retrying {
            self.0.listen_again();
        }
    }
}
/// The whole soak, at most: a hang fails it rather than the CI's timeout.
const BOUND: Duration = Duration::from_secs(300);

/// What one call meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    /// Its first connect is refused.
    refused_first: bool,
    /// Its mail is committed, then the answer dropped.
    dropped: bool,
}

/// A seeded xorshift: the same plans every run.
fn plans(seed: u64) -> Vec<Plan> {
    let mut x = seed;
    let mut draw = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 100
    };
    (0..CALLS)
        .map(|i| {
            let (refused, dropped) = (draw(), draw());
            Plan {
                // The first call has no request before it to close the listener after.
                refused_first: i > 0 && refused < REFUSED,
                dropped: dropped < DROPPED,
            }
        })
        .collect()
}

/// The fault of each request: one per call (a refused connect sends none,
/// a dropped answer is not retried), closing the listener after it when
/// the next call's first connect is to be refused.
fn script(plans: &[Plan]) -> Vec<Fault> {
    plans
        .iter()
        .enumerate()
        .map(|(i, plan)| {
            let fault = if plan.dropped {
                Fault::CommitThenDrop
            } else {
                Fault::ok(&format!("id-{i}"))
            };
            match plans.get(i + 1) {
                Some(next) if next.refused_first => Fault::then_refuse(fault, REFUSAL),
                _ => fault,
            }
        })
        .collect()
}

/// Counts the decisions by layer, outcome and reason.
#[derive(Default)]
struct Tally(std::sync::Mutex<HashMap<Decided, u32>>);

/// A decision's layer, outcome and reason.
type Decided = (Layer, Outcome, Option<GiveUp>);

impl RetryObserver for Tally {
    fn on_event(&self, e: &RetryEvent) {
        *self
            .0
            .lock()
            .unwrap()
            .entry((e.layer, e.outcome, e.reason))
            .or_default() += 1;
    }
}

impl Tally {
    fn get(&self, layer: Layer, outcome: Outcome, reason: Option<GiveUp>) -> u32 {
        self.0
            .lock()
            .unwrap()
            .get(&(layer, outcome, reason))
            .copied()
            .unwrap_or(0)
    }
}

/// The verb crate's `Mailer` as it would be written over the transport's
/// `post`, which is not marked: the tool's `idempotent = false` reaches it.
struct UnmarkedMailer {
    transport: Transport,
}

impl UnmarkedMailer {
    #[retry(layer = "tool", idempotent = false)]
    #[timeout(attempt = "30s")]
    async fn send(&self, to: &str, text: &str) -> Result<String, MailError> {
        let mail = format!("to: {to}\n\n{text}");
        Ok(self.transport.post("/mail", &mail).await?)
    }
}

/// Which mailer a soak sends through.
#[derive(Clone, Copy, Debug)]
enum Through {
    /// The verb crate's: its transport fn is marked `idempotent = false`.
    Marked,
    /// Over `Transport::post`, unmarked.
    Unmarked,
}

// Real time: the fault server's listener and reqwest's sockets are real.
#[tokio::test]
async fn every_mail_takes_effect_once_and_every_refused_connection_is_retried() {
    soak(Through::Marked).await;
}

#[tokio::test]
async fn an_unmarked_transport_under_the_mailer_sends_every_mail_once_too() {
    soak(Through::Unmarked).await;
}

async fn soak(through: Through) {
    let plans = plans(0x5eed_0030);
    let server = Arc::new(FaultServer::start_bounded(script(&plans), CALLS + 1, BOUND).await);
    let transport = || Transport::new(server.url(""), RequestOptions::fast_retries());
    let mailer = Mailer::new(transport());
    let unmarked = UnmarkedMailer {
        transport: transport(),
    };
    // The task opts its tools in: 3 attempts, 10 ms apart.
    let retry = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(3)
        .and_then(|c| c.with_initial_backoff(Duration::from_millis(10)))
        .unwrap();
    let policy = TaskPolicy::new().with_retry(retry);
    let tally = Arc::new(Tally::default());
    let failed = AtomicU32::new(0);
    let start = Instant::now();
    let soak = async {
        for (i, plan) in plans.iter().enumerate() {
            let text = format!("mail {i}");
            let sent = match through {
                Through::Marked => {
                    scope(policy.clone(), mailer.send("ops@example.com", &text)).await
                }
                Through::Unmarked => {
                    scope(policy.clone(), unmarked.send("ops@example.com", &text)).await
                }
            };
            match sent {
                Ok(id) => {
                    assert!(!plan.dropped, "mail {i}: answered although dropped");
                    assert_eq!(id, format!("id-{i}"), "mail {i}");
                }
                Err(e) => {
                    assert!(plan.dropped, "mail {i} ({plan:?}) failed: {e}");
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    };
    let soak = observe(Arc::new(ListenOnRetry(server.clone())), soak);
    tokio::time::timeout(BOUND, observe(tally.clone(), soak))
        .await
        .expect("the soak ends within its bound");
    let took = start.elapsed();

    // Exactly one effect per mail, and one request: none was repeated.
    let mut effects: HashMap<String, u32> = HashMap::new();
    for hit in server.hits() {
        assert!(hit.took_effect(), "{hit:?}");
        *effects.entry(hit.body.clone()).or_default() += 1;
    }
    assert_eq!(effects.len(), CALLS);
    assert!(effects.values().all(|&n| n == 1), "a mail went out twice");

    let dropped = plans.iter().filter(|p| p.dropped).count() as u32;
    let refused = plans.iter().filter(|p| p.refused_first).count() as u32;
    assert_eq!(failed.load(Ordering::Relaxed), dropped);
    // Every dropped answer: given up at both layers, never retried.
    let may_have = Some(GiveUp::MayHaveTakenEffect);
    assert_eq!(tally.get(Layer::Http, Outcome::GaveUp, may_have), dropped);
    assert_eq!(tally.get(Layer::Tool, Outcome::GaveUp, may_have), dropped);
    // Every refused connection: retried by the http layer (nothing else
    // here fails retryably), never given up on: the mails planned after a
    // refusal all went out, above.
    assert_eq!(server.refusal_periods() as u32, refused);
    let met = tally.get(Layer::Http, Outcome::Retrying, None);
    assert_eq!(met, refused, "each refusal met by one connect, retried");
    let exhausted = Some(GiveUp::AttemptsExhausted);
    assert_eq!(tally.get(Layer::Http, Outcome::GaveUp, exhausted), 0);
    assert_eq!(tally.get(Layer::Tool, Outcome::Retrying, None), 0);
    eprintln!(
        "{through:?}: {CALLS} mails in {took:.1?}: {dropped} answers dropped (each given up at once, 1 effect), \
         {met} connects refused in {refused} refusal periods (each retried), {} effects",
        server.effects()
    );
}
