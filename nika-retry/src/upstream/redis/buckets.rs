//! The fleet's pacing buckets in Redis: one hash per upstream (`…:pace`),
//! per dimension (`r` the requests, `t` the tokens) its limit (`l`), its
//! window in microseconds (`w`), its level (`v`) and when the level was
//! counted (`a`, microseconds of the Redis server's clock, `TIME`: no
//! process's clock is ever compared with another's).
//!
//! A bucket of the limit refilling over its window, counted lazily (a
//! token bucket, the GCRA's equivalent): an attempt's [`ADMIT`] refills
//! each dimension to now, spends every dimension's cost if each holds it,
//! else says when the one that lacks most will hold it, spending nothing.
//! A response's reading ([`LEARN`]) shares the limit and window the
//! process paces with, and lowers the level to what the server says is
//! left (never raises it: the server counted that response's request, not
//! the attempts admitted since). Every process paces with the shared limit
//! and window once there is one (its own until then): a process that has
//! seen few responses guesses a window long (a rolling window's first
//! reading looks like a slow refill), and the shortest window read for a
//! limit is the fleet's (each reading bounds it from above, as in the
//! process's own reading of its responses); a new limit replaces it.
//!
//! A bucket refills continuously, as OpenAI documents its limits; a
//! server that counts by windows (rolling or fixed) frees nothing until
//! its window moves. A reading whose reset, less what it may be late by
//! (a second for whole seconds, the answer's time for an instant), is
//! more than 50 ms later than a refill of what is missing would take (a
//! refill's reset never is: what is left is counted down, the reset not)
//! marks the dimension as windowed (`win`, for good), and its longest reset (`rr`) as its
//! window (counted from when its request left: longer than a window read
//! from the responses, short by the answer's time): its attempts are then admitted by a log of the fleet's
//! admissions (`…:log:requests`, `…:log:tokens`, sorted sets of
//! `cost:seq` scored by the admission's microsecond), each counting for
//! the window and a margin for the time a request takes to reach the
//! server's count (a fortieth of the window, at most 40 ms, as the
//! process's own log keeps), where the bucket would let one go every refill. A log
//! of more than 10 000 admissions is not read (the bucket paces then). The
//! logs are kept from the first admission (the scouts' included), so that
//! a dimension read as windowed late still has its window's history.
//!
//! A field another program wrote (no number, negative, beyond the bounds)
//! reads as absent: a bucket with no level is whole, one with no limit
//! paces nothing.

use core::time::Duration;
use std::io;

use super::scripts::{Keys, lua};
use super::{Inner, millis};
use crate::events::upstream::HoldReason;
use crate::upstream::hold::MAX_HOLD;
use crate::upstream::store::{Admission, PROBE_LEASE, PROBE_OUT, Reading, Spend};

/// The largest limit or cost sent to the server: past it a Lua number
/// (a double) no longer counts units exactly. Larger values are cut to it.
pub(super) const MAX_UNITS: u64 = 1 << 50;

/// The helpers of both scripts. `valid(x, max)`: `x` if a number in
/// `(0, max]`, else 0. `level_at(hash, d, limit, window, now)`: dimension
/// `d`'s level at `now`, refilled since it was counted, at most `limit`;
/// a bucket with no level yet holds its limit less what attempts spent
/// while no limit was known (`p`, since `pf`), if they started within
/// its window: a fleet's cold start sends one scout per process before
/// any response says what is left, and a process's first burst after its
/// scout's answer would not count the others'.
macro_rules! pace_lua {
    ($body:literal) => {
        lua!(
            "local function valid(x, max)\n",
            "  if x == nil or x ~= x or x <= 0 or x > max then return 0 end\n",
            "  return x\n",
            "end\n",
            "local function level_at(hash, d, limit, window, now)\n",
            "  local v = tonumber(redis.call('HGET', hash, d .. 'v'))\n",
            "  local a = tonumber(redis.call('HGET', hash, d .. 'a'))\n",
            "  if v == nil or a == nil or v ~= v or a ~= a or v < 0 then\n",
            "    local p = valid(tonumber(redis.call('HGET', hash, d .. 'p')), math.huge)\n",
            "    local pf = tonumber(redis.call('HGET', hash, d .. 'pf'))\n",
            "    if p > 0 and pf ~= nil and pf == pf and pf <= now and now - pf < window then\n",
            "      return math.max(0, limit - p)\n",
            "    end\n",
            "    return limit\n",
            "  end\n",
            "  if a > now then a = now end\n",
            "  local level = v + (now - a) * limit / window\n",
            "  if level > limit then level = limit end\n",
            "  return level\n",
            "end\n",
            "local function clear_garbage(hash)\n",
            "  local t = redis.call('TYPE', hash)['ok']\n",
            "  if t ~= 'hash' and t ~= 'none' then redis.call('DEL', hash) end\n",
            "end\n",
            "local function now_us()\n",
            "  local t = redis.call('TIME')\n",
            "  return tonumber(t[1]) * 1000000 + tonumber(t[2])\n",
            "end\n",
            $body
        )
    };
}

