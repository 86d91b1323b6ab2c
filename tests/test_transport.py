"""The fault matrix: what the network and the server do, as error replies (design.md#wire-formats).

Every provider shares the transport; these tests speak the OpenAI chat API to
a loopback server that misbehaves on request, and all four HTTP APIs
(``APIS``) where what a server sends could reach a parser.
"""

from __future__ import annotations

import datetime
import email.utils
import functools
import json
import math
import re
import ssl
from collections.abc import Callable
from typing import Any

import attrs
import httpx2  # noqa: ASYNC127  (the design's client)
import pytest
import trio
import trio.testing
import trustme
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests._h2_server import H2Response, open_h2_server
from tests._h2_server import frame as h2_frame
from tests._providers import Call, call, context, fixture, io_clock, options, server_in_thread
from tests.test_provider_matrix import APIS as MATRIX_APIS
from tests.test_provider_matrix import Api as MatrixApi
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    TextContent,
    Timeouts,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import (
    _transport,
    anthropic,
    google,
    open_pool,
    openai_chat,
    openai_responses,
)
from trio_agent.providers._sse import SseEvent
from trio_agent.providers._transport import (
    ProviderFailure,
    SseStream,
    _retry_after,
    _retry_delay,
    error_text,
)
from trio_agent.testing import (
    EventRecorder,
    ScriptedResponse,
    SSEServer,
    check_event_grammar,
    open_sse_server,
)

TEXT = fixture("openai_chat", "text.sse")
AFTER_HELLO = TEXT.index(b"\n\n", TEXT.index(b'"Hello"')) + 2  # the end of the "Hello" event


def model(url: str) -> Any:
    return openai_chat.model("gpt-4.1", base_url=url + "/v1", provider="openai")


@attrs.frozen
class Api:
    """An HTTP API under test: its stream function, and a model of it served at a URL."""

    name: str
    stream: Callable[..., Any]
    model: Callable[[str], Any]


APIS = [
    Api(openai_chat.API, openai_chat.stream, model),
    Api(
        openai_responses.API,
        openai_responses.stream,
        lambda url: openai_responses.model("gpt-4.1", base_url=url + "/v1"),
    ),
    Api(
        anthropic.API,
        anthropic.stream,
        lambda url: anthropic.model("claude-sonnet-4-5", base_url=url),
    ),
    Api(
        google.API,
        google.stream,
        lambda url: google.model("gemini-2.5-flash", base_url=url + "/v1beta"),
    ),
]


def error(status: int, body: str, **headers: str) -> ScriptedResponse:
    return ScriptedResponse(
        status=status, body=body.encode(), headers=headers, content_type="application/json"
    )


OPENAI_500 = '{"error": {"message": "The server had an error", "type": "server_error"}}'


async def test_a_dropped_connection_keeps_what_arrived(clock: Any) -> None:
    async with open_sse_server(
        ScriptedResponse(body=TEXT, pieces=(1, 7), drop_after=AFTER_HELLO + 20)
    ) as server:
        result = await call(openai_chat.stream, model(server.url))
    message = result.message
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert message.error_message.startswith("connection to openai lost:")
    assert message.text == "Hello"
    assert result.types[-2:] == ["text_end", "error"]  # the open block is closed first


async def test_a_stall_past_the_idle_timeout_is_an_error(clock: Any) -> None:
    async with open_sse_server(ScriptedResponse(body=TEXT, stall_after=AFTER_HELLO)) as server:
        start = trio.current_time()
        result = await call(
            openai_chat.stream, model(server.url), opts=options(timeouts=Timeouts(idle=30))
        )
    assert trio.current_time() - start == pytest.approx(30, abs=0.5)
    assert result.message.error_message == "openai sent nothing for 30 s (idle timeout)"
    assert result.message.text == "Hello"


async def test_a_listener_slower_than_the_idle_timeout_loses_nothing(clock: Any) -> None:
    """The idle limit counts the wait for the server's bytes, not what the caller does
    with the events between reads: a listener that takes twice the limit on every
    event, over a body in many pieces, gets the whole reply."""
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)
        await trio.sleep(60)

    async with open_sse_server(ScriptedResponse(body=TEXT, pieces=(1, 7))) as server:
        with trio.fail_after(3600):
            message = await openai_chat.stream(
                model(server.url), context(), options(timeouts=Timeouts(idle=30)), emit
            )
    assert (message.stop_reason, message.error_message) == ("stop", None)
    assert message.text == "Hello, wörld \u2028 ✓"
    assert events[-1].type == "done"


class ChannelBody(httpx2.AsyncByteStream):
    """A response body whose reads bring what a test sends on a channel."""

    def __init__(self, pieces: trio.MemoryReceiveChannel[bytes]) -> None:
        self._pieces = pieces

    def __aiter__(self) -> ChannelBody:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._pieces.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


