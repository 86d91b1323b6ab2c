"""The official SDKs' types as the judge of what the HTTP providers send and read.

Requests: a rich transcript (system prompt, several turns, images, tools, an
assistant turn with text, signed and redacted thinking and several tool
calls, text / error / image tool results, a turn from another model), at
every thinking level, with ``max_tokens`` and ``temperature``, is captured on
loopback and checked strictly (:mod:`tests._sdk`) against the SDK's request
type: openai's ``CompletionCreateParamsStreaming`` and
``ResponseCreateParamsStreaming``, anthropic's ``MessageCreateParamsStreaming``,
google-genai's pydantic models (which forbid extra fields).

Replies: streams built from the SDKs' own event models are served through
each provider, and the final message is compared with what the SDK's own
accumulator makes of the same events (anthropic's ``accumulate_event``,
openai's ``ChatCompletionStreamState``, the ``response.completed`` event's
``Response``, the concatenated parts of google-genai's responses).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, NotRequired, TypedDict

import anthropic.types as anthropic_types
import attrs
import pydantic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types.beta.message_create_params import (
    MessageCreateParamsStreaming as BetaMessageCreateParamsStreaming,
)
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from google.genai import types as genai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

from tests._providers import as_if_at, call, context, options
from tests._sdk import Mismatch, check
from tests._support import ECHO, make_tool
from trio_agent import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent._model import Model
from trio_agent.providers import anthropic, google, openai_chat, openai_responses
from trio_agent.testing import ScriptedResponse, open_sse_server, sse_body

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-not-really").decode()
LEVELS: list[Any] = [None, "minimal", "low", "medium", "high", "xhigh"]


# --- the walker itself ---------------------------------------------------------------------------


class _Part(TypedDict):
    type: Literal["text"]
    text: str
    note: NotRequired[str | None]


class _Body(TypedDict):
    parts: list[_Part]
    count: NotRequired[int]


def test_the_walker_takes_a_good_value() -> None:
    check({"parts": [{"type": "text", "text": "a", "note": None}], "count": 2}, _Body)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"parts": [], "extra": 1}, "$: unknown key(s) ['extra']"),
        ({"count": 1}, "$: missing required key(s) ['parts']"),
        ({"parts": [{"type": "text", "text": "a"}, {"type": "text"}]}, "$.parts[1]: missing"),
        ({"parts": [{"type": "text", "text": 3}]}, "$.parts[0].text: 3 is not str"),
        ({"parts": [{"type": "image", "text": ""}]}, "$.parts[0].type: 'image' is none of"),
        ({"parts": "a"}, "$.parts: 'a' is not a list"),
        ({"parts": [], "count": True}, "$.count: True is not int"),
    ],
)
def test_the_walker_rejects(value: Any, says: str) -> None:
    with pytest.raises(Mismatch) as caught:
        check(value, _Body)
    assert str(caught.value).startswith(says), str(caught.value)


def test_the_walker_names_the_closest_type_of_a_union() -> None:
    message = {"role": "user", "content": "hi", "zz": 1}
    body = {"model": "m", "messages": [message], "stream": True}
    with pytest.raises(Mismatch, match=r"unknown key\(s\) \['zz'\] for ChatCompletionUser"):
        check(body, CompletionCreateParamsStreaming)


# --- requests ------------------------------------------------------------------------------------

WEATHER = make_tool(
    "get_weather",
    ECHO.execute,
    schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _reasoning_item(text: str) -> str:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": "gAAAAB-encrypted",
    }
    return json.dumps(item)


# The signatures each API gives: (thinking, redacted thinking, text, tool call).
SIGNATURES: dict[str, tuple[str, str, str | None, str | None]] = {
    anthropic.API: ("EqQBCkYsig==", "EmwKAhIBredacted", None, None),
    openai_chat.API: ("opaque", "opaque-redacted", None, None),
    openai_responses.API: (_reasoning_item("Let me think."), "not-an-item", "msg_1", None),
    google.API: (_b64("thought-sig"), _b64("redacted"), _b64("text-sig"), _b64("call-sig")),
}
CALL_IDS = {
    anthropic.API: ("toolu_01A", "toolu_01B"),
    openai_chat.API: ("call_a", "call_b"),
    openai_responses.API: ("call_a|fc_a", "call_b|fc_b"),
    google.API: ("get_weather_0", "get_weather_1"),
}


def _native_turn(model: Model) -> AssistantMessage:
    """An assistant turn of ``model`` itself: signed and redacted thinking, text, two calls."""
    thinking, redacted, text, call = SIGNATURES[model.api]
    first, second = CALL_IDS[model.api]
    return AssistantMessage(
        content=(
            ThinkingContent("Let me think.", thinking_signature=thinking),
            ThinkingContent("", thinking_signature=redacted, redacted=True),
            TextContent("I'll look.", text_signature=text),
            ToolCall(first, "get_weather", {"city": "Paris", "days": 2}, thought_signature=call),
            ToolCall(second, "get_weather", {"city": "Lyon"}),
        ),
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="toolUse",
    )


def _foreign_turn(model: Model) -> AssistantMessage:
    """A turn of another model, on another API, with its own signatures and ids."""
    if model.api == anthropic.API:
        api, provider, call_id = openai_responses.API, "openai", "call_z|fc_" + "z" * 70
        signature = _reasoning_item("Other thoughts.")
    else:
        api, provider, call_id, signature = anthropic.API, "anthropic", "toolu_other", "EqSig"
    return AssistantMessage(
        content=(
            ThinkingContent("Other thoughts.", thinking_signature=signature),
            ThinkingContent("", thinking_signature="opaque", redacted=True),
            TextContent("From another model.", text_signature="msg_other"),
            ToolCall(call_id, "get_weather", {"city": "Nice"}),
        ),
        api=api,
        provider=provider,
        model="another-model",
        stop_reason="toolUse",
    )


def result(call_id: str, *content: Any, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="get_weather", content=content, is_error=is_error
    )


def rich_transcript(model: Model) -> list[Message]:
    native = _native_turn(model)
    foreign = _foreign_turn(model)
    first, second = CALL_IDS[model.api]
    image = ImageContent(PNG, "image/png")
    return [
        UserMessage.text("What is the weather?"),
        native,
        result(first, TextContent("Sunny, 21°C")),
        result(second, TextContent("no such city"), is_error=True),
        AssistantMessage(
            content=[TextContent("Paris is sunny.")],
            api=model.api,
            provider=model.provider,
            model=model.id,
        ),
        UserMessage((TextContent("And this picture?"), image)),
        foreign,  # the transcript switches models here
        result(foreign.tool_calls[0].id, TextContent("map:"), image),
        AssistantMessage(
            content=[TextContent("cut")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="aborted",
        ),
        UserMessage.text("Thanks, one more: Rome?"),
    ]


def _model(api: str, url: str, model_id: str = "", *, plain: bool = False) -> Model:
    """The model of ``api`` served at ``url`` (``plain``: no reasoning, text only)."""
    kwargs: dict[str, Any] = {"reasoning": not plain, "input": ("text",) if plain else None}
    if api == openai_chat.API:
        return openai_chat.model("gpt-5", base_url=url + "/v1", provider="openai", **kwargs)
    if api == openai_responses.API:
        return openai_responses.model("gpt-5", base_url=url + "/v1", **kwargs)
    if api == anthropic.API:
        return anthropic.model("claude-sonnet-4-5", base_url=url, **kwargs)
    model_id = model_id or "gemini-2.5-pro"
    return google.model(model_id, base_url=url + "/v1beta", **kwargs)


_STREAM = {
    openai_chat.API: openai_chat.stream,
    openai_responses.API: openai_responses.stream,
    anthropic.API: anthropic.stream,
    google.API: google.stream,
}


_CATALOG_MODELS: dict[str, Callable[[str], Model]] = {
    openai_chat.API: openai_chat.model,
    openai_responses.API: openai_responses.model,
    anthropic.API: anthropic.model,
    google.API: google.model,
}


def _google_request(body: dict[str, Any]) -> None:
    """The Gemini REST body, part by part, through google-genai's models (extra='forbid';
    JSON mode, so bytes fields such as ``thoughtSignature`` must be base64)."""
    allowed = {"contents", "systemInstruction", "tools", "generationConfig", "toolConfig"}
    assert set(body) <= allowed, set(body) - allowed
    adapter = pydantic.TypeAdapter(list[genai.Content])
    adapter.validate_json(json.dumps(body["contents"]))
    if "systemInstruction" in body:
        genai.Content.model_validate_json(json.dumps(body["systemInstruction"]))
    pydantic.TypeAdapter(list[genai.Tool]).validate_json(json.dumps(body.get("tools", [])))
    genai.GenerationConfig.model_validate_json(json.dumps(body.get("generationConfig", {})))


def check_request(api: str, body: dict[str, Any]) -> None:
    if api == openai_chat.API:
        check(body, CompletionCreateParamsStreaming)
    elif api == openai_responses.API:
        check(body, ResponseCreateParamsStreaming)
    elif api == anthropic.API:
        check(body, MessageCreateParamsStreaming)
    else:
        _google_request(body)


async def request_for(
    api: str, model_id: str = "", *, plain: bool = False, catalog: bool = False, **opts: Any
) -> dict[str, Any]:
    if api == anthropic.API:
        # The provider speaks anthropic-version 2023-06-01 (as pi-ai, whose SDK is 0.x),
        # on which a request takes ``temperature``; the 2.x SDK's types are those of
        # 2026-10-21, which has no sampling parameters. Left out of the check.
        opts.pop("temperature", None)
    async with open_sse_server(ScriptedResponse(body=b"")) as server:
        if catalog:  # the catalog's model, with its thinking levels, on loopback
            found = _CATALOG_MODELS[api](model_id)
            model = attrs.evolve(found, base_url=server.url + "/v1")
        else:
            model = _model(api, server.url, model_id, plain=plain)
        ctx = context(*rich_transcript(model), system_prompt="Be brief.", tools=[WEATHER, ECHO])
        await call(_STREAM[api], model, ctx, options(**opts))
    body: dict[str, Any] = server.requests[0].json
    return body


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("api", list(_STREAM))
async def test_the_request_is_of_the_sdks_type(clock: Any, api: str, level: Any) -> None:
    body = await request_for(
        api, reasoning=level, max_tokens=40_000, temperature=0.3, session_id="session-1"
    )
    check_request(api, body)


@pytest.mark.parametrize("api", list(_STREAM))
async def test_the_request_with_few_options_is_of_the_sdks_type(clock: Any, api: str) -> None:
    body = await request_for(api, reasoning="high", max_tokens=1500)
    check_request(api, body)


@pytest.mark.parametrize("api", list(_STREAM))
async def test_the_request_for_a_plain_model_is_of_the_sdks_type(clock: Any, api: str) -> None:
    """No reasoning, and text only: the images of the transcript are left out."""
    body = await request_for(api, plain=True, reasoning="high", temperature=0.0)
    check_request(api, body)
    assert "base64" not in json.dumps(body)


@pytest.mark.parametrize("level", LEVELS[1:])
@pytest.mark.parametrize(
    ("api", "model_id"),
    [
        (openai_chat.API, "gpt-5"),
        (openai_responses.API, "gpt-5.2"),
        (openai_responses.API, "gpt-5-pro"),
        (anthropic.API, "claude-opus-4-7"),
        (google.API, "gemini-3.1-pro-preview"),
        (google.API, "gemma-4-26b-a4b-it"),
    ],
)
async def test_the_request_for_a_catalog_model_is_of_the_sdks_type(
    clock: Any, api: str, model_id: str, level: str
) -> None:
    """The catalog's thinking levels, mapped as the model has them, are the SDK's values."""
    body = await request_for(api, model_id, catalog=True, reasoning=level, max_tokens=64_000)
    check_request(api, body)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(
    ("provider", "model_id"),
    [("anthropic", "claude-fable-5-1"), ("openrouter", "anthropic/claude-opus-5.5")],
)
async def test_the_request_with_the_effort_in_the_messages_is_of_the_sdks_beta_type(
    clock: Any, provider: str, model_id: str, level: Any
) -> None:
    """A model whose effort is set mid-conversation takes ``system`` messages with an
    ``output_config`` and a thinking ``block_binding``: the SDK's beta messages type."""
    async with open_sse_server(ScriptedResponse(body=b"")) as server:
        found = anthropic.model(model_id, provider=provider)
        model = attrs.evolve(found, base_url=server.url)
        transcript = [
            attrs.evolve(m, provider_thinking_level="medium")
            if isinstance(m, AssistantMessage) and m.api == anthropic.API
            else m
            for m in rich_transcript(model)
        ]
        ctx = context(*transcript, system_prompt="Be brief.", tools=[WEATHER, ECHO])
        await call(anthropic.stream, model, ctx, options(reasoning=level, max_tokens=4_000))
    body: dict[str, Any] = server.requests[0].json
    check(body, BetaMessageCreateParamsStreaming)
    efforts = [m["output_config"]["effort"] for m in body["messages"] if m["role"] == "system"]
    assert efforts == ["medium", "medium", efforts[-1]]  # each earlier turn, then the asked


