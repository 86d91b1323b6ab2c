"""Property tests of the run: random scenarios, and what the design's invariants promise about each.

Every example is a :class:`~trio_agent.testing.strategies.Scenario` drawn by
:func:`~trio_agent.testing.strategies.scenarios` — scripted replies with
random text, thinking and batches of tool calls (to a tool that acts out a
random :class:`~trio_agent.testing.strategies.ToolBehaviour`: it returns,
raises an exception or an exception group, hangs, terminates, raises
``KeyboardInterrupt``, reports progress, shields itself or cleans up for a
while; to a sequential tool, to a tool whose schema refuses the arguments, to
a tool that does not exist), failing tool hooks, a stream function that
breaks its contract, and steering, follow-ups, an abort, a cancellation from
outside and a failing listener injected at random virtual times or events.

It is played by :func:`~trio_agent.testing.strategies.run_scenario` on
``MockClock(autojump_threshold=0)``, through ``run_agent_loop`` or an
``Agent``, twice from the same scheduler seed, and the two plays must be
the same (invariant 13). The checks below read the play's timeline (every
model call, stream event, tool start, update, end and cancellation, hook
call and injection, in order, with its virtual time) and say which
invariant each one is about.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from tests._support import examples
from trio_agent import (
    AssistantMessage,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolResultMessage,
)
from trio_agent.providers import faux
from trio_agent.testing import check_event_grammar, check_transcript
from trio_agent.testing import strategies as ts
from trio_agent.testing.strategies import InjectedFailure, Scenario, ScenarioResult

ABORTED = "Operation aborted"
INTERRUPTING = ("abort", "outer_cancel", "listener_failure", "stream_raise")
DELTAS = ("text_delta", "thinking_delta", "toolcall_delta")


def play(scenario: Scenario, seed: int, via: Literal["loop", "agent"]) -> ScenarioResult:
    return ts.play(scenario, seed=seed, via=via)


def play_twice(scenario: Scenario, seed: int, via: Literal["loop", "agent"]) -> ScenarioResult:
    """Invariant 13 (deterministic under test): the same scenario from the same scheduler
    seed gives the same events, at the same virtual times, and ends the same way."""
    first = play(scenario, seed, via)
    second = play(scenario, seed, via)
    assert ts.trace(first) == ts.trace(second)
    return first


# --- what one play must satisfy ------------------------------------------------------------------


def event_indices(result: ScenarioResult) -> list[int]:
    """The timeline index of each event's mark."""
    return [i for i, mark in enumerate(result.timeline) if mark.kind == "event"]


def interrupted(result: ScenarioResult) -> bool:
    return any(mark.kind in INTERRUPTING for mark in result.timeline) or ki_raised(result)


def ki_raised(result: ScenarioResult) -> bool:
    behaviours = result.scenario.behaviours
    return any(
        behaviours[mark.detail].outcome == "interrupt" for mark in result.marks("tool_raise")
    )


def check_no_task_outlives_the_run(result: ScenarioResult) -> None:
    """Invariant 7: every task the run started has ended when it returns or raises."""
    assert not result.timed_out, "the scenario did not end within its time limit"
    assert result.leaked == [], result.leaked


