"""OpenAI responses (``api="openai-responses"``): ``POST {base_url}/responses``.

::

    from trio_agent.providers import openai_responses

    gpt = openai_responses.model("gpt-5", reasoning=True)  # OPENAI_API_KEY

The request (design.md#openai-responses) is sent with ``store: false``, so nothing is
kept on OpenAI's side between turns: the whole transcript goes in ``input``.
Reasoning is carried from turn to turn by replaying the model's reasoning item
(with its ``encrypted_content``, asked for with ``include``), kept whole, as
JSON, in the thinking block's signature. Text blocks keep the id of their
``message`` item as their signature, and go back with it (text without one,
another model's, gets an id made from its place in the transcript, which the
API requires); tool calls keep ``call_id|item_id`` as
their id, and the two are split again when a call is replayed (the ``fc_``
item id is left out for a call made by another model, or one that followed
reasoning that cannot be replayed). A reasoning level is sent as
``reasoning.effort`` like the chat provider's ``reasoning_effort`` (the nearest
level the catalog's ``thinking_levels`` offer, as they map it; ``xhigh`` as
``high`` for a model without them); with no level, a model that can turn
reasoning off (its ``off`` level is not None: gpt-5.1 and later) gets
``reasoning: {effort: "none"}`` (its ``off``), as pi-ai sends it: it would
otherwise reason, and bill it. A model whose catalog rules say
``supportsMidConvoEffort`` (gpt-6 and later) is asked for the level in
``configuration_update`` items instead, as pi-ai 1.6 asks: one before each of
its own earlier turns, with the effort that turn was made at (the reply's
``provider_thinking_level``), and one at the end with the level asked for now,
while ``reasoning.effort`` stays ``"medium"``. A model without ``"image"`` in
its input gets no images.

The prompt cache, as pi-ai asks for it: the ``session_id`` (its first 64
characters, :func:`~trio_agent.providers._common.session_key`) is sent as
``prompt_cache_key`` and in the ``session-id`` and ``x-client-request-id``
headers (OpenRouter: ``x-session-id``; the catalog's ``sessionAffinityFormat``
``openai-nosession``: no ``session-id``); ``cache_retention="long"`` asks for
``prompt_cache_retention: "24h"`` where the catalog does not say the server
lacks it (``supportsLongCacheRetention``), and a model whose cache is set with
``prompt_cache_options`` (``supportsExplicitPromptCacheMode``, gpt-5.6) gets
``{ttl: "30m"}`` for it, and ``{mode: "explicit"}`` with ``"none"``. With
``cache_retention="none"``, no key and no session header are sent.
``OPENAI_API_KEY`` is sent only to OpenAI's server (``https://api.openai.com``):
a model of ``provider="openai"`` elsewhere (a proxy, a test server) needs the
key given in the options, and is refused without one; another server behind
this API, under its own provider label (vLLM, Ollama), gets the key given in
the options, or none.

Reading the stream: the output items (``message``, ``reasoning``,
``function_call``) are tracked by ``output_index``; each becomes one block
(text, thinking, tool call), opened by ``response.output_item.added`` and
closed by ``response.output_item.done``, where the final item is taken (the
reasoning item as the signature; any text the deltas did not bring). The
summary parts of one reasoning item are joined with a blank line into one
thinking block; raw reasoning text (open-weight models) goes into it too.
Choices made here:

* A refusal (``response.refusal.delta``) is text: it is the model's answer,
  streamed into the message's text block, and the reply ends as the response
  does (normally ``stop``).
* Built-in tool items (web search, file search, ...) and unknown event types
  are ignored.
* An item whose deltas arrive after another item was opened (OpenAI does not
  interleave items, the format allows it) still gets all of its content in
  the final message; the stream events show what arrived while it was open.

Stop reasons: ``response.completed`` is ``stop`` (``toolUse`` when the output
holds function calls); ``response.incomplete`` for ``max_output_tokens`` is
``length``, for any other reason (``content_filter``) an error naming it;
``response.failed`` and the ``error`` event are errors with the server's code
and message; a stream that ends without one of these is an error too, and so
is an event with a field of a type the API does not give it (named, with its
value: see ``_fields``), of which nothing is taken.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import attrs
import jiter

from .. import _catalog
from .._events import AssistantMessageEvent
from .._messages import (
    AssistantContent,
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

__all__ = ["API", "OpenAIResponses", "model", "provider", "stream"]

API = "openai-responses"
"""The ``api`` of responses models, under which :func:`stream` is registered."""
_FREE = ModelCost()


_DEFAULTS: dict[str, Any] = {
    "base_url": "https://api.openai.com/v1",
    "reasoning": False,
    "context_window": 400_000,
    "max_tokens": 128_000,
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
    """A model served over the responses API at ``base_url``.

    What the model catalog (:mod:`trio_agent.models`) knows of ``id`` at
    ``provider`` is filled in: limits, prices, input, reasoning, base URL and
    the request rules. An argument given here wins over it; a ``base_url``
    other than the catalog's is another server, which the catalog does not
    describe. Without a ``base_url``, an id the provider does not list is an
    :class:`~trio_agent.UnknownModelError` naming the nearest ids it does list;
    with one, an id the catalog does not know gets the defaults (OpenAI's URL,
    no reasoning, 400,000 tokens of context, 128,000 of output, text and
    images, free). The provider label, when not given, is the one whose
    catalog models on this API are served at ``base_url``, else ``"openai"``.
    """
    return _catalog.describe(
        API,
        id,
        provider=provider,
        fallback_provider="openai",
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


def _image(block: ImageContent) -> dict[str, Any]:
    return {
        "type": "input_image",
        "image_url": f"data:{block.mime_type};base64,{block.data}",
        "detail": "auto",
    }


def _parts(blocks: Iterable[TextContent | ImageContent], images: bool) -> list[dict[str, Any]]:
    """Input parts; images only if the model takes them."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent):
            out.append({"type": "input_text", "text": block.text})
        elif images:
            out.append(_image(block))
    return out


