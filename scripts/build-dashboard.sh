#!/usr/bin/env bash
# Builds the dashboard into frontend/dist only when its sources changed since the last
# build: vite rewrites every file of dist even when nothing changed, and the release binary
# embeds dist (build.rs watches it), so an unneeded dashboard build cost a whole fat-LTO
# release build on every `make build` / `make run` (311 s measured with nothing changed).
# The stamp is the SHA-256 of every source file's path and bytes, kept in target/.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f frontend/package.json ] || exit 0
stamp=${CARGO_TARGET_DIR:-target}/dashboard-sources.sha256
sources=$(cd frontend && find src public index.html package.json package-lock.json tsconfig.json vite.config.ts \
	-type f 2>/dev/null | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1)
if [ -f frontend/dist/index.html ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources" ]; then
	exit 0
fi
(cd frontend && npm run --silent build)
mkdir -p "$(dirname "$stamp")"
echo "$sources" >"$stamp"