def check_what_escapes(result: ScenarioResult) -> None:
    """Invariants 3, 6 and 8: what the run raised, given what happened.

    * a tool's ``KeyboardInterrupt`` escapes as itself (3: never swallowed;
      8: not in a group), whatever else happened;
    * else the first failure (a listener's, a broken stream function's)
      escapes as itself (8) — or, with the Agent, the outer cancellation's
      ``Cancelled`` if it came while the failed run was being closed (6);
    * else an outer cancellation that came before ``agent_end`` reached the
      listener ends the run with ``Cancelled``, never a normal return (6),
      even when an abort came too (the outer one wins); emitting
      ``agent_end`` is a cancel point, so a run that returns normally has
      passed one after the cancellation;
    * else the run returns normally: an abort never leaks ``Cancelled`` (6).
    """
    raised = result.raised
    assert not isinstance(raised, BaseExceptionGroup), repr(raised)
    timeline = result.timeline
    outer = result.first("outer_cancel")
    end = result.first("event", "agent_end")
    failures = [i for i, m in enumerate(timeline) if m.kind in ("listener_failure", "stream_raise")]
    if ki_raised(result):
        assert type(raised) is KeyboardInterrupt, repr(raised)
        assert str(raised).startswith("interrupted "), repr(raised)
    elif failures:
        first = timeline[failures[0]]
        if isinstance(raised, trio.Cancelled):
            assert result.via == "agent"
            assert outer is not None
            assert result.outer_cancelled
        else:
            assert type(raised) is InjectedFailure, repr(raised)
            if first.kind == "listener_failure":
                assert str(raised) == f"the listener failed at {first.detail}"
            else:
                assert str(raised) == "the stream function broke"
    elif outer is not None and (end is None or outer < end):
        assert isinstance(raised, trio.Cancelled), repr(raised)
        assert result.outer_cancelled
        assert not result.returned
    elif outer is not None:
        assert raised is None or isinstance(raised, trio.Cancelled), repr(raised)
    else:
        assert raised is None, repr(raised)
        assert result.returned


def check_events(result: ScenarioResult) -> None:
    """Invariant 10 (and 2): the events follow the grammar; tool events keep their order.

    The events are complete (``agent_end`` last) when the run returned, and
    when an ``Agent`` run failed (it closes the run for its listeners, unless
    the listener fails again meanwhile: it is told no more); a run that is
    cancelled from outside or interrupted stops where it was.
    Within each turn, ``tool_execution_start`` events come in the calls'
    source order and ``turn_end.tool_results`` are in that order too (2);
    in a sequential batch each call ends before the next starts; a call's
    updates are what the tool reported, in order, before its end (all of
    them when nothing interrupted the run).
    """
    events = result.events
    broke = result.first("stream_raise")
    failed_again = broke is not None and (result.first("listener_failure") or -1) > broke
    complete = result.returned or (
        result.via == "agent" and isinstance(result.raised, InjectedFailure) and not failed_again
    )
    check_event_grammar(events, complete=complete)
    if failed_again and result.via == "agent":  # told no more after it failed
        assert result.timeline[-1].kind == "listener_failure", result.timeline[-3:]
    if result.via == "loop" and result.returned:
        assert list(events[-1].messages) == result.transcript  # type: ignore[union-attr]  # an AgentEnd
    reported: dict[str, list[str]] = {}
    for mark in result.timeline:
        if mark.kind == "tool_update":
            call_id = mark.detail
            count = len(reported.setdefault(call_id, [])) + 1
            behaviour = result.scenario.behaviours[call_id]
            reported[call_id].append(behaviour.update_text(call_id, count))
    updates: dict[str, list[str]] = {}
    turn: list[Any] = []
    calls: tuple[ToolCall, ...] = ()
    for event in events:
        if event.type == "turn_start":
            turn, calls = [], ()
        elif event.type == "message_end" and isinstance(event.message, AssistantMessage):
            calls = event.message.tool_calls
        elif event.type.startswith("tool_execution_"):
            turn.append(event)
            if event.type == "tool_execution_update":
                partial = event.partial_result
                text = "".join(b.text for b in partial.content if isinstance(b, TextContent))
                updates.setdefault(event.tool_call_id, []).append(text)
        elif event.type == "turn_end":
            ids = [call.id for call in calls]
            starts = [e.tool_call_id for e in turn if e.type == "tool_execution_start"]
            assert starts == ids[: len(starts)], (starts, ids)
            results = [r.tool_call_id for r in event.tool_results]
            assert results in ([], ids), (results, ids)
            names = {call.name for call in calls}
            sequential = result.scenario.tool_execution == "sequential" or "solo" in names
            if sequential and event.message.stop_reason != "length":
                pairs = [e.tool_call_id for e in turn if e.type != "tool_execution_update"]
                assert pairs == [i for i in starts for _ in (0, 1)], pairs
    for call_id, texts in updates.items():
        made = reported.get(call_id, [])
        assert texts == made[: len(texts)], (call_id, texts, made)
    if not interrupted(result) and result.returned:
        for call_id, made in reported.items():
            assert updates.get(call_id, []) == made, (call_id, updates.get(call_id), made)


