"""Anthropic messages (``api="anthropic-messages"``)::

    from trio_agent.providers import anthropic

    claude = anthropic.model("claude-sonnet-4-5", reasoning=True)       # ANTHROPIC_API_KEY

The request (design.md#anthropic-messages): ``POST {base_url}/v1/messages`` with the
``x-api-key`` and ``anthropic-version`` headers; ``max_tokens`` is always
sent; thinking blocks go back with their signatures unchanged, redacted
thinking as the opaque block it came as; the results of one turn's tool calls
go in one user message, and roles alternate; tool-call ids from other
providers are rewritten to the ``^[a-zA-Z0-9_-]{1,64}$`` Anthropic accepts
(the same way in the call and in its result).

A reasoning level is first brought to one the model offers, by the catalog's
``thinking_levels`` (a level mapped to None is not offered: the nearest offered
level above it is asked for, else the nearest below). On a model whose catalog
rules (``compat_flags``) say ``forceAdaptiveThinking`` it turns on adaptive
thinking, ``thinking: {"type": "adaptive", "display": "summarized"}``, with the
level as ``output_config.effort`` (as ``thinking_levels`` maps it, else
minimal/low → ``low``, medium → ``medium``, others ``high``); such a model
refuses a token budget. On other models it turns on extended thinking with a
token budget (:data:`THINKING_BUDGETS`) and the ``interleaved-thinking`` beta
(thinking between tool calls). With thinking on, no ``temperature`` is sent; nor
ever to a model whose rules say ``supportsTemperature: false`` or
``supportsMidConvoEffort``. A model the catalog does not describe has no rules:
budgets, and the level as asked. Asked for no level, a reasoning model gets
``thinking: {"type": "disabled"}`` (as pi-ai: the API's default on newer models
is to think), with ``temperature`` if it takes one; not a model whose
``thinking_levels`` map ``"off"`` to None (its thinking cannot be turned off).

A model whose rules say ``supportsMidConvoEffort`` has its effort set turn by
turn, as pi-ai does: every request asks for adaptive thinking that drops a
thinking block whose turn no longer matches (``block_binding``), with
``output_config.effort`` ``high``; each earlier turn of this provider is preceded
by a ``system`` message with the effort it was made at (the reply records it as
``provider_thinking_level``), and the messages end with one asking for the
level's effort (``high`` when none is asked); the two beta features this takes
go in ``anthropic-beta``. An ``anthropic-beta`` header of the model or the call
replaces the one the provider would send.

The prompt cache, as pi-ai marks it: the system prompt (sent as one text block),
the last tool (not on a host whose rules say ``supportsCacheControlOnTools:
false``, such as Fireworks) and the last block of the last message, when that is
the user's, carry ``cache_control: {"type": "ephemeral"}``, so each request
reads the conversation so far from the cache and writes only what is new. With
``cache_retention="long"`` the breakpoints ask for ``"ttl": "1h"`` (unless the
rules say ``supportsLongCacheRetention: false``: then the five minutes); with
``"none"`` there are none. The session key (:func:`session_key`, the
``session_id`` cut to 64 characters) goes in a session-affinity header where the
model's rules say ``sendSessionAffinityHeaders`` (and on OpenRouter, by default):
``x-session-id`` in OpenRouter's format, else ``x-session-affinity``; a character
a header cannot carry, or a ``%``, is percent-encoded (:func:`session_header`).
``usage.cache_creation.ephemeral_1h_input_tokens`` becomes
``Usage.cache_write_long``, which costs twice the input price.

Reading the stream: ``message_start`` (the response id and first usage),
content blocks by index (text, thinking with its ``signature_delta``,
``redacted_thinking``, ``tool_use`` with its ``input_json_delta`` pieces;
other block types, such as server tools, and other delta types, such as
citations, are skipped), ``message_delta`` (the stop reason, and usage
updated field by field), ``message_stop`` (the end). ``ping`` and unknown
events are ignored wherever they come, as are events with empty data; an
``error`` event ends the reply as an error that keeps what arrived, and so
does an event with a field of a type the API does not give it (named, with
its value: see ``_fields``), of which nothing is taken.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from .. import _catalog
from .._events import AssistantMessageEvent
from .._messages import (
    AssistantMessage,
    ImageContent,
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
    HttpProvider,
    Parser,
    PartialJson,
    offered_level,
    offers,
    on_openrouter,
    parse_json,
    prepare_messages,
    reported,
    session_header,
    session_key,
)
from ._fields import Malformed, count, dumps, integer, obj, path, show, string
from ._sse import SseEvent
from ._transport import HttpRequest, ProviderFailure

__all__ = ["API", "THINKING_BUDGETS", "Anthropic", "model", "provider", "stream", "tool_id"]

API = "anthropic-messages"
"""The ``api`` of Anthropic's models, under which :func:`stream` is registered."""
VERSION = "2023-06-01"
_FREE = ModelCost()

THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
"""``budget_tokens`` of extended thinking, per reasoning level: minimal 1024, low 2048,
medium 8192, high 16384, xhigh 32768."""
_REDACTED_THINKING = "[Reasoning redacted]"
"""The text of a redacted thinking block, whose reasoning the API sends encrypted."""
_MIN_BUDGET = 1024  # the API's smallest budget
_MIN_ANSWER = 1024  # tokens left for the answer when max_tokens squeezes the budget


_DEFAULTS: dict[str, Any] = {
    "base_url": "https://api.anthropic.com",
    "reasoning": False,
    "context_window": 200_000,
    "max_tokens": 32_000,
    "input": ("text", "image"),
}
"""What a model the catalog does not know gets, where no argument says otherwise."""


def model(
    id: str,
    *,
    base_url: str | None = None,
    provider: str | None = None,
    reasoning: bool | None = None,
    context_window: int | None = None,
    max_tokens: int | None = None,
    input: Sequence[str] | None = None,
    headers: dict[str, str] | None = None,
    cost: ModelCost | None = None,
) -> Model:
    """A model served over the Anthropic messages API at ``base_url``.

    What the model catalog (:mod:`trio_agent.models`) knows of ``id`` at
    ``provider`` is filled in: limits, prices, input, reasoning, base URL and
    the request rules. An argument given here wins over it; a ``base_url``
    other than the catalog's is another server, which the catalog does not
    describe. Without a ``base_url``, an id the provider does not list is an
    :class:`~trio_agent.UnknownModelError` naming the nearest ids it does list;
    with one, an id the catalog does not know gets the defaults
    (``https://api.anthropic.com``, no reasoning, 200,000 tokens of context,
    32,000 of output, text and images, free). The provider label, when not
    given, is the one whose catalog models on this API are served at
    ``base_url``, else ``"anthropic"``.

    A ``base_url`` other than the catalog's (a proxy, a replica) is another server, whose
    limits and prices the catalog does not know. To keep a catalog model's description on
    another server, move it there: ``attrs.evolve(anthropic.model(id), base_url=...)``.
    """
    return _catalog.describe(
        API,
        id,
        provider=provider,
        fallback_provider="anthropic",
        defaults=_DEFAULTS,
        base_url=base_url,
        reasoning=reasoning,
        context_window=context_window,
        max_tokens=max_tokens,
        input=input,
        headers=headers,
        cost=cost,
    )


# --- the request ---------------------------------------------------------------------------------

_VALID_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def tool_id(id: str) -> str:
    """A tool-call id as Anthropic accepts it (``^[a-zA-Z0-9_-]{1,64}$``).

    A valid id is kept. Otherwise (ids of other providers, such as OpenAI
    responses' ``call_…|fc_…``) other characters become ``_``, and an id that
    is then too long, or empty, keeps its first 55 characters and gets a hash
    of the whole id, so that two long ids stay apart. The same id always gives
    the same result, so a call and its result still match.
    """
    if _VALID_ID.match(id):
        return id
    cleaned = _INVALID_CHARS.sub("_", id)
    if 0 < len(cleaned) <= 64:
        return cleaned
    digest = hashlib.sha256(id.encode("utf-8")).hexdigest()[:8]
    return f"{cleaned[:55]}_{digest}"


def _image(block: ImageContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
    }


def _blocks(content: Iterable[TextContent | ImageContent], model: Model) -> list[dict[str, Any]]:
    """Text and image blocks; empty text (which the API refuses) is left out, and images
    too when the model does not take them."""
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text.strip():
                out.append({"type": "text", "text": block.text})
        elif "image" in model.input:
            out.append(_image(block))
    return out


