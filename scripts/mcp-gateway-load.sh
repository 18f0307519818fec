#!/usr/bin/env bash
# MCP gateway benchmark: `tools/call` of a bare rmcp upstream's `echo` tool
# (toolgate-mcp-load bare-server), reached
#   direct          straight at the upstream (Streamable HTTP),
#   toolgate-http   through toolgate, the upstream a [servers.bare] url entry,
#   toolgate-stdio  through toolgate, the upstream a [servers.bare] command entry
#                   (started by toolgate in its sandbox, default isolation),
#   mcp-proxy       through the Python gateway mcp-proxy (PyPI), the upstream
#                   its stdio child (mcp-proxy fronts stdio servers only),
# and toolgate-own: toolgate's own trivial tool, the reference for the CPU a
# proxied call may add. Same load generator, same run, the same upstream
# process for direct and toolgate-http. Per row: requests/s, p50/p99, CPU per
# call of the front process (and its kernel part) and of the upstream, peak RSS of the front and of
# its children. Prints a markdown table and the verdicts on the issue's targets
# (toolgate ≥ 10× mcp-proxy's throughput; the CPU a proxied call adds to a call
# of toolgate's own trivial tool no more than that call's CPU, i.e. at most 2×,
# the reading scripts/mcp-instructions.sh --gateway applies too).
#
# Usage: scripts/mcp-gateway-load.sh [--quick] [--concurrency N] [--duration S]
#                                    [--warmup S] [--only LIST]
#   --only LIST   comma-separated subset of
#                 direct,toolgate-own,toolgate-http,toolgate-stdio,mcp-proxy
#   --rounds N    run the rows N times, interleaved, and report the median of
#                 each figure (default 1; MCP_LOAD_ROUNDS)
#   (the other options as in scripts/mcp-load.sh)
#
# Environment:
#   TOOLGATE_BIN          toolgate (default target/release/toolgate, built if
#                         missing unless MCP_LOAD_BUILD=0); rows skipped if absent
#   TOOLGATE_TOKEN        bearer token for toolgate, if it needs one
#   TOOLGATE_OWN_TOOL / TOOLGATE_OWN_ARGS
#                         toolgate's own trivial tool (calculator, {"expression":"1+1"})
#   TOOLGATE_PROXIED_TOOL the upstream's echo as toolgate names it (bare__echo)
#   TOOLGATE_HTTP_CONFIG / TOOLGATE_STDIO_CONFIG
#                         config files to use instead of the built-in ones;
#                         @UPSTREAM_URL@ and @UPSTREAM_BIN@ are replaced
#   TOOLGATE_PREPARE      a command run (bash; $TOOLGATE_BIN, $CONFIG and $DB set)
#                         after the config is written and before `serve`. The
#                         default starts the upstream once (listing its tools) and approves
#                         them (a server's first sight waits for review; set it
#                         empty to skip):
#                         "$TOOLGATE_BIN" --config "$CONFIG" --db "$DB" servers restart bare
#                         "$TOOLGATE_BIN" --config "$CONFIG" --db "$DB" servers approve bare --all
#   MCP_PROXY_VERSION     mcp-proxy from PyPI, installed in a venv under the
#                         target directory (default 0.13.0)
#   MCP_LOAD_SERVER_CPUS / MCP_LOAD_CLIENT_CPUS / MCP_LOAD_PIN / MCP_LOAD_OUT /
#   MCP_LOAD_BUILD / PYTHON  as in scripts/mcp-load.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

LOG_PREFIX=mcp-gateway-load
ONLY="direct,toolgate-own,toolgate-http,toolgate-stdio,mcp-proxy"
# shellcheck source=scripts/mcp-load-common.sh
source "$ROOT/scripts/mcp-load-common.sh"
mcp_load_args "$@"

TOOLGATE_BIN="${TOOLGATE_BIN:-$TARGET_DIR/release/toolgate}"
RESULTS="$OUT_DIR/gateway-$STAMP.jsonl"
TABLE="$OUT_DIR/gateway-$STAMP.md"
: >"$RESULTS"
CLK_TCK="$(getconf CLK_TCK)"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcp-gateway-load.XXXXXX")"
export TMP
SERVER_PID=""
UPSTREAM_PID=""
NOTES=()

