#!/usr/bin/env python3
"""The approval crash campaign: durable approvals under `kill -9`.

Many rounds of: create N pending approvals against a tool whose side effect is counted in a file,
approve about 2/3 and deny about 1/3 of them in random order while SIGKILL hits `toolgate serve`
at random moments and at the dangerous points, restart it whenever it dies, and at the end of the
round restart it once more, wait until recovery has settled every approval, and check:

- approvals lost = 0: every approval id the script was given (and every decision the server
  acknowledged) still exists afterwards;
- denied calls executed = 0: no token of a denied approval reached the effect server;
- double executions = 0: no token reached the effect server twice;
- interrupted not indeterminate = 0: every call killed mid-run (before its effect, or after it but
  before its result was written) is `indeterminate`, and no approval is left `approved` or
  `running` after recovery.

After recovery every call is also repeated with its idempotency key (it must answer the same
approval or its stored result) and every decided approval is approved again (it must be refused).
Anything else that does not add up (an executed approval without its effect or with an error, an
effect of an approval that is not executed or indeterminate, a repeat that creates or runs
something, an idle restart that changes a status, …) is counted as "other anomalies". Any nonzero
count fails the run (exit 1).

The side effect is an HTTP tool (`[run] kind = "http"`, POST, not retryable) calling an effect
server run by this script on 127.0.0.1, which appends each token to a file (fsync): the ground
truth of executions. The dangerous points are hit by the effect server itself, which on a fraction
of requests SIGKILLs the toolgate process that sent the request (a) before appending (mid-execution:
the approval is `running`, no effect) or (b) after appending but before answering (the effect
happened, no result written); by the script right after an approve request returns (the decision
is committed, the run may or may not have started); and by a killer thread at random moments
during the create/approve/deny traffic.

Stdlib only. Usage:
    python3 scripts/approval-crash.py --short             # what scripts/test.sh runs
    python3 scripts/approval-crash.py --long              # the full campaign
    python3 scripts/approval-crash.py --backend sqlite --rounds 5 --approvals 20 --seed 7

PostgreSQL: a fresh database per round on 127.0.0.1:5432 (user postgres, created and dropped with
psql). When it is unreachable the PostgreSQL half is skipped, or fails with CI=true.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import http.server
import json
import os
import random
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
TOOL = "crash_effect"

# Chaos settings (probabilities): per effect request, kill before / after the effect; per
# successful approve, kill right after it; per request of the traffic, arm the random killer.
P_KILL_BEFORE_EFFECT = 0.12
P_KILL_AFTER_EFFECT = 0.12
P_KILL_AFTER_APPROVE = 0.15
P_RANDOM_KILL = 0.12
RANDOM_KILL_MAX_DELAY = 0.04  # seconds after arming
P_APPROVE = 2 / 3

class Down(Exception):
    """The server did not answer (dead, being killed, or not up yet)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------
# The toolgate server, restarted whenever it dies


