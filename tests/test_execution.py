"""Tool execution: preparation, hooks, modes, ordering, updates, termination
(design.md#tool-execution)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests._support import ECHO, ECHO_SCHEMA, make_tool
from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentTool,
    BeforeToolCallContext,
    BeforeToolCallResult,
    NextTurn,
    TextContent,
    ToolDefinitionError,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    TurnContext,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript


def sleeper(name: str = "sleep", **kwargs: Any) -> AgentTool:
    """A tool sleeping ``args["ms"]`` milliseconds, then answering ``name:id``."""

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep(args.get("ms", 0) / 1000)
        return ToolResult.text(f"{name}:{call_id}")

    return make_tool(name, execute, **kwargs)


def calls(*specs: tuple[str, str, dict[str, Any]]) -> faux.Reply:
    return faux.reply(*(faux.tool_call(name, args, id=call_id) for call_id, name, args in specs))


async def run(
    reply: faux.Reply, tools: list[AgentTool], **config: Any
) -> tuple[list[AgentMessage], EventRecorder]:
    recorder = EventRecorder()
    model = faux.model([reply, "done"])
    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=model, **config),
        recorder,
    )
    check_event_grammar(recorder.events)
    check_transcript(messages)
    return messages, recorder


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


THREE = calls(("t1", "sleep", {"ms": 60}), ("t2", "sleep", {"ms": 20}), ("t3", "sleep", {"ms": 40}))


async def test_parallel_calls_start_in_source_order_and_end_as_they_finish(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = trio.current_time()
    messages, recorder = await run(THREE, [sleeper()])
    assert recorder.tool_order("start") == ["t1", "t2", "t3"]
    assert recorder.tool_order("end") == ["t2", "t3", "t1"]
    assert [r[0] for r in results(messages)] == ["t1", "t2", "t3"]
    assert trio.current_time() - start == pytest.approx(0.060)


async def test_parallel_results_are_emitted_after_every_end(
    autojump_clock: trio.abc.Clock,
) -> None:
    _, recorder = await run(THREE, [sleeper()])
    events = recorder.events
    ends = [i for i, e in enumerate(events) if e.type == "tool_execution_end"]
    result_starts = [
        i
        for i, e in enumerate(events)
        if e.type == "message_start" and e.message.role == "toolResult"
    ]
    assert len(ends) == len(result_starts) == 3
    assert max(ends) < min(result_starts)


async def test_calls_finishing_together_end_in_source_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Calls that finish at the same moment (here the same virtual time) end in source
    order, though Trio runs tasks woken together in a random order; calls that finish
    at different moments end in the order they finished (the test below)."""
    reply = calls(*((f"t{i}", "sleep", {"ms": 5}) for i in range(8)))
    for _ in range(5):  # Trio shuffles tasks that run together; the order must not move
        _, recorder = await run(reply, [sleeper()])
        assert recorder.tool_order("end") == [f"t{i}" for i in range(8)]


async def test_sequential_config_runs_one_call_after_another(
    autojump_clock: trio.abc.Clock,
) -> None:
    start = trio.current_time()
    _, recorder = await run(THREE, [sleeper()], tool_execution="sequential")
    per_call = [
        (e.type, getattr(e, "tool_call_id", None) or e.message.tool_call_id)  # type: ignore[union-attr]  # tool events
        for e in recorder.events
        if e.type.startswith("tool_")
        or (e.type == "message_start" and e.message.role == "toolResult")
    ]
    assert per_call == [
        (kind, call_id)
        for call_id in ("t1", "t2", "t3")
        for kind in ("tool_execution_start", "tool_execution_end", "message_start")
    ]
    assert trio.current_time() - start == pytest.approx(0.120)


