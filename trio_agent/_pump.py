"""The update pump: the progress of a tool that runs in the loop task.

A call that runs alone runs in the loop task itself (see :mod:`._execution`),
which is then busy running the tool: its ``on_update`` reports go through a
memory channel to a small task of the run, which emits them; the loop waits
for the pump to drain before it emits the call's end, so updates always
precede the end and listeners are never called concurrently.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from ._events import AgentEvent, ToolExecutionUpdate

__all__ = ["UpdatePump"]


class UpdatePump:
    """Emits the updates of a tool that runs in the loop task, from a task of its own.

    Its channel and its task are made on the first update of a run (most
    calls report none); the task lives in ``nursery`` (the run's) until
    :meth:`close`. It delivers each update with ``emit``, which may be called
    from any task of the run.
    """

    __slots__ = ("_backlog", "_drained", "_emit", "_nursery", "_receive", "_send")

    def __init__(
        self, emit: Callable[[AgentEvent], Awaitable[None]], nursery: trio.Nursery
    ) -> None:
        self._emit = emit
        self._nursery = nursery
        self._send: trio.MemorySendChannel[ToolExecutionUpdate] | None = None
        self._receive: trio.MemoryReceiveChannel[ToolExecutionUpdate] | None = None
        self._backlog = 0
        self._drained: trio.Event | None = None

    def push(self, event: ToolExecutionUpdate) -> None:
        send = self._send
        if send is None:
            send, self._receive = trio.open_memory_channel[ToolExecutionUpdate](math.inf)
            self._send = send
            self._nursery.start_soon(self._pump, self._receive)
        self._backlog += 1
        send.send_nowait(event)

    async def _pump(self, receive: trio.MemoryReceiveChannel[ToolExecutionUpdate]) -> None:
        # Closed without a checkpoint: ``aclose()`` in a cancelled run would
        # raise ``Cancelled`` over a listener's exception and lose it.
        try:
            async for event in receive:
                await self._emit(event)
                self._backlog -= 1
                if self._backlog == 0 and self._drained is not None:
                    self._drained.set()
        finally:
            receive.close()

    @property
    def backlog(self) -> int:
        """How many pushed updates are not emitted yet."""
        return self._backlog

    async def wait_drained(self) -> None:
        """Wait until every pushed update has been emitted."""
        if self._backlog:
            self._drained = trio.Event()
            await self._drained.wait()
            self._drained = None

    def close(self) -> None:
        if self._send is not None:  # the pump's task closes the receiving end
            self._send.close()
