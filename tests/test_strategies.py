"""The hypothesis strategies of ``trio_agent.testing.strategies`` do what they say.

Generated transcripts are valid and survive JSON; generated messages survive
JSON; a tool built from a :class:`ToolBehaviour` acts it out exactly on
Trio's clock (results, errors, updates, timing, cancellation, shielding and
cleanup); scripted replies stream into the message they describe; scenarios
are well formed and always end; and importing ``trio_agent`` or
``trio_agent.testing`` does not import hypothesis.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import trio_agent
from tests._support import examples
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResult,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_transcript
from trio_agent.testing import strategies as ts
from trio_agent.testing.strategies import Injection, Mark, Scenario, ToolBehaviour

# --- messages and transcripts --------------------------------------------------------------------


@examples(0.2)
@given(ts.transcripts())
def test_transcripts_are_valid_and_survive_json(transcript: list[Any]) -> None:
    check_transcript(transcript)
    assert trio_agent.loads(trio_agent.dumps(transcript)) == transcript
    ids = [call.id for m in transcript if isinstance(m, AssistantMessage) for call in m.tool_calls]
    assert len(ids) == len(set(ids))


@examples(0.1)
@given(ts.messages())
def test_messages_survive_json(message: Message) -> None:
    assert trio_agent.loads(trio_agent.dumps([message])) == [message]
    assert trio_agent.loads(trio_agent.dumps(message), type(message)) == message


@examples(0.05)
@given(ts.assistant_messages(stop_reasons=("toolUse",), max_tool_calls=2))
def test_assistant_messages_follow_their_parameters(message: AssistantMessage) -> None:
    assert message.stop_reason == "toolUse"
    assert message.error_message is None
    assert len(message.tool_calls) <= 2


def test_check_transcript_rejects_what_transcripts_never_make() -> None:
    """The property above can fail: a transcript with an unanswered call does not pass."""
    call = ToolCall("c1", "work", {})
    with pytest.raises(AssertionError):
        check_transcript(
            [UserMessage("hi"), AssistantMessage(content=(call,), stop_reason="toolUse")]
        )


# --- tool behaviours -----------------------------------------------------------------------------

MS = 0.001


@examples(0.2)
@given(
    ts.tool_behaviours(
        outcomes=("return", "raise", "raise_group", "hang", "terminate", "interrupt", "error")
    ),
    st.none() | st.integers(0, 40).map(lambda ms: ms * MS + MS / 2),
)
def test_a_behaviour_tool_acts_its_behaviour_out(
    behaviour: ToolBehaviour, cancel_at: float | None
) -> None:
    """Run the built tool alone, cancelled at ``cancel_at`` (between two whole milliseconds,
    so never at the instant it would end), and compare with what the behaviour says."""
    if cancel_at is None and behaviour.outcome == "hang":
        cancel_at = 1.0005  # something must end it
    timeline: list[Mark] = []
    tool = ts.behaviour_tool("work", behaviour, timeline=timeline)
    updates: list[ToolResult] = []
    outcome: dict[str, Any] = {}

    async def main() -> None:
        with trio.CancelScope() as scope:
            if cancel_at is not None:
                scope.deadline = cancel_at
            await trio.lowlevel.checkpoint()  # at time 0, before any deadline
            try:
                outcome["result"] = await tool.execute("c1", {}, updates.append)
            except BaseException as exc:  # noqa: ASYNC103  (recorded; Cancelled re-raised)
                outcome["raised"] = exc
                if isinstance(exc, trio.Cancelled):
                    raise
        outcome["cancelled"] = scope.cancelled_caught
        outcome["ended"] = trio.current_time()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    work_ends = behaviour.shield + behaviour.duration
    hangs = behaviour.outcome == "hang"
    kinds = [mark.kind for mark in timeline]
    if cancel_at is not None and (hangs or cancel_at < work_ends):
        assert outcome["cancelled"]
        assert isinstance(outcome["raised"], trio.Cancelled)
        seen = max(cancel_at, behaviour.shield)
        assert outcome["ended"] == pytest.approx(seen + behaviour.cleanup)
        assert kinds[0] == "tool_start"
        assert kinds[-1] == "tool_cancelled"
        assert all(mark.time <= seen + 1e-9 for mark in timeline)
        step = behaviour.duration / (behaviour.updates + 1)
        expected_updates = sum(
            1
            for index in range(1, behaviour.updates + 1)
            if behaviour.shield + index * step < cancel_at
        )
        assert len(updates) == expected_updates
        return
    assert not outcome["cancelled"]
    assert outcome["ended"] == pytest.approx(work_ends)
    assert [_text(u) for u in updates] == [
        behaviour.update_text("c1", index) for index in range(1, behaviour.updates + 1)
    ]
    assert kinds == ["tool_start", *["tool_update"] * behaviour.updates, kinds[-1]]
    if behaviour.outcome in ("return", "terminate", "error"):
        result = outcome["result"]
        assert _text(result) == behaviour.result_text("c1")
        assert result.terminate is (True if behaviour.outcome == "terminate" else None)
        assert result.is_error is (behaviour.outcome == "error")
        assert result.structured_content == behaviour.structured_content("c1")
        if behaviour.outcome == "error" or behaviour.structured:
            assert result.structured_content == {"call": "c1"}
        assert kinds[-1] == "tool_end"
    else:
        raised = outcome["raised"]
        expected = behaviour.exception("c1")
        assert type(raised) is type(expected)
        assert str(raised) == str(expected)
        assert kinds[-1] == "tool_raise"


def test_a_behaviour_tool_without_a_behaviour_for_a_call_fails_it() -> None:
    tool = ts.behaviour_tool("work", {"known": ToolBehaviour()})

    async def main() -> None:
        with pytest.raises(KeyError, match="unknown"):
            await tool.execute("unknown", {}, lambda partial: None)
        result = await tool.execute("known", {}, lambda partial: None)
        assert _text(result) == "ok known"

    trio.run(main)


def _text(result: ToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


# --- replies and scenarios -----------------------------------------------------------------------


@examples(0.1)
@given(ts.replies(("work",), id_prefix="c"))
def test_a_reply_streams_into_the_message_it_describes(reply: faux.Reply) -> None:
    recorder = EventRecorder()
    work = ts.behaviour_tool("work", ToolBehaviour())

    async def main() -> list[Any]:
        config = AgentLoopConfig(model=faux.model([reply, "done"]))
        return await run_agent_loop(
            [UserMessage.text("go")], AgentContext(tools=[work]), config, recorder
        )

    messages = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_transcript(messages)
    first = messages[1]
    assert isinstance(first, AssistantMessage)
    assert first.content == reply.content
    calls = [b for b in reply.content if isinstance(b, ToolCall)]
    assert first.stop_reason == (reply.stop_reason or ("toolUse" if calls else "stop"))
    deltas = [e for e in recorder.events if e.type == "message_update"]
    assert len(deltas) >= len(reply.content)


@examples(0.1)
@given(ts.scenarios())
def test_scenarios_are_well_formed_and_always_end(scenario: Scenario) -> None:
    ids = {b.id for r in scenario.replies for b in r.content if isinstance(b, ToolCall)}
    assert set(scenario.behaviours) == ids
    assert set(scenario.failing_hooks) <= ids
    if scenario.hangs:
        assert any(
            i.kind in ("abort", "outer_cancel") and i.at is not None for i in scenario.injections
        )
    for via in ("loop", "agent"):
        result = trio.run(
            lambda: ts.run_scenario(scenario, via=via),  # noqa: B023  (called at once)
            clock=trio.testing.MockClock(autojump_threshold=0),
        )
        assert not result.timed_out
        assert result.leaked == []
        assert len(result.streams) == len(result.model.calls)


def test_an_injection_needs_one_time() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Injection("abort")
    with pytest.raises(ValueError, match="exactly one"):
        Injection("abort", at=0.0, at_event=("turn_end", 1))
    with pytest.raises(ValueError, match="at_event"):
        Injection("listener_failure", at=0.01)


def test_run_scenario_gives_up_after_max_time() -> None:
    hanging = Scenario(
        replies=[faux.reply(faux.tool_call("work", id="h"))],
        behaviours={"h": ToolBehaviour(outcome="hang")},
    )
    result = trio.run(
        lambda: ts.run_scenario(hanging, max_time=5.0),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    assert result.timed_out
    assert result.ended_at == 5.0


# --- hypothesis is imported only by the strategies -----------------------------------------------


def test_the_package_and_the_kit_do_not_import_hypothesis() -> None:
    script = textwrap.dedent(
        """
        import sys

        class NoHypothesis:
            def find_spec(self, name, path=None, target=None):
                if name == "hypothesis" or name.startswith("hypothesis."):
                    raise ImportError(f"{name} is not installed here")
                return None

        sys.meta_path.insert(0, NoHypothesis())
        import trio_agent
        import trio_agent.providers
        import trio_agent.testing
        assert not any(name.split(".")[0] == "hypothesis" for name in sys.modules)
        try:
            import trio_agent.testing.strategies
        except ImportError:
            print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent.parent,  # the repository, for "import trio_agent"
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
