"""Tests of trio_agent.providers.faux: the scripted model, as a stream function and in a run.

Everything timed runs on pytest-trio's ``autojump_clock`` (a ``MockClock``
that jumps to the next deadline as soon as every task is blocked), so the
assertions on ``trio.current_time()`` are exact and nothing really sleeps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_agent import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    Message,
    MessageUpdate,
    Model,
    StreamDone,
    StreamError,
    StreamOptions,
    StreamStart,
    TextContent,
    TextDelta,
    TextEnd,
    TextStart,
    ThinkingContent,
    ThinkingDelta,
    ThinkingEnd,
    ThinkingStart,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import faux

CONTEXT = LlmContext("You are a test.", [UserMessage("hi", timestamp=1)])


class EventRecorder:
    """An ``emit`` that records every event (with the virtual time it came at)."""

    def __init__(self) -> None:
        self.events: list[AssistantMessageEvent] = []
        self.times: list[float] = []

    async def __call__(self, event: AssistantMessageEvent) -> None:
        self.events.append(event)
        self.times.append(trio.current_time())

    @property
    def shapes(self) -> list[tuple[Any, ...]]:
        return [shape(event) for event in self.events]


async def play(
    model: Model,
    context: LlmContext = CONTEXT,
    options: StreamOptions | None = None,
) -> tuple[AssistantMessage, EventRecorder]:
    """Call the faux stream function once; the final message and what it emitted."""
    recorder = EventRecorder()
    message = await faux.stream(model, context, options or StreamOptions(), recorder)
    return message, recorder


def untimed(message: Any) -> Any:
    """``message`` with timestamp 0 (the faux and the loop stamp messages with the wall clock),
    and a tool result's duration 0.0 if it has one (the tool ran on the wall clock too)."""
    if isinstance(message, ToolResultMessage) and message.duration is not None:
        return attrs.evolve(message, timestamp=0, duration=0.0)
    return attrs.evolve(message, timestamp=0)


def final(*content: Any, model: str = "faux", **fields: Any) -> AssistantMessage:
    """A final faux reply, timestamp 0."""
    return AssistantMessage(
        content=content, api="faux", provider="faux", model=model, timestamp=0, **fields
    )


def shape(event: AssistantMessageEvent) -> tuple[Any, ...]:
    """An event without its partial: its type, content index and payload."""
    if isinstance(event, StreamStart):
        return (event.type,)
    if isinstance(event, TextStart | ThinkingStart | ToolCallStart):
        return (event.type, event.content_index)
    if isinstance(event, TextDelta | ThinkingDelta | ToolCallDelta):
        return (event.type, event.content_index, event.delta)
    if isinstance(event, TextEnd | ThinkingEnd):
        return (event.type, event.content_index, event.content)
    if isinstance(event, ToolCallEnd):
        return (event.type, event.content_index, event.tool_call)
    if isinstance(event, StreamDone):
        return (event.type, event.reason, untimed(event.message))
    return (event.type, event.reason, untimed(event.error))


def partial_of(event: AssistantMessageEvent) -> AssistantMessage:
    assert not isinstance(event, StreamDone | StreamError)
    return event.partial


def deltas(recorder: EventRecorder) -> list[str]:
    return [
        event.delta
        for event in recorder.events
        if isinstance(event, TextDelta | ThinkingDelta | ToolCallDelta)
    ]


# ------------------------------------------------------------------ chunking


async def test_text_is_streamed_in_chunks_of_chunk_size() -> None:
    _, recorder = await play(faux.model([faux.reply("abcdefgh", chunk_size=3)]))
    expected = [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, "abc"),
        ("text_delta", 0, "def"),
        ("text_delta", 0, "gh"),
        ("text_end", 0, "abcdefgh"),
        ("done", "stop", final(TextContent("abcdefgh"))),
    ]
    assert expected == recorder.shapes


async def test_final_message_is_returned_and_announced() -> None:
    message, recorder = await play(faux.model(["hello"]))
    expected = (final(TextContent("hello")), StreamDone("stop", message))
    assert expected == (untimed(message), recorder.events[-1])


