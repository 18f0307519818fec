#!/usr/bin/env bash
# Regenerates crates/cli/symbol-order.txt, the order in which the linker lays out toolgate's
# functions (issue 24: resident memory). Code is mapped 64 KiB around each page fault, so the
# functions a serving toolgate runs, scattered over its 40 MB of code, kept about 20 MiB of it
# resident; laid out together they fit in a few MiB. This script finds them: it runs
# `toolgate serve` under valgrind's callgrind, lets it settle, drives MCP load at it (a
# read-only tool and a side-effecting one, as scripts/mcp-load.sh does), and lists every
# function of the executable that ran after startup (hottest first), then those that ran only
# at startup (so starting touches less code too). crates/cli/build.rs hands the file to the
# linker for release builds of `toolgate`.
#
# Usage: scripts/code-order.sh [--postgres URL] [--check]
#
#   --postgres URL  also serve from PostgreSQL (a scratch database created on the server that
#                   postgres://USER@HOST:PORT/DATABASE names, no query string, dropped
#                   afterwards), so its client code is laid out with the rest
#   --check         only report how much of the committed order the current release build
#                   defines and how it was laid out (exit 1 when under 90% is found: stale)
#
# When to run it: after upgrading dependencies or the Rust toolchain (symbol names carry a hash
# of the crate's version, features and dependencies, so most names change), or after changing
# what a call runs. A stale order costs memory, never correctness: names the linker does not
# find are skipped. Takes about 3 minutes plus the release build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PG_URL=""
CHECK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --postgres) PG_URL="${2:?--postgres needs a URL: postgres://USER@HOST:PORT/DATABASE}"; shift ;;
    --check) CHECK=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[code-order] %s\n' "$*" >&2; }
ORDER="$ROOT/crates/cli/symbol-order.txt"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TOOLGATE="$TARGET_DIR/release/toolgate"
LOADGEN="$TARGET_DIR/release/toolgate-mcp-load"

log "building toolgate and toolgate-mcp-load (release)"
cargo build --release --quiet -p toolgate-cli -p toolgate-mcp-load
if [[ "$CHECK" == 1 ]]; then
  exec python3 scripts/code_order.py check "$TOOLGATE" "$ORDER"
fi
for tool in valgrind callgrind_control python3; do
  command -v "$tool" >/dev/null || { echo "$tool not found: install valgrind (apt-get install valgrind)" >&2; exit 1; }
done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/code-order.XXXXXX")"
SERVER_PID=""
PG_DB=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill -TERM "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  if [[ -n "$PG_DB" ]]; then psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS $PG_DB" >/dev/null 2>&1 || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# profile NAME ARGS...: serves under callgrind with ARGS before `serve`, drives the load, and
# leaves $TMP/NAME.out.N: the dumps callgrind writes when startup ends (after
# release_startup_code returns, once for each of its two functions) and one on request after
# the load (the dump at exit goes to $TMP/NAME.out, which is not used).
profile() {
  local name="$1"; shift
  local port; port="$(free_port)"
  log "$name: toolgate serve under callgrind on 127.0.0.1:$port"
  valgrind --tool=callgrind --demangle=no --dump-after='*release_startup_code*' \
    --callgrind-out-file="$TMP/$name.out" \
    "$TOOLGATE" "$@" serve --http "127.0.0.1:$port" >"$TMP/$name.log" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + 180))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$TMP/$name.log" >&2; exit 1; }
    ((SECONDS < deadline)) || { log "$name did not listen within 180 s"; exit 1; }
    sleep 0.5
  done
  # Idle: the background tasks' code runs after startup too.
  sleep 3
  local tool args
  for tool in calculator todo_manager; do
    case "$tool" in
      calculator) args='{"expression":"1+1"}' ;;
      todo_manager) args='{"action":"list"}' ;;
    esac
    "$LOADGEN" load --url "http://127.0.0.1:$port/mcp" --tool "$tool" --args "$args" \
      --concurrency 16 --duration 8 --warmup 1 --label "$tool" >"$TMP/$name-$tool.json"
    log "$name: $tool $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["ok"], "calls,", r["errors"], "errors")' "$TMP/$name-$tool.json")"
  done
  callgrind_control -d "$SERVER_PID" >/dev/null
  kill -TERM "$SERVER_PID"
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# The dumps by trigger: startup's (until toolgate_sandbox's release_startup_code returns),
# and the rest, from then until the requested dump after the load.
dumps() {
  local name="$1" kind="$2" file
  for file in "$TMP/$name.out".*; do
    case "$(grep -m 1 '^desc: Trigger:' "$file")" in
      *"--dump-after="*toolgate_sandbox*) [[ "$kind" == startup ]] && echo "$file" ;;
      *) [[ "$kind" == after ]] && echo "$file" ;;
    esac
  done
  return 0
}

profile sqlite --db "sqlite://$TMP/tg.db"
mapfile -t AFTER < <(dumps sqlite after)
mapfile -t STARTUP < <(dumps sqlite startup)
if [[ -n "$PG_URL" ]]; then
  PG_DB="code_order_$$"
  psql -q "$PG_URL" -c "CREATE DATABASE $PG_DB" >/dev/null
  printf '[audit]\nkey_file = "%s/audit-key"\n' "$TMP" >"$TMP/pg.toml"
  profile postgres --config "$TMP/pg.toml" --db "${PG_URL%/*}/$PG_DB"
  mapfile -t -O "${#AFTER[@]}" AFTER < <(dumps postgres after)
  mapfile -t -O "${#STARTUP[@]}" STARTUP < <(dumps postgres startup)
fi
python3 scripts/code_order.py build "$ORDER" --object "$(basename "$TOOLGATE")" \
  --after "${AFTER[@]}" --startup "${STARTUP[@]+"${STARTUP[@]}"}"
log "relink toolgate with the new order: cargo build --release -p toolgate-cli (the build script reads it)"