def _user(message: UserMessage, model: Model) -> list[dict[str, Any]]:
    content = message.content
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    return _blocks(content, model)


def _assistant(message: AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            signature = block.thinking_signature
            if block.redacted:
                if signature:
                    out.append({"type": "redacted_thinking", "data": signature})
            elif signature and signature.strip():
                # Signed thinking goes back as it came, even with no text (what a model
                # sends when its thinking display is omitted): the API checks the
                # previous turn's signed blocks during a tool loop.
                out.append({"type": "thinking", "thinking": block.thinking, "signature": signature})
            elif block.thinking.strip():  # unsigned thinking would be refused: it goes as text
                out.append({"type": "text", "text": block.thinking})
        elif isinstance(block, ToolCall):
            out.append(
                {
                    "type": "tool_use",
                    "id": tool_id(block.id),
                    "name": block.name,
                    "input": block.arguments,
                }
            )
    return out


def _tool_result(message: ToolResultMessage, model: Model) -> dict[str, Any]:
    """A ``tool_result`` block; text alone goes as one string (its texts joined by
    newlines, as pi-ai sends it: the same to the model, and fewer tokens to bill)."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id(message.tool_call_id)}
    content = _blocks(message.content, model)
    if content:
        if all(block["type"] == "text" for block in content):
            result["content"] = "\n".join(block["text"] for block in content)
        else:
            result["content"] = content
    result["is_error"] = message.is_error
    return result


def _messages(
    model: Model,
    context: LlmContext,
    effort: str | None = None,
    cache: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` array: roles alternate (adjacent messages of one role are merged,
    so the results of one turn's calls share a user message), and empty turns are left
    out, as are tool results whose call is not in the assistant turn before them.

    ``effort`` is given for a model whose effort is set mid-conversation
    (``supportsMidConvoEffort``): each assistant turn this provider made is preceded by a
    ``system`` message with the effort it was made at (its ``provider_thinking_level``),
    and the array ends with one asking for ``effort``, as pi-ai does.

    ``cache`` (a ``cache_control``) marks the last block of the last message when
    that is the user's (its text, image or tool results): the conversation so far
    is written to the prompt cache, and the next request reads it back.
    """
    out: list[dict[str, Any]] = []
    efforts: dict[int, str] = {}  # the index in out of an assistant turn -> its effort
    calls: set[str] = set()  # the tool_use ids of the last assistant turn

    def add(role: str, content: list[dict[str, Any]]) -> None:
        if not content:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})

    for message in prepare_messages(context.messages, model):
        if isinstance(message, AssistantMessage):
            content = _assistant(message)
            calls = {block["id"] for block in content if block["type"] == "tool_use"}
            add("assistant", content)
            made_at = message.provider_thinking_level
            if (
                effort is not None
                and content
                and made_at in _ADAPTIVE_EFFORTS
                and message.api == API
                and message.provider == model.provider
            ):
                efforts.setdefault(len(out) - 1, made_at)
        elif isinstance(message, ToolResultMessage):
            result = _tool_result(message, model)
            if result["tool_use_id"] in calls:
                add("user", [result])
        else:
            add("user", _user(message, model))
    if cache is not None and out and out[-1]["role"] == "user":
        blocks = out[-1]["content"]
        blocks[-1] = {**blocks[-1], "cache_control": cache}
    if effort is None:
        return out
    marked: list[dict[str, Any]] = []
    for index, entry in enumerate(out):
        if index in efforts:
            marked.append(_effort_message(efforts[index]))
        marked.append(entry)
    marked.append(_effort_message(effort))
    return marked


def _effort_message(effort: str) -> dict[str, Any]:
    return {"role": "system", "content": [], "output_config": {"effort": effort}}


def _thinking_budget(level: str, max_tokens: int) -> int | None:
    """The thinking budget for ``level`` that fits under ``max_tokens`` (which must exceed
    it, with room for the answer), or None when thinking does not fit at all."""
    if level == "max":  # a catalog level beyond ours: the largest budget
        level = "xhigh"
    budget = THINKING_BUDGETS.get(level, THINKING_BUDGETS["medium"])
    if budget >= max_tokens:
        budget = max_tokens - _MIN_ANSWER
    return budget if budget >= _MIN_BUDGET else None


