"""Budgets: a run stops at a limit the caller sets on tokens, dollars, turns or tool calls."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from tests._providers import fixture
from tests._support import ECHO, examples, make_tool, usage
from trio_agent import (
    Agent,
    AgentContext,
    AgentEnd,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    Budget,
    BudgetReached,
    Cost,
    ModelCost,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    TurnContext,
    Usage,
    UserMessage,
    run_agent_loop,
    to_json,
)
from trio_agent.providers import faux, openai_chat
from trio_agent.testing import (
    EventRecorder,
    ScriptedResponse,
    check_event_grammar,
    check_transcript,
    open_sse_server,
)


def echo_call(value: str = "x") -> faux.Reply:
    return faux.reply(faux.tool_call("echo", {"value": value}))


def with_usage(reply: faux.Reply, usage: Usage) -> faux.Reply:
    return attrs.evolve(reply, usage=usage)


async def run(
    model: faux.ScriptedModel,
    budget: Budget | None,
    tools: Sequence[Any] = (ECHO,),
    **config: Any,
) -> tuple[list[AgentMessage], EventRecorder]:
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=list(tools)),
        AgentLoopConfig(model=model, budget=budget, **config),
        recorder,
    )
    check_event_grammar(recorder.events)
    check_transcript(messages)
    return messages, recorder


def stop_of(recorder: EventRecorder) -> BudgetReached | None:
    end = recorder.events[-1]
    assert isinstance(end, AgentEnd)
    return end.stop


def results(messages: Sequence[AgentMessage]) -> list[ToolResultMessage]:
    return [message for message in messages if isinstance(message, ToolResultMessage)]


# --- the value --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error", "text"),
    [
        ({"turns": 0}, ValueError, "Budget turns must be an int of 1 or more, not 0"),
        (
            {"input_tokens": -1},
            ValueError,
            "Budget input_tokens must be an int of 1 or more, not -1",
        ),
        ({"output_tokens": 0}, ValueError, "Budget output_tokens must be an int of 1 or more"),
        (
            {"total_tokens": 2.5},
            TypeError,
            "Budget total_tokens must be an int or None, not float 2.5",
        ),
        ({"turns": True}, TypeError, "Budget turns must be an int or None, not bool True"),
        ({"tool_calls": -1}, ValueError, "Budget tool_calls must be an int of 0 or more, not -1"),
        ({"tool_calls": "3"}, TypeError, "Budget tool_calls must be an int or None, not str '3'"),
        ({"cost": 0}, ValueError, "Budget cost must be a positive finite number of dollars, not 0"),
        ({"cost": -0.5}, ValueError, r"Budget cost must be .* dollars, not -0.5"),
        ({"cost": math.nan}, ValueError, r"Budget cost must be .* dollars, not nan"),
        ({"cost": math.inf}, ValueError, r"Budget cost must be .* dollars, not inf"),
        ({"cost": 10**400}, ValueError, r"not an int of 1329 bits \(too large for a float\)"),
        ({"cost": "1"}, TypeError, "Budget cost must be a number of dollars or None, not str '1'"),
    ],
)
def test_a_bad_limit_is_refused_naming_the_field_and_the_value(
    fields: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error, match=text):
        Budget(**fields)


def test_limits_in_range_are_taken() -> None:
    budget = Budget(
        input_tokens=1, output_tokens=2, total_tokens=3, cost=0.01, turns=1, tool_calls=0
    )
    assert (budget.cost, budget.tool_calls) == (0.01, 0)
    assert Budget(cost=2) == Budget(cost=2)


def test_the_config_takes_only_a_budget() -> None:
    with pytest.raises(
        TypeError, match=r"budget must be a trio_agent.Budget or None, not \{'turns"
    ):
        AgentLoopConfig(model=faux.model(), budget={"turns": 3})  # type: ignore[arg-type]  # the error under test


def test_budget_reached_says_which_budget_in_one_line() -> None:
    assert str(BudgetReached("cost", 0.5, 0.52)) == "cost budget of $0.5 reached (used $0.52)"
    assert str(BudgetReached("turns", 3, 3)) == "turns budget of 3 reached (used 3)"
    assert str(BudgetReached("tool_calls", 2, 3)) == "tool-call budget of 2 reached (used 3)"
    assert str(BudgetReached("input_tokens", 400, 300)) == (
        "input tokens budget of 400 reached (used 300)"
    )


# --- each budget, on the scripted model ---------------------------------------------------


async def test_no_budget_leaves_agent_end_as_it_was() -> None:
    messages, recorder = await run(faux.model([echo_call(), "done"]), None)
    assert stop_of(recorder) is None
    assert to_json(recorder.events[-1]) == {"type": "agent_end", "messages": to_json(messages)}


async def test_the_turn_budget_caps_the_model_requests() -> None:
    model = faux.model([echo_call(str(n)) for n in range(5)])
    messages, recorder = await run(model, Budget(turns=2))
    assert len(model.calls) == 2
    assert stop_of(recorder) == BudgetReached("turns", 2, 2)
    # The last turn's tool call was answered (it ran): nothing is left unanswered.
    assert [result.content[0].text for result in results(messages)] == ["echo:0", "echo:1"]  # type: ignore[union-attr]  # text blocks
    assert to_json(recorder.events[-1])["stop"] == {"name": "turns", "limit": 2, "used": 2}


async def test_the_turn_that_reaches_the_budget_ends_the_run_even_when_the_model_is_done() -> None:
    model = faux.model(["all done"])
    messages, recorder = await run(model, Budget(turns=1))
    assert stop_of(recorder) == BudgetReached("turns", 1, 1)
    assert messages[-1].stop_reason == "stop"  # type: ignore[union-attr]  # the reply


async def test_a_run_under_its_budget_ends_without_a_stop() -> None:
    model = faux.model([echo_call(), "done"])
    _, recorder = await run(model, Budget(turns=3, output_tokens=10_000, cost=1.0))
    assert stop_of(recorder) is None


async def test_the_output_budget_stops_once_used_up() -> None:
    model = faux.model([with_usage(echo_call(), usage(output=40)) for _ in range(5)])
    _, recorder = await run(model, Budget(output_tokens=100))
    # 0, 40 and 80 are under 100: three requests; the third crosses it (by one reply).
    assert len(model.calls) == 3
    assert stop_of(recorder) == BudgetReached("output_tokens", 100, 120)


async def test_the_input_budget_stops_before_a_request_that_would_cross_it() -> None:
    # Each request reads 150 tokens (cache reads and writes count as read).
    read = usage(input=100, cache_read=30, cache_write=20)
    model = faux.model([with_usage(echo_call(), read) for _ in range(5)])
    _, recorder = await run(model, Budget(input_tokens=400))
    # After two requests 300 are used; the next reads at least 150 again: 450 > 400.
    assert len(model.calls) == 2
    assert stop_of(recorder) == BudgetReached("input_tokens", 400, 300)


async def test_the_total_budget_counts_input_and_output() -> None:
    model = faux.model([with_usage(echo_call(), usage(input=10, output=20)) for _ in range(9)])
    _, recorder = await run(model, Budget(total_tokens=100))
    # 30 a turn: after 3, 90 + at least 10 more input is not over 100; after 4, 120.
    assert len(model.calls) == 4
    assert stop_of(recorder) == BudgetReached("total_tokens", 100, 120)


async def test_the_cost_budget_sums_the_replies_cost() -> None:
    model = faux.model([with_usage(echo_call(), usage(output=1, cost=0.25)) for _ in range(9)])
    _, recorder = await run(model, Budget(cost=0.6))
    assert len(model.calls) == 3
    assert stop_of(recorder) == BudgetReached("cost", 0.6, 0.75)


async def test_the_cost_budget_stops_before_a_request_that_would_cross_it() -> None:
    # Each request reads 100,000 tokens and costs $0.10; the next one reads at least as
    # many, at no less than the cache-read price ($0.50 a million): $0.05 at least.
    model = faux.model([with_usage(echo_call(), usage(input=100_000, cost=0.1)) for _ in range(9)])
    priced = attrs.evolve(model, cost=ModelCost(input=1.0, cache_read=0.5))
    _, recorder = await run(priced, Budget(cost=0.34))
    # After 3 requests $0.30 is spent, and the fourth would cost at least $0.05: $0.35 > $0.34.
    stop = stop_of(recorder)
    assert stop is not None
    assert (stop.name, stop.limit) == ("cost", 0.34)
    assert stop.used == pytest.approx(0.3)
    assert len(priced.calls) == 3
    # Without prices the floor is nothing: the fourth request is made.
    _, recorder = await run(
        faux.model([with_usage(echo_call(), usage(cost=0.1))] * 9), Budget(cost=0.34)
    )
    stop = stop_of(recorder)
    assert stop is not None
    assert stop.name == "cost"
    assert stop.used == pytest.approx(0.4)


async def test_a_cost_that_is_not_a_number_is_not_counted() -> None:
    # A server's usage is not trusted: a cost of NaN is left out, and the costs after it
    # still count.
    replies = [usage(cost=math.nan), usage(cost=0.3), usage(cost=0.3), usage(cost=0.3)]
    model = faux.model([with_usage(echo_call(), usage) for usage in replies])
    _, recorder = await run(model, Budget(cost=0.5))
    assert stop_of(recorder) == BudgetReached("cost", 0.5, 0.6)
    assert len(model.calls) == 3


async def test_a_tool_results_usage_counts() -> None:
    async def costly(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return attrs.evolve(ToolResult.text("sub-agent said hi"), usage=usage(output=500))

    model = faux.model([faux.reply(faux.tool_call("costly")), "never"])
    messages, recorder = await run(model, Budget(output_tokens=100), [make_tool("costly", costly)])
    assert len(model.calls) == 1
    assert stop_of(recorder) == BudgetReached("output_tokens", 100, 500)
    assert results(messages)[0].usage == usage(output=500)


async def test_a_tools_usage_that_is_not_numbers_is_left_out() -> None:
    junk = Usage(input="many", output=None, cost=Cost(total="lots"))  # type: ignore[arg-type]  # a tool's own mistake

    async def sloppy(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return attrs.evolve(ToolResult.text("fine"), usage=junk)

    model = faux.model(
        [faux.reply(faux.tool_call("sloppy")), with_usage(echo_call(), usage(output=7))]
    )
    budget = Budget(input_tokens=100, output_tokens=5, cost=1.0)
    messages, recorder = await run(model, budget, [make_tool("sloppy", sloppy), ECHO])
    assert stop_of(recorder) == BudgetReached("output_tokens", 5, 7)
    assert len(results(messages)) == 2


async def test_a_tools_negative_usage_gives_nothing_back() -> None:
    """A tool that reports negative tokens or dollars does not lower what the run has
    used: the budget still stops the run at the turn that reaches it."""
    refund = Usage(input=-10_000, output=-10_000, cost=Cost(total=-5.0))

    async def refunds(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return attrs.evolve(ToolResult.text("fine"), usage=refund)

    tool_turn = with_usage(faux.reply(faux.tool_call("refunds")), usage(output=60, cost=0.6))
    for budget, name in [(Budget(output_tokens=100), "output_tokens"), (Budget(cost=1.0), "cost")]:
        model = faux.model([tool_turn, tool_turn, tool_turn, "done"])
        _, recorder = await run(model, budget, [make_tool("refunds", refunds)])
        stop = stop_of(recorder)
        assert stop is not None
        assert (stop.name, len(model.calls)) == (name, 2)
        assert stop.used == pytest.approx(120 if name == "output_tokens" else 1.2)


async def test_counts_and_costs_too_large_for_a_float_do_not_fail_the_run() -> None:
    """A tool's cost of 10**400 dollars (an int no float holds) is left out, as a cost
    that is not finite is; a reply that read 10**400 tokens stops a cost budget before
    the next request (which would read as much, at any price)."""
    huge = Usage(cost=Cost(total=10**400))

    async def big(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return attrs.evolve(ToolResult.text("fine"), usage=huge)

    model = faux.model([faux.reply(faux.tool_call("big")), "done"])
    _, recorder = await run(model, Budget(cost=1.0), [make_tool("big", big)])
    assert (stop_of(recorder), len(model.calls)) == (None, 2)

    script: list[faux.Script] = [with_usage(echo_call(), usage(input=10**400)), "never"]
    model = attrs.evolve(faux.model(script), cost=ModelCost(input=3.0, cache_read=0.3))
    _, recorder = await run(model, Budget(cost=1.0))
    assert stop_of(recorder) == BudgetReached("cost", 1.0, 0.0)
    assert len(model.calls) == 1


def test_budget_reached_shows_an_int_too_long_for_digits_by_its_size() -> None:
    text = str(BudgetReached("input_tokens", 10, 10**5000))
    assert (
        text
        == "input tokens budget of 10 reached (used an int of 16610 bits (too large for a float))"
    )


async def test_an_error_reply_ends_the_run_as_always() -> None:
    model = faux.model([with_usage(faux.error("boom"), usage(output=999))])
    messages, recorder = await run(model, Budget(output_tokens=10))
    assert stop_of(recorder) is None
    assert messages[-1].stop_reason == "error"  # type: ignore[union-attr]  # the reply


async def test_an_aborted_run_has_no_stop_even_past_its_budget() -> None:
    abort = trio.CancelScope()

    async def aborts(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        abort.cancel()
        await trio.sleep_forever()
        raise AssertionError("not reached")

    model = faux.model([with_usage(faux.reply(faux.tool_call("aborts")), usage(output=50))])
    recorder = EventRecorder()
    with trio.fail_after(5):
        messages = await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[make_tool("aborts", aborts)]),
            AgentLoopConfig(model=model, budget=Budget(output_tokens=10, turns=1)),
            recorder,
            abort,
        )
    check_event_grammar(recorder.events)
    assert stop_of(recorder) is None
    assert results(messages)[0].content[0].text == "Operation aborted"  # type: ignore[union-attr]  # a text block


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_calls_past_the_tool_call_budget_are_answered_not_run(mode: str) -> None:
    ran: list[str] = []

    async def note(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        ran.append(args["value"])
        return ToolResult.text("ran " + args["value"])

    tool = make_tool("echo", note, schema=dict(ECHO.parameters))
    model = faux.model(
        [echo_call("a"), faux.reply(*[faux.tool_call("echo", {"value": v}) for v in "bcd"]), "x"]
    )
    messages, recorder = await run(model, Budget(tool_calls=2), [tool], tool_execution=mode)
    assert ran == ["a", "b"]
    answers = [(r.content[0].text, r.is_error) for r in results(messages)]  # type: ignore[union-attr]  # text blocks
    assert answers == [
        ("ran a", False),
        ("ran b", False),
        ("tool-call budget of 2 reached", True),
        ("tool-call budget of 2 reached", True),
    ]
    assert len(model.calls) == 2  # the run ends after the turn that met the limit
    assert stop_of(recorder) == BudgetReached("tool_calls", 2, 4)


async def test_a_call_past_the_budget_is_not_prepared_nor_shown_to_before_tool_call() -> None:
    seen: list[str] = []

    async def before(context: Any) -> None:
        seen.append(context.tool_call.id)

    calls = [
        faux.tool_call("echo", {"value": "ok"}, id="first"),
        faux.tool_call("echo", {"wrong": 1}, id="second"),  # invalid, but past the limit
        faux.tool_call("nowhere", {}, id="third"),
    ]
    model = faux.model([faux.reply(*calls)])
    messages, _ = await run(model, Budget(tool_calls=1), before_tool_call=before)
    assert seen == ["first"]
    assert [r.content[0].text for r in results(messages)] == [  # type: ignore[union-attr]  # text blocks
        "echo:ok",
        "tool-call budget of 1 reached",
        "tool-call budget of 1 reached",
    ]


async def test_a_tool_call_budget_of_zero_runs_no_tool() -> None:
    model = faux.model([echo_call(), "x"])
    messages, recorder = await run(model, Budget(tool_calls=0))
    assert [r.is_error for r in results(messages)] == [True]
    assert stop_of(recorder) == BudgetReached("tool_calls", 0, 1)


async def test_a_run_that_uses_its_tool_calls_exactly_may_still_answer() -> None:
    model = faux.model([echo_call(), "the answer"])
    messages, recorder = await run(model, Budget(tool_calls=1))
    assert stop_of(recorder) is None
    assert messages[-1].text == "the answer"  # type: ignore[union-attr]  # the reply


async def test_truncated_calls_are_not_counted() -> None:
    truncated = faux.reply(faux.tool_call("echo", {"value": "a"}), stop_reason="length")
    model = faux.model([truncated, echo_call(), "done"])
    _, recorder = await run(model, Budget(tool_calls=1))
    assert stop_of(recorder) is None
    assert len(model.calls) == 3


async def test_a_budget_reached_while_parallel_tools_run_lets_every_call_finish() -> None:
    # The second call's result reports the usage that crosses the budget while the
    # others still run; they finish (in reverse order), every result is there in
    # source order, and the model is not asked again.
    sequencer = trio.testing.Sequencer()
    finished: list[int] = []

    async def step(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        index = int(args["value"])
        async with sequencer(2 - index):
            finished.append(index)
        spent = usage(output=1000) if index == 1 else None
        return attrs.evolve(ToolResult.text(f"step {index}"), usage=spent)

    tool = make_tool("step", step, schema=dict(ECHO.parameters))
    calls = [faux.tool_call("step", {"value": str(n)}) for n in range(3)]
    model = faux.model([faux.reply(*calls), "never"])
    with trio.fail_after(5):
        messages, recorder = await run(model, Budget(output_tokens=100), [tool])
    assert finished == [2, 1, 0]
    assert [r.content[0].text for r in results(messages)] == ["step 0", "step 1", "step 2"]  # type: ignore[union-attr]  # text blocks
    assert recorder.types.count("tool_execution_end") == 3
    assert len(model.calls) == 1
    assert stop_of(recorder) == BudgetReached("output_tokens", 100, 1000)


async def test_tool_calls_refused_in_a_parallel_batch_while_the_others_run() -> None:
    sequencer = trio.testing.Sequencer()

    async def step(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        index = int(args["value"])
        async with sequencer(1 - index):  # the second call finishes first
            pass
        return ToolResult.text(f"step {index}")

    tool = make_tool("step", step, schema=dict(ECHO.parameters))
    calls = [faux.tool_call("step", {"value": str(n)}) for n in range(4)]
    model = faux.model([faux.reply(*calls), "never"])
    with trio.fail_after(5):
        messages, recorder = await run(model, Budget(tool_calls=2), [tool])
    assert [r.content[0].text for r in results(messages)] == [  # type: ignore[union-attr]  # text blocks
        "step 0",
        "step 1",
        "tool-call budget of 2 reached",
        "tool-call budget of 2 reached",
    ]
    assert stop_of(recorder) == BudgetReached("tool_calls", 2, 4)


async def test_a_budget_stop_calls_no_hook_after_the_turn() -> None:
    asked: list[str] = []

    async def should_stop(turn: TurnContext) -> bool:
        asked.append("stop")
        return False

    async def steering() -> list[AgentMessage]:
        asked.append("steering")
        return []

    async def follow_ups() -> list[AgentMessage]:
        asked.append("follow-ups")
        return []

    async def prepare(turn: TurnContext) -> None:
        asked.append("prepare")

    model = faux.model([echo_call(), echo_call()])
    _, recorder = await run(
        model,
        Budget(turns=1),
        should_stop_after_turn=should_stop,
        get_steering_messages=steering,
        get_follow_up_messages=follow_ups,
        prepare_next_turn=prepare,
    )
    assert asked == ["steering"]  # the one poll before the first turn
    assert stop_of(recorder) == BudgetReached("turns", 1, 1)


# --- the Agent ------------------------------------------------------------------------


async def test_the_agent_keeps_the_stop_of_its_last_run_and_leaves_its_queue() -> None:
    model = faux.model([echo_call(), echo_call(), echo_call(), "done", "answered"])
    agent = Agent(model, tools=[ECHO], budget=Budget(turns=3))
    assert agent.state.stop is None
    agent.follow_up("and then?")
    await agent.prompt("go")
    assert agent.state.stop == BudgetReached("turns", 3, 3)
    assert agent.has_queued_messages()  # not polled: it waits for the next run
    # A budget is per run: the next one starts from nothing (two turns, the second
    # for the follow-up), and clears the stop when it starts.
    during: list[BudgetReached | None] = []

    async def listener(event: Any) -> None:
        if event.type == "agent_start":
            during.append(agent.state.stop)

    agent.subscribe(listener)
    await agent.prompt("again")
    assert during == [None]
    assert agent.state.stop is None
    assert len(model.calls) == 5
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.text == "answered"


# --- on loopback: a real provider, priced from the catalog ------------------------------


async def test_a_cost_budget_on_a_real_provider_priced_from_the_catalog(clock: Any) -> None:
    # gpt-4.1: $2 per million input tokens, $8 per million output tokens. Each reply
    # reads 60 and writes 9: $0.000192. Under $0.0003 after one, over after two.
    body = fixture("openai_chat", "echo_call.sse")
    responses = [ScriptedResponse(body=body) for _ in range(3)]
    with trio.fail_after(10):
        async with open_sse_server(*responses) as server:
            model = attrs.evolve(openai_chat.model("gpt-4.1"), base_url=server.url + "/v1")
            recorder = EventRecorder()
            messages = await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[ECHO]),
                AgentLoopConfig(model=model, api_key="test-key", budget=Budget(cost=0.0003)),
                recorder,
            )
    assert len(server.requests) == 2
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    assert [r.usage.cost.total for r in replies] == [pytest.approx(0.000192)] * 2
    stop = stop_of(recorder)
    assert stop is not None
    assert (stop.name, stop.limit) == ("cost", 0.0003)
    assert stop.used == pytest.approx(0.000384)
    check_event_grammar(recorder.events)
    check_transcript(messages)
    assert len(results(messages)) == 2


async def test_token_budgets_on_a_real_provider(clock: Any) -> None:
    body = fixture("openai_chat", "echo_call.sse")  # 60 in, 9 out
    responses = [ScriptedResponse(body=body) for _ in range(5)]
    with trio.fail_after(10):
        async with open_sse_server(*responses) as server:
            model = attrs.evolve(openai_chat.model("gpt-4.1"), base_url=server.url + "/v1")
            recorder = EventRecorder()
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[ECHO]),
                AgentLoopConfig(
                    model=model, api_key="test-key", budget=Budget(input_tokens=170, turns=4)
                ),
                recorder,
            )
    # 60, 120 (+60 = 180 > 170: stopped before the third request).
    assert len(server.requests) == 2
    assert stop_of(recorder) == BudgetReached("input_tokens", 170, 120)


# --- a property: any script, any budget ---------------------------------------------------

_usages = st.builds(
    usage,
    input=st.integers(0, 300),
    output=st.integers(0, 300),
    cache_read=st.integers(0, 100),
    cost=st.floats(0, 0.5, allow_nan=False),
)
_replies = st.builds(
    lambda calls, usage, text: with_usage(
        faux.reply(text, *[faux.tool_call("echo", {"value": str(n)}) for n in range(calls)]),
        usage,
    ),
    st.integers(0, 3),
    _usages,
    st.text(max_size=3),
)
_budgets = st.builds(
    Budget,
    input_tokens=st.none() | st.integers(1, 1500),
    output_tokens=st.none() | st.integers(1, 1500),
    total_tokens=st.none() | st.integers(1, 3000),
    cost=st.none() | st.floats(0.01, 2.0),
    turns=st.none() | st.integers(1, 8),
    tool_calls=st.none() | st.integers(0, 10),
)


def _spent(replies: Sequence[AssistantMessage]) -> dict[str, float]:
    read = sum(r.usage.input + r.usage.cache_read + r.usage.cache_write for r in replies)
    output = sum(r.usage.output for r in replies)
    return {
        "input_tokens": read,
        "output_tokens": output,
        "total_tokens": read + output,
        "cost": sum(r.usage.cost.total for r in replies),
    }


@examples(0.1)
@given(script=st.lists(_replies, min_size=1, max_size=10), budget=_budgets, parallel=st.booleans())
def test_any_run_ends_with_every_call_answered_and_no_budget_exceeded_past_one_turn(
    script: list[faux.Reply], budget: Budget, parallel: bool
) -> None:
    async def main() -> tuple[list[AgentMessage], EventRecorder, int]:
        model = faux.model(script)
        messages, recorder = await run(
            model, budget, tool_execution="parallel" if parallel else "sequential"
        )
        return messages, recorder, len(model.calls)

    messages, recorder, requests = trio.run(
        main, clock=trio.testing.MockClock(autojump_threshold=0)
    )
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    assert len(replies) == requests
    # Every tool call has exactly one result.
    call_ids = [call.id for reply in replies for call in reply.tool_calls]
    assert sorted(r.tool_call_id for r in results(messages)) == sorted(call_ids)
    # The run never asks past a turn or tool-call limit.
    if budget.turns is not None:
        assert requests <= budget.turns
    ran = [r for r in results(messages) if not r.content[0].text.startswith("tool-call budget")]  # type: ignore[union-attr]  # text blocks
    if budget.tool_calls is not None:
        assert len(ran) <= budget.tool_calls
    # Every request but the last was made with each token and cost budget not used up.
    before_last = _spent(replies[:-1])
    for name, spent in before_last.items():
        limit = getattr(budget, name)
        if limit is not None:
            assert spent < limit, (name, spent, limit)
    stop = stop_of(recorder)
    if stop is not None:
        assert getattr(budget, stop.name) == stop.limit
        if stop.name in _spent(replies):
            assert stop.used == _spent(replies)[stop.name]
    elif requests < len(script) and replies[-1].stop_reason != "error":
        # The run ended before the script without a budget: the model was done.
        assert not replies[-1].tool_calls


@examples(0.05)
@given(
    script=st.lists(_replies, min_size=1, max_size=8),
    budget=_budgets,
    parallel=st.booleans(),
    steering=st.integers(0, 3),
    follow_ups=st.integers(0, 3),
)
def test_with_queues_and_hooks_a_budget_stop_answers_every_call_and_asks_nothing_after(
    script: list[faux.Reply], budget: Budget, parallel: bool, steering: int, follow_ups: int
) -> None:
    """Steering and follow-up messages queued, ``should_stop_after_turn`` and
    ``prepare_next_turn`` set: a run a budget stops still ends with every call answered,
    within its turn and tool-call limits, and no queue or hook hears from it after the
    turn that reached the budget."""
    recorder = EventRecorder()
    asked: list[tuple[str, int]] = []  # (hook, turns ended when it was called)
    queues = {"steering": steering, "follow-ups": follow_ups}

    def turns_ended() -> int:
        return recorder.types.count("turn_end")

    def poll(name: str) -> list[AgentMessage]:
        asked.append((name, turns_ended()))
        if queues[name] == 0:
            return []
        queues[name] -= 1
        return [UserMessage.text(f"{name} {queues[name]}")]

    async def get_steering() -> list[AgentMessage]:
        return poll("steering")

    async def get_follow_ups() -> list[AgentMessage]:
        return poll("follow-ups")

    async def should_stop(turn: TurnContext) -> bool:
        asked.append(("stop", turns_ended()))
        return False

    async def prepare(turn: TurnContext) -> None:
        asked.append(("prepare", turns_ended()))

    async def main() -> tuple[list[AgentMessage], int]:
        model = faux.model(script)
        messages = await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[ECHO]),
            AgentLoopConfig(
                model=model,
                budget=budget,
                tool_execution="parallel" if parallel else "sequential",
                get_steering_messages=get_steering,
                get_follow_up_messages=get_follow_ups,
                should_stop_after_turn=should_stop,
                prepare_next_turn=prepare,
            ),
            recorder,
        )
        return messages, len(model.calls)

    messages, requests = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_event_grammar(recorder.events)
    check_transcript(messages)
    replies = [m for m in messages if isinstance(m, AssistantMessage)]
    call_ids = [call.id for reply in replies for call in reply.tool_calls]
    assert sorted(r.tool_call_id for r in results(messages)) == sorted(call_ids)
    if budget.turns is not None:
        assert requests <= budget.turns
    if budget.tool_calls is not None:
        ran = [r for r in results(messages) if not r.is_error]
        assert len(ran) <= budget.tool_calls
    if stop_of(recorder) is not None:
        last = turns_ended()
        assert [hook for hook, when in asked if when == last] == []
