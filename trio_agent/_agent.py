"""``Agent``: a transcript, the loop run on it, queues and listeners (design.md#the-agents-rules).

An ``Agent`` owns a transcript and runs :func:`trio_agent.run_agent_loop` on
it, one run at a time, in the task that calls :meth:`Agent.prompt` or
:meth:`Agent.continue_`. Between runs it has no task of its own.

Its state is updated from the run's own events, before any listener sees the
event, so a listener reading ``agent.state`` sees the event applied. When a
run ends otherwise than normally, the agent still leaves its state whole:

* **abort** (:meth:`Agent.abort`): the run closes itself (design.md#abort) and
  ``prompt()`` returns normally;
* **failure** (a listener, a hook or a broken stream function raises): the
  run is closed with the events a listener expects — every started tool call
  answered, an assistant message with ``stop_reason="error"`` naming the
  exception, ``turn_end``, ``agent_end`` — and then ``prompt()`` re-raises
  the exception (pi records it and returns; in Python an unexpected
  exception should surface). Every listener hears every event meanwhile,
  whatever another one raises: the first exception is the one re-raised,
  later ones are notes on it (:meth:`Agent.subscribe` has the rules);
* **cancellation from outside**, ``KeyboardInterrupt``: the state is closed
  at once, without calling listeners (the partial reply appended as
  ``aborted``, every started call answered), and the exception propagates.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Literal, TypeAlias

import attrs
import trio

from ._budget import Budget, BudgetReached
from ._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
    NextTurn,
    RequestContext,
    RequestUpdate,
    ThinkingLevel,
    ToolExecution,
    TurnContext,
    TurnDecision,
)
from ._errors import TrioAgentError
from ._events import AgentEvent, MessageStart, MessageUpdate
from ._execution import ABORTED
from ._loop import Run, check_stream_fn, continued_role, default_convert_to_llm, drive
from ._messages import (
    AgentMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    UserMessage,
)
from ._model import Model
from ._stream import CacheRetention, StreamFn, Timeouts
from ._tools import AgentTool
from ._views import Prefix

__all__ = ["Agent", "AgentBusyError", "AgentListener", "AgentState", "QueueMode"]

QueueMode: TypeAlias = Literal["one-at-a-time", "all"]
"""How a queue of steering or follow-up messages is drained: ``"one-at-a-time"`` (one message
each time the run asks) or ``"all"`` (every queued message at once)."""
AgentListener: TypeAlias = Callable[[AgentEvent], Awaitable[None]]
"""What :meth:`Agent.subscribe` takes: an async function awaited with each event."""

_DEFAULT_TIMEOUTS = Timeouts()

# The options are declared once, as the fields of AgentLoopConfig. An agent fills these
# in for each run, from its state and its queues; every other field is an option: a
# constructor keyword of the same name, type and default (tests/test_options.py checks
# it), kept as given and copied into each run's config.
_PER_RUN_FIELDS = frozenset(
    {"model", "reasoning", "get_steering_messages", "get_follow_up_messages"}
)
_OPTIONS = tuple(
    field.name for field in attrs.fields(AgentLoopConfig) if field.name not in _PER_RUN_FIELDS
)

_BUSY_PROMPT = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
_BUSY_CONTINUE = "Agent is already processing. Wait for completion before continuing."
_BUSY_RESET = "Agent is already processing. Wait for completion before resetting."
_BUSY_REPLACE = "Agent is already processing. Wait for completion before replacing the messages."


class AgentBusyError(TrioAgentError, RuntimeError):
    """A run is active: ``prompt()``, ``continue_()``, ``reset()`` and ``replace_messages()``
    must wait for it.

    A :class:`TrioAgentError` and a ``RuntimeError``. The texts are pi's, for instance from
    ``prompt()``: "Agent is already processing a prompt. Use steer() or follow_up() to queue
    messages, or wait for completion."
    """


def _check_mode(name: str, mode: str) -> QueueMode:
    if mode not in ("one-at-a-time", "all"):
        raise ValueError(f"{name} must be 'one-at-a-time' or 'all', not {mode!r}")
    return mode  # type: ignore[return-value]  # checked just above


def _as_message(message: str | AgentMessage, what: str) -> AgentMessage:
    if isinstance(message, str):
        return UserMessage.text(message)
    if not isinstance(getattr(message, "role", None), str):
        raise TypeError(
            f"{what} takes a str or a message (an object with a role), not {message!r:.80}"
        )
    return message


class _Queue:
    """Steering or follow-up messages, taken one or all per poll."""

    __slots__ = ("items", "mode")

    def __init__(self, mode: QueueMode) -> None:
        self.items: list[AgentMessage] = []
        self.mode = mode

    def take(self) -> list[AgentMessage]:
        items = self.items
        if not items:
            return []
        if self.mode == "all":
            self.items = []
            return items
        return [items.pop(0)]


class _ActiveRun:
    __slots__ = ("abort", "done")

    def __init__(self) -> None:
        self.abort = trio.CancelScope()
        self.done = trio.Event()


def _name(listener: AgentListener) -> str:
    name = getattr(listener, "__qualname__", None)
    return name if isinstance(name, str) else repr(listener)


class AgentState:
    """A read-only view of an :class:`Agent`'s state, always current."""

    __slots__ = ("_agent",)

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    @property
    def system_prompt(self) -> str:
        """The system prompt the next run uses."""
        return self._agent._system_prompt

    @property
    def model(self) -> Model:
        """The model the next run uses."""
        return self._agent._model

    @property
    def thinking_level(self) -> ThinkingLevel:
        """The reasoning level the next run asks for (``"off"``: none)."""
        return self._agent._thinking_level

    @property
    def tools(self) -> tuple[AgentTool, ...]:
        """The tools the next run offers the model."""
        return self._agent._tools

    @property
    def messages(self) -> Sequence[AgentMessage]:
        """The transcript as it is now (a read-only view; later messages are not in it)."""
        return Prefix(self._agent._messages)

    @property
    def is_streaming(self) -> bool:
        """True from the start of ``prompt()`` / ``continue_()`` until the run has ended."""
        return self._agent._run is not None

    @property
    def streaming_message(self) -> AgentMessage | None:
        """The message being announced (the partial assistant reply while it streams), or None."""
        event = self._agent._streaming
        return None if event is None else event.message

    @property
    def pending_tool_calls(self) -> frozenset[str]:
        """The ids of the tool calls that have started and not ended (an id the model gave
        two calls stays while either runs)."""
        return frozenset(self._agent._pending_tool_calls)

    @property
    def error_message(self) -> str | None:
        """The error message of the last turn that failed, in the last run."""
        return self._agent._error_message

    @property
    def stop(self) -> BudgetReached | None:
        """The budget that ended the last run (its ``agent_end``'s ``stop``), or None."""
        return self._agent._stop

    def __repr__(self) -> str:
        return (
            f"AgentState(model={self.model.id!r}, messages={len(self._agent._messages)}, "
            f"is_streaming={self.is_streaming}, error_message={self.error_message!r})"
        )


