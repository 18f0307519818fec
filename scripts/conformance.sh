#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, on Node 22
# through npx) against toolgate's conformance fixtures, with the baseline of out-of-scope
# scenarios. Every tools, lifecycle, logging, progress, elicitation, SSE and DNS-rebinding
# scenario must pass. Usage: scripts/conformance.sh [--suite active|all]
set -euo pipefail
cd "$(dirname "$0")/.."
suite="active"
if [ "${1:-}" = "--suite" ]; then suite="${2:?--suite needs a value}"; fi

cargo build --quiet --release -p toolgate-examples --example conformance
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp)"
target/release/examples/conformance "$port" 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  if curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; then break; fi
  sleep 0.1
done
out="$(mktemp -d)"
status=0
npx -y -p node@22 -p @modelcontextprotocol/conformance@0.1.16 -- \
  conformance server --url "http://localhost:$port/mcp" --suite "$suite" \
  --expected-failures examples/conformance/expected-failures.yml -o "$out" </dev/null \
  | sed -n '/=== SUMMARY ===/,$p' || status=$?
if [ "$status" -ne 0 ]; then
  echo "conformance failed (exit $status); server log:" >&2
  cat "$log" >&2
fi
rm -rf "$out"
exit "$status"
