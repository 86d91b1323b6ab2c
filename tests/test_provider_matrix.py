"""The fault matrix, abort and a whole tool run, for every HTTP provider (design.md#wire-formats).

Each test runs once per wire API against the loopback server, through the
real httpx2 client: the network and the server fail in every way the design
names, and each failure must come back as an error reply (never an
exception) that says what happened, names the provider, keeps what arrived
and hides the key; an abort mid-stream must close the connection; an
``Agent`` with a real tool must run two turns and send the tool's result
back in the API's own shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import httpx2  # noqa: ASYNC127  (the providers' client: a test gives one its own)
import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_agent
from tests._providers import Call, call, check_stream, fixture, options
from trio_agent import (
    Agent,
    AgentEvent,
    AssistantMessage,
    Model,
    StreamError,
    StreamFn,
    TextContent,
    Timeouts,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.providers import _pool, anthropic, google, openai_chat, openai_responses
from trio_agent.providers._common import HttpProvider
from trio_agent.testing import (
    EventRecorder,
    ScriptedResponse,
    SSEServer,
    check_event_grammar,
    check_transcript,
    open_sse_server,
)

KEY = "sk-matrix-SECRET-4242"
TEXT = "Hello, wörld \u2028 ✓"  # what every text.sse says (Gemini's adds a "!")


def event_start(body: bytes, marker: bytes) -> int:
    """The offset of the event that holds ``marker`` (events end in a blank line)."""
    at = body.index(marker)
    found = [(body.rfind(sep, 0, at), len(sep)) for sep in (b"\n\n", b"\r\n\r\n")]
    return max((index + size for index, size in found if index >= 0), default=0)


def event_end(body: bytes, marker: bytes) -> int:
    """The offset just after the event that holds ``marker``."""
    at = body.index(marker)
    found = [(body.find(sep, at), len(sep)) for sep in (b"\n\n", b"\r\n\r\n")]
    return min(index + size for index, size in found if index >= 0)


# --- the error bodies of each API ---------------------------------------------------------------

OPENAI_KINDS = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}
ANTHROPIC_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
GOOGLE_KINDS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    529: "UNAVAILABLE",
}


def openai_error(status: int, message: str) -> tuple[dict[str, Any], str]:
    kind = OPENAI_KINDS.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}, kind


def anthropic_error(status: int, message: str) -> tuple[dict[str, Any], str]:
    kind = ANTHROPIC_KINDS[status]
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}
    return body, kind


def google_error(status: int, message: str) -> tuple[dict[str, Any], str]:
    kind = GOOGLE_KINDS[status]
    return {"error": {"code": status, "message": message, "status": kind}}, kind


# --- how each API sends a tool call and its result back -----------------------------------------


def chat_replay(value: str) -> list[Any]:
    arguments = json.dumps({"value": value}, ensure_ascii=False, separators=(",", ":"))
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_echo1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_echo1", "content": f"echo:{value}"},
    ]


def responses_replay(value: str) -> list[Any]:
    return [
        {
            "type": "function_call",
            "call_id": "call_echo1",
            "name": "echo",
            "arguments": json.dumps({"value": value}, ensure_ascii=False, separators=(",", ":")),
            "id": "fc_echo1",
        },
        {"type": "function_call_output", "call_id": "call_echo1", "output": f"echo:{value}"},
    ]


def anthropic_replay(value: str) -> list[Any]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_e", "name": "echo", "input": {"value": value}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_e",
                    "content": f"echo:{value}",
                    "is_error": False,
                    "cache_control": {"type": "ephemeral"},  # the last user block
                }
            ],
        },
    ]


def google_replay(value: str) -> list[Any]:
    return [
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "echo", "args": {"value": value}},
                    "thoughtSignature": "CiQBZWNobw==",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "echo", "response": {"output": f"echo:{value}"}}}
            ],
        },
    ]


# --- the table ----------------------------------------------------------------------------------


@attrs.frozen
class Api:
    """One wire API, and what its fixtures and its server look like."""

    name: str  # the module, and the folder of its fixtures
    api_name: str  # Model.api
    stream: StreamFn  # the module's stream function (its default instance)
    provider_class: Callable[[httpx2.AsyncClient], HttpProvider]  # an instance on a given client
    make_model: Callable[[str, str], Model]  # (server URL, provider label)
    label: str  # the provider label of the model, which the errors name
    env_keys: tuple[str, ...]
    auth: tuple[str, str]  # the header that carries the key, and its value
    path: str
    text: str  # what text.sse says
    first_text: bytes  # a marker in the first text event of text.sse
    partial: str  # the text once that event arrived
    terminal: bytes  # a marker in the event that ends text.sse (finish or stop)
    truncated: str  # the text before it
    ended_early: str  # the error when text.sse stops before it
    malformed: bytes  # an event with a broken data line, in the API's framing
    malformed_error: str  # how the error starts
    error_body: Callable[[int, str], tuple[dict[str, Any], str]]
    call_fixture: str  # an "echo" tool call
    call_id: str
    echo_value: str
    answer_fixture: str  # the answer to the tool's result
    answer: str
    history: str  # the request's field that holds the transcript
    replay: Callable[[str], list[Any]]  # the tool call and its result, as sent back

    @property
    def body(self) -> bytes:
        return fixture(self.name, "text.sse")

    @property
    def after_text(self) -> int:
        """A byte offset after which some text has arrived, before the terminal event."""
        return event_end(self.body, self.first_text)

    def model(self, url: str, label: str | None = None) -> Model:
        return self.make_model(url, label or self.label)


APIS = [
    Api(
        name="openai_chat",
        api_name=openai_chat.API,
        stream=openai_chat.stream,
        provider_class=openai_chat.OpenAIChat,
        make_model=lambda url, label: openai_chat.model(
            "gpt-4.1", base_url=url + "/v1", provider=label
        ),
        label="openai",
        env_keys=("OPENAI_API_KEY",),
        auth=("authorization", f"Bearer {KEY}"),
        path="/v1/chat/completions",
        text=TEXT,
        first_text=b'"content":"Hello"',
        partial="Hello",
        terminal=b'"finish_reason":"stop"',
        truncated=TEXT,
        ended_early="the stream from openai ended without a finish_reason",
        malformed=b'data: {"choices": [{"index": 0, "delta": {"content": "lost"\n\n',
        malformed_error="malformed JSON in a chunk from openai: ",
        error_body=openai_error,
        call_fixture="echo_call.sse",
        call_id="call_echo1",
        echo_value="ping ✓",
        answer_fixture="text.sse",
        answer=TEXT,
        history="messages",
        replay=chat_replay,
    ),
    Api(
        name="openai_responses",
        api_name=openai_responses.API,
        stream=openai_responses.stream,
        provider_class=openai_responses.OpenAIResponses,
        make_model=lambda url, label: openai_responses.model(
            "gpt-4.1", base_url=url + "/v1", provider=label
        ),
        label="openai",
        env_keys=("OPENAI_API_KEY",),
        auth=("authorization", f"Bearer {KEY}"),
        path="/v1/responses",
        text=TEXT,
        first_text=b'"delta":"Hello"',
        partial="Hello",
        terminal=b"event: response.completed",
        truncated=TEXT,
        ended_early="the stream from openai ended without response.completed",
        malformed=(
            b"event: response.output_text.delta\n"
            b'data: {"type": "response.output_text.delta", "delta": "lost"\n\n'
        ),
        malformed_error="malformed JSON in an event from openai: ",
        error_body=openai_error,
        call_fixture="echo_call.sse",
        call_id="call_echo1|fc_echo1",
        echo_value="ping ✓",
        answer_fixture="text.sse",
        answer=TEXT,
        history="input",
        replay=responses_replay,
    ),
    Api(
        name="anthropic",
        api_name=anthropic.API,
        stream=anthropic.stream,
        provider_class=anthropic.Anthropic,
        make_model=lambda url, label: anthropic.model(
            "claude-sonnet-4-5", base_url=url, provider=label
        ),
        label="anthropic",
        env_keys=("ANTHROPIC_API_KEY",),
        auth=("x-api-key", KEY),
        path="/v1/messages",
        text=TEXT,
        first_text=b'"text":"Hello, w',
        partial="Hello, wörld",
        terminal=b"event: message_stop",
        truncated=TEXT,
        ended_early="the stream from anthropic ended without message_stop",
        malformed=(
            b"event: content_block_delta\n"
            b'data: {"type": "content_block_delta", "index": 0, "delta": {"text": "lost"\n\n'
        ),
        malformed_error="malformed JSON in an event from anthropic: ",
        error_body=anthropic_error,
        call_fixture="echo_call.sse",
        call_id="toolu_e",
        echo_value="x",
        answer_fixture="text.sse",
        answer=TEXT,
        history="messages",
        replay=anthropic_replay,
    ),
    Api(
        name="google",
        api_name=google.API,
        stream=google.stream,
        provider_class=google.Google,
        make_model=lambda url, label: google.model(
            "gemini-2.5-flash", base_url=url + "/v1beta", provider=label
        ),
        label="google",
        env_keys=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        auth=("x-goog-api-key", KEY),
        path="/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        text=TEXT + "!",
        first_text=b'"text": "Hello"',
        partial="Hello",
        terminal=b'"finishReason": "STOP"',
        truncated=TEXT,
        ended_early="the stream from google ended without a finishReason",
        malformed=b'data: {"candidates": [{"content": {"parts": [{"text": "lost"\r\n\r\n',
        malformed_error="malformed JSON in a response from google: ",
        error_body=google_error,
        call_fixture="echo_call.sse",
        call_id="xKdGaLvUG8ebz7IPo4ze-Ac_0",
        echo_value="ping ✓",
        answer_fixture="echo_answer.sse",
        answer="The tool said ping ✓.",
        history="contents",
        replay=google_replay,
    ),
]


@pytest.fixture(params=APIS, ids=[api.name for api in APIS])
def api(request: pytest.FixtureRequest) -> Api:
    param: Api = request.param
    return param


def http_error(api: Api, status: int, message: str, **headers: str) -> tuple[ScriptedResponse, str]:
    """A non-2xx answer in the API's shape, and the error text it must give."""
    body, kind = api.error_body(status, message)
    response = ScriptedResponse(
        status=status,
        body=json.dumps(body).encode(),
        headers=headers,
        content_type="application/json",
    )
    return response, f"HTTP {status} from {api.label}: {kind}: {message}"