@pytest.mark.parametrize("retention", ["short", "long", "none"])
@pytest.mark.parametrize(
    ("provider", "model_id"),
    [
        ("anthropic", "claude-sonnet-4-5"),
        ("anthropic", "claude-fable-5"),
        ("openrouter", "anthropic/claude-sonnet-4.5"),
        ("fireworks", "accounts/fireworks/models/deepseek-v4p1-flash"),
    ],
)
async def test_the_anthropic_request_with_its_prompt_cache_is_of_the_sdks_type(
    clock: Any, provider: str, model_id: str, retention: str
) -> None:
    """The cache breakpoints (``cache_control``, with a ``ttl`` for the long retention)
    on the system prompt, the last tool and the last user block are the SDK's fields."""
    async with open_sse_server(ScriptedResponse(body=b"")) as server:
        model = attrs.evolve(anthropic.model(model_id, provider=provider), base_url=server.url)
        ctx = context(*rich_transcript(model), system_prompt="Be brief.", tools=[WEATHER, ECHO])
        opts = options(session_id="session-1", cache_retention=retention, max_tokens=4_000)
        await call(anthropic.stream, model, ctx, opts)
    body: dict[str, Any] = server.requests[0].json
    check_request(anthropic.API, body)
    marks = json.dumps(body).count('"cache_control"')
    assert marks == {"none": 0}.get(retention, 2 if provider == "fireworks" else 3)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(
    ("provider", "model_id"),
    [("baseten", "openai/gpt-oss-120b"), ("together", "openai/gpt-oss-120b")],
)
async def test_the_request_with_another_providers_catalog_flags_is_of_the_sdks_type(
    clock: Any, provider: str, model_id: str, level: Any
) -> None:
    """The catalog's flags (``max_tokens``, no ``store``, a ``system`` role, the model's
    own ``off``) make a request of the SDK's type, checked strictly: nothing outside it."""
    async with open_sse_server(ScriptedResponse(body=b"")) as server:
        found = openai_chat.model(model_id, provider=provider)
        model = attrs.evolve(found, base_url=server.url + "/v1")
        ctx = context(*rich_transcript(model), system_prompt="Be brief.", tools=[WEATHER, ECHO])
        await call(openai_chat.stream, model, ctx, options(reasoning=level, max_tokens=4_000))
    body: dict[str, Any] = server.requests[0].json
    check_request(openai_chat.API, body)
    assert (body["max_tokens"], "max_completion_tokens" in body, "store" in body) == (
        4_000,
        False,
        False,
    )
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    if level is None and provider == "baseten":  # its "off" is "none"; together's is None
        assert body["reasoning_effort"] == "none"