def check_parallel_completion_order(result: ScenarioResult) -> None:
    """Invariant 2: in parallel mode ``tool_execution_end`` events come in completion order
    (calls that finish at the same virtual time may come in either order). A cancelled
    call completes when its shielded cleanup ends, not when it was cancelled."""
    finished: dict[str, float] = {}
    behaviours = result.scenario.behaviours
    for mark in result.timeline:
        if mark.kind in ("tool_end", "tool_raise", "tool_cancelled"):
            time = mark.time
            if mark.kind == "tool_cancelled" and mark.detail in behaviours:
                time += behaviours[mark.detail].cleanup
            finished.setdefault(mark.detail, round(time, 9))
    cut = min(
        (i for i, m in enumerate(result.timeline) if m.kind in INTERRUPTING),
        default=len(result.timeline),
    )
    times: list[float] = []
    for event, index in zip(result.events, event_indices(result), strict=True):
        if event.type == "turn_start":
            times = []
        elif event.type == "tool_execution_end" and index < cut and event.tool_call_id in finished:
            times.append(finished[event.tool_call_id])
            assert times == sorted(times), (event.tool_call_id, times)


def expected_result(
    result: ScenarioResult, call: ToolCall, stop_reason: str
) -> tuple[set[str] | None, bool]:
    """The texts the result of ``call`` may have (None: any validation error), and whether
    it is an error."""
    call_id = call.id
    if stop_reason == "length":
        return {
            f'Tool call "{call.name}" was not executed: the response hit the output token '
            "limit, so its arguments may be truncated. Re-issue the tool call with complete "
            "arguments."
        }, True
    hooks = result.scenario.failing_hooks
    kinds = {m.kind for m in result.timeline if m.detail == call_id}
    if call.name == "missing":
        return {f"Tool {call.name} not found", ABORTED}, True
    if call.name == "strict":
        return None, True
    if "before_hook" in kinds and hooks.get(call_id) == "before":
        return {f"before_tool_call failed for {call_id}"}, True
    if "after_hook" in kinds and hooks.get(call_id) == "after":
        return {f"after_tool_call failed for {call_id}"}, True
    behaviour = result.scenario.behaviours[call_id]
    # A call past the run's tool_time_limit is cancelled and answered with the timeout
    # error, whatever the tool did meanwhile (a shielded part may have run to its end).
    limited: set[str] = set()
    if result.scenario.tool_time_limit is not None and "tool_start" in kinds:
        limited = {result.scenario.timeout_text(call.name)}
    if "tool_end" in kinds:  # a returned result: an error if it says so
        return {behaviour.result_text(call_id), *limited}, behaviour.outcome == "error"
    if "tool_raise" in kinds and behaviour.outcome != "interrupt":
        return {str(behaviour.exception(call_id)), *limited}, True
    return {ABORTED, *limited}, True


def check_tool_results(result: ScenarioResult) -> None:
    """Invariants 1, 3 and 5: every tool call has exactly one result, and the right one.

    1: the transcript answers every call of a reply that is not error /
    aborted, right after it, in order (``check_transcript``). 3: a tool's
    exception (an ``ExceptionGroup`` included) and a hook's are error results
    with their message; a tool that returned keeps its result. 5: a call that
    finished before an abort keeps its result, and only a call that did not
    finish gets "Operation aborted" — which happens only when the run was
    interrupted.
    """
    transcript = result.transcript
    if transcript is None:
        return
    check_transcript(transcript)
    calls: dict[str, tuple[ToolCall, str]] = {}
    for message in transcript:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                calls[call.id] = (call, message.stop_reason)
        elif isinstance(message, ToolResultMessage):
            call, stop_reason = calls[message.tool_call_id]
            texts, is_error = expected_result(result, call, stop_reason)
            text = "".join(b.text for b in message.content if isinstance(b, TextContent))
            if texts is None:
                assert text.startswith(f'Validation failed for tool "{call.name}"') or (
                    text == ABORTED
                ), text
            else:
                assert text in texts, (call.id, text, texts)
            timed_out = text.endswith(" s") and text.startswith(f"Tool '{call.name}' did not")
            assert message.is_error == (is_error or text == ABORTED or timed_out), (
                call.id,
                message,
            )
            if text == ABORTED:
                assert interrupted(result), call.id


