"""The Google Gemini provider, against a loopback server.

design.md#google-gemini, design.md#server-sent-events and design.md#google-gemini.
"""

from __future__ import annotations

from typing import Any

import attrs
import pydantic
import pytest
from google.genai import types as genai_types

from tests._providers import (
    PIECES,
    as_if_at,
    call,
    check_stream,
    context,
    fixture,
    options,
)
from tests._support import ECHO
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ErrorKind,
    ImageContent,
    Message,
    ModelCost,
    StreamError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import google
from trio_agent.testing import EventRecorder, ScriptedResponse, open_sse_server, sse_body

MODEL_ID = "gemini-2.5-flash"
_PRO_LEAST = 128  # the least thinking budget Gemini 2.5 Pro takes
NO_USAGE = Usage()
PATH = f"/v1beta/models/{MODEL_ID}:streamGenerateContent?alt=sse"


def sse(name: str, pieces: Any = None) -> ScriptedResponse:
    return ScriptedResponse(body=fixture("google", name), pieces=pieces)


def model(url: str, id: str = MODEL_ID, **kwargs: Any) -> Any:
    return google.model(id, base_url=url + "/v1beta", **kwargs)


def reply(
    *content: Any,
    stop: str = "stop",
    usage: Usage = NO_USAGE,
    response_id: str | None = None,
    error: str | None = None,
    kind: ErrorKind | None = None,
) -> AssistantMessage:
    """An expected final message (timestamps are compared as 0)."""
    return AssistantMessage(
        content=content,
        api="google-generative-ai",
        provider="google",
        model=MODEL_ID,
        usage=usage,
        stop_reason=stop,  # type: ignore[arg-type]  # a StopReason, given as str
        error_message=error,
        error_kind=kind,
        response_id=response_id,
        timestamp=0,
    )


WEATHER_ARGS = {
    "location": {"city": "Zürich", "country": "CH", "coords": {"lat": 47.37, "lon": 8.54}},
    "days": 3,
    "units": ["°C", "km/h"],
    "note": 'naïve "quote" ✓',
}

# Each fixture, and the final message it must give however its bytes are cut.
REPLIES = {
    "text.sse": reply(
        TextContent("Hello, wörld \u2028 ✓!"),
        usage=Usage(input=8, output=6, total_tokens=14),
        response_id="mKdGaPXxK4-Oz7IPq6OJmAw",
    ),
    "thinking.sse": reply(
        ThinkingContent("**Weighing the question**\n\nThe user asks for a number."),
        TextContent("The answer is 42.", text_signature="CiQB0e2Kb7mHx9rG2l4="),
        usage=Usage(input=12, output=68, total_tokens=80),
        response_id="nKdGaOq7Bf6Vz7IP0ruXyAc",
    ),
    "function_call.sse": reply(
        TextContent("Let me check the forecast."),
        ToolCall(
            "oKdGaMy2Jc3Gz7IPm5yT4Q4_0",
            "get_weather",
            WEATHER_ARGS,
            thought_signature="CiIBVKhc7pXa9Q0mZmFrZQ==",
        ),
        stop="toolUse",
        usage=Usage(input=90, output=62, total_tokens=152),
        response_id="oKdGaMy2Jc3Gz7IPm5yT4Q4",
    ),
    "two_calls.sse": reply(  # no responseId: the ids fall back to "gemini_<n>"
        ToolCall("gemini_0", "get_time", {"tz": "Europe/Paris"}),
        ToolCall("gemini_1", "get_time", {"tz": "Asia/Tokyo"}),
        stop="toolUse",
        usage=Usage(input=30, output=16, total_tokens=46),
    ),
    "max_tokens.sse": reply(
        TextContent("Once upon a time, there was"),
        stop="length",
        usage=Usage(input=5, output=8, total_tokens=13),
        response_id="pKdGaKHkM7nQz7IPxu2f0A0",
    ),
    "safety.sse": reply(
        TextContent("Step one is"),
        stop="error",
        error="google finished with finishReason 'SAFETY'",
        kind="refused",
        usage=Usage(input=14, output=3, total_tokens=17),
        response_id="qKdGaNbVEoGRz7IP4qe2kQ8",
    ),
    "malformed_function_call.sse": reply(
        stop="error",
        error="google finished with finishReason 'MALFORMED_FUNCTION_CALL': "
        "Malformed function call: print(default_api.get_weather(city=))",
        kind="refused",
        usage=Usage(input=40, total_tokens=40),
        response_id="uKdGaL2oNJeIz7IPj8WpuQ0",
    ),
    "prompt_blocked.sse": reply(
        stop="error",
        error="google blocked the prompt: blockReason 'PROHIBITED_CONTENT'",
        kind="refused",
        usage=Usage(input=17, total_tokens=17),
        response_id="rKdGaLOxBsOaz7IPq9eD2Qk",
    ),
    "error_mid_stream.sse": reply(
        TextContent("Partial answer"),
        stop="error",
        error="google reported an error: UNAVAILABLE: "
        "The model is overloaded. Please try again later.",
        kind="server",
        usage=Usage(input=9, output=4, total_tokens=13),
        response_id="sKdGaPm1DKuVz7IPyKHD8Qw",
    ),
    "no_finish.sse": reply(
        TextContent("Cut off"),
        stop="error",
        error="the stream from google ended without a finishReason",
        kind="network",
        usage=Usage(input=6, output=2, total_tokens=8),
        response_id="tKdGaJ2uA5eEz7IPnNDQ6Ag",
    ),
    "cumulative_usage.sse": reply(
        ThinkingContent("Thinking about caches"),
        TextContent("Cached prompt."),
        usage=Usage(input=100, output=60, cache_read=2000, total_tokens=2160),
        response_id="vKdGaOKbMsCPz7IP2fqV4Ao",
    ),
    "signature_last.sse": reply(
        TextContent("Sure thing.", text_signature="EqQBCqEBAdHtim9z3Q=="),
        usage=Usage(input=4, output=83, total_tokens=87),
        response_id="wKdGaNOhFq2Wz7IPzN7p2Qs",
    ),
}


