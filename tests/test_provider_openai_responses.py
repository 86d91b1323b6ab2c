"""The OpenAI responses provider, against a loopback server.

design.md#openai-responses, design.md#openai-responses.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import openai
import pydantic
import pytest
import trio
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

from tests._providers import (
    CUT_SESSION_ID,
    FIXTURES,
    LONG_SESSION_ID,
    PIECES,
    Call,
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
from tests._support import ECHO, make_tool
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ImageContent,
    ModelCost,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import openai_responses
from trio_agent.testing import EventRecorder, ScriptedResponse, SSEServer, open_sse_server, sse_body

FIXTURE_NAMES = sorted(path.name for path in (FIXTURES / "openai_responses").glob("*.sse"))
ENCRYPTED = "gAAAAABoEnc-rYpt3d_Bl0b=="
REASONING_ITEM = {
    "id": "rs_reason01",
    "type": "reasoning",
    "encrypted_content": ENCRYPTED,
    "summary": [
        {"type": "summary_text", "text": "**Greeting**\n\nThe user says hi."},
        {"type": "summary_text", "text": "**Answer**\n\nKeep it short."},
    ],
}
IMAGE = ImageContent("aGk=", "image/png")
INPUT_IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,aGk=", "detail": "auto"}


def sse(name: str, pieces: Any = None) -> ScriptedResponse:
    return ScriptedResponse(body=fixture("openai_responses", name), pieces=pieces)


def model(url: str, id: str = "gpt-4.1", **kwargs: Any) -> Any:
    return openai_responses.model(id, base_url=url + "/v1", **kwargs)


def reply(*content: Any, stop_reason: Any = "stop", id: str = "gpt-4.1") -> AssistantMessage:
    """A reply of ``gpt-4.1`` over this API (the model of the tests)."""
    return AssistantMessage(
        content=content,
        api="openai-responses",
        provider="openai",
        model=id,
        stop_reason=stop_reason,
    )


async def replay(name: str, pieces: Any = None, **model_kwargs: Any) -> Call:
    async with open_sse_server(sse(name, pieces)) as server:
        result = await call(openai_responses.stream, model(server.url, **model_kwargs))
    check_stream(result.events)
    return result


# --- the stream ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURE_NAMES)
async def test_every_body_gives_the_same_message_whole_and_in_pieces(clock: Any, name: str) -> None:
    messages = []
    for pieces in PIECES:
        result = await replay(name, pieces)
        messages.append(attrs.evolve(result.message, timestamp=0))
    assert messages[1:] == messages[:1] * (len(PIECES) - 1)


@pytest.mark.parametrize("pieces", PIECES)
async def test_a_text_reply(clock: Any, pieces: Any) -> None:
    result = await replay("text.sse", pieces)
    expected = reply(
        TextContent("Hello, wörld \u2028 ✓", text_signature="msg_text01"),
    )
    expected = attrs.evolve(
        expected,
        usage=Usage(input=20, output=12, cache_read=100, total_tokens=132),
        response_id="resp_text01",
        timestamp=result.message.timestamp,
    )
    assert result.message == expected


async def test_a_text_reply_streams_one_text_block(clock: Any) -> None:
    result = await replay("text.sse")
    assert result.types == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]


@pytest.mark.parametrize("pieces", PIECES)
async def test_reasoning_summaries_are_joined_with_a_blank_line(clock: Any, pieces: Any) -> None:
    result = await replay("reasoning.sse", pieces, id="gpt-5", reasoning=True)
    thinking = result.message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "**Greeting**\n\nThe user says hi.\n\n**Answer**\n\nKeep it short."


async def test_the_reasoning_item_with_its_encrypted_content_is_the_signature(clock: Any) -> None:
    result = await replay("reasoning.sse", id="gpt-5", reasoning=True)
    thinking = result.message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking_signature is not None
    assert json.loads(thinking.thinking_signature) == REASONING_ITEM


async def test_reasoning_then_text_usage_and_events(clock: Any) -> None:
    result = await replay("reasoning.sse", id="gpt-5", reasoning=True)
    assert result.message.content[1] == TextContent("Hi!", text_signature="msg_reason02")
    assert result.message.usage == Usage(input=50, output=200, total_tokens=250)
    assert result.types == [
        "start",
        "thinking_start",
        *["thinking_delta"] * 5,  # two deltas, the blank line, two deltas
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]


async def test_the_reasoning_item_is_replayed_in_the_next_request(clock: Any) -> None:
    async with open_sse_server(sse("reasoning.sse"), sse("text.sse")) as server:
        gpt5 = model(server.url, id="gpt-5", reasoning=True)
        first = await call(openai_responses.stream, gpt5)
        ctx = context(UserMessage.text("hi"), first.message, UserMessage.text("again"))
        await call(openai_responses.stream, gpt5, ctx, options(reasoning="medium"))
    assert server.requests[1].json["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        REASONING_ITEM,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_reason02",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi!", "annotations": []}],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "again"}]},
    ]


@pytest.mark.parametrize("pieces", PIECES)
async def test_function_calls_end_in_tool_use_with_split_able_ids(clock: Any, pieces: Any) -> None:
    result = await replay("tool_calls.sse", pieces)
    assert (result.message.content, result.message.stop_reason) == (
        (
            ToolCall("call_A1|fc_a1", "get_weather", {"city": "Parisé", "days": 3}),
            ToolCall("call_B2|fc_b2", "get_time", {"tz": "UTC"}),
        ),
        "toolUse",
    )


async def test_tool_call_events_carry_the_final_arguments(clock: Any) -> None:
    result = await replay("tool_calls.sse")
    ends = [e.tool_call for e in result.events if e.type == "toolcall_end"]
    assert ends == [
        ToolCall("call_A1|fc_a1", "get_weather", {"city": "Parisé", "days": 3}),
        ToolCall("call_B2|fc_b2", "get_time", {"tz": "UTC"}),
    ]


async def test_partial_tool_arguments_are_parsed_as_they_grow(clock: Any) -> None:
    result = await replay("tool_calls.sse")
    partials = [
        e.partial.content[0].arguments  # type: ignore[union-attr]  # a ToolCall, here
        for e in result.events
        if e.type == "toolcall_delta" and e.content_index == 0
    ]
    assert partials == [
        {"city": "Pa"},
        {"city": "Parisé"},
        {"city": "Parisé", "days": 3},
    ]  # a key counts once whole


@pytest.mark.parametrize("pieces", PIECES)
async def test_incomplete_for_max_output_tokens_is_length(clock: Any, pieces: Any) -> None:
    result = await replay("incomplete_max_tokens.sse", pieces)
    message = result.message
    assert (message.stop_reason, message.error_message, message.text, message.usage) == (
        "length",
        None,
        "The answer is forty",
        Usage(input=30, output=16, total_tokens=46),
    )
    assert result.types[-1] == "done"


@pytest.mark.parametrize(
    ("name", "error", "kept"),
    [
        (
            "incomplete_content_filter.sse",
            "the response from openai is incomplete: content_filter",
            "Here is how to",
        ),
        (
            "failed.sse",
            "the response from openai failed: server_error: "
            "The model failed to generate a response.",
            "Let me",
        ),
        (
            "error_event.sse",
            "openai reported an error: server_error: "
            "The server had an error while processing your request. Sorry about that!",
            "Partial answ",
        ),
        (
            "no_terminal.sse",
            "the stream from openai ended without response.completed",
            "Cut off",
        ),
    ],
)
@pytest.mark.parametrize("pieces", PIECES)
async def test_failures_end_as_errors_keeping_what_arrived(
    clock: Any, pieces: Any, name: str, error: str, kept: str
) -> None:
    result = await replay(name, pieces)
    assert (result.message.stop_reason, result.message.error_message, result.message.text) == (
        "error",
        error,
        kept,
    )


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {"type": "error", "code": None, "message": "Overloaded", "param": None},
            "openai reported an error: Overloaded",
        ),
        (
            {"type": "error", "error": {"type": "invalid_request_error", "message": "Too long"}},
            "openai reported an error: invalid_request_error: Too long",
        ),
    ],
)
async def test_error_events_without_a_code_or_with_a_nested_error(
    clock: Any, data: dict[str, Any], error: str
) -> None:
    async with open_sse_server(ScriptedResponse(body=sse_body([("error", data)]))) as server:
        result = await call(openai_responses.stream, model(server.url))
    assert result.message.error_message == error


async def test_an_error_event_closes_the_open_block_before_the_error(clock: Any) -> None:
    result = await replay("error_event.sse")
    assert result.types == ["start", "text_start", "text_delta", "text_delta", "text_end", "error"]


async def test_usage_of_an_incomplete_reply_is_kept_on_the_error(clock: Any) -> None:
    result = await replay("incomplete_content_filter.sse")
    assert result.message.usage == Usage(input=30, output=5, total_tokens=35)


@pytest.mark.parametrize("pieces", PIECES)
async def test_unknown_events_and_built_in_tool_items_are_ignored(clock: Any, pieces: Any) -> None:
    result = await replay("unknown_events.sse", pieces)
    assert (result.message.content, result.message.stop_reason) == (
        (TextContent("Trio is a library.", text_signature="msg_unknown02"),),
        "stop",
    )


async def test_a_refusal_is_the_text_of_the_reply(clock: Any) -> None:
    result = await replay("refusal.sse")
    assert (result.message.content, result.message.stop_reason) == (
        (TextContent("I'm sorry, I can't help with that.", text_signature="msg_ref01"),),
        "stop",
    )


async def test_whole_items_without_deltas_are_read_from_their_done_event(clock: Any) -> None:
    result = await replay("whole_items.sse")
    thinking = result.message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert result.message.content[1:] == (
        TextContent("Checking.", text_signature="msg_whole02"),
        ToolCall("call_W3|fc_whole03", "search", {"q": "trio"}),
    )
    assert (thinking.thinking, result.message.stop_reason) == ("Look it up.", "toolUse")
    assert result.types == [
        "start",
        *["thinking_start", "thinking_delta", "thinking_end"],
        *["text_start", "text_delta", "text_end"],
        *["toolcall_start", "toolcall_delta", "toolcall_end"],
        "done",
    ]


async def test_raw_reasoning_text_is_thinking(clock: Any) -> None:
    result = await replay("raw_reasoning.sse")
    thinking = result.message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert (thinking.thinking, result.message.text) == ("The user greets.", "Hello.")


async def test_interleaved_items_keep_all_their_content(clock: Any) -> None:
    result = await replay("interleaved.sse")
    assert result.message.content == (
        TextContent("Calling echo.", text_signature="msg_i1"),
        ToolCall("call_I2|fc_i2", "echo", {"value": "x"}),
    )


async def test_summary_deltas_without_part_events_are_still_joined(clock: Any) -> None:
    def delta(index: int, text: str) -> tuple[str, dict[str, Any]]:
        kind = "response.reasoning_summary_text.delta"
        data = {"type": kind, "item_id": "rs_1", "output_index": 0}
        return kind, {**data, "summary_index": index, "delta": text}

    body = sse_body(
        [
            delta(0, "One."),
            delta(1, "Two."),
            ("response.completed", {"type": "response.completed", "response": {"id": "r"}}),
        ]
    )
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_responses.stream, model(server.url))
    assert result.message.content == (ThinkingContent("One.\n\nTwo."),)


async def test_malformed_json_in_an_event_is_an_error(clock: Any) -> None:
    body = fixture("openai_responses", "no_terminal.sse") + b"event: x\ndata: {nope\n\n"
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_responses.stream, model(server.url))
    assert result.message.error_message is not None
    assert result.message.error_message.startswith("malformed JSON in an event from openai")
    assert result.message.text == "Cut off"


def after_first_delta(body: bytes) -> int:
    """The offset just past the first text delta event of ``body``."""
    return body.index(b"\n\n", body.index(b"response.output_text.delta")) + 2


async def test_a_dropped_connection_keeps_what_arrived(clock: Any) -> None:
    body = fixture("openai_responses", "text.sse")
    dropped = ScriptedResponse(body=body, pieces=(1, 7), drop_after=after_first_delta(body) + 30)
    async with open_sse_server(dropped) as server:
        result = await call(openai_responses.stream, model(server.url))
    message = result.message
    assert message.error_message is not None
    assert (message.stop_reason, message.error_message.split(":")[0], message.text) == (
        "error",
        "connection to openai lost",
        "Hello",
    )


async def test_an_abort_mid_stream_closes_the_connection_and_keeps_the_partial(
    clock: Any,
) -> None:
    body = fixture("openai_responses", "text.sse")
    server = SSEServer([ScriptedResponse(body=body, stall_after=after_first_delta(body))])
    abort = trio.CancelScope()

    async def on_event(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            abort.cancel()

    async with trio.open_nursery() as nursery:
        await server.start(nursery)
        messages = await run_agent_loop(
            [UserMessage.text("hi")],
            AgentContext(),
            AgentLoopConfig(model=model(server.url), api_key="k"),
            EventRecorder(on_event),
            abort,
            stream_fn=openai_responses.stream,
        )
        with trio.fail_after(5):
            await server.wait_closed_by_client()
        nursery.cancel_scope.cancel()
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.text) == ("aborted", "Hello")


async def test_cost_comes_from_the_models_cost_table(clock: Any) -> None:
    result = await replay("text.sse", cost=ModelCost(input=2.0, output=8.0, cache_read=0.5))
    cost = result.message.usage.cost
    assert (cost.input, cost.output, cost.cache_read) == pytest.approx((40e-6, 96e-6, 50e-6))


# --- the request ---------------------------------------------------------------------------------


async def request_of(ctx: Any = None, model_kwargs: Any = None, **opts: Any) -> dict[str, Any]:
    async with open_sse_server(sse("text.sse")) as server:
        await call(
            openai_responses.stream, model(server.url, **(model_kwargs or {})), ctx, options(**opts)
        )
    body: dict[str, Any] = server.requests[0].json
    return body


def sdk_input(body: dict[str, Any]) -> list[Any]:
    """The request's ``input``, checked item by item against the openai SDK's type."""
    items: list[Any] = body["input"]
    pydantic.TypeAdapter(list[openai.types.responses.ResponseInputItemParam]).validate_python(items)
    return items


async def test_text_without_its_item_id_gets_one_made_from_its_place(clock: Any) -> None:
    long_id = "msg_" + "x" * 70
    ctx = context(
        UserMessage.text("q"),
        reply(TextContent("a"), TextContent("b", text_signature=long_id), TextContent("c")),
        UserMessage.text("again"),
        reply(TextContent("d", text_signature="msg_own")),
    )
    body = await request_of(ctx)
    ids = [item.get("id") for item in sdk_input(body) if item.get("type") == "message"]
    assert ids[0] == "msg_1"
    assert ids[1] == "msg_" + hashlib.sha256(long_id.encode()).hexdigest()[:32]  # too long
    assert ids[2:] == ["msg_1_2", "msg_own"]


async def test_cache_writes_are_taken_out_of_the_input(clock: Any) -> None:
    usage = openai.types.responses.ResponseUsage.model_validate(
        {
            "input_tokens": 300,
            "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 50},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 4},
            "total_tokens": 310,
        }
    ).model_dump(mode="json")
    response = _hi_then({"type": "response.completed", "response": {"usage": usage}})
    async with open_sse_server(response) as server:
        result = await call(openai_responses.stream, model(server.url))
    assert attrs.evolve(result.message.usage, cost=Usage().cost) == Usage(
        input=150, output=10, cache_read=100, cache_write=50, total_tokens=310
    )


async def test_the_request_for_a_transcript(clock: Any) -> None:
    ctx = context(
        UserMessage((TextContent("look"), IMAGE)),
        reply(
            ThinkingContent("Plan.", thinking_signature=json.dumps(REASONING_ITEM)),
            TextContent("Calling.", text_signature="msg_1"),
            ToolCall("call_1|fc_1", "echo", {"value": "é"}),
            ToolCall("call_2|fc_2", "echo", {"value": "b"}),
            ToolCall("call_3|fc_3", "echo", {}),
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="call_1|fc_1", tool_name="echo", content=[TextContent("r1")]
        ),
        ToolResultMessage(
            tool_call_id="call_2|fc_2", tool_name="echo", content=[TextContent("see"), IMAGE]
        ),
        reply(TextContent("half"), stop_reason="aborted"),
        UserMessage.text("next"),
        system_prompt="Be brief.",
        tools=[ECHO],
    )
    body = await request_of(ctx)
    assert body == {
        "model": "gpt-4.1",
        "stream": True,
        "store": False,
        "instructions": "Be brief.",
        "input": [
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "look"}, INPUT_IMAGE],
            },
            REASONING_ITEM,
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Calling.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "echo",
                "arguments": '{"value":"é"}',  # as JSON.stringify writes it
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_2",
                "name": "echo",
                "arguments": '{"value":"b"}',
            },
            {
                "type": "function_call",
                "id": "fc_3",
                "call_id": "call_3",
                "name": "echo",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "r1"},
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [{"type": "input_text", "text": "see"}, INPUT_IMAGE],
            },
            {"type": "function_call_output", "call_id": "call_3", "output": "No result provided"},
            {"role": "user", "content": [{"type": "input_text", "text": "next"}]},
        ],
        "tools": [
            {
                "type": "function",
                "name": "echo",
                "description": "the echo tool",
                "parameters": ECHO.parameters,
                "strict": False,
            }
        ],
    }


async def test_calls_of_another_model_are_replayed_without_their_item_ids(clock: Any) -> None:
    ctx = context(
        UserMessage.text("q"),
        reply(
            ThinkingContent("Hmm.", thinking_signature=json.dumps(REASONING_ITEM)),
            TextContent("Calling.", text_signature="msg_other"),
            ToolCall("call_1|fc_1", "echo", {}),
            ToolCall("toolu_2", "echo", {}),
            stop_reason="toolUse",
            id="gpt-5",
        ),
        ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="echo", content=[TextContent("a")]),
        ToolResultMessage(tool_call_id="toolu_2", tool_name="echo", content=[TextContent("b")]),
    )
    body = await request_of(ctx)
    # The message items need an id (the SDK's type requires one): as pi-ai, one made
    # from the message's place in the transcript and the block's among its texts.
    assert sdk_input(body)[1:] == [
        {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hmm.", "annotations": []}],
            "id": "msg_1",
        },
        {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Calling.", "annotations": []}],
            "id": "msg_1_1",
        },
        {"type": "function_call", "call_id": "call_1", "name": "echo", "arguments": "{}"},
        {"type": "function_call", "call_id": "toolu_2", "name": "echo", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a"},
        {"type": "function_call_output", "call_id": "toolu_2", "output": "b"},
    ]


async def test_reasoning_without_encrypted_content_is_not_replayed(clock: Any) -> None:
    item = {"id": "rs_1", "type": "reasoning", "summary": []}
    ctx = context(
        UserMessage.text("q"),
        reply(
            ThinkingContent("", thinking_signature=json.dumps(item)),
            ToolCall("call_1|fc_1", "echo", {}),
            stop_reason="toolUse",
        ),
        ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="echo", content=[TextContent("a")]),
    )
    body = await request_of(ctx)
    assert body["input"][1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "echo", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a"},
    ]


async def test_a_text_only_model_gets_no_images(clock: Any) -> None:
    ctx = context(
        UserMessage((TextContent("look"), IMAGE)),
        reply(ToolCall("call_1|fc_1", "echo", {}), stop_reason="toolUse"),
        ToolResultMessage(tool_call_id="call_1|fc_1", tool_name="echo", content=[IMAGE]),
    )
    body = await request_of(ctx, model_kwargs={"input": ("text",)})
    assert (body["input"][0], body["input"][2]) == (
        {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": "(image omitted: the model does not accept images)",
        },
    )


async def test_reasoning_options_ask_for_the_encrypted_reasoning(clock: Any) -> None:
    body = await request_of(
        model_kwargs={"id": "gpt-5", "reasoning": True},
        reasoning="xhigh",
        temperature=0.3,
        max_tokens=2048,
    )
    del body["input"]
    assert body == {
        "model": "gpt-5",
        "stream": True,
        "store": False,
        "max_output_tokens": 2048,
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
    }


async def test_minimal_reasoning_is_sent_as_is(clock: Any) -> None:
    body = await request_of(model_kwargs={"id": "gpt-5", "reasoning": True}, reasoning="minimal")
    assert body["reasoning"] == {"effort": "minimal", "summary": "auto"}


async def test_without_a_level_temperature_is_sent_and_reasoning_is_off(clock: Any) -> None:
    """A reasoning model the catalog does not describe here (another server) says
    nothing of its ``off``: reasoning is turned off with ``"none"``, as pi-ai does."""
    body = await request_of(
        model_kwargs={"id": "gpt-5", "reasoning": True}, temperature=0.3, session_id="s-1"
    )
    del body["input"]
    assert body == {
        "model": "gpt-5",
        "stream": True,
        "store": False,
        "temperature": 0.3,
        "reasoning": {"effort": "none"},
        "prompt_cache_key": "s-1",
    }


@pytest.mark.parametrize(
    ("id", "level", "effort"),
    [
        ("gpt-5.4", "minimal", "low"),  # minimal: None, the nearest offered above
        ("gpt-5.4", "xhigh", "xhigh"),  # mapped: sent as it is
        ("gpt-5-pro", "low", "high"),  # only high is offered
        ("gpt-5.5-pro", "low", "medium"),  # low: None, the nearest above
        ("o3", "xhigh", "high"),  # not offered: the nearest below
    ],
)
async def test_a_level_is_sent_as_the_models_thinking_levels_map_it(
    clock: Any, id: str, level: str, effort: str
) -> None:
    async with open_sse_server(sse("text.sse")) as server:
        catalog = attrs.evolve(openai_responses.model(id), base_url=server.url + "/v1")
        await call(openai_responses.stream, catalog, None, options(reasoning=level))
    body = server.requests[0].json
    pydantic.TypeAdapter(
        openai.types.responses.response_create_params.ResponseCreateParamsStreaming
    ).validate_python(body)
    assert body["reasoning"] == {"effort": effort, "summary": "auto"}


async def test_a_model_that_cannot_reason_gets_no_reasoning(clock: Any) -> None:
    body = await request_of(reasoning="high")
    assert ("reasoning" in body, "include" in body) == (False, False)


async def test_headers_and_path(clock: Any) -> None:
    async with open_sse_server(sse("text.sse")) as server:
        await call(
            openai_responses.stream,
            model(server.url, headers={"x-model": "m", "x-both": "model"}),
            opts=options(headers={"x-option": "o", "x-both": "option"}),
        )
    recorded = server.requests[0]
    headers = {
        name: recorded.headers[name]
        for name in ("authorization", "x-model", "x-option", "x-both", "content-type")
    }
    assert (recorded.method, recorded.path, headers) == (
        "POST",
        "/v1/responses",
        {
            "authorization": "Bearer test-key",
            "x-model": "m",
            "x-option": "o",
            "x-both": "option",
            "content-type": "application/json",
        },
    )


async def test_the_key_is_never_in_an_error(clock: Any) -> None:
    denied = ScriptedResponse(
        status=401,
        body=b'{"error": {"message": "Incorrect API key provided: test-key", "type": "auth"}}',
        content_type="application/json",
    )
    in_band = sse_body(
        [("error", {"type": "error", "code": "bad", "message": "key test-key is revoked"})]
    )
    async with open_sse_server(denied, ScriptedResponse(body=in_band)) as server:
        first = await call(openai_responses.stream, model(server.url))
        second = await call(openai_responses.stream, model(server.url))
    assert (first.message.error_message, second.message.error_message) == (
        "HTTP 401 from openai: auth: Incorrect API key provided: ***",
        "openai reported an error: bad: key *** is revoked",
    )
    assert "test-key" not in repr(first.events + second.events)


async def test_429_is_retried_after_what_the_server_asks(clock: Any) -> None:
    limited = ScriptedResponse(
        status=429,
        body=b'{"error": {"message": "Rate limit reached", "type": "requests"}}',
        headers={"retry-after": "3"},
        content_type="application/json",
    )
    async with open_sse_server(limited, sse("text.sse")) as server:
        start = trio.current_time()
        result = await call(openai_responses.stream, model(server.url))
    assert (result.message.stop_reason, len(server.requests)) == ("stop", 2)
    assert trio.current_time() - start == pytest.approx(3.0, abs=0.2)


async def test_no_key_is_an_error_before_any_request(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = openai_responses.OpenAIResponses(client)
        gpt = openai_responses.model("gpt-4.1")  # at OpenAI's server
        result = await call(provider.stream, gpt, opts=options(api_key=None))
    assert (server.requests, result.types, result.message.error_message) == (
        [],
        ["error"],
        "no API key for openai: set OPENAI_API_KEY, or give api_key (or get_api_key)",
    )


async def test_the_key_comes_from_the_environment(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    async with open_sse_server(sse("text.sse")) as server, as_if_at(server.url) as client:
        provider = openai_responses.OpenAIResponses(client)
        gpt = openai_responses.model("gpt-4.1")
        await call(provider.stream, gpt, opts=options(api_key=None))
    assert server.requests[0].headers["host"] == "api.openai.com"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"


async def test_the_openai_key_is_not_sent_to_another_provider(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    async with open_sse_server(sse("text.sse")) as server:
        await call(
            openai_responses.stream,
            model(server.url, provider="vllm"),
            opts=options(api_key=None),
        )
    assert "authorization" not in server.requests[0].headers


def test_the_model_constructor() -> None:
    built = openai_responses.model("gpt-5", reasoning=True)
    assert (built.api, built.provider, built.base_url, built.reasoning, built.input) == (
        "openai-responses",
        "openai",
        "https://api.openai.com/v1",
        True,
        ("text", "image"),
    )


# --- through the loop ----------------------------------------------------------------------------


async def test_a_tool_loop_sends_the_calls_and_their_outputs_back(clock: Any) -> None:
    async def answer(tool_call_id: str, args: dict[str, Any], on_update: Any) -> ToolResult:
        return ToolResult.text(f"{tool_call_id}: {sorted(args)}")

    tools = [make_tool("get_weather", answer), make_tool("get_time", answer)]
    async with open_sse_server(sse("tool_calls.sse"), sse("text.sse")) as server:
        messages = await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=tools),
            AgentLoopConfig(model=model(server.url), api_key="k"),
            EventRecorder(),
            stream_fn=openai_responses.stream,
        )
    assert messages[-1].text == "Hello, wörld \u2028 ✓"  # type: ignore[union-attr]  # an AssistantMessage, here
    assert server.requests[1].json["input"][1:] == [
        {
            "type": "function_call",
            "id": "fc_a1",
            "call_id": "call_A1",
            "name": "get_weather",
            "arguments": '{"city":"Parisé","days":3}',
        },
        {
            "type": "function_call",
            "id": "fc_b2",
            "call_id": "call_B2",
            "name": "get_time",
            "arguments": '{"tz":"UTC"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_A1",
            "output": "call_A1|fc_a1: ['city', 'days']",
        },
        {"type": "function_call_output", "call_id": "call_B2", "output": "call_B2|fc_b2: ['tz']"},
    ]


# --- what the server sends that is not what the API says --------------------------------------


def _hi_then(*events: dict[str, Any]) -> ScriptedResponse:
    """A response whose message item 0 says "Hi", then ``events``."""
    item = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    opening = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        *events,
    ]
    return ScriptedResponse(body=sse_body([(str(e["type"]), e) for e in opening]))


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"type": ["message"]},
            },
            'item.type is ["message"], not a string',
        ),
        (
            {"type": "response.output_item.done", "item": {"type": "reasoning", "summary": 5}},
            "item.summary is 5, not an array",
        ),
        (
            {"type": "response.output_item.done", "item": {"type": "message", "content": [3]}},
            "item.content[0] is 3, not an object",
        ),
        (
            {"type": "response.output_item.added", "item": {"type": "function_call", "name": 1}},
            "item.name is 1, not a string",
        ),
        (
            {"type": "response.output_text.delta", "output_index": "0", "delta": "lost"},
            'output_index is "0", not an integer',
        ),
        ({"type": "response.output_text.delta", "delta": 5}, "delta is 5, not a string"),
        (
            {"type": "response.completed", "response": {"usage": {"input_tokens": [1]}}},
            "response.usage.input_tokens is [1], not a token count",
        ),
        (
            {"type": "response.incomplete", "response": {"incomplete_details": {"reason": 5}}},
            "response.incomplete_details.reason is 5, not a string",
        ),
    ],
)
async def test_a_field_of_another_type_is_an_error_naming_it_and_its_event_is_not_taken(
    clock: Any, event: dict[str, Any], error: str
) -> None:
    async with open_sse_server(_hi_then(event)) as server:
        result = await call(openai_responses.stream, model(server.url))
    check_stream(result.events)
    message = result.message
    assert message.stop_reason == "error"
    assert message.content == (TextContent("Hi", text_signature="msg_1"),)
    assert message.error_message == f"malformed {event['type']} event from openai: {error}"


async def test_a_whole_count_as_a_float_or_digit_string_is_read(clock: Any) -> None:
    usage = {"input_tokens": 12.0, "output_tokens": "3"}
    response = _hi_then({"type": "response.completed", "response": {"usage": usage}})
    async with open_sse_server(response) as server:
        result = await call(openai_responses.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert result.message.usage == Usage(input=12, output=3, total_tokens=15)


# --- what a run costs: prompt caching, the session, reasoning off ---------------------------------

SESSION_HEADERS = ("session-id", "x-client-request-id", "x-session-affinity", "x-session-id")


async def sent_to(found: Any, **opts: Any) -> Any:
    """The request a run of ``found`` (a catalog model, at its own server) sends, seen on
    loopback: the tool conversation, with a session id (``s-1``, unless given)."""
    return await conversation_request(
        openai_responses.OpenAIResponses, found, sse("text.sse"), "call_1|fc_1", **opts
    )


def session_headers(request: Any) -> dict[str, str]:
    return {name: request.headers[name] for name in SESSION_HEADERS if name in request.headers}


def checked(body: dict[str, Any]) -> dict[str, Any]:
    """``body``, checked strictly against the openai SDK's request type."""
    check(body, ResponseCreateParamsStreaming)
    return body


