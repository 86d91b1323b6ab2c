"""OpenAI chat completions (``api="openai-chat"``), and the servers that speak it.

Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter, DeepSeek, Groq,
Together, Mistral and most others speak this API with small differences; the
:class:`Compat` switches say which, detected from the base URL and provider
label where it is obvious, and settable by hand::

    from trio_agent.providers import openai_chat

    gpt = openai_chat.model("gpt-4.1")                                    # OPENAI_API_KEY
    local = openai_chat.model("llama3.2", base_url="http://localhost:11434/v1")  # Ollama, no key
    odd = openai_chat.model("m", base_url="https://x/v1",
                            compat=openai_chat.Compat(max_tokens_field="max_tokens"))

A reasoning level is sent the way the server takes it (``Compat.thinking_format``:
``reasoning_effort`` for OpenAI, a ``reasoning`` object for OpenRouter,
``thinking`` for DeepSeek and Z.ai, ``enable_thinking`` for Qwen, ...), and then
no ``temperature`` (OpenAI's reasoning models refuse one). A model with the
catalog's ``thinking_levels`` gets the nearest level it offers (a level mapped
to None is not offered: the nearest above it, else below; none: reasoning is
not asked for), as they map it; others get the level, ``xhigh`` as ``high``.

For a model of the catalog, its ``compat_flags`` (pi-ai's per-model rules) set
the switches the base URL cannot tell; see :func:`resolve_compat`.

The prompt cache, as pi-ai asks for it. The ``session_id`` (its first 64
characters, :func:`~trio_agent.providers._common.session_key`) is sent as
``prompt_cache_key`` to OpenAI's server (``Compat.prompt_cache_key_mode``), and
to any server when ``cache_retention="long"`` and the server keeps a cache
longer (``Compat.supports_long_cache_retention``; then with
``prompt_cache_retention: "24h"``); in session headers where the server routes
by them (``Compat.send_session_affinity_headers``: OpenRouter, Fireworks,
Cloudflare). OpenRouter's ``anthropic/*`` models cache only at Anthropic's
``cache_control`` breakpoints (``Compat.cache_control_format``): one on the
system prompt, one on the last tool, one on the last message with text
(``ttl: "1h"`` with ``"long"``). With ``cache_retention="none"``, none of these
are sent.

Reading the stream (design.md#openai-chat-completions): text deltas (a ``refusal`` is text
too: it is the model's answer); reasoning from the first
non-empty of ``reasoning_content``, ``reasoning``, ``reasoning_text`` (the
field's name is kept as the thinking signature, to send the reasoning back
the same way); tool-call fragments routed by id, then index, then to the last
call (servers that omit ``index``, reuse index 0, or send ``"null"`` ids);
usage from any chunk or from ``choices[0].usage``; ``data: [DONE]``. A
finish reason that is not ``stop`` / ``end`` / ``length`` / ``tool_calls`` /
``function_call`` ends the reply as an error naming it. So does a chunk
with a field of a type the API does not give it (``usage.prompt_tokens is
[1], not a token count``; see ``_fields``), and nothing of that chunk is
taken; an event with empty data is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias, get_args
from urllib.parse import urlsplit

import attrs
import jiter

from .. import _catalog
from .._events import AssistantMessageEvent
from .._messages import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._model import Model, ModelCost
from .._stream import AssistantMessageBuilder, LlmContext, StreamOptions
from ._common import (
    KEY_VARIABLES,
    HttpProvider,
    Parser,
    PartialJson,
    model_effort,
    offers,
    on_openrouter,
    parse_json,
    prepare_messages,
    reported,
    session_header,
    session_key,
)
from ._fields import Malformed, count, dumps, integer, obj, objects, path, show, string
from ._sse import SseEvent
from ._transport import HttpRequest, ProviderFailure, json_text

__all__ = ["API", "Compat", "OpenAIChat", "model", "provider", "stream"]

API = "openai-chat"
"""The ``api`` of chat completions models, under which :func:`stream` is registered."""
_FREE = ModelCost()
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_REASONING_KEYS = frozenset(_REASONING_FIELDS)
_NOT_TEXT_KEYS = frozenset((*_REASONING_FIELDS, "tool_calls"))
_from_json = jiter.from_json


@attrs.frozen(kw_only=True)
class Compat:
    """How a server differs from OpenAI's own.

    ``None`` takes the switch from the model catalog's flags for the model
    (``Model.compat_flags``), else detects it from the provider and the URL; a value given
    here wins over both. ``thinking_format`` is how the server takes the reasoning level, as
    pi-ai names it: ``"openai"`` (``reasoning_effort``), ``"openrouter"`` (``reasoning:
    {effort}``), ``"qwen"`` (``enable_thinking``), ``"deepseek"`` and ``"zai"`` (``thinking:
    {type}``), ``"together"`` (``reasoning: {enabled}``), ``"baseten"``
    (``chat_template_args``), ``"ant-ling"``. ``reasoning_effort`` is sent to every server
    but xAI's, Z.ai's, Moonshot's, Together's, Cloudflare's gateway, NVIDIA's and Ant
    Ling's, as pi-ai detects it. With ``cache_retention="none"``, no key, header or
    breakpoint is sent.
    """

    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    """The field that carries ``max_tokens``: ``"max_tokens"`` or ``"max_completion_tokens"``."""
    supports_developer_role: bool | None = None
    """Send the system prompt of a reasoning model with role ``developer``."""
    supports_usage_in_streaming: bool | None = None
    """Ask for usage with ``stream_options.include_usage``."""
    supports_store: bool | None = None
    """Send ``store: false``."""
    supports_reasoning_effort: bool | None = None
    """Send ``reasoning_effort`` for the reasoning level (with the formats that have
    their own switch, as well as it: DeepSeek's ``thinking``, Qwen's ``enable_thinking``)."""
    supports_strict_mode: bool | None = None
    """Send ``strict: false`` in tool definitions."""
    requires_tool_result_name: bool | None = None
    """Tool messages carry the tool's ``name``."""
    requires_api_key: bool | None = None
    """Refuse to send a request without a key (local servers need none)."""
    requires_reasoning_content_on_assistant_messages: bool | None = None
    """A reasoning model's assistant messages carry ``reasoning_content`` (``""`` when
    there is none): DeepSeek's thinking mode refuses a history without it."""
    thinking_format: ThinkingFormat | None = None
    """How the reasoning level is sent (see :data:`ThinkingFormat`)."""
    chat_template_args: Mapping[str, Any] | None = None
    """Baseten's ``chat_template_args`` (format ``baseten``), as pi-ai writes them: a
    value ``{"$var": "thinking.enabled"}`` is whether reasoning is asked for, another
    object the model's value for the level (left out, with ``omitWhenOff``, when no
    level is asked for); anything else is sent as it is."""
    cache_control_format: Literal["anthropic"] | None = None
    """``"anthropic"``: the server caches prompts at Anthropic's ``cache_control``
    breakpoints, placed on the system prompt, the last tool and the last conversation
    message (OpenRouter's ``anthropic/*`` models). None (the default for every other
    model): no breakpoints."""
    send_session_affinity_headers: bool | None = None
    """Send the session headers (:attr:`session_affinity_format`) so that the requests of
    one conversation reach the server that holds its cache."""
    session_affinity_format: SessionAffinityFormat | None = None
    """Which session headers: ``openrouter``: ``x-session-id``; ``openai``:
    ``session_id``, ``x-client-request-id`` and ``x-session-affinity``;
    ``openai-nosession``: the last two."""
    supports_long_cache_retention: bool | None = None
    """The server keeps a prompt cache longer on request (``cache_retention="long"``):
    ``prompt_cache_retention: "24h"``, and a one-hour ``cache_control`` breakpoint."""
    prompt_cache_key_mode: Literal["auto", "enabled", "disabled"] | None = None
    """When the session id is sent as ``prompt_cache_key``: ``enabled`` always,
    ``disabled`` never, ``auto`` (the default) to OpenAI's server, and to any server
    with long cache retention asked for and supported."""
    zai_tool_stream: bool | None = None
    """Send Z.ai's ``tool_stream: true`` with the tools, so that tool calls stream."""


