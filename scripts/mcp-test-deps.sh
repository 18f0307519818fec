# Sourced by scripts/test.sh (or by hand: `source scripts/mcp-test-deps.sh` before
# `cargo nextest run -p toolgate-gateway`): installs the real MCP servers the gateway's tests run
# and exports where they are. Idempotent and offline on a second run:
# - npm: @modelcontextprotocol/server-everything and server-filesystem, pinned by
#   tests/mcp-servers/package-lock.json, `npm ci` into .test-deps/npm (git-ignored) only when the
#   lock file changed; TOOLGATE_TEST_NPM_DIR is that folder (node_modules/ inside).
# - npm: the TypeScript MCP SDKs the interop suite drives (@modelcontextprotocol/sdk, the latest
#   v1, and @modelcontextprotocol/client, v2), pinned by tests/interop/ts/package-lock.json, the
#   same way into .test-deps/interop-npm; TOOLGATE_INTEROP_NPM_DIR is that folder.
# - Python: the official `mcp` SDK pinned in tests/interop/requirements.txt, in a venv of its
#   own, .test-deps/mcp-venv (git-ignored), made from a system python (/usr/bin/python3 where it
#   exists) so that the sandbox's program user (nobody) can read the interpreter: a python under
#   a 0700 home (pyenv's under /root) cannot run at `standard` or `strict`. TOOLGATE_TEST_PYTHON
#   is its python, which runs crates/gateway/tests/fixtures/py_server.py. (The interop suite
#   keeps its own venv, target/interop-venv.)
# Needs Node.js 18 or later and python3 with venv. Leaves the caller's working directory as it was.
mcp_test_deps() {
  local repo npm_dir lock_sum stamp
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  npm_dir="$repo/.test-deps/npm"
  if ! command -v node >/dev/null 2>&1; then
    echo "mcp-test-deps: Node.js (18 or later) is needed for the gateway's npm MCP servers" >&2
    return 2
  fi
  lock_sum="$(cat "$repo/tests/mcp-servers/package.json" "$repo/tests/mcp-servers/package-lock.json" | sha256sum | cut -d' ' -f1)"
  stamp="$npm_dir/node_modules/.toolgate-lock-sha256"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_sum" ]; then
    echo "==> npm ci (.test-deps/npm: @modelcontextprotocol/server-everything, server-filesystem)"
    mkdir -p "$npm_dir"
    cp "$repo/tests/mcp-servers/package.json" "$repo/tests/mcp-servers/package-lock.json" "$npm_dir/"
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error </dev/null) || return 1
    echo "$lock_sum" > "$stamp"
  fi
  export TOOLGATE_TEST_NPM_DIR="$npm_dir"
  npm_ci_pinned "$repo/tests/interop/ts" "$repo/.test-deps/interop-npm" "TypeScript MCP SDKs v1 and v2" || return 1
  export TOOLGATE_INTEROP_NPM_DIR="$repo/.test-deps/interop-npm"

  # shellcheck source=scripts/venv.sh
  source "$repo/scripts/venv.sh"
  local base_python=python3
  if [ -x /usr/bin/python3 ]; then
    base_python=/usr/bin/python3
  fi
  (cd "$repo" && PINNED_VENV_PYTHON="$base_python" pinned_venv .test-deps/mcp-venv tests/interop/requirements.txt mcp) || return 1
  export TOOLGATE_TEST_PYTHON="$repo/.test-deps/mcp-venv/bin/python"
  # The sandbox's user must be able to walk to the fixtures: say so when it cannot.
  if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 \
    && ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -r "$repo/crates/gateway/tests/fixtures/py_server.py" 2>/dev/null; then
    echo "mcp-test-deps: note: the sandbox user (nobody) cannot read $repo (a 0700 folder on the way?); the sandboxed upstream tests will fail at standard/strict" >&2
  fi
}

# `npm ci` of the package.json and package-lock.json in $1 into $2, only when they changed
# (a stamp in $2/node_modules holds their checksum); $3 names what it installs.
npm_ci_pinned() {
  local from="$1" into="$2" what="$3" sum stamp
  sum="$(cat "$from/package.json" "$from/package-lock.json" | sha256sum | cut -d' ' -f1)"
  stamp="$into/node_modules/.toolgate-lock-sha256"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
    echo "==> npm ci ($into: $what)"
    mkdir -p "$into"
    cp "$from/package.json" "$from/package-lock.json" "$into/"
    (cd "$into" && npm ci --no-audit --no-fund --loglevel=error </dev/null) || return 1
    echo "$sum" > "$stamp"
  fi
}