async def test_gpt_4_1_sends_its_session_as_the_key_and_the_headers(clock: Any) -> None:
    """The session id is the ``prompt_cache_key`` and the ``session-id`` and
    ``x-client-request-id`` headers, as pi-ai sends them; gpt-4.1 does not reason, and
    gets no reasoning field."""
    request = await sent_to(openai_responses.model("gpt-4.1"))
    body = checked(request.json)
    assert (body["prompt_cache_key"], session_headers(request)) == (
        "s-1",
        {"session-id": "s-1", "x-client-request-id": "s-1"},
    )
    assert ("reasoning" in body, "prompt_cache_retention" in body) == (False, False)


async def test_gpt_4_1_keeps_its_cache_a_day_when_asked(clock: Any) -> None:
    body = checked((await sent_to(openai_responses.model("gpt-4.1"), cache_retention="long")).json)
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("s-1", "24h")


@pytest.mark.parametrize("id", ["gpt-5.1", "gpt-5.4", "gpt-5.5"])
async def test_gpt_5_x_turns_reasoning_off_when_no_level_is_asked(clock: Any, id: str) -> None:
    """gpt-5.1 and later reason by default, and bill it: without a level, reasoning is
    turned off with their ``off`` (``effort: "none"``), and no encrypted reasoning is
    asked for; the session goes as with every model."""
    request = await sent_to(openai_responses.model(id), temperature=0.5)
    body = checked(request.json)
    assert (body["reasoning"], "include" in body, body["prompt_cache_key"]) == (
        {"effort": "none"},
        False,
        "s-1",
    )
    assert session_headers(request) == {"session-id": "s-1", "x-client-request-id": "s-1"}


