"""OpenAI responses (``api="openai-responses"``): ``POST {base_url}/responses``.

::

    from trio_agent.providers import openai_responses

    gpt = openai_responses.model("gpt-5", reasoning=True)  # OPENAI_API_KEY

The request (wire-formats.md §3) is sent with ``store: false``, so nothing is
kept on OpenAI's side between turns: the whole transcript goes in ``input``.
Reasoning is carried from turn to turn by replaying the model's reasoning item
(with its ``encrypted_content``, asked for with ``include``), kept whole, as
JSON, in the thinking block's signature. Text blocks keep the id of their
``message`` item as their signature; tool calls keep ``call_id|item_id`` as
their id, and the two are split again when a call is replayed (the ``fc_``
item id is left out for a call made by another model, or one that followed
reasoning that cannot be replayed). ``session_id`` is sent as
``prompt_cache_key``; a model without ``"image"`` in its input gets no images.
``OPENAI_API_KEY`` is used, and a key required, only for ``provider="openai"``:
another server behind this API (vLLM, Ollama, a proxy) gets the key given in
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
and message; a stream that ends without one of these is an error too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import attrs
import jiter

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
    openai_effort,
    parse_json,
    prepare_messages,
)
from ._sse import SseEvent
from ._transport import HttpRequest, ProviderFailure

__all__ = ["API", "OpenAIResponses", "model", "provider", "stream"]

API = "openai-responses"
_FREE = ModelCost()


def model(
    id: str,
    *,
    base_url: str = "https://api.openai.com/v1",
    provider: str = "openai",
    reasoning: bool = False,
    context_window: int = 400_000,
    max_tokens: int = 128_000,
    input: Sequence[str] = ("text", "image"),
    headers: dict[str, str] | None = None,
    cost: ModelCost = _FREE,
) -> Model:
    """A model served over the responses API at ``base_url``."""
    return Model(
        id=id,
        api=API,
        provider=provider,
        base_url=base_url,
        reasoning=reasoning,
        context_window=context_window,
        max_tokens=max_tokens,
        input=tuple(input),
        headers=headers or {},
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
    item that carries its ``encrypted_content`` means anything to it.
    """
    if not signature:
        return None
    try:
        item = json.loads(signature)
    except ValueError:
        return None
    if isinstance(item, dict) and item.get("type") == "reasoning" and item.get("encrypted_content"):
        return item
    return None


def _split_id(tool_call_id: str) -> tuple[str, str | None]:
    """``call_id|item_id`` -> (call_id, item_id or None)."""
    call_id, bar, item_id = tool_call_id.partition("|")
    return call_id, (item_id if bar and item_id else None)


def _assistant(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
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
            text: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": block.text, "annotations": []}],
            }
            if block.text_signature:
                text["id"] = block.text_signature
            out.append(text)
        else:
            call_id, item_id = _split_id(block.id)
            call: dict[str, Any] = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": json.dumps(block.arguments),
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