ThinkingFormat: TypeAlias = Literal[
    "openai", "openrouter", "qwen", "deepseek", "together", "zai", "baseten", "ant-ling"
]
"""How a server takes the reasoning level, as pi-ai's ``thinkingFormat`` names it:
``openai``: ``reasoning_effort``; ``openrouter``: ``reasoning: {effort}`` (and
``{effort: "none"}`` to turn it off); ``qwen``: ``enable_thinking``; ``deepseek`` and
``zai``: ``thinking: {type: enabled | disabled}``; ``together``: ``reasoning:
{enabled}``; ``baseten``: ``chat_template_args`` (see
:attr:`Compat.chat_template_args`) and ``reasoning_effort``; ``ant-ling``:
``reasoning: {effort}``, only when asked. Each server ignores (or refuses) the
others' fields, so a level sent the wrong way is lost."""

_THINKING_FORMATS: frozenset[str] = frozenset(get_args(ThinkingFormat))

SessionAffinityFormat: TypeAlias = Literal["openai", "openai-nosession", "openrouter"]
"""The session headers a server takes (see :attr:`Compat.session_affinity_format`)."""


_OPENAI = Compat(
    max_tokens_field="max_completion_tokens",
    supports_developer_role=True,
    supports_usage_in_streaming=True,
    supports_store=True,
    supports_reasoning_effort=True,
    supports_strict_mode=True,
    requires_tool_result_name=False,
    requires_api_key=True,
    requires_reasoning_content_on_assistant_messages=False,
    thinking_format="openai",
)