@pytest.mark.parametrize("id", ["gpt-5", "o3", "gpt-5-pro"])
async def test_a_model_that_cannot_turn_reasoning_off_gets_no_reasoning_field(
    clock: Any, id: str
) -> None:
    """Their ``off`` is None (gpt-5's lowest is ``minimal``): no level, no field, as pi-ai."""
    body = checked((await sent_to(openai_responses.model(id))).json)
    assert ("reasoning" in body, "include" in body) == (False, False)


async def test_a_level_that_comes_to_off_turns_reasoning_off(clock: Any) -> None:
    """A level the model offers nothing for, nearest ``off``, is no level."""
    levels = {level: None for level in ("minimal", "low", "medium", "high", "xhigh", "max")}
    found = attrs.evolve(
        openai_responses.model("gpt-5.4"), thinking_levels={**levels, "off": "none"}
    )
    body = checked((await sent_to(found, reasoning="high")).json)
    assert body["reasoning"] == {"effort": "none"}


async def test_explicit_prompt_cache_models_get_the_cache_options(clock: Any) -> None:
    """gpt-5.6's cache is set with ``prompt_cache_options`` (``supportsExplicitPromptCacheMode``):
    thirty minutes for a long cache, explicit breakpoints only (none) without a cache;
    ``prompt_cache_retention`` is not sent."""
    found = openai_responses.model("gpt-5.6-luna")
    long = checked((await sent_to(found, cache_retention="long")).json)
    short = checked((await sent_to(found)).json)
    none = checked((await sent_to(found, cache_retention="none")).json)
    assert [body.get("prompt_cache_options") for body in (long, short, none)] == [
        {"ttl": "30m"},
        None,
        {"mode": "explicit"},
    ]
    assert not [body for body in (long, short, none) if "prompt_cache_retention" in body]
    assert [body.get("prompt_cache_key") for body in (long, short, none)] == ["s-1", "s-1", None]


