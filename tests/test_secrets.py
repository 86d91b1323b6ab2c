"""The API key never reaches an error message or an event (design.md#invariant-15-no-secret-leaks).

Servers echo keys: in an error body, in a stop reason, in an error event, in
a header the HTTP library quotes. Wherever a server puts the key, and
wherever a cut of its text falls, the reply's ``error_message`` and every
event hold neither the key nor a piece of it cut short (four characters or
more: ``SECRET_FRAGMENT``).

A key repeated with a one-character gap ``len(KEY) + 1`` times, shifted by
every offset in turn, puts a key across any cut at every split point, wherever
the code cuts: the tests need not know where that is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests._providers import Call, call, check_stream, fixture, options
from tests._support import make_tool
from tests.test_transport import APIS, Api
from trio_agent import (
    Agent,
    AgentEvent,
    AgentTool,
    AssistantMessage,
    AssistantMessageEvent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    dumps,
)
from trio_agent._stream import AssistantMessageBuilder
from trio_agent.otel import Tracing
from trio_agent.providers import openai_chat
from trio_agent.providers._common import MAX_ERROR_CHARS, Parser
from trio_agent.providers._guard import KeyFilter, clean_value
from trio_agent.providers._sse import SseEvent
from trio_agent.providers._transport import SECRET_FRAGMENT, error_text, redact
from trio_agent.testing import ScriptedResponse, SSEServer, open_sse_server, sse_body

KEY = "sk-test-0123456789abcdefXYZ"
SHIFTS = range(len(KEY) + 1)
"""Every offset of ``echoes``: together they put a key across a cut at every split."""


def echoes(shift: int, copies: int = 40) -> str:
    """Text that repeats the key, the first copy ``shift`` characters in."""
    return "." * shift + (KEY + " ") * copies


def leaked(text: str) -> int:
    """The length of the longest beginning of the key that ``text`` holds."""
    return max((n for n in range(1, len(KEY) + 1) if KEY[:n] in text), default=0)


def assert_no_key(result: Call) -> None:
    message = result.message
    assert message.stop_reason == "error"
    assert message.error_message
    assert leaked(message.error_message) < SECRET_FRAGMENT, message.error_message
    assert leaked(repr(result.events)) < SECRET_FRAGMENT


async def call_each(api: Api, server: SSEServer, bodies: list[ScriptedResponse]) -> list[Call]:
    """One call per response, in order (the server serves them in that order)."""
    server.add(*bodies)
    results = []
    for _ in bodies:
        opts = options(api_key=KEY, max_retries=0)
        results.append(await call(api.stream, api.model(server.url), opts=opts))
    return results


# -- error bodies: the transport redacts, then cuts --------------------------------------


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_echoed_in_an_error_body_is_gone_wherever_the_cut_falls(
    clock: Any, api: Api
) -> None:
    bodies = [
        ScriptedResponse.error(401, echoes(shift), content_type="text/plain") for shift in SHIFTS
    ]
    bodies += [
        ScriptedResponse.error(401, {"error": {"message": echoes(shift), "type": "auth"}})
        for shift in SHIFTS
    ]
    async with open_sse_server() as server:
        results = await call_each(api, server, bodies)
    for result in results:
        assert_no_key(result)
        assert result.message.error_message is not None
        assert result.message.error_message.startswith("HTTP 401 from ")
        assert "***" in result.message.error_message
        assert leaked(result.message.error_message) < 2  # redacted before it was cut


@given(shift=st.integers(0, 600), json_body=st.booleans())
@settings(max_examples=150)
def test_error_text_redacts_before_it_cuts(shift: int, json_body: bool) -> None:
    text = "." * shift + KEY + " is not a valid key"
    body = json.dumps({"error": {"message": text}}) if json_body else text
    message = error_text(body.encode(), [KEY])
    assert leaked(message) < 2
    assert len(message) <= 500


async def test_a_key_in_a_content_type_or_a_malformed_header_is_gone(clock: Any) -> None:
    """Server text that the transport quotes besides the body: the content type of
    a body that is not a stream, and what h11 quotes of a malformed header line."""
    bodies = [
        ScriptedResponse(body=b"{}", content_type=echoes(3)),
        ScriptedResponse(body=b"", headers={"bad header " + echoes(5): "x"}),
    ]
    async with open_sse_server() as server:
        results = await call_each(APIS[0], server, bodies)
    for result in results:
        assert_no_key(result)
        assert result.message.error_message is not None
        assert len(result.message.error_message) < 700


# -- what the parsers make of the stream: the provider's gate redacts --------------------


def finish_with_the_key(api: Api) -> bytes:
    """A stream that ends normally, its stop reason (or finish message) the key."""
    key = KEY.encode()
    if api.name == "openai-chat":
        return fixture("openai_chat", "unknown_finish_reason.sse").replace(
            b"insufficient_system_resource", key
        )
    if api.name == "anthropic-messages":
        return fixture("anthropic", "unknown_stop_reason.sse").replace(b"brand_new_reason", key)
    if api.name == "openai-responses":
        return fixture("openai_responses", "incomplete_content_filter.sse").replace(
            b"content_filter", key
        )
    candidate = {
        "content": {"role": "model", "parts": [{"text": "Half"}]},
        "finishReason": KEY,
        "finishMessage": f"blocked: {KEY}",
        "index": 0,
    }
    return sse_body([(None, {"candidates": [candidate]})], crlf=True)


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_echoed_as_the_stop_reason_is_gone(clock: Any, api: Api) -> None:
    async with open_sse_server() as server:
        (result,) = await call_each(api, server, [ScriptedResponse(body=finish_with_the_key(api))])
    assert_no_key(result)
    assert "***" in (result.message.error_message or "")


def error_event(api: Api, text: str) -> bytes:
    """An in-band error event whose text is ``text`` (which the parser quotes, cut)."""
    if api.name in ("openai-chat", "anthropic-messages"):
        return sse_body([("error", text)])
    if api.name == "google-generative-ai":
        return sse_body([(None, {"error": text})], crlf=True)
    return sse_body([("error", {"type": "error", "detail": text})])


def malformed_event(api: Api, text: str) -> bytes:
    """An event whose data is ``text``, which is not JSON (the parser quotes it, cut)."""
    name = {"anthropic-messages": "content_block_delta", "openai-responses": "error"}
    return sse_body([(name.get(api.name), text)])


@pytest.mark.parametrize("make", [error_event, malformed_event])
@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_echoed_in_the_stream_is_gone_wherever_the_cut_falls(
    clock: Any, api: Api, make: Any
) -> None:
    bodies = [ScriptedResponse(body=make(api, echoes(shift))) for shift in SHIFTS]
    async with open_sse_server() as server:
        results = await call_each(api, server, bodies)
    for result in results:
        assert_no_key(result)


# -- redact itself ----------------------------------------------------------------------


@given(
    before=st.text(alphabet="ab .:'\"{}", max_size=40),
    after=st.text(alphabet="ab .:'\"{}", max_size=40),
    cut=st.integers(0, 120),
    tail=st.sampled_from(["", "'", '"', ")", " (retry)", ": more", "\n"]),
)
@settings(max_examples=150)
def test_redact_leaves_no_piece_of_a_key_cut_anywhere(
    before: str, after: str, cut: int, tail: str
) -> None:
    text = (before + KEY + after)[:cut] + tail
    assert leaked(redact(text, [KEY])) < SECRET_FRAGMENT


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key {KEY} is bad", "key *** is bad"),
        (f"key {KEY[:10]}", "key ***"),
        (f"key '{KEY[:10]}'", "key '***'"),
        (f"key {KEY[:10]}… and {KEY[:4]}", "key ***… and ***"),
        (f"key {KEY[:3]}", f"key {KEY[:3]}"),  # three characters: a public prefix
        ("sk-testing is a word", "sk-testing is a word"),  # goes on unlike the key
        (f"{KEY[:9]}9 differs", f"{KEY[:9]}9 differs"),
        ("no secret here", "no secret here"),
    ],
)
def test_redact_replaces_whole_keys_and_keys_cut_short(text: str, expected: str) -> None:
    assert redact(text, [KEY]) == expected


def test_redact_ignores_empty_secrets_and_short_ones_are_replaced_whole() -> None:
    assert redact("abc", ["", "b"]) == "a***c"


# -- a parser's own bug is an error reply too ---------------------------------------------


class _BuggyParser(Parser):
    """A parser that fails, where ``where`` says, with an exception it should not raise."""

    def __init__(self, inner: Parser, where: str) -> None:
        super().__init__(inner.model, inner.builder)
        self.inner = inner
        self.where = where
        self.fed = 0

    def feed(self, event: SseEvent) -> Iterable[AssistantMessageEvent]:
        self.fed += 1
        if self.where == "feed" and self.fed == 2:
            raise KeyError(echoes(3, copies=2))
        events = self.inner.feed(event)
        self.finished = self.inner.finished
        return events

    def end(self) -> Iterable[AssistantMessageEvent]:
        if self.where == "end":
            raise TypeError(echoes(5, copies=1))
        return self.inner.end()

    def finish(self) -> AssistantMessage:
        if self.where == "finish":
            raise ValueError(echoes(7, copies=1))
        return self.inner.finish()


class _BuggyChat(openai_chat.OpenAIChat):
    def __init__(self, where: str) -> None:
        super().__init__()
        self.where = where

    def parser(self, model: Model, builder: AssistantMessageBuilder) -> Parser:
        return _BuggyParser(super().parser(model, builder), self.where)


@pytest.mark.parametrize("where", ["feed", "end", "finish"])
async def test_an_unexpected_exception_of_a_parser_ends_the_reply_as_an_error(
    clock: Any, where: str
) -> None:
    """Parsers raise ``ProviderFailure`` for what they cannot read; any other exception
    is a gap in their checks, and still an error reply (its text without the key), never
    an exception out of the run."""
    async with open_sse_server() as server:
        server.add(ScriptedResponse(body=fixture("openai_chat", "text.sse")))
        provider = _BuggyChat(where)
        opts = options(api_key=KEY, max_retries=0)
        result = await call(
            provider.stream, openai_chat.model("gpt-4.1", base_url=server.url + "/v1"), opts=opts
        )
    check_stream(result.events)
    assert_no_key(result)
    error = result.message.error_message or ""
    assert error.startswith("could not read "), error
    expected = {"feed": "KeyError", "end": "TypeError", "finish": "ValueError"}[where]
    assert expected in error


# -- the server chooses the text of an error, not its length -------------------------------


def long_error(api: Api, text: str) -> bytes:
    """A well-formed in-band error event of ``api`` whose message is ``text``."""
    if api.name == "openai-chat":
        return sse_body([(None, {"error": {"message": text, "type": "server_error"}})])
    if api.name == "anthropic-messages":
        return sse_body([("error", {"type": "error", "error": {"type": "x", "message": text}})])
    if api.name == "google-generative-ai":
        return sse_body([(None, {"error": {"code": 503, "message": text}})], crlf=True)
    return sse_body([("error", {"type": "error", "code": "server_error", "message": text})])


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_an_in_band_error_of_any_length_is_cut_after_the_key_is_gone(
    clock: Any, api: Api
) -> None:
    text = "A" * 3_000_000 + " " + echoes(0, copies=2)
    bodies = [
        ScriptedResponse(body=long_error(api, text)),
        ScriptedResponse(body=long_error(api, echoes(1990))),
    ]
    async with open_sse_server() as server:
        results = await call_each(api, server, bodies)
    for result in results:
        assert_no_key(result)
        error = result.message.error_message or ""
        assert len(error) <= MAX_ERROR_CHARS, len(error)
    assert (results[0].message.error_message or "").endswith("AAA [...]")


# -- what the server chooses in a reply: the guarded builder -------------------------------


@attrs.frozen
class Reply:
    """A reply that a server streams: a thinking block, a text block and a tool call, each
    text in the pieces given (one delta each)."""

    id: str = "resp_1"
    thinking: tuple[str, ...] = ("Thinking.",)
    text: tuple[str, ...] = ("Text.",)
    call_id: str = "call_1"
    name: str = "echo"
    arguments: tuple[str, ...] = ('{"value": "x"}',)
    signature: str = "sig_1"

    def body(self, api: Api) -> bytes:
        return {
            "openai-chat": _chat_body,
            "openai-responses": _responses_body,
            "anthropic-messages": _anthropic_body,
            "google-generative-ai": _google_body,
        }[api.name](self)


def _chat_body(reply: Reply) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return None, {"id": reply.id, "object": "chat.completion.chunk", "choices": [choice]}

    events = [chunk({"reasoning_content": piece}) for piece in reply.thinking]
    events += [chunk({"content": piece}) for piece in reply.text]
    for number, piece in enumerate(reply.arguments):
        call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
        if number == 0:
            call.update(id=reply.call_id, type="function")
            call["function"]["name"] = reply.name
        events.append(chunk({"tool_calls": [call]}))
    events.append(chunk({}, "tool_calls" if reply.arguments else "stop"))
    return sse_body(events, done=True)


def _anthropic_body(reply: Reply) -> bytes:
    def delta(index: int, **fields: Any) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {
            "type": "content_block_delta",
            "index": index,
            "delta": fields,
        }

    def block(index: int, content: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_start", {
            "type": "content_block_start",
            "index": index,
            "content_block": content,
        }

    def stop(index: int) -> tuple[str, dict[str, Any]]:
        return "content_block_stop", {"type": "content_block_stop", "index": index}

    message: dict[str, Any] = {"id": reply.id, "type": "message", "role": "assistant"}
    message["content"] = []
    message["usage"] = {"input_tokens": 1, "output_tokens": 1}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message}),
        block(0, {"type": "thinking", "thinking": "", "signature": ""}),
        *(delta(0, type="thinking_delta", thinking=piece) for piece in reply.thinking),
        delta(0, type="signature_delta", signature=reply.signature),
        stop(0),
        block(1, {"type": "text", "text": ""}),
        *(delta(1, type="text_delta", text=piece) for piece in reply.text),
        stop(1),
    ]
    if reply.arguments:
        events += [
            block(2, {"type": "tool_use", "id": reply.call_id, "name": reply.name, "input": {}}),
            *(delta(2, type="input_json_delta", partial_json=piece) for piece in reply.arguments),
            stop(2),
        ]
    reason = "tool_use" if reply.arguments else "end_turn"
    events += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": reason}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse_body(events)


def _responses_body(reply: Reply) -> bytes:
    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, **fields}

    thinking, text = "".join(reply.thinking), "".join(reply.text)
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "encrypted_content": reply.signature,
        "summary": [{"type": "summary_text", "text": thinking}],
    }
    message = {"id": reply.signature, "type": "message", "role": "assistant"}
    done_message = {**message, "content": [{"type": "output_text", "text": text}]}
    call = {"id": "fc_1", "type": "function_call", "call_id": reply.call_id, "name": reply.name}
    place = {"summary_index": 0, "item_id": "rs_1", "output_index": 0}
    events = [
        event("response.created", response={"id": reply.id}),
        event("response.output_item.added", output_index=0, item={**reasoning, "summary": []}),
        event("response.reasoning_summary_part.added", **place),
        *(
            event("response.reasoning_summary_text.delta", delta=piece, **place)
            for piece in reply.thinking
        ),
        event("response.output_item.done", output_index=0, item=reasoning),
        event("response.output_item.added", output_index=1, item={**message, "content": []}),
        *(
            event("response.output_text.delta", output_index=1, content_index=0, delta=piece)
            for piece in reply.text
        ),
        event("response.output_item.done", output_index=1, item=done_message),
    ]
    if reply.arguments:
        events += [
            event("response.output_item.added", output_index=2, item={**call, "arguments": ""}),
            *(
                event("response.function_call_arguments.delta", output_index=2, delta=piece)
                for piece in reply.arguments
            ),
            event(
                "response.output_item.done",
                output_index=2,
                item={**call, "arguments": "".join(reply.arguments)},
            ),
        ]
    events.append(event("response.completed", response={"id": reply.id}))
    return sse_body(events)


def _google_body(reply: Reply) -> bytes:
    def response(*parts: dict[str, Any], finish: str | None = None) -> tuple[None, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return None, {"responseId": reply.id, "candidates": [candidate]}

    thinking = [{"text": piece, "thought": True} for piece in reply.thinking]
    thinking[0]["thoughtSignature"] = reply.signature
    events = [
        *(response(part) for part in thinking),
        *(response({"text": piece}) for piece in reply.text),
    ]
    if reply.arguments:
        arguments = json.loads("".join(reply.arguments))
        call = {"id": reply.call_id, "name": reply.name, "args": arguments}
        events.append(response({"functionCall": call, "thoughtSignature": reply.signature}))
    events.append(response(finish="STOP"))
    return sse_body(events, crlf=True)


def shown(result: Call) -> str:
    """Everything a caller can see of a reply: each event, its partial message built, the
    final message, and the transcript saved."""
    parts = [repr(result.events), repr(result.message), dumps([result.message])]
    for event in result.events:
        partial = getattr(event, "partial", None)
        if partial is not None:
            parts.append(repr(partial))
    return "\n".join(parts)


def streamed(result: Call, index: int) -> str:
    """The deltas of block ``index``, joined."""
    return "".join(
        event.delta  # type: ignore[union-attr]  # a delta event
        for event in result.events
        if event.type.endswith("_delta") and event.content_index == index  # type: ignore[union-attr]
    )


def without_key(text: str) -> str:
    return text.replace(KEY, "***")


def check_blocks(result: Call, reply: Reply, api: Api) -> None:
    """The reply's blocks are the server's with every key as ``***``: each block's final
    text is what was sent with each whole key replaced, and its deltas, joined, are that
    text."""
    message = result.message
    assert message.stop_reason == "toolUse", message.error_message
    thinking, text, call = message.content
    assert isinstance(thinking, ThinkingContent)
    assert isinstance(text, TextContent)
    assert isinstance(call, ToolCall)
    assert thinking.thinking == without_key("".join(reply.thinking))
    assert text.text == without_key("".join(reply.text))
    assert streamed(result, 0) == thinking.thinking
    assert streamed(result, 1) == text.text
    if api.name != "google-generative-ai":  # Gemini sends a call whole, as an object
        assert streamed(result, 2) == without_key("".join(reply.arguments))
    assert call.arguments == clean_value(json.loads("".join(reply.arguments)), KEY)
    assert not any(
        event.type.endswith("_delta") and not event.delta  # type: ignore[union-attr]
        for event in result.events
    )


EVERYWHERE = Reply(
    id=f"resp_{KEY}",
    thinking=("I see ", KEY, " and, cut short, ", KEY[:10]),
    text=("Your key: ", KEY, "."),
    call_id=f"call_{KEY}",
    name=f"echo_{KEY}",
    arguments=('{"value": "', KEY, '", "', KEY, '": {"deep": ["x', KEY, '"]}}'),
    signature=f"sig{KEY}",
)
"""The key in every text a server chooses in a reply."""


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_the_server_echoes_anywhere_in_a_reply_is_gone(clock: Any, api: Api) -> None:
    async with open_sse_server() as server:
        (result,) = await call_each(api, server, [ScriptedResponse(body=EVERYWHERE.body(api))])
    check_stream(result.events)
    assert KEY not in shown(result)
    check_blocks(result, EVERYWHERE, api)
    message = result.message
    thinking, text, call = message.content
    assert message.response_id == "resp_***"
    # A beginning of a key is what the model wrote (a key's public prefix, in code).
    assert thinking.thinking == f"I see *** and, cut short, {KEY[:10]}"  # type: ignore[union-attr]
    assert text.text == "Your key: ***."  # type: ignore[union-attr]
    assert (call.id.partition("|")[0], call.name) == ("call_***", "echo_***")  # type: ignore[union-attr]
    assert call.arguments == {"value": "***", "***": {"deep": ["x***"]}}  # type: ignore[union-attr]
    signatures = [
        getattr(block, field, None)
        for block in message.content
        for field in ("thinking_signature", "text_signature", "thought_signature")
    ]
    if api.name != "openai-chat":  # the one API whose server sends no signature
        assert any(signature and "***" in signature for signature in signatures)


def pieces_of(text: str, size: int) -> tuple[str, ...]:
    return tuple(text[at : at + size] for at in range(0, len(text), size))


PREFIX = KEY[:8]  # "sk-test-": the key's public prefix
CODE = f'if key.startswith("{PREFIX}"): use({PREFIX[:4]}) # {PREFIX}'
PREFIXES = Reply(
    thinking=("Keys begin with ", PREFIX, "."),
    text=tuple(pieces_of(CODE, 3)),
    arguments=(json.dumps({"path": "check.py", "content": CODE, PREFIX: PREFIX[:5]}),),
)
"""What a model writes about keys: their public prefix, in code and in a tool's arguments,
in streamed pieces that end with beginnings of the key."""


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_beginning_of_the_key_the_model_writes_is_kept_as_written(
    clock: Any, api: Api
) -> None:
    """Only whole copies of the key are taken out of a reply: a coding agent's code that
    checks a key's prefix reaches the transcript and the tool as the model wrote it."""
    async with open_sse_server() as server:
        (result,) = await call_each(api, server, [ScriptedResponse(body=PREFIXES.body(api))])
    check_stream(result.events)
    check_blocks(result, PREFIXES, api)
    thinking, text, call = result.message.content
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == f"Keys begin with {PREFIX}."
    assert isinstance(text, TextContent)
    assert text.text == CODE
    assert isinstance(call, ToolCall)
    assert call.arguments == {"path": "check.py", "content": CODE, PREFIX: PREFIX[:5]}