async def test_thinking_is_streamed_in_chunks() -> None:
    reply = faux.reply(faux.thinking("hmmmm", signature="sig"), "ok", chunk_size=2)
    _, recorder = await play(faux.model([reply]))
    expected = [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "hm"),
        ("thinking_delta", 0, "mm"),
        ("thinking_delta", 0, "m"),
        ("thinking_end", 0, "hmmmm"),
        ("text_start", 1),
        ("text_delta", 1, "ok"),
        ("text_end", 1, "ok"),
        (
            "done",
            "stop",
            final(ThinkingContent("hmmmm", thinking_signature="sig"), TextContent("ok")),
        ),
    ]
    assert expected == recorder.shapes


async def test_tool_call_arguments_are_streamed_as_compact_json_chunks() -> None:
    arguments = {"path": "a b.txt", "lines": [1, 2], "note": "é"}
    reply = faux.reply(faux.tool_call("read", arguments, id="call_1"), chunk_size=7)
    message, recorder = await play(faux.model([reply]))
    end = recorder.events[-2]
    assert isinstance(end, ToolCallEnd)
    # '{"path":"a b.txt","lines":[1,2],"note":"é"}' in chunks of 7 characters
    expected = (
        ['{"path"', ':"a b.t', 'xt","li', 'nes":[1', ',2],"no', 'te":"é"', "}"],
        ToolCall("call_1", "read", arguments),
        final(ToolCall("call_1", "read", arguments), stop_reason="toolUse"),
    )
    assert expected == (deltas(recorder), end.tool_call, untimed(message))


async def test_tool_call_chunks_join_to_the_arguments() -> None:
    arguments = {"query": "x" * 50, "n": {"deep": [True, None, 1.5]}}
    reply = faux.reply(faux.tool_call("search", arguments), chunk_size=4)
    _, recorder = await play(faux.model([reply]))
    assert arguments == json.loads("".join(deltas(recorder)))


async def test_tool_call_events_and_partials() -> None:
    reply = faux.reply(faux.tool_call("f", {"a": 1}, id="c"), chunk_size=4)
    _, recorder = await play(faux.model([reply]))
    expected = [
        (("start",), ()),
        (("toolcall_start", 0), (ToolCall("c", "f", {}),)),
        (("toolcall_delta", 0, '{"a"'), (ToolCall("c", "f", {}),)),
        (("toolcall_delta", 0, ":1}"), (ToolCall("c", "f", {}),)),
        (("toolcall_end", 0, ToolCall("c", "f", {"a": 1})), (ToolCall("c", "f", {"a": 1}),)),
    ]
    actual = [(shape(event), partial_of(event).content) for event in recorder.events[:-1]]
    assert expected == actual


async def test_no_chunk_size_streams_each_block_in_one_delta() -> None:
    reply = faux.reply(faux.thinking("think"), "a longer text", faux.tool_call("f", {"a": 1}))
    _, recorder = await play(faux.model([reply]))
    expected = ["think", "a longer text", '{"a":1}']
    assert expected == deltas(recorder)


async def test_chunk_size_zero_streams_each_block_in_one_delta() -> None:
    model = faux.model([faux.reply("abcdef", chunk_size=0)], chunk_size=2)
    _, recorder = await play(model)
    expected = ["abcdef"]
    assert expected == deltas(recorder)


async def test_model_chunk_size_is_the_default() -> None:
    _, recorder = await play(faux.model(["abcde"], chunk_size=2))
    expected = ["ab", "cd", "e"]
    assert expected == deltas(recorder)


async def test_reply_chunk_size_overrides_the_models() -> None:
    _, recorder = await play(faux.model([faux.reply("abcde", chunk_size=4)], chunk_size=2))
    expected = ["abcd", "e"]
    assert expected == deltas(recorder)


async def test_empty_text_is_one_empty_delta() -> None:
    _, recorder = await play(faux.model([faux.reply("", chunk_size=3)]))
    expected = [
        ("start",),
        ("text_start", 0),
        ("text_delta", 0, ""),
        ("text_end", 0, ""),
        ("done", "stop", final(TextContent(""))),
    ]
    assert expected == recorder.shapes


async def test_empty_thinking_and_empty_arguments() -> None:
    reply = faux.reply(faux.thinking(""), faux.tool_call("f"), chunk_size=1)
    _, recorder = await play(faux.model([reply]))
    expected = ["", "{", "}"]
    assert expected == deltas(recorder)


