#!/usr/bin/env bash
# What an idle main node holds, in more detail than the memory measure of `make bench`:
# starts `BIN serve` as that measure does (a fresh DATA_DIR, SQLite, the defaults), waits
# SECONDS (default 8), then prints its RSS split (/proc/PID/status), its threads by name,
# glibc's own count of the heap in use per arena (malloc_stats, called through gdb when gdb
# is installed) and the binary's resident code by crate (scripts/resident-code.py; root).
# Extra VAR=value arguments go into the node's environment (e.g. HTTP_WORKERS=1).
#   scripts/idle-memory.sh target/release/condense [SECONDS] [VAR=value...]
# BENCHMARKS.md's idle-memory figures of 2026-11-30 (second and third turns) were measured with it.
set -euo pipefail
bin=$(realpath "$1")
seconds=${2:-8}
shift $(($# > 1 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
data=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$data"' EXIT
cd "$data"
env -u ROLE -u DATABASE_URL -u MAIN_NODE_URL -u CLUSTER_TOKEN -u HTTP_WORKERS -u MAX_JOBS \
  DATA_DIR="$data" BIND=127.0.0.1 PORT=0 UI_PORT=0 NODE_NAME=bench ADMIN_PASSWORD=idle-memory-0123 "$@" \
  "$bin" serve >"$data/out.log" 2>"$data/err.log" &
pid=$!
sleep "$seconds"
kill -0 "$pid" 2>/dev/null || { cat "$data/err.log" >&2; exit 1; }
grep -E '^(VmRSS|VmHWM|RssAnon|RssFile|Threads):' "/proc/$pid/status"
for task in /proc/"$pid"/task/*; do cat "$task/comm"; done | sort | uniq -c | sort -rn
if command -v gdb >/dev/null; then
  # malloc_stats writes to the node's stderr.
  gdb -p "$pid" -batch -ex 'call (void)malloc_stats()' >/dev/null 2>&1 || true
  sleep 0.5
  grep -E '^(Arena|Total|system bytes|in use bytes)' "$data/err.log" || true
fi
python3 "$here/resident-code.py" "$pid" "$bin"
