"""A small MCP server, written with the MCP SDK's own server class, that speaks over stdio.

Run it as ``python docs/examples/mcp_server.py``; an agent gets its tools with
``trio_agent.mcp.open_server(sys.executable, args=["docs/examples/mcp_server.py"])``, or
on the command line with ``trio-agent run ... --mcp "python docs/examples/mcp_server.py"``.

Needs the ``mcp`` package: ``pip install 'trio_agent[mcp]'``.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("example", log_level="ERROR")  # its log goes to stderr


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
async def wait(seconds: float) -> str:
    """Wait this many seconds, then say so (a slow tool, to abort)."""
    await anyio.sleep(seconds)
    return f"waited {seconds:g} seconds"


if __name__ == "__main__":
    server.run()  # stdio
