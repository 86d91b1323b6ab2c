"""The fault matrix: what the network and the server do, as error replies (providers.md).

Every provider shares the transport; these tests speak the OpenAI chat API to
a loopback server that misbehaves on request.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests._providers import call, context, fixture, options
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    Timeouts,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import openai_chat
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


async def test_connections_are_pooled_within_a_run_and_closed_at_its_end(clock: Any) -> None:
    from tests._support import ECHO

    reply = (
        fixture("openai_chat", "tool_calls.sse")
        .replace(b"get_weather", b"echo")
        .replace(b"get_time", b"echo")
    )
    server = SSEServer([ScriptedResponse(body=reply), ScriptedResponse(body=TEXT)])
    async with trio.open_nursery() as nursery:
        await server.start(nursery)
        await run_agent_loop(
            [UserMessage.text("hi")],
            AgentContext(tools=[ECHO]),
            AgentLoopConfig(model=model(server.url), api_key="k"),
            EventRecorder(),
        )
        with trio.fail_after(5):
            await server.wait_closed_by_client()
        nursery.cancel_scope.cancel()
    assert len(server.requests) == 2
    assert server.connections == 1  # both requests on one connection
    assert server.closed_by_client == 1


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