_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
"""The ``output_config.effort`` of a thinking level the model's ``thinking_levels`` do not
map (pi-ai's ``mapThinkingLevelToEffort``); any other level is ``high``."""


def _effort(model: Model, level: str) -> str:
    mapped = model.thinking_levels.get(level)
    return mapped if isinstance(mapped, str) else _EFFORTS.get(level, "high")


_ADAPTIVE_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
"""The efforts the API takes in ``output_config``."""

_MANAGED_BETAS = "mid-conversation-output-config-2026-07-01,thinking-binding-controls-2026-08-01"
"""The ``anthropic-beta`` features a model whose effort is set mid-conversation needs."""

_INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
"""The ``anthropic-beta`` feature that lets a model think between tool calls, asked for with
a thinking budget (adaptive thinking interleaves on its own)."""

_MANAGED_THINKING: dict[str, Any] = {
    "type": "adaptive",
    "display": "summarized",
    "block_binding": {"prefix_mismatch_behavior": "drop_block"},
}


def _managed(model: Model) -> bool:
    """Whether the model's effort is set mid-conversation (``supportsMidConvoEffort``)."""
    return model.compat_flags.get("supportsMidConvoEffort") is True


def _active_effort(model: Model, options: StreamOptions) -> str:
    """The effort asked of a model whose effort is set mid-conversation: the reasoning
    level's, else ``high`` (pi-ai's default)."""
    level = offered_level(model, options.reasoning) if options.reasoning else None
    return "high" if level is None else _effort(model, level)


def _thinking(model: Model, options: StreamOptions, max_tokens: int) -> dict[str, Any]:
    """The request's ``thinking`` (and ``output_config``) for the reasoning level asked for.

    The level is first brought to one the model offers (:func:`offered_level`). A
    model whose catalog rules say ``forceAdaptiveThinking`` takes only adaptive
    thinking, with the level as an effort; others get extended thinking with a token
    budget, when it fits under ``max_tokens``.
    """
    if _managed(model):  # the effort goes in the messages (see _messages)
        return {"thinking": dict(_MANAGED_THINKING), "output_config": {"effort": "high"}}
    if not model.reasoning:
        return {}
    if not options.reasoning:
        return _thinking_off(model)
    level = offered_level(model, options.reasoning)
    if level is None:
        return {}
    if model.compat_flags.get("forceAdaptiveThinking") is True:
        return {
            "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": _effort(model, level)},
        }
    budget = _thinking_budget(level, max_tokens)
    if budget is None:
        return {}
    return {"thinking": {"type": "enabled", "budget_tokens": budget}}


def _thinking_off(model: Model) -> dict[str, Any]:
    """The request's ``thinking`` when no reasoning level is asked of a reasoning model.

    Sent as ``{"type": "disabled"}``, as pi-ai does: left out, the API would apply the
    model's own default, which on newer models is to think (and bill for it). Not
    when the catalog's ``thinking_levels`` map ``"off"`` to None: the model's thinking
    cannot be turned off, and the API refuses ``disabled``.
    """
    return {"thinking": {"type": "disabled"}} if offers(model, "off") else {}


