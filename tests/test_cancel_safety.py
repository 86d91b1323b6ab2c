"""assert_cancel_safe: it passes our loop, Agent and providers, and it catches broken tools.

Every scenario is cancelled at each of its points (task steps and events),
through the run's abort and through a scope around it; the kit then checks
the grammar, the transcript, leaked tasks, swallowed cancellations and the
grace period. The broken tools below are the mistakes a user makes in their
own tools: each must be caught, with a message that names it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any

import pytest
import trio
import trio.testing

from tests._support import ECHO, make_tool
from tests.test_provider_matrix import APIS, KEY, Api
from trio_agent import (
    Agent,
    AgentContext,
    AgentEnd,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AgentStart,
    AssistantMessage,
    MessageEnd,
    MessageStart,
    ToolResult,
    ToolUpdate,
    TurnEnd,
    TurnStart,
    UserMessage,
    run_agent_loop,
)
from trio_agent.testing import (
    CancelSafetyReport,
    ScriptedResponse,
    TaskWatcher,
    Trial,
    assert_cancel_safe,
    check_event_grammar,
    open_sse_server,
    reply,
    scripted_model,
    tool_call,
)


async def nap(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    """A well-behaved tool: it reports progress, sleeps, and lets Cancelled through."""
    on_update(ToolResult.text("half way"))
    await trio.sleep(args.get("seconds", 0.5))
    return ToolResult.text("rested")


async def tidy(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    """A well-behaved tool with cleanup: shielded, bounded, and the cancellation re-raised."""
    try:
        await trio.sleep(0.5)
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(0.2):
            await trio.sleep(0.1)  # say goodbye to a peer
    return ToolResult.text("tidy")


NAP = make_tool("nap", nap)
TIDY = make_tool("tidy", tidy)


def naps_then_done(*names: str) -> Any:
    calls = [
        tool_call(name, {"seconds": 0.1 * (i + 1)}, id=f"c{i}") for i, name in enumerate(names)
    ]
    return scripted_model([reply("Let me see.", *calls), reply("All done.", chunk_size=3)])


# --- our own code passes --------------------------------------------------------------------------


@pytest.mark.parametrize("execution", ["parallel", "sequential"])
async def test_the_loop_is_cancel_safe(autojump_clock: trio.abc.Clock, execution: str) -> None:
    async def scenario(trial: Trial) -> list[AgentMessage]:
        prompts: list[AgentMessage] = [UserMessage.text("go")]
        context = AgentContext(tools=trial.tools([NAP, TIDY, ECHO]))
        config = AgentLoopConfig(
            model=naps_then_done("nap", "tidy", "echo"),
            tool_execution=execution,  # type: ignore[arg-type]  # a ToolExecution, as str
        )
        new = await run_agent_loop(prompts, context, config, trial.recorder, abort=trial.abort)
        return [*prompts, *new]

    report = await assert_cancel_safe(scenario)
    assert report.points > 30
    assert report.tried["abort"] == report.tried["outer"] == tuple(range(1, report.points + 1))
    assert report.trials == 1 + 2 * report.points


async def test_the_agent_is_cancel_safe_with_steering_and_follow_ups(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def scenario(trial: Trial) -> None:
        model = scripted_model(
            [reply(tool_call("nap", {"seconds": 1}, id="n1")), "steered", "followed up"]
        )
        agent = trial.watch(Agent(model, tools=[NAP]))

        async def host() -> None:
            await trio.sleep(0.5)  # while the tool runs
            agent.steer("also this")
            agent.follow_up("and then that")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(host)
            await agent.prompt("go")

    report = await assert_cancel_safe(scenario)
    assert report.points > 20


@pytest.mark.parametrize("api", APIS, ids=[api.name for api in APIS])
async def test_every_provider_is_cancel_safe_over_loopback(clock: Any, api: Api) -> None:
    async with open_sse_server() as server:

        async def scenario(trial: Trial) -> None:
            server.add(ScriptedResponse(body=api_fixture(api, api.call_fixture)))
            server.add(ScriptedResponse(body=api_fixture(api, api.answer_fixture)))
            agent = trial.watch(Agent(api.model(server.url), tools=[ECHO], api_key=KEY))
            await agent.prompt("echo something")

        report = await assert_cancel_safe(scenario, max_points=40)
    assert report.points > 10
    assert len(report.tried["abort"]) == min(40, report.points)


def api_fixture(api: Api, name: str) -> bytes:
    from tests._providers import fixture

    return fixture(api.name, name)


# --- broken tools are caught ----------------------------------------------------------------------


async def swallower(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    try:
        await trio.sleep(1)
    except trio.Cancelled:  # noqa: ASYNC103  (on purpose: the bug the kit must catch)
        return ToolResult.text("cancelled, but who cares")  # noqa: ASYNC104  (the same bug)
    return ToolResult.text("done")


async def converter(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    try:
        await trio.sleep(1)
    except BaseException as exc:  # on purpose: a tool that wraps "every failure"
        raise RuntimeError("the tool failed") from exc  # noqa: ASYNC104  (on purpose, as above)
    return ToolResult.text("done")


async def stubborn(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    try:
        await trio.sleep(1)
    finally:
        with trio.CancelScope(shield=True):
            await trio.sleep(600)  # a peer that takes ten minutes to answer a goodbye
    return ToolResult.text("done")


def one_call(tool: Any) -> Any:
    async def scenario(trial: Trial) -> None:
        model = scripted_model([reply(tool_call(tool.name, id="t1")), "done"])
        agent = trial.watch(Agent(model, tools=[tool]))
        await agent.prompt("go")

    return scenario


async def test_a_tool_that_swallows_cancelled_is_caught(autojump_clock: trio.abc.Clock) -> None:
    with pytest.raises(AssertionError) as caught:
        await assert_cancel_safe(one_call(make_tool("swallower", swallower)))
    message = str(caught.value)
    assert message.startswith("abort at point ")
    assert (
        "tool 'swallower' (call 't1') returned a result after trio.Cancelled reached it "
        "(it swallowed the cancellation)" in message
    )
    assert "rerun: assert_cancel_safe(scenario, modes=['abort'], points=[" in message


async def test_a_tool_that_turns_cancelled_into_an_error_is_caught(
    autojump_clock: trio.abc.Clock,
) -> None:
    with pytest.raises(AssertionError, match=r"tool 'converter' \(call 't1'\) turned trio"):
        await assert_cancel_safe(one_call(make_tool("converter", converter)))


async def test_a_tool_that_blocks_in_a_shield_without_a_timeout_is_caught(
    autojump_clock: trio.abc.Clock,
) -> None:
    with pytest.raises(AssertionError) as caught:
        await assert_cancel_safe(one_call(make_tool("stubborn", stubborn)), grace=5)
    assert "the scenario ended 600 s after the cancellation, more than grace=5" in str(caught.value)


def line_of(function: Any, text: str) -> str:
    """``file:line`` of the first line of ``function``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(function)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(function)}:{first + offset}"