async def test_signatures_and_redacted_are_kept() -> None:
    content = (
        faux.thinking("", signature="opaque", redacted=True),
        TextContent("t", text_signature="ts"),
        ToolCall("c", "f", {}, thought_signature="th"),
    )
    message, _ = await play(faux.model([faux.reply(*content)]))
    assert final(*content, stop_reason="toolUse") == untimed(message)


async def test_usage_is_in_the_final_message() -> None:
    usage = Usage(input=3, output=4, total_tokens=7)
    message, _ = await play(faux.model([faux.reply("x", usage=usage)]))
    assert final(TextContent("x"), usage=usage) == untimed(message)


# ------------------------------------------------------------------ pacing on virtual time


async def test_pace_waits_before_each_delta(autojump_clock: trio.testing.MockClock) -> None:
    model = faux.model([faux.reply(faux.thinking("ab"), "abcd", chunk_size=1)], pace=4)
    start = trio.current_time()
    _, recorder = await play(model)
    # 6 deltas at 4 per second; the start, *_start and *_end events take no time.
    offsets = [time - start for time in recorder.times]
    expected = (1.5, [0, 0, 0.25, 0.5, 0.5, 0.5, 0.75, 1.0, 1.25, 1.5, 1.5, 1.5])
    assert expected == (trio.current_time() - start, offsets)


async def test_chunk_delay_overrides_pace(autojump_clock: trio.testing.MockClock) -> None:
    model = faux.model([faux.reply("abc", chunk_size=1, chunk_delay=0.5)], pace=100)
    start = trio.current_time()
    await play(model)
    expected = 1.5
    assert expected == trio.current_time() - start


async def test_tool_call_chunks_are_paced(autojump_clock: trio.testing.MockClock) -> None:
    model = faux.model([faux.reply(faux.tool_call("f", {"a": 1}), chunk_size=1)], pace=2)
    start = trio.current_time()
    await play(model)
    expected = 3.5  # '{"a":1}' is 7 chunks of one character, half a second each
    assert expected == trio.current_time() - start


async def test_start_delay_waits_before_the_first_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = faux.model([faux.reply("abc", chunk_size=1, start_delay=2.0, chunk_delay=0.25)])
    start = trio.current_time()
    _, recorder = await play(model)
    expected = (2.0, 2.75)
    assert expected == (recorder.times[0] - start, trio.current_time() - start)


async def test_start_delay_without_start_event(autojump_clock: trio.testing.MockClock) -> None:
    model = faux.model([faux.reply("abc", start_delay=1.25, emit_start=False)], pace=1)
    start = trio.current_time()
    _, recorder = await play(model)
    expected = ([1.25], 1.25)
    assert expected == ([time - start for time in recorder.times], trio.current_time() - start)


async def test_no_pace_takes_no_time(autojump_clock: trio.testing.MockClock) -> None:
    start = trio.current_time()
    await play(faux.model([faux.reply("abcdef", chunk_size=1)]))
    expected = 0.0
    assert expected == trio.current_time() - start


async def test_each_event_waits_for_emit(autojump_clock: trio.testing.MockClock) -> None:
    # Lock-step: a slow listener slows the stream, one event at a time.
    times: list[float] = []
    start = trio.current_time()

    async def slow_emit(event: AssistantMessageEvent) -> None:
        times.append(trio.current_time() - start)
        await trio.sleep(1)

    model = faux.model([faux.reply("abc", chunk_size=1)])
    await faux.stream(model, CONTEXT, StreamOptions(), slow_emit)
    expected = [0, 1, 2, 3, 4, 5, 6]
    assert expected == times


# ------------------------------------------------------------------ lock-step cancellation


async def test_cancel_on_the_third_delta_sees_exactly_three() -> None:
    recorder = EventRecorder()
    seen: list[str] = []

    with trio.CancelScope() as scope:

        async def emit(event: AssistantMessageEvent) -> None:
            await recorder(event)
            if isinstance(event, TextDelta):
                seen.append(event.delta)
                if len(seen) == 3:
                    scope.cancel()

        await faux.stream(
            faux.model([faux.reply("abcdefgh", chunk_size=1)]), CONTEXT, StreamOptions(), emit
        )

    expected = (
        True,
        ["a", "b", "c"],
        ["start", "text_start", "text_delta", "text_delta", "text_delta"],
    )
    assert expected == (scope.cancelled_caught, seen, [e.type for e in recorder.events])


