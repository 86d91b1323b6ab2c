"""The transport's streams as the MCP session sees them: a reply the SDK cannot read still
ends the request it answers.

Why this exists: the SDK's transports parse each message with pydantic, and a message that
fails to parse (JSON nested deeper than the 200 levels pydantic's parser takes, a result that
is not an object, a wrong type in the envelope) becomes an ``Exception`` on the read stream.
The session hands that to its message handler and drops it, so the request it answered waits
for a reply that never comes: ``open_server`` hangs at the handshake or the listing, and a
tool call until it is aborted. The streamable HTTP transport answers such a reply to a POST
itself; the stdio transport cannot, as it does not know which request a line answered. An
error reply whose ``id`` is ``null`` (a server that could not read a request) is dropped the
same way.

So :func:`wrap` puts two thin streams between the transport and the session. The write side
notes the id of every request the client sends (and forgets it when the request is answered
or cancelled). The read side, given an unreadable message, finds out which request it
answered and hands the session an error reply for it in its place, which the session
delivers to that request as an ``MCPError``. Which request:

- the message's ``id``, read again with Python's own JSON parser (it has no 200-level limit;
  pydantic's error keeps the text of a message it could not parse, or the object of one
  whose shape it refused). A message with a ``method`` is a request or a notification of the
  server's and answers nothing; an ``id`` that is not waiting is a late reply and is ignored.
- when no id can be read (not JSON, nested deeper than Python's parser goes, no ``id``,
  an id that is not a string or an integer), every request that is waiting. The stdio
  transport delivers the server's messages in order and a server must write nothing but
  MCP messages to its stdout (the specification says so), so a message that cannot be read
  is a reply that went wrong more likely than not; failing what waits ends the wait with a
  clear error, where dropping it would leave it to hang.

Nothing here reads the SDK's private state: the stream protocols, the JSON-RPC types and
pydantic's ``ValidationError.errors()`` are public.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

import mcp.types as mcp_types
import trio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["Replies", "Requests", "wrap"]

T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
Key = int | str
Item = SessionMessage | Exception


class _Read(Protocol[T_co]):
    async def receive(self) -> T_co: ...
    async def aclose(self) -> None: ...


class _Write(Protocol[T_contra]):
    async def send(self, item: T_contra, /) -> None: ...
    async def aclose(self) -> None: ...


def _key(value: object) -> Key | None:
    """A request id as the session correlates it ("7" and 7 are one id), or None for a value
    that is not an id."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


class Requests(ObjectSendStream[SessionMessage]):
    """The write stream: notes the id of each request on its way out."""

    def __init__(self, inner: _Write[SessionMessage], waiting: dict[Key, mcp_types.RequestId]):
        self._inner = inner
        self._waiting = waiting

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, mcp_types.JSONRPCRequest):
            key = _key(message.id)
            if key is not None:
                self._waiting[key] = message.id
        elif (
            isinstance(message, mcp_types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and message.params is not None
        ):
            key = _key(message.params.get("requestId"))
            if key is not None:
                self._waiting.pop(key, None)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()


class Replies(ObjectReceiveStream[Item]):
    """The read stream: an unreadable reply becomes an error reply to the request it answered
    (the module's docstring says which)."""

    def __init__(self, inner: _Read[Item], waiting: dict[Key, mcp_types.RequestId]) -> None:
        self._inner = inner
        self._waiting = waiting
        self._queued: deque[Item] = deque()

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, when the transport's stream keeps one (the
        session runs its handlers in it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Item:
        if self._queued:
            await trio.lowlevel.checkpoint()
            return self._queued.popleft()
        return self._seen(await self._inner.receive())

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _seen(self, item: Item) -> Item:
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
                key = None if message.id is None else _key(message.id)
                if key is not None:
                    self._waiting.pop(key, None)
                elif isinstance(message, mcp_types.JSONRPCError):
                    # An error the server could not tie to a request: it answers those waiting.
                    return self._fail(self._waiting.copy(), message.error) or item
            return item
        error = mcp_types.ErrorData(
            code=mcp_types.PARSE_ERROR, message=f"its reply could not be read: {_reason(item)}"
        )
        return self._fail(self._answered(item), error) or item

    def _answered(self, exc: Exception) -> dict[Key, mcp_types.RequestId]:
        """The waiting requests that the unreadable message may answer."""
        if not self._waiting:
            return {}
        message = _recovered(exc)
        if isinstance(message, dict):
            if "method" in message:
                return {}
            key = _key(message.get("id"))
            if key is not None:
                request = self._waiting.get(key)
                return {} if request is None else {key: request}
        return self._waiting.copy()

    def _fail(
        self, requests: dict[Key, mcp_types.RequestId], error: mcp_types.ErrorData
    ) -> Item | None:
        """Queue an error reply to each of ``requests``; the first of them, or None."""
        for key, request in requests.items():
            self._waiting.pop(key, None)
            reply = mcp_types.JSONRPCError(jsonrpc="2.0", id=request, error=error)
            self._queued.append(SessionMessage(reply))
        return self._queued.popleft() if self._queued else None


_UNKNOWN = object()


def _recovered(exc: Exception) -> object:
    """The JSON value of a message the transport could not read, when it can be had."""
    if not isinstance(exc, ValidationError):
        return _UNKNOWN
    for error in exc.errors(include_url=False, include_context=False):
        location, value = error["loc"], error.get("input")
        if error["type"] == "json_invalid":
            if not isinstance(value, str | bytes | bytearray):
                return _UNKNOWN
            try:
                return json.loads(value)
            except (ValueError, RecursionError):  # RecursionError: deeper than Python parses
                return _UNKNOWN
        # The input of an error at the top of one of the union's members, or of a missing
        # field of one, is the whole message.
        if len(location) <= 1 or (error["type"] == "missing" and len(location) == 2):
            return value
    return _UNKNOWN


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False, include_context=False, include_input=False)[0]
        if first["type"] == "json_invalid":
            return str(first["msg"])
        return "it is not a JSON-RPC message of MCP"
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"


def wrap(
    streams: Iterable[Any],
) -> tuple[Replies, Requests]:
    """The transport's (read, write) streams, wrapped as the module's docstring says."""
    read, write = streams
    waiting: dict[Key, mcp_types.RequestId] = {}
    return Replies(read, waiting), Requests(write, waiting)
