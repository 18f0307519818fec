#!/usr/bin/env python3
"""Several `toolgate serve` instances on one PostgreSQL database behind HAProxy.

The check (default): three instances on a fresh database, HAProxy on 127.0.0.1 in front of them
(round robin, not sticky: every request may land on any instance), driven over REST and by
MCP clients (stateless 2026-07-28 requests):

- rate limit: a principal limited to N calls per second (burst N) calls as fast as it can for a
  few seconds through HAProxy; it gets about N per second across the cluster (at most the burst
  plus N per second, with 15% slack), not 3N;
- definitions: a definition added on instance 1 is readable on instances 2 and 3, a
  `definition` event for it reaches a `/v1/events` stream opened on instance 3 (PostgreSQL
  LISTEN/NOTIFY between the instances), and MCP `subscriptions/listen` streams on 2 and 3 get
  `notifications/tools/list_changed`, after which their MCP `tools/list` lists it;
- legacy MCP sessions (2025-06-18, in one instance's memory): a session opened through a second
  HAProxy frontend that is sticky on the `Mcp-Session-Id` response header answers every
  `tools/list`; through plain round robin only the requests that land on its instance do
  (reported, not asserted: sessions that work anywhere would be welcome);
- tasks (MCP 2026-07-28 stateless requests, the tasks extension): a task-augmented call of a
  tool that requires confirmation made on instance 1 is approved over REST on 2 and reads
  `completed` with the call's result on 3; a pending task cancelled on 2 is withdrawn (denied,
  never run) and reads `cancelled` on 3; a long call running as a task on 1, and an approved call
  running on 2, are cancelled by `tasks/cancel` sent to 3 (a cancel request in the store, which
  the running instance follows) and read `cancelled` elsewhere;
- requestState (2026-07-28 input-required rounds): the first round on 1, the client's answer
  with its `requestState` on 2 runs the call; the same answer replayed on 3 is refused;
- kill -9 under load: writing calls (REST, and stateless MCP `tools/call` through the round-robin
  frontend) and approvals (created, then approved, through HAProxy) run
  while one instance is SIGKILLed; afterwards (the killed instance restarted once the load has
  stopped, so its startup recovery settles what it was running) every approval id handed out
  still exists, every acknowledged approval ended `executed` (or `indeterminate` when it was
  running on the killed instance), every answered call has its audit record
  (`/v1/calls/{callId}`), and `toolgate audit verify` passes.

--redis URL: the same cluster with `[cluster] redis_url = URL` (a key prefix of the run's own), so
the limits are counted in Redis instead of PostgreSQL; only the rate-limit check runs (the others
do not involve the limits). Redis unreachable: skipped, or a failure with CI=true.

--throughput: calls per second through HAProxy with 1, 2 and 3 instances (a read-only built-in,
closed loop, keep-alive clients in several processes), printed as a table.

Stdlib only; needs haproxy (scripts/cluster.sh installs Debian's package) and psql. PostgreSQL
at 127.0.0.1:5432 (user postgres); when it is unreachable the run is skipped, or fails with
CI=true. Usage:
    python3 scripts/cluster.py [--binary target/debug/toolgate]
    python3 scripts/cluster.py --redis redis://127.0.0.1:6379 [--binary …]
    python3 scripts/cluster.py --throughput --binary target/release/toolgate
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import http.server
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pgscratch import PG_HOST, PG_PORT, postgres_problem, psql

ROOT = Path(__file__).resolve().parent.parent
RATE = 10  # the limited principal's calls per second (and burst)

TOKENS = {"admin": "cluster-admin-token", "limited": "cluster-limited-token",
          "loader": "cluster-loader-token"}


class Failed(Exception):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body=None, who="admin", timeout=15.0,
            conn: http.client.HTTPConnection | None = None):
    """(status, parsed JSON body); raises OSError/HTTPException when nothing answers."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {TOKENS[who]}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        if own:
            conn.close()
    try:
        return resp.status, (json.loads(raw) if raw else None)
    except ValueError:
        return resp.status, raw.decode(errors="replace")


# --------------------------------------------------------------------------------------------
# The cluster: instances, HAProxy, the effect server


