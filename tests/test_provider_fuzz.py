"""Every parser ends every stream with a reply, whatever the server sends.

Each example starts from a stream recorded from one of the four APIs (the
fixtures: every event kind each API sends) and breaks it: a field or
subfield at any depth, or the whole event, replaced by an arbitrary JSON
value (deeply nested ones too, past and below jiter's nesting limit, and
strings and objects taken from other recorded events, so that one event
kind is read as another), a key dropped, the data replaced by arbitrary
text, the SSE event name changed, an event left out. The stream then goes
through the API's parser the way ``HttpProvider.stream`` drives it, and the
test asserts exactly what the design promises
(design.md#the-stream-protocol): the stream ends with one
assistant message, a normal one or one with ``stop_reason="error"`` and a
non-empty ``error_message``; nothing but a :class:`ProviderFailure` comes
out of the parser; the stream events are well formed; and the message holds
what its types say (text is text, arguments are objects, token counts are
non-negative integers).

The parsers are fed directly, thousands of examples in a few seconds; a
few examples go end to end over loopback, through the real driver and httpx2.
End to end, the response head is fuzzed too: any status, any content type
with any charset, any ``retry-after`` / ``retry-after-ms`` (NaN, infinities,
numbers past a float's range, dates out of range), any other headers; the
call ends with a reply, and the key the server echoes appears nowhere.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests._providers import FIXTURES, call, check_stream, io_clock, options
from trio_agent import (
    AssistantMessage,
    AssistantMessageEvent,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from trio_agent._stream import AssistantMessageBuilder
from trio_agent.providers import anthropic, google, openai_chat, openai_responses
from trio_agent.providers._sse import SseDecoder, SseEvent
from trio_agent.providers._transport import ProviderFailure
from trio_agent.testing import ScriptedResponse, open_sse_server

# --- the APIs and their recorded streams ---------------------------------------------------------


@attrs.frozen
class Api:
    name: str
    module: ModuleType
    model: Callable[[str], Any]  # base URL -> model
    fixtures: str
    crlf: bool = False  # Google separates events with CRLF

    def streams(self) -> list[list[SseEvent]]:
        """The recorded streams, decoded once (their events are copied before a change)."""
        return _streams(self.fixtures)


@functools.cache
def _streams(fixtures: str) -> list[list[SseEvent]]:
    out = []
    for path in sorted((FIXTURES / fixtures).glob("*.sse")):
        decoder = SseDecoder()
        out.append(decoder.decode(path.read_text("utf-8")) + decoder.flush())
    return out


APIS = [
    Api(
        "openai-chat",
        openai_chat,
        lambda url: openai_chat.model("gpt-4.1", base_url=url + "/v1", provider="openai"),
        "openai_chat",
    ),
    Api("anthropic", anthropic, lambda url: anthropic.model("claude", base_url=url), "anthropic"),
    Api(
        "google",
        google,
        lambda url: google.model("gemini-2.5-flash", base_url=url + "/v1beta"),
        "google",
        crlf=True,
    ),
    Api(
        "openai-responses",
        openai_responses,
        lambda url: openai_responses.model("gpt-5", base_url=url + "/v1"),
        "openai_responses",
    ),
]
BY_NAME = {api.name: api for api in APIS}


def _json_of(event: SseEvent) -> Any:
    try:
        return json.loads(event.data)
    except ValueError:
        return None


def _nodes(value: Any) -> Iterator[Any]:
    """Every value in a JSON tree, the tree itself first."""
    stack = [value]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _paths(value: Any) -> list[tuple[Any, ...]]:
    """The path (keys and indexes) of every value in a JSON tree, ``()`` for the tree."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        out.append(path)
        if isinstance(node, dict):
            stack.extend(((*path, key), item) for key, item in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, index), item) for index, item in enumerate(node))
    return sorted(out, key=lambda p: (len(p), repr(p)))


# --- what a server may send -----------------------------------------------------------------------


@attrs.frozen
class Deep:
    """A value nested ``depth`` arrays (``"["``) or objects (``"{"``) deep, around ``leaf``.

    It is written into an event as JSON text directly: ``json.dumps`` recurses,
    and gives up (``RecursionError``) before 1,000 levels of objects.
    """

    depth: int
    opener: str
    leaf: Any

    MARK = "\0deep\0"  # where it goes, in the event's JSON before it is written in

    def text(self) -> str:
        leaf = json.dumps(self.leaf)
        if self.opener == "[":
            return "[" * self.depth + leaf + "]" * self.depth
        return '{"a":' * self.depth + leaf + "}" * self.depth


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and infinities too: json.dumps writes them, jiter reads them
    | st.text(max_size=8)
    | st.sampled_from(["", "12", "-1", "1.5", "null", "[DONE]", "\u2028"])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