async def test_cancellation_propagates_out_of_the_stream() -> None:
    recorder = EventRecorder()

    async def cancel_on_start(event: AssistantMessageEvent) -> None:
        await recorder(event)
        if isinstance(event, TextStart):
            scope.cancel()

    model = faux.model([faux.reply("abc", chunk_size=1)])
    with trio.CancelScope() as scope, pytest.raises(trio.Cancelled):
        await faux.stream(model, CONTEXT, StreamOptions(), cancel_on_start)
    expected = [("start",), ("text_start", 0)]
    assert expected == recorder.shapes


async def test_cancel_on_a_paced_delta_stops_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorder = EventRecorder()
    start = trio.current_time()
    with trio.CancelScope() as scope:

        async def emit(event: AssistantMessageEvent) -> None:
            await recorder(event)
            if isinstance(event, TextDelta) and event.delta == "b":
                scope.cancel()

        await faux.stream(
            faux.model([faux.reply("abcd", chunk_size=1)], pace=1), CONTEXT, StreamOptions(), emit
        )
    expected = (["a", "b"], 2.0)
    assert expected == (deltas(recorder), trio.current_time() - start)


# ------------------------------------------------------------------ the script


async def test_calls_are_recorded() -> None:
    model = faux.model(["one", "two"])
    options = StreamOptions(temperature=0.5, api_key="k")
    other_context = LlmContext("other", [UserMessage("again", timestamp=2)])
    await play(model, CONTEXT, options)
    await play(model, other_context)
    expected = [
        faux.ScriptedCall(model=model, context=CONTEXT, options=options),
        faux.ScriptedCall(model=model, context=other_context, options=StreamOptions()),
    ]
    assert expected == model.calls


async def test_recorded_call_holds_the_very_objects_given() -> None:
    model = faux.model(["one"])
    options = StreamOptions()
    await play(model, CONTEXT, options)
    call = model.calls[0]
    expected = (True, True, True)
    assert expected == (call.model is model, call.context is CONTEXT, call.options is options)


async def test_replies_are_played_in_order() -> None:
    model = faux.model(["one", "two"])
    first, _ = await play(model)
    second, _ = await play(model)
    expected = (final(TextContent("one")), final(TextContent("two")))
    assert expected == (untimed(first), untimed(second))


async def test_running_out_of_script_is_an_error_message() -> None:
    model = faux.model(["one"], id="m", provider="p")
    await play(model)
    message, recorder = await play(model)
    expected_message = AssistantMessage(
        api="faux",
        provider="p",
        model="m",
        stop_reason="error",
        error_message="no more scripted responses (call 2, 1 scripted)",
        timestamp=0,
    )
    expected = (expected_message, [("error", "error", expected_message)], 2)
    assert expected == (untimed(message), recorder.shapes, len(model.calls))


async def test_a_model_without_script_is_an_error_message() -> None:
    model = Model(id="plain", api="faux", provider="p")
    message, recorder = await play(model)
    expected_message = AssistantMessage(
        api="faux",
        provider="p",
        model="plain",
        stop_reason="error",
        error_message=(
            "model 'plain' has no script: make it with trio_agent.testing.scripted_model()"
        ),
        timestamp=0,
    )
    expected = (expected_message, [("error", "error", expected_message)])
    assert expected == (untimed(message), recorder.shapes)


async def test_callable_entry_receives_the_context() -> None:
    received: list[LlmContext] = []

    def answer(context: LlmContext) -> faux.Reply:
        received.append(context)
        return faux.reply(f"you said {context.messages[-1].content}")

    message, _ = await play(faux.model([answer]))
    expected = ([CONTEXT], final(TextContent("you said hi")))
    assert expected == (received, untimed(message))


async def test_callable_entry_may_return_a_string() -> None:
    message, _ = await play(faux.model([lambda context: context.system_prompt]))
    assert final(TextContent("You are a test.")) == untimed(message)


