"""Tool execution: one batch of tool calls from one assistant message (design.md#tool-execution).

A batch runs in one of three ways (:func:`batch_mode` chooses which):

* **truncated** — the message stopped for ``length``: no call runs, each gets
  the truncation error (start, end, result message, one call after another);
* **sequential** — the config or a tool asks for it: each call is started,
  prepared, executed, finalized and its result message emitted before the next;
* **parallel** (the default) — every call is started and prepared in source
  order, then the prepared calls run concurrently, each ending when it
  finishes, then the result messages follow in source order.

Where the code runs. A call that runs alone (any sequential call, or the only
prepared call of a parallel batch) runs in the loop task itself: spawning a
task for it would cost more than the rest of the turn. Calls that run together
run as child tasks of the run's nursery; each records its outcome in its own
slot (:class:`CallState`) and then reports over a memory channel, and the loop
task — the only task that emits while they run — emits their updates and ends
as they arrive, then the result messages in source order. A call running in
the loop task reports progress through the run's update pump (:mod:`._pump`).
In either task, :func:`_executor` chooses what executes a call: its turn under
the run's cap, its tool's limiter, or the tool alone.

Hooks run in the loop task only: ``before_tool_call`` while the calls are
prepared, ``after_tool_call`` when the loop takes a finished call in (so
after-hooks of calls that finish together run in source order, and never at
the same time). Only the tools themselves run concurrently.

Limits. A call's tool ``time_limit`` (else the run's ``tool_time_limit``) bounds
its tool's ``execute``: past it the tool is cancelled and the call answered with
the timeout error. ``max_parallel_tools`` caps the calls of a parallel batch that
run at once (:class:`_Turns`, made only for a batch larger than the cap), and a
tool's ``limiter`` is held around its calls; a call waiting for a slot has
started and is answered on an abort like any unfinished call. With no limit set,
nothing is made and the paths are those without limits.

After an abort or a failure, :func:`closing_batch_events` gives every call
exactly one result: the one it finished with, or "Operation aborted". The run
is seen through :class:`Host`, the little of it a batch needs.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, Protocol, TypeVar

import attrs
import trio

from ._cancel import children_probe
from ._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
    _async_hook,
)
from ._events import AgentEvent, ToolExecutionEnd, ToolExecutionStart, ToolExecutionUpdate
from ._frozen import maker
from ._messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultContent,
    ToolResultMessage,
    Usage,
    now_ms,
)
from ._pump import UpdatePump
from ._tools import AgentTool, check_time_limit, tools_by_name

__all__ = [
    "ABORTED",
    "Batch",
    "CallState",
    "Host",
    "ToolCallOutcome",
    "ToolCalls",
    "closing_batch_events",
    "run_tool_call",
]

ABORTED = "Operation aborted"
_BLOCKED = "Tool execution was blocked"

BatchMode = Literal["parallel", "sequential", "truncated"]
_T = TypeVar("_T")


class ToolHooks(Protocol):
    """The hooks a call goes through (the run's config has them)."""

    @property
    def before_tool_call(
        self,
    ) -> Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]] | None: ...
    @property
    def after_tool_call(
        self,
    ) -> Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]] | None: ...


class CallHost(Protocol):
    """What preparing, asking about and finalizing one call needs: the hooks, the tools,
    the context the hooks see, and the abort check (a run, or :func:`run_tool_call`)."""

    @property
    def config(self) -> ToolHooks: ...
    @property
    def tool_map(self) -> Mapping[str, AgentTool]: ...
    def context(self) -> AgentContext: ...
    async def stop_if_cancelled(self) -> None: ...


class Host(Protocol):
    """What executing a batch needs of the run it belongs to (the loop's ``Run``): its
    options and tools, where its child tasks live, the context the hooks see, emitting
    (from the run's own task; :meth:`emit_checked` from another), announcing result
    messages (recorded in the transcript and in what the run owes), and its abort."""

    config: AgentLoopConfig
    nursery: trio.Nursery

    @property
    def tool_map(self) -> Mapping[str, AgentTool]: ...
    def context(self) -> AgentContext: ...
    def emit(self, event: AgentEvent) -> Awaitable[None]: ...
    async def emit_checked(self, event: AgentEvent) -> None: ...
    def announce_events(self, message: AgentMessage) -> Iterator[AgentEvent]: ...
    async def announce(self, messages: Iterable[AgentMessage]) -> None: ...
    async def stop_if_cancelled(self) -> None: ...


