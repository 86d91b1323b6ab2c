"""OpenTelemetry traces of runs, built from their events (``pip install 'trio_agent[otel]'``).

:class:`Tracing` is an event listener: subscribe it to an agent
(``agent.subscribe(tracing.listener)``) or wrap a run's ``emit``
(``run_agent_loop(..., emit=tracing.wrap(emit))``). The loop itself is not
instrumented: a run without a tracing listener costs nothing more.

Spans follow OpenTelemetry's GenAI semantic conventions::

    invoke_agent                     agent_start .. agent_end
    └── turn                         turn_start .. turn_end
        ├── chat {model}             an assistant message: message_start .. message_end
        ├── execute_tool {name}      tool_execution_start .. tool_execution_end
        └── ...

Every ``chat`` and ``execute_tool`` span is a child of its turn's span (the
spans of parallel tools, which run in child tasks, are siblings under it),
and every turn's a child of its run's ``invoke_agent`` span. A model call
that ended in an error, a tool call that returned an error, and the turn and
the run with either, end with status ERROR (a model call's with its reply's
``error_kind`` as ``error.type`` and ``http_status`` as
``http.response.status_code``); an aborted run's spans end with
status ERROR and the description ``"aborted"``. Message content (replies, tool
arguments and results) is recorded only with ``capture_content=True``: without it, a
tool call that failed ends with the fixed description ``"tool_error"`` (``"aborted"``
for one an abort cut short), never its error's text, which may quote the arguments.
No request options or headers (so no API key) are ever recorded.

A tool call's span is its own, whatever the ids the model's server chose: two calls
with one id (parallel ones included) get two spans, each ended once with its own
outcome. When two such calls are open at once, which of them a ``tool_execution_end``
is for is told by the result messages that follow (in source order, holding the
results the ends carried); their spans end then, timed at their ends.

Only ``opentelemetry-api`` is needed; nothing is recorded unless a tracer
provider of an SDK is given or set as the global one.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

from . import __version__
from ._events import AgentEvent, ToolExecutionEnd
from ._execution import ABORTED
from ._json import dumps
from ._messages import AssistantMessage, ToolResultMessage

__all__ = ["Tracing"]

_ABORTED = "aborted"
_TOOL_ERROR = "tool_error"


def _json(value: Any) -> str:
    """``value`` as JSON for a content attribute; a note when it cannot be written (a
    listener that raised would end the run)."""
    try:
        return dumps(value)
    except (ValueError, TypeError) as exc:
        return f"[not recorded: {exc}]"


class Tracing:
    """Spans for the runs whose events it is given (see the module docs).

    ``tracer_provider`` defaults to the global one. With ``capture_content``,
    a ``chat`` span records the reply as ``gen_ai.output.messages`` and an
    ``execute_tool`` span the call's arguments and result
    (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), as JSON, and a
    failed call's error text as its status description; without it, no span
    holds any of these.

    One instance follows one run at a time (an agent runs one at a time).
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, capture_content: bool = False
    ) -> None:
        self.capture_content = capture_content
        self._tracer: Tracer = trace.get_tracer(
            "trio_agent", __version__, tracer_provider=tracer_provider
        )
        self._run: Span | None = None
        self._turn: Span | None = None
        self._chat: Span | None = None
        self._first_token = False
        self._tools: dict[str, list[Span]] = {}  # the open spans of each call id, in order
        # Ends of calls whose id more than one open span has: (when, the event), in order.
        self._unmatched: dict[str, list[tuple[int, ToolExecutionEnd]]] = {}
        self._failure: str | None = None

    async def listener(self, event: AgentEvent) -> None:
        """Take ``event`` in: start or end the spans it opens or closes."""
        self.record(event)

    def wrap(
        self, emit: Callable[[AgentEvent], Awaitable[None]] | None = None
    ) -> Callable[[AgentEvent], Awaitable[None]]:
        """An ``emit`` for ``run_agent_loop`` that records each event, then calls ``emit``."""

        async def traced(event: AgentEvent) -> None:
            self.record(event)
            if emit is not None:
                await emit(event)

        return traced

    def record(self, event: AgentEvent) -> None:
        """The synchronous form of :meth:`listener`."""
        kind = event.type
        if kind == "message_update":
            if self._chat is not None and not self._first_token:
                self._first_token = True
                self._chat.add_event("gen_ai.first_token")
        elif kind == "agent_start":
            self._end_all(_ABORTED)  # a run that never ended
            self._end_turn(None)
            if self._run is not None:
                self._run.set_status(Status(StatusCode.ERROR, _ABORTED))
                self._run.end()
            self._failure = None
            self._run = self._tracer.start_span(
                "invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}
            )
        elif kind == "turn_start":
            self._end_all(_ABORTED)  # a turn that never ended
            self._turn = self._tracer.start_span(
                "turn", self._context(), attributes={"trio_agent.turn": True}
            )
        elif kind == "turn_end":
            self._end_all(_ABORTED)
            message = event.message  # type: ignore[union-attr]  # a TurnEnd
            self._end_turn(message if isinstance(message, AssistantMessage) else None)
        elif kind == "message_start":
            message = event.message  # type: ignore[union-attr]
            if isinstance(message, AssistantMessage):
                self._start_chat(message)
        elif kind == "message_end":
            message = event.message  # type: ignore[union-attr]
            if isinstance(message, AssistantMessage):
                self._end_chat(message)
            elif self._unmatched and isinstance(message, ToolResultMessage):
                self._match(message)
        elif kind == "tool_execution_start":
            self._start_tool(event)
        elif kind == "tool_execution_end":
            self._end_tool(event)  # type: ignore[arg-type]  # a ToolExecutionEnd, by its type
        elif kind == "agent_end":
            self._end_all(_ABORTED)
            self._end_turn(None)  # a turn still open: the run was cut short
            run, self._run = self._run, None
            if run is not None:
                if self._failure is not None:
                    run.set_status(Status(StatusCode.ERROR, self._failure))
                run.end()

    def _context(self) -> Any:
        """The parent of a span started now: the open turn's, else the run's."""
        parent = self._turn if self._turn is not None else self._run
        return trace.set_span_in_context(parent) if parent is not None else None

    def _end_turn(self, message: AssistantMessage | None) -> None:
        turn, self._turn = self._turn, None
        if turn is None:
            return
        if message is None or message.stop_reason == "aborted":
            turn.set_status(Status(StatusCode.ERROR, _ABORTED))
        elif message.stop_reason == "error":
            turn.set_status(Status(StatusCode.ERROR, message.error_message or "error"))
        turn.end()

    def _start_chat(self, message: AssistantMessage) -> None:
        self._end_chat(None)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": message.model,
            "gen_ai.provider.name": message.provider,
            "gen_ai.system": message.provider,
        }
        if self._run is not None:
            self._run.set_attributes(
                {
                    "gen_ai.request.model": message.model,
                    "gen_ai.provider.name": message.provider,
                    "gen_ai.system": message.provider,
                }
            )
        name = f"chat {message.model}" if message.model else "chat"
        self._chat = self._tracer.start_span(name, self._context(), attributes=attributes)
        self._first_token = False

    def _end_chat(self, message: AssistantMessage | None) -> None:
        chat, self._chat = self._chat, None
        if chat is None:
            return
        if message is None:
            chat.set_status(Status(StatusCode.ERROR, _ABORTED))
            chat.end()
            return
        chat.set_attributes(
            {
                "gen_ai.usage.input_tokens": message.usage.input,
                "gen_ai.usage.output_tokens": message.usage.output,
                "gen_ai.response.finish_reasons": (message.stop_reason,),
            }
        )
        if message.response_id:
            chat.set_attribute("gen_ai.response.id", message.response_id)
        if self.capture_content:
            chat.set_attribute("gen_ai.output.messages", _json([message]))
        if message.stop_reason in ("aborted", "error"):
            reason = (
                _ABORTED if message.stop_reason == "aborted" else (message.error_message or "error")
            )
            chat.set_status(Status(StatusCode.ERROR, reason))
            if message.error_kind is not None:  # what kind of failure: rate_limit, ...
                chat.set_attribute("error.type", message.error_kind)
            if message.http_status is not None:
                chat.set_attribute("http.response.status_code", message.http_status)
            if self._failure is None or reason == _ABORTED:
                self._failure = reason
        chat.end()

    def _start_tool(self, event: Any) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.tool_name,
            "gen_ai.tool.call.id": event.tool_call_id,
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(event.args)
        span = self._tracer.start_span(
            f"execute_tool {event.tool_name}", self._context(), attributes=attributes
        )
        self._tools.setdefault(event.tool_call_id, []).append(span)

    def _end_tool(self, event: ToolExecutionEnd) -> None:
        call_id = event.tool_call_id
        spans = self._tools.get(call_id)
        if not spans:
            return
        if len(spans) == 1 and call_id not in self._unmatched:
            del self._tools[call_id]
            self._finish(spans[0], event)
        else:  # which of the calls with this id ended is told by its result message
            self._unmatched.setdefault(call_id, []).append((time.time_ns(), event))

    def _match(self, message: ToolResultMessage) -> None:
        """End the span of the call ``message`` is the result of, if its end is waiting.

        Result messages come in source order, the order the calls' spans started in:
        the first span still open with the message's id is its call's.
        """
        call_id = message.tool_call_id
        waiting = self._unmatched.get(call_id)
        if not waiting:
            return
        found = [i for i, (_, end) in enumerate(waiting) if end.result.content is message.content]
        if not found:  # this call's end was not waiting: its span has ended already
            return
        when, event = waiting.pop(found[0])  # the end that carried this very result
        if not waiting:
            del self._unmatched[call_id]
        spans = self._tools[call_id]
        span = spans.pop(0)
        if not spans:
            del self._tools[call_id]
        self._finish(span, event, when)

    def _finish(self, span: Span, event: ToolExecutionEnd, when: int | None = None) -> None:
        """End a tool call's span with the outcome ``event`` tells, at ``when`` (now if
        ``None``)."""
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", _json(event.result))
        if event.is_error:
            text = "".join(getattr(block, "text", "") for block in event.result.content)
            if self.capture_content:
                description = text or "error"
            else:  # the text may quote the arguments, or be the result the tool gave
                description = _ABORTED if text == ABORTED else _TOOL_ERROR
            span.set_status(Status(StatusCode.ERROR, description))
            span.set_attribute("error.type", _TOOL_ERROR)
        span.end(when)

    def _end_all(self, reason: str) -> None:
        """End the chat and tool spans still open (a run cut short): status ERROR,
        ``reason``; a tool call whose end came has the outcome it ended with."""
        self._end_chat(None)
        for call_id, waiting in self._unmatched.items():
            spans = self._tools[call_id]
            for when, event in waiting:  # in order: the best guess left
                self._finish(spans.pop(0), event, when)
        self._unmatched.clear()
        for spans in self._tools.values():
            for span in spans:
                span.set_status(Status(StatusCode.ERROR, reason))
                span.end()
        self._tools.clear()
