"""Invariant 11 (queues lose nothing): one ``Agent`` driven by a hypothesis state machine.

The machine keeps one :class:`~trio_agent.Agent` for a whole example and does
random things to it: runs (``prompt``, ``continue_``), and between runs
``steer`` / ``follow_up``, the ``clear_*`` methods, changes of
``steering_mode`` / ``follow_up_mode``, ``abort`` (a no-op when idle),
``reset``, ``subscribe`` / ``unsubscribe`` of recording listeners, and idle
virtual time. Each run is scripted with replies of the faux model — text,
and tool calls to ``nap``, a tool that sleeps a few virtual milliseconds — and
comes with things to do *during* it: steer, follow up, clear a queue, change
a mode, abort (and, in the second machine, cancel from outside or fail a
listener), each at a virtual time (from a task of the run's nursery) or when
the n-th event of a type arrives (from a listener).

Hypothesis rules are sync and Trio needs a run: every rule that runs the
agent calls ``trio.run`` once on a ``MockClock(autojump_threshold=0)``.
Between rules the agent is idle, and the same ``Agent`` object is used by
every ``trio.run`` of an example: it is made outside any of them, which
checks that it holds nothing bound to one run between runs.

The model of the queues is pure: for each queue, the messages enqueued (each
a user message with a unique text), minus those cleared while still queued.
After every rule: (the queue's messages found in ``agent.state.messages``, in
transcript order) + (what is still queued) == the model's list, and no
message is in the transcript twice. After every run: nothing that was queued
when the run was aborted, or queued after that, was delivered by it; every
listener's events follow the grammar; the transcript answers every tool
call; the agent is not streaming and has no pending tool call; and no task
started during the run is still alive.

The tests at the end are the smallest cases of what the machines found, each
failing until the bug it names is fixed.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests._support import examples, make_tool
from trio_agent import (
    Agent,
    AgentEvent,
    AgentListener,
    AgentMessage,
    AssistantMessage,
    MessageStart,
    Model,
    QueueMode,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolUpdate,
    UnknownApiError,
    UserMessage,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript

MS = 0.001
MODES: tuple[QueueMode, ...] = ("one-at-a-time", "all")
TOOL_EXECUTIONS: tuple[ToolExecution, ...] = ("parallel", "sequential")
QUEUES = ("steer", "follow")  # the two queues; also the prefixes of their messages' texts
EVENT_TYPES = [
    "agent_start",
    "turn_start",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_end",
    "turn_end",
    "agent_end",
]


async def nap(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    await trio.sleep(args["ms"] * MS)
    return ToolResult.text(f"slept {args['ms']} ms")


NAP = make_tool("nap", nap)


def text_of(message: AgentMessage) -> str | None:
    """The text of a user message (None for any other message)."""
    if not isinstance(message, UserMessage):
        return None
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


class ListenerFailure(Exception):
    pass


class Watch(trio.abc.Instrument):
    """The tasks spawned while it is installed, and not yet exited."""

    def __init__(self) -> None:
        self.alive: set[trio.lowlevel.Task] = set()

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.alive.add(task)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.alive.discard(task)


# -- what is done during a run ----------------------------------------------------------------


@attrs.frozen
class Action:
    """One thing done to the agent while it runs.

    ``kind``: steer, follow_up (a ``str``, or a ``UserMessage`` when
    ``as_text`` is false), abort, clear_steering, clear_follow_ups, clear_all,
    steering_mode / follow_up_mode (set to ``mode``), and, in the machine with
    interruptions, outer_cancel (the caller's scope around the run) and fail
    (the listener raises).
    """

    kind: str
    mode: QueueMode = "one-at-a-time"
    as_text: bool = True


@attrs.frozen
class During:
    """An action, at a virtual time in ms from the start, or at the n-th event of a type."""

    when: int | tuple[str, int]
    action: Action


enqueue = st.builds(Action, kind=st.sampled_from(["steer", "follow_up"]), as_text=st.booleans())
queue_actions = st.one_of(
    enqueue,
    enqueue,
    enqueue,
    st.builds(Action, kind=st.just("abort")),
    st.builds(Action, kind=st.just("abort")),
    st.builds(Action, kind=st.sampled_from(["clear_steering", "clear_follow_ups", "clear_all"])),
    st.builds(
        Action,
        kind=st.sampled_from(["steering_mode", "follow_up_mode"]),
        mode=st.sampled_from(MODES),
    ),
)
times = st.integers(0, 60)
# The queues are polled after the prompts' message_end and after each
# turn_end (design.md#the-order-of-events): triggers favour those events.
events = st.tuples(
    st.sampled_from([*EVENT_TYPES, "message_end", "turn_end", "turn_end"]), st.integers(1, 4)
)
queue_during = st.builds(During, when=times | events, action=queue_actions)
interrupting_during = st.one_of(
    queue_during,
    queue_during,
    st.builds(During, when=times | events, action=st.just(Action("abort"))),
    st.builds(During, when=times | events, action=st.just(Action("outer_cancel"))),
    st.builds(During, when=events, action=st.just(Action("fail"))),
)


# -- the script of the faux model --------------------------------------------------------------


@attrs.frozen
class Say:
    """A text reply, streamed in chunks of ``chunk`` characters, ``delay_ms`` apart."""

    text: str
    chunk: int = 0
    delay_ms: int = 0

    def reply(self) -> faux.Reply:
        return faux.reply(self.text, chunk_size=self.chunk, chunk_delay=self.delay_ms * MS)


@attrs.frozen
class Naps:
    """A reply calling ``nap`` once per item (each sleeping that many ms)."""

    ms: tuple[int, ...]

    def reply(self) -> faux.Reply:
        return faux.reply(*(faux.tool_call("nap", {"ms": ms}) for ms in self.ms))


@attrs.frozen
class Fails:
    """A reply that ends with ``stop_reason="error"`` (a provider failure)."""

    def reply(self) -> faux.Reply:
        return faux.error("provider failed")


says = st.builds(
    Say,
    st.text("abc", min_size=1, max_size=4),
    st.integers(0, 2),
    st.sampled_from([0, 0, 2]),
)
naps = st.builds(
    Naps, st.lists(st.sampled_from([0, 1, 5, 10, 30]), min_size=1, max_size=3).map(tuple)
)
# Replies for a run: a few with tool calls, then one that ends it. They are
# added to the model's script: a run that makes fewer calls (it was aborted)
# leaves some to the next, and one that makes more (it was steered) ends with
# the faux model's "no more scripted responses" error.
scripts = st.tuples(st.lists(naps, max_size=3), st.one_of(says, says, st.just(Fails()))).map(
    lambda drawn: [*drawn[0], drawn[1]]
)


@attrs.define
class Played:
    """What one ``trio.run`` of the agent did."""

    refused: bool = False  # continue_() raised its ValueError: no run
    failed: bool = False  # the listener raised
    reraised: bool = False  # prompt() / continue_() re-raised the listener's exception
    outer_cancelled: bool = False
    leaked: set[trio.lowlevel.Task] = attrs.Factory(set)


class QueueMachine(RuleBasedStateMachine):
    """One agent, random runs and queue operations, checked against a model of the queues."""

    DURING: ClassVar[st.SearchStrategy[list[During]]] = st.lists(queue_during, max_size=6)

    def __init__(self) -> None:
        super().__init__()
        self.model = faux.model()
        # Made outside any trio.run and kept across them (see the module docs);
        # make_agent() replaces it with one configured by hypothesis.
        self.agent = Agent(self.model, tools=[NAP])
        self.expected: dict[str, list[str]] = {queue: [] for queue in QUEUES}
        self.prompted: list[str] = []
        self.counter = 0
        self.listeners: dict[int, tuple[EventRecorder, Callable[[], None]]] = {}
        # Once a run is aborted: what was queued then or is queued later, which
        # the run must leave queued (invariant 11, design.md#steering-and-follow-ups).
        self.held: set[str] | None = None

    @initialize(
        tool_execution=st.sampled_from(TOOL_EXECUTIONS),
        steering_mode=st.sampled_from(MODES),
        follow_up_mode=st.sampled_from(MODES),
    )
    def make_agent(
        self, tool_execution: ToolExecution, steering_mode: QueueMode, follow_up_mode: QueueMode
    ) -> None:
        self.agent = Agent(
            self.model,
            tools=[NAP],
            tool_execution=tool_execution,
            steering_mode=steering_mode,
            follow_up_mode=follow_up_mode,
        )

    # -- the model of the queues ---------------------------------------------------------------

    def queued(self, queue: str) -> list[str]:
        """The texts still queued, in order.

        No public API lists a queue (there is only ``has_queued_messages()``),
        so this reads the agent's private lists.
        """
        items = self.agent._steering.items if queue == "steer" else self.agent._follow_ups.items
        return [text_of(message) or repr(message) for message in items]

    def new_text(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def enqueue(self, queue: str, as_text: bool) -> None:
        text = self.new_text(queue)
        message: str | UserMessage = text if as_text else UserMessage.text(text)
        self.expected[queue].append(text)
        if self.held is not None:
            self.held.add(text)
        if queue == "steer":
            self.agent.steer(message)
        else:
            self.agent.follow_up(message)

    def forget_queued(self, queue: str) -> None:
        """Take what is queued now out of the model, before it is cleared.

        The model's list is: delivered, then taken by the run but not yet
        delivered (during a run), then queued — so what is queued must be its
        tail, in order.
        """
        queued = self.queued(queue)
        model = self.expected[queue]
        kept = len(model) - len(queued)
        assert queued == model[kept:]
        del model[kept:]

    def act(self, action: Action, outer: trio.CancelScope | None = None) -> bool:
        """Do ``action`` (sync: from a rule, a task or a listener); True for ``fail``."""
        agent = self.agent
        kind = action.kind
        if kind == "steer":
            self.enqueue("steer", action.as_text)
        elif kind == "follow_up":
            self.enqueue("follow", action.as_text)
        elif kind == "abort":
            if agent.state.is_streaming and self.held is None:
                self.held = {*self.queued("steer"), *self.queued("follow")}
            agent.abort()
        elif kind == "clear_steering":
            self.forget_queued("steer")
            agent.clear_steering_queue()
        elif kind == "clear_follow_ups":
            self.forget_queued("follow")
            agent.clear_follow_up_queue()
        elif kind == "clear_all":
            self.forget_queued("steer")
            self.forget_queued("follow")
            agent.clear_all_queues()
        elif kind == "steering_mode":
            agent.steering_mode = action.mode
            assert action.mode == agent.steering_mode
        elif kind == "follow_up_mode":
            agent.follow_up_mode = action.mode
            assert action.mode == agent.follow_up_mode
        elif kind == "outer_cancel":
            assert outer is not None
            outer.cancel()
        elif kind == "fail":
            return True
        else:
            raise AssertionError(f"unknown action {kind!r}")
        return False

    @invariant()
    def queues_lose_nothing(self) -> None:
        transcript = list(self.agent.state.messages)
        assert len(transcript) == len({id(message) for message in transcript})
        texts = [text for text in map(text_of, transcript) if text is not None]
        assert len(texts) == len(set(texts))
        for queue in QUEUES:
            delivered = [text for text in texts if text.startswith(queue + "-")]
            assert self.expected[queue] == delivered + self.queued(queue)
        assert self.prompted == [text for text in texts if text.startswith("prompt-")]
        assert bool(self.queued("steer") or self.queued("follow")) == (
            self.agent.has_queued_messages()
        )

    # -- between runs --------------------------------------------------------------------------

    @rule(action=queue_actions)
    def queue_operation(self, action: Action) -> None:
        """steer, follow_up, a clear_*, a mode change, or abort (a no-op: the agent is idle)."""
        self.act(action)
        assert not self.agent.state.is_streaming

    @rule()
    def reset(self) -> None:
        self.agent.reset()
        for queue in QUEUES:
            self.expected[queue] = []
        self.prompted = []
        assert (list(self.agent.state.messages), self.agent.state.error_message) == ([], None)

    @rule()
    def subscribe(self) -> None:
        recorder = EventRecorder()
        self.counter += 1
        self.listeners[self.counter] = (recorder, self.agent.subscribe(recorder))

    @precondition(lambda self: bool(self.listeners))
    @rule(data=st.data(), twice=st.booleans())
    def unsubscribe(self, data: st.DataObject, twice: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.listeners)), label="listener")
        _, unsubscribe = self.listeners.pop(key)
        unsubscribe()
        if twice:  # idempotent
            unsubscribe()

    @rule(ms=st.integers(0, 1000))
    def idle_for(self, ms: int) -> None:
        """Virtual time passes while the agent is idle: nothing happens to it."""
        before = (list(self.agent.state.messages), self.queued("steer"), self.queued("follow"))
        watch = Watch()

        async def idle() -> None:
            trio.lowlevel.add_instrument(watch)
            await trio.sleep(ms * MS)
            await self.agent.wait_for_idle()
            trio.lowlevel.remove_instrument(watch)

        trio.run(idle, clock=trio.testing.MockClock(autojump_threshold=0))
        after = (list(self.agent.state.messages), self.queued("steer"), self.queued("follow"))
        assert (before, set()) == (after, watch.alive)

    # -- runs ----------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        script=scripts,
        shape=st.sampled_from(["text", "message", "list"]),
        seed=st.integers(0, 2**16),
    )
    def prompt(
        self, data: st.DataObject, script: list[Say | Naps | Fails], shape: str, seed: int
    ) -> None:
        during = data.draw(self.DURING, label="during")
        texts = [self.new_text("prompt") for _ in range(2 if shape == "list" else 1)]
        prompt: str | UserMessage | list[AgentMessage]
        if shape == "text":
            prompt = texts[0]
        elif shape == "message":
            prompt = UserMessage.text(texts[0])
        else:
            prompt = [UserMessage.text(text) for text in texts]
        self.prompted.extend(texts)

        async def start() -> None:
            await self.agent.prompt(prompt)

        self.run(start, script, during, seed)

    def continue_refusal(self) -> str | None:
        """Why ``continue_()`` would refuse to run now (None: it would run)."""
        transcript = self.agent.state.messages
        if not transcript:
            return "No messages to continue from"
        if transcript[-1].role == "assistant" and not self.agent.has_queued_messages():
            return "Cannot continue from message role: assistant"
        return None

    @precondition(lambda self: self.continue_refusal() is None)
    @rule(data=st.data(), script=scripts, seed=st.integers(0, 2**16))
    def continue_(self, data: st.DataObject, script: list[Say | Naps | Fails], seed: int) -> None:
        during = data.draw(self.DURING, label="during")
        self.run(self.start_continue, script, during, seed)

    @precondition(lambda self: self.continue_refusal() is not None)
    @rule()
    def continue_refused(self) -> None:
        self.run(self.start_continue, [], [], 0)

    async def start_continue(self) -> None:
        # Decided when the call is made: an action at 0 ms may have changed the queues.
        refusal = self.continue_refusal()
        if refusal is None:
            await self.agent.continue_()
            return
        with pytest.raises(ValueError, match=f"^{re.escape(refusal)}$"):
            await self.agent.continue_()
        raise Refused

    def run(
        self,
        start: Callable[[], Awaitable[None]],
        script: list[Say | Naps | Fails],
        during: list[During],
        seed: int,
    ) -> None:
        self.model.add(*(spec.reply() for spec in script))
        for recorder, _ in self.listeners.values():
            recorder.events.clear()
        # Trio runs the tasks that are ready together in a random order; a
        # seeded order makes the example replay exactly (hypothesis needs it).
        trio._core._run._r.seed(seed)
        before = len(self.agent.state.messages)
        self.held = None
        played: Played = trio.run(
            self.play, start, during, clock=trio.testing.MockClock(autojump_threshold=0)
        )
        state = self.agent.state
        added = {text_of(message) for message in state.messages[before:]}
        held: set[str] = self.held or set()
        self.held = None
        assert sorted(held & added) == []  # queued at the abort, or after it: still queued
        for recorder, _ in self.listeners.values():
            if played.refused:
                assert recorder.events == []
            else:
                check_event_grammar(recorder.events, complete=not played.outer_cancelled)
        check_transcript(state.messages)
        assert played.failed == played.reraised
        assert (
            state.is_streaming,
            state.streaming_message,
            state.pending_tool_calls,
            played.leaked,
        ) == (False, None, frozenset(), set())

    async def play(self, start: Callable[[], Awaitable[None]], during: list[During]) -> Played:
        played = Played()
        outer = trio.CancelScope()
        seen: dict[str, int] = {}
        failure = ListenerFailure("listener failed")

        async def on_event(event: AgentEvent) -> None:
            seen[event.type] = seen.get(event.type, 0) + 1
            fail = False
            for item in during:
                if item.when == (event.type, seen[event.type]):
                    fail = self.act(item.action, outer) or fail
            if fail and not played.failed:
                played.failed = True
                raise failure

        async def at_time(item: During) -> None:
            assert isinstance(item.when, int)
            await trio.sleep(item.when * MS)
            self.act(item.action, outer)

        unsubscribe = self.agent.subscribe(on_event)
        watch = Watch()
        try:
            async with trio.open_nursery() as nursery:
                for item in during:
                    if isinstance(item.when, int):
                        nursery.start_soon(at_time, item)
                await trio.testing.wait_all_tasks_blocked()
                trio.lowlevel.add_instrument(watch)
                try:
                    with outer:
                        await start()
                except Refused:
                    played.refused = True
                except ListenerFailure as exc:
                    played.reraised = exc is failure
                finally:
                    trio.lowlevel.remove_instrument(watch)
                played.outer_cancelled = outer.cancelled_caught
                played.leaked = set(watch.alive)
                nursery.cancel_scope.cancel()
        finally:
            unsubscribe()
        return played


class Refused(Exception):
    """continue_() refused, as expected."""


class InterruptionMachine(QueueMachine):
    """The same, with outer cancellations and failing listeners during runs."""

    DURING = st.lists(interrupting_during, max_size=6)


# The repository's "ci" profile asks for 1,000 examples per test. An example
# here is up to 30 rules, most of them a whole trio.run (about 0.7 ms each),
# so the numbers are set per test: 600 examples of up to 30 steps take about
# 10 s, and 1,000 of up to 10 (the interruptions need many short runs more
# than long histories) about 7 s. The "explain" phase is left out: it traces
# every line while shrinking, which makes each trio.run five times slower and
# a shrink last minutes.
NO_EXPLAIN = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]
STATEFUL = settings(examples(0.6), stateful_step_count=30, phases=NO_EXPLAIN)
INTERRUPTED = settings(examples(1.0), stateful_step_count=10, phases=NO_EXPLAIN)


def test_queues_lose_nothing() -> None:
    run_state_machine_as_test(QueueMachine, settings=STATEFUL)


def test_queues_lose_nothing_when_runs_are_cancelled_or_fail() -> None:
    run_state_machine_as_test(InterruptionMachine, settings=INTERRUPTED)


# -- the smallest cases of what the machines found ---------------------------------------------


def queued_texts(agent: Agent) -> tuple[list[str | None], list[str | None]]:
    """The texts still queued (private lists: no public API lists a queue)."""
    return (
        [text_of(message) for message in agent._steering.items],
        [text_of(message) for message in agent._follow_ups.items],
    )


def delivered(agent: Agent) -> list[str | None]:
    return [text_of(message) for message in agent.state.messages if message.role == "user"]


async def test_an_abort_in_the_last_turn_end_leaves_a_queued_follow_up_queued() -> None:
    # design.md#the-agents-rules and invariant 11: messages still queued when a run is aborted
    # stay queued; trio_agent/_loop.py's docstring: "an abort in the last
    # turn_end just ends the run. Queues are not polled after an abort". Today
    # the follow-up is taken and delivered into a synthetic aborted turn that
    # the model never sees.
    agent = Agent(faux.model(["hello"]))
    agent.follow_up("later")

    async def abort_at_turn_end(event: AgentEvent) -> None:
        if event.type == "turn_end":
            agent.abort()

    agent.subscribe(abort_at_turn_end)
    await agent.prompt("go")
    assert (delivered(agent), queued_texts(agent)) == (["go"], ([], ["later"]))


async def test_an_abort_in_a_turn_end_leaves_queued_steering_queued(
    autojump_clock: trio.abc.Clock,
) -> None:
    # The same for steering, polled after each turn_end: the abort during the
    # tool turn's turn_end must leave "hold on" queued for the next run.
    agent = Agent(faux.model([faux.reply(faux.tool_call("nap", {"ms": 5})), "hello"]), tools=[NAP])

    async def steer_then_abort(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            agent.steer("hold on")
        if event.type == "turn_end":
            agent.abort()

    agent.subscribe(steer_then_abort)
    await agent.prompt("go")
    assert (delivered(agent), queued_texts(agent)) == (["go"], (["hold on"], []))


async def test_continue_refused_for_an_unknown_api_keeps_the_steering_it_took() -> None:
    # continue_() takes the queued steering message as its prompt before
    # _run_loop looks the model's api up; the refusal drops the message.
    agent = Agent(Model(id="m", api="no-such-api"))
    agent.replace_messages([UserMessage.text("go"), AssistantMessage(content=(TextContent("hi"),))])
    agent.steer("more")
    with pytest.raises(UnknownApiError):
        await agent.continue_()
    assert queued_texts(agent) == (["more"], [])


def steered_then_interrupted(agent: Agent, interrupt: Callable[[], None]) -> AgentListener:
    """A listener: steer during the tool turn, abort at the next turn_start (the
    steering message was taken), interrupt when that message starts."""

    async def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            agent.steer("hold on")
        elif event.type == "turn_start" and [m.role for m in agent.state.messages][-1:] == [
            "toolResult"
        ]:
            agent.abort()
        elif isinstance(event, MessageStart) and text_of(event.message) == "hold on":
            interrupt()

    return listener


async def test_an_outer_cancellation_during_the_closing_of_an_abort_keeps_the_steering(
    autojump_clock: trio.abc.Clock,
) -> None:
    # design.md#abort-and-cancellation: a cancellation from outside closes the agent's state (every
    # started message kept, every call answered). When it comes while the
    # closing events of an abort are delivered, it must close the state too:
    # the steering message the run had taken is kept in the transcript.
    agent = Agent(faux.model([faux.reply(faux.tool_call("nap", {"ms": 5})), "hello"]), tools=[NAP])
    with trio.CancelScope() as outer:
        agent.subscribe(steered_then_interrupted(agent, outer.cancel))
        await agent.prompt("go")
    assert (outer.cancelled_caught, delivered(agent), queued_texts(agent)) == (
        True,
        ["go", "hold on"],
        ([], []),
    )


async def test_a_listener_failing_during_the_closing_of_an_abort_keeps_the_steering(
    autojump_clock: trio.abc.Clock,
) -> None:
    # The same with a listener that raises: prompt() re-raises it, and the
    # steering message the run had taken is kept.
    agent = Agent(faux.model([faux.reply(faux.tool_call("nap", {"ms": 5})), "hello"]), tools=[NAP])
    failure = ListenerFailure("listener failed")

    def fail() -> None:
        raise failure

    agent.subscribe(steered_then_interrupted(agent, fail))
    with pytest.raises(ListenerFailure):
        await agent.prompt("go")
    assert (delivered(agent), queued_texts(agent)) == (["go", "hold on"], ([], []))
