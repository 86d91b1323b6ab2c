"""Where a key from the environment goes: only to the servers of the provider it belongs to.

A provider's own variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...) is sent only
over HTTPS to a host of that provider: the catalog's base URLs of the providers whose
key it is, and the APIs' own hosts. The request's URL decides, not the model's provider
label. Any other server gets the key given (``api_key`` / ``get_api_key``), or none: a
server that needs a key is refused before anything is sent, with an error that names
the variable and why it is not sent there.

``as_if_at`` lets a test see what a provider sends to its own server: the request
reaches the loopback server, its ``host`` header naming the server of its URL.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._providers import as_if_at, call, options
from tests.test_provider_matrix import APIS, OWN_SERVERS, Api
from trio_agent import Model, models
from trio_agent.providers import anthropic, google, openai_chat, openai_responses
from trio_agent.providers._common import KEY_VARIABLES, key_servers, server_of
from trio_agent.testing import ScriptedResponse, open_sse_server

KEY = "sk-env-0123456789abcdef"


AT_A_URL = {
    "openai_chat": lambda url: openai_chat.model("llama3.2", base_url=url + "/v1"),
    "openai_responses": lambda url: openai_responses.model("gpt-5", base_url=url + "/v1"),
    "anthropic": lambda url: anthropic.model("claude-sonnet-4-5", base_url=url),
    "google": lambda url: google.model("gemini-2.5-flash", base_url=url + "/v1beta"),
}
"""Each API's maker given a base URL, as a user writes it."""

AT_HOME = {
    "openai_chat": lambda: openai_chat.model("gpt-4.1"),
    "openai_responses": lambda: openai_responses.model("gpt-5"),
    "anthropic": lambda: anthropic.model("claude-sonnet-4-5"),
    "google": lambda: google.model("gemini-2.5-flash"),
}
"""Each API's maker without a base URL: its provider's own server."""


