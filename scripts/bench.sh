#!/usr/bin/env bash
# Benchmarks: builds condense and the benchmark tool (bench/, package condense-bench), runs
# every measure, prints a table and writes BENCHMARKS.md. BENCH_QUICK=1 scales sizes down;
# `scripts/bench.sh encode api` runs only the measures named (without writing BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
# The quality measure compares condense's CRF search with ab-av1's (from crates.io), which
# needs an ffmpeg with libvmaf: PyPI's imageio-ffmpeg ships one (Debian's has none). Both
# go under target/tools/, for the benchmarks alone.
tools=${CARGO_TARGET_DIR:-target}/tools
if [ ! -x "$tools/ab-av1/bin/ab-av1" ]; then
  echo "bench: installing ab-av1 0.11.7 from crates.io into $tools/ab-av1"
  cargo install --quiet --locked --root "$tools/ab-av1" ab-av1@0.11.7
fi
if ! compgen -G "$tools/imageio-ffmpeg/imageio_ffmpeg/binaries/ffmpeg-linux-*" >/dev/null; then
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$tools/imageio-ffmpeg" imageio-ffmpeg==0.8.1
fi
cargo build --release --quiet --bin condense --bin condense-media
cargo build --release --quiet -p condense-bench
target=${CARGO_TARGET_DIR:-target}
# A private copy of the binaries: a build elsewhere that replaces target/release/condense
# during the run must not change what is measured (or break the transcoder children,
# which the service starts from its own executable).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$target/release/condense" "$target/release/condense-media" "$work/"
CONDENSE_BIN="$work/condense" cargo run --release --quiet -p condense-bench -- "$@"
echo "make bench took $(( $(date +%s) - started )) s"
