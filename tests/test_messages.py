"""Tests of trio_agent._messages: the transcript's frozen attrs classes (design.md#messages)."""

from __future__ import annotations

import time
from typing import Any

import attrs
import pytest

from trio_agent import (
    AssistantMessage,
    Cost,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent._messages import now_ms

PNG = ImageContent("iVBORw0KGgo=", "image/png")


def assistant(*content: Any, **fields: Any) -> AssistantMessage:
    return AssistantMessage(content=content, timestamp=1, **fields)


# ------------------------------------------------------------------ defaults


def test_user_message_of_a_string_is_whole() -> None:
    before = time.time_ns() // 1_000_000
    message = UserMessage(content="hi")
    after = time.time_ns() // 1_000_000
    expected = (("hi", True), UserMessage("hi", timestamp=message.timestamp))
    assert expected == ((message.content, before <= message.timestamp <= after), message)


def test_now_ms_is_whole_milliseconds_since_the_epoch() -> None:
    before = time.time_ns() // 1_000_000
    value = now_ms()
    after = time.time_ns() // 1_000_000
    assert (int, True) == (type(value), before <= value <= after)


def test_assistant_message_defaults() -> None:
    message = AssistantMessage(timestamp=5)
    expected = {
        "content": (),
        "api": "",
        "provider": "",
        "model": "",
        "usage": Usage(),
        "stop_reason": "stop",
        "error_message": None,
        "error_kind": None,
        "http_status": None,
        "retry_after": None,
        "response_id": None,
        "provider_thinking_level": None,
        "thinking_level": None,
        "extra": None,
        "timestamp": 5,
    }
    assert expected == attrs.asdict(message, recurse=False)


def test_tool_result_message_defaults() -> None:
    message = ToolResultMessage(tool_call_id="c1", tool_name="read", timestamp=5)
    expected = {
        "tool_call_id": "c1",
        "tool_name": "read",
        "content": (),
        "details": None,
        "is_error": False,
        "usage": None,
        "timestamp": 5,
        "duration": None,
    }
    assert expected == attrs.asdict(message, recurse=False)


def test_usage_and_cost_default_to_zero() -> None:
    expected = Usage(
        input=0,
        output=0,
        cache_read=0,
        cache_write=0,
        total_tokens=0,
        cost=Cost(input=0.0, output=0.0, cache_read=0.0, cache_write=0.0, total=0.0),
    )
    assert expected == Usage()


def test_block_defaults() -> None:
    expected: tuple[tuple[Any, ...], ...] = (
        (None,),
        (None, False),
        ({}, None),
    )
    actual = (
        (TextContent("t").text_signature,),
        (ThinkingContent("t").thinking_signature, ThinkingContent("t").redacted),
        (ToolCall("c1", "read").arguments, ToolCall("c1", "read").thought_signature),
    )
    assert expected == actual


def test_tool_call_default_arguments_are_not_shared() -> None:
    first, second = ToolCall("a", "f"), ToolCall("b", "f")
    assert first.arguments is not second.arguments


# ------------------------------------------------------------------ keyword-only fields


@pytest.mark.parametrize(
    ("cls", "args"),
    [
        pytest.param(UserMessage, ("hi", 5), id="UserMessage.timestamp"),
        pytest.param(TextContent, ("t", "sig"), id="TextContent.text_signature"),
        pytest.param(ThinkingContent, ("t", "sig"), id="ThinkingContent.thinking_signature"),
        pytest.param(ToolCall, ("c", "f", {}, "sig"), id="ToolCall.thought_signature"),
        pytest.param(AssistantMessage, ((),), id="AssistantMessage"),
        pytest.param(ToolResultMessage, ("c", "f"), id="ToolResultMessage"),
        pytest.param(Usage, (1,), id="Usage"),
        pytest.param(Cost, (1.0,), id="Cost"),
        pytest.param(ToolResult, ((),), id="ToolResult"),
    ],
)
def test_optional_fields_are_keyword_only(cls: Any, args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError, match="positional argument"):
        cls(*args)


def test_essential_fields_may_be_given_by_position() -> None:
    expected = (
        TextContent(text="t"),
        ImageContent(data="d", mime_type="image/png"),
        ToolCall(id="c", name="f", arguments={"a": 1}),
        ThinkingContent(thinking="t"),
    )
    actual = (
        TextContent("t"),
        ImageContent("d", "image/png"),
        ToolCall("c", "f", {"a": 1}),
        ThinkingContent("t"),
    )
    assert expected == actual


# ------------------------------------------------------------------ frozen, evolve


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (UserMessage("hi", timestamp=1), "content"),
        (assistant(), "stop_reason"),
        (ToolResultMessage(tool_call_id="c", tool_name="f", timestamp=1), "is_error"),
        (TextContent("t"), "text"),
        (ThinkingContent("t"), "redacted"),
        (PNG, "data"),
        (ToolCall("c", "f"), "arguments"),
        (Usage(), "input"),
        (Cost(), "total"),
        (ToolResult(), "terminate"),
    ],
)
def test_instances_are_frozen(value: Any, field: str) -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(value, field, getattr(value, field))


