"""The OpenAI chat completions provider, against a loopback server.

design.md#wire-formats, design.md#openai-chat-completions.
"""

from __future__ import annotations

from typing import Any

import attrs
import openai
import pydantic
import pytest
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

from tests._providers import (
    CUT_SESSION_ID,
    LONG_SESSION_ID,
    PIECES,
    as_if_at,
    call,
    check_stream,
    context,
    conversation_request,
    fixture,
    options,
    strings,
)
from tests._sdk import check
from tests._support import ECHO
from trio_agent import (
    AssistantMessage,
    ImageContent,
    ModelCost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent.providers import openai_chat
from trio_agent.providers._fields import show
from trio_agent.testing import ScriptedResponse, open_sse_server, sse_body


def sse(name: str, pieces: Any = None) -> ScriptedResponse:
    return ScriptedResponse(body=fixture("openai_chat", name), pieces=pieces)


def model(url: str, **kwargs: Any) -> Any:
    return openai_chat.model(
        "gpt-4.1", base_url=url + "/v1", provider=kwargs.pop("provider", "openai"), **kwargs
    )


@pytest.mark.parametrize("pieces", PIECES)
async def test_a_text_reply(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("text.sse", pieces)) as server:
        result = await call(openai_chat.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert message.content == (TextContent("Hello, wörld \u2028 ✓"),)
    assert (message.stop_reason, message.response_id, message.api, message.provider) == (
        "stop",
        "chatcmpl-AbC1",
        "openai-chat",
        "openai",
    )
    assert message.usage == Usage(input=20, output=12, cache_read=100, total_tokens=132)
    assert result.types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]


@pytest.mark.parametrize("pieces", PIECES)
async def test_tool_calls_arguments_across_pieces(clock: Any, pieces: Any) -> None:
    async with open_sse_server(sse("tool_calls.sse", pieces)) as server:
        result = await call(openai_chat.stream, model(server.url))
    check_stream(result.events)
    assert result.message.content == (
        ToolCall("call_a", "get_weather", {"city": "Parisé", "days": 3}),
        ToolCall("call_b", "get_time", {"tz": "UTC"}),
    )
    assert result.message.stop_reason == "toolUse"
    assert result.message.usage.output == 30  # completion tokens include reasoning
    ends = [e.tool_call.arguments for e in result.events if e.type == "toolcall_end"]
    assert ends == [{"city": "Parisé", "days": 3}, {"tz": "UTC"}]


async def test_partial_tool_arguments_are_parsed_as_they_grow(clock: Any) -> None:
    async with open_sse_server(sse("tool_calls.sse")) as server:
        result = await call(openai_chat.stream, model(server.url))
    partials = [
        e.partial.content[0].arguments  # type: ignore[union-attr]  # a ToolCall, here
        for e in result.events
        if e.type == "toolcall_delta" and e.content_index == 0
    ]
    assert partials == [{"city": "Pa"}, {"city": "Parisé", "days": 3}]  # an open string counts


@pytest.mark.parametrize("pieces", PIECES)
async def test_reasoning_content_is_thinking_and_goes_back_in_the_same_field(
    clock: Any, pieces: Any
) -> None:
    async with open_sse_server(sse("reasoning_content.sse", pieces), sse("text.sse")) as server:
        first = await call(openai_chat.stream, model(server.url, provider="deepseek"))
        assert first.message.content == (
            ThinkingContent("First, think.", thinking_signature="reasoning_content"),
            TextContent("42"),
        )
        assert first.message.usage == Usage(input=4, output=9, cache_read=16, total_tokens=29)
        ctx = context(UserMessage.text("q"), first.message, UserMessage.text("again"))
        await call(openai_chat.stream, model(server.url, provider="deepseek"), ctx)
    sent = server.requests[1].json["messages"][1]
    assert sent == {"role": "assistant", "content": "42", "reasoning_content": "First, think."}


async def test_only_the_first_reasoning_field_counts(clock: Any) -> None:
    async with open_sse_server(sse("both_reasoning_fields.sse")) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.content == (
        ThinkingContent("Same text", thinking_signature="reasoning_content"),
        TextContent("Answer"),
    )


async def test_ollama_reasoning_and_a_whole_tool_call_in_one_fragment(clock: Any) -> None:
    async with open_sse_server(sse("ollama_reasoning_whole_call.sse", (1, 7))) as server:
        local = openai_chat.model("qwen3", base_url=server.url + "/v1")
        result = await call(openai_chat.stream, local, opts=options(api_key=None))
    check_stream(result.events)
    assert local.provider == "local"
    assert result.message.content == (
        ThinkingContent("Need the tool.", thinking_signature="reasoning"),
        ToolCall("call_x1", "read", {"path": "a.txt"}),
    )
    assert "authorization" not in server.requests[0].headers


async def test_tool_calls_without_an_index_are_told_apart_by_id(clock: Any) -> None:
    async with open_sse_server(sse("no_index.sse", (1, 5))) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.content == (
        ToolCall("function-call-1", "lookup", {"q": "one"}),
        ToolCall("function-call-2", "lookup", {"q": "two"}),
    )
    assert result.message.stop_reason == "toolUse"  # "stop" with tool calls


async def test_a_reused_index_with_a_new_id_and_null_ids(clock: Any) -> None:
    async with open_sse_server(sse("reused_index_null_ids.sse")) as server:
        result = await call(openai_chat.stream, model(server.url))
    calls = result.message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls][:2] == [
        ("call_1", "a", {"x": 1}),
        ("call_2", "b", {}),
    ]
    assert (calls[2].name, calls[2].arguments) == ("c", {"y": 2})
    assert calls[2].id not in ("", "null")
    check_stream(result.events)


