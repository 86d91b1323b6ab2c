"""Recording a run's events, and checking what every run promises.

Each checker raises an ``AssertionError`` whose message names the offending
event or message and shows its neighbours, so that a pytest report says what
went wrong without a debugger.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import FrameType
from typing import Any

import trio

from .. import _execution
from .._agent import Agent
from .._events import AgentEvent
from .._messages import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage

__all__ = ["EventRecorder", "TaskWatcher", "check_event_grammar", "check_transcript"]


class EventRecorder:
    """A listener that keeps every event of the runs it is given to.

    Use it as ``emit`` of :func:`~trio_agent.run_agent_loop` or subscribe it
    to an :class:`~trio_agent.Agent`. ``on_event`` (optional) is awaited
    after each event is kept: a test's way to act at a given event. ``events`` is the list
    of events.
    """

    def __init__(self, on_event: Callable[[AgentEvent], Awaitable[None]] | None = None) -> None:
        self.events: list[AgentEvent] = []
        self.on_event = on_event

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        if self.on_event is not None:
            await self.on_event(event)

    @property
    def types(self) -> list[str]:
        """The events' types, in order."""
        return [event.type for event in self.events]

    def of(self, kind: str) -> list[Any]:
        """The events of one type (``"message_end"``, ...), in order."""
        return [event for event in self.events if event.type == kind]

    def tool_order(self, kind: str) -> list[str]:
        """The tool-call ids of the ``tool_execution_<kind>`` events (``"start"``,
        ``"update"``, ``"end"``), in order."""
        return [event.tool_call_id for event in self.of("tool_execution_" + kind)]

    @property
    def messages(self) -> list[AgentMessage]:
        """The messages of the ``message_end`` events, in order."""
        return [event.message for event in self.of("message_end")]

    def clear(self) -> None:
        """Forget the events recorded so far."""
        self.events.clear()


def describe_events(events: Sequence[AgentEvent], around: int | None = None, width: int = 6) -> str:
    """The event types as one line (all, or ``width`` either side of index ``around``,
    marked ``>>type<<``); tool events carry their call id."""
    if around is None:
        start, stop = 0, len(events)
    else:
        start, stop = max(0, around - width), min(len(events), around + width + 1)
    shown = []
    for index in range(start, stop):
        event = events[index]
        label: str = event.type
        call_id = getattr(event, "tool_call_id", None)
        if call_id is not None:
            label += f"({call_id})"
        shown.append(f">>{label}<<" if index == around else label)
    prefix = "... " if start > 0 else ""
    suffix = " ..." if stop < len(events) else ""
    return f"[{start}:{stop}] {prefix}{' '.join(shown)}{suffix}"


def _a(role: str) -> str:
    """``role`` with its article: "an assistant", "a user", "a toolResult"."""
    return f"an {role}" if role[:1] in ("a", "e", "i", "o") else f"a {role}"  # not "an user"


def check_event_grammar(events: Sequence[AgentEvent], *, complete: bool = True) -> None:
    """The events of one run follow the grammar (design.md#the-event-grammar).

    ``agent_start (turn_start (message_start message_update* message_end |
    tool_execution_start tool_execution_update* tool_execution_end)* turn_end)*
    agent_end``: tool executions of one batch may interleave (parallel mode),
    each started and ended exactly once, with updates only between the two;
    ``message_update`` only inside an assistant message. With
    ``complete=False`` the events may stop anywhere (a run cancelled from
    outside emits no more), but what is there must be a valid beginning. Raises
    ``AssertionError`` naming the offending event and showing its neighbours.
    """

    def fail(index: int, why: str) -> None:
        raise AssertionError(
            f"event #{index} ({events[index].type}): {why}\n  {describe_events(events, index)}"
        )

    if not events:
        if complete:
            raise AssertionError("no events: a run begins with agent_start")
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
            if not turn_open:
                fail(index, "turn_end with no open turn")
            if message is not None:
                fail(index, f"turn_end while {_a(message.role)} message is open")
            if tools_open:
                fail(index, f"turn_end while tool calls {sorted(tools_open)} are running")
            turn_open = False
        elif kind == "message_start":
            if not turn_open:
                fail(index, "message_start outside a turn")
            if message is not None:
                fail(index, f"message_start while {_a(message.role)} message is open")
            if tools_open:
                fail(index, f"message_start while tool calls {sorted(tools_open)} are running")
            message = event.message  # type: ignore[union-attr]  # a MessageStart, by its type
        elif kind == "message_update":
            if not isinstance(message, AssistantMessage):
                fail(index, "message_update outside an assistant message")
        elif kind == "message_end":
            if message is None:
                fail(index, "message_end without its message_start")
            role = event.message.role  # type: ignore[union-attr]  # a MessageEnd, by its type
            if message.role != role:
                fail(
                    index, f"message_end of {_a(role)} message while {_a(message.role)} one is open"
                )
            message = None
        elif kind.startswith("tool_execution_"):
            call_id = event.tool_call_id  # type: ignore[union-attr]  # a tool event, by its type
            if not turn_open:
                fail(index, "tool event outside a turn")
            if message is not None:
                fail(index, f"tool event while {_a(message.role)} message is open")
            if kind == "tool_execution_start":
                if call_id in tools_seen:
                    fail(index, f"tool call {call_id!r} started twice")
                tools_seen.add(call_id)
                tools_open.add(call_id)
            elif call_id not in tools_open:
                fail(index, f"{kind} for tool call {call_id!r}, which is not running")
            elif kind == "tool_execution_end":
                tools_open.remove(call_id)
        else:
            fail(index, "unknown event type")
    if complete and events[-1].type != "agent_end":
        raise AssertionError(
            f"the last event is {events[-1].type}, not agent_end\n"
            f"  {describe_events(events, len(events) - 1)}"
        )


