//! One worker process of the fleet tests (tests/fleet_processes.rs):
//! `fleet-worker URL CALLS [REDIS_URL]` makes CALLS calls, one after
//! another, to URL through the upstream `fleet/model`, kept in Redis at
//! REDIS_URL if given, else in this process alone. Exits 0 when every call
//! succeeded, printing how many outages its store met.

use std::process::ExitCode;

use nika_retry::upstream::{RedisStore, Upstream};
use nika_retry_tests::fleet::{Provider, UPSTREAM};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(url), Some(Ok(calls))) = (args.first(), args.get(1).map(|n| n.parse::<u32>())) else {
        eprintln!("usage: fleet-worker URL CALLS [REDIS_URL]");
        return ExitCode::from(2);
    };
    let mut upstream = Upstream::new(UPSTREAM);
    let mut shared = None;
    if let Some(redis) = args.get(2) {
        match RedisStore::connect(redis).await {
            Ok(store) => {
                shared = Some(store.clone());
                upstream = upstream.with_store(store);
            }
            Err(e) => {
                eprintln!("fleet-worker: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let provider = Provider::new(url, upstream);
    for _ in 0..calls {
        if let Err(e) = provider.call().await {
            eprintln!("fleet-worker: a call failed: {e}");
            return ExitCode::FAILURE;
        }
    }
    // How often the store was passed over (slower than `STORE_WAIT`, down):
    // meanwhile this process went on its own state, as documented.
    let outages = shared.map_or(0, |store| store.outages());
    println!("{calls} calls ok, {outages} store outages");
    ExitCode::SUCCESS
}
