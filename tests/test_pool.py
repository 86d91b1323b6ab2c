"""The providers' connection pools (``trio_agent.providers._pool``), on real sockets.

Every assertion counts connections at a real loopback server (HTTP/1.1, and
HTTPS with a ``trustme`` CA) that the real httpx2 client talks to; none
measures time. What is checked: one Trio run pools its connections across
prompts and agents; an :func:`open_pool` block bounds them; an abort closes
its own connection, not the pool; a connection the server closed is not
reused (or is retried on); TLS handshakes are counted; HTTP/2 is negotiated
when asked for; nothing is left open when ``trio.run`` ends; a pool never
serves another Trio run; a provider's own client is used and left open.
"""

from __future__ import annotations

import os
import ssl
import sys
import types
from typing import Any

import attrs
import httpx2  # noqa: ASYNC127  (the providers' client: a test gives one its own)
import pytest
import trio
import trio.testing
import trustme

from tests._providers import fixture
from trio_agent import Agent, AgentEvent, AssistantMessage, Timeouts, tool
from trio_agent.providers import Pool, _pool, open_pool, openai_chat
from trio_agent.providers._common import HttpProvider
from trio_agent.providers.anthropic import Anthropic
from trio_agent.providers.google import Google
from trio_agent.providers.openai_chat import OpenAIChat
from trio_agent.providers.openai_responses import OpenAIResponses
from trio_agent.testing import ScriptedResponse, SSEServer, open_sse_server, sse_body

TEXT = fixture("openai_chat", "text.sse")
AFTER_HELLO = TEXT.index(b"\n\n", TEXT.index(b'"Hello"')) + 2  # the end of the "Hello" event
TEXT_REPLY = "Hello, wörld \u2028 ✓"  # what TEXT says


def model(url: str) -> Any:
    return openai_chat.model("gpt-4.1", base_url=url + "/v1", provider="openai")


