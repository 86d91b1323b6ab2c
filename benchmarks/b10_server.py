"""B10's server: OpenAI chat streams over HTTP/1.1 on loopback, in a process of its own.

    python -m benchmarks.b10_server [--text 25] [--arguments 10] [--final 25] [--pace 0.05]

It prints the port it listens on (127.0.0.1) as a line, serves until its standard input
closes, then prints one JSON line: ``connections`` accepted, ``peak`` open at once,
``requests`` answered. Each request is answered by what it carries: a request with a tool
result (``tool_call_id`` in its body) gets the final text reply, any other the tool-call
reply (:class:`benchmarks._b10._Script`). Keep-alive, any number of requests per
connection; each reply is ``transfer-encoding: chunked`` with one HTTP chunk per SSE event,
as the services send them: written as fast as the socket takes them (``--pace 0``,
bursty), or one every ``--pace`` seconds per stream (paced; a busy server falls behind the
pace, never ahead of it). Lean on purpose (raw Trio sockets, the least of HTTP/1.1 a client
needs), so that it holds thousands of streams while the client it measures runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import trio

from benchmarks._b10 import _Script

_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_LAST = b"0\r\n\r\n"


def _framed(events: list[str]) -> list[bytes]:
    """The events as HTTP chunks, one each: the head goes with the first, the last chunk
    with the end of the body."""
    chunks = [b"%x\r\n%s\r\n" % (len(data), data) for data in (e.encode() for e in events)]
    chunks[0] = _HEAD + chunks[0]
    chunks[-1] += _LAST
    return chunks


class Server:
    """Answers B10's requests on each connection it is handed, counting them."""

    def __init__(self, script: _Script, pace: float) -> None:
        self.tool_call = _framed(script.tool_call)
        self.final = _framed(script.final_reply)
        self.pace = pace
        self.connections = 0
        self.open = 0
        self.peak = 0
        self.requests = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        self.open += 1
        self.peak = max(self.peak, self.open)
        try:
            async with stream:
                await self._serve(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client closed the connection
        finally:
            self.open -= 1

    async def _serve(self, stream: trio.SocketStream) -> None:
        buffer = bytearray()
        while True:
            end = buffer.find(b"\r\n\r\n")
            while end < 0:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
                end = buffer.find(b"\r\n\r\n")
            length = 0
            for line in bytes(buffer[:end]).split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            del buffer[: end + 4]
            while len(buffer) < length:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            reply = self.final if b"tool_call_id" in buffer[:length] else self.tool_call
            del buffer[:length]
            self.requests += 1
            await stream.send_all(reply[0])
            pace = self.pace
            for chunk in reply[1:]:
                if pace:
                    await trio.sleep(pace)
                await stream.send_all(chunk)


async def _main(script: _Script, pace: float) -> None:
    server = Server(script, pace)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=65535)
    print(listeners[0].socket.getsockname()[1], flush=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, server.handle, listeners)
        async with trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
            while await stdin.receive_some():
                pass
        nursery.cancel_scope.cancel()
    report = {"connections": server.connections, "peak": server.peak, "requests": server.requests}
    print(json.dumps(report), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.b10_server")
    parser.add_argument("--text", type=int, default=25, help="text deltas before the call")
    parser.add_argument("--arguments", type=int, default=10, help="the call's argument pieces")
    parser.add_argument("--final", type=int, default=25, help="the final reply's text deltas")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between events")
    args = parser.parse_args(argv)
    trio.run(_main, _Script(args.text, args.arguments, args.final), args.pace)


if __name__ == "__main__":
    main()
