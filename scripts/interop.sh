#!/usr/bin/env bash
# Interop test against the official Python MCP SDK (tests/interop/test_python_sdk.py): initialize,
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

echo "==> building the conformance fixture"
cargo build --quiet --release -p toolgate-examples --example conformance

echo "==> interop tests (mcp $("$py" -c 'from importlib.metadata import version; print(version("mcp"))'))"
export TOOLGATE_CONFORMANCE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/examples/conformance"
export PYTHONDONTWRITEBYTECODE=1
# The hard limit only matters if something hangs; the suite takes well under a minute.
exec timeout -k 10 300 "$py" -m pytest tests/interop/test_python_sdk.py \
  -p no:cacheprovider -v -rfE --color=no "$@" </dev/null
