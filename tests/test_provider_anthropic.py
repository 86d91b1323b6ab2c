"""The Anthropic messages provider, against a loopback server.

design.md#anthropic-messages, design.md#anthropic-messages.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic as anthropic_sdk
import attrs
import pydantic
import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests._providers import (
    PIECES,
    as_if_at,
    call,
    check_stream,
    context,
    fixture,
    options,
)
from tests._support import ECHO, usage
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ImageContent,
    LlmContext,
    Model,
    ModelCost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    dumps,
    loads,
    run_agent_loop,
)
from trio_agent.providers import anthropic
from trio_agent.providers._transport import _check_headers
from trio_agent.testing import (
    EventRecorder,
    ScriptedResponse,
    check_event_grammar,
    open_sse_server,
    sse_body,
)
from trio_agent.testing.strategies import transcripts

MODEL_ID = "claude-sonnet-4-5"
IMAGE = ImageContent("aGk=", "image/png")
REDACTED = (  # the opaque data of the redacted thinking in redacted_thinking.sse
    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj"
)
IMAGE_BLOCK = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
}


def sse(name: str, pieces: Any = None) -> ScriptedResponse:
    return ScriptedResponse(body=fixture("anthropic", name), pieces=pieces)


def model(url: str, **kwargs: Any) -> Any:
    return anthropic.model(MODEL_ID, base_url=url, **kwargs)


def reply(*content: Any, **fields: Any) -> AssistantMessage:
    """The final message expected from a fixture (timestamps are set to 0 to compare)."""
    fields.setdefault("stop_reason", "stop")
    return AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider="anthropic",
        model=MODEL_ID,
        timestamp=0,
        **fields,
    )


def final(message: AssistantMessage) -> AssistantMessage:
    return attrs.evolve(message, timestamp=0)


# --- the stream ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pieces", PIECES)
async def test_a_text_reply(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("text.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert final(result.message) == reply(
        TextContent("Hello, wörld \u2028 ✓"),
        usage=usage(input=25, output=12, cache_read=100),
        response_id="msg_01Text",
    )
    assert result.types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]


@pytest.mark.parametrize("pieces", PIECES)
async def test_pings_anywhere_are_ignored(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("pings.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert final(result.message) == reply(
        TextContent("Pong!"), usage=usage(input=10, output=3), response_id="msg_01Ping"
    )
    assert result.types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]


@pytest.mark.parametrize("pieces", PIECES)
async def test_thinking_keeps_its_signature(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("thinking.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url, reasoning=True))
    check_stream(result.events)
    assert final(result.message) == reply(
        ThinkingContent(
            "The user asks 6 times 7. That is 42.", thinking_signature="EqQBCkgIARABGAIiQL2sig+/=="
        ),
        TextContent("42"),
        usage=usage(input=40, output=60),
        response_id="msg_01Think",
    )
    assert result.types == [
        "start",
        *("thinking_start", "thinking_delta", "thinking_delta", "thinking_end"),
        *("text_start", "text_delta", "text_end"),
        "done",
    ]


@pytest.mark.parametrize("pieces", PIECES)
async def test_redacted_thinking_is_kept_opaque(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("redacted_thinking.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url, reasoning=True))
    check_stream(result.events)
    assert final(result.message) == reply(
        ThinkingContent("[Reasoning redacted]", thinking_signature=REDACTED, redacted=True),
        ThinkingContent("Visible part.", thinking_signature="sig-2"),
        TextContent("Done."),
        usage=usage(input=40, output=80),
        response_id="msg_01Redact",
    )
    # pi-ai's convention: the text says it is withheld, the data is the signature.
    assert result.types[1:4] == ["thinking_start", "thinking_delta", "thinking_end"]


@pytest.mark.parametrize("pieces", PIECES)
async def test_a_tool_call_whose_json_is_split_mid_string_and_mid_escape(
    clock: Any, pieces: Any
) -> None:
    async with open_sse_server(sse("tool_use.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert final(result.message) == reply(
        TextContent("Saving it."),
        ToolCall(
            "toolu_01A09q90qw90lq917835lq9",
            "write",
            {"path": "notes/café.txt", "content": 'line 1\nsaid "hi"'},
        ),
        stop_reason="toolUse",
        usage=usage(input=300, output=70),
        response_id="msg_01Tool",
    )


async def test_partial_tool_arguments_are_parsed_as_they_grow(clock: Any) -> None:
    async with open_sse_server(sse("tool_use.sse")) as server:
        result = await call(anthropic.stream, model(server.url))
    partials = [
        e.partial.content[1].arguments  # type: ignore[union-attr]  # a ToolCall, here
        for e in result.events
        if e.type == "toolcall_delta"
    ]
    assert partials == [  # the empty first piece makes no event
        {"path": "notes/caf"},
        {"path": "notes/café.txt"},
        {"path": "notes/café.txt", "content": "line 1"},
        {"path": "notes/café.txt", "content": "line 1\nsaid "},
        {"path": "notes/café.txt", "content": 'line 1\nsaid "hi"'},
    ]


@pytest.mark.parametrize("pieces", PIECES)
async def test_two_tool_calls(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("two_tool_calls.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert final(result.message) == reply(
        TextContent("Checking both."),
        ToolCall("toolu_01Weather", "get_weather", {"city": "Paris", "days": 3}),
        ToolCall("toolu_02Time", "get_time", {"tz": "UTC"}),
        stop_reason="toolUse",
        usage=usage(input=500, output=90),
        response_id="msg_01Two",
    )
    ends = [e.tool_call for e in result.events if e.type == "toolcall_end"]
    assert ends == list(result.message.tool_calls)


@pytest.mark.parametrize("pieces", PIECES)
async def test_message_delta_updates_usage_field_by_field(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("usage_field_by_field.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    # input_tokens null and cache_creation absent in message_delta: the start's values stay
    assert result.message.usage == usage(input=2000, output=57, cache_read=512, cache_write=100)


async def test_cost_comes_from_the_models_cost_table(clock: Any) -> None:
    table = ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    async with open_sse_server(sse("usage_field_by_field.sse")) as server:
        result = await call(anthropic.stream, model(server.url, cost=table))
    cost = result.message.usage.cost
    assert (cost.input, cost.output, cost.cache_read, cost.cache_write) == pytest.approx(
        (6000e-6, 855e-6, 153.6e-6, 375e-6)
    )
    assert cost.total == pytest.approx(7383.6e-6)


@pytest.mark.parametrize("pieces", PIECES)
async def test_max_tokens_is_length_and_keeps_the_cut_tool_call(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("max_tokens_unterminated.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert final(result.message) == reply(
        TextContent("Writing the file."),
        ToolCall("toolu_01Cut", "write", {"path": "a.txt", "content": "The quick brown"}),
        stop_reason="length",
        usage=usage(input=50, output=64),
        response_id="msg_01Length",
    )


@pytest.mark.parametrize("pieces", PIECES)
async def test_server_tool_blocks_and_unknown_events_are_skipped(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("server_tool.sse", pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert final(result.message) == reply(
        TextContent("Trio is a library."),
        usage=usage(input=900, output=40),
        response_id="msg_01Server",
    )
    assert result.types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]


@pytest.mark.parametrize(
    ("name", "error", "kept"),
    [
        ("refusal.sse", "anthropic declined to answer (stop_reason 'refusal')", "I can"),
        (
            "unknown_stop_reason.sse",
            "anthropic finished with stop_reason 'brand_new_reason'",
            "Half an ans",
        ),
        (
            "in_band_error.sse",
            "anthropic reported an error: overloaded_error: Overloaded",
            "Partial answ",
        ),
        ("no_message_stop.sse", "the stream from anthropic ended without message_stop", "Cut off"),
    ],
)
@pytest.mark.parametrize("pieces", PIECES)
async def test_failures_end_as_errors_keeping_what_arrived(
    clock: Any, name: str, error: str, kept: str, pieces: Any
) -> None:
    async with open_sse_server(sse(name, pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert (result.message.stop_reason, result.message.error_message, result.message.text) == (
        "error",
        error,
        kept,
    )
    assert result.events[-1].type == "error"


async def test_sensitive_is_an_error_naming_it(clock: Any) -> None:
    body = fixture("anthropic", "refusal.sse").replace(b'"refusal"', b'"sensitive"')
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(anthropic.stream, model(server.url))
    assert result.message.error_message == (
        "anthropic stopped on sensitive content (stop_reason 'sensitive')"
    )


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("model_context_window_exceeded", "length"),
    ],
)
async def test_other_stop_reasons(clock: Any, reason: str, stop: str) -> None:
    body = fixture("anthropic", "text.sse").replace(b'"end_turn"', f'"{reason}"'.encode())
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(anthropic.stream, model(server.url))
    assert (result.message.stop_reason, result.message.error_message) == (stop, None)


# --- the request ---------------------------------------------------------------------------------


EPHEMERAL = {"type": "ephemeral"}
"""A cache breakpoint of the service's five-minute cache."""


