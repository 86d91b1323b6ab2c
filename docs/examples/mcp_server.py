"""A small MCP server, written with the MCP SDK's own server class, that speaks over stdio.

Run it as ``python docs/examples/mcp_server.py``; an agent gets its tools with
``trio_agent.mcp.open_server(sys.executable, args=["docs/examples/mcp_server.py"])``, or
on the command line with ``trio-agent run ... --mcp "python docs/examples/mcp_server.py"``.

Needs the ``mcp`` package: ``pip install 'trio_agent[mcp]'``.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("example", log_level="ERROR")  # its log goes to stderr

_cancelled: list[str] = []  # the calls of wait that the client cancelled, in order
_cancellation: anyio.Event | None = None  # set at the first (made in the server's loop)


def _first_cancellation() -> anyio.Event:
    global _cancellation
    if _cancellation is None:
        _cancellation = anyio.Event()
    return _cancellation


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")  # the model reads this text
    return a / b


@server.tool()
async def wait(seconds: float, ctx: Context) -> str:
    """Wait this many seconds, then say so (a slow tool, to abort). It reports its
    progress once, when it starts waiting."""
    try:
        await ctx.report_progress(0, seconds, f"waiting {seconds:g} seconds")
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():  # the client sent notifications/cancelled
        _cancelled.append(f"wait({seconds:g})")
        _first_cancellation().set()
        raise
    return f"waited {seconds:g} seconds"


@server.tool()
async def cancelled_calls() -> str:
    """The calls of wait that the client cancelled so far ("none" if none was within 5 s)."""
    with anyio.move_on_after(5):
        await _first_cancellation().wait()
    return ", ".join(_cancelled) or "none"


if __name__ == "__main__":
    server.run()  # stdio