async def test_assistant_message_entry_keeps_its_fields() -> None:
    scripted = AssistantMessage(
        content=[TextContent("cut"), ToolCall("", "f", {"a": 1})],
        stop_reason="length",
        usage=Usage(output=9),
        timestamp=5,
    )
    message, _ = await play(faux.model([scripted]))
    expected = final(
        TextContent("cut"),
        ToolCall("faux_0_1", "f", {"a": 1}),
        stop_reason="length",
        usage=Usage(output=9),
    )
    assert expected == untimed(message)


async def test_an_entry_of_another_type_is_a_type_error() -> None:
    model = faux.model([42])  # type: ignore[list-item]  # the point: it is not a script entry
    with pytest.raises(TypeError) as info:
        await play(model)
    expected = "a scripted response must be a Reply, str or AssistantMessage, not 42"
    assert expected == str(info.value)


async def test_emit_start_false_emits_only_the_terminal_event() -> None:
    reply = faux.reply("abc", faux.tool_call("f", {"a": 1}), chunk_size=1, emit_start=False)
    message, recorder = await play(faux.model([reply]))
    expected_message = final(
        TextContent("abc"), ToolCall("faux_0_1", "f", {"a": 1}), stop_reason="toolUse"
    )
    expected = (expected_message, [("done", "toolUse", expected_message)])
    assert expected == (untimed(message), recorder.shapes)


async def test_emit_start_false_with_an_error() -> None:
    reply = faux.reply("partial", stop_reason="error", emit_start=False)
    message, recorder = await play(faux.model([reply]))
    expected_message = final(
        TextContent("partial"), stop_reason="error", error_message="scripted error"
    )
    expected = (expected_message, [("error", "error", expected_message)])
    assert expected == (untimed(message), recorder.shapes)


async def test_raises_propagates_and_emits_nothing() -> None:
    class ScriptBug(Exception):
        pass

    bug = ScriptBug("broken contract")
    recorder = EventRecorder()
    model = faux.model([faux.Reply(content=[TextContent("x")], raises=bug)])
    with pytest.raises(ScriptBug) as info:
        await faux.stream(model, CONTEXT, StreamOptions(), recorder)
    expected: tuple[Any, ...] = (bug, [], 1)
    assert expected == (info.value, recorder.events, len(model.calls))


async def test_error_reply_has_the_default_message_and_keeps_content() -> None:
    message, recorder = await play(faux.model([faux.error()]))
    message2, _ = await play(faux.model([faux.error("quota exceeded", "half an ans")]))
    expected = (
        final(stop_reason="error", error_message="scripted error"),
        ("error", "error", final(stop_reason="error", error_message="scripted error")),
        final(TextContent("half an ans"), stop_reason="error", error_message="quota exceeded"),
    )
    assert expected == (untimed(message), recorder.shapes[-1], untimed(message2))


async def test_error_stop_reason_without_message_gets_the_default() -> None:
    message, _ = await play(faux.model([faux.Reply(stop_reason="error")]))
    assert final(stop_reason="error", error_message="scripted error") == untimed(message)


async def test_aborted_reply_has_the_default_message() -> None:
    message, recorder = await play(faux.model([faux.reply("ab", stop_reason="aborted")]))
    expected_message = final(
        TextContent("ab"),
        stop_reason="aborted",
        error_message="Request was aborted",
        error_kind="aborted",
    )
    expected = (expected_message, ("error", "aborted", expected_message))
    assert expected == (untimed(message), recorder.shapes[-1])


async def test_stop_reason_is_tool_use_when_there_are_tool_calls() -> None:
    message, recorder = await play(faux.model([faux.reply(faux.tool_call("f", id="c"))]))
    expected = final(ToolCall("c", "f", {}), stop_reason="toolUse")
    assert (expected, ("done", "toolUse", expected)) == (untimed(message), recorder.shapes[-1])


async def test_explicit_stop_reason_is_kept() -> None:
    message, _ = await play(faux.model([faux.reply("cut", stop_reason="length")]))
    assert final(TextContent("cut"), stop_reason="length") == untimed(message)


