"""A loopback HTTP/1.1 server that replays scripted responses, for provider tests.

Each request gets the next scripted :class:`Response`: a status, headers and
a body, sent in pieces (each piece its own HTTP chunk, so the client sees the
pieces as they were cut, whatever the kernel does with the bytes), and
optionally a fault: drop the connection after some bytes, stall after some
bytes, or stall before the head. Every request is recorded (method, path,
headers, parsed JSON body), and the server counts the connections the client
closed, so a test can check that cancelling a request ends it.

It is real TCP on 127.0.0.1 through the real httpx client: nothing is mocked.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

import attrs
import trio

__all__ = ["Recorded", "Response", "SSEServer", "sse_body"]


def sse_body(
    events: Iterable[tuple[str | None, Any]], *, done: bool = False, crlf: bool = False
) -> bytes:
    """An SSE body: each event is ``(name or None, data)``; data that is not a str is JSON."""
    newline = "\r\n" if crlf else "\n"
    out: list[str] = []
    for name, data in events:
        if name is not None:
            out.append(f"event: {name}{newline}")
        text = data if isinstance(data, str) else json.dumps(data)
        out.append(f"data: {text}{newline}{newline}")
    if done:
        out.append(f"data: [DONE]{newline}{newline}")
    return "".join(out).encode("utf-8")


@attrs.define
class Response:
    """What the server answers to one request."""

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = attrs.Factory(dict)
    content_type: str = "text/event-stream"
    pieces: Sequence[int] | tuple[int, int] | None = None
    """``(low, high)``: random piece sizes in that range; a list: these sizes
    (cycled); None: the whole body in one piece."""
    drop_after: int | None = None
    """Close the connection abruptly after this many body bytes."""
    stall_after: int | None = None
    """Stop sending after this many body bytes, and keep the connection open."""
    stall_before_head: bool = False
    """Send nothing at all (not even the status line)."""


@attrs.define
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class SSEServer:
    """Serve scripted responses on 127.0.0.1; ``await server.start(nursery)`` returns its URL."""

    def __init__(self, responses: Iterable[Response] = (), *, seed: int = 0) -> None:
        self.responses: list[Response] = list(responses)
        self.requests: list[Recorded] = []
        self.closed_by_client = 0
        self.connections = 0
        self.served = 0
        self._closed = trio.Event()
        self._random = random.Random(seed)
        self.port = 0

    def add(self, *responses: Response) -> None:
        self.responses.extend(responses)

    async def wait_closed_by_client(self, count: int = 1) -> None:
        """Wait until the client has closed ``count`` connections."""
        while self.closed_by_client < count:
            await self._closed.wait()

    def _client_closed(self) -> None:
        self.closed_by_client += 1
        self._closed.set()
        self._closed = trio.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, nursery: trio.Nursery) -> str:
        listeners = await nursery.start(partial(trio.serve_tcp, host="127.0.0.1"), self._handle, 0)
        self.port = listeners[0].socket.getsockname()[1]
        return self.url

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            while True:
                request = await _read_request(stream)
                if request is None:
                    self._client_closed()
                    return
                self.requests.append(request)
                if not self.responses:
                    response = Response(
                        status=500,
                        body=b'{"error": "no scripted response"}',
                        content_type="application/json",
                    )
                else:
                    response = self.responses.pop(0)
                self.served += 1
                if not await self._answer(stream, response):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._client_closed()
        finally:
            await stream.aclose()

    async def _answer(self, stream: trio.SocketStream, response: Response) -> bool:
        """Send ``response``; False when the connection must end afterwards."""
        if response.stall_before_head:
            while await stream.receive_some(65536):
                pass
            self._client_closed()
            return False
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests"}.get(
            response.status, "Status"
        )
        head = [f"HTTP/1.1 {response.status} {reason}", f"content-type: {response.content_type}"]
        head += [f"{name}: {value}" for name, value in response.headers.items()]
        head.append("transfer-encoding: chunked")
        await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        body = response.body
        sent = 0
        for piece in self._pieces(body, response.pieces):
            if response.drop_after is not None and sent + len(piece) > response.drop_after:
                cut = response.drop_after - sent
                if cut > 0:
                    await stream.send_all(b"%x\r\n%s\r\n" % (cut, piece[:cut]))
                return False  # abrupt close, no terminating chunk
            if response.stall_after is not None and sent + len(piece) > response.stall_after:
                cut = response.stall_after - sent
                if cut > 0:
                    await stream.send_all(b"%x\r\n%s\r\n" % (cut, piece[:cut]))
                # Send nothing more, but notice when the client gives up.
                while await stream.receive_some(65536):
                    pass
                self._client_closed()
                return False
            await stream.send_all(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
        await stream.send_all(b"0\r\n\r\n")
        return True

    def _pieces(
        self, body: bytes, pieces: Sequence[int] | tuple[int, int] | None
    ) -> Iterable[bytes]:
        if not body:
            return []
        if pieces is None:
            return [body]
        out = []
        position = 0
        index = 0
        while position < len(body):
            if isinstance(pieces, tuple) and len(pieces) == 2:
                size = self._random.randint(pieces[0], pieces[1])
            else:
                size = pieces[index % len(pieces)]
                index += 1
            out.append(body[position : position + size])
            position += size
        return out


async def _read_request(stream: trio.SocketStream) -> Recorded | None:
    """One HTTP/1.1 request (head and Content-Length body), or None at EOF."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        rest += data
    return Recorded(method, path, headers, rest[:length])
