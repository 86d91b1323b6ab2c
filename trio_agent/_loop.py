"""The agent loop: ``run_agent_loop`` and ``run_agent_loop_continue`` (loop.md §4, §6, §7).

A run is one task (the *loop task*) inside two scopes it owns::

    with abort:                          # the caller's trio.CancelScope, or ours
        async with trio.open_nursery():  # child tasks: parallel tools, the update pump
            ... turns ...

The loop task alone drives the state machine of loop.md §4, and it records
how far it got in the :class:`_Run` object as it goes: whether a turn is open,
which message has started without ending, what the streaming reply looked
like at its last event, which tool calls have started, ended and been
answered. An abort cancels both scopes' contents at their next checkpoint;
when the ``Cancelled`` has unwound to ``abort`` (which catches it), the run
is *outside* the cancelled scope again and :meth:`_Run.finish` emits
what the grammar still owes from that record — the aborted reply, a result
for every tool call, ``turn_end``, ``agent_end`` — so listeners can await
normally while they handle those events.

Anything else that escapes — a listener's or a hook's exception, a
cancellation from outside, ``KeyboardInterrupt`` — propagates at once, as the
single original exception: the nursery's exception group is taken apart by
:func:`_one_exception` (invariant 8).

Where this differs from pi-agent-core 0.85, and why:

* After an abort during tools no request is sent: a synthetic aborted reply
  stands where pi's extra stream call puts its own, and every call of the
  batch gets a result (pi leaves the later calls of a sequential batch
  unanswered). The aborted texts are the loop's own, "Operation aborted".
* An abort noticed between turns adds that synthetic turn only if the run
  would have gone on (more tool calls, or messages already polled); an abort
  in the last ``turn_end`` just ends the run. Queues are not polled after an
  abort, so what they hold stays queued.
* The streaming reply is not written into the context at every delta (pi
  replaces the last context entry per event): nothing can read the context
  while the reply streams, and the copy would cost O(transcript) per delta.
  The finished reply is appended once.
* Hooks see the context as read-only views, and the model's view of the
  transcript is kept incrementally for the default ``convert_to_llm``, so a
  turn's cost does not grow with the transcript.
* Parallel calls that finish at the same (virtual) time end in source order,
  so traces on ``MockClock`` are reproducible (invariant 13); others end in
  the order they finished (invariant 2).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
import trio

from . import _resources
from ._cancel import CancelProbe, cancel_probe, catches
from ._config import AgentContext, AgentLoopConfig, NextTurn, TurnContext
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
from ._execution import ABORTED, Batch, BatchMode, UpdatePump, closing_batch_events, run_batch
from ._frozen import maker
from ._messages import (
    AgentMessage,
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._model import Model
from ._resources import RunResources
from ._stream import LlmContext, StreamFn, StreamOptions
from ._tools import AgentTool
from ._views import Prefix
from .providers import get_stream_fn

__all__ = ["AgentEmit", "default_convert_to_llm", "run_agent_loop", "run_agent_loop_continue"]

AgentEmit = Callable[[AgentEvent], Awaitable[None]]
"""The listener of a run: ``await emit(event)`` for every event, in order."""

# Made field by field in order (see _frozen.maker), once per turn.
_turn_end = maker(TurnEnd)  # its tool results are a tuple already
_llm_context = maker(LlmContext)
# The most common first: isinstance() stops at the first match.
_LLM_TYPES = (ToolResultMessage, AssistantMessage, UserMessage)
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


async def default_convert_to_llm(messages: Sequence[AgentMessage]) -> list[Message]:
    """Keep the user, assistant and tool-result messages; leave out custom kinds.

    The loop does not call it when it is the configured hook (it keeps the
    same filter incrementally). A checkpoint.
    """
    await trio.lowlevel.checkpoint()
    return [message for message in messages if isinstance(message, _LLM_TYPES)]


_NO_NAMES: frozenset[str] = frozenset()


def _tool_map(tools: tuple[AgentTool, ...]) -> dict[str, AgentTool]:
    """Tools by name; of two with one name the first wins, as in pi."""
    return {tool.name: tool for tool in reversed(tools)}


class _ListenerFailed(BaseException):
    """A listener's exception on its way out through a stream function.

    A ``BaseException``, so that a provider's ``except Exception`` (meant for
    network errors) cannot swallow it; the loop unwraps it as soon as the
    stream function has let it through.
    """

    def __init__(self, original: Exception) -> None:
        super().__init__(original)
        self.original = original


def _one_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a run lets escape from its nursery's group (invariant 8).

    Precedence: ``KeyboardInterrupt`` and other non-``Exception`` errors, then
    the first ``Exception`` (a listener's or a hook's), then ``Cancelled``
    (what a cancellation from outside the run leaves).
    """
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(reversed(exc.exceptions))
        elif isinstance(exc, _ListenerFailed):
            leaves.append(exc.original)
        else:
            leaves.append(exc)
    for leaf in leaves:
        if not isinstance(leaf, Exception | trio.Cancelled):
            return leaf
    errors = [leaf for leaf in leaves if isinstance(leaf, Exception)]
    if errors:
        for other in errors[1:]:
            errors[0].add_note(f"trio_agent: the run also raised {other!r}")
        return errors[0]
    return leaves[0]


