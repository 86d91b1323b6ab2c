"""Tests of trio_agent._stream: AssistantMessageBuilder, its events and its lazy partials."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, SupportsIndex, overload

import pytest

from trio_agent import (
    AssistantMessage,
    AssistantMessageEvent,
    StreamDone,
    StreamError,
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
    Usage,
)
from trio_agent._stream import AssistantMessageBuilder

API, PROVIDER, MODEL = "test-api", "test-provider", "test-model"


def new_builder() -> AssistantMessageBuilder:
    builder = AssistantMessageBuilder(api=API, provider=PROVIDER, model=MODEL)
    builder.timestamp = 1
    return builder


def reply(*content: Any, **fields: Any) -> AssistantMessage:
    """A message as the builder makes it (its api, provider, model and timestamp)."""
    return AssistantMessage(
        content=content, api=API, provider=PROVIDER, model=MODEL, timestamp=1, **fields
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
        return (event.type, event.reason, event.message)
    return (event.type, event.reason, event.error)


def is_materialized(event: Any) -> bool:
    # Private on purpose: an event holds its partial source in ``_partial`` (the
    # builder's snapshot), whose ``message`` is the built message, None until
    # ``event.partial`` is first read. No public API can tell "not built yet"
    # from "built", and laziness is the promise under test.
    return event._partial.message is not None


def three_blocks() -> tuple[AssistantMessageBuilder, list[Any]]:
    """A thinking block, a text block and a tool call, streamed with every event."""
    b = new_builder()
    events: list[Any] = [
        b.start(),
        b.thinking_start(),
        b.thinking_delta("Hm"),
        b.thinking_end(signature="sig"),
        b.text_start(),
        b.text_delta("Hel"),
        b.text_delta("lo"),
        b.text_end(),
        b.toolcall_start("call_1", "read"),
        b.toolcall_delta('{"p":'),
        b.toolcall_delta('"a"}'),
        b.toolcall_end({"p": "a"}),
    ]
    return b, events


# ------------------------------------------------------------------ event sequence


def test_event_sequence_and_content_indexes() -> None:
    _, events = three_blocks()
    expected = [
        ("start",),
        ("thinking_start", 0),
        ("thinking_delta", 0, "Hm"),
        ("thinking_end", 0, "Hm"),
        ("text_start", 1),
        ("text_delta", 1, "Hel"),
        ("text_delta", 1, "lo"),
        ("text_end", 1, "Hello"),
        ("toolcall_start", 2),
        ("toolcall_delta", 2, '{"p":'),
        ("toolcall_delta", 2, '"a"}'),
        ("toolcall_end", 2, ToolCall("call_1", "read", {"p": "a"})),
    ]
    assert expected == [shape(event) for event in events]


def test_partial_of_each_event() -> None:
    _, events = three_blocks()
    thought = ThinkingContent("Hm", thinking_signature="sig")
    expected = [
        reply(),
        reply(ThinkingContent("")),
        reply(ThinkingContent("Hm")),
        reply(thought),
        reply(thought, TextContent("")),
        reply(thought, TextContent("Hel")),
        reply(thought, TextContent("Hello")),
        reply(thought, TextContent("Hello")),
        reply(thought, TextContent("Hello"), ToolCall("call_1", "read", {})),
        reply(thought, TextContent("Hello"), ToolCall("call_1", "read", {})),
        reply(thought, TextContent("Hello"), ToolCall("call_1", "read", {})),
        reply(thought, TextContent("Hello"), ToolCall("call_1", "read", {"p": "a"})),
    ]
    assert expected == [event.partial for event in events]


def test_early_partials_do_not_change_after_later_deltas() -> None:
    _, events = three_blocks()
    # Read last to first: each read happens after every later event was made.
    partials = [event.partial for event in reversed(events)]
    thought = ThinkingContent("Hm", thinking_signature="sig")
    expected = [
        reply(thought, TextContent("Hel")),
        reply(ThinkingContent("Hm")),
        reply(),
    ]
    assert expected == [partials[-6], partials[-3], partials[-1]]


def test_partial_read_between_deltas_and_again_later_is_the_same() -> None:
    b = new_builder()
    b.text_start()
    first = b.text_delta("a")
    early = first.partial
    b.text_delta("b")
    b.text_delta("c")
    b.text_end()
    expected = (reply(TextContent("a")), True)
    assert expected == (first.partial, first.partial is early)


def test_partial_keeps_the_usage_and_response_id_of_its_event() -> None:
    b = new_builder()
    b.text_start()
    first = b.text_delta("a")
    b.usage = Usage(input=5, output=1)
    b.response_id = "resp_1"
    second = b.text_delta("b")
    expected = (
        reply(TextContent("a")),
        reply(TextContent("ab"), usage=Usage(input=5, output=1), response_id="resp_1"),
    )
    assert expected == (first.partial, second.partial)


def test_every_events_partial_is_the_builders_snapshot_at_that_event() -> None:
    """The methods that make their snapshot inline (a start, a delta) keep every
    field that snapshot() keeps: usage, response id, signature, partial arguments."""
    b = new_builder()
    steps: list[Callable[[], AssistantMessageEvent]] = [
        b.start,
        b.thinking_start,
        lambda: b.thinking_delta("Hm"),
        lambda: b.thinking_end(signature="thought"),
        b.text_start,
        lambda: b.text_delta("Hi"),
        lambda: b.text_end(),
        lambda: b.toolcall_start("c1", "f"),
        lambda: b.toolcall_delta('{"a":', {}),
        lambda: b.toolcall_delta("1}", {"a": 1}),
        lambda: b.toolcall_end({"a": 1}),
        lambda: b.toolcall_start("c2", "g"),
        lambda: b.toolcall_delta("{}"),
    ]
    for n, step in enumerate(steps):
        b.usage = Usage(input=n, output=n)
        b.response_id = f"resp_{n}"
        if b.open_kind is not None:
            b.set_signature(f"sig_{n}")
        event = step()
        assert (n, event.partial) == (n, b.snapshot())  # type: ignore[union-attr]  # a delta


def test_opening_a_block_closes_the_open_one_without_an_event() -> None:
    b = new_builder()
    b.text_start()
    b.text_delta("one")
    start = b.text_start()
    expected = (("text_start", 1), reply(TextContent("one"), TextContent("")))
    assert expected == (shape(start), start.partial)


def test_content_index_and_open_kind() -> None:
    b = new_builder()
    seen = [(b.content_index, b.open_kind)]
    b.thinking_start()
    seen.append((b.content_index, b.open_kind))
    b.thinking_end()
    seen.append((b.content_index, b.open_kind))
    b.toolcall_start("c", "f")
    seen.append((b.content_index, b.open_kind))
    expected = [(0, None), (0, "thinking"), (1, None), (1, "toolCall")]
    assert expected == seen


def test_snapshot_is_the_reply_as_it_stands() -> None:
    b = new_builder()
    b.text_start()
    b.text_delta("par")
    assert reply(TextContent("par")) == b.snapshot()


def test_empty_block_has_empty_text() -> None:
    b = new_builder()
    b.text_start()
    end = b.text_end()
    expected = (("text_end", 0, ""), reply(TextContent("")))
    assert expected == (shape(end), end.partial)


# ------------------------------------------------------------------ lazy partials


def test_partials_are_not_built_until_read() -> None:
    _, events = three_blocks()
    assert [False] * len(events) == [is_materialized(event) for event in events]


def test_reading_one_partial_builds_only_that_one() -> None:
    _, events = three_blocks()
    partial = events[5].partial
    expected = (
        reply(ThinkingContent("Hm", thinking_signature="sig"), TextContent("Hel")),
        [index == 5 for index in range(len(events))],
    )
    assert expected == (partial, [is_materialized(event) for event in events])


def test_a_partial_is_built_once() -> None:
    _, events = three_blocks()
    assert events[6].partial is events[6].partial


# ------------------------------------------------------------------ equality


def test_events_made_alike_by_two_builders_are_equal() -> None:
    (_, first), (_, second) = three_blocks(), three_blocks()
    assert first == second


def test_equal_events_hash_alike() -> None:
    (_, first), (_, second) = three_blocks(), three_blocks()
    # A ToolCallEnd holds a ToolCall, whose dict of arguments has no hash: the
    # others do, tool-call deltas included (their partial holds a call).
    hashed = [index for index, event in enumerate(first) if not isinstance(event, ToolCallEnd)]
    assert [hash(first[i]) for i in hashed] == [hash(second[i]) for i in hashed]
    assert {first[9], first[10]} == {second[9], second[10]}


def test_events_with_different_partials_are_not_equal() -> None:
    first, second = new_builder(), new_builder()
    first.text_start()
    second.text_start()
    first.text_delta("a")
    assert first.text_delta("b") != second.text_delta("b")  # "ab" and "b"


def test_comparing_reads_the_same_partial_as_before() -> None:
    (_, first), (_, second) = three_blocks(), three_blocks()
    assert first[5] == second[5]
    expected = reply(ThinkingContent("Hm", thinking_signature="sig"), TextContent("Hel"))
    assert (expected, expected) == (first[5].partial, second[5].partial)


def test_an_event_shows_its_partial_as_a_placeholder() -> None:
    b = new_builder()
    b.text_start()
    expected = "TextDelta(content_index=0, delta='a', _partial=<partial message>)"
    assert expected == repr(b.text_delta("a"))


# ------------------------------------------------------------------ finish and done


def test_finish_turns_stop_into_tool_use_when_there_are_tool_calls() -> None:
    b, _ = three_blocks()
    expected = reply(
        ThinkingContent("Hm", thinking_signature="sig"),
        TextContent("Hello"),
        ToolCall("call_1", "read", {"p": "a"}),
        stop_reason="toolUse",
    )
    assert expected == b.finish("stop")


def test_finish_keeps_stop_without_tool_calls() -> None:
    b = new_builder()
    b.text_start()
    b.text_delta("x")
    b.text_end()
    assert reply(TextContent("x"), stop_reason="stop") == b.finish("stop")


@pytest.mark.parametrize("reason", ["length", "error", "aborted"])
def test_finish_keeps_other_reasons_with_tool_calls(reason: Any) -> None:
    b = new_builder()
    b.toolcall_start("c", "f")
    b.toolcall_end({})
    assert reply(ToolCall("c", "f", {}), stop_reason=reason) == b.finish(reason)


def test_finish_closes_the_open_block_and_keeps_the_error_message() -> None:
    b = new_builder()
    b.text_start()
    b.text_delta("half")
    b.usage = Usage(output=2)
    expected = (
        reply(
            TextContent("half"),
            usage=Usage(output=2),
            stop_reason="error",
            error_message="connection reset",
        ),
        None,
    )
    assert expected == (b.finish("error", "connection reset"), b.open_kind)


@pytest.mark.parametrize("reason", ["stop", "length", "toolUse"])
def test_done_of_a_normal_end_is_stream_done(reason: Any) -> None:
    message = reply(stop_reason=reason)
    assert StreamDone(reason, message) == AssistantMessageBuilder.done(message)


@pytest.mark.parametrize("reason", ["error", "aborted"])
def test_done_of_an_error_or_abort_is_stream_error(reason: Any) -> None:
    message = reply(stop_reason=reason, error_message="boom")
    assert StreamError(reason, message) == AssistantMessageBuilder.done(message)


# ------------------------------------------------------------------ misuse


def test_delta_with_no_open_block_is_an_error() -> None:
    b = new_builder()
    with pytest.raises(RuntimeError) as info:
        b.text_delta("x")
    expected = "no text block is open (open block: None)"
    assert expected == str(info.value)


def test_delta_of_another_kind_names_the_open_block() -> None:
    b = new_builder()
    b.text_start()
    with pytest.raises(RuntimeError) as info:
        b.thinking_delta("x")
    expected = "no thinking block is open (open block: 'text')"
    assert expected == str(info.value)


def test_end_of_another_kind_names_the_open_block() -> None:
    b = new_builder()
    b.toolcall_start("c", "f")
    with pytest.raises(RuntimeError) as info:
        b.text_end()
    expected = "no text block is open (open block: 'toolCall')"
    assert expected == str(info.value)


def test_tool_call_delta_after_the_call_ended_is_an_error() -> None:
    b = new_builder()
    b.toolcall_start("c", "f")
    b.toolcall_end()
    with pytest.raises(RuntimeError) as info:
        b.toolcall_delta("{}")
    expected = "no toolCall block is open (open block: None)"
    assert expected == str(info.value)


def test_signature_with_no_open_block_is_an_error() -> None:
    b = new_builder()
    with pytest.raises(RuntimeError) as info:
        b.set_signature("sig")
    expected = "no block is open to take a signature"
    assert expected == str(info.value)


def test_misuse_leaves_the_reply_unchanged() -> None:
    b = new_builder()
    b.text_start()
    b.text_delta("ok")
    with pytest.raises(RuntimeError):
        b.thinking_delta("x")
    assert reply(TextContent("ok")) == b.finish("stop")


# ------------------------------------------------------------------ signatures


def test_text_end_signature() -> None:
    b = new_builder()
    b.text_start()
    b.text_delta("x")
    end = b.text_end(signature="ts")
    expected = reply(TextContent("x", text_signature="ts"))
    assert expected == end.partial


def test_thinking_end_signature_and_redacted() -> None:
    b = new_builder()
    start = b.thinking_start(redacted=True)
    end = b.thinking_end(signature="opaque")
    expected = (
        reply(ThinkingContent("", redacted=True)),
        reply(ThinkingContent("", thinking_signature="opaque", redacted=True)),
    )
    assert expected == (start.partial, end.partial)


def test_set_signature_shows_from_the_next_event_on() -> None:
    b = new_builder()
    b.toolcall_start("c", "f")
    before = b.toolcall_delta("{}", {})
    b.set_signature("th")
    after = b.toolcall_end()
    expected = (
        reply(ToolCall("c", "f", {})),
        reply(ToolCall("c", "f", {}, thought_signature="th")),
    )
    assert expected == (before.partial, after.partial)


def test_end_without_signature_keeps_one_set_before() -> None:
    b = new_builder()
    b.thinking_start()
    b.set_signature("early")
    end = b.thinking_end()
    assert reply(ThinkingContent("", thinking_signature="early")) == end.partial


def test_signature_does_not_carry_over_to_the_next_block() -> None:
    b = new_builder()
    b.text_start()
    b.set_signature("first")
    b.text_start()
    b.text_end()
    expected = reply(TextContent("", text_signature="first"), TextContent(""))
    assert expected == b.finish("stop")


# ------------------------------------------------------------------ tool-call deltas


def test_tool_call_delta_with_partial_arguments() -> None:
    b = new_builder()
    b.toolcall_start("c", "write")
    first = b.toolcall_delta('{"path":"a"', {"path": "a"})
    second = b.toolcall_delta(',"n":1}', {"path": "a", "n": 1})
    expected = (
        reply(ToolCall("c", "write", {"path": "a"})),
        reply(ToolCall("c", "write", {"path": "a", "n": 1})),
    )
    assert expected == (first.partial, second.partial)


def test_tool_call_delta_without_arguments_keeps_the_last_ones() -> None:
    b = new_builder()
    b.toolcall_start("c", "write")
    b.toolcall_delta('{"path":', {})
    delta = b.toolcall_delta('"a"')
    assert reply(ToolCall("c", "write", {})) == delta.partial


def test_tool_call_end_defaults_to_the_last_partial_arguments() -> None:
    b = new_builder()
    b.toolcall_start("c", "write")
    b.toolcall_delta('{"n":1}', {"n": 1})
    end = b.toolcall_end()
    assert ("toolcall_end", 0, ToolCall("c", "write", {"n": 1})) == shape(end)


def test_tool_call_json_is_the_argument_text_so_far() -> None:
    b = new_builder()
    b.toolcall_start("c", "write")
    b.toolcall_delta('{"n":')
    b.toolcall_delta("1}")
    expected = '{"n":1}'
    assert expected == b.toolcall_json


# ------------------------------------------------------------------ linear work (invariant 14)


class CountingChunks(list[str]):
    """A chunk list that counts every chunk it hands out for joining.

    ``_OpenBlock`` keeps the deltas of the open block in ``chunks`` and reads
    them only by slicing or iterating (``"".join`` of a list subclass iterates
    it); both are counted, so ``handed_out`` is the number of chunk copies
    made while building texts, whatever the joining code looks like. Linear
    work means each chunk is handed out a bounded number of times; re-joining
    the whole text for each partial would hand out N * (N + 1) / 2 of them.
    """

    handed_out = 0

    @overload
    def __getitem__(self, index: SupportsIndex) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> str | list[str]:
        item = super().__getitem__(index)
        self.handed_out += len(item) if isinstance(index, slice) else 1
        return item

    def __iter__(self) -> Iterator[str]:
        for chunk in super().__iter__():
            self.handed_out += 1
            yield chunk


def test_streaming_many_deltas_is_linear() -> None:
    count = 100_000
    b = new_builder()
    events: list[Any] = [b.start(), b.text_start()]
    block = b._open  # private: the open block, to count how its chunks are read
    assert block is not None
    chunks = block.chunks = CountingChunks()
    events.extend(b.text_delta("x") for _ in range(count))

    built_while_streaming = sum(map(is_materialized, events))
    joined_while_streaming = chunks.handed_out

    # Read every partial in order, dropping each event once read (each partial
    # holds its own copy of the text: keeping them all would take N² memory).
    events.reverse()
    start = events.pop().partial
    texts_right = 0
    for length in range(count + 1):
        texts_right += events.pop().partial.text == "x" * length
    expected = (0, 0, reply(), count + 1, count)
    assert expected == (
        built_while_streaming,
        joined_while_streaming,
        start,
        texts_right,
        chunks.handed_out,
    )


def test_reading_only_the_final_partial_joins_each_chunk_once() -> None:
    count = 1_000
    b = new_builder()
    b.text_start()
    block = b._open  # private: the open block, to count how its chunks are read
    assert block is not None
    chunks = block.chunks = CountingChunks()
    deltas = [b.text_delta("ab") for _ in range(count)]
    end = b.text_end()
    expected = ("ab" * count, "ab" * count, count)
    assert expected == (end.content, deltas[-1].partial.text, chunks.handed_out)
