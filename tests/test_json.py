"""Tests of trio_agent._json: pi's camelCase JSON, both ways, and strict loading
(design.md#messages)."""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    Agent,
    AgentEnd,
    AgentMessage,
    AgentStart,
    AssistantContent,
    AssistantMessage,
    Cost,
    ImageContent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    StreamDone,
    StreamError,
    TextContent,
    TextDelta,
    ThinkingContent,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolResult,
    ToolResultMessage,
    TranscriptError,
    TrioAgentError,
    TurnEnd,
    TurnStart,
    Usage,
    UserMessage,
    dumps,
    from_json,
    loads,
    register_message_kind,
    to_json,
)
from trio_agent._json import _ALL_MESSAGES, MAX_NESTING
from trio_agent._messages import (
    ReplyThinkingLevel,
    SystemMessage,
    ToolDeclaration,
    ToolReference,
    UserContent,
)
from trio_agent.providers import faux


@register_message_kind
@attrs.frozen(kw_only=True)
class Bookmark:
    """An application's own message kind, kept in the transcript, never shown to the model."""

    role: ClassVar[str] = "bookmark"
    label: str
    created_at: int
    note: str | None = None


@attrs.frozen(kw_only=True)
class OutlineNode:
    label: str
    children: list[OutlineNode] = attrs.field(factory=list)


@register_message_kind
@attrs.frozen(kw_only=True)
class Outline:
    """An application's message kind whose data nests without bound."""

    role: ClassVar[str] = "outline"
    root: OutlineNode


ZERO_USAGE_JSON: dict[str, Any] = {
    "input": 0,
    "output": 0,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 0,
    "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0},
}

USAGE = Usage(
    input=10,
    output=20,
    cache_read=3,
    cache_write=5,
    total_tokens=38,
    cost=Cost(input=0.5, output=1.5, cache_read=0.25, cache_write=0.125, total=2.375),
)
USAGE_JSON = {
    "input": 10,
    "output": 20,
    "cacheRead": 3,
    "cacheWrite": 5,
    "totalTokens": 38,
    "cost": {"input": 0.5, "output": 1.5, "cacheRead": 0.25, "cacheWrite": 0.125, "total": 2.375},
}


def known_roles() -> str:
    """The roles an unknown-role message lists: the builtins, ``bookmark``, and whatever other
    test modules of the same session registered (the registry is process-wide)."""
    return ", ".join(sorted(_ALL_MESSAGES))


def problem(text: str, into: Any = list[AgentMessage]) -> str:
    """The message of the TranscriptError that loading ``text`` raises."""
    with pytest.raises(TranscriptError) as info:
        loads(text, into)
    return str(info.value)


def problem_of(data: Any) -> str:
    """The message of the TranscriptError that loading ``data`` as a transcript raises."""
    return problem(json.dumps(data))


USER = {"role": "user", "content": "hi", "timestamp": 1}

# ------------------------------------------------------------------ pi's shape: blocks


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        pytest.param(TextContent("hi"), {"type": "text", "text": "hi"}, id="text"),
        pytest.param(
            TextContent("hi", text_signature="ts"),
            {"type": "text", "text": "hi", "textSignature": "ts"},
            id="text-signature",
        ),
        pytest.param(ThinkingContent("hm"), {"type": "thinking", "thinking": "hm"}, id="thinking"),
        pytest.param(
            ThinkingContent("", thinking_signature="sig", redacted=True),
            {"type": "thinking", "thinking": "", "thinkingSignature": "sig", "redacted": True},
            id="thinking-redacted",
        ),
        pytest.param(
            ImageContent("iVBORw0KGgo=", "image/png"),
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            id="image",
        ),
        pytest.param(
            ToolCall("call_1", "read", {"path": "a.txt", "lines": [1, 2]}),
            {
                "type": "toolCall",
                "id": "call_1",
                "name": "read",
                "arguments": {"path": "a.txt", "lines": [1, 2]},
            },
            id="toolCall",
        ),
        pytest.param(
            ToolCall("call_1", "read", {}, thought_signature="th"),
            {
                "type": "toolCall",
                "id": "call_1",
                "name": "read",
                "arguments": {},
                "thoughtSignature": "th",
            },
            id="toolCall-signature",
        ),
    ],
)
def test_block_json_is_pis_shape(block: Any, expected: dict[str, Any]) -> None:
    assert expected == to_json(block)


# ------------------------------------------------------------------ pi's shape: messages


def test_user_message_with_string_content() -> None:
    expected = {"role": "user", "content": "hi", "timestamp": 1}
    assert expected == to_json(UserMessage("hi", timestamp=1))


def test_user_message_with_blocks() -> None:
    message = UserMessage.text("look", [ImageContent("R0lG", "image/gif")])
    message = attrs.evolve(message, timestamp=2)
    expected = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "data": "R0lG", "mimeType": "image/gif"},
        ],
        "timestamp": 2,
    }
    assert expected == to_json(message)


def test_assistant_message_with_every_field() -> None:
    message = AssistantMessage(
        content=(
            ThinkingContent("plan", thinking_signature="sig"),
            TextContent("Reading.", text_signature="ts"),
            ToolCall("call_1", "read", {"path": "a"}, thought_signature="th"),
        ),
        api="anthropic-messages",
        provider="anthropic",
        model="claude-x",
        usage=USAGE,
        stop_reason="error",
        error_message="overloaded",
        response_id="msg_1",
        timestamp=3,
    )
    expected = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "plan", "thinkingSignature": "sig"},
            {"type": "text", "text": "Reading.", "textSignature": "ts"},
            {
                "type": "toolCall",
                "id": "call_1",
                "name": "read",
                "arguments": {"path": "a"},
                "thoughtSignature": "th",
            },
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-x",
        "responseId": "msg_1",
        "usage": USAGE_JSON,
        "stopReason": "error",
        "errorMessage": "overloaded",
        "timestamp": 3,
    }
    assert expected == to_json(message)


def test_assistant_message_leaves_out_none_and_false_keys() -> None:
    message = AssistantMessage(
        content=(ThinkingContent("t"), TextContent("x"), ToolCall("c", "f")), timestamp=4
    )
    expected = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t"},
            {"type": "text", "text": "x"},
            {"type": "toolCall", "id": "c", "name": "f", "arguments": {}},
        ],
        "api": "",
        "provider": "",
        "model": "",
        "usage": ZERO_USAGE_JSON,
        "stopReason": "stop",
        "timestamp": 4,
    }
    assert expected == to_json(message)


