"""A small MCP server for tests/test_mcp.py, built on the official SDK's own server class.

``python tests/mcp_server.py`` serves over stdio; ``python tests/mcp_server.py http`` serves
streamable HTTP on a loopback port of the system's choosing and prints ``ready PORT`` once the
socket listens. Tools: ``add``, ``slow`` (sleeps, reporting progress), ``fail`` (an error
result), ``crash`` (the process dies mid-call), ``pid``, ``grow`` (adds a tool, then sends
``notifications/tools/list_changed``) and ``spend`` (structured content under an output schema,
and an ``isError`` result that keeps it).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

server: MCPServer = MCPServer("trio-agent-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep for a while, reporting progress every tenth of it."""
    for step in range(10):
        await ctx.report_progress(step, 10, f"step {step}")
        await anyio.sleep(seconds / 10)
    return "slept"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("the tool failed on purpose")


@server.tool()
def crash() -> str:
    """Kill the server process mid-call."""
    os._exit(1)


@server.tool()
def big(size: int) -> str:
    """A text of ``size`` characters (a server that sends too much)."""
    return "x" * size


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


class Quota(BaseModel):
    left: int


@server.tool()
def spend(amount: int) -> Annotated[CallToolResult, Quota]:
    """Spend from a quota of 10: past it, an error result that still says what is left."""
    left = 10 - amount
    text = f"{left} left" if left >= 0 else "quota exceeded"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"left": left},
        is_error=left < 0,
    )


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the multiply tool and tell the client the list changed."""
    server.add_tool(multiply)
    await ctx.session.send_tool_list_changed()
    return "grown"


def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(server.streamable_http_app(host="127.0.0.1"), log_level="warning")
    print(f"ready {sock.getsockname()[1]}", flush=True)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        server.run()