@pytest.mark.parametrize("pieces", PIECES)
@pytest.mark.parametrize("name", sorted(REPLIES))
async def test_every_body_gives_its_message_however_it_is_cut(
    clock: Any, name: str, pieces: Any
) -> None:
    async with open_sse_server(sse(name, pieces), seed=len(name)) as server:
        result = await call(google.stream, model(server.url))
    check_stream(result.events)
    expected = REPLIES[name]
    assert attrs.evolve(result.message, timestamp=0) == expected
    last = result.events[-1]
    final = last.error if isinstance(last, StreamError) else last.message  # type: ignore[union-attr]  # a StreamDone
    assert (last.type, final) == (
        "error" if expected.stop_reason == "error" else "done",
        result.message,
    )


async def test_text_parts_are_deltas_of_one_block(clock: Any) -> None:
    async with open_sse_server(sse("text.sse")) as server:
        result = await call(google.stream, model(server.url))
    deltas = [e.delta for e in result.events if e.type == "text_delta"]
    assert (result.types, deltas) == (
        ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"],
        ["Hello", ", wörld \u2028 ✓", "!"],
    )


async def test_thought_parts_are_thinking_closed_before_the_text(clock: Any) -> None:
    async with open_sse_server(sse("thinking.sse")) as server:
        result = await call(google.stream, model(server.url))
    assert result.types == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]


async def test_a_signature_in_an_empty_last_part_goes_on_the_open_block(clock: Any) -> None:
    async with open_sse_server(sse("signature_last.sse")) as server:
        result = await call(google.stream, model(server.url))
    ends = [e for e in result.events if e.type == "text_end"]
    assert [e.partial.content for e in ends] == [
        (TextContent("Sure thing.", text_signature="EqQBCqEBAdHtim9z3Q=="),)
    ]


async def test_a_second_signature_starts_a_new_block(clock: Any) -> None:
    body = sse_body(
        [
            (None, {"candidates": [{"content": {"parts": [p]}, "index": 0}]})
            for p in (
                {"text": "One.", "thought": True, "thoughtSignature": "c2lnMQ=="},
                {"text": "Two.", "thought": True, "thoughtSignature": "c2lnMg=="},
                {"text": "Done."},
            )
        ]
        + [(None, {"candidates": [{"finishReason": "STOP", "index": 0}]})],
        crlf=True,
    )
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(google.stream, model(server.url))
    check_stream(result.events)
    assert result.message.content == (
        ThinkingContent("One.", thinking_signature="c2lnMQ=="),
        ThinkingContent("Two.", thinking_signature="c2lnMg=="),
        TextContent("Done."),
    )


async def test_a_function_call_is_one_start_delta_and_end(clock: Any) -> None:
    async with open_sse_server(sse("function_call.sse")) as server:
        result = await call(google.stream, model(server.url))
    calls = [
        (e.type, getattr(e, "delta", None), e.content_index)  # type: ignore[union-attr]  # content events
        for e in result.events
        if e.type.startswith("toolcall")
    ]
    assert calls == [
        ("toolcall_start", None, 1),
        (
            "toolcall_delta",
            '{"location":{"city":"Zürich","country":"CH","coords":{"lat":47.37,"lon":8.54}},'
            '"days":3,"units":["°C","km/h"],"note":"naïve \\"quote\\" ✓"}',
            1,
        ),
        ("toolcall_end", None, 1),
    ]