def test_tool_result_message_with_every_field() -> None:
    message = ToolResultMessage(
        tool_call_id="call_1",
        tool_name="read",
        content=(TextContent("no such file"), ImageContent("AA==", "image/png")),
        details={"path": "a", "tries": [1, 2]},
        is_error=True,
        usage=USAGE,
        timestamp=5,
    )
    expected = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read",
        "content": [
            {"type": "text", "text": "no such file"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
        ],
        "details": {"path": "a", "tries": [1, 2]},
        "isError": True,
        "usage": USAGE_JSON,
        "timestamp": 5,
    }
    assert expected == to_json(message)


def test_tool_result_message_leaves_out_details_and_usage_when_none() -> None:
    message = ToolResultMessage(
        tool_call_id="call_1", tool_name="read", content=[TextContent("ok")], timestamp=6
    )
    expected = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
        "timestamp": 6,
    }
    assert expected == to_json(message)


def test_tool_result_keeps_falsy_details_other_than_none() -> None:
    message = ToolResultMessage(tool_call_id="c", tool_name="f", details=0, timestamp=6)
    expected = {
        "role": "toolResult",
        "toolCallId": "c",
        "toolName": "f",
        "content": [],
        "details": 0,
        "isError": False,
        "timestamp": 6,
    }
    assert expected == to_json(message)


def test_tool_result_json() -> None:
    result = ToolResult.text("done", details={"n": 1}, terminate=True)
    expected = {
        "content": [{"type": "text", "text": "done"}],
        "details": {"n": 1},
        "terminate": True,
    }
    assert expected == to_json(result)


def test_tool_result_json_leaves_out_none_keys() -> None:
    expected: dict[str, Any] = {"content": []}
    assert expected == to_json(ToolResult())


def test_to_json_of_a_list_is_a_list() -> None:
    expected = [USER, {"type": "text", "text": "x"}]
    assert expected == to_json([UserMessage("hi", timestamp=1), TextContent("x")])


def test_dumps_is_the_json_text_of_to_json() -> None:
    messages = [UserMessage("hi", timestamp=1)]
    expected = '[{"role": "user", "content": "hi", "timestamp": 1}]'
    assert expected == dumps(messages)


def test_dumps_keeps_unicode_as_is() -> None:
    expected = '{"type": "text", "text": "é 日本 🦀"}'
    assert expected == dumps(TextContent("é 日本 🦀"))


def test_dumps_indents_on_request() -> None:
    expected = '{\n  "type": "text",\n  "text": "x"\n}'
    assert expected == dumps(TextContent("x"), indent=2)


# ------------------------------------------------------------------ what dumps writes, loads reads


def result_with(details: Any) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id="c1", tool_name="f", content=[TextContent("ok")], details=details, timestamp=1
    )


def test_dumps_writes_numbers_json_has_no_place_for_as_null() -> None:
    details = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "long": 10**5000, "ok": 10**400}
    text = dumps([result_with(details)])
    assert '"details": {"nan": null, "inf": null, "-inf": null, "long": null, "ok": 1000' in text
    expected = {"nan": None, "inf": None, "-inf": None, "long": None, "ok": 10**400}
    assert [result_with(expected)] == loads(text)


def test_an_integer_of_4300_digits_is_written_and_one_more_digit_is_null() -> None:
    """Python writes an int of at most ``sys.get_int_max_str_digits()`` (4,300) digits."""
    assert sys.get_int_max_str_digits() == 4_300
    longest, too_long = 10**4_299, 10**4_300  # 4,300 and 4,301 digits
    text = dumps([result_with({"longest": longest, "too long": too_long})])
    assert [result_with({"longest": longest, "too long": None})] == loads(text)


def test_dumps_writes_lone_surrogates_as_the_replacement_character() -> None:
    message = UserMessage([TextContent("caf\udce9 \ud83d\ude00 \ud800")], timestamp=1)
    text = dumps([message, result_with({"k\udc80": ["\udfff"]})])
    assert "caf\ufffd \U0001f600 \ufffd" in text
    text.encode("utf-8")  # valid text: it can be saved
    assert [
        UserMessage([TextContent("caf\ufffd \U0001f600 \ufffd")], timestamp=1),
        result_with({"k\ufffd": ["\ufffd"]}),
    ] == loads(text)


def test_loads_reads_a_lone_surrogate_as_the_replacement_character() -> None:
    # JSON.stringify writes a lone surrogate as an escape; json.loads would keep it, and
    # every request made of the transcript afterwards could not be encoded.
    text = '[{"role": "user", "content": "a\\ud800b \\ud83d\\ude00", "timestamp": 1}]'
    assert [UserMessage("a\ufffdb \U0001f600", timestamp=1)] == loads(text)
    assert [UserMessage("a\ufffdb \U0001f600", timestamp=1)] == loads(text.encode())
    call = '{"type": "toolCall", "id": "c", "name": "f", "arguments": {"\\udc00": ["\\udbff"]}}'
    (message,) = loads(f'[{{"role": "assistant", "content": [{call}], "timestamp": 1}}]')
    assert message.content[0].arguments == {"\ufffd": ["\ufffd"]}


def test_loads_reads_lone_surrogates_in_text_given_as_a_string() -> None:
    text = '[{"role": "user", "content": [{"type": "text", "text": "\ud83d\ude00\udc00"}]}]'
    (message,) = loads(text)
    assert message.content == (TextContent("\U0001f600\ufffd"),)


def test_a_cost_that_is_not_finite_is_written_as_null_and_read_as_nan() -> None:
    cost = Cost(input=math.nan, output=math.inf, cache_read=-math.inf, total=1.5)
    message = AssistantMessage(content=[], usage=Usage(cost=cost), timestamp=1)
    text = dumps(message)
    assert '"cost": {"input": null, "output": null, "cacheRead": null, "cacheWrite": 0.0' in text
    read = loads(text, AssistantMessage).usage.cost
    assert [math.isnan(read.input), math.isnan(read.output), math.isnan(read.cache_read)] == [
        True,
        True,
        True,
    ]
    assert (read.cache_write, read.total) == (0.0, 1.5)