# The catalog's flags (pi's camelCase ``compat`` keys) that are Compat switches, with the
# values each may take: a flag of another value is not this version's, and is ignored.
_FLAGS: dict[str, tuple[str, Any]] = {
    "maxTokensField": ("max_tokens_field", frozenset(("max_tokens", "max_completion_tokens"))),
    "supportsDeveloperRole": ("supports_developer_role", bool),
    "supportsUsageInStreaming": ("supports_usage_in_streaming", bool),
    "supportsStore": ("supports_store", bool),
    "supportsReasoningEffort": ("supports_reasoning_effort", bool),
    "supportsStrictMode": ("supports_strict_mode", bool),
    "requiresToolResultName": ("requires_tool_result_name", bool),
    "requiresReasoningContentOnAssistantMessages": (
        "requires_reasoning_content_on_assistant_messages",
        bool,
    ),
    "thinkingFormat": ("thinking_format", _THINKING_FORMATS),
    "chatTemplateArgs": ("chat_template_args", Mapping),
    "cacheControlFormat": ("cache_control_format", frozenset(("anthropic",))),
    "sendSessionAffinityHeaders": ("send_session_affinity_headers", bool),
    "sessionAffinityFormat": (
        "session_affinity_format",
        frozenset(get_args(SessionAffinityFormat)),
    ),
    "supportsLongCacheRetention": ("supports_long_cache_retention", bool),
    "promptCacheKeyMode": ("prompt_cache_key_mode", frozenset(("auto", "enabled", "disabled"))),
    "zaiToolStream": ("zai_tool_stream", bool),
}

# Provider label, and its key's environment variable, by host.
_KNOWN_HOSTS = {
    "api.openai.com": ("openai", "OPENAI_API_KEY"),
    "openrouter.ai": ("openrouter", "OPENROUTER_API_KEY"),
    "api.deepseek.com": ("deepseek", "DEEPSEEK_API_KEY"),
    "api.groq.com": ("groq", "GROQ_API_KEY"),
    "api.together.xyz": ("together", "TOGETHER_API_KEY"),
    "api.together.ai": ("together", "TOGETHER_API_KEY"),
    "api.mistral.ai": ("mistral", "MISTRAL_API_KEY"),
    "api.x.ai": ("xai", "XAI_API_KEY"),
    "api.cerebras.ai": ("cerebras", "CEREBRAS_API_KEY"),
    "api.moonshot.ai": ("moonshotai", "MOONSHOT_API_KEY"),
}
_LOCAL_PORTS = {11434: "ollama", 8000: "vllm", 8080: "llama.cpp", 1234: "lmstudio"}
_ENV_KEYS = {label: env for label, env in _KNOWN_HOSTS.values()}