@pytest.mark.parametrize(
    "model_id",
    [
        "gemini-2.5-flash",
        "gemini-2.5-pro",
        "gemini-3-flash-preview",
        "gemini-3.1-pro-preview",
        "gemma-4-26b-a4b-it",
    ],
)
async def test_the_request_to_gemini_with_thinking_off_is_of_the_sdks_type(
    clock: Any, model_id: str
) -> None:
    """No reasoning level: the catalog model's thinkingConfig that turns thinking off
    (or to its least) is the SDK's ``ThinkingConfig``, its level one of the SDK's."""
    body = await request_for(google.API, model_id, catalog=True, session_id="s" * 100)
    check_request(google.API, body)
    thinking = genai.ThinkingConfig.model_validate(body["generationConfig"]["thinkingConfig"])
    assert thinking.include_thoughts is None
    assert (thinking.thinking_budget is None) != (thinking.thinking_level is None)


async def test_the_request_to_gemini_3_is_of_the_sdks_type(clock: Any) -> None:
    """Gemini 3 gets call ids, and the signature that skips the check on another
    model's calls (which must still be base64, as ``Part.thought_signature`` is bytes)."""
    body = await request_for(google.API, "gemini-3-pro-preview", reasoning="xhigh")
    check_request(google.API, body)
    calls = [part for turn in body["contents"] for part in turn["parts"] if "functionCall" in part]
    assert all(part["functionCall"]["id"] for part in calls)


