# condense: the two commands are `make run` and `make test` (see README.md).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: bootstrap bootstrap-test build run test contract contract-run e2e e2e-run lint bench faults container-test clean

bootstrap:
	@bash scripts/bootstrap.sh

## The bootstrap plus what only the tests need (Debian's chromium for the browser tests).
bootstrap-test:
	@bash scripts/bootstrap.sh --test

## The dashboard first: the release binary embeds frontend/dist and serves it from anywhere.
## Rebuilt only when its sources changed, so an unchanged tree builds in seconds.
build: bootstrap
	@bash scripts/build-dashboard.sh
	$(CARGO) build --release --bin condense --bin condense-media

## Start the main node on the embedded SQLite database (./data), API on :3100, web UI on :4210.
run: build
	./target/release/condense serve

## Every test: lints, Rust unit and integration tests (SQLite and PostgreSQL), the API's
## contract (schemathesis against the real binary), the dashboard's API types regenerated from
## the Rust code and type-checked, its unit tests, then its browser tests against the real binary.
test: bootstrap-test lint
	@if command -v cargo-nextest >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace --no-fail-fast; \
	else \
		$(CARGO) test --workspace --no-fail-fast; \
	fi
	@$(MAKE) --no-print-directory contract-run
	@if [ -f frontend/package.json ]; then \
		bash scripts/api-types.sh && (cd frontend && npm run --silent typecheck && npm test --silent); \
	fi
	@$(MAKE) --no-print-directory e2e-run

## The API's contract alone: schemathesis (pinned, in target/tools/) drives every operation of
## a real `condense serve` through all its phases and checks. See scripts/schemathesis.sh.
contract: bootstrap-test contract-run

contract-run:
	$(CARGO) build --bin condense --bin condense-media
	bash scripts/schemathesis.sh

## The dashboard's browser tests alone (headless chromium, a real `condense serve`; screenshots
## in test-artifacts/e2e/). See frontend/README.md.
e2e: bootstrap-test e2e-run

e2e-run:
	$(CARGO) build --bin condense --bin condense-media
	cd frontend && npm run --silent e2e

## Formatting, clippy, no import circle between files (scripts/module-cycles.py), the file
## map of docs/ARCHITECTURE.md up to date (scripts/file-map.py), no FFmpeg in the node's crate.
lint:
	$(CARGO) fmt --all -- --check
	python3 scripts/module-cycles.py src
	python3 scripts/module-cycles.py media/src
	python3 scripts/file-map.py --check
	@# The node's crate never depends on FFmpeg: only condense-media does.
	@deps=$$($(CARGO) tree -p condense -e normal --prefix none) || exit 1; \
	if grep -E '^(rsmpeg|rusty_ffmpeg|libvmaf-sys) ' <<<"$$deps"; then \
		echo "lint: the condense crate depends on FFmpeg (above); only condense-media may"; exit 1; fi
	$(CARGO) clippy --workspace --all-targets --quiet -- -D warnings

## Benchmarks: prints a table and writes BENCHMARKS.md.
bench: bootstrap
	bash scripts/bench.sh

## Fault suite, long form: kills of every process at random moments, a full disk, broken
## files and a soak, CONDENSE_FAULT_RUNS=30 runs each and 200 soak jobs; prints a table.
faults: bootstrap
	CONDENSE_FAULT_RUNS=$${CONDENSE_FAULT_RUNS:-30} CONDENSE_SOAK_JOBS=$${CONDENSE_SOAK_JOBS:-200} bash scripts/faults.sh

## The container deployment built and run for real (not part of `make test`): podman and
## podman-compose on local Debian images, the compose stack with two linked nodes, PostgreSQL
## and nginx, driven over HTTP. Needs root or sudo. See docker/README.md, "Verified".
container-test: build
	bash scripts/container-test.sh

clean:
	$(CARGO) clean
