"""The turn state machine of run_agent_loop / run_agent_loop_continue
(design.md#the-order-of-events)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests._support import ECHO
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    AssistantMessageEvent,
    LlmMessage,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    NextTurn,
    StreamDone,
    StreamError,
    StreamOptions,
    StreamStart,
    TextContent,
    TextDelta,
    TextEnd,
    TextStart,
    ToolResultMessage,
    TurnContext,
    UnknownApiError,
    UserMessage,
    default_convert_to_llm,
    run_agent_loop,
    run_agent_loop_continue,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript


def hi() -> list[AgentMessage]:
    return [UserMessage.text("hi")]


async def run(
    model: faux.ScriptedModel,
    prompts: Sequence[AgentMessage] | None = None,
    context: AgentContext | None = None,
    **config: Any,
) -> tuple[list[AgentMessage], EventRecorder]:
    recorder = EventRecorder()
    messages = await run_agent_loop(
        hi() if prompts is None else prompts,
        context or AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, **config),
        recorder,
    )
    check_event_grammar(recorder.events)
    return messages, recorder


async def test_a_text_reply_is_one_turn() -> None:
    messages, recorder = await run(faux.model(["Hello!"]))
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_update",
        "message_update",
        "message_update",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in messages] == ["user", "assistant"]
    assert isinstance(messages[1], AssistantMessage)
    assert messages[1].text == "Hello!"


async def test_the_run_returns_its_new_messages_and_leaves_the_context_alone() -> None:
    old: list[AgentMessage] = [UserMessage.text("old")]
    kept = list(old)
    context = AgentContext(messages=old, tools=[ECHO])
    messages, recorder = await run(faux.model(["new"]), context=context)
    assert old == kept
    assert context.messages is old
    assert [m.role for m in messages] == ["user", "assistant"]
    assert recorder.events[-1].messages == tuple(messages)  # type: ignore[union-attr]  # an AgentEnd


async def test_prompts_are_announced_in_order_before_the_first_reply() -> None:
    prompts: list[AgentMessage] = [UserMessage.text("one"), UserMessage.text("two")]
    _, recorder = await run(faux.model(["ok"]), prompts)
    starts = [e.message for e in recorder.of("message_start")]
    assert starts[:2] == prompts
    assert recorder.types[:6] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
    ]


async def test_tool_results_go_back_to_the_model() -> None:
    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "x"}, id="t1")), "done"])
    messages, recorder = await run(model)
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    result = messages[2]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.content, result.is_error) == (
        "t1",
        (TextContent("echo:x"),),
        False,
    )
    assert list(model.calls[1].context.messages) == messages[:3]
    turn_end = recorder.of("turn_end")[0]
    assert turn_end.tool_results == (result,)
    check_transcript(messages)


async def test_a_turn_without_tool_calls_ends_the_run() -> None:
    model = faux.model(["only", "never used"])
    await run(model)
    assert len(model.calls) == 1
    assert model.remaining == 1


async def test_every_reply_of_the_model_is_a_turn() -> None:
    model = faux.model(
        [
            faux.reply(faux.tool_call("echo", {"value": "1"}, id="a")),
            faux.reply(faux.tool_call("echo", {"value": "2"}, id="b")),
            "done",
        ]
    )
    _, recorder = await run(model)
    assert recorder.types.count("turn_start") == 3
    assert recorder.types.count("turn_end") == 3


async def test_steering_is_polled_at_the_start_and_after_each_turn() -> None:
    early = UserMessage.text("early")
    queue: list[AgentMessage] = [early]
    polls: list[int] = []

    async def steering() -> list[AgentMessage]:
        polls.append(len(polls))
        taken, queue[:] = list(queue), []
        return taken

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "done"])
    messages, _ = await run(model, get_steering_messages=steering)
    assert [m.role for m in messages][:3] == ["user", "user", "assistant"]
    assert messages[1] is early
    # Before the first turn; after turn 1; again just before turn 2 (the poll
    # after turn 1 found nothing); after turn 2.
    assert len(polls) == 4


async def test_steering_during_a_turn_is_injected_before_the_next_model_call() -> None:
    queue: list[AgentMessage] = []
    steer = UserMessage.text("change of plan")

    async def steering() -> list[AgentMessage]:
        taken, queue[:] = list(queue), []
        return taken

    async def on_event(event: Any) -> None:
        if event.type == "tool_execution_start":
            queue.append(steer)

    recorder = EventRecorder(on_event)
    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "ok"])
    messages = await run_agent_loop(
        hi(),
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, get_steering_messages=steering),
        recorder,
    )
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "user", "assistant"]
    assert messages[3] is steer
    assert list(model.calls[1].context.messages)[-1] is steer


async def test_steering_after_a_text_turn_starts_another_turn() -> None:
    queue: list[AgentMessage] = [UserMessage.text("more")]
    polls = 0

    async def steering() -> list[AgentMessage]:
        nonlocal polls
        polls += 1
        if polls == 2:
            taken, queue[:] = list(queue), []
            return taken
        return []

    model = faux.model(["first", "second"])
    messages, _ = await run(model, get_steering_messages=steering)
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]


async def test_follow_ups_wait_until_the_agent_would_stop() -> None:
    follow = UserMessage.text("and then?")
    given = False

    async def follow_ups() -> list[AgentMessage]:
        nonlocal given
        if given:
            return []
        given = True
        return [follow]

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "one", "two"])
    messages, recorder = await run(model, get_follow_up_messages=follow_ups)
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[4] is follow
    assert recorder.types.count("turn_start") == 3


async def test_should_stop_after_turn_ends_the_run_after_that_turn() -> None:
    seen: list[TurnContext] = []

    async def stop(turn: TurnContext) -> bool:
        seen.append(turn)
        return True

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "unused"])
    messages, recorder = await run(model, should_stop_after_turn=stop)
    assert len(model.calls) == 1
    assert recorder.types[-2:] == ["turn_end", "agent_end"]
    assert len(seen) == 1
    assert seen[0].message is messages[1]
    assert seen[0].tool_results == (messages[2],)
    assert list(seen[0].new_messages) == messages


async def test_prepare_next_turn_runs_only_before_a_further_turn() -> None:
    calls: list[TurnContext] = []

    async def prepare(turn: TurnContext) -> NextTurn | None:
        calls.append(turn)
        return None

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "done"])
    await run(model, prepare_next_turn=prepare)
    assert len(calls) == 1
    assert calls[0].message.tool_calls[0].id == "t1"


async def test_prepare_next_turn_can_swap_the_model_the_context_and_the_thinking_level() -> None:
    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "done"])

    async def prepare(turn: TurnContext) -> NextTurn:
        context = AgentContext("new prompt", list(turn.context.messages)[-1:], turn.context.tools)
        return NextTurn(
            context=context, model=attrs.evolve(model, id="other"), thinking_level="high"
        )

    await run(model, prepare_next_turn=prepare, reasoning="low")
    first, second = model.calls
    assert (first.model.id, first.options.reasoning, first.context.system_prompt) == (
        "faux",
        "low",
        "",
    )
    assert (second.model.id, second.options.reasoning, second.context.system_prompt) == (
        "other",
        "high",
        "new prompt",
    )
    assert [m.role for m in second.context.messages] == ["toolResult"]


async def test_thinking_level_off_removes_reasoning() -> None:
    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "done"])

    async def prepare(turn: TurnContext) -> NextTurn:
        return NextTurn(thinking_level="off")

    await run(model, prepare_next_turn=prepare, reasoning="medium")
    assert [call.options.reasoning for call in model.calls] == ["medium", None]


async def test_custom_messages_stay_in_the_transcript_but_not_in_the_models_view() -> None:
    @attrs.frozen
    class Note:
        role = "note"
        text: str

    context = AgentContext(messages=[UserMessage.text("before"), Note("fyi")], tools=[])
    model = faux.model(["ok"])
    await run(model, context=context)
    seen = list(model.calls[0].context.messages)
    assert [m.role for m in seen] == ["user", "user"]
    assert not any(isinstance(m, Note) for m in seen)


async def test_transform_context_and_convert_to_llm_decide_what_the_model_sees() -> None:
    async def keep_last(messages: Sequence[AgentMessage]) -> list[AgentMessage]:
        return list(messages)[-1:]

    async def convert(messages: Sequence[AgentMessage]) -> list[LlmMessage]:
        converted = await default_convert_to_llm(messages)
        return [UserMessage.text("converted"), *converted]

    context = AgentContext(messages=[UserMessage.text("old")], tools=[])
    model = faux.model(["ok"])
    await run(model, context=context, transform_context=keep_last, convert_to_llm=convert)
    texts = [m.content[0].text for m in model.calls[0].context.messages]  # type: ignore[union-attr]  # texts
    assert texts == ["converted", "hi"]


async def test_the_models_view_grows_with_the_transcript() -> None:
    model = faux.model(
        [
            faux.reply(faux.tool_call("echo", {"value": "1"}, id="a")),
            faux.reply(faux.tool_call("echo", {"value": "2"}, id="b")),
            "done",
        ]
    )
    messages, _ = await run(model)
    views = [list(call.context.messages) for call in model.calls]
    assert views == [messages[:1], messages[:3], messages[:5]]


async def test_get_api_key_is_asked_before_every_call_and_falls_back_to_api_key() -> None:
    keys = iter(["k1", None])
    asked: list[str] = []

    async def get_api_key(provider: str) -> str | None:
        asked.append(provider)
        return next(keys)

    model = faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), "done"])
    await run(model, get_api_key=get_api_key, api_key="fallback")
    assert asked == ["faux", "faux"]
    assert [call.options.api_key for call in model.calls] == ["k1", "fallback"]


def test_api_keys_do_not_appear_in_reprs() -> None:
    config = AgentLoopConfig(model=faux.model(), api_key="sk-secret")
    options = StreamOptions(api_key="sk-secret")
    assert "sk-secret" not in repr(config)
    assert "sk-secret" not in repr(options)


async def test_stream_options_come_from_the_config() -> None:
    model = faux.model(["ok"])
    await run(model, temperature=0.5, max_tokens=99, session_id="s", headers={"x": "y"})
    options = model.calls[0].options
    assert (options.temperature, options.max_tokens, options.session_id, dict(options.headers)) == (
        0.5,
        99,
        "s",
        {"x": "y"},
    )


async def test_continue_runs_from_the_context_and_returns_only_new_messages() -> None:
    context = AgentContext(messages=[UserMessage.text("hi")], tools=[])
    recorder = EventRecorder()
    messages = await run_agent_loop_continue(
        context, AgentLoopConfig(model=faux.model(["answer"])), recorder
    )
    assert [m.role for m in messages] == ["assistant"]
    assert recorder.types[:3] == ["agent_start", "turn_start", "message_start"]
    assert recorder.events[2].message.role == "assistant"  # type: ignore[union-attr]  # MessageStart


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([], "Cannot continue: no messages in context"),
        (
            [UserMessage.text("hi"), AssistantMessage(content=(TextContent("x"),))],
            "Cannot continue from message role: assistant",
        ),
    ],
)
async def test_continue_refuses_before_emitting_anything(
    messages: list[AgentMessage], error: str
) -> None:
    recorder = EventRecorder()
    with trio.testing.assert_checkpoints(), pytest.raises(ValueError, match=f"^{error}$"):
        await run_agent_loop_continue(
            AgentContext(messages=messages), AgentLoopConfig(model=faux.model(["x"])), recorder
        )
    assert recorder.events == []


async def test_a_run_is_a_checkpoint() -> None:
    with trio.testing.assert_checkpoints():
        await run(faux.model(["ok"]))


async def test_a_refused_run_is_a_checkpoint_too() -> None:
    """Invariant 12 on every path: bad arguments, an unknown api, a reused abort scope."""
    model = faux.model(["x"])
    unknown = attrs.evolve(model, api="nowhere")
    used = trio.CancelScope()
    with used:
        pass
    good, bad = AgentLoopConfig(model=model), AgentLoopConfig(model=unknown)
    refusals: list[tuple[Any, type[Exception]]] = [
        (lambda: run_agent_loop("hi", AgentContext(), good, _noop), TypeError),  # type: ignore[arg-type]  # bad input
        (lambda: run_agent_loop(hi(), AgentContext(), bad, _noop), UnknownApiError),
        (lambda: run_agent_loop(hi(), AgentContext(), good, _noop, used), RuntimeError),
        (lambda: run_agent_loop_continue(AgentContext(messages=hi()), bad, _noop), UnknownApiError),
    ]
    for call, error in refusals:
        with trio.testing.assert_checkpoints(), pytest.raises(error):
            await call()


async def _noop(event: Any) -> None:
    return None


async def test_an_unknown_api_is_an_error_before_any_event() -> None:
    recorder = EventRecorder()
    model = attrs.evolve(faux.model(["x"]), api="nowhere")
    with pytest.raises(UnknownApiError, match="'nowhere'"):
        await run_agent_loop(hi(), AgentContext(), AgentLoopConfig(model=model), recorder)
    assert recorder.events == []


async def test_a_string_prompt_is_refused_with_a_hint() -> None:
    with pytest.raises(TypeError, match=r"prompts must be a sequence of messages, not str"):
        await run_agent_loop(
            "hi",  # type: ignore[arg-type]  # the bad input
            AgentContext(),
            AgentLoopConfig(model=faux.model()),
            EventRecorder(),
        )


async def test_a_prompt_that_is_not_a_message_is_named() -> None:
    with pytest.raises(TypeError, match=r"prompts\[1\] is 'oops', not a message"):
        await run_agent_loop(
            [UserMessage.text("ok"), "oops"],  # type: ignore[list-item]  # the bad input
            AgentContext(),
            AgentLoopConfig(model=faux.model()),
            EventRecorder(),
        )


@pytest.mark.parametrize(
    ("context", "config", "emit", "error"),
    [
        ("ctx", None, None, "context must be an AgentContext, not str"),
        (None, "cfg", None, "config must be an AgentLoopConfig, not str"),
        (None, None, 42, "emit must be an async callable"),
    ],
)
async def test_wrong_arguments_are_named(context: Any, config: Any, emit: Any, error: str) -> None:
    with pytest.raises(TypeError, match=error):
        await run_agent_loop(
            hi(),
            AgentContext() if context is None else context,
            AgentLoopConfig(model=faux.model()) if config is None else config,
            EventRecorder() if emit is None else emit,
        )


def test_tool_execution_must_be_a_known_mode() -> None:
    with pytest.raises(
        ValueError, match="tool_execution must be 'parallel' or 'sequential', not 'eager'"
    ):
        AgentLoopConfig(model=faux.model(), tool_execution="eager")  # type: ignore[arg-type]  # the bad input


async def test_a_stream_without_start_still_announces_its_message() -> None:
    model = faux.model([faux.reply("whole", emit_start=False)])
    messages, recorder = await run(model)
    assert recorder.types[4:7] == ["message_start", "message_end", "turn_end"]
    assert recorder.events[4].message is messages[1]  # type: ignore[union-attr]  # MessageStart


async def test_a_stream_function_may_return_without_a_terminal_event() -> None:
    reply = AssistantMessage(content=(TextContent("returned"),))

    async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> AssistantMessage:
        return reply

    recorder = EventRecorder()
    messages = await run_agent_loop(
        hi(), AgentContext(), AgentLoopConfig(model=faux.model()), recorder, stream_fn=stream_fn
    )
    # The loop records the thinking level it asked for on the reply (off here).
    assert messages[-1] == attrs.evolve(reply, thinking_level="off")
    check_event_grammar(recorder.events)


# A stream function that breaks the protocol of stream events: what it emits out of place is
# not passed on. Its reply is one message_start, the updates of its well-placed block
# events, one message_end; never an update outside them.

_EMPTY = AssistantMessage(content=())
_SO_FAR = AssistantMessage(content=(TextContent("a"),))
_DONE = AssistantMessage(content=(TextContent("a"),), stop_reason="stop")
_FAILED = AssistantMessage(content=(TextContent("a"),), stop_reason="error", error_message="x")
_STRAY = AssistantMessage(content=(TextContent("stray"),))

_STREAM_EVENTS: dict[str, AssistantMessageEvent] = {
    "start": StreamStart(partial=_EMPTY),
    "text_start": TextStart(0, partial=_EMPTY),
    "delta": TextDelta(0, "a", partial=_SO_FAR),
    "text_end": TextEnd(0, "a", partial=_SO_FAR),
    "done": StreamDone("stop", _DONE),
    "error": StreamError("error", _FAILED),
    "stray_start": StreamStart(partial=_STRAY),
    "stray_delta": TextDelta(0, "stray", partial=_STRAY),
}
_BLOCK = ["text_start", "delta", "text_end"]


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(["stray_delta", "start", *_BLOCK, "done"], id="a delta before start"),
        pytest.param(["start", *_BLOCK, "done", "stray_delta"], id="a delta after done"),
        pytest.param(["start", *_BLOCK, "error", "stray_delta"], id="a delta after error"),
        pytest.param(
            ["start", "text_start", "stray_start", "delta", "text_end", "done"], id="a second start"
        ),
        pytest.param(["start", *_BLOCK, "done", "stray_start"], id="a start after done"),
        pytest.param([*_BLOCK, "done", "stray_start"], id="no start, then a start after done"),
        pytest.param([*_BLOCK, "error", "stray_start"], id="no start, then a start after error"),
    ],
)
async def test_what_a_stream_function_emits_out_of_place_is_not_passed_on(
    script: list[str],
) -> None:
    async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> AssistantMessage:
        for kind in script:
            await emit(_STREAM_EVENTS[kind])
        return _DONE if "done" in script else _FAILED

    recorder = EventRecorder()
    messages = await run_agent_loop(
        hi(), AgentContext(), AgentLoopConfig(model=faux.model()), recorder, stream_fn=stream_fn
    )
    check_event_grammar(recorder.events)
    final = attrs.evolve(_DONE if "done" in script else _FAILED, thinking_level="off")
    assert messages[-1] == final
    # The reply's events: after agent_start, turn_start and the prompt's two.
    reply = recorder.events[4:]
    started = "start" in script  # else block events come before any start: none is passed on
    updates = [_STREAM_EVENTS[kind] for kind in _BLOCK] if started else []
    assert [event.type for event in reply] == [
        "message_start",
        *["message_update"] * len(updates),
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert reply[0] == MessageStart(_EMPTY if started else final)
    assert reply[1:-3] == [MessageUpdate(event) for event in updates]
    assert reply[-3] == MessageEnd(final)


async def test_the_error_stop_reason_ends_the_run_without_running_tools() -> None:
    ran: list[str] = []

    async def tool_fn(call_id: str, args: Any, on_update: Any) -> Any:
        ran.append(call_id)
        raise AssertionError("must not run")

    from tests._support import make_tool

    model = faux.model([faux.error("upstream 500", faux.tool_call("t", {}, id="c1")), "unused"])
    messages, recorder = await run(model, context=AgentContext(tools=[make_tool("t", tool_fn)]))
    assert ran == []
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == ("error", "upstream 500")


def plain_listener(event: Any) -> None:
    return None


async def test_a_sync_listener_is_refused_by_name() -> None:
    with pytest.raises(
        TypeError,
        match=r"emit must be an async function \(async def\), not the plain function plain_",
    ):
        await run_agent_loop(
            hi(),
            AgentContext(),
            AgentLoopConfig(model=faux.model()),
            plain_listener,  # type: ignore[arg-type]  # the bad input
        )


def test_a_sync_hook_is_refused_by_name() -> None:
    def steering() -> list[AgentMessage]:
        return []

    with pytest.raises(TypeError, match="get_steering_messages must be an async function"):
        AgentLoopConfig(model=faux.model(), get_steering_messages=steering)  # type: ignore[arg-type]  # bad input


async def test_of_two_tools_with_one_name_the_first_wins() -> None:
    from tests._support import make_tool
    from trio_agent import ToolResult

    async def first(call_id: str, args: Any, on_update: Any) -> ToolResult:
        return ToolResult.text("first")

    async def second(call_id: str, args: Any, on_update: Any) -> ToolResult:
        return ToolResult.text("second")

    model = faux.model([faux.reply(faux.tool_call("t", {}, id="c")), "done"])
    messages, _ = await run(
        model, context=AgentContext(tools=[make_tool("t", first), make_tool("t", second)])
    )
    assert messages[2].content == (TextContent("first"),)  # type: ignore[union-attr]  # a result


async def test_a_reply_done_then_aborted_records_the_thinking_level_asked_for() -> None:
    # the stream sent its done event, then the run was aborted before the function returned:
    # the reply the run keeps is the done event's, with the level the options asked for
    abort = trio.CancelScope()

    async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> AssistantMessage:
        await emit(_STREAM_EVENTS["start"])
        await emit(_STREAM_EVENTS["done"])
        abort.cancel()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    config = AgentLoopConfig(model=faux.model(), reasoning="high")
    recorder = EventRecorder()
    messages = await run_agent_loop(
        hi(), AgentContext(), config, recorder, stream_fn=stream_fn, abort=abort
    )
    check_event_grammar(recorder.events)
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    assert replies[0].thinking_level == "high"
