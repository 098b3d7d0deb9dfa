//! The probes' leases this process holds in Redis, so that a store
//! dropped before its writer sent a probe's outcome (the process's last
//! call was a probe, and it exits as soon as that call returns) still
//! gives them back: else every other process would wait out
//! [`PROBE_LEASE`](crate::upstream::PROBE_LEASE) for a probe that is over.
//! A process that dies without dropping its store leaves its lease to
//! expire.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use redis::{Client, Script};

use super::millis;
use crate::upstream::store::RELEASED_FOR;

/// Per probe key: the token whose lease it may be, and whether its probe
/// was released (`None`: not over yet).
type Leases = HashMap<Vec<u8>, (u64, Option<bool>)>;

#[derive(Default)]
pub(super) struct Lent(Mutex<Leases>);

impl Lent {
    fn map(&self) -> std::sync::MutexGuard<'_, Leases> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The probe of `token` went at `probe` (its lease taken, or another
    /// process's released probe's word).
    pub(super) fn taken(&self, probe: &[u8], token: u64) {
        self.map().insert(probe.to_vec(), (token, None));
    }

    /// The probe of `token` ended (`released`), its outcome queued.
    pub(super) fn ended(&self, probe: &[u8], token: u64, released: bool) {
        if let Some(entry) = self.map().get_mut(probe)
            && entry.0 == token
        {
            entry.1 = Some(released);
        }
    }

    /// The server took the probe's outcome.
    pub(super) fn given_back(&self, probe: &[u8], token: u64) {
        let mut map = self.map();
        if map.get(probe).is_some_and(|&(t, _)| t == token) {
            map.remove(probe);
        }
    }

    /// Gives back every lease still held, at once (the store is dropped):
    /// a blocking round trip each, at most `wait` to connect and each
    /// answer; the server down, they expire.
    pub(super) fn give_back_all(&self, client: &Client, script: &Script, wait: Duration) {
        let left: Vec<_> = self.map().drain().collect();
        if left.is_empty() {
            return;
        }
        let Ok(mut connection) = client.get_connection_with_timeout(wait) else {
            return;
        };
        let _ = connection.set_read_timeout(Some(wait));
        let _ = connection.set_write_timeout(Some(wait));
        for (probe, (token, released)) in left {
            let released = released.unwrap_or(false);
            let _ = script
                .key(probe)
                .arg(token.to_string())
                .arg(if released { "1" } else { "0" })
                .arg(millis(RELEASED_FOR))
                .invoke::<i64>(&mut connection);
        }
    }
}