def test_dumps_takes_any_sequence_of_messages() -> None:
    class Messages(Sequence[Any]):
        def __init__(self, items: list[Any]) -> None:
            self.items = items

        def __getitem__(self, index: Any) -> Any:
            return self.items[index]

        def __len__(self) -> int:
            return len(self.items)

    messages = [UserMessage("hi", timestamp=1), result_with({"k": (1, Messages([2]))})]
    expected = dumps(messages)
    assert expected == dumps(tuple(messages))
    assert expected == dumps(Messages(messages))
    assert to_json(Messages(messages)) == to_json(messages)


async def test_dumps_takes_the_agents_transcript_as_it_is() -> None:
    agent = Agent(faux.model(["Noted."]))
    await agent.prompt("Remember this.")
    assert dumps(agent.state.messages) == dumps(list(agent.state.messages))
    assert loads(dumps(agent.state.messages)) == list(agent.state.messages)


def nested_value(depth: int, leaf: Any = "leaf") -> Any:
    """``leaf`` inside ``depth`` arrays and objects, in turn."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def from_deep_in_the_stack(frames: int, call: Callable[[], Any]) -> Any:
    return call() if frames == 0 else from_deep_in_the_stack(frames - 1, call)


def test_a_value_nested_as_deep_as_dumps_writes_is_read_back() -> None:
    deep = nested_value(MAX_NESTING)
    messages = [
        result_with(deep),
        AssistantMessage(content=[ToolCall("c", "f", {"a": nested_value(MAX_NESTING - 1)})]),
    ]
    text = dumps(messages)
    assert messages == loads(text)
    # and from deep in a stack, as an application's task would call it
    assert messages == from_deep_in_the_stack(400, lambda: loads(text))


@pytest.mark.parametrize(
    ("message", "what"),
    [
        (result_with(nested_value(MAX_NESTING + 1)), "ToolResultMessage.details"),
        (
            AssistantMessage(content=[ToolCall("c", "f", {"a": nested_value(MAX_NESTING)})]),
            "ToolCall.arguments",
        ),
        (
            ToolExecutionStart("c", "f", nested_value(MAX_NESTING + 1)),
            "ToolExecutionStart.args",
        ),
    ],
)
def test_dumps_refuses_a_value_nested_deeper_than_max_nesting(message: Any, what: str) -> None:
    expected = (
        f"cannot write {what} as JSON: it is nested deeper than {MAX_NESTING} arrays and objects"
    )
    with pytest.raises(ValueError, match="^" + re.escape(expected)):
        dumps([message])


def test_dumps_refuses_a_message_kind_nested_deeper_than_python_goes() -> None:
    node = OutlineNode(label="leaf")
    for _ in range(TOO_DEEP):
        node = OutlineNode(label="x", children=[node])
    expected = (
        r"^cannot write list \[<Outline instance at 0x\w+>\] as JSON: nested too deeply"
        r" \(past Python's recursion limit\)$"
    )
    with pytest.raises(ValueError, match=expected):
        dumps([Outline(root=node)])


# ------------------------------------------------------------------ loading pi's JSON


def test_loads_a_pi_assistant_message() -> None:
    text = json.dumps(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Let me read it.", "thinkingSignature": "E1"},
                    {"type": "text", "text": "Reading."},
                    {"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"p": 1}},
                ],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": {
                    "input": 10,
                    "output": 20,
                    "cacheRead": 0,
                    "cacheWrite": 5,
                    "totalTokens": 35,
                    "cost": {
                        "input": 0.5,
                        "output": 1,
                        "cacheRead": 0,
                        "cacheWrite": 0.25,
                        "total": 1.75,
                    },
                },
                "stopReason": "toolUse",
                "timestamp": 1712345678901,
            }
        ]
    )
    expected = [
        AssistantMessage(
            content=(
                ThinkingContent("Let me read it.", thinking_signature="E1"),
                TextContent("Reading."),
                ToolCall("toolu_1", "read", {"p": 1}),
            ),
            api="anthropic-messages",
            provider="anthropic",
            model="claude-sonnet-4-5",
            usage=Usage(
                input=10,
                output=20,
                cache_read=0,
                cache_write=5,
                total_tokens=35,
                cost=Cost(input=0.5, output=1.0, cache_read=0.0, cache_write=0.25, total=1.75),
            ),
            stop_reason="toolUse",
            timestamp=1712345678901,
        )
    ]
    assert expected == loads(text)


def test_one_hour_cache_writes_are_pis_cache_write_1h_and_left_out_when_0() -> None:
    """pi's Anthropic replies carry ``cacheWrite1h`` (0 when none were written): read as
    ``cache_write_long``, written back under pi's key, and left out when 0, so a usage
    without one-hour writes is written as before."""
    usage = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 5, "cacheWrite1h": 3}
    message = {
        "role": "assistant",
        "content": [],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {**usage, "totalTokens": 8},
        "stopReason": "stop",
        "timestamp": 1,
    }
    (loaded,) = loads(json.dumps([message]))
    assert isinstance(loaded, AssistantMessage)
    assert (loaded.usage.cache_write, loaded.usage.cache_write_long) == (5, 3)
    assert to_json(loaded)["usage"]["cacheWrite1h"] == 3
    zero = {**message, "usage": {**usage, "cacheWrite1h": 0, "totalTokens": 8}}
    (loaded_zero,) = loads(json.dumps([zero]))
    assert loaded_zero == attrs.evolve(loaded, usage=attrs.evolve(loaded.usage, cache_write_long=0))
    assert "cacheWrite1h" not in to_json(loaded_zero)["usage"]
    assert list(to_json(Usage())) == [
        "input",
        "output",
        "cacheRead",
        "cacheWrite",
        "totalTokens",
        "cost",
    ]
    wrong = {**message, "usage": {**usage, "cacheWrite1h": "3", "totalTokens": 8}}
    with pytest.raises(TranscriptError, match=r"got str '3' @ \$\[0\]\.usage\.cacheWrite1h$"):
        loads(json.dumps([wrong]))


def test_loads_a_pi_tool_result_message() -> None:
    text = json.dumps(
        [
            {
                "role": "toolResult",
                "toolCallId": "toolu_1",
                "toolName": "read",
                "content": [{"type": "text", "text": "hello"}],
                "details": {"bytes": 5},
                "isError": False,
                "timestamp": 9,
            }
        ]
    )
    expected = [
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="read",
            content=(TextContent("hello"),),
            details={"bytes": 5},
            timestamp=9,
        )
    ]
    assert expected == loads(text)


def test_loads_a_message_without_timestamp_as_now() -> None:
    before = time.time_ns() // 1_000_000
    [message] = loads('[{"role": "user", "content": "hi"}]')
    after = time.time_ns() // 1_000_000
    expected = (UserMessage("hi", timestamp=message.timestamp), True)
    assert expected == (message, before <= message.timestamp <= after)


def test_loads_missing_optional_keys_as_defaults() -> None:
    [message] = loads('[{"role": "assistant", "timestamp": 7}]')
    assert AssistantMessage(timestamp=7) == message


def test_loads_keys_written_with_their_default_values() -> None:
    text = json.dumps(
        [
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "t", "redacted": False}],
                "errorMessage": None,
                "timestamp": 7,
            }
        ]
    )
    expected = [AssistantMessage(content=(ThinkingContent("t"),), timestamp=7)]
    assert expected == loads(text)


def test_loads_accepts_bytes() -> None:
    expected = [UserMessage("hi", timestamp=1)]
    assert expected == loads(b'[{"role": "user", "content": "hi", "timestamp": 1}]')


def test_loads_one_message() -> None:
    expected = UserMessage("hi", timestamp=1)
    assert expected == loads(json.dumps(USER), UserMessage)


def test_loads_one_message_of_any_kind() -> None:
    expected = ToolResultMessage(tool_call_id="c", tool_name="f", timestamp=1)
    text = '{"role": "toolResult", "toolCallId": "c", "toolName": "f", "timestamp": 1}'
    assert expected == loads(text, AgentMessage)


def test_loads_a_message_class_without_its_role_key() -> None:
    expected = UserMessage("hi", timestamp=1)
    assert expected == loads('{"content": "hi", "timestamp": 1}', UserMessage)


def test_loads_a_list_of_blocks() -> None:
    expected = [ThinkingContent("t", redacted=True), TextContent("x")]
    text = (
        '[{"type": "thinking", "thinking": "t", "redacted": true}, {"type": "text", "text": "x"}]'
    )
    assert expected == loads(text, list[AssistantContent])


def test_from_json_reads_plain_data() -> None:
    expected = [UserMessage("hi", timestamp=1)]
    assert expected == from_json([USER])


# ------------------------------------------------------------------ round trips


def test_round_trip_of_a_transcript_of_every_kind() -> None:
    messages: list[Any] = [
        UserMessage("hi", timestamp=1),
        UserMessage.text("see", [ImageContent("AA==", "image/png")]),
        AssistantMessage(
            content=(
                ThinkingContent("", thinking_signature="opaque", redacted=True),
                TextContent("ok", text_signature="ts"),
                ToolCall("c1", "read", {"nested": {"list": [1, 2.5, None, True]}}),
            ),
            api="x",
            usage=USAGE,
            stop_reason="toolUse",
            timestamp=2,
        ),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="read",
            content=(TextContent("data"),),
            details=[1, "two"],
            is_error=True,
            usage=USAGE,
            timestamp=3,
        ),
        Bookmark(label="here", created_at=4),
        AssistantMessage(stop_reason="aborted", error_message="Operation aborted", timestamp=5),
    ]
    assert messages == loads(dumps(messages))


def test_round_trip_of_a_tool_result() -> None:
    result = ToolResult(content=[TextContent("x")], details={"a": None}, terminate=False)
    assert result == loads(dumps(result), ToolResult)


# ------------------------------------------------------------------ strict loading


def test_transcript_error_is_a_value_error_of_ours() -> None:
    assert issubclass(TranscriptError, ValueError)
    assert issubclass(TranscriptError, TrioAgentError)


def test_unknown_key_is_an_error() -> None:
    expected = "invalid transcript:\n  extra fields found (colour) @ $[1]"
    assert expected == problem_of([USER, {**USER, "colour": "red"}])


def test_unknown_key_in_a_block_is_an_error() -> None:
    bad = {"role": "user", "content": [{"type": "text", "text": "a", "bold": True}]}
    expected = "invalid transcript:\n  extra fields found (bold) @ $[1].content[0]"
    assert expected == problem_of([USER, bad])


def test_unknown_role_is_an_error() -> None:
    expected = (
        f"invalid transcript:\n  unknown message role 'developer' (known: {known_roles()}) @ $[1]"
    )
    assert expected == problem_of([USER, {"role": "developer", "content": "x"}])


def test_missing_role_is_an_error() -> None:
    expected = f"invalid transcript:\n  unknown message role None (known: {known_roles()}) @ $[0]"
    assert expected == problem_of([{"content": "x"}])


def test_unknown_block_type_is_an_error() -> None:
    bad = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "video"}]}
    expected = (
        "invalid transcript:\n"
        "  unknown content block type 'video' (known: image, text) @ $[1].content[1]"
    )
    assert expected == problem_of([USER, bad])


def test_block_type_not_allowed_in_an_assistant_message_is_an_error() -> None:
    bad = {"role": "assistant", "content": [{"type": "image", "data": "A", "mimeType": "x"}]}
    expected = (
        "invalid transcript:\n"
        "  unknown content block type 'image' (known: text, thinking, toolCall) @ $[0].content[0]"
    )
    assert expected == problem_of([bad])


def test_block_type_not_allowed_in_a_user_message_is_an_error() -> None:
    bad = {"role": "user", "content": [{"type": "thinking", "thinking": "t"}]}
    expected = (
        "invalid transcript:\n"
        "  unknown content block type 'thinking' (known: image, text) @ $[0].content[0]"
    )
    assert expected == problem_of([bad])


def test_wrong_type_of_a_string_field_is_an_error() -> None:
    bad = {"role": "user", "content": [{"type": "text", "text": 5}]}
    expected = "invalid transcript:\n  expected a string, got int 5 @ $[0].content[0].text"
    assert expected == problem_of([bad])


def test_wrong_type_of_a_boolean_field_is_an_error() -> None:
    bad = {"role": "toolResult", "toolCallId": "c", "toolName": "f", "isError": "false"}
    expected = "invalid transcript:\n  expected true or false, got str 'false' @ $[0].isError"
    assert expected == problem_of([bad])


def test_wrong_type_of_an_integer_field_is_an_error() -> None:
    expected = "invalid transcript:\n  expected an integer, got str '7' @ $[0].timestamp"
    assert expected == problem_of([{**USER, "timestamp": "7"}])


def test_float_for_an_integer_field_is_an_error() -> None:
    bad = {"role": "assistant", "usage": {**ZERO_USAGE_JSON, "input": 1.5}}
    expected = "invalid transcript:\n  expected an integer, got float 1.5 @ $[0].usage.input"
    assert expected == problem_of([bad])


def test_boolean_for_a_number_field_is_an_error() -> None:
    cost = {**ZERO_USAGE_JSON["cost"], "total": True}
    bad = {"role": "assistant", "usage": {**ZERO_USAGE_JSON, "cost": cost}}
    expected = "invalid transcript:\n  expected a number, got bool True @ $[0].usage.cost.total"
    assert expected == problem_of([bad])


def test_object_for_content_is_an_error() -> None:
    bad = {"role": "assistant", "content": {"type": "text", "text": "x"}}
    expected = (
        "invalid transcript:\n"
        "  expected a JSON array, got dict {'text': 'x', 'type': 'text'} @ $[0].content"
    )
    assert expected == problem_of([bad])


def test_string_for_assistant_content_is_an_error() -> None:
    expected = "invalid transcript:\n  expected a JSON array, got str 'hi' @ $[0].content"
    assert expected == problem_of([{"role": "assistant", "content": "hi"}])


def test_number_for_user_content_is_an_error() -> None:
    expected = (
        "invalid transcript:\n"
        "  expected a string or a JSON array of content blocks, got int 5 @ $[0].content"
    )
    assert expected == problem_of([{"role": "user", "content": 5}])


def test_the_error_names_what_was_read() -> None:
    bad = '{"role": "user", "content": 5}'
    with pytest.raises(TranscriptError, match=r"^invalid UserMessage:\n"):
        loads(bad, UserMessage)
    with pytest.raises(TranscriptError, match=r"^invalid list\[UserMessage\]:\n"):
        loads(f"[{bad}]", list[UserMessage])
    with pytest.raises(TranscriptError, match=r"^invalid message:\n"):
        loads("5", AgentMessage)


def test_array_for_tool_arguments_is_an_error() -> None:
    bad = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c", "name": "f", "arguments": [1]}],
    }
    expected = "invalid transcript:\n  expected a mapping @ $[0].content[0].arguments"
    assert expected == problem_of([bad])


def test_a_transcript_must_be_an_array() -> None:
    expected = "invalid transcript:\n  expected a JSON array, got dict {} @ $"
    assert expected == problem("{}")


def test_a_message_must_be_an_object() -> None:
    expected = "invalid transcript:\n  expected a JSON object (message), got int @ $[1]"
    assert expected == problem_of([USER, 5])


def test_missing_required_key_is_an_error() -> None:
    bad = {"role": "toolResult", "toolName": "f", "timestamp": 1}
    expected = "invalid transcript:\n  required field missing @ $[0].toolCallId"
    assert expected == problem_of([bad])


def test_unknown_stop_reason_is_an_error() -> None:
    expected = (
        "invalid transcript:\n  expected one of 'stop', 'length', 'toolUse', 'error', "
        "'aborted', got 'finished' @ $[0].stopReason"
    )
    assert expected == problem_of([{"role": "assistant", "stopReason": "finished"}])


def test_every_problem_is_listed() -> None:
    bad = [{"role": "user", "content": [{"type": "text"}], "extra": 1}, {"role": "nobody"}]
    expected = (
        "invalid transcript:\n"
        "  required field missing @ $[0].content[0].text\n"
        "  extra fields found (extra) @ $[0]\n"
        f"  unknown message role 'nobody' (known: {known_roles()}) @ $[1]"
    )
    assert expected == problem_of(bad)


def test_role_that_is_not_the_class_asked_for_is_an_error() -> None:
    expected = "invalid UserMessage:\n  role 'assistant' is not 'user' @ $"
    assert expected == problem('{"role": "assistant", "content": "x"}', UserMessage)


def test_invalid_json_text_is_an_error() -> None:
    expected = "not valid JSON: Expecting ',' delimiter: line 1 column 36 (char 35)"
    assert expected == problem('[{"role": "user", "content": "hi"} {"role": "user"}]')


def test_from_json_error_names_the_path() -> None:
    with pytest.raises(TranscriptError) as info:
        from_json([USER, {**USER, "content": [{"type": "image", "data": "A"}]}])
    expected = "invalid transcript:\n  required field missing @ $[1].content[0].mimeType"
    assert expected == str(info.value)


# ------------------------------------------------------------------ untrusted text


def nested(depth: int, inner: str = "1") -> str:
    """``inner`` inside ``depth`` JSON arrays."""
    return "[" * depth + inner + "]" * depth


TOO_DEEP = 10 * sys.getrecursionlimit()


def test_json_nested_deeper_than_the_parser_goes_is_an_error() -> None:
    expected = (
        "not readable JSON: arrays and objects nested too deeply (past Python's recursion limit)"
    )
    assert expected == problem(nested(TOO_DEEP))


def test_deeply_nested_tool_arguments_are_an_error() -> None:
    call = {"type": "toolCall", "id": "c", "name": "f", "arguments": {"a": "@"}}
    text = json.dumps([{"role": "assistant", "content": [call]}]).replace('"@"', nested(TOO_DEEP))
    expected = (
        "not readable JSON: arrays and objects nested too deeply (past Python's recursion limit)"
    )
    assert expected == problem(text)


def cost_total(number: str) -> str:
    """A transcript whose one message's ``usage.cost.total`` is the JSON text ``number``."""
    cost = {**ZERO_USAGE_JSON["cost"], "total": "@"}
    message = {"role": "assistant", "usage": {**ZERO_USAGE_JSON, "cost": cost}}
    return json.dumps([message]).replace('"@"', number)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(constant: str) -> None:
    expected = f"not valid JSON: {constant} is not a JSON value"
    assert expected == problem(cost_total(constant))


