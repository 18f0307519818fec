#!/usr/bin/env bash
# MCP cost per call in CPU instructions: the same `tools/call` load as
# scripts/mcp-load.sh against (a) toolgate and (b) the bare rmcp server, each
# run under valgrind's callgrind, which counts the instructions the server
# executes. Unlike requests per second, the count does not move with what else
# the machine is doing, so the ratio holds on a noisy machine too.
#
# Usage: scripts/mcp-instructions.sh [--duration S] [--concurrency N]
#
#   --duration S     seconds of counted load per server (default 10)
#   --concurrency N  concurrent sessions (default 16)
#
# Environment: MCP_LOAD_BUILD=0 (do not build), MCP_LOAD_OUT (result
# directory, default target/mcp-load), TOOLGATE_TOOL / TOOLGATE_ARGS as in
# scripts/mcp-load.sh.
#
# What it counts: user-space instructions of every server thread (tokio
# workers, SQLite's worker, the audit writer), from after a warm-up to the end
# of the counted load, divided by the calls answered in that time. Not
# counted: the kernel (TCP, system calls). Under valgrind SHA-256 runs in
# software (no SHA extensions), so the audit hash costs far more instructions
# than natively; the table shows that part on its own line.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DURATION=10
CONCURRENCY=16
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) DURATION="$2"; shift ;;
    --concurrency) CONCURRENCY="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[mcp-instructions] %s\n' "$*" >&2; }
for tool in valgrind callgrind_control callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found: install valgrind (apt-get install valgrind)" >&2; exit 1; }
done

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
if [[ "${MCP_LOAD_BUILD:-1}" != "0" ]]; then
  log "building toolgate and toolgate-mcp-load (release)"
  cargo build --release --quiet -p toolgate-cli -p toolgate-mcp-load
fi
LOADGEN="$TARGET_DIR/release/toolgate-mcp-load"
TOOLGATE="$TARGET_DIR/release/toolgate"
for bin in "$LOADGEN" "$TOOLGATE"; do
  [[ -x "$bin" ]] || { echo "missing $bin (build it, or drop MCP_LOAD_BUILD=0)" >&2; exit 1; }
done
OUT_DIR="${MCP_LOAD_OUT:-$TARGET_DIR/mcp-load}"
mkdir -p "$OUT_DIR"
TABLE="$OUT_DIR/instructions-$(date -u +%Y%m%dT%H%M%SZ).md"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcp-instructions.XXXXXX")"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# measure NAME TOOL ARGS: prints "calls instructions sha256_instructions"
measure() {
  local name="$1" tool="$2" args="$3"
  local port out="$TMP/$name.callgrind"
  port="$(free_port)"
  local server
  case "$name" in
    bare) server=("$LOADGEN" bare-server --port "$port") ;;
    toolgate) server=("$TOOLGATE" --db "sqlite://$TMP/tg.db" serve --http "127.0.0.1:$port") ;;
  esac
  log "starting $name under callgrind on 127.0.0.1:$port"
  valgrind --tool=callgrind --callgrind-out-file="$out" "${server[@]}" >"$TMP/$name.log" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + 120))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/$name.log" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "$name did not listen within 120 s" >&2; exit 1; }
    sleep 0.2
  done
  local load=(load --url "http://127.0.0.1:$port/mcp" --tool "$tool" --args "$args"
    --concurrency "$CONCURRENCY" --warmup 0 --label "$name")
  log "warming up $name"
  "$LOADGEN" "${load[@]}" --duration 3 >/dev/null
  callgrind_control -z "$SERVER_PID" >/dev/null
  log "counting $name for ${DURATION}s"
  local line
  line="$("$LOADGEN" "${load[@]}" --duration "$DURATION")"
  callgrind_control -d "$SERVER_PID" >/dev/null
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  # The dump after zeroing is the file with suffix .1 (the one at exit is the shutdown).
  local dump="$out.1"
  [[ -s "$dump" ]] || { echo "callgrind wrote no dump for $name ($dump)" >&2; exit 1; }
  local total sha
  total="$(awk '/^totals:/ {print $2; exit}' "$dump")"
  sha="$(callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$dump" 2>/dev/null \
    | awk '/sha2::sha256::compress256/ && !seen {gsub(",", "", $1); print $1; seen = 1}')"
  python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["total"], sys.argv[2], sys.argv[3] or 0)' \
    "$line" "$total" "$sha"
}

TOOLGATE_TOOL="${TOOLGATE_TOOL:-calculator}"
DEFAULT_TOOLGATE_ARGS='{"expression":"1+1"}'
TOOLGATE_ARGS="${TOOLGATE_ARGS:-$DEFAULT_TOOLGATE_ARGS}"
# Run in this shell (not a subshell), so a failure stops the script and cleanup sees the server.
measure bare echo '{"text":"hello"}' >"$TMP/bare.result"
measure toolgate "$TOOLGATE_TOOL" "$TOOLGATE_ARGS" >"$TMP/toolgate.result"
read -r bare_calls bare_ir _ <"$TMP/bare.result"
read -r tg_calls tg_ir tg_sha <"$TMP/toolgate.result"

python3 - "$bare_calls" "$bare_ir" "$tg_calls" "$tg_ir" "$tg_sha" "$CONCURRENCY" "$DURATION" <<'PY' | tee "$TABLE"
import sys
bc, bi, tc, ti, ts, conc, dur = (float(x) for x in sys.argv[1:])
b, t, s = bi / bc, ti / tc, ts / tc
print(f"Instructions per `tools/call` under callgrind ({int(conc)} sessions, {dur:g} s counted per server):")
print()
print("| server | calls counted | instructions per call | bare rmcp / server |")
print("|---|---:|---:|---:|")
print(f"| bare rmcp | {int(bc):,} | {b:,.0f} | 1.00 |")
print(f"| toolgate | {int(tc):,} | {t:,.0f} | {b / t:.2f} |")
print(f"| toolgate without its SHA-256 rounds | | {t - s:,.0f} | {b / (t - s):.2f} |")
print()
print(f"- toolgate's audit hash ran {s:,.0f} instructions per call in software under valgrind;")
print("  natively it uses the CPU's SHA extensions, so the last row is nearer the native ratio.")
PY
log "table written to $TABLE"