def error_reply(result: Call, text: str) -> str:
    """Check a reply that failed: well-formed events, the last one ``error`` with the final
    message, the text that arrived kept. Returns the error message."""
    check_stream(result.events)
    message = result.message
    last = result.events[-1]
    assert isinstance(last, StreamError)
    assert (last.reason, last.error) == ("error", message)
    assert message.stop_reason == "error"
    assert message.text == text
    assert message.error_message is not None
    return message.error_message


def test_the_table_matches_the_fixtures() -> None:
    for api in APIS:  # some text arrives before the cut, and the terminal event after it
        body = api.body
        assert 0 < api.after_text < event_start(body, api.terminal) < len(body), api.name
        assert api.partial.encode() in body[: api.after_text], api.name


# --- the fault matrix ---------------------------------------------------------------------------


async def test_a_dropped_connection_keeps_what_arrived(api: Api, clock: Any) -> None:
    dropped = ScriptedResponse(body=api.body, pieces=(1, 7), drop_after=api.after_text + 20)
    async with open_sse_server(dropped, ScriptedResponse(body=api.body)) as server:
        result = await call(api.stream, api.model(server.url))
    error = error_reply(result, api.partial)
    assert error.startswith(f"connection to {api.label} lost: ")
    assert result.types[-2:] == ["text_end", "error"]  # the open block is closed first
    assert len(server.requests) == 1  # streaming had begun: not retried