def chat(text: str) -> bytes:
    """A small chat completions stream that says ``text``."""
    return sse_body(
        [
            (None, {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}),
            (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ],
        done=True,
    )


def replies(*texts: str, **fields: Any) -> list[ScriptedResponse]:
    return [ScriptedResponse(body=chat(text), **fields) for text in texts]


def last_reply(agent: Agent) -> AssistantMessage:
    message = agent.state.messages[-1]
    assert isinstance(message, AssistantMessage)
    return message


def said(agent: Agent) -> tuple[str, str]:
    """The stop reason and the text of the agent's last reply."""
    message = last_reply(agent)
    return message.stop_reason, message.text


def prompt_of(server: SSEServer, index: int) -> str:
    """The text of the last message of the request ``index`` the server received."""
    content = server.requests[index].json["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


# --- one Trio run, one pool -------------------------------------------------------------------


async def test_a_hundred_prompts_of_one_agent_use_one_connection(clock: Any) -> None:
    texts = [f"reply {n}" for n in range(100)]
    async with open_sse_server(*replies(*texts)) as server:
        agent = Agent(model(server.url), api_key="k")
        for n, text in enumerate(texts):
            await agent.prompt(f"prompt {n}")
            assert said(agent) == ("stop", text)
        await trio.testing.wait_all_tasks_blocked()
        assert server.closed_by_client == 0  # still open between prompts, and after them
    assert len(server.requests) == 100
    assert server.connections == 1


@pytest.mark.parametrize("max_keepalive", [100, 2])
async def test_two_hundred_agents_share_a_pool_of_ten_connections(
    clock: Any, max_keepalive: int
) -> None:
    """The pool holds the 11th request until a connection is free: while ten replies
    are held mid-stream, the other 190 requests wait in the pool, not at the server.
    ``max_keepalive`` bounds the idle connections, not the busy ones: a connection
    released while requests wait for one serves the next of them, so a pool that keeps
    two idle opens ten too, whatever the order streams end in."""
    resume = trio.Event()
    first_event = chat("x").index(b"\n\n") + 2
    texts = [f"reply {n}" for n in range(200)]
    script = replies(*texts, stall_after=first_event, resume=resume, pieces=(1, 40))
    async with (
        open_sse_server(*script) as server,
        open_pool(max_connections=10, max_keepalive=max_keepalive),
    ):
        agents = [Agent(model(server.url), api_key="k") for _ in range(200)]
        async with trio.open_nursery() as nursery:
            for n, agent in enumerate(agents):
                nursery.start_soon(agent.prompt, f"agent {n}")
            await trio.testing.wait_all_tasks_blocked()
            assert (server.open_connections, len(server.requests)) == (10, 10)
            resume.set()
    assert server.peak_connections == 10
    assert server.connections == 10  # reused, never reopened
    assert len(server.requests) == 200
    # Replies are served in the order requests arrive: each agent got the one served
    # for its own request, whole.
    served = {prompt_of(server, index): texts[index] for index in range(200)}
    for n, agent in enumerate(agents):
        assert [message.role for message in agent.state.messages] == ["user", "assistant"]
        assert said(agent) == ("stop", served[f"agent {n}"])

    assert all(said(agent)[0] == "stop" for agent in agents)


async def test_a_request_waits_for_a_free_connection_as_long_as_it_takes(clock: Any) -> None:
    """A request queued behind a stream of the pool's only connection waits for it, however
    long that stream lasts: the wait is neither the connect timeout (the time to open a
    connection) nor the first-byte one (from sending the request)."""
    resume = trio.Event()
    long_stream = ScriptedResponse(body=TEXT, stall_after=AFTER_HELLO, resume=resume)
    async with (
        open_sse_server(long_stream, *replies("second")) as server,
        open_pool(max_connections=1),
        trio.open_nursery() as nursery,
    ):
        first = Agent(model(server.url), api_key="k", timeouts=Timeouts(idle=None))
        second = Agent(model(server.url), api_key="k", max_retries=0)
        nursery.start_soon(first.prompt, "first")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(second.prompt, "second")
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.requests) == 1  # the second waits for the connection
        # The scenario: the first model goes on after 100 s (of the mock clock, which
        # jumps there), longer than the second request's connect and first-byte limits.
        await trio.sleep(100)
        resume.set()
    assert said(first) == ("stop", TEXT_REPLY)
    assert said(second) == ("stop", "second")
    assert server.connections == 1


def queued_in_httpx2(pool: Pool) -> int:
    """How many requests httpx2's own pool holds (sent, or waiting for a connection)."""
    transport: Any = pool.client._transport
    transport = getattr(transport, "_inner", transport)  # under the pool's queue
    return len(transport._pool._requests)


async def test_requests_beyond_the_limit_wait_in_the_pools_queue_and_may_leave_it(
    clock: Any,
) -> None:
    """Requests waiting for a connection wait in the pool's own queue, not in httpx2's
    (whose every request and release scans all those it holds): httpx2 holds only the
    one being served. A waiting run cancelled leaves the queue; the next takes the
    connection when it is free."""
    resume = trio.Event()
    script = [ScriptedResponse(body=TEXT, stall_after=AFTER_HELLO, resume=resume), *replies("b")]
    async with (
        open_sse_server(*script) as server,
        open_pool(max_connections=1) as pool,
        trio.open_nursery() as nursery,
    ):
        first, cancelled, last = (Agent(model(server.url), api_key="k") for _ in range(3))
        nursery.start_soon(first.prompt, "first")
        await trio.testing.wait_all_tasks_blocked()
        scope = trio.CancelScope()

        async def prompt_in_scope() -> None:
            with scope:
                await cancelled.prompt("cancelled")

        nursery.start_soon(prompt_in_scope)
        nursery.start_soon(last.prompt, "last")
        await trio.testing.wait_all_tasks_blocked()
        assert (len(server.requests), queued_in_httpx2(pool)) == (1, 1)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert said(cancelled) == ("aborted", "")  # its reply: aborted, nothing sent
        resume.set()
    assert said(first) == ("stop", TEXT_REPLY)
    assert said(last) == ("stop", "b")
    assert [prompt_of(server, index) for index in range(2)] == ["first", "last"]
    assert (server.connections, queued_in_httpx2(pool)) == (1, 0)


@pytest.mark.parametrize("how", ["agent.abort", "cancel scope"])
async def test_an_aborted_run_closes_its_connection_and_the_pool_goes_on(
    clock: Any, how: str
) -> None:
    script = [ScriptedResponse(body=TEXT, stall_after=AFTER_HELLO), *replies("again")]
    async with open_sse_server(*script) as server:
        agent = Agent(model(server.url), api_key="k")
        scope = trio.CancelScope()

        async def stop_at_the_first_delta(event: AgentEvent) -> None:
            if event.type == "message_update" and event.assistant_message_event.type == (
                "text_delta"
            ):
                if how == "agent.abort":
                    agent.abort()
                else:
                    scope.cancel()

        unsubscribe = agent.subscribe(stop_at_the_first_delta)
        pool = _pool.current_pool()
        with trio.fail_after(30):  # the stall would end only at the 60 s idle timeout
            with scope:
                await agent.prompt("one")
            await server.wait_closed_by_client()
        if how == "agent.abort":
            assert said(agent) == ("aborted", "Hello")
        else:
            assert scope.cancelled_caught
        unsubscribe()
        await agent.prompt("two")
        assert said(agent) == ("stop", "again")
        assert _pool.current_pool() is pool
        assert not pool.client.is_closed
    assert server.connections == 2  # the aborted one was closed, not put back
    assert server.closed_by_client == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused(clock: Any) -> None:
    """A server whose keep-alive timeout fired between two prompts: the pool finds its
    idle connection closed and opens another."""
    script = [ScriptedResponse(body=chat("one"), close=True), *replies("two")]
    async with open_sse_server(*script) as server:
        agent = Agent(model(server.url), api_key="k", max_retries=0)
        await agent.prompt("1")
        await trio.testing.wait_all_tasks_blocked()
        assert (server.connections, server.open_connections) == (1, 0)  # closed by the server
        await agent.prompt("2")
        assert said(agent) == ("stop", "two")
    assert server.connections == 2
    assert len(server.requests) == 2
    assert server.closed_by_client == 0


async def test_a_request_on_a_connection_the_server_just_closed_is_retried(clock: Any) -> None:
    """The server closes the reused connection as the request arrives, before any byte of a
    response: a connection error, retried on a new connection."""
    script = [*replies("one"), ScriptedResponse(hang_up=True), *replies("two")]
    async with open_sse_server(*script) as server:
        agent = Agent(model(server.url), api_key="k")
        await agent.prompt("1")
        await agent.prompt("2")
        assert said(agent) == ("stop", "two")
    assert server.connections == 2
    assert [prompt_of(server, index) for index in range(3)] == ["1", "2", "2"]


async def test_without_retries_the_hung_up_request_is_an_error_reply(clock: Any) -> None:
    """(What the retry above saves the prompt from.)"""
    script = [*replies("one"), ScriptedResponse(hang_up=True)]
    async with open_sse_server(*script) as server:
        agent = Agent(model(server.url), api_key="k", max_retries=0)
        await agent.prompt("1")
        await agent.prompt("2")
    stop_reason, _ = said(agent)
    assert stop_reason == "error"
    assert (last_reply(agent).error_message or "").startswith("could not reach openai:")


# --- TLS and HTTP/2 ---------------------------------------------------------------------------


@attrs.frozen
class Tls:
    ca: trustme.CA
    server: ssl.SSLContext
    client: ssl.SSLContext

    def server_context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert("127.0.0.1").configure_cert(context)
        if alpn is not None:
            context.set_alpn_protocols(alpn)
        return context


@pytest.fixture(scope="module")
def tls() -> Tls:
    """A test CA: a certificate for 127.0.0.1, and a client context that trusts it."""
    ca = trustme.CA()
    client = ssl.create_default_context()
    ca.configure_trust(client)
    tls = Tls(ca, ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), client)
    ca.issue_cert("127.0.0.1").configure_cert(tls.server)
    return tls