async def test_a_stuck_tool_that_runs_alone_is_named_with_its_call_and_line(
    autojump_clock: trio.abc.Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    # A call that runs alone runs in the run's own task, the scenario's: no task of its own.
    with pytest.raises(AssertionError) as caught:
        await assert_cancel_safe(one_call(make_tool("stubborn", stubborn)), modes=["abort"])
    stuck = (
        "  task 'scenario', in tool 'stubborn' (call 't1'), "
        f"waiting at {line_of(stubborn, 'sleep(600)')} in stubborn (awaiting trio."
    )
    printed = capsys.readouterr().err
    assert "still running 5 s after the cancellation; tasks:\n" + stuck in printed
    assert "; still running at the end of the grace period:\n" + stuck in str(caught.value)


async def pair(
    started: set[str], tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate
) -> ToolResult:
    """Stuck in a shield after a cancellation, once both calls of its batch are running."""
    started.add(tool_call_id)
    try:
        await trio.sleep(1)
    finally:
        if len(started) == 2:
            with trio.CancelScope(shield=True):
                await trio.sleep(600)
    return ToolResult.text("done")


async def test_stuck_parallel_tools_are_each_named_with_their_call_and_line(
    autojump_clock: trio.abc.Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    async def scenario(trial: Trial) -> None:
        tool = make_tool("pair", functools.partial(pair, set()))
        calls = [tool_call("pair", id="p1"), tool_call("pair", id="p2")]
        await trial.watch(Agent(scripted_model([reply(*calls), "done"]), tools=[tool])).prompt("go")

    with pytest.raises(AssertionError) as caught:
        await assert_cancel_safe(scenario, modes=["abort"])
    report = str(caught.value)
    printed = capsys.readouterr().err
    for call_id in ("p1", "p2"):
        stuck = (
            "  task 'trio_agent._execution.ToolCalls._execute_concurrently.<locals>.child', "
            f"in tool 'pair' (call {call_id!r}), "
            f"waiting at {line_of(pair, 'sleep(600)')} in pair (awaiting trio."
        )
        assert stuck in printed
        assert stuck in report
    # The run's own task waits for them, where the scenario awaits prompt().
    assert f"  task 'scenario', waiting at {line_of(scenario, 'prompt(')} in scenario" in report


async def test_a_tool_that_leaks_a_task_when_cancelled_is_caught(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with trio.open_nursery() as elsewhere:

        async def leaky(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> Any:
            stop = trio.Event()

            async def keep_alive() -> None:  # stopped on success only
                await stop.wait()

            elsewhere.start_soon(keep_alive)
            await trio.sleep(1)
            stop.set()
            return ToolResult.text("done")

        with pytest.raises(AssertionError) as caught:
            await assert_cancel_safe(one_call(make_tool("leaky", leaky)), modes=["abort"])
        elsewhere.cancel_scope.cancel()
    message = str(caught.value)
    assert "tasks started by the scenario outlived it:" in message
    where = line_of(test_a_tool_that_leaks_a_task_when_cancelled_is_caught, "await stop.wait()")
    assert f"waiting at {where} in keep_alive (awaiting trio." in message


async def test_a_scenario_that_swallows_the_outer_cancellation_is_caught(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def scenario(trial: Trial) -> None:
        agent = trial.watch(Agent(naps_then_done("nap"), tools=[NAP]))
        with contextlib.suppress(trio.Cancelled):  # "we were cancelled; never mind"
            await agent.prompt("go")

    with pytest.raises(AssertionError) as caught:
        await assert_cancel_safe(scenario, modes=["outer"])
    message = str(caught.value)
    assert message.startswith("cancellation from outside at point ")
    assert "the scenario returned normally although" in message
    assert "something swallowed trio.Cancelled" in message


# --- the report, reruns, and misuse ---------------------------------------------------------------


async def test_past_max_points_a_seeded_sample_is_tried(autojump_clock: trio.abc.Clock) -> None:
    async def scenario(trial: Trial) -> None:
        await trial.watch(Agent(naps_then_done("nap", "nap"), tools=[NAP])).prompt("go")

    first = await assert_cancel_safe(scenario, max_points=8, modes=["abort"], seed=3)
    again = await assert_cancel_safe(scenario, max_points=8, modes=["abort"], seed=3)
    tried = first.tried["abort"]
    assert isinstance(first, CancelSafetyReport)
    assert len(tried) == 8
    assert tried[0] == 1
    assert tried[-1] == first.points
    assert tried == again.tried["abort"]
    assert first.trials == 9


async def test_points_rerun_the_named_ones_only(autojump_clock: trio.abc.Clock) -> None:
    runs = 0

    async def scenario(trial: Trial) -> None:
        nonlocal runs
        runs += 1
        await trial.watch(Agent(naps_then_done("nap"), tools=[NAP])).prompt("go")

    report = await assert_cancel_safe(scenario, points=[3, 10_000], modes=["outer"])
    assert runs == 3  # the undisturbed run, and two trials
    assert report.tried == {"outer": (3, 10_000)}
    assert report.not_reached == {"outer": (10_000,)}


async def test_a_scenario_that_fails_on_its_own_is_reported_as_such(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def scenario(trial: Trial) -> None:
        raise KeyError("setup")

    with pytest.raises(AssertionError) as caught:
        await assert_cancel_safe(scenario)
    assert str(caught.value).startswith(
        "the scenario fails without any cancellation:\n- the scenario raised KeyError('setup')"
    )


async def test_bad_arguments_are_refused() -> None:
    async def scenario(trial: Trial) -> None:
        return None

    with (
        trio.testing.assert_checkpoints(),  # a refusal is a checkpoint too
        pytest.raises(ValueError, match="modes must be 'abort' and/or 'outer', not 'later'"),
    ):
        await assert_cancel_safe(scenario, modes=["later"])  # type: ignore[list-item]  # the bad input
    with (
        trio.testing.assert_checkpoints(),
        pytest.raises(ValueError, match="max_points must be at least 2, not 1"),
    ):
        await assert_cancel_safe(scenario, max_points=1)


async def test_watched_tools_run_as_usual_outside_the_fuzzer(
    autojump_clock: trio.abc.Clock,
) -> None:
    trial = Trial(None, None)
    (watched,) = trial.tools([make_tool("swallower", swallower)])
    with trio.move_on_after(0.5):
        await watched.execute("t", {}, _no_update)
    result = await watched.execute("t", {}, _no_update)
    assert result.content[0].text == "done"  # type: ignore[union-attr]  # a TextContent


def _no_update(partial: ToolResult) -> None:
    return None


# --- TaskWatcher ----------------------------------------------------------------------------------


async def test_task_watcher_names_a_task_that_outlived_its_code() -> None:
    watcher = TaskWatcher()
    async with trio.open_nursery() as outside:
        with watcher.watching():
            async with trio.open_nursery() as inside:  # noqa: ASYNC112  (a task that ends)
                inside.start_soon(trio.sleep, 0)
            outside.start_soon(trio.sleep_forever, name="lingerer")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(AssertionError) as caught:
            watcher.check()
        outside.cancel_scope.cancel()
    message = str(caught.value)
    assert message.startswith("1 task(s) outlived the code that started them:")
    assert "task 'lingerer', waiting at" in message
    assert [task.name for task in watcher.started] == ["trio.sleep", "lingerer"]
    watcher.check()  # all gone now


async def test_task_watcher_does_not_count_system_tasks() -> None:
    """A system task (the providers' pool keeps one per Trio run) is the Trio run's: it
    lives until trio.run ends, and is no leak of the code that happened to start it."""
    watcher = TaskWatcher()
    async with trio.open_nursery() as outside:
        with watcher.watching():
            trio.lowlevel.spawn_system_task(trio.sleep_forever, name="the run's own")
            outside.start_soon(trio.sleep_forever, name="lingerer")
        await trio.testing.wait_all_tasks_blocked()
        assert [task.name for task in watcher.started] == ["lingerer"]
        outside.cancel_scope.cancel()
    watcher.check()


async def test_task_watcher_running_lists_the_watching_task_and_the_counted_ones_alive() -> None:
    watcher = TaskWatcher()
    me = trio.lowlevel.current_task()
    assert watcher.running() == []
    with watcher.watching():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever, name="first")
            nursery.start_soon(trio.sleep, 0, name="brief")
            nursery.start_soon(trio.sleep_forever, name="last")
            await trio.testing.wait_all_tasks_blocked()
            assert [task.name for task in watcher.running()] == [me.name, "first", "last"]
            assert watcher.running()[0] is me
            nursery.cancel_scope.cancel()
    assert watcher.running() == []


# --- the checkers' reports ------------------------------------------------------------------------


def test_the_grammar_report_names_the_open_message_and_the_one_ending() -> None:
    reply = AssistantMessage()
    prompt = UserMessage.text("go")
    opened: list[AgentEvent] = [AgentStart(), TurnStart(), MessageStart(reply)]
    with pytest.raises(AssertionError) as caught:
        check_event_grammar([*opened, TurnEnd(reply, ()), AgentEnd(())])
    assert str(caught.value).startswith(
        "event #3 (turn_end): turn_end while an assistant message is open\n"
    )
    with pytest.raises(AssertionError) as caught:
        check_event_grammar([*opened, MessageEnd(prompt)])
    assert str(caught.value).startswith(
        "event #3 (message_end): message_end of a user message while an assistant one is open\n"
    )