def test_number_too_large_for_a_float_is_an_error() -> None:
    expected = (
        "invalid transcript:\n  expected a finite number, got float inf @ $[0].usage.cost.total"
    )
    assert expected == problem(cost_total("1e400"))


def test_integer_too_large_for_a_float_is_an_error() -> None:
    shown = "1" + "0" * 27 + "..." + "0" * 29
    expected = (
        "invalid transcript:\n"
        f"  expected a number that fits a float, got int {shown} @ $[0].usage.cost.total"
    )
    assert expected == problem(cost_total("1" + "0" * 400))


def test_a_wrong_value_is_shown_briefly_however_deep_it_nests() -> None:
    deep: Any = 1
    for _ in range(TOO_DEEP):
        deep = [deep]
    expected = "invalid transcript:\n  expected an integer, got list [[[...]]] @ $[0].timestamp"
    with pytest.raises(TranscriptError) as info:
        from_json([{**USER, "timestamp": deep}])
    assert expected == str(info.value)


def test_a_message_kind_nested_deeper_than_python_goes_is_an_error() -> None:
    root: dict[str, Any] = {"label": "leaf"}
    for _ in range(TOO_DEEP):
        root = {"label": "x", "children": [root]}
    with pytest.raises(TranscriptError) as info:
        from_json([{"role": "outline", "root": root}])
    expected = (
        "invalid transcript:\n"
        "  nested too deeply to read (past Python's recursion limit) @ $[0].root.children[0]"
    )
    assert expected == str(info.value)[: len(expected)]