async def request_of(server_model: Any, ctx: Any = None, **opts: Any) -> dict[str, Any]:
    async with open_sse_server(sse("text.sse")) as server:
        await call(anthropic.stream, server_model(server.url), ctx, options(**opts))
    body: dict[str, Any] = server.requests[0].json
    body["_headers"] = server.requests[0].headers
    body["_path"] = server.requests[0].path
    return body


def ours(*content: Any, stop_reason: Any = "toolUse") -> AssistantMessage:
    """An earlier reply of the model under test (so its thinking can be replayed)."""
    return AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider="anthropic",
        model=MODEL_ID,
        stop_reason=stop_reason,
    )


async def test_the_request_for_a_transcript(clock: Any) -> None:
    ctx = context(
        UserMessage((TextContent("look"), IMAGE)),
        ours(
            ThinkingContent("plan", thinking_signature="sig-1"),
            ThinkingContent("", thinking_signature="opaque-data", redacted=True),
            TextContent("calling"),
            ToolCall("toolu_1", "echo", {"value": "é"}),
            ToolCall("toolu_2", "echo", {}),
        ),
        ToolResultMessage(
            tool_call_id="toolu_1", tool_name="echo", content=(TextContent("r1"), IMAGE)
        ),
        ours(TextContent("half"), stop_reason="aborted"),
        UserMessage.text("next"),
        system_prompt="Be brief.",
        tools=[ECHO],
    )
    body = await request_of(model, ctx, max_tokens=1000, temperature=0.2)
    del body["_headers"], body["_path"]
    assert body == {
        "model": MODEL_ID,
        "max_tokens": 1000,
        "stream": True,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE_BLOCK]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque-data"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"value": "é"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "echo", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "r1"}, IMAGE_BLOCK],
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "No result provided",
                        "is_error": True,
                    },
                    # the aborted reply between is left out
                    {"type": "text", "text": "next", "cache_control": EPHEMERAL},
                ],
            },
        ],
        "tools": [
            {
                "name": "echo",
                "description": "the echo tool",
                "input_schema": ECHO.parameters,
                "cache_control": EPHEMERAL,
            }
        ],
        "temperature": 0.2,
    }


async def test_the_request_path_and_headers(clock: Any) -> None:
    body = await request_of(
        lambda url: model(
            url, headers={"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"}
        ),
        headers={"X-Trace": "t1"},
    )
    headers = body["_headers"]
    assert body["_path"] == "/v1/messages"
    assert {name: headers.get(name) for name in _HEADERS} == {
        "x-api-key": "test-key",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "fine-grained-tool-streaming-2025-05-14",
        "x-trace": "t1",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "authorization": None,
    }


_HEADERS = (
    "x-api-key",
    "anthropic-version",
    "anthropic-beta",
    "x-trace",
    "content-type",
    "accept",
    "authorization",
)


@pytest.mark.parametrize(
    ("max_tokens", "model_max_tokens", "sent"),
    [(None, 32_000, 32_000), (None, 8192, 8192), (100, 32_000, 100)],
)
async def test_max_tokens_is_always_sent(
    clock: Any, max_tokens: int | None, model_max_tokens: int, sent: int
) -> None:
    body = await request_of(
        lambda url: model(url, max_tokens=model_max_tokens), max_tokens=max_tokens
    )
    assert body["max_tokens"] == sent


@pytest.mark.parametrize(
    ("level", "budget"),
    [
        ("minimal", 1024),
        ("low", 2048),
        ("medium", 8192),
        ("high", 16384),
        ("xhigh", 30976),  # 32768 does not fit under max_tokens=32000: 1024 are left to answer
    ],
)
async def test_reasoning_levels_are_thinking_budgets_without_temperature(
    clock: Any, level: str, budget: int
) -> None:
    body = await request_of(
        lambda url: model(url, reasoning=True), reasoning=level, temperature=0.5
    )
    assert (body["max_tokens"], body["thinking"], "temperature" in body) == (
        32_000,
        {"type": "enabled", "budget_tokens": budget},
        False,
    )