def error_result(text: str) -> ToolResult:
    """An error result as pi makes them: one text block and empty details."""
    return ToolResult(content=(TextContent(text),), details={})


def exception_text(exc: BaseException) -> str:
    """The message an exception gives a model: its text, or its type when it has none."""
    return str(exc) or type(exc).__name__


def batch_mode(
    message: AssistantMessage,
    calls: tuple[ToolCall, ...],
    tool_execution: Literal["parallel", "sequential"],
    sequential_tools: frozenset[str],
) -> BatchMode:
    """How the calls of ``message`` run: the one place that says it.

    ``"truncated"`` when the message stopped for ``length`` (no call runs);
    ``"sequential"`` when the run's ``tool_execution`` says so or a called tool's
    ``execution_mode`` is ``"sequential"`` (its name is in ``sequential_tools``);
    else ``"parallel"``. Within a batch, which task runs a call and what holds it
    back is :func:`_executor`'s and :meth:`ToolCalls.run`'s (a call that runs alone
    runs in the loop task).
    """
    if message.stop_reason == "length":
        return "truncated"
    if tool_execution == "sequential":
        return "sequential"
    if sequential_tools and not sequential_tools.isdisjoint([call.name for call in calls]):
        return "sequential"
    return "parallel"


def _truncated_text(name: str) -> str:
    return (
        f'Tool call "{name}" was not executed: the response hit the output token limit, '
        "so its arguments may be truncated. Re-issue the tool call with complete arguments."
    )


class CallState:
    """One call of a batch: how far it got, and its result once it has one."""

    finished: float  # when execute ended, on the run's clock (see timer): set by _execute

    __slots__ = (
        "accepting",
        "args",
        "duration",
        "ended",
        "finished",
        "index",
        "is_error",
        "message",
        "result",
        "started",
        "tool",
        "tool_call",
    )

    def __init__(self, index: int, tool_call: ToolCall) -> None:
        self.index = index
        self.tool_call = tool_call
        self.tool: AgentTool | None = None
        self.args: dict[str, Any] = {}
        self.result: ToolResult | None = None
        self.is_error = True
        self.started = False
        self.ended = False
        self.accepting = False
        self.duration: float | None = None
        self.message: ToolResultMessage | None = None


class Batch:
    """The tool calls of one assistant message."""

    __slots__ = ("assistant", "calls", "mode")

    def __init__(
        self, assistant: AssistantMessage, calls: tuple[ToolCall, ...], mode: BatchMode
    ) -> None:
        self.assistant = assistant
        self.mode = mode
        self.calls = [CallState(index, call) for index, call in enumerate(calls)]
        if mode == "truncated":
            for state in self.calls:
                state.result = error_result(_truncated_text(state.tool_call.name))

    @property
    def messages(self) -> tuple[ToolResultMessage, ...]:
        return tuple([state.message for state in self.calls if state.message is not None])

    @property
    def terminate(self) -> bool:
        """True when every result asks to terminate (and there is at least one)."""
        calls = self.calls
        return bool(calls) and all(
            state.result is not None and state.result.terminate is True for state in calls
        )


# --- the events of one call -----------------------------------------------------------


# Made field by field in order (see _frozen.maker): a few of each per call.
# B2: saves 7.5% of instructions (callgrind)
_execution_start: Callable[[str, str, Any], ToolExecutionStart] = maker(ToolExecutionStart)
_execution_update: Callable[[str, str, Any, ToolResult], ToolExecutionUpdate] = maker(
    ToolExecutionUpdate
)
_execution_end: Callable[[str, str, ToolResult, bool, float | None], ToolExecutionEnd] = maker(
    ToolExecutionEnd
)
_result_message_of: Callable[
    [str, str, tuple[ToolResultContent, ...], Any, bool, Usage | None, int, float | None],
    ToolResultMessage,
] = maker(ToolResultMessage)


# Each ``_*_event`` function records that the event is emitted and returns it;
# the caller emits it (or, when a run is closed without listeners, drops it).


def _start_event(state: CallState) -> ToolExecutionStart:
    call = state.tool_call
    state.started = True
    return _execution_start(call.id, call.name, call.arguments)


