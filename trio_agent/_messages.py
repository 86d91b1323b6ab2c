"""Messages and content blocks: the transcript's vocabulary (design.md#messages).

Every class here is a frozen, slotted attrs class. Only the essential fields
are required, so ``UserMessage(content="hi")`` is a whole message; the
timestamp defaults to now, in milliseconds since the epoch (as pi).
Essential fields may be given by position, optional ones only by keyword.
Change a message with :func:`attrs.evolve`.

The JSON form (pi's camelCase shape) is produced by :func:`trio_agent.dumps`
and read by :func:`trio_agent.loads`; see ``_json.py``.

An application may keep messages of its own kinds in a transcript: any attrs
class with a ``role`` class attribute (see :class:`CustomMessage`). The default
``convert_to_llm`` leaves them out of what the model sees;
:func:`trio_agent.register_message_kind` makes them loadable from JSON.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, Protocol, TypeAlias, TypeVar

import attrs

_V = TypeVar("_V")

__all__ = [
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "Content",
    "Cost",
    "CustomMessage",
    "ErrorKind",
    "ImageContent",
    "LlmMessage",
    "Message",
    "ReplyThinkingLevel",
    "StopReason",
    "SystemContent",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolDeclaration",
    "ToolReference",
    "ToolResult",
    "ToolResultContent",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "now_ms",
    "system_prompt",
]

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]
"""Why an assistant message ended. ``error`` and ``aborted`` end the run."""

ErrorKind: TypeAlias = Literal[
    "rate_limit",
    "overloaded",
    "context_overflow",
    "authentication",
    "refused",
    "server",
    "network",
    "malformed",
    "aborted",
]
"""What kind of failure ended a reply (its ``error_kind``), so that a caller can act on it:

- ``rate_limit``: too many requests or tokens for now (HTTP 429); wait (``retry_after``,
  when the server said how long) and try again.
- ``overloaded``: the service is too busy (Anthropic's 529 and ``overloaded_error``);
  try again later, or another model.
- ``context_overflow``: the conversation no longer fits the model's context window (or
  the request is larger than the server takes, HTTP 413); make it shorter and go on
  (:func:`~trio_agent.is_context_overflow`).
- ``authentication``: the key is missing, refused or not allowed this (HTTP 401, 403).
- ``refused``: the server refused the request as it is (another 4xx, a content filter,
  a refusal stop): sending it again unchanged fails again.
- ``server``: the server failed (5xx), or reported an error in the stream.
- ``network``: the server could not be reached, the connection was lost, or a time
  limit passed (connect, first byte, idle), or the stream ended before its end.