async def test_a_stall_past_the_idle_timeout_is_an_error(api: Api, clock: Any) -> None:
    async with open_sse_server(
        ScriptedResponse(body=api.body, stall_after=api.after_text)
    ) as server:
        start = trio.current_time()
        result = await call(
            api.stream, api.model(server.url), opts=options(timeouts=Timeouts(idle=5))
        )
        waited = trio.current_time() - start
        with trio.fail_after(5):
            await server.wait_closed_by_client()  # the stalled response was closed
    assert error_reply(result, api.partial) == f"{api.label} sent nothing for 5 s (idle timeout)"
    assert waited == pytest.approx(5, abs=0.5)
    assert len(server.requests) == 1


async def test_a_malformed_event_after_some_text_is_an_error(api: Api, clock: Any) -> None:
    body = api.body[: api.after_text] + api.malformed + api.body[api.after_text :]
    async with open_sse_server(ScriptedResponse(body=body, pieces=(1, 7))) as server:
        result = await call(api.stream, api.model(server.url))
    error = error_reply(result, api.partial)  # nothing after the broken event is taken
    assert error.startswith(api.malformed_error)
    assert result.types[-2:] == ["text_end", "error"]


async def test_a_stream_that_ends_before_its_terminal_event_is_an_error(
    api: Api, clock: Any
) -> None:
    body = api.body[: event_start(api.body, api.terminal)]
    async with open_sse_server(ScriptedResponse(body=body, pieces=(1, 7))) as server:
        result = await call(api.stream, api.model(server.url))
    assert error_reply(result, api.truncated) == api.ended_early
    assert result.types[0] == "start"