async def test_bytes_that_come_as_the_idle_limit_passes_end_the_stream_at_that_read(
    clock: trio.testing.MockClock,
) -> None:
    """A read whose bytes arrive, and whose idle limit runs out before it resumes, is an
    idle timeout raised by that read: the limit's cancel scope, which spans the reads,
    never cancels what the caller does after one."""
    send, receive = trio.open_memory_channel[bytes](2)
    response = httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, stream=ChannelBody(receive)
    )
    events = SseStream("test", response, idle=30)
    after: list[str] = []

    async def late() -> None:
        await trio.sleep(10)  # the second read waits
        send.send_nowait(b"data: b\n\n")
        clock.jump(30)  # its limit passes before it runs again

    async def reads(nursery: trio.Nursery) -> None:
        with events.limited():
            first = await events.read()
            assert first == [SseEvent("message", "a")], first
            nursery.start_soon(late)
            await events.read()
            after.append("read")
            await trio.lowlevel.checkpoint()
            after.append("checkpoint")

    send.send_nowait(b"data: a\n\n")
    async with trio.open_nursery() as nursery:
        with pytest.raises(ProviderFailure, match=r"^test sent nothing for 30 s \(idle timeout\)$"):
            await reads(nursery)
    assert after == []
    send.close()
    await events.aclose()


async def test_a_paused_body_resumes_when_the_test_says(clock: Any) -> None:
    """``resume``: the server holds the rest of the body until the event is set."""
    resume = trio.Event()
    seen: list[str] = []

    async def emit(event: Any) -> None:
        seen.append(event.type)
        if event.type == "text_delta" and not resume.is_set():
            assert event.delta == "Hello"  # the rest waits for the event
            resume.set()

    body = ScriptedResponse(body=TEXT, pieces=(1, 7), stall_after=AFTER_HELLO, resume=resume)
    async with open_sse_server(body) as server:
        message = await openai_chat.stream(model(server.url), context(), options(), emit)
    assert message.stop_reason == "stop"
    assert message.text.startswith("Hello")
    assert message.text != "Hello"
    assert seen[-1] == "done"


async def test_a_listener_that_raises_is_not_taken_for_a_failure_of_the_stream(
    clock: Any,
) -> None:
    """Only what reading the stream raises becomes an error reply: a listener's own
    ``trio.TooSlowError`` (or any exception) propagates as it is."""

    async def emit(event: Any) -> None:
        if event.type == "text_delta":
            raise trio.TooSlowError("the listener's own deadline")

    async with open_sse_server(ScriptedResponse(body=TEXT, pieces=(1, 7))) as server:
        with pytest.raises(trio.TooSlowError, match="the listener's own deadline"):
            await openai_chat.stream(model(server.url), context(), options(), emit)


async def test_no_response_head_within_the_first_byte_timeout_is_retried(clock: Any) -> None:
    stalled = ScriptedResponse(stall_before_head=True)
    async with open_sse_server(stalled, ScriptedResponse(body=TEXT)) as server:
        result = await call(
            openai_chat.stream, model(server.url), opts=options(timeouts=Timeouts(first_byte=10))
        )
    assert result.message.stop_reason == "stop"
    assert len(server.requests) == 2


async def test_malformed_json_in_an_event_is_an_error(clock: Any) -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: {"choices": [\n\n'
    async with open_sse_server(ScriptedResponse(body=body)) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.error_message is not None
    assert result.message.error_message.startswith("malformed JSON in a chunk from openai")
    assert result.message.text == "ok"


async def test_a_response_that_is_not_an_event_stream_is_an_error(clock: Any) -> None:
    async with open_sse_server(
        ScriptedResponse(body=b"<html>gateway</html>", content_type="text/html")
    ) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.error_message == (
        "openai answered with text/html, not an event stream: <html>gateway</html>"
    )


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (
            400,
            '{"error": {"message": "Invalid schema", "type": "invalid_request_error"}}',
            "HTTP 400 from openai: invalid_request_error: Invalid schema",
        ),
        (
            401,
            '{"error": {"message": "Incorrect API key provided: test-key", '
            '"type": "invalid_api_key"}}',
            "HTTP 401 from openai: invalid_api_key: Incorrect API key provided: ***",
        ),
    ],
)
async def test_client_errors_are_not_retried(
    clock: Any, status: int, body: str, message: str
) -> None:
    async with open_sse_server(error(status, body), ScriptedResponse(body=TEXT)) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert (result.message.stop_reason, result.message.error_message) == ("error", message)
    assert len(server.requests) == 1
    assert result.types == ["error"]
    assert "test-key" not in repr(result.message)


@pytest.mark.parametrize(
    ("headers", "waited"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "1500"}, 1.5)],
)
async def test_429_is_retried_after_what_the_server_asks(
    clock: Any, headers: dict[str, str], waited: float
) -> None:
    limited = error(429, '{"error": {"message": "Rate limit", "type": "rate_limit"}}', **headers)
    async with open_sse_server(limited, ScriptedResponse(body=TEXT)) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert trio.current_time() - start == pytest.approx(waited, abs=0.2)
    assert len(server.requests) == 2


