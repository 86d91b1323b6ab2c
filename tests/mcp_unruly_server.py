"""An MCP server that sends what a careful one would not, for tests/test_mcp_limits.py: built
on the official SDK's low-level ``Server`` class, which sends all of it without complaint.

``python tests/mcp_unruly_server.py LISTING`` serves over stdio;
``python tests/mcp_unruly_server.py LISTING http`` serves streamable HTTP on a loopback port
of the system's choosing and prints ``ready PORT`` once the socket listens.

``LISTING`` is what ``tools/list`` answers, besides the tools below (the ``relist`` tool
changes it, then sends ``notifications/tools/list_changed``):

- ``plain``: the tools below, on one page;
- ``many:N``: N more tools, ``t0`` to ``t{N-1}``;
- ``sized:N``: two more tools, ``fits`` and ``too_big``, defined in N and N + 1 characters
  (name, title, description and input schema as compact JSON);
- ``long_names``: two more tools whose schemas are not valid, named with 128 and 129
  characters;
- ``nan``: the tools ``finite`` and ``nan`` only, written to stdout by hand: the second's
  schema holds ``NaN``, which the SDK's parser reads (and its server never writes);
- ``deep``: one more tool whose schema is nested 250 levels deep (past what the SDK's parser
  reads: the whole reply is then unreadable);
- ``lookahead``: two more tools, ``mail`` (zod's e-mail pattern, with lookaheads, beside data
  that holds such a pattern) and ``keyed`` (a ``patternProperties`` key with a lookahead);
- ``pages:N``: N pages, each with a tool ``page{n}``, all but the last with a cursor;
- ``endless``: pages without end, each with a tool ``page{n}`` and a new cursor;
- ``repeat``: pages whose cursor is always the same;
- ``refuse:N``: an error reply whose message is N characters long.

Tools: ``texts`` (text blocks of the given sizes), ``error`` (an ``isError`` result of a text
of the given size), ``structured`` (a text block and structured content whose JSON has the
given size), ``images`` (images of base64 data), ``progress`` (a progress message of the
given size, then a result), ``deep`` (structured content nested 250
levels deep), ``bad_utf8`` (a reply with a byte that is not UTF-8, written to stdout
before the SDK's own reply), ``nan_structured`` (structured content holding ``NaN``,
written the same way), ``nan_progress`` (a progress notification of ``Infinity`` out of
``NaN``, written the same way, then a result), ``redos`` (structured content that takes
exponential time to check against its output schema with a backtracking regex engine),
``relist`` and ``pid``.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

listing = sys.argv[1] if len(sys.argv) > 1 else "plain"
DEPTH = 250  # past the 200 levels pydantic's JSON parser reads


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _tool(name: str, properties: dict[str, Any] | None = None, **more: Any) -> types.Tool:
    schema = {"type": "object", "properties": properties or {}}
    return types.Tool(name=name, input_schema=schema, **more)


SIZES = {"type": "array", "items": {"type": "integer"}}
COUNT = {"type": "integer"}
TOOLS = [
    _tool("texts", {"sizes": SIZES}),
    _tool("error", {"size": COUNT}),
    _tool("structured", {"size": COUNT}),
    _tool("images", {"count": COUNT, "size": COUNT}),
    _tool("progress", {"size": COUNT}),
    _tool("deep"),
    _tool("bad_utf8"),
    _tool("nan_structured"),
    _tool("nan_progress"),
    _tool(
        "redos",
        {"n": COUNT},
        output_schema={
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        },
    ),
    _tool("relist", {"listing": {"type": "string"}}),
    _tool("pid"),
]


def _sized(name: str, size: int) -> types.Tool:
    """A tool defined in ``size`` characters, as trio_agent.mcp counts them."""
    schema = {"type": "object"}
    base = len(name) + len(json.dumps(schema, separators=(",", ":")))
    return types.Tool(name=name, description="d" * (size - base), input_schema=schema)


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    kind, _, count = listing.partition(":")
    cursor = None if params is None else params.cursor
    if kind in ("endless", "pages"):
        page = int(cursor or 0)
        last = kind == "pages" and page + 1 == int(count)
        next_cursor = None if last else str(page + 1)
        return types.ListToolsResult(tools=[_tool(f"page{page}")], next_cursor=next_cursor)
    if kind == "repeat":
        return types.ListToolsResult(tools=[_tool("page")], next_cursor="again")
    if kind == "refuse":
        raise MCPError(-32000, "e" * int(count))
    if kind == "nan":
        schema = '{"type":"object","properties":{"x":{"type":"number","maximum":BOUND}}}'
        listed = [
            f'{{"name":"{name}","inputSchema":{schema.replace("BOUND", bound)}}}'
            for name, bound in NAN
        ]
        _reply_by_hand(ctx, '{"tools":[' + ",".join(listed) + "]}")
    tools = list(TOOLS)
    if kind == "many":
        tools += [_tool(f"t{i}", {"x": COUNT}) for i in range(int(count))]
    elif kind == "sized":
        tools += [_sized("fits", int(count)), _sized("too_big", int(count) + 1)]
    elif kind == "long_names":
        bad = {"type": "object", "properties": {"x": {"type": "no such type"}}}
        tools += [types.Tool(name=name, input_schema=bad) for name in ("n" * 128, "m" * 129)]
    elif kind == "deep":
        tools.append(types.Tool(name="deeper", input_schema={"type": "object", **nested(DEPTH)}))
    elif kind == "lookahead":
        tools += [
            types.Tool(name="mail", input_schema=MAIL_SCHEMA),
            types.Tool(name="keyed", input_schema=KEYED_SCHEMA),
        ]
    return types.ListToolsResult(tools=tools)


# What zod 4 writes for z.object({to: z.email(), pattern: z.enum([...])}): its e-mail
# pattern has two lookaheads, which RE2 does not have.
ZOD_EMAIL = (
    "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@"
    "([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"
)
MAIL_SCHEMA = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "format": "email", "pattern": ZOD_EMAIL},
        "pattern": {"type": "string", "enum": ["(?=data)", "plain"]},
        "options": {"const": {"pattern": "(?=data, not a keyword)"}},
    },
    "required": ["to"],
}
# A lookahead as a key of patternProperties: the tool is left out.
KEYED_SCHEMA = {"type": "object", "patternProperties": {"^(?!x)": {"type": "string"}}}


NAN = [("finite", "10"), ("nan", "NaN")]


def _reply_by_hand(ctx: Any, result: str | bytes) -> None:
    """Write the reply to this request to stdout as it is, ahead of the SDK's (which comes
    too late: the client drops a second reply to a request)."""
    raw = result.encode() if isinstance(result, str) else result
    request_id = json.dumps(ctx.request_id).encode()
    wire.write(b'{"jsonrpc":"2.0","id":' + request_id + b',"result":' + raw + b"}\n")


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    global listing
    args = params.arguments or {}
    name = params.name
    if name == "texts":
        return types.CallToolResult(content=[_text("x" * size) for size in args["sizes"]])
    if name == "error":
        return types.CallToolResult(content=[_text("e" * args["size"])], is_error=True)
    if name == "structured":
        # json.dumps({"s": "yyy"}) is the 9 characters of {"s": ""} and the y's
        structured = {"s": "y" * (args["size"] - 9)}
        return types.CallToolResult(content=[_text("ok")], structured_content=structured)
    if name == "images":
        image = types.ImageContent(type="image", data="A" * args["size"], mime_type="image/png")
        return types.CallToolResult(content=[image] * args["count"])
    if name == "progress":
        token = (ctx.meta or {})["progress_token"]
        await ctx.session.send_progress_notification(
            token, 1, 2, "p" * args["size"], related_request_id=ctx.request_id
        )
        return types.CallToolResult(content=[_text("progressed")])
    if name == "bad_utf8":
        _reply_by_hand(ctx, b'{"content":[{"type":"text","text":"a\xffb"}]}')
        return types.CallToolResult(content=[_text("too late")])  # an answered id: dropped
    if name == "nan_progress":
        token = json.dumps((ctx.meta or {})["progress_token"])
        notice = f'{{"progressToken":{token},"progress":Infinity,"total":NaN}}'
        wire.write(b'{"jsonrpc":"2.0","method":"notifications/progress","params":')
        wire.write(notice.encode() + b"}\n")
        return types.CallToolResult(content=[_text("progressed")])
    if name == "nan_structured":
        _reply_by_hand(
            ctx, '{"content":[{"type":"text","text":"ok"}],"structuredContent":{"x":NaN}}'
        )
        return types.CallToolResult(content=[_text("too late")])
    if name == "deep":
        return types.CallToolResult(content=[_text("deep")], structured_content=nested(DEPTH))
    if name == "redos":
        return types.CallToolResult(
            content=[_text("checked?")], structured_content={"s": "a" * args["n"] + "!"}
        )
    if name == "relist":
        listing = args["listing"]
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[_text("relisted")])
    if name == "pid":
        return types.CallToolResult(content=[_text(str(os.getpid()))])
    return types.CallToolResult(content=[_text(f"no tool {name}")], is_error=True)


server = Server("trio-agent-unruly", on_list_tools=list_tools, on_call_tool=call_tool)


# The stdout the SDK writes to, so that bad_utf8 can write to it too.
wire = os.fdopen(os.dup(1), "wb", buffering=0)


async def _stdio() -> None:
    stdout = anyio.wrap_file(io.TextIOWrapper(wire, encoding="utf-8", write_through=True))
    async with stdio_server(stdout=stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(server.streamable_http_app(host="127.0.0.1"), log_level="warning")
    print(f"ready {sock.getsockname()[1]}", flush=True)
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[2:] == ["http"]:
        _serve_http()
    else:
        anyio.run(_stdio)