def scripted(result: ScenarioResult, index: int) -> AssistantMessage | None:
    """What model call ``index`` was scripted to reply (None: a broken stream)."""
    replies = result.scenario.replies
    if index >= len(replies):
        return None
    reply = replies[index]
    if reply.raises is not None:
        return None
    content = reply.content
    has_calls = any(isinstance(block, ToolCall) for block in content)
    stop_reason = reply.stop_reason or ("toolUse" if has_calls else "stop")
    defaults = {"error": "scripted error", "aborted": "Request was aborted"}
    return AssistantMessage(
        content=content,
        stop_reason=stop_reason,
        error_message=reply.error_message or defaults.get(stop_reason),
    )


def check_replies(result: ScenarioResult) -> None:
    """Invariants 5 and 9: every assistant message holds what its model call sent.

    One assistant message per model call, in order, and at the end at most
    one more of the loop's own (no content, ``aborted`` or ``error``), standing
    where the next call would have been — two with an ``Agent`` whose listener
    failed while it was told of an abort (the failure gets its own reply). A
    call whose stream ended (``done`` or ``error``) gives the scripted reply
    exactly — a scripted provider error included: its content is kept, with
    ``stop_reason="error"`` and its message (9). A call cut short (an abort,
    an outer cancellation, a failure) is ``aborted`` / ``error`` and keeps
    exactly the text and thinking of every delta the model produced (5).
    """
    transcript = result.transcript
    if transcript is None:
        return
    replies = [m for m in transcript if isinstance(m, AssistantMessage)]
    streams = result.streams
    assert len(streams) <= len(replies) <= len(streams) + 2, (len(streams), len(replies))
    for index, message in enumerate(replies):
        if index >= len(streams):
            assert message.content == (), message
            assert message.stop_reason in ("aborted", "error"), message
            if index == len(streams) + 1:  # the closing of an abort failed: a reply for that
                assert message.stop_reason == "error", message
                assert result.via == "agent"
            continue
        produced = streams[index]
        expected = scripted(result, index)
        if produced and produced[-1].type in ("done", "error"):
            if expected is None:  # the script ran out
                assert message.content == (), message
                assert message.stop_reason == "error", message
                assert (message.error_message or "").startswith("no more scripted responses")
            else:
                assert message.content == expected.content, (message, expected)
                assert message.stop_reason == expected.stop_reason, message
                assert message.error_message == expected.error_message, message
            continue
        assert message.stop_reason in ("aborted", "error"), message
        assert interrupted(result) or result.raised is not None
        text = "".join(e.delta for e in produced if isinstance(e, TextDelta))
        thought = "".join(e.delta for e in produced if isinstance(e, ThinkingDelta))
        assert message.text == text, (message.text, text)
        assert (
            "".join(b.thinking for b in message.content if isinstance(b, ThinkingContent))
            == thought
        )


