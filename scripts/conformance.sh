#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, on Node 22
# through npx) against toolgate's conformance fixtures, with the baseline of out-of-scope
# scenarios. Every tools, lifecycle, logging, progress, elicitation, SSE and DNS-rebinding
# scenario must pass.
#
# --through-gateway: the suite talks to `toolgate serve` acting as a gateway in front of the
# fixtures' server (an upstream `[servers.conformance]` entry with its url, no name prefix, its
# annotations trusted, the tools approved on first sight, loopback allowed by the network
# policy), with the same baseline as direct and the same answers: every scenario's checks and
# every tool's listed definition (title, description, schemas) equal the direct run's, and
# concurrent callers' elicitation and sampling requests each reach their own caller.
#
# --revision 2026-07-28: the suite's 0.2 line (@modelcontextprotocol/conformance 0.2.0-alpha.12,
# the first to test that revision) with `--requirements 2026-07-28` — exactly the scenarios that
# revision requires, at its wire — against the fixtures directly, with its own baseline
# (examples/conformance/expected-failures-2026-07-28.yml). 0.1.16 stays the run for the
# revisions with a handshake.
#
# Usage: scripts/conformance.sh [--through-gateway] [--suite active|all] [--revision 2026-07-28] [--debug]
#   --debug  use the dev profile instead of release (quicker to build while working on it; the
#            default is release, or TOOLGATE_TEST_PROFILE=dev|release when set: scripts/test.sh
#            sets dev, whose binaries its test build already made)
set -euo pipefail
cd "$(dirname "$0")/.."
suite="active"
revision=""
gateway=false
profile="${TOOLGATE_TEST_PROFILE:-release}"
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) suite="${2:?--suite needs a value}"; shift 2 ;;
    --through-gateway) gateway=true; shift ;;
    --revision) revision="${2:?--revision needs a value}"; shift 2 ;;
    --debug) profile="dev"; shift ;;
    *) echo "unknown option $1; usage: scripts/conformance.sh [--through-gateway] [--suite active|all] [--revision 2026-07-28] [--debug]" >&2; exit 2 ;;
  esac
done
case "$revision" in
  "") ;;
  2026-07-28)
    if $gateway; then
      echo "--revision 2026-07-28 runs against the fixtures directly; drop --through-gateway" >&2
      exit 2
    fi ;;
  *) echo "--revision $revision: the only revision with a run of its own is 2026-07-28 (the others are 0.1.16's)" >&2; exit 2 ;;
esac
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

# Both in every mode (the gateway mode needs toolgate): built together they share one feature
# set, so switching modes does not rebuild the fixtures.
packages=(-p toolgate-examples --example conformance -p toolgate-cli --bin toolgate)
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
  # The upstream is the fixtures' server; its tools keep their names (prefix "never") and are
  # governed by their own annotations (trust_annotations), as direct: the read-only ones need
  # no confirmation, and none of the others is destructive.
  cat >"$work/toolgate.toml" <<EOF
[network]
private_hosts = ["127.0.0.1"]

[servers.conformance]
url = "http://127.0.0.1:$fixtures_port/mcp"
prefix = "never"
trust_annotations = true
EOF
  toolgate=("$bin/toolgate" --config "$work/toolgate.toml")
  db="sqlite:$work/toolgate.db"
  # First sight approved up front: start the server once (its tools are listed and wait for
  # review), then approve them all. The fixtures' own copies of toolgate's built-in tools are
  # refused (the gateway's built-ins hold those names), as direct serves the built-ins too.
  "${toolgate[@]}" servers restart conformance --db "$db" >"$work/servers.log" 2>&1 \
    && "${toolgate[@]}" servers approve conformance --all --db "$db" >>"$work/servers.log" 2>&1 \
    || { echo "approving the fixtures' tools through toolgate servers failed:" >&2; cat "$work/servers.log" >&2; exit 1; }
  "${toolgate[@]}" serve --db "$db" --root "$work/root" --http "127.0.0.1:$port" 2>"$gateway_log" &
  pids+=($!)
  wait_healthy "$port" "toolgate serve (the gateway)" "$gateway_log"
fi