def agent_problems(agent: Agent) -> list[str]:
    """What is wrong with ``agent`` once its runs are over: a transcript that
    :func:`check_transcript` rejects, or a state left running. Empty when all is well."""
    problems: list[str] = []
    state = agent.state
    try:
        check_transcript(state.messages)
    except AssertionError as exc:
        problems.append(f"transcript: {exc}")
    if state.is_streaming or state.pending_tool_calls:
        problems.append(
            f"left streaming={state.is_streaming}, "
            f"pending_tool_calls={sorted(state.pending_tool_calls)}"
        )
    return problems


def split_runs(events: Sequence[AgentEvent]) -> list[list[AgentEvent]]:
    """Events of several runs (one listener on an agent), cut into runs at each ``agent_start``."""
    runs: list[list[AgentEvent]] = []
    for event in events:
        if event.type == "agent_start" or not runs:
            runs.append([])
        runs[-1].append(event)
    return runs


def _label(message: AgentMessage) -> str:
    if isinstance(message, ToolResultMessage):
        return f"toolResult({message.tool_call_id})"
    if isinstance(message, AssistantMessage):
        calls = ",".join(call.id for call in message.tool_calls)
        return f"assistant[{message.stop_reason}]" + (f"({calls})" if calls else "")
    return str(getattr(message, "role", type(message).__name__))


def check_transcript(messages: Sequence[AgentMessage]) -> None:
    """Every tool call has exactly one result, right after its message, in order
    (design.md#invariant-1-one-result-per-tool-call, design.md#invariant-2-source-order).

    For every assistant message whose stop reason is not ``error`` or
    ``aborted``, the messages right after it are the results of its tool
    calls, one per call, in the calls' order. Raises ``AssertionError`` otherwise.
    """
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage) or message.stop_reason in ("error", "aborted"):
            continue
        calls = message.tool_calls
        if not calls:
            continue
        following = messages[index + 1 : index + 1 + len(calls)]
        ids = [m.tool_call_id if isinstance(m, ToolResultMessage) else None for m in following]
        expected = [call.id for call in calls]
        if ids != expected:
            window = " ".join(
                _label(m) for m in messages[max(0, index - 2) : index + len(calls) + 3]
            )
            raise AssertionError(
                f"message #{index} calls {expected}, but the messages after it answer "
                f"{[i for i in ids if i is not None]}\n  around it: {window}"
            )