def split_everywhere(shift: int) -> Reply:
    """The key in 5-character deltas, its first copy ``shift`` characters in: over
    ``SHIFTS``, a delta ends at every point of it."""
    arguments = json.dumps({"value": echoes(shift, copies=2)})
    return Reply(
        thinking=pieces_of(echoes(shift, copies=3), 5),
        text=pieces_of(echoes(shift, copies=3)[:-1], 5),  # the last copy ends the block
        arguments=pieces_of(arguments, 5),
    )


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_split_across_deltas_is_gone_wherever_the_split_falls(
    clock: Any, api: Api
) -> None:
    replies = [split_everywhere(shift) for shift in SHIFTS]
    async with open_sse_server() as server:
        bodies = [ScriptedResponse(body=reply.body(api)) for reply in replies]
        results = await call_each(api, server, bodies)
    for reply, result in zip(replies, results, strict=True):
        check_stream(result.events)
        assert KEY not in shown(result)
        check_blocks(result, reply, api)
        assert result.message.text.endswith("*** *** ***")


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_in_json_escapes_is_gone_from_the_parsed_arguments(
    clock: Any, api: Api
) -> None:
    """The streamed text of arguments holds the key's JSON escapes, not its text (no client
    can know every encoding of a key); the arguments, parsed, hold the key: they are
    checked then."""
    escaped = "".join(f"\\u{ord(char):04x}" for char in KEY)
    reply = Reply(arguments=('{"value": "', escaped, '", "', escaped[:36], '": 1}'))
    async with open_sse_server() as server:
        (result,) = await call_each(api, server, [ScriptedResponse(body=reply.body(api))])
    _, _, call = result.message.content
    assert isinstance(call, ToolCall)
    assert call.arguments == {"value": "***", KEY[:6]: 1}  # a beginning: as the model wrote it
    partials = [getattr(event, "partial", None) for event in result.events]
    assert KEY not in repr([partial for partial in partials if partial is not None])