@pytest.mark.parametrize("status", [400, 401])
async def test_client_errors_are_not_retried_and_never_show_the_key(
    api: Api, clock: Any, status: int
) -> None:
    refused, expected = http_error(api, status, f"Request refused for key {KEY}.")
    async with open_sse_server(refused, ScriptedResponse(body=api.body)) as server:
        result = await call(api.stream, api.model(server.url), opts=options(api_key=KEY))
    assert error_reply(result, "") == expected.replace(KEY, "***")
    assert result.types == ["error"]
    assert len(server.requests) == 1
    name, value = api.auth
    assert server.requests[0].headers[name] == value  # the key was sent, and only there
    assert KEY not in repr(result.message)
    assert KEY not in repr(result.events)


@pytest.mark.parametrize(
    ("headers", "waited"), [({"retry-after": "7"}, (7.0, 7.2)), ({}, (1.0, 1.45))]
)
async def test_429_is_retried_then_succeeds(
    api: Api, clock: Any, headers: dict[str, str], waited: tuple[float, float]
) -> None:
    limited, _ = http_error(api, 429, "Rate limit reached.", **headers)
    async with open_sse_server(limited, ScriptedResponse(body=api.body, pieces=(1, 7))) as server:
        start = trio.current_time()
        result = await call(api.stream, api.model(server.url))
        elapsed = trio.current_time() - start
    check_stream(result.events)
    assert (result.message.stop_reason, result.message.text) == ("stop", api.text)
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    low, high = waited  # what the server asked, else 1 s of backoff with up to 25% jitter
    assert low <= elapsed <= high


@pytest.mark.parametrize("status", [500, 529])
async def test_server_errors_are_retried_with_backoff(api: Api, clock: Any, status: int) -> None:
    failing = [http_error(api, status, "The server had an error.")[0] for _ in range(2)]
    async with open_sse_server(*failing, ScriptedResponse(body=api.body)) as server:
        start = trio.current_time()
        result = await call(api.stream, api.model(server.url))
        elapsed = trio.current_time() - start
    assert (result.message.stop_reason, result.message.text) == ("stop", api.text)
    assert len(server.requests) == 3
    assert 3.0 <= elapsed <= 3.75 + 0.2  # 1 s then 2 s, each with up to 25% jitter


