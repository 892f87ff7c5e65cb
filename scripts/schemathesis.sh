#!/usr/bin/env bash
# The API's contract checked by schemathesis (run by `make test`): a real `condense serve`
# on free ports with a fresh DATA_DIR and an administrator of a random name, and
# schemathesis (installed by `scripts/bootstrap.sh --test` into target/tools/) driving
# every operation of its /openapi.json through every phase (examples, coverage, fuzzing,
# stateful) with every check. Settings and the few exceptions, each with its reason:
# scripts/schemathesis/config.toml and hooks.py. Fails on any failure schemathesis finds.
# CONDENSE_BIN: the condense binary (default $CARGO_TARGET_DIR/debug/condense, else
# target/debug/condense; built when missing).
# Extra arguments go to `schemathesis run` (e.g. --max-examples 5, --include-path /jobs;
# paths among them absolute: it runs in a temporary folder). The server's log is left in
# test-artifacts/contract/server.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
tools=$repo/target/tools/schemathesis
if [ ! -x "$tools/bin/st" ]; then
    bash scripts/bootstrap.sh --test
fi
binary=${CONDENSE_BIN:-${CARGO_TARGET_DIR:-target}/debug/condense}
if [ ! -x "$binary" ]; then
    ${CARGO:-cargo} build --bin condense --bin condense-media
fi

root=$(mktemp -d -t condense-contract-XXXXXX)
server=""
radarr=""
cleanup() {
    if [ -n "$radarr" ]; then
        kill "$radarr" 2>/dev/null || true
    fi
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -TERM "$server" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$server" 2>/dev/null || true
    fi
    # The server's log stays for whoever reads a failure.
    if [ -f "$root/server.log" ]; then
        mkdir -p test-artifacts/contract && cp "$root/server.log" test-artifacts/contract/server.log
    fi
    rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/data"

user="contract-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cluster_token="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
# A PRO licence of a key pair of this run's own: linked nodes need a paid tier, and the
# operations on /nodes/{id} need linked nodes to act on (seed.py enrols them).
keys=$("$binary" license keygen)
private=$(sed -n 's/^private: *//p' <<<"$keys")
public=$(sed -n 's/^public: *//p' <<<"$keys")
license=$(CONDENSE_LICENSE_PRIVATE_KEY="$private" "$binary" license issue --tier PRO --licensee "contract run")
# Only what this run sets: settings of the developer's shell would change the server. No
# web interface listener (UI_PORT=0): the API listener serves every operation. No job
# slots: the seeded jobs stay as seed.py leaves them for the job operations to act on.
env -i PATH="$PATH" HOME="$root" DATA_DIR="$root/data" BIND=127.0.0.1 PORT=0 UI_PORT=0 MAX_JOBS=0 \
    ADMIN_USERNAME="$user" ADMIN_PASSWORD="$password" NO_COLOR=1 \
    CLUSTER_TOKEN="$cluster_token" LICENSE_KEY="$license" LICENSE_PUBLIC_KEY="$public" \
    "$binary" serve >"$root/server.log" 2>&1 &
server=$!
address=""
for _ in $(seq 1 300); do
    address=$(sed -n 's/.*listening.* api_addr=\([^ ]*\).*/\1/p' "$root/server.log" | head -n1)
    [ -n "$address" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
done
if [ -z "$address" ]; then
    echo "condense serve did not start:" >&2
    cat "$root/server.log" >&2
    exit 1
fi
base="http://$address"
token=$(python3 - "$base" "$user" "$password" <<'PY'
import json, sys, urllib.request
base, user, password = sys.argv[1:]
request = urllib.request.Request(base + "/auth/login", json.dumps({"username": user, "password": password}).encode(),
                                 {"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(request))["token"])
PY
)
"$binary" openapi >"$root/openapi.json"

# The settings, with what the operations act on (seed.py) bound to their ids.
settings=$repo/scripts/schemathesis
# A Radarr that holds the seeded library's files, for "get a new copy" to ask (radarr.py).
mkdir -p "$root/media/kept"
python3 "$settings/radarr.py" "$root/media/kept" contract-key "$root/radarr.port" &
radarr=$!
for _ in $(seq 1 100); do [ -f "$root/radarr.port" ] && break; sleep 0.1; done
cp "$settings/config.toml" "$root/config.toml"
CONDENSE_BIN="$binary" CLUSTER_TOKEN="$cluster_token" LICENSE_KEY="$license" \
    RADARR_URL="http://127.0.0.1:$(cat "$root/radarr.port")" python3 "$settings/seed.py" "$base" "$token" "$root" >>"$root/config.toml"
version=$(PYTHONPATH="$tools" python3 -c 'import importlib.metadata as m; print(m.version("schemathesis"))')
echo "schemathesis $version against $base (data in $root)"
started=$(date +%s)
status=0
# Run from the temporary folder: schemathesis and hypothesis keep their caches in the
# working directory.
(cd "$root" && CONDENSE_CONTRACT_USER="$user" PYTHONPATH="$tools:$settings" PYTHONDONTWRITEBYTECODE=1 \
    python3 -m schemathesis.cli --config-file "$root/config.toml" run "$root/openapi.json" --url "$base" \
    -H "Authorization: Bearer $token" --checks all --phases examples,coverage,fuzzing,stateful \
    --no-color "$@") || status=$?
echo "schemathesis finished in $(( $(date +%s) - started )) s (exit $status)"
if [ "$status" -ne 0 ]; then
    echo "the server's log: test-artifacts/contract/server.log" >&2
fi
exit "$status"
