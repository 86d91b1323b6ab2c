"""Events: what a run tells its listener, and what a stream tells the loop.

Two families (design.md#the-event-grammar), each a set of frozen attrs classes with a ``type`` class
attribute holding pi's string:

* **Agent events** (:data:`AgentEvent`), emitted by the loop to the ``emit``
  callable of a run, in the order of the grammar (design.md#invariant-10-well-formed-events)::

      agent_start (turn_start (message_start message_update* message_end
                   | tool_execution_start tool_execution_update* tool_execution_end)*
                   turn_end)* agent_end

* **Assistant-stream events** (:data:`AssistantMessageEvent`), emitted by a
  stream function (a provider) to the loop while a reply streams.

Partial messages are lazy. Every stream event but ``done`` / ``error`` carries
the reply as it stood at that event (``partial``). Building it for every delta
would join the whole text again each time, which makes streaming quadratic;
instead an event holds the source of its partial — the snapshot that
``AssistantMessageBuilder`` makes in O(1), or any :class:`PartialSource` —
and ``event.partial`` builds the message the first time it is read and keeps
it. Reading it costs O(length of the reply); not reading it costs nothing.
An event may also be given a finished ``AssistantMessage`` as its partial.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Literal, Protocol, TypeAlias

import attrs

from ._budget import BudgetReached
from ._frozen import fast_init
from ._messages import AgentMessage, AssistantMessage, ToolCall, ToolResult, ToolResultMessage

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "AssistantMessageEvent",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "PartialSource",
    "StreamDone",
    "StreamError",
    "StreamStart",
    "TextDelta",
    "TextEnd",
    "TextStart",
    "ThinkingDelta",
    "ThinkingEnd",
    "ThinkingStart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
]


def _messages(value: Iterable[AgentMessage]) -> tuple[AgentMessage, ...]:
    return tuple(value)


def _results(value: Iterable[ToolResultMessage]) -> tuple[ToolResultMessage, ...]:
    return tuple(value)


class PartialSource(Protocol):
    """Something that can build the partial assistant message of a stream event."""

    def materialize(self) -> AssistantMessage: ...


# --- assistant-stream events ---------------------------------------------------------


class _WithPartial:
    """Mixin: ``partial`` is built on first read from the event's source."""

    __slots__ = ()
    _partial: AssistantMessage | PartialSource

    @property
    def partial(self) -> AssistantMessage:
        """The reply as it stood at this event."""
        source = self._partial
        if isinstance(source, AssistantMessage):
            return source
        return source.materialize()


@fast_init  # B1: saves 2.8% of instructions (callgrind), with the three others
@attrs.frozen
class StreamStart(_WithPartial):
    """The reply has begun (``start``)."""

    type: ClassVar[Literal["start"]] = "start"
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class TextStart(_WithPartial):
    """A text block opened at ``content_index``."""

    type: ClassVar[Literal["text_start"]] = "text_start"
    content_index: int
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class TextDelta(_WithPartial):
    """More text for the block at ``content_index``."""

    type: ClassVar[Literal["text_delta"]] = "text_delta"
    content_index: int
    delta: str
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class TextEnd(_WithPartial):
    """The text block at ``content_index`` is complete; ``content`` is its text."""

    type: ClassVar[Literal["text_end"]] = "text_end"
    content_index: int
    content: str
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class ThinkingStart(_WithPartial):
    """A thinking block opened at ``content_index``."""

    type: ClassVar[Literal["thinking_start"]] = "thinking_start"
    content_index: int
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class ThinkingDelta(_WithPartial):
    """More reasoning text for the block at ``content_index``."""

    type: ClassVar[Literal["thinking_delta"]] = "thinking_delta"
    content_index: int
    delta: str
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class ThinkingEnd(_WithPartial):
    """The thinking block at ``content_index`` is complete; ``content`` is its text."""

    type: ClassVar[Literal["thinking_end"]] = "thinking_end"
    content_index: int
    content: str
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class ToolCallStart(_WithPartial):
    """A tool call opened at ``content_index`` (its id and name are in ``partial``)."""

    type: ClassVar[Literal["toolcall_start"]] = "toolcall_start"
    content_index: int
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class ToolCallDelta(_WithPartial):
    """More of the JSON text of the arguments of the call at ``content_index``."""

    type: ClassVar[Literal["toolcall_delta"]] = "toolcall_delta"
    content_index: int
    delta: str
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class ToolCallEnd(_WithPartial):
    """The call at ``content_index`` is complete: ``tool_call`` holds its parsed arguments."""

    type: ClassVar[Literal["toolcall_end"]] = "toolcall_end"
    content_index: int
    tool_call: ToolCall
    _partial: AssistantMessage | PartialSource = attrs.field(alias="partial")