# ------------------------------------------------------------------ custom message kinds


def test_custom_message_dumps_in_camel_case_with_its_role() -> None:
    expected = {"role": "bookmark", "label": "start", "createdAt": 12, "note": "first"}
    assert expected == to_json(Bookmark(label="start", created_at=12, note="first"))


def test_custom_message_loads_inside_a_transcript() -> None:
    text = json.dumps([USER, {"role": "bookmark", "label": "start", "createdAt": 12, "note": None}])
    expected = [UserMessage("hi", timestamp=1), Bookmark(label="start", created_at=12)]
    assert expected == loads(text)


def test_custom_message_loading_is_strict() -> None:
    bad = {"role": "bookmark", "label": "x", "createdAt": "soon", "pinned": True}
    expected = (
        "invalid transcript:\n"
        "  expected an integer, got str 'soon' @ $[0].createdAt\n"
        "  extra fields found (pinned) @ $[0]"
    )
    assert expected == problem_of([bad])


def test_a_registered_kind_is_among_the_known_roles() -> None:
    expected = {"assistant", "bookmark", "toolResult", "user"}
    assert expected == expected & set(known_roles().split(", "))


def test_registering_a_class_again_is_allowed() -> None:
    assert Bookmark is register_message_kind(Bookmark)


def test_registering_a_builtin_role_is_an_error() -> None:
    @attrs.frozen
    class Impostor:
        role: ClassVar[str] = "user"
        content: str

    with pytest.raises(ValueError, match="role 'user' is already used by UserMessage"):
        register_message_kind(Impostor)