def check_abort(result: ScenarioResult) -> None:
    """Invariant 4: after an abort the run makes no further model call, receives no further
    delta, starts no further tool; the tools it cancels see ``Cancelled`` at their next
    checkpoint (after their shielded time), and a run that returns does so with no virtual
    time passing but the shielded time of the tools it cancelled and the time its own
    listener takes."""
    at = result.first("abort")
    if at is None:
        return
    timeline = result.timeline
    abort_time = timeline[at].time
    for mark in timeline[at + 1 :]:
        assert mark.kind not in ("model_call", "tool_start"), mark
        assert not (mark.kind == "stream" and mark.detail in (*DELTAS, "start")), mark
    running: dict[str, float] = {}
    # A call cancelled before the abort (past its time limit) may still be in its shielded
    # cleanup when the abort comes: the run waits for what is left of it.
    cleaning = 0.0
    for mark in timeline[:at]:
        if mark.kind == "tool_start":
            running[mark.detail] = result.scenario.behaviours[mark.detail].shield
        elif mark.kind in ("tool_end", "tool_raise", "tool_cancelled"):
            running.pop(mark.detail, None)
            if mark.kind == "tool_cancelled":
                left = mark.time + result.scenario.behaviours[mark.detail].cleanup - abort_time
                cleaning = max(cleaning, left)
    for call_id, shield in running.items():
        ends = [
            m
            for m in timeline[at:]
            if m.detail == call_id and m.kind in ("tool_end", "tool_raise", "tool_cancelled")
        ]
        assert ends, f"{call_id} never ended"
        assert ends[0].time <= abort_time + shield + 1e-9, (call_id, ends[0], abort_time)
    if result.returned:
        grace = max(
            (result.scenario.behaviours[call_id].grace for call_id in running), default=cleaning
        )
        grace = max(grace, cleaning)
        events_after = sum(1 for m in timeline[at:] if m.kind == "event")
        listening = result.scenario.listener_delay * (events_after + 1)
        assert result.ended_at - abort_time <= grace + listening + 1e-9, (
            result.ended_at,
            abort_time,
            grace,
        )


def check_queues(result: ScenarioResult) -> None:
    """Invariant 11: a steering or follow-up message is delivered exactly once, in FIFO
    order, or is still queued — never both, never lost (for a bare ``run_agent_loop`` that
    did not return, what it had taken from the caller's queues is the caller's business)."""
    transcript = result.transcript
    if transcript is None or (result.via == "loop" and not result.returned):
        return
    for kind, injected in result.injected.items():
        delivered = [m for m in transcript if any(m is x for x in injected)]
        both = delivered + result.queued[kind]
        assert len(both) == len(injected), (kind, delivered, result.queued[kind], injected)
        assert all(a is b for a, b in zip(both, injected, strict=True)), (kind, both, injected)


def check_agent_state(result: ScenarioResult) -> None:
    """Invariants 1 and 7 for the ``Agent``: however the run ended, its state is whole — not
    streaming, no pending tool call, a transcript that answers every call."""
    agent = result.agent
    if agent is None:
        return
    state = agent.state
    assert not state.is_streaming
    assert state.pending_tool_calls == frozenset()
    assert state.streaming_message is None
    if isinstance(result.raised, InjectedFailure):
        assert state.error_message == f"InjectedFailure: {result.raised}"


TURN_HOOKS = ("finish_turn", "prepare_request", "prepare_next_turn")


