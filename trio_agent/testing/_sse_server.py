"""A loopback HTTP/1.1 server that replays scripted responses, for testing providers.

A provider is only tested when it talks to a real server through the real
httpx2 client: what a mock cannot show is how the bytes arrive. So
:class:`SSEServer` is real TCP on 127.0.0.1, and each request it receives
gets the next :class:`ScriptedResponse` of its script: a status, headers and
a body, sent whole or cut in pieces (each piece its own HTTP chunk, so the
client sees the pieces as they were cut, whatever the kernel does with the
bytes; random sizes come from a seeded generator, so a run replays the same
way), and optionally a fault:

* ``drop_after``: close the connection abruptly after some body bytes;
* ``stall_after``: send nothing more after some body bytes, and keep the
  connection open until the client gives up;
* ``stall_before_head``: send nothing at all, not even the status line;
* ``close``: close the connection once the response is sent (a server whose
  keep-alive timeout fires: the client's pooled connection is dead);
* ``hang_up``: close the connection as soon as the request arrived, without
  answering (what a client sees when it reuses a keep-alive connection that
  the server closed just then);
* ``malformed_after``: splice a broken event (``data: {"malformed``) into the
  body at an event boundary;
* :meth:`ScriptedResponse.error`: an HTTP error status with a JSON body and
  ``retry-after`` / ``retry-after-ms``.

Every request is recorded (:class:`RecordedRequest`: method, path, headers,
body), and the server counts the connections it accepted, how many were open
at once at most, and those the client closed, so a test can check that
cancelling a request ends it (:meth:`SSEServer.wait_closed_by_client`) and
that a pool reuses and bounds its connections. Given an ``ssl_context`` it
serves HTTPS (``https://127.0.0.1:<port>``)::

    async with open_sse_server(ScriptedResponse(body=body, pieces=(1, 7))) as server:
        model = openai_chat.model("gpt-4.1", base_url=server.url + "/v1")
        ...
    assert server.requests[0].json["model"] == "gpt-4.1"

Time: the server never sleeps, and loopback I/O is ready by the time Trio
looks for it, so it works under ``trio.testing.MockClock`` (pytest-trio's
``autojump_clock``): a stall reaches the client's timeout at once in real
time. Should a busy machine ever make a read look idle, a clock with a small
``autojump_threshold`` (0.05 s) waits that long in real time before jumping.
"""

from __future__ import annotations

import http
import json
import random
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio

__all__ = [
    "MALFORMED_EVENT",
    "RecordedRequest",
    "SSEServer",
    "ScriptedResponse",
    "open_sse_server",
    "sse_body",
]

MALFORMED_EVENT = b'data: {"malformed\n\n'
"""The event :attr:`ScriptedResponse.malformed_after` splices in: JSON cut short."""

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_REASONS = {529: "Site Is Overloaded"}


def sse_body(
    events: Iterable[tuple[str | None, Any]], *, done: bool = False, crlf: bool = False
) -> bytes:
    """An event-stream body: each event is ``(name or None, data)``, data that is not a
    ``str`` is sent as JSON. ``done`` ends it with ``data: [DONE]`` (OpenAI's last event);
    ``crlf`` ends lines with CRLF (as Google does)."""
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


def _check_pieces(
    instance: ScriptedResponse,
    attribute: attrs.Attribute[Sequence[int] | None],
    value: Sequence[int] | None,
) -> None:
    if value is None:
        return
    if isinstance(value, tuple) and len(value) == 2:
        if not 1 <= value[0] <= value[1]:
            raise ValueError(f"pieces=(low, high) needs 1 <= low <= high, not {value!r}")
    elif not value or any(size < 1 for size in value):
        raise ValueError(f"pieces must be piece sizes >= 1, not {value!r}")