def _user(message: UserMessage, images: bool) -> dict[str, Any] | None:
    content = message.content
    if isinstance(content, str):
        return {"role": "user", "content": [{"type": "input_text", "text": content}]}
    parts = _parts(content, images)
    return {"role": "user", "content": parts} if parts else None


def _reasoning_item(signature: str | None) -> dict[str, Any] | None:
    """The reasoning item kept in a thinking signature, if it can be replayed.

    With ``store: false`` the server cannot look an item up by its id: only an
    item that carries its ``encrypted_content`` means anything to it. Its null
    fields (``"status": null``, ``"content": null``, as servers that write out
    every field send them) are left out: the API refuses a null there.
    """
    if not signature:
        return None
    try:
        item = json.loads(signature)
    except ValueError:
        return None
    if isinstance(item, dict) and item.get("type") == "reasoning" and item.get("encrypted_content"):
        return {key: value for key, value in item.items() if value is not None}
    return None


def _split_id(tool_call_id: str) -> tuple[str, str | None]:
    """``call_id|item_id`` -> (call_id, item_id or None)."""
    call_id, bar, item_id = tool_call_id.partition("|")
    return call_id, (item_id if bar and item_id else None)


def _message_id(signature: str | None, position: int, number: int) -> str:
    """The id of a replayed ``message`` item, which the API requires.

    The item's own id when the text block kept it (its signature; one over the
    API's 64 characters is hashed), else, for text that came from another model
    or was made by hand, one made from the message's position in the transcript
    and the block's among its text blocks, as pi-ai does.
    """
    if signature:
        if len(signature) <= 64:
            return signature
        return "msg_" + hashlib.sha256(signature.encode("utf-8")).hexdigest()[:32]
    return f"msg_{position}" if number == 0 else f"msg_{position}_{number}"


