#!/usr/bin/env bash
# MCP load benchmark: `tools/call` of one trivial tool over Streamable HTTP
# against (a) toolgate, (b) a bare rmcp server, (c) the Python SDK's FastMCP
# server; same load generator, same machine, same run. Prints a markdown table
# (requests/s, p50/p99 latency, peak RSS) and the ratios.
#
# Usage: scripts/mcp-load.sh [--quick] [--concurrency N] [--duration S]
#                            [--warmup S] [--only LIST]
#
#   --quick          smoke test: 0.5 s warm-up, 2 s measured per server
#   --concurrency N  concurrent sessions (default 16; env MCP_LOAD_CONCURRENCY)
#   --duration S     measured seconds per server (default 10; MCP_LOAD_DURATION)
#   --warmup S       warm-up seconds per server (default 2; MCP_LOAD_WARMUP)
#   --only LIST      comma-separated subset of: toolgate,bare,fastmcp
#   --rounds N       run the servers N times, interleaved, and report the
#                    median of each figure (default 1; MCP_LOAD_ROUNDS)
#
# Environment:
#   TOOLGATE_SERVE_CMD  command starting toolgate; $PORT and $TMP are expanded
#                       by bash when it runs. It must exec the server itself
#                       (no wrapper that forks) so the RSS figure is the
#                       server's. Default:
#                       target/release/toolgate --db sqlite://$TMP/tg.db serve --http 127.0.0.1:$PORT
#   TOOLGATE_TOOL       tool called on toolgate (default: calculator)
#   TOOLGATE_ARGS       its arguments (default: {"expression":"1+1"})
#   TOOLGATE_TOKEN      bearer token for toolgate, if it needs one
#   MCP_LOAD_SERVER_CPUS / MCP_LOAD_CLIENT_CPUS
#                       taskset CPU lists for the servers and the load
#                       generator (default on a 2-CPU machine: 0 and 1; with
#                       more CPUs: the first half and the second half)
#   MCP_LOAD_PIN=0      do not pin anything
#   MCP_LOAD_OUT        directory for the results (default target/mcp-load)
#   MCP_LOAD_BUILD=0    do not (re)build the Rust binaries
#   PYTHON              Python interpreter for FastMCP (default python3)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

LOG_PREFIX=mcp-load
ONLY="toolgate,bare,fastmcp"
# shellcheck source=scripts/mcp-load-common.sh
source "$ROOT/scripts/mcp-load-common.sh"
mcp_load_args "$@"

RESULTS="$OUT_DIR/results-$STAMP.jsonl"
TABLE="$OUT_DIR/results-$STAMP.md"
: >"$RESULTS"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcp-load.XXXXXX")"
export TMP
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then stop_server; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mcp_load_pin servers

# --- installs and builds (idempotent) ------------------------------------------
if ! "$PYTHON" -c 'import mcp, uvicorn' 2>/dev/null; then
  log "installing the MCP Python SDK (pip install mcp)"
  "$PYTHON" -m pip install -q mcp
fi
MCP_PY_VERSION="$("$PYTHON" -c 'from importlib.metadata import version; print(version("mcp"))')"

if [[ "${MCP_LOAD_BUILD:-1}" != "0" ]]; then
  log "building toolgate-mcp-load (release)"
  cargo build --release --quiet -p toolgate-mcp-load
fi
[[ -x "$LOADGEN" ]] || { echo "missing $LOADGEN" >&2; exit 1; }

DEFAULT_TOOLGATE_CMD="$TARGET_DIR/release/toolgate --db sqlite://\$TMP/tg.db serve --http 127.0.0.1:\$PORT"
TOOLGATE_CMD="${TOOLGATE_SERVE_CMD:-$DEFAULT_TOOLGATE_CMD}"
TOOLGATE_TOOL="${TOOLGATE_TOOL:-calculator}"
DEFAULT_TOOLGATE_ARGS='{"expression":"1+1"}'
TOOLGATE_ARGS="${TOOLGATE_ARGS:-$DEFAULT_TOOLGATE_ARGS}"
NOTES=()
if wants toolgate && [[ -z "${TOOLGATE_SERVE_CMD:-}" ]]; then
  if [[ "${MCP_LOAD_BUILD:-1}" != "0" ]]; then
    log "building toolgate (release), if the workspace has it"
    cargo build --release --quiet --bin toolgate 2>"$TMP/toolgate-build.log" \
      || log "toolgate did not build (see below); its row will be skipped"
  fi
  if [[ ! -x "$TARGET_DIR/release/toolgate" ]]; then
    NOTES+=("toolgate: skipped, $TARGET_DIR/release/toolgate not found (set TOOLGATE_SERVE_CMD or build it)")
    ONLY="${ONLY//toolgate/}"
  elif command -v nm >/dev/null; then
    # How much of the committed symbol order this build laid out (crates/cli/build.rs); a
    # stale order shows up as a higher peak RSS, so the table says so.
    NOTES+=("$( ("$PYTHON" scripts/code_order.py check "$TARGET_DIR/release/toolgate" crates/cli/symbol-order.txt 2>&1 || true) | tr '\n' ' ')")
  fi
