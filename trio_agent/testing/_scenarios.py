"""Scenarios and their player: what a generated run is, and how it is played against the loop.

A :class:`Scenario` is a whole run written down: the scripted model's replies, a
:class:`ToolBehaviour` for every tool call (acted out by the tools of
:func:`scenario_tools`, built with :func:`behaviour_tool`), the hooks that
fail, and what is done to the run while it goes (each an :class:`Injection`:
steer, follow up, abort, cancel from outside, fail a listener).

:func:`run_scenario` plays one with :func:`~trio_agent.run_agent_loop` or an
:class:`~trio_agent.Agent` on the current Trio clock and returns a
:class:`ScenarioResult`: the events, the transcript, what was raised, and a
:class:`Mark` timeline of everything that happened, with its virtual time.
:func:`play` does the same in a fresh ``trio.run`` on virtual time with
Trio's scheduler seeded, and :func:`trace` is what two plays with the same
seed must agree on.

Nothing here imports hypothesis. The strategies that draw scenarios are in
:mod:`trio_agent.testing.strategies`, which re-exports every public name of
this module.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio
import trio.testing

from .._agent import Agent, QueueMode
from .._config import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    BeforeToolCallContext,
    BeforeToolCallResult,
    NextTurn,
    RequestContext,
    RequestUpdate,
    ToolExecution,
    TurnContext,
    TurnDecision,
)
from .._events import AgentEvent, AssistantMessageEvent
from .._json import to_json
from .._loop import run_agent_loop
from .._messages import AgentMessage, AssistantMessage, ToolResult, UserMessage
from .._model import Model
from .._stream import Emit, LlmContext, StreamOptions
from .._tools import AgentTool, ToolUpdate, check_time_limit
from ..providers import faux
from ._checks import EventRecorder, TaskWatcher, describe_task
from ._fuzz import _seed_scheduler

__all__ = [
    "EVENT_TYPES",
    "SCENARIO_TOOLS",
    "BehaviourError",
    "InjectedFailure",
    "Injection",
    "InjectionKind",
    "Mark",
    "Outcome",
    "Scenario",
    "ScenarioResult",
    "Timeline",
    "ToolBehaviour",
    "behaviour_tool",
    "play",
    "run_scenario",
    "scenario_tools",
    "trace",
]


EVENT_TYPES: tuple[str, ...] = (
    "agent_start",
    "turn_start",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "turn_end",
    "agent_end",
)
"""The types of agent events, in grammar order (for injections at the n-th event of a type)."""


# --- the timeline --------------------------------------------------------------------------------


@attrs.frozen
class Mark:
    """One thing that happened during a scenario, at virtual time ``time``.

    ``kind`` is one of: ``event`` (an agent event reached the listener;
    ``detail`` is its type), ``model_call`` (``detail``: its index),
    ``stream`` (the model produced a stream event; ``detail``: its type),
    ``stream_raise`` (the stream function broke its contract), ``tool_start``,
    ``tool_update``, ``tool_end`` (returned), ``tool_raise`` (raised an
    exception), ``tool_cancelled`` (saw ``trio.Cancelled``), ``before_hook``,
    ``after_hook`` (``detail``: the tool-call id), the turn hooks
    ``finish_turn`` (``detail``: what it returns), ``prepare_request``
    (``detail``: the thinking level it sees) and ``prepare_next_turn``
    (``detail``: how many messages it adds), and the injections
    ``steer``, ``follow_up``, ``abort``, ``outer_cancel``,
    ``listener_failure`` (``detail``: the message text or the trigger).
    """

    time: float
    kind: str
    detail: str = ""


Timeline: TypeAlias = list[Mark]


def _mark(timeline: Timeline | None, kind: str, detail: str = "") -> None:
    if timeline is not None:
        timeline.append(Mark(trio.current_time(), kind, detail))


# --- tool behaviours -----------------------------------------------------------------------------

Outcome: TypeAlias = Literal[
    "return", "raise", "raise_group", "hang", "terminate", "interrupt", "error"
]
"""How a tool call ends: return a result; raise an ``Exception`` (``raise``) or an
``ExceptionGroup`` (``raise_group``); wait forever (``hang``); return a result with
``terminate=True``; raise ``KeyboardInterrupt`` (``interrupt``); return a result with
``is_error=True`` that keeps its details and structured content (``error``)."""


class BehaviourError(Exception):
    """What a :class:`ToolBehaviour` raises for the ``raise`` and ``raise_group`` outcomes."""


@attrs.frozen(kw_only=True)
class ToolBehaviour:
    """What one tool call does, on Trio's clock (times in seconds).

    Acted out by :meth:`run`: first ``shield`` seconds in a shielded scope
    (cancellation is ignored meanwhile), then ``duration`` seconds of work,
    split evenly around ``updates`` progress reports (``on_update``), then the
    ``outcome``. When ``trio.Cancelled`` reaches it, it spends ``cleanup``
    seconds in a shielded cleanup and re-raises. It never swallows a
    cancellation, so it ends at most :attr:`grace` seconds after one.
    ``structured``: a result it returns carries :meth:`structured_content`
    (an ``error`` result always does).
    """

    duration: float = 0.0
    outcome: Outcome = "return"
    updates: int = 0
    shield: float = 0.0
    cleanup: float = 0.0
    structured: bool = False

    @property
    def grace(self) -> float:
        """The longest it may run after a cancellation reached it (its shielded time)."""
        return self.shield + self.cleanup

    def result_text(self, tool_call_id: str) -> str:
        """The text of the result it returns (outcomes ``return``, ``terminate`` and ``error``)."""
        return f"refused {tool_call_id}" if self.outcome == "error" else f"ok {tool_call_id}"

    def structured_content(self, tool_call_id: str) -> dict[str, str] | None:
        """The structured content of the result it returns, if any."""
        if self.structured or self.outcome == "error":
            return {"call": tool_call_id}
        return None

    def update_text(self, tool_call_id: str, index: int) -> str:
        """The text of its ``index``-th progress report (from 1)."""
        return f"{tool_call_id} update {index}/{self.updates}"

    def exception(self, tool_call_id: str) -> BaseException:
        """A fresh exception of the kind it raises (``raise``, ``raise_group``, ``interrupt``)."""
        if self.outcome == "raise_group":
            return ExceptionGroup(
                f"failed {tool_call_id}", [BehaviourError(f"inner failure of {tool_call_id}")]
            )
        if self.outcome == "interrupt":
            return KeyboardInterrupt(f"interrupted {tool_call_id}")
        return BehaviourError(f"failed {tool_call_id}")

    async def run(
        self, tool_call_id: str, on_update: ToolUpdate, timeline: Timeline | None = None
    ) -> ToolResult:
        """Act the behaviour out (the body of a tool's ``execute``), recording marks."""
        _mark(timeline, "tool_start", tool_call_id)
        step = self.duration / (self.updates + 1)
        try:
            if self.shield:
                with trio.CancelScope(shield=True):
                    await trio.sleep(self.shield)
            for index in range(1, self.updates + 1):
                await trio.sleep(step)
                _mark(timeline, "tool_update", tool_call_id)
                on_update(ToolResult.text(self.update_text(tool_call_id, index)))
            if self.outcome == "hang":
                await trio.sleep_forever()
            await trio.sleep(step)
        except trio.Cancelled:
            _mark(timeline, "tool_cancelled", tool_call_id)
            if self.cleanup:
                with trio.CancelScope(shield=True):
                    await trio.sleep(self.cleanup)
            raise
        if self.outcome in ("raise", "raise_group", "interrupt"):
            _mark(timeline, "tool_raise", tool_call_id)
            raise self.exception(tool_call_id)
        _mark(timeline, "tool_end", tool_call_id)
        error = self.outcome == "error"
        return ToolResult.text(
            self.result_text(tool_call_id),
            terminate=True if self.outcome == "terminate" else None,
            details={"call": tool_call_id} if error else None,
            structured_content=self.structured_content(tool_call_id),
            is_error=error,
        )


_ARGUMENTS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
}