def _thinking_on(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") != "disabled"


def _takes_temperature(model: Model) -> bool:
    """Whether the model accepts ``temperature``: not when its catalog rules say
    ``supportsTemperature: false``, nor on a model whose effort is managed mid-conversation
    (``supportsMidConvoEffort``), as pi-ai."""
    flags = model.compat_flags
    return (
        flags.get("supportsTemperature") is not False
        and flags.get("supportsMidConvoEffort") is not True
    )


def _flag(model: Model, name: str, default: Any) -> Any:
    """The catalog rule ``name`` of ``model`` (``compat_flags``), or ``default`` where it
    has none (absent or null, as pi-ai's ``??``)."""
    value = model.compat_flags.get(name)
    return default if value is None else value


def _cache_control(model: Model, options: StreamOptions) -> dict[str, str] | None:
    """The ``cache_control`` of the request's cache breakpoints, or None (no breakpoint)
    with ``cache_retention="none"``.

    ``{"type": "ephemeral"}`` is the service's five-minute cache; with
    ``cache_retention="long"`` it gets ``"ttl": "1h"``, unless the model's rules say
    ``supportsLongCacheRetention: false`` (as pi-ai's ``getCacheControl``).
    """
    retention = options.cache_retention
    if retention == "none":
        return None
    if retention == "long" and _flag(model, "supportsLongCacheRetention", True):
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _affinity_header(model: Model) -> str | None:
    """The header that carries the session key, so the host routes a conversation's
    requests to where its prompt cache is (as pi-ai): on a model whose rules say
    ``sendSessionAffinityHeaders`` (by default on OpenRouter), ``x-session-id`` when
    ``sessionAffinityFormat`` is ``"openrouter"`` (OpenRouter's default), else
    ``x-session-affinity``; None when the model's host takes none."""
    openrouter = on_openrouter(model)
    if not _flag(model, "sendSessionAffinityHeaders", openrouter):
        return None
    style = _flag(model, "sessionAffinityFormat", "openrouter" if openrouter else None)
    return "x-session-id" if style == "openrouter" else "x-session-affinity"


class Anthropic(HttpProvider):
    """The Anthropic messages provider. One instance per HTTP client.

    Its ``stream`` method is a stream function; the client is taken as
    :class:`~trio_agent.providers.openai_chat.OpenAIChat` takes it.
    """

    api: ClassVar[str] = API
    label: ClassVar[str] = "anthropic"
    env_keys: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)

    def build_request(
        self, model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
    ) -> HttpRequest:
        max_tokens = options.max_tokens or model.max_tokens
        cache = _cache_control(model, options)
        body: dict[str, Any] = {"model": model.id, "max_tokens": max_tokens, "stream": True}
        if context.system_prompt:
            system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
            if cache is not None:
                system["cache_control"] = cache
            body["system"] = [system]
        managed = _managed(model)
        body["messages"] = _messages(
            model, context, _active_effort(model, options) if managed else None, cache
        )
        if context.tools:
            tools: list[dict[str, Any]] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.parameters),
                }
                for tool in context.tools
            ]
            if cache is not None and _flag(model, "supportsCacheControlOnTools", True):
                tools[-1]["cache_control"] = cache
            body["tools"] = tools
        body.update(_thinking(model, options, max_tokens))
        if not _thinking_on(body) and options.temperature is not None and _takes_temperature(model):
            body["temperature"] = options.temperature
        headers = {"anthropic-version": VERSION}
        key = session_key(options)
        if key is not None:
            affinity = _affinity_header(model)
            if affinity is not None:
                headers[affinity] = session_header(key)
        if managed:
            headers["anthropic-beta"] = _MANAGED_BETAS
        elif body.get("thinking", {}).get("type") == "enabled":
            headers["anthropic-beta"] = _INTERLEAVED_BETA
        headers.update((name.lower(), value) for name, value in model.headers.items())
        headers.update((name.lower(), value) for name, value in options.headers.items())
        if api_key:
            headers["x-api-key"] = api_key
        return HttpRequest(model.base_url.rstrip("/") + "/v1/messages", headers, body)

    def parser(self, model: Model, builder: AssistantMessageBuilder) -> Parser:
        return _MessagesParser(model, builder)

    def thinking_level(self, model: Model, options: StreamOptions) -> str | None:
        """The effort asked of a model whose effort is set mid-conversation: the next
        request tells the API which effort each of its turns was made at."""
        return _active_effort(model, options) if _managed(model) else None


# --- the stream ----------------------------------------------------------------------------------

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",  # a server tool paused the turn: as pi-ai, a stop; sending
    # the transcript again continues it
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}
_REFUSALS = {
    "refusal": "declined to answer",
    "sensitive": "stopped on sensitive content",
}
_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


_LONG_WRITES = "ephemeral_1h_input_tokens"
"""The cache writes of ``usage.cache_creation`` that live an hour (part of
``cache_creation_input_tokens``)."""


class _Block:
    """A content block of the reply being streamed, known by its wire index."""

    __slots__ = ("args", "initial", "kind", "signature")

    def __init__(self, kind: str, initial: dict[str, Any] | None = None) -> None:
        self.kind = kind  # "text", "thinking", "redacted", "tool_use"
        self.signature = ""
        self.args = PartialJson()
        self.initial = initial or {}  # a tool_use block's input at its start

    def arguments(self) -> dict[str, Any]:
        return self.args.final() if self.args.text.strip() else self.initial


