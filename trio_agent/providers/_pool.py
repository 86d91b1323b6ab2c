"""Connection pools: the providers' HTTP clients, shared across runs and agents.

By default every provider sends through one pool per Trio run — one
``httpx2.AsyncClient``, made the first time a request needs it in a
``trio.run`` and closed when that ``trio.run`` ends (a Trio system task owns
it): a chat of a hundred prompts keeps one keep-alive connection per host,
and a server running a thousand agents shares one bounded pool. An aborted
or cancelled run closes its own response, not the pool.

A pool is only ever used by the Trio run it belongs to: its connections and
the locks that share them are that run's. A ``trio.run`` started in a worker
thread (a sync tool that runs an agent of its own does this) inherits a copy
of its starter's context, :func:`open_pool` block included; it does not use
that block's pool, but a pool of its own run.

:func:`open_pool` scopes a pool to a block instead, with its own limits::

    async with providers.open_pool(max_connections=10, http2=True):
        ...  # every run in here (and in tasks started here) uses this pool

and a provider made with its own client (``openai_chat.provider(client)``)
uses that client, whose life the application owns.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.util
import ssl
from collections.abc import AsyncIterator

import httpx2  # noqa: ASYNC127  # the HTTP client the providers send with
import trio

from .. import _public

__all__ = ["Pool", "current_pool", "open_pool", "tls_context"]

_CLOSE_GRACE = 2.0  # seconds closing a pool's connections may take


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx2's default TLS context (the system's trust store), made once per process.

    httpx2 makes one for every new client, reading the CA certificates from disk on the
    event loop (tens of milliseconds). It is made here, not in a worker thread,
    because waiting for a thread lets a test's autojumping MockClock jump over a
    loopback request.
    """
    return httpx2.create_ssl_context()