/// KEYS: hold, allowance, probe, pace, the requests' log, the tokens'
/// log. ARGV: max ms, token, lease ms, then
/// per dimension (requests, tokens) its limit, window µs and cost (the
/// shared limit and window come first: these count while there are none),
/// and the largest limit. Returns `{code, value, reason}`: `{2, left ms,
/// reason}` held; `{3}` another token's probe is out; `{0}` go, no bucket
/// known (paced in the process); `{1}` go, every cost spent; `{4, µs}`
/// ready in that long, nothing spent. The allowance is taken as
/// `ATTEMPT` takes it, only by an attempt that goes.
pub(super) const ADMIT: &str = pace_lua!(
    "local function add_pending(hash, unpaced, now)\n\
       local added = false\n\
       for d, entry in pairs(unpaced) do\n\
         local cost = entry[1]\n\
         local seq = redis.call('HINCRBY', hash, 'seq', 1)\n\
         redis.call('ZADD', entry[2], now, string.format('%d:%d', cost, seq))\n\
         if redis.call('PTTL', entry[2]) < 60000 then redis.call('PEXPIRE', entry[2], 60000) end\n\
         local p = valid(tonumber(redis.call('HGET', hash, d .. 'p')), math.huge)\n\
         local pf = tonumber(redis.call('HGET', hash, d .. 'pf'))\n\
         if pf == nil or pf ~= pf or pf > now or now - pf > 60000000 then\n\
           p = 0\n\
           pf = now\n\
         end\n\
         redis.call('HSET', hash, d .. 'p', string.format('%.3f', p + cost), d .. 'pf', string.format('%d', pf))\n\
         added = true\n\
       end\n\
       if added and redis.call('PTTL', hash) < 60000 then redis.call('PEXPIRE', hash, 60000) end\n\
     end\n\
     local function log_span(window)\n\
       return window + math.min(math.floor(window / 40), 40000)\n\
     end\n\
     local function log_cost(member)\n\
       return tonumber(string.match(member, '^(%d+):')) or 0\n\
     end\n\
     local function log_wait(hash, log, d, limit, window, cost, now, maxw)\n\
       local t = redis.call('TYPE', log)['ok']\n\
       if t ~= 'zset' and t ~= 'none' then\n\
         redis.call('DEL', log)\n\
         t = 'none'\n\
       end\n\
       local longest = valid(tonumber(redis.call('HGET', hash, d .. 'rr')), maxw)\n\
       if longest > 0 then window = longest end\n\
       local span = log_span(window)\n\
       if t == 'zset' then\n\
         redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', now - span))\n\
       end\n\
       if redis.call('HGET', hash, d .. 'win') ~= '1' then return 0, false end\n\
       if t == 'none' then return 0, true end\n\
       if redis.call('ZCARD', log) > 10000 then return 0, false end\n\
       local entries = redis.call('ZRANGE', log, 0, -1, 'WITHSCORES')\n\
       local used = 0\n\
       for k = 1, #entries, 2 do used = used + log_cost(entries[k]) end\n\
       local excess = used + cost - limit\n\
       if excess <= 0 then return 0, true end\n\
       for k = 1, #entries, 2 do\n\
         excess = excess - log_cost(entries[k])\n\
         if excess <= 0 then\n\
           local at = tonumber(entries[k + 1]) or now\n\
           return math.max(1, at + span - now), true\n\
         end\n\
       end\n\
       return span, true\n\
     end\n\
     local max = tonumber(ARGV[1])\n\
     local left = hold_left(KEYS[1], max)\n\
     if left > 0 then return {2, left, redis.call('GET', KEYS[1])} end\n\
     if probe_out(KEYS[3], ARGV[2], tonumber(ARGV[3])) then return {3, 0, ''} end\n\
     local pace = KEYS[4]\n\
     clear_garbage(pace)\n\
     local now = now_us()\n\
     local maxw = max * 1000\n\
     local units = tonumber(ARGV[10])\n\
     local known = false\n\
     local wait = 0\n\
     local longest = 0\n\
     local spent = {}\n\
     local unpaced = {}\n\
     local logs = {}
     for i, d in ipairs({'r', 't'}) do\n\
       local b = 1 + 3 * i\n\
       local limit = valid(tonumber(redis.call('HGET', pace, d .. 'l')), units)\n\
       local window = valid(tonumber(redis.call('HGET', pace, d .. 'w')), maxw)\n\
       local cost = valid(tonumber(ARGV[b + 2]), units)\n\
       if limit == 0 or window == 0 then\n\
         limit = valid(tonumber(ARGV[b]), units)\n\
         window = valid(tonumber(ARGV[b + 1]), maxw)\n\
       end\n\
       if limit > 0 and window > 0 and cost > 0 then\n\
         known = true\n\
         if cost > limit then cost = limit end\n\
         local level = level_at(pace, d, limit, window, now)\n\
         local logged, windowed = log_wait(pace, KEYS[4 + i], d, limit, window, cost, now, maxw)\n\
         if logged > wait then wait = logged end\n\
         if level < cost and not windowed then\n\
           local need = math.ceil((cost - level) * window / limit)\n\
           if need > wait then wait = need end\n\
         end\n\
         logs[i] = {cost, window}\n\
         spent[d] = math.max(0, level - cost)\n\
         if window > longest then longest = window end\n\
       elseif cost > 0 then\n\
         unpaced[d] = {cost, KEYS[4 + i]}\n\
       end\n\
     end\n\
     if not known then\n\
       take_allowance(KEYS[1], KEYS[2], max)\n\
       add_pending(pace, unpaced, now)\n\
       return {0, 0, ''}\n\
     end\n\
     if wait > 0 then return {4, math.max(1, math.min(wait, maxw)), ''} end\n\
     take_allowance(KEYS[1], KEYS[2], max)\n\
     for i, entry in pairs(logs) do\n\
       local seq = redis.call('HINCRBY', pace, 'seq', 1)\n\
       redis.call('ZADD', KEYS[4 + i], now, string.format('%d:%d', entry[1], seq))\n\
       redis.call('PEXPIRE', KEYS[4 + i], math.floor(log_span(entry[2]) / 1000) + 1000)\n\
     end\n\
     for d, level in pairs(spent) do
       redis.call('HSET', pace, d .. 'v', string.format('%.3f', level), d .. 'a', string.format('%d', now))\n\
     end\n\
     redis.call('PEXPIRE', pace, math.floor(longest / 1000) + 1000)\n\
     add_pending(pace, unpaced, now)\n\
     return {1, 0, ''}\n"
);