def behaviour_tool(
    name: str,
    behaviour: ToolBehaviour | Mapping[str, ToolBehaviour],
    *,
    default: ToolBehaviour | None = None,
    parameters: Mapping[str, Any] | None = None,
    execution_mode: Literal["sequential", "parallel"] | None = None,
    timeline: Timeline | None = None,
) -> AgentTool:
    """An :class:`~trio_agent.AgentTool` whose calls act out a :class:`ToolBehaviour`.

    ``behaviour`` is one behaviour for every call, or a mapping from tool-call
    id to behaviour (``default`` for the ids it lacks; a call without either
    fails with ``KeyError``). ``parameters`` defaults to an object schema with
    an optional integer ``n``. Marks go to ``timeline`` if given.
    """

    async def execute(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        if isinstance(behaviour, ToolBehaviour):
            chosen = behaviour
        elif tool_call_id in behaviour:
            chosen = behaviour[tool_call_id]
        elif default is not None:
            chosen = default
        else:
            raise KeyError(f"no behaviour for tool call {tool_call_id!r}")
        return await chosen.run(tool_call_id, on_update, timeline)

    return AgentTool(
        name=name,
        description=f"the {name} tool (a scripted behaviour)",
        parameters=_ARGUMENTS_SCHEMA if parameters is None else parameters,
        execute=execute,
        execution_mode=execution_mode,
    )


SCENARIO_TOOLS: tuple[str, ...] = ("work", "solo", "strict", "missing")
"""The tool names of scenarios: ``work`` (acts its behaviour out), ``solo`` (the same,
with ``execution_mode="sequential"``), ``strict`` (its schema rejects the arguments
scenarios give it) and ``missing`` (no such tool)."""

_STRICT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "string", "maxLength": 0}},
}


