"""Google Gemini (``api="google-generative-ai"``): ``streamGenerateContent?alt=sse``.

::

    from trio_agent.providers import google

    flash = google.model("gemini-2.5-flash", reasoning=True)  # GEMINI_API_KEY or GOOGLE_API_KEY

The request (design.md#google-gemini) goes to
``{base_url}/models/{id}:streamGenerateContent?alt=sse`` with the key in the
``x-goog-api-key`` header, never in the URL. The transcript becomes
``contents``: user turns (text, ``inlineData`` images), model turns (text,
``thought`` parts, ``functionCall`` parts, each with the ``thoughtSignature``
it came with), and tool results as ``functionResponse`` parts
(``{"output": text}``, or ``{"error": text}`` for an error result) — all the
results of one batch in one user turn, followed by the images they returned.
Adjacent turns of the same role are merged into one.

Reasoning levels become a thinking budget (with ``includeThoughts``), for
models made with ``reasoning=True``: ``minimal`` 512 tokens (the smallest
budget every Gemini 2.5 model accepts), ``low`` 2048, ``medium`` 8192,
``high`` 24576 (the most Flash accepts), ``xhigh`` 32768 on Pro models and
24576 on the others. A model with the catalog's ``thinking_levels`` is first
asked for the nearest level it offers (a level mapped to None is not offered:
the nearest above it, else below; none: no thinking). A model that takes
levels rather than a budget (Gemini 3 and later, Gemma 4, by id, as pi-ai
tells them) is sent that level as a ``thinkingLevel``, as its
``thinking_levels`` map it, in the API's spelling (``"LOW"``, ``"HIGH"``; a
level above ``"HIGH"`` as ``"HIGH"``), as pi-ai does.

With no reasoning level (or one that comes to ``off``), a reasoning model is
told not to think, since Gemini 2.5 thinks by default and bills the thought
tokens as output: ``thinkingBudget: 0`` (Gemini 2.5 Flash and Flash-Lite);
128, the least budget Gemini 2.5 Pro takes, as it cannot stop thinking; and
the lowest ``thinkingLevel`` offered by a model that takes levels and cannot
stop (Gemini 3 and later, Gemma 4: ``"MINIMAL"``, ``"LOW"`` on Gemini 3.1 Pro).
A model made without ``reasoning`` (one the catalog does not describe, unless
told) gets no ``thinkingConfig``. Gemini's prompt cache is implicit: no field
or header asks for it, and the session id is not sent. Cached prompt tokens
(``cachedContentTokenCount``) are read as ``cache_read``, thoughts as output.

Reading the stream: every event is a whole ``GenerateContentResponse``.
Text parts are deltas, ``thought: true`` parts are thinking deltas; a
``thoughtSignature`` stays on the block of the part that carried it (a second,
different signature starts a new block, so each is replayed on its own part).
``functionCall`` parts arrive whole: a tool call with one delta (the compact
JSON of its arguments). Gemini 2 rarely gives calls an id; the missing ones are
``f"{responseId or 'gemini'}_{n}"``, with *n* the call's position among the
reply's calls, so the same reply always gets the same ids. An id Gemini gave
goes back in ``functionCall.id`` and ``functionResponse.id``, whatever the model:
the API asks for the ids it gave. One made up here does not, except for the
models that pair calls and results by id, Gemini 3 and later (and the Claude and
gpt-oss models behind this API): every call's id goes back, as pi-ai sends them.
``finishReason``
``STOP`` is ``stop`` (``toolUse`` when the reply holds calls), ``MAX_TOKENS``
is ``length``; any other (``SAFETY``, ``RECITATION``,
``MALFORMED_FUNCTION_CALL``, ...) ends the reply as an error that names it,
as does a prompt blocked by ``promptFeedback.blockReason``. ``usageMetadata``
is cumulative: each one replaces the usage. There is no terminal event: the
stream ends at EOF, and one that ended without a ``finishReason`` is an error
that keeps what arrived. A response with a field of a type the API does not
give it is an error too, naming the field and its value (see ``_fields``),
and nothing of that response is taken.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, TypeAlias

from .. import _catalog
from .._events import AssistantMessageEvent
from .._messages import (
    AssistantMessage,
    ImageContent,
    Message,
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
    level_value,
    offered_level,
    parse_json,
    prepare_messages,
    reported,
)
from ._fields import Malformed, count, dumps, flag, integer, obj, objects, path, show, string
from ._sse import SseEvent
from ._transport import HttpRequest, ProviderFailure

__all__ = ["API", "Google", "model", "provider", "stream", "thinking_budget"]

API = "google-generative-ai"
"""The ``api`` of Gemini models, under which :func:`stream` is registered."""
_FREE = ModelCost()

_BUDGETS = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 24576}
_PRO_XHIGH = 32768

# Gemini 3 refuses a replayed function call without a thought signature; for
# calls another model made, Google documents this value to skip the check.
_SKIP_SIGNATURE = "skip_thought_signature_validator"
_GEMINI_VERSION = re.compile(r"^(?:models/)?gemini(?:-live)?-(\d+)")
# The models that take a thinkingLevel rather than a budget, as pi-ai has them:
# Gemini 3 Pro and Flash, Gemini 4 and later, the -latest Flash aliases, Gemma 4.
_TAKES_LEVEL = re.compile(r"gemini-3(?:\.\d+)?-(?:pro|flash)|gemini-(?:[4-9]|[1-9]\d)|gemma-?4")
_LEVEL_ALIASES = frozenset({"gemini-flash-latest", "gemini-flash-lite-latest"})
_API_LEVELS = frozenset({"MINIMAL", "LOW", "MEDIUM", "HIGH"})
# Gemini 2.5 Pro cannot think less than this (a budget of 0 is refused: it always thinks).
_PRO_25_LOWEST = 128
_NOT_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def _sends_call_ids(model_id: str) -> bool:
    """Whether the model pairs calls and results by id (``functionCall.id``,
    ``functionResponse.id``): Gemini 3 and later, and the Claude and gpt-oss models
    served behind this API, as pi-ai has it. Older Gemini models get no ids back."""
    model_id = model_id.lower()
    if model_id.startswith(("claude-", "gpt-oss-", "models/claude-", "models/gpt-oss-")):
        return True
    match = _GEMINI_VERSION.match(model_id)
    return match is not None and int(match.group(1)) >= 3


def _given_ids(messages: Sequence[Message]) -> frozenset[str]:
    """The ids that a Gemini server gave the calls of ``messages``: not those made up when
    it gave none (``f"{responseId or 'gemini'}_{n}"``, see :meth:`_GeminiParser._call`),
    nor those of another API."""
    given: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage) and message.api == API:
            made_up = message.response_id or "gemini"
            calls = (block for block in message.content if isinstance(block, ToolCall))
            given.update(call.id for n, call in enumerate(calls) if call.id != f"{made_up}_{n}")
    return frozenset(given)


def _call_id(id: str) -> str:
    """A tool-call id as sent back: Gemini's own ids unchanged, another provider's made
    of the characters and length (64) it takes, the same way in the call and its result."""
    return _NOT_ID_CHARS.sub("_", id)[:64]


_DEFAULTS: dict[str, Any] = {
    "base_url": "https://generativelanguage.googleapis.com/v1beta",
    "reasoning": False,
    "context_window": 1_048_576,
    "max_tokens": 65_536,
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
    """A Gemini model served by the Gemini API (Google AI Studio) at ``base_url``.

    What the model catalog (:mod:`trio_agent.models`) knows of ``id`` at
    ``provider`` is filled in: limits, prices, input, reasoning, base URL and
    the request rules. An argument given here wins over it; a ``base_url``
    other than the catalog's is another server, which the catalog does not
    describe. Without a ``base_url``, an id the provider does not list is an
    :class:`~trio_agent.UnknownModelError` naming the nearest ids it does list;
    with one, an id the catalog does not know gets the defaults (the Gemini
    API's URL, no reasoning, 1,048,576 tokens of context, 65,536 of output,
    text and images, free). The provider label, when not given, is the one
    whose catalog models on this API are served at ``base_url``, else
    ``"google"``.
    """
    return _catalog.describe(
        API,
        id,
        provider=provider,
        fallback_provider="google",
        defaults=_DEFAULTS,
        base_url=base_url,
        reasoning=reasoning,
        context_window=context_window,
        max_tokens=max_tokens,
        input=input,
        headers=headers,
        cost=cost,
    )


def _takes_thinking_level(model_id: str) -> bool:
    model_id = model_id.lower()
    return model_id in _LEVEL_ALIASES or _TAKES_LEVEL.search(model_id) is not None


def _api_level(model: Model, level: str) -> str:
    """The ``thinkingLevel`` of an offered ``level`` for a model that takes levels: its
    ``thinking_levels`` value (or its name) in the API's spelling; a level above what
    the API names (``xhigh``, ``max``) is its highest, ``"HIGH"``."""
    value = level_value(model, level).upper()
    return value if value in _API_LEVELS else "HIGH"


def _thinking_off(model: Model) -> dict[str, Any] | None:
    """The ``thinkingConfig`` sent when no reasoning is asked for (or the level asked for
    comes to ``off``), so that a model which thinks unless told otherwise does not think,
    or thinks as little as it can, and does not bill for it; None: none is sent.

    As pi-ai: nothing for a model made without ``reasoning``; ``{"thinkingLevel": ...}``
    for the models that take a level (Gemini 3 and later, Gemma 4) whose
    ``thinking_levels`` do not offer ``off`` — the lowest level they offer, as the
    API names it (``"MINIMAL"``; ``"LOW"`` on Gemini 3.1 Pro); else
    ``{"thinkingBudget": 0}``, except on Gemini 2.5 Pro, which cannot stop thinking and
    is given its lowest budget, 128 (pi-ai sends it 0, which the API refuses).
    """
    if not model.reasoning:
        return None
    if _takes_thinking_level(model.id):
        lowest = offered_level(model, "off")
        if lowest is not None and lowest != "off":
            value = level_value(model, lowest).upper()
            return {"thinkingLevel": value} if value in _API_LEVELS else None
    if "2.5-pro" in model.id.lower():
        return {"thinkingBudget": _PRO_25_LOWEST}
    return {"thinkingBudget": 0}


def thinking_budget(model: Model, level: str) -> int:
    """The thinking budget (tokens) sent for a reasoning level: minimal 512, low 2048,
    medium 8192, high 24576, xhigh 32768 on Pro models and 24576 on the others."""
    if level == "xhigh" and "pro" in model.id.lower():
        return _PRO_XHIGH
    return _BUDGETS.get(level, _BUDGETS["medium"])


# --- the request ---------------------------------------------------------------------------------


def _inline(block: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.mime_type, "data": block.data}}


def _user_parts(message: UserMessage, model: Model) -> list[dict[str, Any]]:
    content = message.content
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                parts.append({"text": block.text})
        elif "image" in model.input:
            parts.append(_inline(block))
    return parts


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    if signature:
        part["thoughtSignature"] = signature
    return part


def _model_parts(
    message: AssistantMessage, model: Model, ids: bool, given: frozenset[str]
) -> list[dict[str, Any]]:
    """The parts of an assistant message (``ids``: the tool calls carry their ids; else
    only those in ``given``, as they were given)."""
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            # An empty part is kept only for its signature (Gemini may sign the last, empty part).
            if block.text or block.text_signature:
                parts.append(_signed({"text": block.text}, block.text_signature))
        elif isinstance(block, ThinkingContent):
            if block.thinking or block.thinking_signature:
                parts.append(
                    _signed({"text": block.thinking, "thought": True}, block.thinking_signature)
                )
        elif isinstance(block, ToolCall):
            call: dict[str, Any] = {"name": block.name, "args": block.arguments}
            if ids:
                call["id"] = _call_id(block.id)
            elif block.id in given:
                call["id"] = block.id
            parts.append(_signed({"functionCall": call}, block.thought_signature))
    if "gemini-3" in model.id.lower() and (message.provider, message.api, message.model) != (
        model.provider,
        model.api,
        model.id,
    ):
        calls = [part for part in parts if "functionCall" in part]
        if calls and not any("thoughtSignature" in part for part in calls):
            calls[0]["thoughtSignature"] = _SKIP_SIGNATURE
    return parts


def _function_response(
    message: ToolResultMessage, has_images: bool, ids: bool, given: frozenset[str]
) -> dict[str, Any]:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
    if not text and has_images:
        text = "(see attached image)"
    response: dict[str, Any] = {
        "name": message.tool_name,
        "response": {"error": text} if message.is_error else {"output": text},
    }
    if ids:
        response["id"] = _call_id(message.tool_call_id)
    elif message.tool_call_id in given:
        response["id"] = message.tool_call_id
    return {"functionResponse": response}


def _contents(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    turns: list[tuple[str, list[dict[str, Any]]]] = []

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(parts)  # roles must alternate: merge the same role's turns
        else:
            turns.append((role, parts))

    messages: list[Message] = prepare_messages(context.messages, model)
    ids = _sends_call_ids(model.id)
    given = frozenset() if ids else _given_ids(messages)
    images: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            found = [_inline(b) for b in message.content if isinstance(b, ImageContent)]
            add("user", [_function_response(message, bool(found), ids, given)])
            if "image" in model.input:
                images += found
            following = messages[index + 1] if index + 1 < len(messages) else None
            if images and not isinstance(following, ToolResultMessage):
                # After the batch's function responses, in the same turn.
                add("user", [{"text": "Attached image(s) from tool result:"}, *images])
                images = []
        elif isinstance(message, UserMessage):
            add("user", _user_parts(message, model))
        else:
            add("model", _model_parts(message, model, ids, given))
    return [{"role": role, "parts": parts} for role, parts in turns]


def _model_path(model_id: str) -> str:
    return model_id if model_id.startswith("models/") else f"models/{model_id}"


class Google(HttpProvider):
    """The Gemini API provider. One instance per HTTP client.

    Its ``stream`` method is a stream function; the client is taken as
    :class:`~trio_agent.providers.openai_chat.OpenAIChat` takes it.
    """

    api: ClassVar[str] = API
    label: ClassVar[str] = "google"
    env_keys: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def build_request(
        self, model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
    ) -> HttpRequest:
        body: dict[str, Any] = {}
        if context.system_prompt:
            body["systemInstruction"] = {"parts": [{"text": context.system_prompt}]}
        body["contents"] = _contents(model, context)
        if context.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": tool.name,
                            "description": tool.description,
                            "parametersJsonSchema": dict(tool.parameters),
                        }
                        for tool in context.tools
                    ]
                }
            ]
        config: dict[str, Any] = {}
        if options.max_tokens:
            config["maxOutputTokens"] = options.max_tokens
        if options.temperature is not None:
            config["temperature"] = options.temperature
        level = offered_level(model, options.reasoning) if options.reasoning else None
        if level is None:
            off = _thinking_off(model)
            if off is not None:
                config["thinkingConfig"] = off
        elif model.reasoning:
            # As pi-ai: a model that takes levels (Gemini 3 and later, Gemma 4) is sent the
            # level as its thinking_levels map it ("low", "HIGH", ...), as the API names
            # it, one above "HIGH" as "HIGH"; any other model a token budget.
            config["thinkingConfig"] = {
                "includeThoughts": True,
                **(
                    {"thinkingLevel": _api_level(model, level)}
                    if _takes_thinking_level(model.id)
                    else {"thinkingBudget": thinking_budget(model, level)}
                ),
            }
        if config:
            body["generationConfig"] = config
        headers = {**model.headers, **options.headers}
        if api_key:
            headers["x-goog-api-key"] = api_key
        url = f"{model.base_url.rstrip('/')}/{_model_path(model.id)}:streamGenerateContent?alt=sse"
        return HttpRequest(url, headers, body)

    def parser(self, model: Model, builder: AssistantMessageBuilder) -> Parser:
        return _GeminiParser(model, builder)


# --- the stream ----------------------------------------------------------------------------------


class _GeminiParser(Parser):
    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.finish_reason: str | None = None
        self.finish_message: str | None = None
        self.signature: str | None = None  # of the open block
        self.call_ids: set[str] = set()
        self.calls = 0

    def feed(self, event: SseEvent) -> Iterable[AssistantMessageEvent]:
        data = event.data
        if not data.strip():
            return ()
        provider = self.name
        chunk = parse_json(data, "a response", provider)
        if not isinstance(chunk, dict):
            raise ProviderFailure(f"unexpected response from {provider}: {data[:200]!r}")
        error = chunk.get("error")
        if error is not None:
            text = f"{provider} reported an error: {_error_text(error)}"
            if type(error) is dict:
                raise reported(text, provider, (error.get("status"),), error.get("code"))
            raise reported(text, provider)
        try:
            return self._response(chunk)
        except Malformed as exc:
            raise ProviderFailure(f"malformed response from {provider}: {exc}") from None

    def _response(self, chunk: dict[str, Any]) -> list[AssistantMessageEvent]:
        # Every field is read before anything is taken: a malformed one changes nothing.
        builder = self.builder
        response_id = string(chunk, "responseId", "") if builder.response_id is None else None
        raw_usage = obj(chunk, "usageMetadata", "")
        usage = None if raw_usage is None else _usage(raw_usage, "usageMetadata")
        feedback = obj(chunk, "promptFeedback", "")
        blocked = detail = None
        if feedback is not None:
            blocked = string(feedback, "blockReason", "promptFeedback")
            if blocked:
                detail = string(feedback, "blockReasonMessage", "promptFeedback")
        parts: list[_Read] = []
        reason = message = None
        found = _first_candidate(chunk)
        if found is not None:
            candidate, where = found
            content = obj(candidate, "content", where)
            if content is not None:
                at = f"{where}.content.parts"
                for index, raw in enumerate(objects(content, "parts", f"{where}.content")):
                    read = _part(raw, f"{at}[{index}]")
                    if read is not None:  # None: a part of a kind that is not kept
                        parts.append(read)
            reason = string(candidate, "finishReason", where)
            if reason:
                message = string(candidate, "finishMessage", where)
        if response_id is not None:
            builder.response_id = response_id
        if usage is not None:
            builder.usage = usage
        if blocked:
            raise ProviderFailure(
                f"{self.name} blocked the prompt: blockReason {blocked!r}"
                + (f": {detail}" if detail else ""),
                kind="refused",
            )
        out: list[AssistantMessageEvent] = []
        for part in parts:
            self._take(part, out)
        if reason:
            self.finish_reason = reason
            self.finish_message = message or None
        return out

    def _take(self, part: _Read, out: list[AssistantMessageEvent]) -> None:
        """The events of one part: a tool call, or text or thinking (or a signature alone)."""
        signature, text, thought, call = part
        if call is not None:
            self._call(call, signature, out)
            return
        builder = self.builder
        kind = "thinking" if thought else "text"
        resigned = signature is not None and self.signature not in (None, signature)
        if builder.open_kind != kind or resigned:
            out.extend(self.end())
            out.append(builder.thinking_start() if kind == "thinking" else builder.text_start())
        if text:
            out.append(
                builder.thinking_delta(text) if kind == "thinking" else builder.text_delta(text)
            )
        if signature is not None:
            builder.set_signature(signature)
            self.signature = signature

    def _call(self, call: _Call, signature: str | None, out: list[AssistantMessageEvent]) -> None:
        call_id, name, arguments, delta = call
        out.extend(self.end())
        builder = self.builder
        if not call_id or call_id in self.call_ids:
            call_id = f"{builder.response_id or 'gemini'}_{self.calls}"
        self.calls += 1
        self.call_ids.add(call_id)
        out.append(builder.toolcall_start(call_id, name))
        out.append(builder.toolcall_delta(delta, arguments))
        if signature is not None:
            builder.set_signature(signature)
        out.append(builder.toolcall_end(arguments))

    def end(self) -> Iterable[AssistantMessageEvent]:
        self.signature = None
        return super().end()

    def finish(self) -> AssistantMessage:
        provider = self.name
        reason = self.finish_reason
        if reason is None:
            raise ProviderFailure(
                f"the stream from {provider} ended without a finishReason", kind="network"
            )
        if reason == "STOP":
            return self.builder.finish("stop")
        if reason == "MAX_TOKENS":
            return self.builder.finish("length")
        text = f"{provider} finished with finishReason {reason!r}"
        if self.finish_message:
            text += f": {self.finish_message}"
        return self.builder.finish("error", text)


_Call: TypeAlias = tuple[str, str, dict[str, Any], str]
"""A function call: its id ("" for none), name, arguments, and their JSON."""
_Read: TypeAlias = tuple[str | None, str, bool, _Call | None]
"""A part: its thought signature, text, whether it is a thought, and its function call."""


def _part(part: dict[str, Any], where: str) -> _Read | None:
    """What a part holds, every field it has checked (None: nothing that is kept)."""
    signature = string(part, "thoughtSignature", where) or None
    call = obj(part, "functionCall", where)
    if call is not None:
        at = path(where, "functionCall")
        call_id = string(call, "id", at) or ""
        arguments = obj(call, "args", at) or {}
        name = string(call, "name", at) or ""
        return signature, "", False, (call_id, name, arguments, dumps(arguments, path(at, "args")))
    text = string(part, "text", where)
    if text is None:
        if signature is None:
            return None  # a part of a kind we do not keep (code execution, files, ...)
        text = ""  # a signature alone: it belongs to a (possibly empty) block
    if not text and signature is None:
        return None
    return signature, text, bool(flag(part, "thought", where)), None


def _first_candidate(chunk: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Candidate 0 (the only one unless ``candidateCount`` was raised), and its path."""
    for position, candidate in enumerate(objects(chunk, "candidates", "")):
        where = f"candidates[{position}]"
        if not integer(candidate, "index", where):  # absent, or 0
            return candidate, where
    return None