@pytest.mark.parametrize("status", [500, 529])
async def test_server_errors_end_the_reply_when_the_retries_run_out(
    api: Api, clock: Any, status: int
) -> None:
    failing = [http_error(api, status, "Overloaded.") for _ in range(3)]
    async with open_sse_server(*(response for response, _ in failing)) as server:
        result = await call(api.stream, api.model(server.url), opts=options(max_retries=2))
    assert error_reply(result, "") == failing[0][1]
    assert failing[0][1].startswith(f"HTTP {status} from {api.label}: ")
    assert result.types == ["error"]
    assert len(server.requests) == 3


OWN_SERVERS = {
    "openai_chat": "https://api.openai.com",
    "openai_responses": "https://api.openai.com",
    "anthropic": "https://api.anthropic.com",
    "google": "https://generativelanguage.googleapis.com",
}
"""The server each API's own key variables are sent to."""


@pytest.mark.parametrize("set_", [False, True], ids=["unset", "set"])
async def test_no_key_is_an_error_before_any_request(
    api: Api, clock: Any, monkeypatch: pytest.MonkeyPatch, set_: bool
) -> None:
    """A model of the API's own provider on another server (here, loopback) is not sent
    that provider's key, set or not: it needs one given."""
    for name in api.env_keys:
        if set_:
            monkeypatch.setenv(name, "env-key")
        else:
            monkeypatch.delenv(name, raising=False)
    async with open_sse_server(ScriptedResponse(body=api.body)) as server:
        with trio.testing.assert_checkpoints():  # a refusal is a checkpoint too
            result = await call(api.stream, api.model(server.url), opts=options(api_key=None))
    names = " and ".join(api.env_keys)
    verb = "is" if len(api.env_keys) == 1 else "are"
    assert error_reply(result, "") == (
        f"no API key for {api.label} at {server.url}: {names} {verb} sent only to "
        f"{OWN_SERVERS[api.name]}; for this server, give api_key (or get_api_key)"
    )
    assert result.types == ["error"]
    assert (server.requests, server.connections) == ([], 0)


async def test_errors_name_the_provider_label_of_the_model(api: Api, clock: Any) -> None:
    """A model served by someone else (a proxy, a compatible server) has its own label;
    every error says who failed with that label, as the "no API key" error does."""
    label = "acme"
    async with open_sse_server(
        http_error(api, 500, "The server had an error.")[0],
        ScriptedResponse(body=api.body, drop_after=api.after_text + 20),
        ScriptedResponse(body=api.body, stall_after=api.after_text),
        ScriptedResponse(body=api.body[: event_start(api.body, api.terminal)]),
    ) as server:
        model = api.model(server.url, label)
        opts = options(max_retries=0, timeouts=Timeouts(idle=5))
        replies = [await call(api.stream, model, opts=opts) for _ in range(4)]
    assert [reply.message.provider for reply in replies] == [label] * 4
    expected = [
        f"HTTP 500 from {label}: ",
        f"connection to {label} lost: ",
        f"{label} sent nothing for 5 s (idle timeout)",
        api.ended_early.replace(api.label, label),
    ]
    errors = [reply.message.error_message or "" for reply in replies]
    pairs = zip(expected, errors, strict=True)
    assert [(start, error) for start, error in pairs if not error.startswith(start)] == []


# --- an abort mid-stream, through an Agent ------------------------------------------------------


def live_tasks() -> set[trio.lowlevel.Task]:
    root = trio.lowlevel.current_root_task()
    assert root is not None
    found: set[trio.lowlevel.Task] = set()
    pending = [root]
    while pending:
        task = pending.pop()
        found.add(task)
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return found