def scenario_tools(
    behaviours: Mapping[str, ToolBehaviour], timeline: Timeline | None = None
) -> list[AgentTool]:
    """The tools of :data:`SCENARIO_TOOLS` that exist, acting out ``behaviours`` (by call id)."""
    return [
        behaviour_tool("work", behaviours, timeline=timeline),
        behaviour_tool("solo", behaviours, timeline=timeline, execution_mode="sequential"),
        behaviour_tool("strict", behaviours, timeline=timeline, parameters=_STRICT_SCHEMA),
    ]


# --- scenarios -----------------------------------------------------------------------------------

InjectionKind: TypeAlias = Literal[
    "steer", "follow_up", "abort", "outer_cancel", "listener_failure"
]


class InjectedFailure(Exception):
    """What a scenario's failing listener, failing hook or broken stream raises."""


def _check_trigger(instance: Injection, attribute: attrs.Attribute[Any], value: Any) -> None:
    if (instance.at is None) == (instance.at_event is None):
        raise ValueError("an injection needs exactly one of at= and at_event=")
    if instance.kind == "listener_failure" and instance.at_event is None:
        raise ValueError("a listener failure happens at an event: give at_event=")


@attrs.frozen
class Injection:
    """Something done to a run while it goes.

    ``kind``: ``steer`` / ``follow_up`` (queue a user message), ``abort``
    (the run's abort; ``Agent.abort()``), ``outer_cancel`` (cancel a scope
    around the whole run, as a caller's timeout would), ``listener_failure``
    (the listener raises :class:`InjectedFailure`). When: ``at`` seconds of
    virtual time after the run starts (from another task), or ``at_event =
    (type, n)``: in the listener, when the n-th event (from 1) of that type
    arrives. Exactly one of the two (``ValueError`` otherwise).
    """

    kind: InjectionKind
    at: float | None = attrs.field(default=None, kw_only=True)
    at_event: tuple[str, int] | None = attrs.field(
        default=None, kw_only=True, validator=_check_trigger
    )


def _reply_tuple(value: Sequence[faux.Reply | str]) -> tuple[faux.Reply, ...]:
    return tuple(faux.reply(item) if isinstance(item, str) else item for item in value)