# Runs the suite against http://localhost:$1/mcp, results (checks.json per scenario) into $2.
run_suite() {
  if [ "$revision" = 2026-07-28 ]; then
    npx -y -p node@22 -p @modelcontextprotocol/conformance@0.2.0-alpha.12 -- \
      conformance server --url "http://localhost:$1/mcp" --requirements 2026-07-28 \
      --expected-failures examples/conformance/expected-failures-2026-07-28.yml -o "$2" </dev/null
    return
  fi
  npx -y -p node@22 -p @modelcontextprotocol/conformance@0.1.16 -- \
    conformance server --url "http://localhost:$1/mcp" --suite "$suite" \
    --expected-failures examples/conformance/expected-failures.yml -o "$2" </dev/null
}

status=0
if $gateway; then
  echo "direct (the fixtures' server itself):"
  run_suite "$fixtures_port" "$work/direct" | sed -n '/^Total:/p' || status=$?
  echo "through the gateway (toolgate serve in front of it):"
fi
run_suite "$port" "$work/results" | sed -n '/=== SUMMARY ===/,$p' || status=$?
if [ "$revision" = 2026-07-28 ]; then
  # The tasks extension's scenarios: `--requirements` reports them without scoring them, so
  # each runs on its own here and must pass with no failed check and no warning
  # (tasks-status-notifications is skipped by the suite itself: 0 checks).
  tasks_suite=(npx -y -p node@22 -p @modelcontextprotocol/conformance@0.2.0-alpha.12 -- conformance)
  mapfile -t task_scenarios < <("${tasks_suite[@]}" list </dev/null 2>/dev/null \
    | sed -n 's/^ *- \(tasks-[a-z0-9-]*\) \[extension\]$/\1/p')
  if [ "${#task_scenarios[@]}" -lt 10 ]; then
    echo "the suite listed ${#task_scenarios[@]} tasks-* scenarios, expected 10 (conformance list changed?)" >&2
    status=1
  fi
  passed=0
  for scenario in "${task_scenarios[@]}"; do
    out="$("${tasks_suite[@]}" server --url "http://localhost:$port/mcp" --scenario "$scenario" \
      -o "$work/tasks" </dev/null 2>&1)" || true
    line="$(grep -E '^Passed: [0-9]+/[0-9]+, [0-9]+ failed, [0-9]+ warnings' <<<"$out" | tail -1)"
    if [[ "$line" =~ ,\ 0\ failed,\ 0\ warnings$ ]]; then
      passed=$((passed + 1))
    else
      echo "tasks scenario $scenario: ${line:-no result}" >&2
      grep -E 'FAILURE|WARNING' <<<"$out" >&2 || true
      status=1
    fi
  done
  echo "Tasks extension: $passed of ${#task_scenarios[@]} scenarios pass every check."
fi
if $gateway && [ "$status" -eq 0 ]; then
  # Same baseline is the floor; the bar is the same answers: every scenario's checks (results,
  # content blocks, log and progress notifications, elicitation schemas) must equal the direct
  # run's, but for call ids, times, ports and the order concurrent SSE streams answer in.
  python3 - "$work/direct" "$work/results" "$fixtures_port" "$port" <<'PY' || status=$?
import json, os, re, sys

def norm(v, key=None):
    if isinstance(v, dict):
        return {k: norm(x, k) for k, x in v.items()
                if k not in ("timestamp", "callId", "fetchedAt", "index")}
    if isinstance(v, list):
        items = [norm(x) for x in v]
        return sorted(items, key=json.dumps) if key == "results" else items
    if isinstance(v, str):
        return re.sub(r"(localhost|127\.0\.0\.1):\d+", r"\1:PORT", v)
    return v

def load(d):
    out = {}
    for e in os.listdir(d):
        name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", e)
        with open(os.path.join(d, e, "checks.json")) as f:
            out[name] = norm(json.load(f))
    return out

direct, gateway = load(sys.argv[1]), load(sys.argv[2])
differ = [k for k in sorted(set(direct) | set(gateway)) if direct.get(k) != gateway.get(k)]
for k in differ:
    print(f"scenario {k} answers differently through the gateway:", file=sys.stderr)
    print("  direct:  " + json.dumps(direct.get(k), sort_keys=True), file=sys.stderr)
    print("  gateway: " + json.dumps(gateway.get(k), sort_keys=True), file=sys.stderr)

# Every tool as listed (annotations and _meta aside: the gateway's governance sets those).
import urllib.request

