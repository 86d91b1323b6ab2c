"""A loopback HTTP/2 server for provider tests: TLS with ALPN ``h2``, and ``h2`` over Trio.

It answers each request with the next :class:`H2Response` of its script: the
response headers as given (unchecked, so that ``:status: abc`` can be sent),
the body in DATA frames, and then, if asked, raw bytes written to the
connection as they are (frames the ``h2`` package would refuse to make: DATA
on stream 0, a header block that cannot be decoded, a WINDOW_UPDATE of 0).
Every request's headers and body are recorded.
"""

from __future__ import annotations

import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import attrs
import h2.config
import h2.connection
import h2.events
import h2.exceptions
import trio

__all__ = ["H2Request", "H2Response", "H2Server", "frame", "open_h2_server"]


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    """One HTTP/2 frame as bytes, whatever it says (RFC 9113 §4.1)."""
    return (
        struct.pack(">I", len(payload))[1:]
        + bytes([kind, flags])
        + struct.pack(">I", stream)
        + payload
    )


@attrs.define(kw_only=True)
class H2Response:
    """What the server answers to one request."""

    headers: list[tuple[bytes, bytes]] = attrs.Factory(
        lambda: [(b":status", b"200"), (b"content-type", b"text/event-stream")]
    )
    body: bytes = b""
    then: bytes = b""
    """Raw bytes written after the head and the body (before the stream ends)."""
    resume: trio.Event | None = None
    """Write ``then`` once this event is set (the client has read the head and the body,
    and waits for more), not with them."""
    end: bool = True
    """End the stream after ``then`` (else keep it open until the client closes)."""


@attrs.frozen
class H2Request:
    headers: dict[bytes, bytes]
    body: bytes


class H2Server:
    """Serves :class:`H2Response` s in order on 127.0.0.1 over TLS (``https://``)."""

    def __init__(self, responses: list[H2Response], ssl_context: ssl.SSLContext) -> None:
        self.responses = list(responses)
        self.requests: list[H2Request] = []
        self.connections = 0
        self.ssl_context = ssl_context
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self, nursery: trio.Nursery) -> None:
        serve = partial(trio.serve_ssl_over_tcp, ssl_context=self.ssl_context, host="127.0.0.1")
        listeners = await nursery.start(serve, self._handle, 0)
        self.port = listeners[0].transport_listener.socket.getsockname()[1]

    async def _handle(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        self.connections += 1
        config = h2.config.H2Configuration(
            client_side=False, validate_outbound_headers=False, normalize_outbound_headers=False
        )
        connection = h2.connection.H2Connection(config=config)
        connection.initiate_connection()
        bodies: dict[int, bytes] = {}
        heads: dict[int, dict[bytes, bytes]] = {}
        try:
            await stream.send_all(connection.data_to_send())
            while data := await stream.receive_some(65536):
                try:
                    events = connection.receive_data(data)
                except h2.exceptions.ProtocolError:
                    return  # the client sent what this server's state does not expect
                for event in events:
                    if isinstance(event, h2.events.RequestReceived):
                        heads[event.stream_id] = dict(event.headers or [])
                        bodies[event.stream_id] = b""
                    elif isinstance(event, h2.events.DataReceived):
                        bodies[event.stream_id] += event.data or b""
                        connection.acknowledge_received_data(
                            event.flow_controlled_length, event.stream_id
                        )
                    elif isinstance(event, h2.events.StreamEnded):
                        sid = event.stream_id
                        self.requests.append(H2Request(heads[sid], bodies[sid]))
                        await self._answer(stream, connection, sid)
                await stream.send_all(connection.data_to_send())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _answer(
        self,
        stream: trio.SSLStream[trio.SocketStream],
        connection: h2.connection.H2Connection,
        sid: int,
    ) -> None:
        response = (
            self.responses.pop(0) if self.responses else H2Response(headers=[(b":status", b"500")])
        )
        done = response.end and not response.body and not response.then
        connection.send_headers(sid, response.headers, end_stream=done)
        if response.body:
            connection.send_data(sid, response.body, end_stream=response.end and not response.then)
        if response.resume is None:
            await stream.send_all(connection.data_to_send() + response.then)
        else:
            await stream.send_all(connection.data_to_send())
            await response.resume.wait()
            await stream.send_all(response.then)
        if response.then and response.end:
            connection.end_stream(sid)


@asynccontextmanager
async def open_h2_server(
    *responses: H2Response, ssl_context: ssl.SSLContext
) -> AsyncIterator[H2Server]:
    """An :class:`H2Server` for the block."""
    async with trio.open_nursery() as nursery:
        server = H2Server(list(responses), ssl_context)
        await server.start(nursery)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
