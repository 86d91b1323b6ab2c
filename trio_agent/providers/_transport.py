"""HTTP for the providers: the one module that imports httpx2.

:meth:`Transport.open` sends a request and hands back the response as a
stream of server-sent events, after it

* retried what is safe to retry — connection errors and HTTP 408, 409, 429,
  5xx, 529, *before any event arrived* — with exponential backoff and jitter
  on Trio's clock, honouring ``retry-after`` (seconds or an HTTP date) /
  ``retry-after-ms``, at most ``max_retries`` times, never waiting longer
  than ``max_retry_delay``;
* checked the status, and for a non-2xx response read the start of the body
  for the server's own error message;
* checked that the body is an event stream.

Every failure of the network or the server is a :class:`ProviderFailure`
with a sentence that says what happened, its kind (a refused request's from
its status, its error body's codes and its text: see ``trio_agent._overflow``),
the HTTP status and the retry delay the server asked for; the provider turns
it into an error reply. That includes whatever the HTTP stack raises while it
reads a server's bytes, not only httpx2's errors: over HTTP/2, h2 raises its
own exceptions for a frame that breaks the protocol after the response head
(DATA on stream 0, a header block that cannot be decoded, a WINDOW_UPDATE of
0), and httpcore2 a ``ValueError`` for a ``:status`` that is not a number;
each is a failure naming the server, the exception's type and its text
(without the key, cut short). Cancellation and ``KeyboardInterrupt`` pass
through.

Time limits: ``connect`` (httpx2), ``first_byte`` (until the response head)
and ``idle`` (for each read of the body).

A request's body can always be encoded: its JSON is encoded as httpx2 would,
and if that fails — a lone surrogate in a tool's result or a loaded transcript,
NaN in a model's arguments — a lone surrogate becomes U+FFFD and a number
that is not finite ``null`` (:func:`_encoded`), rather than the run raising.

What a server sends is not trusted. A body is decoded as UTF-8 (an invalid
byte becomes U+FFFD), whatever charset its content type names: an event
stream is UTF-8 by the SSE specification and a JSON body by RFC 8259, and a
server's ``charset=utf-16`` (or ``rot13``, or a name no codec has) must
neither fail the read nor garble the text. A body that is not a stream is
read up to 64 KiB (enough for any error message: a gigabyte of it costs no
more memory) and for at most 10 s; its JSON is parsed with jiter, which refuses
nesting deeper than 200 levels with a ``ValueError`` where ``json.loads``
would raise ``RecursionError``; whatever the body holds, the result is a
sentence. Server text in a message (an error body, a header, what the HTTP
library quotes from a malformed response) is cut to a few hundred
characters, and the API key is removed from it *before* it is cut
(:func:`redact`), so that a cut cannot leave half a key behind.

Lifetimes. A response is always closed — when the stream is done, when a
failure ends it, and when the caller is cancelled (then in a shielded scope,
with a grace period, so that the server sees the connection close). Requests
go through the current pool (:mod:`._pool`: one per Trio run, or the
:func:`~trio_agent.providers.open_pool` block's), whose keep-alive connections
serve every run and agent of that Trio run; an application may give a
provider its own client, whose life it owns.
"""

from __future__ import annotations

import codecs
import contextlib
import datetime
import email.utils
import json
import math
import random
import re
import reprlib
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any

import attrs
import httpx2  # noqa: ASYNC127  (the HTTP client the providers send with)
import jiter
import trio

from .._messages import ErrorKind
from .._overflow import error_kind
from .._stream import StreamOptions
from ._pool import current_pool
from ._sse import MAX_EVENT_CHARS, EventTooLarge, SseDecoder, SseEvent

__all__ = [
    "SECRET_FRAGMENT",
    "HttpRequest",
    "ProviderFailure",
    "SseStream",
    "Transport",
    "error_text",
    "json_text",
    "redact",
]

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_CLOSE_GRACE = 2.0
_BODY_LIMIT = 64 * 1024
"""Characters of a body that is not a stream read for its error message."""
_BODY_TIME = 10.0
"""Seconds given to reading that much of it."""
_DRAIN_LIMIT = 64 * 1024
"""Characters read after a stream's terminal event to put its connection back in the pool."""
_DRAIN_TIME = 1.0
"""Seconds given to reading them."""
_TEXT_LIMIT = 500
"""Characters of server text (an error message, a quoted header) in a failure's message."""