async def test_tool_call_ids_are_generated_from_call_and_block() -> None:
    model = faux.model(
        [
            "first",
            faux.reply(
                "text", faux.tool_call("a"), faux.tool_call("b", id="mine"), faux.tool_call("c")
            ),
        ]
    )
    await play(model)
    message, recorder = await play(model)
    expected_ids = ("faux_1_1", "mine", "faux_1_3")
    expected = (expected_ids, expected_ids)
    actual = (
        tuple(call.id for call in message.tool_calls),
        tuple(event.tool_call.id for event in recorder.events if isinstance(event, ToolCallEnd)),
    )
    assert expected == actual


async def test_add_appends_to_the_script_and_remaining_counts_down() -> None:
    model = faux.model(["one"])
    counts = [model.remaining]
    model.add("two", faux.reply("three"))
    counts.append(model.remaining)
    texts = []
    for _ in range(4):
        message, _ = await play(model)
        texts.append(message.text or message.error_message)
        counts.append(model.remaining)
    expected = (
        [1, 3, 2, 1, 0, 0],
        ["one", "two", "three", "no more scripted responses (call 4, 3 scripted)"],
    )
    assert expected == (counts, texts)


async def test_a_reply_added_after_running_out_is_played_next() -> None:
    model = faux.model([])
    first, _ = await play(model)
    counts = [model.remaining]
    model.add("late")
    counts.append(model.remaining)
    second, _ = await play(model)
    counts.append(model.remaining)
    expected = (
        final(stop_reason="error", error_message="no more scripted responses (call 1, 0 scripted)"),
        final(TextContent("late")),
        [0, 1, 0],
    )
    assert expected == (untimed(first), untimed(second), counts)


async def test_evolve_shares_the_script_and_the_record() -> None:
    model = faux.model(["one", "two"])
    other = attrs.evolve(model, id="other")
    first, _ = await play(other)
    second, _ = await play(model)
    expected = (
        final(TextContent("one"), model="other"),
        final(TextContent("two"), model="faux"),
        [other, model],
        0,
        True,
    )
    actual = (
        untimed(first),
        untimed(second),
        [call.model for call in model.calls],
        other.remaining,
        other.calls is model.calls,
    )
    assert expected == actual


def test_model_fields() -> None:
    model = faux.model(id="m1", provider="acme", pace=10, chunk_size=3, reasoning=True)
    expected: tuple[Any, ...] = ("m1", "faux", "acme", 10, 3, True, 0, [])
    actual = (
        model.id,
        model.api,
        model.provider,
        model.pace,
        model.chunk_size,
        model.reasoning,
        model.remaining,
        model.calls,
    )
    assert expected == actual


def test_models_do_not_share_scripts() -> None:
    first, second = faux.model(), faux.model()
    first.add("x")
    expected = (1, 0)
    assert expected == (first.remaining, second.remaining)


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("responses", "expected"),
    [
        ("hello", "responses must be an iterable of replies, not a single str"),
        (faux.reply("x"), "responses must be an iterable of replies, not a single Reply"),
        (
            AssistantMessage(timestamp=1),
            "responses must be an iterable of replies, not a single AssistantMessage",
        ),
    ],
)
def test_a_single_response_is_a_type_error(responses: Any, expected: str) -> None:
    with pytest.raises(TypeError) as info:
        faux.model(responses)
    assert expected == str(info.value)


@pytest.mark.parametrize(
    ("pace", "expected"),
    [
        (0, "pace must be a positive number of deltas per second, not 0"),
        (-1.5, "pace must be a positive number of deltas per second, not -1.5"),
        (math.nan, "pace must be a positive number of deltas per second, not nan"),
    ],
)
def test_pace_must_be_positive(pace: float, expected: str) -> None:
    with pytest.raises(ValueError, match=r"^pace must be") as info:
        faux.model(pace=pace)
    assert expected == str(info.value)


def test_model_chunk_size_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"^chunk_size must be") as info:
        faux.model(chunk_size=-1)
    expected = "chunk_size must be >= 0, not -1"
    assert expected == str(info.value)


def test_reply_chunk_size_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"^chunk_size must be") as info:
        faux.reply("text", chunk_size=-2)
    expected = "chunk_size must be >= 0, not -2"
    assert expected == str(info.value)


