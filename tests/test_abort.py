"""Abort and outer cancellation (design.md#abort; invariants 4, 5, 6, 7)."""

from __future__ import annotations

import gc
import signal
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest
import trio
import trio.lowlevel
import trio.testing

from tests._support import ECHO, make_tool
from trio_agent import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AgentTool,
    AssistantMessage,
    BeforeToolCallContext,
    NextTurn,
    TextContent,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    TurnContext,
    UserMessage,
    _execution,
    run_agent_loop,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript
from trio_agent.testing._checks import agent_problems

ABORTED = "Operation aborted"


def sleeper(name: str = "sleep", shielded: bool = False, log: list[str] | None = None) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        if log is not None:
            log.append(call_id)
        with trio.CancelScope(shield=shielded):
            await trio.sleep(args["ms"] / 1000)
        return ToolResult.text(f"done {call_id}")

    return make_tool(name, execute)


def calls(*specs: tuple[str, int]) -> faux.Reply:
    return faux.reply(*(faux.tool_call("sleep", {"ms": ms}, id=call_id) for call_id, ms in specs))


async def run(
    model: faux.ScriptedModel,
    abort: trio.CancelScope,
    on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
    tools: list[AgentTool] | None = None,
    **config: Any,
) -> tuple[list[AgentMessage], EventRecorder]:
    recorder = EventRecorder(on_event)
    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[sleeper(), ECHO] if tools is None else tools),
        AgentLoopConfig(model=model, **config),
        recorder,
        abort,
    )
    check_event_grammar(recorder.events)
    check_transcript(messages)
    return messages, recorder


def texts(messages: list[AgentMessage]) -> list[tuple[str, str]]:
    return [
        (m.tool_call_id, "".join(b.text for b in m.content if isinstance(b, TextContent)))
        for m in messages
        if isinstance(m, ToolResultMessage)
    ]


async def test_abort_mid_stream_keeps_every_delta_received() -> None:
    abort = trio.CancelScope()
    deltas = 0

    async def on_event(event: AgentEvent) -> None:
        nonlocal deltas
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            deltas += 1
            if deltas == 2:
                abort.cancel()

    model = faux.model([faux.reply("abcdefghij", chunk_size=2)])
    messages, recorder = await run(model, abort, on_event)
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.text, last.stop_reason, last.error_message) == ("abcd", "aborted", ABORTED)
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    assert recorder.events[-3].message is last  # type: ignore[union-attr]  # a MessageEnd


async def test_abort_before_the_run_starts_calls_no_model() -> None:
    abort = trio.CancelScope()
    abort.cancel()
    model = faux.model(["never"])
    messages, recorder = await run(model, abort)
    assert model.calls == []
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage, here


async def test_abort_during_parallel_tools_keeps_finished_results(
    autojump_clock: trio.abc.Clock,
) -> None:
    abort = trio.CancelScope()
    model = faux.model([calls(("t1", 200), ("t2", 10), ("t3", 300)), "never"])

    async def abort_later() -> None:
        await trio.sleep(0.050)
        abort.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        start = trio.current_time()
        messages, recorder = await run(model, abort)
    assert trio.current_time() - start == pytest.approx(0.050)
    assert texts(messages) == [("t1", ABORTED), ("t2", "done t2"), ("t3", ABORTED)]
    assert len(model.calls) == 1
    assert recorder.tool_order("end") == ["t2", "t1", "t3"]
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    synthetic = messages[-1]
    assert isinstance(synthetic, AssistantMessage)
    assert (synthetic.content, synthetic.stop_reason, synthetic.error_message) == (
        (),
        "aborted",
        ABORTED,
    )
    assert recorder.types[-6:] == [
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]


