"""What a tool returns beyond its content: a returned ``is_error``, ``structured_content`` and
the tool's ``output_schema``, the ``duration`` of ``execute``, ``replay``; and
:func:`trio_agent.run_tool_call`, one call through the loop's steps for a program."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agent
from tests._support import ECHO, ECHO_SCHEMA, make_tool
from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentTool,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    TextContent,
    ToolCall,
    ToolCallOutcome,
    ToolDefinitionError,
    ToolExecutionEnd,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    UserMessage,
    _execution,
    run_agent_loop,
    run_tool_call,
    tool,
)
from trio_agent.providers import faux
from trio_agent.testing import (
    EventRecorder,
    Trial,
    assert_cancel_safe,
    check_event_grammar,
    check_transcript,
)

POINT_SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
    "required": ["x", "y"],
}


def text_of(content: Any) -> str:
    return "".join(block.text for block in content if isinstance(block, TextContent))


async def run(
    tools: list[AgentTool], *calls: ToolCall, **config: Any
) -> tuple[list[AgentMessage], EventRecorder]:
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=tools),
        AgentLoopConfig(model=faux.model([faux.reply(*calls), "done"]), **config),
        recorder,
    )
    check_event_grammar(recorder.events)
    check_transcript(messages)
    return messages, recorder


def ends(recorder: EventRecorder) -> dict[str, ToolExecutionEnd]:
    return {e.tool_call_id: e for e in recorder.events if isinstance(e, ToolExecutionEnd)}


def result_messages(messages: list[AgentMessage]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def returning(result: ToolResult, seconds: float = 0.0) -> Any:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep(seconds)
        return result

    return execute


# --- a returned is_error ---------------------------------------------------------------------


async def test_a_returned_is_error_is_an_error_that_keeps_details_and_structured_content() -> None:
    failed = ToolResult.text("disk full", details={"free": 0}, structured_content={"code": 28})
    failed = attrs.evolve(failed, is_error=True)
    seen: list[bool] = []

    async def after(ctx: AfterToolCallContext) -> None:
        seen.append(ctx.is_error)

    messages, recorder = await run(
        [make_tool("write", returning(failed))],
        faux.tool_call("write", {}, id="w1"),
        after_tool_call=after,
    )
    assert seen == [True]
    message = result_messages(messages)["w1"]
    assert (text_of(message.content), message.is_error, message.details) == (
        "disk full",
        True,
        {"free": 0},
    )
    end = ends(recorder)["w1"]
    assert end.is_error is True
    assert end.result.structured_content == {"code": 28}
    assert end.result.details == {"free": 0}


async def test_after_tool_call_may_clear_a_returned_is_error() -> None:
    failed = ToolResult.text("not found", is_error=True)

    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult:
        return AfterToolCallResult(is_error=False)

    messages, _ = await run(
        [make_tool("find", returning(failed))],
        faux.tool_call("find", {}, id="f1"),
        after_tool_call=after,
    )
    assert result_messages(messages)["f1"].is_error is False


# --- structured content -----------------------------------------------------------------------


async def test_structured_content_reaches_the_program_and_never_the_transcript() -> None:
    result = ToolResult.text("3,4", structured_content={"x": 3, "y": 4})
    messages, recorder = await run(
        [make_tool("point", returning(result))], faux.tool_call("point", {}, id="p1")
    )
    assert ends(recorder)["p1"].result.structured_content == {"x": 3, "y": 4}
    message = result_messages(messages)["p1"]
    assert not hasattr(message, "structured_content")
    assert "structuredContent" not in trio_agent.dumps(messages)


@pytest.mark.parametrize(
    ("override", "kept"),
    [
        (AfterToolCallResult(details={"d": 1}), {"x": 1, "y": 2}),  # no content: kept
        (AfterToolCallResult(content=[TextContent("new")]), None),  # content alone: dropped
        (
            AfterToolCallResult(content=[TextContent("new")], structured_content={"z": 0}),
            {"z": 0},
        ),
        (AfterToolCallResult(structured_content=[1, 2]), [1, 2]),
    ],
)
async def test_after_tool_call_follows_pis_rule_for_structured_content(
    override: AfterToolCallResult, kept: Any
) -> None:
    result = ToolResult.text("1,2", structured_content={"x": 1, "y": 2})

    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult:
        assert ctx.result.structured_content == {"x": 1, "y": 2}
        return override

    _, recorder = await run(
        [make_tool("point", returning(result))],
        faux.tool_call("point", {}, id="p1"),
        after_tool_call=after,
    )
    assert ends(recorder)["p1"].result.structured_content == kept


def point_tool(result: ToolResult, **kwargs: Any) -> AgentTool:
    return AgentTool(
        name="point",
        description="a point",
        parameters={"type": "object"},
        execute=returning(result),
        output_schema=POINT_SCHEMA,
        **kwargs,
    )


async def test_structured_content_that_matches_the_output_schema_passes() -> None:
    result = ToolResult.text("ok", structured_content={"x": 1, "y": 2})
    messages, _ = await run([point_tool(result)], faux.tool_call("point", {}, id="p1"))
    assert result_messages(messages)["p1"].is_error is False


async def test_structured_content_that_does_not_match_is_the_calls_error_naming_tool_and_value(
    autojump_clock: trio.abc.Clock,
) -> None:
    result = ToolResult.text("ok", structured_content={"x": "three"})
    messages, _ = await run(
        [attrs.evolve(point_tool(result), execute=returning(result, 0.25))],
        faux.tool_call("point", {}, id="p1"),
    )
    message = result_messages(messages)["p1"]
    assert message.is_error is True
    assert text_of(message.content) == (
        "Tool 'point' returned structured_content that does not match its output_schema:\n"
        "  - y: must have required properties y\n"
        "  - x: must be integer\n\n"
        'Received structured_content:\n{"x": "three"}'
    )
    assert message.duration == 0.25  # the tool ran


async def test_a_success_without_structured_content_is_not_checked() -> None:
    messages, _ = await run(
        [point_tool(ToolResult.text("ok"))], faux.tool_call("point", {}, id="p1")
    )
    message = result_messages(messages)["p1"]
    assert (message.is_error, text_of(message.content)) == (False, "ok")


async def test_an_error_result_is_not_checked_against_the_output_schema() -> None:
    failed = ToolResult.text("no point", is_error=True, structured_content={"why": "none"})
    messages, _ = await run([point_tool(failed)], faux.tool_call("point", {}, id="p1"))
    assert text_of(result_messages(messages)["p1"].content) == "no point"


async def test_a_huge_mismatching_value_is_shown_cut() -> None:
    result = ToolResult.text("ok", structured_content={"x": "a" * 5000, "y": 1})
    messages, _ = await run([point_tool(result)], faux.tool_call("point", {}, id="p1"))
    text = text_of(result_messages(messages)["p1"].content)
    assert text.endswith("… (5,017 characters)")
    assert len(text) < 1_300


def test_a_malformed_output_schema_is_refused_naming_output_schema() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        attrs.evolve(point_tool(ToolResult()), output_schema={"type": 5})
    assert str(info.value).startswith("tool 'point': output_schema is not a valid JSON Schema")
    with pytest.raises(ToolDefinitionError, match="output_schema must be a JSON Schema object"):
        attrs.evolve(point_tool(ToolResult()), output_schema=[1])  # type: ignore[arg-type]


# --- duration ----------------------------------------------------------------------------------


async def test_duration_is_the_time_of_execute_on_events_messages_and_json(
    autojump_clock: trio.abc.Clock,
) -> None:
    slow = make_tool("slow", returning(ToolResult.text("slow"), 1.5))
    fast = make_tool("fast", returning(ToolResult.text("fast"), 0.25))

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        await trio.sleep(10)  # a hook's time is not the tool's
        return BeforeToolCallResult(block=True) if ctx.tool_call.id == "b" else None

    messages, recorder = await run(
        [slow, fast, ECHO],
        faux.tool_call("slow", {}, id="s"),
        faux.tool_call("fast", {}, id="f"),
        faux.tool_call("echo", {}, id="invalid"),
        faux.tool_call("nope", {}, id="unknown"),
        faux.tool_call("fast", {}, id="b"),
        before_tool_call=before,
    )
    durations = {call_id: end.duration for call_id, end in ends(recorder).items()}
    assert durations == {"s": 1.5, "f": 0.25, "invalid": None, "unknown": None, "b": None}
    by_message = {key: m.duration for key, m in result_messages(messages).items()}
    assert by_message == durations
    written = [m for m in json.loads(trio_agent.dumps(messages)) if m["role"] == "toolResult"]
    assert {m["toolCallId"]: m.get("durationMs") for m in written} == {
        "s": 1500,
        "f": 250,
        "invalid": None,
        "unknown": None,
        "b": None,
    }
    assert "durationMs" not in written[2]  # left out, as pi leaves it out
    events = [json.loads(trio_agent.dumps(e)) for e in ends(recorder).values()]
    assert [e.get("durationMs") for e in events] == [None, None, None, 250, 1500]


async def test_a_timed_out_or_failing_tool_has_a_duration_too(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def stuck(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def fails(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep(0.5)
        raise RuntimeError("broke")

    messages, _ = await run(
        [make_tool("stuck", stuck), make_tool("fails", fails)],
        faux.tool_call("stuck", {}, id="s"),
        faux.tool_call("fails", {}, id="f"),
        tool_time_limit=2,
    )
    assert {k: (m.is_error, m.duration) for k, m in result_messages(messages).items()} == {
        "s": (True, 2.0),
        "f": (True, 0.5),
    }


def test_a_pi_1_6_tool_result_with_duration_ms_loads() -> None:
    text = json.dumps(
        [
            {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "read",
                "content": [{"type": "text", "text": "ok"}],
                "isError": False,
                "durationMs": 42,
                "timestamp": 1,
            }
        ]
    )
    (message,) = trio_agent.loads(text)
    assert isinstance(message, ToolResultMessage)
    assert message.duration == 0.042
    assert json.loads(trio_agent.dumps([message])) == json.loads(text)


@pytest.mark.parametrize("bad", [-1, True, "5", [1]])
def test_a_duration_ms_that_is_not_a_number_of_milliseconds_is_refused(bad: Any) -> None:
    text = json.dumps(
        [{"role": "toolResult", "toolCallId": "c", "toolName": "t", "durationMs": bad}]
    )
    with pytest.raises(trio_agent.TranscriptError, match=r"milliseconds.*@ \$\[0\]\.durationMs"):
        trio_agent.loads(text)


# --- replay -----------------------------------------------------------------------------------


def test_replay_is_carried_on_the_tool_and_through_the_decorator() -> None:
    assert attrs.evolve(ECHO, replay="safe").replay == "safe"
    assert ECHO.replay is None

    @tool(replay="never")
    async def charge(amount: int) -> str:
        """Charge a card."""
        return "charged"

    assert charge.replay == "never"
    with pytest.raises(ToolDefinitionError, match="tool 'echo': replay must be 'never', 'safe'"):
        attrs.evolve(ECHO, replay="always")  # type: ignore[arg-type]


def test_the_decorator_passes_an_output_schema() -> None:
    @tool(output_schema=POINT_SCHEMA)
    async def origin() -> ToolResult:
        """The origin."""
        return ToolResult.text("0,0", structured_content={"x": 0, "y": 0})

    assert origin.output_schema == POINT_SCHEMA


async def test_a_decorated_tools_returned_object_is_checked_against_its_output_schema() -> None:
    @tool(output_schema=POINT_SCHEMA)
    async def point(x: int) -> dict[str, Any]:
        """A point."""
        return {"x": x, "y": 0} if x >= 0 else {"x": "negative"}

    good = await run_tool_call(
        ToolCall("c1", "point", {"x": 3}),
        tools=[point],
        assistant_message=ASSISTANT,
        context=CONTEXT,
    )
    assert not good.is_error
    assert good.result.structured_content == {"x": 3, "y": 0}
    bad = await run_tool_call(
        ToolCall("c2", "point", {"x": -1}),
        tools=[point],
        assistant_message=ASSISTANT,
        context=CONTEXT,
    )
    assert bad.is_error
    assert "does not match its output_schema" in text_of(bad.result.content)


# --- run_tool_call ------------------------------------------------------------------------------

ASSISTANT = AssistantMessage(content=())
CONTEXT = AgentContext(tools=[ECHO])


async def test_run_tool_call_runs_one_call_through_the_loops_steps(
    autojump_clock: trio.abc.Clock,
) -> None:
    seen: list[Any] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text("halfway"))
        await trio.sleep(0.75)
        return ToolResult.text(f"{args['n'] * 2}", structured_content={"x": args["n"], "y": 0})

    double = AgentTool(
        name="double",
        description="double",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        execute=execute,
        prepare_arguments=lambda raw: {"n": raw["number"]},
        output_schema=POINT_SCHEMA,
    )

    async def before(ctx: BeforeToolCallContext) -> None:
        seen.append(("before", ctx.args, ctx.assistant_message is ASSISTANT, ctx.context))

    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult:
        seen.append(("after", ctx.result.structured_content))
        return AfterToolCallResult(details={"checked": True})

    updates: list[ToolResult] = []
    call = ToolCall("c1", "double", {"number": "7"})
    outcome = await run_tool_call(
        call,
        tools=[double, attrs.evolve(double, description="shadowed")],
        assistant_message=ASSISTANT,
        context=CONTEXT,
        before_tool_call=before,
        after_tool_call=after,
        on_update=updates.append,
    )
    assert outcome == ToolCallOutcome(
        tool_call=call,
        result=ToolResult.text(
            "14", details={"checked": True}, structured_content={"x": 7, "y": 0}
        ),
        is_error=False,
        duration=0.75,
    )
    assert seen == [("before", {"n": 7}, True, CONTEXT), ("after", {"x": 7, "y": 0})]
    assert updates == [ToolResult.text("halfway")]


async def test_run_tool_call_blocked_by_its_before_hook_never_runs_the_tool() -> None:
    ran: list[str] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        ran.append(call_id)
        return ToolResult.text("deleted")

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, reason="not allowed", terminate=True)

    outcome = await run_tool_call(
        ToolCall("c1", "rm", {}),
        tools=[make_tool("rm", execute)],
        assistant_message=ASSISTANT,
        context=CONTEXT,
        before_tool_call=before,
    )
    assert ran == []
    assert (text_of(outcome.result.content), outcome.is_error, outcome.duration) == (
        "not allowed",
        True,
        None,
    )
    assert outcome.result.terminate is True


async def raises(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    raise RuntimeError("tool broke")


async def failing_before(ctx: BeforeToolCallContext) -> None:
    raise RuntimeError("hook broke")


async def failing_after(ctx: AfterToolCallContext) -> None:
    raise RuntimeError("after broke")


@pytest.mark.parametrize(
    ("call", "hooks", "text"),
    [
        (ToolCall("c", "nope", {}), {}, "Tool nope not found"),
        (ToolCall("c", "echo", {}), {}, "must have required properties value"),
        (ToolCall("c", "boom", {}), {}, "tool broke"),
        (ToolCall("c", "echo", {"value": "v"}), {"before_tool_call": failing_before}, "hook broke"),
        (ToolCall("c", "echo", {"value": "v"}), {"after_tool_call": failing_after}, "after broke"),
        (ToolCall("c", "denied", {}), {}, "denied"),
    ],
)
async def test_run_tool_call_never_raises_for_a_failure_of_the_call(
    call: ToolCall, hooks: dict[str, Any], text: str
) -> None:
    denied = make_tool("denied", returning(ToolResult.text("denied", is_error=True)))
    outcome = await run_tool_call(
        call,
        tools=[ECHO, make_tool("boom", raises), denied],
        assistant_message=ASSISTANT,
        context=CONTEXT,
        **hooks,
    )
    assert outcome.is_error is True
    assert text in text_of(outcome.result.content)


async def test_run_tool_call_bounds_the_tool_by_time_limit(autojump_clock: trio.abc.Clock) -> None:
    async def stuck(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    outcome = await run_tool_call(
        ToolCall("c", "stuck", {}),
        tools=[make_tool("stuck", stuck)],
        assistant_message=ASSISTANT,
        context=CONTEXT,
        time_limit=3,
    )
    assert (text_of(outcome.result.content), outcome.duration) == (
        "Tool 'stuck' did not finish within 3 s",
        3.0,
    )


async def test_run_tool_call_refuses_a_sync_hook_bad_tools_and_a_bad_time_limit() -> None:
    def sync_before(ctx: BeforeToolCallContext) -> None:
        return None

    with pytest.raises(TypeError, match="before_tool_call must be an async function"):
        await run_tool_call(
            ToolCall("c", "echo", {"value": "v"}),
            tools=[ECHO],
            assistant_message=ASSISTANT,
            context=CONTEXT,
            before_tool_call=sync_before,  # type: ignore[arg-type]
        )
    with pytest.raises(TypeError, match="tools must be AgentTool objects, not 'echo'"):
        await run_tool_call(
            ToolCall("c", "echo", {"value": "v"}),
            tools=["echo"],  # type: ignore[list-item]
            assistant_message=ASSISTANT,
            context=CONTEXT,
        )
    with pytest.raises(TypeError, match="tool_call must be a ToolCall, not"):
        await run_tool_call(
            {"id": "c", "name": "echo"},  # type: ignore[arg-type]
            tools=[ECHO],
            assistant_message=ASSISTANT,
            context=CONTEXT,
        )
    with pytest.raises(ValueError, match=r"run_tool_call: time_limit .* not -1"):
        await run_tool_call(
            ToolCall("c", "echo", {"value": "v"}),
            tools=[ECHO],
            assistant_message=ASSISTANT,
            context=CONTEXT,
            time_limit=-1,
        )


@pytest.mark.parametrize("where", ["before", "tool", "after"])
async def test_a_cancelled_caller_gets_cancelled_wherever_run_tool_call_waits(
    autojump_clock: trio.abc.Clock, where: str
) -> None:
    async def wait_if(here: str) -> None:
        if here == where:
            await trio.sleep_forever()

    async def before(ctx: BeforeToolCallContext) -> None:
        await wait_if("before")

    async def after(ctx: AfterToolCallContext) -> None:
        await wait_if("after")

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await wait_if("tool")
        return ToolResult.text("done")

    outcomes: list[ToolCallOutcome] = []
    with trio.move_on_after(1) as scope:
        outcomes.append(
            await run_tool_call(
                ToolCall("c", "t", {}),
                tools=[make_tool("t", execute)],
                assistant_message=ASSISTANT,
                context=CONTEXT,
                before_tool_call=before,
                after_tool_call=after,
            )
        )
    assert scope.cancelled_caught
    assert outcomes == []


async def test_an_already_cancelled_caller_runs_no_hook() -> None:
    asked: list[str] = []

    async def before(ctx: BeforeToolCallContext) -> None:
        asked.append("before")

    with trio.CancelScope() as scope:
        scope.cancel()
        await run_tool_call(
            ToolCall("c", "echo", {"value": "v"}),
            tools=[ECHO],
            assistant_message=ASSISTANT,
            context=CONTEXT,
            before_tool_call=before,
        )
    assert asked == []


def dispatcher(
    before: Any, after: Any
) -> AgentTool:  # a tool that calls another tool with the run's hooks
    async def slow_echo(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep(0.3)
        return ToolResult.text(args["value"])

    inner = make_tool("slow_echo", slow_echo, schema=ECHO_SCHEMA)

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        outcomes = []
        for index, value in enumerate(["a", "secret", "c"]):
            outcome = await run_tool_call(
                ToolCall(f"{call_id}.{index}", "slow_echo", {"value": value}),
                tools=[inner],
                assistant_message=ASSISTANT,
                context=CONTEXT,
                before_tool_call=before,
                after_tool_call=after,
            )
            outcomes.append(text_of(outcome.result.content))
        return ToolResult.text(" ".join(outcomes))

    return make_tool("dispatch", execute)


async def hold_then_block_secrets(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
    await trio.sleep(0.2)
    if ctx.args.get("value") == "secret":
        return BeforeToolCallResult(block=True, reason="blocked")
    return None


async def hold_after(ctx: AfterToolCallContext) -> None:
    await trio.sleep(0.1)


async def test_a_tool_calling_tools_gets_the_same_permission_hooks(
    autojump_clock: trio.abc.Clock,
) -> None:
    messages, _ = await run(
        [dispatcher(hold_then_block_secrets, hold_after)],
        faux.tool_call("dispatch", {}, id="d"),
        before_tool_call=hold_then_block_secrets,
    )
    assert text_of(result_messages(messages)["d"].content) == "a blocked c"


async def test_abort_at_every_point_while_run_tool_calls_hooks_or_tool_wait(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def scenario(trial: Trial) -> list[AgentMessage]:
        prompts: list[AgentMessage] = [UserMessage.text("go")]
        tools = trial.tools([dispatcher(hold_then_block_secrets, hold_after)])
        config = AgentLoopConfig(
            model=faux.model([faux.reply(faux.tool_call("dispatch", {}, id="d")), "done"]),
            before_tool_call=hold_then_block_secrets,
        )
        new = await run_agent_loop(
            prompts, AgentContext(tools=tools), config, trial.recorder, abort=trial.abort
        )
        return [*prompts, *new]

    report = await assert_cancel_safe(scenario)
    assert report.points > 10


def test_durations_read_the_runs_clock() -> None:
    async def system() -> tuple[float, float]:
        return _execution.timer()(), trio.current_time()

    read, current = trio.run(system)
    assert 0 <= current - read < 1  # Trio's own clock, read through the run

    async def virtual() -> float:
        now = _execution.timer()
        started = now()
        await trio.sleep(2.5)
        return now() - started

    clock = trio.testing.MockClock(autojump_threshold=0)
    assert trio.run(virtual, clock=clock) == 2.5
