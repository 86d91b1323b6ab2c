"""The loop figures: cost per turn, parallel fan-out, flat growth.

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
- B5: flat growth — B1's run, each turn timed by the listener (from one
  ``turn_end`` to the next; turn 1 from ``agent_start``); the mean cost of
  turns 1,900-2,000 divided by that of turns 1-100. Floor: 1.0 (no growth).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import trio

from benchmarks._common import (
    Figure,
    alternating,
    awaited_noops,
    bare_stream_event,
    figure,
    never_cancelled,
    noop_listener,
    timed,
)
from trio_agent import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    MessageEnd,
    MessageStart,
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


# --- floors ---------------------------------------------------------------------------------------


async def _checkpoints(count: int) -> None:
    for _ in range(count):
        await trio.lowlevel.checkpoint()


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
    listener = noop_listener
    validate = _NOOP_TOOL.validate_arguments
    checkpoint_if_cancelled = trio.lowlevel.checkpoint_if_cancelled
    cancelled = never_cancelled
    emit = bare_stream_event

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


# --- figures --------------------------------------------------------------------------------------


def _b1_model(turns: int) -> faux.ScriptedModel:
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
        waits = timed(lambda: _checkpoints(turns + 1))
        return (waits + timed(lambda: awaited_noops(awaits))) / (turns + 1) * 1e6

    return one


def bench_b1(repeats: int, turns: int = 2000) -> Figure:
    def one() -> float:
        model = _b1_model(turns)

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                noop_listener,
            )

        return timed(go) / (turns + 1) * 1e6

    samples, floor_samples = alternating(repeats, one, _b1_floor(turns))
    return figure(samples, floor_samples, "us/turn", lower_is_better=True)


def bench_b1a(repeats: int, turns: int = 2000) -> Figure:
    def one() -> float:
        agent = Agent(_b1_model(turns), tools=[_NOOP_TOOL])
        agent.subscribe(noop_listener)
        return timed(lambda: agent.prompt("go")) / (turns + 1) * 1e6

    samples, floor_samples = alternating(repeats, one, _b1_floor(turns))
    return figure(samples, floor_samples, "us/turn", lower_is_better=True)


def bench_b2(repeats: int, calls: int = 1000) -> Figure:
    reply = faux.reply(*(faux.tool_call("noop", {}, id=f"t{i}") for i in range(calls)))

    def one() -> float:
        model = faux.model([reply, "done"])

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                noop_listener,
            )

        return timed(go) * 1e3

    samples, floor_samples, bare_samples = alternating(
        repeats,
        one,
        lambda: timed(lambda: _spawn_and_send(calls)) * 1e3,
        lambda: timed(lambda: _bare_calls(calls)) * 1e3,
    )
    bare, floor = statistics.median(bare_samples), statistics.median(floor_samples)
    return figure(
        samples,
        floor_samples,
        "ms",
        lower_is_better=True,
        bare_python=bare,
        detail=f"the floor with the contract's per-call objects, checks and awaits, "
        f"in bare Python: "
        f"{bare:.1f} ms ({bare / floor:.2f}x the floor)",
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

        timed(go)
        costs = [b - a for a, b in itertools.pairwise(stamps)]  # costs[k - 1]: turn k
        if len(costs) != turns + 1:
            raise RuntimeError(f"B5: {len(costs)} turns timed, not {turns + 1}")
        early = statistics.mean(costs[:window])
        late = statistics.mean(costs[turns - window - 1 : turns])
        return early, late

    pairs = [one() for _ in range(repeats)]
    early = statistics.median(first for first, _ in pairs) * 1e6
    late = statistics.median(last for _, last in pairs) * 1e6
    return figure(
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