async def test_one_sequential_tool_makes_the_whole_batch_sequential(
    autojump_clock: trio.abc.Clock,
) -> None:
    reply = calls(("t1", "sleep", {"ms": 30}), ("t2", "slow", {"ms": 10}))
    _, recorder = await run(reply, [sleeper(), sleeper("slow", execution_mode="sequential")])
    assert recorder.tool_order("end") == ["t1", "t2"]  # in parallel, t2 would end first


async def test_a_sequential_tool_swapped_in_between_turns_makes_its_batch_sequential(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def prepare(turn: TurnContext) -> NextTurn:
        tools = [sleeper(), sleeper("slow", execution_mode="sequential")]
        return NextTurn(context=AgentContext(messages=turn.context.messages, tools=tools))

    second = calls(("t2", "sleep", {"ms": 30}), ("t3", "slow", {"ms": 10}))
    model = faux.model([calls(("t1", "echo", {"value": "v"})), second, "done"])
    recorder = EventRecorder()
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, prepare_next_turn=prepare),
        recorder,
    )
    assert recorder.tool_order("end") == ["t1", "t2", "t3"]  # in parallel, t3 ends before t2


async def test_an_unknown_tool_is_answered_at_once_during_preparation() -> None:
    reply = calls(("t1", "nope", {"x": 1}), ("t2", "echo", {"value": "ok"}))
    messages, recorder = await run(reply, [ECHO])
    tool_events = [(e.type, e.tool_call_id) for e in recorder.events if e.type.startswith("tool_")]  # type: ignore[union-attr]  # by type
    assert tool_events == [
        ("tool_execution_start", "t1"),
        ("tool_execution_end", "t1"),
        ("tool_execution_start", "t2"),
        ("tool_execution_end", "t2"),
    ]
    assert results(messages) == [("t1", "Tool nope not found", True), ("t2", "echo:ok", False)]


async def test_invalid_arguments_are_an_error_result_with_pis_text() -> None:
    messages, _ = await run(calls(("t1", "echo", {})), [ECHO])
    assert results(messages) == [
        (
            "t1",
            'Validation failed for tool "echo":\n  - value: must have required properties value'
            "\n\nReceived arguments:\n{}",
            True,
        )
    ]


async def test_arguments_are_coerced_for_the_tool_but_events_keep_them_raw() -> None:
    seen: list[dict[str, Any]] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        seen.append(args)
        return ToolResult.text("ok")

    tool = make_tool("echo", execute, schema=ECHO_SCHEMA)
    _, recorder = await run(calls(("t1", "echo", {"value": 5})), [tool])
    assert seen == [{"value": "5"}]
    assert recorder.of("tool_execution_start")[0].args == {"value": 5}


async def test_prepare_arguments_rewrites_the_raw_arguments_before_validation() -> None:
    seen: list[dict[str, Any]] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        seen.append(args)
        return ToolResult.text("ok")

    tool = AgentTool(
        name="echo",
        description="",
        parameters=ECHO_SCHEMA,
        execute=execute,
        prepare_arguments=lambda raw: {"value": raw["old_name"]},
    )
    await run(calls(("t1", "echo", {"old_name": "v"})), [tool])
    assert seen == [{"value": "v"}]


async def test_a_failing_prepare_arguments_is_the_calls_error() -> None:
    def broken(raw: Any) -> Any:
        raise KeyError("shape")

    tool = AgentTool(
        name="echo",
        description="",
        parameters=ECHO_SCHEMA,
        execute=ECHO.execute,
        prepare_arguments=broken,
    )
    messages, _ = await run(calls(("t1", "echo", {"value": "v"})), [tool])
    assert results(messages) == [("t1", "'shape'", True)]