async def test_429_is_retried_after_the_retry_delay_in_a_google_error_body(clock: Any) -> None:
    body = (
        '{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED", '
        '"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]}}'
    )
    async with open_sse_server(error(429, body), ScriptedResponse(body=TEXT)) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert trio.current_time() - start == pytest.approx(7.0, abs=0.2)


async def test_an_error_body_that_never_ends_is_given_up_on(clock: Any) -> None:
    stalled = ScriptedResponse(status=500, body=b'{"error": ', content_type="application/json")
    stalled.stall_after = 3
    async with open_sse_server(stalled) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url), opts=options(max_retries=0))
    assert result.message.error_message == (
        "HTTP 500 from openai: (the error body could not be read)"
    )
    assert trio.current_time() - start == pytest.approx(10.0, abs=0.2)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
async def test_retryable_statuses_back_off_exponentially(clock: Any, status: int) -> None:
    failing = [error(status, OPENAI_500) for _ in range(2)]
    async with open_sse_server(*failing, ScriptedResponse(body=TEXT)) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert len(server.requests) == 3
    # 1 s then 2 s, each with up to 25% jitter
    assert 3.0 <= trio.current_time() - start <= 3.75 + 0.2


async def test_retries_end_after_max_retries(clock: Any) -> None:
    async with open_sse_server(*(error(500, OPENAI_500) for _ in range(3))) as server:
        result = await call(openai_chat.stream, model(server.url), opts=options(max_retries=2))
    assert (
        result.message.error_message
        == "HTTP 500 from openai: server_error: The server had an error"
    )
    assert len(server.requests) == 3


async def test_a_retry_after_longer_than_max_retry_delay_is_not_waited_for(clock: Any) -> None:
    limited = error(429, '{"error": {"message": "Slow down"}}', **{"retry-after": "3600"})
    async with open_sse_server(limited) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url), opts=options(max_retry_delay=60))
    assert trio.current_time() == start
    assert result.message.error_message == (
        "HTTP 429 from openai: Slow down (the server asks to retry in 3600 s, "
        "more than max_retry_delay=60)"
    )


async def test_a_stream_error_after_the_first_event_is_not_retried(clock: Any) -> None:
    async with open_sse_server(
        ScriptedResponse(body=TEXT, drop_after=AFTER_HELLO), ScriptedResponse(body=TEXT)
    ) as server:
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "error"
    assert len(server.requests) == 1


async def test_an_unreachable_server_is_an_error_after_the_retries(clock: Any) -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await call(openai_chat.stream, model(f"http://127.0.0.1:{port}"))
    assert result.message.error_message is not None
    assert result.message.error_message.startswith("could not reach openai:")


async def test_cancelling_mid_stream_closes_the_connection_and_keeps_the_partial(
    clock: Any,
) -> None:
    server = SSEServer([ScriptedResponse(body=TEXT, stall_after=AFTER_HELLO)])
    abort = trio.CancelScope()
    recorder = EventRecorder()

    async def on_event(event: Any) -> None:
        await recorder(event)
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            abort.cancel()

    async with trio.open_nursery() as nursery:
        await server.start(nursery)
        messages = await run_agent_loop(
            [UserMessage.text("hi")],
            AgentContext(),
            AgentLoopConfig(model=model(server.url), api_key="k"),
            on_event,
            abort,
        )
        with trio.fail_after(5):
            await server.wait_closed_by_client()
        nursery.cancel_scope.cancel()
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.text) == ("aborted", "Hello")
    check_event_grammar(recorder.events)


def test_connections_are_pooled_across_runs_and_closed_when_the_trio_run_ends() -> None:
    """The Trio run's pool serves every run of it: two runs (three requests) share one
    connection, which stays open after each run and is closed when ``trio.run`` ends.

    The server runs in a thread of its own (its own ``trio.run``), so that what the
    client's ``trio.run`` closes as it ends can be seen after it returned."""
    from tests._support import ECHO

    reply = (
        fixture("openai_chat", "tool_calls.sse")
        .replace(b"get_weather", b"echo")
        .replace(b"get_time", b"echo")
    )
    script = [
        ScriptedResponse(body=reply),
        ScriptedResponse(body=TEXT),
        ScriptedResponse(body=TEXT),
    ]
    with server_in_thread(*script) as server:
        seen: list[tuple[int, int, int]] = []

        async def client() -> None:
            for tools in ([ECHO], []):
                messages = await run_agent_loop(
                    [UserMessage.text("hi")],
                    AgentContext(tools=tools),
                    AgentLoopConfig(model=model(server.url), api_key="k"),
                    EventRecorder(),
                )
                last = messages[-1]
                assert isinstance(last, AssistantMessage)
                assert last.stop_reason == "stop"
                seen.append(await trio.to_thread.run_sync(server.read))

        trio.run(client)
        # (requests, connections, closed by the client) after each run: one connection,
        # still open after both runs.
        assert seen == [(2, 1, 0), (3, 1, 0)]
        server.wait_closed_by_client(1)  # the end of trio.run closed it
        assert server.read() == (3, 1, 1)


