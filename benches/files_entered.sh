#!/usr/bin/env bash
# The runtime's source files that one failed attempt enters, and how many
# times each: `#[retry]` alone (`retry`), and a request through `tower`'s
# `RetryLayer` that its service answers 503 (`tower`). From the failed
# attempt's poll to the start of its next one; no observer, no subscriber,
# no upstream, no task scope.
#
# Counted, not read: the probe (benches/support/files_entered.rs) is built
# as a crate of its own without inlining (rustc's `-Zinline-mir=no
# -Zinline-llvm=no`, on stable through RUSTC_BOOTSTRAP), so that every fn
# keeps its frame and its file, and runs under callgrind twice a path, every
# attempt failing, with 3 and then 2 attempts a call: the difference of the
# two call graphs is one failed attempt that is retried. An entry is a call
# into a file's fn from another file's or from the generated code
# (benches/support/files_entered.py says which calls are not).
#
#   bash benches/files_entered.sh [-v] [retry|tower ...]    # -v: each file's fns
#
# Needs valgrind and python3. Builds in ${CARGO_TARGET_DIR:-target}/files-entered,
# apart from the usual artifacts, since its flags differ; CALLS (default
# 200) calls a run.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CALLS=${CALLS:-200}
VERBOSE=()
if [[ ${1:-} == -v ]]; then
    VERBOSE=(-v)
    shift
fi
PATHS=("$@")
[[ ${#PATHS[@]} -eq 0 ]] && PATHS=(retry tower)

PROBE=$(mktemp -d)
trap 'rm -rf "$PROBE"' EXIT
mkdir "$PROBE/src"
cp "$REPO/benches/support/files_entered.rs" "$PROBE/src/main.rs"
# The workspace's lock: the same versions as the runtime's own builds.
cp "$REPO/Cargo.lock" "$PROBE/"
cat >"$PROBE/Cargo.toml" <<TOML
[package]
name = "files-entered"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
nika-retry = { path = "$REPO/nika-retry", features = ["tower"] }
tokio = { version = "1", features = ["rt", "macros", "time", "test-util"] }
http = "1"
tower-service = "0.3"
tower-layer = "0.3"
thiserror = "2"
TOML

TARGET=${CARGO_TARGET_DIR:-$REPO/target}/files-entered
RUSTC_BOOTSTRAP=1 RUSTFLAGS="-Zinline-mir=no -Zinline-llvm=no -Cdebuginfo=1" \
    cargo build --quiet --manifest-path "$PROBE/Cargo.toml" --target-dir "$TARGET"
BIN=$TARGET/debug/files-entered

for path in "${PATHS[@]}"; do
    for max in 3 2; do
        valgrind --tool=callgrind --callgrind-out-file="$PROBE/$path.$max" \
            "$BIN" "$path" "$max" "$CALLS" >/dev/null 2>&1
    done
    echo "== $path: entries per failed attempt, by file"
    python3 "$REPO/benches/support/files_entered.py" \
        "$PROBE/$path.3" "$PROBE/$path.2" "$CALLS" "$PROBE" "${VERBOSE[@]}"
done