class Cluster:
    def __init__(self, binary: Path, work: Path, db_url: str, effect_port: int,
                 redis_url: str | None = None):
        self.binary, self.work, self.db_url = binary, work, db_url
        self.redis = redis_url
        self.effect_port = effect_port
        self.procs: dict[int, subprocess.Popen] = {}
        self.ports: dict[int, int] = {}
        self.haproxy: subprocess.Popen | None = None
        self.lb_port = free_port()
        self.sticky_port = free_port()  # /mcp with legacy sessions: sticky on Mcp-Session-Id
        key = work / "audit.key"
        principals = "".join(
            f'\n[principals.{name}]\ntoken_sha256 = "{hashlib.sha256(tok.encode()).hexdigest()}"\n'
            + {"admin": 'grants = ["tool.*", "toolgate.tools.manage", '
                        '"toolgate.approvals.decide", "toolgate.audit.read"]\n',
               "limited": f'grants = ["tool.*"]\nrate_limit = {{ burst = {RATE}, '
                          f'per_second = {RATE} }}\n',
               "loader": 'grants = ["tool.*"]\n'}[name]
            for name, tok in TOKENS.items())
        if redis_url is not None:
            principals += (f'\n[cluster]\nredis_url = "{redis_url}"\n'
                           f'key_prefix = "toolgate-cluster:{os.getpid()}:{time.time_ns()}:"\n')
        for i in (1, 2, 3):
            (work / f"instance{i}.toml").write_text(
                f'plan = "enterprise"\n\n[audit]\nkey_file = "{key}"\n'
                f'checkpoint_file = "{work / f"checkpoint{i}.json"}"\n{principals}')

    def config(self, i: int) -> Path:
        return self.work / f"instance{i}.toml"

    def start(self, i: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_ALLOW_PRIVATE_NETWORK="1", TOOLGATE_LOG="warn")
        port = self.ports.setdefault(i, free_port())
        log = open(self.work / f"instance{i}.log", "ab")
        self.procs[i] = subprocess.Popen(
            [str(self.binary), "--config", str(self.config(i)), "--db", self.db_url,
             "serve", "--http", f"127.0.0.1:{port}"],
            cwd=self.work, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.procs[i].poll() is not None:
                raise Failed(f"instance {i} exited with {self.procs[i].returncode}; see "
                             f"{self.work / f'instance{i}.log'}")
            try:
                if request(port, "GET", "/healthz", timeout=2)[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        raise Failed(f"instance {i} did not come up within 60 s")

    def kill(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def start_haproxy(self, instances: list[int]) -> None:
        servers = "".join(
            f"    server t{i} 127.0.0.1:{self.ports[i]} check inter 200 fall 1 rise 2\n"
            for i in instances)
        cfg = self.work / "haproxy.cfg"
        cfg.write_text(f"""\
global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch 1
frontend toolgate
    bind 127.0.0.1:{self.lb_port}
    default_backend instances
backend instances
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
{servers}
# Legacy MCP sessions live in one instance's memory: route a session's requests to the
# instance that answered its initialize (the Mcp-Session-Id response header).
frontend toolgate_sticky
    bind 127.0.0.1:{self.sticky_port}
    default_backend sticky
backend sticky
    balance roundrobin
    stick-table type string len 64 size 100k expire 30m
    stick match req.hdr(Mcp-Session-Id)
    stick store-response res.hdr(Mcp-Session-Id)
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
{servers}""")
        log = open(self.work / "haproxy.log", "ab")
        self.haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if request(self.lb_port, "GET", "/healthz", timeout=2)[0] == 200:
                    time.sleep(0.5)  # every server's first health check
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        raise Failed("haproxy did not come up; see haproxy.log")

    def stop(self) -> None:
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            self.haproxy.wait()
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


class Effects(http.server.ThreadingHTTPServer):
    """Counts each token the side-effect tool sends."""

    def __init__(self):
        self.tokens: list[str] = []
        self.lock = threading.Lock()

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    outer.tokens.append(json.loads(body).get("token", ""))
                if self.path == "/slow":  # a long call: cancelled long before it answers
                    time.sleep(15)
                out = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, daemon=True).start()


def definition(name: str, effect_port: int, confirm: bool, slow: bool = False) -> dict:
    return {
        "name": name,
        "description": "Records a token at the cluster test's effect server (a counted write).",
        "category": "external_api",
        "effect": "write",
        "consequence": "medium",
        "requires_confirmation": confirm,
        "idempotent": False,
        "parameters": [{"name": "token", "type": "string", "required": True}],
        "constraints": {"retryable": False, "max_attempts": 1, "timeout_ms": 20000},
        "run": {"kind": "http", "method": "POST",
                "url": f"http://127.0.0.1:{effect_port}/{'slow' if slow else 'effect'}",
                "body": ["token"]},
        **({"tasks": "optional"} if slow else {}),
    }


# --------------------------------------------------------------------------------------------
# The checks


def check_rate_limit(c: Cluster, seconds: float = 4.0) -> str:
    ok = refused = other = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker():
        nonlocal ok, refused, other
        conn = http.client.HTTPConnection("127.0.0.1", c.lb_port, timeout=15)
        while time.monotonic() < stop:
            try:
                status, body = request(c.lb_port, "POST", "/v1/tools/calculator/call",
                                       {"arguments": {"expression": "1+1"}}, who="limited",
                                       conn=conn)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", c.lb_port, timeout=15)
                continue
            with lock:
                if status == 200 and isinstance(body, dict) and "error" not in body:
                    ok += 1
                elif isinstance(body, dict) and body.get("errorKind") == "rate_limited":
                    refused += 1
                else:
                    other += 1
        conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    allowed = RATE + RATE * elapsed
    line = (f"rate limit{' (counted in Redis)' if c.redis else ''}: {ok} calls allowed in {elapsed:.1f} s at {RATE}/s (burst {RATE}) "
            f"across 3 instances; at most {allowed:.0f} expected; {refused} refused "
            f"rate_limited, {other} other")
    if other or ok > allowed * 1.15 or ok < RATE * elapsed * 0.6 or refused == 0:
        raise Failed(line)
    return line


def stream_lines(resp, seconds: float):
    """The lines of an event stream as they come, for at most `seconds` (or until it ends)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = resp.fp.readline()
        if not line:
            return
        yield line


def check_definitions(c: Cluster) -> str:
    name = "cluster_defined"
    # A /v1/events stream on instance 3 before the definition is added on instance 1.
    seen = threading.Event()

    def listen():
        conn = http.client.HTTPConnection("127.0.0.1", c.ports[3], timeout=15)
        conn.request("GET", "/v1/events", headers={"Authorization": f"Bearer {TOKENS['admin']}",
                                                   "Accept": "text/event-stream"})
        for line in stream_lines(conn.getresponse(), 15):
            if name.encode() in line:
                seen.set()
                break
        conn.close()

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    # And an MCP 2026-07-28 `subscriptions/listen` stream on instances 2 and 3: each must be told
    # `notifications/tools/list_changed`.
    acknowledged = {i: threading.Event() for i in (2, 3)}
    changed = {i: threading.Event() for i in (2, 3)}

    def listen_mcp(i: int):
        params = {"notifications": {"toolsListChanged": True}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}
        conn = http.client.HTTPConnection("127.0.0.1", c.ports[i], timeout=15)
        conn.request("POST", "/mcp", body=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}).encode(),
            headers={"Authorization": f"Bearer {TOKENS['loader']}",
                     "Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream",
                     "MCP-Protocol-Version": "2026-07-28",
                     "Mcp-Method": "subscriptions/listen"})
        for line in stream_lines(conn.getresponse(), 15):
            if b"notifications/subscriptions/acknowledged" in line:
                acknowledged[i].set()
            if b"notifications/tools/list_changed" in line and acknowledged[i].is_set():
                changed[i].set()
                break
        conn.close()

    for i in (2, 3):
        threading.Thread(target=listen_mcp, args=(i,), daemon=True).start()
    for i in (2, 3):
        if not acknowledged[i].wait(10):
            raise Failed(f"instance {i} did not acknowledge an MCP subscriptions/listen stream")
    time.sleep(0.5)
    status, body = request(c.ports[1], "POST", "/v1/tools", definition(name, c.effect_port, False))
    if status != 201:
        raise Failed(f"adding a definition on instance 1 answered {status}: {body}")
    started = time.monotonic()
    waits = {}
    for i in (2, 3):
        while True:
            status, _ = request(c.ports[i], "GET", f"/v1/tools/{name}")
            if status == 200:
                waits[i] = time.monotonic() - started
                break
            if time.monotonic() - started > 10:
                raise Failed(f"instance {i} does not list {name} 10 s after it was added on 1")
            time.sleep(0.02)
    if not seen.wait(10):
        raise Failed("no definition event for the new tool on instance 3's /v1/events")
    for i in (2, 3):
        if not changed[i].wait(10):
            raise Failed(f"instance {i}'s MCP listen stream got no tools/list_changed for {name}")
        listed = mcp_stateless(c.ports[i], "tools/list", {})
        names = [t.get("name") for t in listed.get("result", {}).get("tools", [])]
        if name not in names:
            raise Failed(f"MCP tools/list on instance {i} does not list {name}: {listed}")
    return (f"definitions: added on instance 1, readable on 2 after {waits[2] * 1000:.0f} ms and "
            f"on 3 after {waits[3] * 1000:.0f} ms; instance 3's event stream announced it, and "
            "MCP listeners on 2 and 3 got tools/list_changed and list it")


def mcp_session(port: int, lists: int) -> int:
    """Opens a legacy (2025-06-18) MCP session over Streamable HTTP and sends `tools/list`
    `lists` times on it; how many were answered with a result."""
    headers = {"Authorization": f"Bearer {TOKENS['loader']}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}

    def post(body, session=None):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        h = dict(headers)
        if session:
            h["Mcp-Session-Id"] = session
        conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers=h)
        resp = conn.getresponse()
        raw = resp.read().decode(errors="replace")
        conn.close()
        return resp.status, resp.getheader("Mcp-Session-Id"), raw

    status, session, raw = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "cluster-test", "version": "1"}}})
    if status != 200 or not session:
        raise Failed(f"MCP initialize answered {status} without a session: {raw[:300]}")
    post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    answered = 0
    for i in range(lists):
        status, _, raw = post({"jsonrpc": "2.0", "id": 2 + i, "method": "tools/list"}, session)
        if status == 200 and '"tools"' in raw:
            answered += 1
    return answered


def check_mcp_sessions(c: Cluster) -> str:
    lists = 9
    sticky = mcp_session(c.sticky_port, lists)
    if sticky != lists:
        raise Failed(f"a legacy MCP session through the sticky frontend: {sticky} of {lists} "
                     "tools/list answered")
    plain = mcp_session(c.lb_port, lists)
    return (f"legacy MCP session: {sticky}/{lists} tools/list answered through HAProxy sticky on "
            f"Mcp-Session-Id; {plain}/{lists} through plain round robin")


def mcp_stateless(port: int, method: str, params: dict, who: str = "loader",
                  tasks: bool = True) -> dict:
    """One stateless MCP 2026-07-28 request (no session: any instance may answer it) from a
    client that can elicit and, with `tasks`, declares the tasks extension; the JSON-RPC
    answer."""
    caps: dict = {"elicitation": {}}
    if tasks:
        caps["extensions"] = {"io.modelcontextprotocol/tasks": {}}
    params = dict(params, _meta={
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "cluster-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps})
    headers = {"Authorization": f"Bearer {TOKENS[who]}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    name = params.get("name") or params.get("taskId")
    if name:
        headers["Mcp-Name"] = name
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/mcp", body=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(),
            headers=headers)
        resp = conn.getresponse()
        raw = resp.read().decode(errors="replace")
    finally:
        conn.close()
    if resp.status != 200:
        raise Failed(f"MCP {method} on port {port} answered HTTP {resp.status}: {raw[:300]}")
    for line in [raw] + [ln[5:].strip() for ln in raw.splitlines() if ln.startswith("data:")]:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("id") == 1:
            return msg
    raise Failed(f"MCP {method} on port {port}: no JSON-RPC answer in {raw[:300]}")


def task_until(c: Cluster, i: int, task: str, want: str, seconds: float = 20.0) -> dict:
    """Reads task `task` with tasks/get on instance `i` until its status is `want`."""
    deadline = time.monotonic() + seconds
    while True:
        got = mcp_stateless(c.ports[i], "tasks/get", {"taskId": task})
        result = got.get("result") or {}
        if result.get("status") == want:
            return result
        if time.monotonic() > deadline:
            raise Failed(f"task {task} read on instance {i} is not {want} after {seconds:.0f} s: "
                         f"{json.dumps(got)[:400]}")
        time.sleep(0.05)


def new_task(c: Cluster, i: int, tool: str, token: str, status: str) -> str:
    """A task-augmented tools/call of `tool` on instance `i`: the task's id."""
    got = mcp_stateless(c.ports[i], "tools/call", {"name": tool, "arguments": {"token": token}})
    result = got.get("result") or {}
    if result.get("resultType") != "task" or result.get("status") != status:
        raise Failed(f"tools/call of {tool} on instance {i} did not answer a {status} task: "
                     f"{json.dumps(got)[:400]}")
    return result["taskId"]


def approve_on(c: Cluster, i: int, aid: str) -> None:
    status, body = request(c.ports[i], "POST", f"/v1/approvals/{aid}/approve",
                           {"reason": "cluster test"})
    if status != 200:
        raise Failed(f"approving {aid} on instance {i} answered {status}: {body}")


def cancel_running(c: Cluster, effects: Effects, task: str, token: str, cancel_on: int,
                   read_on: int, what: str, running: str) -> float:
    """Waits until the call sending `token` has reached the effect server, cancels `task` with
    tasks/cancel on instance `cancel_on` and waits to read it cancelled on `read_on`; returns
    the milliseconds from the cancel to that read. `what` names the call, `running` the task
    in the messages."""
    deadline = time.monotonic() + 10
    while token not in effects.tokens:  # the call has reached the tool
        if time.monotonic() > deadline:
            raise Failed(f"{what} never reached the effect server")
        time.sleep(0.02)
    t0 = time.monotonic()
    got = mcp_stateless(c.ports[cancel_on], "tasks/cancel", {"taskId": task})
    if "error" in got:
        raise Failed(f"tasks/cancel on instance {cancel_on} of {running}: {got}")
    task_until(c, read_on, task, "cancelled", seconds=10)
    return (time.monotonic() - t0) * 1000


def check_tasks(c: Cluster, effects: Effects) -> str:
    for name, confirm, slow in (("task_confirm", True, False), ("task_slow", False, True),
                                ("task_slow_confirm", True, True)):
        status, body = request(c.lb_port, "POST", "/v1/tools",
                               definition(name, c.effect_port, confirm, slow))
        if status != 201:
            raise Failed(f"adding {name} answered {status}: {body}")
    time.sleep(1.5)  # every instance has them (the sync catches up within a second)
    lines = []

    # Created on 1, approved over REST on 2, completed as read on 3.
    task = new_task(c, 1, "task_confirm", "t-approved", "input_required")
    waiting = task_until(c, 3, task, "input_required")
    if task not in (waiting.get("statusMessage") or ""):
        raise Failed(f"the waiting task read on 3 does not name its approval: {waiting}")
    approve_on(c, 2, task)
    done = task_until(c, 3, task, "completed")
    if done["result"].get("isError") is not False or "t-approved" not in effects.tokens:
        raise Failed(f"the task approved on 2 did not complete with the call's result: {done}")
    lines.append("created on 1, approved over REST on 2, completed read on 3")

    # Created on 1, withdrawn with tasks/cancel on 2, read cancelled on 3: it never runs.
    task = new_task(c, 1, "task_confirm", "t-withdrawn", "input_required")
    got = mcp_stateless(c.ports[2], "tasks/cancel", {"taskId": task})
    if "error" in got:
        raise Failed(f"tasks/cancel of a pending task on instance 2: {got}")
    task_until(c, 3, task, "cancelled")
    status, body = request(c.ports[1], "GET", f"/v1/approvals/{task}")
    if body.get("status") != "denied" or "t-withdrawn" in effects.tokens:
        raise Failed(f"the withdrawn task's approval is {body.get('status')} (want denied, "
                     "never run)")
    lines.append("pending task cancelled on 2 (approval withdrawn), read cancelled on 3")

    # A long call running as a task on 1, cancelled from 3, read cancelled on 2.
    task = new_task(c, 1, "task_slow", "t-long", "working")
    task_until(c, 2, task, "working")
    long_ms = cancel_running(c, effects, task, "t-long", cancel_on=3, read_on=2,
                             what="the long call", running="a task running on 1")
    lines.append(f"long-call task running on 1 cancelled from 3, read cancelled on 2 after "
                 f"{long_ms:.0f} ms")

    # An approved call running on 2 (approved there), cancelled from 3, read cancelled on 1.
    task = new_task(c, 1, "task_slow_confirm", "t-approved-long", "input_required")
    approve_on(c, 2, task)
    task_until(c, 3, task, "working")
    approved_ms = cancel_running(c, effects, task, "t-approved-long", cancel_on=3, read_on=1,
                                 what="the approved long call",
                                 running="an approved call running on 2")
    lines.append(f"approved call running on 2 cancelled from 3, read cancelled on 1 after "
                 f"{approved_ms:.0f} ms")
    return "tasks across instances: " + "; ".join(lines)


def check_request_state(c: Cluster, effects: Effects) -> str:
    """MCP 2026-07-28 input-required rounds: the first round on one instance, the answer with
    its requestState on another; the state is single-use on every instance."""
    first = mcp_stateless(c.ports[1], "tools/call",
                          {"name": "task_confirm", "arguments": {"token": "rs-1"}}, tasks=False)
    result = first.get("result") or {}
    if result.get("resultType") != "input_required" or not result.get("requestState"):
        raise Failed(f"the first round on instance 1 is not input_required: "
                     f"{json.dumps(first)[:400]}")
    answer = {"name": "task_confirm", "arguments": {"token": "rs-1"},
              "inputResponses": {"confirm": {"action": "accept", "content": {"approve": True}}},
              "requestState": result["requestState"]}
    second = mcp_stateless(c.ports[2], "tools/call", answer, tasks=False)
    done = second.get("result") or {}
    if done.get("isError") is not False or "rs-1" not in effects.tokens:
        raise Failed(f"the answer sent to instance 2 did not run the call: "
                     f"{json.dumps(second)[:400]}")
    again = mcp_stateless(c.ports[3], "tools/call", answer, tasks=False)
    if "error" not in again or effects.tokens.count("rs-1") != 1:
        raise Failed(f"the used requestState was accepted again on instance 3: "
                     f"{json.dumps(again)[:400]}")
    return ("requestState: first round on 1, answered on 2 (the call ran once), replayed on 3 "
            "and refused")


def check_kill(c: Cluster, binary: Path, effects: Effects, seconds: float = 6.0) -> str:
    for name, confirm in (("cluster_write", False), ("cluster_confirm", True)):
        status, body = request(c.lb_port, "POST", "/v1/tools", definition(name, c.effect_port,
                                                                          confirm))
        if status != 201:
            raise Failed(f"adding {name} answered {status}: {body}")
    time.sleep(1.5)  # every instance has them (the sync catches up within a second)
    answered: list[str] = []  # call ids of writing calls that returned a result
    answered_mcp: list[str] = []  # those of them made over MCP
    approvals: dict[str, str] = {}  # approval id -> token
    acked: set[str] = set()  # approvals whose approve returned 200
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(w: int):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                status, body = request(c.lb_port, "POST", "/v1/tools/cluster_write/call",
                                       {"arguments": {"token": f"w{w}-{n}"}}, who="loader")
            except (OSError, http.client.HTTPException):
                continue
            if status == 200 and isinstance(body, dict) and "data" in body:
                with lock:
                    answered.append(body["callId"])

    def mcp_writer(w: int):
        # A stateless MCP 2026-07-28 client through the round-robin frontend (no session, no
        # stickiness): any instance answers each call.
        n = 0
        while not stop.is_set():
            n += 1
            try:
                got = mcp_stateless(c.lb_port, "tools/call", {
                    "name": "cluster_write", "arguments": {"token": f"m{w}-{n}"}}, tasks=False)
            except (Failed, OSError, http.client.HTTPException):
                continue
            result = got.get("result") or {}
            call_id = (result.get("_meta") or {}).get("dev.toolgate/result", {}).get("callId")
            if result.get("isError") is False and call_id:
                with lock:
                    answered.append(call_id)
                    answered_mcp.append(call_id)
            elif "error" in got or result.get("isError"):
                with lock:
                    errors.append(f"MCP call m{w}-{n}: {json.dumps(got)[:300]}")

    def approver(w: int):
        n = 0
        while not stop.is_set():
            n += 1
            token = f"a{w}-{n}"
            aid = None
            for _ in range(50):
                try:
                    status, body = request(c.lb_port, "POST", "/v1/tools/cluster_confirm/call",
                                           {"arguments": {"token": token},
                                            "idempotencyKey": token}, who="admin")
                except (OSError, http.client.HTTPException):
                    continue
                if status == 202:
                    aid = body["approval"]["id"]
                    break
                time.sleep(0.02)
            if aid is None:
                with lock:
                    errors.append(f"no approval for {token}")
                continue
            with lock:
                approvals[aid] = token
            for _ in range(50):
                try:
                    status, body = request(c.lb_port, "POST", f"/v1/approvals/{aid}/approve",
                                           {"reason": "cluster test"})
                except (OSError, http.client.HTTPException):
                    continue
                if status == 200:
                    with lock:
                        acked.add(aid)
                    break
                if status == 409:  # decided by an earlier attempt whose answer was lost
                    with lock:
                        acked.add(aid)
                    break
                time.sleep(0.02)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    threads += [threading.Thread(target=mcp_writer, args=(w,)) for w in range(2)]
    threads += [threading.Thread(target=approver, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    time.sleep(seconds / 2)
    c.kill(2)
    time.sleep(seconds / 2)
    stop.set()
    for t in threads:
        t.join()
    # With the load stopped, the killed instance comes back: its startup recovery settles what
    # it was running (`indeterminate`) and runs what it had approved but not started.
    c.start(2)
    deadline = time.monotonic() + 30
    while True:
        status, body = request(c.ports[1], "GET", "/v1/approvals?limit=500")
        busy = [a for a in body["approvals"] if a["status"] in ("approved", "running", "pending")
                and a["id"] in acked]
        if not busy or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    problems = list(errors)
    statuses: dict[str, int] = {}
    for aid in approvals:
        status, body = request(c.ports[3], "GET", f"/v1/approvals/{aid}")
        if status != 200:
            problems.append(f"approval {aid} lost ({status})")
            continue
        statuses[body["status"]] = statuses.get(body["status"], 0) + 1
        if aid in acked and body["status"] not in ("executed", "indeterminate"):
            problems.append(f"approval {aid} approved but {body['status']}")
    missing = 0
    for call_id in answered:
        status, _ = request(c.ports[1], "GET", f"/v1/calls/{call_id}")
        if status != 200:
            missing += 1
    if missing:
        problems.append(f"{missing} answered calls have no audit record")
    if not answered_mcp:
        problems.append("no MCP call through HAProxy was answered")
    verify = subprocess.run(
        [str(binary), "--config", str(c.config(1)), "--db", c.db_url, "audit", "verify"],
        capture_output=True, text=True, env={k: v for k, v in os.environ.items()
                                             if not k.startswith("TOOLGATE_")})
    if verify.returncode != 0:
        problems.append(f"toolgate audit verify failed ({verify.returncode}): "
                        f"{verify.stdout.strip()} {verify.stderr.strip()}")
    line = (f"kill -9 of instance 2 under load: {len(answered)} writing calls answered "
            f"({len(answered_mcp)} of them by stateless MCP clients through HAProxy; all "
            f"audited: {missing == 0}), {len(approvals)} approvals created, {len(acked)} "
            f"approved, statuses {statuses}; audit verify: "
            f"{'ok' if verify.returncode == 0 else 'FAILED'}")
    if problems:
        raise Failed(line + "\n  " + "\n  ".join(problems[:20]))
    return line


# --------------------------------------------------------------------------------------------
# Throughput


def _load_process(port: int, stop_at: float, threads: int, out) -> None:
    counts = []

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        n = 0
        lat = []
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            try:
                status, _ = request(port, "POST", "/v1/tools/calculator/call",
                                    {"arguments": {"expression": "1+1"}}, who="loader", conn=conn)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            if status == 200:
                n += 1
                lat.append(time.perf_counter() - t0)
        counts.append((n, lat))

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((sum(n for n, _ in counts), [x for _, lat in counts for x in lat]))


def throughput(c: Cluster, instances: list[int], seconds: float, procs: int, threads: int):
    c.start_haproxy(instances)
    try:
        # Warm-up, then the measured run.
        for measure in (False, True):
            q = multiprocessing.Queue()
            length = seconds if measure else 1.0
            stop_at = time.monotonic() + length
            ps = [multiprocessing.Process(target=_load_process,
                                          args=(c.lb_port, stop_at, threads, q))
                  for _ in range(procs)]
            started = time.monotonic()
            for p in ps:
                p.start()
            results = [q.get() for _ in ps]
            for p in ps:
                p.join()
            elapsed = time.monotonic() - started
        total = sum(n for n, _ in results)
        lat = sorted(x for _, xs in results for x in xs)
        median = lat[len(lat) // 2] * 1000 if lat else float("nan")
        p99 = lat[min(len(lat) - 1, len(lat) * 99 // 100)] * 1000 if lat else float("nan")
        return total / elapsed, median, p99
    finally:
        c.haproxy.terminate()
        c.haproxy.wait()
        c.haproxy = None


# --------------------------------------------------------------------------------------------


def redis_problem(url: str) -> str | None:
    """Why the Redis at redis://HOST:PORT does not answer PING, or None when it does."""
    hostport = url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port or 6379)), timeout=3) as s:
            s.sendall(b"PING\r\n")
            answer = s.recv(64)
    except (OSError, ValueError) as e:
        return f"cannot reach Redis at {hostport}: {e}"
    if not answer.startswith(b"+PONG"):
        return f"Redis at {hostport} answered {answer!r} to PING"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", type=Path, default=ROOT / "target" / "debug" / "toolgate")
    p.add_argument("--throughput", action="store_true", help="print the 1/2/3-instance table")
    p.add_argument("--seconds", type=float, default=10.0, help="throughput: seconds per run")
    p.add_argument("--clients", type=int, default=16, help="throughput: concurrent clients")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--redis", metavar="URL",
                   help="count the limits in this Redis ([cluster] redis_url); rate check only")
    args = p.parse_args()
    binary = args.binary.resolve()
    if not binary.exists():
        print(f"{binary} is missing; build it (cargo build -p toolgate-cli)", file=sys.stderr)
        return 1
    if shutil.which("haproxy") is None:
        print("haproxy is missing (scripts/cluster.sh installs Debian's package)", file=sys.stderr)
        return 1
    problem = postgres_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            print(f"error: the cluster test needs PostgreSQL with CI=true: {problem}",
                  file=sys.stderr)
            return 1
        print(f"skipping the cluster test: {problem}")
        return 0
    if args.redis is not None:
        problem = redis_problem(args.redis)
        if problem is not None:
            if os.environ.get("CI") == "true":
                print(f"error: the cluster test with --redis needs Redis with CI=true: {problem}",
                      file=sys.stderr)
                return 1
            print(f"skipping the cluster test with Redis: {problem}")
            return 0
    dbname = f"toolgate_cluster_{os.getpid()}"
    psql(f"DROP DATABASE IF EXISTS {dbname}")
    psql(f"CREATE DATABASE {dbname}")
    db_url = f"postgres://postgres@{PG_HOST}:{PG_PORT}/{dbname}"
    work = Path(tempfile.mkdtemp(prefix="toolgate-cluster-"))
    effects = Effects()
    cluster = Cluster(binary, work, db_url, effects.server_address[1], args.redis)
    try:
        if args.throughput:
            for i in (1, 2, 3):
                cluster.start(i)
            cpus = os.cpu_count() or 1
            print(f"cluster throughput: `toolgate serve` instances on one PostgreSQL behind "
                  f"HAProxy (round robin), {args.clients} closed-loop REST clients calling "
                  f"calculator, {args.seconds:.0f} s per row, on this machine ({cpus} cores "
                  f"shared by the instances, PostgreSQL, HAProxy and the clients)")
            print(f"{'instances':>9}  {'calls/s':>9}  {'median ms':>9}  {'p99 ms':>8}")
            procs = 4
            for k in (1, 2, 3):
                rate, median, p99 = throughput(cluster, list(range(1, k + 1)), args.seconds,
                                               procs, max(1, args.clients // procs))
                print(f"{k:>9}  {rate:>9.0f}  {median:>9.2f}  {p99:>8.2f}", flush=True)
            return 0
        for i in (1, 2, 3):
            cluster.start(i)
        cluster.start_haproxy([1, 2, 3])
        results = []
        checks = [("rate limit", lambda: check_rate_limit(cluster)),
                  ("definitions", lambda: check_definitions(cluster)),
                  ("MCP sessions", lambda: check_mcp_sessions(cluster)),
                  ("tasks", lambda: check_tasks(cluster, effects)),
                  ("requestState", lambda: check_request_state(cluster, effects)),
                  ("kill -9", lambda: check_kill(cluster, binary, effects))]
        if args.redis is not None:
            checks = checks[:1]
        for name, check in checks:
            try:
                results.append(check())
                print("ok   " + results[-1], flush=True)
            except Failed as e:
                print(f"FAIL {name}: {e}", flush=True)
                print(f"     logs in {work}", flush=True)
                args.keep = True
                return 1
        return 0
    finally:
        cluster.stop()
        effects.shutdown()
        psql(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)", check=False)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