def test_registering_a_role_already_taken_is_an_error() -> None:
    @attrs.frozen
    class OtherBookmark:
        role: ClassVar[str] = "bookmark"
        label: str

    with pytest.raises(ValueError, match="role 'bookmark' is already used by Bookmark"):
        register_message_kind(OtherBookmark)


def test_registering_a_class_that_is_not_attrs_is_an_error() -> None:
    class Plain:
        role: ClassVar[str] = "plain"

    with pytest.raises(TypeError, match="is not an attrs class"):
        register_message_kind(Plain)


def test_registering_a_class_without_a_role_is_an_error() -> None:
    @attrs.frozen
    class Roleless:
        label: str

    with pytest.raises(TypeError, match="Roleless needs a 'role' class attribute"):
        register_message_kind(Roleless)


# ------------------------------------------------------------------ events (written only)


def test_turn_end_dumps() -> None:
    reply = AssistantMessage(content=[ToolCall("c", "f")], stop_reason="toolUse", timestamp=1)
    result = ToolResultMessage(tool_call_id="c", tool_name="f", timestamp=2)
    expected = {
        "type": "turn_end",
        "message": {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c", "name": "f", "arguments": {}}],
            "api": "",
            "provider": "",
            "model": "",
            "usage": ZERO_USAGE_JSON,
            "stopReason": "toolUse",
            "timestamp": 1,
        },
        "toolResults": [
            {
                "role": "toolResult",
                "toolCallId": "c",
                "toolName": "f",
                "content": [],
                "isError": False,
                "timestamp": 2,
            }
        ],
    }
    assert expected == json.loads(dumps(TurnEnd(reply, [result])))


def test_message_update_dumps_its_message_and_stream_event() -> None:
    partial = AssistantMessage(content=[TextContent("Hel")], model="m", timestamp=1)
    partial_json = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hel"}],
        "api": "",
        "provider": "",
        "model": "m",
        "usage": ZERO_USAGE_JSON,
        "stopReason": "stop",
        "timestamp": 1,
    }
    expected = {
        "type": "message_update",
        "assistantMessageEvent": {
            "type": "text_delta",
            "contentIndex": 0,
            "delta": "l",
            "partial": partial_json,
        },
        "message": partial_json,
    }
    assert expected == json.loads(dumps(MessageUpdate(TextDelta(0, "l", partial))))


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(AgentStart(), {"type": "agent_start"}, id="agent_start"),
        pytest.param(TurnStart(), {"type": "turn_start"}, id="turn_start"),
        pytest.param(
            AgentEnd([UserMessage("hi", timestamp=1), Bookmark(label="b", created_at=2)]),
            {
                "type": "agent_end",
                "messages": [
                    USER,
                    {"role": "bookmark", "label": "b", "createdAt": 2, "note": None},
                ],
            },
            id="agent_end",
        ),
        pytest.param(
            MessageStart(UserMessage("hi", timestamp=1)),
            {"type": "message_start", "message": USER},
            id="message_start",
        ),
        pytest.param(
            MessageEnd(UserMessage("hi", timestamp=1)),
            {"type": "message_end", "message": USER},
            id="message_end",
        ),
        pytest.param(
            ToolExecutionStart("c", "read", {"path": "a"}),
            {
                "type": "tool_execution_start",
                "toolCallId": "c",
                "toolName": "read",
                "args": {"path": "a"},
            },
            id="tool_execution_start",
        ),
        pytest.param(
            ToolExecutionUpdate("c", "read", {"path": "a"}, ToolResult.text("50%")),
            {
                "type": "tool_execution_update",
                "toolCallId": "c",
                "toolName": "read",
                "args": {"path": "a"},
                "partialResult": {"content": [{"type": "text", "text": "50%"}]},
            },
            id="tool_execution_update",
        ),
        pytest.param(
            ToolExecutionEnd("c", "read", ToolResult.text("boom", details={"code": 2}), True),
            {
                "type": "tool_execution_end",
                "toolCallId": "c",
                "toolName": "read",
                "result": {"content": [{"type": "text", "text": "boom"}], "details": {"code": 2}},
                "isError": True,
            },
            id="tool_execution_end",
        ),
    ],
)
def test_agent_event_dumps(event: Any, expected: dict[str, Any]) -> None:
    assert expected == json.loads(dumps(event))