async def test_a_tool_that_raises_gives_an_error_result_with_its_message(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        raise OSError(f"disk full: {call_id}")

    messages, recorder = await run(
        calls(("t1", "write", {}), ("t2", "echo", {"value": "v"})),
        [make_tool("write", execute), ECHO],
    )
    assert results(messages) == [("t1", "disk full: t1", True), ("t2", "echo:v", False)]
    assert [e.is_error for e in recorder.of("tool_execution_end")] == [True, False]


async def test_an_exception_group_from_a_tool_is_data_too() -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        raise ExceptionGroup("two failures", [ValueError("a"), ValueError("b")])

    messages, _ = await run(calls(("t1", "multi", {})), [make_tool("multi", execute)])
    assert results(messages) == [("t1", "two failures (2 sub-exceptions)", True)]


async def test_an_exception_without_text_is_named_by_its_type() -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        raise RuntimeError

    messages, _ = await run(calls(("t1", "bare", {})), [make_tool("bare", execute)])
    assert results(messages) == [("t1", "RuntimeError", True)]


async def test_a_tool_returning_something_else_than_a_tool_result_is_an_error() -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> Any:
        return "just text"

    messages, _ = await run(calls(("t1", "odd", {})), [make_tool("odd", execute)])
    assert results(messages) == [("t1", "tool 'odd' returned str, not a ToolResult", True)]


async def test_keyboard_interrupt_from_a_tool_is_not_data() -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await run(calls(("t1", "ki", {})), [make_tool("ki", execute)])


async def test_before_tool_call_can_block_with_a_reason_or_the_default_text() -> None:
    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        if ctx.tool_call.id == "t1":
            return BeforeToolCallResult(block=True, reason="not allowed")
        if ctx.tool_call.id == "t2":
            return BeforeToolCallResult(block=True)
        return None

    reply = calls(
        ("t1", "echo", {"value": "a"}),
        ("t2", "echo", {"value": "b"}),
        ("t3", "echo", {"value": "c"}),
    )
    messages, _ = await run(reply, [ECHO], before_tool_call=before)
    assert results(messages) == [
        ("t1", "not allowed", True),
        ("t2", "Tool execution was blocked", True),
        ("t3", "echo:c", False),
    ]


async def test_before_tool_call_sees_validated_arguments_and_may_change_them() -> None:
    seen: list[tuple[dict[str, Any], str]] = []

    async def before(ctx: BeforeToolCallContext) -> None:
        seen.append((dict(ctx.args), ctx.context.messages[-1].role))
        ctx.args["value"] = "changed"

    messages, _ = await run(calls(("t1", "echo", {"value": 7})), [ECHO], before_tool_call=before)
    assert seen == [({"value": "7"}, "assistant")]
    assert results(messages) == [("t1", "echo:changed", False)]


async def test_a_blocking_before_hook_may_terminate_the_batch() -> None:
    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, reason="stop here", terminate=True)

    recorder = EventRecorder()
    model = faux.model([calls(("t1", "echo", {"value": "a"})), "unused"])
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, before_tool_call=before),
        recorder,
    )
    assert len(model.calls) == 1
    assert recorder.of("tool_execution_end")[0].result.terminate is True


async def test_an_abort_while_a_before_hook_blocks_a_call_aborts_it() -> None:
    abort = trio.CancelScope()

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult:
        abort.cancel()  # the hook does not notice; its verdict comes too late
        return BeforeToolCallResult(block=True, reason="blocked")

    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(
            model=faux.model([calls(("t1", "echo", {"value": "a"}))]), before_tool_call=before
        ),
        recorder,
        abort,
    )
    assert results(messages) == [("t1", "Operation aborted", True)]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_before_tool_call_is_asked_only_about_calls_that_can_run(mode: str) -> None:
    asked: list[str] = []

    async def before(ctx: BeforeToolCallContext) -> None:
        asked.append(ctx.tool_call.id)

    reply = calls(
        ("t1", "nope", {}),  # no such tool
        ("t2", "echo", {"value": "ok"}),
        ("t3", "echo", {}),  # invalid arguments
        ("t4", "echo", {"value": "ok"}),
    )
    messages, _ = await run(reply, [ECHO], before_tool_call=before, tool_execution=mode)
    assert asked == ["t2", "t4"]
    assert [is_error for _, _, is_error in results(messages)] == [True, False, True, False]


