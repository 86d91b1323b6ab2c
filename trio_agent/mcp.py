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

The server is not trusted: whatever it sends, a run or :func:`open_server` raises nothing but
what the table below says and keeps a bounded amount of it. (A server that does not answer
at all is for the caller's deadline: ``with trio.move_on_after(30): ...``.)

What a call gives the model: the server's text blocks as text, its images as images; its
``structuredContent`` goes to the result's ``structured_content`` and ``details`` and, when the
server sent no text, to a JSON text block as well. A tool's ``outputSchema`` becomes its
``output_schema`` (its patterns RE2 cannot compile left out; a schema that cannot be compiled
left out whole; it counts toward the tool's :data:`MAX_TOOL_CHARS`, like the rest of its
definition), so the loop checks a successful result's structured content against it with
RE2, in linear time; one that does not match is the call's error.

A result keeps at most :data:`MAX_RESULT_CHARS` (100,000) characters of text,
:data:`MAX_RESULT_BLOCKS` (100) content blocks and :data:`MAX_IMAGE_CHARS` (10,000,000)
characters of image data; past a bound, the text is cut and ends with a note
that counts what was left out (``[cut: 1,234 more characters]``), the note inside the bound,
and an image is replaced by a note. ``details`` keeps structured content whose JSON is at most
:data:`MAX_RESULT_CHARS` long (and that holds no NaN or infinity), else a small
``{"cut": ...}`` note (and ``structured_content`` is then ``None``, which is not checked). The
SDK's own check (``ClientSession.call_tool``) is not used: it runs the server's patterns with
Python's backtracking ``re``, which a pattern may hold for hours. A result the server flags
``isError`` is returned with ``is_error`` (its structured content kept), its text at most
:data:`MAX_ERROR_CHARS` (2,000) characters. An MCP error reply, a reply that cannot be read, a
server that dies or a connection that drops mid-call: an error result with one sentence, at
most :data:`MAX_ERROR_CHARS` characters, the cut note included (so is a progress message).
When the run is aborted during a call, ``Cancelled`` propagates (the SDK tells the server with
``notifications/cancelled``) and the loop records "Operation aborted".

What the tool list keeps: at most :data:`MAX_TOOLS` (500) tools, read from at most
:data:`MAX_PAGES` (100) pages; a tool defined in more than :data:`MAX_TOOL_CHARS` (50,000)
characters, a schema that is not valid JSON Schema, a name listed twice and the tools past
the first :data:`MAX_TOOLS` are left out and named in ``server.skipped``, and so is a tool
whose schema holds NaN or infinity (the SDK's parser reads them, but they are not JSON, and
every request to the model would fail to encode); ``server.truncated`` says when the list was
not read whole (too many pages, a cursor that came back). A ``pattern`` in a tool's schema that
RE2 cannot compile (a lookahead, as in the e-mail pattern zod writes; a backreference) is left
out of the schema the model sees and the arguments are checked against, rather than costing
the tool: the server checks its own input (at most 16 of them, ``MAX_DROPPED_PATTERNS``; a tool
with more is left out). (A tool made in code with one is refused instead: its author can
mend it.) A ``patternProperties`` key RE2 cannot compile costs the tool.

A reply the SDK cannot parse (JSON nested deeper than its parser's 200 levels, a wrong type
in the envelope) ends the request it answered with an error, rather than leaving it to wait
for ever; when the message does not say which request it answered (its id cannot be read),
every request then waiting ends so: a server must write nothing but MCP messages, so such a
message is most likely a reply gone wrong. A byte of a stdio server's output that is not
UTF-8 is read as U+FFFD (as the SDK's own server reads its input), where the SDK's reader
would stop and leave every request waiting.

What escapes :func:`open_server` is one exception, never an exception group of the SDK's
task groups:

* the block's own exception: that exception, as raised;
* what ``include`` or an ``on_tools_changed`` callback raises: that exception, as raised;
  a callback's (or ``include``'s after a list change) cancels the block's body first, as
  Trio does for any background task that fails;
* a cancellation, ``KeyboardInterrupt``: ``trio.Cancelled``, ``KeyboardInterrupt``;
* the command cannot be started: ``OSError`` naming the command;
* the server fails during the handshake or the listing, sends a reply that cannot be
  read, or the connection breaks: ``RuntimeError`` naming the server, at most
  :data:`MAX_ERROR_CHARS` characters, with the cause chained.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO

import mcp.types as mcp_types
import trio
from mcp import ClientSession
from mcp.client.session import IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter, ValidationError

from . import _mcp_wire
from ._errors import ToolDefinitionError
from ._mcp_results import MAX_ERROR_CHARS as MAX_ERROR_CHARS
from ._mcp_results import MAX_IMAGE_CHARS as MAX_IMAGE_CHARS
from ._mcp_results import MAX_RESULT_BLOCKS as MAX_RESULT_BLOCKS
from ._mcp_results import MAX_RESULT_CHARS as MAX_RESULT_CHARS
from ._mcp_results import bounded, tool_result
from ._messages import ToolResult
from ._tools import AgentTool, ToolUpdate
from ._validation import without_unmatchable_patterns

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_IMAGE_CHARS",
    "MAX_PAGES",
    "MAX_RESULT_BLOCKS",
    "MAX_RESULT_CHARS",
    "MAX_TOOLS",
    "MAX_TOOL_CHARS",
    "McpServer",
    "open_server",
]