async def test_over_tls_ten_prompts_in_one_pool_make_one_handshake(clock: Any, tls: Tls) -> None:
    texts = [f"reply {n}" for n in range(10)]
    async with (
        open_sse_server(*replies(*texts), ssl_context=tls.server) as server,
        open_pool(verify=tls.client),
    ):
        assert server.url.startswith("https://127.0.0.1:")
        agent = Agent(model(server.url), api_key="k")
        for text in texts:
            await agent.prompt("hi")
            assert said(agent) == ("stop", text)
    assert server.connections == 1


async def test_over_tls_a_pool_per_prompt_makes_a_handshake_per_prompt(
    clock: Any, tls: Tls
) -> None:
    texts = [f"reply {n}" for n in range(10)]
    async with open_sse_server(*replies(*texts), ssl_context=tls.server) as server:
        agent = Agent(model(server.url), api_key="k")
        for text in texts:
            async with open_pool(verify=tls.client):
                await agent.prompt("hi")
            assert said(agent) == ("stop", text)
        with trio.fail_after(10):
            await server.wait_closed_by_client(10)  # each block closed its connection
    assert server.connections == 10


async def test_the_run_pool_checks_certificates_against_its_own_cas(clock: Any, tls: Tls) -> None:
    """Outside the block that trusts the test CA, the run's pool refuses its certificate."""
    async with open_sse_server(*replies("never"), ssl_context=tls.server) as server:
        agent = Agent(model(server.url), api_key="k", max_retries=0)
        await agent.prompt("hi")
    stop_reason, _ = said(agent)
    assert stop_reason == "error"
    message = last_reply(agent).error_message or ""
    assert message.startswith("could not reach openai: ")
    assert "CERTIFICATE_VERIFY_FAILED" in message
    assert server.requests == []