mcp_load_pin "gateways and upstreams"

# --- processes -----------------------------------------------------------------

# launch NAME PORT COMMAND: runs COMMAND (bash, exec'd: $! is the server itself)
# pinned to the server CPUs and waits until PORT listens; prints the PID.
launch() {
  local name="$1" port="$2" cmd="$3" pid
  log "starting $name on 127.0.0.1:$port"
  PORT="$port" "${SERVER_PIN[@]}" bash -c "exec $cmd" >"$TMP/$name.log" 2>&1 &
  pid=$!
  local deadline=$((SECONDS + 60))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "$name exited before listening; the end of its output:"
      tail -n 20 "$TMP/$name.log" >&2
      return 1
    fi
    if ((SECONDS > deadline)); then
      log "$name did not listen on port $port within 60 s"
      stop "$pid"
      return 1
    fi
    sleep 0.1
  done
  echo "$pid"
}

cleanup() {
  stop "$SERVER_PID"
  stop "$UPSTREAM_PID"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

descendants() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null || true); do
    echo "$child"
    descendants "$child"
  done
}

# CPU time (clock ticks) of one process, all its threads: user + system, or with `sys` as the
# second argument its system (kernel) part alone.
cpu_ticks() {
  awk -v only="${2:-}" '{ sub(/^.*\) /, ""); print (only == "sys" ? $13 : $12 + $13) }' \
    "/proc/$1/stat" 2>/dev/null || echo 0
}
# The same, summed over the process's descendants.
children_ticks() {
  local total=0 pid
  for pid in $(descendants "$1"); do total=$((total + $(cpu_ticks "$pid"))); done
  echo "$total"
}
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
children_hwm_kib() {
  local total=0 pid
  for pid in $(descendants "$1"); do total=$((total + $(hwm_kib "$pid"))); done
  echo "$total"
}

# measure ROW LABEL FRONT_PID URL TOOL ARGS [TOKEN]: loads URL, then appends one
# JSON line with the load generator's figures, the CPU the front process (and
# its children, and the shared upstream when the row uses it) spent during the
# load, per call, and the front's peak RSS.
measure() {
  local row="$1" label="$2" front="$3" url="$4" tool="$5" args="$6" token="${7:-}"
  local shared=""
  [[ "$row" == "toolgate-http" ]] && shared="$UPSTREAM_PID"
  local f0 c0 s0=0 f1 c1 s1=0 k0 k1 line
  f0="$(cpu_ticks "$front")"; c0="$(children_ticks "$front")"; k0="$(cpu_ticks "$front" sys)"
  [[ -n "$shared" ]] && s0="$(cpu_ticks "$shared")"
  log "loading $label: $CONCURRENCY sessions, ${WARMUP}s warm-up + ${DURATION}s"
  if ! line="$(MCP_LOAD_TOKEN="$token" "${CLIENT_PIN[@]}" "$LOADGEN" load --url "$url" \
      --tool "$tool" --args "$args" --concurrency "$CONCURRENCY" --duration "$DURATION" \
      --warmup "$WARMUP" --label "$label" 2>"$TMP/$row.load.err")"; then
    NOTES+=("$label: the load generator failed: $(tail -n 3 "$TMP/$row.load.err" | tr '\n' ' ')")
    return 0
  fi
  f1="$(cpu_ticks "$front")"; c1="$(children_ticks "$front")"; k1="$(cpu_ticks "$front" sys)"
  [[ -n "$shared" ]] && s1="$(cpu_ticks "$shared")"
  "$PYTHON" -c '
import json, sys
r = json.loads(sys.argv[1])
row, front, children, shared, tck, hwm, chwm = sys.argv[2:9]
calls = r["total"] + r["warmup_requests"]
per = lambda ticks: round(int(ticks) * 1e6 / int(tck) / max(calls, 1), 1)
r.update(row=row, round=int(sys.argv[9]), calls_measured_for_cpu=calls,
         front_cpu_us_per_call=per(front), front_sys_us_per_call=per(sys.argv[10]),
         upstream_cpu_us_per_call=per(int(children) + int(shared)),
         front_peak_rss_kib=int(hwm), children_peak_rss_kib=int(chwm))
print(json.dumps(r))' "$line" "$row" $((f1 - f0)) $((c1 - c0)) $((s1 - s0)) "$CLK_TCK" \
    "$(hwm_kib "$front")" "$(children_hwm_kib "$front")" "$ROUND" $((k1 - k0)) >>"$RESULTS"
  log "$label: $(tail -n 1 "$RESULTS")"
}

