"""Error replies a caller can act on: their kind, HTTP status and retry delay, and
context overflow told as pi-ai's ``isContextOverflow`` tells it.

Every API is tested on loopback through the real HTTP client; the classifier is
fuzzed with what a server may choose.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import typing
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests._providers import Call, call, fixture, io_clock, options
from tests.test_transport import APIS, TEXT, Api
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ErrorKind,
    StreamError,
    TranscriptError,
    Usage,
    UserMessage,
    dumps,
    is_context_overflow,
    loads,
    run_agent_loop,
)
from trio_agent._overflow import _NOT_OVERFLOW, _OVERFLOW, error_kind
from trio_agent.providers import anthropic, faux, google, openai_chat, openai_responses
from trio_agent.testing import EventRecorder, ScriptedResponse, open_sse_server, sse_body

KINDS = typing.get_args(ErrorKind)
BY_NAME = {api.name: api for api in APIS}
ANTHROPIC = BY_NAME[anthropic.API]
CHAT = BY_NAME[openai_chat.API]
RESPONSES = BY_NAME[openai_responses.API]
GOOGLE = BY_NAME[google.API]


async def reply_to(api: Api, *responses: ScriptedResponse, **opts: Any) -> AssistantMessage:
    opts.setdefault("max_retries", 0)
    async with open_sse_server(*responses) as server:
        result: Call = await call(api.stream, api.model(server.url), opts=options(**opts))
    last = result.events[-1]
    assert isinstance(last, StreamError)
    assert last.error == result.message
    return result.message


def fields(message: AssistantMessage) -> tuple[str, ErrorKind | None, int | None, float | None]:
    return message.stop_reason, message.error_kind, message.http_status, message.retry_after


# -- HTTP statuses -----------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_429_is_a_rate_limit_with_its_status_and_retry_after(clock: Any, api: Api) -> None:
    limited = ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=7)
    message = await reply_to(api, limited)
    assert fields(message) == ("error", "rate_limit", 429, 7.0)
    assert not is_context_overflow(message)


async def test_a_retry_after_in_milliseconds_is_read_in_seconds(clock: Any) -> None:
    limited = ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after_ms=1500)
    assert fields(await reply_to(CHAT, limited)) == ("error", "rate_limit", 429, 1.5)


async def test_a_google_retry_delay_in_the_body_is_the_retry_after(clock: Any) -> None:
    body = {
        "error": {
            "code": 429,
            "message": "Quota exceeded",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34s"}],
        }
    }
    message = await reply_to(GOOGLE, ScriptedResponse.error(429, body))
    assert fields(message) == ("error", "rate_limit", 429, 34.0)


async def test_after_the_retries_run_out_the_last_errors_fields_are_kept(clock: Any) -> None:
    responses = [
        ScriptedResponse.error(503, {"error": {"message": "Unavailable"}}, retry_after=1),
        ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=2),
        ScriptedResponse.error(429, {"error": {"message": "Slower"}}, retry_after=3),
    ]
    message = await reply_to(CHAT, *responses, max_retries=2)
    assert fields(message) == ("error", "rate_limit", 429, 3.0)
    assert message.error_message == "HTTP 429 from openai: Slower"


async def test_a_retry_delay_past_the_limit_keeps_the_fields(clock: Any) -> None:
    limited = ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=3600)
    message = await reply_to(CHAT, limited, max_retries=2, max_retry_delay=60)
    assert fields(message) == ("error", "rate_limit", 429, 3600.0)


@pytest.mark.parametrize("forever", ["inf", "1e400"])
async def test_a_wait_forever_is_no_retry_delay(clock: Any, forever: str) -> None:
    # A program that sleeps for a reply's retry_after must not sleep forever.
    limited = ScriptedResponse.error(
        429, {"error": {"message": "Slow down"}}, headers={"retry-after": forever}
    )
    message = await reply_to(CHAT, limited, max_retries=2)
    assert fields(message) == ("error", "rate_limit", 429, None)
    assert message.error_message is not None
    assert "wait forever" in message.error_message


async def test_a_reply_that_succeeds_after_a_retry_has_no_error_fields(clock: Any) -> None:
    """The fields are the failure's: a retry that succeeds leaves none of the 429's."""
    responses = [
        ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=2),
        ScriptedResponse(body=TEXT),
    ]
    async with open_sse_server(*responses) as server:
        result = await call(CHAT.stream, CHAT.model(server.url), opts=options(max_retries=1))
    assert fields(result.message) == ("stop", None, None, None)
    assert len(server.requests) == 2


async def test_a_529_from_anthropic_is_overloaded(clock: Any) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    message = await reply_to(ANTHROPIC, ScriptedResponse.error(529, body))
    assert fields(message) == ("error", "overloaded", 529, None)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            401,
            {"error": {"type": "authentication_error", "message": "invalid x-api-key"}},
            "authentication",
        ),
        (403, {"error": {"message": "Forbidden"}}, "authentication"),
        (400, {"error": {"type": "invalid_request_error", "message": "bad tool"}}, "refused"),
        (404, {"error": {"message": "model not found"}}, "refused"),
        (422, {"error": {"message": "unprocessable"}}, "refused"),
        (500, {"error": {"type": "server_error", "message": "oops"}}, "server"),
        (502, "<html>Bad gateway</html>", "server"),
        (413, {"error": {"message": "failed to parse request", "code": ""}}, "context_overflow"),
    ],
)
async def test_each_status_has_its_kind(
    clock: Any, status: int, body: Any, kind: ErrorKind
) -> None:
    message = await reply_to(CHAT, ScriptedResponse.error(status, body))
    assert fields(message) == ("error", kind, status, None)


# -- context overflow, as each service says it ---------------------------------------------

OVERFLOWS = [
    (
        ANTHROPIC,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 213462 tokens > 200000 maximum",
            },
        },
    ),
    (
        CHAT,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 140000 tokens.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    (
        RESPONSES,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust "
                "your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
    ),
    (
        GOOGLE,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1196265) exceeds the maximum number of tokens "
                "allowed (1048575).",
                "status": "INVALID_ARGUMENT",
            }
        },
    ),
]


@pytest.mark.parametrize(("api", "body"), OVERFLOWS, ids=[api.name for api, _ in OVERFLOWS])
async def test_each_services_context_overflow_is_recognised(
    clock: Any, api: Api, body: dict[str, Any]
) -> None:
    message = await reply_to(api, ScriptedResponse.error(400, body))
    assert fields(message) == ("error", "context_overflow", 400, None)
    assert is_context_overflow(message)


async def test_openais_overflow_code_is_enough_without_the_words(clock: Any) -> None:
    body = {
        "error": {
            "message": "No.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    message = await reply_to(CHAT, ScriptedResponse.error(400, body))
    assert message.error_kind == "context_overflow"


async def test_cerebras_says_overflow_with_an_empty_400(clock: Any) -> None:
    def cerebras(url: str) -> Any:
        return openai_chat.model("gpt-4.1", base_url=url + "/v1", provider="cerebras")

    api = attrs.evolve(CHAT, model=cerebras)
    empty = ScriptedResponse.error(400, b"")
    message = await reply_to(api, empty)
    assert message.error_message == "HTTP 400 from cerebras: (empty body)"
    assert message.error_kind == "context_overflow"
    other = await reply_to(CHAT, ScriptedResponse.error(400, b""))  # from openai: refused
    assert other.error_kind == "refused"


# -- errors inside a 200 stream ------------------------------------------------------------


async def test_an_overloaded_error_inside_anthropics_stream(clock: Any) -> None:
    body = fixture("anthropic", "in_band_error.sse")
    message = await reply_to(ANTHROPIC, ScriptedResponse(body=body))
    assert fields(message) == ("error", "overloaded", None, None)
    assert message.text == "Partial answ"


def responses_stream(*events: dict[str, Any]) -> bytes:
    created = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}
    return sse_body([(event["type"], event) for event in (created, *events)])


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        (
            {
                "type": "response.failed",
                "response": {
                    "id": "resp_1",
                    "status": "failed",
                    "error": {
                        "code": "context_length_exceeded",
                        "message": "Your input exceeds the context window of this model.",
                    },
                },
            },
            "context_overflow",
        ),
        (
            {"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit reached"},
            "rate_limit",
        ),
        ({"type": "error", "code": "server_error", "message": "Sorry"}, "server"),
        (
            {
                "type": "response.incomplete",
                "response": {"id": "resp_1", "incomplete_details": {"reason": "content_filter"}},
            },
            "refused",
        ),
    ],
    ids=["failed", "error", "server", "incomplete"],
)
async def test_errors_inside_a_responses_stream(
    clock: Any, event: dict[str, Any], kind: ErrorKind
) -> None:
    message = await reply_to(RESPONSES, ScriptedResponse(body=responses_stream(event)))
    assert fields(message) == ("error", kind, None, None)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "The server had an error.", "type": "server_error"}, "server"),
        ({"message": "Too long", "code": "context_length_exceeded"}, "context_overflow"),
        ({"message": "Rate limit exceeded", "code": 429}, "rate_limit"),
    ],
)
async def test_errors_inside_a_chat_stream(
    clock: Any, error: dict[str, Any], kind: ErrorKind
) -> None:
    start = {"id": "c-1", "choices": [{"index": 0, "delta": {"content": "Part"}}]}
    body = sse_body([(None, start), (None, {"error": error})])
    message = await reply_to(CHAT, ScriptedResponse(body=body))
    assert fields(message) == ("error", kind, None, None)
    assert message.text == "Part"


async def test_an_error_inside_a_google_stream(clock: Any) -> None:
    body = fixture("google", "error_mid_stream.sse")
    message = await reply_to(GOOGLE, ScriptedResponse(body=body))
    assert fields(message) == ("error", "server", None, None)


async def test_an_unknown_stop_reason_is_refused(clock: Any) -> None:
    body = fixture("anthropic", "unknown_stop_reason.sse")
    message = await reply_to(ANTHROPIC, ScriptedResponse(body=body))
    assert fields(message) == ("error", "refused", None, None)


async def test_a_refusal_stop_is_refused(clock: Any) -> None:
    message = await reply_to(ANTHROPIC, ScriptedResponse(body=fixture("anthropic", "refusal.sse")))
    assert fields(message) == ("error", "refused", None, None)


# -- the network, the reply, the key, an abort ------------------------------------------------


async def test_a_dropped_connection_is_network(clock: Any) -> None:
    dropped = ScriptedResponse(body=TEXT, drop_after=len(TEXT) // 2)
    assert fields(await reply_to(CHAT, dropped)) == ("error", "network", None, None)


async def test_a_stalled_stream_is_network(clock: Any) -> None:
    stalled = ScriptedResponse(body=TEXT, stall_after=len(TEXT) // 2)
    assert (await reply_to(CHAT, stalled)).error_kind == "network"


async def test_a_server_that_is_not_there_is_network(clock: Any) -> None:
    async with open_sse_server() as server:
        url = server.url
    result = await call(CHAT.stream, CHAT.model(url), opts=options(max_retries=0))
    assert fields(result.message) == ("error", "network", None, None)


async def test_a_body_that_is_not_a_stream_is_malformed(clock: Any) -> None:
    html = ScriptedResponse(body=b"<html>hi</html>", content_type="text/html")
    assert fields(await reply_to(CHAT, html)) == ("error", "malformed", None, None)


async def test_an_error_sent_with_a_200_says_its_kind(clock: Any) -> None:
    # A proxy that answers 200 with a JSON error: the reply is not a stream, and still
    # an input too long (by its code, or by its words) or a rate limit.
    for body, kind in [
        (
            b'{"error": {"code": "context_length_exceeded", "message": "Too long"}}',
            "context_overflow",
        ),
        (
            b'{"error": {"message": "prompt is too long: 213462 tokens > 200000 maximum"}}',
            "context_overflow",
        ),
        (b'{"error": {"code": "rate_limit_exceeded", "message": "Slow down"}}', "rate_limit"),
    ]:
        sent = ScriptedResponse(body=body, content_type="application/json")
        message = await reply_to(CHAT, sent)
        assert fields(message) == ("error", kind, None, None)
        assert is_context_overflow(message) == (kind == "context_overflow")


async def test_an_event_that_is_not_json_is_malformed(clock: Any) -> None:
    broken = ScriptedResponse(body=TEXT, malformed_after=0)
    assert (await reply_to(CHAT, broken)).error_kind == "malformed"


async def test_a_missing_key_is_authentication() -> None:
    model = openai_chat.model("gpt-4.1", base_url="http://127.0.0.1:9/v1", provider="openai")
    result = await call(CHAT.stream, model, opts=options(api_key=None))
    assert fields(result.message) == ("error", "authentication", None, None)


async def test_an_abort_is_aborted(autojump_clock: Any) -> None:
    model = faux.model([faux.reply("a long answer")], pace=10, chunk_size=1)
    abort = trio.CancelScope()
    recorder = EventRecorder()

    async def emit(event: Any) -> None:
        await recorder(event)
        if event.type == "message_update":
            abort.cancel()

    new = await run_agent_loop(
        [UserMessage.text("go")], AgentContext(), AgentLoopConfig(model=model), emit, abort
    )
    reply = new[-1]
    assert isinstance(reply, AssistantMessage)
    assert (reply.stop_reason, reply.error_kind, reply.http_status) == ("aborted", "aborted", None)


# -- the scripted model ----------------------------------------------------------------------


async def test_a_scripted_error_carries_its_kind_status_and_delay() -> None:
    model = faux.model(
        [
            faux.error("Slow down", kind="rate_limit", http_status=429, retry_after=2.5),
            faux.reply("x", stop_reason="error", error_kind="context_overflow"),
            faux.reply("fine", error_kind="server"),  # not an error: no kind
            faux.reply(stop_reason="aborted"),
        ]
    )
    got = []
    for _ in range(4):
        got.append(await call(faux.stream, model))
    assert [fields(result.message) for result in got] == [
        ("error", "rate_limit", 429, 2.5),
        ("error", "context_overflow", None, None),
        ("stop", None, None, None),
        ("aborted", "aborted", None, None),
    ]
    assert is_context_overflow(got[1].message)


# -- transcripts ----------------------------------------------------------------------------


def test_the_fields_round_trip_and_are_left_out_when_none() -> None:
    failed = AssistantMessage(
        stop_reason="error",
        error_message="HTTP 429 from openai: Slow down",
        error_kind="rate_limit",
        http_status=429,
        retry_after=1.5,
        timestamp=1,
    )
    text = dumps([failed])
    assert '"errorKind": "rate_limit", "httpStatus": 429, "retryAfter": 1.5' in text
    assert loads(text) == [failed]
    plain = dumps([AssistantMessage(stop_reason="error", error_message="x", timestamp=1)])
    assert [key for key in ("errorKind", "httpStatus", "retryAfter") if key in plain] == []


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("errorKind", "slow", "expected one of 'rate_limit', "),
        ("errorKind", 5, "got int 5 @ $[0].errorKind"),
        ("httpStatus", "429", "expected an integer, got str '429' @ $[0].httpStatus"),
        ("httpStatus", 4.5, "expected an integer, got float 4.5 @ $[0].httpStatus"),
        ("retryAfter", "soon", "expected a number, got str 'soon' @ $[0].retryAfter"),
    ],
)
def test_loads_refuses_bad_fields_naming_them(key: str, value: Any, problem: str) -> None:
    text = json.dumps([{"role": "assistant", "stopReason": "error", key: value}])
    with pytest.raises(TranscriptError) as caught:
        loads(text)
    assert problem in str(caught.value)
    assert key in str(caught.value)


# -- is_context_overflow ------------------------------------------------------------------

# Each service's words, as pi-ai's overflow.js lists them (and one more for each code).
SAID = [
    "prompt is too long: 213462 tokens > 200000 maximum",
    '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
    "Your input exceeds the context window of this model",
    "Requested token count exceeds the model's maximum context length of 131072 tokens",
    "litellm.ContextWindowExceededError: x. Context Window exceeded for given call.",
    "Input length (265330) exceeds model's maximum context length (262144).",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
    "Please reduce the length of the messages or completion",
    "This endpoint's maximum context length is 128000 tokens. However, you requested 140000",
    "Input length 9000 exceeds the maximum allowed input length of 8192 tokens.",
    "The input (9000 tokens) is longer than the model's context length (8192 tokens).",
    "the request exceeds the available context size, try increasing it",
    "tokens to keep from the initial prompt is greater than the context length",
    "prompt token count of 130000 exceeds the limit of 128000",
    'github-copilot API error (413): {"message":"failed to parse request","code":""}',
    "invalid params, context window exceeds limit",
    "Your request exceeded model token limit: 262144 (requested: 300000)",
    "Prompt has 70000 tokens, but the configured context size is 65536 tokens",
    "Prompt contains 140000 tokens, too large for model with 131072 maximum context length",
    '{"code":"1261","message":"Prompt too long"}',
    "Prompt exceeds max length",
    "Range of input length should be [1, 129024]",
    "prompt too long; exceeded max context length by 1200 tokens",
    "Input is too long for requested model.",
    "finished with stop_reason 'model_context_window_exceeded'",
    "context_length_exceeded",
    "too many tokens in the request",
    "token limit exceeded",
    "HTTP 413 from github-copilot: failed to parse request",
]

NOT_SAID = [
    "Throttling error: Too many tokens, please wait before trying again.",
    "Service unavailable: prompt is too long",
    "Rate limit reached: too many tokens per min",
    "429 Too Many Requests: too many tokens",
    "HTTP 400 from openai: bad tool schema",
    "the body said 413 somewhere",
]


def error_reply(text: str, provider: str = "openai") -> AssistantMessage:
    return AssistantMessage(stop_reason="error", error_message=text, provider=provider)


@pytest.mark.parametrize("text", SAID)
def test_each_services_words_are_an_overflow(text: str) -> None:
    assert is_context_overflow(error_reply(text))
    assert error_kind(text) == "context_overflow"


@pytest.mark.parametrize("text", NOT_SAID)
def test_a_rate_limit_or_another_error_is_no_overflow(text: str) -> None:
    assert not is_context_overflow(error_reply(text))


def test_the_table_has_a_pattern_for_each_example() -> None:
    assert (len(_OVERFLOW), len(_NOT_OVERFLOW)) == (27, 3)  # as many as pi-ai's


def test_cerebras_bodyless_is_an_overflow_only_from_cerebras() -> None:
    for text in ("400 status code (no body)", "HTTP 400 from cerebras: (empty body)"):
        assert is_context_overflow(error_reply(text, "cerebras"))
        assert not is_context_overflow(error_reply(text, "groq"))


def test_the_kind_decides_when_there_is_one() -> None:
    words = "prompt is too long: 213462 tokens > 200000 maximum"
    assert not is_context_overflow(attrs.evolve(error_reply(words), error_kind="rate_limit"))
    assert is_context_overflow(attrs.evolve(error_reply("no"), error_kind="context_overflow"))


def test_a_reply_over_the_window_is_a_silent_overflow() -> None:
    over = AssistantMessage(usage=Usage(input=150_000, cache_read=40_000, cache_write=20_000))
    assert is_context_overflow(over, context_window=200_000)
    assert not is_context_overflow(over, context_window=210_000)
    assert not is_context_overflow(over)  # without the window, nothing to compare with


def test_a_length_stop_without_output_filling_the_window_is_an_overflow() -> None:
    full = AssistantMessage(stop_reason="length", usage=Usage(input=99_000, output=0))
    assert is_context_overflow(full, context_window=100_000)
    assert not is_context_overflow(full, context_window=101_000)  # 98% full
    assert not is_context_overflow(attrs.evolve(full, usage=Usage(input=99_000, output=1)), 100_000)


def test_an_aborted_reply_is_no_overflow() -> None:
    aborted = AssistantMessage(stop_reason="aborted", error_message="prompt is too long")
    assert not is_context_overflow(aborted, context_window=1)


# -- fuzz: whatever the server says ---------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(
    text=st.text(max_size=2000) | st.sampled_from(SAID + NOT_SAID),
    status=st.none() | st.integers(-(2**70), 2**70) | st.integers(100, 599),
    codes=st.lists(JSON_VALUES, max_size=4),
    provider=st.sampled_from(["", "cerebras", "openai"]) | st.text(max_size=10),
)
@example(text="prompt is too long \ud800", status=None, codes=["\udfff"], provider="cerebras")
@settings(max_examples=200)
def test_the_classifier_takes_anything(
    text: str, status: int | None, codes: list[Any], provider: str
) -> None:
    assert error_kind(text, status=status, codes=codes, provider=provider) in KINDS


@given(
    stop_reason=st.sampled_from(["stop", "length", "toolUse", "error", "aborted"]),
    text=st.none() | st.text(max_size=300),
    kind=st.none() | st.sampled_from(KINDS),
    window=st.none() | st.integers(-5, 2**70),
    counts=st.lists(st.integers(0, 2**70), min_size=3, max_size=3),
)
@settings(max_examples=200)
def test_is_context_overflow_takes_any_reply(
    stop_reason: Any, text: str | None, kind: Any, window: int | None, counts: list[int]
) -> None:
    usage = Usage(input=counts[0], output=counts[1], cache_read=counts[2])
    message = AssistantMessage(
        stop_reason=stop_reason, error_message=text, error_kind=kind, usage=usage
    )
    assert is_context_overflow(message, window) in (True, False)


ERROR_BODIES = st.binary(max_size=200) | st.builds(
    lambda value: json.dumps({"error": value}).encode(), JSON_VALUES
)
HEADER_VALUES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)


@given(
    api=st.sampled_from(APIS),
    status=st.integers(400, 599),
    body=ERROR_BODIES,
    retry_after=st.none() | HEADER_VALUES,
)
@settings(max_examples=15)
def test_whatever_an_error_response_holds_the_reply_has_a_kind_and_its_status(
    api: Api, status: int, body: bytes, retry_after: str | None
) -> None:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    response = ScriptedResponse(
        status=status, body=body, headers=headers, content_type="application/json"
    )

    async def main() -> AssistantMessage:
        async with open_sse_server(response) as server:
            result = await call(api.stream, api.model(server.url), opts=options(max_retries=0))
        return result.message

    message = trio.run(main, clock=io_clock())
    assert message.stop_reason == "error"
    assert message.error_kind in KINDS
    assert message.http_status == status
    assert message.retry_after is None or message.retry_after >= 0
    assert not (message.retry_after is not None and math.isnan(message.retry_after))


def test_the_patterns_are_compiled_on_the_first_error_read_not_on_import() -> None:
    """``import trio_agent`` (and a run that does not fail) compiles no overflow pattern;
    the first classification does, once."""
    code = (
        "import trio_agent\n"
        "from trio_agent._overflow import _patterns, error_kind\n"
        "assert _patterns.cache_info().currsize == 0, 'compiled on import'\n"
        "assert error_kind('prompt is too long') == 'context_overflow'\n"
        "assert _patterns.cache_info().currsize == 1\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