async def test_an_http2_pool_speaks_http_1_1_to_a_server_that_only_speaks_it(
    clock: Any, tls: Tls
) -> None:
    texts = [f"reply {n}" for n in range(3)]
    async with (
        open_sse_server(*replies(*texts), ssl_context=tls.server) as server,
        open_pool(http2=True, verify=tls.client) as pool,
    ):
        assert pool.http2
        agent = Agent(model(server.url), api_key="k")
        for text in texts:
            await agent.prompt("hi")
            assert said(agent) == ("stop", text)
    assert server.connections == 1


@pytest.mark.parametrize(("http2", "protocol"), [(True, "h2"), (False, "http/1.1")])
async def test_an_http2_pool_negotiates_http2_with_a_server_that_offers_it(
    tls: Tls, http2: bool, protocol: str
) -> None:
    """A TLS server that offers h2 and http/1.1 (ALPN), records what the client chose, and
    hangs up: an ``http2=True`` pool chooses h2 (which httpx2 speaks through ``h2``)."""
    chosen: list[str | None] = []

    async def handle(stream: trio.SSLStream[trio.SocketStream]) -> None:
        try:
            await stream.do_handshake()
            chosen.append(stream.selected_alpn_protocol())
        finally:
            await stream.aclose()

    async with trio.open_nursery() as nursery:
        context = tls.server_context(alpn=["h2", "http/1.1"])
        listeners = await nursery.start(trio.serve_ssl_over_tcp, handle, 0, context)
        port = listeners[0].transport_listener.socket.getsockname()[1]
        async with open_pool(http2=http2, verify=tls.client, max_connections=1) as pool:
            with pytest.raises(httpx2.HTTPError):  # the server hung up
                await pool.client.post(f"https://127.0.0.1:{port}/v1/chat/completions")
        nursery.cancel_scope.cancel()
    assert chosen == [protocol]


def test_an_http2_pool_is_configured_for_http2() -> None:
    for http2 in (True, False):
        pool = Pool(http2=http2)
        assert pool.http2 is http2
        transport: Any = pool.client._transport
        if not http2:  # over HTTP/1.1, the pool's own queue is in front of httpx2's
            assert isinstance(transport, _pool._Queued)
            transport = transport._inner
        assert transport._pool._http2 is http2
        assert repr(pool) == f"<Pool max_connections=1000 max_keepalive=100 http2={http2}>"


@pytest.mark.parametrize("name", ["max_connections", "max_keepalive"])
@pytest.mark.parametrize("value", [0, -1, "x", True, 2.5])
def test_pool_limits_must_be_positive_ints(name: str, value: Any) -> None:
    with pytest.raises(
        ValueError, match=rf"^{name} must be a positive int or None, not "
    ) as caught:
        Pool(**{name: value})
    assert str(caught.value).endswith(f"not {value!r}")


async def test_the_default_limits_let_a_thousand_agents_stream_at_once() -> None:
    """A thousand connections, a hundred kept idle: the defaults of a pool, of an
    ``open_pool`` block and of the Trio run's own pool alike."""
    run_pool = _pool.current_pool()
    async with open_pool() as block_pool:
        pass
    for pool in (Pool(), block_pool, run_pool):
        limits = pool.limits
        assert (limits.max_connections, limits.max_keepalive_connections) == (1000, 100)


def test_pool_limits_may_be_none() -> None:
    limits = Pool(max_connections=None, max_keepalive=None).limits
    assert (limits.max_connections, limits.max_keepalive_connections) == (None, None)


# --- lifetimes --------------------------------------------------------------------------------