# --- installs and builds ---------------------------------------------------------
if [[ "${MCP_LOAD_BUILD:-1}" != "0" ]]; then
  log "building toolgate-mcp-load (release)"
  cargo build --release --quiet -p toolgate-mcp-load
fi
[[ -x "$LOADGEN" ]] || { echo "missing $LOADGEN" >&2; exit 1; }

TOOLGATE_ROWS="toolgate-own toolgate-http toolgate-stdio"
if wants toolgate-own || wants toolgate-http || wants toolgate-stdio; then
  if [[ ! -x "$TOOLGATE_BIN" && "${MCP_LOAD_BUILD:-1}" != "0" ]]; then
    log "building toolgate (release)"
    cargo build --release --quiet --bin toolgate 2>"$TMP/toolgate-build.log" \
      || log "toolgate did not build: $(tail -n 3 "$TMP/toolgate-build.log" | tr '\n' ' ')"
  fi
  if [[ ! -x "$TOOLGATE_BIN" ]]; then
    NOTES+=("toolgate rows skipped: $TOOLGATE_BIN not found (build it or set TOOLGATE_BIN)")
    for r in $TOOLGATE_ROWS; do ONLY="${ONLY//$r/}"; done
  fi
fi

MCP_PROXY_VERSION="${MCP_PROXY_VERSION:-0.13.0}"
VENV="$TARGET_DIR/mcp-proxy-venv"
if wants mcp-proxy; then
  if ! "$VENV/bin/mcp-proxy" --version 2>/dev/null | grep -q "$MCP_PROXY_VERSION"; then
    log "installing mcp-proxy $MCP_PROXY_VERSION from PyPI into $VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q "mcp-proxy==$MCP_PROXY_VERSION"
  fi
fi

# --- toolgate's configurations ---------------------------------------------------
# The upstream's tool is trusted as read-only without confirmation: the benchmark
# measures forwarding, not an approval gate.
HTTP_TEMPLATE='[network]
private_hosts = ["127.0.0.1"]

[servers.bare]
url = "@UPSTREAM_URL@"
eager = true
[servers.bare.defaults]
effect = "read"
requires_confirmation = false
'
STDIO_TEMPLATE='[servers.bare]
command = "@UPSTREAM_BIN@"
args = ["bare-server", "--stdio"]
eager = true
[servers.bare.defaults]
effect = "read"
requires_confirmation = false
'
# write_config ROW TEMPLATE_FILE_OR_EMPTY BUILTIN: the config file of a toolgate row.
write_config() {
  local row="$1" file="$2" builtin="$3" text
  if [[ -n "$file" ]]; then text="$(cat "$file")"; else text="$builtin"; fi
  text="${text//@UPSTREAM_URL@/$UPSTREAM_URL}"
  text="${text//@UPSTREAM_BIN@/$LOADGEN}"
  printf '%s\n' "$text" >"$TMP/$row.toml"
  echo "$TMP/$row.toml"
}

# shellcheck disable=SC2016 # expanded by the bash that runs it
DEFAULT_PREPARE='set -e
"$TOOLGATE_BIN" --config "$CONFIG" --db "$DB" servers restart bare
"$TOOLGATE_BIN" --config "$CONFIG" --db "$DB" servers approve bare --all'