async def test_a_shielded_tool_finishes_and_keeps_its_result(
    autojump_clock: trio.abc.Clock,
) -> None:
    abort = trio.CancelScope()
    tools = [sleeper(), sleeper("shielded", shielded=True)]
    model = faux.model(
        [
            faux.reply(
                faux.tool_call("sleep", {"ms": 200}, id="t1"),
                faux.tool_call("shielded", {"ms": 80}, id="t2"),
            ),
            "never",
        ]
    )

    async def abort_later() -> None:
        await trio.sleep(0.030)
        abort.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        start = trio.current_time()
        messages, _ = await run(model, abort, tools=tools)
    assert trio.current_time() - start == pytest.approx(0.080)  # the shield's time, no more
    assert texts(messages) == [("t1", ABORTED), ("t2", "done t2")]


async def test_abort_during_sequential_tools_answers_every_call(
    autojump_clock: trio.abc.Clock,
) -> None:
    abort = trio.CancelScope()
    executed: list[str] = []
    model = faux.model([calls(("t1", 10), ("t2", 100), ("t3", 10)), "never"])

    async def abort_later() -> None:
        await trio.sleep(0.050)
        abort.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        messages, recorder = await run(
            model, abort, tools=[sleeper(log=executed)], tool_execution="sequential"
        )
    assert texts(messages) == [("t1", "done t1"), ("t2", ABORTED), ("t3", ABORTED)]
    assert recorder.tool_order("start") == ["t1", "t2", "t3"]
    assert executed == ["t1", "t2"]


async def test_abort_during_preparation_starts_no_further_tool() -> None:
    abort = trio.CancelScope()
    executed: list[str] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        executed.append(call_id)
        return ToolResult.text("ran")

    async def before(ctx: BeforeToolCallContext) -> None:
        if ctx.tool_call.id == "t2":
            abort.cancel()  # noticed after the hook returns: no checkpoint needed

    model = faux.model([faux.reply(*(faux.tool_call("t", {}, id=f"t{i}") for i in (1, 2, 3))), "x"])
    messages, recorder = await run(
        model, abort, tools=[make_tool("t", execute)], before_tool_call=before
    )
    assert executed == []
    assert texts(messages) == [("t1", ABORTED), ("t2", ABORTED), ("t3", ABORTED)]
    assert recorder.tool_order("start") == ["t1", "t2", "t3"]


async def test_abort_from_a_listener_is_noticed_before_the_next_event() -> None:
    abort = trio.CancelScope()
    after_abort: list[str] = []

    async def on_event(event: AgentEvent) -> None:
        if abort.cancel_called:
            after_abort.append(event.type)
            await trio.lowlevel.checkpoint()  # listeners may await normally after an abort
        elif event.type == "tool_execution_end":
            abort.cancel()

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "never"])
    messages, _ = await run(model, abort, on_event)
    assert after_abort == [
        "message_start",
        "message_end",
        "turn_end",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert texts(messages) == [("t1", "echo:v")]
    assert len(model.calls) == 1


def _two_echo_calls() -> faux.ScriptedModel:
    calls = (faux.tool_call("echo", {"value": v}, id=f"t{v}") for v in "12")
    return faux.model([faux.reply(*calls), "done"])


async def _interrupted_awaits(at: int, mode: Literal["parallel", "sequential"]) -> list[str]:
    """Abort at event ``at``; the events whose listener's await was cancelled after it."""
    abort = trio.CancelScope()
    seen = 0
    interrupted: list[str] = []

    async def on_event(event: AgentEvent) -> None:
        nonlocal seen
        seen += 1
        if not abort.cancel_called:
            if seen == at:
                abort.cancel()
            return
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            interrupted.append(event.type)
            raise

    await run(_two_echo_calls(), abort, on_event, tools=[ECHO], tool_execution=mode)
    return interrupted


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_a_listener_may_await_at_every_event_after_an_abort(
    mode: Literal["parallel", "sequential"],
) -> None:
    """Whichever event of a tool turn the listener aborts at, every later event is
    delivered outside the cancelled run: the listener's own awaits go on."""
    everything = EventRecorder()
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=_two_echo_calls(), tool_execution=mode),
        everything,
    )
    for at in range(1, len(everything.events)):
        assert (at, await _interrupted_awaits(at, mode)) == (at, [])