async def test_arguments_that_come_after_their_call_closed_still_count(clock: Any) -> None:
    """Interleaved calls: a fragment of call 0 after call 1 opened is not streamed (its
    block is closed) but is in the final message."""

    def chunk(index: int, **function: Any) -> dict[str, Any]:
        fragment: dict[str, Any] = {"index": index, "function": function}
        if "name" in function:
            fragment |= {"id": f"call_{index}", "type": "function"}
        return {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}

    body = sse_body(
        [
            (None, chunk(0, name="a", arguments='{"x": ')),
            (None, chunk(1, name="b", arguments='{"y": 2}')),
            (None, chunk(0, arguments="1}")),
            (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ],
        done=True,
    )
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [
        ("call_0", {"x": 1}),
        ("call_1", {"y": 2}),
    ]
    check_stream(result.events)


@pytest.mark.parametrize(
    ("name", "usage", "stop"),
    [
        ("usage_in_choice.sse", Usage(input=7, output=2, total_tokens=9), "stop"),
        ("usage_chunk_choices_null.sse", Usage(input=3, output=5, total_tokens=8), "length"),
    ],
)
async def test_usage_where_compatible_servers_put_it(
    clock: Any, name: str, usage: Usage, stop: str
) -> None:
    async with open_sse_server(sse(name)) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert (result.message.usage, result.message.stop_reason) == (usage, stop)


async def test_cost_comes_from_the_models_cost_table(clock: Any) -> None:
    async with open_sse_server(sse("text.sse")) as server:
        priced = model(server.url, cost=ModelCost(input=2.0, output=8.0, cache_read=0.5))
        result = await call(openai_chat.stream, priced)
    cost = result.message.usage.cost
    assert (cost.input, cost.output, cost.cache_read) == pytest.approx((40e-6, 96e-6, 50e-6))
    assert cost.total == pytest.approx(186e-6)


@pytest.mark.parametrize(
    ("name", "error", "kept"),
    [
        (
            "in_band_error.sse",
            "openai reported an error: The server had an error processing your request.",
            "Partial",
        ),
        ("openrouter_error.sse", "openai reported an error: Provider returned error", "Some"),
        ("vllm_error.sse", "openai reported an error: The model does not exist.", ""),
        (
            "unknown_finish_reason.sse",
            "openai finished with finish_reason 'insufficient_system_resource'",
            "Half an ans",
        ),
        ("no_finish.sse", "the stream from openai ended without a finish_reason", "Cut off"),
    ],
)
async def test_failures_in_the_stream_end_as_errors_keeping_what_arrived(
    clock: Any, name: str, error: str, kept: str
) -> None:
    async with open_sse_server(sse(name, (1, 7))) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert (result.message.stop_reason, result.message.error_message, result.message.text) == (
        "error",
        error,
        kept,
    )
    assert result.events[-1].type == "error"


# --- the request ---------------------------------------------------------------------------------


async def request_of(server_model: Any, ctx: Any = None, **opts: Any) -> dict[str, Any]:
    async with open_sse_server(sse("text.sse")) as server:
        await call(openai_chat.stream, server_model(server.url), ctx, options(**opts))
    body: dict[str, Any] = server.requests[0].json
    body["_headers"] = server.requests[0].headers
    body["_path"] = server.requests[0].path
    return body


async def test_the_request_for_openai(clock: Any) -> None:
    image = ImageContent("aGk=", "image/png")
    ctx = context(
        UserMessage((TextContent("look"), image)),
        system_prompt="Be brief.",
        tools=[ECHO],
    )
    body = await request_of(
        lambda url: model(url, reasoning=True),
        ctx,
        max_tokens=100,
        temperature=0.2,
        reasoning="xhigh",
    )
    assert body["_path"] == "/v1/chat/completions"
    assert body["_headers"]["authorization"] == "Bearer test-key"
    del body["_headers"], body["_path"]
    assert body == {
        "model": "gpt-4.1",
        "stream": True,
        "stream_options": {"include_usage": True},
        "store": False,
        "max_completion_tokens": 100,
        "reasoning_effort": "high",  # and no temperature, which reasoning models refuse
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "echo",
                    "description": "the echo tool",
                    "parameters": ECHO.parameters,
                    "strict": False,
                },
            }
        ],
    }


def sdk_request(body: dict[str, Any]) -> dict[str, Any]:
    """``body``, checked against the openai SDK's request type (its messages one by one:
    TypedDicts take extra keys)."""
    pydantic.TypeAdapter(CompletionCreateParamsStreaming).validate_python(body)
    pydantic.TypeAdapter(list[openai.types.chat.ChatCompletionMessageParam]).validate_python(
        body["messages"]
    )
    return body


@pytest.mark.parametrize(
    ("reasoning", "level", "sent"),
    [
        (True, "low", {"reasoning_effort": "low"}),  # no temperature: it would be refused
        (True, None, {"temperature": 0.2}),
        (False, "low", {"temperature": 0.2}),
    ],
)
async def test_temperature_is_left_out_with_reasoning_effort(
    clock: Any, reasoning: bool, level: Any, sent: dict[str, Any]
) -> None:
    body = await request_of(
        lambda url: model(url, reasoning=reasoning), temperature=0.2, reasoning=level
    )
    del body["_headers"], body["_path"]
    sdk_request(body)
    assert {key: body[key] for key in ("temperature", "reasoning_effort") if key in body} == sent


@pytest.mark.parametrize(
    ("provider", "id", "level", "effort"),
    [
        ("groq", "openai/gpt-oss-120b", "minimal", "low"),  # minimal: None, the nearest above
        ("groq", "openai/gpt-oss-120b", "xhigh", "high"),  # not offered: the nearest below
        ("groq", "openai/gpt-oss-120b", "medium", "medium"),
        ("deepseek", "deepseek-v4-pro", "medium", "high"),
        ("deepseek", "deepseek-v4-pro", "xhigh", "max"),  # xhigh unmapped, max offered
    ],
)
async def test_a_level_is_sent_as_the_models_thinking_levels_map_it(
    clock: Any, provider: str, id: str, level: str, effort: str
) -> None:
    body = await request_of(
        lambda url: attrs.evolve(openai_chat.model(id, provider=provider), base_url=url + "/v1"),
        reasoning=level,
    )
    del body["_headers"], body["_path"]
    assert sdk_request(body)["reasoning_effort"] == effort