def _assistant(message: AssistantMessage, model: Model, position: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    texts = 0  # text blocks so far
    same_model = (message.provider, message.api, message.model) == (
        model.provider,
        model.api,
        model.id,
    )
    skipped_reasoning = False
    for block in message.content:
        if isinstance(block, ThinkingContent):
            item = _reasoning_item(block.thinking_signature)
            if item is None:
                skipped_reasoning = True
            else:
                out.append(item)
        elif isinstance(block, TextContent):
            if not block.text and not block.text_signature:
                continue
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                    "id": _message_id(block.text_signature, position, texts),
                }
            )
            texts += 1
        else:
            call_id, item_id = _split_id(block.id)
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": json_text(block.arguments),
            }
            # OpenAI pairs an fc_ item with the reasoning item before it: leave the
            # id out when that reasoning is not sent (another model's, or lost).
            if item_id is not None and same_model and not skipped_reasoning:
                call["id"] = item_id
            out.append(call)
    return out


def _tool_output(message: ToolResultMessage, images: bool) -> dict[str, Any]:
    call_id, _ = _split_id(message.tool_call_id)
    output: str | list[dict[str, Any]]
    if images and any(isinstance(block, ImageContent) for block in message.content):
        output = _parts(message.content, images)
    else:
        output = "\n".join(b.text for b in message.content if isinstance(b, TextContent))
        if not output and message.content:
            output = "(image omitted: the model does not accept images)"
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _input(model: Model, context: LlmContext, effort: str | None = None) -> list[dict[str, Any]]:
    """The ``input`` items. With ``effort`` (a model whose effort is set mid-conversation,
    :func:`_update_effort`), each turn this model made is preceded by a
    ``configuration_update`` item with the effort it was made at (its
    ``provider_thinking_level``), and the items end with one asking for ``effort``, as
    pi-ai sends them."""
    images = "image" in model.input
    out: list[dict[str, Any]] = []
    for position, message in enumerate(prepare_messages(context.messages, model)):
        if isinstance(message, UserMessage):
            user = _user(message, images)
            if user is not None:
                out.append(user)
        elif isinstance(message, AssistantMessage):
            items = _assistant(message, model, position)
            made_at = message.provider_thinking_level
            if (
                effort is not None
                and items
                and made_at in _EFFORTS  # a loaded transcript's value, not sent unchecked
                and (message.provider, message.api, message.model)
                == (model.provider, model.api, model.id)
            ):
                out.append(_configuration_update(made_at))
            out.extend(items)
        else:
            out.append(_tool_output(message, images))
    if effort is not None:
        out.append(_configuration_update(effort))
    return out


_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
"""The efforts a ``configuration_update`` item may carry back for an earlier turn."""


def _configuration_update(effort: str) -> dict[str, Any]:
    return {"type": "configuration_update", "reasoning": {"effort": effort}}


_UPDATE_REQUEST_EFFORT = "medium"
"""The request's own ``reasoning.effort`` while ``configuration_update`` items carry the
level, as pi-ai sends it."""


def _update_effort(model: Model, options: StreamOptions) -> str | None:
    """The effort to send in ``configuration_update`` items, for a model whose catalog rules
    say ``supportsMidConvoEffort`` asked for a level (the nearest it offers, as its
    ``thinking_levels`` map it); None to send the level as ``reasoning.effort``."""
    if (
        not model.reasoning
        or model.compat_flags.get("supportsMidConvoEffort") is not True
        or not options.reasoning
    ):
        return None
    return model_effort(model, options.reasoning)


