"""The loop's own cost, beside the cost of bare Trio, measured in the same run.

    python -m benchmarks            # a table
    python -m benchmarks --json     # one JSON object keyed by figure id
    python benchmarks/run.py B1     # only some figures

Every figure runs on the scripted (faux) model with no network, several
times; the table gives the median and the spread (min-max). Beside each is
its *floor*: what the same number of irreducible Trio operations costs on
this machine in this run — bare checkpoints, awaited no-op callbacks, task
spawns, memory-channel sends — and the ratio of the two. Absolute times move
with the machine; the ratios do not move much. The samples of a figure and of
its floor are taken in turn (ours, the floor, ours, ...), so that a burst of
noise on the machine falls on both alike.

Figures (performance.md):

- B1: loop overhead per turn — one run of 2,000 turns, each one no-op tool
  call, then a text answer; the low-level loop and an awaited no-op listener.
  Floor: one checkpoint per turn (the model's wait) plus one awaited no-op
  call per event the listener receives and per stream event the loop
  handles.
- B1a: the same through ``Agent`` with one awaited no-op listener; the same
  floor.
- B2: parallel fan-out — one turn of 1,000 parallel no-op tool calls, the
  whole run. Floor: a nursery spawning 1,000 tasks that each send once over
  a memory channel the parent receives from. Also measured: the floor with
  what the contract makes, checks and awaits per call (three streamed
  tool-call events and their ``message_update``, the tool call and its
  validated arguments, the awaited tool, the start and end events, the
  result message and its two events, an abort check before each event), in
  bare Python and nothing else.
- B3: streaming — 100,000 one-character text deltas through the loop to one
  awaited listener, in events (deltas) per second. Floor: two awaited no-op
  calls per delta (provider to loop, loop to listener). Also measured: the
  same two awaits with what the contract makes per delta and nothing else
  (a delta event holding a partial snapshot, its ``message_update``, an
  abort check on each side), in bare Python: the most CPython allows.
- B4: bursts — the same 100,000 deltas into a subscriber that reads only
  after the run: ``Agent.events()`` with a buffer that holds every event of
  the run, drained once ``prompt()`` has returned; deltas per second,
  drain included. Floor: as many memory-channel ``send_nowait`` + ``receive``
  pairs. Linearity: the per-event cost at 100,000 deltas divided by the
  per-event cost at 10,000 (1 is linear), beside the same ratio for the floor.
- B5: flat growth — B1's run, each turn timed by the listener (from one
  ``turn_end`` to the next; turn 1 from ``agent_start``); the mean cost of
  turns 1,900-2,000 divided by that of turns 1-100. Floor: 1.0 (no growth).
- B6: abort latency — one turn of 1,000 parallel tool calls, each sleeping
  forever; once all are in their tool and every task is blocked,
  ``Agent.abort()`` (what users call), and the wall time until ``prompt()``
  has returned. Also run once on ``trio.testing.MockClock(autojump_threshold=0)``
  to report the virtual time the abort took (0: nothing in it waits on the
  clock). Floor: cancelling a nursery of 1,000 tasks blocked in
  ``trio.sleep_forever()``, timed the same way.
- B7: concurrent runs — 10,000 agents (``Agent``) in one ``trio.run``, each
  ``prompt()`` in a task of one nursery, each run in a tool that sleeps
  forever. Memory per run: memory traced by ``tracemalloc`` (started before
  the agents are made, so an agent's own objects count) with every run in
  its tool, divided by 10,000, in KiB. Abort all: ``abort()`` on every agent
  (tracing stopped), wall time until the nursery has exited. Floor: 10,000
  bare tasks in ``trio.sleep_forever()`` (KiB per task; one cancel of their
  nursery, until it has exited).
- B8: provider stream — a 20 MB OpenAI chat-completions SSE body served on
  loopback, read, parsed and normalized by ``openai_chat`` into stream events
  (to an awaited no-op emit), in MB per second. Floor: plain ``httpx-sse``
  iteration over the same body from the same server, through the same
  ``httpx`` client, without parsing the events' JSON (the goal is at least
  half its rate: a ratio of 2 or less).

Only B8 touches the network (loopback, the server in the same process). A
figure may carry sub-figures (``also``: B4's linearity, B7's abort time) and
a ``detail`` line; both are in the table and in ``--json``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trio_agent import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    UserMessage,
    run_agent_loop,
)
from trio_agent._execution import arrivals
from trio_agent._frozen import maker
from trio_agent._messages import now_ms
from trio_agent.providers import faux

Figure = dict[str, Any]
_ROOT = str(Path(__file__).resolve().parent.parent) + "/"  # shortens file names in B7's sites


async def _noop_listener(event: AgentEvent) -> None:
    return None


async def _noop_execute(
    tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate
) -> ToolResult:
    return _RESULT


_RESULT = ToolResult.text("ok")
_NOOP_TOOL = AgentTool(
    name="noop",
    description="does nothing",
    parameters={"type": "object", "properties": {}},
    execute=_noop_execute,
)


def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    """Seconds one ``trio.run`` of ``fn`` spends inside ``fn`` (startup excluded)."""
    elapsed = 0.0

    async def main() -> None:
        nonlocal elapsed
        gc.collect()
        start = time.perf_counter()
        await fn()
        elapsed = time.perf_counter() - start

    trio.run(main)
    return elapsed


def _stats(samples: list[float]) -> tuple[float, float, float]:
    return statistics.median(samples), min(samples), max(samples)


def _alternating(repeats: int, *measures: Callable[[], float]) -> list[list[float]]:
    """``repeats`` samples of each measure, taken in turn (ours, its floor, ...): a
    burst of noise on the machine falls on all of them alike, not on one's samples."""
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(repeats):
        for taken, measure in zip(samples, measures, strict=True):
            taken.append(measure())
    return samples


