#!/usr/bin/env bash
# The fault suite in its long form, then a table of its counts.
#   CONDENSE_FAULT_RUNS (default 30) runs per scenario, CONDENSE_SOAK_JOBS (default 200)
#   jobs in the soak; CONDENSE_FAULT_SEED replays a printed seed. Extra arguments go to
#   nextest (e.g. -E 'test(kill_9_of_the_main)' for one scenario).
# The binary under test is copied right after the build, so that a rebuild in a shared
# target folder during the long run cannot swap it (CONDENSE_TEST_BINARY).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
export CONDENSE_FAULT_RUNS=${CONDENSE_FAULT_RUNS:-30}
export CONDENSE_SOAK_JOBS=${CONDENSE_SOAK_JOBS:-200}

"$CARGO" nextest run --test it --no-run >/dev/null
built=$("$CARGO" build --bin condense --bin condense-media --message-format=json 2>/dev/null |
	sed -n 's/.*"executable":"\([^"]*\/condense\)".*/\1/p' | tail -n1)
if [ -z "$built" ]; then
	echo "faults.sh: cannot find the condense binary" >&2
	exit 1
fi
snapshot=$(mktemp -d)
trap 'rm -rf "$snapshot"' EXIT
# condense-media is the media children's program, beside condense.
cp "$built" "$(dirname "$built")/condense-media" "$snapshot/"
export CONDENSE_TEST_BINARY="$snapshot/condense"

log="${FAULTS_LOG:-$snapshot/faults.log}"
started=$(date +%s)
status=0
"$CARGO" nextest run --profile faults --test it 'faults::' --no-fail-fast \
	--success-output immediate --failure-output immediate "$@" 2>&1 | tee "$log" || status=$?
elapsed=$(($(date +%s) - started))

echo
echo "Fault suite: CONDENSE_FAULT_RUNS=$CONDENSE_FAULT_RUNS CONDENSE_SOAK_JOBS=$CONDENSE_SOAK_JOBS, ${elapsed} s"
printf '| %-16s | %5s | %5s | %13s | %15s |\n' scenario runs kills "files checked" "originals lost"
printf '|%s|%s|%s|%s|%s|\n' ------------------ ------- ------- --------------- -----------------
grep -oE 'faults: [a-z-]+: runs [0-9]+, kills [0-9]+, files checked [0-9]+, originals lost [0-9]+' "$log" |
	sed -E 's/faults: ([a-z-]+): runs ([0-9]+), kills ([0-9]+), files checked ([0-9]+), originals lost ([0-9]+)/\1 \2 \3 \4 \5/' |
	while read -r name runs kills files lost; do
		printf '| %-16s | %5s | %5s | %13s | %15s |\n' "$name" "$runs" "$kills" "$files" "$lost"
	done
grep -E 'faults: [a-z-]+: (phases at the kills|main node RSS|transcoders seen|the unreadable)|SKIPPED' "$log" | sed -E 's/^ +//' || true
exit "$status"
