"""HTTP for the providers: the one module that imports httpx.

:meth:`Transport.open` sends a request and hands back the response as a
stream of server-sent events, after it

* retried what is safe to retry — connection errors and HTTP 408, 409, 429,
  5xx, 529, *before any event arrived* — with exponential backoff and jitter
  on Trio's clock, honouring ``retry-after`` / ``retry-after-ms``, at most
  ``max_retries`` times, never waiting longer than ``max_retry_delay``;
* checked the status, and for a non-2xx response read the body for the
  server's own error message;
* checked that the body is an event stream.

Every failure of the network or the server is a :class:`ProviderFailure`
with a sentence that says what happened; the provider turns it into an error
reply. Time limits: ``connect`` (httpx), ``first_byte`` (until the response
head) and ``idle`` (for each read of the body).

Lifetimes. A response is always closed — when the stream is done, when a
failure ends it, and when the caller is cancelled (then in a shielded scope,
with a grace period, so that the server sees the connection close). The
pooled ``httpx.AsyncClient`` lives as long as the run that first needed it
(see ``trio_agent._resources``), or, outside a run, as long as one request;
an application may give a provider its own client, whose life it owns.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import attrs
import httpx  # noqa: ASYNC127  (the design's client)
import trio

from .._resources import current_resources
from .._stream import StreamOptions, Timeouts
from ._sse import SseDecoder, SseEvent

__all__ = ["HttpRequest", "ProviderFailure", "SseStream", "Transport"]

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_CLOSE_GRACE = 2.0


class ProviderFailure(Exception):
    """The network or the server failed; ``str()`` says how, for the error reply."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


@attrs.frozen
class HttpRequest:
    """A POST of a JSON body."""

    url: str
    headers: Mapping[str, str]
    body: Any


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms`` or ``retry-after`` (seconds)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue  # an HTTP date: not worth parsing; back off instead
    return None


def _retry_delay(body: bytes) -> float | None:
    """Seconds a Google error body asks us to wait (``RetryInfo``: ``"retryDelay": "34s"``)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None


def error_text(body: bytes) -> str:
    """The message a server put in an error body (OpenAI, Anthropic, Google, vLLM shapes)."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500] or "(empty body)"
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        message = error.get("message") or error.get("msg") or ""
        kind = error.get("type") or error.get("status") or ""
        if kind and message:
            return f"{kind}: {message}"
        if message:
            return str(message)
    if isinstance(error, str):
        return error
    return text[:500]


class _IdleLimited(httpx.AsyncByteStream):
    """A response body whose every read must bring bytes within ``idle`` seconds.

    The limit is kept per network read, not per event: a read brings many
    events, and a cancel scope per event would cost more than parsing it.
    """

    def __init__(self, body: httpx.AsyncByteStream, idle: float) -> None:
        self._body = body
        self._idle = idle
        self._chunks: AsyncIterator[bytes] | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = self._body.__aiter__()
        return self

    async def __anext__(self) -> bytes:
        assert self._chunks is not None
        with trio.fail_after(self._idle):
            return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._body.aclose()


class _Body(httpx.AsyncByteStream):
    """A request body sent as one piece, read without an async generator.

    httpx reads a body through an async generator; a cancellation while the
    body is being sent leaves it half-read, and Trio reports it when it is
    collected. This iterator has nothing to finish.
    """

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._left: bytes | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        self._left = self._body
        return self

    async def __anext__(self) -> bytes:
        body, self._left = self._left, None
        if body is None:
            raise StopAsyncIteration
        return body