def _end_event(state: CallState) -> ToolExecutionEnd:
    call = state.tool_call
    result = state.result
    assert result is not None
    state.ended = True
    return _execution_end(call.id, call.name, result, state.is_error, state.duration)


def _result_message(state: CallState) -> ToolResultMessage:
    call = state.tool_call
    result = state.result
    assert result is not None
    message = _result_message_of(
        call.id,
        call.name,
        result.content,  # a tuple already, as ToolResult holds it
        result.details,
        state.is_error,
        result.usage,
        now_ms(),  # timestamp
        state.duration,
    )
    state.message = message
    return message


# --- preparing and executing ------------------------------------------------------------


def _prepare(host: CallHost, state: CallState) -> bool:
    """Find the tool, shim and validate the arguments: whether the call can run.

    On success ``state.tool`` and ``state.args`` are set; on failure the call
    gets its (error) result now. A call that has its result already (past the
    run's tool-call budget) is not prepared.
    """
    if state.result is not None:  # answered already: past the run's tool-call budget
        return False
    call = state.tool_call
    tool = host.tool_map.get(call.name)
    if tool is None:
        state.result = error_result(f"Tool {call.name} not found")
        return False
    try:
        arguments: Any = call.arguments
        if tool.prepare_arguments is not None:
            arguments = tool.prepare_arguments(arguments)
        state.args = tool.validate_arguments(arguments)
    except Exception as exc:  # a tool's failure is the call's result
        state.result = error_result(exception_text(exc))
        return False
    state.tool = tool
    return True


async def _ask_before(host: CallHost, batch: Batch, state: CallState) -> None:
    """Ask ``before_tool_call`` (the run has one) about a prepared call: a block,
    or the hook's failure, is the call's result."""
    before = host.config.before_tool_call
    assert before is not None
    try:
        verdict = await before(
            BeforeToolCallContext(
                assistant_message=batch.assistant,
                tool_call=state.tool_call,
                args=state.args,
                context=host.context(),
            )
        )
        # An abort the hook did not notice still stops the call here.
        await host.stop_if_cancelled()
        if verdict is not None and verdict.block:
            result = error_result(verdict.reason or _BLOCKED)
            if verdict.terminate is True:
                result = attrs.evolve(result, terminate=True)
            state.result = result
    except Exception as exc:  # a hook's failure is the call's result
        state.result = error_result(exception_text(exc))


def timer() -> Callable[[], float]:
    """The run's clock (its ``current_time``, in seconds: monotonic, virtual under
    ``MockClock``), for durations and the order of reports."""
    return trio.lowlevel.current_clock().current_time


def _timeout_text(name: str, limit: float) -> str:
    return f"Tool '{name}' did not finish within {limit:g} s"


async def _execute(
    state: CallState,
    on_update: Callable[[ToolResult], None],
    default_limit: float | None,
    now: Callable[[], float],
) -> None:
    """Run a prepared call's tool; record its result (or its error) in ``state``.

    The tool's ``time_limit`` (else ``default_limit``, the run's ``tool_time_limit``)
    bounds it: past it the tool is cancelled and the call's result is the timeout error.
    A result the tool returns with ``is_error`` is an error; one that fails the tool's
    ``output_schema`` is the tool's error. ``state.duration`` is how long ``execute``
    took on the run's clock (``now``, from :func:`timer`), to the millisecond, however
    it ended.

    The caller has checked that the run is not aborted. Cancellation:
    ``Cancelled`` propagates and no result is recorded (the duration is).
    """
    tool = state.tool
    assert tool is not None
    call = state.tool_call
    limit = tool.time_limit
    if limit is None:
        limit = default_limit
    started = now()
    state.accepting = True
    try:
        if limit is None:
            result = await tool.execute(call.id, state.args, on_update)
        else:
            with trio.move_on_after(limit) as scope:
                result = await tool.execute(call.id, state.args, on_update)
            if scope.cancel_called:
                # Past the deadline, whatever the tool did then (a thread it could not
                # leave may have returned): an abort's Cancelled passes through the
                # scope and never gets here. Raised to be handled as the tool's error.
                raise TimeoutError(_timeout_text(call.name, limit))
        if not isinstance(result, ToolResult):
            raise TypeError(
                f"tool {call.name!r} returned {type(result).__name__}, not a ToolResult"
            )
        if tool.output_schema is not None:
            tool.check_structured_content(result)
        is_error = result.is_error
    except Exception as exc:  # invariant 3: a tool's exception is data; Cancelled is not caught
        result = error_result(exception_text(exc))
        is_error = True
    finally:
        state.accepting = False
        # To the millisecond, as pi measures it: what JSON's durationMs holds, read back
        # equal. When it finished is kept for the report of a call that runs as a task.
        state.finished = finished = now()
        state.duration = round((finished - started) * 1000) / 1000
    state.result = result
    state.is_error = is_error


