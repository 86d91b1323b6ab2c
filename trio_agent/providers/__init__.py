"""Model providers: the stream functions behind ``Model.api``.

:func:`stream` is the loop's default stream function: it looks up the stream
function registered for ``model.api`` and calls it. Registered from the start:
``"faux"`` (the scripted model, :mod:`~trio_agent.providers.faux`),
``"openai-chat"`` (:mod:`~trio_agent.providers.openai_chat`: OpenAI, and the
servers that speak its chat completions: Ollama, vLLM, llama.cpp, ...),
``"openai-responses"`` (:mod:`~trio_agent.providers.openai_responses`),
``"anthropic-messages"`` (:mod:`~trio_agent.providers.anthropic`) and
``"google-generative-ai"`` (:mod:`~trio_agent.providers.google`). An
application adds its own with :func:`register`.
"""

from __future__ import annotations

import trio

from .._errors import UnknownApiError
from .._messages import AssistantMessage
from .._model import Model
from .._stream import (
    AssistantMessageBuilder,
    Emit,
    LlmContext,
    StreamFn,
    StreamOptions,
    Timeouts,
)
from . import anthropic, faux, google, openai_chat, openai_responses

__all__ = [
    "AssistantMessageBuilder",
    "Emit",
    "LlmContext",
    "StreamFn",
    "StreamOptions",
    "Timeouts",
    "anthropic",
    "faux",
    "get_stream_fn",
    "google",
    "openai_chat",
    "openai_responses",
    "register",
    "registered_apis",
    "stream",
]

_registry: dict[str, StreamFn] = {
    "faux": faux.stream,
    anthropic.API: anthropic.stream,
    google.API: google.stream,
    openai_chat.API: openai_chat.stream,
    openai_responses.API: openai_responses.stream,
}


def register(api: str, stream_fn: StreamFn) -> None:
    """Make ``stream_fn`` the stream function of models whose ``api`` is ``api`` (replacing any)."""
    if not isinstance(api, str) or not api:
        raise ValueError(f"api must be a non-empty string, not {api!r}")
    if not callable(stream_fn):
        raise TypeError(f"stream_fn must be an async callable, not {stream_fn!r}")
    _registry[api] = stream_fn


def registered_apis() -> list[str]:
    """The ``api`` names that have a stream function, sorted."""
    return sorted(_registry)


def get_stream_fn(api: str) -> StreamFn:
    """The stream function registered for ``api``; :class:`UnknownApiError` if none is."""
    try:
        return _registry[api]
    except KeyError:
        raise UnknownApiError(
            f"no stream function is registered for api {api!r} "
            f"(registered: {', '.join(registered_apis())}); "
            "register one with trio_agent.providers.register()"
        ) from None


async def stream(
    model: Model, context: LlmContext, options: StreamOptions, emit: Emit
) -> AssistantMessage:
    """Stream a reply from ``model`` with the stream function registered for ``model.api``."""
    try:
        stream_fn = get_stream_fn(model.api)
    except UnknownApiError as exc:
        refusal = exc
    else:
        return await stream_fn(model, context, options, emit)
    await trio.lowlevel.checkpoint()  # a refusal is a checkpoint too
    raise refusal
