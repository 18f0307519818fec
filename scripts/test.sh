#!/usr/bin/env bash
# Runs everything CI runs: formatting, lints, the dependency policy (cargo deny), the whole test
# suite (unit, integration, CLI end to end, doc tests), the web UI in headless Chromium, and the
# examples. Idempotent; installs what the tests need if it is missing (Debian's chromium, the
# UI tests' npm packages and the real MCP servers the gateway's tests run included).
#
# scripts/test.sh --quick: the fast, self-contained tier for a developer's loop: formatting,
# lints and every test that needs no PostgreSQL, Chromium, Node or Python (nextest's `quick`
# profile; the PostgreSQL halves of tests skip when the server is unreachable, and the tests
# against real MCP servers skip too: their npm folder and Python are set empty). Installs
# nothing: it needs only the Rust toolchain and cargo-nextest.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export INSTA_UPDATE="${INSTA_UPDATE:-no}"   # snapshots are checked, never rewritten, here
# Disk: a full run builds the workspace for tests, docs, examples and benchmarks. Line tables
# keep backtraces readable at a fraction of full debug info's size, and CI (one build, no edits)
# gains nothing from incremental artifacts. A variable already set wins.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
export CARGO_PROFILE_TEST_DEBUG="${CARGO_PROFILE_TEST_DEBUG:-line-tables-only}"
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
fi
# The conformance and interop runs use the dev binaries the test build already made: a release
# build of the workspace was the longest step of a CI run (2 cores). The scripts alone default to
# release.
export TOOLGATE_TEST_PROFILE="${TOOLGATE_TEST_PROFILE:-dev}"

# Each step line carries the time since the script started (m:ss), so a slow step shows.
step() { printf '\n==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

# A full build needs several GiB; say so up front rather than as a linker's "No space left".
free_kib=$(df -Pk . | awk 'NR==2 {print $4}')
if [ "${free_kib:-0}" -lt $((6 * 1024 * 1024)) ]; then
  echo "warning: only $((free_kib / 1024)) MiB free on $(df -P . | awk 'NR==2 {print $6}');" \
    "the build and tests need about 6 GiB (delete old target directories to make room)" >&2
fi

case "${1:-}" in
  "") ;;
  --quick)
    if ! cargo nextest --version >/dev/null 2>&1; then
      echo "scripts/test.sh --quick needs cargo-nextest and installs nothing:" \
        "run 'cargo install --locked cargo-nextest' (or scripts/test.sh once) first" >&2
      exit 1
    fi
    step "cargo fmt --check"
    cargo fmt --all -- --check
    step "shell scripts parse (bash -n)"
    for script in scripts/*.sh examples/*/*.sh; do bash -n "$script"; done
    step "ARCHITECTURE.md names every source file"
    bash scripts/check-architecture.sh
    step "cargo clippy (all targets, warnings are errors)"
    cargo clippy --workspace --all-targets -- -D warnings
    # CI=true turns a missing PostgreSQL into a failure; this tier skips it instead.
    step "tests without PostgreSQL, Chromium, Node or Python (cargo nextest --profile quick)"
    env -u CI TOOLGATE_TEST_NPM_DIR= TOOLGATE_TEST_PYTHON= \
      cargo nextest run --workspace --no-fail-fast --profile quick
    echo
    echo "Quick checks passed (the full tier, scripts/test.sh, is what CI runs)."
    exit 0
    ;;
  *)
    echo "usage: scripts/test.sh [--quick]   (no argument: everything CI runs)" >&2
    exit 2
    ;;
esac

if ! cargo nextest --version >/dev/null 2>&1; then
  step "installing cargo-nextest"
  cargo install --locked cargo-nextest
fi

# cargo-deny checks the dependency graph against deny.toml. Built from crates.io once (a few
# minutes), then only its version is asked for.
if ! cargo deny --version >/dev/null 2>&1; then
  step "installing cargo-deny"
  cargo install --locked cargo-deny
fi

# The store's tests run against SQLite and against the local PostgreSQL (127.0.0.1:5432,
# database `test`); with CI=true a missing PostgreSQL fails them. Start the cluster if it is down.
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  step "starting the local PostgreSQL"
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start || true
  fi
fi