def test_evolve_changes_one_field_and_keeps_the_rest() -> None:
    original = assistant(TextContent("partial"), model="m", usage=Usage(input=3))
    changed = attrs.evolve(original, stop_reason="aborted", error_message="Operation aborted")
    expected = (
        assistant(TextContent("partial"), model="m", usage=Usage(input=3)),
        AssistantMessage(
            content=(TextContent("partial"),),
            model="m",
            usage=Usage(input=3),
            stop_reason="aborted",
            error_message="Operation aborted",
            timestamp=1,
        ),
    )
    assert expected == (original, changed)


def test_evolve_converts_list_content_to_tuple() -> None:
    changed = attrs.evolve(assistant(), content=[TextContent("a")])
    assert (TextContent("a"),) == changed.content


# ------------------------------------------------------------------ content conversion


def test_user_list_content_becomes_a_tuple() -> None:
    message = UserMessage([TextContent("a"), PNG], timestamp=1)
    assert (TextContent("a"), PNG) == message.content


def test_user_string_content_stays_a_string() -> None:
    expected = "a"
    assert expected == UserMessage("a", timestamp=1).content


def test_assistant_list_content_becomes_a_tuple() -> None:
    message = AssistantMessage(content=[ThinkingContent("t"), TextContent("a")], timestamp=1)
    assert (ThinkingContent("t"), TextContent("a")) == message.content


def test_generator_content_becomes_a_tuple() -> None:
    message = ToolResultMessage(
        tool_call_id="c",
        tool_name="f",
        content=(TextContent(str(i)) for i in range(2)),
        timestamp=1,
    )
    assert (TextContent("0"), TextContent("1")) == message.content


def test_tool_result_list_content_becomes_a_tuple() -> None:
    result = ToolResult(content=[TextContent("a"), PNG])
    assert (TextContent("a"), PNG) == result.content


# ------------------------------------------------------------------ helpers


def test_user_message_text_is_one_text_block() -> None:
    message = UserMessage.text("hello")
    assert UserMessage((TextContent("hello"),), timestamp=message.timestamp) == message


def test_user_message_text_puts_images_after_the_text() -> None:
    other = ImageContent("R0lGOD==", "image/gif")
    message = UserMessage.text("look", [PNG, other])
    assert (TextContent("look"), PNG, other) == message.content


def test_assistant_tool_calls_are_the_calls_in_source_order() -> None:
    first, second = ToolCall("c1", "read", {"p": "a"}), ToolCall("c2", "write")
    message = assistant(ThinkingContent("hm"), first, TextContent("and"), second)
    assert (first, second) == message.tool_calls


def test_assistant_tool_calls_of_a_reply_without_calls() -> None:
    expected: tuple[ToolCall, ...] = ()
    assert expected == assistant(TextContent("x")).tool_calls


def test_assistant_text_joins_only_text_blocks() -> None:
    message = assistant(
        ThinkingContent("not this"), TextContent("Hel"), ToolCall("c", "f"), TextContent("lo")
    )
    expected = "Hello"
    assert expected == message.text


def test_assistant_text_of_a_reply_without_text() -> None:
    expected = ""
    assert expected == assistant(ToolCall("c", "f")).text


def test_tool_result_text_is_one_text_block() -> None:
    expected = ToolResult(content=(TextContent("done"),), details=None, terminate=None, usage=None)
    assert expected == ToolResult.text("done")


def test_tool_result_text_keeps_details_and_terminate() -> None:
    expected = ToolResult(content=(TextContent("done"),), details={"n": 1}, terminate=True)
    assert expected == ToolResult.text("done", details={"n": 1}, terminate=True)


# ------------------------------------------------------------------ pi's tags


def test_roles_are_pis_strings() -> None:
    expected = ("user", "assistant", "toolResult")
    assert expected == (UserMessage.role, AssistantMessage.role, ToolResultMessage.role)


def test_roles_are_class_attributes_not_fields() -> None:
    names = {
        field.name
        for cls in (UserMessage, AssistantMessage, ToolResultMessage)
        for field in attrs.fields(cls)
    }
    assert "role" not in names


def test_instances_have_the_role_of_their_class() -> None:
    expected = ("user", "assistant", "toolResult")
    actual = (
        UserMessage("x", timestamp=1).role,
        assistant().role,
        ToolResultMessage(tool_call_id="c", tool_name="f", timestamp=1).role,
    )
    assert expected == actual


def test_block_types_are_pis_strings() -> None:
    expected = ("text", "thinking", "image", "toolCall")
    assert expected == (TextContent.type, ThinkingContent.type, ImageContent.type, ToolCall.type)


def test_block_types_are_class_attributes_not_fields() -> None:
    names = {
        field.name
        for cls in (TextContent, ThinkingContent, ImageContent, ToolCall)
        for field in attrs.fields(cls)
    }
    assert "type" not in names
