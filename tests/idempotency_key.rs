//! The attempt context and the idempotency key (docs/task-scope.md, "The
//! attempt context"): inside the body, `current_attempt()` says which attempt of
//! which layer runs and gives the logical request's key, 128 random bits
//! drawn once per call of the outermost annotated fn and the same for all
//! its attempts and every call nested in them, `Display`ed as UUID text.
//! Every request sends it with the retries taken so far across the layers;
//! the next outermost call has a key of its own.

use std::sync::Mutex;

use nika_retry::{AttemptInfo, Layer, current_attempt, retry};
use nika_retry_tests::Script;
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{Provider, RequestOptions, Transport};

type ScriptError = nika_retry_tests::ProviderError;

#[tokio::test]
async fn every_attempt_of_a_call_sends_its_key_and_the_next_call_a_new_one() {
    let server = FaultServer::start([
        Fault::Status(503),
        Fault::Status(503),
        Fault::ok("first"),
        Fault::ok("second"),
    ])
    .await;
    let transport = Transport::new(server.url(""), RequestOptions::fast_retries());
    assert_eq!(transport.post("/", "x").await.unwrap(), "first");
    assert_eq!(transport.post("/", "x").await.unwrap(), "second");
    let hits = server.hits();
    let keys: Vec<&str> = hits
        .iter()
        .map(|h| h.idempotency_key.as_deref().expect("an Idempotency-Key"))
        .collect();
    let counts: Vec<&str> = hits
        .iter()
        .map(|h| h.retry_count.as_deref().expect("an X-Retry-Count"))
        .collect();
    assert_eq!(counts, ["0", "1", "2", "0"]);
    assert!(keys[0] == keys[1] && keys[1] == keys[2], "{keys:?}");
    assert_ne!(keys[2], keys[3], "a new call, a new key");
    for key in keys {
        let groups: Vec<usize> = key.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "UUID text: {key}");
    }
}

/// The keys and the retry counts the server saw, in order.
fn sent(server: &FaultServer) -> (Vec<String>, Vec<String>) {
    server
        .hits()
        .into_iter()
        .map(|h| {
            let key = h.idempotency_key.expect("an Idempotency-Key");
            (key, h.retry_count.expect("an X-Retry-Count"))
        })
        .unzip()
}

#[tokio::test]
async fn a_transport_under_a_provider_sends_one_key_per_provider_call() {
    // A transport retry, a provider retry (429), a transport retry, the
    // answer; then a second provider call, answered at once.
    let server = FaultServer::start([
        Fault::Status(503),
        Fault::RateLimited { retry_after_ms: 10 },
        Fault::Status(503),
        Fault::ok("first"),
        Fault::ok("second"),
    ])
    .await;
    let provider = Provider::new(Transport::new(
        server.url(""),
        RequestOptions::fast_retries(),
    ));
    assert_eq!(provider.complete("x").await.unwrap(), "first");
    assert_eq!(provider.complete("x").await.unwrap(), "second");
    let (keys, counts) = sent(&server);
    assert_eq!(counts, ["0", "1", "2", "3", "0"], "across both layers");
    assert!(keys[..4].iter().all(|k| *k == keys[0]), "{keys:?}");
    assert_ne!(keys[3], keys[4], "a new provider call, a new key");
}

/// Records its attempt before and after a nested call, which records its own.
#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
async fn outer_call(script: &Script, seen: &Mutex<Vec<AttemptInfo>>) -> Result<u32, ScriptError> {
    let before = current_attempt().expect("inside the body");
    inner_call(seen).await?;
    assert_eq!(
        current_attempt(),
        Some(before.clone()),
        "restored after the nested call"
    );
    seen.lock().unwrap().push(before);
    script.attempt()
}

#[retry(layer = "http")]
async fn inner_call(seen: &Mutex<Vec<AttemptInfo>>) -> Result<(), ScriptError> {
    let info = current_attempt().expect("inside the nested body");
    // Across a pending poll too.
    tokio::task::yield_now().await;
    assert_eq!(current_attempt(), Some(info.clone()));
    seen.lock().unwrap().push(info);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn nested_calls_see_their_own_attempt_and_the_outermost_calls_key() {
    let seen = Mutex::new(vec![]);
    let script = Script::new(1, ScriptError::status(503));
    assert_eq!(outer_call(&script, &seen).await, Ok(2));
    let seen = seen.into_inner().unwrap();
    let outline: Vec<_> = seen
        .iter()
        .map(|i| (i.layer, i.attempt, i.max_attempts))
        .collect();
    assert_eq!(
        outline,
        [
            (Layer::Http, 1, 3),
            (Layer::Provider, 1, 3),
            (Layer::Http, 1, 3),
            (Layer::Provider, 2, 3)
        ]
    );
    let totals: Vec<u32> = seen.iter().map(|i| i.total_retries).collect();
    assert_eq!(
        totals,
        [0, 0, 1, 1],
        "the provider's retry counts in the http call"
    );
    let own: Vec<u32> = seen.iter().map(AttemptInfo::retries).collect();
    assert_eq!(own, [0, 0, 0, 1], "each loop's own");
    let key = seen[0].idempotency_key;
    assert!(seen.iter().all(|i| i.idempotency_key == key), "{seen:?}");

    // The next outermost call draws a new key (a key drawn in a nested
    // call, the provider's never read: the test above).
    let again = Mutex::new(vec![]);
    let script = Script::new(0, ScriptError::status(503));
    assert_eq!(outer_call(&script, &again).await, Ok(1));
    let again = again.into_inner().unwrap();
    assert_ne!(again[0].idempotency_key, key, "a new call, a new key");
    assert_eq!(again[0].idempotency_key, again[1].idempotency_key);
    assert_eq!(current_attempt(), None);
}