def test_error_text_reads_every_known_error_shape() -> None:
    from trio_agent.providers._transport import error_text

    assert error_text(b'{"error": {"type": "overloaded_error", "message": "Overloaded"}}') == (
        "overloaded_error: Overloaded"
    )
    assert error_text(
        b'{"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}}'
    ) == ("RESOURCE_EXHAUSTED: Quota")
    assert error_text(b'{"object": "error", "message": "No model"}') == "No model"
    assert error_text(b"plain text") == "plain text"
    assert error_text(b"") == "(empty body)"


# -- what a server sends is not trusted -------------------------------------------------

DEEP = b"[" * 100_000
"""JSON nested deeper than any parser's stack: json.loads raises RecursionError."""


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (error(400, DEEP.decode()), "HTTP 400 from {}: " + "[" * 500),
        (error(429, '{"error": {"details": ' + DEEP.decode()), "HTTP 429 from {}: {{"),
        (
            ScriptedResponse(body=DEEP, content_type="application/json"),
            "{} answered with application/json, not an event stream: " + "[" * 500,
        ),
    ],
    ids=["error body", "retry hint", "not a stream"],
)
@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_deeply_nested_json_from_the_server_is_an_error_reply(
    clock: Any, api: Api, response: ScriptedResponse, message: str
) -> None:
    async with open_sse_server(response) as server:
        result = await call(api.stream, api.model(server.url), opts=options(max_retries=0))
    provider = api.model(server.url).provider
    assert result.message.stop_reason == "error"
    assert result.message.error_message is not None
    assert result.message.error_message.startswith(message.format(provider))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["error", "message", "msg", "type", "status", "details", "retryDelay"])
            | st.text(max_size=5),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
ERROR_BODIES = st.one_of(
    st.binary(max_size=300),
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    st.builds(
        lambda message, kind, delay: json.dumps(
            {"error": {"message": message, "type": kind, "details": [{"retryDelay": delay}]}}
        ).encode(),
        JSON_VALUES,
        JSON_VALUES,
        JSON_VALUES | st.from_regex(r"-?[0-9.eE+a-z]{0,8}s", fullmatch=True),
    ),
    st.integers(150, 3000).map(lambda depth: b'{"error": ' + b"[" * depth),
)
HEADER_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=40,
)


NUMBER_TEXT = (
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1_0", " 7 "])
    | st.floats().map(repr)
    | st.integers(min_value=-(10**400), max_value=10**400).map(str)
)
"""What ``float()`` reads: NaN, infinities, numbers past a float's range."""


@given(body=ERROR_BODIES)
@settings(max_examples=150)
def test_error_text_and_the_retry_hint_take_any_body(body: bytes) -> None:
    text = error_text(body, ["a-secret-key"])
    assert isinstance(text, str)
    assert 0 < len(text) <= 500
    delay = _retry_delay(body.decode("utf-8", errors="replace"))
    assert delay is None or delay >= 0  # never NaN


@given(delay=NUMBER_TEXT | HEADER_TEXT)
@example(delay="nan")
@settings(max_examples=150)
def test_the_retry_delay_of_a_google_error_body_takes_any_value(delay: str) -> None:
    body = {"error": {"details": [{"retryDelay": f"{delay}s"}]}}
    seconds = _retry_delay(json.dumps(body))
    assert seconds is None or seconds >= 0  # never NaN


HTTP_DATES = st.builds(
    lambda moment, offset: email.utils.format_datetime(
        moment.replace(tzinfo=datetime.timezone(offset))
    ),
    st.datetimes(),
    st.timedeltas(min_value=-datetime.timedelta(hours=23), max_value=datetime.timedelta(hours=23)),
)


@given(
    value=HEADER_TEXT | HTTP_DATES | NUMBER_TEXT,
    name=st.sampled_from(["retry-after", "retry-after-ms"]),
)
@settings(max_examples=150)
def test_the_retry_after_headers_take_any_value(value: str, name: str) -> None:
    delay = _retry_after(httpx2.Headers({name.encode(): value.encode("latin-1")}))
    assert delay is None or delay >= 0  # never NaN