async def _execute_limited(
    state: CallState,
    on_update: Callable[[ToolResult], None],
    default_limit: float | None,
    now: Callable[[], float],
) -> None:
    """:func:`_execute` holding a slot of the tool's limiter (it has one). The call borrows
    on its own behalf (its ``CallState``), so one task may hold slots for several calls."""
    tool = state.tool
    assert tool is not None
    limiter = tool.limiter
    assert limiter is not None
    await limiter.acquire_on_behalf_of(state)
    try:
        await _execute(state, on_update, default_limit, now)
    finally:
        limiter.release_on_behalf_of(state)


_Executor = Callable[
    [CallState, Callable[[ToolResult], None], float | None, Callable[[], float]], Awaitable[None]
]


def _executor(tool: AgentTool, turns: _Turns | None = None) -> _Executor:
    """What executes a prepared call of ``tool``: the one place that chooses.

    The run's ``max_parallel_tools`` cap, when it binds on the batch (``turns``): the
    call waits for its turn (then as below); else the tool's ``limiter``, when it has
    one: :func:`_execute_limited`; else :func:`_execute`. Each is called as
    ``await executor(state, on_update, default_limit, now)``.
    """
    if turns is not None:
        return turns.run
    if tool.limiter is not None:
        return _execute_limited
    return _execute


class _Turns:
    """The run's ``max_parallel_tools`` cap on one batch: the first ``cap`` calls run at
    once; each other call waits until a call frees its slot, in source order (so which
    call runs when does not depend on the order Trio runs tasks in: a scenario on
    MockClock has one trace). Made only for a batch larger than the cap."""

    __slots__ = ("_gates", "_queue")

    def __init__(self, states: list[CallState], cap: int) -> None:
        waiting = states[cap:]
        self._gates = {state.index: trio.Event() for state in waiting}
        self._queue = [self._gates[state.index] for state in reversed(waiting)]

    async def run(
        self,
        state: CallState,
        on_update: Callable[[ToolResult], None],
        default_limit: float | None,
        now: Callable[[], float],
    ) -> None:
        gate = self._gates.get(state.index)
        if gate is not None:
            await gate.wait()  # a call cancelled here never had a slot: it frees none
        tool = state.tool
        assert tool is not None
        try:
            await _executor(tool)(state, on_update, default_limit, now)
        finally:
            if self._queue:
                self._queue.pop().set()


async def _finalize(host: CallHost, batch: Batch, state: CallState) -> None:
    """Let ``after_tool_call`` (the run has one) override an executed call's result
    (in the loop task).

    The tool's own result is already recorded, so a call whose hook is cut
    short by an abort keeps the result the tool returned.
    """
    after = host.config.after_tool_call
    assert after is not None
    call = state.tool_call
    result = state.result
    is_error = state.is_error
    assert result is not None
    try:
        override = await after(
            AfterToolCallContext(
                assistant_message=batch.assistant,
                tool_call=call,
                args=state.args,
                result=result,
                is_error=is_error,
                context=host.context(),
            )
        )
        if override is not None:
            structured = override.structured_content
            if structured is None and override.content is None:
                structured = result.structured_content  # new content alone drops it (pi's rule)
            result = ToolResult(
                content=result.content if override.content is None else tuple(override.content),
                details=result.details if override.details is None else override.details,
                usage=result.usage if override.usage is None else override.usage,
                terminate=result.terminate if override.terminate is None else override.terminate,
                structured_content=structured,
                is_error=result.is_error,
            )
            if override.is_error is not None:
                is_error = override.is_error
    except Exception as exc:
        result = error_result(exception_text(exc))
        is_error = True
    state.result = result
    state.is_error = is_error


