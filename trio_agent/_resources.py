"""What a run keeps open for its whole length, and closes when it ends.

A provider opens an HTTP client the first time a run asks it for a reply and
keeps using it for every later turn of that run (one pooled connection
instead of a handshake per turn); the run closes it when it ends, however it
ends, so no socket outlives the run (invariants.md 7). The loop knows nothing
of HTTP: it only gives each run a :class:`RunResources` in a context variable
and closes it at the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import trio

__all__ = ["RunResources", "current_resources"]

_CLOSE_GRACE = 2.0  # seconds a resource may take to close after the run


class RunResources:
    """Objects a run's stream functions share, each closed once when the run ends."""

    __slots__ = ("_closers", "_items")

    def __init__(self) -> None:
        self._items: dict[object, Any] = {}
        self._closers: list[Callable[[], Awaitable[object]]] = []

    def get(self, key: object) -> Any:
        return self._items.get(key)

    def put(self, key: object, value: Any, aclose: Callable[[], Awaitable[object]]) -> None:
        self._items[key] = value
        self._closers.append(aclose)

    async def aclose(self) -> None:
        """Close everything, last opened first; shielded, with a grace period each.

        Runs when the run ends, cancelled or not: a cancelled run must still
        close its sockets.
        """
        closers, self._closers = self._closers, []
        self._items.clear()
        for aclose in reversed(closers):
            with trio.move_on_after(_CLOSE_GRACE, shield=True):
                await aclose()


_current: ContextVar[RunResources | None] = ContextVar("trio_agent_run_resources", default=None)


def current_resources() -> RunResources | None:
    """The resources of the run this code is part of, or None outside a run."""
    return _current.get()


def enter(resources: RunResources) -> object:
    return _current.set(resources)


def leave(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]  # a token from enter()