@pytest.mark.parametrize(("level", "effort"), [("low", "low"), ("medium", "high")])
async def test_the_catalogs_supports_reasoning_effort_rule_wins_over_detection(
    clock: Any, level: str, effort: str
) -> None:
    # moonshotai is not detected as taking reasoning_effort; kimi-k3's rule says it does
    body = await request_of(
        lambda url: attrs.evolve(
            openai_chat.model("kimi-k3", provider="moonshotai"), base_url=url + "/v1"
        ),
        reasoning=level,
    )
    del body["_headers"], body["_path"]
    assert sdk_request(body)["reasoning_effort"] == effort


async def test_a_level_mapped_to_a_value_of_the_servers_own(clock: Any) -> None:
    # groq's qwen3.6 offers only high, which it names "default" (not an OpenAI effort)
    body = await request_of(
        lambda url: attrs.evolve(
            openai_chat.model("qwen/qwen3.6-27b", provider="groq"), base_url=url + "/v1"
        ),
        reasoning="low",
    )
    assert body["reasoning_effort"] == "default"


def catalog_model(provider: str, id: str) -> Any:
    """The catalog's ``id`` at ``provider``, with its flags, served on loopback."""
    return lambda url: attrs.evolve(openai_chat.model(id, provider=provider), base_url=url + "/v1")


async def catalog_request(provider: str, id: str, ctx: Any = None, **opts: Any) -> dict[str, Any]:
    body = await request_of(catalog_model(provider, id), ctx, **opts)
    del body["_headers"], body["_path"]
    return body


REASONING_KEYS = (
    "reasoning_effort",
    "reasoning",
    "thinking",
    "enable_thinking",
    "chat_template_args",
    "temperature",
)