ToolFilter = Callable[[str], bool] | Collection[str]

MAX_TOOLS = 500
"""The most tools of one server that ``tools`` holds (and the most names ``skipped`` holds).

Every tool's definition goes to the model with every request, and its schema is compiled
when the tool is made: OpenAI's chat API takes at most 128 tools in a request, and a list
much longer than that costs every request tokens and makes the model choose worse."""

MAX_TOOL_CHARS = 50_000
"""The longest definition of a tool kept, in characters: its name, title and description and
its input schema written as compact JSON, together (a definition that long costs some 12,000
tokens of every request). A longer one is left out, named in ``skipped``."""

MAX_PAGES = 100
"""The most pages of the server's tool list one listing reads."""

_SHOWN_NAME = 128  # the MCP specification's longest tool name; a longer one is shown cut
_CALL_RESULT: TypeAdapter[mcp_types.CallToolResult | mcp_types.InputRequiredResult] = TypeAdapter(
    mcp_types.CallToolResult | mcp_types.InputRequiredResult
)


class McpServer:
    """A connected MCP server: its tools, kept current while the ``open_server`` block runs.

    ``tools`` is a tuple of :class:`trio_agent.AgentTool` (each named ``prefix`` + the server's
    name). When the server sends ``notifications/tools/list_changed``, the list is fetched again,
    ``tools`` is replaced, and every callback given to :meth:`on_tools_changed` is called with the
    new tuple (an ``Agent`` picks it up from its next run:
    ``server.on_tools_changed(agent.set_tools)``).
    Tools outlive the block as objects, but a call after it is an error result.

    The list is bounded: at most :data:`MAX_TOOLS` tools, each defined in at most
    :data:`MAX_TOOL_CHARS` characters, read from at most :data:`MAX_PAGES` pages. A tool left
    out is named in ``skipped``; ``truncated`` says when the list was not read whole.
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
        # The tools made at the last listing, by the server's name, with the definition they
        # were made from: an unchanged definition is not compiled again (None: unusable).
        self._made: dict[str, tuple[str, AgentTool | None]] = {}
        # The last exception of the application's own code (include, a callback), and the
        # last failure of a listing: each escapes open_server as itself.
        self._app_error: BaseException | None = None
        self._failure: BaseException | None = None
        self.tools: tuple[AgentTool, ...] = ()
        self.skipped: tuple[str, ...] = ()
        """Names of the server's tools left out: a schema that is not one we can use, a
        definition longer than :data:`MAX_TOOL_CHARS`, a name listed twice, or a tool past the
        first :data:`MAX_TOOLS` (a name longer than 128 characters is shown cut, ending
        in "…"). At most :data:`MAX_TOOLS` names."""
        self.truncated = False
        """True when the last listing did not read the whole list, or names fewer tools in
        ``tools`` and ``skipped`` than it read: more than :data:`MAX_PAGES` pages, a cursor
        that came back, more tools left out than ``skipped`` holds."""

    def on_tools_changed(self, callback: Callable[[tuple[AgentTool, ...]], object]) -> None:
        """Call ``callback(tools)`` (sync) each time the server's tool list changes.

        The callback runs in the ``open_server`` block's background task. What it raises
        cancels the block's body, as Trio does for any background task that fails, and
        escapes ``open_server`` as itself.
        """
        self._callbacks.append(callback)

    def _wanted(self, name: str) -> bool:
        if self._include is None:
            return True
        try:
            if callable(self._include):
                return bool(self._include(name))
            return name in self._include
        except BaseException as exc:  # the application's: it escapes open_server as itself
            self._app_error = exc
            raise

    async def refresh(self) -> tuple[AgentTool, ...]:
        """Fetch the tool list again (every page, up to :data:`MAX_PAGES`); replace and
        return ``tools``.

        Tools whose definition did not change since the last listing are kept as they were,
        not made again. Between the tools it makes (compiling each one's schema) it is a
        checkpoint, so a deadline or an abort is not held up by a long list.

        Raises ``RuntimeError`` naming the server when the server fails to list its tools
        (its cause chained), and what ``include`` raises as itself.
        Cancellation: ``Cancelled`` propagates and ``tools`` is unchanged.
        """
        tools: list[AgentTool] = []
        skipped: list[str] = []
        made: dict[str, tuple[str, AgentTool | None]] = {}
        seen: set[str] = set()  # the names listed so far: a name listed again is left out
        truncated = False
        cursors: set[bytes] = set()  # digests: a server's cursor may be of any size
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._page(cursor)
            for spec in page.tools:
                name = spec.name
                if not self._wanted(name):
                    continue
                tool: AgentTool | None = None
                if name not in seen and len(tools) < MAX_TOOLS:
                    seen.add(name)
                    definition = _definition(spec)
                    previous = self._made.get(name)
                    if definition is None:
                        pass
                    elif previous is not None and previous[0] == definition:
                        tool = previous[1]
                        made[name] = previous
                    else:
                        tool = self._make_tool(spec)
                        made[name] = (definition, tool)
                        # A checkpoint between the tools made: compiling a long list must
                        # not hold up a deadline or an abort.
                        await trio.lowlevel.checkpoint()
                if tool is not None:
                    tools.append(tool)
                elif len(skipped) < MAX_TOOLS:
                    skipped.append(name if len(name) <= _SHOWN_NAME else name[:_SHOWN_NAME] + "…")
                else:
                    truncated = True
                    break
            cursor = page.next_cursor
            if cursor is None or truncated:
                break
            digest = hashlib.sha256(cursor.encode("utf-8", "surrogatepass")).digest()
            if digest in cursors:  # a cursor that came back would list the same pages forever
                truncated = True
                break
            cursors.add(digest)
        else:
            truncated = True  # MAX_PAGES pages, and the last one had a cursor still
        self.tools = tuple(tools)
        self.skipped = tuple(skipped)
        self.truncated = truncated
        self._made = made
        return self.tools

    async def _page(self, cursor: str | None) -> mcp_types.ListToolsResult:
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        try:
            return await self._session.list_tools(params=params)
        except Exception as exc:
            error = RuntimeError(
                bounded(f"MCP server {self.name!r} failed to list its tools: {_reason(exc)}")
            )
            error.__cause__ = exc
            self._failure = error
        raise error  # outside the handler: the SDK's exception is its cause, not its context

    def _make_tool(self, spec: mcp_types.Tool) -> AgentTool | None:
        """The tool for ``spec``, or None when its schema is not one we can use."""
        remote = spec.name

        async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
            return await self._call(remote, args, on_update)

        # A pattern RE2 cannot match in linear time is left out (see the module's docs).
        try:
            schema, _ = without_unmatchable_patterns(spec.input_schema, tool_name=remote)
        except (ToolDefinitionError, RecursionError):  # a bad schema costs the tool only
            return None
        output: Any = None
        if spec.output_schema is not None:
            try:
                output, _ = without_unmatchable_patterns(spec.output_schema, tool_name=remote)
            except (ToolDefinitionError, RecursionError):  # a bad output schema is left out
                output = None

        def make(output_schema: Any) -> AgentTool:  # each schema compiled once
            return AgentTool(
                name=self._prefix + remote,
                description=spec.description or "",
                parameters=schema,
                execute=execute,
                label=spec.title or remote,
                output_schema=output_schema,
            )

        try:
            return make(output)
        except (ToolDefinitionError, RecursionError):
            if output is None:  # a bad schema costs the tool only
                return None
        try:
            return make(None)  # the output schema could not be compiled: left out
        except (ToolDefinitionError, RecursionError):
            return None

    async def _call(self, remote: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        if self._closed:
            raise RuntimeError(f"MCP server {self.name!r} is closed: its open_server block ended.")

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if message:
                text = bounded(message)
            else:
                text = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
            numbers = {"progress": progress, "total": total}  # NaN or infinity: not JSON
            details = {k: v if v is None or math.isfinite(v) else None for k, v in numbers.items()}
            on_update(ToolResult.text(text, details=details))

        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name=remote, arguments=args)
        )
        # Why not ClientSession.call_tool: it checks a result's structured content against the
        # tool's output schema with jsonschema, whose patterns are Python regular expressions
        # the server writes: a pattern that backtracks holds the event loop for hours, where
        # no deadline or abort reaches. The model reads the result either way.
        try:
            result = await self._session.send_request(
                request, _CALL_RESULT, progress_callback=report
            )
        except MCPError as exc:
            # The loop turns any Exception of a tool into an error result with its text.
            raise Exception(
                bounded(f"MCP server {self.name!r} failed to run tool {remote!r}: {exc.message}")
            ) from None
        except BaseExceptionGroup as group:
            raise _reduce(
                group, f"MCP server {self.name!r} failed during tool {remote!r}"
            ) from None
        except Exception as exc:
            raise Exception(
                bounded(f"MCP server {self.name!r} failed during tool {remote!r}: {_reason(exc)}")
            ) from None
        if isinstance(result, mcp_types.InputRequiredResult):
            raise Exception(
                bounded(
                    f"MCP server {self.name!r}: tool {remote!r} asked for input, which "
                    "trio_agent.mcp does not give"
                )
            )
        return tool_result(self.name, remote, result)

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
            except Exception as exc:
                if exc is self._app_error:
                    raise
                continue  # a failed refresh keeps the old list; a broken server shows on calls
            for callback in self._callbacks:
                try:
                    callback(tools)
                except BaseException as exc:  # the application's: it escapes as itself
                    self._app_error = exc
                    raise


def _definition(spec: mcp_types.Tool) -> str | None:
    """What a tool is made from, as one string (to see whether it changed), or None when it
    is longer than :data:`MAX_TOOL_CHARS`."""
    size = len(spec.name) + len(spec.title or "") + len(spec.description or "")
    if size > MAX_TOOL_CHARS:
        return None
    try:
        # allow_nan=False: NaN and infinity (which the SDK's parser reads) are not JSON, and
        # a schema holding one would make every request to the model fail to encode.
        schema = json.dumps(
            spec.input_schema,
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )
        # Its output schema is part of it (it is not sent to the model: NaN does no harm).
        output = (
            ""
            if spec.output_schema is None
            else json.dumps(
                spec.output_schema, ensure_ascii=False, sort_keys=True, separators=(",", ":")
            )
        )
    except (TypeError, ValueError, RecursionError):
        return None
    if size + len(schema) + len(output) > MAX_TOOL_CHARS:
        return None
    head = json.dumps([spec.name, spec.title, spec.description], ensure_ascii=False)
    return head + schema + output


def _reason(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return exc.message
    if isinstance(exc, ValidationError):
        # Not str(exc): it shows every error, and a reply of many wrong parts has thousands
        # (seconds of work to write out, to be cut to a sentence).
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top"
        count = exc.error_count()
        return (
            f"its reply is not what MCP says it is ({count:,} "
            f"problem{'' if count == 1 else 's'}; at {where}: {first['msg']})"
        )
    return str(exc) or type(exc).__name__


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
    error = RuntimeError(bounded(f"{context}: {_reason(first)}"))
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


_Streams = tuple[Any, Any]
"""A transport's (read, write) streams, as the SDK's ``ClientSession`` takes them."""


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
    ``inputSchema`` is not valid JSON Schema, or whose definition is longer than
    :data:`MAX_TOOL_CHARS`, is left out (its name is in ``server.skipped``); so are the tools
    past the first :data:`MAX_TOOLS`.

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

    async def connect(stack: AsyncExitStack) -> _Streams:
        if command is not None:
            params = StdioServerParameters(
                command=command,
                args=list(args),
                env=None if env is None else dict(env),
                cwd=cwd,
                # Why: decoding strictly, the SDK's reader fails at a byte that is not UTF-8
                # and every request then waits for ever; its own server reads with "replace".
                encoding_error_handler="replace",
            )
            try:
                return await stack.enter_async_context(stdio_client(params, errlog=_errlog()))
            except OSError as exc:
                raise OSError(
                    exc.errno, f"cannot start the MCP server command {command!r}: {exc}"
                ) from exc
        assert url is not None
        http: Any = None
        if headers:
            from mcp.shared._httpx_utils import create_mcp_http_client

            http = await stack.enter_async_context(create_mcp_http_client(headers=dict(headers)))
        return await stack.enter_async_context(streamable_http_client(url, http_client=http))

    name = command if command is not None else str(url)
    async with _open(name, connect, prefix=prefix, include=include) as server:
        yield server


@asynccontextmanager
async def _open(
    name: str,
    connect: Callable[[AsyncExitStack], Awaitable[_Streams]],
    *,
    prefix: str = "",
    include: ToolFilter | None = None,
) -> AsyncIterator[McpServer]:
    """:func:`open_server` over the streams ``connect`` opens (kept open by the stack it is
    given): the session, the listing, the watcher of list changes, and the one exception."""
    body_error: BaseException | None = None
    holder: list[McpServer] = []
    escaping: BaseException
    try:
        async with AsyncExitStack() as stack:
            read, write = _mcp_wire.wrap(await connect(stack))
            send, receive = trio.open_memory_channel[None](1)

            async def handler(message: IncomingMessage) -> None:
                if holder:
                    await holder[0]._handle(message, send)
                else:
                    await trio.lowlevel.checkpoint()

            session = await stack.enter_async_context(
                ClientSession(read, write, message_handler=handler)
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
        # crosses them (the block's own exception included) in groups. One exception escapes:
        # the block's own, else the application's (include, a callback), else our own
        # sentence for a failed listing, else one made from the group.
        leaves = _leaves(group)
        server_errors = [] if not holder else [holder[0]._app_error, holder[0]._failure]
        for candidate in (body_error, *server_errors):
            if candidate is not None and any(leaf is candidate for leaf in leaves):
                escaping = candidate
                break
        else:
            escaping = _reduce(group, f"MCP server {name!r} failed")
    except MCPError as exc:
        raise RuntimeError(bounded(f"MCP server {name!r} failed: {exc.message}")) from exc
    else:
        return
    # Raised outside the handler, so the group does not become the exception's __context__.
    raise escaping