def own_variables(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variable of the API's provider set to ``KEY``."""
    for name in api.env_keys:
        monkeypatch.setenv(name, KEY)


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_providers_own_key_is_not_sent_to_a_server_a_base_url_names(
    api: Api, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maker given a base URL on this machine, the provider's variable set: the
    request goes without it (a local OpenAI-compatible server needs none), or is refused
    before it is sent; given explicitly, the key goes."""
    own_variables(api, monkeypatch)
    answer = ScriptedResponse(body=api.body)
    async with open_sse_server(answer, answer) as server:
        model = AT_A_URL[api.name](server.url)
        unkeyed = await call(api.stream, model, opts=options(api_key=None))
        assert KEY not in repr([request.headers for request in server.requests])
        given = await call(api.stream, model, opts=options(api_key="given-key"))
    header, _ = api.auth
    assert server.requests[-1].headers[header].endswith("given-key")
    assert given.message.stop_reason == "stop"
    if api.name == "openai_chat":  # detected as a local server: asked without a key
        assert unkeyed.message.stop_reason == "stop"
        assert header not in server.requests[0].headers
        assert len(server.requests) == 2
    else:
        assert len(server.requests) == 1
        names = " and ".join(api.env_keys)
        verb = "is" if len(api.env_keys) == 1 else "are"
        assert unkeyed.message.error_message == (
            f"no API key for {model.provider} at {server.url}: {names} {verb} sent only to "
            f"{OWN_SERVERS[api.name]}; for this server, give api_key (or get_api_key)"
        )


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_providers_own_key_goes_to_its_own_server(
    api: Api, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_variables(api, monkeypatch)
    async with (
        open_sse_server(ScriptedResponse(body=api.body)) as server,
        as_if_at(server.url) as client,
    ):
        stream = api.provider_class(client).stream
        result = await call(stream, AT_HOME[api.name](), opts=options(api_key=None))
    assert result.message.stop_reason == "stop", result.message.error_message
    (request,) = server.requests
    header, _ = api.auth
    assert request.headers[header].endswith(KEY)
    assert "https://" + request.headers["host"] == OWN_SERVERS[api.name]


@pytest.mark.parametrize(
    "base_url",
    [
        "http://api.openai.com/v1",  # not over TLS
        "https://api.openai.com.example.net/v1",
        "https://api.openai.com@example.net/v1",
        "https://user:pass@example.net/api.openai.com/v1",
        "https://example.net/v1?https://api.openai.com",
        "https://api.openai.com:8443/v1",
        "https://openrouter.ai/api/v1",  # another provider's server
        "https://user:pass@/v1",  # no host at all
    ],
)
async def test_the_url_decides_not_the_label(
    base_url: str, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model labelled ``openai`` at a URL that is not OpenAI's (by its scheme, host and
    port, as the HTTP client reads them) is not sent ``OPENAI_API_KEY``."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = openai_chat.model("gpt-4.1", base_url=base_url, provider="openai")
    async with open_sse_server() as server, as_if_at(server.url) as client:
        result = await call(
            openai_chat.OpenAIChat(client).stream, model, opts=options(api_key=None)
        )
    assert server.requests == []
    error = result.message.error_message or ""
    assert "OPENAI_API_KEY is sent only to https://api.openai.com; for this server" in error
    assert "pass" not in error  # a password in the URL is not shown


@pytest.mark.parametrize(
    "base_url",
    ["https://api.openai.com/v1", "https://API.OpenAI.com/v1/", "https://api.openai.com:443/v1"],
)
async def test_the_same_server_written_another_way_is_the_same_server(
    base_url: str, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = openai_chat.model("gpt-4.1", base_url=base_url, provider="openai")
    async with (
        open_sse_server(ScriptedResponse(body=APIS[0].body)) as server,
        as_if_at(server.url) as client,
    ):
        await call(openai_chat.OpenAIChat(client).stream, model, opts=options(api_key=None))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_another_providers_label_reads_its_variable_and_sends_it_to_no_other_server(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``provider="anthropic"`` on the responses API points at OpenAI's server: Anthropic's
    key is not sent there (the request goes without a key, as for any provider label
    but OpenAI's on this API). Groq's key is not sent to OpenAI's server either."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("GROQ_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    labelled = openai_responses.model("gpt-5", provider="anthropic")
    assert labelled.base_url == "https://api.openai.com/v1"
    groq = openai_chat.model("llama", provider="groq", base_url="https://api.openai.com/v1")
    body = APIS[1].body
    async with (
        open_sse_server(ScriptedResponse(body=body)) as server,
        as_if_at(server.url) as client,
    ):
        responses = openai_responses.OpenAIResponses(client)
        await call(responses.stream, labelled, opts=options(api_key=None))
        chat = openai_chat.OpenAIChat(client)
        refused = await call(chat.stream, groq, opts=options(api_key=None))
    (request,) = server.requests
    assert KEY not in repr(request.headers)
    assert refused.message.error_message == (
        "no API key for groq at https://api.openai.com: GROQ_API_KEY is sent only to "
        "https://api.groq.com; for this server, give api_key (or get_api_key)"
    )


def test_every_catalog_providers_key_may_go_to_its_own_servers() -> None:
    """A model of the catalog, at the catalog's URL, is sent its provider's key (but for
    Azure's, whose URL is each user's own resource: none is sent there unless given)."""
    no_host = {(m.provider, m.id) for m in models.list() if server_of(m.base_url) is None}
    assert no_host == {("azure", "deepseek-v4-pro")}
    for model in models.list():
        if (model.provider, model.id) in no_host:
            continue
        for variable in KEY_VARIABLES.get(model.provider, ()):
            assert server_of(model.base_url) in key_servers(variable), (model.provider, model.id)


def test_a_key_variable_goes_only_over_https_to_its_providers_hosts() -> None:
    assert key_servers("OPENAI_API_KEY") == {("https", "api.openai.com", 443)}
    assert key_servers("MOONSHOT_API_KEY") == {
        ("https", "api.moonshot.ai", 443),
        ("https", "api.moonshot.cn", 443),
    }
    assert key_servers("GOOGLE_API_KEY") == key_servers("GEMINI_API_KEY")
    assert key_servers("NOT_A_KEY_VARIABLE") == frozenset()
    assert server_of("https://u:p@API.openai.com:443/v1#x") == ("https", "api.openai.com", 443)
    assert server_of("http://[::1]:8000/v1") == ("http", "::1", 8000)
    assert server_of("not a url") is None
    assert server_of("https://host:99999999/") is None


def test_a_model_the_catalog_does_not_know_is_sent_no_catalog_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    provider = openai_chat.OpenAIChat()
    model = Model(id="m", api="openai-chat", provider="acme", base_url="https://api.openai.com/v1")
    assert provider.api_key(model, options(api_key=None)) is None


async def test_a_provider_with_two_key_variables_reads_them_in_pis_order(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pi-ai 1.6.0's Qwen Token Plan: the plan's own variable first, then the region's
    one both plans used to share; each sent only to the plan's server."""
    assert KEY_VARIABLES["qwen-token-plan"] == (
        "QWEN_TOKEN_PLAN_TEAM_API_KEY",
        "QWEN_TOKEN_PLAN_API_KEY",
    )
    model = openai_chat.model("qwen3.7-plus", provider="qwen-token-plan")
    monkeypatch.delenv("QWEN_TOKEN_PLAN_TEAM_API_KEY", raising=False)
    monkeypatch.setenv("QWEN_TOKEN_PLAN_API_KEY", "shared-key")
    body = ScriptedResponse(body=APIS[0].body)
    async with open_sse_server(body, body) as server, as_if_at(server.url) as client:
        chat = openai_chat.OpenAIChat(client)
        await call(chat.stream, model, opts=options(api_key=None))
        monkeypatch.setenv("QWEN_TOKEN_PLAN_TEAM_API_KEY", "team-key")
        await call(chat.stream, model, opts=options(api_key=None))
    sent = [request.headers["authorization"] for request in server.requests]
    assert sent == ["Bearer shared-key", "Bearer team-key"]
    assert {request.headers["host"] for request in server.requests} == {
        server_of(model.base_url)[1]  # type: ignore[index]  # a catalog URL names a host
    }