# toolgate-redis's tests and the Redis cluster run use the local Redis (127.0.0.1:6379, nothing
# kept on disk); with CI=true a missing Redis fails them. Start it if it is down.
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 \
  && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  step "starting the local Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "shell scripts parse (bash -n)"
for script in scripts/*.sh examples/*/*.sh; do bash -n "$script"; done

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

# Advisories are not checked here: cargo-deny fetches the RustSec database from GitHub, which
# this project's machines and CI cannot reach, and no registry package ships a copy (deny.toml
# says more). Licenses, duplicate versions, banned crates and sources are.
step "cargo deny check licenses bans sources"
cargo deny --locked check licenses bans sources

# Every published crate carries what crates.io needs and packages with its siblings resolved from
# the workspace (not yet published). Not verified here: verifying builds every crate a second time
# from its tarball, which the rest of this suite already builds from the same sources.
step "cargo package --workspace (crates.io metadata; publishable in dependency order)"
cargo package --workspace --locked --no-verify --allow-dirty --quiet

# The gateway's tests run real MCP servers: the official everything and filesystem servers
# (npm, pinned in tests/mcp-servers/) and a Python server on the official `mcp` SDK. Exports
# TOOLGATE_TEST_NPM_DIR and TOOLGATE_TEST_PYTHON; with CI=true a test finding them missing fails.
step "MCP servers for the gateway's tests (npm: .test-deps/npm; Python: .test-deps/mcp-venv)"
# shellcheck source=scripts/mcp-test-deps.sh
source scripts/mcp-test-deps.sh
mcp_test_deps

step "tests (cargo nextest)"
cargo nextest run --workspace --no-fail-fast

step "web UI end to end (headless Chromium)"
bash scripts/ui-e2e.sh

step "MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, baseline: resources and prompts)"
bash scripts/conformance.sh

step "MCP conformance suite, revision 2026-07-28 (@modelcontextprotocol/conformance 0.2.0-alpha.12, its own baseline)"
bash scripts/conformance.sh --revision 2026-07-28

step "MCP conformance suite through the gateway (toolgate serve in front of the fixtures: same baseline, same answers as direct)"
bash scripts/conformance.sh --through-gateway

step "interop with the official Python and TypeScript MCP SDKs (stdio and Streamable HTTP)"
bash scripts/interop.sh

step "exports and round-trip answers against the official provider SDKs' types (openai, anthropic, google-genai)"
bash scripts/export-sdk.sh

step "REST contract: schemathesis --checks all, local mode and with principals"
bash scripts/schemathesis.sh

step "cluster: three instances on one PostgreSQL behind HAProxy (shared rate limits, definitions, kill -9)"
bash scripts/cluster.sh

step "cluster with [cluster] redis_url: the rate limit counted in Redis across three instances"
bash scripts/cluster.sh --redis redis://127.0.0.1:6379

step "approval crash campaign (short form; --long for the full run)"
python3 scripts/approval-crash.py --short

step "doc tests"
cargo test --workspace --doc --quiet

step "docs: ARCHITECTURE.md names every source file; cargo doc (warnings are errors)"
bash scripts/check-architecture.sh
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet

step "example: three ways to define a tool"
cargo run --quiet -p toolgate-examples --example three_ways >/dev/null

step "example: the provider round trip (parse a response, run its calls, answer)"
cargo run --quiet -p toolgate-examples --example provider_round_trip >/dev/null

step "example: the product context tools (factory pattern over SQLite)"
cargo run --quiet -p toolgate-examples --example product_context >/dev/null

step "benchmarks compile and run once (cargo test --bench '*' -- --test)"
# Every bench target (criterion, harness = false) built with the test build's profile and
# dependencies and run once in criterion's test mode; `--bench '*'`, not `--benches`, which
# would also rebuild and rerun every library's unit tests. Timing runs: `cargo bench`.
# Quiet when it passes; a failing test's output is shown (libtest prints it on stdout).
bench_log="$(mktemp)"
if ! cargo test --quiet --workspace --bench '*' -- --test >"$bench_log" 2>&1; then
  cat "$bench_log" >&2
  rm -f "$bench_log"
  exit 1
fi
rm -f "$bench_log"

echo
echo "All checks passed in $((SECONDS / 60)) min $((SECONDS % 60)) s."
