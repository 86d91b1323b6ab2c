"""B10's server (benchmarks/b10_server.py) speaks enough HTTP/1.1 for both B10 clients: one
HTTP chunk per SSE event, keep-alive, the reply chosen by the request, its pace kept."""

from __future__ import annotations

import functools
import json

import pytest
import trio

from benchmarks._b10 import _Script
from benchmarks.b10_server import Server
from benchmarks.pool import _b10_run

_SCRIPT = _Script(3, 2, 3)


def _request(body: bytes) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    )


async def _reply(stream: trio.SocketStream, buffer: bytearray) -> tuple[bytes, list[bytes]]:
    """One response's head and its chunks' payloads, read off ``stream``."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        buffer += await stream.receive_some()
    head = bytes(buffer[:end])
    del buffer[: end + 4]
    chunks: list[bytes] = []
    while True:
        await trio.lowlevel.checkpoint()
        while (line := buffer.find(b"\r\n")) < 0:
            buffer += await stream.receive_some()
        size = int(buffer[:line], 16)
        while len(buffer) < line + 2 + size + 2:
            buffer += await stream.receive_some()
        payload = bytes(buffer[line + 2 : line + 2 + size])
        del buffer[: line + 2 + size + 2]
        if size == 0:
            return head, chunks
        chunks.append(payload)


async def _exchange(pace: float) -> tuple[Server, list[list[bytes]], float]:
    server = Server(_SCRIPT, pace)
    replies: list[list[bytes]] = []
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        start = trio.current_time()
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            buffer = bytearray()
            first = json.dumps({"messages": [{"role": "user", "content": "go"}]}).encode()
            second = json.dumps(
                {"messages": [{"role": "tool", "tool_call_id": "call_b10", "content": "ok"}]}
            ).encode()
            for body in (first, second):  # both on one keep-alive connection
                await stream.send_all(_request(body))
                head, chunks = await _reply(stream, buffer)
                assert head.startswith(b"HTTP/1.1 200 OK\r\n")
                assert b"transfer-encoding: chunked" in head
                replies.append(chunks)
        elapsed = trio.current_time() - start
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    return server, replies, elapsed


def _events(events: list[str]) -> list[bytes]:
    return [event.encode() for event in events]


async def test_bursty_replies_one_chunk_per_event_chosen_by_the_request() -> None:
    with trio.fail_after(10):
        server, (call, final), _ = await _exchange(0.0)
    assert call == _events(_SCRIPT.tool_call)
    assert final == _events(_SCRIPT.final_reply)
    assert (server.connections, server.peak, server.open, server.requests) == (1, 1, 0, 2)


async def test_paced_replies_wait_the_pace_between_events() -> None:
    pace = 0.02
    with trio.fail_after(10):
        server, (call, final), elapsed = await _exchange(pace)
    assert call == _events(_SCRIPT.tool_call)
    assert final == _events(_SCRIPT.final_reply)
    gaps = len(call) - 1 + len(final) - 1
    assert elapsed >= gaps * pace
    assert server.requests == 2


@pytest.mark.parametrize(("kind", "pace"), [("ours", 0.0), ("sdk", 0.005)])
def test_a_few_agents_of_each_side_through_the_server_process(kind: str, pace: float) -> None:
    side = _b10_run(kind, 2, pace, limit=60)
    assert side is not None, f"{kind} did not finish"
    assert side.deltas == 2 * 60
    assert (side.requests, side.connections, side.peak_connections) == (4, 2, 2)
    assert side.fds_before == side.fds_after