@pytest.mark.parametrize("level", [None, "high"])
@pytest.mark.parametrize("retention", ["short", "long", "none"])
@pytest.mark.parametrize(
    ("api", "provider", "model_id"),
    [
        (openai_chat.API, "openai", "gpt-4.1"),
        (openai_chat.API, "fireworks", "accounts/fireworks/models/glm-5p3"),
        (openai_responses.API, "openai", "gpt-4.1"),
        (openai_responses.API, "openai", "gpt-5"),
        (openai_responses.API, "openai", "gpt-5.4"),
        (openai_responses.API, "openai", "gpt-5.6-luna"),
    ],
)
async def test_the_request_with_the_prompt_cache_fields_is_of_the_sdks_type(
    clock: Any, api: str, provider: str, model_id: str, retention: Any, level: Any
) -> None:
    """The prompt-cache key, its retention (``"24h"``, or gpt-5.6's
    ``prompt_cache_options``) and reasoning turned off (``"none"``), as a catalog model
    at its own server gets them, are the SDK's fields and values."""
    async with open_sse_server(ScriptedResponse(body=b"")) as server, as_if_at(server.url) as http:
        found: Model
        stream: Any
        if api == openai_chat.API:
            found = openai_chat.model(model_id, provider=provider)
            stream = openai_chat.OpenAIChat(http).stream
        else:
            found = openai_responses.model(model_id, provider=provider)
            stream = openai_responses.OpenAIResponses(http).stream
        ctx = context(*rich_transcript(found), system_prompt="Be brief.", tools=[WEATHER, ECHO])
        opts = options(reasoning=level, session_id="s" * 100, cache_retention=retention)
        await call(stream, found, ctx, opts)
    body: dict[str, Any] = server.requests[0].json
    check_request(api, body)
    openai_server = provider == "openai"
    assert body.get("prompt_cache_key") == (
        "s" * 64 if retention != "none" and openai_server else None
    )
    day = retention == "long" and openai_server and model_id != "gpt-5.6-luna"
    assert ("prompt_cache_retention" in body) == day


# --- replies -------------------------------------------------------------------------------------
#
# Each reply is a list of the SDK's own event models, served as SSE; the provider's final
# message is compared with what the SDK makes of the same events, block by block.


WRITTEN = {"as set": False, "every field": True}


@pytest.fixture(params=list(WRITTEN), ids=list(WRITTEN))
def every_field(request: pytest.FixtureRequest) -> bool:
    """How the server writes the SDK's models: the fields that were set, or every field
    (``null`` for those not set, as servers built on these models do)."""
    value: bool = WRITTEN[request.param]
    return value