async def test_abort_in_the_last_turn_end_adds_no_turn() -> None:
    abort = trio.CancelScope()

    async def on_event(event: AgentEvent) -> None:
        if event.type == "turn_end":
            abort.cancel()

    model = faux.model(["answer"])
    messages, recorder = await run(model, abort, on_event)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert recorder.types[-2:] == ["turn_end", "agent_end"]
    assert messages[-1].stop_reason == "stop"  # type: ignore[union-attr]  # an AssistantMessage, here


async def test_abort_during_prepare_next_turn_delivers_pending_steering(
    autojump_clock: trio.abc.Clock,
) -> None:
    abort = trio.CancelScope()
    steer = UserMessage.text("steer")
    queue: list[AgentMessage] = []

    async def steering() -> list[AgentMessage]:
        taken, queue[:] = list(queue), []
        return taken

    async def on_event(event: AgentEvent) -> None:
        if event.type == "tool_execution_end":
            queue.append(steer)

    async def prepare(turn: TurnContext) -> NextTurn | None:
        abort.cancel()
        await trio.sleep(1)
        raise AssertionError("not reached")

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "never"])
    messages, _ = await run(
        model, abort, on_event, get_steering_messages=steering, prepare_next_turn=prepare
    )
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert messages[3] is steer
    assert messages[4].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage, here
    assert len(model.calls) == 1


async def test_outer_cancellation_propagates_and_emits_nothing_more(
    autojump_clock: trio.abc.Clock,
) -> None:
    recorder = EventRecorder()
    model = faux.model([calls(("t1", 100), ("t2", 100)), "never"])
    with trio.move_on_after(0.05) as outer:
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[sleeper()]),
            AgentLoopConfig(model=model),
            recorder,
        )
        raise AssertionError("the run returned normally")
    assert outer.cancelled_caught
    assert "agent_end" not in recorder.types
    assert recorder.types[-1] == "tool_execution_start"


async def test_outer_cancellation_wins_over_abort(autojump_clock: trio.abc.Clock) -> None:
    abort = trio.CancelScope()
    recorder = EventRecorder()
    model = faux.model([calls(("t1", 100), ("t2", 100)), "never"])

    async def both() -> None:
        await trio.sleep(0.05)
        abort.cancel()
        outer.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(both)
        with trio.CancelScope() as outer:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[sleeper()]),
                AgentLoopConfig(model=model),
                recorder,
                abort,
            )
            raise AssertionError("the run returned normally")
    assert outer.cancelled_caught
    assert "agent_end" not in recorder.types


async def test_a_cancelled_caller_gets_cancelled_not_a_group() -> None:
    caught: list[BaseException] = []

    async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> AssistantMessage:
        await trio.sleep_forever()
        raise AssertionError

    async def cancel_on_prompt(event: AgentEvent) -> None:
        if event.type == "message_end":
            outer.cancel()

    with trio.CancelScope() as outer:
        try:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(),
                AgentLoopConfig(model=faux.model()),
                cancel_on_prompt,
                stream_fn=stream_fn,
            )
        except BaseException as exc:
            caught.append(exc)
            raise
    assert [type(exc) for exc in caught] == [trio.Cancelled]


async def test_an_abort_scope_serves_one_run() -> None:
    abort = trio.CancelScope()
    model = faux.model(["a", "b"])
    await run(model, abort)
    with pytest.raises(RuntimeError, match="already used by another run"):
        await run(model, abort)