class _MessagesParser(Parser):
    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.blocks: dict[int, _Block] = {}
        self.open: _Block | None = None
        self.stop_reason: str | None = None
        self.counts: dict[str, int] = {}

    def end(self) -> Iterable[AssistantMessageEvent]:
        block = self.open
        self.open = None
        if block is not None and block.kind == "tool_use":
            return (self.builder.toolcall_end(block.arguments()),)
        return super().end()

    def feed(self, event: SseEvent) -> Iterable[AssistantMessageEvent]:
        if event.event == "ping":
            return ()
        if event.event == "error" and not event.data.lstrip().startswith("{"):
            detail = f": {event.data[:500]}" if event.data.strip() else ""
            raise reported(f"{self.name} reported an error{detail}", self.name)
        if not event.data.strip():
            return ()  # an event with empty data ("data:" alone) carries nothing
        data = parse_json(event.data, "an event", self.name)
        if not isinstance(data, dict):
            raise ProviderFailure(f"unexpected event from {self.name}: {event.data[:200]!r}")
        kind = event.event
        try:
            if kind != "error":
                kind = string(data, "type", "") or kind
            if kind == "error":
                error = data.get("error")
                codes = (error.get("type"),) if type(error) is dict else ()
                text = f"{self.name} reported an error: {_error_text(data)}"
                raise reported(text, self.name, codes)
            out: list[AssistantMessageEvent] = []
            if kind == "content_block_delta":
                self._delta(data, out)
            elif kind == "content_block_start":
                self._start(data, out)
            elif kind == "content_block_stop":
                block = self.blocks.get(_index(data))
                if block is not None and block is self.open:
                    out.extend(self.end())
            elif kind == "message_start":
                message = obj(data, "message", "")
                if message is not None:
                    response_id = string(message, "id", "message")
                    counts = _counts(message, "message")
                    if response_id is not None:
                        self.builder.response_id = response_id
                    self._usage(counts)
            elif kind == "message_delta":
                delta = obj(data, "delta", "")
                reason = None if delta is None else string(delta, "stop_reason", "delta")
                counts = _counts(data, "")
                if reason is not None:
                    self.stop_reason = reason
                self._usage(counts)
            elif kind == "message_stop":
                self.finished = True
            return out  # ping, and event types this parser does not know
        except Malformed as exc:
            raise ProviderFailure(f"malformed {kind} event from {self.name}: {exc}") from None

    def _start(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        content = obj(data, "content_block", "") or {}
        where = "content_block"
        kind = string(content, "type", where)
        if kind not in ("text", "thinking", "redacted_thinking", "tool_use"):
            return  # server tools, their results, and what comes next: not ours
        index = _index(data)
        # Every field is read before the block opens: a malformed one changes nothing.
        text = redacted = None
        call_id = name = initial = ""
        if kind == "tool_use":
            block = _Block("tool_use", obj(content, "input", where))
            call_id = string(content, "id", where) or ""
            name = string(content, "name", where) or ""
            initial = dumps(block.initial, "content_block.input") if block.initial else ""
        elif kind == "redacted_thinking":
            block = _Block("redacted")
            redacted = string(content, "data", where)
        else:
            block = _Block(kind)
            text = string(content, kind, where)  # "text" or "thinking"
            if kind == "thinking":
                block.signature = string(content, "signature", where) or ""
        out.extend(self.end())
        builder = self.builder
        if block.kind == "text":
            out.append(builder.text_start())
            if text:
                out.append(builder.text_delta(text))
        elif block.kind == "thinking":
            out.append(builder.thinking_start())
            if text:
                out.append(builder.thinking_delta(text))
            if block.signature:
                builder.set_signature(block.signature)
        elif block.kind == "redacted":
            # pi-ai's convention: the text says it is withheld, the opaque data is the
            # signature that goes back as ``redacted_thinking``.
            out.append(builder.thinking_start(redacted=True))
            out.append(builder.thinking_delta(_REDACTED_THINKING))
            if redacted is not None:
                builder.set_signature(redacted)
        else:
            out.append(builder.toolcall_start(call_id, name))
            if initial:  # a proxy that sends the whole input at the start
                out.append(builder.toolcall_delta(initial, block.initial))
        self.blocks[index] = block
        self.open = block

    def _delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        block = self.blocks.get(_index(data))
        if block is None or block is not self.open:
            return  # a block that is not ours (a server tool's), or no longer open
        raw = obj(data, "delta", "")
        if raw is None:
            return
        kind = string(raw, "type", "delta")
        builder = self.builder
        if kind == "text_delta" and block.kind == "text":
            text = string(raw, "text", "delta")
            if text:
                out.append(builder.text_delta(text))
        elif kind == "thinking_delta" and block.kind == "thinking":
            thinking = string(raw, "thinking", "delta")
            if thinking:
                out.append(builder.thinking_delta(thinking))
        elif kind == "signature_delta" and block.kind == "thinking":
            signature = string(raw, "signature", "delta")
            if signature is not None:
                block.signature += signature
                builder.set_signature(block.signature)
        elif kind == "input_json_delta" and block.kind == "tool_use":
            piece = string(raw, "partial_json", "delta")
            if piece:  # the first piece is often ""
                out.append(builder.toolcall_delta(piece, block.args.add(piece)))
        # citations_delta, and delta types to come: nothing to show

    def _usage(self, counts: dict[str, int] | None) -> None:
        """Usage updated with ``counts``: each count there replaces the one before."""
        if counts is None:
            return
        counts = self.counts = {**self.counts, **counts}
        input_tokens = counts.get("input_tokens", 0)  # without cache reads and writes
        output = counts.get("output_tokens", 0)
        cache_read = counts.get("cache_read_input_tokens", 0)
        cache_write = counts.get("cache_creation_input_tokens", 0)
        self.builder.usage = Usage(
            input=input_tokens,
            output=output,
            cache_read=cache_read,
            cache_write=cache_write,
            cache_write_long=counts.get(_LONG_WRITES, 0),
            total_tokens=input_tokens + output + cache_read + cache_write,
        )

    def finish(self) -> AssistantMessage:
        if not self.finished:
            raise ProviderFailure(
                f"the stream from {self.name} ended without message_stop", kind="network"
            )
        reason = self.stop_reason
        stop = _STOP_REASONS.get(reason) if reason is not None else None
        error = None
        if stop is None:
            stop = "error"
            if reason in _REFUSALS:
                error = f"{self.name} {_REFUSALS[reason]} (stop_reason {reason!r})"
            elif reason is None:
                error = f"{self.name} ended the message without a stop_reason"
            else:
                error = f"{self.name} finished with stop_reason {reason!r}"
        return self.builder.finish(stop, error)


def _counts(parent: dict[str, Any], where: str) -> dict[str, int] | None:
    """The token counts in ``parent["usage"]``, if there (a field absent or null is left
    out: it keeps its value)."""
    raw = obj(parent, "usage", where)
    if raw is None:
        return None
    where = path(where, "usage")
    counts = {}
    for field in _USAGE_FIELDS:
        value = count(raw, field, where)
        if value is not None:
            counts[field] = value
    creation = obj(raw, "cache_creation", where)
    if creation is not None:
        value = count(creation, _LONG_WRITES, path(where, "cache_creation"))
        if value is not None:
            counts[_LONG_WRITES] = value
    return counts


def _index(data: dict[str, Any]) -> int:
    """The event's block index (-1, a block that is never ours, when there is none)."""
    index = integer(data, "index", "")
    return -1 if index is None else index


def _error_text(data: dict[str, Any]) -> str:
    """What an ``error`` event says: ``type: message``, else the event itself."""
    error = data.get("error")
    if type(error) is dict:
        kind = error.get("type")
        message = error.get("message")
        parts = [part if type(part) is str else show(part) for part in (kind, message) if part]
        if parts:
            return ": ".join(parts)
    return show(data, 500)


_default = Anthropic()


def provider() -> Anthropic:
    """The default instance (registered for ``"anthropic-messages"``)."""
    return _default


stream = _default.stream
"""The stream function of ``"anthropic-messages"`` models: the default instance's."""
