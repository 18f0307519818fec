"""Interop test: toolgate's conformance fixture against the official Python MCP SDK.

Every test starts its own server (the `conformance` example binary) and talks to it through the
SDK's own client, over stdio and over Streamable HTTP:

1. initialize, then tools/list paginated to the end: every tool described, with an input schema
   and toolgate's governance block in `_meta`;
2. calculator with good arguments gives structured content;
3. calculator with bad arguments gives a tool error result (isError), not a JSON-RPC error;
4. an unknown tool gives JSON-RPC error -32602;
5. cancelling a slow call the way the SDK does it (cancel the caller's scope; the SDK sends
   `notifications/cancelled`) stops the work on the server promptly;
6. (HTTP) progress notifications reach the call's progress callback;
7. (HTTP) a tool created and deleted over the REST API makes the server send
   `notifications/tools/list_changed` to the open session;
8. a tool that requires confirmation asks through elicitation (accept, decline, cancel), or
   waits as a named approval for a client without elicitation;
9. consent is explicit: an accept with `{}`, `approve: false`, `"true"` or `1` runs nothing (a
   counted side effect and a file write stay undone, the result is `rejected` and says why);
   only `approve: true` runs the call, exactly once;
10. a client pinned to 2025-03-26 is answered in 2025-03-26, lists and calls, and gets only
   what that revision defines;
11. (HTTP) closing a session: the SDK's `DELETE /mcp` is answered 204, so it logs no
   `Session termination failed`, and the session is gone;
12. the SDK's `Client` takes 2026-07-28 through `server/discover`, lists (in name order, private
   cache scope) and calls without a session; a confirmation is an input-required round trip the
   SDK answers through its elicitation callback (only `approve: true` runs the call, once), or
   without that callback waits as a durable approval; (HTTP) `subscriptions/listen` announces a
   tool added over REST; log
   messages come only for a request whose `_meta` names a logLevel, at or above it.

Run through scripts/interop.sh, which installs the pinned SDK into a venv and builds the binary.
The binary is taken from $TOOLGATE_CONFORMANCE_BIN, else target/release/examples/conformance.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import pytest

import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

try:  # The SDK's current name for the error raised from a JSON-RPC error response ...
    from mcp import MCPError
except ImportError:  # ... and its name before 2.0.
    from mcp.shared.exceptions import McpError as MCPError  # type: ignore[no-redef]

try:
    from mcp.client.streamable_http import streamable_http_client
except ImportError:  # SDKs before 1.24 only had the older spelling.
    from mcp.client.streamable_http import streamablehttp_client as streamable_http_client  # type: ignore

REPO = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("TOOLGATE_CONFORMANCE_BIN", REPO / "target/release/examples/conformance"))
GOVERNANCE_KEY = "dev.toolgate/governance"
GOVERNANCE_FIELDS = ("category", "effect", "consequence", "requiresConfirmation", "definitionHash")
INVALID_PARAMS = -32602
TEST_TIMEOUT = 60  # seconds; no test should come near it
INTEROP_TOOL = {
    "name": "interop_tool",
    "description": "A tool added over REST during the interop test, to check list_changed notifications.",
    "category": "system",
    "parameters": [],
}


# ---------------------------------------------------------------------------------------------
# Servers


@dataclass
class Server:
    """Where a test's server is: an HTTP base URL, or a stdio command the SDK spawns."""

    transport: str
    log_path: Path
    base_url: str | None = None  # HTTP only
    process: subprocess.Popen[bytes] | None = None  # HTTP only; the SDK owns the stdio process

    @property
    def mcp_url(self) -> str:
        assert self.base_url is not None
        return f"{self.base_url}/mcp"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:]) or "(server log is empty)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=1) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _start_http(log_path: Path) -> Server:
    for _attempt in range(3):  # a free port can be taken between probing it and binding it
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        log = open(log_path, "ab")
        proc = subprocess.Popen(
            [str(BINARY), str(port)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            if _healthy(base_url):
                return Server("http", log_path, base_url=base_url, process=proc)
            time.sleep(0.05)
        _stop(proc)
    raise RuntimeError(f"the server did not come up on 127.0.0.1; log:\n{log_path.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest) -> Any:
    yield from _server(request.param)


@pytest.fixture
def http_server() -> Any:
    yield from _server("http")


def _server(transport: str) -> Any:
    if not BINARY.is_file():
        pytest.fail(
            f"fixture binary {BINARY} is missing: "
            "cargo build --release -p toolgate-examples --example conformance"
        )
    with tempfile.TemporaryDirectory(prefix="toolgate-interop-") as tmp:
        log_path = Path(tmp) / "server.log"
        log_path.touch()
        srv = _start_http(log_path) if transport == "http" else Server("stdio", log_path)
        try:
            yield srv
        finally:
            if srv.process is not None:
                _stop(srv.process)
            # Shown by pytest for a failing test only ("Captured stdout teardown").
            print(f"--- {transport} server log (tail) ---\n{srv.log_tail()}")


# ---------------------------------------------------------------------------------------------
# Sessions, with a tap on the wire so that failures can show what was sent and received


def _wire(item: Any) -> Any:
    """A JSON-ish view of a transport item (a SessionMessage, or an Exception)."""
    msg = getattr(item, "message", item)
    msg = getattr(msg, "root", msg)  # SDK 1.x wraps JSON-RPC messages in a RootModel
    if hasattr(msg, "model_dump"):
        return msg.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return repr(msg)


@dataclass
class Wire:
    """Every message the client sent (`out`) and received (`in`), with a monotonic timestamp."""

    log: list[tuple[float, str, Any]] = field(default_factory=list)

    def sent(self, method: str | None = None) -> list[tuple[float, dict[str, Any]]]:
        return self._select("out", method)

    def received(self, method: str | None = None) -> list[tuple[float, dict[str, Any]]]:
        return self._select("in", method)

    def _select(self, direction: str, method: str | None) -> list[tuple[float, dict[str, Any]]]:
        return [
            (t, m)
            for t, d, m in self.log
            if d == direction and isinstance(m, dict) and (method is None or m.get("method") == method)
        ]

    def dump(self, since: float = 0.0, limit: int = 60) -> str:
        rows = [(t, d, m) for t, d, m in self.log if t >= since]
        shown = rows[:limit]
        text = "\n".join(f"  {t:.3f} {'->' if d == 'out' else '<-'} {json.dumps(m, default=str)[:400]}" for t, d, m in shown)
        if len(rows) > limit:
            text += f"\n  ... {len(rows) - limit} more"
        return text


class _TapRead:
    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    def __getattr__(self, name: str) -> Any:  # e.g. `last_context`, read by the dispatcher
        return getattr(self._inner, name)

    def _note(self, item: Any) -> Any:
        self._wire.log.append((time.monotonic(), "in", _wire(item)))
        return item

    async def receive(self) -> Any:
        return self._note(await self._inner.receive())

    def __aiter__(self) -> "_TapRead":
        return self

    async def __anext__(self) -> Any:
        return self._note(await self._inner.__anext__())

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_TapRead":
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


class _TapWrite:
    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, item: Any) -> None:
        self._wire.log.append((time.monotonic(), "out", _wire(item)))
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_TapWrite":
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


@asynccontextmanager
async def session_for(
    srv: Server,
    wire: Wire | None = None,
    message_handler: Any = None,
    elicitation_callback: Any = None,
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    """An initialized SDK ClientSession to `srv` over its transport."""
    wire = wire if wire is not None else Wire()
    if srv.transport == "stdio":
        errlog = open(srv.log_path, "a")
        params = StdioServerParameters(command=str(BINARY), args=["--stdio"])
        transport = stdio_client(params, errlog=errlog)
    else:
        errlog = None
        transport = streamable_http_client(srv.mcp_url)
    try:
        async with transport as streams:
            read, write = _TapRead(streams[0], wire), _TapWrite(streams[1], wire)
            extra = {"elicitation_callback": elicitation_callback} if elicitation_callback else {}
            async with ClientSession(
                read, write, message_handler=message_handler, **extra
            ) as session:
                init = await session.initialize()
                yield session, init
    finally:
        if errlog is not None:
            errlog.close()


def run(body: Any) -> None:
    """Runs one async test body under a hard deadline."""

    async def guarded() -> None:
        with anyio.fail_after(TEST_TIMEOUT):
            await body()

    try:
        anyio.run(guarded)
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap a failed assertion; report the assertion itself.
        leaves: list[BaseException] = []

        def collect(e: BaseException) -> None:
            if isinstance(e, BaseExceptionGroup):
                for inner in e.exceptions:
                    collect(inner)
            else:
                leaves.append(e)

        collect(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


async def list_all_tools(session: ClientSession) -> list[types.Tool]:
    """tools/list, following nextCursor until the server says there is no more."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _page in range(100):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        assert cursor not in seen, f"tools/list returned the cursor {cursor!r} twice"
        seen.add(cursor)
    raise AssertionError("tools/list still had a nextCursor after 100 pages")


def texts(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def rest(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """One REST call (stdlib only, in a worker thread): (status, parsed JSON or text)."""

    def call() -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    return await anyio.to_thread.run_sync(call)


# ---------------------------------------------------------------------------------------------
# 1. initialize + tools/list


def test_initialize_and_list_tools(server: Server) -> None:
    async def body() -> None:
        async with session_for(server) as (session, init):
            assert init.server_info.name, "initialize result has no serverInfo.name"
            assert init.capabilities.tools is not None, "server does not advertise the tools capability"
            tools = await list_all_tools(session)
        names = [t.name for t in tools]
        assert len(names) == len(set(names)), f"duplicate tool names across pages: {names}"
        for required in ("calculator", "test_slow"):
            assert required in names, f"{required} missing from tools/list: {names}"
        for tool in tools:
            assert tool.description and tool.description.strip(), f"{tool.name}: empty description"
            schema = tool.input_schema
            assert isinstance(schema, dict) and schema.get("type") == "object", (
                f"{tool.name}: inputSchema is not an object schema: {schema!r}"
            )
            meta = tool.meta or {}
            gov = meta.get(GOVERNANCE_KEY)
            assert isinstance(gov, dict), f"{tool.name}: _meta has no {GOVERNANCE_KEY}: {meta!r}"
            missing = [k for k in GOVERNANCE_FIELDS if k not in gov]
            assert not missing, f"{tool.name}: {GOVERNANCE_KEY} lacks {missing}: {gov!r}"
            assert isinstance(gov["requiresConfirmation"], bool), f"{tool.name}: {gov!r}"
            assert isinstance(gov["definitionHash"], str) and gov["definitionHash"], f"{tool.name}: {gov!r}"
        calc = next(t for t in tools if t.name == "calculator")
        assert "expression" in calc.input_schema.get("properties", {}), calc.input_schema

    run(body)


# ---------------------------------------------------------------------------------------------
# 2. a good call


def test_calculator_good_arguments(server: Server) -> None:
    async def body() -> None:
        async with session_for(server) as (session, _):
            result = await session.call_tool("calculator", {"expression": "2 * (3 + 4)"})
        assert result.is_error is False, f"isError is {result.is_error!r}: {texts(result)}"
        assert result.structured_content is not None, f"no structuredContent: {result!r}"
        assert result.structured_content.get("result") == 14, result.structured_content

    run(body)


# ---------------------------------------------------------------------------------------------
# 3. bad arguments: a tool error result, not a JSON-RPC error

BAD_ARGUMENTS = [
    # (arguments, words the message must contain, lowercased)
    ({}, ["expression", "required"]),  # missing
    ({"expression": 42}, ["expression", "string"]),  # wrong type
    ({"expression": "1", "x": 1}, ["'x'"]),  # an argument the schema does not have
    ({"expression": "1+"}, ["position"]),  # well typed, but not an expression
]


def test_calculator_bad_arguments(server: Server) -> None:
    async def body() -> None:
        async with session_for(server) as (session, _):
            for arguments, words in BAD_ARGUMENTS:
                try:
                    result = await session.call_tool("calculator", arguments)
                except MCPError as e:
                    raise AssertionError(
                        f"calculator {arguments!r}: JSON-RPC error {e.code} {e.message!r}, "
                        "expected a result with isError true"
                    ) from e
                message = texts(result)
                assert result.is_error is True, f"calculator {arguments!r}: isError {result.is_error!r}, {message!r}"
                assert message, f"calculator {arguments!r}: error result without a text message: {result!r}"
                lowered = message.lower()
                absent = [w for w in words if w not in lowered]
                assert not absent, f"calculator {arguments!r}: message {message!r} does not name {absent}"

    run(body)


# ---------------------------------------------------------------------------------------------
# 4. unknown tool: JSON-RPC error -32602


def test_unknown_tool_is_invalid_params(server: Server) -> None:
    async def body() -> None:
        async with session_for(server) as (session, _):
            with pytest.raises(MCPError) as caught:
                await session.call_tool("no_such_tool_interop", {})
            assert caught.value.code == INVALID_PARAMS, (
                f"unknown tool: error code {caught.value.code}, expected {INVALID_PARAMS}: {caught.value.message!r}"
            )
            # The session is still usable afterwards.
            ok = await session.call_tool("calculator", {"expression": "1 + 1"})
            assert ok.is_error is False and ok.structured_content == {"result": 2}, ok

    run(body)


# ---------------------------------------------------------------------------------------------
# 5. cancellation


def test_cancel_slow_call(server: Server) -> None:
    async def body() -> None:
        wire = Wire()
        first_progress = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            first_progress.set()

        async with session_for(server, wire) as (session, _):
            scope = anyio.CancelScope()
            returned: list[Any] = []

            async def slow_call() -> None:
                with scope:
                    # A progress token lets the test see whether the server goes on working.
                    returned.append(
                        await session.call_tool("test_slow", {"seconds": 30}, progress_callback=on_progress)
                    )

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                with anyio.fail_after(10):
                    await first_progress.wait()  # the call is running on the server
                await anyio.sleep(0.5)
                cancelled_at = time.monotonic()
                scope.cancel()  # how an SDK user cancels: the SDK sends notifications/cancelled
            assert not returned, f"test_slow(30) returned before it was cancelled: {returned!r}"

            # The SDK must have put the cancellation on the wire, naming the request.
            calls = [m for _, m in wire.sent("tools/call") if (m.get("params") or {}).get("name") == "test_slow"]
            assert len(calls) == 1, f"expected one test_slow request on the wire:\n{wire.dump()}"
            request_id = calls[0]["id"]
            cancels = [m for _, m in wire.sent("notifications/cancelled")]
            assert any((m.get("params") or {}).get("requestId") == request_id for m in cancels), (
                f"the SDK sent no notifications/cancelled for request {request_id!r}:\n{wire.dump()}"
            )

            # The session still works, and promptly.
            after = await session.call_tool("calculator", {"expression": "6 * 7"})
            elapsed = time.monotonic() - cancelled_at
            assert after.is_error is False and after.structured_content == {"result": 42}, after
            assert elapsed < 5, f"cancel + next call took {elapsed:.1f}s"

            if server.transport == "http":
                # The audit log shows the call ended as cancelled, within a few seconds.
                url = f"{server.base_url}/v1/calls?tool=test_slow"
                entry = None
                body_seen: Any = None
                with anyio.move_on_after(5):
                    while entry is None:
                        status, body_seen = await rest("GET", url)
                        assert status == 200, f"GET {url}: {status} {body_seen!r}"
                        entry = next(
                            (c for c in body_seen.get("calls", []) if c.get("errorKind") == "cancelled"), None
                        )
                        if entry is None:
                            await anyio.sleep(0.1)
                assert entry is not None, (
                    f"no cancelled test_slow call in the audit 5s after cancelling; GET {url} -> "
                    f"{json.dumps(body_seen)[:2000]}\nwire:\n{wire.dump(since=cancelled_at - 1)}"
                )
                duration = entry.get("durationMs")
                assert isinstance(duration, (int, float)) and duration < 10_000, f"cancelled call ran {duration}ms: {entry}"
            else:
                # No REST on stdio: the server must stop reporting progress for the cancelled call.
                await anyio.sleep(1.5)

            # Either way: no progress for the cancelled request after a short grace period.
            grace = 1.0
            early = [
                m
                for t, m in wire.received("notifications/progress")
                if (m.get("params") or {}).get("progressToken") == request_id and t <= cancelled_at
            ]
            assert early, f"the tap saw no progress for request {request_id!r} before the cancel:\n{wire.dump()}"
            late = [
                (t - cancelled_at, m)
                for t, m in wire.received("notifications/progress")
                if (m.get("params") or {}).get("progressToken") == request_id and t > cancelled_at + grace
            ]
            assert not late, (
                f"the server still reported progress for cancelled request {request_id!r} "
                f"{late[-1][0]:.1f}s after notifications/cancelled ({len(late)} late notifications):\n"
                f"{wire.dump(since=cancelled_at - 0.2)}"
            )
            # A response to the cancelled request is allowed (the spec says SHOULD NOT), so it is only shown.
            responses = [m for _, m in wire.received() if m.get("id") == request_id and "method" not in m]
            if responses:
                print(f"note: the server answered the cancelled request: {json.dumps(responses)[:500]}")

    run(body)


# ---------------------------------------------------------------------------------------------
# 6. progress (HTTP)


def test_progress_notifications(http_server: Server) -> None:
    async def body() -> None:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        wire = Wire()
        async with session_for(http_server, wire) as (session, _):
            result = await session.call_tool("test_slow", {"seconds": 1}, progress_callback=on_progress)
            await anyio.sleep(0.1)  # callbacks run in their own tasks
        assert result.is_error is False, texts(result)
        assert seen, f"no progress notifications reached the callback:\n{wire.dump()}"
        values = [p for p, _, _ in seen]
        assert values == sorted(values), f"progress went backwards: {values}"
        assert all(total is not None and math.isclose(total, 1.0) for _, total, _ in seen), seen
        assert len(seen) >= 2, f"one progress notification in a 1s call: {seen}"

    run(body)


# ---------------------------------------------------------------------------------------------
# 7. tools/list_changed after a REST change (HTTP)


def test_list_changed_after_rest_change(http_server: Server) -> None:
    async def body() -> None:
        send, receive = anyio.create_memory_object_stream[str](100)

        async def message_handler(message: Any) -> None:
            method = getattr(getattr(message, "root", message), "method", None)
            if isinstance(method, str):
                send.send_nowait(method)

        async def next_list_changed(what: str) -> None:
            other: list[str] = []
            try:
                with anyio.fail_after(5):
                    while (method := await receive.receive()) != "notifications/tools/list_changed":
                        other.append(method)
            except TimeoutError:
                raise AssertionError(
                    f"no notifications/tools/list_changed within 5s of {what} "
                    f"(other notifications: {other})\nwire:\n{wire.dump()}"
                ) from None

        base = http_server.base_url
        wire = Wire()
        created = False
        async with session_for(http_server, wire, message_handler) as (session, init):
            try:
                assert init.capabilities.tools and init.capabilities.tools.list_changed, (
                    f"server does not advertise tools.listChanged: {init.capabilities!r}"
                )
                before = {t.name for t in await list_all_tools(session)}
                assert INTEROP_TOOL["name"] not in before
                await anyio.sleep(0.3)  # let the SDK open its GET stream for server notifications

                status, answer = await rest("POST", f"{base}/v1/tools", INTEROP_TOOL)
                assert status == 201, f"POST /v1/tools {json.dumps(INTEROP_TOOL)} -> {status} {answer!r}"
                created = True
                await next_list_changed("POST /v1/tools")
                after = {t.name: t for t in await list_all_tools(session)}
                assert INTEROP_TOOL["name"] in after, f"tools/list after the change lacks interop_tool: {sorted(after)}"
                assert GOVERNANCE_KEY in (after[INTEROP_TOOL["name"]].meta or {})

                status, answer = await rest("DELETE", f"{base}/v1/tools/{INTEROP_TOOL['name']}")
                assert status in (200, 204), f"DELETE /v1/tools/interop_tool -> {status} {answer!r}"
                created = False
                await next_list_changed("DELETE /v1/tools/interop_tool")
                gone = {t.name for t in await list_all_tools(session)}
                assert INTEROP_TOOL["name"] not in gone, "interop_tool still listed after DELETE"
            finally:
                if created:
                    await rest("DELETE", f"{base}/v1/tools/{INTEROP_TOOL['name']}")

    run(body)


# ---------------------------------------------------------------------------------------------
# 8. confirmation over MCP: elicitation when the client can ask its user, an error otherwise


def _error_kind(result: types.CallToolResult) -> Any:
    meta = result.meta or {}
    return (meta.get("dev.toolgate/result") or {}).get("errorKind")


@pytest.mark.parametrize("answer", ["accept", "decline", "cancel"])
def test_confirmation_through_elicitation(server: Server, answer: str) -> None:
    asked: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> Any:
        asked.append(params)
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action=answer)

    async def body() -> None:
        async with session_for(server, elicitation_callback=on_elicit) as (session, _):
            result = await session.call_tool("test_confirmed_action", {"what": "the thing"})
        assert len(asked) == 1, f"expected one elicitation/create, got {asked!r}"
        assert "test_confirmed_action" in asked[0].message, asked[0].message
        if answer == "accept":
            assert result.is_error is False, texts(result)
            assert result.structured_content == {"done": "the thing"}, result
        else:
            assert result.is_error is True, result
            assert _error_kind(result) == "rejected", result

    run(body)


def test_confirmation_without_elicitation_waits_as_a_named_approval(server: Server) -> None:
    async def body() -> None:
        async with session_for(server) as (session, _):
            result = await session.call_tool("test_confirmed_action", {"what": "the thing"})
        assert result.is_error is True, result
        assert _error_kind(result) == "confirmation_required", result
        approval = ((result.meta or {}).get("dev.toolgate/result") or {}).get("approvalId")
        assert isinstance(approval, str) and approval.startswith("apr_"), result
        assert approval in texts(result), texts(result)
        assert f"/v1/approvals/{approval}/approve" in texts(result), texts(result)

    run(body)


# ---------------------------------------------------------------------------------------------
# 9. consent is explicit: only an accept with approve: true (the JSON boolean) runs the call

CONSENT_ANSWERS = [
    # (label, content of the client's accept, whether the call runs, words the refusal names)
    ("empty", {}, False, ["without approve: true"]),
    ("approve-false", {"approve": False}, False, ["approve: false"]),
    ("approve-string", {"approve": "true"}, False, ["not the boolean true"]),
    ("approve-one", {"approve": 1}, False, ["not the boolean true"]),
    ("approve-true", {"approve": True}, True, []),
]


@pytest.mark.parametrize(
    "content,runs,words", [a[1:] for a in CONSENT_ANSWERS], ids=[a[0] for a in CONSENT_ANSWERS]
)
def test_consent_is_explicit(server: Server, content: dict[str, Any], runs: bool, words: list[str]) -> None:
    asked: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> Any:
        asked.append(params)
        return types.ElicitResult(action="accept", content=content)

    async def body() -> None:
        async with session_for(server, elicitation_callback=on_elicit) as (session, _):
            # A tool with a side effect we can count ...
            result = await session.call_tool("test_confirmed_action", {"what": "the thing"})
            counted = await session.call_tool("test_confirmed_action_runs", {})
            # ... and a real one: a file written (or not) under the fixture's root.
            path = "consent/written.txt"  # each test has its own server and root
            written = await session.call_tool("write_file", {"path": path, "content": "written by consent"})
            read = await session.call_tool("read_file", {"path": path})

        assert len(asked) == 2, f"expected two elicitation/create (one per confirmed call), got {asked!r}"
        for params in asked:
            schema = getattr(params, "requested_schema", None) or {}
            approve = (schema.get("properties") or {}).get("approve")
            assert isinstance(approve, dict) and approve.get("type") == "boolean", schema
            assert "default" not in approve, f"the approve field has a default: {approve!r}"
            assert "approve" in (schema.get("required") or []), schema
        assert counted.is_error is False, texts(counted)
        if runs:
            assert result.is_error is False, texts(result)
            assert result.structured_content == {"done": "the thing"}, result
            assert counted.structured_content == {"runs": 1}, f"ran {counted.structured_content!r} times, not once"
            assert written.is_error is False, texts(written)
            assert read.is_error is False and "written by consent" in texts(read), texts(read)
        else:
            for refused in (result, written):
                assert refused.is_error is True, f"accept with {content!r} ran the call: {texts(refused)}"
                assert _error_kind(refused) == "rejected", refused
                message = texts(refused)
                absent = [w for w in words if w not in message]
                assert not absent, f"the refusal {message!r} does not say {absent}"
            assert counted.structured_content == {"runs": 0}, f"accept with {content!r}: {counted.structured_content!r}"
            assert read.is_error is True, f"accept with {content!r} wrote the file: {texts(read)}"

    run(body)


# ---------------------------------------------------------------------------------------------
# 10. a client pinned to an older revision is answered in it


def test_client_pinned_to_2025_03_26(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK offers its newest handshake revision; pinned to 2025-03-26 (the version it puts
    in `initialize`), it gets 2025-03-26 back and lists and calls in it, and the answers carry
    only what that revision defines: no structured content, titles, output schemas or tool
    `_meta`."""
    import mcp.client.session as client_session

    monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", "2025-03-26")

    async def body() -> None:
        wire = Wire()
        async with session_for(server, wire=wire) as (session, init):
            assert init.protocol_version == "2025-03-26", init
            assert session.protocol_version == "2025-03-26"
            tools = await list_all_tools(session)
            good = await session.call_tool("calculator", {"expression": "6 * 7"})
            bad = await session.call_tool("calculator", {"expression": "1", "x": 1})
        sent = [m for _, m in wire.sent("initialize")]
        assert sent and sent[0]["params"]["protocolVersion"] == "2025-03-26", wire.dump()
        assert "title" not in init.server_info.model_dump(exclude_none=True), init.server_info
        names = [t.name for t in tools]
        assert "calculator" in names, names
        for tool in tools:
            assert tool.title is None and tool.output_schema is None and tool.meta is None, tool
            assert tool.input_schema.get("type") == "object", tool
        assert good.is_error is False, texts(good)
        assert good.structured_content is None, good
        assert json.loads(texts(good)) == {"result": 42}, texts(good)
        assert bad.is_error is True and "'x'" in texts(bad), texts(bad)
        assert _error_kind(bad), bad  # the result's _meta, which 2025-03-26 has, names the kind

    run(body)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_each_handshake_revision_gets_its_own(
    server: Server, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """Pinned to 2025-06-18 or 2025-11-25, the SDK gets that revision back (not the newest
    toolgate speaks), lists and calls in it, and gets structured content, which both define."""
    import mcp.client.session as client_session

    monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", version)

    async def body() -> None:
        wire = Wire()
        async with session_for(server, wire=wire) as (session, init):
            assert init.protocol_version == version, init
            assert session.protocol_version == version
            tools = await list_all_tools(session)
            good = await session.call_tool("calculator", {"expression": "6 * 7"})
        sent = [m for _, m in wire.sent("initialize")]
        assert sent and sent[0]["params"]["protocolVersion"] == version, wire.dump()
        assert "calculator" in [t.name for t in tools]
        assert good.is_error is False, texts(good)
        assert good.structured_content == {"result": 42}, good

    run(body)


def test_the_sdks_own_handshake_revision_is_answered_in_kind(server: Server) -> None:
    """Unpinned, the SDK offers its newest handshake revision and gets that one back."""
    import mcp.client.session as client_session

    async def body() -> None:
        async with session_for(server) as (session, init):
            assert init.protocol_version == client_session.LATEST_HANDSHAKE_VERSION, init
            assert init.protocol_version in ("2025-06-18", "2025-11-25"), init

    run(body)


# ---------------------------------------------------------------------------------------------
# 11. closing an HTTP session


def test_closing_a_session_logs_no_termination_failure(
    http_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK ends its session with `DELETE /mcp` on close and warns `Session termination
    failed: <status>` for anything but 200/204 (405, termination not allowed, only at debug).
    toolgate ends the session and answers 204: no warning, and the session is gone."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    caplog.set_level(logging.DEBUG, logger="mcp.client.streamable_http")
    deletes: list[tuple[str, int]] = []

    async def on_response(response: Any) -> None:
        if response.request.method == "DELETE":
            deletes.append((response.request.headers.get("mcp-session-id", ""), response.status_code))

    async def body() -> None:
        client = create_mcp_http_client()
        client.event_hooks = {"request": [], "response": [on_response]}
        async with client:
            async with streamable_http_client(http_server.mcp_url, http_client=client) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    await session.list_tools()

    run(body)
    termination = [r.getMessage() for r in caplog.records if "termination" in r.getMessage().lower()]
    assert not termination, f"the SDK complained about the session's end: {termination}"
    assert len(deletes) == 1 and deletes[0][1] == 204, f"DELETE /mcp answers: {deletes}"
    # The session is gone: a request on its id is answered 404.
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    req = urllib.request.Request(http_server.mcp_url, data=json.dumps(init).encode(), method="POST")
    req.add_header("content-type", "application/json")
    req.add_header("accept", "application/json, text/event-stream")
    req.add_header("mcp-session-id", deletes[0][0])
    req.add_header("mcp-protocol-version", "2025-11-25")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    assert status == 404, f"the closed session {deletes[0][0]} still answers ({status})"


# ---------------------------------------------------------------------------------------------
# 12. the 2026-07-28 revision: no session, server/discover, subscriptions/listen


@asynccontextmanager
async def modern_client(srv: Server, **kwargs: Any) -> AsyncIterator[Any]:
    """The SDK's high-level Client in its default mode, which probes `server/discover` and takes
    the newest revision both sides speak."""
    from mcp import Client

    target: Any = srv.mcp_url if srv.transport == "http" else StdioServerParameters(
        command=str(BINARY), args=["--stdio"]
    )
    async with Client(target, cache=None, **kwargs) as client:
        yield client


def test_2026_07_28_client_lists_and_calls(server: Server) -> None:
    async def body() -> None:
        async with modern_client(server) as client:
            assert client.protocol_version == "2026-07-28", client.protocol_version
            listed = await client.list_tools()
            names = [t.name for t in listed.tools]
            assert names == sorted(names), f"tools/list is not in name order: {names}"
            assert "calculator" in names, names
            assert listed.cache_scope == "private", listed
            good = await client.call_tool("calculator", {"expression": "6 * 7"})
            bad = await client.call_tool("calculator", {"expression": "1", "x": 1})
            confirmed = await client.call_tool("test_confirmed_action", {"what": "the thing"})
            counted = await client.call_tool("test_confirmed_action_runs", {})
        assert good.is_error is False and good.structured_content == {"result": 42}, good
        assert bad.is_error is True and "'x'" in texts(bad), texts(bad)
        # A client that cannot elicit: the confirmation waits as a durable approval, nothing runs.
        assert confirmed.is_error is True and _error_kind(confirmed) == "confirmation_required", confirmed
        assert (confirmed.meta or {}).get("dev.toolgate/result", {}).get("approvalId"), confirmed
        assert counted.structured_content == {"runs": 0}, counted

    run(body)


@pytest.mark.parametrize(
    "content,runs",
    [({"approve": True}, 1), ({}, 0), ({"approve": "true"}, 0), ({"approve": False}, 0)],
    ids=["approve-true", "empty", "string-true", "approve-false"],
)
def test_2026_07_28_confirmation_is_an_input_required_round_trip(
    server: Server, content: dict[str, Any], runs: int
) -> None:
    """2026-07-28 has no server-initiated requests: the confirmation form comes back as an
    input-required result, the SDK answers it through its elicitation callback and calls again;
    only `approve: true` runs the call, once."""
    asked: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> Any:
        asked.append(params)
        return types.ElicitResult(action="accept", content=content)

    async def body() -> None:
        async with modern_client(server, elicitation_callback=on_elicit) as client:
            assert client.protocol_version == "2026-07-28", client.protocol_version
            result = await client.call_tool("test_confirmed_action", {"what": "the thing"})
            counted = await client.call_tool("test_confirmed_action_runs", {})
        assert len(asked) == 1, f"expected one confirmation form, got {asked!r}"
        schema = getattr(asked[0], "requested_schema", None) or {}
        approve = (schema.get("properties") or {}).get("approve")
        assert isinstance(approve, dict) and "default" not in approve, schema
        assert counted.structured_content == {"runs": runs}, f"{content!r}: {counted.structured_content!r}"
        if runs:
            assert result.is_error is False and result.structured_content == {"done": "the thing"}, result
        else:
            assert result.is_error is True and _error_kind(result) == "rejected", result
            assert "not approved" in texts(result), texts(result)

    run(body)


def test_2026_07_28_listen_announces_tool_changes(http_server: Server) -> None:
    from mcp.client.subscriptions import ToolsListChanged

    async def body() -> None:
        async with modern_client(http_server) as client:
            assert client.protocol_version == "2026-07-28", client.protocol_version
            async with client.listen(tools_list_changed=True) as sub:
                assert sub.honored is not None and sub.honored.tools_list_changed, sub.honored
                status, reply = await rest("POST", f"{http_server.base_url}/v1/tools", INTEROP_TOOL)
                assert status in (200, 201), (status, reply)
                with anyio.fail_after(10):
                    event = await sub.__anext__()
                assert isinstance(event, ToolsListChanged), event
            listed = await client.list_tools()
            assert "interop_tool" in [t.name for t in listed.tools]
        status, _ = await rest("DELETE", f"{http_server.base_url}/v1/tools/interop_tool")
        assert status in (200, 204), status

    run(body)


@pytest.mark.parametrize("level", [None, "info", "warning"])
def test_2026_07_28_logs_only_at_the_requests_log_level(server: Server, level: str | None) -> None:
    """2026-07-28 makes log messages a per-request opt-in (`_meta` logLevel): without it a call
    sends none, with it only those at or above it (the tool logs three at info)."""
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async def body() -> None:
        async with modern_client(server, logging_callback=on_log, log_level=level) as client:
            assert client.protocol_version == "2026-07-28", client.protocol_version
            result = await client.call_tool("test_tool_with_logging", {})
        assert result.is_error is False, texts(result)
        expected = 3 if level == "info" else 0
        assert len(logs) == expected, f"log level {level!r}: {len(logs)} log messages, expected {expected}: {logs!r}"

    run(body)
