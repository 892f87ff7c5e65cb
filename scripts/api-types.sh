#!/usr/bin/env bash
# Regenerates frontend/src/generated/api.ts, the dashboard's types of the API, from the
# OpenAPI document the Rust code generates (`condense openapi`). Run by `make test` and
# `make build` before the dashboard's type check, so a change to the API that breaks the
# dashboard fails them. The file is committed, so the dashboard also builds where no Rust
# toolchain is (the Docker image's frontend stage); with CI set, a committed file that
# differs from the generated one fails.
# CONDENSE_BIN: a built condense binary to ask; without it, `cargo run` builds one.
set -euo pipefail
cd "$(dirname "$0")/.."
output=frontend/src/generated/api.ts
document=$(mktemp --suffix=.json)
trap 'rm -f "$document"' EXIT
if [ -n "${CONDENSE_BIN:-}" ]; then
    "$CONDENSE_BIN" openapi >"$document"
else
    ${CARGO:-cargo} run --quiet --bin condense -- openapi >"$document"
fi
frontend/node_modules/.bin/openapi-typescript "$document" --enum-values --output "$output" >/dev/null
if [ -n "${CI:-}" ] && ! git diff --quiet -- "$output"; then
    git --no-pager diff --stat -- "$output"
    echo "$output is not what the API generates now: run scripts/api-types.sh and commit it" >&2
    exit 1
fi