@pytest.mark.parametrize(
    ("provider", "id", "level", "sent"),
    [
        # openrouter: its reasoning object, not reasoning_effort; "none" turns it off
        ("openrouter", "deepseek/deepseek-v4-pro", "high", {"reasoning": {"effort": "high"}}),
        (
            "openrouter",
            "deepseek/deepseek-v4-pro",
            None,
            {"reasoning": {"effort": "none"}, "temperature": 0.5},
        ),
        # qwen: enable_thinking, and the effort where the model takes one
        (
            "qwen-token-plan",
            "glm-5.2",
            "high",
            {"enable_thinking": True, "reasoning_effort": "high"},
        ),
        ("qwen-token-plan", "qwen3.7-plus", "low", {"enable_thinking": True}),
        ("qwen-token-plan", "qwen3.7-plus", None, {"enable_thinking": False, "temperature": 0.5}),
        # deepseek: thinking enabled / disabled, and the effort
        (
            "deepseek",
            "deepseek-v4-pro",
            "medium",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        (
            "deepseek",
            "deepseek-v4-pro",
            None,
            {"thinking": {"type": "disabled"}, "temperature": 0.5},
        ),
        # together: reasoning enabled, the effort only where the model takes one
        ("together", "zai-org/GLM-5.3", "high", {"reasoning": {"enabled": True}}),
        (
            "together",
            "zai-org/GLM-5.3",
            None,
            {"reasoning": {"enabled": False}, "temperature": 0.5},
        ),
        (
            "together",
            "deepseek-ai/DeepSeek-V4-Pro-0813",
            "high",
            {"reasoning": {"enabled": True}, "reasoning_effort": "high"},
        ),
        # zai: thinking enabled (keeping earlier turns' reasoning) / disabled
        (
            "zai",
            "glm-5.3",
            "low",
            {"thinking": {"type": "enabled", "clear_thinking": False}, "reasoning_effort": "low"},
        ),
        ("zai", "glm-4.7", "high", {"thinking": {"type": "enabled", "clear_thinking": False}}),
        ("zai", "glm-5.3", None, {"thinking": {"type": "disabled"}, "temperature": 0.5}),
        # baseten: the catalog's chat_template_args, filled in for the level, and the
        # effort where the model takes one (supportsReasoningEffort)
        (
            "baseten",
            "zai-org/GLM-5.2",
            "high",
            {"chat_template_args": {"enable_thinking": True}, "reasoning_effort": "high"},
        ),
        (
            "baseten",
            "zai-org/GLM-5.2",
            None,
            {
                "chat_template_args": {"enable_thinking": False},
                "reasoning_effort": "none",  # its "off"
                "temperature": 0.5,
            },
        ),
        # ant-ling: its reasoning object, only when asked; low is not offered: high
        ("ant-ling", "Ring-2.6-1T", "low", {"reasoning": {"effort": "high"}}),
        ("ant-ling", "Ring-2.6-1T", None, {"temperature": 0.5}),
        # openai, with an "off" of the model's own: sent when no level is asked for
        (
            "baseten",
            "deepseek-ai/DeepSeek-V4-Pro-0813",
            None,
            {"reasoning_effort": "none", "temperature": 0.5},
        ),
        (
            "baseten",
            "deepseek-ai/DeepSeek-V4-Pro-0813",
            "low",
            {"reasoning_effort": "low"},
        ),
    ],
)
async def test_the_level_is_sent_in_the_catalogs_thinking_format(
    clock: Any, provider: str, id: str, level: Any, sent: dict[str, Any]
) -> None:
    # The request type takes the extra fields (TypedDicts do); those it has are checked.
    # No level: reasoning is turned off where the format can, and temperature is sent.
    body = sdk_request(await catalog_request(provider, id, reasoning=level, temperature=0.5))
    assert {key: body[key] for key in REASONING_KEYS if key in body} == sent


@pytest.mark.parametrize(
    ("level", "args"),
    [
        ("medium", {"enable_thinking": True, "effort": "medium", "mode": "fast"}),
        (None, {"enable_thinking": False, "mode": "fast"}),  # effort: omitWhenOff
    ],
)
async def test_chat_template_args_set_by_hand(clock: Any, level: Any, args: dict[str, Any]) -> None:
    compat = openai_chat.Compat(
        thinking_format="baseten",
        chat_template_args={
            "enable_thinking": {"$var": "thinking.enabled"},
            "effort": {"omitWhenOff": True},
            "mode": "fast",
            "budget": {"$var": "thinking.budget"},  # no budget is computed: left out
        },
    )
    body = await request_of(lambda url: model(url, reasoning=True, compat=compat), reasoning=level)
    assert body["chat_template_args"] == args


async def test_a_thinking_format_set_by_hand_wins_over_the_catalogs(clock: Any) -> None:
    body = await request_of(
        lambda url: attrs.evolve(
            catalog_model("openrouter", "deepseek/deepseek-v4-pro")(url),
            compat=openai_chat.Compat(thinking_format="openai"),
        ),
        reasoning="xhigh",
    )
    del body["_headers"], body["_path"]
    assert (sdk_request(body)["reasoning_effort"], "reasoning" in body) == ("xhigh", False)


async def test_a_model_the_catalog_does_not_know_gets_the_detected_thinking_format(
    clock: Any,
) -> None:
    body = await request_of(
        lambda url: openai_chat.model(
            "some/new-model", base_url=url + "/v1", provider="openrouter", reasoning=True
        ),
        reasoning="medium",
    )
    assert (body["reasoning"], "reasoning_effort" in body) == ({"effort": "medium"}, False)


@pytest.mark.parametrize(
    ("provider", "id", "field"),
    [
        ("zai", "glm-5.3", "max_tokens"),  # detection does not know zai: max_completion_tokens
        ("baseten", "openai/gpt-oss-120b", "max_tokens"),
    ],
)
async def test_the_catalogs_max_tokens_field(
    clock: Any, provider: str, id: str, field: str
) -> None:
    body = sdk_request(await catalog_request(provider, id, max_tokens=77))
    assert body[field] == 77
    assert {"max_tokens", "max_completion_tokens"} & set(body) == {field}


async def test_the_catalogs_flags_win_over_detection_and_a_compat_given_over_both(
    clock: Any,
) -> None:
    flags = {
        "supportsDeveloperRole": False,
        "supportsStore": False,
        "supportsUsageInStreaming": False,
        "maxTokensField": "max_tokens",
    }
    ctx = context(UserMessage.text("hi"), system_prompt="sys")
    flagged = await request_of(
        lambda url: attrs.evolve(model(url, reasoning=True), compat_flags=flags),
        ctx,
        max_tokens=9,
    )
    del flagged["_headers"], flagged["_path"]
    sdk_request(flagged)
    assert flagged["messages"][0] == {"role": "system", "content": "sys"}
    assert ("store" in flagged, "stream_options" in flagged) == (False, False)
    assert (flagged.get("max_tokens"), "max_completion_tokens" in flagged) == (9, False)
    given = openai_chat.Compat(
        supports_developer_role=True,
        supports_store=True,
        supports_usage_in_streaming=True,
        max_tokens_field="max_completion_tokens",
    )
    chosen = await request_of(
        lambda url: attrs.evolve(model(url, reasoning=True, compat=given), compat_flags=flags),
        ctx,
        max_tokens=9,
    )
    del chosen["_headers"], chosen["_path"]
    sdk_request(chosen)
    assert chosen["messages"][0] == {"role": "developer", "content": "sys"}
    assert (chosen["store"], chosen["stream_options"]) == (False, {"include_usage": True})
    assert (chosen["max_completion_tokens"], "max_tokens" in chosen) == (9, False)


async def test_assistant_messages_carry_reasoning_content_where_the_catalog_requires_it(
    clock: Any,
) -> None:
    ctx = context(
        UserMessage.text("q"),
        AssistantMessage(content=(ToolCall("t1", "echo", {}),), stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="t1", tool_name="echo", content=(TextContent("r"),)),
        AssistantMessage(
            content=(
                ThinkingContent("hm", thinking_signature="reasoning_content"),
                TextContent("a"),
            ),
            api=openai_chat.API,
            provider="openrouter",
            model="deepseek/deepseek-v4-pro",
        ),
        UserMessage.text("more"),
    )
    body = sdk_request(await catalog_request("openrouter", "deepseek/deepseek-v4-pro", ctx))
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["", "hm"]
    plain = await catalog_request("openrouter", "openai/gpt-oss-120b", ctx)
    assert "reasoning_content" not in plain["messages"][1]


def sdk_chunks(*deltas: dict[str, Any], finish: str = "stop") -> ScriptedResponse:
    """A reply streamed as the openai SDK's ``ChatCompletionChunk`` models."""
    chunks = [
        openai.types.chat.ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gpt-4.1",
                "choices": [
                    {
                        "index": 0,
                        "delta": delta,
                        "finish_reason": finish if number == len(deltas) - 1 else None,
                    }
                ],
            }
        )
        for number, delta in enumerate(deltas)
    ]
    return ScriptedResponse(
        body=sse_body(((None, chunk.model_dump(mode="json")) for chunk in chunks), done=True)
    )


