#!/usr/bin/env python3
"""Session flood: what abandoned MCP sessions cost `toolgate serve`.

Starts `toolgate serve` on a free loopback port with a fresh SQLite store, reads its resident
memory (VmRSS in /proc/PID/status), opens N MCP sessions over Streamable HTTP with `initialize`
(and `notifications/initialized`, as a real client does) without ever closing them, then reads
the memory again and prints both, with how many sessions were opened and how many refused (and
the refusal's message). Standard library only.

Usage: scripts/session-flood.py [--bin PATH] [--sessions N] [--config FILE] [--settle S]
                                [--token TOKEN] [--keep]

  --bin PATH      the toolgate binary (default: $CARGO_TARGET_DIR or target, release if built,
                  else debug)
  --sessions N    sessions to open (default 4000)
  --config FILE   a config file for `toolgate --config` (default: none, i.e. the defaults)
  --settle S      seconds to wait after the flood before the second reading (default 2)
  --token TOKEN   bearer token sent with every request (for a config with principals)
  --later S       also read the memory S seconds after the flood (idle sessions go to sleep
                  after 60 s and expire after the idle timeout)
  --churn S       then, for S seconds, 8 threads call the calculator in random open sessions
                  (most of them asleep, so each call may wake one); every call must succeed
  --json          print one JSON line instead of text
"""

import argparse
import http.client
import json
import os
import itertools
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "session-flood", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def default_bin():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    for profile in ("release", "debug"):
        path = os.path.join(target, profile, "toolgate")
        if os.path.exists(path):
            return path
    sys.exit("no toolgate binary found; build one (cargo build -p toolgate-cli) or pass --bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_ready(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"toolgate exited with {proc.returncode} before it answered")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("toolgate did not answer /healthz in time")


def headers(token, session=None):
    h = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Host": "localhost",
    }
    if token:
        h["Authorization"] = f"Bearer {token}"
    if session:
        h["Mcp-Session-Id"] = session
        h["MCP-Protocol-Version"] = "2025-11-25"
    return h


def open_session(conn, token):
    """One abandoned session: (session id or None, status, body of a refusal)."""
    conn.request("POST", "/mcp", body=json.dumps(INIT), headers=headers(token))
    resp = conn.getresponse()
    body = resp.read().decode("utf-8", "replace")
    session = resp.getheader("Mcp-Session-Id")
    if resp.status != 200 or not session:
        if resp.getheader("Connection", "").lower() == "close":
            conn.close()
        return None, resp.status, body
    conn.request("POST", "/mcp", body=json.dumps(INITIALIZED), headers=headers(token, session))
    resp = conn.getresponse()
    resp.read()
    return session, resp.status, ""