async def test_a_small_max_tokens_squeezes_the_thinking_budget(clock: Any) -> None:
    body = await request_of(
        lambda url: model(url, reasoning=True), reasoning="high", max_tokens=4000
    )
    assert (body["max_tokens"], body["thinking"]) == (
        4000,
        {"type": "enabled", "budget_tokens": 2976},
    )


async def test_no_thinking_when_max_tokens_leaves_no_room_for_it(clock: Any) -> None:
    body = await request_of(
        lambda url: model(url, reasoning=True), reasoning="low", max_tokens=1500, temperature=0.5
    )
    assert ("thinking" in body, body["temperature"]) == (False, 0.5)


async def test_no_thinking_for_a_model_that_does_not_reason(clock: Any) -> None:
    body = await request_of(model, reasoning="high", temperature=0.7)
    assert ("thinking" in body, body["temperature"]) == (False, 0.7)


def catalog(id: str, provider: str = "anthropic") -> Any:
    """The catalog's ``id`` of ``provider``, with its rules, served by the test server."""
    return lambda url: attrs.evolve(anthropic.model(id, provider=provider), base_url=url)


def sdk_request(body: dict[str, Any], *, beta: bool = False) -> dict[str, Any]:
    """The request body, checked against the anthropic SDK's streaming create params (its
    beta messages' params with ``beta``)."""
    sent = {key: value for key, value in body.items() if not key.startswith("_")}
    params = (
        anthropic_sdk.types.beta.message_create_params.MessageCreateParamsStreaming
        if beta
        else anthropic_sdk.types.message_create_params.MessageCreateParamsStreaming
    )
    pydantic.TypeAdapter(params).validate_python(sent)
    return sent


@pytest.mark.parametrize(
    ("provider", "id", "level", "effort"),
    [
        ("anthropic", "claude-opus-4-7", "minimal", "low"),
        ("anthropic", "claude-opus-4-7", "low", "low"),
        ("anthropic", "claude-opus-4-7", "medium", "medium"),
        ("anthropic", "claude-opus-4-7", "high", "high"),
        ("anthropic", "claude-opus-4-7", "xhigh", "xhigh"),
        # no xhigh on 4.6: the nearest offered level above it
        ("anthropic", "claude-sonnet-4-6", "xhigh", "max"),
        ("anthropic", "claude-sonnet-4-6", "medium", "medium"),
        # medium is not offered: the nearest above; minimal: mapped to low
        ("fireworks", "accounts/fireworks/models/deepseek-v4p1-flash", "medium", "high"),
        ("fireworks", "accounts/fireworks/models/deepseek-v4p1-flash", "minimal", "low"),
        ("github-copilot", "claude-sonnet-4.6", "minimal", "low"),
    ],
)
async def test_a_forced_adaptive_model_gets_adaptive_thinking_with_an_effort(
    clock: Any, provider: str, id: str, level: str, effort: str
) -> None:
    # Catalog rule forceAdaptiveThinking: such models refuse {"type": "enabled",
    # "budget_tokens": ...}; the level goes as output_config.effort, as pi-ai sends it.
    body = sdk_request(await request_of(catalog(id, provider), reasoning=level, temperature=0.5))
    assert (body["thinking"], body["output_config"], "temperature" in body) == (
        {"type": "adaptive", "display": "summarized"},
        {"effort": effort},
        False,
    )
    assert body["max_tokens"] == anthropic.model(id, provider=provider).max_tokens


async def test_a_level_the_model_does_not_offer_becomes_the_nearest_budget(clock: Any) -> None:
    # openai/gpt-5.5-pro over anthropic-messages: low and minimal are not offered.
    body = sdk_request(
        await request_of(catalog("openai/gpt-5.5-pro", "vercel-ai-gateway"), reasoning="low")
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}


@pytest.mark.parametrize(
    ("id", "reasoning", "sent"),
    [
        ("claude-opus-4-7", None, False),  # supportsTemperature: false
        ("claude-sonnet-4-6", None, True),
        ("claude-sonnet-4-6", "low", False),  # thinking on
    ],
)
async def test_temperature_only_to_a_model_that_takes_it(
    clock: Any, id: str, reasoning: Any, sent: bool
) -> None:
    body = sdk_request(await request_of(catalog(id), reasoning=reasoning, temperature=0.5))
    assert ("temperature" in body, body.get("temperature", 0.5)) == (sent, 0.5)


async def test_a_model_the_catalog_does_not_know_keeps_budgets(clock: Any) -> None:
    body = sdk_request(
        await request_of(
            lambda url: anthropic.model("claude-next", base_url=url, reasoning=True),
            reasoning="xhigh",
            max_tokens=64_000,
        )
    )
    assert (body["thinking"], "output_config" in body) == (
        {"type": "enabled", "budget_tokens": 32768},
        False,
    )


async def test_no_system_and_no_tools_when_there_are_none(clock: Any) -> None:
    body = await request_of(model)
    del body["_headers"], body["_path"]
    assert body == {
        "model": MODEL_ID,
        "max_tokens": 32_000,
        "stream": True,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}],
            }
        ],
    }


async def test_adjacent_messages_of_one_role_are_merged_and_empty_ones_left_out(
    clock: Any,
) -> None:
    ctx = context(
        UserMessage.text("one"),
        UserMessage("two"),
        ours(TextContent("  "), stop_reason="stop"),  # empty: left out
        UserMessage("   "),  # empty: left out
        ours(TextContent("answer"), stop_reason="stop"),
        ours(ThinkingContent("unsigned"), stop_reason="stop"),
        UserMessage.text("three"),
    )
    body = await request_of(model, ctx, cache_retention="none")
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "answer"}, {"type": "text", "text": "unsigned"}],
        },
        {"role": "user", "content": [{"type": "text", "text": "three"}]},
    ]


async def test_images_are_left_out_for_a_text_only_model(clock: Any) -> None:
    ctx = context(UserMessage((TextContent("look"), IMAGE)))
    body = await request_of(lambda url: model(url, input=("text",)), ctx, cache_retention="none")
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "look"}]}]