def _json(event: pydantic.BaseModel, every_field: bool = False) -> Any:
    return event.model_dump(mode="json", by_alias=True, exclude_unset=not every_field)


async def served(api: str, body: bytes, model_id: str = "") -> AssistantMessage:
    """The provider's final message for ``body``; then that message is sent back (with
    results for its calls), and that request too must be of the SDK's type."""
    async with open_sse_server(ScriptedResponse(body=body), ScriptedResponse(body=b"")) as server:
        model = _model(api, server.url, model_id)
        message = (await call(_STREAM[api], model)).message
        replay = [UserMessage.text("q"), message]
        replay += [result(c.id, TextContent("ok")) for c in message.tool_calls]
        await call(_STREAM[api], model, context(*replay, UserMessage.text("next")))
    assert message.error_message is None, message.error_message
    check_request(api, server.requests[1].json)
    return message


def _usage(input: int, output: int, cache_read: int = 0, cache_write: int = 0) -> Usage:
    total = input + output + cache_read + cache_write
    return Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=total,
    )


# anthropic -------------------------------------------------------------------------------------

_ANTHROPIC_STOPS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "toolUse"}


def anthropic_reply(stop: str, calls: int) -> list[Any]:
    t = anthropic_types
    start = t.Message(
        id="msg_01",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage=t.Usage(
            input_tokens=12,
            output_tokens=1,
            cache_read_input_tokens=100,
            cache_creation_input_tokens=7,
        ),
    )
    events: list[Any] = [t.RawMessageStartEvent(type="message_start", message=start)]

    def block(index: int, first: Any, *deltas: Any) -> None:
        events.append(
            t.RawContentBlockStartEvent(
                type="content_block_start", index=index, content_block=first
            )
        )
        events.extend(
            t.RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=delta)
            for delta in deltas
        )
        events.append(t.RawContentBlockStopEvent(type="content_block_stop", index=index))

    block(
        0,
        t.ThinkingBlock(type="thinking", thinking="", signature=""),
        t.ThinkingDelta(type="thinking_delta", thinking="Let me "),
        t.ThinkingDelta(type="thinking_delta", thinking="think."),
        t.SignatureDelta(type="signature_delta", signature="EqQBCkYIBxgCKkA=="),
    )
    block(1, t.RedactedThinkingBlock(type="redacted_thinking", data="EmwKAhIBGAIi=="))
    block(
        2,
        t.TextBlock(type="text", text=""),
        t.TextDelta(type="text_delta", text="Hello, "),
        t.TextDelta(type="text_delta", text="wörld ✓"),
    )
    for number in range(calls):
        block(
            3 + number,
            t.ToolUseBlock(type="tool_use", id=f"toolu_0{number}", name="get_weather", input={}),
            t.InputJSONDelta(type="input_json_delta", partial_json=""),
            t.InputJSONDelta(type="input_json_delta", partial_json='{"city": "Pa'),
            t.InputJSONDelta(type="input_json_delta", partial_json=f'ris", "days": {number}}}'),
        )
    events.append(
        t.RawMessageDeltaEvent(
            type="message_delta",
            delta=t.raw_message_delta_event.Delta(stop_reason=stop, stop_sequence=None),  # type: ignore[arg-type]  # a Literal, as str
            usage=t.MessageDeltaUsage(output_tokens=42),
        )
    )
    events.append(t.RawMessageStopEvent(type="message_stop"))
    return events


@pytest.mark.parametrize(("stop", "calls"), [("tool_use", 2), ("end_turn", 0), ("max_tokens", 0)])
async def test_an_anthropic_reply_as_the_sdk_accumulates_it(
    clock: Any, every_field: bool, stop: str, calls: int
) -> None:
    events = anthropic_reply(stop, calls)
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    expected: list[Any] = []
    for block in snapshot.content:
        if block.type == "thinking":
            expected.append(ThinkingContent(block.thinking, thinking_signature=block.signature))
        elif block.type == "redacted_thinking":
            redacted = ThinkingContent(
                "[Reasoning redacted]", thinking_signature=block.data, redacted=True
            )
            expected.append(redacted)
        elif block.type == "text":
            expected.append(TextContent(block.text))
        else:
            expected.append(ToolCall(block.id, block.name, block.input))
    usage = snapshot.usage
    body = sse_body((event.type, _json(event, every_field)) for event in events)
    message = await served(anthropic.API, body)
    assert message.content == tuple(expected)
    assert message.usage == _usage(
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_input_tokens or 0,
        usage.cache_creation_input_tokens or 0,
    )
    assert message.stop_reason == _ANTHROPIC_STOPS[snapshot.stop_reason]
    assert message.response_id == snapshot.id


# openai chat -----------------------------------------------------------------------------------

_CHAT_STOPS = {"stop": "stop", "length": "length", "tool_calls": "toolUse"}