_Utf8Decoder = codecs.getincrementaldecoder("utf-8")

SECRET_FRAGMENT = 4
"""The shortest piece of a cut secret that :func:`redact` removes (see there)."""


class ProviderFailure(Exception):
    """The network or the server failed; ``str()`` says how, for the error reply.

    ``kind`` is the reply's ``error_kind`` (None: the driver's default, ``malformed``,
    for a parser's failure), ``status`` the HTTP status of a refused request, and
    ``retry_after`` the seconds the server asked to wait.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        kind: ErrorKind | None = None,
        status: int | None = None,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.kind = kind
        self.status = status


@attrs.frozen
class HttpRequest:
    """A POST of a JSON body."""

    url: str
    headers: Mapping[str, str]
    body: Any


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (API key) in it replaced by ``***``, whole or cut short.

    Server text is cut — to a length, or because only part of a body was
    read — and a key that straddles the cut leaves its beginning behind. So
    besides every whole secret, a piece of text of at least
    :data:`SECRET_FRAGMENT` (4) characters that begins like a secret and
    stops where the secret could not stop — at the end of the text, or
    before a character that is not a letter, a digit, ``-`` or ``_`` (a
    closing quote, a space, a bracket) — is taken for a secret cut short and
    replaced too. Shorter pieces are left: up to three characters of a key
    are its public prefix (``sk-``), and matching them would garble plain
    text. Text that is cut *after* it was redacted cannot split a key at
    all; this catches the cuts made before.
    """
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
            if len(secret) > SECRET_FRAGMENT:
                text = _redact_cut(text, secret)
    return text


def _redact_cut(text: str, secret: str) -> str:
    """``text`` with each beginning of ``secret`` that stops where a cut left it as ``***``."""
    head = secret[:SECRET_FRAGMENT]
    pieces: list[str] = []
    kept = 0  # text[:kept] is decided
    found = text.find(head)
    while found != -1:
        end = found + SECRET_FRAGMENT
        while end < len(text) and end - found < len(secret) and text[end] == secret[end - found]:
            end += 1
        if end == len(text) or not _continues_key(text[end]):
            pieces += (text[kept:found], "***")
            kept = end
            found = text.find(head, end)
        else:
            found = text.find(head, found + 1)
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def _continues_key(char: str) -> bool:
    return char.isalnum() or char in "-_"


def _clip(text: str, secrets: Iterable[str], limit: int = _TEXT_LIMIT) -> str:
    """Server text for a message: redacted, then cut to ``limit`` characters."""
    return redact(text, secrets)[:limit]


def _json(text: str) -> Any:
    """The JSON value of ``text``, or None if it is not JSON (or is nested too deep)."""
    try:
        return jiter.from_json(text.encode("utf-8", errors="replace"))
    except ValueError:  # jiter's errors, its recursion limit (200 levels) among them
        return None