def _reasoning(model: Model, level: str | None) -> dict[str, Any]:
    """The reasoning fields of a reasoning model's request.

    A level is sent as the nearest the model offers, as its ``thinking_levels`` map it
    (:func:`model_effort`), with the reasoning summary, and the encrypted reasoning to
    replay next turn. Without one (or when the nearest is ``off``), reasoning is turned
    off where the model can turn it off (its ``off`` level is not mapped to None):
    ``effort`` is its ``off`` value, else ``"none"``. These models reason by default,
    so a request without a level would otherwise still pay for reasoning; a model that
    cannot (``gpt-5``, ``o3``: ``off`` is None) gets no field, and reasons as its server
    chooses. As pi-ai, GitHub Copilot's models are not sent an ``off``."""
    effort = model_effort(model, level) if level else None
    if effort is not None:
        return {
            "reasoning": {"effort": effort, "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
        }
    out: dict[str, Any] = {}
    if model.provider != "github-copilot" and offers(model, "off"):
        off = model.thinking_levels.get("off")
        out["reasoning"] = {"effort": off if isinstance(off, str) else "none"}
    if model.provider == "xai":
        out["include"] = ["reasoning.encrypted_content"]
    return out


_SESSION_FORMATS = frozenset(("openai", "openai-nosession", "openrouter"))


def _session_headers(model: Model, key: str) -> dict[str, str]:
    """The headers that name the conversation (``key``, the session id as
    :func:`~trio_agent.providers._common.session_key` cuts it), in the format of the
    catalog's ``sessionAffinityFormat`` for the model, else the one of its server:
    OpenRouter's ``x-session-id``, or ``session-id`` and ``x-client-request-id``
    (``openai-nosession``: only the latter)."""
    key = session_header(key)
    form = model.compat_flags.get("sessionAffinityFormat")
    if form not in _SESSION_FORMATS:
        form = "openrouter" if on_openrouter(model) else "openai"
    if form == "openrouter":
        return {"x-session-id": key}
    headers = {"session-id": key} if form == "openai" else {}
    headers["x-client-request-id"] = key
    return headers


class OpenAIResponses(HttpProvider):
    """The responses API provider. One instance per HTTP client.

    Its ``stream`` method is a stream function; the client is taken as
    :class:`~trio_agent.providers.openai_chat.OpenAIChat` takes it.
    """

    api: ClassVar[str] = API
    label: ClassVar[str] = "openai"
    env_keys: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def needs_key(self, model: Model) -> bool:
        """OpenAI needs a key; another server (vLLM, Ollama, a proxy) is asked without one
        when none is given, and says so itself if it wants one."""
        return model.provider in ("", "openai")

    def build_request(
        self, model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
    ) -> HttpRequest:
        update = _update_effort(model, options)
        body: dict[str, Any] = {
            "model": model.id,
            "stream": True,
            "store": False,
            "input": _input(model, context, update),
        }
        if context.system_prompt:
            body["instructions"] = context.system_prompt
        if context.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,
                }
                for tool in context.tools
            ]
        if options.max_tokens:
            body["max_output_tokens"] = options.max_tokens
        reasoning = bool(model.reasoning and options.reasoning)
        if options.temperature is not None and not reasoning:
            body["temperature"] = options.temperature
        if model.reasoning:
            body.update(_reasoning(model, options.reasoning))
            if update is not None:
                body["reasoning"]["effort"] = _UPDATE_REQUEST_EFFORT
        flags = model.compat_flags
        key = session_key(options)
        if key is not None and flags.get("promptCacheKeyMode") != "disabled":
            body["prompt_cache_key"] = key
        retention = options.cache_retention
        long = retention == "long" and flags.get("supportsLongCacheRetention") is not False
        if flags.get("supportsExplicitPromptCacheMode") is True:
            if retention == "none":
                body["prompt_cache_options"] = {"mode": "explicit"}
            elif long:
                body["prompt_cache_options"] = {"ttl": "30m"}
        elif long:
            body["prompt_cache_retention"] = "24h"
        headers = {**model.headers}
        if key is not None:
            headers.update(_session_headers(model, key))
        headers.update(options.headers)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return HttpRequest(model.base_url.rstrip("/") + "/responses", headers, body)

    def thinking_level(self, model: Model, options: StreamOptions) -> str | None:
        """The effort asked of a model whose effort is set mid-conversation
        (``supportsMidConvoEffort``): the next request tells the API which effort each
        of its turns was made at."""
        return _update_effort(model, options)

    def parser(self, model: Model, builder: AssistantMessageBuilder) -> Parser:
        return _ResponsesParser(model, builder)