def _update_event(state: CallState, partial: ToolResult) -> ToolExecutionUpdate:
    call = state.tool_call
    return _execution_update(call.id, call.name, call.arguments, partial)


class _Report:
    """What a call running as a child task tells the loop task: an update, or (``update``
    None) that it finished; ``time`` is when, on the run's clock (in seconds, see
    :func:`timer`)."""

    __slots__ = ("position", "state", "time", "update")

    def __init__(self, time: float, state: CallState, update: ToolExecutionUpdate | None) -> None:
        self.time = time
        self.position = state.index  # the call's place in the batch
        self.state = state
        self.update = update


_Channel = tuple[trio.MemorySendChannel[_Report], trio.MemoryReceiveChannel[_Report]]
_when_and_where = operator.attrgetter("time", "position")


async def arrivals(receive: trio.MemoryReceiveChannel[_T]) -> list[_T]:
    """Wait for the next item on ``receive``; return it with every other one already
    there (one wake-up for all that arrived together)."""
    arrived = [await receive.receive()]
    while True:
        try:
            arrived.append(receive.receive_nowait())
        except trio.WouldBlock:
            break
    return arrived


# --- batches -------------------------------------------------------------------------------


class ToolCalls:
    """Executes the batches of one run, in the run's task and nursery.

    Holds what a run's batches share, made when first needed: the channel over
    which child tasks report, and the pump for the updates of a call that runs
    in the loop task. The run calls :meth:`stop_updates` before its nursery
    closes and :meth:`close` after.
    """

    __slots__ = ("_channel", "_host", "_now", "_pump")

    def __init__(self, host: Host) -> None:
        self._host = host
        self._pump: UpdatePump | None = None
        self._channel: _Channel | None = None  # made for the first concurrent batch
        self._now = timer()  # the clock of durations and of reports

    async def run(self, batch: Batch) -> None:
        """Execute a batch; afterwards every call has its result message (``batch.messages``)."""
        host = self._host
        emit = host.emit
        calls = batch.calls
        if batch.mode == "truncated":
            for state in calls:
                await emit(_start_event(state))
                await emit(_end_event(state))
                await host.announce((_result_message(state),))
            return
        before = host.config.before_tool_call
        if batch.mode == "sequential" or len(calls) == 1:
            for state in calls:
                await emit(_start_event(state))
                if _prepare(host, state) and before is not None:
                    await _ask_before(host, batch, state)
                if state.result is None:  # prepared, and not blocked
                    await self._execute_inline(batch, state)
                await emit(_end_event(state))
                await host.announce((_result_message(state),))
            return
        ready: list[CallState] = []
        for state in calls:
            await emit(_start_event(state))
            if _prepare(host, state) and before is not None:
                await _ask_before(host, batch, state)
            if state.result is None:
                ready.append(state)
            else:
                await emit(_end_event(state))
        if len(ready) == 1:
            await self._execute_inline(batch, ready[0])
            await emit(_end_event(ready[0]))
        elif ready:
            await self._execute_concurrently(batch, ready)
        # Each result message is made just before it is announced (map is lazy):
        # after an abort, closing_batch_events makes the ones not announced.
        await host.announce(map(_result_message, calls))

    async def _execute_inline(self, batch: Batch, state: CallState) -> None:
        """Run one call in the loop task; its updates go through the run's pump
        (made on the first update of the run)."""
        host = self._host

        def on_update(partial: ToolResult) -> None:
            if state.accepting:
                self._updates().push(_update_event(state, partial))

        await host.stop_if_cancelled()  # an abort starts no further tool
        tool = state.tool
        assert tool is not None
        await _executor(tool)(state, on_update, host.config.tool_time_limit, self._now)
        pump = self._pump
        if pump is not None and pump.backlog:
            await pump.wait_drained()
        if host.config.after_tool_call is not None:
            await _finalize(host, batch, state)

    async def _execute_concurrently(self, batch: Batch, states: list[CallState]) -> None:
        """Run several calls as child tasks; emit their updates and ends as they arrive."""
        host = self._host
        send, receive = self._reports()
        now = self._now  # each report carries when it was made
        cancelled = children_probe(host.nursery)
        config = host.config
        default_limit = config.tool_time_limit
        max_parallel = config.max_parallel_tools
        # The run's cap, made per batch and only when it binds (nothing is made otherwise).
        turns = (
            _Turns(states, max_parallel)
            if max_parallel is not None and max_parallel < len(states)
            else None
        )

        async def child(state: CallState) -> None:
            def on_update(partial: ToolResult) -> None:
                if state.accepting:
                    send.send_nowait(_Report(now(), state, _update_event(state, partial)))

            # An abort starts no further tool; nor does a pending KeyboardInterrupt.
            if cancelled is None or cancelled():
                await trio.lowlevel.checkpoint_if_cancelled()
            tool = state.tool
            assert tool is not None
            # A call waiting for a slot has started (its start is emitted); after an
            # abort, closing_batch_events answers it like any unfinished call.
            await _executor(tool, turns)(state, on_update, default_limit, now)
            # The buffer is unbounded: reporting never blocks and never checkpoints,
            # so a call that finished (even in a shield, after an abort) has its
            # outcome in its slot whatever happens to the loop task.
            send.send_nowait(_Report(state.finished, state, None))

        for state in states:
            host.nursery.start_soon(child, state)
        await self._take_reports(batch, receive, len(states))

    async def _take_reports(
        self, batch: Batch, receive: trio.MemoryReceiveChannel[_Report], remaining: int
    ) -> None:
        """Emit the children's reports until ``remaining`` calls have finished."""
        host = self._host
        finalize = host.config.after_tool_call is not None
        while remaining:
            arrived = await arrivals(receive)
            # Reports are emitted in the order they were made (invariant 2: ends
            # in completion order), even those that piled up while a listener was
            # slow. Those made at the same time (by tasks woken together at one
            # virtual time, which Trio runs in an order it picks at random) go in
            # source order, each call's own reports keeping theirs: the trace of a
            # scenario on MockClock is the same on every run (invariant 13).
            if len(arrived) > 1:
                arrived.sort(key=_when_and_where)  # stable: a call's own reports keep their order
            for report in arrived:
                if report.update is None:
                    remaining -= 1
                    if finalize:
                        await _finalize(host, batch, report.state)
                    await host.emit(_end_event(report.state))
                else:
                    await host.emit(report.update)

    def _reports(self) -> _Channel:
        if self._channel is None:
            self._channel = trio.open_memory_channel[_Report](math.inf)
        return self._channel

    def _updates(self) -> UpdatePump:
        if self._pump is None:
            self._pump = UpdatePump(self._host.emit_checked, self._host.nursery)
        return self._pump

    def stop_updates(self) -> None:
        """Let the update pump's task end (before the run's nursery closes)."""
        if self._pump is not None:
            self._pump.close()
            self._pump = None

    def close(self) -> None:
        """Close the report channel (after the run's nursery has closed)."""
        if self._channel is not None:
            send, receive = self._channel
            send.close()
            receive.close()


