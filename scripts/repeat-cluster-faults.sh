#!/usr/bin/env bash
# The cluster and fault tests N times in a row (default 20), stopping at the first failure:
# the evidence that they are not flaky, on a machine doing nothing else, or with --load,
# with both cores kept busy by two other processes (busy loops) the whole time. One line
# per run; a failing run's whole output is kept in test-artifacts/repeat/.
#   scripts/repeat-cluster-faults.sh [--load] [N]
set -euo pipefail
cd "$(dirname "$0")/.."
load=0
if [ "${1:-}" = "--load" ]; then load=1; shift; fi
runs=${1:-20}
mkdir -p test-artifacts/repeat
cargo nextest run --test it --no-run >/dev/null 2>&1
busy=()
stop() { for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap stop EXIT
if [ "$load" = 1 ]; then
  for _ in 1 2; do (while :; do :; done) & busy+=($!); done
fi
label=$([ "$load" = 1 ] && echo loaded || echo quiet)
echo "repeat: $label, $runs runs, head $(git rev-parse --short HEAD)"
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  if cargo nextest run --test it --retries 0 --no-fail-fast cluster:: faults:: >test-artifacts/repeat/current.log 2>&1; then
    echo "repeat: $label run $i passed in $(( $(date +%s) - start )) s (load $(cut -d' ' -f1 /proc/loadavg))"
  else
    cp test-artifacts/repeat/current.log "test-artifacts/repeat/$label-$i-failed.log"
    echo "repeat: $label run $i FAILED after $(( $(date +%s) - start )) s: test-artifacts/repeat/$label-$i-failed.log"
    grep -E '^\s+FAIL ' test-artifacts/repeat/current.log | sort -u || true
    exit 1
  fi
done
echo "repeat: $label: $runs runs in a row passed"