async def test_the_catalogs_session_format_and_long_retention_flags_are_followed(
    clock: Any,
) -> None:
    """OpenCode takes no ``session-id`` header (``openai-nosession``); xAI keeps no long
    cache, and its reasoning models always get their encrypted reasoning back."""
    opencode = await sent_to(openai_responses.model("gpt-5.1", provider="opencode"))
    assert session_headers(opencode) == {"x-client-request-id": "s-1"}
    grok = (
        await sent_to(openai_responses.model("grok-4.3", provider="xai"), cache_retention="long")
    ).json
    assert "prompt_cache_retention" not in grok
    assert (grok["reasoning"], grok["include"]) == (
        {"effort": "none"},
        ["reasoning.encrypted_content"],
    )


async def test_openrouter_on_responses_gets_its_session_header(clock: Any) -> None:
    found = openai_responses.model("gpt-x", base_url="https://openrouter.ai/api/v1")
    request = await sent_to(found)
    assert session_headers(request) == {"x-session-id": "s-1"}


async def test_no_cache_retention_sends_no_session(clock: Any) -> None:
    request = await sent_to(openai_responses.model("gpt-5.4"), cache_retention="none")
    assert "prompt_cache" not in str(request.json)
    assert session_headers(request) == {}


@pytest.mark.parametrize("retention", ["short", "long"])
@pytest.mark.parametrize("id", ["gpt-4.1", "gpt-5.4", "gpt-5.6-luna"])
async def test_a_long_session_id_never_reaches_a_server_uncut(
    clock: Any, id: str, retention: Any
) -> None:
    """A session id of 100 characters goes in no field and no header whole (OpenAI
    refuses a ``prompt_cache_key`` over 64 characters): its first 64 are sent."""
    request = await sent_to(
        openai_responses.model(id), session_id=LONG_SESSION_ID, cache_retention=retention
    )
    sent = [*request.headers.values(), *strings(request.json)]
    assert not [value for value in sent if LONG_SESSION_ID in value]
    named = [value for value in sent if CUT_SESSION_ID in value]
    assert named == [CUT_SESSION_ID] * 3  # the key, and the two headers
    assert request.json["prompt_cache_key"] == CUT_SESSION_ID