def _injection_tuple(value: Sequence[Injection]) -> tuple[Injection, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Scenario:
    """A whole run to play: what the model replies, what each tool call does, what happens.

    - ``replies``: the scripted model's script, one reply per model call (a ``str``
      is a text reply; a call past its end gets the scripted model's "no more
      scripted responses" error);
    - ``behaviours``: by tool-call id, for the calls to ``work``, ``solo`` and
      ``strict`` (see :data:`SCENARIO_TOOLS`);
    - ``failing_hooks``: by tool-call id, ``"before"`` / ``"after"``: that
      hook raises :class:`InjectedFailure` for that call;
    - ``injections``: see :class:`Injection`;
    - ``tool_execution``, ``steering_mode``, ``follow_up_mode``: as for an
      :class:`~trio_agent.Agent` (the same polls are given to the loop);
    - ``listener_delay``: seconds the listener sleeps at each event (a slow
      listener), before it does what the injections say;
    - ``tool_time_limit``, ``max_parallel_tools``: as for an
      :class:`~trio_agent.Agent` (a call past the limit is answered with
      :meth:`timeout_text`); a ``tool_time_limit`` that is not a positive
      finite number is a ``ValueError`` here;
    - ``finish_turn``: ``None`` (no such hook), or what the run's
      ``finish_turn`` returns at each of its calls, in order (``None`` past
      the end);
    - ``prepare_request``: whether the run has a ``prepare_request`` hook
      (it asks for the thinking level ``"low"``);
    - ``next_turn_messages``: ``None`` (no ``prepare_next_turn``), or how
      many user messages each call of the run's ``prepare_next_turn`` adds
      (none past the end).

    Each of these hooks takes a millisecond of virtual time.
    """

    replies: tuple[faux.Reply, ...] = attrs.field(converter=_reply_tuple)
    behaviours: Mapping[str, ToolBehaviour] = attrs.field(factory=dict)
    failing_hooks: Mapping[str, Literal["before", "after"]] = attrs.field(factory=dict)
    injections: tuple[Injection, ...] = attrs.field(default=(), converter=_injection_tuple)
    tool_execution: ToolExecution = "parallel"
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "all"
    listener_delay: float = 0.0
    prompt: str = "go"
    tool_time_limit: float | None = attrs.field(default=None)
    max_parallel_tools: int | None = None
    finish_turn: tuple[TurnDecision | None, ...] | None = None
    prepare_request: bool = False
    next_turn_messages: tuple[int, ...] | None = None

    @tool_time_limit.validator
    def _check_tool_time_limit(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_time_limit(value, "tool_time_limit")

    def timeout_text(self, tool_name: str) -> str:
        """The result of a call to ``tool_name`` cut short by ``tool_time_limit``."""
        assert self.tool_time_limit is not None
        return f"Tool '{tool_name}' did not finish within {self.tool_time_limit:g} s"

    @property
    def hangs(self) -> bool:
        """Whether some tool call would wait forever if nothing ended it."""
        return any(b.outcome == "hang" for b in self.behaviours.values())


# --- playing a scenario --------------------------------------------------------------------------


@attrs.define(eq=False)
class ScenarioResult:
    """What one play of a :class:`Scenario` did (see :func:`run_scenario`)."""

    scenario: Scenario
    via: Literal["loop", "agent"]
    events: list[AgentEvent]
    """Every event the listener received, in order."""
    event_times: list[float]
    """The virtual time of each event."""
    timeline: Timeline
    """Everything that happened, in order (see :class:`Mark`)."""
    model: faux.ScriptedModel
    """The scripted model: ``model.calls`` is every call, with its context and options."""
    streams: list[list[AssistantMessageEvent]]
    """The stream events each model call produced, in order (what the loop was sent)."""
    injected: dict[str, list[AgentMessage]]
    """The messages queued by ``steer`` and ``follow_up`` injections, in order."""
    queued: dict[str, list[AgentMessage]] = attrs.Factory(dict)
    """The messages still queued when the run ended."""
    transcript: list[AgentMessage] | None = None
    """The loop's returned messages (None if it raised), or the agent's whole transcript."""
    returned: bool = False
    """The run returned normally."""
    raised: BaseException | None = None
    """What the run raised (a ``trio.Cancelled`` from the outer cancellation included)."""
    outer_cancelled: bool = False
    """The outer cancel scope caught the cancellation it asked for."""
    timed_out: bool = False
    """The run was still going after ``max_time`` seconds and was cancelled."""
    started_at: float = 0.0
    ended_at: float = 0.0
    leaked: list[str] = attrs.Factory(list)
    """Tasks the run started that were still alive when it ended."""
    agent: Agent | None = None
    prepared: list[AgentMessage] = attrs.Factory(list)
    """The messages the scenario's ``prepare_next_turn`` returned, in order."""

    def marks(self, kind: str, detail: str | None = None) -> list[Mark]:
        """The marks of one kind (and detail), in order."""
        return [
            m for m in self.timeline if m.kind == kind and (detail is None or m.detail == detail)
        ]

    def first(self, kind: str, detail: str | None = None) -> int | None:
        """The index in :attr:`timeline` of the first mark of this kind, or None."""
        for index, mark in enumerate(self.timeline):
            if mark.kind == kind and (detail is None or mark.detail == detail):
                return index
        return None


_HOOK_TIME = 0.001  # seconds of virtual time each turn hook of a scenario takes


def _fresh(reply: faux.Reply) -> faux.Reply:
    """The reply with a new exception to raise, so that no play shares one with another."""
    if reply.raises is None:
        return reply
    error = reply.raises
    return attrs.evolve(reply, raises=type(error)(*error.args))


async def run_scenario(
    scenario: Scenario,
    *,
    via: Literal["loop", "agent"] = "loop",
    api_key: str | None = None,
    max_time: float = 3600.0,
) -> ScenarioResult:
    """Play ``scenario`` on the current Trio clock and return what happened.

    ``via="loop"`` runs :func:`~trio_agent.run_agent_loop` with the scenario's
    queues as the steering / follow-up polls; ``via="agent"`` runs
    ``Agent.prompt`` (injections use ``steer``, ``follow_up`` and ``abort``
    of the agent). ``api_key`` is given to the run's configuration. Nothing
    raised by the run escapes: it is in :attr:`ScenarioResult.raised`. A run
    still going after ``max_time`` seconds is cancelled
    (:attr:`ScenarioResult.timed_out`). Use virtual time
    (``MockClock(autojump_threshold=0)``): tools and paced replies sleep.
    """
    timeline: Timeline = []
    events: list[AgentEvent] = []
    event_times: list[float] = []
    streams: list[list[AssistantMessageEvent]] = []
    model = faux.model([_fresh(reply) for reply in scenario.replies])
    abort = trio.CancelScope()
    outer = trio.CancelScope()
    agent: Agent | None = None
    queues: dict[str, list[AgentMessage]] = {"steer": [], "follow_up": []}
    result = ScenarioResult(
        scenario=scenario,
        via=via,
        events=events,
        event_times=event_times,
        timeline=timeline,
        model=model,
        streams=streams,
        injected={"steer": [], "follow_up": []},
    )
    counts: dict[str, int] = {}
    messages_made = 0

    def inject(injection: Injection, trigger: str) -> None:
        nonlocal messages_made
        kind = injection.kind
        if kind in ("steer", "follow_up"):
            messages_made += 1
            message = UserMessage.text(f"{kind} {messages_made}")
            result.injected[kind].append(message)
            _mark(timeline, kind, f"{kind} {messages_made}")
            if agent is None:
                queues[kind].append(message)
            elif kind == "steer":
                agent.steer(message)
            else:
                agent.follow_up(message)
        elif kind == "abort":
            if agent is None:
                abort.cancel()
                _mark(timeline, "abort", trigger)
            elif agent.state.is_streaming:  # abort() is a no-op when idle
                agent.abort()
                _mark(timeline, "abort", trigger)
        elif kind == "outer_cancel":
            outer.cancel()
            _mark(timeline, "outer_cancel", trigger)
        else:
            _mark(timeline, "listener_failure", trigger)
            raise InjectedFailure(f"the listener failed at {trigger}")

    async def on_event(event: AgentEvent) -> None:
        _mark(timeline, "event", event.type)
        event_times.append(trio.current_time())
        if scenario.listener_delay:
            await trio.sleep(scenario.listener_delay)
        counts[event.type] = counts.get(event.type, 0) + 1
        here = (event.type, counts[event.type])
        for injection in scenario.injections:
            if injection.at_event == here:
                inject(injection, f"{here[0]} #{here[1]}")

    recorder = EventRecorder(on_event)
    recorder.events = events

    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions, emit: Emit
    ) -> AssistantMessage:
        produced: list[AssistantMessageEvent] = []
        streams.append(produced)
        _mark(timeline, "model_call", str(len(streams) - 1))

        async def logged(event: AssistantMessageEvent) -> None:
            produced.append(event)
            _mark(timeline, "stream", event.type)
            await emit(event)

        try:
            return await faux.stream(model, context, options, logged)
        except InjectedFailure:
            _mark(timeline, "stream_raise", str(len(streams) - 1))
            raise

    async def before_tool_call(context: BeforeToolCallContext) -> BeforeToolCallResult | None:
        call_id = context.tool_call.id
        _mark(timeline, "before_hook", call_id)
        if scenario.failing_hooks.get(call_id) == "before":
            raise InjectedFailure(f"before_tool_call failed for {call_id}")
        return None

    async def after_tool_call(context: AfterToolCallContext) -> AfterToolCallResult | None:
        call_id = context.tool_call.id
        _mark(timeline, "after_hook", call_id)
        if scenario.failing_hooks.get(call_id) == "after":
            raise InjectedFailure(f"after_tool_call failed for {call_id}")
        return None

    async def finish_turn(turn: TurnContext) -> TurnDecision | None:
        decisions = scenario.finish_turn or ()
        index = len(result.marks("finish_turn"))
        decision = decisions[index] if index < len(decisions) else None
        _mark(timeline, "finish_turn", str(decision))
        await trio.sleep(_HOOK_TIME)
        return decision

    async def prepare_request(request: RequestContext) -> RequestUpdate:
        _mark(timeline, "prepare_request", request.thinking_level)
        await trio.sleep(_HOOK_TIME)
        return RequestUpdate(thinking_level="low")

    async def prepare_next_turn(turn: TurnContext) -> NextTurn:
        counts = scenario.next_turn_messages or ()
        index = len(result.marks("prepare_next_turn"))
        count = counts[index] if index < len(counts) else 0
        _mark(timeline, "prepare_next_turn", str(count))
        await trio.sleep(_HOOK_TIME)
        made = [UserMessage.text(f"next {index}.{k}") for k in range(count)]
        result.prepared += made
        return NextTurn(messages=made)

    hooks: dict[str, Any] = {}
    if scenario.finish_turn is not None:
        hooks["finish_turn"] = finish_turn
    if scenario.prepare_request:
        hooks["prepare_request"] = prepare_request
    if scenario.next_turn_messages is not None:
        hooks["prepare_next_turn"] = prepare_next_turn

    def take(kind: str, mode: QueueMode) -> list[AgentMessage]:
        queue = queues[kind]
        taken = list(queue) if mode == "all" else queue[:1]
        del queue[: len(taken)]
        return taken

    async def poll_steering() -> list[AgentMessage]:
        return take("steer", scenario.steering_mode)

    async def poll_follow_ups() -> list[AgentMessage]:
        return take("follow_up", scenario.follow_up_mode)

    tools = scenario_tools(scenario.behaviours, timeline)
    if via == "agent":
        agent = Agent(
            model,
            tools=tools,
            stream_fn=stream_fn,
            api_key=api_key,
            before_tool_call=before_tool_call,
            after_tool_call=after_tool_call,
            tool_execution=scenario.tool_execution,
            tool_time_limit=scenario.tool_time_limit,
            max_parallel_tools=scenario.max_parallel_tools,
            steering_mode=scenario.steering_mode,
            follow_up_mode=scenario.follow_up_mode,
            **hooks,
        )
        agent.subscribe(recorder)
        result.agent = agent
    config = AgentLoopConfig(
        model=model,
        api_key=api_key,
        tool_execution=scenario.tool_execution,
        tool_time_limit=scenario.tool_time_limit,
        max_parallel_tools=scenario.max_parallel_tools,
        get_steering_messages=poll_steering,
        get_follow_up_messages=poll_follow_ups,
        before_tool_call=before_tool_call,
        after_tool_call=after_tool_call,
        **hooks,
    )

    async def at_time(injection: Injection, when: float) -> None:
        await trio.sleep_until(when)
        inject(injection, f"{injection.at:g} s")

    watcher = TaskWatcher()
    with trio.move_on_after(max_time) as guard:
        await trio.lowlevel.checkpoint()  # the guard's scope always has a cancel point
        async with trio.open_nursery() as timers:
            result.started_at = start = trio.current_time()
            for injection in scenario.injections:
                if injection.at is not None:
                    timers.start_soon(at_time, injection, start + injection.at)
            try:
                with watcher.watching(), outer:
                    try:
                        if agent is not None:
                            await agent.prompt(scenario.prompt)
                        else:
                            result.transcript = await run_agent_loop(
                                [UserMessage.text(scenario.prompt)],
                                AgentContext(tools=tools),
                                config,
                                recorder,
                                abort,
                                stream_fn,
                            )
                        result.returned = True
                    # Whatever the run raised is the result: a stray Cancelled or a
                    # KeyboardInterrupt included. Only the cancellation of the outer
                    # scope (or of the guard) goes on, to be caught by its scope.
                    except BaseException as exc:  # noqa: ASYNC103  # recorded, re-raised below if not ours
                        result.raised = exc
                        if isinstance(exc, trio.Cancelled) and (
                            outer.cancel_called or guard.cancel_called
                        ):
                            raise
                result.outer_cancelled = outer.cancelled_caught
            finally:
                result.ended_at = trio.current_time()
                result.leaked = [describe_task(task) for task in watcher.alive]
                timers.cancel_scope.cancel()
    result.timed_out = guard.cancelled_caught
    if agent is not None:
        result.transcript = list(agent.state.messages)
        result.queued = {
            "steer": list(agent._steering.items),
            "follow_up": list(agent._follow_ups.items),
        }
    else:
        result.queued = {kind: list(queue) for kind, queue in queues.items()}
    return result


def play(
    scenario: Scenario,
    *,
    seed: int = 0,
    via: Literal["loop", "agent"] = "loop",
    api_key: str | None = None,
) -> ScenarioResult:
    """Play ``scenario`` in a fresh ``trio.run`` on virtual time, from a seeded scheduler.

    The synchronous form of :func:`run_scenario` for a hypothesis test: Trio
    runs the tasks that are ready together in a random order (by design);
    seeding that order makes every play of the same scenario and seed the
    same, so that a failing example replays exactly (see :func:`trace`).
    """
    _seed_scheduler(seed)
    result: ScenarioResult = trio.run(
        functools.partial(run_scenario, scenario, via=via, api_key=api_key),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    return result


def _strip_timestamps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_timestamps(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_strip_timestamps(v) for v in value]
    return value


def trace(result: ScenarioResult) -> list[Any]:
    """What must be the same every time a scenario is played with the same scheduler seed:
    each event (as JSON, without wall-clock timestamps) with its virtual time, the
    timeline, and how the run ended."""
    events = [
        (time, _strip_timestamps(to_json(event)))
        for time, event in zip(result.event_times, result.events, strict=True)
    ]
    raised = result.raised
    # Not repr(): a Cancelled names the task that cancelled, with its address.
    what = None if raised is None else type(raised).__name__
    if raised is not None and not isinstance(raised, trio.Cancelled):
        what = f"{what}: {raised}"
    ending = (result.returned, what, result.outer_cancelled, result.ended_at)
    return [events, [attrs.astuple(mark) for mark in result.timeline], ending]
