"""The cheap cancellation probe of the hot paths agrees with Trio's own answer."""

from __future__ import annotations

import math
import signal

import pytest
import trio
import trio.testing

from trio_agent import _cancel
from trio_agent._cancel import cancel_probe


async def test_the_installed_trio_gets_the_fast_probe() -> None:
    assert cancel_probe() is not _cancel._public_probe


@pytest.mark.parametrize("fast", [True, False])
async def test_a_probe_tells_what_current_effective_deadline_tells(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not fast:  # a Trio without the internal cancel status: the public way
        monkeypatch.setattr(_cancel, "getattr", lambda *args: None, raising=False)
    probe = cancel_probe()
    assert (probe is _cancel._public_probe) is not fast
    assert not probe()
    with trio.CancelScope() as outer:
        outer.cancel()
        assert probe()  # cancelled, not yet delivered
        with trio.CancelScope(shield=True):
            assert not probe()  # a shield hides it
            await trio.lowlevel.checkpoint()
        assert probe()
        await trio.lowlevel.checkpoint()
    assert not probe()
    with trio.move_on_after(0):
        assert probe()  # a deadline that passed
        await trio.lowlevel.checkpoint()


async def test_a_probe_reads_its_own_task() -> None:
    probe = cancel_probe()
    seen: list[bool] = []

    async def other() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            seen.append(probe())  # the probe's task is not cancelled
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        nursery.start_soon(trio.lowlevel.checkpoint)
    assert seen == [False]


async def test_a_children_probe_tells_each_child_of_a_nursery_what_trio_tells_it() -> None:
    seen: list[tuple[bool, bool]] = []

    async def child(probe: _cancel.CancelProbe) -> None:
        seen.append((probe(), trio.current_effective_deadline() == -math.inf))
        await trio.sleep_forever()

    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:
            probe = _cancel.children_probe(nursery)
            assert probe is not None
            nursery.start_soon(child, probe)
            await trio.testing.wait_all_tasks_blocked()
            outer.cancel()  # an enclosing scope's cancellation reaches the children
            nursery.start_soon(child, probe)
    async with trio.open_nursery() as nursery:
        probe = _cancel.children_probe(nursery)
        assert probe is not None
        nursery.cancel_scope.cancel()  # and so does the nursery's own
        nursery.start_soon(child, probe)
    async with trio.open_nursery() as nursery:
        with trio.CancelScope() as inner:
            inner.cancel()  # the task starting them is cancelled; the children are not
            probe = _cancel.children_probe(nursery)
            assert probe is not None
            nursery.start_soon(child, probe)
            await trio.lowlevel.checkpoint()  # the starter's cancellation reaches it
        assert inner.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()  # the child has looked
        nursery.cancel_scope.cancel()
    assert seen == [(False, False), (True, True), (True, True), (False, False)]


async def test_without_trio_s_cancel_status_there_is_no_children_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_cancel, "getattr", lambda *args: None, raising=False)
    async with trio.open_nursery() as nursery:
        assert _cancel.children_probe(nursery) is None


def test_in_the_main_task_a_probe_also_tells_of_a_pending_keyboard_interrupt() -> None:
    told: list[bool] = []

    async def main() -> None:
        probe = cancel_probe()
        told.append(probe())
        signal.raise_signal(signal.SIGINT)  # pending until the next checkpoint
        told.append(probe())
        await trio.lowlevel.checkpoint_if_cancelled()

    with pytest.raises(KeyboardInterrupt):
        trio.run(main, restrict_keyboard_interrupt_to_checkpoints=True)
    assert told == [False, True]