/// KEYS: pace. ARGV: max ms, the largest limit, then per dimension its
/// limit, window µs, what is left, its reset in µs (-1: not said) and how
/// much the server may have rounded the reset up, in µs. Shares each limit
/// given (with the shortest window read for it), lowers its level to what
/// is left, and marks it windowed if its reset, less the rounding, says so.
pub(super) const LEARN: &str = pace_lua!(
    "local pace = KEYS[1]\n\
     clear_garbage(pace)\n\
     local now = now_us()\n\
     local maxw = tonumber(ARGV[1]) * 1000\n\
     local units = tonumber(ARGV[2])\n\
     local longest = 0\n\
     for i, d in ipairs({'r', 't'}) do\n\
       local b = 5 * i - 2\n\
       local limit = valid(tonumber(ARGV[b]), units)\n\
       local window = valid(tonumber(ARGV[b + 1]), maxw)\n\
       local remaining = tonumber(ARGV[b + 2]) or -1\n\
       local reset = tonumber(ARGV[b + 3]) or -1\n\
       local rounding = valid(tonumber(ARGV[b + 4]), maxw)
       if limit > 0 and window > 0 then\n\
         local shared = valid(tonumber(redis.call('HGET', pace, d .. 'w')), maxw)\n\
         local same = valid(tonumber(redis.call('HGET', pace, d .. 'l')), units) == limit\n\
         if same and shared > 0 and shared < window then window = shared end\n\
         local level = level_at(pace, d, limit, window, now)\n\
         if remaining == remaining and remaining >= 0 and remaining < level then level = remaining end\n\
         if remaining == remaining and remaining >= 0 and remaining < limit and reset == reset and reset > 0 then\n\
           local refill = (limit - remaining) * window / limit\n\
           if reset - rounding > refill + 50000 then redis.call('HSET', pace, d .. 'win', '1') end\n\
         end\n\
         if reset == reset and reset > 0 and reset <= maxw then\n\
           local longest = valid(tonumber(redis.call('HGET', pace, d .. 'rr')), maxw)\n\
           if reset > longest then redis.call('HSET', pace, d .. 'rr', string.format('%d', reset)) end\n\
         end\n\
         redis.call('HSET', pace, d .. 'l', string.format('%d', limit), d .. 'w', string.format('%d', window),\n\
           d .. 'v', string.format('%.3f', level), d .. 'a', string.format('%d', now))\n\
         if window > longest then longest = window end\n\
       end\n\
     end\n\
     if longest > 0 then redis.call('PEXPIRE', pace, math.floor(longest / 1000) + 1000) end\n\
     return 1\n"
);