class _Run:
    """The state of one run: what the loop task has done so far (see the module docs)."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        emit: AgentEmit,
        stream_fn: StreamFn | None,
    ) -> None:
        self.config = config
        self.listener = emit
        self.abort: trio.CancelScope = trio.CancelScope()
        self.undelivered: AgentEvent | None = None
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
        self._llm_messages: list[Message] = []
        self._llm_seen = 0
        self._options: StreamOptions | None = None
        self.nursery: trio.Nursery
        self._pump: UpdatePump | None = None
        self.cancelled: CancelProbe  # for the task that drives the run
        self._channel: tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]] | None = (
            None
        )
        # Progress, for closing_events.
        self.agent_started = False
        self.ended = False
        self.turn_open = False
        self.more = True
        self.pending: list[AgentMessage] = []
        self.open_message: AgentMessage | None = None
        self.streaming = False
        self.stream_started = False
        self.partial: AssistantMessageEvent | None = None
        self.final: AssistantMessage | None = None
        self.assistant: AssistantMessage | None = None
        self.batch: Batch | None = None

    # -- shared helpers ----------------------------------------------------------------------

    def emit(self, event: AgentEvent, cancelled: CancelProbe | None = None) -> Awaitable[None]:
        """Deliver ``event`` to the listener — unless the run was aborted meanwhile.

        Events after an abort are emitted outside the cancelled scope (loop.md
        §6): an event the loop has already recorded as emitted but that met
        an abort first is kept in ``undelivered``, and ``closing_events``
        yields it before anything else.

        Await what it returns: the listener's own awaitable when the run goes
        on (no frame of ours between the loop and the listener; this runs for
        every event), else one that raises ``Cancelled`` if the run's task is
        cancelled, or a pending ``KeyboardInterrupt`` (keeping the event as
        undelivered either way), and delivers the event if neither.
        """
        if (cancelled or self.cancelled)():
            return self._withhold(event)
        return self.listener(event)

    async def _withhold(self, event: AgentEvent) -> None:
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except (trio.Cancelled, KeyboardInterrupt):
            self.undelivered = event  # what closing the run delivers first
            raise
        await self.listener(event)  # the probe saw a cancellation that is not ours to take

    async def stop_if_cancelled(self) -> None:
        """Raise ``Cancelled`` if the run's task is cancelled (``checkpoint_if_cancelled()``)."""
        if self.cancelled():
            await trio.lowlevel.checkpoint_if_cancelled()

    def _use_tools(self, tools: Sequence[AgentTool]) -> None:
        self.tools = tuple(tools)
        self.tool_map = tool_map = _tool_map(self.tools)
        # The names whose tool runs its whole batch sequentially (in most runs, none:
        # then a shared empty set, not one more object per run).
        sequential = [
            name for name, tool in tool_map.items() if tool.execution_mode == "sequential"
        ]
        self.sequential_tools = frozenset(sequential) if sequential else _NO_NAMES

    def context(self) -> AgentContext:
        """The run's context as hooks see it: read-only views, O(1) to make."""
        return AgentContext(self.system_prompt, Prefix(self.messages), self.tools)

    def _append(self, message: AgentMessage) -> None:
        self.messages.append(message)
        self.new_messages.append(message)

    # The *_events generators change the run's record as they go and yield
    # the events that go with each change, so that one piece of code serves
    # the loop (which emits each event) and the closing of an interrupted run
    # (which may have no listener left to emit to).

    def announce_events(self, message: AgentMessage) -> Iterator[AgentEvent]:
        """Append ``message``: its ``message_start`` and ``message_end``."""
        self._append(message)
        self.open_message = message
        yield MessageStart(message)
        self.open_message = None
        yield MessageEnd(message)

    async def announce(self, messages: Iterable[AgentMessage]) -> None:
        """What ``announce_events`` does for each message, emitting as it goes
        (written out, without a generator, and ``self.emit`` inlined: it emits
        two events for every tool result).

        ``messages`` is read one message at a time, each just before it is
        announced: a lazy iterable makes each message only when its turn comes.
        """
        for message in messages:
            self._append(message)
            self.open_message = message
            start = MessageStart(message)
            await (self._withhold(start) if self.cancelled() else self.listener(start))
            self.open_message = None
            end = MessageEnd(message)
            await (self._withhold(end) if self.cancelled() else self.listener(end))

    def pump(self) -> UpdatePump:
        """The run's update pump, made now if need be."""
        if self._pump is None:
            self._pump = UpdatePump(self)
        return self._pump

    @property
    def update_pump(self) -> UpdatePump | None:
        """The run's update pump, if a tool has reported progress."""
        return self._pump

    def batch_channel(self) -> tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]:
        if self._channel is None:
            self._channel = trio.open_memory_channel[Any](float("inf"))
        return self._channel

    def close_pump(self) -> None:
        if self._pump is not None:
            self._pump.close()
            self._pump = None  # the pump refers to the run: no cycle left behind

    def close_channels(self) -> None:
        if self._channel is not None:
            send, receive = self._channel
            send.close()
            receive.close()

    # -- the state machine -------------------------------------------------------------------

    async def main(self, prompts: Sequence[AgentMessage] | None) -> None:
        if prompts:
            self.pending = list(prompts)  # from here on, closing_events delivers them
        await trio.lowlevel.checkpoint()
        self.agent_started = True
        await self.emit(AgentStart())
        self.turn_open = True
        await self.emit(TurnStart())
        await self._inject()
        await self._turns()

    def inject_events(self) -> Iterator[AgentEvent]:
        """Announce the pending (prompt, steering, follow-up) messages, in order."""
        pending = self.pending
        while pending:
            yield from self.announce_events(pending.pop(0))

    async def _inject(self) -> None:
        for event in self.inject_events():
            await self.emit(event)

    async def _turns(self) -> None:
        config = self.config
        steering = config.get_steering_messages
        follow_up = config.get_follow_up_messages
        if steering is not None:
            await self.stop_if_cancelled()  # no poll after an abort
            self.pending = list(await steering())
        first_turn = True
        last_turn: TurnContext | None = None  # made only when a hook will read it
        while True:
            self.more = True
            while self.more or self.pending:
                if not first_turn:
                    await self.stop_if_cancelled()
                    if config.prepare_next_turn is not None and last_turn is not None:
                        self._apply(await config.prepare_next_turn(last_turn))
                        await self.stop_if_cancelled()
                    if not self.pending and steering is not None:
                        self.pending = list(await steering())
                    self.turn_open = True
                    self.assistant = None
                    await self.emit(TurnStart())
                if self.pending:
                    await self._inject()
                message = await self._stream_reply()
                if self.batch is not None:  # none for an error or aborted reply
                    await run_batch(self, self.batch)
                results = self._batch_done()
                self.turn_open = False
                await self.emit(_turn_end(message, results))
                if message.stop_reason == "error" or message.stop_reason == "aborted":
                    await self._end()
                    return
                first_turn = False
                stop = config.should_stop_after_turn
                if stop is not None or config.prepare_next_turn is not None:
                    last_turn = TurnContext(
                        message=message,
                        tool_results=results,
                        context=self.context(),
                        new_messages=Prefix(self.new_messages),
                    )
                    if stop is not None and await stop(last_turn):
                        await self._end()
                        return
                if steering is not None:
                    await self.stop_if_cancelled()  # no poll after an abort
                    self.pending = list(await steering())
            follow_ups: list[AgentMessage] = []
            if follow_up is not None:
                await self.stop_if_cancelled()
                follow_ups = list(await follow_up())
            if not follow_ups:
                break
            self.pending = follow_ups
        await self._end()

    def _batch_done(self) -> tuple[ToolResultMessage, ...]:
        """The answered batch's results; whether the model is to be asked again."""
        batch = self.batch
        if batch is None:
            self.more = False
            return ()
        self.batch = None
        self.more = not batch.terminate
        return batch.messages

    async def _end(self) -> None:
        self.ended = True
        await self.emit(AgentEnd(tuple(self.new_messages)))

    def _apply(self, next_turn: NextTurn | None) -> None:
        """Take what ``prepare_next_turn`` changed, for the rest of the run."""
        if next_turn is None:
            return
        if next_turn.context is not None:
            context = next_turn.context
            self.system_prompt = context.system_prompt
            self.messages = list(context.messages)
            self._use_tools(context.tools)
            self._llm_messages = []
            self._llm_seen = 0
        if next_turn.model is not None:
            self.model = next_turn.model
        if next_turn.thinking_level is not None:
            level = next_turn.thinking_level
            self.reasoning = None if level == "off" else level
            self._options = None

    # -- streaming the reply ---------------------------------------------------------------------

    async def _llm_view(self) -> Sequence[Message]:
        config = self.config
        convert = config.convert_to_llm
        if config.transform_context is not None:
            messages = await config.transform_context(Prefix(self.messages))
        elif convert is None or convert is default_convert_to_llm:
            # The default filter, kept incrementally: O(new messages) per turn.
            seen = self.messages
            kept = self._llm_messages
            kept += [
                message for message in seen[self._llm_seen :] if isinstance(message, _LLM_TYPES)
            ]
            self._llm_seen = len(seen)
            return Prefix(kept)
        else:
            messages = Prefix(self.messages)
        if convert is None:
            convert = default_convert_to_llm
        return await convert(messages)

    def _stream_options(self, api_key: str | None) -> StreamOptions:
        options = self._options
        if options is None or options.api_key != api_key:
            config = self.config
            options = StreamOptions(
                api_key=api_key,
                temperature=config.temperature,
                max_tokens=config.max_tokens,
                reasoning=self.reasoning,
                session_id=config.session_id,
                headers=config.headers,
                max_retries=config.max_retries,
                max_retry_delay=config.max_retry_delay,
                timeouts=config.timeouts,
            )
            self._options = options
        return options

    async def _stream_reply(self) -> AssistantMessage:
        self.streaming = True
        self.stream_started = False
        self.partial = None
        self.final = None
        config = self.config
        llm_messages = await self._llm_view()
        api_key = None
        if config.get_api_key is not None:
            api_key = await config.get_api_key(self.model.provider)
        options = self._stream_options(api_key or config.api_key)
        await self.stop_if_cancelled()  # an abort sends no further request (nor an interrupt)
        context = _llm_context(self.system_prompt, llm_messages, self.tools)
        stream_fn = self.stream_fn or get_stream_fn(self.model.api)
        try:
            returned = await stream_fn(self.model, context, options, self._on_stream_event)
        except _ListenerFailed as failed:
            raise failed.original from None
        final = self.final
        if final is None:
            if not isinstance(returned, AssistantMessage):
                raise TypeError(
                    f"stream function {stream_fn!r} returned {returned!r}, "
                    "not an AssistantMessage, and emitted no done or error event"
                )
            final = returned
        return await self._settle(final, self.stream_started)

    async def _on_stream_event(self, event: AssistantMessageEvent) -> None:
        """The ``emit`` a stream function gets: turns stream events into agent events."""
        if event.type in _BLOCK_EVENTS:
            if self.stream_started and self.final is None:
                # self.emit, inlined: this runs for every delta.
                self.partial = event
                update = MessageUpdate(event)
                if self.cancelled():
                    try:
                        await trio.lowlevel.checkpoint_if_cancelled()
                    except (trio.Cancelled, KeyboardInterrupt):
                        self.undelivered = update
                        raise
                try:
                    await self.listener(update)
                except Exception as exc:
                    raise _ListenerFailed(exc) from None
        elif event.type == "start":
            if not self.stream_started and self.final is None:
                self.stream_started = True
                self.partial = event
                try:
                    await self.emit(MessageStart(event.partial))
                except Exception as exc:
                    raise _ListenerFailed(exc) from None
        elif self.final is None:
            if isinstance(event, StreamDone):
                self.final = event.message
            elif isinstance(event, StreamError):
                self.final = event.error

    def settle_events(self, final: AssistantMessage, started: bool) -> Iterator[AgentEvent]:
        """Make ``final`` the turn's reply: append it, prepare its tool batch, announce it."""
        self._append(final)
        self.assistant = final
        self.streaming = False
        if final.stop_reason != "error" and final.stop_reason != "aborted":
            calls = final.tool_calls
            if calls:
                self.batch = Batch(final, calls, self._batch_mode(final, calls))
        if not started:
            self.open_message = final
            yield MessageStart(final)
        self.open_message = None
        yield MessageEnd(final)

    async def _settle(self, final: AssistantMessage, started: bool) -> AssistantMessage:
        for event in self.settle_events(final, started):
            await self.emit(event)
        return final

    def _batch_mode(self, message: AssistantMessage, calls: tuple[ToolCall, ...]) -> BatchMode:
        if message.stop_reason == "length":
            return "truncated"
        if self.config.tool_execution == "sequential":
            return "sequential"
        sequential = self.sequential_tools
        if sequential and not sequential.isdisjoint([call.name for call in calls]):
            return "sequential"
        return "parallel"

    # -- closing an interrupted run -------------------------------------------------------------

    def _closed(
        self, stop_reason: StopReason, text: str, base: AssistantMessage | None = None
    ) -> AssistantMessage:
        if base is None:
            model = self.model
            return AssistantMessage(
                api=model.api,
                provider=model.provider,
                model=model.id,
                stop_reason=stop_reason,
                error_message=text,
            )
        return attrs.evolve(base, stop_reason=stop_reason, error_message=text)

    def closing_events(self, stop_reason: StopReason, text: str) -> Iterator[AgentEvent]:
        """Close a run that was aborted (``"aborted"``) or failed (``"error"``).

        Yields the events the grammar still owes, from wherever the run was,
        and records the messages that go with them: the reply that was
        streaming becomes final with this stop reason and ``text`` as its
        error message; every tool call of the batch gets a result ("Operation
        aborted" if it had none); a reply of its own (no content) stands where
        the next model call would have been, if the run would have gone on —
        and, after a failure, always, so that the failure is in the
        transcript. Calls nothing but the model of the run: no hook, no tool,
        no model. (loop.md §6; for failures agent.md.)
        """
        if self.undelivered is not None:
            event, self.undelivered = self.undelivered, None
            yield event
        if self.ended:
            return
        failed = stop_reason == "error"
        if not self.agent_started:
            self.agent_started = True
            yield AgentStart()
            self.turn_open = True
            yield TurnStart()
        if self.open_message is not None:
            message, self.open_message = self.open_message, None
            yield MessageEnd(message)
        recorded = False  # the failure is in the transcript
        if self.turn_open:
            if self.streaming:
                reply = self.final
                if reply is None:
                    partial = self.partial
                    base = None if partial is None else partial.partial  # type: ignore[union-attr]
                    reply = self._closed(stop_reason, text, base)
                    recorded = True
                yield from self.settle_events(reply, self.stream_started)
            elif self.assistant is None:
                yield from self.inject_events()
                reply = self._closed(stop_reason, text)
                recorded = True
                yield from self.settle_events(reply, False)
            else:
                reply = self.assistant
            if self.batch is not None:
                yield from closing_batch_events(self, self.batch)
            results = self._batch_done()
            self.turn_open = False
            yield TurnEnd(reply, results)
            if (reply.stop_reason == "error" or reply.stop_reason == "aborted") and (
                recorded or not failed  # else a reply of its own names the failure
            ):
                self.ended = True
                yield AgentEnd(tuple(self.new_messages))
                return
        if self.more or self.pending or (failed and not recorded):
            self.turn_open = True
            yield TurnStart()
            yield from self.inject_events()
            reply = self._closed(stop_reason, text)
            yield from self.settle_events(reply, False)
            self.turn_open = False
            yield TurnEnd(reply, ())
        self.ended = True
        yield AgentEnd(tuple(self.new_messages))

    async def finish(self, stop_reason: StopReason, text: str) -> None:
        """Emit the closing events (:meth:`closing_events`), outside the cancelled scope."""
        for event in self.closing_events(stop_reason, text):
            await self.emit(event)