class Pool:
    """One pooled HTTP client for the providers, with its connection limits.

    ``max_connections`` bounds the connections open at once (a request waits
    for one to be free), ``max_keepalive`` those kept idle for reuse (None: no
    bound, for either; the defaults, 1,000 and 100, the openai SDK's, let a
    thousand agents stream at once, one connection each, and reuse them);
    ``http2`` negotiates HTTP/2 with servers that speak it, so that concurrent
    streams to one host share a connection (it needs the ``h2`` package:
    ``pip install 'trio_agent[http2]'``, else ``ImportError``); ``verify``, the
    ``ssl.SSLContext`` that checks servers (default: the system's trust store, as
    httpx2's, made once per process). A limit below 1 is a ``ValueError``. Made by
    :func:`open_pool`, or for a Trio run the first time it is needed; you rarely make one
    yourself.

    ``client`` is the ``httpx2.AsyncClient`` requests are sent with, ``limits`` its
    ``httpx2.Limits``, and ``http2`` whether it negotiates HTTP/2.
    """

    __slots__ = ("client", "http2", "limits")

    def __init__(
        self,
        *,
        max_connections: int | None = 1000,
        max_keepalive: int | None = 100,
        http2: bool = False,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        for name, value in (("max_connections", max_connections), ("max_keepalive", max_keepalive)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ValueError(f"{name} must be a positive int or None, not {value!r}")
        if not isinstance(http2, bool):
            raise TypeError(f"http2 must be a bool, not {http2!r}")
        if http2 and importlib.util.find_spec("h2") is None:
            raise ImportError("http2=True needs the h2 package: pip install 'trio_agent[http2]'")
        self.limits = httpx2.Limits(
            max_connections=max_connections, max_keepalive_connections=max_keepalive
        )
        self.http2 = http2
        verify = verify or tls_context()
        transport: httpx2.AsyncBaseTransport | None = None
        if max_connections is not None and not http2:
            transport = _Queued(
                httpx2.AsyncHTTPTransport(limits=self.limits, verify=verify), max_connections
            )
        self.client = httpx2.AsyncClient(
            limits=self.limits, http2=http2, verify=verify, transport=transport, timeout=None
        )

    def __repr__(self) -> str:
        limits = self.limits
        return (
            f"<Pool max_connections={limits.max_connections} "
            f"max_keepalive={limits.max_keepalive_connections} http2={self.http2}>"
        )

    async def aclose(self) -> None:
        """Close every connection of the pool (shielded, within a grace period)."""
        with trio.move_on_after(_CLOSE_GRACE, shield=True):
            await self.client.aclose()


class _Queued(httpx2.AsyncBaseTransport):
    """An HTTP/1.1 transport whose requests beyond ``limit`` open responses wait in a
    queue of Trio's, in the order they came, until a response is closed.

    Over HTTP/1.1 a response holds its connection until it is closed, so the pool's
    limit on connections is one on open responses. httpx2's pool would hold the
    waiting requests itself, but its every request and release scans all of them: with
    ten thousand agents on a thousand connections, that scan would be most of the CPU.
    Here a request waits at a constant cost, and enters the HTTP stack when it can be
    served at once, or when a connection is about to be released to it: a response
    closed while requests wait lets the next one in first, so that the connection it
    frees goes to that request rather than being closed as an idle one beyond
    ``max_keepalive`` (and another opened). The wait is a checkpoint: the caller's
    cancel scope ends it. (A request through a proxy, from the proxy variables of the
    environment, goes through httpx2's own transport and waits in its pool.)
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._open = trio.CapacityLimiter(limit)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        turn = _Turn(self._open)
        try:
            # No schedule point when there is room: the request enters the HTTP stack
            # as it would without this queue (the stack checkpoints as it sends).
            self._open.acquire_on_behalf_of_nowait(turn)
        except trio.WouldBlock:
            await self._open.acquire_on_behalf_of(turn)
        # No checkpoint from here until httpx2's pool has queued the request: a request
        # let in by a closing response must be queued there before the connection is
        # released (see _Turn.aclose).
        try:
            response = await self._inner.handle_async_request(request)
        except BaseException:
            self._open.release_on_behalf_of(turn)
            raise
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        turn.stream = response.stream
        response.stream = turn
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Turn(httpx2.AsyncByteStream):
    """An open response's place in its transport's limit: the response's body, whose
    closing frees the place."""

    def __init__(self, limiter: trio.CapacityLimiter) -> None:
        self._limiter: trio.CapacityLimiter | None = limiter
        self.stream: httpx2.AsyncByteStream | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        assert self.stream is not None
        return self.stream.__aiter__()  # the body's own iterator: nothing added per read

    async def aclose(self) -> None:
        limiter = self._limiter
        if limiter is None:  # closed before
            return
        self._limiter = None
        assert self.stream is not None
        if not limiter.statistics().tasks_waiting:
            try:
                await self.stream.aclose()
            finally:
                limiter.release_on_behalf_of(self)
            return
        # Requests wait: the next one takes this place now and runs (two schedule
        # points: Trio runs the tasks woken together in any order) until httpx2's pool
        # has queued it, and only then is the connection released, to that request.
        limiter.release_on_behalf_of(self)
        await trio.lowlevel.cancel_shielded_checkpoint()
        await trio.lowlevel.cancel_shielded_checkpoint()
        await self.stream.aclose()


_scoped: contextvars.ContextVar[tuple[Pool, trio.lowlevel.Task | None] | None] = (
    contextvars.ContextVar("trio_agent_pool", default=None)
)
"""The innermost :func:`open_pool` block's pool, and the root task of the Trio run it
belongs to (a worker thread's ``trio.run`` inherits the variable, not the run)."""
_of_the_run: trio.lowlevel.RunVar[Pool] = trio.lowlevel.RunVar("trio_agent_run_pool")


def current_pool() -> Pool:
    """The pool a request made now goes through: the innermost :func:`open_pool` block's
    of this Trio run, else the Trio run's (made now if need be). Must be called in a
    Trio run."""
    scoped = _scoped.get()
    if scoped is not None and scoped[1] is trio.lowlevel.current_root_task():
        return scoped[0]
    try:
        return _of_the_run.get()
    except LookupError:
        pass
    pool = Pool()
    _of_the_run.set(pool)
    trio.lowlevel.spawn_system_task(_keep, pool, name="trio_agent: the providers' pool")
    return pool


async def _keep(pool: Pool) -> None:
    """Own the Trio run's pool: close it when the run ends (system tasks are cancelled
    when the main task has returned)."""
    try:
        await trio.sleep_forever()
    finally:
        with contextlib.suppress(Exception):  # a system task must not raise
            await pool.aclose()


@contextlib.asynccontextmanager
async def open_pool(
    *,
    max_connections: int | None = 1000,
    max_keepalive: int | None = 100,
    http2: bool = False,
    verify: ssl.SSLContext | None = None,
) -> AsyncIterator[Pool]:
    """A pool for the requests made in this block (and in tasks started in it), closed
    when the block exits: its connections, not the responses of runs still streaming
    through it, which the block must outlive. See :class:`Pool` for the arguments; the
    block gives the pool.

    Without one, every provider sends through one pool per Trio run: made the first time a
    request needs it, its keep-alive connections serve every run and agent of that
    ``trio.run``, and it is closed when the ``trio.run`` ends (a Trio system task owns it).
    A provider given its own client (``openai_chat.OpenAIChat(client)``) uses that client
    instead.

    Only this Trio run uses it: a ``trio.run`` in a worker thread started here uses
    a pool of its own run.
    """
    pool = Pool(
        max_connections=max_connections, max_keepalive=max_keepalive, http2=http2, verify=verify
    )
    token = _scoped.set((pool, trio.lowlevel.current_root_task()))
    try:
        yield pool
    finally:
        _scoped.reset(token)
        await pool.aclose()


# Exported by trio_agent.providers (imported there on first use): named as it names them.
_public.fixup_module_metadata(
    "trio_agent.providers", {"__all__": ["Pool", "open_pool"], "Pool": Pool, "open_pool": open_pool}
)
