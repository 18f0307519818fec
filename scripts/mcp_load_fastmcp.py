#!/usr/bin/env python3
"""FastMCP server for the MCP load benchmark (scripts/mcp-load.sh).

One trivial tool, ``echo``, taking ``{"text": string}`` and returning the text
(as text content plus structuredContent ``{"text": ...}``), served over
Streamable HTTP at http://127.0.0.1:PORT/mcp by uvicorn, stateful sessions
and SSE responses (the SDK defaults, the same choices as the Rust servers).

Works with the official Python SDK (``pip install mcp``) in both of its
current shapes: mcp >= 2, where FastMCP is called ``MCPServer``
(``mcp.server.mcpserver``), and mcp 1.x (``mcp.server.fastmcp.FastMCP``).

Usage: mcp_load_fastmcp.py --port PORT
"""

from __future__ import annotations

import argparse
import logging
from importlib.metadata import version
from typing import TypedDict


class EchoResult(TypedDict):
    text: str


def build_app():
    """Return (starlette app, description) for the installed SDK version."""
    try:
        from mcp.server.mcpserver import MCPServer  # mcp >= 2

        server = MCPServer("mcp-load-fastmcp", log_level="WARNING")
        flavour = "MCPServer (FastMCP)"
        make_app = lambda: server.streamable_http_app(  # noqa: E731
            streamable_http_path="/mcp", json_response=False, stateless_http=False
        )
    except ImportError:
        from mcp.server.fastmcp import FastMCP  # mcp 1.x

        server = FastMCP(
            "mcp-load-fastmcp",
            log_level="WARNING",
            streamable_http_path="/mcp",
            json_response=False,
            stateless_http=False,
        )
        flavour = "FastMCP"
        make_app = server.streamable_http_app

    @server.tool(description="Return the given text unchanged")
    def echo(text: str) -> EchoResult:
        return {"text": text}

    return make_app(), f"{flavour}, mcp {version('mcp')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    # uvicorn's defaults: "auto" picks uvloop / httptools when they are
    # installed (uvicorn[standard]); a plain `pip install mcp` has neither.
    parser.add_argument("--loop", default="auto", help="uvicorn event loop")
    parser.add_argument("--http", default="auto", help="uvicorn HTTP/1.1 parser")
    args = parser.parse_args()

    import uvicorn

    app, flavour = build_app()
    loop = args.loop if args.loop != "auto" else ("uvloop" if has("uvloop") else "asyncio")
    http = args.http if args.http != "auto" else ("httptools" if has("httptools") else "h11")
    print(
        f"{flavour} (uvicorn {version('uvicorn')}, loop {loop}, http {http}) "
        f"listening on http://{args.host}:{args.port}/mcp",
        flush=True,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop=loop,
        http=http,
        log_level="warning",
        access_log=False,
        # One process, one event loop: the way FastMCP's own run() serves it.
        workers=1,
        lifespan="on",
    )


def has(module: str) -> bool:
    from importlib.util import find_spec

    return find_spec(module) is not None


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