def _check_messages(name: str, messages: Any) -> None:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(
            f"{name} must be a sequence of messages, not {type(messages).__name__} "
            f"{messages!r:.80}; for text, pass [UserMessage.text(...)]"
        )
    for index, message in enumerate(messages):
        if not isinstance(getattr(message, "role", None), str):
            raise TypeError(
                f"{name}[{index}] is {message!r:.80}, not a message (an object with a role)"
            )


def _check_run_arguments(context: Any, config: Any, emit: Any) -> None:
    if not isinstance(context, AgentContext):
        raise TypeError(f"context must be an AgentContext, not {type(context).__name__}")
    if not isinstance(config, AgentLoopConfig):
        raise TypeError(f"config must be an AgentLoopConfig, not {type(config).__name__}")
    if not callable(emit):
        raise TypeError(f"emit must be an async callable taking an event, not {emit!r}")
    if inspect.isfunction(emit) and not inspect.iscoroutinefunction(emit):
        raise TypeError(
            "emit must be an async function (async def), "
            f"not the plain function {emit.__qualname__}"
        )
    _check_messages("context.messages", context.messages)


def _resolve_stream_fn(config: AgentLoopConfig, stream_fn: StreamFn | None) -> StreamFn | None:
    if stream_fn is None:
        get_stream_fn(config.model.api)  # an unknown api is an error before anything is emitted
    return stream_fn