async def test_tool_ids_of_other_providers_are_made_valid_in_calls_and_results(
    clock: Any,
) -> None:
    long_id = "call_" + "x" * 60 + "|fc_1"
    other = AssistantMessage(
        content=(
            ThinkingContent("hmm", thinking_signature='{"id": "rs_1"}'),
            ToolCall("call_1|fc_1", "echo", {"value": "a"}),
            ToolCall(long_id, "echo", {"value": "b"}),
        ),
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    ctx = context(
        UserMessage.text("q"),
        other,
        ToolResultMessage(
            tool_call_id="call_1|fc_1", tool_name="echo", content=(TextContent("A"),)
        ),
        ToolResultMessage(tool_call_id=long_id, tool_name="echo", content=(TextContent("B"),)),
    )
    body = await request_of(model, ctx, cache_retention="none")
    hashed = anthropic.tool_id(long_id)
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "hmm"},  # another model's thinking is text
                {"type": "tool_use", "id": "call_1_fc_1", "name": "echo", "input": {"value": "a"}},
                {"type": "tool_use", "id": hashed, "name": "echo", "input": {"value": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_1_fc_1",
                    "content": "A",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": hashed,
                    "content": "B",
                    "is_error": False,
                },
            ],
        },
    ]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", hashed)


def test_long_tool_ids_that_share_a_prefix_stay_apart() -> None:
    first, second = anthropic.tool_id("a" * 70 + ".1"), anthropic.tool_id("a" * 70 + ".2")
    assert (len(first), len(second), first == second) == (64, 64, False)
    assert anthropic.tool_id("toolu_01A09q90qw90lq917835lq9") == "toolu_01A09q90qw90lq917835lq9"


async def test_tool_results_without_their_call_are_left_out(clock: Any) -> None:
    ctx = context(
        UserMessage.text("q"),
        ours(ToolCall("toolu_9", "echo", {}), stop_reason="error"),  # left out, so its result is
        ToolResultMessage(tool_call_id="toolu_9", tool_name="echo", content=(TextContent("r"),)),
        UserMessage.text("again"),
    )
    body = await request_of(model, ctx, cache_retention="none")
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}],
        }
    ]


@pytest.mark.parametrize(
    ("name", "replayed"),
    [
        (
            "thinking.sse",
            [
                {
                    "type": "thinking",
                    "thinking": "The user asks 6 times 7. That is 42.",
                    "signature": "EqQBCkgIARABGAIiQL2sig+/==",
                },
                {"type": "text", "text": "42"},
            ],
        ),
        (
            "redacted_thinking.sse",
            [
                {
                    "type": "redacted_thinking",
                    "data": REDACTED,
                },
                {"type": "thinking", "thinking": "Visible part.", "signature": "sig-2"},
                {"type": "text", "text": "Done."},
            ],
        ),
    ],
)
async def test_a_streamed_reply_goes_back_unchanged(
    clock: Any, name: str, replayed: list[dict[str, Any]]
) -> None:
    async with open_sse_server(sse(name), sse("text.sse")) as server:
        claude = model(server.url, reasoning=True)
        first = await call(anthropic.stream, claude)
        ctx = context(UserMessage.text("q"), first.message, UserMessage.text("again"))
        await call(anthropic.stream, claude, ctx)
    assert sdk_messages(server.requests[1].json)[1] == {"role": "assistant", "content": replayed}


def sdk_stream(*events: dict[str, Any]) -> ScriptedResponse:
    """A body of ``events``, each checked against the anthropic SDK's stream event type."""
    adapter = pydantic.TypeAdapter(anthropic_sdk.types.RawMessageStreamEvent)
    return ScriptedResponse(
        body=sse_body(
            (event["type"], adapter.validate_python(event).model_dump(mode="json"))
            for event in events
        )
    )


def sdk_messages(body: dict[str, Any]) -> list[Any]:
    """The request's messages, checked against the anthropic SDK's ``MessageParam``."""
    messages: list[Any] = body["messages"]
    pydantic.TypeAdapter(list[anthropic_sdk.types.MessageParam]).validate_python(messages)
    return messages


async def test_signed_thinking_with_no_text_goes_back_in_a_tool_loop(clock: Any) -> None:
    # With the thinking display omitted, a model sends thinking blocks with no text
    # but a signature; the API wants them back, as they came, in the tool loop.
    start = {"type": "content_block_start", "index": 0}
    first = sdk_stream(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": MODEL_ID,
                "content": [],
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {**start, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        _delta({"type": "signature_delta", "signature": "sig-omitted"}),
        {"type": "content_block_stop", "index": 0},
        {
            **start,
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
        },
        _delta({"type": "input_json_delta", "partial_json": '{"value": "x"}'}, index=1),
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 20},
        },
        {"type": "message_stop"},
    )
    async with open_sse_server(first, sse("text.sse")) as server:
        claude = model(server.url, reasoning=True)
        turn = await call(anthropic.stream, claude, None, options(reasoning="low"))
        result = ToolResultMessage(
            tool_call_id="toolu_1", tool_name="echo", content=(TextContent("x"),)
        )
        ctx = context(UserMessage.text("q"), turn.message, result, tools=[ECHO])
        await call(anthropic.stream, claude, ctx, options(reasoning="low"))
    assert turn.message.content[0] == ThinkingContent("", thinking_signature="sig-omitted")
    assert sdk_messages(server.requests[1].json)[1]["content"] == [
        {"type": "thinking", "thinking": "", "signature": "sig-omitted"},
        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"value": "x"}},
    ]