@given(
    api=st.sampled_from(APIS),
    status=st.sampled_from([200, 201, 400, 401, 404, 429, 500, 503, 529]) | st.integers(400, 599),
    body=ERROR_BODIES,
    content_type=st.sampled_from(["application/json", "text/plain", "text/html", ""]),
    retry_after=st.none() | HEADER_TEXT | HTTP_DATES,
)
@example(api=APIS[0], status=400, body=DEEP, content_type="application/json", retry_after=None)
@example(api=APIS[3], status=200, body=DEEP, content_type="text/plain", retry_after="Mon")
@settings(max_examples=25)
def test_whatever_a_server_answers_instead_of_a_stream_is_an_error_reply(
    api: Api, status: int, body: bytes, content_type: str, retry_after: str | None
) -> None:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    response = ScriptedResponse(
        status=status, body=body, headers=headers, content_type=content_type
    )

    async def main() -> Call:
        async with open_sse_server(response) as server:
            return await call(api.stream, api.model(server.url), opts=options(max_retries=0))

    result = trio.run(main, clock=io_clock())
    assert result.message.stop_reason == "error"
    assert result.message.error_message
    assert result.types == ["error"]


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            ScriptedResponse(
                status=500,
                body=b'{"error": {"message": "boom"}}',
                content_type="application/json",
                stall_after=6,
            ),
            "HTTP 500 from openai: (the error body could not be read)",
        ),
        (
            ScriptedResponse(body=b"<html>gateway</html>", content_type="text/html", stall_after=6),
            "openai answered with text/html, not an event stream: (the body could not be read)",
        ),
    ],
    ids=["error body", "not a stream"],
)
async def test_a_body_that_stalls_past_an_idle_timeout_under_10_s_is_an_error_reply(
    clock: Any, response: ScriptedResponse, message: str
) -> None:
    async with open_sse_server(response) as server:
        start = trio.current_time()
        result = await call(
            openai_chat.stream,
            model(server.url),
            opts=options(max_retries=0, timeouts=Timeouts(idle=2)),
        )
    assert result.message.error_message == message
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.2)


@attrs.define
class EndlessBody:
    """A server whose one response has a body that goes on and on (``limit`` bytes):
    it counts what it managed to send before the client closed the connection."""

    head: bytes
    prefix: bytes = b""
    filler: bytes = b"x" * 65536
    limit: int = 32 * 1024 * 1024
    sent: int = 0
    closed_by_client: bool = False

    async def serve(self, stream: trio.SocketStream) -> None:
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                request += await stream.receive_some(65536)
            await stream.send_all(self.head + b"transfer-encoding: chunked\r\n\r\n")
            if self.prefix:
                await stream.send_all(b"%x\r\n%s\r\n" % (len(self.prefix), self.prefix))
            while self.sent < self.limit:
                await stream.send_all(b"%x\r\n%s\r\n" % (len(self.filler), self.filler))
                self.sent += len(self.filler)
            await stream.send_all(b"0\r\n\r\n")
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed_by_client = True
        finally:
            await stream.aclose()

    async def call(self, api: Api = APIS[0]) -> Call:
        async with trio.open_nursery() as nursery:
            (listener,) = await nursery.start(
                functools.partial(trio.serve_tcp, host="127.0.0.1"), self.serve, 0
            )
            port = listener.socket.getsockname()[1]
            result = await call(
                api.stream, api.model(f"http://127.0.0.1:{port}"), opts=options(max_retries=0)
            )
            nursery.cancel_scope.cancel()
        return result


@pytest.mark.parametrize(
    ("head", "message"),
    [
        (
            b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n",
            "HTTP 500 from openai: " + "x" * 500,
        ),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n",
            "openai answered with text/html, not an event stream: " + "x" * 500,
        ),
    ],
    ids=["error body", "not a stream"],
)
async def test_only_the_start_of_a_huge_body_is_read(clock: Any, head: bytes, message: str) -> None:
    server = EndlessBody(head)
    result = await server.call()
    assert result.message.error_message == message
    assert server.closed_by_client
    assert server.sent < server.limit // 4


async def test_what_follows_the_last_event_is_not_read_for_long(clock: Any) -> None:
    """The connection is put back in the pool only if little follows the terminal
    event: a server that goes on after it (here with comments) is hung up on."""
    server = EndlessBody(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n",
        prefix=TEXT,
        filler=b": keep-alive\n\n" * 4096,
    )
    result = await server.call()
    assert result.message.stop_reason == "stop"
    assert result.message.text.startswith("Hello")
    assert server.closed_by_client
    assert server.sent < server.limit // 4


async def test_a_body_held_open_after_the_last_event_is_not_waited_for(clock: Any) -> None:
    response = ScriptedResponse(body=TEXT + b": keep-alive\n\n", stall_after=len(TEXT))
    async with open_sse_server(response) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url))
        waited = trio.current_time() - start
        with trio.fail_after(5):
            await server.wait_closed_by_client()
    assert result.message.stop_reason == "stop"
    assert waited == pytest.approx(1.0, abs=0.2)  # not the idle timeout's 30 s


# -- retry-after as an HTTP date ---------------------------------------------------------


def http_date(seconds_from_now: float) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds_from_now)
    return email.utils.format_datetime(moment, usegmt=True)