# --- floors -------------------------------------------------------------------------------------


async def _awaited_noops(count: int) -> None:
    callback = _noop_listener
    event = None
    for _ in range(count):
        await callback(event)  # type: ignore[arg-type]


async def _checkpoints(count: int) -> None:
    for _ in range(count):
        await trio.lowlevel.checkpoint()


def _never_cancelled() -> bool:
    """The cheapest abort check: a probe that says no."""
    return False


async def _bare_stream_event(event: Any) -> None:
    """The loop's side of a stream event, in bare Python: its ``message_update``, an
    abort check, the awaited listener."""
    update = MessageUpdate(event)
    if _never_cancelled():
        await trio.lowlevel.checkpoint_if_cancelled()
    await _noop_listener(update)


async def _bare_deltas(count: int) -> None:
    """What the contract makes and calls per delta, in bare Python and nothing else:
    a delta event with a partial snapshot, its ``message_update``, an abort check
    on each side, an await from provider to loop and from loop to listener."""
    make_delta = maker(TextDelta)
    for _ in range(count):
        if _never_cancelled():
            await trio.lowlevel.checkpoint_if_cancelled()
        snapshot = [None, 0, None, 0, None, None, None, None, None, None]
        await _bare_stream_event(make_delta(0, "x", snapshot))