async def test_a_failing_before_hook_is_the_calls_error() -> None:
    async def before(ctx: BeforeToolCallContext) -> None:
        raise PermissionError("policy engine down")

    messages, _ = await run(calls(("t1", "echo", {"value": "a"})), [ECHO], before_tool_call=before)
    assert results(messages) == [("t1", "policy engine down", True)]


async def test_after_tool_call_overrides_field_by_field() -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult(content=(TextContent("raw"),), details={"raw": True})

    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        if ctx.tool_call.id == "t1":
            return AfterToolCallResult(content=[TextContent("redacted")])
        if ctx.tool_call.id == "t2":
            return AfterToolCallResult(is_error=True, details={"audited": True})
        raise LookupError("audit failed")

    reply = calls(("t1", "work", {}), ("t2", "work", {}), ("t3", "work", {}))
    messages, _ = await run(reply, [make_tool("work", execute)], after_tool_call=after)
    assert results(messages) == [
        ("t1", "redacted", False),
        ("t2", "raw", True),
        ("t3", "audit failed", True),
    ]
    details = [m.details for m in messages if isinstance(m, ToolResultMessage)]
    assert details == [{"raw": True}, {"audited": True}, {}]


async def test_after_tool_call_sees_the_error_of_a_failed_tool() -> None:
    seen: list[tuple[bool, ToolResult]] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        raise ValueError("crashed")

    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult:
        seen.append((ctx.is_error, ctx.result))
        return AfterToolCallResult(is_error=False, content=[TextContent("recovered")])

    messages, _ = await run(
        calls(("t1", "work", {})), [make_tool("work", execute)], after_tool_call=after
    )
    assert seen == [(True, ToolResult(content=(TextContent("crashed"),), details={}))]
    assert results(messages) == [("t1", "recovered", False)]


@pytest.mark.parametrize("terminates", [(True, True), (True, False)])
async def test_a_batch_terminates_only_when_every_result_asks(
    terminates: tuple[bool, bool],
) -> None:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text("x", terminate=terminates[int(call_id[1]) - 1])

    model = faux.model([calls(("t1", "fin", {}), ("t2", "fin", {})), "again"])
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[make_tool("fin", execute)]),
        AgentLoopConfig(model=model),
        EventRecorder(),
    )
    assert len(model.calls) == (1 if all(terminates) else 2)


async def test_after_tool_call_can_terminate_the_batch() -> None:
    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult:
        return AfterToolCallResult(terminate=True)

    model = faux.model([calls(("t1", "echo", {"value": "a"})), "unused"])
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, after_tool_call=after),
        EventRecorder(),
    )
    assert len(model.calls) == 1


async def test_a_truncated_reply_runs_none_of_its_calls() -> None:
    ran: list[str] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        ran.append(call_id)
        return ToolResult.text("ran")

    reply = faux.reply(
        faux.tool_call("work", {"a": 1}, id="t1"),
        faux.tool_call("nope", {}, id="t2"),
        stop_reason="length",
    )
    messages, recorder = await run(reply, [make_tool("work", execute)])
    assert ran == []
    text = (
        'Tool call "{}" was not executed: the response hit the output token limit, so its '
        "arguments may be truncated. Re-issue the tool call with complete arguments."
    )
    assert results(messages) == [
        ("t1", text.format("work"), True),
        ("t2", text.format("nope"), True),
    ]
    assert [e.type for e in recorder.events if e.type.startswith("tool_")] == [
        "tool_execution_start",
        "tool_execution_end",
    ] * 2
    assert [m.role for m in messages][-1] == "assistant"  # the model was asked again