async def test_thinking_goes_back_signed_or_as_text_or_not_at_all(clock: Any) -> None:
    # As pi-ai: a signed block always goes back; an unsigned one (an aborted stream's)
    # goes as text, or not at all when it has no text.
    ctx = context(
        UserMessage.text("q"),
        ours(
            ThinkingContent("", thinking_signature="sig-empty"),
            ThinkingContent("  ", thinking_signature="sig-blank"),
            ThinkingContent("unsigned idea"),
            ThinkingContent(" "),
            ThinkingContent("", thinking_signature=""),
            ThinkingContent("[Reasoning redacted]", thinking_signature="opaque", redacted=True),
            TextContent("answer"),
            stop_reason="stop",
        ),
        UserMessage.text("again"),
    )
    body = await request_of(model, ctx)
    assert sdk_messages(body)[1]["content"] == [
        {"type": "thinking", "thinking": "", "signature": "sig-empty"},
        {"type": "thinking", "thinking": "  ", "signature": "sig-blank"},
        {"type": "text", "text": "unsigned idea"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
    ]


# --- keys and HTTP errors ------------------------------------------------------------------------


def error(status: int, kind: str, message: str) -> ScriptedResponse:
    body = (
        f'{{"type": "error", "error": {{"type": "{kind}", "message": "{message}"}}, '
        '"request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}'
    )
    return ScriptedResponse(status=status, body=body.encode(), content_type="application/json")


async def test_529_is_retried_then_succeeds(clock: Any) -> None:
    async with open_sse_server(
        error(529, "overloaded_error", "Overloaded"), sse("text.sse")
    ) as server:
        start = trio.current_time()
        result = await call(anthropic.stream, model(server.url))
    assert (result.message.stop_reason, result.message.text) == ("stop", "Hello, wörld \u2028 ✓")
    assert len(server.requests) == 2
    assert 1.0 <= trio.current_time() - start <= 1.25 + 0.2  # 1 s, with up to 25% jitter


async def test_529_when_the_retries_run_out(clock: Any) -> None:
    async with open_sse_server(
        *(error(529, "overloaded_error", "Overloaded") for _ in range(3))
    ) as server:
        result = await call(anthropic.stream, model(server.url))
    assert result.message.error_message == "HTTP 529 from anthropic: overloaded_error: Overloaded"
    assert len(server.requests) == 3


async def test_a_400_is_an_error_with_the_servers_message_and_not_retried(clock: Any) -> None:
    message = "messages.1.content.0.thinking.signature: Field required"
    async with open_sse_server(
        error(400, "invalid_request_error", message), sse("text.sse")
    ) as server:
        result = await call(anthropic.stream, model(server.url))
    assert (result.message.stop_reason, result.message.error_message) == (
        "error",
        f"HTTP 400 from anthropic: invalid_request_error: {message}",
    )
    assert len(server.requests) == 1
    assert result.types == ["error"]


async def test_the_key_never_appears_in_an_error(clock: Any) -> None:
    secret = "sk-ant-api03-secret"
    echoed = error(401, "authentication_error", f"invalid x-api-key: {secret}")
    async with open_sse_server(echoed) as server:
        result = await call(anthropic.stream, model(server.url), opts=options(api_key=secret))
    assert result.message.error_message == (
        "HTTP 401 from anthropic: authentication_error: invalid x-api-key: ***"
    )
    assert server.requests[0].headers["x-api-key"] == secret
    assert secret not in repr(result.events)


async def test_an_in_band_error_with_the_key_is_scrubbed(clock: Any) -> None:
    body = fixture("anthropic", "in_band_error.sse").replace(b"Overloaded", b"bad key test-key")
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(anthropic.stream, model(server.url))
    assert result.message.error_message == (
        "anthropic reported an error: overloaded_error: bad key ***"
    )


async def test_no_key_is_an_error_before_any_request(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = anthropic.Anthropic(client)
        claude = anthropic.model(MODEL_ID)  # at Anthropic's server
        result = await call(provider.stream, claude, opts=options(api_key=None))
    assert server.requests == []
    assert result.message.error_message == (
        "no API key for anthropic: set ANTHROPIC_API_KEY, or give api_key (or get_api_key)"
    )
    assert result.types == ["error"]


async def test_the_key_comes_from_the_environment(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = anthropic.Anthropic(client)
        await call(provider.stream, anthropic.model(MODEL_ID), opts=options(api_key=None))
    assert server.requests[0].headers["host"] == "api.anthropic.com"
    assert server.requests[0].headers["x-api-key"] == "env-key"


# --- the model and the whole loop ----------------------------------------------------------------


def test_the_model_constructor() -> None:
    # an id the catalog does not list (pi-ai 1.6.0 dropped it), at Anthropic's URL given
    assert anthropic.model("claude-opus-4-1", base_url="https://api.anthropic.com") == Model(
        id="claude-opus-4-1",
        api="anthropic-messages",
        provider="anthropic",
        base_url="https://api.anthropic.com",
        reasoning=False,
        context_window=200_000,
        max_tokens=32_000,
        input=("text", "image"),
    )
    assert anthropic.provider().label == "anthropic"


async def test_the_whole_loop_runs_a_tool_and_sends_its_result(clock: Any) -> None:
    recorder = EventRecorder()
    async with open_sse_server(sse("echo_call.sse"), sse("text.sse", (1, 7))) as server:
        messages = await run_agent_loop(
            [UserMessage.text("echo x")],
            AgentContext(tools=[ECHO]),
            AgentLoopConfig(model=model(server.url), api_key="k"),
            recorder,
            stream_fn=anthropic.stream,
        )
    check_event_grammar(recorder.events)
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.text) == ("stop", "Hello, wörld \u2028 ✓")
    assert server.requests[1].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "echo x"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_e", "name": "echo", "input": {"value": "x"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_e",
                    "content": "echo:x",
                    "is_error": False,
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]


# --- what the server sends that is not what the API says --------------------------------------


@pytest.mark.parametrize("pieces", PIECES)
async def test_sse_blocks_without_data_are_no_events(clock: Any, pieces: Any) -> None:
    # Legal SSE that dispatches nothing (WHATWG HTML, "dispatch the event"): a retry,
    # an id, a name alone; and an empty "data:" line, which carries nothing.
    text = fixture("anthropic", "text.sse")
    second = text.index(b"event: ", 1)
    body = (
        b"retry: 3000\n\nid: 1\n\nevent: ping\n\n"
        + text[:second]
        + b"event: ping\n\ndata:\n\nevent: content_block_delta\n\n"
        + text[second:]
    )
    async with open_sse_server(ScriptedResponse(body=body, pieces=pieces)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    assert (result.message.stop_reason, result.message.error_message) == ("stop", None)
    assert result.message.text == "Hello, wörld \u2028 ✓"


def _text_then(*events: dict[str, Any]) -> ScriptedResponse:
    """A message that says "Hi" in block 0, then ``events``."""
    return ScriptedResponse(
        body=sse_body(
            [
                ("message_start", {"type": "message_start", "message": {"id": "msg_1"}}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Hi"},
                    },
                ),
                *((str(event["type"]), event) for event in events),
            ]
        )
    )


def _delta(delta: dict[str, Any], index: Any = 0) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": True},
            },
            "usage.output_tokens is true, not a token count",
        ),
        (
            {"type": "message_delta", "usage": {"input_tokens": "12 tokens"}},
            'usage.input_tokens is "12 tokens", not a token count',
        ),
        (
            {"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}},
            'delta.stop_reason is ["end_turn"], not a string',
        ),
        (_delta({"type": "text_delta", "text": 5}), "delta.text is 5, not a string"),
        (
            _delta({"type": ["text_delta"], "text": "lost"}),
            'delta.type is ["text_delta"], not a string',
        ),
        (
            _delta({"type": "text_delta", "text": "lost"}, index="0"),
            'index is "0", not an integer',
        ),
        (
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "input": "{}"},
            },
            'content_block.input is "{}", not an object',
        ),
        (
            {"type": "content_block_start", "index": 1, "content_block": "text"},
            'content_block is "text", not an object',
        ),
    ],
)
async def test_a_field_of_another_type_is_an_error_naming_it_and_its_event_is_not_taken(
    clock: Any, event: dict[str, Any], error: str
) -> None:
    async with open_sse_server(_text_then(event)) as server:
        result = await call(anthropic.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.content) == ("error", (TextContent("Hi"),))
    assert message.error_message == f"malformed {event['type']} event from anthropic: {error}"


