#!/usr/bin/env bash
# Benchmarks: each figure printed with the command that gives it, and written to BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin condense
bin=./target/release/condense
work=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT

rows=()
row() { rows+=("| $1 | $2 | $3 | \`$4\` |"); printf '%-44s %14s   goal %s\n' "$1" "$2" "$3"; }

# Main node memory, idle: RSS after start-up and one health request, SQLite in a temp DATA_DIR.
DATA_DIR=$work/data BIND=127.0.0.1 PORT=0 UI_PORT=0 ADMIN_PASSWORD=benchmark-password \
  "$bin" serve >"$work/out.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do grep -q "listening" "$work/out.log" && break; sleep 0.05; done
port=$(grep -o 'api_addr=[0-9.]*:[0-9]*' "$work/out.log" | head -1 | cut -d: -f2)
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
grep -q '"status":"ok"' <&3
exec 3>&-
sleep 1
rss_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
row "main node memory, idle (RSS)" "$((rss_kb / 1024)) MiB" "< 40 MiB" "make bench (scripts/bench.sh: RSS of condense serve after start-up)"
kill -TERM "$pid"; wait "$pid" || true

# Sections written by other commands (the fault suite's counts) are kept.
kept=$(sed -n '/^## Fault suite/,$p' BENCHMARKS.md 2>/dev/null || true)
{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` on $(date -u +%Y-%m-%d), $(nproc) cores, $(free -g | awk '/^Mem/ {print $2}') GiB."
  echo
  echo "| measure | figure | goal | command |"
  echo "|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  if [ -n "$kept" ]; then echo; printf '%s\n' "$kept"; fi
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