class TaskWatcher(trio.abc.Instrument):
    """Watches the tasks that code started, to show that none outlives it
    (design.md#invariant-7-no-task-outlives-its-run).

    ::

        watcher = TaskWatcher()
        with watcher.watching():
            await run_agent_loop(...)
        watcher.check()  # AssertionError naming every task still alive

    A task counts when it is started while a watched task runs (whatever
    nursery it goes into), or when its nursery belongs to a counted task.
    The task that enters :meth:`watching` is watched, not counted. A Trio
    system task (``trio.lowlevel.spawn_system_task``) never counts: it is the
    Trio run's, not the code's, and lives until ``trio.run`` ends by design —
    the providers' connection pool of a Trio run is owned by one, started by
    the first request that needs it.

    It is a ``trio.abc.Instrument``. ``started`` and ``alive`` hold the counted tasks. The
    reports of :meth:`check` and :func:`assert_cancel_safe` name each task in one line: its
    name, the tool call it runs (the tool's name and call id), and where it waits: the
    innermost frame of your own code (neither Trio's nor trio_agent's) as ``file:line in
    function``, with what that line awaits.
    """

    def __init__(self) -> None:
        self._watched: set[trio.lowlevel.Task] = set()
        self.started: list[trio.lowlevel.Task] = []
        """Every task counted, in the order they started."""
        self.alive: set[trio.lowlevel.Task] = set()
        """The counted tasks that have not exited."""
        self._entered: list[trio.lowlevel.Task] = []  # inside watching(), now

    def _counts(self, task: trio.lowlevel.Task) -> bool:
        nursery = task.parent_nursery
        if nursery is not None and nursery.parent_task is trio.lowlevel.current_root_task():
            return False  # a system task: it belongs to the Trio run (see the class)
        if nursery is not None and nursery.parent_task in self._watched:
            return True
        try:
            spawner = trio.lowlevel.current_task()
        except RuntimeError:  # spawned outside any task (a system task at startup)
            return False
        return spawner in self._watched

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        if self._counts(task):
            self._watched.add(task)
            self.started.append(task)
            self.alive.add(task)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.alive.discard(task)

    def watching(self) -> _Watching:
        """A context manager: count the tasks started while the current task is in it."""
        return _Watching(self)

    def running(self) -> list[trio.lowlevel.Task]:
        """The tasks of the watched code that are still running: each task inside
        :meth:`watching` (the code's own, which may be stuck itself, in a tool
        that runs in the loop's task) and then every counted task alive, in the
        order they started."""
        tasks = [task for task in self._entered if task.coro.cr_frame is not None]
        return tasks + [
            task for task in self.started if task in self.alive and task.coro.cr_frame is not None
        ]

    def check(self) -> None:
        """Raise ``AssertionError`` if a counted task is still alive."""
        # A task that ended after the watch did has a finished coroutine.
        self.alive = {task for task in self.alive if task.coro.cr_frame is not None}
        if self.alive:
            raise AssertionError(
                f"{len(self.alive)} task(s) outlived the code that started them:\n"
                + "\n".join(f"  {describe_task(task)}" for task in self.alive)
            )


class _Watching:
    def __init__(self, watcher: TaskWatcher) -> None:
        self._watcher = watcher
        self._task: trio.lowlevel.Task | None = None

    def __enter__(self) -> TaskWatcher:
        self._task = trio.lowlevel.current_task()
        self._watcher._watched.add(self._task)
        self._watcher._entered.append(self._task)
        trio.lowlevel.add_instrument(self._watcher)
        return self._watcher

    def __exit__(self, *exc: object) -> None:
        trio.lowlevel.remove_instrument(self._watcher)
        assert self._task is not None
        self._watcher._watched.discard(self._task)
        self._watcher._entered.remove(self._task)


# The frames that say which tool call (or tool hook) a task is in: each has
# the call's CallState in its local ``state``.
_CALL_FRAMES = {
    _execution._execute.__code__: "tool",
    _execution._ask_before.__code__: "before_tool_call hook of tool",
    _execution._finalize.__code__: "after_tool_call hook of tool",
}


def _is_ours(frame: FrameType) -> bool:
    """Whether ``frame`` runs Trio's or trio_agent's own code (not the user's)."""
    module = frame.f_globals.get("__name__")
    if not isinstance(module, str):
        return False
    package = module.partition(".")[0]
    return package == "trio" or package == "trio_agent"


def _tool_call_of(task: trio.lowlevel.Task) -> str | None:
    """The tool call ``task`` works for, found in its own frames or, for a task a
    tool started, in those of the task that started it; innermost first."""
    current: trio.lowlevel.Task | None = task
    while current is not None:
        for frame, _ in reversed(list(current.iter_await_frames())):
            what = _CALL_FRAMES.get(frame.f_code)
            if what is not None:
                state = frame.f_locals.get("state")
                call = getattr(state, "tool_call", None)
                if isinstance(call, ToolCall):
                    return f"{what} {call.name!r} (call {call.id!r})"
        nursery = current.parent_nursery
        current = None if nursery is None else nursery.parent_task
    return None


def _where(frame: FrameType, lineno: int) -> str:
    code = frame.f_code
    return f"{code.co_filename}:{lineno} in {code.co_name}"


def describe_task(task: trio.lowlevel.Task) -> str:
    """A task's name, the tool call it runs (if it runs one), and where it waits.

    Where: the innermost frame of the user's own code (neither Trio's nor
    trio_agent's), as ``file:line in function``, and what that line awaits;
    for a task that runs none of the user's code, the function it runs. A
    stuck or leaked task is then named by the line to look at, not by the
    Trio scheduler frame that every waiting task ends in.
    """
    parts = [f"task {task.name!r}"]
    call = _tool_call_of(task)
    if call is not None:
        parts.append(f"in {call}")
    frames = list(task.iter_await_frames())
    if frames:
        index = next((i for i in range(len(frames) - 1, -1, -1) if not _is_ours(frames[i][0])), 0)
        where = _where(*frames[index])
        if index + 1 < len(frames):
            awaited = frames[index + 1][0]
            module = awaited.f_globals.get("__name__", "?")
            where += f" (awaiting {module}.{awaited.f_code.co_qualname})"
        parts.append(f"waiting at {where}")
    return ", ".join(parts)
