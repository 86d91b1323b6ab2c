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

import httpx2  # noqa: ASYNC127  # the design's HTTP client
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
    ``pip install 'trio_agent[http2]'``); ``verify``, the TLS context that
    checks servers (default: the system's trust store, as httpx2's). Made by
    :func:`open_pool`, or for a Trio run the first time it is needed.
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
        self.client = httpx2.AsyncClient(
            limits=self.limits, http2=http2, verify=verify or tls_context(), timeout=None
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
    through it, which the block must outlive. See :class:`Pool` for the arguments.

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
