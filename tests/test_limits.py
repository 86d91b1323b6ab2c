"""Tool time limits and concurrency limits (issue 18, items 2 and 3), on virtual time."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import trio

from trio_agent import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentTool,
    TextContent,
    ToolDefinitionError,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    UserMessage,
    run_agent_loop,
    tool,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript
from trio_agent.testing.strategies import Scenario

ABORTED = "Operation aborted"


class Gauge:
    """Counts the calls running at once, and the most that ever did."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.started: list[str] = []

    def enter(self, call_id: str) -> None:
        self.started.append(call_id)
        self.running += 1
        self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        self.running -= 1


def slow(
    name: str = "fetch",
    *,
    gauge: Gauge | None = None,
    time_limit: float | None = None,
    limiter: trio.CapacityLimiter | None = None,
) -> AgentTool:
    """A tool sleeping ``args["s"]`` seconds, then answering ``name:id``."""

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        if gauge is not None:
            gauge.enter(call_id)
        try:
            await trio.sleep(args["s"])
        finally:
            if gauge is not None:
                gauge.leave()
        return ToolResult.text(f"{name}:{call_id}")

    return AgentTool(
        name=name,
        description="slow",
        parameters={"type": "object", "properties": {"s": {"type": "number"}}},
        execute=execute,
        time_limit=time_limit,
        limiter=limiter,
    )


def calls(*specs: tuple[str, float], name: str = "fetch") -> faux.Reply:
    return faux.reply(*(faux.tool_call(name, {"s": s}, id=call_id) for call_id, s in specs))


async def run(
    replies: list[faux.Reply | str],
    tools: list[AgentTool],
    abort: trio.CancelScope | None = None,
    **config: Any,
) -> tuple[list[AgentMessage], EventRecorder, faux.ScriptedModel]:
    recorder = EventRecorder()
    model = faux.model(replies)
    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=model, **config),
        recorder,
        abort,
    )
    check_event_grammar(recorder.events)
    check_transcript(messages)
    return messages, recorder, model


def results(messages: list[AgentMessage]) -> list[tuple[str, str, bool]]:
    return [
        (
            m.tool_call_id,
            "".join(b.text for b in m.content if isinstance(b, TextContent)),
            m.is_error,
        )
        for m in messages
        if isinstance(m, ToolResultMessage)
    ]


def task_count() -> int:
    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return count(root)


# --- time limits ------------------------------------------------------------------