@pytest.mark.parametrize(
    ("headers", "delay"),
    [
        ({"retry-after": "Wed, 21 Oct 2015 07:28:05 GMT"}, 5.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:05 -0000"}, 5.0),
        ({"retry-after": "Wed, 21 Oct 2015 09:28:05 +0200"}, 5.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),  # in the past
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "1500", "retry-after": "Wed, 21 Oct 2015 07:28:05 GMT"}, 1.5),
        ({"retry-after-ms": "later", "retry-after": "Wed, 21 Oct 2015 07:28:05 GMT"}, 5.0),
        # float() reads these too: NaN is no number of seconds, an infinity is "never"
        ({"retry-after": "nan"}, None),
        ({"retry-after": "NaN"}, None),
        ({"retry-after-ms": "nan", "retry-after": "7"}, 7.0),
        ({"retry-after": "-inf"}, 0.0),
        ({"retry-after": "-1e400"}, 0.0),
        ({"retry-after": "inf"}, math.inf),
        ({"retry-after": "1e400"}, math.inf),
        ({"retry-after-ms": "Infinity"}, math.inf),
        ({"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"}, None),  # out of range
    ],
)
def test_retry_after_is_read_in_seconds_and_as_an_http_date(
    headers: dict[str, str], delay: float | None
) -> None:
    now = datetime.datetime(2015, 10, 21, 7, 28, 0, tzinfo=datetime.UTC).timestamp()
    assert _retry_after(httpx2.Headers(headers), now=now) == delay


@pytest.mark.parametrize(
    "limited",
    [
        error(429, '{"error": {"message": "Slow down"}}', **{"retry-after": "inf"}),
        error(429, '{"error": {"message": "Slow down"}}', **{"retry-after": "1e400"}),
        error(429, '{"error": {"message": "Slow down"}}', **{"retry-after-ms": "Infinity"}),
        error(
            429,
            '{"error": {"message": "Slow down", "details": [{"retryDelay": "1e400s"}]}}',
        ),
    ],
    ids=["retry-after inf", "retry-after 1e400", "retry-after-ms Infinity", "retryDelay 1e400s"],
)
@pytest.mark.parametrize("max_retry_delay", [60.0, math.inf])
async def test_a_server_cannot_make_a_retry_wait_forever(
    clock: Any, limited: ScriptedResponse, max_retry_delay: float
) -> None:
    """An infinite wait (``float()`` reads "inf" and "1e400" as one) is refused at once,
    even when ``max_retry_delay`` bounds nothing."""
    async with open_sse_server(limited, ScriptedResponse(body=TEXT)) as server:
        start = trio.current_time()
        with trio.fail_after(3600):
            result = await call(
                openai_chat.stream, model(server.url), opts=options(max_retry_delay=max_retry_delay)
            )
    assert trio.current_time() == start
    assert result.message.error_message == (
        "HTTP 429 from openai: Slow down (the server asks to wait forever before a retry)"
    )
    assert len(server.requests) == 1


async def test_a_retry_after_of_nan_is_ignored_for_the_backoff(clock: Any) -> None:
    limited = error(429, '{"error": {"message": "Slow down"}}', **{"retry-after": "nan"})
    async with open_sse_server(limited, ScriptedResponse(body=TEXT)) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert 1.0 <= trio.current_time() - start <= 1.25 + 0.2  # the first backoff, 1 s + jitter


async def test_429_is_retried_at_the_http_date_the_server_asks(clock: Any) -> None:
    """The date is wall-clock time, counted from the wall clock's now; the wait is
    on Trio's (virtual) clock. HTTP dates have whole seconds: 10 s ahead, cut to the
    second, is between 9 and 10 s."""
    limited = error(429, '{"error": {"message": "Rate limit"}}', **{"retry-after": http_date(10)})
    async with open_sse_server(limited, ScriptedResponse(body=TEXT)) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url))
    assert result.message.stop_reason == "stop"
    assert 8.5 <= trio.current_time() - start <= 10.2


async def test_an_http_date_further_than_max_retry_delay_is_not_waited_for(clock: Any) -> None:
    limited = error(429, '{"error": {"message": "Slow down"}}', **{"retry-after": http_date(3600)})
    async with open_sse_server(limited) as server:
        start = trio.current_time()
        result = await call(openai_chat.stream, model(server.url), opts=options(max_retry_delay=60))
    assert trio.current_time() == start
    assert result.message.error_message is not None
    assert re.fullmatch(
        r"HTTP 429 from openai: Slow down \(the server asks to retry in 3\d\d\d(\.\d+)? s, "
        r"more than max_retry_delay=60\)",
        result.message.error_message,
    )


async def test_a_stream_event_that_never_ends_fails_the_reply_without_holding_it_all(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_transport, "MAX_EVENT_CHARS", 100_000)
    endless = b"data: " + b"x" * 1_000_000  # one event that never ends
    async with open_sse_server(ScriptedResponse(body=endless, pieces=(4096, 16384))) as server:
        result = await call(openai_chat.stream, model(server.url), opts=options(max_retries=0))
    assert result.message.stop_reason == "error"
    error = result.message.error_message or ""
    assert error.startswith("openai sent an event longer than 100,000 characters ("), error
    assert error.endswith(" received without its end)"), error