async def test_the_partial_call_holds_its_arguments_from_the_delta_on(clock: Any) -> None:
    async with open_sse_server(sse("function_call.sse")) as server:
        result = await call(google.stream, model(server.url))
    delta = next(e for e in result.events if e.type == "toolcall_delta")
    assert delta.partial.content[1] == ToolCall(
        "oKdGaMy2Jc3Gz7IPm5yT4Q4_0", "get_weather", WEATHER_ARGS
    )


async def test_two_calls_in_one_chunk_are_two_blocks(clock: Any) -> None:
    async with open_sse_server(sse("two_calls.sse")) as server:
        result = await call(google.stream, model(server.url))
    assert result.types == ["start"] + ["toolcall_start", "toolcall_delta", "toolcall_end"] * 2 + [
        "done"
    ]


async def test_generated_ids_are_the_same_for_the_same_reply(clock: Any) -> None:
    async with open_sse_server(sse("function_call.sse"), sse("function_call.sse")) as server:
        first = await call(google.stream, model(server.url))
        second = await call(google.stream, model(server.url))
    assert [c.id for c in first.message.tool_calls] == [c.id for c in second.message.tool_calls]


async def test_usage_is_cumulative_each_report_replaces_the_last(clock: Any) -> None:
    async with open_sse_server(sse("cumulative_usage.sse")) as server:
        result = await call(google.stream, model(server.url, "gemini-2.5-pro"))
    usages = [e.partial.usage for e in result.events if e.type.endswith("_delta")]  # type: ignore[union-attr]  # deltas
    assert usages == [
        Usage(input=100, output=30, cache_read=2000, total_tokens=2130),
        Usage(input=100, output=57, cache_read=2000, total_tokens=2157),
        Usage(input=100, output=60, cache_read=2000, total_tokens=2160),
    ]


async def test_cost_comes_from_the_models_cost_table(clock: Any) -> None:
    async with open_sse_server(sse("cumulative_usage.sse")) as server:
        priced = model(server.url, cost=ModelCost(input=1.25, output=10.0, cache_read=0.31))
        result = await call(google.stream, priced)
    cost = result.message.usage.cost
    assert (cost.input, cost.output, cost.cache_read) == pytest.approx((125e-6, 600e-6, 620e-6))


# --- the request ---------------------------------------------------------------------------------


async def request_of(server_model: Any, ctx: Any = None, **opts: Any) -> Any:
    async with open_sse_server(sse("text.sse")) as server:
        await call(google.stream, server_model(server.url), ctx, options(**opts))
    return server.requests[0]


def sent_by_this_model(*content: Any, stop: str = "toolUse") -> AssistantMessage:
    """A reply of response ``r1`` whose calls Gemini gave no id: theirs are ``r1_<n>``."""
    return AssistantMessage(
        content=content,
        api="google-generative-ai",
        provider="google",
        model=MODEL_ID,
        stop_reason=stop,  # type: ignore[arg-type]  # a StopReason, given as str
        response_id="r1",
    )


async def test_the_request_body_for_a_transcript(clock: Any) -> None:
    transcript: list[Message] = [
        UserMessage((TextContent("What is in this picture?"), ImageContent("aGk=", "image/png"))),
        sent_by_this_model(
            ThinkingContent("Look closely.", thinking_signature="dGhpbms="),
            TextContent("Checking.", text_signature="dGV4dA=="),
            ToolCall("r1_0", "describe", {"detail": "high"}, thought_signature="Y2FsbA=="),
            ToolCall("r1_1", "lookup", {"q": "chat noir é"}),
            ToolCall("r1_2", "echo", {"value": "x"}),
        ),
        ToolResultMessage(
            tool_call_id="r1_0",
            tool_name="describe",
            content=(TextContent("a cat"), ImageContent("Y2F0", "image/jpeg")),
        ),
        ToolResultMessage(
            tool_call_id="r1_1",
            tool_name="lookup",
            content=(TextContent("not found"),),
            is_error=True,
        ),
        sent_by_this_model(TextContent("Half a rep"), stop="aborted"),
        UserMessage.text("Thanks. And now?"),
    ]
    ctx = context(*transcript, system_prompt="Be brief.", tools=[ECHO])
    body = (await request_of(model, ctx, max_tokens=100, temperature=0.2)).json
    assert body == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "What is in this picture?"},
                    {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Look closely.", "thought": True, "thoughtSignature": "dGhpbms="},
                    {"text": "Checking.", "thoughtSignature": "dGV4dA=="},
                    {
                        "functionCall": {"name": "describe", "args": {"detail": "high"}},
                        "thoughtSignature": "Y2FsbA==",
                    },
                    {"functionCall": {"name": "lookup", "args": {"q": "chat noir é"}}},
                    {"functionCall": {"name": "echo", "args": {"value": "x"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "describe", "response": {"output": "a cat"}}},
                    {"functionResponse": {"name": "lookup", "response": {"error": "not found"}}},
                    {
                        "functionResponse": {
                            "name": "echo",
                            "response": {"error": "No result provided"},
                        }
                    },
                    {"text": "Attached image(s) from tool result:"},
                    {"inlineData": {"mimeType": "image/jpeg", "data": "Y2F0"}},
                    {"text": "Thanks. And now?"},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "echo",
                        "description": "the echo tool",
                        "parametersJsonSchema": ECHO.parameters,
                    }
                ]
            }
        ],
        "generationConfig": {"maxOutputTokens": 100, "temperature": 0.2},
    }