def _is_local(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0") or host.endswith(".local")


def detect_provider(base_url: str) -> str:
    """The provider label for a base URL ("openai", "ollama", ..., else "openai-compatible")."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if host in _KNOWN_HOSTS:
        return _KNOWN_HOSTS[host][0]
    if _is_local(base_url):
        return _LOCAL_PORTS.get(parts.port or 0, "local")
    return "openai-compatible"


_NONSTANDARD = frozenset({"deepseek", "xai", "cerebras", "together", "moonshotai", "mistral"})
_LOCAL = frozenset({*_LOCAL_PORTS.values(), "local"})
_DETECTED_FORMATS: dict[str, ThinkingFormat] = {
    "openrouter": "openrouter",
    "deepseek": "deepseek",
    "together": "together",
}
"""The thinking format of a provider detected by URL (pi-ai's ``detectCompat``)."""

_SHORT_CACHE_ONLY = {
    "together": ("api.together.ai", "api.together.xyz"),
    "cloudflare-workers-ai": ("api.cloudflare.com",),
    "cloudflare-ai-gateway": ("gateway.ai.cloudflare.com",),
    "nvidia": ("integrate.api.nvidia.com",),
    "ant-ling": ("api.ant-ling.com",),
}
"""The providers (and their hosts) that keep no prompt cache longer on request."""


_NO_REASONING_EFFORT = {
    "xai": ("api.x.ai",),
    "zai": ("api.z.ai", "open.bigmodel.cn"),
    "zai-coding-cn": (),
    "moonshotai": ("api.moonshot.",),
    "moonshotai-cn": (),
    "together": ("api.together.ai", "api.together.xyz"),
    "cloudflare-ai-gateway": ("gateway.ai.cloudflare.com",),
    "nvidia": ("integrate.api.nvidia.com",),
    "ant-ling": ("api.ant-ling.com",),
}
"""The providers (and their hosts) that take no ``reasoning_effort``; every other
server is sent one (pi-ai's ``detectCompat``)."""


def _among(provider: str, base_url: str, known: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether ``provider``, or a host in ``base_url``, is one of ``known``."""
    return any(
        provider == name or any(host in base_url for host in hosts) for name, hosts in known.items()
    )


def resolve_compat(model: Model) -> Compat:
    """The model's switches: the :class:`Compat` it was given, then the catalog's flags
    for it (``model.compat_flags``, pi's per-model ``compat``), then what is detected
    from the provider label and the base URL, switch by switch.

    The catalog says how each provider's server takes each model (Together wants
    ``max_tokens``, DeepSeek ``thinking`` and ``reasoning_content``, OpenRouter its
    ``reasoning`` object), which a URL cannot tell; detection is for the servers it
    does not describe (a local server, a proxy), and a switch set by hand says what the
    user knows of theirs, so it wins over both. As pi-ai's ``getCompat``.
    """
    provider = model.provider
    if provider in ("", "openai-compatible"):
        provider = detect_provider(model.base_url)
    standard = provider == "openai"
    openrouter = on_openrouter(model)
    detected = attrs.evolve(
        _OPENAI,
        max_tokens_field=(
            "max_tokens"
            if provider in _LOCAL or provider in _NONSTANDARD
            else "max_completion_tokens"
        ),
        supports_developer_role=standard,
        supports_store=standard,
        supports_reasoning_effort=not _among(provider, model.base_url, _NO_REASONING_EFFORT),
        supports_strict_mode=standard or provider in ("openrouter", "groq"),
        requires_api_key=provider not in _LOCAL,
        requires_reasoning_content_on_assistant_messages=provider == "deepseek",
        thinking_format=_DETECTED_FORMATS.get(provider, "openai"),
        cache_control_format=(
            "anthropic" if provider == "openrouter" and model.id.startswith("anthropic/") else None
        ),
        send_session_affinity_headers=openrouter,
        session_affinity_format="openrouter" if openrouter else "openai",
        supports_long_cache_retention=not _among(provider, model.base_url, _SHORT_CACHE_ONLY),
        zai_tool_stream=False,
    )
    flags = model.compat_flags
    from_catalog: dict[str, Any] = {}
    for key, (name, allowed) in _FLAGS.items():
        value = flags.get(key)
        if allowed is bool or allowed is Mapping:
            known = isinstance(value, allowed)
        else:
            known = isinstance(value, str) and value in allowed
        if known:  # a value of another pi-ai version's making is left to detection
            from_catalog[name] = value
    detected = attrs.evolve(detected, **from_catalog)
    given = model.compat if isinstance(model.compat, Compat) else Compat()
    values = {
        field.name: getattr(given, field.name)
        if getattr(given, field.name) is not None
        else getattr(detected, field.name)
        for field in attrs.fields(Compat)
    }
    return Compat(**values)


_DEFAULTS: dict[str, Any] = {
    "base_url": "https://api.openai.com/v1",
    "reasoning": False,
    "context_window": 128_000,
    "max_tokens": 16_384,
    "input": ("text", "image"),
}
"""What a model the catalog does not know gets, where no argument says otherwise."""


def model(
    id: str,
    *,
    base_url: str | None = None,
    provider: str | None = None,
    compat: Compat | None = None,
    reasoning: bool | None = None,
    context_window: int | None = None,
    max_tokens: int | None = None,
    input: Sequence[str] | None = None,
    headers: dict[str, str] | None = None,
    cost: ModelCost | None = None,
) -> Model:
    """A model served over the chat completions API at ``base_url``.

    The provider label, when not given, is the one whose catalog models are
    served at ``base_url``, else the one :func:`detect_provider` finds
    (``"openai"`` when neither is given: ``"ollama"`` for port 11434 on this machine, ...,
    ``"openai-compatible"``); with a provider and no ``base_url``, the URL is the provider's
    in the catalog. OpenAI's own models are listed under ``openai-responses``: their limits
    and prices are used.

    What the model catalog (:mod:`trio_agent.models`) knows of ``id`` at
    ``provider`` is filled in: limits, prices, input, reasoning, base URL and
    the request rules. An argument given here wins over it; a ``base_url``
    other than the catalog's is another server, which the catalog does not
    describe. Without a ``base_url``, an id the provider does not list is an
    :class:`~trio_agent.UnknownModelError` naming the nearest ids it does list;
    with one, an id the catalog does not know gets the defaults (OpenAI's URL,
    no reasoning, 128,000 tokens of context, 16,384 of output, text and
    images, free).
    """
    return _catalog.describe(
        API,
        id,
        provider=provider,
        fallback_provider=detect_provider(base_url) if base_url else "openai",
        defaults=_DEFAULTS,
        base_url=base_url,
        reasoning=reasoning,
        context_window=context_window,
        max_tokens=max_tokens,
        input=input,
        headers=headers,
        cost=cost,
        compat=compat,
    )


# --- the request ---------------------------------------------------------------------------------


def _image_url(block: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
    }


def _user(message: UserMessage, images: bool) -> dict[str, Any] | None:
    """A user message; its images only if the model takes them."""
    content = message.content
    if isinstance(content, str):
        return {"role": "user", "content": content}
    parts = [
        {"type": "text", "text": block.text}
        if isinstance(block, TextContent)
        else _image_url(block)
        for block in content
        if images or isinstance(block, TextContent)
    ]
    return {"role": "user", "content": parts} if parts else None


def _assistant(message: AssistantMessage, reasoning_content: bool) -> dict[str, Any] | None:
    """An assistant message; with ``reasoning_content``, one always carries that field
    (``""`` when it has no reasoning in it), for the servers that require it."""
    out: dict[str, Any] = {"role": "assistant", "content": None}
    text = "".join(b.text for b in message.content if isinstance(b, TextContent) and b.text.strip())
    if text:
        out["content"] = text
    thinking = [b for b in message.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    if thinking:
        field = thinking[0].thinking_signature
        if field in _REASONING_FIELDS:  # send the reasoning back in the field it came in
            out[field] = "\n".join(b.thinking for b in thinking)
    calls = message.tool_calls
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json_text(call.arguments)},
            }
            for call in calls
        ]
    if reasoning_content and "reasoning_content" not in out:
        out["reasoning_content"] = ""
    if out["content"] is None and not calls:
        return None  # some servers refuse an assistant message with neither
    return out


def _messages(model: Model, context: LlmContext, compat: Compat) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        developer = model.reasoning and compat.supports_developer_role
        out.append(
            {"role": "developer" if developer else "system", "content": context.system_prompt}
        )
    messages: list[Message] = prepare_messages(context.messages, model)
    images: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
            tool: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": text or "(see attached image)",
            }
            if compat.requires_tool_result_name:
                tool["name"] = message.tool_name
            out.append(tool)
            if "image" in model.input:
                images += [_image_url(b) for b in message.content if isinstance(b, ImageContent)]
            following = messages[index + 1] if index + 1 < len(messages) else None
            if images and not isinstance(following, ToolResultMessage):
                # Tool messages cannot hold images: they follow as a user message.
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Attached image(s) from tool result:"},
                            *images,
                        ],
                    }
                )
                images = []
            continue
        converted = (
            _user(message, "image" in model.input)
            if isinstance(message, UserMessage)
            else _assistant(
                message,
                bool(model.reasoning and compat.requires_reasoning_content_on_assistant_messages),
            )
        )
        if converted is not None:
            out.append(converted)
    return out


def _reasoning(model: Model, level: str | None, compat: Compat) -> tuple[dict[str, Any], bool]:
    """The fields that send the reasoning ``level`` the way the server takes it
    (``compat.thinking_format``, as pi-ai's ``buildParams``), and whether they ask for
    reasoning.

    The level is the nearest the model offers, as its ``thinking_levels`` map it
    (:func:`model_effort`); a model that offers none gets reasoning turned off. With no
    level, the formats that have an "off" send it where the model can turn reasoning
    off (its ``off`` level is not mapped to None): such servers think by default, so a
    request without a level would otherwise still pay for reasoning.
    """
    if not model.reasoning:
        return {}, False
    value = model_effort(model, level) if level else None
    on = value is not None
    effort = compat.supports_reasoning_effort
    levels = model.thinking_levels
    can_turn_off = offers(model, "off")
    off = levels.get("off")
    out: dict[str, Any] = {}
    match compat.thinking_format:
        case "openrouter":  # OpenRouter's one reasoning object, whichever model it routes to
            if on:
                out["reasoning"] = {"effort": value}
            elif can_turn_off:
                out["reasoning"] = {"effort": off if isinstance(off, str) else "none"}
        case "qwen":
            out["enable_thinking"] = on
            if on and effort:
                out["reasoning_effort"] = value
        case "deepseek":
            if on:
                out["thinking"] = {"type": "enabled"}
            elif can_turn_off:
                out["thinking"] = {"type": "disabled"}
            if on and effort:
                out["reasoning_effort"] = value
        case "together":
            out["reasoning"] = {"enabled": on}
            if on and effort:
                out["reasoning_effort"] = value
        case "zai":
            # clear_thinking: false keeps the earlier turns' reasoning in the context
            out["thinking"] = (
                {"type": "enabled", "clear_thinking": False} if on else {"type": "disabled"}
            )
            if on and effort:
                out["reasoning_effort"] = value
        case "baseten":
            args = _template_values(model, value, compat.chat_template_args or {})
            if args:
                out["chat_template_args"] = args
            if effort:
                sent = value if on else off if isinstance(off, str) else None
                if sent is not None:
                    out["reasoning_effort"] = sent
        case "ant-ling":
            if on:
                out["reasoning"] = {"effort": value}
        case _:  # "openai"
            if on and effort:
                out["reasoning_effort"] = value
            elif not level and effort and isinstance(off, str):
                out["reasoning_effort"] = off
    return out, on and bool(out)  # a level the format has no field for asks for nothing


def _template_values(
    model: Model, value: str | None, template: Mapping[str, Any]
) -> dict[str, Any]:
    """Baseten's ``chat_template_args`` for the level (pi-ai's ``buildChatTemplateValues``).

    ``{"$var": "thinking.budget"}`` (a token budget, which this provider does not
    compute) is left out."""
    out: dict[str, Any] = {}
    on = value is not None
    for key, spec in template.items():
        if not isinstance(spec, Mapping):
            out[key] = spec
        elif not on and spec.get("omitWhenOff"):
            continue
        elif spec.get("$var") == "thinking.enabled":
            out[key] = on
        elif spec.get("$var") == "thinking.budget":
            continue
        else:  # the model's value for the level, or for "off" when none is asked for
            mapped = value if on else model.thinking_levels.get("off")
            if isinstance(mapped, str):
                out[key] = mapped
    return out


def _session_headers(form: SessionAffinityFormat | None, key: str) -> dict[str, str]:
    """The headers that name the conversation (``key``, the session id as
    :func:`~trio_agent.providers._common.session_key` cuts it), in the server's format."""
    key = session_header(key)
    if form == "openrouter":
        return {"x-session-id": key}
    headers = {"session_id": key} if form == "openai" else {}
    headers["x-client-request-id"] = key
    headers["x-session-affinity"] = key
    return headers


def _mark_breakpoints(
    messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]], mark: dict[str, Any]
) -> None:
    """Put Anthropic's cache breakpoint ``mark`` (``cache_control``) where pi-ai puts it:
    on the text of the first system (or developer) message, on the last tool, and on the
    last text of the last user, assistant or tool message that has text (a message
    whose content is a string becomes one text part). Three breakpoints at most, of the
    four the API allows: each request reads the cache up to its last one, and writes it
    there for the next."""
    for message in messages:
        if message["role"] in ("system", "developer"):
            _mark_text(message, mark)
            break
    if tools:
        tools[-1]["cache_control"] = mark
    for message in reversed(messages):
        if message["role"] in ("user", "assistant", "tool") and _mark_text(message, mark):
            break


def _mark_text(message: dict[str, Any], mark: dict[str, Any]) -> bool:
    """Mark the last text part of ``message``; whether it had one."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": mark}]
        return True
    if isinstance(content, list):
        for part in reversed(content):
            if part.get("type") == "text":
                part["cache_control"] = mark
                return True
    return False


class OpenAIChat(HttpProvider):
    """The chat completions provider. One instance per HTTP client.

    Its ``stream`` method is a stream function. With an ``httpx2.AsyncClient`` of yours
    (which you close), it sends through that client, and connections live as long as it
    does; without one, through the current pool (:func:`~trio_agent.providers.open_pool`'s,
    else the Trio run's). Any other client (httpx's own ``httpx.AsyncClient``, a sync
    ``httpx2.Client``) is a ``TypeError`` when the provider is made, naming what was given.
    """

    api: ClassVar[str] = API
    label: ClassVar[str] = "openai"
    env_keys: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def key_variables(self, model: Model) -> tuple[str, ...]:
        """The variable of the host's provider (``OPENAI_API_KEY`` for OpenAI,
        ``OPENROUTER_API_KEY`` for OpenRouter, ...); none for other servers (so that an
        OpenAI key is never sent to them). The catalog's table of key variables comes
        first; the known hosts' own variables cover a provider it does not list."""
        variables = KEY_VARIABLES.get(model.provider)
        if variables:
            return variables
        env = _ENV_KEYS.get(model.provider)
        return (env,) if env else ()

    def needs_key(self, model: Model) -> bool:
        return bool(resolve_compat(model).requires_api_key)

    def build_request(
        self, model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
    ) -> HttpRequest:
        compat = resolve_compat(model)
        body: dict[str, Any] = {
            "model": model.id,
            "messages": _messages(model, context, compat),
            "stream": True,
        }
        if compat.supports_usage_in_streaming:
            body["stream_options"] = {"include_usage": True}
        if compat.supports_store:
            body["store"] = False
        if options.max_tokens:
            body[compat.max_tokens_field or "max_completion_tokens"] = options.max_tokens
        thinking, thinks = _reasoning(model, options.reasoning, compat)
        if options.temperature is not None and not thinks:
            # Reasoning models refuse any temperature; with reasoning asked for it is
            # left out, as the responses provider does.
            body["temperature"] = options.temperature
        if context.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                        **({"strict": False} if compat.supports_strict_mode else {}),
                    },
                }
                for tool in context.tools
            ]
            if compat.zai_tool_stream:
                body["tool_stream"] = True
        body.update(thinking)
        key = session_key(options)
        retention = options.cache_retention
        long = retention == "long" and bool(compat.supports_long_cache_retention)
        mode = compat.prompt_cache_key_mode or "auto"
        if key is not None and (
            mode == "enabled" or (mode == "auto" and ("api.openai.com" in model.base_url or long))
        ):
            body["prompt_cache_key"] = key
        if long:
            body["prompt_cache_retention"] = "24h"
        if compat.cache_control_format == "anthropic" and retention != "none":
            mark = {"type": "ephemeral", **({"ttl": "1h"} if long else {})}
            _mark_breakpoints(body["messages"], body.get("tools", ()), mark)
        headers = {**model.headers}
        if key is not None and compat.send_session_affinity_headers:
            headers.update(_session_headers(compat.session_affinity_format, key))
        headers.update(options.headers)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return HttpRequest(model.base_url.rstrip("/") + "/chat/completions", headers, body)

    def parser(self, model: Model, builder: AssistantMessageBuilder) -> Parser:
        return _ChatParser(model, builder)


