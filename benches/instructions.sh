#!/usr/bin/env bash
# Instructions per call of the contenders of benches/retry_paths.rs (or per
# iteration of benches/stream_items.rs), counted by cachegrind: a count,
# not a time, so that neither the other processes on the
# machine nor the timer's wall-clock jitter move it. Each contender runs
# twice under cachegrind (BENCH_RUN=group/name:calls, then :0); the
# difference over `calls` is its instructions per call, the runtime's
# set-up cancelling out.
#
#   bash benches/instructions.sh [binary] [contender ...]
#   BENCH=stream_items bash benches/instructions.sh '' stream_items/raw
#
# binary: a built bench (default: build $BENCH, then the newest one);
# contenders: group/name (default: the success and failure ones compared in
# BENCHMARKS.md). Needs valgrind. Environment: BENCH (retry_paths or
# stream_items), CALLS (calls per run, default 20000; the failure path and
# stream_items, whose iteration is 1000 items, and the pending path run a
# tenth as many).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CALLS=${CALLS:-20000}
BENCH=${BENCH:-retry_paths}
BIN=${1:-}
if [[ -z $BIN ]]; then
    # Without feature `opentelemetry`, as benches/report.sh builds them.
    cargo bench --manifest-path "$REPO/Cargo.toml" --no-default-features --bench "$BENCH" --no-run >/dev/null 2>&1
    BIN=$(ls -t "${CARGO_TARGET_DIR:-$REPO/target}"/release/deps/"$BENCH"-* | grep -v '\.d$' | head -1)
fi
shift || true
CONTENDERS=("$@")
if [[ ${#CONTENDERS[@]} -eq 0 ]]; then
    CONTENDERS=(success/minimal success/hand_loop success/retry success/retry_timeout
        success/minimal_timeout success/nest success/minimal_nest
        failure/minimal failure/hand_loop failure/retry failure/retry_timeout)
fi

# The instructions cachegrind counted in a run of `$BIN` with BENCH_RUN=$1.
count() {
    local out
    out=$(mktemp)
    BENCH_RUN=$1 valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file=/dev/null "$BIN" 2>"$out" >/dev/null
    grep -E "I\s+refs:" "$out" | tr -d ',' | awk '{print $NF}'
    rm -f "$out"
}

printf '| contender | instructions per call |\n|---|---:|\n'
for c in "${CONTENDERS[@]}"; do
    n=$CALLS
    [[ $c == failure/* || $c == pending/* || $c == stream_items/* ]] && n=$((CALLS / 10))
    with=$(count "$c:$n")
    without=$(count "$c:0")
    awk -v c="$c" -v a="$with" -v b="$without" -v n="$n" \
        'BEGIN { printf "| %s | %.1f |\n", c, (a - b) / n }'
done