async def test_an_image_only_result_says_so_in_its_response(clock: Any) -> None:
    ctx = context(
        UserMessage.text("shoot"),
        sent_by_this_model(ToolCall("r1_0", "screenshot", {})),
        ToolResultMessage(
            tool_call_id="r1_0",
            tool_name="screenshot",
            content=(ImageContent("cG5n", "image/png"),),
        ),
    )
    body = (await request_of(model, ctx)).json
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "screenshot",
                    "response": {"output": "(see attached image)"},
                }
            },
            {"text": "Attached image(s) from tool result:"},
            {"inlineData": {"mimeType": "image/png", "data": "cG5n"}},
        ],
    }


async def test_a_model_without_image_input_gets_no_images(clock: Any) -> None:
    ctx = context(UserMessage((TextContent("see"), ImageContent("aGk=", "image/png"))))
    body = (await request_of(lambda url: model(url, input=("text",)), ctx)).json
    assert body["contents"] == [{"role": "user", "parts": [{"text": "see"}]}]


async def test_the_minimal_request(clock: Any) -> None:
    body = (await request_of(model)).json
    assert body == {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


async def test_a_reply_of_another_model_is_sent_without_its_signatures(clock: Any) -> None:
    other = AssistantMessage(
        content=(
            ThinkingContent("Hmm.", thinking_signature="b3RoZXI="),
            ToolCall("x", "echo", {"value": "v"}, thought_signature="b3RoZXI="),
        ),
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
    )
    ctx = context(UserMessage.text("q"), other)
    body = (await request_of(model, ctx)).json
    assert body["contents"][1] == {
        "role": "model",
        "parts": [{"text": "Hmm."}, {"functionCall": {"name": "echo", "args": {"value": "v"}}}],
    }


async def test_gemini_3_replays_another_models_calls_with_the_skip_signature(clock: Any) -> None:
    other = AssistantMessage(
        content=(ToolCall("x", "echo", {"value": "a"}), ToolCall("y", "echo", {"value": "b"})),
        api="openai-chat",
        provider="openai",
        model="gpt-4.1",
        stop_reason="toolUse",
    )
    ctx = context(UserMessage.text("q"), other)
    body = (await request_of(lambda url: model(url, "gemini-3-pro-preview"), ctx)).json
    assert body["contents"][1]["parts"] == [
        {
            "functionCall": {"name": "echo", "args": {"value": "a"}, "id": "x"},
            "thoughtSignature": "skip_thought_signature_validator",
        },
        {"functionCall": {"name": "echo", "args": {"value": "b"}, "id": "y"}},
    ]


def sdk_response(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """A streamed response, made with the google-genai SDK's model of one."""
    response = genai_types.GenerateContentResponse.model_validate(
        {
            "candidates": [
                {"content": {"role": "model", "parts": list(parts)}, "finishReason": finish}
            ],
            "responseId": "resp-1",
        }
    )
    dumped: dict[str, Any] = response.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def sdk_contents(body: dict[str, Any]) -> list[Any]:
    """The request's ``contents``, checked against the google-genai SDK's ``Content``
    (whose models refuse fields they do not know)."""
    contents: list[Any] = body["contents"]
    pydantic.TypeAdapter(list[genai_types.Content]).validate_python(contents)
    return contents


@pytest.mark.parametrize(
    "model_id", ["gemini-3-flash-preview", "gemini-2.5-flash", "gemini-2.0-flash"]
)
async def test_the_ids_gemini_gave_go_back_in_the_call_and_the_result(
    clock: Any, model_id: str
) -> None:
    """The API asks for the ids it gave, whatever the model. One it did not give (the
    second call's, made up from the response's id) goes back only to Gemini 3, which
    pairs calls and results by id (as pi-ai sends them); Gemini 2 never saw it."""
    given = {"functionCall": {"id": "fc-7", "name": "echo", "args": {"value": "v"}}}
    unnamed = {"functionCall": {"name": "echo", "args": {"value": "w"}}}
    first = ScriptedResponse(
        body=sse_body([(None, sdk_response(given, unnamed, finish="STOP"))], crlf=True)
    )
    async with open_sse_server(first, sse("text.sse")) as server:
        gemini = model(server.url, model_id)
        turn = await call(google.stream, gemini)
        results = [
            ToolResultMessage(tool_call_id=id, tool_name="echo", content=(TextContent(value),))
            for id, value in [("fc-7", "v"), ("resp-1_1", "w")]
        ]
        ctx = context(UserMessage.text("q"), turn.message, *results, tools=[ECHO])
        await call(google.stream, gemini, ctx)
    assert turn.message.content == (
        ToolCall("fc-7", "echo", {"value": "v"}),
        ToolCall("resp-1_1", "echo", {"value": "w"}),
    )
    contents = sdk_contents(server.requests[1].json)
    made_up = {"id": "resp-1_1"} if model_id.startswith("gemini-3") else {}
    assert contents[1:] == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "echo", "args": {"value": "v"}, "id": "fc-7"}},
                {"functionCall": {"name": "echo", "args": {"value": "w"}, **made_up}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "echo", "response": {"output": "v"}, "id": "fc-7"}},
                {"functionResponse": {"name": "echo", "response": {"output": "w"}, **made_up}},
            ],
        },
    ]