fi

# --- helpers -------------------------------------------------------------------
# start_server NAME COMMAND: runs COMMAND (bash syntax, $PORT/$TMP expanded)
# pinned to the server CPUs; sets SERVER_PID.
start_server() {
  local name="$1" cmd="$2"
  PORT="$(free_port)"
  export PORT
  log "starting $name on 127.0.0.1:$PORT"
  # Each exec replaces the previous process, so $! is the server's own PID.
  "${SERVER_PIN[@]}" bash -c "exec $cmd" >"$TMP/$name.log" 2>&1 &
  SERVER_PID=$!
  local deadline=$((SECONDS + 60))
  until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      log "$name exited before listening; its output:"
      cat "$TMP/$name.log" >&2
      SERVER_PID=""
      return 1
    fi
    if ((SECONDS > deadline)); then
      log "$name did not listen on port $PORT within 60 s"
      stop_server
      return 1
    fi
    sleep 0.1
  done
}

# Peak RSS (VmHWM) of the server and any processes it forked, in KiB.
peak_rss_kib() {
  local pid="$1" total=0 kib child
  kib="$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)"
  total=$((total + ${kib:-0}))
  for child in $(pgrep -P "$pid" 2>/dev/null || true); do
    total=$((total + $(peak_rss_kib "$child")))
  done
  echo "$total"
}

stop_server() {
  local pid="$SERVER_PID"
  SERVER_PID=""
  stop "$pid"
}

# bench NAME LABEL COMMAND TOOL ARGS [TOKEN]
bench() {
  local name="$1" label="$2" cmd="$3" tool="$4" args="$5" token="${6:-}"
  if ! start_server "$name" "$cmd"; then
    NOTES+=("$label: server failed to start (see log above)")
    return 0
  fi
  # Idle RSS: the server's resident memory once it listens and has settled, before any request.
  sleep 1
  local idle_kib
  idle_kib="$(awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0)"
  local load_args=(load --url "http://127.0.0.1:$PORT/mcp" --tool "$tool" --args "$args"
    --concurrency "$CONCURRENCY" --duration "$DURATION" --warmup "$WARMUP" --label "$label")
  log "loading $label: ${CONCURRENCY} sessions, ${WARMUP}s warm-up + ${DURATION}s"
  local line
  if ! line="$(MCP_LOAD_TOKEN="$token" "${CLIENT_PIN[@]}" "$LOADGEN" "${load_args[@]}")"; then
    NOTES+=("$label: load generator failed")
    stop_server
    return 0
  fi
  local rss_kib
  rss_kib="$(peak_rss_kib "$SERVER_PID")"
  stop_server
  "$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1])
r["peak_rss_kib"] = int(sys.argv[2])
r["round"] = int(sys.argv[3])
r["server_banner"] = sys.argv[4]
r["idle_rss_kib"] = int(sys.argv[5] or 0)
print(json.dumps(r))' "$line" "$rss_kib" "$ROUND" "$(head -n 1 "$TMP/$name.log")" "${idle_kib:-0}" >>"$RESULTS"
  log "$label: $line, idle RSS ${idle_kib} KiB, peak RSS ${rss_kib} KiB"
}

# --- the runs ------------------------------------------------------------------
LOADAVG_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
BARE_CMD="$(printf '%q' "$LOADGEN") bare-server --port \$PORT"
FASTMCP_CMD="$(printf '%q' "$PYTHON") $(printf '%q' "$ROOT/scripts/mcp_load_fastmcp.py") --port \$PORT"
ECHO_ARGS='{"text":"hello"}'

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  ((ROUNDS == 1)) || log "round $ROUND of $ROUNDS"
  if wants toolgate; then
    bench toolgate "toolgate" "$TOOLGATE_CMD" "$TOOLGATE_TOOL" "$TOOLGATE_ARGS" "${TOOLGATE_TOKEN:-}"
  fi
  if wants bare; then
    bench bare "bare rmcp" "$BARE_CMD" echo "$ECHO_ARGS"
  fi
  if wants fastmcp; then
    bench fastmcp "FastMCP" "$FASTMCP_CMD" echo "$ECHO_ARGS"
  fi
done

# --- the report ----------------------------------------------------------------
LOADAVG_AFTER="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
NOTES+=("load average before/after the runs: $LOADAVG_BEFORE / $LOADAVG_AFTER (anything else busy on the machine skews the figures)")
NOTES_TEXT="$(printf '%s\n' "${NOTES[@]+"${NOTES[@]}"}")"
"$PYTHON" - "$RESULTS" "$NOTES_TEXT" >"$TABLE" <<PY
import json, sys