@pytest.mark.parametrize("own_client", [False, True], ids=["run_pool", "own_client"])
async def test_an_abort_mid_stream_closes_the_connection_and_keeps_the_text(
    api: Api, clock: Any, own_client: bool
) -> None:
    """With the run's pooled client, and with the application's own, which the run does not
    close: the aborted response's connection must end all the same."""
    server = SSEServer([ScriptedResponse(body=api.body, stall_after=api.after_text)])
    recorder = EventRecorder()
    seen: list[str] = []
    async with httpx2.AsyncClient() as client, trio.open_nursery() as nursery:
        await server.start(nursery)
        stream_fn = api.provider_class(client).stream if own_client else None
        agent = Agent(api.model(server.url), api_key=KEY, stream_fn=stream_fn)

        async def abort_on_text(event: AgentEvent) -> None:
            await recorder(event)
            if event.type == "message_update" and event.message.text and not seen:
                seen.append(event.message.text)
                agent.abort()

        agent.subscribe(abort_on_text)
        # The Trio run's pool, and the system task that owns it until trio.run ends, are
        # the Trio run's, not the agent run's: made before the snapshot, as by any
        # earlier request of this trio.run.
        _pool.current_pool()
        await trio.testing.wait_all_tasks_blocked()
        before = live_tasks()
        with trio.fail_after(30):  # the stall would end only at the 60 s idle timeout
            await agent.prompt("hi")
            await server.wait_closed_by_client()
        await trio.testing.wait_all_tasks_blocked()
        assert live_tasks() == before  # nothing the run started is left, on either side
        nursery.cancel_scope.cancel()
    assert seen == [api.partial]
    messages = list(agent.state.messages)
    assert [message.role for message in messages] == ["user", "assistant"]
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.text) == ("aborted", api.partial)
    assert not agent.state.is_streaming
    assert len(server.requests) == 1
    check_event_grammar(recorder.events)
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]


# --- a whole run with a real tool ---------------------------------------------------------------


@trio_agent.tool
async def echo(value: str) -> str:
    """Say the value back.

    Args:
        value: What to say.
    """
    return f"echo:{value}"


async def test_an_agent_runs_a_tool_and_sends_its_result_back(api: Api, clock: Any) -> None:
    recorder = EventRecorder()
    tool_call = ScriptedResponse(body=fixture(api.name, api.call_fixture), pieces=(1, 7))
    answer = ScriptedResponse(body=fixture(api.name, api.answer_fixture), pieces=(1, 7))
    async with open_sse_server(tool_call, answer) as server:
        agent = Agent(api.model(server.url), tools=[echo], api_key=KEY)
        agent.subscribe(recorder)
        with trio.fail_after(30):
            await agent.prompt("Echo something.")
        await trio.testing.wait_all_tasks_blocked()
        # The connection outlives the run, in the Trio run's pool (closed when trio.run ends).
        assert (server.open_connections, server.closed_by_client) == (1, 0)
    messages = list(agent.state.messages)
    assert [message.role for message in messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    prompt, asked, result, answered = messages
    assert isinstance(prompt, UserMessage)
    assert prompt.content == (TextContent("Echo something."),)
    assert isinstance(asked, AssistantMessage)
    assert (asked.stop_reason, asked.api, asked.provider) == ("toolUse", api.api_name, api.label)
    assert [(c.id, c.name, c.arguments) for c in asked.tool_calls] == [
        (api.call_id, "echo", {"value": api.echo_value})
    ]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.tool_name, result.is_error) == (api.call_id, "echo", False)
    assert result.content == (TextContent(f"echo:{api.echo_value}"),)
    assert isinstance(answered, AssistantMessage)
    assert (answered.stop_reason, answered.text) == ("stop", api.answer)
    check_transcript(messages)
    check_event_grammar(recorder.events)
    assert recorder.types.count("turn_start") == 2
    assert recorder.tool_order("end") == [api.call_id]

    assert len(server.requests) == 2
    assert server.connections == 1  # both requests on the run's pooled connection
    first, second = server.requests
    assert first.path == second.path == api.path
    name, value = api.auth
    assert first.headers[name] == value
    assert "echo" in json.dumps(first.json["tools"])
    history = second.json[api.history]
    assert len(history) == 3  # the prompt, the call, its result
    assert "Echo something." in json.dumps(history[0])
    assert history[1:] == api.replay(api.echo_value)