def _check_offset(
    instance: ScriptedResponse, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, not {value!r}")


@attrs.define(kw_only=True)
class ScriptedResponse:
    """What :class:`SSEServer` answers to one request: a status, headers, a body, and
    how to send the body (pieces, faults).

    The fields can be changed until the response is served. Byte offsets
    (``drop_after``, ``stall_after``) count the body's bytes as sent, a
    spliced malformed event included.
    """

    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = attrs.Factory(dict)
    """Extra response headers (``content-type`` and ``transfer-encoding`` are set already)."""
    content_type: str = "text/event-stream"
    pieces: Sequence[int] | None = attrs.field(default=None, validator=_check_pieces)
    """How the body is cut: ``None``, whole; a ``(low, high)`` tuple, random sizes in that
    range (seeded by the server); any other sequence, these sizes, cycled."""
    drop_after: int | None = attrs.field(default=None, validator=_check_offset)
    """Close the connection abruptly after this many body bytes (no terminating chunk)."""
    stall_after: int | None = attrs.field(default=None, validator=_check_offset)
    """Send nothing more after this many body bytes, and keep the connection open until
    the client closes it (which :meth:`SSEServer.wait_closed_by_client` sees)."""
    resume: trio.Event | None = None
    """With ``stall_after``: send the rest of the body once this event is set (instead of
    waiting for the client to close) — a model that pauses while a test acts."""
    stall_before_head: bool = False
    """Send nothing at all (not even the status line) until the client closes."""
    malformed_after: int | None = attrs.field(default=None, validator=_check_offset)
    """Splice ``malformed_event`` into the body at the first event boundary at or after
    this many bytes (0: before the first event); the rest of the body follows it."""
    malformed_event: bytes = MALFORMED_EVENT
    """What ``malformed_after`` splices in: by default a ``data:`` line of JSON cut short."""
    close: bool = False
    """Close the connection once this response is sent whole, without saying so (no
    ``connection: close`` header; add it to ``headers`` to say it): the client's idle
    keep-alive connection is then closed under it, as when a server's keep-alive
    timeout fires."""
    hang_up: bool = False
    """Close the connection as soon as the request has arrived, without answering (the
    request is recorded): a keep-alive connection the server closed just as the
    client reused it."""

    @classmethod
    def error(
        cls,
        status: int,
        body: str | bytes | Mapping[str, Any] = b"",
        *,
        retry_after: float | str | None = None,
        retry_after_ms: float | None = None,
        headers: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> ScriptedResponse:
        """An HTTP error: ``status`` with ``body`` (a mapping is sent as JSON), and the
        ``retry-after`` (seconds, or an HTTP date as a ``str``) / ``retry-after-ms``
        headers when given::

            ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=7)
        """
        if isinstance(body, Mapping):
            data = json.dumps(body).encode("utf-8")
        elif isinstance(body, str):
            data = body.encode("utf-8")
        else:
            data = body
        extra = dict(headers or {})
        if retry_after is not None:
            extra["retry-after"] = (
                retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
            )
        if retry_after_ms is not None:
            extra["retry-after-ms"] = f"{retry_after_ms:g}"
        return cls(body=data, status=status, headers=extra, content_type=content_type)

    def body_to_send(self) -> bytes:
        """The body as the server sends it: with the malformed event spliced in, if asked."""
        if self.malformed_after is None:
            return self.body
        position = len(self.body)
        if self.malformed_after == 0:
            position = 0
        else:
            for match in _EVENT_END.finditer(self.body, max(0, self.malformed_after - 4)):
                if match.end() >= self.malformed_after:
                    position = match.end()
                    break
        return self.body[:position] + self.malformed_event + self.body[position:]


@attrs.frozen
class RecordedRequest:
    """One request :class:`SSEServer` received."""

    method: str
    path: str
    """The request target: path and query string (``/v1/chat/completions``)."""
    headers: dict[str, str]
    """The request headers, names in lower case."""
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


_NO_SCRIPT = ScriptedResponse(
    status=500, body=b'{"error": "no scripted response"}', content_type="application/json"
)


class SSEServer:
    """Serves scripted responses on 127.0.0.1, one per request, in order.

    Give it responses when it is made or later with :meth:`add`; start it
    in a nursery with :meth:`start` (or use :func:`open_sse_server`). A
    request that finds the script empty gets HTTP 500 with
    ``{"error": "no scripted response"}``. It lives until that nursery is
    cancelled; its state is plain attributes:

    * :attr:`requests`: every request received, in order;
    * :attr:`connections`: how many connections were accepted;
    * :attr:`open_connections`, :attr:`peak_connections`: how many are open
      now, and the most that were open at once;
    * :attr:`closed_by_client`: how many of them the client closed (or
      broke) before the server was done with them;
    * :attr:`served`: how many requests were answered;
    * :attr:`responses`: the responses not served yet.

    ``seed`` seeds the piece sizes of ``pieces=(low, high)``; ``ssl_context``
    (a server-side ``ssl.SSLContext``, e.g. from ``trustme``:
    ``ca.issue_cert("127.0.0.1").configure_cert(context)``) makes it serve HTTPS; the client
    then trusts that CA, e.g. through ``open_pool(verify=...)``. It serves over real TCP, and
    works under ``MockClock``: it never sleeps. ``peak_connections`` is how a pool's bound
    is checked.
    """

    def __init__(
        self,
        responses: Iterable[ScriptedResponse] = (),
        *,
        seed: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.responses: list[ScriptedResponse] = list(responses)
        self.requests: list[RecordedRequest] = []
        self.closed_by_client = 0
        self.connections = 0
        self.open_connections = 0
        self.peak_connections = 0
        self.ssl_context = ssl_context
        self.served = 0
        self.port = 0
        """The port it listens on (0 until started)."""
        self._closed = trio.Event()
        self._random = random.Random(seed)

    def __repr__(self) -> str:
        return (
            f"<SSEServer {self.url if self.port else '(not started)'}: "
            f"{len(self.requests)} request(s), {len(self.responses)} response(s) left>"
        )

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (``https`` with an ``ssl_context``), without a
        trailing slash."""
        scheme = "http" if self.ssl_context is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}"

    def add(self, *responses: ScriptedResponse) -> None:
        """Append responses to the script."""
        self.responses.extend(responses)

    async def start(self, nursery: trio.Nursery) -> str:
        """Listen on a free port of 127.0.0.1, serving in ``nursery``; return :attr:`url`.

        The server runs until ``nursery`` is cancelled.
        """
        serve: Callable[..., Awaitable[object]]
        if self.ssl_context is None:
            serve = partial(trio.serve_tcp, host="127.0.0.1")
        else:
            serve = partial(
                trio.serve_ssl_over_tcp,
                ssl_context=self.ssl_context,
                host="127.0.0.1",
                https_compatible=True,
            )
        listeners = await nursery.start(serve, self._handle, 0)
        tcp = listeners[0] if self.ssl_context is None else listeners[0].transport_listener
        self.port = tcp.socket.getsockname()[1]
        return self.url

    async def wait_closed_by_client(self, count: int = 1) -> None:
        """Wait until the client has closed ``count`` connections in all.

        Always a checkpoint. Cancellation: nothing is lost, wait again.
        """
        await trio.lowlevel.checkpoint()
        while self.closed_by_client < count:
            await self._closed.wait()

    def _client_closed(self) -> None:
        self.closed_by_client += 1
        self._closed.set()
        self._closed = trio.Event()

    async def _handle(self, stream: trio.abc.Stream) -> None:
        self.connections += 1
        self.open_connections += 1
        self.peak_connections = max(self.peak_connections, self.open_connections)
        try:
            while True:
                request = await _read_request(stream)
                if request is None:
                    self._client_closed()
                    return
                self.requests.append(request)
                response = self.responses.pop(0) if self.responses else _NO_SCRIPT
                self.served += 1
                if not await self._answer(stream, response):
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._client_closed()
        finally:
            self.open_connections -= 1
            await stream.aclose()

    async def _answer(self, stream: trio.abc.Stream, response: ScriptedResponse) -> bool:
        """Send ``response``; False when the connection must end afterwards."""
        if response.hang_up:
            return False
        if response.stall_before_head:
            await self._until_client_closes(stream)
            return False
        head = [
            f"HTTP/1.1 {response.status} {_reason(response.status)}",
            f"content-type: {response.content_type}",
        ]
        head += [f"{name}: {value}" for name, value in response.headers.items()]
        head.append("transfer-encoding: chunked")
        await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        sent = 0
        stall_after = response.stall_after
        for piece in self._pieces(response.body_to_send(), response.pieces):
            for limit, stall in ((response.drop_after, False), (stall_after, True)):
                if limit is not None and sent + len(piece) > limit:
                    cut = limit - sent
                    if cut > 0:
                        await stream.send_all(b"%x\r\n%s\r\n" % (cut, piece[:cut]))
                    if not stall or response.resume is None:
                        if stall:
                            await self._until_client_closes(stream)
                        return False  # dropped or stalled: no terminating chunk
                    await response.resume.wait()
                    stall_after = None
                    piece, sent = piece[max(cut, 0) :], sent + max(cut, 0)
            if piece:
                await stream.send_all(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
        await stream.send_all(b"0\r\n\r\n")
        return not response.close

    async def _until_client_closes(self, stream: trio.abc.Stream) -> None:
        """Send nothing more, but notice when the client gives up."""
        while await stream.receive_some(65536):
            pass
        self._client_closed()

    def _pieces(self, body: bytes, pieces: Sequence[int] | None) -> list[bytes]:
        if not body:
            return []
        if pieces is None:
            return [body]
        out: list[bytes] = []
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


def _reason(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return _REASONS.get(status, "Unknown")


async def _read_request(stream: trio.abc.Stream) -> RecordedRequest | None:
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
    return RecordedRequest(method, path, headers, rest[:length])


@asynccontextmanager
async def open_sse_server(
    *responses: ScriptedResponse, seed: int = 0, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[SSEServer]:
    """Run an :class:`SSEServer` with these responses for the duration of the block.

    ::

        async with open_sse_server(ScriptedResponse(body=body)) as server:
            ...  # server.url

    The server stops when the block exits (its connections are closed);
    what it recorded stays readable.
    """
    # The server's tasks belong to the block: they live in a nursery around the yield,
    # and since serve_tcp runs until cancelled, cancelling them is how the block ends.
    async with trio.open_nursery() as nursery:
        server = SSEServer(responses, seed=seed, ssl_context=ssl_context)
        await server.start(nursery)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
