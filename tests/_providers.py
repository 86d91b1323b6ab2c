"""Helpers for provider tests: a loopback server, a stream call, and the events it made."""

from __future__ import annotations

import contextlib
import queue
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx2  # noqa: ASYNC127  (the design's client)
import trio
import trio.testing

from trio_agent import (
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent._stream import Timeouts
from trio_agent.testing import ScriptedResponse, SSEServer, open_sse_server

FIXTURES = Path(__file__).parent / "fixtures"

PIECES: list[tuple[int, int] | None] = [None, (1, 7), (1, 3)]
"""How a body is replayed: whole, and in random small pieces."""


def fixture(provider: str, name: str) -> bytes:
    return (FIXTURES / provider / name).read_bytes()


def io_clock() -> trio.testing.MockClock:
    """Virtual time that jumps only when nothing happened for 50 ms of real time.

    Loopback I/O is real: the clock must not jump over a read that is about to
    complete, but a stall (a server that sends nothing) must reach its
    timeout at once.
    """
    return trio.testing.MockClock(autojump_threshold=0.05)


@attrs.define
class Call:
    message: AssistantMessage
    events: list[AssistantMessageEvent]

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]


def options(**kwargs: Any) -> StreamOptions:
    """Stream options for tests: quick retries, and a key."""
    kwargs.setdefault("api_key", "test-key")
    kwargs.setdefault("max_retry_delay", 60.0)
    kwargs.setdefault("timeouts", Timeouts(connect=5, first_byte=30, idle=30))
    return StreamOptions(**kwargs)


def context(*messages: Any, system_prompt: str = "", tools: Sequence[Any] = ()) -> LlmContext:
    return LlmContext(system_prompt, list(messages) or [UserMessage.text("hi")], tools)


async def call(
    stream_fn: Callable[..., Any],
    model: Any,
    ctx: LlmContext | None = None,
    opts: StreamOptions | None = None,
) -> Call:
    events: list[AssistantMessageEvent] = []

    async def emit(event: AssistantMessageEvent) -> None:
        events.append(event)

    with trio.fail_after(120):
        message = await stream_fn(model, ctx or context(), opts or options(), emit)
    return Call(message, events)