# --- the stream ----------------------------------------------------------------------------------

_KINDS = frozenset({"message", "reasoning", "function_call"})


class _Item:
    """One output item and the block it became."""

    __slots__ = (
        "args",
        "call_id",
        "chunks",
        "closed",
        "done_args",
        "item_id",
        "kind",
        "name",
        "part",
        "parts",
        "position",
        "signature",
        "stale",
    )

    def __init__(self, kind: str, position: int, item_id: str, call_id: str, name: str) -> None:
        self.kind = kind
        self.position = position  # content index in the reply
        self.item_id = item_id
        self.call_id = call_id
        self.name = name
        self.chunks: list[str] = []  # all the text of the block, late pieces too
        self.parts: dict[tuple[str, int], list[str]] = {}  # text by content part
        self.part: tuple[str, int] | None = None  # the part being streamed
        self.args = PartialJson()
        self.done_args: str | None = None
        self.signature: str | None = (self.item_id or None) if kind == "message" else None
        self.closed = False
        self.stale = False  # changed after its block was closed: rebuilt at the end

    @property
    def tool_call_id(self) -> str:
        if self.call_id and self.item_id:
            return f"{self.call_id}|{self.item_id}"
        return self.call_id or self.item_id or f"call_{self.position}"

    def arguments(self) -> dict[str, Any]:
        """The final arguments: the whole string from ``.done`` if it parses, else the deltas'."""
        if self.done_args is not None:
            try:
                value = jiter.from_json(self.done_args.encode("utf-8"))
            except ValueError:
                value = None
            if isinstance(value, dict):
                return value
        return self.args.final()

    def block(self) -> AssistantContent:
        if self.kind == "message":
            return TextContent("".join(self.chunks), text_signature=self.signature)
        if self.kind == "reasoning":
            return ThinkingContent("".join(self.chunks), thinking_signature=self.signature)
        return ToolCall(self.tool_call_id, self.name, self.arguments())