def test_reply_helpers_build_blocks() -> None:
    expected = faux.Reply(
        content=(
            TextContent("a"),
            ThinkingContent("t", thinking_signature="s", redacted=True),
            ToolCall("", "f", {}),
            ToolCall("id", "g", {"x": 1}),
        ),
        usage=Usage(),
    )
    actual = faux.reply(
        "a",
        faux.thinking("t", signature="s", redacted=True),
        faux.tool_call("f"),
        faux.tool_call("g", {"x": 1}, id="id"),
    )
    assert expected == actual


# ------------------------------------------------------------------ through run_agent_loop


class RunRecorder:
    """A run's ``emit``: records its events and the text deltas streamed (with their time);
    ``on_text_delta(n)`` is called after the n-th."""

    def __init__(self, on_text_delta: Callable[[int], None] | None = None) -> None:
        self.on_text_delta = on_text_delta
        self.events: list[AgentEvent] = []
        self.text_deltas: list[str] = []
        self.delta_times: list[float] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if isinstance(event, MessageUpdate) and isinstance(
            event.assistant_message_event, TextDelta
        ):
            self.text_deltas.append(event.assistant_message_event.delta)
            self.delta_times.append(trio.current_time())
            if self.on_text_delta is not None:
                self.on_text_delta(len(self.text_deltas))


def read_tool() -> AgentTool:
    async def execute(tool_call_id: str, args: dict[str, Any], on_update: Any) -> ToolResult:
        await trio.lowlevel.checkpoint()
        return ToolResult.text(f"contents of {args['path']}")

    return AgentTool(
        name="read",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        execute=execute,
    )


def last_tool_result_text(context: LlmContext) -> str:
    result = context.messages[-1]
    assert isinstance(result, ToolResultMessage)
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_a_run_answers_from_what_the_tool_returned() -> None:
    model = faux.model(
        [
            faux.reply("Let me look.", faux.tool_call("read", {"path": "a.txt"})),
            lambda context: faux.reply(f"It says: {last_tool_result_text(context)}"),
        ]
    )
    prompt = UserMessage("What is in a.txt?", timestamp=1)
    new = await run_agent_loop(
        [prompt], AgentContext(tools=[read_tool()]), AgentLoopConfig(model=model), RunRecorder()
    )
    expected_messages: list[Message] = [
        prompt,
        final(
            TextContent("Let me look."),
            ToolCall("faux_0_1", "read", {"path": "a.txt"}),
            stop_reason="toolUse",
            thinking_level="off",  # what the loop asked the reply for
        ),
        ToolResultMessage(
            tool_call_id="faux_0_1",
            tool_name="read",
            content=(TextContent("contents of a.txt"),),
            timestamp=0,
            duration=0.0,  # the tool ran
        ),
        final(TextContent("It says: contents of a.txt"), thinking_level="off"),
    ]
    actual = [new[0], *(untimed(message) for message in new[1:])]
    expected = (expected_messages, 2, 0, [prompt, *new[1:3]])
    assert expected == (
        actual,
        len(model.calls),
        model.remaining,
        list(model.calls[1].context.messages),
    )


async def test_a_run_is_paced_on_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    model = faux.model([faux.reply("abcdefgh", chunk_size=2)], pace=8)
    recorder = RunRecorder()
    start = trio.current_time()
    await run_agent_loop(
        [UserMessage("go", timestamp=1)], AgentContext(), AgentLoopConfig(model=model), recorder
    )
    expected = ([0.125, 0.25, 0.375, 0.5], 0.5)
    assert expected == (
        [time - start for time in recorder.delta_times],
        trio.current_time() - start,
    )


async def test_a_run_aborted_on_the_third_delta_keeps_three_chunks() -> None:
    model = faux.model([faux.reply("abcdefgh", chunk_size=2)])
    abort = trio.CancelScope()

    def abort_on_third(count: int) -> None:
        if count == 3:
            abort.cancel()

    recorder = RunRecorder(abort_on_third)
    new = await run_agent_loop(
        [UserMessage("go", timestamp=1)],
        AgentContext(),
        AgentLoopConfig(model=model),
        recorder,
        abort,
    )
    expected = (
        ["ab", "cd", "ef"],
        final(
            TextContent("abcdef"),
            stop_reason="aborted",
            error_message="Operation aborted",
            error_kind="aborted",
            thinking_level="off",
        ),
    )
    reply = new[-1]
    assert isinstance(reply, AssistantMessage)
    assert expected == (recorder.text_deltas, untimed(reply))