async def _bare_calls(count: int) -> None:
    """B2 in bare Python with nothing else: what the contract makes, checks and
    awaits per parallel call, on the floor's spawns and sends — its three stream
    events (each with a partial snapshot and its ``message_update``, awaited from
    provider to loop and from loop to listener, an abort check on each side), the
    tool call, its arguments validated, a task running the awaited tool and
    sending its result (received as they come, many per wake-up),
    ``tool_execution_start`` and ``_end``, the result message (with its
    timestamp) and its ``message_start`` and ``message_end`` (an abort check
    before each event).
    No state kept, no ordering, no hooks."""
    toolcall_start, toolcall_delta = maker(ToolCallStart), maker(ToolCallDelta)
    toolcall_end, tool_call = maker(ToolCallEnd), maker(ToolCall)
    execution_start, execution_end = maker(ToolExecutionStart), maker(ToolExecutionEnd)
    result_message = maker(ToolResultMessage)
    listener = _noop_listener
    validate = _NOOP_TOOL.validate_arguments
    checkpoint_if_cancelled = trio.lowlevel.checkpoint_if_cancelled
    cancelled = _never_cancelled
    emit = _bare_stream_event

    def snapshot(done: int, chunks: int) -> list[Any]:  # as the builder's partial holds it
        return [None, done, None, chunks, None, None, None, None, None, None]

    calls = []
    for i in range(count):
        if cancelled():
            await checkpoint_if_cancelled()
        await emit(toolcall_start(i, snapshot(i, 0)))
        if cancelled():
            await checkpoint_if_cancelled()
        await emit(toolcall_delta(i, "{}", snapshot(i, 1)))
        call = tool_call(f"t{i}", "noop", {}, None)
        calls.append(call)
        if cancelled():
            await checkpoint_if_cancelled()
        await emit(toolcall_end(i, call, snapshot(i + 1, 0)))
    send, receive = trio.open_memory_channel[tuple[ToolCall, ToolResult]](math.inf)

    async def child(call: ToolCall, args: dict[str, Any]) -> None:
        send.send_nowait((call, await _noop_execute(call.id, args, _no_update)))

    finished: list[tuple[ToolCall, ToolResult]] = []
    async with trio.open_nursery() as nursery:
        for call in calls:
            if cancelled():
                await checkpoint_if_cancelled()
            await listener(execution_start(call.id, call.name, call.arguments))
            nursery.start_soon(child, call, validate(call.arguments))
        while len(finished) < count:
            arrived = await arrivals(receive)
            for call, result in arrived:
                if cancelled():
                    await checkpoint_if_cancelled()
                await listener(execution_end(call.id, call.name, result, False))
            finished += arrived
    for call, result in finished:
        message = result_message(
            call.id, call.name, result.content, result.details, False, result.usage, now_ms()
        )
        if cancelled():
            await checkpoint_if_cancelled()
        await listener(MessageStart(message))
        if cancelled():
            await checkpoint_if_cancelled()
        await listener(MessageEnd(message))


def _no_update(partial: ToolResult) -> None:
    return None


async def _spawn_and_send(count: int) -> None:
    send, receive = trio.open_memory_channel[int](math.inf)

    async def child(i: int) -> None:
        send.send_nowait(i)

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(child, i)
        for _ in range(count):
            await receive.receive()


async def _channel_pairs(count: int) -> None:
    send, receive = trio.open_memory_channel[None](count)
    for _ in range(count):
        send.send_nowait(None)
    for _ in range(count):
        await receive.receive()


async def _settled(entered: trio.Event) -> None:
    """Wait until ``entered`` is set, then until every other task is blocked."""
    await entered.wait()
    await trio.testing.wait_all_tasks_blocked()


def _sleepers(expected: int) -> tuple[Callable[[], Awaitable[None]], trio.Event]:
    """An async function that sleeps forever, and an event set once ``expected``
    calls are in it (made inside ``trio.run``)."""
    entered = 0
    all_in = trio.Event()

    async def sleep() -> None:
        nonlocal entered
        entered += 1
        if entered == expected:
            all_in.set()
        await trio.sleep_forever()

    return sleep, all_in


