# shellcheck shell=bash
# What scripts/mcp-load.sh and scripts/mcp-gateway-load.sh share, sourced by both
# (not run on its own): their options, paths, CPU pinning, free ports and
# stopping a server. Before sourcing, set LOG_PREFIX (the scripts' log tag) and
# ONLY (the default rows).

CONCURRENCY="${MCP_LOAD_CONCURRENCY:-16}"
DURATION="${MCP_LOAD_DURATION:-10}"
WARMUP="${MCP_LOAD_WARMUP:-2}"
ROUNDS="${MCP_LOAD_ROUNDS:-1}"
PYTHON="${PYTHON:-python3}"

# mcp_load_args "$@": the options both scripts take (see their --help).
mcp_load_args() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --quick) DURATION=2; WARMUP=0.5 ;;
      --concurrency) CONCURRENCY="$2"; shift ;;
      --duration) DURATION="$2"; shift ;;
      --warmup) WARMUP="$2"; shift ;;
      --only) ONLY="$2"; shift ;;
      --rounds) ROUNDS="$2"; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
}

log() { printf '[%s] %s\n' "$LOG_PREFIX" "$*" >&2; }
wants() { [[ ",$ONLY," == *",$1,"* ]]; }

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
LOADGEN="$TARGET_DIR/release/toolgate-mcp-load"
OUT_DIR="${MCP_LOAD_OUT:-$TARGET_DIR/mcp-load}"
mkdir -p "$OUT_DIR"
STAMP="$(date -u +%Y%m%dT%H%M%SZ)"

# mcp_load_pin WHAT: with MCP_LOAD_PIN not 0 and at least 2 CPUs, sets
# SERVER_PIN and CLIENT_PIN (taskset prefixes: servers on the first half of the
# CPUs, the load generator on the second, or MCP_LOAD_SERVER_CPUS /
# MCP_LOAD_CLIENT_CPUS) and PIN_NOTE ("WHAT on CPU(s) …").
mcp_load_pin() {
  NCPU="$(nproc)"
  SERVER_PIN=()
  CLIENT_PIN=()
  PIN_NOTE="none"
  if [[ "${MCP_LOAD_PIN:-1}" != "0" ]] && command -v taskset >/dev/null && ((NCPU >= 2)); then
    local half=$((NCPU / 2))
    cpu_range() { if (($1 == $2)); then echo "$1"; else echo "$1-$2"; fi; }
    SERVER_CPUS="${MCP_LOAD_SERVER_CPUS:-$(cpu_range 0 $((half - 1)))}"
    CLIENT_CPUS="${MCP_LOAD_CLIENT_CPUS:-$(cpu_range "$half" $((NCPU - 1)))}"
    SERVER_PIN=(taskset -c "$SERVER_CPUS")
    CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
    PIN_NOTE="$1 on CPU(s) $SERVER_CPUS, load generator on CPU(s) $CLIENT_CPUS"
  fi
}

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# stop PID: TERM, up to 5 s to exit, then KILL; nothing when PID is empty or gone.
stop() {
  local pid="$1"
  [[ -n "$pid" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