async def test_a_session_id_a_header_cannot_carry_is_sent_percent_encoded(clock: Any) -> None:
    """Not ASCII, a control character, a lone surrogate: the request is still sent, its
    headers naming the conversation the same way each time."""
    request = await sent_to(openai_responses.model("gpt-4.1"), session_id="sé\n\ud800")
    assert session_headers(request) == {
        "session-id": "s%C3%A9%0A%ED%A0%80",
        "x-client-request-id": "s%C3%A9%0A%ED%A0%80",
    }
    assert request.json["prompt_cache_key"].startswith("sé\n")


# --- effort set mid-conversation (supportsMidConvoEffort) ----------------------------------------


def _turn(model: Any, level: str | None, text: str) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text, text_signature="msg_" + text.replace(" ", "_"))],
        api=model.api,
        provider=model.provider,
        model=model.id,
        provider_thinking_level=level,
        stop_reason="stop",
    )


@pytest.mark.parametrize(("level", "effort"), [("low", "low"), ("minimal", "low"), ("max", "max")])
async def test_a_model_whose_effort_is_set_mid_conversation_gets_it_in_configuration_updates(
    clock: Any, level: str, effort: str
) -> None:
    """As pi-ai 1.6: ``reasoning.effort`` stays medium; a ``configuration_update`` item
    before each earlier turn of this model says the effort it was made at, and one at the
    end asks for the level's (the nearest offered, as thinking_levels map it); the reply
    records it as its ``provider_thinking_level``."""
    sol = openai_responses.model("gpt-6-sol")
    assert sol.compat_flags["supportsMidConvoEffort"] is True
    other = openai_responses.model("gpt-5.5")
    transcript = [
        UserMessage.text("one"),
        _turn(sol, "high", "first"),
        UserMessage.text("two"),
        _turn(other, "low", "another model's"),
        UserMessage.text("three"),
        _turn(sol, None, "no level recorded"),
        UserMessage.text("four"),
    ]
    async with open_sse_server(sse("text.sse")) as server:
        model = attrs.evolve(sol, base_url=server.url + "/v1")
        result = await call(
            openai_responses.stream,
            model,
            context(*transcript),
            options(reasoning=level),
        )
    body = server.requests[0].json
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    kinds = [item.get("type") or item["role"] for item in body["input"]]
    assert kinds == [
        "user",
        "configuration_update",
        "message",
        "user",
        "message",
        "user",
        "message",
        "user",
        "configuration_update",
    ]
    assert body["input"][1] == {"type": "configuration_update", "reasoning": {"effort": "high"}}
    assert body["input"][-1] == {"type": "configuration_update", "reasoning": {"effort": effort}}
    assert result.message.provider_thinking_level == effort