async def test_a_refusal_is_the_answer_the_user_and_the_next_request_see(clock: Any) -> None:
    refusal = sdk_chunks(
        {"role": "assistant", "content": None, "refusal": ""},
        {"refusal": "I can't help "},
        {"refusal": "with that."},
        {},
    )
    async with open_sse_server(refusal, sse("text.sse")) as server:
        first = await call(openai_chat.stream, model(server.url))
        check_stream(first.events)
        ctx = context(UserMessage.text("q"), first.message, UserMessage.text("why?"))
        await call(openai_chat.stream, model(server.url), ctx)
    assert first.message.content == (TextContent("I can't help with that."),)
    assert first.message.stop_reason == "stop"
    assert [e.type for e in first.events if e.type.startswith("text")] == [
        "text_start",
        *("text_delta", "text_delta"),
        "text_end",
    ]
    assert sdk_request(server.requests[1].json)["messages"][1] == {
        "role": "assistant",
        "content": "I can't help with that.",
    }


async def test_a_refusal_of_another_type_is_an_error_naming_it(clock: Any) -> None:
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"refusal": 5}}]}
    async with open_sse_server(ScriptedResponse(body=sse_body([(None, chunk)]))) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "error"
    assert "choices[0].delta.refusal is 5, not a string" in (result.message.error_message or "")


async def test_the_request_for_a_local_server(clock: Any) -> None:
    body = await request_of(
        lambda url: openai_chat.model("llama3.2", base_url=url + "/v1", reasoning=True),
        context(UserMessage.text("hi"), system_prompt="sys"),
        max_tokens=50,
        api_key=None,
        reasoning="low",
    )
    assert "authorization" not in body["_headers"]
    assert (body["max_tokens"], body["messages"][0]["role"]) == (50, "system")
    assert "store" not in body
    assert body["reasoning_effort"] == "low"  # as pi-ai: every server but a few takes it


async def test_compat_switches_can_be_set_by_hand(clock: Any) -> None:
    compat = openai_chat.Compat(
        max_tokens_field="max_tokens",
        supports_usage_in_streaming=False,
        supports_store=False,
        requires_tool_result_name=True,
    )
    ctx = context(
        UserMessage.text("q"),
        AssistantMessage(content=(ToolCall("t1", "echo", {"value": "v"}),), stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="t1", tool_name="echo", content=(TextContent("r"),)),
    )
    body = await request_of(lambda url: model(url, compat=compat), ctx, max_tokens=10)
    assert body["max_tokens"] == 10
    assert "stream_options" not in body
    assert "store" not in body
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "r",
        "name": "echo",
    }