def chat_reply(
    finish: str, calls: int, refusal: bool = False, packed: bool = False
) -> list[ChatCompletionChunk]:
    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> ChatCompletionChunk:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return ChatCompletionChunk.model_validate(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gpt-5",
                "choices": [choice],
            }
        )

    chunks = [chunk({"role": "assistant", "content": ""})]
    if refusal:
        chunks += [chunk({"refusal": "I can't "}), chunk({"refusal": "help."})]
    else:
        chunks += [chunk({"content": "Hello, "}), chunk({"content": "wörld ✓"})]
    if packed:  # every call whole, in one chunk (as some servers send them)
        whole = [
            {
                "index": number,
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": f'{{"days": {number}}}'},
            }
            for number in range(calls)
        ]
        chunks.append(chunk({"tool_calls": whole}))
        calls = 0
    for number in range(calls):
        first = {"id": f"call_{number}", "type": "function", "function": {"name": "get_weather"}}
        pieces = ['{"city": "Pa', f'ris", "days": {number}}}']
        chunks.append(chunk({"tool_calls": [{"index": number, **first}]}))
        chunks += [
            chunk({"tool_calls": [{"index": number, "function": {"arguments": piece}}]})
            for piece in pieces
        ]
    chunks.append(chunk({}, finish))
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 10},
    }
    last = chunks[-1].model_dump(mode="json", exclude_unset=True) | {"choices": [], "usage": usage}
    chunks.append(ChatCompletionChunk.model_validate(last))
    return chunks


@pytest.mark.parametrize(
    ("finish", "calls", "refusal", "packed"),
    [
        ("tool_calls", 2, False, False),
        ("tool_calls", 3, False, True),
        ("stop", 0, False, False),
        ("length", 0, False, False),
        ("stop", 0, True, False),
    ],
)
async def test_an_openai_chat_reply_as_the_sdk_accumulates_it(
    clock: Any, every_field: bool, finish: str, calls: int, refusal: bool, packed: bool
) -> None:
    chunks = chat_reply(finish, calls, refusal, packed)
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    # (``get_final_completion`` refuses a reply cut at ``length``: the snapshot is the same)
    final = state.current_completion_snapshot
    choice = final.choices[0]
    expected: list[Any] = [
        TextContent((choice.message.content or "") + (choice.message.refusal or ""))
    ]
    for tool_call in choice.message.tool_calls or []:
        function = tool_call.function
        expected.append(ToolCall(tool_call.id, function.name, json.loads(function.arguments)))
    body = sse_body(((None, _json(chunk, every_field)) for chunk in chunks), done=True)
    message = await served(openai_chat.API, body)
    assert message.content == tuple(expected)
    usage = final.usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    cached = usage.prompt_tokens_details.cached_tokens or 0
    assert message.usage == _usage(usage.prompt_tokens - cached, usage.completion_tokens, cached)
    assert message.usage.total_tokens == usage.total_tokens
    assert message.stop_reason == _CHAT_STOPS[choice.finish_reason or ""]
    assert message.response_id == final.id


# openai responses ------------------------------------------------------------------------------

_EVENTS = pydantic.TypeAdapter(ResponseStreamEvent)


def _content_part(kind: str, text: str) -> dict[str, Any]:
    if kind == "refusal":
        return {"type": "refusal", "refusal": text}
    return {"type": "output_text", "text": text, "annotations": []}


