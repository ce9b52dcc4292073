#!/usr/bin/env bash
# One command for the benchmark: builds the release binaries (unavez, the
# bench crate, and the river peer in its own Cargo project) and runs the
# bench. Extra arguments go to unavez-bench (e.g. --quick, --only raw,reserve).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release -p unavez -p unavez-bench
(cd benches/river && cargo build --release)
exec "$root/target/release/unavez-bench" \
    --unavez-bin "$root/target/release/unavez" \
    --river-bin "$root/benches/river/target/release/unavez-river-peer" "$@"