async def test_an_event_type_that_is_not_a_string_is_an_error_naming_the_sse_event(
    clock: Any,
) -> None:
    response = _text_then()
    response.body += b'event: content_block_delta\ndata: {"type": 7}\n\n'
    async with open_sse_server(response) as server:
        result = await call(anthropic.stream, model(server.url))
    assert (result.message.stop_reason, result.message.error_message) == (
        "error",
        "malformed content_block_delta event from anthropic: type is 7, not a string",
    )


@pytest.mark.parametrize(
    ("provider", "id", "thinking"),
    [
        ("anthropic", "claude-sonnet-4-6", {"type": "disabled"}),
        ("anthropic", "claude-opus-4-7", {"type": "disabled"}),
        (
            "fireworks",
            "accounts/fireworks/models/minimax-m3",
            None,
        ),  # thinking_levels: {"off": None}
        ("anthropic", "claude-fable-5", None),  # thinking_levels: {"off": None}
    ],
)
async def test_no_level_turns_thinking_off_where_it_can_be(
    clock: Any, provider: str, id: str, thinking: Any
) -> None:
    # As pi-ai: a reasoning model asked for no level gets thinking disabled, since the
    # API's default on newer models is to think; not where thinking cannot be turned off.
    body = sdk_request(await request_of(catalog(id, provider)))
    assert (body.get("thinking"), "output_config" in body) == (thinking, False)


async def test_temperature_is_sent_with_thinking_disabled(clock: Any) -> None:
    body = sdk_request(await request_of(lambda url: model(url, reasoning=True), temperature=0.5))
    assert (body["thinking"], body["temperature"]) == ({"type": "disabled"}, 0.5)


# --- effort set mid-conversation (supportsMidConvoEffort) -----------------------------------------

_MANAGED_THINKING = {
    "type": "adaptive",
    "display": "summarized",
    "block_binding": {"prefix_mismatch_behavior": "drop_block"},
}


def _effort(effort: str) -> dict[str, Any]:
    return {"role": "system", "content": [], "output_config": {"effort": effort}}


@pytest.mark.parametrize(
    ("provider", "id"),
    [("anthropic", "claude-fable-5-1"), ("openrouter", "anthropic/claude-opus-5.5")],
)
@pytest.mark.parametrize(("level", "effort"), [(None, "high"), ("low", "low"), ("xhigh", "xhigh")])
async def test_a_model_whose_effort_is_set_mid_conversation_gets_it_in_the_messages(
    clock: Any, provider: str, id: str, level: Any, effort: str
) -> None:
    # As pi-ai: adaptive thinking that drops a block bound to another effort, effort high
    # in output_config, the level's effort in a system message at the end, the two betas.
    body = await request_of(catalog(id, provider), reasoning=level, temperature=0.5)
    headers = body["_headers"]
    sent = sdk_request(body, beta=True)
    assert (sent["thinking"], sent["output_config"], "temperature" in sent) == (
        _MANAGED_THINKING,
        {"effort": "high"},
        False,
    )
    assert sent["messages"][-1] == _effort(effort)
    assert [m["role"] for m in sent["messages"]] == ["user", "system"]
    assert headers["anthropic-beta"] == (
        "mid-conversation-output-config-2026-07-01,thinking-binding-controls-2026-08-01"
    )


async def test_each_earlier_turn_of_the_provider_is_preceded_by_its_effort(clock: Any) -> None:
    def turn(provider: str, level: Any, text: str, api: str = "anthropic-messages") -> Any:
        return AssistantMessage(
            content=(TextContent(text),),
            api=api,
            provider=provider,
            model="claude-fable-5-1",
            provider_thinking_level=level,
        )

    ctx = context(
        UserMessage.text("one"),
        turn("anthropic", "medium", "first"),
        UserMessage.text("two"),
        turn("openrouter", "low", "elsewhere"),  # another provider: no effort of its own
        UserMessage.text("three"),
        turn("anthropic", None, "unrecorded"),
        UserMessage.text("four"),
        turn("anthropic", "bogus", "not an effort"),
        UserMessage.text("five"),
        turn("anthropic", "max", "last"),
        UserMessage.text("six"),
    )
    body = sdk_request(
        await request_of(catalog("claude-fable-5-1"), ctx, reasoning="medium"), beta=True
    )
    shape = [
        m["output_config"]["effort"] if m["role"] == "system" else m["role"][0]
        for m in body["messages"]
    ]
    assert shape == [
        "u", "medium", "a", "u", "a", "u", "a", "u", "a", "u", "max", "a", "u", "medium",
    ]  # fmt: skip


async def test_the_reply_records_the_effort_it_was_asked_at(clock: Any) -> None:
    async with open_sse_server(sse("text.sse")) as server:
        managed = catalog("claude-fable-5-1")(server.url)
        asked = await call(anthropic.stream, managed, None, options(reasoning="low"))
    async with open_sse_server(sse("text.sse")) as server:
        plain = await call(anthropic.stream, catalog("claude-opus-4-7")(server.url), None)
    assert (asked.message.provider_thinking_level, plain.message.provider_thinking_level) == (
        "low",
        None,
    )
    assert all(
        event.partial.provider_thinking_level == "low"
        for event in asked.events
        if hasattr(event, "partial")
    )
    # and it lives on in the transcript, as pi-ai's providerThinkingLevel
    text = dumps([asked.message, plain.message])
    assert text.count('"providerThinkingLevel": "low"') == 1
    assert loads(text) == [asked.message, plain.message]


@pytest.mark.parametrize(
    ("id", "level", "beta"),
    [
        ("claude-sonnet-4-5", "low", "interleaved-thinking-2025-05-14"),  # a budget
        ("claude-sonnet-4-5", None, None),  # thinking disabled
        ("claude-opus-4-7", "low", None),  # adaptive: interleaved on its own
    ],
)
async def test_a_thinking_budget_asks_for_interleaved_thinking(
    clock: Any, id: str, level: Any, beta: Any
) -> None:
    body = await request_of(catalog(id), reasoning=level)
    assert body["_headers"].get("anthropic-beta") == beta


async def test_an_anthropic_beta_header_of_the_call_replaces_the_providers(clock: Any) -> None:
    body = await request_of(
        catalog("claude-fable-5-1"), headers={"Anthropic-Beta": "my-feature"}, reasoning="low"
    )
    assert body["_headers"]["anthropic-beta"] == "my-feature"