def _sleeping_tool(expected: int) -> tuple[AgentTool, trio.Event]:
    """A tool that sleeps forever, and the event set once ``expected`` calls are in it."""
    sleep, all_in = _sleepers(expected)

    async def execute(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await sleep()
        raise AssertionError("unreachable: the tool sleeps until cancelled")

    tool = AgentTool(
        name="sleep",
        description="sleeps until cancelled",
        parameters={"type": "object", "properties": {}},
        execute=execute,
    )
    return tool, all_in


async def _cancel_sleepers(count: int, clock: Callable[[], float]) -> float:
    """Time from cancelling a nursery of ``count`` tasks in ``sleep_forever`` until it exits."""
    sleep, all_in = _sleepers(count)
    scope = trio.CancelScope()
    ended = math.nan

    async def hold() -> None:
        nonlocal ended
        with scope:
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(sleep)
        ended = clock()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        await _settled(all_in)
        start = clock()
        scope.cancel()
    return ended - start


def _run(fn: Callable[[], Awaitable[float]], clock: trio.abc.Clock | None = None) -> float:
    """``trio.run(fn)``, after a collection; what ``fn`` returns."""
    result = math.nan

    async def main() -> None:
        nonlocal result
        result = await fn()

    gc.collect()
    trio.run(main, clock=clock)
    return result


# --- figures ------------------------------------------------------------------------------------


def _b1_model(turns: int) -> faux.FauxModel:
    call = faux.reply(faux.tool_call("noop", {}, id="t"))
    return faux.model([*([call] * turns), "done"])


def _b1_floor(turns: int) -> Callable[[], float]:
    """One checkpoint per turn, and one awaited no-op call per event of a turn."""
    counts = {"events": 0, "stream": 0}

    async def counting_listener(event: AgentEvent) -> None:
        counts["events"] += 1

    async def count_events() -> None:
        async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> Any:
            async def counting_emit(event: Any) -> None:
                counts["stream"] += 1
                await emit(event)

            return await faux.stream(model, context, options, counting_emit)

        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[_NOOP_TOOL]),
            AgentLoopConfig(model=_b1_model(turns)),
            counting_listener,
            stream_fn=stream_fn,
        )

    trio.run(count_events)
    awaits = counts["events"] + counts["stream"]

    def one() -> float:
        waits = _timed(lambda: _checkpoints(turns + 1))
        return (waits + _timed(lambda: _awaited_noops(awaits))) / (turns + 1) * 1e6

    return one


def bench_b1(repeats: int, turns: int = 2000) -> Figure:
    def one() -> float:
        model = _b1_model(turns)

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                _noop_listener,
            )

        return _timed(go) / (turns + 1) * 1e6

    samples, floor_samples = _alternating(repeats, one, _b1_floor(turns))
    return _figure(samples, floor_samples, "us/turn", lower_is_better=True)


def bench_b1a(repeats: int, turns: int = 2000) -> Figure:
    def one() -> float:
        agent = Agent(_b1_model(turns), tools=[_NOOP_TOOL])
        agent.subscribe(_noop_listener)
        return _timed(lambda: agent.prompt("go")) / (turns + 1) * 1e6

    samples, floor_samples = _alternating(repeats, one, _b1_floor(turns))
    return _figure(samples, floor_samples, "us/turn", lower_is_better=True)


def bench_b2(repeats: int, calls: int = 1000) -> Figure:
    reply = faux.reply(*(faux.tool_call("noop", {}, id=f"t{i}") for i in range(calls)))

    def one() -> float:
        model = faux.model([reply, "done"])

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                _noop_listener,
            )

        return _timed(go) * 1e3

    samples, floor_samples, bare_samples = _alternating(
        repeats,
        one,
        lambda: _timed(lambda: _spawn_and_send(calls)) * 1e3,
        lambda: _timed(lambda: _bare_calls(calls)) * 1e3,
    )
    bare, floor = statistics.median(bare_samples), statistics.median(floor_samples)
    return _figure(
        samples,
        floor_samples,
        "ms",
        lower_is_better=True,
        bare_python=bare,
        detail=f"the floor with the contract's per-call objects, checks and awaits, "
        f"in bare Python: "
        f"{bare:.1f} ms ({bare / floor:.2f}x the floor)",
    )