impl Inner {
    /// [`Store::admit`](crate::upstream::Store::admit): one [`ADMIT`].
    pub(super) async fn admit(
        &self,
        upstream: &str,
        token: u64,
        spend: [Spend; 2],
    ) -> io::Result<Admission> {
        let keys = Keys::of(upstream);
        let mut connection = self.connection.clone();
        let mut script = self.scripts.admit.key(keys.hold);
        let request = script
            .key(keys.allowance)
            .key(keys.probe)
            .key(keys.pace)
            .key(&keys.logs[..])
            .arg(millis(MAX_HOLD))
            .arg(token.to_string())
            .arg(millis(PROBE_LEASE))
            .arg(&spend_args(&spend[0])[..])
            .arg(&spend_args(&spend[1])[..])
            .arg(MAX_UNITS)
            .invoke_async::<(i64, i64, Vec<u8>)>(&mut connection);
        Ok(match Admitted::of(self.call(request).await?) {
            Admitted::Held(left, reason) => match Inner::held(left, &reason) {
                Some((left, reason)) => Admission::Held(left, reason),
                None => Admission::Local,
            },
            Admitted::ProbeOut => Admission::Held(PROBE_OUT, HoldReason::ServerHint),
            Admitted::Local => Admission::Local,
            Admitted::Go => Admission::Go,
            Admitted::Ready(after) => Admission::Ready(after),
        })
    }

    /// A response's readings ([`Store::learned`](crate::upstream::Store::learned)),
    /// sent by the writer: one [`LEARN`].
    pub(super) async fn learn(
        &self,
        keys: Keys,
        [requests, tokens]: [Reading; 2],
    ) -> io::Result<()> {
        let mut connection = self.connection.clone();
        let mut script = self.scripts.learn.key(keys.pace);
        let request = script
            .arg(millis(MAX_HOLD))
            .arg(MAX_UNITS)
            .arg(&reading_args(&requests)[..])
            .arg(&reading_args(&tokens)[..])
            .invoke_async::<i64>(&mut connection);
        self.call(request).await.map(drop)
    }
}

/// What [`ADMIT`] said, as `{code, value, reason}`.
enum Admitted {
    Held(i64, Vec<u8>),
    ProbeOut,
    Local,
    Go,
    Ready(Duration),
}

impl Admitted {
    fn of((code, value, reason): (i64, i64, Vec<u8>)) -> Admitted {
        match code {
            1 => Admitted::Go,
            2 => Admitted::Held(value, reason),
            3 => Admitted::ProbeOut,
            4 => {
                let micros = u64::try_from(value).unwrap_or(1).max(1);
                Admitted::Ready(Duration::from_micros(micros).min(MAX_HOLD))
            }
            _ => Admitted::Local,
        }
    }
}

/// A limit, cost or remaining as the scripts take it: cut to [`MAX_UNITS`].
pub(super) fn units(n: u64) -> u64 {
    n.min(MAX_UNITS)
}

/// A window in whole microseconds, at most [`MAX_HOLD`].
pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.min(MAX_HOLD).as_micros()).unwrap_or(u64::MAX)
}

/// The arguments of one dimension of [`ADMIT`].
pub(super) fn spend_args(spend: &Spend) -> [u64; 3] {
    [units(spend.limit), micros(spend.window), units(spend.cost)]
}

/// The arguments of one dimension of [`LEARN`] (what is left and its
/// reset: -1 if not said; the reset's rounding).
pub(super) fn reading_args(reading: &Reading) -> [i64; 5] {
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    [
        signed(units(reading.limit)),
        signed(micros(reading.window)),
        reading.remaining.map_or(-1, |r| signed(units(r))),
        reading.reset.map_or(-1, |r| signed(micros(r))),
        signed(micros(reading.rounding)),
    ]
}