def _retry_after(headers: httpx2.Headers, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, or ``retry-after`` in
    seconds or as an HTTP date.

    A date is wall-clock time, so it is counted from ``now``, the wall clock's
    time (``time.time()`` unless given), not from Trio's clock, which need not
    be the wall clock (a ``MockClock`` in tests). A date in the past is 0 s.
    What ``float()`` reads is read: "nan" is no number of seconds (ignored, as
    any text that is not one), "inf" or "1e400" an infinite wait, which
    :meth:`Transport.open` refuses.
    """
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds = _seconds(value)
        if seconds is not None:
            return seconds * scale
        if name == "retry-after":
            return _until(value, time.time() if now is None else now)
    return None


def _seconds(text: str) -> float | None:
    """The number of seconds ``text`` says, at least 0 (maybe infinite); None if it is not
    a number (NaN is not)."""
    try:
        seconds = float(text)
    except ValueError:
        return None
    return None if math.isnan(seconds) else max(0.0, seconds)


def _until(value: str, now: float) -> float | None:
    """Seconds from ``now`` (wall-clock) to the HTTP date ``value``; None if it is not one."""
    try:
        date = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):  # not a date, or a date out of range
        return None
    if date.tzinfo is None:  # "-0000": UTC, its zone unknown to the sender
        date = date.replace(tzinfo=datetime.UTC)
    return max(0.0, date.timestamp() - now)


def _retry_delay(body: str) -> float | None:
    """Seconds a Google error body asks us to wait (``RetryInfo``: ``"retryDelay": "34s"``)."""
    data = _json(body)
    error = data.get("error") if isinstance(data, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            return _seconds(delay[:-1])
    return None


def _error_codes(body: str) -> tuple[object, ...]:
    """The codes an error body gives (OpenAI's ``code`` and ``type``, Anthropic's ``type``,
    Google's ``status``), as they are: the caller passes over what is not a string."""
    data = _json(body.strip())
    error = data.get("error", data) if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return ()
    return (error.get("code"), error.get("type"), error.get("status"))


def error_text(body: bytes | str, secrets: Iterable[str] = ()) -> str:
    """The message a server put in an error body (OpenAI, Anthropic, Google, vLLM
    shapes), else the body's text: at most 500 characters, ``secrets`` replaced by
    ``***`` before it is cut (so that the cut cannot leave a piece of one).

    Never raises: a body that is not JSON, JSON nested too deep to parse, or
    an error whose message is not a string gives the body's own text.
    """
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    text = text.strip()
    data = _json(text)
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        message = _string(error, "message") or _string(error, "msg")
        kind = _string(error, "type") or _string(error, "status")
        if message:
            text = f"{kind}: {message}" if kind else message
    elif isinstance(error, str) and error:
        text = error
    return _clip(text, secrets) or "(empty body)"


def _string(error: dict[str, Any], key: str) -> str:
    value = error.get(key)
    return value if isinstance(value, str) else ""


class _Body(httpx2.AsyncByteStream):
    """A request body sent as one piece, read without an async generator.

    httpx2 reads a body through an async generator; a cancellation while the
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
    """The events of one response, the idle time limit applied to its reads.

    ``secrets`` are removed from what the HTTP library says of a failure (it
    may quote the server's bytes) before that is cut.

    The idle limit is kept per network read (a read brings many events), and by
    one cancel scope for a whole :meth:`limited` block of reads: its deadline is
    set when a read starts and lifted when it returns, so that only the wait for
    the server counts, not what the caller does with the events between reads.
    A read outside such a block has a scope of its own.
    """

    def __init__(
        self,
        name: str,
        response: httpx2.Response,
        idle: float | None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._name = name
        self._response = response
        self._idle = idle
        self._secrets = secrets
        self._idle_for = math.inf if idle is None else idle
        self._scope: trio.CancelScope | None = None  # the limited() block's
        # Bytes, decoded here as UTF-8 whatever charset the content type names: SSE is
        # UTF-8 by its specification, JSON by RFC 8259, and httpx2's ``aiter_text`` would
        # decode with the server's charset (utf-16 without a BOM raises, rot13 and base64
        # are not text codecs, latin-1 garbles). Invalid bytes become U+FFFD.
        self._chunks = response.aiter_bytes()
        self._utf8 = _Utf8Decoder(errors="replace")
        self._decoder: SseDecoder | None = SseDecoder(MAX_EVENT_CHARS)

    @contextlib.contextmanager
    def limited(self) -> Iterator[None]:
        """A block whose reads of the body each wait at most ``idle`` seconds for bytes.

        One cancel scope serves all of them (a scope per read costs more than
        the read's parsing). A read that waits longer ends the block with a
        :class:`ProviderFailure` (idle timeout); the events read before it were
        returned. Cancellation from outside passes through. Nested blocks are
        the outer one.
        """
        if self._idle is None or self._scope is not None:
            yield
            return
        with trio.CancelScope() as scope:
            self._scope = scope
            try:
                yield
            finally:
                self._scope = None
        if scope.cancelled_caught:
            raise self._idle_failure()

    def _idle_failure(self) -> ProviderFailure:
        return ProviderFailure(
            f"{self._name} sent nothing for {self._idle:g} s (idle timeout)", kind="network"
        )

    async def read(self) -> list[SseEvent] | None:
        """The events that the next read of the body completes (often several, maybe
        none), or ``None`` once the body has ended. Raises :class:`ProviderFailure`
        when the stream fails: an idle timeout, a lost connection."""
        decoder = self._decoder
        if decoder is None:
            return None
        text = await self._next_text()
        if text is None:
            self._decoder = None
            return decoder.flush()
        try:
            return decoder.decode(text)
        except EventTooLarge as exc:
            self._decoder = None
            raise ProviderFailure(f"{self._name} sent {exc}", kind="malformed") from None

    async def read_text(self, limit: int) -> str:
        """The body's text from here on, at most ``limit`` characters: to its end, or
        cut where the limit falls (the rest is left unread, and closing the response
        drops it with the connection). Memory stays within ``limit`` and one network
        read, however long the body. Raises :class:`ProviderFailure` as :meth:`read`."""
        pieces: list[str] = []
        size = 0
        with self.limited():
            while size < limit:
                text = await self._next_text()
                if text is None:
                    self._decoder = None
                    break
                pieces.append(text)
                size += len(text)
        return "".join(pieces)[:limit]

    async def _next_text(self) -> str | None:
        """The text of the next read of the body (maybe empty: a character cut by the
        read waits for its other bytes), or None at its end."""
        scope = self._scope
        if scope is None and self._idle is not None:  # not in a limited() block
            with self.limited():
                return await self._next_text()
        chunk: bytes | None
        try:
            if scope is None:
                chunk = await self._chunks.__anext__()
            else:
                scope.deadline = trio.current_time() + self._idle_for
                try:
                    chunk = await self._chunks.__anext__()
                finally:
                    scope.deadline = math.inf
        except StopAsyncIteration:
            chunk = None
        except httpx2.HTTPError as exc:
            raise ProviderFailure(
                f"connection to {self._name} lost: {_describe(exc, self._secrets)}",
                kind="network",
            ) from None
        except Exception as exc:  # the HTTP stack's own (h2's), reading the server's bytes
            raise _malformed(self._name, exc, self._secrets) from None
        if scope is not None and scope.cancel_called:
            # The deadline passed as the read ended: the scope would cancel the caller's
            # next checkpoint, so the stream ends here, as if the read had waited on.
            raise self._idle_failure()
        if chunk is None:
            return self._utf8.decode(b"", True) or None  # a character cut at the end: U+FFFD
        return self._utf8.decode(chunk)

    async def drain(self) -> None:
        """Read what is left of a response that is done (its last bytes), so that its
        connection goes back to the pool instead of being closed.

        Not for long: a server that sends more than 64 KiB after its terminal
        event, or keeps the body open for more than 1 s, loses the
        connection's reuse (it is closed instead), not the caller's time or
        memory. The reply is whole either way.
        """
        left = _DRAIN_LIMIT
        # A read of the body waits for the network (a checkpoint) unless the body is
        # already there, and then the loop ends by itself.
        with (
            trio.move_on_after(_DRAIN_TIME),  # noqa: ASYNC912  (as said above)
            contextlib.suppress(ProviderFailure),
            self.limited(),
        ):
            while left > 0:
                text = await self._next_text()
                if text is None:
                    self._decoder = None
                    return
                left -= len(text)

    async def aclose(self) -> None:
        """Close the response, and finish the generators that read it.

        httpx2 reads a response through a chain of async generators; closing
        the outer one leaves the inner ones suspended, and Trio warns when it
        collects them. Once the response is closed, one more read makes every
        layer end (with an exception or at the end), so none is left half-way.
        """
        await self._response.aclose()
        try:
            while True:
                await self._chunks.__anext__()
        except (Exception, StopAsyncIteration):
            pass


def _describe(exc: BaseException, secrets: tuple[str, ...]) -> str:
    """What the HTTP library says of a failure: it may quote the server's bytes
    (h11 quotes a malformed status or header line, up to 16 KiB of it).

    An exception without a message (httpx2's ``ConnectError`` of a failed TLS
    handshake over Trio wraps a bare ``trio.BrokenResourceError``) is told by
    the first exception of its cause chain that has one (the ``ssl`` error:
    ``CERTIFICATE_VERIFY_FAILED``), else by its type's name.
    """
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    for _ in range(10):  # a chain is short; a cycle must not hang this
        if text or cause is None:
            break
        text = str(cause)
        cause = cause.__cause__ or cause.__context__
    return _clip(text, secrets) or type(exc).__name__


def _malformed(name: str, exc: Exception, secrets: tuple[str, ...]) -> ProviderFailure:
    """The failure that an exception of the HTTP stack other than an httpx2 error stands
    for: h2's own exceptions (a frame that breaks the protocol after the response head),
    a ``ValueError`` for an HTTP/2 ``:status`` that is not a number. Whatever the HTTP
    stack raises while it reads a server's bytes is the server's failure.

    Told by the exception's type and its text (which may quote the server: the key is
    removed, then the text is cut). Not retried: a server that breaks the protocol once
    is not known to do better the next time.
    """
    kind = type(exc)
    named = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    text = _clip(str(exc), secrets)
    return ProviderFailure(
        f"{name} sent a response that could not be read: {named}: {text}"
        if text
        else f"{name} sent a response that could not be read: {named}",
        kind="malformed",
    )


def _encoded(body: Any) -> bytes:
    """The JSON of a request body in UTF-8, as httpx2 writes it (compact, not ASCII-escaped).

    Always: a value JSON cannot carry is repaired, not refused, for a transcript may
    hold one that no one chose — a lone surrogate (``"\\ud800"``, from a tool's
    result or a loaded transcript: UTF-8 has no encoding for it), or NaN or an
    infinity (jiter reads them in a model's arguments; JSON has no such numbers).
    The body is encoded as it is first, and repaired (:func:`_encodable`) only if
    that fails: nothing is walked for a body that encodes.
    """
    try:
        return _dumps(body).encode("utf-8")
    except ValueError:  # UnicodeEncodeError (a lone surrogate), or a number not finite
        return _dumps(_encodable(body)).encode("utf-8")


def json_text(value: Any) -> str:
    """``value`` as JSON text to send inside a request (a tool call's arguments, which the
    OpenAI APIs take as a string): compact, not ASCII-escaped, repaired as a request body
    is (:func:`_encoded`): a number that is not finite as ``null`` (as JavaScript's
    ``JSON.stringify`` writes it), never the ``NaN`` no JSON parser reads, and a lone
    surrogate as U+FFFD."""
    try:
        text = _dumps(value)
        text.encode("utf-8")
    except ValueError:  # NaN or an infinity (jiter reads them in a model's arguments), or
        # a lone surrogate
        return _dumps(_encodable(value))
    return text


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _encodable(value: Any) -> Any:
    """``value`` with every string's lone surrogates as U+FFFD (a surrogate pair, as the
    character it stands for) and every float that is not finite as None, which is what
    JavaScript's ``JSON.stringify`` makes of NaN and the infinities."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(item) for item in value]
    return value


_NOT_IN_A_HEADER = re.compile(r"[^\t\x20-\x7e]")
"""A character an HTTP header cannot carry as httpx2 sends it (ASCII): any other, and the
control characters (CR and LF would end the header), but for tab."""


def _check_headers(headers: Mapping[str, str]) -> None:
    """:class:`ProviderFailure` for a header the request could not carry: a key or a
    header value (the application's) with a character that is not ASCII, or a CR or LF.

    Checked before anything is sent, and told without the value, which may be the key:
    the HTTP library's own error quotes it, escaped, where :func:`redact` cannot find it.
    """
    for name, value in headers.items():
        if not isinstance(name, str) or _NOT_IN_A_HEADER.search(name):
            raise ProviderFailure(
                f"the request was not sent: the header name {name!r:.100} holds a character "
                "an HTTP header cannot carry (one that is not ASCII, or a control character)",
                kind="refused",
            )
        if not isinstance(value, str) or _NOT_IN_A_HEADER.search(value):
            raise ProviderFailure(
                f"the request was not sent: the value of its header {name!r} (the API key, "
                "if the header carries it) holds a character an HTTP header cannot carry "
                "(one that is not ASCII, or a control character)",
                kind="refused",
            )


def _backoff(attempt: int) -> float:
    """1 s, 2 s, 4 s, ... with up to 25% jitter."""
    delay: float = 2.0**attempt
    return delay * (1 + random.random() / 4)


def _told_more(failure: ProviderFailure, note: str) -> ProviderFailure:
    """``failure`` with ``note`` after its text, and its kind, status and retry delay."""
    return ProviderFailure(
        f"{failure} {note}",
        retry_after=failure.retry_after,
        kind=failure.kind,
        status=failure.status,
    )


def _not_a_client(client: object) -> str:
    """Why ``client`` cannot be a provider's HTTP client: it is not an ``httpx2.AsyncClient``.

    httpx's own client (0.28, 0.29, imported as ``httpx``) is told by its name and
    version, for it looks like the right one: trio_agent, as the official SDKs, speaks
    httpx2, its maintained successor, whose classes are not httpx's.
    """
    kind = type(client)
    root = kind.__module__.partition(".")[0]
    if root == "httpx":
        module = sys.modules.get("httpx")
        version = None if module is httpx2 else getattr(module, "__version__", None)
        told = f" (httpx {version})" if isinstance(version, str) else ""
        return (
            f"http_client must be an httpx2.AsyncClient, not httpx.{kind.__qualname__}{told}: "
            "trio_agent speaks httpx2, as the official SDKs do "
            "(pip install httpx2; import httpx2; httpx2.AsyncClient(...))"
        )
    named = kind.__qualname__ if root == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"http_client must be an httpx2.AsyncClient, not {named}: {_shown(client)}"


def _shown(value: object) -> str:
    """``repr(value)``, cut to 100 characters (its type's name if it has none to give)."""
    try:
        return reprlib.repr(value)[:100]
    except Exception:
        return f"<{type(value).__name__}>"


class Transport:
    """Sends a provider's requests; one pooled client per run (or the application's own)."""

    def __init__(self, name: str, client: httpx2.AsyncClient | None = None) -> None:
        """``client``: an application's own ``httpx2.AsyncClient``, used as it is (None:
        the current pool's). Anything else is a ``TypeError`` naming what was given."""
        if client is not None and not isinstance(client, httpx2.AsyncClient):
            raise TypeError(_not_a_client(client))
        self.name = name
        self._own_client = client

    def _client(self) -> httpx2.AsyncClient:
        """The client to send with: the application's own, else the current pool's."""
        if self._own_client is not None:
            return self._own_client
        return current_pool().client

    async def open(
        self,
        request: HttpRequest,
        options: StreamOptions,
        secrets: tuple[str, ...] = (),
        name: str | None = None,
    ) -> _Opened:
        """Send ``request`` (retrying what may be retried) and return its event stream.

        Use the result with ``async with``: it closes the response (and a
        client made for this request alone). ``secrets`` are removed from any
        error text (:func:`redact`), before it is cut; ``name`` is the
        server's name in it (the model's provider label; by default this
        transport's). Raises :class:`ProviderFailure`.
        """
        secrets = tuple(secret for secret in secrets if secret)
        _check_headers(request.headers)
        content = _encoded(request.body)
        attempt = 0
        while True:
            try:
                return await self._open_once(request, content, options, name or self.name, secrets)
            except ProviderFailure as failure:
                failure.args = (redact(str(failure), secrets),)
                if not failure.retryable or attempt >= options.max_retries:
                    raise
                delay = (
                    failure.retry_after if failure.retry_after is not None else _backoff(attempt)
                )
                if math.isinf(delay):  # a server's "inf" or "1e400": whatever the limit
                    raise _told_more(
                        failure, "(the server asks to wait forever before a retry)"
                    ) from None
                if not delay <= options.max_retry_delay:  # (a NaN limit allows no wait)
                    raise _told_more(
                        failure,
                        f"(the server asks to retry in {delay:g} s, more than "
                        f"max_retry_delay={options.max_retry_delay:g})",
                    ) from None
                await trio.sleep(delay)
                attempt += 1

    async def _open_once(
        self,
        request: HttpRequest,
        content: bytes,
        options: StreamOptions,
        name: str,
        secrets: tuple[str, ...],
    ) -> _Opened:
        timeouts = options.timeouts
        client = self._client()
        # No limit on the wait for a free connection of a bounded pool: it lasts as long as
        # the streams ahead of this request (minutes, for a model), and the caller's cancel
        # scope (an abort, a deadline) ends it.
        built = client.build_request(
            "POST",
            request.url,
            headers={"accept": "text/event-stream", **request.headers},
            content=content,
            timeout=httpx2.Timeout(timeouts.connect, read=None, write=timeouts.connect, pool=None),
        )
        if "content-type" not in built.headers:
            built.headers["Content-Type"] = "application/json"
        built.stream = _Body(content)
        first_byte = timeouts.first_byte if timeouts.first_byte is not None else float("inf")
        # The first-byte limit runs from the moment the request is sent (httpcore2's trace
        # says when), not while it waits for a connection. An application's own client,
        # whose transport may not trace, is also held to it from the start of the call.
        deadline = trio.CancelScope(
            deadline=trio.current_time() + first_byte if self._own_client is not None else math.inf
        )

        async def trace(event: str, info: Any) -> None:
            if event.endswith("send_request_headers.started"):
                deadline.deadline = trio.current_time() + first_byte

        built.extensions["trace"] = trace
        response: httpx2.Response | None = None
        try:
            with deadline:
                response = await client.send(built, stream=True)
        except httpx2.TimeoutException as exc:
            raise ProviderFailure(
                f"could not connect to {name} ({_describe(exc, secrets)})",
                retryable=True,
                kind="network",
            ) from None
        except httpx2.HTTPError as exc:
            raise ProviderFailure(
                f"could not reach {name}: {_describe(exc, secrets)}",
                retryable=True,
                kind="network",
            ) from None
        except Exception as exc:  # the HTTP stack's own, reading the response head
            raise _malformed(name, exc, secrets) from None
        if response is None:  # the deadline cancelled the send
            raise ProviderFailure(
                f"no response from {name} within {first_byte:g} s (first-byte timeout)",
                retryable=True,
                kind="network",
            )
        opened = _Opened(name, response, timeouts.idle, secrets)
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


class _Opened:
    """An accepted response: its events, and what closing it takes."""

    def __init__(
        self,
        name: str,
        response: httpx2.Response,
        idle: float | None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.response = response
        self._secrets = secrets
        self.events = SseStream(name, response, idle, secrets)

    async def check(self) -> ProviderFailure | None:
        """What is wrong with the response (a non-2xx status, not an event stream), if anything."""
        response = self.response
        status = response.status_code
        if not 200 <= status < 300:
            body = await self._error_body()
            if body is None:
                message = "(the error body could not be read)"
            else:
                message = error_text(body, self._secrets)
            retry_after = _retry_after(response.headers)
            if retry_after is None and body is not None:
                retry_after = _retry_delay(body)
            text = f"HTTP {status} from {self.name}: {message}"
            codes = () if body is None else _error_codes(body)
            return ProviderFailure(
                text,
                retryable=status in _RETRY_STATUSES or 500 <= status < 600,
                retry_after=retry_after,
                kind=error_kind(text, status=status, codes=codes, provider=self.name),
                status=status,
            )
        kind = response.headers.get("content-type", "").partition(";")[0].strip()
        if kind != "text/event-stream":
            body = await self._error_body()
            text = "(the body could not be read)"
            if body is not None:
                text = error_text(body, self._secrets)
            shown = _clip(kind, self._secrets, 100) or "no content type"
            codes = () if body is None else _error_codes(body)
            return ProviderFailure(
                f"{self.name} answered with {shown}, not an event stream: {text}",
                # An error a proxy sends with a 200 still says what it is (an input too
                # long, a rate limit); otherwise the reply is not what was asked for.
                kind=error_kind(text, codes=codes, provider=self.name, default="malformed"),
            )
        return None

    async def _error_body(self) -> str | None:
        """The start of the body of a response that is not a stream (64 KiB of it, which
        holds any error message), or None if that cannot be read: the connection
        failed, a read waited longer than the idle limit, or it all took 10 s."""
        with trio.move_on_after(_BODY_TIME):  # noqa: ASYNC912  (reads wait for the network)
            try:
                return await self.events.read_text(_BODY_LIMIT)
            except ProviderFailure:
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
