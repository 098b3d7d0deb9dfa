//! The attempt context and the idempotency key (README, "The attempt
//! context"): inside the body, `current_attempt()` says which attempt of
//! which layer runs and gives the call's key, 128 random bits drawn once per
//! call and the same for all its attempts, `Display`ed as UUID text. Every
//! attempt of a transport call sends it with its retry count; the next call,
//! and a nested call, has a key of its own.

use std::sync::Mutex;

use nika_retry::{AttemptInfo, Layer, current_attempt, retry};
use nika_retry_tests::Script;
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{RequestOptions, Transport};

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
async fn nested_calls_each_see_their_own_attempt_and_key() {
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
    assert_eq!(seen[1].idempotency_key, seen[3].idempotency_key, "one call");
    assert_ne!(
        seen[0].idempotency_key, seen[2].idempotency_key,
        "two calls"
    );
    assert_ne!(seen[0].idempotency_key, seen[1].idempotency_key);
    assert_eq!(current_attempt(), None);
}