# toolgate_row ROW LABEL CONFIG TOOL ARGS
toolgate_row() {
  local row="$1" label="$2" config="$3" tool="$4" args="$5" port
  port="$(free_port)"
  local db="sqlite://$TMP/$row.db"
  local prepare="${TOOLGATE_PREPARE-$DEFAULT_PREPARE}"
  if [[ -n "$prepare" && -n "$config" ]]; then
    CONFIG="$config" DB="$db" TOOLGATE_BIN="$TOOLGATE_BIN" bash -c "$prepare" \
      >"$TMP/$row.prepare.log" 2>&1 \
      || NOTES+=("$label: TOOLGATE_PREPARE failed: $(tail -n 2 "$TMP/$row.prepare.log" | tr '\n' ' ')")
  fi
  local cfg_arg=""
  [[ -n "$config" ]] && cfg_arg="--config $(printf '%q' "$config")"
  if ! SERVER_PID="$(launch "$row" "$port" "$(printf '%q' "$TOOLGATE_BIN") $cfg_arg --db $db serve --http 127.0.0.1:$port")"; then
    SERVER_PID=""
    NOTES+=("$label: toolgate did not start: $(tail -n 2 "$TMP/$row.log" | tr '\n' ' ')")
    return 0
  fi
  measure "$row" "$label" "$SERVER_PID" "http://127.0.0.1:$port/mcp" "$tool" "$args" "${TOOLGATE_TOKEN:-}"
  stop "$SERVER_PID"
  SERVER_PID=""
}

# --- the runs ----------------------------------------------------------------------
LOADAVG_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
ECHO_ARGS='{"text":"hello"}'
UPSTREAM_PORT="$(free_port)"
UPSTREAM_URL="http://127.0.0.1:$UPSTREAM_PORT/mcp"
if wants direct || wants toolgate-http; then
  UPSTREAM_PID="$(launch upstream "$UPSTREAM_PORT" "$(printf '%q' "$LOADGEN") bare-server --port $UPSTREAM_PORT")"
fi

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
  ((ROUNDS == 1)) || log "round $ROUND of $ROUNDS"
  if wants direct; then
    measure direct "direct (bare rmcp)" "$UPSTREAM_PID" "$UPSTREAM_URL" echo "$ECHO_ARGS"
  fi
  if wants toolgate-own; then
    DEFAULT_OWN_ARGS='{"expression":"1+1"}'
    toolgate_row toolgate-own "toolgate, own tool" "" "${TOOLGATE_OWN_TOOL:-calculator}" \
      "${TOOLGATE_OWN_ARGS:-$DEFAULT_OWN_ARGS}"
  fi
  PROXIED="${TOOLGATE_PROXIED_TOOL:-bare__echo}"
  if wants toolgate-http; then
    toolgate_row toolgate-http "toolgate → bare (HTTP)" \
      "$(write_config toolgate-http "${TOOLGATE_HTTP_CONFIG:-}" "$HTTP_TEMPLATE")" "$PROXIED" "$ECHO_ARGS"
  fi
  if wants toolgate-stdio; then
    toolgate_row toolgate-stdio "toolgate → bare (stdio)" \
      "$(write_config toolgate-stdio "${TOOLGATE_STDIO_CONFIG:-}" "$STDIO_TEMPLATE")" "$PROXIED" "$ECHO_ARGS"
  fi
  if wants mcp-proxy; then
    port="$(free_port)"
    if SERVER_PID="$(launch mcp-proxy "$port" "$(printf '%q' "$VENV/bin/mcp-proxy") --log-level WARNING --host 127.0.0.1 --port $port -- $(printf '%q' "$LOADGEN") bare-server --stdio")"; then
      measure mcp-proxy "mcp-proxy $MCP_PROXY_VERSION → bare (stdio)" "$SERVER_PID" \
        "http://127.0.0.1:$port/mcp" echo "$ECHO_ARGS"
      stop "$SERVER_PID"
    else
      NOTES+=("mcp-proxy did not start (see its log above)")
    fi
    SERVER_PID=""
  fi
