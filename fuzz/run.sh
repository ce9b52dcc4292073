#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), starting from the
# committed seeds (fuzz/seeds/TARGET) and keeping what libFuzzer finds in
# fuzz/corpus/TARGET (not committed). A crash stops the run with its
# input in fuzz/artifacts/TARGET; replay it with
#   cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-…
#
# Usage: fuzz/run.sh [SECONDS] [TARGET…]
#
# cargo-fuzz needs a nightly compiler (sanitizer and coverage flags). With
# a nightly toolchain installed it runs `cargo +nightly fuzz`; without
# one it falls back to the stable compiler with RUSTC_BOOTSTRAP=1 and no
# sanitizer (libFuzzer's coverage still works; memory errors are not
# caught, which matters little for code that forbids `unsafe`).
set -euo pipefail

secs="${1:-60}"
shift || true
cd "$(dirname "$0")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz…" >&2
    cargo install cargo-fuzz --locked
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
    sanitizer=()
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
    sanitizer=(--sanitizer none)
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    mapfile -t targets < <("${fuzz[@]}" list)
fi

for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "== $t: ${secs} s" >&2
    "${fuzz[@]}" run "${sanitizer[@]}" "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -print_final_stats=1
done
echo "all ${#targets[@]} target(s) ran ${secs} s without a crash" >&2