def _error_text(error: Any) -> str:
    """What an in-band error says: ``status: message``, else the error itself."""
    if type(error) is not dict:
        return show(error, 500)
    message = error.get("message")
    status = error.get("status") or error.get("code")
    if message and status:
        return f"{_plain(status)}: {_plain(message)}"
    return _plain(message) if message else show(error, 500)


def _plain(value: Any) -> str:
    return value if type(value) is str else show(value)


def _usage(raw: dict[str, Any], where: str) -> Usage:
    """Usage from ``usageMetadata``: prompt tokens without the cached ones are the input;
    output counts the thoughts too."""
    prompt = (count(raw, "promptTokenCount", where) or 0) + (
        count(raw, "toolUsePromptTokenCount", where) or 0
    )
    cache_read = count(raw, "cachedContentTokenCount", where) or 0
    output = (count(raw, "candidatesTokenCount", where) or 0) + (
        count(raw, "thoughtsTokenCount", where) or 0
    )
    input_tokens = max(0, prompt - cache_read)
    total = count(raw, "totalTokenCount", where) or input_tokens + cache_read + output
    return Usage(input=input_tokens, output=output, cache_read=cache_read, total_tokens=total)


_default = Google()


def provider() -> Google:
    """The default instance (registered for ``"google-generative-ai"``)."""
    return _default


stream = _default.stream
"""The stream function of ``"google-generative-ai"`` models: the default instance's."""
