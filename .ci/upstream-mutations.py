#!/usr/bin/env python3
"""One-line mutations of the upstream, the fleet store and `reached`, each
with the test command that must fail on it (RELIABILITY.md, "Mutations of
the upstream, the fleet store and `reached`"). Applies each mutation in the
working tree, runs its command, restores the file; prints KILLED (the
command failed), SURVIVED or PATTERN (the code moved: update the mutation).
Needs `redis-server`. Usage, from the repository's root:
    .ci/upstream-mutations.py [ID ...]
A mutation whose tests hang (release-no-notify: tests/upstream.rs has no
per-test timeout) ends with the 900 s `timeout` and counts as KILLED.
"""
import os
import subprocess
import sys

LIB = "cargo test -p nika-retry --features redis --lib upstream"


def T(name, filt=""):
    return f"cargo test -p nika-retry-tests --features redis --test {name} -- {filt}"


M = [
    ('held-keeps-probe', 'nika-retry/src/upstream/wait.rs',
     '                    if passed_on {\n                        state.probe = false;\n                    }',
     '                    if passed_on {\n                    }',
     LIB),
    ('held-no-notify', 'nika-retry/src/upstream/wait.rs',
     '                        self.shared.released.notify_one();\n                    }\n                    self.after_hold(grown);',
     '                    }\n                    self.after_hold(grown);',
     LIB),
    ('lease-error-polls', 'nika-retry/src/upstream/wait.rs',
     '            _ => Lease::Go,\n        }',
     '            _ => Lease::Poll(now + PROBE_POLL),\n        }',
     T('fleet', 'redis_dies')),
    ('success-no-reset', 'nika-retry/src/upstream/wait.rs',
     '                None => state.succeeded(),',
     '                None => {}',
     T('upstream_provider', 'breaker')),
    ('counting-never', 'nika-retry/src/upstream/mod.rs',
     '.store(state.counting(), Ordering::Relaxed);',
     '.store(false, Ordering::Relaxed);',
     T('upstream_provider', 'breaker')),
    ('429-no-hint-no-hold', 'nika-retry/src/upstream/wait.rs',
     '(None, ErrorCategory::RateLimited) => backoff,',
     '(None, ErrorCategory::RateLimited) => None,',
     T('upstream', 'without_a_hint')),
    ('total-ignored', 'nika-retry/src/upstream/wait.rs',
     '(left > patience.cap || patience.deadline.is_some_and(|d| now + left > d))',
     '(left > patience.cap)',
     T('upstream', 'total')),
    ('spread-uncapped', 'nika-retry/src/upstream/state.rs',
     'self.spread = (self.length / 10).min(MAX_SPREAD);',
     'self.spread = self.length / 10;',
     LIB),
    ('spread-fifth', 'nika-retry/src/upstream/state.rs',
     'self.spread = (self.length / 10).min(MAX_SPREAD);',
     'self.spread = (self.length / 5).min(MAX_SPREAD);',
     LIB),
    ('connect-not-no', 'nika-retry/src/http/reqwest.rs',
     '        if self.is_connect() {\n            return Reached::No;\n        }\n        io_source',
     '        io_source',
     T('side_effects_http', 'connect_timeout')),
    ('levels-swapped', 'nika-retry/src/events/upstream.rs',
     '        if event.extended {\n            trace!(tracing::Level::DEBUG);',
     '        if !event.extended {\n            trace!(tracing::Level::DEBUG);',
     T('log_levels', 'hold')),
    ('ask-again-1s', 'nika-retry/src/upstream/redis/health.rs',
     'Duration::from_millis(500);',
     'Duration::from_millis(1000);',
     LIB),
    ('inprocess-no-release', 'nika-retry/src/upstream/store.rs',
     '                shared.lease = released.then_some((None, now + RELEASED_FOR));',
     '                let _ = (released, now);',
     LIB),
    ('redis-probed-noop', 'nika-retry/src/upstream/redis/scripts.rs',
     "    if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then return 0 end\\n\\",
     '    if true then return 0 end\\n\\',
     T('fleet', 'another_process')),
    ('half-open-off', 'nika-retry/src/upstream/state.rs',
     'if self.failures < failures && !(probe && self.half_open) {',
     'if self.failures < failures {',
     T('upstream_provider', 'half_open')),
    ('writes-not-resent', 'nika-retry/src/upstream/redis/mod.rs',
     'if !write.kept() {',
     'if true {',
     T('fleet', 'lent_late')),
    ('hold-script-shortens', 'nika-retry/src/upstream/redis/scripts.rs',
     'if hold_left(KEYS[1], tonumber(ARGV[3])) >= ms then return 0 end',
     'if false then return 0 end',
     T('fleet', 'extend')),
    ('attempt-script-no-probe-out', 'nika-retry/src/upstream/redis/scripts.rs',
     "  return v ~= 'released' and v ~= token and ttl > 0 and ttl <= lease\\n\",",
     "  return false\\n\",",
     T('fleet', 'another_process')),
    ('attempt-script-last-no-hold', 'nika-retry/src/upstream/redis/scripts.rs',
     "    redis.call('SET', hold, 'rate-limit-headers', 'PX', ttl)\\n\",",
     "    redis.call('PING')\\n\",",
     T('fleet', 'allowance')),
    ('redis-probe-out-ignored', 'nika-retry/src/upstream/redis/mod.rs',
     '            if left < 0 {\n                return Ok(Some((PROBE_OUT, HoldReason::ServerHint)));\n            }\n',
     '',
     T('fleet', 'another_process')),
    ('health-never-up', 'nika-retry/src/upstream/redis/health.rs',
     'if self.down.swap(false, Ordering::AcqRel) {',
     'if self.down.load(Ordering::Acquire) {',
     T('fleet', 'redis_')),
    ('probe-poll-1s', 'nika-retry/src/upstream/wait.rs',
     'const PROBE_POLL: Duration = Duration::from_millis(100);',
     'const PROBE_POLL: Duration = Duration::from_millis(1000);',
     LIB),
    ('inprocess-no-probe-out', 'nika-retry/src/upstream/store.rs',
     '                return Some((PROBE_OUT, HoldReason::ServerHint));',
     '                return None;',
     LIB),
    ('refused-maybe', 'nika-retry/src/vocab/reached.rs',
     'K::ConnectionRefused | K::HostUnreachable',
     'K::HostUnreachable',
     'cargo test -p nika-retry --lib vocab::reached'),
    ('rate-limited-maybe', 'nika-retry/src/vocab/reached.rs',
     '            ErrorCategory::RateLimited => Reached::Refused,',
     '            ErrorCategory::RateLimited => Reached::Maybe,',
     'cargo test -p nika-retry --lib vocab::reached'),
    ('none-left-no-hold', 'nika-retry/src/upstream/state.rs',
     '            return self.hold(now, reset, HoldReason::RateLimitHeaders);',
     '            return None;',
     T('upstream_provider', 'none_left')),
    ('release-no-notify', 'nika-retry/src/upstream/wait.rs',
     '            upstream.shared.released.notify_waiters();',
     '            let _ = upstream;',
     T('upstream', '')),
    ('drop-keeps-probe', 'nika-retry/src/upstream/wait.rs',
     '            self.upstream.locked(|state| state.probe = false);',
     '            let _ = &self.upstream;',
     T('upstream_provider', 'strands')),
    ('probe-ignores-patience', 'nika-retry/src/upstream/wait.rs',
     'if left > patience.cap || patience.deadline.is_some_and(|d| later > d) {',
     'if false {',
     LIB),
]


def main():
    only = sys.argv[1:]
    for mid, path, old, new, cmd in M:
        if only and mid not in only:
            continue
        with open(path) as f:
            src = f.read()
        if src.count(old) != 1:
            print(f"{mid}: PATTERN (found {src.count(old)} times)", flush=True)
            continue
        with open(path, "w") as f:
            f.write(src.replace(old, new))
        try:
            r = subprocess.run("timeout 900 " + cmd, shell=True, capture_output=True, text=True)
            verdict = "KILLED" if r.returncode != 0 else "SURVIVED"
            if "error[" in r.stderr:
                verdict = "BUILD-ERROR"
            print(f"{mid}: {verdict} :: {cmd}", flush=True)
        finally:
            with open(path, "w") as f:
                f.write(src)


if __name__ == "__main__":
    main()