async def test_updates_are_emitted_while_a_lone_tool_runs() -> None:
    seen_update = trio.Event()

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text("half way"))
        await seen_update.wait()  # only a live update lets the tool finish
        return ToolResult.text("done")

    async def on_event(event: Any) -> None:
        if event.type == "tool_execution_update":
            seen_update.set()

    recorder = EventRecorder(on_event)
    with trio.fail_after(5):
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[make_tool("slow", execute)]),
            AgentLoopConfig(model=faux.model([calls(("t1", "slow", {})), "done"])),
            recorder,
        )
    check_event_grammar(recorder.events)
    assert [e.partial_result.content[0].text for e in recorder.of("tool_execution_update")] == [
        "half way"
    ]
    assert recorder.types.index("tool_execution_update") < recorder.types.index(
        "tool_execution_end"
    )


async def test_updates_are_emitted_while_parallel_tools_run(
    autojump_clock: trio.abc.Clock,
) -> None:
    release = trio.Event()

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text(f"{call_id} started"))
        await release.wait()
        on_update(ToolResult.text(f"{call_id} finishing"))
        return ToolResult.text("done")

    async def on_event(event: Any) -> None:
        if event.type == "tool_execution_update" and event.tool_call_id == "t2":
            release.set()

    recorder = EventRecorder(on_event)
    with trio.fail_after(5):
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[make_tool("wait", execute)]),
            AgentLoopConfig(
                model=faux.model([calls(("t1", "wait", {}), ("t2", "wait", {})), "done"])
            ),
            recorder,
        )
    check_event_grammar(recorder.events)
    updates = [
        (e.tool_call_id, e.partial_result.content[0].text)
        for e in recorder.of("tool_execution_update")
    ]
    assert updates == [
        ("t1", "t1 started"),
        ("t2", "t2 started"),
        ("t1", "t1 finishing"),
        ("t2", "t2 finishing"),
    ]


async def test_updates_after_the_tool_returned_are_dropped() -> None:
    kept: list[ToolUpdate] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        kept.append(on_update)
        return ToolResult.text("done")

    async def on_event(event: Any) -> None:
        if event.type == "tool_execution_end":
            kept[0](ToolResult.text("late"))

    recorder = EventRecorder(on_event)
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[make_tool("t", execute)]),
        AgentLoopConfig(model=faux.model([calls(("t1", "t", {})), "done"])),
        recorder,
    )
    assert recorder.of("tool_execution_update") == []


async def test_one_prepared_call_among_failed_ones_runs_in_the_loop_task() -> None:
    tasks: list[trio.lowlevel.Task] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        tasks.append(trio.lowlevel.current_task())
        return ToolResult.text("ok")

    await run(calls(("t1", "nope", {}), ("t2", "mine", {})), [make_tool("mine", execute)])
    assert tasks == [trio.lowlevel.current_task()]


async def test_parallel_calls_run_as_child_tasks() -> None:
    tasks: list[trio.lowlevel.Task] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        tasks.append(trio.lowlevel.current_task())
        return ToolResult.text("ok")

    await run(calls(("t1", "mine", {}), ("t2", "mine", {})), [make_tool("mine", execute)])
    assert len(set(tasks)) == 2
    assert trio.lowlevel.current_task() not in tasks


def test_a_plain_function_as_execute_is_refused_with_a_hint() -> None:
    def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text("sync")

    with pytest.raises(
        ToolDefinitionError, match=r"execute must be an async function.*@trio_agent\.tool"
    ):
        AgentTool(name="s", description="", parameters={"type": "object"}, execute=execute)  # type: ignore[arg-type]  # bad input


@pytest.mark.parametrize("arguments", [["x"], "text", None, 5])
async def test_arguments_that_are_not_an_object_are_an_error_result(arguments: Any) -> None:
    from trio_agent import ToolCall

    reply = faux.reply(ToolCall("t1", "echo", arguments), emit_start=False)
    messages, _ = await run(reply, [ECHO])
    [(call_id, text, is_error)] = results(messages)
    assert (call_id, is_error) == ("t1", True)
    assert text.startswith('Validation failed for tool "echo":\n  - root: must be object\n')
