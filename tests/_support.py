"""Shared helpers of the test suite: a recording listener and the invariant checkers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

import trio_agent
from trio_agent import (
    AgentEvent,
    AgentMessage,
    AgentTool,
    AssistantMessage,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
)

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}


class Recorder:
    """A listener that keeps every event (and can run a callback on each)."""

    def __init__(self, on_event: Callable[[AgentEvent], Awaitable[None]] | None = None) -> None:
        self.events: list[AgentEvent] = []
        self.on_event = on_event

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if self.on_event is not None:
            await self.on_event(event)

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def of(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]

    def tool_order(self, kind: str) -> list[str]:
        """The call ids of the events ``tool_execution_<kind>`` (start, end, update)."""
        return [event.tool_call_id for event in self.of("tool_execution_" + kind)]


def make_tool(
    name: str,
    behaviour: Callable[[str, dict[str, Any], ToolUpdate], Awaitable[ToolResult]],
    *,
    schema: dict[str, Any] | None = None,
    execution_mode: Any = None,
) -> AgentTool:
    return AgentTool(
        name=name,
        description=f"the {name} tool",
        parameters=schema if schema is not None else {"type": "object", "properties": {}},
        execute=behaviour,
        execution_mode=execution_mode,
    )


async def echo(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    return ToolResult.text("echo:" + str(args.get("value")))


ECHO = make_tool("echo", echo, schema=ECHO_SCHEMA)


def check_grammar(events: Sequence[AgentEvent], *, complete: bool = True) -> None:
    """Invariant 10: the events of one run follow the grammar of loop.md §2.

    ``agent_start (turn_start (message_start message_update* message_end |
    tool_execution_start tool_execution_update* tool_execution_end)* turn_end)*
    agent_end`` — tool executions of one batch may interleave (parallel mode),
    each started and ended exactly once, updates only between the two. With
    ``complete=False`` the events may stop anywhere (a run cancelled from
    outside emits no more), but what is there must be a valid beginning.
    """

    def fail(index: int, why: str) -> None:
        window = [e.type for e in events[max(0, index - 4) : index + 2]]
        raise AssertionError(f"event #{index} ({events[index].type}): {why}; around it: {window}")

    if not events:
        assert not complete, "no events"
        return
    turn_open = False
    message: Any = None
    tools_open: set[str] = set()
    tools_seen: set[str] = set()
    for index, event in enumerate(events):
        kind = event.type
        if index == 0:
            if kind != "agent_start":
                fail(index, "the first event must be agent_start")
            continue
        if kind == "agent_start":
            fail(index, "a second agent_start")
        elif kind == "agent_end":
            if index != len(events) - 1:
                fail(index, "events after agent_end")
            if turn_open:
                fail(index, "agent_end inside an open turn")
        elif kind == "turn_start":
            if turn_open:
                fail(index, "turn_start inside an open turn")
            turn_open, tools_seen = True, set()
        elif kind == "turn_end":
            if not turn_open or message is not None or tools_open:
                fail(index, "turn_end with no open turn, or with an open message or tool call")
            turn_open = False
        elif kind == "message_start":
            if not turn_open or message is not None or tools_open:
                fail(index, "message_start outside a turn, or inside a message or a tool execution")
            message = event.message  # type: ignore[union-attr]
        elif kind == "message_update":
            if not isinstance(message, AssistantMessage):
                fail(index, "message_update outside an assistant message")
        elif kind == "message_end":
            if message is None or message.role != event.message.role:  # type: ignore[union-attr]
                fail(index, "message_end without its message_start")
            message = None
        elif kind.startswith("tool_execution_"):
            call_id = event.tool_call_id  # type: ignore[union-attr]
            if not turn_open or message is not None:
                fail(index, "tool event outside a turn or inside a message")
            if kind == "tool_execution_start":
                if call_id in tools_seen:
                    fail(index, f"tool call {call_id} started twice")
                tools_seen.add(call_id)
                tools_open.add(call_id)
            elif call_id not in tools_open:
                fail(index, f"{kind} for tool call {call_id}, which is not running")
            elif kind == "tool_execution_end":
                tools_open.remove(call_id)
        else:
            fail(index, "unknown event type")
    if complete and events[-1].type != "agent_end":
        raise AssertionError(f"the last event is {events[-1].type}, not agent_end")


def check_transcript(messages: Sequence[AgentMessage]) -> None:
    """Invariants 1 and 2: every tool call of a completed assistant message has exactly one
    result, right after it, in source order."""
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage) or message.stop_reason in ("error", "aborted"):
            continue
        calls = message.tool_calls
        following = list(messages[index + 1 : index + 1 + len(calls)])
        ids = [m.tool_call_id if isinstance(m, ToolResultMessage) else m for m in following]
        expected = [call.id for call in calls]
        if ids != expected:
            raise AssertionError(
                f"message #{index} calls {expected}, but the messages after it are {ids}"
            )


def run_with_clock(fn: Callable[[], Awaitable[Any]]) -> Any:
    """``trio.run`` on virtual time that jumps when everything is blocked."""
    import trio.testing

    return trio.run(fn, clock=trio.testing.MockClock(autojump_threshold=0))


__all__ = [
    "ECHO",
    "ECHO_SCHEMA",
    "Recorder",
    "check_grammar",
    "check_transcript",
    "echo",
    "make_tool",
    "run_with_clock",
    "trio",
    "trio_agent",
]
