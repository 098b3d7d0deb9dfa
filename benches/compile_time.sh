#!/usr/bin/env bash
# Compile-time cost of the macros (results in BENCHMARKS.md).
#
# Generates two throwaway crates that depend on nika-retry by path:
#   annotated/   N async fns with #[retry(layer = "provider")]
#   handwritten/ the same N fns, each written as a retry loop with tokio
# builds each once to warm the dependency cache, then times R rebuilds of
# each (touch src/lib.rs; cargo build, then the same with cargo check) and
# prints the times and the ratios. Incremental compilation is off
# (CARGO_INCREMENTAL=0): with it, a touched but unchanged file rebuilds in
# 0.1 s and the timing says nothing.
#
#   CARGO_TARGET_DIR=/work/target-bench bash benches/compile_time.sh
#
# Environment: N (fns per crate, default 500), RUNS (timed builds per crate,
# default 3), PROFILE (cargo profile, default dev). The crates and their
# target dir live under $CARGO_TARGET_DIR/compile-time (or /tmp/nika-compile-time);
# no network is needed beyond crates.io (and none when the cargo cache has
# the crates of the workspace's Cargo.lock, which is copied in).
set -euo pipefail

N=${N:-500}
RUNS=${RUNS:-3}
PROFILE=${PROFILE:-dev}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${CARGO_TARGET_DIR:-} ]]; then
    ROOT=$CARGO_TARGET_DIR/compile-time
else
    ROOT=/tmp/nika-compile-time
fi
# One target dir for both crates: the dependencies are built once.
export CARGO_TARGET_DIR=$ROOT/target
export CARGO_INCREMENTAL=0
mkdir -p "$ROOT"

manifest() { # name
    cat <<EOF
[package]
name = "$1"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
nika-retry = { path = "$REPO/nika-retry" }
tokio = { version = "1", features = ["time"] }

[workspace]
EOF
}

prelude() { # kind
    echo '#![allow(missing_docs, clippy::all)]'
    echo 'use nika_retry::Classify;'
    if [[ $1 == annotated ]]; then
        echo 'use nika_retry::retry;'
    else
        echo 'use core::time::Duration;'
    fi
    cat <<'EOF'

#[derive(Debug, Classify)]
pub enum Error {
    #[category(transient)]
    Busy,
    #[category(permanent)]
    Bad,
}

async fn attempt(n: u32) -> Result<u32, Error> {
    match n {
        0 => Err(Error::Busy),
        1 => Err(Error::Bad),
        n => Ok(n),
    }
}
EOF
}

# `all` awaits every fn, so that every fn's future is codegen'd in both crates.
all_fn() {
    echo 'pub async fn all(n: u32) -> u32 {'
    echo '    let mut sum = 0u32;'
    for ((i = 0; i < N; i++)); do
        echo "    sum = sum.wrapping_add(f$i(n).await.unwrap_or(0));"
    done
    echo '    sum'
    echo '}'
}

generate() { # dir name kind
    local dir=$ROOT/$1
    mkdir -p "$dir/src"
    manifest "$2" >"$dir/Cargo.toml"
    cp "$REPO/Cargo.lock" "$dir/Cargo.lock"
    {
        prelude "$3"
        for ((i = 0; i < N; i++)); do
            if [[ $3 == annotated ]]; then
                cat <<EOF

#[retry(layer = "provider")]
pub async fn f$i(n: u32) -> Result<u32, Error> {
    attempt(n.wrapping_add($i)).await
}
EOF
            else
                cat <<EOF

pub async fn f$i(n: u32) -> Result<u32, Error> {
    let mut attempt_no = 1u32;
    loop {
        match attempt(n.wrapping_add($i)).await {
            Err(e) if attempt_no < 3 && e.category().is_retryable() => {
                tokio::time::sleep(Duration::from_secs(1) * 4u32.pow(attempt_no - 1)).await;
                attempt_no += 1;
            }
            result => return result,
        }
    }
}
EOF
            fi
        done
        echo
        all_fn
    } >"$dir/src/lib.rs"
}

build() { # command dir -> prints seconds
    local dir=$ROOT/$2 start end
    touch "$dir/src/lib.rs"
    start=$(date +%s.%N)
    timeout 600 cargo "$1" --quiet --profile "$PROFILE" --manifest-path "$dir/Cargo.toml"
    end=$(date +%s.%N)
    awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }'
}

median() { # numbers...
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { m = int((NR + 1) / 2); if (NR % 2) print v[m]; else printf "%.2f\n", (v[m] + v[m + 1]) / 2 }'
}

generate annotated nika_ct_annotated annotated
generate handwritten nika_ct_handwritten handwritten

echo "compile_time: $N fns per crate, profile $PROFILE, $RUNS timed builds each, in $ROOT"
echo "warming the dependency cache..."
for crate in annotated handwritten; do
    timeout 600 cargo build --quiet --profile "$PROFILE" --manifest-path "$ROOT/$crate/Cargo.toml"
    timeout 600 cargo check --quiet --profile "$PROFILE" --manifest-path "$ROOT/$crate/Cargo.toml"
done

RATIOS=()
TABLE=()
for command in build check; do
    annotated=()
    handwritten=()
    for ((r = 1; r <= RUNS; r++)); do
        # Alternate, so that drift of the machine affects both alike.
        annotated+=("$(build "$command" annotated)")
        handwritten+=("$(build "$command" handwritten)")
        echo "cargo $command, run $r: annotated ${annotated[-1]} s, hand-written ${handwritten[-1]} s"
    done
    a=$(median "${annotated[@]}")
    h=$(median "${handwritten[@]}")
    ratio=$(awk -v a="$a" -v h="$h" 'BEGIN { printf "%.2f", a / h }')
    TABLE+=("| cargo $command | ${annotated[*]} | $a | ${handwritten[*]} | $h | ${ratio}x |")
    RATIOS+=("$ratio")
done

echo
echo "| $N fns, --profile $PROFILE | #[retry] runs (s) | median | hand-written runs (s) | median | ratio |"
echo "|---|---|---:|---|---:|---:|"
printf '%s\n' "${TABLE[@]}"
awk -v r="${RATIOS[0]}" 'BEGIN { printf "\ncargo build ratio %.2fx: target <= 1.5x %s\n", r, (r <= 1.5 ? "met" : "MISSED") }'
