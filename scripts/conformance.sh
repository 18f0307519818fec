#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, on Node 22
# through npx) against toolgate's conformance fixtures, with the baseline of out-of-scope
# scenarios. Every tools, lifecycle, logging, progress, elicitation, SSE and DNS-rebinding
# scenario must pass.
#
# --through-gateway: the suite talks to `toolgate serve` acting as a gateway in front of the
# fixtures' server (an upstream `[servers.conformance]` entry with its url, no name prefix, no
# confirmation, the tools approved on first sight, loopback allowed by the network policy), with
# the same baseline as direct: every call is forwarded upstream (content blocks, logs, progress,
# sampling and elicitation relayed).
#
# Usage: scripts/conformance.sh [--through-gateway] [--suite active|all] [--debug]
#   --debug  use the dev profile instead of release (quicker to build while working on it)
set -euo pipefail
cd "$(dirname "$0")/.."
suite="active"
gateway=false
profile="release"
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite="${2:?--suite needs a value}"; shift 2 ;;
    --through-gateway) gateway=true; shift ;;
    --debug) profile="dev"; shift ;;
    *) echo "unknown option $1; usage: scripts/conformance.sh [--through-gateway] [--suite active|all] [--debug]" >&2; exit 2 ;;
  esac
done
target="${CARGO_TARGET_DIR:-target}"
if [ "$profile" = "release" ]; then bin="$target/release"; else bin="$target/debug"; fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until http://127.0.0.1:$1/healthz answers; fails naming $2 and its log $3 otherwise.
wait_healthy() {
  for _ in $(seq 1 200); do
    if curl -s -o /dev/null "http://127.0.0.1:$1/healthz"; then return 0; fi
    sleep 0.1
  done
  echo "$2 did not answer on http://127.0.0.1:$1/healthz within 20 s; its log:" >&2
  cat "$3" >&2
  return 1
}

packages=(-p toolgate-examples --example conformance)
if $gateway; then packages+=(-p toolgate-cli --bin toolgate); fi
cargo build --quiet --profile "$profile" "${packages[@]}"

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fixtures_port="$(free_port)"
fixtures_log="$work/fixtures.log"
"$bin/examples/conformance" "$fixtures_port" 2>"$fixtures_log" &
pids+=($!)
wait_healthy "$fixtures_port" "The conformance fixtures' server" "$fixtures_log"
port="$fixtures_port"
logs=("$fixtures_log")

if $gateway; then
  port="$(free_port)"
  gateway_log="$work/gateway.log"
  logs+=("$gateway_log")
  mkdir -p "$work/root"
  # The upstream is the fixtures' server; its tools keep their names (prefix "never"), are
  # approved on first sight and need no confirmation, as they need none direct.
  cat >"$work/toolgate.toml" <<EOF
[network]
private_hosts = ["127.0.0.1"]

[servers.conformance]
url = "http://127.0.0.1:$fixtures_port/mcp"
prefix = "never"
auto_approve_new_tools = true

[servers.conformance.defaults]
effect = "read"
requires_confirmation = false
EOF
  toolgate=("$bin/toolgate" --config "$work/toolgate.toml")
  db="sqlite:$work/toolgate.db"
  # First sight approved up front: list the upstream's tools once, then approve them all.
  "${toolgate[@]}" servers tools conformance --db "$db" >"$work/servers.log" 2>&1 \
    && "${toolgate[@]}" servers approve conformance --all --db "$db" >>"$work/servers.log" 2>&1 \
    || { echo "approving the fixtures' tools through toolgate servers failed:" >&2; cat "$work/servers.log" >&2; exit 1; }
  "${toolgate[@]}" serve --db "$db" --root "$work/root" --http "127.0.0.1:$port" 2>"$gateway_log" &
  pids+=($!)
  wait_healthy "$port" "toolgate serve (the gateway)" "$gateway_log"
fi

status=0
npx -y -p node@22 -p @modelcontextprotocol/conformance@0.1.16 -- \
  conformance server --url "http://localhost:$port/mcp" --suite "$suite" \
  --expected-failures examples/conformance/expected-failures.yml -o "$work/results" </dev/null \
  | sed -n '/=== SUMMARY ===/,$p' || status=$?
if [ "$status" -ne 0 ]; then
  echo "conformance failed (exit $status)" >&2
  for log in "${logs[@]}"; do
    echo "--- $(basename "$log"):" >&2
    cat "$log" >&2
  done
fi
exit "$status"