def responses_reply(
    status: str,
    calls: int,
    contents: Sequence[tuple[str, str]] = (("output_text", "Hello, wörld ✓"),),
) -> list[Any]:
    """The events of a reply: reasoning (two summary parts), a message with ``contents``
    (output text and refusal parts), ``calls`` calls."""
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "First part."},
            {"type": "summary_text", "text": "Second part."},
        ],
        "encrypted_content": "gAAAAB-encrypted==",
    }
    text = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [_content_part(kind, text) for kind, text in contents],
    }
    function_calls = [
        {
            "type": "function_call",
            "id": f"fc_{number}",
            "call_id": f"call_{number}",
            "name": "get_weather",
            "arguments": f'{{"city": "Paris", "days": {number}}}',
            "status": "completed",
        }
        for number in range(calls)
    ]
    response: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-5",
        "status": "in_progress",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    raw: list[dict[str, Any]] = [{"type": "response.created", "response": response}]

    def item(index: int, whole: dict[str, Any], *between: dict[str, Any]) -> None:
        added = {key: value for key, value in whole.items() if key not in ("summary", "content")}
        if whole["type"] == "function_call":
            added["arguments"] = ""
        elif whole["type"] == "reasoning":
            added["summary"] = []
            del added["encrypted_content"]
        else:
            added["content"] = []
        raw.append({"type": "response.output_item.added", "output_index": index, "item": added})
        raw.extend({"output_index": index, "item_id": whole["id"], **event} for event in between)
        raw.append({"type": "response.output_item.done", "output_index": index, "item": whole})

    def summary(number: int, text: str) -> list[dict[str, Any]]:
        part = {"type": "summary_text", "text": text}
        where = {"summary_index": number}
        return [
            {"type": "response.reasoning_summary_part.added", **where, "part": part | {"text": ""}},
            {"type": "response.reasoning_summary_text.delta", **where, "delta": text[:5]},
            {"type": "response.reasoning_summary_text.delta", **where, "delta": text[5:]},
            {"type": "response.reasoning_summary_text.done", **where, "text": text},
            {"type": "response.reasoning_summary_part.done", **where, "part": part},
        ]

    item(0, reasoning, *summary(0, "First part."), *summary(1, "Second part."))
    message_events: list[dict[str, Any]] = []
    for number, (kind, whole) in enumerate(contents):
        where = {"content_index": number}
        if kind == "refusal":
            deltas = [{"type": "response.refusal.delta", **where, "delta": whole[:3]}]
            deltas += [{"type": "response.refusal.delta", **where, "delta": whole[3:]}]
            done = {"type": "response.refusal.done", **where, "refusal": whole}
        else:
            deltas = [
                {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
                for piece in (whole[:7], whole[7:])
            ]
            done = {"type": "response.output_text.done", **where, "text": whole, "logprobs": []}
        message_events += [
            {"type": "response.content_part.added", **where, "part": _content_part(kind, "")},
            *deltas,
            done,
            {"type": "response.content_part.done", **where, "part": _content_part(kind, whole)},
        ]
    item(1, text, *message_events)
    for number, function_call in enumerate(function_calls):
        arguments = function_call["arguments"]
        item(
            2 + number,
            function_call,
            {"type": "response.function_call_arguments.delta", "delta": arguments[:7]},
            {"type": "response.function_call_arguments.delta", "delta": arguments[7:]},
            {"type": "response.function_call_arguments.done", "arguments": arguments},
        )
    final = response | {
        "status": status,
        "output": [reasoning, text, *function_calls],
        "usage": {
            "input_tokens": 120,
            "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 5},
            "output_tokens": 30,
            "output_tokens_details": {"reasoning_tokens": 10},
            "total_tokens": 150,
        },
    }
    if status == "incomplete":
        final["incomplete_details"] = {"reason": "max_output_tokens"}
    raw.append({"type": f"response.{status}", "response": final})
    return [
        _EVENTS.validate_python(event | {"sequence_number": number})
        for number, event in enumerate(raw)
    ]


TWO_PARTS = (("output_text", "Hello, "), ("output_text", "wörld ✓"))
REFUSAL = (("refusal", "I can't help with that."),)


@pytest.mark.parametrize(
    ("status", "calls", "contents"),
    [
        ("completed", 2, TWO_PARTS[1:]),
        ("completed", 0, TWO_PARTS),
        ("completed", 0, REFUSAL),
        ("incomplete", 0, TWO_PARTS[:1]),
    ],
)
async def test_an_openai_responses_reply_as_the_completed_response_has_it(
    clock: Any, every_field: bool, status: str, calls: int, contents: Any
) -> None:
    events = responses_reply(status, calls, contents)
    final: Response = events[-1].response
    expected: list[Any] = []
    for output in final.output:
        if output.type == "reasoning":
            summary = "\n\n".join(part.text for part in output.summary)
            expected.append(ThinkingContent(summary, thinking_signature="see below"))
        elif output.type == "message":
            # a refusal is the answer's text too (as the provider has it)
            text = "".join(
                part.text if part.type == "output_text" else part.refusal for part in output.content
            )
            expected.append(TextContent(text, text_signature=output.id))
        elif output.type == "function_call":
            call_id = f"{output.call_id}|{output.id}"
            expected.append(ToolCall(call_id, output.name, json.loads(output.arguments)))
    body = sse_body((event.type, _json(event, every_field)) for event in events)
    message = await served(openai_responses.API, body)
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking_signature is not None
    # the signature is the reasoning item, whole: what goes back to the API
    assert json.loads(thinking.thinking_signature) == _json(final.output[0], every_field)
    signed = (attrs.evolve(thinking, thinking_signature="see below"), *message.content[1:])
    assert signed == tuple(expected)
    usage = final.usage
    assert usage is not None
    cached = usage.input_tokens_details.cached_tokens
    written = usage.input_tokens_details.cache_write_tokens
    fresh = usage.input_tokens - cached - written
    assert message.usage == _usage(fresh, usage.output_tokens, cached, written)
    assert message.usage.total_tokens == usage.total_tokens
    stop = "length" if final.status == "incomplete" else "toolUse" if calls else "stop"
    assert message.stop_reason == stop
    assert message.response_id == final.id


# google ----------------------------------------------------------------------------------------


def google_reply(
    finish: str, calls: int, ids: bool, signed_text: bool = False
) -> list[genai.GenerateContentResponse]:
    def response(*parts: genai.Part, finish_reason: str | None = None) -> Any:
        usage = genai.GenerateContentResponseUsageMetadata(
            prompt_token_count=120,
            cached_content_token_count=100,
            candidates_token_count=20 if finish_reason else 5,
            thoughts_token_count=10,
            total_token_count=150 if finish_reason else 135,
        )
        candidate = genai.Candidate(
            index=0,
            content=genai.Content(role="model", parts=list(parts)),
            finish_reason=finish_reason,  # type: ignore[arg-type]  # an enum member's value
        )
        return genai.GenerateContentResponse(
            response_id="resp-g1", candidates=[candidate], usage_metadata=usage
        )

    think = genai.Part(text="Let me ", thought=True)
    signed = genai.Part(text="think.", thought=True, thought_signature=b"thought-sig")
    replies = [response(think), response(signed)]
    replies += [response(genai.Part(text="Hello, ")), response(genai.Part(text="wörld ✓"))]
    for number in range(calls):
        function_call = genai.FunctionCall(
            id=f"fc-{number}" if ids else None, name="get_weather", args={"days": number}
        )
        signature = b"call-sig" if number == 0 else None
        replies.append(
            response(genai.Part(function_call=function_call, thought_signature=signature))
        )
    if signed_text:  # Gemini signs the last, empty part; several parts in one response
        last = [genai.Part(text="!"), genai.Part(text="", thought_signature=b"text-sig")]
        replies.append(response(*last, finish_reason=finish))
    else:
        replies.append(response(finish_reason=finish))
    return replies


def _b64_of(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("finish", "calls", "ids", "signed_text"),
    [
        ("STOP", 2, False, False),
        ("STOP", 2, True, False),
        ("STOP", 0, False, True),
        ("MAX_TOKENS", 0, False, False),
    ],
)
async def test_a_gemini_reply_as_its_parts_concatenate(
    clock: Any, every_field: bool, finish: str, calls: int, ids: bool, signed_text: bool
) -> None:
    replies = google_reply(finish, calls, ids, signed_text)
    # google-genai has no accumulator: the reply is its parts, concatenated by kind
    parts = [part for reply in replies for part in reply.candidates[0].content.parts]  # type: ignore[index, union-attr]  # all set, here
    thoughts = [part for part in parts if part.thought]
    texts = [part for part in parts if part.text is not None and not part.thought]
    expected: list[Any] = [
        ThinkingContent(
            "".join(part.text or "" for part in thoughts),
            thinking_signature=_b64_of(thoughts[-1].thought_signature),
        ),
        TextContent(
            "".join(part.text or "" for part in texts),
            text_signature=_b64_of(next((p.thought_signature for p in texts[::-1]), None)),
        ),
    ]
    for number, part in enumerate(p for p in parts if p.function_call is not None):
        function_call = part.function_call
        assert function_call is not None
        call_id = function_call.id or f"{replies[0].response_id}_{number}"
        expected.append(
            ToolCall(
                call_id,
                function_call.name or "",
                function_call.args or {},
                thought_signature=_b64_of(part.thought_signature),
            )
        )
    body = sse_body(
        (
            (None, reply.model_dump(mode="json", by_alias=True, exclude_none=not every_field))
            for reply in replies
        ),
        crlf=True,
    )
    model_id = "gemini-3-pro-preview" if ids else ""
    message = await served(google.API, body, model_id)
    assert message.content == tuple(expected)
    usage = replies[-1].usage_metadata
    assert usage is not None
    cached = usage.cached_content_token_count or 0
    output = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
    assert message.usage == _usage((usage.prompt_token_count or 0) - cached, output, cached)
    stop = {"STOP": "toolUse" if calls else "stop", "MAX_TOKENS": "length"}[finish]
    assert message.stop_reason == stop
    assert message.response_id == replies[0].response_id


# replies replayed to every API -----------------------------------------------------------------


def _reply_body(api: str) -> bytes:
    """A reply of ``api`` with thinking, text and two tool calls, as its SDK writes it."""
    if api == anthropic.API:
        return sse_body((e.type, _json(e)) for e in anthropic_reply("tool_use", 2))
    if api == openai_chat.API:
        return sse_body(((None, _json(c)) for c in chat_reply("tool_calls", 2)), done=True)
    if api == openai_responses.API:
        return sse_body((e.type, _json(e)) for e in responses_reply("completed", 2))
    replies = google_reply("STOP", 2, ids=False)
    return sse_body(((None, _json(reply)) for reply in replies), crlf=True)


@pytest.mark.parametrize("target", list(_STREAM))
@pytest.mark.parametrize("source", list(_STREAM))
async def test_a_streamed_reply_goes_to_every_api_as_its_sdk_types_it(
    clock: Any, source: str, target: str
) -> None:
    """The transcript switches models: a real reply of ``source`` (its ids, signatures,
    reasoning items), its tool results, then a request to ``target``."""
    async with open_sse_server(ScriptedResponse(body=_reply_body(source))) as server:
        reply = (await call(_STREAM[source], _model(source, server.url))).message
    assert reply.stop_reason == "toolUse", reply.error_message
    transcript: list[Any] = [UserMessage.text("q"), reply]
    transcript += [result(c.id, TextContent("ok")) for c in reply.tool_calls]
    transcript.append(UserMessage.text("next"))
    async with open_sse_server(ScriptedResponse(body=b"")) as server:
        await call(_STREAM[target], _model(target, server.url), context(*transcript))
    check_request(target, server.requests[0].json)