async def test_a_call_past_its_limit_gets_the_timeout_error_and_the_run_goes_on(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = trio.current_time()
    messages, _, model = await run([calls(("t1", 60)), "done"], [slow(time_limit=30)])
    assert results(messages) == [("t1", "Tool 'fetch' did not finish within 30 s", True)]
    assert trio.current_time() - start == pytest.approx(30)
    assert len(model.calls) == 2  # the model read the error and answered
    assert messages[-1].role == "assistant"


async def test_a_call_within_its_limit_is_unaffected(autojump_clock: trio.abc.Clock) -> None:
    messages, _, _ = await run([calls(("t1", 1), ("t2", 2)), "done"], [slow(time_limit=2.5)])
    assert results(messages) == [("t1", "fetch:t1", False), ("t2", "fetch:t2", False)]


@pytest.mark.parametrize("limit", [30, 0.05])
async def test_a_call_just_within_its_limit_finishes_and_one_just_past_it_does_not(
    autojump_clock: trio.abc.Clock, limit: float
) -> None:
    within, past = limit * 0.999, limit * 1.001
    messages, _, _ = await run(
        [calls(("t1", within), ("t2", past)), "done"], [slow(time_limit=limit)]
    )
    assert results(messages) == [
        ("t1", "fetch:t1", False),
        ("t2", f"Tool 'fetch' did not finish within {limit:g} s", True),
    ]


async def test_the_runs_default_applies_to_a_tool_without_a_limit(
    autojump_clock: trio.abc.Clock,
) -> None:
    messages, _, _ = await run([calls(("t1", 1), ("t2", 5)), "done"], [slow()], tool_time_limit=0.5)
    assert results(messages) == [
        ("t1", "Tool 'fetch' did not finish within 0.5 s", True),
        ("t2", "Tool 'fetch' did not finish within 0.5 s", True),
    ]


async def test_the_tools_own_limit_wins_over_the_runs(autojump_clock: trio.abc.Clock) -> None:
    tools = [slow(time_limit=10), slow("other")]
    reply = faux.reply(
        faux.tool_call("fetch", {"s": 5}, id="t1"), faux.tool_call("other", {"s": 5}, id="t2")
    )
    messages, _, _ = await run([reply, "done"], tools, tool_time_limit=1)
    assert results(messages) == [
        ("t1", "fetch:t1", False),
        ("t2", "Tool 'other' did not finish within 1 s", True),
    ]
    messages, _, _ = await run([calls(("t1", 5)), "done"], [slow(time_limit=2)], tool_time_limit=9)
    assert results(messages) == [("t1", "Tool 'fetch' did not finish within 2 s", True)]


async def test_sequential_calls_are_limited_too(autojump_clock: trio.abc.Clock) -> None:
    messages, _, _ = await run(
        [calls(("t1", 5), ("t2", 0.1)), "done"], [slow(time_limit=1)], tool_execution="sequential"
    )
    assert results(messages) == [
        ("t1", "Tool 'fetch' did not finish within 1 s", True),
        ("t2", "fetch:t2", False),
    ]


@pytest.mark.parametrize("specs", [[("t1", 60)], [("t1", 60), ("t2", 60)]])
async def test_an_abort_during_a_limited_call_is_an_abort(
    autojump_clock: trio.abc.Clock, specs: list[tuple[str, float]]
) -> None:
    abort = trio.CancelScope()

    async def abort_later() -> None:
        await trio.sleep(5)
        abort.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        messages, _, model = await run([calls(*specs), "never"], [slow(time_limit=30)], abort)
    assert results(messages) == [(call_id, ABORTED, True) for call_id, _ in specs]
    assert len(model.calls) == 1


NOT_A_TIME_LIMIT = [0, -1, -0.0, math.inf, -math.inf, math.nan, "30", True, False, [30]]
TOO_LARGE = [  # ints no float can hold
    pytest.param(10**400, id="10**400"),
    pytest.param(-(10**400), id="-10**400"),
    pytest.param(2**1024, id="2**1024"),
]
SECONDS = "must be a positive finite number of seconds or None, not "


def shown(bad: Any) -> str:
    """How the error shows ``bad``."""
    if isinstance(bad, int) and abs(bad) >= 2**1024:
        return f"an int of {bad.bit_length()} bits (too large for a float)"
    return repr(bad)


@pytest.mark.parametrize("bad", NOT_A_TIME_LIMIT + TOO_LARGE)
def test_a_time_limit_must_be_a_positive_finite_number(bad: Any) -> None:
    """Every place a time limit is given refuses it with the same error, never another."""
    with pytest.raises(ToolDefinitionError) as info:
        slow(time_limit=bad)
    assert str(info.value) == f"tool 'fetch': time_limit {SECONDS}{shown(bad)}"

    async def fetch() -> str:
        """Fetch."""
        return "ok"

    with pytest.raises(ToolDefinitionError) as info:
        tool(time_limit=bad)(fetch)
    assert str(info.value) == f"tool 'fetch': time_limit {SECONDS}{shown(bad)}"

    for make in (AgentLoopConfig, Agent, Scenario):
        options = {"replies": ()} if make is Scenario else {"model": faux.model([])}
        with pytest.raises(ValueError, match=r"^tool_time_limit ") as failure:
            make(**options, tool_time_limit=bad)
        assert type(failure.value) is ValueError
        assert str(failure.value) == f"tool_time_limit {SECONDS}{shown(bad)}"


@pytest.mark.parametrize(
    "good", [1, 0.001, 5e-324, pytest.param(10**300, id="10**300"), 1.7976931348623157e308]
)
def test_any_positive_finite_number_is_a_time_limit(good: float) -> None:
    """The largest float and the ints a float holds are limits (no call waits that long)."""
    assert slow(time_limit=good).time_limit == good
    assert AgentLoopConfig(model=faux.model([]), tool_time_limit=good).tool_time_limit == good
    assert Scenario(replies=(), tool_time_limit=good).tool_time_limit == good


async def test_a_huge_time_limit_lets_a_call_finish(autojump_clock: trio.abc.Clock) -> None:
    messages, _, _ = await run([calls(("t1", 1)), "done"], [slow(time_limit=10**300)])
    assert results(messages) == [("t1", "fetch:t1", False)]


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True])
def test_max_parallel_tools_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_parallel_tools"):
        AgentLoopConfig(model=faux.model([]), max_parallel_tools=bad)


def test_a_limiter_must_be_a_capacity_limiter() -> None:
    with pytest.raises(ToolDefinitionError, match="limiter"):
        slow(limiter=8)  # type: ignore[arg-type]  # the mistake under test


async def test_the_decorator_passes_the_limits_on(autojump_clock: trio.abc.Clock) -> None:
    limiter = trio.CapacityLimiter(1)

    @tool(time_limit=0.5, limiter=limiter)
    async def fetch(s: float) -> str:
        """Fetch slowly."""
        await trio.sleep(s)
        return "ok"

    assert (fetch.time_limit, fetch.limiter) == (0.5, limiter)
    messages, _, _ = await run([calls(("t1", 0.1), ("t2", 1)), "done"], [fetch])
    assert results(messages) == [
        ("t1", "ok", False),
        ("t2", "Tool 'fetch' did not finish within 0.5 s", True),
    ]


# --- concurrency limits -------------------------------------------------------------