# --- the prompt cache ----------------------------------------------------------------------------

SESSION = "s" * 36 + "-" + "0123456789" * 6 + "abc"  # 100 characters
SHOUT = attrs.evolve(ECHO, name="shout", description="the shout tool")


def _cached_context() -> Any:
    """A tool conversation: a system prompt, two tools, a call and its result last."""
    return context(
        UserMessage.text("echo x"),
        ours(ToolCall("toolu_e", "echo", {"value": "x"})),
        ToolResultMessage(tool_call_id="toolu_e", tool_name="echo", content=[TextContent("x")]),
        system_prompt="Be brief.",
        tools=[ECHO, SHOUT],
    )


async def _catalog_request(
    provider: str, model_id: str, ctx: Any = None, **opts: Any
) -> tuple[dict[str, Any], dict[str, str], bytes]:
    """The body, headers and raw body of the request for the catalog's model, sent to
    its own host (which the loopback server stands in for)."""
    found = anthropic.model(model_id, provider=provider)
    async with open_sse_server(sse("text.sse")) as server:
        if "{" in found.base_url:  # a URL with the account's placeholders
            found = attrs.evolve(found, base_url=server.url)
        async with as_if_at(server.url) as client:
            provider_ = anthropic.Anthropic(client)
            result = await call(provider_.stream, found, ctx or _cached_context(), options(**opts))
    assert result.message.stop_reason == "stop", result.message.error_message
    request = server.requests[0]
    return request.json, request.headers, request.body


@pytest.mark.parametrize(
    ("provider", "model_id", "on_tools", "affinity", "thinking"),
    [
        ("anthropic", "claude-sonnet-4-5", True, None, {"type": "disabled"}),
        ("anthropic", "claude-fable-5", True, None, None),  # its thinking can't be off
        ("openrouter", "anthropic/claude-sonnet-4.5", True, "x-session-id", {"type": "disabled"}),
        (
            "fireworks",
            "accounts/fireworks/models/deepseek-v4p1-flash",
            False,  # the host refuses a breakpoint on a tool
            "x-session-affinity",
            {"type": "disabled"},
        ),
        (
            "cloudflare-ai-gateway",
            "claude-sonnet-4-5",
            True,
            "x-session-affinity",
            {"type": "disabled"},
        ),
    ],
)
async def test_the_prompt_cache_is_marked_as_pi_ai_marks_it_on_each_host(
    clock: Any,
    provider: str,
    model_id: str,
    on_tools: bool,
    affinity: str | None,
    thinking: Any,
) -> None:
    """The system prompt, the last tool (where the host takes it) and the last user
    block are breakpoints of the five-minute cache; the session key goes in the host's
    affinity header, cut to 64 characters; no reasoning level turns thinking off where
    the model can stop thinking."""
    body, headers, raw = await _catalog_request(provider, model_id, session_id=SESSION)
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert [tool.get("cache_control") for tool in body["tools"]] == [
        None,
        EPHEMERAL if on_tools else None,
    ]
    assert [block.get("cache_control") for m in body["messages"] for block in m["content"]] == [
        None,
        None,
        EPHEMERAL,  # the tool result, the last user block
    ]
    assert raw.count(b"cache_control") == (3 if on_tools else 2)
    assert body.get("thinking") == thinking
    sent = {name: value for name, value in headers.items() if value == SESSION[:64]}
    assert sent == ({} if affinity is None else {affinity: SESSION[:64]})
    assert SESSION.encode() not in raw
    assert all(SESSION not in value for value in headers.values())


@pytest.mark.parametrize(
    ("provider", "model_id", "cache"),
    [
        ("anthropic", "claude-sonnet-4-5", {"type": "ephemeral", "ttl": "1h"}),
        ("openrouter", "anthropic/claude-sonnet-4.5", {"type": "ephemeral", "ttl": "1h"}),
        # supportsLongCacheRetention: false, the host's own cache
        ("fireworks", "accounts/fireworks/models/deepseek-v4p1-flash", EPHEMERAL),
    ],
)
async def test_long_retention_asks_for_an_hour_where_the_host_keeps_one(
    clock: Any, provider: str, model_id: str, cache: Any
) -> None:
    body, _, _ = await _catalog_request(provider, model_id, cache_retention="long")
    marks = [body["system"][0], body["tools"][-1], body["messages"][-1]["content"][-1]]
    if provider == "fireworks":
        marks.pop(1)
    assert [mark.get("cache_control") for mark in marks] == [cache] * len(marks)


@pytest.mark.parametrize(
    ("provider", "model_id"),
    [
        ("openrouter", "anthropic/claude-sonnet-4.5"),
        ("fireworks", "accounts/fireworks/models/deepseek-v4p1-flash"),
    ],
)
async def test_no_retention_sends_no_breakpoint_and_no_session_header(
    clock: Any, provider: str, model_id: str
) -> None:
    body, headers, raw = await _catalog_request(
        provider, model_id, session_id="s-1", cache_retention="none"
    )
    assert b"cache_control" not in raw
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert "s-1" not in headers.values()


async def test_a_session_key_a_header_cannot_carry_is_percent_encoded(clock: Any) -> None:
    """The request is sent, and two keys stay apart: a character that is not printable
    ASCII (or a ``%``) becomes its UTF-8 bytes' escapes."""
    _, headers, _ = await _catalog_request(
        "openrouter", "anthropic/claude-sonnet-4.5", session_id="é 1%\n"
    )
    assert headers["x-session-id"] == "%C3%A9%201%25%0A"


async def test_a_session_key_with_a_lone_surrogate_is_sent(clock: Any) -> None:
    """A lone surrogate (a ``str`` may hold one) goes as its three UTF-8 bytes' escapes,
    as the OpenAI providers send it: the request is sent, the run does not raise."""
    _, headers, _ = await _catalog_request(
        "openrouter", "anthropic/claude-sonnet-4.5", session_id="s\ud8001"
    )
    assert headers["x-session-id"] == "s%ED%A0%801"


async def test_the_breakpoint_is_the_last_user_block_before_the_effort_message(
    clock: Any,
) -> None:
    """A model whose effort is set mid-conversation ends its messages with a ``system``
    message: the breakpoint stays on the user's last block, as pi-ai puts it."""
    body, _, _ = await _catalog_request("anthropic", "claude-fable-5-1", reasoning="low")
    last, effort = body["messages"][-2:]
    assert effort == {"role": "system", "content": [], "output_config": {"effort": "low"}}
    assert last["content"][-1]["cache_control"] == EPHEMERAL