class Server:
    def __init__(self, binary: Path, db_url: str, tools_dir: Path, workdir: Path, log: Path):
        self.binary = binary
        self.db_url = db_url
        self.tools_dir = tools_dir
        self.workdir = workdir
        self.log = log
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.gen = 0
        self.port = free_port()
        self.starts = 0
        self.kills = collections.Counter()

    # -- process control ------------------------------------------------------------------

    def _spawn(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        self.gen += 1
        env.update(
            TOOLGATE_ALLOW_PRIVATE_NETWORK="1",
            TOOLGATE_LOG="warn",
            CRASH_GEN=str(self.gen),
        )
        cmd = [str(self.binary)]
        if self.db_url.startswith("postgres"):
            # PostgreSQL's audit needs a checkpoint key kept outside the database: one per
            # database (so one round's checkpoints never judge another round's fresh log),
            # the same across this round's restarts.
            name = self.db_url.rsplit("/", 1)[-1]
            config = self.workdir / f"{name}.toml"
            config.write_text(f'[audit]\nkey_file = "{self.workdir / (name + ".audit-key")}"\n')
            cmd += ["--config", str(config)]
        cmd += [
            "--db", self.db_url,
            "--tools-dir", str(self.tools_dir),
            "serve", "--http", f"127.0.0.1:{self.port}",
        ]
        with open(self.log, "ab") as log:
            log.write(f"--- start generation {self.gen} on port {self.port}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd, cwd=self.workdir, env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log,
            )
        self.starts += 1

    def kill(self, kind: str, gen: int | None = None) -> bool:
        """SIGKILLs the live server (only generation `gen`, when given) and reaps it; counts the
        kill under `kind`. False when there was nothing (or only another generation) to kill."""
        with self.lock:
            p = self.proc
            if p is None or p.poll() is not None:
                return False
            if gen is not None and gen != self.gen:
                return False
            p.send_signal(signal.SIGKILL)
            p.wait()
            self.kills[kind] += 1
            return True

    def ensure_up(self, timeout: float = 60.0) -> int:
        """Starts the server if it is not running and waits until it answers; returns its
        generation. Startup runs recovery before the server listens."""
        deadline = time.monotonic() + timeout
        port_failures = 0
        while time.monotonic() < deadline:
            with self.lock:
                if self.proc is None or self.proc.poll() is not None:
                    if self.proc is not None and self.proc.returncode not in (-signal.SIGKILL, 0):
                        # Died by itself (not killed): most likely the port; take another one.
                        port_failures += 1
                        self.port = free_port()
                        if port_failures > 5:
                            raise RuntimeError(
                                f"toolgate keeps exiting with {self.proc.returncode}; see {self.log}")
                    self._spawn()
                gen, proc = self.gen, self.proc
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    status, _ = self.request("GET", "/healthz", timeout=2)
                    if status == 200:
                        return gen
                except Down:
                    pass
                time.sleep(0.02)
        raise RuntimeError(f"toolgate did not come up within {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
            self.proc = None

    # -- REST --------------------------------------------------------------------------------

    def request(self, method: str, path: str, body=None, timeout: float = 15.0):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise Down(str(e)) from e
        finally:
            conn.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = {"text": raw.decode(errors="replace")}
        return resp.status, parsed


# --------------------------------------------------------------------------------------------
# The effect server: the ground truth of executions, and the dangerous-point killer


class EffectState:
    def __init__(self, seed: int):
        self.lock = threading.Lock()
        self.rng = random.Random(seed)
        self.file: Path | None = None
        self.server: Server | None = None
        self.chaos = False
        # token -> "before_effect" | "after_effect": calls whose process we killed mid-run.
        self.interrupted: dict[str, str] = {}
        self.requests = 0


def effect_handler(state: EffectState):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                token = json.loads(self.rfile.read(length))["token"]
            except (ValueError, KeyError, TypeError, OSError):
                self.send_error(400)
                return
            gen = int(self.headers.get("X-Crash-Gen") or 0)
            with state.lock:
                state.requests += 1
                roll = state.rng.random() if state.chaos else 1.0
                server, path = state.server, state.file
            if roll < P_KILL_BEFORE_EFFECT:
                # Mid-execution: the call has started (the approval is `running`), no effect.
                if server.kill("before_effect", gen):
                    with state.lock:
                        state.interrupted[token] = "before_effect"
                    self.close_connection = True
                    return
            with state.lock:
                with open(path, "a") as f:
                    f.write(token + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            if P_KILL_BEFORE_EFFECT <= roll < P_KILL_BEFORE_EFFECT + P_KILL_AFTER_EFFECT:
                # After the effect, before toolgate can write the result.
                if server.kill("after_effect", gen):
                    with state.lock:
                        state.interrupted[token] = "after_effect"
                    self.close_connection = True
                    return
            out = json.dumps({"ok": True, "token": token}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except OSError:
                pass  # the caller died meanwhile

    return Handler


def start_effect_server(state: EffectState) -> http.server.ThreadingHTTPServer:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), effect_handler(state))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def write_tool(tools_dir: Path, effect_port: int) -> None:
    tools_dir.mkdir(parents=True, exist_ok=True)
    (tools_dir / f"{TOOL}.toml").write_text(f"""\
# The approval crash campaign's side effect: each call appends its token at the effect server.
name = "{TOOL}"
description = "Records a token at the crash campaign's effect server (a counted side effect)."
category = "external_api"
effect = "side_effect"
consequence = "medium"
requires_confirmation = true
idempotent = false

[[parameters]]
name = "token"
type = "string"
required = true

[constraints]
retryable = false
max_attempts = 1
timeout_ms = 20000

[run]
kind = "http"
method = "POST"
url = "http://127.0.0.1:{effect_port}/effect"
# Which server generation sent the request, so the effect server kills only that process.
headers = {{ X-Crash-Gen = "${{env:CRASH_GEN}}" }}
body = ["token"]
""")


# --------------------------------------------------------------------------------------------
# Random kills at random moments of the traffic


class Killer:
    def __init__(self, server: Server, seed: int):
        self.server = server
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.active = False

    def maybe_arm(self) -> None:
        """With probability P_RANDOM_KILL, kills the current server after a random delay."""
        with self.lock:
            if not self.active or (self.timer is not None and self.timer.is_alive()):
                return
            if self.rng.random() >= P_RANDOM_KILL:
                return
            gen = self.server.gen
            delay = self.rng.uniform(0, RANDOM_KILL_MAX_DELAY)
            self.timer = threading.Timer(delay, self._fire, args=(gen,))
            self.timer.daemon = True
            self.timer.start()

    def _fire(self, gen: int) -> None:
        if self.active:
            self.server.kill("random", gen)

    def stop(self) -> None:
        with self.lock:
            self.active = False
            timer = self.timer
        if timer is not None:
            timer.cancel()
            timer.join()


# --------------------------------------------------------------------------------------------
# One round


TERMINAL_OF_APPROVE = {"approved", "running", "executed", "indeterminate"}


class Round:
    def __init__(self, label: str, n: int, rng: random.Random, server: Server,
                 effects: EffectState, killer: Killer, effect_file: Path):
        self.label = label
        self.n = n
        self.rng = rng
        self.server = server
        self.effects = effects
        self.killer = killer
        self.effect_file = effect_file
        self.seen: dict[str, str] = {}        # approval id -> token
        self.acked: dict[str, str] = {}       # approval id -> "approved" | "denied" (200 seen)
        self.decided: dict[str, str] = {}     # approval id -> what we asked for
        self.anomalies: list[str] = []
        self.violations = collections.Counter()

    def violation(self, kind: str, message: str) -> None:
        """One of the four invariants broken."""
        self.violations[kind] += 1
        self.anomalies.append(f"{kind.upper()}: {message}")

    def call(self, method, path, body=None):
        self.killer.maybe_arm()
        return self.server.request(method, path, body)

    def create(self, i: int) -> None:
        token = f"{self.label}-{i}-{self.rng.getrandbits(32):08x}"
        for _ in range(200):
            self.server.ensure_up()
            try:
                status, body = self.call(
                    "POST", f"/v1/tools/{TOOL}/call",
                    {"arguments": {"token": token}, "idempotencyKey": token,
                     "reason": "crash campaign"})
            except Down:
                continue
            if status == 202:
                aid = body["approval"]["id"]
                if aid in self.seen and self.seen[aid] != token:
                    self.anomalies.append(f"approval {aid} returned for two tokens")
                self.seen[aid] = token
                if body["approval"]["status"] != "pending":
                    self.anomalies.append(
                        f"new approval {aid} is {body['approval']['status']}, not pending")
                return
            # 5xx while the store is unavailable, etc.: try again.
            time.sleep(0.01)
        self.anomalies.append(f"could not create the approval for {token}")

    def decide(self, aid: str, approve: bool) -> None:
        verb = "approve" if approve else "deny"
        self.decided[aid] = "approved" if approve else "denied"
        for _ in range(200):
            gen = self.server.ensure_up()
            try:
                status, body = self.call("GET", f"/v1/approvals/{aid}")
            except Down:
                continue
            if status != 200:
                # Counted as lost at the end if it stays missing.
                self.anomalies.append(f"GET {aid} answered {status}: {body}")
                return
            current = body["status"]
            if current != "pending":
                # An earlier attempt committed (its answer was lost to a kill).
                if (current in TERMINAL_OF_APPROVE) != approve:
                    self.anomalies.append(f"{aid} was to be {verb}d but is {current}")
                return
            try:
                status, body = self.call("POST", f"/v1/approvals/{aid}/{verb}",
                                         {"reason": "crash campaign"})
            except Down:
                continue
            if status == 200:
                self.acked[aid] = body["status"]
                if approve and self.rng.random() < P_KILL_AFTER_APPROVE:
                    # Just after the approval commit; the run may or may not have started.
                    self.server.kill("after_approve", gen)
                return
        self.anomalies.append(f"could not {verb} {aid}")

    def listing(self) -> list[dict]:
        for _ in range(100):
            self.server.ensure_up()
            try:
                status, body = self.server.request("GET", "/v1/approvals?limit=500")
            except Down:
                continue
            if status == 200:
                return body["approvals"]
            time.sleep(0.05)
        raise RuntimeError("cannot list approvals")

    def wait_settled(self, timeout: float) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            approvals = self.listing()
            busy = [a for a in approvals if a["status"] in ("approved", "running")]
            if not busy or time.monotonic() > deadline:
                return approvals
            time.sleep(0.05)

    def run(self) -> dict:
        with self.effects.lock:
            self.effects.file = self.effect_file
            self.effects.interrupted = {}
            self.effects.chaos = True
        self.effect_file.touch()
        self.killer.active = True
        kills_before = self.server.kills.copy()
        starts_before = self.server.starts

        self.server.ensure_up()
        for i in range(self.n):
            self.create(i)
        ids = list(self.seen)
        self.rng.shuffle(ids)
        for aid in ids:
            self.decide(aid, self.rng.random() < P_APPROVE)

        # The end of the round: no more chaos; let the live server settle what it runs, then
        # restart it once more (recovery) and wait until nothing is approved or running.
        self.killer.stop()
        with self.effects.lock:
            self.effects.chaos = False
            interrupted = dict(self.effects.interrupted)
        before = {a["id"]: a["status"] for a in self.wait_settled(30)}
        busy_live = [i for i, s in before.items() if s in ("approved", "running")]
        self.server.stop()
        self.server.ensure_up()
        self.settled_before_repeats = {a["id"]: a["status"] for a in self.wait_settled(30)}
        self.repeat()
        final = self.wait_settled(30)

        kills = self.server.kills - kills_before
        starts = self.server.starts - starts_before
        return self.check(final, before, busy_live, interrupted, kills, starts)

    def repeat(self) -> None:
        """After recovery, every call again with its idempotency key (the same approval or its
        stored result, never a new approval or a second run) and every decided approval approved
        again (refused: a decision is final)."""
        for aid, token in self.seen.items():
            try:
                status, body = self.server.request(
                    "POST", f"/v1/tools/{TOOL}/call",
                    {"arguments": {"token": token}, "idempotencyKey": token})
            except Down:
                self.anomalies.append(f"the server went down repeating {token}")
                self.server.ensure_up()
                continue
            if status == 202 and body["approval"]["id"] != aid:
                self.anomalies.append(
                    f"repeating {token} gave approval {body['approval']['id']}, not {aid}")
            elif status == 200 and self.settled_before_repeats.get(aid) != "executed":
                self.anomalies.append(f"repeating {token} ({aid}) answered 200: {body}")
            elif status not in (200, 202):
                self.anomalies.append(f"repeating {token} ({aid}) answered {status}: {body}")
            if self.settled_before_repeats.get(aid) == "pending":
                continue
            try:
                status, body = self.server.request("POST", f"/v1/approvals/{aid}/approve")
            except Down:
                self.anomalies.append(f"the server went down re-approving {aid}")
                self.server.ensure_up()
                continue
            if status == 200:
                self.anomalies.append(
                    f"{aid} ({self.settled_before_repeats.get(aid)}) was approved a second time")

    def check(self, final, before, busy_live, interrupted, kills, starts) -> dict:
        by_id = {a["id"]: a for a in final}
        by_token: dict[str, dict] = {}
        for a in final:
            token = (a.get("arguments") or {}).get("token")
            if token in by_token:
                self.anomalies.append(f"two approvals for token {token}")
            by_token[token] = a
        effects = collections.Counter(
            line.strip() for line in self.effect_file.read_text().splitlines() if line.strip())

        for aid, token in self.seen.items():
            a = by_id.get(aid)
            if a is None:
                status, _ = self.server.request("GET", f"/v1/approvals/{aid}")
                if status != 200:
                    self.violation("lost", f"approval {aid} ({token}) is gone")
                    continue
                self.anomalies.append(f"approval {aid} missing from the listing but exists")
                continue
            if a["arguments"].get("token") != token:
                self.anomalies.append(f"approval {aid} now has token {a['arguments']}")
            ack = self.acked.get(aid)
            if ack == "approved" and a["status"] not in TERMINAL_OF_APPROVE:
                self.violation("lost", f"{aid} was acknowledged approved, is {a['status']}")
            if ack == "denied" and a["status"] != "denied":
                self.violation("lost", f"{aid} was acknowledged denied, is {a['status']}")
            want = self.decided.get(aid)
            if want == "denied" and a["status"] != "denied":
                self.anomalies.append(f"{aid} was denied by the script but is {a['status']}")
            if want == "approved" and a["status"] not in ("executed", "indeterminate"):
                self.anomalies.append(f"{aid} was approved by the script but is {a['status']}")
        extra = set(by_id) - set(self.seen)
        if extra:
            self.anomalies.append(f"{len(extra)} approval(s) the script never saw")

        for token, count in effects.items():
            a = by_token.get(token)
            if count > 1:
                self.violation("double", f"{token} executed {count} times "
                               f"({a['id'] if a else '?'} is {a['status'] if a else '?'})")
            if a is None:
                self.anomalies.append(f"effect of unknown token {token}")
            elif a["status"] == "denied":
                self.violation("denied_ran", f"{a['id']} ({token}) is denied but ran")
            elif a["status"] not in ("executed", "indeterminate"):
                self.anomalies.append(f"effect of {a['id']} ({token}), which is {a['status']}")

        for token, where in interrupted.items():
            a = by_token.get(token)
            if a is None or a["status"] != "indeterminate":
                self.violation(
                    "not_indeterminate",
                    f"killed {where} but {a['id'] + ' is ' + a['status'] if a else 'unknown'}"
                    f": {token}")
        for a in final:
            if a["status"] in ("approved", "running"):
                self.violation("not_indeterminate",
                               f"{a['id']} is still {a['status']} after recovery")
            if a["status"] == "executed":
                token = a["arguments"].get("token")
                if effects.get(token, 0) != 1:
                    self.anomalies.append(
                        f"{a['id']} is executed but its effect happened {effects.get(token, 0)} times")
                result = a.get("result") or {}
                if result.get("errorKind") is not None:
                    self.anomalies.append(
                        f"{a['id']} executed with an error: {result.get('errorKind')}: "
                        f"{result.get('error')}")
        for aid in busy_live:
            self.anomalies.append(f"{aid} stayed {before[aid]} on a live server for 30 s")
        for aid, status in before.items():
            if not busy_live and by_id.get(aid, {}).get("status") != status:
                self.anomalies.append(f"an idle restart changed {aid}: {status} -> "
                                      f"{by_id.get(aid, {}).get('status')}")

        statuses = collections.Counter(a["status"] for a in final)
        indeterminate_effect = sum(
            1 for a in final
            if a["status"] == "indeterminate" and effects.get(a["arguments"].get("token"), 0) > 0)
        invariants = {k: self.violations[k]
                      for k in ("lost", "denied_ran", "double", "not_indeterminate")}
        other = len(self.anomalies) - sum(self.violations.values())
        return {
            "created": len(self.seen),
            "approved": sum(1 for v in self.decided.values() if v == "approved"),
            "denied": sum(1 for v in self.decided.values() if v == "denied"),
            "executed": statuses["executed"],
            "indeterminate": statuses["indeterminate"],
            "indeterminate_effect": indeterminate_effect,
            "kills": kills,
            "starts": starts,
            "invariants": invariants,
            "other": other,
            "anomalies": list(self.anomalies),
        }


# --------------------------------------------------------------------------------------------
# Backends


def run_backend(backend: str, args, binary: Path, tmp: Path, tools_dir: Path,
                effects: EffectState) -> dict:
    rng = random.Random(f"{args.seed}-{backend}")
    total = collections.Counter()
    kills = collections.Counter()
    invariants = collections.Counter({k: 0 for k in
                                      ("lost", "denied_ran", "double", "not_indeterminate")})
    anomalies: list[str] = []
    started = time.monotonic()
    log = tmp / f"toolgate-{backend}.log"
    for r in range(1, args.rounds + 1):
        if backend == "sqlite":
            db_url = f"sqlite:{tmp / f'{backend}-round{r}.db'}"
            dbname = None
        else:
            dbname = f"toolgate_crash_{os.getpid()}_{r}"
            psql(f"DROP DATABASE IF EXISTS {dbname}")
            psql(f"CREATE DATABASE {dbname}")
            db_url = f"postgres://postgres@{PG_HOST}:{PG_PORT}/{dbname}"
        server = Server(binary, db_url, tools_dir, tmp, log)
        with effects.lock:
            effects.server = server
        killer = Killer(server, rng.getrandbits(32))
        try:
            rd = Round(f"{backend[:2]}{r}", args.approvals, random.Random(rng.getrandbits(64)),
                       server, effects, killer, tmp / f"effects-{backend}-round{r}.log")
            res = rd.run()
        finally:
            killer.stop()
            server.stop()
            if dbname is not None:
                psql(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)", check=False)
        for k in ("created", "approved", "denied", "executed", "indeterminate",
                  "indeterminate_effect", "starts", "other"):
            total[k] += res[k]
        kills.update(res["kills"])
        invariants.update(res["invariants"])
        anomalies += [f"round {r}: {a}" for a in res["anomalies"]]
        if args.verbose:
            print(f"  {backend} round {r}: created {res['created']}, executed "
                  f"{res['executed']}, indeterminate {res['indeterminate']}, kills "
                  f"{dict(res['kills'])}, anomalies {len(res['anomalies'])}", flush=True)
    return {"rounds": args.rounds, "total": total, "kills": kills, "invariants": invariants,
            "anomalies": anomalies, "seconds": time.monotonic() - started, "log": log}


def print_summary(results: dict[str, dict], args) -> None:
    names = list(results)
    rows = []

    def row(label, f):
        rows.append((label, [str(f(results[n])) for n in names]))

    row("rounds x approvals", lambda r: f"{r['rounds']} x {args.approvals}")
    row("approvals created", lambda r: r["total"]["created"])
    row("  approved / denied", lambda r: f"{r['total']['approved']} / {r['total']['denied']}")
    row("  executed", lambda r: r["total"]["executed"])
    row("  indeterminate (with effect)",
        lambda r: f"{r['total']['indeterminate']} ({r['total']['indeterminate_effect']})")
    row("kills: random moment", lambda r: r["kills"]["random"])
    row("kills: just after approve", lambda r: r["kills"]["after_approve"])
    row("kills: mid-execution", lambda r: r["kills"]["before_effect"])
    row("kills: after effect, no result", lambda r: r["kills"]["after_effect"])
    row("server starts", lambda r: r["total"]["starts"])
    row("approvals lost", lambda r: r["invariants"]["lost"])
    row("denied calls executed", lambda r: r["invariants"]["denied_ran"])
    row("double executions", lambda r: r["invariants"]["double"])
    row("interrupted not indeterminate", lambda r: r["invariants"]["not_indeterminate"])
    row("other anomalies", lambda r: r["total"]["other"])
    row("seconds", lambda r: f"{r['seconds']:.1f}")
    width = max(len(label) for label, _ in rows)
    cols = [max(len(n), *(len(v[i]) for _, v in rows)) for i, n in enumerate(names)]
    print()
    print(" " * width + "  " + "  ".join(n.rjust(c) for n, c in zip(names, cols)))
    for label, values in rows:
        print(label.ljust(width) + "  " + "  ".join(v.rjust(c) for v, c in zip(values, cols)))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    p.add_argument("--rounds", type=int)
    p.add_argument("--approvals", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--binary", type=Path, default=ROOT / "target" / "debug" / "toolgate")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--short", action="store_true", help="3 rounds x 12 approvals per backend")
    form.add_argument("--long", action="store_true", help="30 rounds x 40 approvals per backend")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per round")
    args = p.parse_args()
    rounds, approvals = (30, 40) if args.long else (3, 12)
    args.rounds = args.rounds or rounds
    args.approvals = args.approvals or approvals
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)
    if not 1 <= args.approvals <= 500:
        p.error("--approvals must be between 1 and 500")

    binary = args.binary.resolve()
    if not binary.exists():
        print(f"{binary} is missing; building it (cargo build -p toolgate-cli)", flush=True)
        subprocess.run(["cargo", "build", "-p", "toolgate-cli"], cwd=ROOT, check=True)

    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends:
        why = postgres_problem()
        if why is not None:
            if os.environ.get("CI") == "true":
                print(f"error: PostgreSQL is needed with CI=true: {why}", file=sys.stderr)
                return 1
            print(f"skipping PostgreSQL: {why}", flush=True)
            backends.remove("postgres")
    if not backends:
        print("nothing to run", file=sys.stderr)
        return 1

    print(f"approval crash campaign: {', '.join(backends)}, {args.rounds} round(s) x "
          f"{args.approvals} approvals, seed {args.seed} (replay the choices with --seed "
          f"{args.seed}; kill timing varies)", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="toolgate-approval-crash-"))
    effects = EffectState(args.seed)
    httpd = start_effect_server(effects)
    tools_dir = tmp / "tools"
    write_tool(tools_dir, httpd.server_address[1])
    results = {}
    try:
        for backend in backends:
            results[backend] = run_backend(backend, args, binary, tmp, tools_dir, effects)
    finally:
        httpd.shutdown()
    print_summary(results, args)

    failed = False
    for backend, r in results.items():
        if r["anomalies"]:
            failed = True
            print(f"\n{backend}: {len(r['anomalies'])} problem(s) (server log: {r['log']}):")
            for a in r["anomalies"][:50]:
                print(f"  {a}")
    if failed:
        print(f"\nFAILED (seed {args.seed}; files kept in {tmp})")
        return 1
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"files kept in {tmp}")
    print("\nall invariants held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