def closing_batch_events(host: Host, batch: Batch) -> Iterator[AgentEvent]:
    """After an abort or a failure: give every call exactly one result, and
    yield the events not emitted yet.

    A call keeps the result it finished with; any other gets "Operation
    aborted". The missing events follow in source order, in the shape of the
    batch's mode: per call start, end and result message for a sequential (or
    truncated) batch; starts and ends, then the result messages, for a
    parallel one.
    """
    parallel = batch.mode == "parallel"
    for state in batch.calls:
        if not state.started:
            yield _start_event(state)
        if not state.ended:
            if state.result is None:
                state.result = error_result(ABORTED)
                state.is_error = True
            yield _end_event(state)
        if not parallel and state.message is None:
            yield from host.announce_events(_result_message(state))
    for state in batch.calls:
        if state.message is None:
            yield from host.announce_events(_result_message(state))


# --- one call, for a program -----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ToolCallOutcome:
    """How one tool call ended, after its hooks: what :func:`run_tool_call` returns.

    ``result`` is what the model would read (with its ``details`` and
    ``structured_content``); ``is_error`` whether it is an error (a returned
    ``is_error``, an exception, a block, an unknown tool, invalid arguments, an
    ``after_tool_call`` override); ``duration`` how long the tool's ``execute`` took,
    in seconds on Trio's clock, ``None`` when the tool did not run.
    """

    tool_call: ToolCall
    result: ToolResult
    is_error: bool
    duration: float | None = None