# -- the body is UTF-8, whatever charset the server names --------------------------------

CHARSETS = ["utf-16", "utf-32", "idna", "rot13", "base64", "hex", "x-no-such-charset", "latin-1"]
"""Charsets a server may name in its content type: SSE and JSON are UTF-8 whatever it
says, so each of these would decode the body wrongly, or fail to decode it at all."""


@pytest.mark.parametrize("api", MATRIX_APIS, ids=lambda api: api.name)
async def test_a_stream_is_read_as_utf_8_whatever_charset_its_content_type_names(
    clock: Any, api: MatrixApi
) -> None:
    body = fixture(api.name, "text.sse")
    script = [
        ScriptedResponse(
            body=body, pieces=(1, 7), content_type=f"text/event-stream; charset={charset}"
        )
        for charset in CHARSETS
    ]
    async with open_sse_server(*script) as server:
        for charset in CHARSETS:
            result = await call(api.stream, api.make_model(server.url, api.label))
            message = result.message
            assert (charset, message.stop_reason, message.text) == (charset, "stop", api.text)


@pytest.mark.parametrize("status", [400, 200], ids=["error body", "not a stream"])
@pytest.mark.parametrize("api", MATRIX_APIS, ids=lambda api: api.name)
async def test_an_error_body_is_read_as_utf_8_whatever_charset_its_content_type_names(
    clock: Any, api: MatrixApi, status: int
) -> None:
    body, kind = api.error_body(400, "Überlastet ✓")
    script = [
        ScriptedResponse(
            status=status,
            body=json.dumps(body, ensure_ascii=False).encode(),
            pieces=(1, 7),
            content_type=f"application/json; charset={charset}",
        )
        for charset in CHARSETS
    ]
    if status == 400:
        expected = f"HTTP 400 from {api.label}: {kind}: Überlastet ✓"
    else:
        expected = f"{api.label} answered with application/json, not an event stream: "
        expected += f"{kind}: Überlastet ✓"
    async with open_sse_server(*script) as server:
        for charset in CHARSETS:
            result = await call(api.stream, api.make_model(server.url, api.label))
            assert (charset, result.message.error_message) == (charset, expected)
            assert result.types == ["error"]


# -- HTTP/2: what the HTTP stack raises is the server's failure ----------------------------


@pytest.fixture(scope="module")
def h2_tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context that offers only h2 (ALPN), for 127.0.0.1, and a client one that
    trusts it."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    server.set_alpn_protocols(["h2"])
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


SSE_HEAD = [(b":status", b"200"), (b"content-type", b"text/event-stream")]
READ_FAILURE = "openai sent a response that could not be read: "


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            H2Response(headers=[(b":status", b"abc"), *SSE_HEAD[1:]]),
            "ValueError: invalid literal for int() with base 10: 'abc'",
        ),
        (  # the text of the exception quotes the server: the key is removed from it
            H2Response(headers=[(b":status", b"test-key"), *SSE_HEAD[1:]]),
            "ValueError: invalid literal for int() with base 10: '***'",
        ),
        (
            H2Response(body=TEXT[:AFTER_HELLO], then=h2_frame(0, 0, 0, b"xyz")),
            "h2.exceptions.ProtocolError: Received frame with invalid header: "
            "Stream ID must be non-zero for DataFrame",
        ),
        (
            H2Response(body=TEXT[:AFTER_HELLO], then=h2_frame(1, 0x5, 1, b"\x80")),
            "h2.exceptions.ProtocolError: Error decoding header block: Invalid table index 0",
        ),
        (
            H2Response(body=TEXT[:AFTER_HELLO], then=h2_frame(8, 0, 0, b"\0\0\0\0")),
            "h2.exceptions.ProtocolError: Received frame with non-compliant data",
        ),
        (
            H2Response(body=TEXT[:AFTER_HELLO], then=h2_frame(4, 0, 0, b"\0\4\xff\xff\xff\xff")),
            "h2.exceptions.InvalidSettingsValueError: Setting 4 has invalid value 4294967295",
        ),
        (
            H2Response(body=TEXT[:AFTER_HELLO], then=h2_frame(6, 0, 0, b"abc")),
            "h2.exceptions.FrameDataMissingError: Frame data missing or invalid",
        ),
    ],
    ids=[
        "status abc",
        "status quoting the key",
        "DATA on stream 0",
        "undecodable header block",
        "WINDOW_UPDATE of 0",
        "bad SETTINGS value",
        "PING of 3 bytes",
    ],
)
async def test_an_http2_server_that_breaks_the_protocol_gets_an_error_reply(
    clock: Any, h2_tls: tuple[ssl.SSLContext, ssl.SSLContext], response: H2Response, message: str
) -> None:
    """Over HTTP/2, h2 raises its own exceptions (and httpcore2 a ``ValueError`` for a
    status that is not a number) for what a server sends: a malformed head, or a frame
    after it (sent once the first delta has arrived). Each is an error reply naming the
    server and the exception, keeping what arrived; the pool serves the next prompt."""
    server_tls, client_tls = h2_tls
    after_head = bool(response.then)
    if after_head:
        response.resume = trio.Event()
    resume = response.resume

    async def emit(event: Any) -> None:
        events.append(event)
        if event.type == "text_delta" and resume is not None:
            resume.set()  # the bad frame follows

    events: list[Any] = []
    async with (
        open_h2_server(response, H2Response(body=TEXT), ssl_context=server_tls) as server,
        open_pool(http2=True, verify=client_tls),
    ):
        with trio.fail_after(30):
            reply = await openai_chat.stream(
                model(server.url), context(), options(max_retries=0), emit
            )
            again = await call(openai_chat.stream, model(server.url), opts=options(max_retries=0))
    assert reply.stop_reason == "error"
    assert reply.error_message == READ_FAILURE + message
    assert reply.text == ("Hello" if after_head else "")
    assert "test-key" not in repr(events)
    assert events[-1].type == "error"
    assert again.message.stop_reason == "stop"
    assert len(server.requests) == 2


