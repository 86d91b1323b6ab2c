"""Errors that end a run: one exception escapes, the original, never a group.

design.md#errors-that-end-a-run, invariant 8.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio

from tests._support import make_tool
from trio_agent import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    Message,
    StreamOptions,
    ToolResult,
    ToolUpdate,
    TurnContext,
    UserMessage,
    run_agent_loop,
)
from trio_agent._errors import ListenerFailed, one_exception
from trio_agent.providers import AssistantMessageBuilder, faux
from trio_agent.testing import EventRecorder


class Boom(Exception):
    pass


def tool_reply() -> faux.Reply:
    return faux.reply(faux.tool_call("wait", {}, id="t1"), faux.tool_call("wait", {}, id="t2"))


async def wait_forever(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    on_update(ToolResult.text("waiting"))
    await trio.sleep_forever()
    raise AssertionError


WAIT = make_tool("wait", wait_forever)


async def run(emit: Any, *, stream_fn: Any = None, **config: Any) -> list[AgentMessage]:
    return await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[WAIT]),
        AgentLoopConfig(model=config.pop("model", faux.model([tool_reply(), "done"])), **config),
        emit,
        stream_fn=stream_fn,
    )


EVENT_KINDS = [
    "agent_start",
    "turn_start",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
]


@pytest.mark.parametrize("kind", EVENT_KINDS)
async def test_a_listener_error_escapes_as_itself(kind: str) -> None:
    error = Boom(kind)

    async def emit(event: AgentEvent) -> None:
        if event.type == kind:
            raise error

    with pytest.raises(Boom) as caught:
        await run(emit)
    assert caught.value is error


async def test_a_listener_error_while_parallel_tools_run_cancels_them() -> None:
    error = Boom("listener")
    cancelled: list[str] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text("tick"))
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(call_id)
            raise
        raise AssertionError

    async def emit(event: AgentEvent) -> None:
        if event.type == "tool_execution_update" and event.tool_call_id == "t2":
            raise error

    with pytest.raises(Boom) as caught:
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[make_tool("wait", execute)]),
            AgentLoopConfig(model=faux.model([tool_reply()])),
            emit,
        )
    assert caught.value is error
    assert sorted(cancelled) == ["t1", "t2"]


async def test_a_listener_error_from_the_update_pump_escapes_as_itself() -> None:
    error = Boom("pump")

    async def emit(event: AgentEvent) -> None:
        if event.type == "tool_execution_update":
            raise error

    model = faux.model([faux.reply(faux.tool_call("wait", {}, id="t1")), "done"])
    with pytest.raises(Boom) as caught:
        await run(emit, model=model)
    assert caught.value is error


async def test_a_provider_that_catches_exceptions_cannot_swallow_a_listener_error() -> None:
    error = Boom("listener")

    async def careless_stream(
        model: Any, context: LlmContext, options: StreamOptions, emit: Any
    ) -> AssistantMessage:
        builder = AssistantMessageBuilder(api="x", provider="x", model="x")
        try:
            await emit(builder.start())
            await emit(builder.text_start())
        except Exception as exc:  # what a sloppy provider does with network errors
            message = builder.finish("error", str(exc))
            await emit(builder.done(message))
            return message
        message = builder.finish("stop")
        await emit(builder.done(message))
        return message

    async def emit(event: AgentEvent) -> None:
        if event.type == "message_update":
            raise error

    with pytest.raises(Boom) as caught:
        await run(emit, stream_fn=careless_stream)
    assert caught.value is error


async def test_a_stream_function_that_raises_has_broken_its_contract() -> None:
    error = Boom("provider bug")
    model = faux.model([faux.Reply(raises=error)])
    with pytest.raises(Boom) as caught:
        await run(EventRecorder(), model=model)
    assert caught.value is error


async def test_a_stream_function_returning_garbage_is_a_type_error() -> None:
    async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> Any:
        return "not a message"

    with pytest.raises(TypeError, match="returned 'not a message', not an AssistantMessage"):
        await run(EventRecorder(), stream_fn=stream_fn)


async def raise_boom(*args: Any) -> Any:
    raise Boom("hook")


@pytest.mark.parametrize(
    "hook",
    [
        "transform_context",
        "convert_to_llm",
        "get_api_key",
        "get_steering_messages",
        "get_follow_up_messages",
        "should_stop_after_turn",
        "prepare_next_turn",
    ],
)
async def test_a_failing_hook_ends_the_run_with_its_exception(hook: str) -> None:
    recorder = EventRecorder()
    model = faux.model([faux.reply(faux.tool_call("echo", {}, id="t1")), "done", "more"])

    async def echo(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text("ok")

    with pytest.raises(Boom, match="hook"):
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[make_tool("echo", echo)]),
            attrs.evolve(AgentLoopConfig(model=model), **{hook: raise_boom}),  # type: ignore[arg-type]  # a hook
            recorder,
        )
    assert "agent_end" not in recorder.types


def test_of_several_failures_the_first_escapes_with_a_note_of_the_others() -> None:
    first, second = Boom("first"), Boom("second")
    chosen = one_exception(ExceptionGroup("x", [first, ExceptionGroup("y", [second])]))
    assert chosen is first
    assert first.__notes__ == ["trio_agent: the run also raised Boom('second')"]


def test_keyboard_interrupt_wins_over_other_failures() -> None:
    interrupt = KeyboardInterrupt()
    assert one_exception(BaseExceptionGroup("x", [Boom("a"), interrupt])) is interrupt


def test_a_listener_failure_is_unwrapped() -> None:
    error = Boom("listener")
    assert one_exception(BaseExceptionGroup("x", [ListenerFailed(error)])) is error


async def test_convert_to_llm_hooks_receive_a_read_only_view() -> None:
    seen: list[Sequence[AgentMessage]] = []

    async def convert(messages: Sequence[AgentMessage]) -> list[Message]:
        seen.append(messages)
        return [m for m in messages if isinstance(m, UserMessage | AssistantMessage)]

    await run(EventRecorder(), model=faux.model(["hi"]), convert_to_llm=convert)
    assert not hasattr(seen[0], "append")


async def test_should_stop_after_turn_errors_are_not_swallowed_by_abort() -> None:
    abort = trio.CancelScope()

    async def stop(turn: TurnContext) -> bool:
        abort.cancel()
        raise Boom("hook")

    with pytest.raises(Boom):
        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(),
            AgentLoopConfig(model=faux.model(["hi"]), should_stop_after_turn=stop),
            EventRecorder(),
            abort,
        )


def test_stream_events_type_is_exported() -> None:
    event: AssistantMessageEvent = AssistantMessageBuilder(api="a", provider="p", model="m").start()
    assert event.type == "start"