def test_done_event_dumps() -> None:
    message = AssistantMessage(content=[TextContent("x")], timestamp=1)
    expected = {"type": "done", "reason": "stop", "message": to_json(message)}
    assert expected == json.loads(dumps(StreamDone("stop", message)))


def test_error_event_dumps_its_message_as_error() -> None:
    message = AssistantMessage(
        stop_reason="aborted", error_message="Operation aborted", timestamp=1
    )
    expected = {
        "type": "error",
        "reason": "aborted",
        "error": {
            "role": "assistant",
            "content": [],
            "api": "",
            "provider": "",
            "model": "",
            "usage": ZERO_USAGE_JSON,
            "stopReason": "aborted",
            "errorMessage": "Operation aborted",
            "timestamp": 1,
        },
    }
    assert expected == json.loads(dumps(StreamError("aborted", message)))


# ------------------------------------------------------------------ property: round trip

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
timestamps = st.integers(min_value=0, max_value=2**53)
counts = st.integers(min_value=0, max_value=2**40)
amounts = st.floats(min_value=0, allow_nan=False, allow_infinity=False)

costs = st.builds(
    Cost,
    input=amounts,
    output=amounts,
    cache_read=amounts,
    cache_write=amounts,
    total=amounts,
    total_from_provider=st.booleans(),
)
usages = st.builds(
    Usage,
    input=counts,
    output=counts,
    cache_read=counts,
    cache_write=counts,
    reasoning=st.none() | counts,
    total_tokens=counts,
    cost=costs,
)


def transcripts_of(
    text: st.SearchStrategy[str], values: st.SearchStrategy[Any]
) -> st.SearchStrategy[list[Any]]:
    """Transcripts of every kind of message, whose strings are ``text`` and whose free-form
    values (arguments, details) are ``values``."""
    optional_text = st.none() | text
    texts = st.builds(TextContent, text, text_signature=optional_text)
    thinkings = st.builds(
        ThinkingContent, text, thinking_signature=optional_text, redacted=st.booleans()
    )
    images = st.builds(ImageContent, text, st.sampled_from(["image/png", "image/jpeg", ""]))
    tool_calls = st.builds(
        ToolCall,
        text,
        text,
        st.dictionaries(text, values, max_size=4),
        thought_signature=optional_text,
        extra=st.none()
        | st.fixed_dictionaries({}, optional={"namespace": text, "argumentsError": text}).filter(
            bool  # an empty extra is written as none
        ),
    )
    user_messages = st.builds(
        UserMessage,
        text | st.lists(texts | images, max_size=4),
        timestamp=timestamps,
    )
    assistant_messages = st.builds(
        AssistantMessage,
        content=st.lists(texts | thinkings | tool_calls, max_size=4),
        api=text,
        provider=text,
        model=text,
        usage=usages,
        stop_reason=st.sampled_from(["stop", "length", "toolUse", "error", "aborted"]),
        error_message=optional_text,
        response_id=optional_text,
        thinking_level=st.none() | st.sampled_from(typing.get_args(ReplyThinkingLevel)),
        extra=st.none()
        | st.fixed_dictionaries(
            {},
            optional={
                "responseModel": text,
                "rawStopReason": text,
                "diagnostics": st.lists(values, max_size=2),
                "durationMs": st.integers(0, 10**9) | st.floats(0, 1e9),
            },
        ).filter(bool),  # an empty extra is written as none
        timestamp=timestamps,
    )
    sections = st.dictionaries(text, optional_text, max_size=3)
    declarations = st.builds(
        ToolDeclaration,
        text,
        text,
        st.dictionaries(text, values, max_size=3),
        constrained_sampling=st.none() | st.just(False) | values,
    )
    system_messages = st.builds(
        SystemMessage,
        text | st.lists(texts, max_size=3),
        sections=st.none() | sections,
        tools_added=st.lists(declarations, max_size=2),
        tools_removed=st.lists(st.builds(ToolReference, text), max_size=2),
        timestamp=timestamps,
    )
    tool_result_messages = st.builds(
        ToolResultMessage,
        tool_call_id=text,
        tool_name=text,
        content=st.lists(texts | images, max_size=4),
        details=values,
        is_error=st.booleans(),
        usage=st.none() | usages,
        timestamp=timestamps,
    )
    bookmarks = st.builds(Bookmark, label=text, created_at=timestamps, note=optional_text)
    return st.lists(
        user_messages | assistant_messages | tool_result_messages | system_messages | bookmarks,
        max_size=6,
    )


transcripts = transcripts_of(st.text(), json_values)


@given(transcripts)
def test_any_transcript_survives_a_round_trip(messages: list[Any]) -> None:
    assert messages == loads(dumps(messages))