async def test_the_transcript_is_made_sendable(clock: Any) -> None:
    image = ImageContent("aGk=", "image/png")
    ctx = context(
        UserMessage.text("q"),
        AssistantMessage(
            content=(
                TextContent("calling"),
                ToolCall("t1", "echo", {"value": "é"}),
                ToolCall("t2", "echo", {}),
            ),
            stop_reason="toolUse",
        ),
        ToolResultMessage(tool_call_id="t1", tool_name="echo", content=(TextContent("r1"), image)),
        AssistantMessage(content=(TextContent("half"),), stop_reason="aborted"),
        UserMessage.text("next"),
    )
    body = await request_of(lambda url: model(url), ctx)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"value":"é"}'},  # JSON.stringify
                },
                {"id": "t2", "type": "function", "function": {"name": "echo", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "r1"},
        {"role": "tool", "tool_call_id": "t2", "content": "No result provided"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
    ]


@pytest.mark.parametrize(
    ("base_url", "provider", "max_tokens_field", "developer"),
    [
        ("https://api.openai.com/v1", "openai", "max_completion_tokens", True),
        ("http://localhost:11434/v1", "ollama", "max_tokens", False),
        ("http://127.0.0.1:8000/v1", "vllm", "max_tokens", False),
        ("http://localhost:8080/v1", "llama.cpp", "max_tokens", False),
        ("https://openrouter.ai/api/v1", "openrouter", "max_completion_tokens", False),
        ("https://api.deepseek.com/v1", "deepseek", "max_tokens", False),
    ],
)
def test_compat_is_detected_from_the_base_url(
    base_url: str, provider: str, max_tokens_field: str, developer: bool
) -> None:
    detected = openai_chat.model("m", base_url=base_url)
    compat = openai_chat.resolve_compat(detected)
    assert (detected.provider, compat.max_tokens_field, compat.supports_developer_role) == (
        provider,
        max_tokens_field,
        developer,
    )


async def test_no_key_is_an_error_before_any_request(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = openai_chat.OpenAIChat(client)
        gpt = openai_chat.model("gpt-4.1")  # at OpenAI's server
        result = await call(provider.stream, gpt, opts=options(api_key=None))
    assert server.requests == []
    assert result.message.error_message == (
        "no API key for openai: set OPENAI_API_KEY, or give api_key (or get_api_key)"
    )
    assert result.types == ["error"]


async def test_the_key_comes_from_the_environment(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = openai_chat.OpenAIChat(client)
        await call(provider.stream, openai_chat.model("gpt-4.1"), opts=options(api_key=None))
    assert server.requests[0].headers["host"] == "api.openai.com"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


# --- what the server sends that is not what the API says --------------------------------------


@pytest.mark.parametrize("pieces", PIECES)
async def test_sse_blocks_without_data_are_no_events(clock: Any, pieces: Any) -> None:
    # Legal SSE that dispatches nothing (WHATWG HTML, "dispatch the event"): a retry,
    # an id, a name alone; and an empty "data:" line, which carries nothing.
    text = fixture("openai_chat", "text.sse")
    second = text.index(b"data: ", 1)
    body = (
        b"retry: 3000\n\nid: 1\n\nevent: ping\n\n"
        + text[:second]
        + b"event: ping\n\ndata:\n\n"
        + text[second:]
    )
    async with open_sse_server(ScriptedResponse(body=body, pieces=pieces)) as server:
        result = await call(openai_chat.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.error_message) == ("stop", None)
    assert message.content == (TextContent("Hello, wörld \u2028 ✓"),)


def _chunks_then(last: dict[str, Any]) -> bytes:
    """A reply that says "Hi", then ``last``."""
    hi = {"id": "c-1", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    return sse_body([(None, hi), (None, last)], done=True)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


STOP = {"index": 0, "delta": {}, "finish_reason": "stop"}


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        ([1], "[1]"),
        ("many", '"many"'),
        (float("nan"), "NaN"),
        (-3, "-3"),
        (1.5, "1.5"),
        (True, "true"),
        (10**400, show(10**400)),  # a price times it would overflow a float
        (1e300, "1e+300"),
    ],
)
async def test_a_usage_count_that_is_not_a_count_is_an_error_naming_it(
    clock: Any, usage: Any, shown: str
) -> None:
    body = _chunks_then({"choices": [STOP], "usage": {"prompt_tokens": usage}})
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_chat.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.text) == ("error", "Hi")
    assert message.error_message == (
        f"malformed chunk from openai: usage.prompt_tokens is {shown}, not a token count"
    )


async def test_usage_counts_as_whole_floats_and_digit_strings_are_read(clock: Any) -> None:
    usage = {"prompt_tokens": "12", "completion_tokens": 3.0}
    body = _chunks_then({"choices": [STOP], "usage": usage})
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert result.message.usage == Usage(input=12, output=3, total_tokens=15)


@pytest.mark.parametrize(
    ("chunk", "error"),
    [
        ({"choices": "x"}, 'choices is "x", not an array'),
        ({"choices": [5]}, "choices[0] is 5, not an object"),
        ({"choices": [{"delta": []}]}, "choices[0].delta is [], not an object"),
        ({"choices": [{"delta": {"content": 5}}]}, "choices[0].delta.content is 5, not a string"),
        (
            {"choices": [{"delta": {"content": "lost"}, "finish_reason": 5}]},
            "choices[0].finish_reason is 5, not a string",
        ),
        (
            {"choices": [{"delta": {"reasoning": {}}}]},
            "choices[0].delta.reasoning is {}, not a string",
        ),
        (
            {"choices": [{"delta": {"tool_calls": {}}}]},
            "choices[0].delta.tool_calls is {}, not an array",
        ),
        (
            {"choices": [{"delta": {"tool_calls": [None]}}]},
            "choices[0].delta.tool_calls[0] is null, not an object",
        ),
        (
            {"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]},
            'choices[0].delta.tool_calls[0].index is "0", not an integer',
        ),
        (
            {"choices": [{"delta": {"tool_calls": [{"function": {"arguments": 5}}]}}]},
            "choices[0].delta.tool_calls[0].function.arguments is 5, not a string",
        ),
        ({"choices": [{"usage": [1]}]}, "choices[0].usage is [1], not an object"),
        (
            {"choices": [STOP], "usage": {"prompt_tokens_details": 7}},
            "usage.prompt_tokens_details is 7, not an object",
        ),
        # Deep, yet within what the JSON parser takes (201 levels): the field is named.
        (
            {"choices": [{"delta": {"content": _nested(150)}}]},
            "choices[0].delta.content is [[[[…]]]], not a string",
        ),
    ],
)
async def test_a_field_of_another_type_is_an_error_naming_it_and_its_chunk_is_not_taken(
    clock: Any, chunk: dict[str, Any], error: str
) -> None:
    async with open_sse_server(ScriptedResponse(body=_chunks_then(chunk))) as server:
        result = await call(openai_chat.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.content) == ("error", (TextContent("Hi"),))
    assert message.error_message == f"malformed chunk from openai: {error}"


async def test_a_chunk_nested_deeper_than_the_json_parser_takes_is_malformed_json(
    clock: Any,
) -> None:
    body = _chunks_then({"choices": [{"delta": {"content": _nested(300)}}]})
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_chat.stream, model(server.url))
    message = result.message
    assert (message.stop_reason, message.text) == ("error", "Hi")
    assert message.error_message is not None
    assert message.error_message.startswith(
        "malformed JSON in a chunk from openai: recursion limit exceeded"
    )


# --- what a run costs: prompt caching, the session, reasoning off ---------------------------------


async def sent_to(found: Any, **opts: Any) -> Any:
    """The request a run of ``found`` (a catalog model, at its own server) sends, seen on
    loopback: the tool conversation, with a session id (``s-1``, unless given)."""
    return await conversation_request(
        openai_chat.OpenAIChat, found, sse("text.sse"), "call_1", **opts
    )


SESSION_HEADERS = ("session_id", "x-client-request-id", "x-session-affinity", "x-session-id")


def session_headers(request: Any) -> dict[str, str]:
    return {name: request.headers[name] for name in SESSION_HEADERS if name in request.headers}


def conversation_messages(cache_control: Any = None) -> list[dict[str, Any]]:
    """The tool conversation as the chat API takes it; with ``cache_control``, marked
    where pi-ai marks it: the system prompt and the last user message's text."""

    mark = {} if cache_control is None else {"cache_control": cache_control}

    def text(value: str) -> Any:
        return [{"type": "text", "text": value, **mark}] if mark else value

    return [
        {"role": "system", "content": text("Be brief.")},
        {"role": "user", "content": [{"type": "text", "text": "What does the file say?"}]},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"path":"a"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "it says hi"},
        {"role": "assistant", "content": "It says hi."},
        {"role": "user", "content": [{"type": "text", "text": "And the other one?", **mark}]},
    ]


async def test_gpt_4_1_on_chat_sends_the_session_as_its_prompt_cache_key(clock: Any) -> None:
    """OpenAI's own server gets ``prompt_cache_key`` (the requests of one conversation go
    to the machine that holds its cache), and no session headers: as pi-ai."""
    request = await sent_to(openai_chat.model("gpt-4.1"))
    body = request.json
    check(body, CompletionCreateParamsStreaming)
    assert (body["prompt_cache_key"], session_headers(request)) == ("s-1", {})
    assert "prompt_cache_retention" not in body