- ``malformed``: the reply could not be read (not an event stream, an event that is not
  JSON or not of the API's shape, an event past the size limit).
- ``aborted``: the run was aborted while the reply streamed (``stop_reason="aborted"``).
"""


ReplyThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
"""The thinking level the loop asked a reply for (an assistant message's ``thinking_level``):
pi's levels, ``"max"`` included, which pi 1.6.0 writes for the models that have it."""


def now_ms() -> int:
    """The current time in whole milliseconds since the epoch (pi's timestamps)."""
    return time.time_ns() // 1_000_000


# --- content blocks -----------------------------------------------------------


@attrs.frozen
class TextContent:
    """A block of text, in any message."""

    type: ClassVar[Literal["text"]] = "text"
    text: str
    text_signature: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ThinkingContent:
    """The model's reasoning, in an assistant message.

    ``thinking_signature`` is the provider's opaque token for replaying the
    block; ``redacted`` marks a block whose text the provider withheld.
    """

    type: ClassVar[Literal["thinking"]] = "thinking"
    thinking: str
    thinking_signature: str | None = attrs.field(default=None, kw_only=True)
    redacted: bool = attrs.field(default=False, kw_only=True)


@attrs.frozen
class ImageContent:
    """An image, base64-encoded, in a user message or a tool result."""

    type: ClassVar[Literal["image"]] = "image"
    data: str
    mime_type: str


@attrs.frozen
class ToolCall:
    """A request from the model to run tool ``name`` with ``arguments`` (a parsed JSON object).

    ``extra`` holds what a pi 1.6.0 transcript says of a call that trio_agent does not
    read, by its JSON key (``namespace``: OpenAI Responses' namespace of a namespaced
    tool; ``argumentsError``: why the model's arguments text was not a JSON object), so
    that :func:`~trio_agent.dumps` writes it back; None for the calls trio_agent's
    providers read.
    """

    type: ClassVar[Literal["toolCall"]] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    thought_signature: str | None = attrs.field(default=None, kw_only=True)
    extra: Mapping[str, Any] | None = attrs.field(default=None, kw_only=True)


UserContent: TypeAlias = TextContent | ImageContent
"""The blocks of a user message's content."""
ToolResultContent: TypeAlias = TextContent | ImageContent
"""The blocks of a tool result's content."""
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall
"""The blocks of an assistant message's content."""
Content: TypeAlias = TextContent | ThinkingContent | ImageContent | ToolCall
"""Any content block."""


def _user_content(value: str | Iterable[UserContent]) -> str | tuple[UserContent, ...]:
    return value if isinstance(value, str) else tuple(value)


def _assistant_content(value: Iterable[AssistantContent]) -> tuple[AssistantContent, ...]:
    return tuple(value)


def _result_content(value: Iterable[ToolResultContent]) -> tuple[ToolResultContent, ...]:
    return tuple(value)


# --- usage --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Cost:
    """What a reply cost, in the currency of the model's cost table.

    ``total_from_provider`` says that ``total`` is what the provider billed (pi 1.6.0's
    ``totalFromProvider``, left out of the JSON when false).
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    total_from_provider: bool = False
    """Whether ``total`` is what the provider billed rather than the cost table's estimate (pi
    1.6.0's ``totalFromProvider``, left out of the JSON when false)."""


@attrs.frozen(kw_only=True)
class Usage:
    """Tokens a reply used: ``input`` excludes cache reads, ``output`` includes reasoning.

    ``cache_write`` counts every token written to the prompt cache;
    ``cache_write_long`` is the part of them written for an hour (Anthropic's
    ``cache_retention="long"``), billed at twice the input price instead of the
    cache-write price. In JSON it is pi's ``cacheWrite1h``, left out when 0.
    ``reasoning`` is the part of ``output`` spent reasoning, where a pi 1.6.0 transcript says
    it (left out of the JSON when None).
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_long: int = 0
    reasoning: int | None = None
    """The reasoning tokens of ``output`` (a part of it), where the provider reports them (pi
    1.6.0's ``reasoning``, left out of the JSON when None)."""
    total_tokens: int = 0
    cost: Cost = Cost()


_NO_USAGE = Usage()

# --- messages -----------------------------------------------------------------


@attrs.frozen
class ToolDeclaration:
    """A tool as a transcript declares it to the model (pi's ``Tool``): its name, its
    description and the JSON Schema of its arguments. ``constrained_sampling`` is pi's
    ``constrainedSampling`` setting (``false`` or an object), kept as read; None when absent.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = attrs.field(factory=dict)
    constrained_sampling: Any = attrs.field(default=None, kw_only=True)


@attrs.frozen
class ToolReference:
    """A tool named by a transcript's ``tools_removed`` (pi's ``ToolReference``)."""

    name: str


SystemContent: TypeAlias = TextContent
"""The blocks of a system message's content: text only."""


def _system_content(value: str | Iterable[SystemContent]) -> str | tuple[SystemContent, ...]:
    return value if isinstance(value, str) else tuple(value)


def _declarations(value: Iterable[ToolDeclaration]) -> tuple[ToolDeclaration, ...]:
    return tuple(value)


def _references(value: Iterable[ToolReference]) -> tuple[ToolReference, ...]:
    return tuple(value)


def _content_text(content: str | tuple[SystemContent, ...]) -> str:
    return content if isinstance(content, str) else "\n".join(block.text for block in content)


@attrs.frozen
class SystemMessage:
    """System instructions and tool declarations at one point of a transcript (pi 1.6.0).

    The first system message of a transcript holds the system prompt; a later one changes
    it: ``content`` adds instructions from there on, ``sections`` (named prompt sections,
    rendered in order after the content) replaces sections by name, or removes one whose
    value is None, and ``tools_added`` / ``tools_removed`` declare the tools that become
    available, or stop being, at that point.

    pi-agent-core 1.6.0 writes such messages; :func:`trio_agent.loads` reads them and
    :func:`trio_agent.dumps` writes them back. The loop folds them, for every model, into the
    request's system prompt (:func:`system_prompt`) and leaves them out of its messages, as
    pi does for a model whose catalog entry does not set ``supportsMidConvoSystemMessages``
    (pi sends them mid-conversation to the few that do). The model is offered
    the run's own tools (what pi-agent-core declares, with a system message of tool changes,
    before each request); the declarations stay in the transcript. The default
    ``convert_to_llm`` keeps system messages; one of your own may leave them out.

    ``content`` is a ``str`` or a tuple of ``TextContent``; ``tools_added`` holds
    ``ToolDeclaration``s and ``tools_removed`` ``ToolReference``s. In JSON ``sections`` is
    left out when None, and each tool list when empty, as pi leaves them out.
    """

    role: ClassVar[Literal["system"]] = "system"
    content: str | tuple[SystemContent, ...] = attrs.field(default="", converter=_system_content)
    sections: dict[str, str | None] | None = attrs.field(default=None, kw_only=True)
    tools_added: tuple[ToolDeclaration, ...] = attrs.field(
        default=(), converter=_declarations, kw_only=True
    )
    tools_removed: tuple[ToolReference, ...] = attrs.field(
        default=(), converter=_references, kw_only=True
    )
    timestamp: int = attrs.field(factory=now_ms, kw_only=True)

    @property
    def text(self) -> str:
        """The message as a prompt: its content (text blocks joined by newlines), then the
        text of each section that is not None, joined by blank lines (pi's
        ``getSystemMessageText``)."""
        parts = [_content_text(self.content)]
        parts += [text for text in _ordered(self.sections or {}).values() if text is not None]
        return "\n\n".join(part for part in parts if part)


_INDEX_LIMIT = 2**32 - 1


def _is_index(name: str) -> bool:
    """Whether JavaScript orders object key ``name`` as an array index (before the others)."""
    if not (name.isascii() and name.isdigit()) or (name[0] == "0" and name != "0"):
        return False
    return len(name) <= 10 and int(name) < _INDEX_LIMIT


def _ordered(mapping: dict[str, _V]) -> dict[str, _V]:
    """``mapping`` in the order a JavaScript object keeps its keys: array-index keys first,
    ascending, then the others in insertion order (the order pi reads sections in)."""
    if not any(_is_index(name) for name in mapping):
        return mapping
    indexes = sorted((name for name in mapping if _is_index(name)), key=int)
    ordered = {name: mapping[name] for name in indexes}
    ordered.update((name, value) for name, value in mapping.items() if not _is_index(name))
    return ordered


def system_prompt(base: str, messages: Iterable[SystemMessage]) -> str:
    """The system prompt of a request: ``base`` (the run's ``system_prompt``) and then
    ``messages`` (the transcript's system messages, in order) replayed as pi 1.6.0 replays
    them for a model that takes no system message mid-conversation (``normalizeContext``,
    then ``collapseSystemMessages``): every non-empty text joined by blank lines, then the
    current sections, each set by the last message that names it and gone once a message
    removes it (set to None), in the order a JavaScript object keeps its keys (names that
    are array indexes first, ascending)."""
    contents = [base] if base else []
    sections: dict[str, str] = {}
    for message in messages:
        text = _content_text(message.content)
        if text:
            contents.append(text)
        for name, value in _ordered(message.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    parts = ["\n\n".join(contents), *_ordered(sections).values()]
    return "\n\n".join(part for part in parts if part)


@attrs.frozen
class UserMessage:
    """A message from the user: a string, or text and image blocks.

    ``timestamp`` is milliseconds since the epoch, as in pi (as on every message).
    """

    role: ClassVar[Literal["user"]] = "user"
    content: str | tuple[UserContent, ...] = attrs.field(converter=_user_content)
    timestamp: int = attrs.field(factory=now_ms, kw_only=True)

    @classmethod
    def text(cls, text: str, images: Iterable[ImageContent] = ()) -> UserMessage:
        """A user message of one text block, followed by ``images``."""
        return cls((TextContent(text), *images))


@attrs.frozen(kw_only=True)
class AssistantMessage:
    """A reply of the model: text, thinking and tool calls, and why it stopped.

    ``stop_reason`` is ``"error"`` (``error_message`` says what happened) when
    the provider, the network or the server failed, and ``"aborted"`` when the
    run was aborted while it streamed; the content received before either is
    kept. Such a reply also says, where it is known, what kind of failure it was
    (``error_kind``, an :data:`ErrorKind`), the HTTP status of the response that
    refused it (``http_status``), and how many seconds the server asked to wait
    before the next request (``retry_after``, from the ``retry-after`` /
    ``retry-after-ms`` headers or a Google ``RetryInfo``; a finite number, as a
    server's "wait forever" is no delay: its ``error_message`` says it); each is None otherwise,
    and always on a reply that did not fail. ``provider_thinking_level`` is the
    effort the provider was asked to reply at, where it needs that to replay the
    message (Anthropic models whose effort is set mid-conversation); None
    elsewhere.

    ``thinking_level`` is the thinking level the agent loop asked the reply for (``"off"``
    when it asked for none), set by the loop on every reply it makes, a failed or aborted
    one included, as pi-agent-core 1.6.0 does (``thinkingLevel`` in JSON); it is on the
    message of ``message_end`` and in the transcript, while the partial replies of
    ``message_start`` / ``message_update`` carry None; None too on a reply made outside the
    loop and on one read from an older transcript. ``extra`` holds what a pi 1.6.0 transcript says
    of a reply that trio_agent does not read, by its JSON key (``responseModel``: the
    model the server said answered; ``rawStopReason``: the provider's own stop reason;
    ``diagnostics``: pi's records of what went wrong; ``durationMs``: milliseconds from
    ``timestamp`` to the reply's end), each checked for its JSON type when loaded, so that
    :func:`~trio_agent.dumps` writes it back as read; None on the replies trio_agent makes.
    """

    role: ClassVar[Literal["assistant"]] = "assistant"
    content: tuple[AssistantContent, ...] = attrs.field(default=(), converter=_assistant_content)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = _NO_USAGE
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    error_kind: ErrorKind | None = None
    http_status: int | None = None
    retry_after: float | None = None
    response_id: str | None = None
    provider_thinking_level: str | None = None
    thinking_level: ReplyThinkingLevel | None = None
    extra: Mapping[str, Any] | None = None
    timestamp: int = attrs.field(factory=now_ms)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of the message, in source order."""
        return tuple([block for block in self.content if type(block) is ToolCall])

    @property
    def text(self) -> str:
        """The text blocks of the message, joined."""
        return "".join(block.text for block in self.content if type(block) is TextContent)


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The result of tool call ``tool_call_id``, as the model will see it.

    ``duration`` is how long the tool's ``execute`` took, in seconds (to the millisecond, as
    pi measures it) on the run's clock (Trio's: monotonic, virtual under ``MockClock``);
    ``None`` when the tool did not run (unknown, invalid arguments, blocked, a truncated
    reply's calls) and in results written before it existed. A tool that was cancelled (an
    abort, its time limit) ran: its duration is the time until then. Its JSON is pi's
    ``durationMs`` (whole milliseconds, left out when ``None``; reading accepts any number
    of milliseconds that is not negative). The result's ``structured_content``
    is not kept here, as in pi: it is for the caller of the tool, never for the model.
    """

    role: ClassVar[Literal["toolResult"]] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: tuple[ToolResultContent, ...] = attrs.field(default=(), converter=_result_content)
    details: Any = None
    is_error: bool = False
    usage: Usage | None = None
    timestamp: int = attrs.field(factory=now_ms)
    duration: float | None = None


@attrs.frozen(kw_only=True)
class ToolResult:
    """What a tool returns (and what it reports as progress through ``on_update``).

    ``details`` is for the application (a UI, a log) and is not sent to the
    model. ``terminate=True`` asks the loop not to call the model again after
    this batch; it takes effect only when every result of the batch asks.

    ``structured_content`` is a machine-readable result (any JSON value) for a
    program that calls the tool (:func:`trio_agent.run_tool_call`, an
    ``after_tool_call`` hook); no provider sends it to the model, which reads
    ``content``, and the ``ToolResultMessage`` does not keep it (as in pi). A tool with an
    ``output_schema`` should set it on every successful result (one without it is not
    checked).

    ``is_error=True`` reports a failure without raising: the model reads ``content``
    as an error result, as for an exception, ``after_tool_call`` sees ``is_error=True`` (and
    may change it), but ``details`` and ``structured_content`` are kept (an exception's
    result has neither). JSON: ``structuredContent`` and ``isError`` are left out when
    ``None`` and ``False``.
    """

    content: tuple[ToolResultContent, ...] = attrs.field(default=(), converter=_result_content)
    details: Any = None
    terminate: bool | None = None
    usage: Usage | None = None
    structured_content: Any = None
    is_error: bool = False

    @classmethod
    def text(
        cls,
        text: str,
        *,
        details: Any = None,
        terminate: bool | None = None,
        structured_content: Any = None,
        is_error: bool = False,
    ) -> ToolResult:
        """A result of one text block."""
        return cls(
            content=(TextContent(text),),
            details=details,
            terminate=terminate,
            structured_content=structured_content,
            is_error=is_error,
        )


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
"""The messages a provider sends to the model (the loop folds system messages into the
system prompt before it calls one)."""


class CustomMessage(Protocol):
    """An application's own message kind: any object with a ``role`` string.

    Custom messages live in the transcript; ``convert_to_llm`` decides what the
    model sees of them (the default leaves them out), and
    :func:`~trio_agent.register_message_kind` makes them readable from JSON.
    """

    @property
    def role(self) -> str: ...


LlmMessage: TypeAlias = Message | SystemMessage
"""What ``convert_to_llm`` gives the model to see: pi 1.6.0's ``Message``, system messages
included."""

AgentMessage: TypeAlias = Message | SystemMessage | CustomMessage
"""Anything a transcript may hold."""