def rpc(url, sid, method, params=None, id_=1):
    body = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        body["id"] = id_
    if params is not None:
        body["params"] = params
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=30) as r:
        sid = r.headers.get("Mcp-Session-Id") or sid
        text = r.read().decode()
    data = [l[5:] for l in text.splitlines() if l.startswith("data:") and l[5:].strip()]
    return sid, [json.loads(d) for d in data] or ([json.loads(text)] if text.strip() else [])

def tools(port):
    url = f"http://127.0.0.1:{port}/mcp"
    info = {"name": "conformance.sh", "version": "1"}
    sid, _ = rpc(url, None, "initialize",
                 {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
    rpc(url, sid, "notifications/initialized", None, None)
    listed, cursor = {}, None
    while True:
        _, answers = rpc(url, sid, "tools/list", {"cursor": cursor} if cursor else {})
        result = answers[-1]["result"]
        for t in result["tools"]:
            listed[t["name"]] = {k: v for k, v in t.items() if k not in ("annotations", "_meta")}
        cursor = result.get("nextCursor")
        if not cursor:
            return listed

direct_tools, gateway_tools = tools(sys.argv[3]), tools(sys.argv[4])
for name in sorted(set(direct_tools) | set(gateway_tools)):
    if direct_tools.get(name) != gateway_tools.get(name):
        differ.append(f"tool {name}")
        print(f"tool {name} is listed differently through the gateway:", file=sys.stderr)
        print("  direct:  " + json.dumps(direct_tools.get(name), sort_keys=True), file=sys.stderr)
        print("  gateway: " + json.dumps(gateway_tools.get(name), sort_keys=True), file=sys.stderr)

# Concurrent callers: each one's elicitation and sampling requests reach that caller alone
# (the suite calls one at a time). Each caller answers with its own name; its result must
# carry that name.
import threading

def stream(url, sid, response, me):
    last = None
    for line in response:
        line = line.decode().strip()
        if not (line.startswith("data:") and line[5:].strip()):
            continue
        msg = json.loads(line[5:])
        if "method" in msg and "id" in msg:
            threading.Thread(target=answer, args=(url, sid, msg, me), daemon=True).start()
        elif "result" in msg or "error" in msg:
            last = msg
    return last

def answer(url, sid, msg, me):
    if msg["method"] == "elicitation/create":
        result = {"action": "accept", "content": {"username": me, "email": me + "@example.com"}}
    else:
        result = {"role": "assistant", "content": {"type": "text", "text": me}, "model": "m"}
    post(url, sid, {"jsonrpc": "2.0", "id": msg["id"], "result": result}).read()

def post(url, sid, body):
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    return urllib.request.urlopen(urllib.request.Request(url, json.dumps(body).encode(), headers), timeout=30)

def caller(port, tool, me, out):
    url = f"http://127.0.0.1:{port}/mcp"
    caps = {"elicitation": {}, "sampling": {}}
    r = post(url, None, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": {"name": me, "version": "1"}}})
    sid = r.headers.get("Mcp-Session-Id")
    r.read()
    post(url, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"}).read()
    # The session's standalone stream too, where a request not tied to a call would arrive.
    def listen():
        try:
            get = urllib.request.Request(url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid})
            stream(url, sid, urllib.request.urlopen(get, timeout=10), me)
        except Exception:
            pass
    threading.Thread(target=listen, daemon=True).start()
    args = {"message": "Who are you?"} if tool == "test_elicitation" else {"prompt": "Who are you?"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    last = stream(url, sid, post(url, sid, call), me) or {}
    out[me] = json.dumps(last.get("result", last).get("content", last))

for tool in ("test_elicitation", "test_sampling"):
    out = {}
    threads = [threading.Thread(target=caller, args=(sys.argv[4], tool, f"caller{i}", out)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for me in sorted(out):
        if me not in out[me]:
            differ.append(f"concurrent {tool}")
            print(f"through the gateway, concurrent {tool}: {me} got {out[me]}", file=sys.stderr)

if differ:
    sys.exit(1)
print(f"Through the gateway, all {len(direct)} scenarios answer as direct, all "
      f"{len(direct_tools)} tools are listed as direct, and three concurrent callers' "
      "elicitation and sampling requests each reach their own caller.")
PY
fi
if [ "$status" -ne 0 ]; then
  echo "conformance failed (exit $status)" >&2
  for log in "${logs[@]}"; do
    echo "--- $(basename "$log"):" >&2
    cat "$log" >&2
  done
fi
exit "$status"
