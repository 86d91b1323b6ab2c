"""The provider registry behind Model.api (design.md#wire-formats)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agent.providers as providers
from tests._providers import as_if_at, call, fixture, options
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    UnknownApiError,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import anthropic, faux
from trio_agent.testing import EventRecorder, ScriptedResponse, open_sse_server


@pytest.fixture
def custom_api() -> Iterator[str]:
    yield "custom-test"
    providers._registry.pop("custom-test", None)


async def test_a_registered_stream_function_serves_its_api(custom_api: str) -> None:
    seen: list[str] = []

    async def stream_fn(model: Model, context: Any, options: Any, emit: Any) -> AssistantMessage:
        seen.append(model.id)
        return AssistantMessage(content=(TextContent("custom"),))

    providers.register(custom_api, stream_fn)
    messages = await run_agent_loop(
        [UserMessage.text("hi")],
        AgentContext(),
        AgentLoopConfig(model=Model(id="m1", api=custom_api)),
        EventRecorder(),
    )
    assert seen == ["m1"]
    assert messages[-1].text == "custom"  # type: ignore[union-attr]  # an AssistantMessage, here
    assert custom_api in providers.registered_apis()


def test_the_scripted_model_and_the_http_providers_are_registered() -> None:
    assert providers.get_stream_fn("faux") is faux.stream
    for module in (
        providers.anthropic,
        providers.google,
        providers.openai_chat,
        providers.openai_responses,
    ):
        assert providers.get_stream_fn(module.API) is module.stream


async def test_streaming_from_an_unknown_api_is_refused_at_a_checkpoint() -> None:
    model = attrs.evolve(faux.model(["x"]), api="nowhere")
    with trio.testing.assert_checkpoints(), pytest.raises(UnknownApiError, match="'nowhere'"):
        await providers.stream(model, LlmContext("", []), StreamOptions(), _ignore)


async def _ignore(event: object) -> None:
    return None


def test_an_unknown_api_names_itself_and_the_known_ones() -> None:
    with pytest.raises(
        UnknownApiError,
        match=r"registered for api 'x' \(registered: anthropic-messages, faux, google-generative",
    ):
        providers.get_stream_fn("x")


@pytest.mark.parametrize(
    ("api", "fn", "error"),
    [
        ("", faux.stream, "api must be a non-empty string, not ''"),
        ("ok", 42, "stream_fn must be an async callable, not 42"),
    ],
)
def test_register_refuses_bad_arguments(api: str, fn: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        providers.register(api, fn)


async def test_a_model_without_a_script_ends_with_an_error_reply() -> None:
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage.text("hi")],
        AgentContext(),
        AgentLoopConfig(model=Model(id="bare", api="faux")),
        recorder,
    )
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == (
        "error",
        "model 'bare' has no script: make it with trio_agent.testing.scripted_model()",
    )


async def test_a_catalog_provider_on_another_api_reads_its_own_key_variable(
    clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MiniMax serves the Anthropic API: ANTHROPIC_API_KEY must never go to its server.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-minimax")
    monkeypatch.delenv("MINIMAX_API_KEY", raising=False)
    minimax = anthropic.model("MiniMax-M3", provider="minimax")
    assert minimax.base_url == "https://api.minimax.io/anthropic"
    async with open_sse_server() as server, as_if_at(server.url) as client:
        provider = anthropic.Anthropic(client)
        refused = await call(provider.stream, minimax, opts=options(api_key=None))
        assert server.requests == []
        monkeypatch.setenv("MINIMAX_API_KEY", "minimax-key")
        server.add(ScriptedResponse(body=fixture("anthropic", "text.sse")))
        answered = await call(provider.stream, minimax, opts=options(api_key=None))
    assert refused.message.error_message == (
        "no API key for minimax: set MINIMAX_API_KEY, or give api_key (or get_api_key)"
    )
    assert answered.message.stop_reason == "stop"
    (request,) = server.requests
    assert (request.headers["host"], request.headers["x-api-key"]) == (
        "api.minimax.io",
        "minimax-key",
    )
