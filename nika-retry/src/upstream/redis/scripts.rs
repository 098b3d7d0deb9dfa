//! The keys of an upstream in Redis and the scripts that read and change
//! them, each one round trip, atomic on the server.
//!
//! Every script reads what another program may have written: a key of the
//! wrong type, a value that is no number, a hold without expiry or longer
//! than [`MAX_HOLD`](crate::upstream::MAX_HOLD) is deleted (garbage), never
//! taken as a hold.

use crate::events::upstream::HoldReason;

/// The prefix of every key: `nika-retry:upstream:{name}:hold` and so on.
pub(super) const PREFIX: &[u8] = b"nika-retry:upstream:{";

/// The longest upstream name used in a key as given; a longer one is cut
/// there and followed by a hash of all of it, so that two names still get
/// two keys.
pub(super) const MAX_NAME: usize = 200;

/// An upstream's keys.
#[derive(Clone)]
pub(super) struct Keys {
    pub(super) hold: Vec<u8>,
    pub(super) allowance: Vec<u8>,
    pub(super) probe: Vec<u8>,
    /// The pacing buckets, a hash (`buckets.rs`).
    pub(super) pace: Vec<u8>,
    /// Per dimension (requests, tokens) the admissions of the last window,
    /// a sorted set (`buckets.rs`).
    pub(super) logs: [Vec<u8>; 2],
}

impl Keys {
    pub(super) fn of(name: &str) -> Keys {
        let mut base = PREFIX.to_vec();
        let bytes = name.as_bytes();
        if bytes.len() <= MAX_NAME {
            base.extend_from_slice(bytes);
        } else {
            base.extend_from_slice(&bytes[..MAX_NAME]);
            base.extend_from_slice(format!("#{:016x}", fnv1a(bytes)).as_bytes());
        }
        base.extend_from_slice(b"}:");
        let key = |part: &[u8]| [&base[..], part].concat();
        Keys {
            hold: key(b"hold"),
            allowance: key(b"allowance"),
            probe: key(b"probe"),
            pace: key(b"pace"),
            logs: [key(b"log:requests"), key(b"log:tokens")],
        }
    }
}

/// A hash that every process computes alike (std's may change between
/// Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A hold's value: why it was set.
pub(super) fn reason_text(reason: HoldReason) -> &'static str {
    match reason {
        HoldReason::ServerHint => "server-hint",
        HoldReason::RateLimitHeaders => "rate-limit-headers",
        HoldReason::Breaker => "breaker",
        HoldReason::ByHand => "by-hand",
    }
}

/// A hold's value read back; one no process of ours wrote is a server hint.
pub(super) fn reason_of(text: &[u8]) -> HoldReason {
    match text {
        b"rate-limit-headers" => HoldReason::RateLimitHeaders,
        b"breaker" => HoldReason::Breaker,
        b"by-hand" => HoldReason::ByHand,
        _ => HoldReason::ServerHint,
    }
}

/// `hold_left(key, max)`: what is left of the hold at `key` in ms (0 if
/// none), garbage deleted. `probe_out(probe, token, lease)`: whether
/// another token's probe is out (its lease not expired). `take_allowance(
/// hold, allowance, max)`: one taken from the allowance, the last one
/// holding until its reset; garbage deleted.
macro_rules! lua {
    ($($body:literal),+) => {
        concat!(
            "local function hold_left(key, max)\n",
            "  local t = redis.call('TYPE', key)['ok']\n",
            "  if t == 'none' then return 0 end\n",
            "  if t ~= 'string' then redis.call('DEL', key) return 0 end\n",
            "  local left = redis.call('PTTL', key)\n",
            "  if left == -1 or left > max then redis.call('DEL', key) return 0 end\n",
            "  if left < 0 then return 0 end\n",
            "  return left\n",
            "end\n",
            "local function probe_out(probe, token, lease)\n",
            "  if redis.call('TYPE', probe)['ok'] ~= 'string' then return false end\n",
            "  local v = redis.call('GET', probe)\n",
            "  local ttl = redis.call('PTTL', probe)\n",
            "  return v ~= 'released' and v ~= token and ttl > 0 and ttl <= lease\n",
            "end\n",
            "local function take_allowance(hold, allowance, max)\n",
            "  local t = redis.call('TYPE', allowance)['ok']\n",
            "  if t == 'none' then return end\n",
            "  local n = nil\n",
            "  local ttl = -1\n",
            "  if t == 'string' then\n",
            "    n = tonumber(redis.call('GET', allowance))\n",
            "    ttl = redis.call('PTTL', allowance)\n",
            "  end\n",
            "  if n == nil or n ~= math.floor(n) or n < 1 or ttl <= 0 or ttl > max then\n",
            "    redis.call('DEL', allowance)\n",
            "    return\n",
            "  end\n",
            "  if n <= 1 then\n",
            "    redis.call('DEL', allowance)\n",
            "    redis.call('SET', hold, 'rate-limit-headers', 'PX', ttl)\n",
            "  else\n",
            "    redis.call('SET', allowance, string.format('%d', n - 1), 'KEEPTTL')\n",
            "  end\n",
            "end\n",
            $($body),+
        )
    };
}

