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

The provider modules are imported when first used: by a run on a model of
their ``api`` (when it starts, through :func:`get_stream_fn`), or by reading
``trio_agent.providers.anthropic`` and the like. The HTTP providers bring
httpx2 and jiter with them; ``import trio_agent``, and a run on the scripted
model, do not.

Keys: the one given (``StreamOptions.api_key``, which the loop fills from ``api_key`` or
``get_api_key``) goes to the server the model names; a key from a provider's environment
variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ...) only over HTTPS
to a host of the providers whose variable it is (the model catalog's base URLs, and the APIs'
own hosts), whatever the model's provider label. Without a key to send, a request to a
server that needs one ends as an error reply naming the variable and why it is not sent
there, before anything is sent. A key the server echoes (in an error, the response id, text
or thinking whole or split across deltas, tool calls, signatures) is ``***`` in every event
and message.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import trio

from .. import _public
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

if TYPE_CHECKING:
    from . import anthropic, faux, google, openai_chat, openai_responses
    from ._pool import Pool, open_pool

__all__ = [
    "AssistantMessageBuilder",
    "Emit",
    "LlmContext",
    "Pool",
    "StreamFn",
    "StreamOptions",
    "Timeouts",
    "anthropic",
    "faux",
    "get_stream_fn",
    "google",
    "open_pool",
    "openai_chat",
    "openai_responses",
    "register",
    "registered_apis",
    "stream",
]

# The built-in providers: the module whose ``stream`` serves each api (each module's
# ``API``), imported the first time that api is asked for.
_BUILT_IN: dict[str, str] = {
    "anthropic-messages": "anthropic",
    "faux": "faux",
    "google-generative-ai": "google",
    "openai-chat": "openai_chat",
    "openai-responses": "openai_responses",
}
_MODULES = frozenset(_BUILT_IN.values())
# The connection pools, imported on first use too (they import httpx2).
_POOL_NAMES = frozenset({"Pool", "open_pool"})

# The stream functions registered, and those of the built-in providers imported so far:
# after its first run, an api costs one lookup here.
_registry: dict[str, StreamFn] = {}


def __getattr__(name: str) -> Any:
    """The provider modules (``trio_agent.providers.anthropic``) and the pools
    (:func:`open_pool`), imported on first use."""
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _POOL_NAMES:
        return getattr(importlib.import_module(f"{__name__}._pool"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(api: str, stream_fn: StreamFn) -> None:
    """Make ``stream_fn`` the stream function of models whose ``api`` is ``api`` (replacing any).

    To give a provider an HTTP client of your own:
    ``register(anthropic.API, anthropic.Anthropic(client).stream)``.
    """
    if not isinstance(api, str) or not api:
        raise ValueError(f"api must be a non-empty string, not {api!r}")
    if not callable(stream_fn):
        raise TypeError(f"stream_fn must be an async callable, not {stream_fn!r}")
    _registry[api] = stream_fn


def registered_apis() -> list[str]:
    """The ``api`` names that have a stream function, sorted: ``anthropic-messages``,
    ``faux``, ``google-generative-ai``, ``openai-chat``, ``openai-responses`` and those
    registered."""
    return sorted(_registry.keys() | _BUILT_IN.keys())


def get_stream_fn(api: str) -> StreamFn:
    """The stream function registered for ``api``; :class:`UnknownApiError` if none is.

    A built-in provider's module is imported on the first call for its api.
    """
    try:
        return _registry[api]
    except KeyError:
        pass
    module = _BUILT_IN.get(api)
    if module is None:
        raise UnknownApiError(
            f"no stream function is registered for api {api!r} "
            f"(registered: {', '.join(registered_apis())}); "
            "register one with trio_agent.providers.register()"
        )
    stream_fn: StreamFn = importlib.import_module(f"{__name__}.{module}").stream
    # setdefault: a register() made while the module was being imported wins.
    return _registry.setdefault(api, stream_fn)


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


# The provider modules are left out: they are imported on first use, and public already.
_public.fixup_module_metadata(
    __name__,
    {**globals(), "__all__": [name for name in __all__ if name not in _MODULES | _POOL_NAMES]},
)
