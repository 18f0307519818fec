#!/usr/bin/env bash
# Interop tests against the official MCP SDKs. First the TypeScript SDKs
# (tests/interop/ts/interop.test.mjs, `node --test`: the latest v1 `@modelcontextprotocol/sdk` and
# the v2 `@modelcontextprotocol/client`, installed by scripts/mcp-test-deps.sh): every revision
# each speaks over Streamable HTTP and stdio, and a task-augmented call approved over REST. Then
# the Python MCP SDK (tests/interop/test_python_sdk.py): initialize,
# paginated tools/list, good and bad calls, unknown tool, cancellation, progress and
# tools/list_changed, over stdio and Streamable HTTP, each test with its own server on a free
# loopback port. Installs the pinned SDK (tests/interop/requirements.txt) into target/interop-venv
# once, builds the conformance fixture, then runs pytest. Extra arguments go to pytest.
# Usage: scripts/interop.sh [pytest args, e.g. -k cancel]
set -euo pipefail
cd "$(dirname "$0")/.."

venv="target/interop-venv"
requirements="tests/interop/requirements.txt"

# shellcheck source=scripts/venv.sh
source scripts/venv.sh
pinned_venv "$venv" "$requirements" mcp pytest

# The fixture's profile: release, or TOOLGATE_TEST_PROFILE=dev|release (scripts/test.sh sets dev,
# whose binaries its test build already made).
profile="${TOOLGATE_TEST_PROFILE:-release}"
case "$profile" in
  release) dir=release ;;
  dev) dir=debug ;;
  *) echo "TOOLGATE_TEST_PROFILE=$profile: use dev or release" >&2; exit 2 ;;
esac
echo "==> building the conformance fixture ($profile)"
cargo build --quiet --profile "$profile" -p toolgate-examples --example conformance

echo "==> interop tests, TypeScript SDKs"
export TOOLGATE_CONFORMANCE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/$dir/examples/conformance"
# shellcheck source=scripts/mcp-test-deps.sh
source scripts/mcp-test-deps.sh
mcp_test_deps
# The test file runs from the installed folder so that its imports resolve there.
cp tests/interop/ts/interop.test.mjs "$TOOLGATE_INTEROP_NPM_DIR/"
(cd "$TOOLGATE_INTEROP_NPM_DIR" && timeout -k 10 300 node --test --test-concurrency=1 interop.test.mjs </dev/null)

echo "==> interop tests, Python SDK (mcp $("$py" -c 'from importlib.metadata import version; print(version("mcp"))'))"
export PYTHONDONTWRITEBYTECODE=1
# The hard limit only matters if something hangs; the suite takes well under a minute.
exec timeout -k 10 300 "$py" -m pytest tests/interop/test_python_sdk.py \
  -p no:cacheprovider -v -rfE --color=no "$@" </dev/null