# jiter refuses documents nested deeper than 201 levels: a field nested 150
# deep is accepted and reaches the parser; 250 deep makes the event malformed JSON.
DEEP = st.builds(Deep, st.sampled_from([150, 190, 250, 1000]), st.sampled_from("[{"), SCALARS)


def _recorded_values(api: Api) -> tuple[list[str], list[Any]]:
    """The strings and the objects and arrays in the API's recorded events."""
    strings: set[str] = set()
    trees: list[Any] = []
    for stream in api.streams():
        for event in stream:
            for node in _nodes(_json_of(event)):
                if isinstance(node, str):
                    strings.add(node)
                elif isinstance(node, dict | list) and len(json.dumps(node)) < 2000:
                    trees.append(node)
    return sorted(strings), trees


@functools.cache
def values(api: Api) -> st.SearchStrategy[Any]:
    strings, trees = _recorded_values(api)
    return st.one_of(
        JSON_VALUES,
        st.sampled_from(strings),
        st.sampled_from(trees),
        DEEP,
    )


@st.composite
def broken_streams(draw: st.DrawFn, api: Api) -> list[SseEvent]:
    """A recorded stream of ``api`` with one to three things broken in it."""
    streams = api.streams()
    stream = [attrs.evolve(event) for event in draw(st.sampled_from(streams))]
    names = sorted({event.event for events in streams for event in events})
    any_value = values(api)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        if not stream:
            break
        index = draw(st.integers(min_value=0, max_value=len(stream) - 1))
        event = stream[index]
        how = draw(st.sampled_from(["replace", "drop key", "text", "name", "leave out"]))
        tree = _json_of(event)
        if how in ("replace", "drop key") and tree is not None:
            path = draw(st.sampled_from(_paths(tree)))
            value = None
            if how == "drop key" and path and isinstance(path[-1], str):
                parent = _at(tree, path[:-1])
                del parent[path[-1]]
            else:
                value = draw(any_value)
                tree = _replaced(tree, path, Deep.MARK if isinstance(value, Deep) else value)
            event.data = json.dumps(tree, ensure_ascii=False)
            if isinstance(value, Deep):
                event.data = event.data.replace(json.dumps(Deep.MARK), value.text())
        elif how == "name":
            event.event = draw(st.sampled_from(names) | st.text(max_size=6))
        elif how == "leave out":
            del stream[index]
        else:
            event.data = draw(st.text(max_size=20) | st.sampled_from(["", " ", "[DONE]", "{}"]))
    return stream


def _at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _replaced(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _at(tree, path[:-1])[path[-1]] = value
    return tree


# --- the driver, and what must hold ---------------------------------------------------------------


def drive(api: Api, events: list[SseEvent]) -> tuple[AssistantMessage, list[AssistantMessageEvent]]:
    """The reply ``api``'s parser makes of ``events``, driven as ``HttpProvider.stream``
    drives it: any exception but a ProviderFailure escapes."""
    model = api.model("http://127.0.0.1:1")
    builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
    parser = api.module.provider().parser(model, builder)
    out: list[AssistantMessageEvent] = [builder.start()]
    try:
        for event in events:
            out.extend(parser.feed(event))
            if parser.finished:
                break
        out.extend(parser.end())
        message = parser.finish()
    except ProviderFailure as exc:
        out.extend(parser.end())
        message = builder.finish("error", str(exc))
    out.append(builder.done(message))
    return message, out


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def check_reply(message: AssistantMessage, events: list[AssistantMessageEvent]) -> None:
    """One well-formed stream, ending with ``message``, which holds what its types say."""
    check_stream(events)
    last = events[-1]
    assert (last.message if last.type == "done" else last.error) is message  # type: ignore[union-attr]  # done or error
    if message.stop_reason == "error":
        assert isinstance(message.error_message, str)
        assert message.error_message.strip()
    else:
        assert message.stop_reason in ("stop", "length", "toolUse"), message.stop_reason
        assert message.error_message is None
    starts = [e for e in events if e.type.endswith("_start") and e.type != "start"]
    assert len(message.content) == len(starts)
    deltas: dict[int, list[str]] = {}
    for event in events:
        if event.type in ("text_delta", "thinking_delta"):
            deltas.setdefault(event.content_index, []).append(event.delta)
        elif event.type in ("text_end", "thinking_end"):  # the block is what its deltas brought
            assert event.content == "".join(deltas.get(event.content_index, ())), event
    for block in message.content:
        if isinstance(block, TextContent):
            assert type(block.text) is str
            assert block.text_signature is None or type(block.text_signature) is str
        elif isinstance(block, ThinkingContent):
            assert type(block.thinking) is str
            assert block.thinking_signature is None or type(block.thinking_signature) is str
        else:
            assert isinstance(block, ToolCall)
            assert type(block.id) is str
            assert type(block.name) is str
            assert type(block.arguments) is dict
            assert block.thought_signature is None or type(block.thought_signature) is str
    usage = message.usage
    counts = (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.total_tokens)
    assert all(_count(value) for value in counts), usage
    assert message.response_id is None or type(message.response_id) is str
    for event in events[:-1]:  # every partial message can be read
        if event.type != "start":
            assert event.partial.content is not None  # type: ignore[union-attr]  # not a start


# --- fuzzing the parsers --------------------------------------------------------------------------


def _event(name: str, data: Any) -> SseEvent:
    return SseEvent(name, data if isinstance(data, str) else json.dumps(data))


def _chat(chunk: Any) -> list[SseEvent]:
    return [_event("message", chunk), _event("message", "[DONE]")]


def _gemini(response: Any) -> list[SseEvent]:
    return [_event("message", response)]


DEEP_ARGS = json.loads(Deep(195, "{", 1).text())  # as deep as jiter takes, in the arguments
CHAT_STOP = {"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}
GEMINI_STOP = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}]}


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@_settings(700)
@given(events=broken_streams(BY_NAME["openai-chat"]))
@example(events=_chat({**CHAT_STOP, "usage": {"prompt_tokens": [1]}}))
@example(events=_chat({**CHAT_STOP, "usage": {"completion_tokens": math.nan}}))
@example(events=_chat({**CHAT_STOP, "usage": {"prompt_tokens_details": {"cached_tokens": "x"}}}))
@example(events=_chat({"choices": [{"delta": {"tool_calls": 5}, "finish_reason": "stop"}]}))
@example(
    events=_chat(
        {
            "choices": [
                {
                    "delta": {"tool_calls": [{"id": "a", "function": {"arguments": DEEP_ARGS}}]},
                    "finish_reason": "stop",
                }
            ]
        }
    )
)
def test_openai_chat_parser_ends_every_stream(events: list[SseEvent]) -> None:
    check_reply(*drive(BY_NAME["openai-chat"], events))