async def test_gpt_4_1_on_chat_keeps_its_cache_a_day_when_asked(clock: Any) -> None:
    body = (await sent_to(openai_chat.model("gpt-4.1"), cache_retention="long")).json
    check(body, CompletionCreateParamsStreaming)
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("s-1", "24h")


async def test_openrouter_anthropic_on_chat_gets_cache_breakpoints(clock: Any) -> None:
    """OpenRouter caches an ``anthropic/*`` model's prompt only at Anthropic's
    breakpoints: on the system prompt, the last tool and the last user message, as
    pi-ai places them; the session goes in OpenRouter's ``x-session-id``, and
    reasoning is turned off, as no level is asked for."""
    found = openai_chat.model("anthropic/claude-sonnet-4.5", provider="openrouter")
    request = await sent_to(found, max_tokens=1000)
    body = request.json
    mark = {"type": "ephemeral"}
    assert body["messages"] == conversation_messages(mark)
    assert [tool.get("cache_control") for tool in body["tools"]] == [None, mark]
    assert (body["reasoning"], session_headers(request)) == (
        {"effort": "none"},
        {"x-session-id": "s-1"},
    )
    assert "prompt_cache_key" not in body  # only OpenAI's server, or a long cache
    sdk_request(body)  # OpenRouter's fields (cache_control, reasoning) are not OpenAI's


async def test_openrouter_anthropic_on_chat_long_cache(clock: Any) -> None:
    """With ``cache_retention="long"``: hour-long breakpoints, and the key and the day's
    retention, which pi-ai sends to every server that keeps a cache longer."""
    found = openai_chat.model("anthropic/claude-sonnet-4.5", provider="openrouter")
    body = (await sent_to(found, cache_retention="long")).json
    mark = {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"] == conversation_messages(mark)
    assert body["tools"][-1]["cache_control"] == mark
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("s-1", "24h")


async def test_the_last_breakpoint_goes_to_the_last_message_with_text(clock: Any) -> None:
    """A last message without text (an assistant's calls only) is passed over for the
    one before it that has text; a user message of parts has its last text marked."""
    found = openai_chat.model("anthropic/claude-sonnet-4.5", provider="openrouter")
    turn: dict[str, Any] = {"api": found.api, "provider": found.provider, "model": found.id}
    ctx = context(
        UserMessage((TextContent("first"), TextContent("second"), ImageContent("aGk=", "x/y"))),
        AssistantMessage(content=[ToolCall("call_1", "lookup", {})], stop_reason="toolUse", **turn),
    )
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        await call(openai_chat.OpenAIChat(client).stream, found, ctx, options(session_id="s"))
    messages = server.requests[0].json["messages"]
    assert [part.get("cache_control") for part in messages[0]["content"]] == [
        None,
        {"type": "ephemeral"},
        None,
    ]
    assert "cache_control" not in str(messages[1])


async def test_fireworks_on_chat_gets_the_session_affinity_headers(clock: Any) -> None:
    """The catalog asks for Fireworks' session headers (``sendSessionAffinityHeaders``),
    in OpenAI's format; no key in the body, and no long retention, which it lacks."""
    found = openai_chat.model("accounts/fireworks/models/glm-5p3", provider="fireworks")
    request = await sent_to(found, cache_retention="long")
    body = request.json
    assert session_headers(request) == {
        "session_id": "s-1",
        "x-client-request-id": "s-1",
        "x-session-affinity": "s-1",
    }
    assert ("prompt_cache_key" in body, "prompt_cache_retention" in body) == (False, False)
    assert "reasoning_effort" not in body  # its thinking cannot be turned off ("off": None)
    check(body, CompletionCreateParamsStreaming)


async def test_zai_streams_its_tool_calls_and_thinks_only_when_asked(clock: Any) -> None:
    """Z.ai's models get ``tool_stream`` with the tools (the catalog's
    ``zaiToolStream``) and reasoning turned off when no level is asked for; no key and
    no session headers, as pi-ai sends."""
    request = await sent_to(openai_chat.model("glm-4.7", provider="zai"))
    body = request.json
    assert (body["tool_stream"], body["thinking"]) == (True, {"type": "disabled"})
    assert ("prompt_cache_key" in body, session_headers(request)) == (False, {})
    sdk_request(body)  # Z.ai's fields (tool_stream, thinking) are not OpenAI's


async def test_no_cache_retention_sends_no_session_and_no_breakpoints(clock: Any) -> None:
    for found in (
        openai_chat.model("gpt-4.1"),
        openai_chat.model("anthropic/claude-sonnet-4.5", provider="openrouter"),
        openai_chat.model("accounts/fireworks/models/glm-5p3", provider="fireworks"),
    ):
        request = await sent_to(found, cache_retention="none")
        assert "prompt_cache" not in str(request.json)
        assert "cache_control" not in str(request.json)
        assert session_headers(request) == {}


CASES = [
    openai_chat.model("gpt-4.1"),
    openai_chat.model("anthropic/claude-sonnet-4.5", provider="openrouter"),
    openai_chat.model("accounts/fireworks/models/glm-5p3", provider="fireworks"),
    openai_chat.model("glm-4.7", provider="zai"),
]


@pytest.mark.parametrize("retention", ["short", "long"])
@pytest.mark.parametrize("found", CASES, ids=[found.id for found in CASES])
async def test_a_long_session_id_never_reaches_a_server_uncut(
    clock: Any, found: Any, retention: Any
) -> None:
    """A session id of 100 characters goes in no field and no header whole: its first 64
    (what OpenAI takes) name the conversation wherever it is sent."""
    request = await sent_to(found, session_id=LONG_SESSION_ID, cache_retention=retention)
    sent = [*request.headers.values(), *strings(request.json)]
    assert not [value for value in sent if LONG_SESSION_ID in value]
    named = [value for value in sent if CUT_SESSION_ID in value]
    assert named == [CUT_SESSION_ID] * len(named)
    # Z.ai gets the session only as the key of a long cache.
    assert bool(named) == (found.provider != "zai" or retention == "long")


async def test_a_session_id_a_header_cannot_carry_is_sent_percent_encoded(clock: Any) -> None:
    """The request is still sent, its headers naming the conversation the same way
    each time; the body's key is the id as given."""
    found = openai_chat.model("accounts/fireworks/models/glm-5p3", provider="fireworks")
    request = await sent_to(found, session_id="sé ssion\n1\ud800")
    assert session_headers(request)["x-session-affinity"] == "s%C3%A9%20ssion%0A1%ED%A0%80"


async def test_two_session_ids_never_share_a_header(clock: Any) -> None:
    """An id that is printable ASCII but looks like an escape (``%C3%A9``) and the id
    that escape stands for (``é``) name two conversations: a ``%`` is escaped too."""
    found = openai_chat.model("accounts/fireworks/models/glm-5p3", provider="fireworks")
    escaped = await sent_to(found, session_id="%C3%A9")
    plain = await sent_to(found, session_id="é")
    assert session_headers(escaped)["x-session-affinity"] == "%25C3%25A9"
    assert session_headers(plain)["x-session-affinity"] == "%C3%A9"


@pytest.mark.parametrize(
    ("base_url", "effort", "long"),
    [
        ("https://api.openai.com/v1", True, True),
        ("http://localhost:11434/v1", True, True),
        ("https://api.fireworks.ai/inference/v1", True, True),
        ("https://example.com/v1", True, True),
        ("https://api.x.ai/v1", False, True),
        ("https://api.z.ai/api/paas/v4", False, True),
        ("https://open.bigmodel.cn/api/paas/v4", False, True),
        ("https://api.moonshot.ai/v1", False, True),
        ("https://api.together.xyz/v1", False, False),
        ("https://gateway.ai.cloudflare.com/v1/a/b/compat", False, False),
        ("https://api.cloudflare.com/client/v4/accounts/a/ai/v1", True, False),
        ("https://integrate.api.nvidia.com/v1", False, False),
        ("https://api.ant-ling.com/v1", False, False),
    ],
)
def test_reasoning_effort_and_long_retention_are_detected_as_pi_ai_does(
    base_url: str, effort: bool, long: bool
) -> None:
    compat = openai_chat.resolve_compat(openai_chat.model("m", base_url=base_url))
    assert (compat.supports_reasoning_effort, compat.supports_long_cache_retention) == (
        effort,
        long,
    )


async def test_the_session_switches_can_be_set_by_hand(clock: Any) -> None:
    """``openai-nosession`` sends the affinity headers without ``session_id``; a
    ``prompt_cache_key_mode`` of ``enabled`` sends the key to any server, ``disabled``
    to none, OpenAI's included."""
    nosession = openai_chat.Compat(
        send_session_affinity_headers=True,
        session_affinity_format="openai-nosession",
        prompt_cache_key_mode="enabled",
    )
    found = openai_chat.model("m", base_url="https://example.com/v1", compat=nosession)
    request = await sent_to(found)
    assert session_headers(request) == {"x-client-request-id": "s-1", "x-session-affinity": "s-1"}
    assert request.json["prompt_cache_key"] == "s-1"
    disabled = openai_chat.Compat(prompt_cache_key_mode="disabled")
    gpt = openai_chat.model("gpt-4.1", compat=disabled)
    assert "prompt_cache_key" not in (await sent_to(gpt)).json


async def test_a_long_cache_on_a_server_without_one_asks_for_none(clock: Any) -> None:
    """Together keeps no cache longer: ``"long"`` sends neither the key nor a retention."""
    found = openai_chat.model("m", base_url="https://api.together.xyz/v1")
    body = (await sent_to(found, cache_retention="long")).json
    assert ("prompt_cache_key" in body, "prompt_cache_retention" in body) == (False, False)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens_details": {"cached_tokens": 80}},  # OpenAI, OpenRouter
        {"prompt_cache_hit_tokens": 80},  # DeepSeek
        {"cached_tokens": 80},  # Kimi, on its last chunk
    ],
)
async def test_the_cached_tokens_are_read_wherever_the_server_puts_them(
    clock: Any, usage: dict[str, Any]
) -> None:
    """Each server's place for the tokens read from the cache, as pi-ai reads them: they
    are billed at the cache's price, not as input."""
    chunk = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5, **usage},
    }
    async with open_sse_server(ScriptedResponse(body=sse_body([(None, chunk)]))) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.usage == Usage(input=20, output=5, cache_read=80, total_tokens=105)