@attrs.frozen(kw_only=True)
class _Caller:
    """A :class:`CallHost` for :func:`run_tool_call`: the caller's tools, hooks and context."""

    before_tool_call: (
        Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]] | None
    ) = attrs.field(validator=_async_hook)
    after_tool_call: (
        Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]] | None
    ) = attrs.field(validator=_async_hook)
    tool_map: Mapping[str, AgentTool]
    agent_context: AgentContext

    @property
    def config(self) -> _Caller:
        return self

    def context(self) -> AgentContext:
        return self.agent_context

    async def stop_if_cancelled(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()


def _ignore_update(partial: ToolResult) -> None:
    pass


async def run_tool_call(
    tool_call: ToolCall,
    *,
    tools: Iterable[AgentTool],
    assistant_message: AssistantMessage,
    context: AgentContext,
    before_tool_call: (
        Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]] | None
    ) = None,
    after_tool_call: (
        Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]] | None
    ) = None,
    on_update: Callable[[ToolResult], None] | None = None,
    time_limit: float | None = None,
) -> ToolCallOutcome:
    """Run one tool call through the steps of a call the model makes, with the code the
    loop runs: find the tool in ``tools`` (the first of its name), ``prepare_arguments``,
    validate the arguments, ``before_tool_call``, ``execute``, ``after_tool_call``.

    For a tool that calls other tools: pass the run's hooks (a permission check in
    ``before_tool_call``, say) and they apply to those calls too. Emits no event and
    adds no message.

    Args:
        tool_call: the call to run.
        tools: the tools to find it among (the first of its name is used).
        assistant_message: the message the call is part of, as the hooks see it.
        context: the context the hooks see.
        before_tool_call: may block the call (its result is then the block's).
        after_tool_call: may override the result.
        on_update: gets the tool's progress reports, until ``execute`` returns.
        time_limit: seconds that bound ``execute``, as a run's ``tool_time_limit``
            does (the tool's own ``time_limit`` wins); the tool's ``limiter`` is held
            around it, so a tool must not call this way a tool that shares a limiter
            with it when it may hold the limiter's last slot: the inner call would
            wait for it for ever.

    Returns:
        A :class:`ToolCallOutcome`. A failure of the call is one, with ``is_error``:
        an unknown tool, invalid arguments, a block, a hook's or the tool's
        exception, a returned ``is_error``, a timeout.

    Raises:
        TypeError: a hook that is not async, a ``tool_call`` that is not a
            ``ToolCall`` or a tool that is not an ``AgentTool``.
        ValueError: a ``time_limit`` that is not a positive finite number.

    Cancellation is the caller's scope: checked before the hooks run, after
    ``before_tool_call`` and before ``execute``; when it cancels, ``Cancelled``
    propagates and nothing is returned.
    """
    check_time_limit(time_limit, "run_tool_call: time_limit")
    if not isinstance(tool_call, ToolCall):
        raise TypeError(f"run_tool_call: tool_call must be a ToolCall, not {tool_call!r:.80}")
    tools = tuple(tools)
    for candidate in tools:
        if not isinstance(candidate, AgentTool):
            raise TypeError(
                f"run_tool_call: tools must be AgentTool objects, not {candidate!r:.80}"
            )
    tool_map = tools_by_name(tools)
    caller = _Caller(
        before_tool_call=before_tool_call,
        after_tool_call=after_tool_call,
        tool_map=tool_map,
        agent_context=context,
    )
    await trio.lowlevel.checkpoint_if_cancelled()  # an aborted caller runs no hook
    batch = Batch(assistant_message, (tool_call,), "sequential")
    state = batch.calls[0]
    if _prepare(caller, state) and before_tool_call is not None:
        await _ask_before(caller, batch, state)
    if state.result is None:  # prepared, and not blocked
        await trio.lowlevel.checkpoint_if_cancelled()
        report = _ignore_update if on_update is None else on_update

        def update(partial: ToolResult) -> None:
            if state.accepting:
                report(partial)

        tool = state.tool
        assert tool is not None
        await _executor(tool)(state, update, time_limit, timer())
        if after_tool_call is not None:
            await _finalize(caller, batch, state)
    result = state.result
    assert result is not None
    return ToolCallOutcome(
        tool_call=tool_call, result=result, is_error=state.is_error, duration=state.duration
    )