pub(super) use lua;

/// KEYS: hold. ARGV: max ms. Returns `{left ms, reason}`.
pub(super) const HELD_FOR: &str = lua!(
    "local left = hold_left(KEYS[1], tonumber(ARGV[1]))\n\
     if left > 0 then return {left, redis.call('GET', KEYS[1])} end\n\
     return {0, ''}\n"
);

/// KEYS: hold, probe. ARGV: ms, reason, max ms. Extends the hold, never
/// shortens it; a released probe's word no longer stands.
pub(super) const HOLD: &str = lua!(
    "local ms = tonumber(ARGV[1])\n\
     if hold_left(KEYS[1], tonumber(ARGV[3])) >= ms then return 0 end\n\
     redis.call('SET', KEYS[1], ARGV[2], 'PX', ms)\n\
     if redis.call('TYPE', KEYS[2])['ok'] == 'string' and redis.call('GET', KEYS[2]) == 'released' then\n\
       redis.call('DEL', KEYS[2])\n\
     end\n\
     return 1\n"
);

/// KEYS: hold, allowance, probe. ARGV: max ms, token, lease ms. An attempt
/// about to start: the hold, if any (`{left ms, reason}`); another token's
/// probe out (`{-1, ''}`); else one taken from the allowance, the last one
/// holding until its reset (`{0, ''}`: go).
pub(super) const ATTEMPT: &str = lua!(
    "local max = tonumber(ARGV[1])\n\
     local left = hold_left(KEYS[1], max)\n\
     if left > 0 then return {left, redis.call('GET', KEYS[1])} end\n\
     if probe_out(KEYS[3], ARGV[2], tonumber(ARGV[3])) then return {-1, ''} end\n\
     take_allowance(KEYS[1], KEYS[2], max)\n\
     return {0, ''}\n"
);

/// KEYS: hold, probe. ARGV: token, lease ms, max ms. `{0}` go (the lease
/// taken, or a released probe's word), `{1, 0, ''}` another's probe is out,
/// `{2, left ms, reason}` held.
pub(super) const PROBE: &str = lua!(
    "local left = hold_left(KEYS[1], tonumber(ARGV[3]))\n\
     if left > 0 then return {2, left, redis.call('GET', KEYS[1])} end\n\
     if redis.call('TYPE', KEYS[2])['ok'] == 'string' then\n\
       local v = redis.call('GET', KEYS[2])\n\
       local ttl = redis.call('PTTL', KEYS[2])\n\
       if ttl > 0 and ttl <= tonumber(ARGV[2]) then\n\
         if v == 'released' then return {0, 0, ''} end\n\
         if v ~= ARGV[1] then return {1, 0, ''} end\n\
       end\n\
     end\n\
     redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])\n\
     return {0, 0, ''}\n"
);

/// KEYS: probe. ARGV: token, released (`1`/`0`), released ms. Gives back
/// the lease of `token` (only its own): released, it tells the other
/// processes' probes to go; else the next takes the turn.
pub(super) const PROBED: &str = "\
    if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then return 0 end\n\
    if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n\
    if ARGV[2] == '1' then\n\
      redis.call('SET', KEYS[1], 'released', 'PX', ARGV[3])\n\
    else\n\
      redis.call('DEL', KEYS[1])\n\
    end\n\
    return 1\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_name_as_given_and_long_names_stay_apart() {
        let keys = Keys::of("openai/gpt-4o");
        assert_eq!(keys.hold, b"nika-retry:upstream:{openai/gpt-4o}:hold");
        assert_eq!(keys.probe, b"nika-retry:upstream:{openai/gpt-4o}:probe");
        let long_a = "a".repeat(300);
        let long_b = format!("{}b", "a".repeat(299));
        let (a, b) = (Keys::of(&long_a), Keys::of(&long_b));
        assert_ne!(a.hold, b.hold);
        assert!(a.hold.len() < PREFIX.len() + MAX_NAME + 30, "bounded");
    }

    #[test]
    fn reasons_round_trip_and_garbage_is_a_server_hint() {
        for reason in [
            HoldReason::ServerHint,
            HoldReason::RateLimitHeaders,
            HoldReason::Breaker,
            HoldReason::ByHand,
        ] {
            assert_eq!(reason_of(reason_text(reason).as_bytes()), reason);
        }
        assert_eq!(reason_of(b"\xff\x00garbage"), HoldReason::ServerHint);
    }
}