def bench_b3(repeats: int, deltas: int = 100_000) -> Figure:
    reply = faux.reply("x" * deltas, chunk_size=1)

    def one() -> float:
        model = faux.model([reply])

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(),
                AgentLoopConfig(model=model),
                _noop_listener,
            )

        return deltas / _timed(go)

    samples, floor_samples, bare_samples = _alternating(
        repeats,
        one,
        lambda: deltas / _timed(lambda: _awaited_noops(2 * deltas)),
        lambda: deltas / _timed(lambda: _bare_deltas(deltas)),
    )
    bare = statistics.median(bare_samples)
    return _figure(
        samples,
        floor_samples,
        "events/s",
        lower_is_better=False,
        bare_python=bare,
        detail=f"the contract's per-delta objects and awaits alone, in bare Python: "
        f"{bare / 1e6:.2f} M/s",
    )


def _b4_count(reply: faux.Reply) -> int:
    """How many events a run of ``reply`` through an ``Agent`` gives a subscriber."""
    count = 0

    async def counting_listener(event: AgentEvent) -> None:
        nonlocal count
        count += 1

    agent = Agent(faux.model([reply]))
    agent.subscribe(counting_listener)
    trio.run(agent.prompt, "go")
    return count


def _b4_seconds(reply: faux.Reply, capacity: int) -> float:
    """One run into ``events(buffer=capacity)``, drained after ``prompt()`` returned."""
    agent = Agent(faux.model([reply]))
    received = 0

    async def go() -> None:
        nonlocal received
        async with agent.events(buffer=capacity) as events:
            await agent.prompt("go")
        # The block has exited: the channel holds the whole run, then ends.
        with events:
            async for _ in events:
                received += 1

    elapsed = _timed(go)
    if received != capacity:
        raise RuntimeError(f"B4: the subscriber received {received} events, not {capacity}")
    return elapsed


def bench_b4(repeats: int, deltas: int = 100_000, small: int = 10_000) -> Figure:
    big_reply = faux.reply("x" * deltas, chunk_size=1)
    small_reply = faux.reply("x" * small, chunk_size=1)
    big, little = _b4_count(big_reply), _b4_count(small_reply)
    samples: list[float] = []
    linearity: list[float] = []
    floor_samples: list[float] = []
    floor_linearity: list[float] = []
    for _ in range(repeats):
        seconds = _b4_seconds(big_reply, big)
        samples.append(deltas / seconds)
        linearity.append((seconds / big) / (_b4_seconds(small_reply, little) / little))
        seconds = _timed(lambda: _channel_pairs(big))
        floor_samples.append(deltas / seconds)
        floor_linearity.append((seconds / big) / (_timed(lambda: _channel_pairs(little)) / little))
    per_event = _figure(
        linearity,
        floor_linearity,
        "x",
        lower_is_better=True,
        title=f"per-event cost, {deltas:,} / {small:,} deltas",
    )
    return _figure(
        samples,
        floor_samples,
        "events/s",
        lower_is_better=False,
        also={"linearity": per_event},
    )


def bench_b5(repeats: int, turns: int = 2000) -> Figure:
    window = max(1, turns // 20)  # turns 1-100 and 1,900-2,000 of 2,000

    def one() -> tuple[float, float]:
        model = _b1_model(turns)
        stamps: list[float] = []
        clock = time.perf_counter

        async def listener(event: AgentEvent) -> None:
            if event.type == "turn_end" or event.type == "agent_start":
                stamps.append(clock())

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                listener,
            )

        _timed(go)
        costs = [b - a for a, b in itertools.pairwise(stamps)]  # costs[k - 1]: turn k
        if len(costs) != turns + 1:
            raise RuntimeError(f"B5: {len(costs)} turns timed, not {turns + 1}")
        early = statistics.mean(costs[:window])
        late = statistics.mean(costs[turns - window - 1 : turns])
        return early, late

    pairs = [one() for _ in range(repeats)]
    early = statistics.median(first for first, _ in pairs) * 1e6
    late = statistics.median(last for _, last in pairs) * 1e6
    return _figure(
        [last / first for first, last in pairs],
        [1.0],
        "x",
        lower_is_better=True,
        early_us_per_turn=early,
        late_us_per_turn=late,
        detail=(
            f"turns 1-{window:,}: {early:.1f} µs/turn, turns {turns - window:,}-{turns:,}: "
            f"{late:.1f} µs/turn (medians); the floor is 1.0, no growth"
        ),
    )