def check_turn_hooks(result: ScenarioResult) -> None:
    """The turn hooks (drawn by the scenarios): where each is called and what it does.

    No hook is called after an abort. ``prepare_request`` is called right
    before every model call (no event in between) and its thinking level is
    the one sent. ``finish_turn`` comes right before its turn's ``turn_end``,
    once for every turn of a run nothing interrupted; after ``"end"`` the run
    ends (``turn_end``, ``agent_end``, no model call); after ``"continue"``
    on a reply that did not fail, the model is asked again. The messages of
    ``prepare_next_turn`` are in the transcript of a run that returned, once
    each and in order.
    """
    scenario = result.scenario
    timeline = result.timeline
    abort = result.first("abort")
    if abort is not None:
        late = [mark for mark in timeline[abort + 1 :] if mark.kind in TURN_HOOKS]
        assert late == [], late
    if scenario.prepare_request:
        requests = result.marks("prepare_request")
        for index, mark in enumerate(timeline):
            if mark.kind == "model_call":
                before = [
                    m.kind for m in timeline[:index] if m.kind in ("event", "prepare_request")
                ]
                assert before[-1] == "prepare_request", timeline[:index]
        assert [m.detail for m in requests][:1] in ([], ["off"])
        assert {m.detail for m in requests[1:]} <= {"low"}
        assert {call.options.reasoning for call in result.model.calls} <= {"low"}
    if scenario.finish_turn is not None:
        finishes = [i for i, mark in enumerate(timeline) if mark.kind == "finish_turn"]
        for index in finishes:
            after = [m for m in timeline[index + 1 :] if m.kind in ("event", "model_call")]
            assert [(m.kind, m.detail) for m in after[:1]] in ([], [("event", "turn_end")]), after
            if timeline[index].detail == "end" and not interrupted(result):
                assert [(m.kind, m.detail) for m in after] == [
                    ("event", "turn_end"),
                    ("event", "agent_end"),
                ], after
        if result.returned and not interrupted(result):
            ends = [event for event in result.events if event.type == "turn_end"]
            assert len(finishes) == len(ends)
            for index, end in zip(finishes, ends, strict=True):
                failed = end.message.stop_reason in ("error", "aborted")
                if timeline[index].detail == "continue" and not failed:
                    calls = [m for m in timeline[index:] if m.kind == "model_call"]
                    assert calls, "finish_turn said continue, and the model was not asked again"
    if scenario.next_turn_messages is not None and result.returned:
        transcript = result.transcript
        assert transcript is not None
        found = [m for m in transcript if any(m is p for p in result.prepared)]
        assert len(found) == len(result.prepared)
        assert all(a is b for a, b in zip(found, result.prepared, strict=True))


def check_tool_outcomes(result: ScenarioResult) -> None:
    """A returned result keeps its structured content (and an ``is_error`` one its details) on
    its ``tool_execution_end``; a call has a ``duration`` there and on its result message
    exactly when its tool ran (it started), and ``execute`` took at least what the behaviour
    spent before it ended."""
    durations: dict[str, float | None] = {}
    for event in result.events:
        if event.type != "tool_execution_end":
            continue
        call_id = event.tool_call_id
        durations[call_id] = event.duration
        behaviour = result.scenario.behaviours.get(call_id)
        kinds = {m.kind for m in result.timeline if m.detail == call_id}
        assert (event.duration is not None) == ("tool_start" in kinds), (call_id, event)
        if behaviour is None:
            continue
        text = "".join(b.text for b in event.result.content if isinstance(b, TextContent))
        if "tool_end" in kinds and text == behaviour.result_text(call_id):
            assert event.result.structured_content == behaviour.structured_content(call_id)
            assert event.is_error == (behaviour.outcome == "error")
            if behaviour.outcome == "error":
                assert event.result.details == {"call": call_id}
            assert event.duration is not None
            assert event.duration >= round(behaviour.shield + behaviour.duration, 3) - 0.0015
    for message in result.transcript or ():
        if isinstance(message, ToolResultMessage) and message.tool_call_id in durations:
            assert message.duration == durations[message.tool_call_id], message


def check_play(result: ScenarioResult) -> None:
    check_no_task_outlives_the_run(result)
    check_what_escapes(result)
    check_events(result)
    check_parallel_completion_order(result)
    check_tool_results(result)
    check_tool_outcomes(result)
    check_replies(result)
    check_abort(result)
    check_queues(result)
    check_agent_state(result)
    check_turn_hooks(result)


# --- the tests -----------------------------------------------------------------------------------

SEEDS = st.integers(0, 2**32 - 1)
EVERY_OUTCOME = ts.tool_behaviours(
    outcomes=("return",) * 12
    + ("raise",) * 2
    + ("raise_group", "hang", "terminate", "interrupt", "error", "error")
)


@examples(0.8)
@given(ts.scenarios(behaviours=EVERY_OUTCOME), SEEDS)
def test_run_agent_loop_keeps_every_invariant(scenario: Scenario, seed: int) -> None:
    """Invariants 1, 2, 3, 4, 5, 6, 7, 8, 9 (scripted provider errors), 10, 11 and 13, on
    ``run_agent_loop``, over random scenarios with every kind of injection."""
    check_play(play_twice(scenario, seed, "loop"))