done
stop "$UPSTREAM_PID"
UPSTREAM_PID=""

# --- the report ----------------------------------------------------------------------
NOTES+=("load average before/after: $LOADAVG_BEFORE / $(cut -d' ' -f1-3 /proc/loadavg) (anything else busy skews the figures)")
NOTES_TEXT="$(printf '%s\n' "${NOTES[@]+"${NOTES[@]}"}")"
"$PYTHON" - "$RESULTS" "$NOTES_TEXT" >"$TABLE" <<PY
import json, sys

from statistics import median

runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
notes = [n for n in sys.argv[2].splitlines() if n]
# One row per path: the median of each figure over the rounds (peak RSS: the max).
groups = {}
for run in runs:
    groups.setdefault(run["row"], []).append(run)
rows = []
for group in groups.values():
    row = dict(group[0])
    for key in ("rps", "p50_ms", "p99_ms", "front_cpu_us_per_call", "upstream_cpu_us_per_call"):
        row[key] = median(r[key] for r in group)
    row["front_sys_us_per_call"] = median(r.get("front_sys_us_per_call", 0) for r in group)
    for key in ("front_peak_rss_kib", "children_peak_rss_kib"):
        row[key] = max(r[key] for r in group)
    row["errors"] = sum(r["errors"] for r in group)
    row["all_rps"] = [r["rps"] for r in group]
    rows.append(row)
by = {r["row"]: r for r in rows}

def ratio(a, b):
    if a in by and b in by and by[b]["rps"] > 0:
        return by[a]["rps"] / by[b]["rps"]
    return None

def fmt(value):
    return "–" if value is None else f"{value:.2f}×"

print("MCP \`tools/call\` of a bare rmcp upstream's \`echo\`, closed loop: "
      "$CONCURRENCY concurrent sessions, ${WARMUP} s warm-up + ${DURATION} s measured per row"
      + ("." if $ROUNDS == 1 else ", $ROUNDS interleaved rounds (medians shown, peak RSS is the max)."))
print()
print("Machine: $NCPU CPU(s), $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1); "
      "pinning: $PIN_NOTE. CPU per call counts warm-up calls too (CPU time over the whole load / calls).")
print()
print("| path | req/s | p50 ms | p99 ms | front CPU µs/call | of it kernel | upstream CPU µs/call | front peak RSS MiB | children RSS MiB | errors | req/s vs direct | req/s vs mcp-proxy |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['label']} | {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
          f"| {r['front_cpu_us_per_call']:.0f} | {r['front_sys_us_per_call']:.0f} | {r['upstream_cpu_us_per_call']:.0f} "
          f"| {r['front_peak_rss_kib'] / 1024:.1f} | {r['children_peak_rss_kib'] / 1024:.1f} | {r['errors']} "
          f"| {fmt(ratio(r['row'], 'direct'))} | {fmt(ratio(r['row'], 'mcp-proxy'))} |")
print()
for row in ("toolgate-stdio", "toolgate-http"):
    x = ratio(row, "mcp-proxy")
    if x is not None:
        print(f"- {by[row]['label']} / mcp-proxy throughput: {x:.1f}× ({'meets' if x >= 10 else 'MISSES'} the ≥ 10× target)")
own = by.get("toolgate-own")
for row in ("toolgate-http", "toolgate-stdio"):
    if own and row in by:
        total, ref = by[row]["front_cpu_us_per_call"], own["front_cpu_us_per_call"]
        added = total - ref
        print(f"- toolgate's CPU per proxied call ({by[row]['label']}): {total:.0f} µs, {added:.0f} µs more than "
              f"the {ref:.0f} µs of a call of its own tool ({'meets' if added <= ref else 'MISSES'} the target: "
              f"added <= own, i.e. <= 2x)")
if $ROUNDS > 1:
    for r in rows:
        print(f"- {r['label']} req/s per round: " + ", ".join(f"{x:.0f}" for x in r["all_rps"]))
for n in notes:
    print(f"- note: {n}")
PY
cat "$TABLE"
log "results: $RESULTS and $TABLE"