async def test_gemini_2_gets_no_id_of_another_provider(clock: Any) -> None:
    """Ids another API gave (or one that looks like Gemini's) are not Gemini's to pair."""
    other = AssistantMessage(
        content=(ToolCall("call_1", "echo", {}),),
        api="openai-chat",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    result = ToolResultMessage(tool_call_id="call_1", tool_name="echo", content=(TextContent("r"),))
    body = (await request_of(model, context(UserMessage.text("q"), other, result))).json
    contents = sdk_contents(body)
    assert contents[1]["parts"] == [{"functionCall": {"name": "echo", "args": {}}}]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "echo", "response": {"output": "r"}}}
    ]


async def test_ids_of_another_provider_are_made_valid_for_gemini_3(clock: Any) -> None:
    long_id = "call_1|fc_" + "z" * 80
    other = AssistantMessage(
        content=(ToolCall(long_id, "echo", {}),),
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    result = ToolResultMessage(tool_call_id=long_id, tool_name="echo", content=(TextContent("r"),))
    ctx = context(UserMessage.text("q"), other, result)
    body = (await request_of(lambda url: model(url, "gemini-3-pro-preview"), ctx)).json
    contents = sdk_contents(body)
    sent = ("call_1_fc_" + "z" * 80)[:64]
    assert contents[1]["parts"][0]["functionCall"]["id"] == sent
    assert contents[2]["parts"][0]["functionResponse"]["id"] == sent


async def test_the_url_and_the_key_header(clock: Any) -> None:
    recorded = await request_of(
        lambda url: model(url, headers={"x-model": "m"}),
        api_key="AIzaSy-secret",
        headers={"x-option": "o"},
    )
    headers = recorded.headers
    assert (recorded.method, recorded.path) == ("POST", PATH)
    assert (headers["x-goog-api-key"], headers["x-model"], headers["x-option"]) == (
        "AIzaSy-secret",
        "m",
        "o",
    )
    assert "authorization" not in headers


@pytest.mark.parametrize(
    ("model_id", "level", "budget"),
    [
        (MODEL_ID, "minimal", 512),
        (MODEL_ID, "low", 2048),
        (MODEL_ID, "medium", 8192),
        (MODEL_ID, "high", 24576),
        (MODEL_ID, "xhigh", 24576),
        ("gemini-2.5-pro", "xhigh", 32768),
    ],
)
async def test_reasoning_levels_are_thinking_budgets(
    clock: Any, model_id: str, level: str, budget: int
) -> None:
    recorded = await request_of(
        lambda url: model(url, model_id, reasoning=True), reasoning=level, max_tokens=4096
    )
    assert recorded.json["generationConfig"] == {
        "maxOutputTokens": 4096,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": budget},
    }


@pytest.mark.parametrize(
    ("model_id", "level", "thinking"),
    [
        # thinking_levels map low, medium and high to Gemini's levels; minimal is not offered
        ("gemini-3.1-pro-preview", "minimal", {"thinkingLevel": "LOW"}),
        ("gemini-3.1-pro-preview", "medium", {"thinkingLevel": "MEDIUM"}),
        ("gemini-3.1-pro-preview", "xhigh", {"thinkingLevel": "HIGH"}),  # nearest below
        # low and medium are not offered: the nearest above
        ("gemma-4-31b-it", "low", {"thinkingLevel": "HIGH"}),
        ("gemma-4-31b-it", "medium", {"thinkingLevel": "HIGH"}),
        ("gemma-4-31b-it", "minimal", {"thinkingLevel": "MINIMAL"}),
        # the catalog's values in lower case, sent as the API names them
        ("gemini-3-flash-preview", "low", {"thinkingLevel": "LOW"}),
        ("gemini-4-hydrogen", "xhigh", {"thinkingLevel": "HIGH"}),  # offered; the API's highest
        # a model that takes no level: a budget
        ("gemini-2.5-flash", "low", {"thinkingBudget": 2048}),
    ],
)
async def test_a_level_the_models_thinking_levels_map_is_a_thinking_level(
    clock: Any, model_id: str, level: str, thinking: dict[str, Any]
) -> None:
    recorded = await request_of(
        lambda url: attrs.evolve(google.model(model_id), base_url=url), reasoning=level
    )
    config = recorded.json["generationConfig"]
    genai_types.GenerationConfig.model_validate(config)
    assert config == {"thinkingConfig": {"includeThoughts": True, **thinking}}


async def test_no_thinking_config_for_a_model_that_does_not_reason(clock: Any) -> None:
    recorded = await request_of(model, reasoning="high")
    assert "generationConfig" not in recorded.json


@pytest.mark.parametrize(
    ("provider", "model_id", "thinking"),
    [
        # Gemini 2.5 thinks unless its budget is 0; Pro cannot stop, 128 is its least
        ("google", "gemini-2.5-flash", {"thinkingBudget": 0}),
        ("google", "gemini-2.5-flash-lite", {"thinkingBudget": 0}),
        ("google", "gemini-2.5-pro", {"thinkingBudget": _PRO_LEAST}),
        # Gemini 3 and Gemma 4 cannot stop thinking: the lowest level each offers
        ("google", "gemini-3-flash-preview", {"thinkingLevel": "MINIMAL"}),
        ("google", "gemini-3.1-flash-lite-preview", {"thinkingLevel": "MINIMAL"}),
        ("google", "gemini-flash-latest", {"thinkingLevel": "MINIMAL"}),
        ("google", "gemini-3.1-pro-preview", {"thinkingLevel": "LOW"}),
        ("google", "gemma-4-31b-it", {"thinkingLevel": "MINIMAL"}),
        ("opencode", "gemini-4-argon", {"thinkingLevel": "LOW"}),
    ],
)
async def test_with_no_reasoning_level_the_model_thinks_as_little_as_it_can(
    clock: Any, provider: str, model_id: str, thinking: dict[str, Any]
) -> None:
    """No level asked for: thinking off where the model can turn it off, else its least
    (what pi-ai's simple stream sends, but for 2.5 Pro, which refuses a budget of 0)."""
    recorded = await request_of(
        lambda url: attrs.evolve(google.model(model_id, provider=provider), base_url=url)
    )
    config = recorded.json["generationConfig"]
    genai_types.GenerationConfig.model_validate(config)
    assert config == {"thinkingConfig": thinking}


async def test_a_level_the_model_does_not_offer_is_thinking_off(clock: Any) -> None:
    """A model whose thinking_levels offer only ``off`` is asked for no thinking, whatever
    the level (as pi-ai clamps it to ``off``)."""
    only_off = dict.fromkeys(("minimal", "low", "medium", "high"))

    def served(url: str) -> Any:
        return attrs.evolve(google.model(MODEL_ID), base_url=url, thinking_levels=only_off)

    recorded = await request_of(served, reasoning="high")
    assert recorded.json["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 0}}


async def test_a_lowest_level_the_api_does_not_name_sends_no_thinking_config(
    clock: Any,
) -> None:
    """thinking_levels of one's own that map a Gemini 3 model's lowest level to a value
    Gemini has no level for: no thinkingConfig (the model's default), not a refused one."""
    levels = {"off": None, "minimal": "ultra-light"}

    def served(url: str) -> Any:
        found = google.model("gemini-3-flash-preview")
        return attrs.evolve(found, base_url=url, thinking_levels=levels)

    recorded = await request_of(served)
    assert "generationConfig" not in recorded.json


@pytest.mark.parametrize(
    ("model_id", "reasoning", "config"),
    [
        # the catalog does not describe another server: no reasoning, nothing sent
        (MODEL_ID, None, None),
        ("my-gemini-finetune", None, None),
        # reasoning=True on a model the catalog does not know: what pi-ai sends by its id
        ("gemini-2.0-flash-thinking-exp", True, {"thinkingConfig": {"thinkingBudget": 0}}),
        ("gemini-3-pro-preview", True, {"thinkingConfig": {"thinkingBudget": 0}}),
        ("gemini-9-flash", True, {"thinkingConfig": {"thinkingBudget": 0}}),
    ],
)
async def test_no_reasoning_level_on_a_model_the_catalog_does_not_describe(
    clock: Any, model_id: str, reasoning: bool | None, config: dict[str, Any] | None
) -> None:
    """A model at another base URL, or one the catalog does not know, has no
    thinking_levels: without ``reasoning=True`` nothing is sent; with it, a budget of 0
    (a model that takes levels offers ``off`` when its levels are not known)."""
    recorded = await request_of(lambda url: model(url, model_id, reasoning=reasoning))
    assert recorded.json.get("generationConfig") == config


LONG_SESSION = "session-" + "s" * 27 + "-" + "0123456789" * 6 + "-end"


async def test_gemini_2_5_flash_request_as_pi_ai_sends_it(clock: Any) -> None:
    """The catalog's gemini-2.5-flash at Google's server, as an agent asks it (no level,
    a 100-character session id, the default cache retention): thinking is off, as
    pi-ai 1.6.0 sends it; the prompt cache is Gemini's implicit one, which takes no
    field and no header, and the session id is sent nowhere, cut or not."""
    assert len(LONG_SESSION) == 100
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        result = await call(
            google.Google(client).stream,
            google.model(MODEL_ID),
            context(UserMessage.text("hi"), system_prompt="Be brief.", tools=[ECHO]),
            options(session_id=LONG_SESSION, max_tokens=1024),
        )
    assert result.message.stop_reason == "stop"
    recorded = server.requests[0]
    body = recorded.json
    assert set(body) == {"systemInstruction", "contents", "tools", "generationConfig"}
    assert body["generationConfig"] == {
        "maxOutputTokens": 1024,
        "thinkingConfig": {"thinkingBudget": 0},
    }
    genai_types.GenerationConfig.model_validate(body["generationConfig"])
    sent = [recorded.path, *recorded.headers.values(), recorded.body.decode()]
    pieces = (LONG_SESSION[:64], "s" * 27 + "-01234", "89-end")
    assert not any(piece in text for piece in pieces for text in sent)


# --- keys and HTTP errors ------------------------------------------------------------------------


def error(status: int, body: str, **headers: str) -> ScriptedResponse:
    return ScriptedResponse(
        status=status, body=body.encode(), headers=headers, content_type="application/json"
    )


QUOTA = (
    '{"error": {"code": 429, "message": "You exceeded your current quota, please check your '
    'plan and billing details.", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": '
    '"type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]}}'
)


async def test_a_429_is_retried_then_the_reply_streams(clock: Any) -> None:
    async with open_sse_server(error(429, QUOTA), sse("text.sse")) as server:
        result = await call(google.stream, model(server.url))
    assert (result.message.stop_reason, result.message.text, len(server.requests)) == (
        "stop",
        "Hello, wörld \u2028 ✓!",
        2,
    )


async def test_a_429_without_retries_says_resource_exhausted(clock: Any) -> None:
    async with open_sse_server(error(429, QUOTA)) as server:
        result = await call(google.stream, model(server.url), opts=options(max_retries=0))
    assert result.message.error_message == (
        "HTTP 429 from google: RESOURCE_EXHAUSTED: You exceeded your current quota, "
        "please check your plan and billing details."
    )


async def test_the_key_never_appears_in_an_error(clock: Any) -> None:
    echoed = (
        '{"error": {"code": 400, "message": "API key not valid: AIzaSy-secret", '
        '"status": "INVALID_ARGUMENT"}}'
    )
    in_band = sse_body(
        [
            (
                None,
                {"error": {"code": 500, "message": "bad key AIzaSy-secret", "status": "INTERNAL"}},
            )
        ],
        crlf=True,
    )
    async with open_sse_server(error(400, echoed), ScriptedResponse(body=in_band)) as server:
        first = await call(google.stream, model(server.url), opts=options(api_key="AIzaSy-secret"))
        second = await call(google.stream, model(server.url), opts=options(api_key="AIzaSy-secret"))
    assert (first.message.error_message, second.message.error_message) == (
        "HTTP 400 from google: INVALID_ARGUMENT: API key not valid: ***",
        "google reported an error: INTERNAL: bad key ***",
    )
    assert all("AIzaSy-secret" not in r.path for r in server.requests)


async def test_no_key_is_an_error_before_any_request(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = google.Google(client)
        gemini = google.model(MODEL_ID)  # at Google's server
        result = await call(provider.stream, gemini, opts=options(api_key=None))
    assert (server.requests, result.types, result.message.error_message) == (
        [],
        ["error"],
        "no API key for google: set GEMINI_API_KEY or GOOGLE_API_KEY, "
        "or give api_key (or get_api_key)",
    )


async def test_the_key_comes_from_google_api_key_too(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "env-key")
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = google.Google(client)
        await call(provider.stream, google.model(MODEL_ID), opts=options(api_key=None))
    assert server.requests[0].headers["host"] == "generativelanguage.googleapis.com"
    assert server.requests[0].headers["x-goog-api-key"] == "env-key"


async def test_a_dropped_connection_keeps_what_arrived(clock: Any) -> None:
    body = fixture("google", "text.sse")
    after_hello = body.index(b"\r\n\r\n", body.index(b'"Hello"')) + 4
    async with open_sse_server(
        ScriptedResponse(body=body, pieces=(1, 7), drop_after=after_hello + 20)
    ) as server:
        result = await call(google.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.text) == ("error", "Hello")
    assert message.error_message is not None
    assert message.error_message.startswith("connection to google lost:")


# --- through the loop ----------------------------------------------------------------------------


async def test_a_tool_loop_replays_the_call_with_its_signature(clock: Any) -> None:
    async with open_sse_server(sse("echo_call.sse", (1, 7)), sse("echo_answer.sse")) as server:
        messages = await run_agent_loop(
            [UserMessage.text("ping")],
            AgentContext(tools=[ECHO]),
            AgentLoopConfig(model=model(server.url), api_key="k"),
            EventRecorder(),
            stream_fn=google.stream,
        )
    assert messages[-1].text == "The tool said ping ✓."  # type: ignore[union-attr]  # an AssistantMessage, here
    assert server.requests[1].json["contents"] == [
        {"role": "user", "parts": [{"text": "ping"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "echo", "args": {"value": "ping ✓"}},
                    "thoughtSignature": "CiQBZWNobw==",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "echo", "response": {"output": "echo:ping ✓"}}}
            ],
        },
    ]


# --- what the server sends that is not what the API says --------------------------------------


def _hi_then(last: dict[str, Any]) -> ScriptedResponse:
    """A reply that says "Hi", then ``last``."""
    hi = {"candidates": [{"content": {"parts": [{"text": "Hi"}], "role": "model"}, "index": 0}]}
    return ScriptedResponse(body=sse_body([(None, hi), (None, last)], crlf=True))


STOP = {"content": {"parts": [{"text": "!"}], "role": "model"}, "finishReason": "STOP"}


@pytest.mark.parametrize(
    ("count", "shown"),
    [([1], "[1]"), ({"n": 1}, '{"n": 1}'), ("HIGH", '"HIGH"'), (float("inf"), "Infinity")],
)
async def test_a_usage_count_that_is_not_a_count_is_an_error_naming_it(
    clock: Any, count: Any, shown: str
) -> None:
    last = {"candidates": [STOP], "usageMetadata": {"promptTokenCount": count}}
    async with open_sse_server(_hi_then(last)) as server:
        result = await call(google.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.text) == ("error", "Hi")
    assert message.error_message == (
        "malformed response from google: "
        f"usageMetadata.promptTokenCount is {shown}, not a token count"
    )


@pytest.mark.parametrize(
    ("candidate", "error"),
    [
        ({"content": {"parts": 5}}, "candidates[0].content.parts is 5, not an array"),
        ({"content": {"parts": ["x"]}}, 'candidates[0].content.parts[0] is "x", not an object'),
        (
            {"content": {"parts": [{"text": 5}]}},
            "candidates[0].content.parts[0].text is 5, not a string",
        ),
        (
            {"content": {"parts": [{"text": "lost", "thought": "yes"}]}},
            'candidates[0].content.parts[0].thought is "yes", not true or false',
        ),
        (
            {"content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]}},
            "candidates[0].content.parts[0].functionCall.args is [1], not an object",
        ),
        (
            {"content": {"parts": [{"text": "lost"}]}, "finishReason": 5},
            "candidates[0].finishReason is 5, not a string",
        ),
        ({"index": "0", **STOP}, 'candidates[0].index is "0", not an integer'),
    ],
)
async def test_a_field_of_another_type_is_an_error_naming_it_and_its_response_is_not_taken(
    clock: Any, candidate: dict[str, Any], error: str
) -> None:
    async with open_sse_server(_hi_then({"candidates": [candidate]})) as server:
        result = await call(google.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert (message.stop_reason, message.content) == ("error", (TextContent("Hi"),))
    assert message.error_message == f"malformed response from google: {error}"