async def test_no_task_outlives_an_aborted_run(autojump_clock: trio.abc.Clock) -> None:
    alive: set[trio.lowlevel.Task] = set()

    class Watch(trio.abc.Instrument):
        def task_spawned(self, task: trio.lowlevel.Task) -> None:
            alive.add(task)

        def task_exited(self, task: trio.lowlevel.Task) -> None:
            alive.discard(task)

    abort = trio.CancelScope()

    async def on_event(event: AgentEvent) -> None:
        if event.type == "tool_execution_update":
            abort.cancel()

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text("tick"))
        await trio.sleep(10)
        return ToolResult.text("never")

    model = faux.model([faux.reply(*(faux.tool_call("w", {}, id=f"t{i}") for i in range(3))), "x"])
    trio.lowlevel.add_instrument(watch := Watch())
    try:
        await run(model, abort, on_event, tools=[make_tool("w", execute)])
    finally:
        trio.lowlevel.remove_instrument(watch)
    assert alive == set()
    assert trio.current_time() == 0


async def test_abort_is_prompt_no_virtual_time_passes(autojump_clock: trio.abc.Clock) -> None:
    abort = trio.CancelScope()
    model = faux.model([faux.reply("x" * 100, chunk_size=1, chunk_delay=0.01)])

    async def abort_later() -> None:
        await trio.sleep(0.105)
        abort.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        messages, _ = await run(model, abort)
    assert trio.current_time() == pytest.approx(0.105)
    assert messages[-1].text == "x" * 10  # type: ignore[union-attr]  # an AssistantMessage, here


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("probe", ["fast", "public"])
async def test_an_abort_in_tool_execution_start_runs_no_tool(
    mode: str, count: int, probe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if probe == "public":  # a Trio without the cancel status the children's probe reads
        monkeypatch.setattr(_execution, "children_probe", lambda nursery: None)
    abort = trio.CancelScope()
    executed: list[str] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        executed.append(call_id)
        return ToolResult.text("ran")

    async def on_event(event: AgentEvent) -> None:
        if event.type == "tool_execution_start" and event.tool_call_id == f"t{count}":
            abort.cancel()

    reply = faux.reply(*(faux.tool_call("t", {}, id=f"t{i}") for i in range(1, count + 1)))
    messages, _ = await run(
        faux.model([reply, "x"]),
        abort,
        on_event,
        tools=[make_tool("t", execute)],
        tool_execution=mode,
    )
    assert executed == ([] if mode == "parallel" else [f"t{i}" for i in range(1, count)])
    assert texts(messages)[-1] == (f"t{count}", ABORTED)


class _Marker:
    """An object only the tool's frame holds."""


def test_an_aborted_run_lets_go_of_its_frames_before_its_nursery_closes() -> None:
    # The run's nursery ends with a schedule point. An abort's Cancelled is
    # caught by the run's own scope, after that point; its traceback must not
    # keep the run's frames (and what they hold) alive across it: with many
    # runs aborted together, all of them would be alive at once.
    alive_at_step_end: list[bool] = []
    marker: list[weakref.ref[_Marker]] = []
    runner: list[trio.lowlevel.Task] = []
    abort = trio.CancelScope()

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        held = _Marker()
        marker.append(weakref.ref(held))
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    class Watch(trio.abc.Instrument):
        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            if runner and task is runner[0] and abort.cancel_called:
                alive_at_step_end.append(marker[0]() is not None)

    async def main() -> None:
        model = faux.model([faux.reply(faux.tool_call("hold", {}, id="c1"))])
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                runner.append(trio.lowlevel.current_task())
                await run(model, abort, tools=[make_tool("hold", execute)])

            nursery.start_soon(go)
            await trio.testing.wait_all_tasks_blocked()
            assert marker
            assert marker[0]() is not None
            abort.cancel()

    trio.run(main, instruments=[Watch()])
    assert alive_at_step_end, "the run never stepped after the abort"
    assert alive_at_step_end[0] is False


async def _garbage_of(run: Callable[[], Awaitable[object]]) -> set[str]:
    """The type names of the objects that only a collection would free after ``run``."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        await run()
        gc.collect()
        return {type(item).__name__ for item in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


RUN_PARTS = {
    "Run",
    "ToolCalls",
    "UpdatePump",
    "Nursery",
    "Task",
    "CancelScope",
    "MemoryChannelState",
}


async def test_a_run_that_ended_leaves_no_reference_cycle_behind() -> None:
    # Refcounting frees a run as soon as it returns, however it ended: nothing
    # of it waits for the garbage collector (10,000 runs aborted at once would
    # leave 10,000 such heaps for it).
    async def report(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text("half way"))
        await trio.lowlevel.checkpoint()
        return ToolResult.text("done")

    async def finished() -> None:
        model = faux.model(
            [
                faux.reply(
                    faux.tool_call("report", {}, id="a"), faux.tool_call("report", {}, id="b")
                ),
                faux.reply(faux.tool_call("report", {}, id="c")),
                "done",
            ]
        )
        await run(model, trio.CancelScope(), tools=[make_tool("report", report)])

    async def aborted() -> None:
        abort = trio.CancelScope()

        async def on_event(event: AgentEvent) -> None:
            if event.type == "tool_execution_update":
                abort.cancel()

        model = faux.model([faux.reply(faux.tool_call("report", {}, id="a"))])
        await run(model, abort, on_event, tools=[make_tool("report", report)])

    assert await _garbage_of(finished) & RUN_PARTS == set()
    assert await _garbage_of(aborted) & RUN_PARTS == set()


def _frame_names(exc: BaseException) -> list[str]:
    names = []
    tb = exc.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return names


async def test_a_cancellation_from_outside_keeps_its_traceback_when_the_run_was_aborted_too() -> (
    None
):
    # The abort scope does not catch a Cancelled while an enclosing scope is
    # cancelled too: that one goes on out, to the caller, whole.
    abort = trio.CancelScope()
    outer = trio.CancelScope()
    escaped: list[BaseException] = []

    async def sleep_in_tool(
        call_id: str, args: dict[str, Any], on_update: ToolUpdate
    ) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def go() -> None:
        model = faux.model([faux.reply(faux.tool_call("hold", {}, id="c1"))])
        with outer:
            try:
                await run(model, abort, tools=[make_tool("hold", sleep_in_tool)])
            except trio.Cancelled as exc:
                escaped.append(exc)
                raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await trio.testing.wait_all_tasks_blocked()
        abort.cancel()
        outer.cancel()
    assert len(escaped) == 1
    assert "sleep_in_tool" in _frame_names(escaped[0])


def test_a_pending_keyboard_interrupt_starts_no_further_tool() -> None:
    executed: list[str] = []

    async def quick(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        executed.append(call_id)
        return ToolResult.text("ok")

    async def interrupt_at_first_start(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            signal.raise_signal(signal.SIGINT)  # pending until the next checkpoint

    async def main() -> None:
        model = faux.model([faux.reply(*(faux.tool_call("quick", {}, id=i) for i in "abc"))])
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[make_tool("quick", quick, execution_mode="sequential")]),
            AgentLoopConfig(model=model),
            interrupt_at_first_start,
        )

    with pytest.raises(KeyboardInterrupt):
        trio.run(main, restrict_keyboard_interrupt_to_checkpoints=True)
    assert executed == []


def test_an_interrupt_at_an_event_keeps_the_event_for_the_agents_state() -> None:
    # The interrupt is pending from message_start of the tool result; the loop
    # raises it before message_end, which the agent's state still takes.
    async def quick(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text("ok")

    async def interrupt_in_the_result(event: AgentEvent) -> None:
        if event.type == "message_start" and event.message.role == "toolResult":
            signal.raise_signal(signal.SIGINT)  # pending until the next check

    model = faux.model([faux.reply(faux.tool_call("quick", {}, id="a")), "done"])
    agent = Agent(model, tools=[make_tool("quick", quick)])
    agent.subscribe(interrupt_in_the_result)
    with pytest.raises(KeyboardInterrupt):
        trio.run(agent.prompt, "go", restrict_keyboard_interrupt_to_checkpoints=True)
    assert [message.role for message in agent.state.messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert agent_problems(agent) == []