async def test_open_pool_scopes_the_pool_to_its_block_and_the_tasks_started_in_it() -> None:
    run_pool = _pool.current_pool()
    seen: list[Pool] = []

    async def look() -> None:
        await trio.lowlevel.checkpoint()
        seen.append(_pool.current_pool())

    async with trio.open_nursery() as nursery:
        async with open_pool(max_connections=3) as pool:
            assert _pool.current_pool() is pool
            nursery.start_soon(look)  # started in the block: its pool
            async with trio.open_nursery() as inner:  # noqa: ASYNC112  (another task)
                inner.start_soon(look)
            async with open_pool() as innermost:
                assert _pool.current_pool() is innermost
            assert innermost.client.is_closed
            assert _pool.current_pool() is pool
        assert pool.client.is_closed
        assert _pool.current_pool() is run_pool
    assert seen == [pool, pool]
    assert not run_pool.client.is_closed


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_nothing_is_left_open_when_the_trio_run_ends() -> None:
    """A whole ``trio.run``: a server, prompts through the run's pool (two agents at once)
    and through an ``open_pool`` block; once it returns, the process has the descriptors
    it had before. The pools are kept referenced, so that a socket left open could not be
    closed by the garbage collector instead."""
    pools: list[Pool] = []

    async def main() -> None:
        async with open_sse_server(*replies(*"abcdef")) as server:
            agents = [Agent(model(server.url), api_key="k") for _ in range(2)]
            for _ in range(2):
                async with trio.open_nursery() as nursery:
                    for agent in agents:
                        nursery.start_soon(agent.prompt, "hi")
            async with open_pool() as pool:
                pools.append(pool)
                await agents[0].prompt("hi")
                await agents[1].prompt("hi")
            assert all(agent.state.messages[-1].stop_reason == "stop" for agent in agents)  # type: ignore[union-attr]
        pools.append(_pool.current_pool())
        assert not pools[-1].client.is_closed  # until the run ends

    trio.run(main)  # what a process opens once (not per run) is opened here
    pools.clear()
    baseline = open_fds()
    trio.run(main)
    assert open_fds() == baseline
    assert [pool.client.is_closed for pool in pools] == [True, True]


def test_each_trio_run_has_a_pool_of_its_own_closed_when_it_ends() -> None:
    pools: list[Pool] = []

    async def main() -> None:
        async with open_sse_server(*replies("hi")) as server:
            agent = Agent(model(server.url), api_key="k")
            await agent.prompt("hi")
            assert said(agent) == ("stop", "hi")
        pool = _pool.current_pool()
        seen: list[Pool] = []
        async with trio.open_nursery() as nursery:  # noqa: ASYNC112  (another task)
            nursery.start_soon(_append, seen)
        assert seen == [pool]  # one pool for every task of the run
        assert not pool.client.is_closed
        pools.append(pool)

    trio.run(main)
    trio.run(main)
    first, second = pools
    assert first is not second
    assert first.client.is_closed
    assert second.client.is_closed


async def _append(seen: list[Pool]) -> None:
    await trio.lowlevel.checkpoint()
    seen.append(_pool.current_pool())


async def test_a_provider_given_its_own_client_sends_with_it_and_leaves_it_open(
    clock: Any,
) -> None:
    async with open_sse_server(*replies("one", "two")) as server:
        async with httpx2.AsyncClient(headers={"x-client": "own"}) as client:
            agent = Agent(model(server.url), api_key="k", stream_fn=OpenAIChat(client).stream)
            async with open_pool() as pool:  # not used: the provider has its own client
                await agent.prompt("1")
                await agent.prompt("2")
            assert said(agent) == ("stop", "two")
            assert not client.is_closed
            await trio.testing.wait_all_tasks_blocked()
            assert (server.connections, server.closed_by_client) == (1, 0)  # kept open
            with pytest.raises(LookupError):
                _pool._of_the_run.get()  # the run's pool was never made
        with trio.fail_after(10):
            await server.wait_closed_by_client()  # the application closed its client
    assert [request.headers.get("x-client") for request in server.requests] == ["own", "own"]
    assert pool.client.is_closed


HTTP_PROVIDERS = (OpenAIChat, OpenAIResponses, Anthropic, Google)


def _httpx_client_class() -> type:
    """A class named as httpx's ``AsyncClient`` is (``httpx._client.AsyncClient``): the
    one trio_agent used before httpx2, which is not installed beside it."""
    return type("AsyncClient", (), {"__module__": "httpx._client"})