@examples(0.5)
@given(ts.scenarios(behaviours=EVERY_OUTCOME), SEEDS)
def test_agent_keeps_every_invariant(scenario: Scenario, seed: int) -> None:
    """Invariants 1, 2, 3, 4, 5, 6, 7, 8, 9 (scripted provider errors), 10, 11 and 13, on
    ``Agent.prompt``: the same scenarios, injected through ``steer``, ``follow_up`` and
    ``abort``, and the agent's state whole afterwards."""
    check_play(play_twice(scenario, seed, "agent"))


LIMITED = ts.scenarios(behaviours=EVERY_OUTCOME, max_tool_calls=5).map(
    lambda scenario: attrs.evolve(
        scenario,
        tool_time_limit=scenario.tool_time_limit or 0.008,
        max_parallel_tools=scenario.max_parallel_tools or 2,
    )
)


@examples(0.1)
@given(LIMITED, SEEDS, st.sampled_from(["loop", "agent"]))
def test_time_limits_and_concurrency_limits_keep_every_invariant(
    scenario: Scenario, seed: int, via: Literal["loop", "agent"]
) -> None:
    """Invariants 1-8 (and 13) when every scenario has a tool time limit and a cap on
    parallel calls: a call past the limit is answered with the timeout error, calls
    waiting for a slot are answered on an abort."""
    check_play(play_twice(scenario, seed, via))


@examples(0.3)
@given(
    ts.scenarios(
        behaviours=ts.tool_behaviours(
            outcomes=("return", "raise", "raise", "raise_group", "terminate")
        ),
        injections=ts.injections(kinds=("steer", "follow_up")),
        broken_streams=False,
    ),
    SEEDS,
    st.sampled_from(["loop", "agent"]),
)
def test_tool_and_hook_errors_are_results(
    scenario: Scenario, seed: int, via: Literal["loop", "agent"]
) -> None:
    """Invariant 3 (tool errors are data): with nothing interrupting the run, every call's
    exception — an ``Exception``, an ``ExceptionGroup``, a failing ``before_tool_call`` or
    ``after_tool_call`` — is an error result with its message, no call is "aborted", and the
    run returns normally (1, 2 and 13 checked as well)."""
    result = play_twice(scenario, seed, via)
    assert result.returned, repr(result.raised)
    check_play(result)
    transcript = result.transcript
    assert transcript is not None
    errors = [m for m in transcript if isinstance(m, ToolResultMessage) and m.is_error]
    assert all(_text(m) != ABORTED for m in errors)


@examples(0.2)
@given(
    ts.scenarios(
        behaviours=ts.tool_behaviours(outcomes=("return", "hang"), shields=(0.0, 0.004)),
        injections=st.tuples(
            st.builds(
                ts.Injection,
                st.just("abort"),
                at_event=st.tuples(
                    st.sampled_from(
                        ["message_update", "tool_execution_start", "tool_execution_update"]
                    ),
                    st.integers(1, 4),
                ),
            )
        ),
        final_stop_reasons=(None,),
        broken_streams=False,
        failing_hooks=False,
    ),
    SEEDS,
    st.sampled_from(["loop", "agent"]),
)
def test_an_abort_in_the_middle_is_prompt_and_keeps_what_arrived(
    scenario: Scenario, seed: int, via: Literal["loop", "agent"]
) -> None:
    """Invariants 4 and 5, aimed: aborts at deltas and tool events (where most of the work
    is), with tools that hang or shield themselves; the run returns normally, and the
    checks of ``check_abort`` and ``check_replies`` apply to every example that reached
    its abort."""
    result = play_twice(scenario, seed, via)
    check_play(result)
    assert result.returned, repr(result.raised)


class RecordingChannels:
    """``trio.open_memory_channel`` (subscript and call), keeping every pair it opens."""

    def __init__(self) -> None:
        self.opened: list[tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]]
        self.opened = []
        self._open: Any = trio.open_memory_channel  # the real one

    def __getitem__(self, item: object) -> RecordingChannels:
        return self

    def __call__(
        self, size: float
    ) -> tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]:
        pair: tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]]
        pair = self._open(size)
        self.opened.append(pair)
        return pair