@_settings(700)
@given(events=broken_streams(BY_NAME["anthropic"]))
@example(
    events=[
        _event(
            "message_start",
            {"type": "message_start", "message": {"usage": {"input_tokens": True}}},
        ),
    ]
)
def test_anthropic_parser_ends_every_stream(events: list[SseEvent]) -> None:
    check_reply(*drive(BY_NAME["anthropic"], events))


@_settings(700)
@given(events=broken_streams(BY_NAME["google"]))
@example(events=_gemini({**GEMINI_STOP, "usageMetadata": {"promptTokenCount": [1]}}))
@example(events=_gemini({**GEMINI_STOP, "usageMetadata": {"thoughtsTokenCount": math.inf}}))
@example(
    events=_gemini(
        {
            "candidates": [
                {"content": {"parts": [{"functionCall": {"name": "f", "args": DEEP_ARGS}}]}}
            ]
        }
    )
)
def test_google_parser_ends_every_stream(events: list[SseEvent]) -> None:
    check_reply(*drive(BY_NAME["google"], events))


@_settings(700)
@given(events=broken_streams(BY_NAME["openai-responses"]))
@example(
    events=[
        _event(
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"type": ["message"]},
            },
        )
    ]
)
@example(
    events=[
        _event(
            "response.output_item.done",
            {"type": "response.output_item.done", "item": {"type": "reasoning", "summary": 5}},
        )
    ]
)
def test_openai_responses_parser_ends_every_stream(events: list[SseEvent]) -> None:
    check_reply(*drive(BY_NAME["openai-responses"], events))


# --- end to end -----------------------------------------------------------------------------------


def _body(api: Api, events: list[SseEvent]) -> bytes:
    newline = "\r\n" if api.crlf else "\n"
    out = []
    for event in events:
        if event.event != "message":
            out.append(f"event: {event.event}{newline}")
        out.extend(f"data: {line}{newline}" for line in re.split("\r\n|\r|\n", event.data))
        out.append(newline)
    return "".join(out).encode("utf-8")


@pytest.mark.parametrize("name", sorted(BY_NAME))
@_settings(10)
@given(data=st.data())
def test_every_provider_ends_every_stream_end_to_end(name: str, data: st.DataObject) -> None:
    api = BY_NAME[name]
    events = data.draw(broken_streams(api))
    response = ScriptedResponse(body=_body(api, events), pieces=(1, 64))

    async def main() -> None:
        async with open_sse_server(response) as server:
            result = await call(api.module.stream, api.model(server.url), opts=options())
        check_reply(result.message, result.events)

    trio.run(main, clock=io_clock())


# --- end to end: the response head ----------------------------------------------------------------