async def test_a_block_a_parser_rebuilds_at_the_end_is_rid_of_the_key_too(clock: Any) -> None:
    """Pieces of an item that come after another opened (OpenAI responses) reach the final
    message, not through the builder's events."""
    (api,) = [api for api in APIS if api.name == "openai-responses"]
    body = fixture("openai_responses", "interleaved.sse").replace(b"echo.", KEY.encode())
    body = body.replace(b'\\"x\\"', b'\\"' + KEY.encode() + b'\\"')
    async with open_sse_server() as server:
        (result,) = await call_each(api, server, [ScriptedResponse(body=body)])
    assert KEY not in shown(result)
    text, call = result.message.content
    assert text == TextContent("Calling ***", text_signature="msg_i1")
    assert isinstance(call, ToolCall)
    assert call.arguments == {"value": "***"}


async def test_arguments_that_come_after_their_call_closed_are_rid_of_the_key(
    clock: Any,
) -> None:
    """OpenAI chat: a fragment of a call that is no longer open (interleaved calls)."""
    (api,) = [api for api in APIS if api.name == "openai-chat"]

    def chunk(index: int, piece: str, **more: Any) -> tuple[None, dict[str, Any]]:
        call = {"index": index, "function": {"arguments": piece, **more}}
        if more:
            call["id"] = f"call_{index}"
        delta = {"tool_calls": [call]}
        return None, {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    end = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    body = sse_body(
        [
            chunk(0, '{"value": "', name="echo"),
            chunk(1, "{}", name="echo"),
            chunk(0, KEY + '"}'),
            (None, end),
        ],
        done=True,
    )
    async with open_sse_server() as server:
        (result,) = await call_each(api, server, [ScriptedResponse(body=body)])
    assert KEY not in shown(result)
    first, _second = result.message.content
    assert first == ToolCall("call_0", "echo", {"value": "***"})


def echo_tool() -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text(json.dumps(args))

    return make_tool("echo", execute)


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_key_the_server_echoes_is_in_no_event_transcript_or_span(
    clock: Any, api: Api
) -> None:
    """Through a run: what listeners see, the saved transcript, and the spans (with their
    content)."""
    reply = attrs.evolve(EVERYWHERE, name="echo")
    answer = Reply(thinking=("Done: ", KEY), text=("It was ", KEY[:12]), arguments=())
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list[AgentEvent] = []

    async def listener(event: AgentEvent) -> None:
        seen.append(event)

    bodies = [ScriptedResponse(body=reply.body(api)), ScriptedResponse(body=answer.body(api))]
    async with open_sse_server(*bodies) as server:
        agent = Agent(api.model(server.url), tools=[echo_tool()], api_key=KEY)
        agent.subscribe(Tracing(tracer_provider, capture_content=True).listener)
        agent.subscribe(listener)
        with trio.fail_after(60):
            await agent.prompt("go")
    assert len(server.requests) == 2
    transcript = list(agent.state.messages)
    results = [m for m in transcript if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id.partition("|")[0] for r in results] == ["call_***"]
    assert not results[0].is_error
    spans = exporter.get_finished_spans()
    traced = [
        (span.name, dict(span.attributes or {}), [dict(e.attributes or {}) for e in span.events])
        for span in spans
    ]
    assert any(attributes.get("gen_ai.response.id") == "resp_***" for _, attributes, _ in traced)
    everything = [repr(seen), dumps(transcript), repr(traced)]
    everything += [repr(getattr(event, "message", None)) for event in seen]
    assert KEY not in "\n".join(everything)
    last = transcript[-1]
    assert isinstance(last, AssistantMessage)
    assert last.text == f"It was {KEY[:12]}"  # a beginning of the key: as the model wrote it


# -- the hold-back filter itself ------------------------------------------------------------

FILTER_KEYS = [KEY, "sk-tesk-tes", "abab-ab", "aXa", "aaaa-b", "ab"]
"""Keys to filter for: a real one, and keys that begin again inside themselves (where a
beginning held back and a whole key overlap)."""


@st.composite
def texts_in_pieces(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A key, and a text made of pieces of it and noise (of its own characters and
    others), cut at random points."""
    key = draw(st.sampled_from(FILTER_KEYS))
    some_of_the_key = st.builds(
        lambda start, end: key[start:end], st.integers(0, len(key)), st.integers(0, len(key))
    )
    noise = st.text(alphabet=sorted(set(key)) + list(" .*'\"X"), max_size=5)
    parts = draw(st.lists(st.one_of(st.just(key), some_of_the_key, noise), max_size=10))
    text = "".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return key, pieces


@given(texts_in_pieces())
@settings(max_examples=400)
def test_the_filter_shows_the_text_with_each_key_replaced_and_never_the_key(
    case: tuple[str, list[str]],
) -> None:
    key, pieces = case
    shown_filter = KeyFilter(key)
    out = ""
    for piece in pieces:
        out += shown_filter.feed(piece)
        assert key not in out  # not even for a moment
    out += shown_filter.finish()
    assert out == "".join(pieces).replace(key, "***")
    assert shown_filter.finish() == ""  # nothing is held after the end


def test_the_filter_passes_a_piece_without_a_beginning_of_the_key_as_it_is() -> None:
    key_filter = KeyFilter(KEY)
    text = "plain text, tokens of it: sk- and k-test"
    assert key_filter.feed(text) is text
    assert key_filter.feed("ends with s") == "ends with "  # "s" may begin the key
    assert key_filter.feed("k-test-0") == ""
    assert key_filter.feed("1Q") == "sk-test-01Q"  # "Q" where "2" would be: not the key
    assert key_filter.feed('startswith("sk-test-")') == 'startswith("sk-test-")'  # a prefix
    assert key_filter.feed(KEY[:5]) == ""
    assert key_filter.finish() == KEY[:5]  # not the key: what the model wrote


# -- a key or a header HTTP cannot carry ---------------------------------------------------------

UNSENDABLE_KEYS = [KEY + "é", KEY + "\r\nx-injected: 1", KEY + "\n", "\x00" + KEY]


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
@pytest.mark.parametrize("key", UNSENDABLE_KEYS, ids=["non-ascii", "crlf", "lf", "nul"])
async def test_a_key_http_cannot_carry_is_an_error_reply_that_does_not_show_it(
    clock: Any, api: Api, key: str
) -> None:
    """httpx2 raises for a header value that is not ASCII (out of ``prompt()``), and h11's
    error quotes a value with a CR or LF escaped, where the key is no longer found."""
    async with open_sse_server() as server:
        result = await call(api.stream, api.model(server.url), opts=options(api_key=key))
        assert server.requests == []  # nothing was sent
    message = result.message
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert "holds a character an HTTP header cannot carry" in message.error_message
    assert leaked(message.error_message) < SECRET_FRAGMENT, message.error_message
    assert leaked(repr(result.events)) < SECRET_FRAGMENT


async def test_a_header_value_http_cannot_carry_is_an_error_reply_naming_the_header(
    clock: Any,
) -> None:
    async with open_sse_server() as server:
        result = await call(
            openai_chat.stream,
            openai_chat.model("m", base_url=server.url),
            opts=options(api_key=KEY, headers={"x-team": "équipe"}),
        )
        assert server.requests == []
    assert result.message.error_message == (
        "the request was not sent: the value of its header 'x-team' (the API key, if the "
        "header carries it) holds a character an HTTP header cannot carry (one that is not "
        "ASCII, or a control character)"
    )
