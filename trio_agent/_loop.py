"""The agent loop: ``run_agent_loop`` and ``run_agent_loop_continue``.

The contract: design.md#the-order-of-events, design.md#abort, design.md#errors-that-end-a-run.

The file reads in the order a run happens:

1. **The entry points**, :func:`run_agent_loop` and :func:`run_agent_loop_continue`:
   they check their arguments, make a :class:`Run` and :func:`drive` it. A run is
   one task (the *loop task*) inside two scopes it owns::

       with abort:                          # the caller's trio.CancelScope, or ours
           async with trio.open_nursery():  # child tasks: parallel tools, the update pump
               ... turns ...

2. **The live path**, :meth:`Run.main` and the steps it calls, in call
   order: a turn (:meth:`Run._turn`) opens, announces the pending messages, asks the
   hooks, streams the reply (:meth:`Run._stream_reply`), executes its tool calls
   (:mod:`._execution`) and ends; then the steering and follow-up polls decide
   whether another turn follows.
3. **The record of what a run owes**: what the run has opened (its opening event
   emitted) and not closed yet — the agent, the turn, the streaming reply, a
   message (the tool calls' own record is in :mod:`._execution`). The live path
   opens and closes each as it goes. An abort cancels both scopes' contents at
   their next checkpoint; when the ``Cancelled`` has unwound to ``abort`` (which
   catches it), the run is *outside* the cancelled scope again and
   :meth:`Run.finish` closes what the record holds, innermost first — the aborted
   reply, a result for every tool call, ``turn_end``, ``agent_end`` — so listeners
   can await normally while they handle those events.
4. **Helpers**: the default ``convert_to_llm`` and what the request is made of.

Anything else that escapes — a listener's or a hook's exception, a
cancellation from outside, ``KeyboardInterrupt`` — propagates at once, as the
single original exception (:func:`~trio_agent._errors.one_exception`,
design.md#invariant-8-one-exception-not-a-group). Where the loop differs from
pi-agent-core, and why: design.md#where-trio_agent-differs-from-pi-agent-core.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TypeVar, cast

import attrs
import trio

from ._budget import BudgetReached, Meter, tool_budget_text
from ._cancel import CancelProbe, cancel_probe, catches
from ._config import (
    AgentContext,
    AgentLoopConfig,
    NextTurn,
    RequestContext,
    RequestUpdate,
    TurnContext,
    TurnDecision,
    check_messages,
    check_run_arguments,
    stream_options,
)
from ._errors import ListenerFailed, one_exception
from ._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AssistantMessageEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    StreamDone,
    StreamError,
    TurnEnd,
    TurnStart,
)
from ._execution import (
    ABORTED,
    Batch,
    ToolCalls,
    batch_mode,
    closing_batch_events,
    error_result,
)
from ._frozen import maker
from ._messages import (
    AgentMessage,
    AssistantMessage,
    ErrorKind,
    LlmMessage,
    Message,
    StopReason,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    system_prompt,
)
from ._model import Model
from ._stream import LlmContext, StreamFn, StreamOptions, with_thinking_level
from ._tools import AgentTool, tools_by_name
from ._views import Prefix
from .providers import get_stream_fn

__all__ = ["AgentEmit", "default_convert_to_llm", "run_agent_loop", "run_agent_loop_continue"]

AgentEmit = Callable[[AgentEvent], Awaitable[None]]
"""The listener of a run: ``await emit(event)`` for every event, in order."""

# Made field by field in order (see _frozen.maker), once per turn.
# B1: saves 1.3% of instructions (callgrind)
_turn_end: Callable[[AssistantMessage, tuple[ToolResultMessage, ...]], TurnEnd] = maker(TurnEnd)
_llm_context: Callable[[str, Sequence[Message], Sequence[AgentTool]], LlmContext] = maker(
    LlmContext
)
# The most common first: isinstance() stops at the first match.
_LLM_TYPES = (ToolResultMessage, AssistantMessage, UserMessage, SystemMessage)
_BLOCK_EVENTS = frozenset(
    {
        "text_start",
        "text_delta",
        "text_end",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    }
)


_NO_NAMES: frozenset[str] = frozenset()
_Event = TypeVar("_Event", bound=AgentEvent)


async def run_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AgentEmit,
    abort: trio.CancelScope | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Run the agent on ``prompts`` appended to ``context``; return the run's new messages.

    Emits ``agent_start``, ``turn_start``, ``message_start`` / ``message_end``
    for each prompt, then runs turns — stream a reply, execute its tool calls,
    feed the results back — until the model stops, a hook stops the run, or
    ``abort`` is cancelled. ``context`` is not changed: the run works on a copy.

    Args:
        prompts: the messages that start the run (a sequence of messages).
        context: the system prompt, the transcript and the tools of the run.
        config: the model, the request options and the hooks.
        emit: the listener, awaited for every event, in order (a slow listener
            slows the run).
        abort: the scope that aborts the run; one scope serves one run. ``None``:
            the run makes its own.
        stream_fn: what streams each reply; ``None``:
            :func:`trio_agent.providers.stream` (the stream function registered for
            the model's ``api``).

    Returns:
        The messages the run added, the prompts first.

    Raises:
        TypeError: an argument of the wrong kind, before anything is emitted.
        UnknownApiError: no ``stream_fn``, and no stream function registered for
            ``config.model.api``, before anything is emitted.
        RuntimeError: ``abort`` was already used by another run.
        Exception: what ``emit`` or a hook other than the tool hooks raised: it ends
            the run and propagates unchanged, never as an exception group.

    Cancellation: ``abort.cancel()`` (from any task, even before the run
    starts) ends the run promptly and normally — the partial reply is kept
    with ``stop_reason="aborted"``, every tool call gets a result ("Operation
    aborted" if it had none), and the events a listener expects follow
    (design.md#abort). A cancellation from outside the run, or ``KeyboardInterrupt``,
    propagates at once. Always a checkpoint, a refusal of the arguments too.
    """
    try:
        check_messages("prompts", prompts)
        check_run_arguments(context, config, emit)
        run = Run(context, config, emit, check_stream_fn(config, stream_fn))
    except Exception as exc:
        refusal = exc
    else:
        return await drive(run, tuple(prompts), abort)
    await trio.lowlevel.checkpoint()  # a refusal is a checkpoint too (invariant 12)
    raise refusal


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: AgentEmit,
    abort: trio.CancelScope | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Continue the agent from ``context`` as it is (its last message must not be the assistant's).

    Used to retry after an error or to resume a saved transcript that ends
    with a user message or tool results. Emits ``agent_start`` and
    ``turn_start``, then runs turns as :func:`run_agent_loop` does.

    Args:
        context: the system prompt, the transcript to continue and the tools.
        config: as for :func:`run_agent_loop`.
        emit: as for :func:`run_agent_loop`.
        abort: as for :func:`run_agent_loop`.
        stream_fn: as for :func:`run_agent_loop`.

    Returns:
        The messages the run added.

    Raises:
        ValueError: ``"Cannot continue: no messages in context"`` (system messages
            alone are none) or ``"Cannot continue from message role: assistant"``
            (the last message that is not a system message decides), before
            anything is emitted.
        TypeError: as for :func:`run_agent_loop`; and ``UnknownApiError``,
            ``RuntimeError`` and the exceptions of ``emit`` and the hooks.

    Cancellation as for :func:`run_agent_loop`. Always a checkpoint.
    """
    try:
        check_run_arguments(context, config, emit)
        role = continued_role(context.messages)
        if role is None:
            raise ValueError("Cannot continue: no messages in context")
        if role == "assistant":
            raise ValueError("Cannot continue from message role: assistant")
        run = Run(context, config, emit, check_stream_fn(config, stream_fn))
    except Exception as exc:
        refusal = exc
    else:
        return await drive(run, None, abort)
    await trio.lowlevel.checkpoint()  # a refusal is a checkpoint too (invariant 12)
    raise refusal


def check_stream_fn(config: AgentLoopConfig, stream_fn: StreamFn | None) -> StreamFn | None:
    """``stream_fn``, after checking that a run without one can find the model's API:
    an unknown API is an error before anything is emitted (internal: for the ``Agent``)."""
    if stream_fn is None:
        get_stream_fn(config.model.api)
    return stream_fn


async def drive(
    run: Run,
    prompts: Sequence[AgentMessage] | None,
    abort: trio.CancelScope | None,
    *,
    on_error: Callable[[Run, Exception], Awaitable[None]] | None = None,
    on_interrupt: Callable[[Run, BaseException], None] | None = None,
) -> list[AgentMessage]:
    """Run ``run`` inside ``abort`` and its nursery; close it after an abort; return its
    new messages (internal: the ``Agent`` drives its runs with it).

    What escapes the nursery is reduced to one exception and re-raised, after
    ``on_error`` (an ``Exception``: a listener's, a hook's) or
    ``on_interrupt`` (``Cancelled`` from outside, ``KeyboardInterrupt``) had
    the chance to close the run: the ``Agent`` uses them to keep its state
    whole.
    """
    if abort is None:
        abort = trio.CancelScope()
    elif getattr(abort, "_has_been_entered", False):
        await trio.lowlevel.checkpoint()
        raise RuntimeError(
            "this abort scope was already used by another run; "
            "make a new trio.CancelScope() for each run"
        )
    run.abort = abort
    error = await _run_inside(run, prompts, abort)
    if error is None and (not run.ended or run.undelivered is not None):
        try:
            await run.finish("aborted", ABORTED)
        # A listener, told of the abort, raised; or the run was cancelled from
        # outside meanwhile. Re-raised below, once the run is closed.
        except BaseException as exc:  # noqa: ASYNC103  # re-raised below, unchanged
            error = exc
    if error is not None:
        if isinstance(error, Exception):
            if on_error is not None:
                await on_error(run, error)
        elif on_interrupt is not None:
            on_interrupt(run, error)
        raise error
    # A cancellation from outside that came while the run was closing (its
    # last listener, the shielded cleanup) is not turned into a return.
    await trio.lowlevel.checkpoint_if_cancelled()
    return run.new_messages


async def _run_inside(
    run: Run, prompts: Sequence[AgentMessage] | None, abort: trio.CancelScope
) -> BaseException | None:
    """The live run, inside ``abort`` and the run's nursery: the one exception that
    escaped them (an abort, which ``abort`` catches, is none)."""
    run._cancelled = cancel_probe()
    error: BaseException | None = None
    try:
        with abort:
            # The nursery holds the run's child tasks (parallel tool calls, the
            # update pump), so that none of them can outlive the run.
            async with trio.open_nursery() as nursery:
                run.nursery = nursery
                try:
                    await run.main(prompts)
                except trio.Cancelled as cancelled:
                    if catches(abort):
                        # Ours to catch, on the far side of the nursery's closing
                        # schedule point: its traceback would keep every frame of
                        # the run alive until then, for nobody. (One that goes on
                        # out, for a cancellation from outside, keeps it.)
                        cancelled.__traceback__ = None
                    raise
                finally:
                    if run.tool_calls is not None:
                        run.tool_calls.stop_updates()
    except BaseExceptionGroup as group:
        error = one_exception(group)
    finally:
        if run.tool_calls is not None:
            run.tool_calls.close()
            run.tool_calls = None  # it refers to the run: no cycle left behind
    return error


class Run:
    """One run: its state, its steps (design.md#the-order-of-events), and what it owes.

    Internal: the ``Agent`` makes one per run and drives it with :func:`drive`;
    the tool execution sees it as its :class:`~trio_agent._execution.Host`.
    """

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: AgentEmit,
        stream_fn: StreamFn | None,
    ) -> None:
        self.config = config
        self._listener = emit
        self.abort: trio.CancelScope = trio.CancelScope()
        self.stream_fn = stream_fn
        self.model: Model = config.model
        self.reasoning = config.reasoning
        self.system_prompt = context.system_prompt
        self.tools: tuple[AgentTool, ...]
        self.tool_map: dict[str, AgentTool]
        self.sequential_tools: frozenset[str]
        self._use_tools(context.tools)
        self.messages: list[AgentMessage] = list(context.messages)
        self.new_messages: list[AgentMessage] = []
        # What the model sees, kept incrementally for the default convert_to_llm.
        self._llm_messages: list[LlmMessage] = []
        self._llm_seen = 0
        self._llm_system = False  # whether the view has a system message (to fold)
        self._options: StreamOptions | None = None
        self.nursery: trio.Nursery
        self.tool_calls: ToolCalls | None = None  # made for the first batch that runs
        self._cancelled: CancelProbe  # for the task that drives the run, set by drive()
        self.owed: list[_Owed] = []  # what the run has opened and not closed, innermost last
        self.ended = False  # agent_end was emitted
        self.undelivered: AgentEvent | None = None  # met an abort on its way: delivered first
        self.pending: list[AgentMessage] = []  # to announce before the next request
        self.more = True  # the last batch asks for another model call
        self.again = False  # finish_turn said "continue", and nothing else asks the model yet
        self._reply: _ReplyOwed  # the reply of the turn, from its request on
        self._last_turn: TurnContext | None = None  # made only when a hook will read it
        # What the run has used, kept only when it has a budget.
        self.meter = None if config.budget is None else Meter(config.budget)

    # -- the live path -------------------------------------------------------------------

    async def main(self, prompts: Sequence[AgentMessage] | None) -> None:
        if prompts:
            self.pending = list(prompts)  # from here on, closing the run announces them
        await trio.lowlevel.checkpoint()
        await self.emit(self.open(_AgentOwed(), AgentStart()))
        first = _TurnOwed()
        await self.emit(self.open(first, TurnStart()))
        turn: _TurnOwed | None = first
        await self._inject()
        config = self.config
        if config.get_steering_messages is not None:
            await self._poll_steering()
        while True:
            while turn is not None or self.more or self.pending:
                if await self._turn(turn):
                    return
                turn = None
            follow_up = config.get_follow_up_messages
            if follow_up is not None:
                await self.stop_if_cancelled()
                self.pending = list(await follow_up())
            if self.pending:
                self.again = False  # the follow-ups ask the model again
            elif self.again:  # nothing else did: one turn with the context as it is
                self.again = False
                self.more = True
            else:
                break
        await self.emit(self.end())

    async def _inject(self) -> None:
        for event in self.inject_events():
            await self.emit(event)

    async def _poll_steering(self) -> None:
        steering = self.config.get_steering_messages
        assert steering is not None
        await self.stop_if_cancelled()  # no poll after an abort
        self.pending = list(await steering())

    async def _turn(self, turn: _TurnOwed | None) -> bool:
        """One turn: its opening unless ``turn`` is the one already open (``prepare_next_turn``,
        a steering poll if nothing is pending, ``turn_start``), its messages,
        ``prepare_request``, its reply, its tools, ``finish_turn``, ``turn_end``, the hooks
        and polls after it. Whether it ended the run."""
        config = self.config
        if turn is None:
            await self.stop_if_cancelled()
            polled = bool(self.pending)  # the poll after the last turn brought steering
            if config.prepare_next_turn is not None and self._last_turn is not None:
                await self._prepare_next_turn(self._last_turn)
            if not polled and config.get_steering_messages is not None:
                self.pending += await config.get_steering_messages()
            turn = _TurnOwed()
            await self.emit(self.open(turn, TurnStart()))
        if self.pending:
            await self._inject()
        if config.prepare_request is not None:
            await self._prepare_request()
        message = await self._stream_reply()
        if turn.batch is not None:  # none for an error or aborted reply
            if self.meter is not None:
                self._admit(turn.batch)
            if self.tool_calls is None:
                self.tool_calls = ToolCalls(self)
            await self.tool_calls.run(turn.batch)
        decision: TurnDecision | None = None
        last_turn: TurnContext | None = None
        if config.finish_turn is not None:
            batch = turn.batch
            results = () if batch is None else batch.messages
            last_turn = self._turn_context(message, results)
            decision = await self._finish_turn(last_turn)
        results = self.batch_done(turn)
        await self.emit(self.close(_turn_end(message, results)))
        if message.stop_reason == "error" or message.stop_reason == "aborted":
            await self.emit(self.end())
            return True
        if self.meter is not None:  # the run has a budget: may it ask the model again?
            reached = self.meter.turn_done(message, results, self.model)
            if reached is not None:
                await self.emit(self.end(reached))
                return True
        if decision is not None:
            if decision == "end":
                await self.emit(self.end())
                return True
            self.again = True  # "continue"
        stop = config.should_stop_after_turn
        if stop is not None or config.prepare_next_turn is not None:
            if last_turn is None:
                last_turn = self._turn_context(message, results)
            if stop is not None and await stop(last_turn):
                await self.emit(self.end())
                return True
        if config.get_steering_messages is not None:
            await self._poll_steering()
        if self.again and (self.more or self.pending):
            self.again = False  # the tool results or the steering ask the model again
        return False

    async def _prepare_next_turn(self, turn: TurnContext) -> None:
        """Take what ``prepare_next_turn`` returns: its changes, and its messages, to be
        announced first."""
        prepare = self.config.prepare_next_turn
        assert prepare is not None
        next_turn = await prepare(turn)
        if next_turn is not None:
            if not isinstance(next_turn, NextTurn):
                raise TypeError(
                    f"prepare_next_turn returned {next_turn!r:.80}, not a NextTurn or None"
                )
            self._apply(next_turn)
            if next_turn.messages:
                self.pending[:0] = next_turn.messages
        await self.stop_if_cancelled()

    def _apply(self, next_turn: NextTurn | RequestUpdate) -> None:
        """Take what ``prepare_next_turn`` or ``prepare_request`` changed, for the rest of
        the run."""
        if next_turn.context is not None:
            context = next_turn.context
            self.system_prompt = context.system_prompt
            self.messages = list(context.messages)
            self._use_tools(context.tools)
            self._llm_messages = []
            self._llm_seen = 0
            self._llm_system = False
        if next_turn.model is not None:
            self.model = next_turn.model
        if next_turn.thinking_level is not None:
            level = next_turn.thinking_level
            self.reasoning = None if level == "off" else level
            self._options = None

    def _use_tools(self, tools: Sequence[AgentTool]) -> None:
        self.tools = tuple(tools)
        self.tool_map = tool_map = tools_by_name(self.tools)
        # The names whose tool runs its whole batch sequentially (in most runs, none:
        # then a shared empty set, not one more object per run).
        sequential = [
            name for name, tool in tool_map.items() if tool.execution_mode == "sequential"
        ]
        self.sequential_tools = frozenset(sequential) if sequential else _NO_NAMES

    async def _prepare_request(self) -> None:
        """Ask ``prepare_request`` about the request about to be sent; take its changes."""
        prepare = self.config.prepare_request
        assert prepare is not None
        await self.stop_if_cancelled()  # no hook is called after an abort
        level = self.reasoning
        request = RequestContext(
            context=self.context(), model=self.model, thinking_level=level or "off"
        )
        update = await prepare(request)
        if update is not None:
            if not isinstance(update, RequestUpdate):
                raise TypeError(
                    f"prepare_request returned {update!r:.80}, not a RequestUpdate or None"
                )
            self._apply(update)

    # -- streaming the reply ---------------------------------------------------------------------

    async def _stream_reply(self) -> AssistantMessage:
        reply = self.open_reply()
        config = self.config
        llm_messages = await self._llm_view()
        api_key = None
        if config.get_api_key is not None:
            api_key = await config.get_api_key(self.model.provider)
        options = self._stream_options(api_key or config.api_key)
        await self.stop_if_cancelled()  # an abort sends no further request (nor an interrupt)
        if self._llm_system:
            context = _folded_context(self.system_prompt, llm_messages, self.tools)
        else:  # no system message in the view: the messages a provider sends
            context = _llm_context(
                self.system_prompt, cast("Sequence[Message]", llm_messages), self.tools
            )
        stream_fn = self.stream_fn or get_stream_fn(self.model.api)
        try:
            returned = await stream_fn(self.model, context, options, self._on_stream_event)
        except ListenerFailed as failed:
            raise failed.original from None
        final = reply.final
        if final is None:
            if not isinstance(returned, AssistantMessage):
                raise TypeError(
                    f"stream function {stream_fn!r} returned {returned!r}, "
                    "not an AssistantMessage, and emitted no done or error event"
                )
            final = returned
        for event in self.settle_events(final, reply.started):
            await self.emit(event)
        settled = self.messages[-1]  # final, with its thinking level
        assert isinstance(settled, AssistantMessage)
        return settled

    def open_reply(self) -> _ReplyOwed:
        """Record that the turn's reply is on its way (it owes its message)."""
        reply = self._reply = _ReplyOwed()
        self.owed.append(reply)
        return reply

    async def _llm_view(self) -> Sequence[LlmMessage]:
        config = self.config
        convert = config.convert_to_llm
        if config.transform_context is not None:
            messages = await config.transform_context(Prefix(self.messages))
        elif convert is None or convert is default_convert_to_llm:
            # The default filter, kept incrementally: O(new messages) per turn.
            seen = self.messages
            kept = self._llm_messages
            new = seen[self._llm_seen :]
            kept += [message for message in new if isinstance(message, _LLM_TYPES)]
            self._llm_seen = len(seen)
            if not self._llm_system:
                self._llm_system = SystemMessage in map(type, new)
            return Prefix(kept)
        else:
            messages = Prefix(self.messages)
        if convert is None:
            convert = default_convert_to_llm
        view = await convert(messages)
        self._llm_system = any(isinstance(message, SystemMessage) for message in view)
        return view

    def _stream_options(self, api_key: str | None) -> StreamOptions:
        """The request's options: made on the run's first request, and again only when the
        key or the thinking level has changed."""
        options = self._options
        if options is None or options.api_key != api_key:
            options = self._options = stream_options(self.config, api_key, self.reasoning)
        return options

    async def _on_stream_event(self, event: AssistantMessageEvent) -> None:
        """The ``emit`` a stream function gets: turns stream events into agent events.

        A listener's exception leaves wrapped in :class:`ListenerFailed`, which the
        stream function cannot mistake for its own failure.
        """
        reply = self._reply
        if event.type in _BLOCK_EVENTS:
            if not reply.started or reply.final is not None:
                return
            reply.partial = event
            agent_event: AgentEvent = MessageUpdate(event)
        elif event.type == "start":
            if reply.started or reply.final is not None:
                return
            reply.started = True
            reply.partial = event
            agent_event = MessageStart(event.partial)
        else:
            if reply.final is None:
                if isinstance(event, StreamDone):
                    reply.final = event.message
                elif isinstance(event, StreamError):
                    reply.final = event.error
            return
        try:
            await self.emit(agent_event)
        except Exception as exc:
            raise ListenerFailed(exc) from None

    def settle_events(self, final: AssistantMessage, started: bool) -> Iterator[AgentEvent]:
        """Make ``final`` the turn's reply, closing the streaming reply: append it, prepare
        its tool batch, end its message (starting it first if the stream did not). The
        reply records the thinking level the options asked for, on every path."""
        level = self.reasoning or "off"
        if final.thinking_level != level:  # a stream function that does not record it
            final = with_thinking_level(final, level)
        self.owed.pop()  # the reply that streamed
        turn = self.owed[-1]
        assert isinstance(turn, _TurnOwed)
        self.messages.append(final)
        self.new_messages.append(final)
        turn.reply = final
        if final.stop_reason != "error" and final.stop_reason != "aborted":
            calls = final.tool_calls
            if calls:
                mode = batch_mode(final, calls, self.config.tool_execution, self.sequential_tools)
                turn.batch = Batch(final, calls, mode)
        if not started:
            yield self.open(_MessageOwed(final), MessageStart(final))
            self.owed.pop()
        yield MessageEnd(final)

    # -- after the reply: the budget, the hooks, the results ---------------------------------

    def _admit(self, batch: Batch) -> None:
        """Answer the calls of ``batch`` past the run's tool-call budget with an error (they
        do not run); count the calls of a batch that runs (a truncated one runs none)."""
        if batch.mode == "truncated":
            return
        meter = self.meter
        assert meter is not None
        calls = batch.calls
        allowed = meter.admit(len(calls))
        limit = meter.budget.tool_calls
        if limit is not None and allowed < len(calls):
            text = tool_budget_text(limit)
            for state in calls[allowed:]:
                state.result = error_result(text)

    def _turn_context(
        self, message: AssistantMessage, results: tuple[ToolResultMessage, ...]
    ) -> TurnContext:
        """The finished turn of ``message``, as hooks see it (kept for ``prepare_next_turn``)."""
        self._last_turn = last_turn = TurnContext(
            message=message,
            tool_results=results,
            context=self.context(),
            new_messages=Prefix(self.new_messages),
        )
        return last_turn

    async def _finish_turn(self, turn: TurnContext) -> TurnDecision | None:
        finish = self.config.finish_turn
        assert finish is not None
        await self.stop_if_cancelled()  # no hook is called after an abort
        decision = await finish(turn)
        if decision is not None and decision != "continue" and decision != "end":
            raise ValueError(
                f"finish_turn returned {decision!r:.80}; it must return 'continue', 'end' or None"
            )
        return decision

    def batch_done(self, turn: _TurnOwed) -> tuple[ToolResultMessage, ...]:
        """The turn's tool results, all answered; records whether the model is asked again."""
        batch = turn.batch
        if batch is None:
            self.more = False
            return ()
        turn.batch = None
        self.more = not batch.terminate
        return batch.messages

    # -- the steps, each written once: the live path emits what they yield -----------------

    def announce_events(self, message: AgentMessage) -> Iterator[AgentEvent]:
        """Append ``message``: its ``message_start`` and ``message_end``."""
        self.messages.append(message)
        self.new_messages.append(message)
        yield self.open(_MessageOwed(message), MessageStart(message))
        yield self.close(MessageEnd(message))

    async def announce(self, messages: Iterable[AgentMessage]) -> None:
        """Announce each of ``messages``, read one at a time, each just before it is
        announced (a lazy iterable makes each message only when its turn comes)."""
        for message in messages:
            for event in self.announce_events(message):
                await self.emit(event)

    def inject_events(self) -> Iterator[AgentEvent]:
        """Announce the pending (prompt, steering, follow-up) messages, in order."""
        pending = self.pending
        while pending:
            yield from self.announce_events(pending.pop(0))

    def context(self) -> AgentContext:
        """The run's context as hooks see it: read-only views, O(1) to make."""
        return AgentContext(self.system_prompt, Prefix(self.messages), self.tools)

    # -- emitting ---------------------------------------------------------------------------

    # B3: saves 4.8% of instructions (callgrind)
    def emit(self, event: AgentEvent) -> Awaitable[None]:
        """Deliver ``event`` to the listener, from the loop task — unless the run was aborted.

        Await what it returns: the listener's own awaitable while the run goes on
        (this runs for every event: no frame of ours in between), else
        :meth:`emit_checked`'s.
        """
        if self._cancelled():
            return self.emit_checked(event)
        return self._listener(event)

    async def emit_checked(self, event: AgentEvent) -> None:
        """Deliver ``event``, from any task of the run, unless that task is cancelled.

        Events after an abort are emitted outside the cancelled scope (design.md#abort):
        an event that meets the abort (or a pending ``KeyboardInterrupt``) raises it and
        is kept as ``undelivered``; closing the run delivers it before anything else.
        """
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except (trio.Cancelled, KeyboardInterrupt):
            self.undelivered = event
            raise
        await self._listener(event)

    async def stop_if_cancelled(self) -> None:
        """Raise ``Cancelled`` if the run's task is cancelled (``checkpoint_if_cancelled()``)."""
        if self._cancelled():
            await trio.lowlevel.checkpoint_if_cancelled()

    # -- the record: opening and closing --------------------------------------------------

    def open(self, owed: _Owed, event: AgentEvent) -> AgentEvent:
        """Record ``owed`` as open; ``event`` (which opens it) is to be emitted."""
        self.owed.append(owed)
        return event

    def close(self, event: _Event) -> _Event:
        """Record the innermost open thing as closed; ``event`` (which closes it) is to be
        emitted."""
        self.owed.pop()
        return event

    def end(self, stop: BudgetReached | None = None) -> AgentEnd:
        """Close the run (its ``agent_end``, to be emitted); ``stop``: the budget that ended it."""
        self.ended = True
        return self.close(AgentEnd(tuple(self.new_messages), stop=stop))

    def closing_events(self, stop_reason: StopReason, text: str) -> Iterator[AgentEvent]:
        """Close a run that was aborted (``"aborted"``) or failed (``"error"``).

        Yields the events the grammar still owes, from the record, innermost first,
        and records the messages that go with them: the reply that was streaming
        becomes final with this stop reason and ``text`` as its error message; every
        tool call of the batch gets a result ("Operation aborted" if it had none); a
        reply of its own (no content) stands where the next model call would have
        been, if the run would have gone on — and, after a failure, always, so that
        the failure is in the transcript. Calls nothing but the model of the run: no
        hook, no tool, no model. (design.md#abort; for failures design.md#errors-that-end-a-run.)
        """
        if self.undelivered is not None:
            event, self.undelivered = self.undelivered, None
            yield event
        if self.ended:
            return
        ending = _Ending(stop_reason, text)
        if not self.owed:  # stopped before it began: it begins now
            yield self.open(_AgentOwed(), AgentStart())
            yield self.open(_TurnOwed(), TurnStart())
        while self.owed:
            yield from self.owed[-1].close(self, ending)

    async def finish(self, stop_reason: StopReason, text: str) -> None:
        """Emit the closing events (:meth:`closing_events`), outside the cancelled scope."""
        for event in self.closing_events(stop_reason, text):
            await self.emit(event)

    def closed_reply(
        self, ending: _Ending, base: AssistantMessage | None = None
    ) -> AssistantMessage:
        """The reply of an interrupted turn: ``base`` (what had streamed) or an empty one, with
        the ending's stop reason and text (and ``error_kind="aborted"`` for an abort)."""
        kind: ErrorKind | None = "aborted" if ending.stop_reason == "aborted" else None
        if base is None:
            model = self.model
            return AssistantMessage(
                api=model.api,
                provider=model.provider,
                model=model.id,
                stop_reason=ending.stop_reason,
                error_message=ending.text,
                error_kind=kind,
                thinking_level=self.reasoning or "off",
            )
        return attrs.evolve(
            base,
            stop_reason=ending.stop_reason,
            error_message=ending.text,
            error_kind=kind,
            thinking_level=self.reasoning or "off",
        )


# --- the record of what a run owes ------------------------------------------------------------
#
# A run keeps a stack of what it has opened and not closed: the agent, the turn, a
# streaming reply, a message. Opening one pushes it and gives the event that opens
# it; the live path closes each as it goes. Closing an aborted or failed run closes
# what is still open, innermost first, each with its own close(), which uses the same
# steps as the live path (Run's *_events generators); so the events a listener hears
# follow the grammar (design.md#what-a-run-owes) on every exit path:
#
#   agent_start  turn_start  [message_start  message_update*  message_end]*
#                            [tool_execution_* ... tool result messages]  turn_end  ...  agent_end


class _Ending:
    """How an interrupted run is being closed: aborted or failed, and with what text."""

    __slots__ = ("failed", "final", "recorded", "stop_reason", "text")

    def __init__(self, stop_reason: StopReason, text: str) -> None:
        self.stop_reason = stop_reason
        self.text = text
        self.failed = stop_reason == "error"
        self.recorded = False  # a reply made here carries the text into the transcript
        self.final = False  # the last turn's reply ended the run: no turn of its own follows


class _Owed:
    """Something the run has opened (its opening event emitted) and not closed yet."""

    __slots__ = ()

    def close(self, run: Run, ending: _Ending) -> Iterator[AgentEvent]:
        """Close it in an interrupted run: pop it, and yield the events it still owes."""
        raise NotImplementedError


class _AgentOwed(_Owed):
    """``agent_start`` was emitted: the run owes ``agent_end``."""

    __slots__ = ()

    def close(self, run: Run, ending: _Ending) -> Iterator[AgentEvent]:
        # A turn of its own, with a reply that says why, where the run would have gone
        # on; and after a failure the transcript must tell it.
        if not ending.final and (
            run.more or run.pending or run.again or (ending.failed and not ending.recorded)
        ):
            turn = _TurnOwed()
            yield run.open(turn, TurnStart())
            yield from turn.close(run, ending)
        yield run.end()


class _TurnOwed(_Owed):
    """``turn_start`` was emitted: the turn owes its reply, its tool results and ``turn_end``."""

    __slots__ = ("batch", "reply")

    def __init__(self) -> None:
        self.reply: AssistantMessage | None = None
        self.batch: Batch | None = None  # the reply's tool calls, once it has settled

    def close(self, run: Run, ending: _Ending) -> Iterator[AgentEvent]:
        if self.reply is None:  # the model was not asked yet: a reply of its own
            yield from run.inject_events()
            yield from run.open_reply().close(run, ending)
        reply = self.reply
        assert reply is not None
        if self.batch is not None:
            yield from closing_batch_events(run, self.batch)
        yield run.close(_turn_end(reply, run.batch_done(self)))
        if (reply.stop_reason == "error" or reply.stop_reason == "aborted") and (
            ending.recorded or not ending.failed  # else a reply of its own names the failure
        ):
            ending.final = True


class _ReplyOwed(_Owed):
    """A reply is streaming: it owes its ``message_end`` (and its ``message_start``, unless
    the stream's ``start`` came)."""

    __slots__ = ("final", "partial", "started")

    def __init__(self) -> None:
        self.started = False  # its message_start was emitted
        self.partial: AssistantMessageEvent | None = None  # the last event with a partial
        self.final: AssistantMessage | None = None  # from the done or error event

    def close(self, run: Run, ending: _Ending) -> Iterator[AgentEvent]:
        reply = self.final
        if reply is None:  # the reply as it stood, with the ending's reason
            event = self.partial  # only events with a partial are kept here
            base = None if event is None else event.partial  # type: ignore[union-attr]  # see above
            reply = run.closed_reply(ending, base)
            ending.recorded = True
        yield from run.settle_events(reply, self.started)


class _MessageOwed(_Owed):
    """``message_start`` was emitted for ``message``: it owes ``message_end``."""

    __slots__ = ("message",)

    def __init__(self, message: AgentMessage) -> None:
        self.message = message

    def close(self, run: Run, ending: _Ending) -> Iterator[AgentEvent]:
        yield run.close(MessageEnd(self.message))


# --- helpers ---------------------------------------------------------------------------------


async def default_convert_to_llm(messages: Sequence[AgentMessage]) -> list[LlmMessage]:
    """Keep the system, user, assistant and tool-result messages; leave out custom kinds.

    The loop does not call it when it is the configured hook (it keeps the
    same filter incrementally). A checkpoint.
    """
    await trio.lowlevel.checkpoint()
    return [message for message in messages if isinstance(message, _LLM_TYPES)]


def _folded_context(
    prompt: str, messages: Sequence[LlmMessage], tools: Sequence[AgentTool]
) -> LlmContext:
    """The request of a transcript that holds system messages, as pi 1.6.0 makes it for a
    model that takes none mid-conversation: their prompts folded into the system prompt
    (:func:`~trio_agent._messages.system_prompt`), the messages without them."""
    system = [message for message in messages if isinstance(message, SystemMessage)]
    rest: list[Message] = [m for m in messages if not isinstance(m, SystemMessage)]
    return _llm_context(system_prompt(prompt, system), rest, tools)


def continued_role(messages: Sequence[AgentMessage]) -> str | None:
    """The role a continuation of ``messages`` goes on from: that of the last message that
    is not a system message (those are folded into the system prompt, so they do not end
    the conversation a request sends); None when there is none."""
    for message in reversed(messages):
        if not isinstance(message, SystemMessage):
            return message.role
    return None