@attrs.frozen
class StreamDone:
    """The reply ended normally; ``message`` is final (``reason`` is its stop reason)."""

    type: ClassVar[Literal["done"]] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


@attrs.frozen
class StreamError:
    """The reply ended in an error or was aborted; ``error`` is the final message."""

    type: ClassVar[Literal["error"]] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage


AssistantMessageEvent: TypeAlias = (
    StreamStart
    | TextStart
    | TextDelta
    | TextEnd
    | ThinkingStart
    | ThinkingDelta
    | ThinkingEnd
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | StreamDone
    | StreamError
)
"""What a stream function emits, in order: ``start``, block events, then ``done`` or ``error``."""

# --- agent events ----------------------------------------------------------------


@attrs.frozen
class AgentStart:
    """A run has begun."""

    type: ClassVar[Literal["agent_start"]] = "agent_start"


@attrs.frozen
class AgentEnd:
    """A run has ended; ``messages`` are the messages it added, in order.

    ``stop`` is the budget that ended the run (:class:`~trio_agent.BudgetReached`),
    or None when the run ended for any other reason: the model was done, a hook
    stopped it, an error, an abort. In JSON ``stop`` is written only when set.
    """

    type: ClassVar[Literal["agent_end"]] = "agent_end"
    messages: tuple[AgentMessage, ...] = attrs.field(converter=_messages)
    stop: BudgetReached | None = attrs.field(default=None, kw_only=True)


@fast_init  # B1: saves 2.8% of instructions (callgrind), with the three others
@attrs.frozen
class TurnStart:
    """A turn has begun: injected messages, then one assistant reply and its tool calls."""

    type: ClassVar[Literal["turn_start"]] = "turn_start"


@attrs.frozen
class TurnEnd:
    """A turn has ended: its assistant ``message`` and the ``tool_results``, in source order."""

    type: ClassVar[Literal["turn_end"]] = "turn_end"
    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...] = attrs.field(converter=_results)


@fast_init  # B1: saves 2.8% of instructions (callgrind), with the three others
@attrs.frozen
class MessageStart:
    """A message enters the transcript (an assistant reply: it begins to stream)."""

    type: ClassVar[Literal["message_start"]] = "message_start"
    message: AgentMessage


@fast_init  # B3: saves 8.0% of instructions (callgrind)
@attrs.frozen
class MessageUpdate:
    """The streaming assistant reply changed.

    ``message`` is the partial reply (built on first read, see the module
    docs) and ``assistant_message_event`` the stream event that changed it.
    """

    type: ClassVar[Literal["message_update"]] = "message_update"
    assistant_message_event: AssistantMessageEvent

    @property
    def message(self) -> AssistantMessage:
        """The partial assistant reply after this update."""
        event = self.assistant_message_event
        if isinstance(event, StreamDone):
            return event.message
        if isinstance(event, StreamError):
            return event.error
        return event.partial


@fast_init  # B1: saves 2.8% of instructions (callgrind), with the three others
@attrs.frozen
class MessageEnd:
    """A message is complete and part of the transcript."""

    type: ClassVar[Literal["message_end"]] = "message_end"
    message: AgentMessage


@attrs.frozen
class ToolExecutionStart:
    """Tool call ``tool_call_id`` is about to be prepared and run (``args``: its raw arguments)."""

    type: ClassVar[Literal["tool_execution_start"]] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any


@attrs.frozen
class ToolExecutionUpdate:
    """Tool call ``tool_call_id`` reported progress (``partial_result``)."""

    type: ClassVar[Literal["tool_execution_update"]] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: ToolResult


@attrs.frozen
class ToolExecutionEnd:
    """Tool call ``tool_call_id`` has its result.

    ``duration``: how long the tool's ``execute`` took, in seconds on the run's
    clock; ``None`` when the tool did not run (JSON: pi's ``durationMs``, left out
    when ``None``).
    """

    type: ClassVar[Literal["tool_execution_end"]] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: ToolResult
    is_error: bool
    duration: float | None = None


AgentEvent: TypeAlias = (
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
)
"""What a run emits."""