# --- the stream ----------------------------------------------------------------------------------


class _Call:
    __slots__ = ("args", "id", "index", "name", "position", "stale")

    def __init__(self, id: str, name: str, index: int | None, position: int) -> None:
        self.id = id
        self.name = name
        self.index = index
        self.position = position  # content index in the reply
        self.args = PartialJson()
        self.stale = False  # arguments came after the call's block was closed


_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "end": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


class _ChatParser(Parser):
    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.calls: list[_Call] = []
        self.by_id: dict[str, _Call] = {}
        self.by_index: dict[int, _Call] = {}
        self.open_call: _Call | None = None
        self.finish_reason: str | None = None
        self.reasoning_field: str | None = None

    def _close_open(self, out: list[AssistantMessageEvent]) -> None:
        out.extend(self.end())

    def end(self) -> Iterable[AssistantMessageEvent]:
        builder = self.builder
        kind = builder.open_kind
        if kind == "thinking":
            return (builder.thinking_end(signature=self.reasoning_field),)
        if kind == "toolCall":
            call = self.open_call
            assert call is not None
            self.open_call = None
            return (builder.toolcall_end(call.args.final()),)
        return super().end()

    def feed(self, event: SseEvent) -> Iterable[AssistantMessageEvent]:
        # This runs for every chunk of every reply: dict lookups are kept few,
        # and the common chunk (a text delta, and nothing else) goes straight.
        # Every field read has its type checked (inline on that path), and all
        # are read before any is taken: a chunk with a field of another type
        # changes nothing, and ends the reply with an error naming the field.
        data = event.data
        if data.startswith("[DONE]"):
            self.finished = True
            return ()
        if event.event == "error":
            detail = f": {data[:500]}" if data.strip() else ""
            raise reported(f"{self.name} reported an error{detail}", self.name)
        try:
            chunk = _from_json(data.encode())
        except ValueError:
            if not data.strip():
                return ()  # an event with empty data ("data:" alone) carries nothing
            chunk = parse_json(data, "a chunk", self.name)  # raises, and says why
        if type(chunk) is not dict:
            raise ProviderFailure(f"unexpected chunk from {self.name}: {data[:200]!r}")
        builder = self.builder
        try:
            if ("error" in chunk and chunk["error"] is not None) or chunk.get("object") == "error":
                error = chunk.get("error")
                details = error if type(error) is dict else chunk
                said = f"{self.name} reported an error: {_error_text(chunk)}"
                codes = (details.get("code"), details.get("type"))
                raise reported(said, self.name, codes, details.get("code"))
            response_id = string(chunk, "id", "") if builder.response_id is None else None
            choices = chunk.get("choices")
            choice = None
            if type(choices) is list:
                if choices:  # [] on the usage chunk
                    choice = choices[0]
                    if type(choice) is not dict:
                        raise Malformed("choices[0]", choice, "an object")
            elif choices is not None:  # null on some servers' usage chunk
                raise Malformed("choices", choices, "an array")
            raw_usage = chunk.get("usage")
            where = "usage"
            if raw_usage is None and choice is not None:
                raw_usage = choice.get("usage")  # Moonshot's place for it
                where = "choices[0].usage"
            usage = None
            if raw_usage is not None:
                if type(raw_usage) is not dict:
                    raise Malformed(where, raw_usage, "an object")
                usage = _usage(raw_usage, where)
            reason = delta = text = plan = None
            if choice is not None:
                reason = choice.get("finish_reason")
                if type(reason) is not str and reason is not None:
                    raise Malformed("choices[0].finish_reason", reason, "a string")
                delta = choice.get("delta")
                if type(delta) is not dict and delta is not None:
                    raise Malformed("choices[0].delta", delta, "an object")
            if delta:
                text = delta.get("content")
                if type(text) is not str and text is not None:
                    raise Malformed("choices[0].delta.content", text, "a string")
                refusal = delta.get("refusal")  # null on every chunk of an answer
                if refusal is not None:
                    # A refusal is the model's answer: it is text, as pi-ai takes
                    # ``response.refusal.delta``, so the user sees it and the next
                    # request carries it.
                    if type(refusal) is not str:
                        raise Malformed("choices[0].delta.refusal", refusal, "a string")
                    text = (text or "") + refusal
                if not (text and builder.open_kind == "text" and _NOT_TEXT_KEYS.isdisjoint(delta)):
                    plan = self._plan(delta)
        except Malformed as exc:
            raise ProviderFailure(f"malformed chunk from {self.name}: {exc}") from None
        # The chunk is well formed: take what it says.
        if response_id is not None:
            builder.response_id = response_id
        if usage is not None:
            builder.usage = usage
        if reason:
            self.finish_reason = reason
        if plan is not None:
            return self._apply(plan, text)
        if text:  # more text for the open text block, and nothing else
            return (builder.text_delta(text),)
        return ()

    def _plan(self, delta: dict[str, Any]) -> _Delta:
        """What a delta that is not only text holds: its reasoning, and its tool-call
        fragments as (id, index, name, arguments), every field checked."""
        reasoning = None
        if not _REASONING_KEYS.isdisjoint(delta):
            for field in _REASONING_FIELDS:
                piece = string(delta, field, "choices[0].delta")
                if piece:
                    reasoning = (field, piece)
                    break
        fragments = [
            _fragment(fragment, f"choices[0].delta.tool_calls[{index}]")
            for index, fragment in enumerate(objects(delta, "tool_calls", "choices[0].delta"))
        ]
        return reasoning, fragments

    def _apply(self, plan: _Delta, text: str | None) -> list[AssistantMessageEvent]:
        """The events of a delta read by :meth:`_plan`, in the order of its fields."""
        reasoning, fragments = plan
        builder = self.builder
        out: list[AssistantMessageEvent] = []
        if reasoning is not None:
            field, piece = reasoning
            if builder.open_kind != "thinking":
                self._close_open(out)
                self.reasoning_field = field
                out.append(builder.thinking_start())
            out.append(builder.thinking_delta(piece))
        if text:
            if builder.open_kind != "text":
                self._close_open(out)
                out.append(builder.text_start())
            out.append(builder.text_delta(text))
        for call_id, index, name, piece in fragments:
            self._tool_fragment(call_id, index, name, piece, out)
        return out

    def _route(self, call_id: str | None, index: int | None) -> _Call | None:
        """The call a fragment is for: a new id starts one; else its index; else the last."""
        if call_id is not None:
            return self.by_id.get(call_id)  # None: a new call
        if index is not None:
            return self.by_index.get(index)
        return self.calls[-1] if self.calls else None

    def _tool_fragment(
        self,
        call_id: str | None,
        index: int | None,
        name: str,
        piece: str,
        out: list[AssistantMessageEvent],
    ) -> None:
        call = self._route(call_id, index)
        builder = self.builder
        if call is None:
            self._close_open(out)
            if call_id is None:
                call_id = f"call_{builder.response_id or 'x'}_{len(self.calls)}"
            call = _Call(call_id, name, index, builder.content_index)
            self.calls.append(call)
            self.by_id[call.id] = call
            if index is not None:
                self.by_index[index] = call
            self.open_call = call
            out.append(builder.toolcall_start(call.id, call.name))
        if call is self.open_call:
            if piece:
                out.append(builder.toolcall_delta(piece, call.args.add(piece)))
        elif piece:
            # A fragment for a call that is no longer open (interleaved calls):
            # its arguments still count, in the final message.
            call.args.add(piece)
            call.stale = True

    def finish(self) -> AssistantMessage:
        reason = self.finish_reason
        if reason is None:
            raise ProviderFailure(
                f"the stream from {self.name} ended without a finish_reason", kind="network"
            )
        stop = _STOP_REASONS.get(reason)
        error = None
        if stop is None:
            stop, error = "error", f"{self.name} finished with finish_reason {reason!r}"
        message = self.builder.finish(stop, error)
        stale = [call for call in self.calls if call.stale]
        if stale:  # closed before all their arguments came: the final message has them all
            content = list(message.content)
            for call in stale:
                block = content[call.position]
                if isinstance(block, ToolCall):
                    content[call.position] = attrs.evolve(block, arguments=call.args.final())
            message = attrs.evolve(message, content=content)
        return message