# -- the request body is always sent -------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _arguments_texts(value: Any) -> list[str]:
    """Every string under an ``arguments`` key of ``value``, at any depth."""
    if isinstance(value, list):
        return [text for item in value for text in _arguments_texts(item)]
    if not isinstance(value, dict):
        return []
    found = [value["arguments"]] if isinstance(value.get("arguments"), str) else []
    return found + [text for item in value.values() for text in _arguments_texts(item)]


@pytest.mark.parametrize("api", MATRIX_APIS, ids=lambda api: api.name)
async def test_a_transcript_that_json_cannot_encode_is_sent_repaired(
    clock: Any, api: MatrixApi
) -> None:
    """Lone surrogates (from a tool's result, a loaded transcript) cannot be encoded in
    UTF-8, and NaN or an infinity (a model may write them in arguments: jiter reads
    them) is not JSON. The request goes out all the same: a lone surrogate as U+FFFD (a
    surrogate pair as the character it stands for), a number that is not finite as
    null, as JavaScript's ``JSON.stringify`` writes it."""
    model_ = api.make_model("http://127.0.0.1:1", api.label)
    call_ = ToolCall("call_1", "echo", {"value": "x \udc00", "n": math.nan, "big": -math.inf})
    transcript = [
        UserMessage.text("lone \ud800 high, lone \udfff low, a pair \ud83d\ude00"),
        AssistantMessage(
            content=[call_],
            api=model_.api,
            provider=model_.provider,
            model=model_.id,
            stop_reason="toolUse",
        ),
        ToolResultMessage(
            tool_call_id="call_1", tool_name="echo", content=[TextContent("result \ud800")]
        ),
    ]
    answer = ScriptedResponse(body=fixture(api.name, api.answer_fixture), pieces=(1, 7))
    async with open_sse_server(answer) as server:
        result = await call(
            api.stream, api.make_model(server.url, api.label), ctx=context(*transcript)
        )
    assert (result.message.stop_reason, result.message.text) == ("stop", api.answer)
    (request,) = server.requests
    text = request.body.decode("utf-8")  # strict: valid UTF-8
    body = json.loads(text, parse_constant=_refuse_constant)  # strict: no NaN, no Infinity
    for arguments in _arguments_texts(body):  # the OpenAI APIs take arguments as JSON text
        assert json.loads(arguments, parse_constant=_refuse_constant) == {
            "value": "x \ufffd",
            "n": None,
            "big": None,
        }
    assert "lone \ufffd high, lone \ufffd low, a pair 😀" in text
    assert "result \ufffd" in text


# -- an error body is read to 64 KiB ----------------------------------------------------------


def _padded_error(size: int) -> str:
    """An error body of exactly ``size`` characters, its message first."""
    head = '{"error": {"message": "Slow down", "pad": "'
    tail = '"}}'
    return head + "x" * (size - len(head) - len(tail)) + tail


async def test_an_error_body_of_64_kib_is_read_whole_and_one_character_more_is_cut(
    clock: Any,
) -> None:
    """Its JSON is read whole at the limit; one character past it, the cut body is no longer
    JSON, and its start is what the error says."""
    limit = 64 * 1024
    bodies = [_padded_error(limit), _padded_error(limit + 1)]
    async with open_sse_server(*(ScriptedResponse.error(400, body) for body in bodies)) as server:
        whole, cut = [
            (await call(openai_chat.stream, model(server.url), opts=options(max_retries=0)))
            for _ in bodies
        ]
    assert whole.message.error_message == "HTTP 400 from openai: Slow down"
    assert cut.message.error_message is not None
    assert cut.message.error_message.startswith('HTTP 400 from openai: {"error": {"message"')