@pytest.mark.parametrize("provider_class", HTTP_PROVIDERS)
def test_an_httpx_client_is_refused_at_construction_naming_it_and_httpx2(
    provider_class: type[HttpProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    httpx = types.ModuleType("httpx")
    httpx.__version__ = "0.28.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "httpx", httpx)
    with pytest.raises(TypeError) as raised:
        provider_class(_httpx_client_class()())
    assert str(raised.value) == (
        "http_client must be an httpx2.AsyncClient, not httpx.AsyncClient (httpx 0.28.1): "
        "trio_agent speaks httpx2, as the official SDKs do "
        "(pip install httpx2; import httpx2; httpx2.AsyncClient(...))"
    )


@pytest.mark.parametrize(
    ("client", "told"),
    [
        ("https://api.openai.com", "str: 'https://api.openai.com'"),
        (httpx2.Client, "type: <class 'httpx2.Client'>"),  # the class, not a client
        (object, "type: <class 'object'>"),
        (b"k" * 300, "bytes: b'kkkkkkkkkkk..."),
    ],
)
def test_what_is_not_an_httpx2_async_client_is_refused_at_construction_naming_it(
    client: object, told: str
) -> None:
    with pytest.raises(TypeError) as raised:
        OpenAIChat(client)
    text = str(raised.value)
    assert text.startswith(f"http_client must be an httpx2.AsyncClient, not {told}")
    assert len(text) < 200  # what was given is shown cut short


def test_an_httpx2_async_client_or_a_subclass_is_taken_as_it_is() -> None:
    class Own(httpx2.AsyncClient):
        pass

    for client in (httpx2.AsyncClient(), Own()):
        for provider_class in HTTP_PROVIDERS:
            assert provider_class(client).transport._client() is client


def tool_call(name: str) -> bytes:
    """A small chat completions stream that calls the tool ``name`` without arguments."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": name, "arguments": "{}"}
    return sse_body(
        [
            (None, {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}),
            (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ],
        done=True,
    )


async def test_a_trio_run_in_a_worker_thread_of_an_open_pool_block_uses_a_pool_of_its_own() -> None:
    """A sync tool runs in a worker thread, whose context is a copy of the block's: a
    ``trio.run`` there (an agent of its own) must not use the block's pool, whose
    connections and locks belong to the outer run.

    The block's pool has one connection, held by a stalled stream of another agent, so
    a request of the inner run through it would wait for that connection, and the outer
    run would wake a task of the inner run when the stream ends. Real clocks: the two
    runs wait for each other's sockets."""
    resume = trio.Event()
    script = [
        ScriptedResponse(body=TEXT, stall_after=AFTER_HELLO, resume=resume),
        ScriptedResponse(body=tool_call("nested")),
        *replies("inner", "outer"),
    ]
    outer_token = trio.lowlevel.current_trio_token()
    pools: list[Pool] = []
    with trio.fail_after(20):
        async with (
            open_sse_server(*script) as server,
            open_pool(max_connections=1) as pool,
            httpx2.AsyncClient() as client,
        ):
            url = server.url

            @tool
            def nested() -> str:
                """Ask another agent, in a Trio run of this thread."""

                async def inner() -> str:
                    agent = Agent(model(url), api_key="k")
                    with trio.fail_after(5):
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(agent.prompt, "inner")
                            # The request was sent, or waits for a connection.
                            await trio.testing.wait_all_tasks_blocked()
                            outer_token.run_sync_soon(resume.set)  # the other stream ends
                    pools.append(_pool.current_pool())
                    return last_reply(agent).text

                return trio.run(inner)

            streaming = Agent(model(url), api_key="k")
            asking = Agent(  # not through the block's pool
                model(url), api_key="k", tools=[nested], stream_fn=OpenAIChat(client).stream
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(streaming.prompt, "stream")
                await trio.testing.wait_all_tasks_blocked()  # its stream holds the connection
                nursery.start_soon(asking.prompt, "ask")
    assert said(streaming) == ("stop", TEXT_REPLY)
    assert said(asking) == ("stop", "outer")
    tool_result = asking.state.messages[2]
    assert tool_result.role == "toolResult"
    assert tool_result.content[0].text == "inner"  # type: ignore[union-attr]
    (inner_pool,) = pools
    assert inner_pool is not pool
    assert inner_pool.client.is_closed  # the inner run's pool, closed when that run ended