# ------------------------------------------------------------------ property: what dumps writes
#
# Whatever a transcript holds, loads reads what dumps wrote: lone surrogates in any string,
# NaN, infinities and integers too long to write in any free-form value, values nested as
# deep as dumps writes. What comes back is the transcript with the documented repairs.

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)  # surrogates too
# Integers past Python's limit of 4,300 digits written as text, and just under it.
long_integers = st.sampled_from([4299, 4300, 5000]) | st.just(-5000)
long_integers = long_integers.map(lambda digits: 10**digits if digits > 0 else -(10**-digits))
any_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | long_integers
    | st.floats()  # NaN and the infinities too
    | any_text
)
any_values = st.recursive(
    any_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a pair joined into its
    character): what dumps writes and loads reads."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def repaired(value: Any) -> Any:
    """``value`` as loads(dumps(...)) gives it back: the documented repairs."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        try:
            str(value)
        except ValueError:  # too long to write as text
            return None
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [repaired(item) for item in value]
    if isinstance(value, tuple):
        return tuple(repaired(item) for item in value)
    if isinstance(value, dict):
        return {repaired(key): repaired(item) for key, item in value.items()}
    assert attrs.has(type(value))
    fields = attrs.fields(type(value))
    return attrs.evolve(value, **{f.alias: repaired(getattr(value, f.name)) for f in fields})


@settings(max_examples=200)
@given(transcripts_of(any_text, any_values))
def test_what_dumps_writes_loads_reads_whatever_the_transcript_holds(messages: list[Any]) -> None:
    text = dumps(messages)
    text.encode("utf-8")  # valid text, which a file can hold
    assert repaired(messages) == loads(text)
    assert text == dumps(loads(text))


@settings(max_examples=50)
@given(
    st.integers(min_value=0, max_value=MAX_NESTING - 1),
    any_scalars,
    st.sampled_from(["details", "arguments"]),
)
def test_what_dumps_writes_loads_reads_however_deep_it_nests(
    depth: int, leaf: Any, where: str
) -> None:
    value = nested_value(depth, leaf)
    expected = nested_value(depth, repaired(leaf))
    if where == "details":
        messages: list[Any] = [result_with(value)]
        assert [result_with(expected)] == loads(dumps(messages))
    else:
        messages = [AssistantMessage(content=[ToolCall("c", "f", {"a": value})], timestamp=1)]
        (read,) = loads(dumps(messages))
        assert read.content[0].arguments == {"a": expected}


# ------------------------------------------------------------------ property: untrusted text
#
# loads' promise for any text at all: a value of the type asked for, or a TranscriptError.
# Anything else (RecursionError, OverflowError, AttributeError, ...) escaping fails these.

PI_TRANSCRIPT: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
        ],
        "timestamp": 1,
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t", "thinkingSignature": "s"},
            {"type": "text", "text": "x"},
            {"type": "toolCall", "id": "c1", "name": "f", "arguments": {"a": [1, {"b": None}]}},
        ],
        "api": "a",
        "provider": "p",
        "model": "m",
        "usage": USAGE_JSON,
        "stopReason": "toolUse",
        "timestamp": 2,
    },
    {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "f",
        "content": [{"type": "text", "text": "ok"}],
        "details": {"k": [1, 2]},
        "isError": False,
        "timestamp": 3,
    },
]
READ_AS: list[Any] = [
    list[AgentMessage],
    AgentMessage,
    UserMessage,
    AssistantMessage,
    ToolResultMessage,
    Usage,
    Cost,
    ToolCall,
    AssistantContent,
    UserContent,
    list[UserMessage],
]
KEYS = st.sampled_from(sorted({key for message in PI_TRANSCRIPT for key in message})) | st.text(
    max_size=4
)
untrusted_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json.dumps writes them as NaN, Infinity
    | st.text(max_size=6)
    | st.sampled_from(["user", "assistant", "toolResult", "text", "toolCall", "image", "stop"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)


def locations(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value inside ``value``, itself included."""
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from locations(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from locations(item, (*at, index))


PI_LOCATIONS = list(locations(PI_TRANSCRIPT))


def replaced(at: tuple[Any, ...], new: Any) -> Any:
    """A copy of PI_TRANSCRIPT with the value at ``at`` replaced by ``new``."""
    if not at:
        return new
    copy = json.loads(json.dumps(PI_TRANSCRIPT))
    parent = copy
    for step in at[:-1]:
        parent = parent[step]
    parent[at[-1]] = new
    return copy


def read_or_refuse(text: str | bytes, into: Any = list[AgentMessage]) -> None:
    with contextlib.suppress(TranscriptError):
        loads(text, into)


@settings(max_examples=300)
@given(untrusted_values, st.sampled_from(READ_AS))
def test_any_json_value_is_read_or_refused(value: Any, into: Any) -> None:
    read_or_refuse(json.dumps(value), into)


@settings(max_examples=300)
@given(st.sampled_from(PI_LOCATIONS), untrusted_values)
def test_a_transcript_with_any_value_anywhere_is_read_or_refused(
    at: tuple[Any, ...], value: Any
) -> None:
    read_or_refuse(json.dumps(replaced(at, value)))


@settings(max_examples=100)
@given(
    st.sampled_from(PI_LOCATIONS),
    st.integers(min_value=1, max_value=3 * sys.getrecursionlimit()),
    st.sampled_from([("[", "]"), ('{"a": ', "}"), ('{"role": "user", "content": ', "}")]),
)
def test_a_transcript_with_deep_nesting_anywhere_is_read_or_refused(
    at: tuple[Any, ...], depth: int, brackets: tuple[str, str]
) -> None:
    opening, closing = brackets
    deep = opening * depth + "1" + closing * depth
    read_or_refuse(json.dumps(replaced(at, "@@")).replace('"@@"', deep))


@settings(max_examples=300)
@given(st.data())
def test_a_transcript_with_its_text_spliced_is_read_or_refused(data: st.DataObject) -> None:
    text = json.dumps(PI_TRANSCRIPT)
    start = data.draw(st.integers(min_value=0, max_value=len(text)))
    end = data.draw(st.integers(min_value=start, max_value=min(len(text), start + 8)))
    insert = data.draw(st.text(alphabet='[]{}",:-+.0123456789eENaInfinityulltrsf\\', max_size=8))
    spliced = text[:start] + insert + text[end:]
    read_or_refuse(spliced.encode() if data.draw(st.booleans()) else spliced)


@settings(max_examples=100)
@given(st.binary(max_size=40))
def test_any_bytes_are_read_or_refused(data: bytes) -> None:
    read_or_refuse(data)