async def test_no_breakpoint_when_the_conversation_ends_with_the_model(clock: Any) -> None:
    ctx = context(UserMessage.text("hi"), ours(TextContent("hello"), stop_reason="stop"))
    body = await request_of(model, ctx)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert "cache_control" not in str(body["messages"])


def _usage_stream(usage: str) -> ScriptedResponse:
    text = fixture("anthropic", "text.sse")
    start = text.index(b'"usage":{"input_tokens":25')
    end = text.index(b"}}}", start) + 1
    return ScriptedResponse(body=text[:start] + b'"usage":' + usage.encode() + text[end:])


async def test_one_hour_cache_writes_are_counted_and_cost_twice_the_input(clock: Any) -> None:
    usage = (
        '{"input_tokens":10,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,'
        '"cache_creation":{"ephemeral_5m_input_tokens":400,"ephemeral_1h_input_tokens":600},'
        '"output_tokens":1}'
    )
    async with open_sse_server(_usage_stream(usage)) as server:
        priced = attrs.evolve(
            model(server.url), cost=ModelCost(input=3.0, output=15.0, cache_write=3.75)
        )
        result = await call(anthropic.stream, priced)
    assert (result.message.usage.cache_write, result.message.usage.cache_write_long) == (
        1000,
        600,
    )
    assert result.message.usage.cost.cache_write == pytest.approx((400 * 3.75 + 600 * 6) / 1e6)
    assert result.message.usage.cost.total == pytest.approx(
        (10 * 3 + 12 * 15 + 400 * 3.75 + 600 * 6) / 1e6
    )


async def test_one_hour_writes_beyond_all_writes_cost_as_all_of_them(clock: Any) -> None:
    """A server's count of one-hour writes above its count of writes prices no negative
    short writes: all the writes are priced as one-hour writes."""
    usage = (
        '{"input_tokens":0,"cache_creation_input_tokens":100,'
        '"cache_creation":{"ephemeral_1h_input_tokens":500},"output_tokens":0}'
    )
    async with open_sse_server(_usage_stream(usage)) as server:
        priced = attrs.evolve(model(server.url), cost=ModelCost(input=3.0, cache_write=3.75))
        result = await call(anthropic.stream, priced)
    assert result.message.usage.cost.cache_write == pytest.approx(100 * 6 / 1e6)


async def test_a_malformed_count_of_one_hour_writes_is_an_error_naming_it(clock: Any) -> None:
    usage = '{"input_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":[1]}}'
    async with open_sse_server(_usage_stream(usage)) as server:
        result = await call(anthropic.stream, model(server.url))
    assert result.message.stop_reason == "error"
    assert result.message.error_message == (
        "malformed message_start event from anthropic: "
        "message.usage.cache_creation.ephemeral_1h_input_tokens is [1], not a token count"
    )


async def test_a_text_tool_result_goes_as_one_string(clock: Any) -> None:
    """Texts alone are joined by newlines into one string, as pi-ai sends them (fewer
    tokens billed on every later request); with an image they stay blocks."""
    ctx = context(
        UserMessage.text("q"),
        ours(ToolCall("toolu_1", "echo", {}), ToolCall("toolu_2", "echo", {})),
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="echo",
            content=(TextContent("one"), TextContent(""), TextContent("two")),
        ),
        ToolResultMessage(
            tool_call_id="toolu_2", tool_name="echo", content=(TextContent("map"), IMAGE)
        ),
    )
    body = await request_of(model, ctx, cache_retention="none")
    first, second = body["messages"][-1]["content"]
    assert first["content"] == "one\ntwo"
    assert second["content"] == [{"type": "text", "text": "map"}, IMAGE_BLOCK]


@settings(max_examples=200, deadline=None)
@given(first=st.text(max_size=120), second=st.text(max_size=120))
@example(first="\ud800", second="\udfff")
def test_any_session_id_makes_a_header_the_request_can_carry(first: str, second: str) -> None:
    """Whatever the session id: the affinity header passes the transport's check (the
    request is sent), never holds more than the first 64 characters, and two keys that
    differ are sent differently."""
    claude = anthropic.model("anthropic/claude-sonnet-4.5", provider="openrouter")
    sent = []
    for session_id in (first, second):
        request = anthropic.provider().build_request(
            claude, context(), options(session_id=session_id), "key"
        )
        _check_headers(request.headers)
        value = request.headers.get("x-session-id")
        assert (value is None) == (not session_id)
        if len(session_id) > 64:
            assert session_id not in str(request.headers) + json.dumps(request.body)
        sent.append(value)
    if first[:64] != second[:64]:
        assert sent[0] != sent[1]


MODELS = {"anthropic": MODEL_ID, "fireworks": "accounts/fireworks/models/deepseek-v4p1-flash"}


@settings(max_examples=25, deadline=None)
@given(
    transcript=transcripts(max_exchanges=2, max_tool_calls=2),
    retention=st.sampled_from(["short", "long", "none"]),
    system_prompt=st.sampled_from(["", "Be brief."]),
    tools=st.sampled_from([(), (ECHO,), (ECHO, SHOUT)]),
    provider=st.sampled_from(["anthropic", "fireworks"]),
)
def test_the_breakpoints_of_any_transcript_are_where_pi_ai_puts_them(
    transcript: list[Any], retention: str, system_prompt: str, tools: Any, provider: str
) -> None:
    """At most three breakpoints (the API refuses more than four): the system prompt, the
    last tool (where the host takes one), the last block of the last message when that
    is the user's; none with ``cache_retention="none"``."""
    claude = anthropic.model(MODELS[provider], provider=provider)
    ctx = LlmContext(system_prompt, transcript, tools)
    body = (
        anthropic.provider()
        .build_request(claude, ctx, options(cache_retention=retention), "key")
        .body
    )
    expected: list[str] = []
    if retention != "none":
        if system_prompt:
            expected.append("system")
        if tools and provider == "anthropic":
            expected.append("tools")
        if body["messages"] and body["messages"][-1]["role"] == "user":
            expected.append("last")
    found = []
    for where, blocks in [
        ("system", body.get("system", [])),
        ("tools", body.get("tools", [])),
        *[("messages", m["content"]) for m in body["messages"]],
    ]:
        for block in blocks:
            if "cache_control" in block:
                found.append(where)
                assert block["cache_control"]["type"] == "ephemeral"
    if found and found[-1] == "messages":
        assert "cache_control" in body["messages"][-1]["content"][-1]
        found[-1] = "last"
    if "tools" in found:
        assert "cache_control" in body["tools"][-1]
    assert found == expected