async def _b6_abort(calls: int, clock: Callable[[], float]) -> float:
    """Time from ``Agent.abort()`` with ``calls`` tools asleep until ``prompt()`` returned."""
    tool, all_in = _sleeping_tool(calls)
    reply = faux.reply(*(faux.tool_call("sleep", {}, id=f"t{i}") for i in range(calls)))
    agent = Agent(faux.model([reply]), tools=[tool])
    agent.subscribe(_noop_listener)
    ended = math.nan

    async def run() -> None:
        nonlocal ended
        await agent.prompt("go")
        ended = clock()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await _settled(all_in)
        start = clock()
        agent.abort()
    results = sum(message.role == "toolResult" for message in agent.state.messages)
    if results != calls:
        raise RuntimeError(f"B6: the aborted run left {results} tool results for {calls} calls")
    return ended - start


def bench_b6(repeats: int, calls: int = 1000) -> Figure:
    clock = time.perf_counter
    samples, floor_samples = _alternating(
        repeats,
        lambda: _run(lambda: _b6_abort(calls, clock)) * 1e3,
        lambda: _run(lambda: _cancel_sleepers(calls, clock)) * 1e3,
    )
    virtual = _run(
        lambda: _b6_abort(calls, trio.current_time),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    return _figure(
        samples,
        floor_samples,
        "ms",
        lower_is_better=True,
        virtual_s=virtual,
        detail=f"virtual time from abort to return (MockClock, autojump 0): {virtual:g} s",
    )


def _b7_agents(count: int, top: int) -> tuple[float, float, float, list[str]]:
    """KiB per idle agent, KiB per agent mid-run, seconds to abort all, top allocation sites."""
    reply = faux.reply(faux.tool_call("sleep", {}, id="t"))
    model = faux.model([reply] * count)  # one model for all, as with a real provider
    outcome: tuple[float, float, float, list[str]] = (math.nan, math.nan, math.nan, [])

    async def main() -> None:
        nonlocal outcome
        tool, all_in = _sleeping_tool(count)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            agents = [Agent(model, tools=[tool]) for _ in range(count)]
            gc.collect()
            idle = tracemalloc.get_traced_memory()[0] - base
            async with trio.open_nursery() as nursery:
                for agent in agents:
                    nursery.start_soon(agent.prompt, "go")
                await _settled(all_in)
                gc.collect()
                running = tracemalloc.get_traced_memory()[0] - base
                sites: list[str] = []
                if top:
                    stats = tracemalloc.take_snapshot().statistics("lineno")
                    for stat in stats[:top]:
                        frame = stat.traceback[0]
                        where = frame.filename.replace(_ROOT, "")
                        if "/site-packages/" in where:
                            where = where.split("/site-packages/", 1)[1]
                        sites.append(f"{where}:{frame.lineno} {stat.size / count:.0f} B")
                tracemalloc.stop()
                gc.collect()
                start = time.perf_counter()
                for agent in agents:
                    agent.abort()
            elapsed = time.perf_counter() - start
        finally:
            tracemalloc.stop()
        if any(agent.state.is_streaming for agent in agents):
            raise RuntimeError("B7: a run was still active after the nursery exited")
        outcome = (idle / count / 1024, running / count / 1024, elapsed, sites)

    trio.run(main)
    return outcome


def _b7_floor(count: int) -> tuple[float, float]:
    """KiB per bare task in ``sleep_forever``, and seconds to cancel them all."""
    outcome = (math.nan, math.nan)

    async def main() -> None:
        nonlocal outcome
        sleep, all_in = _sleepers(count)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(sleep)
                await _settled(all_in)
                gc.collect()
                used = tracemalloc.get_traced_memory()[0] - base
                tracemalloc.stop()
                gc.collect()
                start = time.perf_counter()
                nursery.cancel_scope.cancel()
            elapsed = time.perf_counter() - start
        finally:
            tracemalloc.stop()
        outcome = (used / count / 1024, elapsed)

    trio.run(main)
    return outcome


def bench_b7(repeats: int, agents: int = 10_000, top: int = 5) -> Figure:
    runs, floors = [], []
    for i in range(repeats):  # in turn, as _alternating takes them
        runs.append(_b7_agents(agents, top if i == 0 else 0))
        floors.append(_b7_floor(agents))
    abort_all = _figure(
        [elapsed * 1e3 for _, _, elapsed, _ in runs],
        [elapsed * 1e3 for _, elapsed in floors],
        "ms",
        lower_is_better=True,
        title=f"abort all {agents:,}",
    )
    idle = statistics.median(idle for idle, _, _, _ in runs)
    sites = runs[0][3]
    return _figure(
        [running for _, running, _, _ in runs],
        [used for used, _ in floors],
        "KiB/run",
        lower_is_better=True,
        also={"abort_all": abort_all},
        idle_agent_kib=idle,
        top_sites=sites,
        detail=(
            f"of which the idle Agent: {idle:.1f} KiB; top allocation sites per run: "
            + "; ".join(sites)
        ),
    )


def _b8_body(size: int) -> bytes:
    """An OpenAI chat-completions SSE body of about ``size`` bytes: short text deltas."""
    words = ("streaming ", "tokens ", "from ", "a ", "model ", "over ", "loopback, ", "fast. ")
    chunk = (
        'data: {"id":"chatcmpl-b8","object":"chat.completion.chunk","created":1,'
        '"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":%s},'
        '"finish_reason":null}]}\n\n'
    )
    pieces = [chunk % json.dumps(words[i % len(words)]) for i in range(len(words))]
    one_round = "".join(pieces).encode()
    body = one_round * (size // len(one_round) + 1)
    end = (
        'data: {"id":"chatcmpl-b8","object":"chat.completion.chunk","created":1,'
        '"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        '"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}\n\n'
        "data: [DONE]\n\n"
    )
    return body + end.encode()


def bench_b8(repeats: int, size: int = 20_000_000) -> Figure:
    import httpx  # noqa: ASYNC127  (the client the providers use)
    import httpx_sse

    from trio_agent import LlmContext, StreamOptions
    from trio_agent.providers import openai_chat
    from trio_agent.testing import ScriptedResponse, SSEServer

    body = _b8_body(size)
    megabytes = len(body) / 1e6
    samples: list[float] = []
    floor_samples: list[float] = []

    async def emit(event: Any) -> None:
        return None

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            server = SSEServer()
            url = await server.start(nursery)
            model = openai_chat.model("gpt-4.1", base_url=url + "/v1", provider="openai")
            context = LlmContext("", [UserMessage.text("go")])
            async with httpx.AsyncClient(timeout=60) as client:
                provider = openai_chat.OpenAIChat(client)
                options = StreamOptions(api_key="bench-key")
                request = {"model": "gpt-4.1", "stream": True, "messages": []}
                for _ in range(repeats):
                    server.add(ScriptedResponse(body=body, pieces=[65536]))
                    gc.collect()
                    start = time.perf_counter()
                    message = await provider.stream(model, context, options, emit)
                    samples.append(megabytes / (time.perf_counter() - start))
                    if message.stop_reason != "stop":
                        raise RuntimeError(f"B8: the provider failed: {message.error_message}")
                    server.add(ScriptedResponse(body=body, pieces=[65536]))
                    gc.collect()
                    start = time.perf_counter()
                    async with httpx_sse.aconnect_sse(
                        client, "POST", url + "/v1/chat/completions", json=request
                    ) as source:
                        async for _ in source.aiter_sse():
                            pass
                    floor_samples.append(megabytes / (time.perf_counter() - start))
            nursery.cancel_scope.cancel()

    trio.run(main)
    return _figure(samples, floor_samples, "MB/s", lower_is_better=False)


def _figure(
    samples: list[float],
    floor_samples: list[float],
    unit: str,
    *,
    lower_is_better: bool,
    **extra: Any,
) -> Figure:
    """A figure: median and spread, the floor's median, their ratio, and ``extra``
    (``also``: sub-figures by key; ``title``: a sub-figure's name in the table;
    ``detail``: a line for the table; numbers)."""
    median, low, high = _stats(samples)
    floor = statistics.median(floor_samples)
    ratio = median / floor if lower_is_better else floor / median
    return {
        "median": median,
        "min": low,
        "max": high,
        "unit": unit,
        "floor": floor,
        "ratio": ratio,
        "repeats": len(samples),
        **extra,
    }


BENCHMARKS: dict[str, tuple[str, Callable[[int], Figure], int]] = {
    "B1": ("loop overhead per turn (2,000 turns, one no-op tool each)", bench_b1, 9),
    "B1a": ("the same through Agent, one listener", bench_b1a, 9),
    "B2": ("parallel fan-out (1,000 no-op tools, whole run)", bench_b2, 15),
    "B3": ("streaming (100,000 one-character deltas)", bench_b3, 5),
    "B4": ("bursts (100,000 deltas into events(), drained after the run)", bench_b4, 5),
    "B5": ("flat growth (B1: turns 1,900-2,000 / turns 1-100, per turn)", bench_b5, 5),
    "B6": ("abort latency (1,000 sleeping tools, Agent.abort() to return)", bench_b6, 15),
    "B7": ("concurrent runs (10,000 Agents, each in a sleeping tool)", bench_b7, 3),
    "B8": ("provider stream (20 MB of OpenAI chat SSE on loopback)", bench_b8, 5),
}


def _format(value: float, unit: str) -> str:
    if unit == "events/s":
        return f"{value / 1e6:.2f} M/s"
    if unit == "x":
        return f"{value:.2f}"
    if unit == "MB/s":
        return f"{value:.1f} MB/s"
    return f"{value:.1f} {unit.split('/')[0].replace('us', 'µs')}"


def _lines(result: Figure, indent: str) -> str:
    unit = result["unit"]
    lines = [
        f"{indent}trio_agent {_format(result['median'], unit)} "
        f"(min {_format(result['min'], unit)}, max {_format(result['max'], unit)}, "
        f"n={result['repeats']})",
        f"{indent}Trio floor {_format(result['floor'], unit)}   "
        f"ratio {result['ratio']:.2f}x the floor",
    ]
    for name, sub in result.get("also", {}).items():
        lines.append(f"{indent}{sub.get('title', name)}:")
        lines.append(_lines(sub, indent + "    "))
    if "detail" in result:
        lines.append(f"{indent}{result['detail']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("figures", nargs="*", help="figure ids to run (default: all)")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object keyed by figure id"
    )
    parser.add_argument("--repeats", type=int, help="repetitions per figure (default: per figure)")
    args = parser.parse_args(argv)
    by_name = {name.upper(): name for name in BENCHMARKS}
    chosen = [by_name.get(f.upper(), f) for f in args.figures] or list(BENCHMARKS)
    unknown = [f for f in chosen if f not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    results: dict[str, Figure] = {}
    for figure in chosen:
        title, bench, repeats = BENCHMARKS[figure]
        result = bench(args.repeats or repeats)
        results[figure] = result
        if not args.json:
            print(f"{figure}  {title}\n{_lines(result, '    ')}", flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
