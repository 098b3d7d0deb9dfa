//! One worker process of the fleet's fan-out test
//! (tests/fleet_pacing.rs): `fleet-fanout URL REDIS_URL UPSTREAM CALLS
//! BODY` connects its upstream to Redis, prints `ready`, waits for a line
//! on its stdin, makes its CALLS completions of BODY at once through the
//! upstream (each spending the prompt's tokens), and prints `done FAILED
//! OUTAGES`: how many calls failed, how many outages its store met.

use std::process::ExitCode;

use nika_retry::upstream::{RedisStore, Upstream};
use nika_retry_tests::fleet::Provider;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, redis, upstream, calls, body] = &args[..] else {
        eprintln!("usage: fleet-fanout URL REDIS_URL UPSTREAM CALLS BODY");
        return ExitCode::from(2);
    };
    let Ok(calls) = calls.parse::<u32>() else {
        eprintln!("fleet-fanout: CALLS is a number");
        return ExitCode::from(2);
    };
    let store = match RedisStore::connect(redis).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("fleet-fanout: {e}");
            return ExitCode::from(2);
        }
    };
    let provider = Provider::new(
        url,
        Upstream::new(upstream.clone()).with_store(store.clone()),
    );
    println!("ready");
    let mut go = String::new();
    let _ = std::io::stdin().read_line(&mut go);
    let all = (0..calls).map(|_| provider.complete(body));
    let results = futures_util::future::join_all(all).await;
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        eprintln!("fleet-fanout: a call failed: {e}");
    }
    let failed = results.iter().filter(|r| r.is_err()).count();
    println!("done {failed} {}", store.outages());
    ExitCode::SUCCESS
}