def _input(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    images = "image" in model.input
    out: list[dict[str, Any]] = []
    for message in prepare_messages(context.messages, model):
        if isinstance(message, UserMessage):
            user = _user(message, images)
            if user is not None:
                out.append(user)
        elif isinstance(message, AssistantMessage):
            out.extend(_assistant(message, model))
        else:
            out.append(_tool_output(message, images))
    return out


class OpenAIResponses(HttpProvider):
    """The responses API provider. One instance per HTTP client."""

    api: ClassVar[str] = API
    label: ClassVar[str] = "openai"
    env_keys: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    def api_key(self, model: Model, options: StreamOptions) -> str | None:
        """The option; else ``OPENAI_API_KEY``, for OpenAI only (never sent to another server)."""
        if options.api_key:
            return options.api_key
        if model.provider in ("", "openai"):
            return os.environ.get("OPENAI_API_KEY") or None
        return None

    def needs_key(self, model: Model) -> bool:
        """OpenAI needs a key; another server (vLLM, Ollama, a proxy) is asked without one
        when none is given, and says so itself if it wants one."""
        return model.provider in ("", "openai")

    def build_request(
        self, model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
    ) -> HttpRequest:
        body: dict[str, Any] = {
            "model": model.id,
            "stream": True,
            "store": False,
            "input": _input(model, context),
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
        if reasoning and options.reasoning:
            body["reasoning"] = {"effort": openai_effort(options.reasoning), "summary": "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        if options.session_id:
            body["prompt_cache_key"] = options.session_id
        headers = {**model.headers, **options.headers}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return HttpRequest(model.base_url.rstrip("/") + "/responses", headers, body)

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

    def __init__(self, kind: str, item: dict[str, Any], position: int) -> None:
        self.kind = kind
        self.position = position  # content index in the reply
        self.item_id = _str(item.get("id")) or _str(item.get("item_id"))
        self.call_id = _str(item.get("call_id"))
        self.name = _str(item.get("name"))
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


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _ResponsesParser(Parser):
    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        super().__init__(model, builder)
        self.items: dict[int, _Item] = {}
        self.by_item_id: dict[str, _Item] = {}
        self.order: list[_Item] = []
        self.open: _Item | None = None
        self.stop: StopReason = "stop"
        self.failure: str | None = None
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
        if not isinstance(data.get("type"), str):
            data["type"] = event.event  # a server that names the event only in the SSE field
        handler = self.handlers.get(data["type"])
        if handler is None:
            return ()  # an event type this provider does not know, or need
        out: list[AssistantMessageEvent] = []
        handler(data, out)
        return out

    def _created(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        response = data.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.builder.response_id = response["id"]

    def _item_added(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = data.get("item")
        if not isinstance(item, dict) or item.get("type") not in _KINDS:
            return  # a built-in tool's item
        if self._find(data, item) is None:
            self._open(str(item["type"]), item, data.get("output_index"), out)

    def _item_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = data.get("item")
        if not isinstance(item, dict) or item.get("type") not in _KINDS:
            return
        kind = str(item["type"])
        found = self._find(data, item)
        if found is None or found.kind != kind:
            found = self._open(kind, item, data.get("output_index"), out)
        if kind == "message":
            found.signature = _str(item.get("id")) or found.signature
            content = item.get("content")
            pieces = [
                _str(part.get("text") if part.get("type") == "output_text" else part.get("refusal"))
                for part in (content if isinstance(content, list) else ())
                if isinstance(part, dict)
            ]
            self._complete(found, None, "".join(pieces), out)
        elif kind == "reasoning":
            found.signature = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
            texts = [
                _str(part.get("text"))
                for field in ("summary", "content")
                for part in (item.get(field) or ())
                if isinstance(part, dict)
            ]
            self._complete(found, None, "\n\n".join(texts), out)
        else:
            started = (found.tool_call_id, found.name)
            found.item_id = _str(item.get("id")) or found.item_id
            found.call_id = _str(item.get("call_id")) or found.call_id
            found.name = _str(item.get("name")) or found.name
            if (found.tool_call_id, found.name) != started:
                found.stale = True  # its added event never came: the id and name come now
            arguments = item.get("arguments")
            if found.done_args is None and isinstance(arguments, str):
                self._args_done({"arguments": arguments}, out, found)
        if found.closed:
            found.stale = True
        else:
            self._close(out)

    def _text_delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = self._route(data, "message", out)
        delta = data.get("delta")
        if item is not None and isinstance(delta, str) and delta:
            self._add(item, ("text", _int(data.get("content_index"))), delta, "", out)

    def _text_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = self._route(data, "message", out)
        text = data.get("text", data.get("refusal"))
        if item is not None and isinstance(text, str):
            self._complete(item, ("text", _int(data.get("content_index"))), text, out)

    def _summary_part(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = self._route(data, "reasoning", out)
        if item is not None:
            self._add(item, ("summary", _int(data.get("summary_index"))), "", "\n\n", out)

    @staticmethod
    def _reasoning_part(data: dict[str, Any]) -> tuple[str, int]:
        if str(data.get("type")).startswith("response.reasoning_summary"):
            return ("summary", _int(data.get("summary_index")))
        return ("reasoning", _int(data.get("content_index")))

    def _reasoning_delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = self._route(data, "reasoning", out)
        delta = data.get("delta")
        if item is not None and isinstance(delta, str) and delta:
            self._add(item, self._reasoning_part(data), delta, "\n\n", out)

    def _reasoning_done(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = self._route(data, "reasoning", out)
        text = data.get("text")
        if item is not None and isinstance(text, str):
            self._complete(item, self._reasoning_part(data), text, out, "\n\n")

    def _args_delta(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        item = self._route(data, "function_call", out)
        delta = data.get("delta")
        if item is not None and isinstance(delta, str) and delta:
            self._add_args(item, delta, out)

    def _args_done(
        self, data: dict[str, Any], out: list[AssistantMessageEvent], item: _Item | None = None
    ) -> None:
        item = item or self._route(data, "function_call", out)
        arguments = data.get("arguments")
        if item is None or not isinstance(arguments, str):
            return
        streamed = item.args.text
        if len(arguments) > len(streamed) and arguments.startswith(streamed):
            self._add_args(item, arguments[len(streamed) :], out)  # what the deltas did not bring
        item.done_args = arguments
        if item.closed:
            item.stale = True

    def _terminal(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        self.finished = True
        raw_response = data.get("response")
        response: dict[str, Any] = raw_response if isinstance(raw_response, dict) else {}
        if isinstance(response.get("id"), str):
            self.builder.response_id = response["id"]
        usage = response.get("usage")
        if isinstance(usage, dict):
            self.builder.usage = _usage(usage)
        kind = data.get("type")
        if kind == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            if reason == "max_output_tokens":
                self.stop = "length"
            else:
                self.failure = f"the response from {self.name} is incomplete: {reason}"
        elif kind == "response.failed":
            error = response.get("error")
            self.failure = self._error_text(error if isinstance(error, dict) else {}, "failed")

    def _error(self, data: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        # Ends the stream; what is open is closed (Parser.end) before the error reply.
        self.finished = True
        error = data.get("error")
        self.failure = self._error_text(error if isinstance(error, dict) else data, "error")

    def _error_text(self, error: dict[str, Any], what: str) -> str:
        kind = error.get("type")
        code = error.get("code") or (kind if kind != "error" else None)
        message = error.get("message")
        detail = ": ".join(str(part) for part in (code, message) if part)
        if what == "failed":
            return f"the response from {self.name} failed: {detail or 'no reason given'}"
        return f"{self.name} reported an error: {detail or json.dumps(error)[:500]}"

    # -- items and blocks ---------------------------------------------------------------

    def _find(self, data: dict[str, Any], item: dict[str, Any] | None = None) -> _Item | None:
        index = data.get("output_index")
        if isinstance(index, int) and index in self.items:
            return self.items[index]
        item_id = data.get("item_id") or (item or {}).get("id")
        if isinstance(item_id, str) and item_id in self.by_item_id:
            return self.by_item_id[item_id]
        return None

    def _route(
        self, data: dict[str, Any], kind: str, out: list[AssistantMessageEvent]
    ) -> _Item | None:
        """The item an event is for; a new one if its ``output_item.added`` never came."""
        found = self._find(data)
        if found is None:
            if not isinstance(data.get("output_index"), int) and not data.get("item_id"):
                found = self.open  # a server that names no item: the open one
            if found is None:
                return self._open(
                    kind, {"item_id": data.get("item_id")}, data.get("output_index"), out
                )
        return found if found.kind == kind else None

    def _open(
        self, kind: str, item: dict[str, Any], index: Any, out: list[AssistantMessageEvent]
    ) -> _Item:
        self._close(out)
        builder = self.builder
        found = _Item(kind, item, builder.content_index)
        self.order.append(found)
        if isinstance(index, int):
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
            raise ProviderFailure(f"the stream from {self.name} ended without response.completed")
        if self.failure is not None:
            raise ProviderFailure(self.failure)
        message = self.builder.finish(self.stop)
        stale = [item for item in self.order if item.stale and item.position < len(message.content)]
        if stale:
            content = list(message.content)
            for item in stale:
                content[item.position] = item.block()
            message = attrs.evolve(message, content=content)
        return message


def _usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("input_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    input_tokens = max(0, _int(raw.get("input_tokens")) - cached)
    output = _int(raw.get("output_tokens"))
    return Usage(
        input=input_tokens,
        output=output,
        cache_read=cached,
        total_tokens=input_tokens + output + cached,
    )


_default = OpenAIResponses()


def provider() -> OpenAIResponses:
    """The default instance (registered for ``"openai-responses"``)."""
    return _default


stream = _default.stream
"""The stream function of ``"openai-responses"`` models: the default instance's."""