async def _drive(
    run: _Run,
    prompts: Sequence[AgentMessage] | None,
    abort: trio.CancelScope | None,
    *,
    on_error: Callable[[_Run, Exception], Awaitable[None]] | None = None,
    on_interrupt: Callable[[_Run, BaseException], None] | None = None,
) -> list[AgentMessage]:
    """Run ``run`` inside ``abort`` and its nursery; close it after an abort.

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
    run.cancelled = cancel_probe()
    error: BaseException | None = None
    resources = RunResources()  # what the run's providers keep open (an HTTP pool)
    token = _resources.enter(resources)
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
                    run.close_pump()
    except BaseExceptionGroup as group:
        error = _one_exception(group)
    finally:
        run.close_channels()
        _resources.leave(token)
        await resources.aclose()  # shielded: sockets close even when cancelled
    if error is None and (not run.ended or run.undelivered is not None):
        try:
            await run.finish("aborted", ABORTED)
        # A listener, told of the abort, raised; or the run was cancelled from
        # outside meanwhile. Re-raised below, once the run is closed.
        except BaseException as exc:  # noqa: ASYNC103
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
    ``abort`` is cancelled. ``emit`` is awaited for every event, in order
    (a slow listener slows the run). ``context`` is not changed: the run works
    on a copy, and returns the messages it added (the prompts first).
    ``stream_fn`` defaults to :func:`trio_agent.providers.stream`.

    Cancellation: ``abort.cancel()`` (from any task, even before the run
    starts) ends the run promptly and normally — the partial reply is kept
    with ``stop_reason="aborted"``, every tool call gets a result ("Operation
    aborted" if it had none), and the events a listener expects follow (loop.md
    §6). A cancellation from outside the run, or ``KeyboardInterrupt``,
    propagates at once. An exception from ``emit`` or from a hook other than
    the tool hooks ends the run and propagates unchanged, never as an
    exception group. Always a checkpoint.
    """
    try:
        _check_messages("prompts", prompts)
        _check_run_arguments(context, config, emit)
        run = _Run(context, config, emit, _resolve_stream_fn(config, stream_fn))
    except Exception as exc:
        refusal = exc
    else:
        return await _drive(run, tuple(prompts), abort)
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
    ``turn_start``, then runs turns as :func:`run_agent_loop` does, and
    returns the new messages. Raises ``ValueError("Cannot continue: no
    messages in context")`` or ``ValueError("Cannot continue from message
    role: assistant")`` before emitting anything. Cancellation and errors as
    for :func:`run_agent_loop`. Always a checkpoint.
    """
    try:
        _check_run_arguments(context, config, emit)
        if not context.messages:
            raise ValueError("Cannot continue: no messages in context")
        if context.messages[-1].role == "assistant":
            raise ValueError("Cannot continue from message role: assistant")
        run = _Run(context, config, emit, _resolve_stream_fn(config, stream_fn))
    except Exception as exc:
        refusal = exc
    else:
        return await _drive(run, None, abort)
    await trio.lowlevel.checkpoint()  # a refusal is a checkpoint too (invariant 12)
    raise refusal
