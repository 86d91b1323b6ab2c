"""Tools from MCP servers, through the official ``mcp`` SDK (``pip install 'trio_agent[mcp]'``).

:func:`open_server` connects to one server — a subprocess over stdio, or a streamable HTTP
endpoint — and yields an :class:`McpServer` whose ``tools`` are ordinary
:class:`trio_agent.AgentTool` objects: the model's arguments are validated against the
server's ``inputSchema`` before the call, like every tool's, and a failure of the server
becomes an error result the model reads, never an exception of the run::

    from trio_agent import Agent
    from trio_agent.mcp import open_server

    async with open_server("uvx", args=["mcp-server-fetch"], prefix="fetch_") as server:
        agent = Agent(model, tools=server.tools)
        server.on_tools_changed(agent.set_tools)   # the next run offers the new list
        await agent.prompt("...")

This module is not imported by ``import trio_agent``: the SDK (and its HTTP stack) load only
when an application imports ``trio_agent.mcp``.

What a call gives the model: the server's text blocks as text, its images as images; its
``structuredContent`` goes to the result's ``details`` and, when the server sent no text, to a
JSON text block as well. A result the server flags ``isError``, an MCP error reply, a server
that dies or a connection that drops mid-call: an error result with one sentence. When the
run is aborted during a call, ``Cancelled`` propagates (the SDK tells the server with
``notifications/cancelled``) and the loop records "Operation aborted".

What escapes :func:`open_server` is one exception, never an exception group of the SDK's
task groups:

=============================================  ==============================================
the block's own exception                      that exception, as raised
cancellation, ``KeyboardInterrupt``            ``trio.Cancelled``, ``KeyboardInterrupt``
the command cannot be started                  ``OSError`` naming the command
the server fails during the handshake, the     ``RuntimeError`` naming the server, with the
listing, or the connection breaks               cause chained
=============================================  ==============================================
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.client.session import IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ._errors import ToolDefinitionError
from ._messages import ImageContent, TextContent, ToolResult, ToolResultContent
from ._tools import AgentTool, ToolUpdate

__all__ = ["McpServer", "open_server"]

ToolFilter = Callable[[str], bool] | Collection[str]


class McpServer:
    """A connected MCP server: its tools, kept current while the ``open_server`` block runs.

    ``tools`` is a tuple of :class:`trio_agent.AgentTool` (each named ``prefix`` + the server's
    name). When the server sends ``notifications/tools/list_changed``, the list is fetched again,
    ``tools`` is replaced, and every callback given to :meth:`on_tools_changed` is called with the
    new tuple (an ``Agent`` picks it up from its next run:
    ``server.on_tools_changed(agent.set_tools)``).
    Tools outlive the block as objects, but a call after it is an error result.
    """

    def __init__(
        self, session: ClientSession, *, name: str, prefix: str, include: ToolFilter | None
    ) -> None:
        self.name = name
        self._session = session
        self._prefix = prefix
        self._include = include
        self._closed = False
        self._callbacks: list[Callable[[tuple[AgentTool, ...]], object]] = []
        self.tools: tuple[AgentTool, ...] = ()
        self.skipped: tuple[str, ...] = ()
        """Names of the server's tools left out because their schema is not one we can use."""

    def on_tools_changed(self, callback: Callable[[tuple[AgentTool, ...]], object]) -> None:
        """Call ``callback(tools)`` (sync) each time the server's tool list changes."""
        self._callbacks.append(callback)

    def _wanted(self, name: str) -> bool:
        if self._include is None:
            return True
        if callable(self._include):
            return bool(self._include(name))
        return name in self._include

    async def refresh(self) -> tuple[AgentTool, ...]:
        """Fetch the tool list again (every page); replace and return ``tools``.

        Cancellation: ``Cancelled`` propagates and ``tools`` is unchanged.
        """
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
            page = await self._session.list_tools(params=params)
            listed += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        tools: list[AgentTool] = []
        skipped: list[str] = []
        for spec in listed:
            if not self._wanted(spec.name):
                continue
            try:
                tools.append(self._make_tool(spec))
            except ToolDefinitionError:
                skipped.append(spec.name)  # a bad schema costs the tool, not the server
        self.tools = tuple(tools)
        self.skipped = tuple(skipped)
        return self.tools

    def _make_tool(self, spec: mcp_types.Tool) -> AgentTool:
        remote = spec.name

        async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
            return await self._call(remote, args, on_update)

        return AgentTool(
            name=self._prefix + remote,
            description=spec.description or "",
            parameters=dict(spec.input_schema),
            execute=execute,
            label=spec.title or remote,
        )

    async def _call(self, remote: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        if self._closed:
            raise RuntimeError(f"MCP server {self.name!r} is closed: its open_server block ended.")

        async def report(progress: float, total: float | None, message: str | None) -> None:
            text = message or (f"{progress:g}/{total:g}" if total is not None else f"{progress:g}")
            on_update(ToolResult.text(text, details={"progress": progress, "total": total}))

        try:
            result = await self._session.call_tool(remote, args, progress_callback=report)
        except MCPError as exc:
            # The loop turns any Exception of a tool into an error result with its text.
            raise Exception(
                f"MCP server {self.name!r} failed to run tool {remote!r}: "
                f"{_bounded(exc.message, 2_000)}"
            ) from None
        except BaseExceptionGroup as group:
            raise _reduce(
                group, f"MCP server {self.name!r} failed during tool {remote!r}"
            ) from None
        except Exception as exc:
            raise Exception(
                f"MCP server {self.name!r} failed during tool {remote!r}: {_text(exc)}"
            ) from None
        return _result(self.name, remote, result)

    async def _handle(self, message: IncomingMessage, send: trio.MemorySendChannel[None]) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            # The refresh cannot run here: the SDK delivers the list's reply through the task
            # that is calling this handler. The watcher task of open_server does it.
            with contextlib.suppress(trio.WouldBlock):  # a refresh is already due
                send.send_nowait(None)
        await trio.lowlevel.checkpoint()

    async def _watch(self, receive: trio.MemoryReceiveChannel[None]) -> None:
        async for _ in receive:
            try:
                tools = await self.refresh()
            except Exception:  # a failed refresh keeps the old list; a broken server shows on calls
                continue
            for callback in self._callbacks:
                callback(tools)


MAX_RESULT_CHARS = 100_000
"""The most characters of a server's text a call keeps (a result's text blocks and its
structured content together, or an error message): a server decides what it sends."""


def _bounded(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[cut: {len(text) - limit:,} more characters]"


def _text(exc: BaseException) -> str:
    return _bounded(str(exc) or type(exc).__name__, 2_000)


def _result(server: str, remote: str, result: mcp_types.CallToolResult) -> ToolResult:
    content: list[ToolResultContent] = []
    left = MAX_RESULT_CHARS  # what the text blocks may still hold
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            kept = _bounded(block.text, max(left, 0))
            left -= len(block.text)
            content.append(TextContent(kept))
        elif isinstance(block, mcp_types.ImageContent):
            content.append(ImageContent(block.data, block.mime_type))
        else:
            content.append(TextContent(f"[{block.type} content not shown]"))
    structured = result.structured_content
    if structured is not None and not any(isinstance(c, TextContent) for c in content):
        content.insert(0, TextContent(_bounded(json.dumps(structured, ensure_ascii=False))))
    if result.is_error:
        text = " ".join(c.text for c in content if isinstance(c, TextContent))
        # ToolResult has no error flag: an exception is how a tool's result is marked an error.
        raise Exception(text or f"MCP server {server!r} reported an error from tool {remote!r}.")
    return ToolResult(content=tuple(content), details=structured)


def _reduce(group: BaseExceptionGroup, context: str) -> BaseException:
    """One exception for an exception group of the SDK's task groups.

    ``KeyboardInterrupt`` and ``trio.Cancelled`` come back as themselves (so an abort stays an
    abort); anything else becomes a ``RuntimeError`` with one sentence and the first leaf as
    its cause.
    """
    leaves = list(_leaves(group))
    for kind in (KeyboardInterrupt, trio.Cancelled):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    first = next((leaf for leaf in leaves if isinstance(leaf, Exception)), leaves[0])
    message = _bounded(first.message, 2_000) if isinstance(first, MCPError) else _text(first)
    error = RuntimeError(f"{context}: {message}")
    error.__cause__ = first
    return error


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: ours, if it is a real file (it may have been
    replaced by one without a descriptor: a notebook, a test's capture), else the
    process's own."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    return sys.stderr


@asynccontextmanager
async def open_server(
    command: str | None = None,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    prefix: str = "",
    include: ToolFilter | None = None,
) -> AsyncIterator[McpServer]:
    """Connect to an MCP server for the duration of the block; yield it with its tools listed.

    Give exactly one of ``command`` (with ``args``, ``env`` merged over the SDK's safe default
    environment, ``cwd``: a subprocess spoken to over stdio) or ``url`` (with ``headers``: a
    streamable HTTP endpoint). ``prefix`` is put before every tool's name; ``include`` (a set of
    the server's tool names, or a predicate on them) keeps only some tools. A tool whose
    ``inputSchema`` is not valid JSON Schema is left out (its name is in ``server.skipped``).

    The block owns the connection: the session's tasks run in the caller's task tree, and on
    exit — normal, by exception or by cancellation — the session is closed and the subprocess
    stopped (stdin closed, then terminated, then killed: the SDK bounds each wait).

    Cancellation: ``Cancelled`` propagates; the server is closed all the same. What escapes is
    one exception, never a group (the table in the module's docstring).
    """
    if (command is None) == (url is None):
        raise ValueError(
            f"open_server needs exactly one of command= or url=, not command={command!r} "
            f"and url={url!r}"
        )
    name = command if command is not None else str(url)
    body_error: BaseException | None = None
    escaping: BaseException
    try:
        async with AsyncExitStack() as stack:
            if command is not None:
                params = StdioServerParameters(
                    command=command,
                    args=list(args),
                    env=None if env is None else dict(env),
                    cwd=cwd,
                )
                try:
                    streams = await stack.enter_async_context(
                        stdio_client(params, errlog=_errlog())
                    )
                except OSError as exc:
                    raise OSError(
                        exc.errno, f"cannot start the MCP server command {command!r}: {exc}"
                    ) from exc
            else:
                assert url is not None
                http: Any = None
                if headers:
                    from mcp.shared._httpx_utils import create_mcp_http_client

                    http = await stack.enter_async_context(
                        create_mcp_http_client(headers=dict(headers))
                    )
                streams = await stack.enter_async_context(
                    streamable_http_client(url, http_client=http)
                )
            send, receive = trio.open_memory_channel[None](1)
            holder: list[McpServer] = []

            async def handler(message: IncomingMessage) -> None:
                if holder:
                    await holder[0]._handle(message, send)
                else:
                    await trio.lowlevel.checkpoint()

            session = await stack.enter_async_context(
                ClientSession(streams[0], streams[1], message_handler=handler)
            )
            await session.initialize()
            server = McpServer(session, name=name, prefix=prefix, include=include)
            holder.append(server)
            await server.refresh()
            # Why a nursery: the list_changed refresh needs a task of its own (see _handle),
            # and it must not outlive the session; it is cancelled when the block ends.
            async with trio.open_nursery() as nursery:
                nursery.start_soon(server._watch, receive)
                try:
                    yield server
                except BaseException as exc:
                    body_error = exc
                    raise
                finally:
                    server._closed = True
                    nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # Why: the SDK's transports and session run anyio task groups, which wrap whatever
        # crosses them (the block's own exception included) in groups. One exception escapes.
        if body_error is not None and any(leaf is body_error for leaf in _leaves(group)):
            escaping = body_error
        else:
            escaping = _reduce(group, f"MCP server {name!r} failed")
    except MCPError as exc:
        raise RuntimeError(f"MCP server {name!r} failed: {exc.message}") from exc
    else:
        return
    # Raised outside the handler, so the group does not become the exception's __context__.
    raise escaping