_Fragment: TypeAlias = tuple[str | None, int | None, str, str]
_Delta: TypeAlias = tuple[tuple[str, str] | None, list[_Fragment]]


def _fragment(fragment: dict[str, Any], where: str) -> _Fragment:
    """A tool-call fragment's call id (None for none, or Mistral's ``"null"``), index,
    tool name and piece of the arguments."""
    function = obj(fragment, "function", where) or {}
    at = path(where, "function")
    raw_id = string(fragment, "id", where)
    index = integer(fragment, "index", where)
    name = string(function, "name", at) or ""
    arguments = function.get("arguments")
    if type(arguments) is str:
        piece = arguments
    elif type(arguments) is dict:  # a whole call at once (some servers)
        piece = dumps(arguments, path(at, "arguments"))
    elif arguments is None:
        piece = ""
    else:
        raise Malformed(path(at, "arguments"), arguments, "a string")
    return (raw_id if raw_id and raw_id != "null" else None), index, name, piece


def _usage(raw: dict[str, Any], where: str) -> Usage:
    prompt = count(raw, "prompt_tokens", where) or 0
    cache_read = cache_write = 0
    details = obj(raw, "prompt_tokens_details", where)
    if details is not None:
        details_at = path(where, "prompt_tokens_details")
        cache_read = count(details, "cached_tokens", details_at) or 0
        cache_write = count(details, "cache_write_tokens", details_at) or 0
    if not cache_read:
        cache_read = count(raw, "prompt_cache_hit_tokens", where) or 0  # DeepSeek's
    if not cache_read:
        cache_read = count(raw, "cached_tokens", where) or 0  # Kimi's
    output = count(raw, "completion_tokens", where) or 0
    input_tokens = max(0, prompt - cache_read - cache_write)
    return Usage(
        input=input_tokens,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input_tokens + output + cache_read + cache_write,
    )


def _error_text(chunk: dict[str, Any]) -> str:
    """What an in-band error says: its message, else the error (or the chunk) itself."""
    error = chunk.get("error")
    details = error if type(error) is dict else chunk
    message = details.get("message")
    if type(message) is str and message:
        return message
    return show(message if message else details, 500)


_default = OpenAIChat()


def provider() -> OpenAIChat:
    """The default instance (registered for ``"openai-chat"``)."""
    return _default


stream = _default.stream
"""The stream function of ``"openai-chat"`` models: the default instance's."""