async def test_without_a_level_or_the_rule_no_configuration_update_is_sent(clock: Any) -> None:
    sol = openai_responses.model("gpt-6-sol")
    transcript = [UserMessage.text("one"), _turn(sol, "high", "first"), UserMessage.text("two")]
    for model, level, reasoning in [
        (sol, None, {"effort": "none"}),  # no level: its "off", as any model's
        (openai_responses.model("gpt-5.5"), "high", {"effort": "high", "summary": "auto"}),
        (attrs.evolve(sol, reasoning=False), "high", None),  # not a reasoning model
    ]:
        async with open_sse_server(sse("text.sse")) as server:
            result = await call(
                openai_responses.stream,
                attrs.evolve(model, base_url=server.url + "/v1"),
                context(*transcript),
                options(reasoning=level),
            )
        body = checked(server.requests[0].json)
        assert body.get("reasoning") == reasoning
        assert all("type" not in item or item["type"] == "message" for item in body["input"])
        assert result.message.provider_thinking_level is None


async def test_an_earlier_turns_effort_not_one_of_the_apis_is_not_sent_back(clock: Any) -> None:
    sol = openai_responses.model("gpt-6-sol")
    transcript = [UserMessage.text("one"), _turn(sol, 'high"}', "first"), UserMessage.text("two")]
    async with open_sse_server(sse("text.sse")) as server:
        await call(
            openai_responses.stream,
            attrs.evolve(sol, base_url=server.url + "/v1"),
            context(*transcript),
            options(reasoning="low"),
        )
    items = checked(server.requests[0].json)["input"]
    updates = [item for item in items if item.get("type") == "configuration_update"]
    assert updates == [{"type": "configuration_update", "reasoning": {"effort": "low"}}]
