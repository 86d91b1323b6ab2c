"""Limits the documentation states, each at the limit and one past it.

A limit the docs state ("at most 2,000 characters", "holds ``buffer``
events", "up to ``max_messages``") is a promise: at the limit it holds (a
text of exactly the limit is kept whole), one past it the limit shows (one
character more is cut to exactly the limit, the note that says so
included). The command line's file tools have theirs in
``test_cli_files.py``, tool time limits in ``test_limits.py``.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._providers import call, options
from tests._support import make_tool
from tests.test_transport import APIS, Api
from trio_agent import Agent, AgentTool, ToolCall, ToolResult, ToolUpdate
from trio_agent.providers import anthropic, faux
from trio_agent.providers._common import MAX_ERROR_CHARS, _told
from trio_agent.providers._sse import MAX_EVENT_CHARS, EventTooLarge, SseDecoder, SseEvent
from trio_agent.testing import (
    EventRecorder,
    ScriptedResponse,
    Trial,
    assert_cancel_safe,
    open_sse_server,
    reply,
    scripted_model,
    sse_body,
    tool_call,
)
from trio_agent.testing import strategies as ts

CUT = " [...]"

# -- a reply's error message: at most 2,000 characters (docs/design.md) --------------------


def test_an_error_message_is_at_most_max_error_chars_the_note_included() -> None:
    assert MAX_ERROR_CHARS == 2000
    whole = "e" * MAX_ERROR_CHARS
    assert _told(whole, ()) == whole
    cut = _told(whole + "f", ())
    assert cut == "e" * (MAX_ERROR_CHARS - len(CUT)) + CUT
    assert len(cut) == MAX_ERROR_CHARS
    # The key is replaced before the text is measured and cut.
    assert _told("k" * 30 + "e" * 1990, ("k" * 30,)) == "***" + "e" * 1990


def in_band_error(api: Api, text: str) -> bytes:
    """A well-formed in-band error event of ``api`` whose message is ``text``."""
    if api.name == "openai-chat":
        return sse_body([(None, {"error": {"message": text, "type": "server_error"}})])
    if api.name == "anthropic-messages":
        return sse_body([("error", {"type": "error", "error": {"type": "x", "message": text}})])
    if api.name == "google-generative-ai":
        return sse_body([(None, {"error": {"code": 503, "message": text}})])
    return sse_body([("error", {"type": "error", "code": "server_error", "message": text})])


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_an_in_band_error_of_the_limit_is_whole_and_one_more_is_cut_to_it(
    clock: Any, api: Api
) -> None:
    async def told(text: str) -> str:
        server.add(ScriptedResponse(body=in_band_error(api, text)))
        result = await call(api.stream, api.model(server.url), opts=options(max_retries=0))
        assert result.message.stop_reason == "error"
        assert result.message.error_message is not None
        return result.message.error_message

    async with open_sse_server() as server:
        said = await told(".")  # what the provider puts before the server's text
        assert said.endswith(": .")
        room = MAX_ERROR_CHARS - len(said) + 1
        text = "".join(chr(ord("a") + n % 26) for n in range(room + 1))
        assert await told(text[:room]) == said[:-1] + text[:room]
        cut = await told(text)
        assert cut == said[:-1] + text[: room - len(CUT)] + CUT
        assert len(cut) == MAX_ERROR_CHARS


# -- Agent.events(buffer=64): the channel holds `buffer` events (its docstring) -------------


@pytest.mark.parametrize("buffer", [1, 3])
async def test_a_consumer_that_reads_nothing_lets_the_run_get_exactly_buffer_events_ahead(
    autojump_clock: trio.abc.Clock, buffer: int
) -> None:
    agent = Agent(faux.model([faux.reply("abcdefgh", chunk_size=1)]))
    behind = EventRecorder()  # told of an event once the channel took it
    async with trio.open_nursery() as nursery, agent.events(buffer=buffer) as channel:
        agent.subscribe(behind)
        nursery.start_soon(agent.prompt, "go")
        await trio.testing.wait_all_tasks_blocked()
        assert (len(behind.events), channel.statistics().current_buffer_used) == (buffer, buffer)
        for taken in range(1, 4):  # each event read lets exactly one more in
            await channel.receive()
            await trio.testing.wait_all_tasks_blocked()
            assert len(behind.events) == buffer + taken
        agent.abort()
    assert inspect.signature(Agent.events).parameters["buffer"].default == 64


# -- anthropic.tool_id: ^[a-zA-Z0-9_-]{1,64}$ (its docstring) ----------------------------


def test_a_tool_id_of_64_characters_is_kept_and_one_of_65_is_made_64() -> None:
    at = "a" * 63 + "Z"
    assert anthropic.tool_id(at) == at
    past = anthropic.tool_id(at + "9")
    assert len(past) == 64
    assert past.startswith("a" * 55 + "_")
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", past)
    cleaned = "a" * 63 + "."  # 64 once "." is "_"
    assert anthropic.tool_id(cleaned) == "a" * 63 + "_"
    assert len(anthropic.tool_id(cleaned + ".")) == 64
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", anthropic.tool_id(""))  # none: 1 at least


# -- one event is held to 32 Mi characters while it waits for its end (docs/design.md) ---------


def test_an_unfinished_event_of_the_limit_is_held_and_one_more_character_is_refused() -> None:
    assert MAX_EVENT_CHARS == 32 * 1024 * 1024
    decoder = SseDecoder(max_event_chars=1000)
    assert decoder.decode("data: " + "x" * 994) == []  # 1,000 characters held
    assert decoder.decode("\n\n") == [SseEvent("message", "x" * 994)]
    assert decoder.decode("data: " + "x" * 994) == []
    with pytest.raises(EventTooLarge, match=r"longer than 1,000 characters \(1,001 received"):
        decoder.decode("x")


# -- assert_cancel_safe: past max_points (200), a sample; grace (5 s) (its docstring, testing.md)


async def naps(trial: Trial) -> None:
    model = scripted_model([reply(tool_call("nap", {}, id="t1")), "done"])
    await trial.watch(Agent(model, tools=[make_tool("nap", nap)])).prompt("go")


async def nap(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    await trio.sleep(1)
    return ToolResult.text("rested")


async def test_max_points_points_are_all_tried_and_one_more_is_a_sample_of_max_points(
    autojump_clock: trio.abc.Clock,
) -> None:
    signature = inspect.signature(assert_cancel_safe).parameters
    assert (signature["max_points"].default, signature["grace"].default) == (200, 5.0)
    points = (await assert_cancel_safe(naps, modes=["abort"], max_points=2)).points
    every = await assert_cancel_safe(naps, modes=["abort"], max_points=points)
    assert every.tried["abort"] == tuple(range(1, points + 1))
    sample = await assert_cancel_safe(naps, modes=["abort"], max_points=points - 1)
    tried = sample.tried["abort"]
    assert len(tried) == points - 1
    assert (tried[0], tried[-1]) == (1, points)


def slow_goodbye(seconds: float) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        try:
            await trio.sleep(1)
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(seconds)  # a goodbye to a peer, shielded
        return ToolResult.text("done")

    return make_tool("goodbye", execute)


async def test_a_scenario_ending_grace_seconds_after_the_cancellation_passes_and_later_fails(
    autojump_clock: trio.abc.Clock,
) -> None:
    def scenario(tool: AgentTool) -> Any:
        async def run(trial: Trial) -> None:
            model = scripted_model([reply(tool_call("goodbye", {}, id="t1")), "done"])
            await trial.watch(Agent(model, tools=[tool])).prompt("go")

        return run

    await assert_cancel_safe(scenario(slow_goodbye(5)), modes=["abort"], grace=5)
    with pytest.raises(AssertionError, match=r"ended 5\.5 s after the cancellation, more than"):
        await assert_cancel_safe(scenario(slow_goodbye(5.5)), modes=["abort"], grace=5)


# -- the testing kit's strategies: "up to max_..." (their docstrings) -------------------------
#
# Each bound is never passed, and is reached, in the examples drawn.


def calls_of(message: Any) -> int:
    return sum(isinstance(block, ToolCall) for block in message.content)


def tool_call_replies(scenario: ts.Scenario) -> list[faux.Reply]:
    return [reply for reply in scenario.replies if calls_of(reply)]


def kinds(injections: tuple[ts.Injection, ...], kind: str) -> int:
    return sum(injection.kind == kind for injection in injections)


def steering(injections: tuple[ts.Injection, ...]) -> int:
    return max(kinds(injections, "steer"), kinds(injections, "follow_up"))


def exchanges(transcript: list[Any]) -> int:
    return sum(message.role == "user" for message in transcript)


def most_calls(transcript: list[Any]) -> int:
    return max((calls_of(m) for m in transcript if m.role == "assistant"), default=0)


BOUNDED: list[Any] = [
    pytest.param(
        ts.scenarios(max_turns=2, max_tool_calls=2, broken_streams=False),
        lambda s: len(tool_call_replies(s)),
        2,
        id="scenarios(max_turns)",
    ),
    pytest.param(
        ts.scenarios(max_turns=2, max_tool_calls=2, broken_streams=False),
        lambda s: max(map(calls_of, s.replies)),
        2,
        id="scenarios(max_tool_calls)",
    ),
    pytest.param(ts.injections(max_messages=2), steering, 2, id="injections(max_messages)"),
    pytest.param(
        ts.assistant_messages(max_tool_calls=2),
        calls_of,
        2,
        id="assistant_messages(max_tool_calls)",
    ),
    pytest.param(
        ts.replies(("work",), min_tool_calls=1, max_tool_calls=2),
        calls_of,
        2,
        id="replies(max_tool_calls)",
    ),
    pytest.param(
        ts.transcripts(max_exchanges=2, max_tool_calls=2),
        lambda t: (exchanges(t), most_calls(t)),
        (2, 2),
        id="transcripts(max_exchanges, max_tool_calls)",
    ),
    pytest.param(
        ts.tool_behaviours(max_updates=1), lambda b: b.updates, 1, id="tool_behaviours(max_updates)"
    ),
]


@pytest.mark.parametrize(("strategy", "count", "bound"), BOUNDED)
def test_a_strategy_draws_up_to_its_bound_and_never_past_it(
    strategy: Any, count: Any, bound: Any
) -> None:
    """(``count`` and ``bound``: an int, or a tuple of them for two bounds at once.)"""
    seen: list[tuple[int, ...]] = []

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def never_past(value: Any) -> None:
        counted = count(value)
        seen.append(counted if isinstance(counted, tuple) else (counted,))
        assert all(c <= b for c, b in zip(seen[-1], bounds, strict=True))

    bounds = bound if isinstance(bound, tuple) else (bound,)
    never_past()
    assert tuple(map(max, zip(*seen, strict=True))) == bounds


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ts.scenarios(behaviours=st.just(ts.ToolBehaviour(outcome="hang")), injections=st.just(())))
def test_a_scenario_whose_tool_hangs_gets_an_abort_at_100_ms(scenario: ts.Scenario) -> None:
    expected = (ts.Injection("abort", at=0.1),) if scenario.hangs else ()
    assert scenario.injections == expected