def ping(port, token, session):
    """A `ping` in an existing session: 'ok' or what came back."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    conn.request("POST", "/mcp", body=body, headers=headers(token, session))
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", "replace")
    conn.close()
    return "ok" if resp.status == 200 and '"result"' in text else f"HTTP {resp.status}: {text[:200]}"


def churn(port, token, sessions, seconds, threads=8):
    """Calls in random sessions from several threads: (calls that succeeded, failures)."""
    ids = itertools.count(100)
    lock = threading.Lock()
    counts = {"ok": 0, "failed": []}
    end = time.time() + seconds

    def worker():
        while time.time() < end:
            session = random.choice(sessions)
            with lock:
                request_id = next(ids)  # unique per session, as JSON-RPC requires
            body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                               "params": {"name": "calculator",
                                          "arguments": {"expression": "1+1"}}})
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("POST", "/mcp", body=body, headers=headers(token, session))
                resp = conn.getresponse()
                text = resp.read().decode("utf-8", "replace")
                good = resp.status == 200 and '"isError":false' in text
            except (http.client.HTTPException, OSError) as e:
                good, text = False, repr(e)
            finally:
                conn.close()
            with lock:
                if good:
                    counts["ok"] += 1
                elif len(counts["failed"]) < 5:
                    counts["failed"].append(text[:300])
                else:
                    counts["failed"].append("")

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return counts["ok"], counts["failed"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bin", default=None)
    ap.add_argument("--sessions", type=int, default=4000)
    ap.add_argument("--config", default=None)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--token", default=os.environ.get("TOOLGATE_TOKEN"))
    ap.add_argument("--later", type=float, default=0.0)
    ap.add_argument("--churn", type=float, default=0.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    binary = args.bin or default_bin()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [binary, "--db", f"sqlite://{tmp}/tg.db", "--root", tmp]
        if args.config:
            cmd += ["--config", args.config]
        cmd += ["serve", "--http", f"127.0.0.1:{port}"]
        log = open(os.path.join(tmp, "serve.log"), "w")
        env = dict(os.environ, TOOLGATE_LOG=os.environ.get("TOOLGATE_LOG", "warn"))
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env)
        try:
            wait_ready(port, proc)
            time.sleep(0.5)
            before = rss_kib(proc.pid)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            opened = refused = 0
            refusal = None
            first = None
            open_ids = []
            started = time.time()
            for _ in range(args.sessions):
                try:
                    session, status, body = open_session(conn, args.token)
                except (http.client.HTTPException, OSError):
                    # The server closes a connection after a refusal it did not read: reconnect.
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    session, status, body = open_session(conn, args.token)
                if session:
                    opened += 1
                    first = first or session
                    open_ids.append(session)
                else:
                    refused += 1
                    if refusal is None:
                        refusal = f"HTTP {status}: {body.strip()[:400]}"
            elapsed = time.time() - started
            time.sleep(args.settle)
            after = rss_kib(proc.pid)
            conn.close()
            first_ping = ping(port, args.token, first) if first else None
            churned = None
            if args.churn > 0 and open_ids:
                churned = churn(port, args.token, open_ids, args.churn)
            later = None
            if args.later > 0:
                time.sleep(args.later)
                later = rss_kib(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        result = {
            "binary": binary,
            "config": args.config,
            "sessions": args.sessions,
            "opened": opened,
            "refused": refused,
            "rss_before_mib": round(before / 1024, 1),
            "rss_after_mib": round(after / 1024, 1),
            "growth_mib": round((after - before) / 1024, 1),
            "per_open_session_kib": round((after - before) / opened, 1) if opened else None,
            "seconds": round(elapsed, 1),
            "later_s": args.later if later is not None else None,
            "rss_later_mib": round(later / 1024, 1) if later is not None else None,
            "first_refusal": refusal,
            "first_session_ping": first_ping,
            "churn_ok": churned[0] if churned else None,
            "churn_failed": len(churned[1]) if churned else None,
        }
    if args.json:
        print(json.dumps(result))
        return
    print(f"binary      {binary}")
    print(f"config      {args.config or '(defaults)'}")
    print(f"sessions    {args.sessions} attempted in {result['seconds']} s: "
          f"{opened} opened, {refused} refused")
    print(f"RSS before  {result['rss_before_mib']} MiB")
    print(f"RSS after   {result['rss_after_mib']} MiB  (+{result['growth_mib']} MiB"
          + (f", {result['per_open_session_kib']} KiB per open session)" if opened else ")"))
    if later is not None:
        print(f"RSS {args.later:g} s later  {result['rss_later_mib']} MiB  "
              f"(+{round((later - before) / 1024, 1)} MiB over the start)")
    if refusal:
        print(f"refusal     {refusal}")
    if first_ping:
        print(f"first session, pinged after the flood: {first_ping}")
    if churned:
        ok, failed = churned
        print(f"churn       {ok} calls in random sessions for {args.churn:g} s: {len(failed)} failed")
        for text in [f for f in failed if f][:3]:
            print(f"  failed: {text}")
    if (churned and churned[1]) or (first_ping and first_ping != "ok"):
        sys.exit(1)


if __name__ == "__main__":
    main()