async def test_max_parallel_tools_caps_the_calls_running_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    gauge = Gauge()
    reply = calls(*((f"t{i}", 1 + i / 10) for i in range(5)))
    start = trio.current_time()
    messages, recorder, _ = await run([reply, "done"], [slow(gauge=gauge)], max_parallel_tools=2)
    assert gauge.peak == 2
    # The first two start together (in the order Trio runs them); the others get
    # their slots in source order.
    assert sorted(gauge.started[:2]) == ["t0", "t1"]
    assert gauge.started[2:] == ["t2", "t3", "t4"]
    assert recorder.tool_order("start") == [f"t{i}" for i in range(5)]
    assert results(messages) == [(f"t{i}", f"fetch:t{i}", False) for i in range(5)]
    assert trio.current_time() - start > 2  # three rounds, not one


async def test_a_cap_above_the_batch_changes_nothing(autojump_clock: trio.abc.Clock) -> None:
    gauge = Gauge()
    reply = calls(*((f"t{i}", 1) for i in range(3)))
    messages, _, _ = await run([reply, "done"], [slow(gauge=gauge)], max_parallel_tools=3)
    assert gauge.peak == 3
    assert [r[2] for r in results(messages)] == [False] * 3


async def test_a_time_limit_counts_from_when_the_call_gets_its_slot(
    autojump_clock: trio.abc.Clock,
) -> None:
    reply = calls(("t1", 1), ("t2", 1), ("t3", 1))
    messages, _, _ = await run([reply, "done"], [slow(time_limit=1.5)], max_parallel_tools=1)
    assert [r[2] for r in results(messages)] == [False] * 3


async def test_a_shared_limiter_serializes_the_calls_of_two_agents(
    autojump_clock: trio.abc.Clock,
) -> None:
    gauge = Gauge()
    shared = trio.CapacityLimiter(1)
    fetch = slow(gauge=gauge, limiter=shared)
    agents = [
        Agent(faux.model([calls((f"{who}1", 1), (f"{who}2", 1)), "done"]), tools=[fetch])
        for who in ("a", "b")
    ]
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.prompt, "go")
    assert gauge.peak == 1
    assert trio.current_time() - start == pytest.approx(4)
    assert sorted(gauge.started) == ["a1", "a2", "b1", "b2"]
    for agent, who in zip(agents, "ab", strict=True):
        assert results(list(agent.state.messages)) == [
            (f"{who}1", f"fetch:{who}1", False),
            (f"{who}2", f"fetch:{who}2", False),
        ]
    assert shared.borrowed_tokens == 0


async def test_a_tools_limiter_applies_to_a_call_running_alone(
    autojump_clock: trio.abc.Clock,
) -> None:
    shared = trio.CapacityLimiter(1)
    fetch = slow(limiter=shared)
    async with trio.open_nursery() as nursery:
        await shared.acquire_on_behalf_of("someone")
        replies: list[faux.Reply | str] = [calls(("t1", 1)), "done"]
        nursery.start_soon(run, replies, [fetch])
        await trio.sleep(10)
        assert shared.statistics().tasks_waiting == 1
        shared.release_on_behalf_of("someone")
    assert shared.borrowed_tokens == 0


@pytest.mark.parametrize("per_tool", [False, True])
async def test_an_abort_while_calls_wait_for_a_slot_answers_every_call(
    autojump_clock: trio.abc.Clock, per_tool: bool
) -> None:
    abort = trio.CancelScope()
    gauge = Gauge()
    limiter = trio.CapacityLimiter(2) if per_tool else None
    config: dict[str, Any] = {} if per_tool else {"max_parallel_tools": 2}
    reply = calls(*((f"t{i}", 10) for i in range(5)))
    before = task_count()

    async def abort_later() -> None:
        await trio.sleep(1)
        abort.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        messages, recorder, model = await run(
            [reply, "never"], [slow(gauge=gauge, limiter=limiter)], abort, **config
        )
        assert task_count() == before + 0  # abort_later has ended: the run left no task
    # The run's cap hands out slots in source order; a tool's limiter, in the order
    # Trio runs the waiting tasks.
    assert len(gauge.started) == 2
    assert gauge.running == 0
    if not per_tool:
        assert sorted(gauge.started) == ["t0", "t1"]
    assert recorder.tool_order("start") == [f"t{i}" for i in range(5)]
    assert results(messages) == [(f"t{i}", ABORTED, True) for i in range(5)]
    assert len(model.calls) == 1
    if limiter is not None:
        assert limiter.borrowed_tokens == 0


async def test_a_sync_tool_past_its_limit_is_answered_when_its_thread_returns() -> None:
    @tool(time_limit=0.05)
    def crawl() -> str:
        """Crawl, in a thread."""
        time.sleep(0.2)
        return "late"

    messages, _, _ = await run([faux.reply(faux.tool_call("crawl", {}, id="t1")), "done"], [crawl])
    assert results(messages) == [("t1", "Tool 'crawl' did not finish within 0.05 s", True)]