class Agent:
    """An agent: a transcript, tools, a model, and the loop run on them.

    One run at a time, in the task that calls :meth:`prompt` or :meth:`continue_`; between
    runs the agent has no task of its own.

    ::

        agent = Agent(model=model, system_prompt="...", tools=[...])
        unsubscribe = agent.subscribe(on_event)       # async def on_event(event): ...
        await agent.prompt("What changed?")           # one whole run, in this task
        agent.steer("Look at the tests too.")         # sync, from any task
        agent.abort()                                 # sync, idempotent

    Every constructor keyword but ``model`` is optional. The options and
    hooks are the fields of :class:`AgentLoopConfig`, with the
    same names, types and defaults (``headers`` may also be ``None``, its
    default: none), checked here with the same errors; the agent fills in
    the other fields for each run: ``model`` (the one of :meth:`set_model`),
    ``reasoning`` (from ``thinking_level``; ``"off"``: none) and the queues'
    ``get_steering_messages`` and ``get_follow_up_messages`` (taken by
    ``steering_mode`` and ``follow_up_mode``). The rest is the agent's own:
    ``system_prompt``, ``tools`` and ``messages`` make each run's
    ``AgentContext``, and ``stream_fn`` is the run's stream function
    (default: the provider registered for ``model.api``). Everything a
    run needs is snapshotted when it starts, so changing the agent during a
    run (its model, tools, system prompt, thinking level) affects the next
    run. Its state is updated from the run's events before any listener
    sees them.

    Checkpoints: the async methods are always checkpoints; the sync ones
    (``steer``, ``follow_up``, ``abort``, the setters and getters) never are.
    """

    def __init__(
        self,
        model: Model,
        *,
        system_prompt: str = "",
        tools: Iterable[AgentTool] = (),
        messages: Iterable[AgentMessage] = (),
        thinking_level: ThinkingLevel = "off",
        stream_fn: StreamFn | None = None,
        convert_to_llm: (
            Callable[[Sequence[AgentMessage]], Awaitable[Sequence[LlmMessage]]] | None
        ) = None,
        transform_context: (
            Callable[[Sequence[AgentMessage]], Awaitable[Sequence[AgentMessage]]] | None
        ) = None,
        get_api_key: Callable[[str], Awaitable[str | None]] | None = None,
        api_key: str | None = None,
        before_tool_call: (
            Callable[[BeforeToolCallContext], Awaitable[BeforeToolCallResult | None]] | None
        ) = None,
        after_tool_call: (
            Callable[[AfterToolCallContext], Awaitable[AfterToolCallResult | None]] | None
        ) = None,
        should_stop_after_turn: Callable[[TurnContext], Awaitable[bool]] | None = None,
        prepare_next_turn: Callable[[TurnContext], Awaitable[NextTurn | None]] | None = None,
        prepare_request: Callable[[RequestContext], Awaitable[RequestUpdate | None]] | None = None,
        finish_turn: Callable[[TurnContext], Awaitable[TurnDecision | None]] | None = None,
        tool_execution: ToolExecution = "parallel",
        tool_time_limit: float | None = None,
        max_parallel_tools: int | None = None,
        budget: Budget | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        session_id: str | None = None,
        cache_retention: CacheRetention = "short",
        temperature: float | None = None,
        max_tokens: int | None = None,
        headers: Mapping[str, str] | None = None,
        max_retries: int = 2,
        max_retry_delay: float = 60.0,
        timeouts: Timeouts = _DEFAULT_TIMEOUTS,
    ) -> None:
        keywords = locals()  # before any other local: the arguments, by name
        if not isinstance(model, Model):
            raise TypeError(f"model must be a trio_agent.Model, not {model!r:.80}")
        # A config made now checks every hook and option once, with clear errors; each
        # run's config is a copy of it (_loop_config). The option keywords above are the
        # config's fields but _PER_RUN_FIELDS, with their types and defaults: typed here
        # for callers, and checked against the fields by the tests.
        options = {name: keywords[name] for name in _OPTIONS}
        options["headers"] = dict(headers or {})
        self._config = AgentLoopConfig(model=model, **options)
        self._stream_fn = stream_fn
        self._system_prompt = system_prompt
        self._model = model
        self._thinking_level: ThinkingLevel = thinking_level
        self._tools = tuple(tools)
        self._messages: list[AgentMessage] = [
            _as_message(message, "messages") for message in messages
        ]
        self._steering = _Queue(_check_mode("steering_mode", steering_mode))
        self._follow_ups = _Queue(_check_mode("follow_up_mode", follow_up_mode))
        self._listeners: tuple[AgentListener, ...] = ()
        # An event whose delivery a cancellation cut short, and the listeners
        # not told it yet (see _process).
        self._undelivered: tuple[AgentEvent, tuple[AgentListener, ...]] | None = None
        self._run: _ActiveRun | None = None
        self._streaming: MessageStart | MessageUpdate | None = None
        # The calls started and not ended, by id: how many (a model may give two calls one id).
        self._pending_tool_calls: dict[str, int] = {}
        self._error_message: str | None = None
        self._stop: BudgetReached | None = None
        self._state = AgentState(self)

    # -- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """The agent's state: a read-only view, always current."""
        return self._state

    def set_system_prompt(self, system_prompt: str) -> None:
        """Use ``system_prompt`` from the next run on."""
        self._system_prompt = system_prompt

    def set_model(self, model: Model) -> None:
        """Use ``model`` from the next run on (``TypeError`` if it is not a ``Model``)."""
        if not isinstance(model, Model):
            raise TypeError(f"model must be a trio_agent.Model, not {model!r:.80}")
        self._model = model

    def set_thinking_level(self, level: ThinkingLevel) -> None:
        """Use this thinking level from the next run on (``"off"``: no reasoning;
        ``ValueError`` if it is not a ``ThinkingLevel``)."""
        if level not in ("off", "minimal", "low", "medium", "high", "xhigh"):
            raise ValueError(
                f"thinking level must be off, minimal, low, medium, high or xhigh, not {level!r}"
            )
        self._thinking_level = level

    def set_tools(self, tools: Iterable[AgentTool]) -> None:
        """Use these tools from the next run on (the iterable is copied)."""
        self._tools = tuple(tools)

    def replace_messages(self, messages: Iterable[AgentMessage]) -> None:
        """Replace the transcript (copied), for instance with one loaded from JSON.

        Raises :class:`AgentBusyError` while a run is active: the run appends
        to the transcript it started with, and a transcript swapped under it
        could hold a tool result without its call.
        """
        if self._run is not None:
            raise AgentBusyError(_BUSY_REPLACE)
        self._messages = [_as_message(message, "replace_messages") for message in messages]

    @property
    def steering_mode(self) -> QueueMode:
        """How many queued steering messages each poll takes: ``"one-at-a-time"`` (the
        oldest) or ``"all"``. Settable; ``ValueError`` for anything else."""
        return self._steering.mode

    @steering_mode.setter
    def steering_mode(self, mode: QueueMode) -> None:
        self._steering.mode = _check_mode("steering_mode", mode)

    @property
    def follow_up_mode(self) -> QueueMode:
        """How many queued follow-up messages each poll takes: ``"one-at-a-time"`` (the
        oldest) or ``"all"``. Settable; ``ValueError`` for anything else."""
        return self._follow_ups.mode

    @follow_up_mode.setter
    def follow_up_mode(self, mode: QueueMode) -> None:
        self._follow_ups.mode = _check_mode("follow_up_mode", mode)

    # -- queues -----------------------------------------------------------------------------------

    def steer(self, message: str | AgentMessage) -> None:
        """Queue a message for the running run, injected before its next model call
        (or for the next run). A ``str`` is a user text message; anything else must be a
        message (an object with a ``role``), or ``TypeError``."""
        self._steering.items.append(_as_message(message, "steer()"))

    def follow_up(self, message: str | AgentMessage) -> None:
        """Queue a message that starts another turn when the agent would otherwise stop.
        A ``str`` is a user text message; anything else must be a message (an object with a
        ``role``), or ``TypeError``."""
        self._follow_ups.items.append(_as_message(message, "follow_up()"))

    def clear_steering_queue(self) -> None:
        """Drop the steering messages not delivered yet."""
        self._steering.items = []

    def clear_follow_up_queue(self) -> None:
        """Drop the follow-up messages not delivered yet."""
        self._follow_ups.items = []

    def clear_all_queues(self) -> None:
        """Drop every queued steering and follow-up message."""
        self.clear_steering_queue()
        self.clear_follow_up_queue()

    def has_queued_messages(self) -> bool:
        """Whether a steering or follow-up message waits to be delivered."""
        return bool(self._steering.items or self._follow_ups.items)

    # -- events -----------------------------------------------------------------------------------

    def subscribe(self, listener: AgentListener) -> Callable[[], None]:
        """Call ``await listener(event)`` for every event of every run; return ``unsubscribe``.

        Listeners are awaited one after the other, in subscription order, after
        the agent's state took the event in: a slow listener slows the run.

        Every listener gets every event of a run, in order, whatever another
        listener does, so each sees a well-formed run to its ``agent_end``:

        * a listener that raises an ``Exception`` does not keep the event from
          the listeners after it: they are told, and then the exception fails
          the run (see the module docs). The run's closing events go to every
          listener, the one that raised included. ``prompt()`` re-raises the
          first exception, as itself; each later one (from another listener,
          or from any listener while the run closes) is added to it as a note
          (``__notes__``) naming the listener, the exception and the event;
        * when a listener is cut short by ``trio.Cancelled`` (the run was
          aborted, or failed elsewhere), the listeners after it get that event
          when the run closes, before the closing events;
        * a cancellation from outside the run, or ``KeyboardInterrupt``,
          propagates at once: no listener is called after it.

        Subscribing a listener again adds it again (it is called once more
        per event). ``unsubscribe()`` is sync and idempotent, and removes
        every subscription of this listener. A plain (not async) function is
        a ``TypeError``.
        """
        if not callable(listener):
            raise TypeError(f"a listener must be an async callable, not {listener!r}")
        if inspect.isfunction(listener) and not inspect.iscoroutinefunction(listener):
            raise TypeError(
                "a listener must be an async function, "
                f"not the plain function {listener.__qualname__}"
            )
        # A new tuple for every change: an event being delivered keeps the
        # listeners it started with.
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            self._listeners = tuple(x for x in self._listeners if x is not listener)

        return unsubscribe

    @contextlib.asynccontextmanager
    async def events(
        self, buffer: int = 64
    ) -> AsyncIterator[trio.MemoryReceiveChannel[AgentEvent]]:
        """Every event of every run, over a channel, for a consumer task::

            async with trio.open_nursery() as nursery:
                async with agent.events(buffer=100) as events:
                    nursery.start_soon(consume, events)   # async for event in events: ...
                    await agent.prompt("...")
                # the channel has ended here: consume() sees the events sent, then stops

        The channel holds ``buffer`` events: a consumer that falls behind
        slows the run instead of growing memory. After an abort, the closing
        events a full channel cannot take are dropped rather than holding the
        abort up. When the block exits the channel ends (the receiving side
        sees the end after the events already sent).
        """
        if buffer < 0:
            raise ValueError(f"buffer must be >= 0, not {buffer!r}")
        send, receive = trio.open_memory_channel[AgentEvent](buffer)

        async def forward(event: AgentEvent) -> None:
            # With room in the buffer the event goes in at once: waiting is for
            # a full buffer only. A consumer that closed its end has nobody to tell.
            try:
                send.send_nowait(event)
                return
            except trio.WouldBlock:
                pass
            except trio.BrokenResourceError:
                return
            run = self._run
            if run is not None and run.abort.cancel_called:
                return  # the abort does not wait for a consumer that is stuck
            with contextlib.suppress(trio.BrokenResourceError):
                await send.send(event)

        unsubscribe = self.subscribe(forward)
        try:
            await trio.lowlevel.checkpoint()
            yield receive
        finally:
            unsubscribe()
            send.close()

    def _reduce(self, event: AgentEvent) -> None:
        """Take an event into the state (before any listener sees it)."""
        if event.type == "message_update" or event.type == "message_start":
            self._streaming = event  # its message is built only if read
        elif event.type == "message_end":
            self._streaming = None
            self._messages.append(event.message)
        elif event.type == "tool_execution_start":
            pending = self._pending_tool_calls
            pending[event.tool_call_id] = pending.get(event.tool_call_id, 0) + 1
        elif event.type == "tool_execution_end":
            pending = self._pending_tool_calls
            left = pending.pop(event.tool_call_id, 1) - 1
            if left:  # the model gave this id to more than one call
                pending[event.tool_call_id] = left
        elif event.type == "turn_end":
            if event.message.error_message:
                self._error_message = event.message.error_message
        elif event.type == "agent_end":
            self._streaming = None
            self._stop = event.stop

    async def _process(self, event: AgentEvent) -> None:
        """The run's listener: take ``event`` into the state, then tell every listener.

        This runs for every event; when no listener fails, the loop is all it
        costs (a ``try`` costs nothing until something raises). A listener's
        exception leaves the listeners after it still to tell (:meth:`_deliver`)
        before it is raised; a cancellation leaves the event undelivered to
        them (:meth:`_keep_undelivered`); they get it before the next event
        (:meth:`_deliver_then_process`).
        """
        if self._undelivered is not None:
            await self._deliver_then_process(event)
            return
        self._reduce(event)
        listeners = self._listeners
        # The listeners after the one being told are listeners[index:], counted by hand:
        # enumerate() here cost B4 6% more instructions, a counter under 1%.
        index = 0
        for listener in listeners:
            index += 1
            try:
                await listener(event)
            except Exception as exc:
                error = exc
                break
            except trio.Cancelled:
                self._keep_undelivered(event, listeners[index:])
                raise
        else:
            return
        # The others are told before the error goes on (a cancellation meanwhile
        # does not replace it: _deliver returns; a KeyboardInterrupt does).
        await self._deliver(event, listeners[index:], error)
        raise error

    async def _deliver(
        self,
        event: AgentEvent,
        listeners: tuple[AgentListener, ...],
        error: Exception | None,
        *,
        closing: bool = False,
    ) -> Exception | None:
        """Await each of ``listeners`` with ``event``, whatever one of them raises.

        Returns the run's failure: ``error``, or else the first exception a
        listener raised; every later one is noted on it. ``KeyboardInterrupt``
        propagates. So does ``Cancelled`` while the run closes (it can only
        come from outside then); during the run, with ``error`` to raise, a
        ``Cancelled`` (an abort, or a failure elsewhere in the run) leaves the
        event undelivered to the rest and returns: the caller raises ``error``, what the
        run failed of, and the scope that was cancelled stays cancelled.
        """
        for index, listener in enumerate(listeners):
            try:
                await listener(event)
            except Exception as exc:
                if error is None:
                    error = exc
                elif closing:
                    _note(
                        error,
                        f"while closing the run, listener {_name(listener)} raised "
                        f"{exc!r} at {event.type}",
                    )
                else:
                    _note(error, f"listener {_name(listener)} also raised {exc!r} at {event.type}")
            # Not swallowed: error is raised in its place, and the cancelled scope stays
            # cancelled (see above).
            except trio.Cancelled:  # noqa: ASYNC103  # re-raised, or error raised in its place
                if closing or error is None:
                    raise
                self._keep_undelivered(event, listeners[index + 1 :])
                return error  # noqa: ASYNC104  # the caller raises error, the scope stays cancelled
        return error

    def _keep_undelivered(self, event: AgentEvent, listeners: tuple[AgentListener, ...]) -> None:
        """A cancellation cut the delivery of ``event`` short: ``listeners`` still get
        it, first thing when the run closes. After a cancellation from outside nobody
        does (:meth:`_interrupted`)."""
        if listeners and self._run is not None:
            self._undelivered = (event, listeners)

    async def _deliver_undelivered(self, error: Exception | None) -> Exception | None:
        """Deliver the undelivered event, if there is one; the run's failure, as
        :meth:`_deliver`."""
        undelivered, self._undelivered = self._undelivered, None
        if undelivered is None:
            return error
        return await self._deliver(*undelivered, error, closing=True)

    async def _deliver_then_process(self, event: AgentEvent) -> None:
        """``event`` while another is undelivered (the run was aborted in the middle of telling
        it): deliver that one, then ``event`` as usual."""
        error = await self._deliver_undelivered(None)
        if error is None:
            await self._process(event)
            return
        self._reduce(event)
        await self._deliver(event, self._listeners, error, closing=True)
        raise error

    # -- running ----------------------------------------------------------------------------------

    async def prompt(
        self,
        input: str | AgentMessage | Sequence[AgentMessage],
        images: Iterable[ImageContent] = (),
    ) -> None:
        """Run the agent on a prompt: text (with ``images``), a message, or a list of messages.

        Args:
            input: the prompt: a ``str`` (a user text message), a message, or a list of
                messages.
            images: ``ImageContent`` blocks sent with a text prompt.

        Returns when the run has ended (after the ``agent_end`` listeners).
        Raises :class:`AgentBusyError` if a run is active, and re-raises what
        failed a run (a listener's, a hook's or a broken stream function's
        exception; see the module docs) after closing it: every started tool
        call answered, an assistant message with ``stop_reason="error"`` naming
        the exception, ``turn_end``, ``agent_end``. Cancellation: ``abort()`` ends
        the run and ``prompt()`` returns normally; a cancellation from
        outside propagates, after the state was closed. Always a checkpoint.
        """
        if self._run is not None:
            await trio.lowlevel.checkpoint()
            raise AgentBusyError(_BUSY_PROMPT)
        await self._run_loop(lambda: self._prompts(input, tuple(images)))

    @staticmethod
    def _prompts(
        input: str | AgentMessage | Sequence[AgentMessage], images: tuple[ImageContent, ...]
    ) -> list[AgentMessage]:
        if isinstance(input, str):
            for image in images:
                if not isinstance(image, ImageContent):
                    raise TypeError(f"images must be ImageContent blocks, not {image!r:.80}")
            return [UserMessage((TextContent(input), *images))]
        if images:
            raise TypeError("images go with a text prompt; put them in the message instead")
        if isinstance(input, Sequence):
            return [_as_message(message, "prompt()") for message in input]
        return [_as_message(input, "prompt()")]

    async def continue_(self) -> None:
        """Continue from the transcript, as it stands.

        If it ends with a user message or tool results, the model is asked
        again. If it ends with the assistant's reply, the queued steering
        messages are run as the prompt (one or all, by mode), else the queued
        follow-ups; with neither, ``ValueError("Cannot continue from message
        role: assistant")`` (system messages after the last reply do not count: they
        are folded into the system prompt). An empty transcript, or one of system
        messages alone, is ``ValueError("No messages to continue from")``. Otherwise as
        :meth:`prompt`. Always a checkpoint.
        """
        if self._run is not None:
            await trio.lowlevel.checkpoint()
            raise AgentBusyError(_BUSY_CONTINUE)
        role = continued_role(self._messages)
        if role is None:
            await trio.lowlevel.checkpoint()
            raise ValueError("No messages to continue from")
        if role == "assistant":
            # Taken only once the run is sure to start, so a refusal loses nothing.
            if self._steering.items:
                await self._run_loop(self._steering.take, skip_first_steering_poll=True)
                return
            if self._follow_ups.items:
                await self._run_loop(self._follow_ups.take)
                return
            await trio.lowlevel.checkpoint()
            raise ValueError("Cannot continue from message role: assistant")
        await self._run_loop(lambda: None)

    def abort(self) -> None:
        """Abort the active run, if there is one (sync, idempotent, from any task).

        The run then ends as design.md#abort says and ``prompt()`` returns normally.
        From another thread: ``trio.from_thread.run_sync(agent.abort)``.
        """
        if self._run is not None:
            self._run.abort.cancel()

    async def wait_for_idle(self) -> None:
        """Return when no run is active (at once, after a checkpoint, when idle)."""
        run = self._run
        if run is None:
            await trio.lowlevel.checkpoint()
        else:
            await run.done.wait()

    def reset(self) -> None:
        """Clear the transcript, the error, the streaming state and both queues.

        Raises :class:`AgentBusyError` while a run is active (``abort()`` and
        ``wait_for_idle()`` first), so the state cannot be torn under a run.
        """
        if self._run is not None:
            raise AgentBusyError(_BUSY_RESET)
        self._messages = []
        self._error_message = None
        self._streaming = None
        self._pending_tool_calls = {}
        self.clear_all_queues()

    def _loop_config(self, skip_first_steering_poll: bool) -> AgentLoopConfig:
        """The config of a run starting now: the options, with the agent's model, thinking
        level and queues."""
        skip = skip_first_steering_poll
        steering, follow_ups = self._steering, self._follow_ups

        async def get_steering_messages() -> list[AgentMessage]:
            nonlocal skip
            if skip:  # the steering that continue_() took is this run's prompt
                skip = False
                return []
            return steering.take()

        async def get_follow_up_messages() -> list[AgentMessage]:
            return follow_ups.take()

        level = self._thinking_level
        config = self._config
        return attrs.evolve(
            config,
            model=self._model,
            reasoning=None if level == "off" else level,
            convert_to_llm=config.convert_to_llm or default_convert_to_llm,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=get_follow_up_messages,
        )

    async def _run_loop(
        self,
        make_prompts: Callable[[], list[AgentMessage] | None],
        skip_first_steering_poll: bool = False,
    ) -> None:
        """One run, in this task; ``make_prompts`` may refuse its input (a checkpoint first)."""
        config = self._loop_config(skip_first_steering_poll)
        try:
            stream_fn = check_stream_fn(config, self._stream_fn)
            prompts = make_prompts()
        except Exception as exc:  # bad input or an unknown api: refused before anything runs
            refused: Exception | None = exc
        else:
            refused = None
        if refused is not None:
            await trio.lowlevel.checkpoint()
            raise refused
        context = AgentContext(self._system_prompt, self._messages, self._tools)
        run = Run(context, config, self._process, stream_fn)
        active = self._run = _ActiveRun()
        self._streaming = None
        self._error_message = None
        self._stop = None
        try:
            await drive(
                run, prompts, active.abort, on_error=self._fail, on_interrupt=self._interrupted
            )
            if self._undelivered is not None:
                # An abort in the middle of telling agent_end: the run had ended, so
                # nothing closed it; the listeners after the one cut short hear it now.
                error = await self._deliver_undelivered(None)
                if error is not None:
                    raise error
        finally:
            self._streaming = None
            self._pending_tool_calls = {}
            self._undelivered = None
            self._run = None
            active.done.set()

    async def _fail(self, run: Run, error: Exception) -> None:
        """Close a run that failed: every listener hears every closing event.

        What a listener raises meanwhile is noted on ``error`` (which the run
        re-raises), and the next listener is told all the same. A cancellation
        from outside, or ``KeyboardInterrupt``, stops the telling; the state is
        still closed.
        """
        events = run.closing_events("error", f"{type(error).__name__}: {error}")
        try:
            await self._deliver_undelivered(error)
            for event in events:
                self._reduce(event)
                await self._deliver(event, self._listeners, error, closing=True)
        finally:
            for event in events:  # what no listener could be told
                self._reduce(event)

    def _interrupted(self, run: Run, interruption: BaseException) -> None:
        """Close the state of a run cancelled from outside, without calling anyone."""
        self._undelivered = None
        for event in run.closing_events("aborted", ABORTED):
            self._reduce(event)

    def __repr__(self) -> str:
        running = self._run is not None
        return f"<Agent model={self._model.id!r} messages={len(self._messages)} running={running}>"


def _note(error: Exception, text: str) -> None:
    """Record on ``error`` (the exception the run re-raises) a later failure."""
    error.add_note(f"trio_agent: {text}")
