#!/usr/bin/env bash
# Benchmarks: builds condense and the benchmark tool (bench/, package condense-bench), runs
# every measure, prints a table and writes BENCHMARKS.md. BENCH_QUICK=1 scales sizes down;
# `scripts/bench.sh encode api` runs only the measures named (without writing BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
cargo build --release --quiet --bin condense
cargo build --release --quiet -p condense-bench
target=${CARGO_TARGET_DIR:-target}
# A private copy of the binary: a build elsewhere that replaces target/release/condense
# during the run must not change what is measured (or break the transcoder children,
# which the service starts from its own executable).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$target/release/condense" "$work/condense"
CONDENSE_BIN="$work/condense" cargo run --release --quiet -p condense-bench -- "$@"
echo "make bench took $(( $(date +%s) - started )) s"