class _ResponsesParser(Parser):
    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.items: dict[int, _Item] = {}
        self.by_item_id: dict[str, _Item] = {}
        self.order: list[_Item] = []
        self.open: _Item | None = None
        self.stop: StopReason = "stop"
        self.failure: ProviderFailure | None = None
        self.handlers = {
            "response.created": self._created,
            "response.in_progress": self._created,
            "response.queued": self._created,
            "response.output_item.added": self._item_added,
            "response.output_item.done": self._item_done,
            "response.output_text.delta": self._text_delta,
            "response.refusal.delta": self._text_delta,
            "response.output_text.done": self._text_done,
            "response.refusal.done": self._text_done,
            "response.function_call_arguments.delta": self._args_delta,
            "response.function_call_arguments.done": self._args_done,
            "response.reasoning_summary_part.added": self._summary_part,
            "response.reasoning_summary_text.delta": self._reasoning_delta,
            "response.reasoning_summary_text.done": self._reasoning_done,
            "response.reasoning_text.delta": self._reasoning_delta,
            "response.reasoning_text.done": self._reasoning_done,
            "response.completed": self._terminal,
            "response.incomplete": self._terminal,
            "response.failed": self._terminal,
            "error": self._error,
        }

    # -- events ---------------------------------------------------------------------

    def feed(self, event: SseEvent) -> Iterable[AssistantMessageEvent]:
        if not event.data.strip():
            return ()
        data = parse_json(event.data, "an event", self.name)
        if not isinstance(data, dict):
            raise ProviderFailure(f"unexpected event from {self.name}: {event.data[:200]!r}")
        kind = event.event
        try:
            # A server may name the event only in the SSE field.
            kind = data["type"] = string(data, "type", "") or kind
            handler = self.handlers.get(kind)
            if handler is None:
                return ()  # an event type this provider does not know, or need
            out: list[AssistantMessageEvent] = []
            handler(data, out)
            return out
        except Malformed as exc:
            raise ProviderFailure(f"malformed {kind} event from {self.name}: {exc}") from None

    # Each handler reads every field it needs before it changes anything: an
    # event with a field of another type changes nothing (Malformed).

    def _created(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        response = obj(data, "response", "")
        if response is not None:
            response_id = string(response, "id", "response")
            if response_id is not None:
                self.builder.response_id = response_id

    def _item_added(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = obj(data, "item", "")
        kind = None if item is None else string(item, "type", "item")
        if item is None or kind not in _KINDS:
            return  # a built-in tool's item
        index, item_id = _place(data)
        identity = _identity(item)
        if self._find(index, item_id or identity[0]) is None:
            self._open(kind, index, *identity, out)

    def _item_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = obj(data, "item", "")
        kind = None if item is None else string(item, "type", "item")
        if item is None or kind not in _KINDS:
            return
        index, item_id = _place(data)
        identity = _identity(item)
        text = arguments = signature = None
        if kind == "message":
            pieces = []
            for number, part in enumerate(objects(item, "content", "item")):
                where = f"item.content[{number}]"
                field = "text" if string(part, "type", where) == "output_text" else "refusal"
                pieces.append(string(part, field, where) or "")
            text = "".join(pieces)
        elif kind == "reasoning":
            signature = dumps(item, "item")
            text = "\n\n".join(
                string(part, "text", f"item.{field}[{number}]") or ""
                for field in ("summary", "content")
                for number, part in enumerate(objects(item, field, "item"))
            )
        else:
            arguments = string(item, "arguments", "item")
        found = self._find(index, item_id or identity[0])
        if found is None or found.kind != kind:
            found = self._open(kind, index, *identity, out)
        if kind == "message":
            found.signature = identity[0] or found.signature
        elif kind == "reasoning":
            found.signature = signature
        else:
            started = (found.tool_call_id, found.name)
            found.item_id = identity[0] or found.item_id
            found.call_id = identity[1] or found.call_id
            found.name = identity[2] or found.name
            if (found.tool_call_id, found.name) != started:
                found.stale = True  # its added event never came: the id and name come now
            if found.done_args is None and arguments is not None:
                self._take_args(found, arguments, out)
        if text is not None:
            self._complete(found, None, text, out)
        if found.closed:
            found.stale = True
        else:
            self._close(out)

    def _text_delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        delta = string(data, "delta", "")
        part = ("text", integer(data, "content_index", "") or 0)
        item = self._route(*place, "message", out)
        if item is not None and delta:
            self._add(item, part, delta, "", out)

    def _text_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        text = string(data, "text", "")
        if text is None:
            text = string(data, "refusal", "")
        part = ("text", integer(data, "content_index", "") or 0)
        item = self._route(*place, "message", out)
        if item is not None and text is not None:
            self._complete(item, part, text, out)

    def _summary_part(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        part = ("summary", integer(data, "summary_index", "") or 0)
        item = self._route(*place, "reasoning", out)
        if item is not None:
            self._add(item, part, "", "\n\n", out)

    @staticmethod
    def _reasoning_part(data: dict[str, Any]) -> tuple[str, int]:
        if data["type"].startswith("response.reasoning_summary"):
            return ("summary", integer(data, "summary_index", "") or 0)
        return ("reasoning", integer(data, "content_index", "") or 0)

    def _reasoning_delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        delta = string(data, "delta", "")
        part = self._reasoning_part(data)
        item = self._route(*place, "reasoning", out)
        if item is not None and delta:
            self._add(item, part, delta, "\n\n", out)

    def _reasoning_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        text = string(data, "text", "")
        part = self._reasoning_part(data)
        item = self._route(*place, "reasoning", out)
        if item is not None and text is not None:
            self._complete(item, part, text, out, "\n\n")

    def _args_delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        delta = string(data, "delta", "")
        item = self._route(*place, "function_call", out)
        if item is not None and delta:
            self._add_args(item, delta, out)

    def _args_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        place = _place(data)
        arguments = string(data, "arguments", "")
        item = self._route(*place, "function_call", out)
        if item is not None and arguments is not None:
            self._take_args(item, arguments, out)

    def _take_args(self, item: _Item, arguments: str, out: list[AssistantMessageEvent]) -> None:
        """The whole argument string of a call: add what the deltas did not bring."""
        streamed = item.args.text
        if len(arguments) > len(streamed) and arguments.startswith(streamed):
            self._add_args(item, arguments[len(streamed) :], out)
        item.done_args = arguments
        if item.closed:
            item.stale = True

    def _terminal(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        response = obj(data, "response", "") or {}
        response_id = string(response, "id", "response")
        raw_usage = obj(response, "usage", "response")
        usage = None if raw_usage is None else _usage(raw_usage, "response.usage")
        kind = data["type"]
        reason = error = None
        if kind == "response.incomplete":
            details = obj(response, "incomplete_details", "response")
            if details is not None:
                reason = string(details, "reason", "response.incomplete_details")
        elif kind == "response.failed":
            error = obj(response, "error", "response") or {}
        self.finished = True
        if response_id is not None:
            self.builder.response_id = response_id
        if usage is not None:
            self.builder.usage = usage
        if kind == "response.incomplete":
            if reason == "max_output_tokens":
                self.stop = "length"
            else:
                text = f"the response from {self.name} is incomplete: {reason}"
                # A content filter, or a reason unknown: refused, unless it says more.
                self.failure = reported(text, self.name, (reason,), default="refused")
        elif error is not None:
            self.failure = reported(
                self._error_text(error, "failed"), self.name, (error.get("code"), error.get("type"))
            )

    def _error(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        # Ends the stream; what is open is closed (Parser.end) before the error reply.
        self.finished = True
        error = data.get("error")
        details = error if type(error) is dict else data
        self.failure = reported(
            self._error_text(details, "error"),
            self.name,
            (details.get("code"), details.get("type")),
            details.get("code"),
        )

    def _error_text(self, error: dict[str, Any], what: str) -> str:
        kind = error.get("type")
        code = error.get("code") or (kind if kind != "error" else None)
        message = error.get("message")
        detail = ": ".join(
            part if type(part) is str else show(part) for part in (code, message) if part
        )
        if what == "failed":
            return f"the response from {self.name} failed: {detail or 'no reason given'}"
        return f"{self.name} reported an error: {detail or show(error, 500)}"

    # -- items and blocks ---------------------------------------------------------------

    def _find(self, index: int | None, item_id: str | None) -> _Item | None:
        if index is not None and index in self.items:
            return self.items[index]
        if item_id:
            return self.by_item_id.get(item_id)
        return None

    def _route(
        self, index: int | None, item_id: str | None, kind: str, out: list[AssistantMessageEvent]
    ) -> _Item | None:
        """The item an event is for; a new one if its ``output_item.added`` never came."""
        found = self._find(index, item_id)
        if found is None:
            if index is None and not item_id:
                found = self.open  # a server that names no item: the open one
            if found is None:
                return self._open(kind, index, item_id or "", "", "", out)
        return found if found.kind == kind else None

    def _open(
        self,
        kind: str,
        index: int | None,
        item_id: str,
        call_id: str,
        name: str,
        out: list[AssistantMessageEvent],
    ) -> _Item:
        self._close(out)
        builder = self.builder
        found = _Item(kind, builder.content_index, item_id, call_id, name)
        self.order.append(found)
        if index is not None:
            self.items[index] = found
        if found.item_id:
            self.by_item_id[found.item_id] = found
        self.open = found
        if kind == "message":
            out.append(builder.text_start())
        elif kind == "reasoning":
            out.append(builder.thinking_start())
        else:
            out.append(builder.toolcall_start(found.tool_call_id, found.name))
        return found

    def _close(self, out: list[AssistantMessageEvent]) -> None:
        out.extend(self.end())

    def end(self) -> Iterable[AssistantMessageEvent]:
        item = self.open
        if item is None:
            return super().end()
        self.open = None
        item.closed = True
        builder = self.builder
        if item.kind == "message":
            return (builder.text_end(signature=item.signature),)
        if item.kind == "reasoning":
            return (builder.thinking_end(signature=item.signature),)
        return (builder.toolcall_end(item.arguments()),)

    def _add(
        self,
        item: _Item,
        part: tuple[str, int],
        piece: str,
        separator: str,
        out: list[AssistantMessageEvent],
    ) -> None:
        """Text for ``part`` of ``item``; a new part after another starts with ``separator``."""
        if part != item.part:
            if item.part is not None and separator and part not in item.parts:
                self._append(item, separator, out)
            item.part = part
            item.parts.setdefault(part, [])
        if piece:
            item.parts[part].append(piece)
            self._append(item, piece, out)

    def _complete(
        self,
        item: _Item,
        part: tuple[str, int] | None,
        text: str,
        out: list[AssistantMessageEvent],
        separator: str = "",
    ) -> None:
        """The whole text of a part (or, with ``part=None``, of the item): add what is missing."""
        if part is not None:
            self._add(item, part, "", separator, out)
            streamed = "".join(item.parts[part])
        else:
            streamed = "".join(item.chunks)
        if len(text) > len(streamed) and text.startswith(streamed):
            rest = text[len(streamed) :]
            if part is not None:
                item.parts[part].append(rest)
            self._append(item, rest, out)

    def _append(self, item: _Item, piece: str, out: list[AssistantMessageEvent]) -> None:
        item.chunks.append(piece)
        if item is self.open:
            builder = self.builder
            if item.kind == "message":
                out.append(builder.text_delta(piece))
            else:
                out.append(builder.thinking_delta(piece))
        else:
            item.stale = True

    def _add_args(self, item: _Item, piece: str, out: list[AssistantMessageEvent]) -> None:
        parsed = item.args.add(piece)
        if item is self.open:
            out.append(self.builder.toolcall_delta(piece, parsed))
        else:
            item.stale = True

    # -- the end ------------------------------------------------------------------------

    def finish(self) -> AssistantMessage:
        if not self.finished:
            raise ProviderFailure(
                f"the stream from {self.name} ended without response.completed", kind="network"
            )
        if self.failure is not None:
            raise self.failure
        message = self.builder.finish(self.stop)
        stale = [item for item in self.order if item.stale and item.position < len(message.content)]
        if stale:
            content = list(message.content)
            for item in stale:
                content[item.position] = item.block()
            message = attrs.evolve(message, content=content)
        return message


def _place(data: dict[str, Any]) -> tuple[int | None, str | None]:
    """Which item an event is for: its ``output_index`` and ``item_id``, if it has them."""
    return integer(data, "output_index", ""), string(data, "item_id", "")


def _identity(item: dict[str, Any]) -> tuple[str, str, str]:
    """An output item's id, call id and name ("" for those it has not)."""
    return (
        string(item, "id", "item") or "",
        string(item, "call_id", "item") or "",
        string(item, "name", "item") or "",
    )


def _usage(raw: dict[str, Any], where: str) -> Usage:
    """``input_tokens`` counts the tokens read from the cache and those written to it
    (``input_tokens_details``): both are taken out of the input, as pi-ai does, so that
    each is priced once, at its own rate."""
    details = obj(raw, "input_tokens_details", where)
    cached = written = 0
    if details is not None:
        where_details = path(where, "input_tokens_details")
        cached = count(details, "cached_tokens", where_details) or 0
        written = count(details, "cache_write_tokens", where_details) or 0
    input_tokens = max(0, (count(raw, "input_tokens", where) or 0) - cached - written)
    output = count(raw, "output_tokens", where) or 0
    return Usage(
        input=input_tokens,
        output=output,
        cache_read=cached,
        cache_write=written,
        total_tokens=input_tokens + output + cached + written,
    )


_default = OpenAIResponses()


def provider() -> OpenAIResponses:
    """The default instance (registered for ``"openai-responses"``)."""
    return _default


stream = _default.stream
"""The stream function of ``"openai-responses"`` models: the default instance's."""
