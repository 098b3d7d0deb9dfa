//! Calls started at once, the first alone and the others once it is
//! answered: the shape of the tests in which a 429 must hold the others.

use std::future::Future;
use std::time::Duration;

/// `n` calls made by `call`: the first alone, the others once `ready()`
/// says its answer is in (the upstream held, or the server's limit met),
/// whatever the machine's load: none of them can overtake the first's 429.
/// Panics if the first's answer never comes (10 000 looks, 1 ms apart).
pub async fn behind_first<F, Fut, T>(n: usize, ready: impl Fn() -> bool, call: F) -> Vec<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = T>,
{
    let calls = (0..n).map(|i| {
        let call = call();
        let ready = &ready;
        async move {
            if i > 0 {
                for _ in 0..10_000 {
                    if ready() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                assert!(ready(), "the first call's answer never came");
            }
            call.await
        }
    });
    futures_util::future::join_all(calls).await
}
