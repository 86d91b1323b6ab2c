"""The provider registry behind Model.api (providers.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agent.providers as providers
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
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder


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
    assert messages[-1].text == "custom"  # type: ignore[union-attr]
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
        "model 'bare' has no script: make it with trio_agent.providers.faux.model()",
    )