from statistics import median

runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
notes = [n for n in sys.argv[2].splitlines() if n]
# One row per server: the median of each figure over the rounds.
by = {}
for run in runs:
    by.setdefault(run["label"], []).append(run)
rows = []
for label, group in by.items():
    row = dict(group[0])
    for key in ("rps", "p50_ms", "p99_ms"):
        row[key] = median(r[key] for r in group)
    row["peak_rss_kib"] = max(r["peak_rss_kib"] for r in group)
    row["idle_rss_kib"] = max(r.get("idle_rss_kib", 0) for r in group)
    row["errors"] = sum(r["errors"] for r in group)
    row["all_rps"] = [r["rps"] for r in group]
    rows.append(row)
by = {r["label"]: r for r in rows}

def ratio(a, b):
    if a in by and b in by and by[b]["rps"] > 0:
        return by[a]["rps"] / by[b]["rps"]
    return None

def fmt_ratio(value):
    return "–" if value is None else f"{value:.2f}×"

print("MCP \`tools/call\` over Streamable HTTP, closed loop: "
      "$CONCURRENCY concurrent sessions, ${WARMUP} s warm-up + ${DURATION} s measured per server"
      + ("" if $ROUNDS == 1 else f", $ROUNDS interleaved rounds (medians shown, peak RSS is the max)") + ".")
print()
print("Machine: $(nproc) CPU(s), $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1); "
      "pinning: $PIN_NOTE; Python SDK mcp $MCP_PY_VERSION.")
print()
print("| server | tool | req/s | p50 ms | p99 ms | idle RSS MiB | peak RSS MiB | errors | req/s vs bare rmcp | req/s vs FastMCP |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['label']} | \`{r['tool']}\` | {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
          f"| {r['idle_rss_kib'] / 1024:.1f} | {r['peak_rss_kib'] / 1024:.1f} | {r['errors']} "
          f"| {fmt_ratio(ratio(r['label'], 'bare rmcp'))} | {fmt_ratio(ratio(r['label'], 'FastMCP'))} |")
print()
tg_bare, tg_fast = ratio("toolgate", "bare rmcp"), ratio("toolgate", "FastMCP")

# Issue 24's targets, each against bare rmcp measured in the same run (medians of the rounds;
# peak RSS the largest of the rounds, idle RSS of toolgate absolute).
def target(name, value, limit, ok, unit=""):
    verdict = "PASS" if ok else "MISS"
    print(f"- {verdict} {name}: {value}{unit} (target {limit})")

if "toolgate" in by:
    tg = by["toolgate"]
    target("toolgate idle RSS", f"{tg['idle_rss_kib'] / 1024:.1f}", "≤ 20 MiB",
           tg["idle_rss_kib"] <= 20 * 1024, " MiB")
if "toolgate" in by and "bare rmcp" in by:
    tg, bare = by["toolgate"], by["bare rmcp"]
    if tg_bare is not None:
        target("throughput toolgate / bare rmcp", f"{tg_bare:.2f}", "≥ 0.80×", tg_bare >= 0.80, "×")
    if bare["p99_ms"] > 0:
        p99 = tg["p99_ms"] / bare["p99_ms"]
        target("p99 toolgate / bare rmcp", f"{p99:.2f}", "≤ 2×", p99 <= 2.0, "×")
    if bare["peak_rss_kib"] > 0:
        rss = tg["peak_rss_kib"] / bare["peak_rss_kib"]
        target("peak RSS toolgate / bare rmcp", f"{rss:.2f}", "≤ 3×", rss <= 3.0, "×")
if tg_fast is not None:
    verdict = "meets" if tg_fast >= 10 else "MISSES"
    print(f"- toolgate / FastMCP throughput: {tg_fast:.1f} ({verdict} the ≥ 10× target)")
bare_fast = ratio("bare rmcp", "FastMCP")
if bare_fast is not None:
    print(f"- bare rmcp / FastMCP throughput: {bare_fast:.1f}")
if $ROUNDS > 1:
    for r in rows:
        print(f"- {r['label']} req/s per round: " + ", ".join(f"{x:.0f}" for x in r["all_rps"]))
for r in rows:
    if r.get("server_banner"):
        print(f"- {r['label']}: {r['server_banner']}")
for n in notes:
    print(f"- note: {n}")
PY
cat "$TABLE"
log "results: $RESULTS and $TABLE"
if [[ -s "$TMP/toolgate-build.log" ]] && [[ ! -x "$TARGET_DIR/release/toolgate" ]]; then
  log "toolgate build output (last lines):"
  tail -n 5 "$TMP/toolgate-build.log" >&2
fi