class SseStream:
    """The events of one response, the idle time limit applied to its reads."""

    def __init__(self, name: str, response: httpx.Response, idle: float | None) -> None:
        self._name = name
        self._response = response
        self._idle = idle
        if idle is not None and isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = _IdleLimited(response.stream, idle)
        self._texts = response.aiter_text()
        self._decoder: SseDecoder | None = SseDecoder()

    async def read(self) -> list[SseEvent] | None:
        """The events that the next read of the body completes (often several, maybe
        none), or ``None`` once the body has ended. Raises :class:`ProviderFailure`
        when the stream fails: an idle timeout, a lost connection."""
        decoder = self._decoder
        if decoder is None:
            return None
        try:
            return decoder.decode(await self._texts.__anext__())
        except StopAsyncIteration:
            self._decoder = None
            return decoder.flush()
        except trio.TooSlowError:
            raise ProviderFailure(
                f"{self._name} sent nothing for {self._idle:g} s (idle timeout)"
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderFailure(f"connection to {self._name} lost: {_describe(exc)}") from None

    async def drain(self) -> None:
        """Read what is left of a response that is done (its last bytes), so that its
        connection goes back to the pool instead of being closed."""
        with contextlib.suppress(ProviderFailure):  # the reply is whole; only reuse is lost
            while await self.read() is not None:
                pass

    async def aclose(self) -> None:
        """Close the response, and finish the generators that read it.

        httpx reads a response through a chain of async generators; closing
        the outer one leaves the inner ones suspended, and Trio warns when it
        collects them. Once the response is closed, one more read makes every
        layer end (with an exception or at the end), so none is left half-way.
        """
        await self._response.aclose()
        try:
            while True:
                await self._texts.__anext__()
        except (Exception, StopAsyncIteration):
            pass


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _backoff(attempt: int) -> float:
    """1 s, 2 s, 4 s, ... with up to 25% jitter."""
    delay: float = 2.0**attempt
    return delay * (1 + random.random() / 4)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CA bundle), made once per process.

    httpx makes one for every new client, reading the CA bundle from disk on the
    event loop (tens of milliseconds), and a run makes a client: shared, that cost
    is paid once. It is made here, not in a worker thread, because waiting for a
    thread lets a test's autojumping MockClock jump over a loopback request.
    """
    return httpx.create_ssl_context()


class Transport:
    """Sends a provider's requests; one pooled client per run (or the application's own)."""

    def __init__(self, name: str, client: httpx.AsyncClient | None = None) -> None:
        self.name = name
        self._own_client = client

    def _client(self, timeouts: Timeouts) -> tuple[httpx.AsyncClient, bool]:
        """The client to use, and whether this call must close it."""
        if self._own_client is not None:
            return self._own_client, False
        resources = current_resources()
        client = None if resources is None else resources.get(self)
        if client is None:
            limits = httpx.Timeout(
                timeouts.connect, read=None, write=timeouts.connect, pool=timeouts.connect
            )
            client = httpx.AsyncClient(timeout=limits, verify=_tls_context())
            if resources is None:
                return client, True
            resources.put(self, client, client.aclose)
        return client, False

    async def open(
        self,
        request: HttpRequest,
        options: StreamOptions,
        secrets: tuple[str, ...] = (),
        name: str | None = None,
    ) -> _Opened:
        """Send ``request`` (retrying what may be retried) and return its event stream.

        Use the result with ``async with``: it closes the response (and a
        client made for this request alone). ``secrets`` are scrubbed from any
        error text; ``name`` is the server's name in it (the model's provider
        label; by default this transport's). Raises :class:`ProviderFailure`.
        """
        attempt = 0
        while True:
            try:
                return await self._open_once(request, options, name or self.name)
            except ProviderFailure as failure:
                scrub(failure, secrets)
                if not failure.retryable or attempt >= options.max_retries:
                    raise
                delay = (
                    failure.retry_after if failure.retry_after is not None else _backoff(attempt)
                )
                if delay > options.max_retry_delay:
                    raise ProviderFailure(
                        f"{failure} (the server asks to retry in {delay:g} s, more than "
                        f"max_retry_delay={options.max_retry_delay:g})"
                    ) from None
                await trio.sleep(delay)
                attempt += 1

    async def _open_once(self, request: HttpRequest, options: StreamOptions, name: str) -> _Opened:
        timeouts = options.timeouts
        client, close_client = self._client(timeouts)
        opened: _Opened | None = None
        try:
            built = client.build_request(
                "POST",
                request.url,
                headers={"accept": "text/event-stream", **request.headers},
                json=request.body,
            )
            built.stream = _Body(built.content)
            first_byte = timeouts.first_byte if timeouts.first_byte is not None else float("inf")
            try:
                with trio.fail_after(first_byte):
                    response = await client.send(built, stream=True)
            except trio.TooSlowError:
                raise ProviderFailure(
                    f"no response from {name} within {first_byte:g} s (first-byte timeout)",
                    retryable=True,
                ) from None
            except httpx.TimeoutException as exc:
                raise ProviderFailure(
                    f"could not connect to {name} ({_describe(exc)})", retryable=True
                ) from None
            except httpx.HTTPError as exc:
                raise ProviderFailure(
                    f"could not reach {name}: {_describe(exc)}", retryable=True
                ) from None
            # From here on, closing ``opened`` closes the client too.
            opened = _Opened(name, response, client if close_client else None, timeouts.idle)
            accepted = False
            try:
                failure = await opened.check()
                accepted = failure is None
            finally:
                if not accepted:
                    with trio.move_on_after(_CLOSE_GRACE, shield=True):
                        await opened.aclose()
            if failure is not None:
                raise failure
            return opened
        finally:
            if opened is None and close_client:
                with trio.move_on_after(_CLOSE_GRACE, shield=True):
                    await client.aclose()


def scrub(failure: ProviderFailure, secrets: tuple[str, ...]) -> None:
    """Remove secrets (API keys) from a failure's message."""
    text = str(failure)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    failure.args = (text,)


class _Opened:
    """An accepted response: its events, and what closing it takes."""

    def __init__(
        self,
        name: str,
        response: httpx.Response,
        client: httpx.AsyncClient | None,
        idle: float | None,
    ) -> None:
        self.name = name
        self.response = response
        self._client = client
        self.events = SseStream(name, response, idle)

    async def check(self) -> ProviderFailure | None:
        """What is wrong with the response (a non-2xx status, not an event stream), if anything."""
        response = self.response
        if not 200 <= response.status_code < 300:
            body = await self._error_body()
            message = "(the error body could not be read)" if body is None else error_text(body)
            status = response.status_code
            retry_after = _retry_after(response.headers)
            if retry_after is None and body is not None:
                retry_after = _retry_delay(body)
            return ProviderFailure(
                f"HTTP {status} from {self.name}: {message}",
                retryable=status in _RETRY_STATUSES or 500 <= status < 600,
                retry_after=retry_after,
            )
        kind = response.headers.get("content-type", "").partition(";")[0].strip()
        if kind != "text/event-stream":
            body = await self._error_body() or b""
            return ProviderFailure(
                f"{self.name} answered with {kind or 'no content type'}, not an event stream: "
                f"{error_text(body)}"
            )
        return None

    async def _error_body(self) -> bytes | None:
        """The body of a response that is not a stream, or None if it cannot be read in 10 s."""
        try:
            with trio.move_on_after(10):
                return await self.response.aread()
        except httpx.HTTPError:
            return None
        return None

    async def __aenter__(self) -> SseStream:
        return self.events

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        # Shielded: a cancelled request must still close its connection, so
        # that the server sees it end and the socket is not left to the pool.
        with trio.move_on_after(_CLOSE_GRACE, shield=True):
            await self.events.aclose()
            if self._client is not None:
                await self._client.aclose()