KEY = "sk-fuzz-SECRET-4242"
TOKEN = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.+!#$%&'*^`|~", min_size=1, max_size=12
)
LATIN_1 = st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=30)
"""Header text a server may write: any byte, CR, LF and NUL among them."""
NUMBER_TEXT = st.sampled_from(
    ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "0", "-1", "1_0", "0.5", "7"]
) | st.floats().map(repr)
HTTP_DATES = st.sampled_from(
    [
        "Wed, 21 Oct 2015 07:28:05 GMT",  # in the past
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "Fri, 31 Dec 99999 23:59:59 GMT",  # out of range
        "Mon, 01 Jan 0001 00:00:00 +2359",
        "Tue, 30 Feb 2027 00:00:00 GMT",
    ]
)
CODECS = "utf-8 UTF-8 utf8 utf-16 utf-16-be utf-32 utf-7 idna rot13 base64 hex zlib bz2 uu"
CODECS += " quopri punycode unicode_escape raw_unicode_escape cp037 latin-1 ascii mbcs"
CHARSETS = st.sampled_from([*CODECS.split(), "x-no-such-charset", ""]) | TOKEN
"""Charsets, text codecs or not (Python's bytes-to-bytes codecs), and names of none."""

CONTENT_TYPES = (
    st.builds(
        lambda kind, charset, quoted, extra: (
            f"{kind}; charset={json.dumps(charset) if quoted else charset}{extra}"
        ),
        st.sampled_from(["text/event-stream", "application/json", "text/html", "text/plain"]),
        CHARSETS,
        st.booleans(),
        st.sampled_from(["", "; charset=utf-16", ";", "; q=1"]),
    )
    | st.sampled_from(["text/event-stream", "", f"text/{KEY}", "text/event-stream;charset"])
    | LATIN_1
)
STATUSES = st.sampled_from([200, 201, 204, 400, 401, 404, 408, 429, 500, 503, 529]) | st.integers(
    100, 999
)
HEADER_NAMES = st.sampled_from(
    [
        *("retry-after", "retry-after-ms", "content-encoding", "content-length"),
        *("connection", "trailer", "x-request-id", "content-type"),
    ]
)
HEADERS = st.dictionaries(
    HEADER_NAMES | TOKEN, LATIN_1 | NUMBER_TEXT | HTTP_DATES | st.just(KEY), max_size=3
)


@_settings(40)
@given(
    api=st.sampled_from(APIS),
    status=STATUSES,
    content_type=CONTENT_TYPES,
    retry_after=st.none() | NUMBER_TEXT | HTTP_DATES | LATIN_1,
    retry_after_ms=st.none() | NUMBER_TEXT,
    headers=HEADERS,
    body=st.sampled_from(["stream", "error", "key"]),
)
@example(  # a charset that is not a text codec, on a stream and on an error body
    api=APIS[0],
    status=200,
    content_type="text/event-stream; charset=rot13",
    retry_after=None,
    retry_after_ms=None,
    headers={},
    body="stream",
)
@example(
    api=APIS[1],
    status=429,
    content_type="application/json; charset=utf-16",
    retry_after="inf",
    retry_after_ms=None,
    headers={},
    body="error",
)
@example(
    api=APIS[2],
    status=503,
    content_type="application/json; charset=idna",
    retry_after=None,
    retry_after_ms="nan",
    headers={"x": KEY},
    body="key",
)
def test_whatever_head_a_server_sends_the_call_ends_with_a_reply(
    api: Api,
    status: int,
    content_type: str,
    retry_after: str | None,
    retry_after_ms: str | None,
    headers: dict[str, str],
    body: str,
) -> None:
    """Any status, any content type with any charset, any ``retry-after`` /
    ``retry-after-ms`` (NaN, infinities, numbers past a float's range, dates out of
    range), any other headers (CR and LF in them too): the call ends with a reply,
    an error one with a message unless the stream could be read, and the key, which
    the server echoes in its body or headers, appears nowhere in it."""
    extra = dict(headers)
    if retry_after is not None:
        extra["retry-after"] = retry_after
    if retry_after_ms is not None:
        extra["retry-after-ms"] = retry_after_ms
    if body == "stream":
        content = _body(api, api.streams()[0])
    elif body == "error":
        content = b'{"error": {"message": "Rate limit \xc3\xbc", "type": "rate_limit"}}'
    else:
        content = json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()
    response = ScriptedResponse(
        status=status, body=content, headers=extra, content_type=content_type, pieces=(1, 64)
    )

    async def main() -> None:
        async with open_sse_server(response, attrs.evolve(response)) as server:
            result = await call(
                api.module.stream,
                api.model(server.url),
                opts=options(api_key=KEY, max_retries=1),
            )
        check_reply(result.message, result.events)
        assert KEY not in repr(result.events)
        assert KEY[:8] not in (result.message.error_message or "")

    trio.run(main, clock=io_clock())
