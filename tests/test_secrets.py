"""The API key never reaches an error message or an event (invariants.md 15).

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

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._providers import Call, call, check_stream, fixture, options
from tests.test_transport import APIS, Api
from trio_agent import AssistantMessage, AssistantMessageEvent, Model
from trio_agent._stream import AssistantMessageBuilder
from trio_agent.providers import openai_chat
from trio_agent.providers._common import MAX_ERROR_CHARS, Parser
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
        assert len(error) <= MAX_ERROR_CHARS + len(" [...]"), len(error)
    assert (results[0].message.error_message or "").endswith("AAA [...]")
