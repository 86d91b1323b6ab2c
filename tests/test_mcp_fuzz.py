"""Whatever an MCP server sends, ``open_server`` and a tool call end with what the module
documents, bounded, and soon.

Each example is a server that answers every request of the client (the handshake, each page
of the tool list, each call) with a reply drawn here: the well-formed reply, or one broken at
any depth (a field replaced by an arbitrary JSON value, nested deeper than the SDK's parser
reads or not, far too long, or dropped), an arbitrary result, an error reply (its fields
arbitrary, its id null), a broken envelope, or a line that is not JSON; and before a reply,
notifications (progress with arbitrary fields, list changes, log messages) and lines that
cannot be read. The server speaks through the SDK's own client session, over memory streams
that parse each message the way the SDK's stdio transport does, on virtual time: a wait that
never ends is a failure at once.

What the test asserts is what trio_agent.mcp promises: ``open_server`` raises nothing but a
``RuntimeError`` naming the server (at most ``MAX_ERROR_CHARS`` long), or yields a server with
at most ``MAX_TOOLS`` tools; a call returns a result within the documented bounds, or raises
a plain ``Exception`` (an error result) at most ``MAX_ERROR_CHARS`` long; nothing hangs.
tests/test_mcp_limits.py and tests/test_mcp.py do the same against real servers.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp.types as mcp_types
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from trio_agent import ImageContent, TextContent, ToolResult
from trio_agent.mcp import (
    MAX_ERROR_CHARS,
    MAX_IMAGE_CHARS,
    MAX_RESULT_BLOCKS,
    MAX_RESULT_CHARS,
    MAX_TOOLS,
    McpServer,
    _open,
)

NAME = "fuzz"
DEEP_MARK = "\0deep\0"

INITIALIZE: dict[str, Any] = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "fuzz", "version": "1"},
}
LISTING: dict[str, Any] = {
    "tools": [
        {
            "name": "a",
            "description": "A tool.",
            "inputSchema": {
                "type": "object",
                "properties": {"x": {"type": "string", "default": "d", "examples": ["e"]}},
            },
        },
        {
            "name": "b",
            "title": "B",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"k": {"pattern": "^(a+)+$"}}},
        },
    ]
}
RESULT: dict[str, Any] = {
    "content": [
        {"type": "text", "text": "hi"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        {"type": "resource_link", "uri": "file:///x", "name": "x"},
    ],
    "structuredContent": {"k": [1, 2]},
    "isError": False,
}
FREE: dict[str, list[tuple[Any, ...]]] = {
    "tools/list": [
        ("tools", 0, "inputSchema", "properties", "x", "default"),
        ("tools", 0, "inputSchema", "properties", "x", "examples", 0),
    ],
    "tools/call": [("structuredContent", "k", 0)],
}
WELL_FORMED = {"initialize": INITIALIZE, "tools/list": LISTING, "tools/call": RESULT}

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["", "text", "image", "object", "2025-11-25", "\u2028", "\ud800"])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
# Past what a result keeps, in one piece or in many; nested past the 200 levels of the SDK's
# parser (the reply cannot be read) and below it (it can).
TEXT_BLOCKS = st.sampled_from(
    [(1, MAX_RESULT_CHARS + 1), (2, 60_000), (99, 1_000), (101, 1), (3_000, 1), (5, 0)]
).map(lambda shape: [{"type": "text", "text": "x" * shape[1]}] * shape[0])
IMAGES = st.sampled_from([(1, MAX_IMAGE_CHARS // 2), (3, MAX_IMAGE_CHARS // 3), (50, 4)]).map(
    lambda shape: [{"type": "image", "data": "A" * shape[1], "mimeType": "image/png"}] * shape[0]
)
TOOLS = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["a", "b", "c", "", "a" * 300]), "inputSchema": JSON_VALUES},
        optional={"description": st.text(max_size=5), "title": JSON_VALUES},
    ),
    max_size=40,
)
BIG = (
    st.sampled_from(["x" * (MAX_RESULT_CHARS + 1), "y" * 60_000])
    | st.builds(
        lambda depth, opener: (DEEP_MARK, depth, opener),
        st.sampled_from([150, 250, 1000]),
        st.sampled_from("[{"),
    )
    | TEXT_BLOCKS
    | IMAGES
    | TOOLS
)
NOT_JSON = st.sampled_from([math.nan, math.inf, -math.inf])  # the SDK's parser reads them
VALUES = JSON_VALUES | BIG | NOT_JSON
NOT_AN_ID: st.SearchStrategy[Any] = (
    st.none() | st.booleans() | st.just(1.5) | st.lists(SCALARS, max_size=2) | st.just({})
)


def _nodes(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every node of ``tree``, the root's first."""
    out = [path]
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += _nodes(value, (*path, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            out += _nodes(value, (*path, index))
    return out


def _replace(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    tree = copy.deepcopy(tree)
    node = tree
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return tree


def _drop(tree: Any, path: tuple[Any, ...]) -> Any:
    tree = copy.deepcopy(tree)
    node = tree
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return tree


def _text(message: dict[str, Any]) -> str:
    """The message as one line of JSON, with a deep value written in where it is marked."""
    deep: list[str] = []

    def default(value: Any) -> Any:
        raise TypeError(value)  # pragma: no cover

    def unmark(value: Any) -> Any:
        if isinstance(value, tuple) and value[:1] == (DEEP_MARK,):
            _, depth, opener = value
            deep.append(
                "[" * depth + "1" + "]" * depth
                if opener == "["
                else '{"a":' * depth + "1" + "}" * depth
            )
            return DEEP_MARK
        if isinstance(value, dict):
            return {key: unmark(item) for key, item in value.items()}
        if isinstance(value, list):
            return [unmark(item) for item in value]
        return value

    text = json.dumps(unmark(message), default=default)
    for piece in deep:
        text = text.replace(json.dumps(DEEP_MARK), piece, 1)
    return text


@st.composite
def replies(draw: st.DrawFn, method: str, request_id: Any) -> list[str]:
    """What the server sends for one request: notifications, then its reply."""
    out: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        out.append(draw(notifications(request_id)))
    well_formed = WELL_FORMED.get(method, {})
    kind = draw(
        st.sampled_from(
            [
                *("well formed", "changed", "changed", "changed", "dropped", "replaced"),
                *("big", "flood", "flood", "NaN", "NaN", "error", "error with a null id"),
                *("broken envelope", "not JSON"),
            ]
        )
    )
    envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if kind == "well formed":
        envelope["result"] = well_formed
    elif kind == "changed":
        path = draw(st.sampled_from(_nodes(well_formed)))
        envelope["result"] = _replace(well_formed, path, draw(VALUES))
    elif kind == "flood" and method == "tools/call":  # more than a result keeps
        content = draw(st.lists(TEXT_BLOCKS | IMAGES, min_size=1, max_size=3))
        envelope["result"] = {**RESULT, "content": [block for part in content for block in part]}
    elif kind in ("big", "flood"):  # too long, too many, too deep
        path = draw(st.sampled_from(_nodes(well_formed)))
        envelope["result"] = _replace(well_formed, path, draw(BIG))
    elif kind == "NaN":  # where any value is valid: a schema's annotations, structured content
        path = draw(st.sampled_from(FREE.get(method, [()])))
        envelope["result"] = _replace(well_formed, path, draw(NOT_JSON))
    elif kind == "dropped":
        paths = _nodes(well_formed)[1:]
        envelope["result"] = _drop(well_formed, draw(st.sampled_from(paths)))
    elif kind == "replaced":
        envelope["result"] = draw(VALUES)
    elif kind in ("error", "error with a null id"):
        envelope["error"] = draw(
            st.fixed_dictionaries(
                {"code": st.integers(-(2**31), 2**31) | JSON_VALUES, "message": VALUES},
                optional={"data": JSON_VALUES},
            )
        )
        if kind == "error with a null id":
            envelope["id"] = None
    elif kind == "broken envelope":
        envelope["result"] = well_formed
        envelope[draw(st.sampled_from(["id", "jsonrpc"]))] = draw(NOT_AN_ID)
    else:
        return [*out, draw(st.text(max_size=20))]
    out.append(_text(envelope))
    return out


@st.composite
def notifications(draw: st.DrawFn, request_id: Any) -> str:
    kind = draw(st.sampled_from(["progress", "list changed", "log", "request", "not JSON"]))
    if kind == "not JSON":
        return draw(st.text(max_size=20))
    message: dict[str, Any]
    if kind == "progress":
        params = draw(
            st.fixed_dictionaries(
                {"progressToken": st.just(request_id) | JSON_VALUES, "progress": VALUES},
                optional={"total": JSON_VALUES, "message": VALUES},
            )
        )
        message = {"method": "notifications/progress", "params": params}
    elif kind == "list changed":
        message = {"method": "notifications/tools/list_changed"}
    elif kind == "log":
        message = {
            "method": "notifications/message",
            "params": {"level": "info", "data": draw(VALUES)},
        }
    else:
        method = draw(st.sampled_from(["ping", "roots/list", "sampling/createMessage"]))
        message = {"id": "s1", "method": method, "params": draw(JSON_VALUES)}
    return _text({"jsonrpc": "2.0", **message})


def _read(text: str) -> SessionMessage | Exception:
    """A line as the SDK's stdio transport reads it: a message, or the error of its parser."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as exc:
        return exc


async def _serve(
    draw: Callable[[str, Any], list[str]],
    requests: anyio.abc.ObjectReceiveStream[SessionMessage],
    replies: anyio.abc.ObjectSendStream[SessionMessage | Exception],
) -> None:
    async with requests, replies:
        async for item in requests:
            message = item.message
            if isinstance(message, mcp_types.JSONRPCRequest):
                for text in draw(message.method, message.id):
                    try:
                        await replies.send(_read(text))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        return  # the client has closed the session: what is left goes nowhere


def _check_result(result: ToolResult) -> None:
    assert isinstance(result, ToolResult)
    assert len(result.content) <= MAX_RESULT_BLOCKS
    text = sum(len(block.text) for block in result.content if isinstance(block, TextContent))
    assert text <= MAX_RESULT_CHARS
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert sum(len(image.data) + len(image.mime_type) for image in images) <= MAX_IMAGE_CHARS
    # What goes to the model, or into a saved transcript, is JSON that encodes (no NaN).
    json.dumps([block.text for block in result.content if isinstance(block, TextContent)])
    details = json.dumps(result.details, ensure_ascii=False, allow_nan=False)
    assert len(details) <= MAX_RESULT_CHARS


async def _session(data: st.DataObject) -> None:
    with trio.fail_after(600):  # virtual seconds: a wait that never ends fails at once
        await _connected(data)


async def _connected(data: st.DataObject) -> None:
    # Which requests get a drawn reply: all of them, or one kind (the others are answered
    # well, so that most examples get as far as their calls).
    target = data.draw(
        st.sampled_from(
            ["initialize", "tools/list", "tools/list", "tools/call", "tools/call", "all"]
        )
    )

    def draw(method: str, request_id: Any) -> list[str]:
        if target not in (method, "all"):
            return [_text({"jsonrpc": "2.0", "id": request_id, "result": WELL_FORMED[method]})]
        return data.draw(replies(method, request_id), label=method)

    outcome: list[str] = []
    async with trio.open_nursery() as nursery:
        to_client, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](
            math.inf
        )
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage](math.inf)
        nursery.start_soon(_serve, draw, from_client, to_client)

        async def connect(stack: AsyncExitStack) -> tuple[Any, Any]:
            return from_server, to_server

        try:
            async with _open(NAME, connect) as server:
                await _use(server, outcome)
        except RuntimeError as exc:
            message = str(exc)
            assert message.startswith(f"MCP server {NAME!r} failed"), message
            assert len(message) <= MAX_ERROR_CHARS
            outcome.append("open_server failed")
    if target == "tools/call":  # the handshake and the listing were well formed
        assert outcome[-1] == "open", outcome
        assert len(outcome) == 1 + min(3, len(LISTING["tools"]))  # every call ended
    for what in (f"drawn: {target}", *outcome):
        event(what)  # pytest --hypothesis-show-statistics: how far the examples got


async def _use(server: McpServer, outcome: list[str]) -> None:
    assert len(server.tools) <= MAX_TOOLS
    assert len(server.skipped) <= MAX_TOOLS
    for tool in server.tools:  # what every request to the model carries: JSON that encodes
        json.dumps([tool.name, tool.description, tool.parameters], allow_nan=False).encode()
    for tool in server.tools[:3]:
        error: Exception | None = None
        # Checked after the call: the SDK calls a progress callback in a scope that logs
        # what it raises and goes on.
        updates: list[ToolResult] = []
        try:
            result = await tool.execute("c", {}, updates.append)
        except Exception as exc:  # an error result: the loop reads its text
            error = exc
        for update in updates:
            _check_update(update)
        if error is None:
            _check_result(result)
            outcome.append("result")
        else:
            assert type(error) is Exception, repr(error)
            assert 0 < len(str(error)) <= MAX_ERROR_CHARS
            outcome.append("error result")
    outcome.append("open")


def _check_update(partial: ToolResult) -> None:
    _check_result(partial)
    assert len(partial.content) == 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_whatever_a_server_sends_open_server_and_calls_end_as_documented(
    data: st.DataObject,
) -> None:
    trio.run(_session, data, clock=trio.testing.MockClock(autojump_threshold=0))
