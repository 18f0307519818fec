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
py="$venv/bin/python"

if [ ! -x "$py" ]; then
  echo "==> creating $venv"
  python3 -m venv "$venv"
fi
# Reinstall only when the pinned versions are not what the venv has.
if ! "$py" - "$requirements" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if line:
        name, pinned = line.split("==")
        if version(name) != pinned:
            sys.exit(1)
import mcp, pytest  # noqa: E401,F401  importable, not just recorded
PY
then
  echo "==> installing $(grep -v '^#' "$requirements" | tr '\n' ' ')into $venv"
  "$py" -m pip install -q --disable-pip-version-check -r "$requirements" </dev/null
fi

echo "==> building the conformance fixture"
cargo build --quiet --release -p toolgate-examples --example conformance

echo "==> interop tests (mcp $("$py" -c 'from importlib.metadata import version; print(version("mcp"))'))"
export TOOLGATE_CONFORMANCE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/examples/conformance"
export PYTHONDONTWRITEBYTECODE=1
# The hard limit only matters if something hangs; the suite takes well under a minute.
exec timeout -k 10 300 "$py" -m pytest tests/interop/test_python_sdk.py \
  -p no:cacheprovider -v -rfE --color=no "$@" </dev/null