@contextmanager
def recording_channels() -> Iterator[RecordingChannels]:
    channels = RecordingChannels()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trio, "open_memory_channel", channels)
        yield channels


@examples(0.1)
@given(ts.scenarios(behaviours=EVERY_OUTCOME), SEEDS, st.sampled_from(["loop", "agent"]))
def test_every_memory_channel_a_run_opens_is_closed(
    scenario: Scenario, seed: int, via: Literal["loop", "agent"]
) -> None:
    """Invariant 7: when the run has returned or raised, every memory channel it opened is
    closed, at both ends.

    Found by this property: a tool call that runs in the loop task (alone in
    its batch, or sequential) makes the run's update pump, whose receiving end
    was closed only by the pump's task — started by the first update — so a
    call that reported no progress left it open.
    """
    with recording_channels() as channels:
        result = play(scenario, seed, via)
    check_no_task_outlives_the_run(result)
    for _, receive in channels.opened:
        statistics = receive.statistics()
        open_ends = (statistics.open_send_channels, statistics.open_receive_channels)
        assert open_ends == (0, 0), f"a channel is left open: {statistics}"


def _text(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


# --- the smallest cases of what the properties found ---------------------------------------------


@pytest.mark.parametrize("via", ["loop", "agent"])
@pytest.mark.parametrize("interruption", ["abort", "outer_cancel"])
def test_a_listener_failing_on_a_tool_update_after_a_cancellation_fails_the_run(
    via: Literal["loop", "agent"], interruption: Literal["abort", "outer_cancel"]
) -> None:
    """Invariant 8, found by ``test_run_agent_loop_keeps_every_invariant``: a listener that
    cancels the run (abort, or the caller's scope) and then raises, while it handles a
    ``tool_execution_update`` of a call running in the loop task, must fail the run with
    its exception, as it does at every other event.

    The update reaches the listener from the run's update pump task, which exits through
    ``async with`` its receive channel; that channel's ``aclose()`` is a checkpoint, so in
    the cancelled run it raises ``Cancelled``, which replaces the listener's exception: the
    run then returns normally after an abort (the exception is lost) or raises
    ``Cancelled``.
    """
    scenario = Scenario(
        replies=[faux.reply(faux.tool_call("work", id="a")), "done"],
        behaviours={"a": ts.ToolBehaviour(updates=1)},
        injections=[
            ts.Injection(interruption, at_event=("tool_execution_update", 1)),
            ts.Injection("listener_failure", at_event=("tool_execution_update", 1)),
        ],
    )
    result = play(scenario, 0, via)
    assert type(result.raised) is InjectedFailure, repr(result.raised)
    assert str(result.raised) == "the listener failed at tool_execution_update #1"


def test_a_slow_listener_does_not_reorder_the_ends_of_parallel_calls() -> None:
    """Invariant 2, found by ``test_tool_and_hook_errors_are_results``: while a slow
    listener is told of earlier reports, a call that finishes later must not overtake the
    end of one that finished before it. Reports arriving together used to be put in
    source order whenever they were made, so ``t0_2`` (finished at 27 ms) was reported
    before ``t0_3`` (finished at 22 ms, its reports queued behind the listener)."""
    calls = [faux.tool_call("work", {"n": i}, id=f"t0_{i}") for i in range(4)]
    scenario = Scenario(
        replies=[faux.reply(*calls), "done"],
        behaviours={
            "t0_0": ts.ToolBehaviour(),
            "t0_1": ts.ToolBehaviour(updates=1),
            "t0_2": ts.ToolBehaviour(duration=0.005),
            "t0_3": ts.ToolBehaviour(updates=2),
        },
        listener_delay=0.001,
    )
    for via in ("loop", "agent"):
        result = play(scenario, 0, via)
        check_parallel_completion_order(result)
        ends = [e.tool_call_id for e in result.events if e.type == "tool_execution_end"]
        assert ends == ["t0_0", "t0_1", "t0_3", "t0_2"]