async def test_a_catalog_anthropic_model_on_openrouter_chat_follows_its_flags(clock: Any) -> None:
    """The catalog's ``cacheControlFormat`` marks the breakpoints; claude-fable-5 cannot
    turn reasoning off (its ``off`` is None), and gets no reasoning field without a
    level, as pi-ai sends it."""
    found = openai_chat.model("anthropic/claude-fable-5:batch", provider="openrouter")
    assert found.compat_flags["cacheControlFormat"] == "anthropic"
    request = await sent_to(found)
    body = request.json
    assert body["messages"] == conversation_messages({"type": "ephemeral"})
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert ("reasoning" in body, session_headers(request)) == (False, {"x-session-id": "s-1"})


def test_the_catalogs_key_variables_come_before_the_known_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = openai_chat.model("anything", base_url="https://openrouter.ai/api/v1")
    client = openai_chat.OpenAIChat()
    assert client.key_variables(model) == ("OPENROUTER_API_KEY",)
    monkeypatch.setattr(
        openai_chat, "KEY_VARIABLES", {"openrouter": ("OPENROUTER_KEY_2", "OPENROUTER_API_KEY")}
    )
    assert client.key_variables(model) == ("OPENROUTER_KEY_2", "OPENROUTER_API_KEY")
    assert client.key_variables(attrs.evolve(model, provider="")) == ()
