"""Agent listeners: every listener hears every event of a run, whatever another does
(design.md#the-agents-rules).

A listener that raises fails the run, but only after the listeners after it
have heard the event; the run's closing events go to every listener, the one
that raised included; the first exception is re-raised, the later ones are
notes on it. A listener cut short by the run's own cancellation (an abort)
leaves the event undelivered to the listeners after it, who get it when the run
closes. A cancellation from outside, or ``KeyboardInterrupt``, propagates at
once and nobody is called after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import trio_agent
from tests._support import ECHO, examples, make_tool
from trio_agent import Agent, AgentEvent, ToolResult, ToolUpdate
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript
from trio_agent.testing import strategies as ts
from trio_agent.testing._fuzz import _seed_scheduler


class Boom(Exception):
    pass


def raising_at(
    when: Callable[[AgentEvent], bool], error: Exception | None = None
) -> Callable[[AgentEvent], Any]:
    """A listener that raises (``error``, or a new ``Boom`` naming the event) when ``when``
    says so."""

    async def broken(event: AgentEvent) -> None:
        if when(event):
            raise error if error is not None else Boom(f"at {event.type}")

    return broken


def is_reply_end(event: AgentEvent) -> bool:
    """The ``message_end`` of an assistant reply (the model's, or the failure's own)."""
    return event.type == "message_end" and event.message.role == "assistant"


# --- a listener that raises -----------------------------------------------------------------------


async def test_a_failing_listener_does_not_keep_the_event_from_the_listeners_after_it() -> None:
    error = Boom("listener broke")
    agent = Agent(faux.model(["hello"]))
    agent.subscribe(raising_at(lambda e: is_reply_end(e) and not recorder.of("turn_end"), error))
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with pytest.raises(Boom) as caught:
        await agent.prompt("go")
    assert caught.value is error
    check_event_grammar(recorder.events)
    replies = [e.message for e in recorder.of("message_end") if e.message.role == "assistant"]
    assert [(r.text, r.stop_reason) for r in replies] == [("hello", "stop"), ("", "error")]
    assert list(agent.state.messages) == recorder.messages


async def test_a_listener_raising_again_while_the_run_closes_keeps_nothing_from_the_others() -> (
    None
):
    agent = Agent(faux.model(["hello"]))
    before, after = EventRecorder(), EventRecorder()
    agent.subscribe(before)
    agent.subscribe(raising_at(lambda e: is_reply_end(e) or e.type in ("turn_end", "agent_end")))
    agent.subscribe(after)
    with pytest.raises(Boom) as caught:
        await agent.prompt("go")
    assert str(caught.value) == "at message_end"
    assert before.events == after.events
    check_event_grammar(after.events)
    assert after.types[-5:] == [
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    notes = caught.value.__notes__
    assert [note.split(" raised ")[1] for note in notes] == [
        "Boom('at turn_end') at turn_end",
        "Boom('at message_end') at message_end",
        "Boom('at turn_end') at turn_end",
        "Boom('at agent_end') at agent_end",
    ]
    assert all(
        note.startswith("trio_agent: while closing the run, listener ") and "raising_at" in note
        for note in notes
    )


async def test_the_listener_that_raised_hears_the_closing_events_too() -> None:
    heard: list[str] = []

    async def flaky(event: AgentEvent) -> None:
        heard.append(event.type)
        if event.type == "tool_execution_start":
            raise Boom("once")

    agent = Agent(faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1"))]))
    agent.set_tools([ECHO])
    agent.subscribe(flaky)
    with pytest.raises(Boom, match="once"):
        await agent.prompt("go")
    assert heard[-1] == "agent_end"
    assert heard.count("tool_execution_end") == 1


async def test_of_several_failures_the_first_is_raised_and_the_others_are_notes() -> None:
    first, second = Boom("first"), Boom("second")
    agent = Agent(faux.model(["hello"]))
    closed = False

    def once(event: AgentEvent) -> bool:
        return is_reply_end(event) and not closed

    async def note_closing(event: AgentEvent) -> None:
        nonlocal closed
        if is_reply_end(event):
            closed = True

    agent.subscribe(raising_at(once, first))
    agent.subscribe(raising_at(once, second))
    recorder = EventRecorder()
    agent.subscribe(recorder)
    agent.subscribe(note_closing)
    with pytest.raises(Boom) as caught:
        await agent.prompt("go")
    assert caught.value is first  # one exception, never a group (invariant 8)
    assert len(caught.value.__notes__) == 1
    assert caught.value.__notes__[0].endswith(" also raised Boom('second') at message_end")
    check_event_grammar(recorder.events)
    assert agent.state.error_message == "Boom: first"


async def test_a_listener_subscribed_twice_is_told_twice_and_unsubscribed_at_once() -> None:
    heard: list[str] = []

    async def listener(event: AgentEvent) -> None:
        heard.append(event.type)
        if event.type == "agent_start" and heard.count("agent_start") == 1:
            raise Boom("the first of two")

    agent = Agent(faux.model(["a", "b"]))
    recorder = EventRecorder()
    agent.subscribe(listener)
    unsubscribe = agent.subscribe(listener)
    agent.subscribe(recorder)
    with pytest.raises(Boom):
        await agent.prompt("go")
    assert heard[:2] == ["agent_start", "agent_start"]  # the second entry heard it too
    assert heard == [t for t in recorder.types for _ in (0, 1)]
    unsubscribe()
    heard.clear()
    await agent.prompt("again")
    assert heard == []


# --- a listener cut short by a cancellation -------------------------------------------------------


async def test_a_listener_cut_short_by_an_abort_leaves_the_event_undelivered_to_the_others() -> (
    None
):
    agent = Agent(faux.model(["hello"]))
    cut: list[str] = []

    async def aborter(event: AgentEvent) -> None:
        if event.type == "message_start" and event.message.role == "assistant":
            agent.abort()

    async def awaiting(event: AgentEvent) -> None:
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            cut.append(event.type)
            raise

    recorder = EventRecorder()
    for listener in (aborter, awaiting, recorder):
        agent.subscribe(listener)
    await agent.prompt("go")
    assert cut == ["message_start"]
    check_event_grammar(recorder.events)
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert recorder.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage, here


async def test_an_abort_while_agent_end_is_told_still_lets_every_listener_hear_it() -> None:
    agent = Agent(faux.model(["hello"]))

    cut: list[str] = []

    async def aborter(event: AgentEvent) -> None:
        if event.type == "agent_end":
            agent.abort()

    async def awaiting(event: AgentEvent) -> None:
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            cut.append(event.type)
            raise

    recorder = EventRecorder()
    for listener in (aborter, awaiting, recorder):
        agent.subscribe(listener)
    await agent.prompt("go")
    assert cut == ["agent_end"]  # the abort did cut the telling of agent_end short
    assert recorder.types[-2:] == ["turn_end", "agent_end"]
    assert recorder.types.count("agent_end") == 1
    check_event_grammar(recorder.events)


async def test_a_listener_failing_on_the_undelivered_event_fails_the_run_after_the_others_heard_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def slow(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        on_update(ToolResult.text("half way"))
        await trio.sleep(1)
        return ToolResult.text("done")

    agent = Agent(
        faux.model([faux.reply(faux.tool_call("slow", id="t1")), "never"]),
        tools=[make_tool("slow", slow)],
    )

    cut: list[str] = []

    async def aborter(event: AgentEvent) -> None:
        if event.type == "tool_execution_update":
            agent.abort()
            try:
                await (
                    trio.lowlevel.checkpoint()
                )  # cut short: the update is undelivered to the others
            except trio.Cancelled:
                cut.append(event.type)
                raise

    recorder = EventRecorder()
    agent.subscribe(aborter)
    agent.subscribe(raising_at(lambda e: e.type == "tool_execution_update"))
    agent.subscribe(recorder)
    with pytest.raises(Boom, match="at tool_execution_update"):
        await agent.prompt("go")
    assert cut == ["tool_execution_update"]
    check_event_grammar(recorder.events)
    assert recorder.types.count("tool_execution_update") == 1
    assert agent.state.error_message == "Boom: at tool_execution_update"
    check_transcript(agent.state.messages)


async def test_a_cancellation_from_outside_in_a_listener_propagates_and_nobody_is_told_more() -> (
    None
):
    agent = Agent(faux.model(["hello"]))
    recorder = EventRecorder()

    with trio.CancelScope() as outer:

        async def canceller(event: AgentEvent) -> None:
            if event.type == "message_start" and event.message.role == "assistant":
                outer.cancel()
                await trio.lowlevel.checkpoint()

        agent.subscribe(canceller)
        agent.subscribe(recorder)
        await agent.prompt("go")
    assert outer.cancelled_caught
    check_event_grammar(recorder.events, complete=False)
    assert recorder.types[-1] == "message_end"  # the prompt's; the reply's start is not told
    last = agent.state.messages[-1]
    assert (last.role, last.stop_reason) == ("assistant", "aborted")  # type: ignore[union-attr]  # an AssistantMessage, here
    assert not agent.state.is_streaming


async def test_a_keyboard_interrupt_from_a_listener_propagates_and_nobody_is_told_more() -> None:
    agent = Agent(faux.model(["hello"]))
    recorder = EventRecorder()

    async def interrupter(event: AgentEvent) -> None:
        if event.type == "message_start" and event.message.role == "assistant":
            raise KeyboardInterrupt

    agent.subscribe(interrupter)
    agent.subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")
    assert recorder.types[-1] == "message_end"
    assert not agent.state.is_streaming
    check_transcript(agent.state.messages)


# --- whatever happens, every listener hears a whole run ------------------------------------------


class ListenerFailure(Exception):
    pass


@attrs.frozen
class Act:
    """What listener ``listener`` does at the ``at``-th event of the run (from 0)."""

    listener: int
    at: int
    kind: str  # "raise" (a ListenerFailure) or "abort" (agent.abort(), then go on)


@st.composite
def plans(draw: st.DrawFn) -> tuple[ts.Scenario, int, tuple[bool, ...], tuple[Act, ...]]:
    scenario = draw(
        ts.scenarios(
            behaviours=ts.tool_behaviours(outcomes=("return", "return", "raise", "terminate")),
            injections=st.just(()),
            broken_streams=False,
            failing_hooks=False,
        )
    )
    count = draw(st.integers(2, 4))
    awaits = tuple(draw(st.lists(st.booleans(), min_size=count, max_size=count)))
    acts = draw(
        st.lists(
            st.builds(
                Act,
                st.integers(0, count - 1),
                st.integers(0, 40),
                st.sampled_from(["raise", "raise", "abort"]),
            ),
            min_size=1,
            max_size=4,
        )
    )
    return scenario, count, awaits, tuple(acts)


@attrs.define
class Played:
    heard: list[list[AgentEvent]]
    raised: BaseException | None
    failures: list[tuple[ListenerFailure, int]]  # and the event it came at
    acted_at: list[int]
    agent: Agent


def play(
    scenario: ts.Scenario, count: int, awaits: tuple[bool, ...], acts: tuple[Act, ...]
) -> Played:
    """Run the scenario's replies and tools on an Agent with ``count`` listeners that
    record every event, then (``awaits``) checkpoint, then do what ``acts`` say."""
    agent = Agent(
        faux.model(list(scenario.replies)),
        tools=ts.scenario_tools(scenario.behaviours),
        tool_execution=scenario.tool_execution,
    )
    played = Played([[] for _ in range(count)], None, [], [], agent)

    def listener(index: int) -> Callable[[AgentEvent], Any]:
        heard = played.heard[index]

        async def on_event(event: AgentEvent) -> None:
            at = len(heard)
            heard.append(event)
            if awaits[index]:
                await trio.lowlevel.checkpoint()
            for act in acts:
                if (act.listener, act.at) != (index, at):
                    continue
                played.acted_at.append(at)
                if act.kind == "abort":
                    agent.abort()
                else:
                    failure = ListenerFailure(f"listener {index} at event {at}")
                    played.failures.append((failure, at))
                    raise failure

        return on_event

    for index in range(count):
        agent.subscribe(listener(index))

    async def main() -> None:
        try:
            await agent.prompt(scenario.prompt)
        except ListenerFailure as exc:
            played.raised = exc

    # Trio runs the tasks that are ready together in a random order: seeded, the
    # healthy run and the one with failures go the same way up to the first act.
    _seed_scheduler(0)
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return played


def without_timestamps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timestamps(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [without_timestamps(v) for v in value]
    return value


def shown(events: list[AgentEvent]) -> list[Any]:
    return [without_timestamps(json.loads(trio_agent.dumps(event))) for event in events]


@examples(0.2)
@given(plans())
def test_every_listener_hears_a_whole_run_whatever_another_one_does(
    plan: tuple[ts.Scenario, int, tuple[bool, ...], tuple[Act, ...]],
) -> None:
    scenario, count, awaits, acts = plan
    healthy = play(scenario, count, awaits, ())
    played = play(scenario, count, awaits, acts)
    events = played.heard[0]
    for heard in played.heard[1:]:
        assert [id(e) for e in heard] == [id(e) for e in events]  # the same events, in order
    check_event_grammar(events)
    agent = played.agent
    check_transcript(agent.state.messages)
    assert (agent.state.is_streaming, agent.state.pending_tool_calls) == (False, frozenset())
    if not played.acted_at:
        assert shown(events) == shown(healthy.heard[0])
        assert played.raised is None
        return
    # Up to the first act (included) the run is the healthy one.
    first = min(played.acted_at)
    assert shown(events[: first + 1]) == shown(healthy.heard[0][: first + 1])
    if not played.failures:
        assert played.raised is None
        return
    failure, failed_at = played.failures[0]
    assert played.raised is failure
    notes = getattr(failure, "__notes__", [])
    for later, _ in played.failures[1:]:
        assert any(repr(later) in note for note in notes), (later, notes)
    if events[failed_at].type != "agent_end":  # else the run was over: nothing to record
        assert agent.state.error_message == f"ListenerFailure: {failure}"