class _ToLoopback(httpx2.AsyncBaseTransport):
    """Sends every request to the loopback server at ``url``, over plain HTTP, whatever
    server its URL names; the request is otherwise as sent (its ``host`` header names
    the server of its URL)."""

    def __init__(self, url: str) -> None:
        self._url = httpx2.URL(url)
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = self._url
        request.url = request.url.copy_with(scheme=url.scheme, host=url.host, port=url.port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def as_if_at(server_url: str) -> AsyncIterator[httpx2.AsyncClient]:
    """A client whose requests, to whichever server (``https://api.anthropic.com``), reach
    the loopback server at ``server_url``: what a provider sends to its own servers, seen
    by a test. Give it to a provider (``anthropic.Anthropic(client)``)."""
    async with httpx2.AsyncClient(transport=_ToLoopback(server_url)) as client:
        yield client


def check_stream(events: Sequence[AssistantMessageEvent]) -> None:
    """The stream events are well formed: start first (if any), one terminal event last,
    each block opened once and closed once, deltas only inside an open block."""
    assert events, "no events"
    assert events[-1].type in ("done", "error"), events[-1].type
    assert sum(e.type in ("done", "error") for e in events) == 1
    open_index: int | None = None
    seen: set[int] = set()
    for event in events[:-1]:
        kind = event.type
        if kind == "start":
            assert event is events[0]
            continue
        index = event.content_index  # type: ignore[union-attr]  # a content event, here
        if kind.endswith("_start"):
            assert open_index is None, f"{kind} while block {open_index} is open"
            assert index not in seen
            open_index = index
            seen.add(index)
        elif kind.endswith("_delta"):
            assert index == open_index, f"{kind} for block {index}, open: {open_index}"
        elif kind.endswith("_end"):
            assert index == open_index, f"{kind} for block {index}, open: {open_index}"
            open_index = None
    assert open_index is None, f"block {open_index} is still open at {events[-1].type}"


@attrs.define
class ThreadedServer:
    """An :class:`SSEServer` served by a ``trio.run`` of its own, in another thread: it
    outlives the client's ``trio.run``, so a test can see what that run's end closes.

    Its state belongs to its thread: read it with :meth:`read` (from the client's
    ``trio.run``, in a worker thread: ``await trio.to_thread.run_sync(...)``).
    """

    server: SSEServer
    token: trio.lowlevel.TrioToken

    @property
    def url(self) -> str:
        return self.server.url

    def read(self) -> tuple[int, int, int]:
        """``(requests, connections, closed_by_client)``, once the server has dealt with
        everything that reached it: whatever the client sent or closed before this call
        (on loopback, in the server's socket at once) is counted."""

        async def settled() -> tuple[int, int, int]:
            await trio.testing.wait_all_tasks_blocked()
            server = self.server
            return len(server.requests), server.connections, server.closed_by_client

        return trio.from_thread.run(settled, trio_token=self.token)

    def wait_closed_by_client(self, count: int = 1) -> None:
        """Block until the client has closed ``count`` connections (10 s at most)."""

        async def wait() -> None:
            with trio.fail_after(10):
                await self.server.wait_closed_by_client(count)

        trio.from_thread.run(wait, trio_token=self.token)


@contextlib.contextmanager
def server_in_thread(
    *responses: ScriptedResponse, ssl_context: ssl.SSLContext | None = None
) -> Iterator[ThreadedServer]:
    """Run an :class:`SSEServer` in a thread (its own ``trio.run``) for the block; a sync
    test runs its client in a ``trio.run`` of its own."""
    started: queue.Queue[ThreadedServer | BaseException] = queue.Queue()
    stop = trio.CancelScope()
    failure: list[BaseException] = []

    async def serve() -> None:
        with stop:
            async with open_sse_server(*responses, ssl_context=ssl_context) as server:
                started.put(ThreadedServer(server, trio.lowlevel.current_trio_token()))
                await trio.sleep_forever()

    def main() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # noqa: ASYNC103  (the thread's end: handed to the test)
            failure.append(exc)
            started.put(exc)

    thread = threading.Thread(target=main, name="SSEServer thread", daemon=True)
    thread.start()
    handle = started.get(timeout=30)
    if isinstance(handle, BaseException):
        raise handle
    try:
        yield handle
    finally:
        trio.from_thread.run_sync(stop.cancel, trio_token=handle.token)
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server's thread did not end"
    if failure:
        raise failure[0]


# --- what a run costs: a tool conversation as a catalog model's server receives it ---------------

LONG_SESSION_ID = "s" * 36 + "-" + "0123456789" * 6 + "z" * 3
"""A session id of 100 characters: never sent whole."""
CUT_SESSION_ID = LONG_SESSION_ID[:64]
"""What is sent of it: its first 64 characters."""


def tool_conversation(found: Any, call_id: str = "call_1") -> LlmContext:
    """Three turns of a tool conversation with ``found``: a question, a call and its
    result, an answer, then the next question."""
    from tests._support import ECHO, make_tool  # here: _support imports the test kit

    turn = {"api": found.api, "provider": found.provider, "model": found.id}
    return context(
        UserMessage.text("What does the file say?"),
        AssistantMessage(
            content=[TextContent("Reading."), ToolCall(call_id, "lookup", {"path": "a"})],
            stop_reason="toolUse",
            **turn,
        ),
        ToolResultMessage(
            tool_call_id=call_id, tool_name="lookup", content=[TextContent("it says hi")]
        ),
        AssistantMessage(content=[TextContent("It says hi.")], **turn),
        UserMessage.text("And the other one?"),
        system_prompt="Be brief.",
        tools=[ECHO, make_tool("lookup", ECHO.execute)],
    )


async def conversation_request(
    provider: Callable[[httpx2.AsyncClient], Any],
    found: Any,
    reply: ScriptedResponse,
    call_id: str = "call_1",
    **opts: Any,
) -> Any:
    """The request ``provider`` (a provider class) sends for ``found`` (a catalog model, at
    its own server), seen on loopback: the tool conversation, with a session id (``s-1``,
    unless given)."""
    opts.setdefault("session_id", "s-1")
    async with open_sse_server(reply) as server, as_if_at(server.url) as client:
        await call(
            provider(client).stream, found, tool_conversation(found, call_id), options(**opts)
        )
    return server.requests[0]


def strings(value: Any) -> list[str]:
    """Every string in a JSON value: keys and values, at any depth."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(text for item in value.values() for text in strings(item))]
    if isinstance(value, list):
        return [text for item in value for text in strings(item)]
    return []
