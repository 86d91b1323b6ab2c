"""The loop's turn hooks of pi-agent-core 1.6: ``prepare_request``, ``finish_turn`` and the
messages of ``prepare_next_turn`` (their order, their effects, their errors, aborts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests._support import ECHO
from trio_agent import (
    Agent,
    AgentContext,
    AgentEnd,
    AgentEvent,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    Budget,
    LlmMessage,
    NextTurn,
    RequestContext,
    RequestUpdate,
    ToolResultMessage,
    TurnContext,
    TurnDecision,
    TurnEnd,
    UserMessage,
    default_convert_to_llm,
    run_agent_loop,
)
from trio_agent.providers import faux
from trio_agent.testing import (
    Trial,
    assert_cancel_safe,
    check_event_grammar,
    check_transcript,
)


def text_of(message: AgentMessage) -> str:
    """The text of a user or assistant message ("" for others)."""
    if isinstance(message, AssistantMessage):
        return message.text
    if isinstance(message, UserMessage):
        content = message.content
        if isinstance(content, str):
            return content
        return "".join(getattr(block, "text", "") for block in content)
    return ""


def _label(event: AgentEvent) -> str:
    message = getattr(event, "message", None)
    if event.type in ("message_start", "message_end") and message is not None:
        # A reply's start holds no text yet: its end names it.
        shown = event.type == "message_end" or not isinstance(message, AssistantMessage)
        return f"{event.type} {message.role} {text_of(message) if shown else ''}".rstrip()
    if event.type == "message_update":
        return ""
    return event.type


class Log:
    """One list for the events (without the deltas) and the hooks' calls, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.events: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        label = _label(event)
        if label:
            self.lines.append(label)


async def run(
    model: faux.ScriptedModel,
    log: Log,
    prompts: Sequence[AgentMessage] | None = None,
    **config: Any,
) -> list[AgentMessage]:
    messages = await run_agent_loop(
        [UserMessage.text("hi")] if prompts is None else prompts,
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, **config),
        log,
    )
    check_event_grammar(log.events)
    return messages


def echo_then(*replies: faux.Script) -> faux.ScriptedModel:
    return faux.model([faux.reply(faux.tool_call("echo", {"value": "v"}, id="t1")), *replies])


def queue(log: Log, name: str, *batches: Sequence[AgentMessage]) -> Any:
    """A queue hook that logs each poll and gives ``batches`` one per poll, then nothing."""
    left = list(batches)

    async def poll() -> list[AgentMessage]:
        log.lines.append(f"poll {name}")
        await trio.lowlevel.checkpoint()
        return list(left.pop(0)) if left else []

    return poll


# --- prepare_request ----------------------------------------------------------------------


async def test_prepare_request_runs_before_every_request_after_the_turns_messages() -> None:
    log = Log()
    seen: list[RequestContext] = []

    async def prepare(request: RequestContext) -> None:
        log.lines.append(f"prepare_request {len(request.context.messages)}")
        seen.append(request)

    async def transform(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
        log.lines.append("transform_context")
        return messages

    async def convert(messages: Sequence[AgentMessage]) -> list[LlmMessage]:
        log.lines.append("convert_to_llm")
        return await default_convert_to_llm(messages)

    async def key(provider: str) -> str:
        log.lines.append("get_api_key")
        return "k"

    steering = queue(log, "steering", [], [UserMessage.text("steer")])
    model = echo_then("done")
    await run(
        model,
        log,
        prepare_request=prepare,
        transform_context=transform,
        convert_to_llm=convert,
        get_api_key=key,
        get_steering_messages=steering,
    )
    request = ["prepare_request", "transform_context", "convert_to_llm", "get_api_key"]
    assert log.lines == [
        "agent_start",
        "turn_start",
        "message_start user hi",
        "message_end user hi",
        "poll steering",
        "prepare_request 1",
        *request[1:],
        "message_start assistant",
        "message_end assistant",
        "tool_execution_start",
        "tool_execution_end",
        "message_start toolResult",
        "message_end toolResult",
        "turn_end",
        "poll steering",
        "turn_start",
        "message_start user steer",
        "message_end user steer",
        "prepare_request 4",
        *request[1:],
        "message_start assistant",
        "message_end assistant done",
        "turn_end",
        "poll steering",
        "agent_end",
    ]
    assert [request.model for request in seen] == [model, model]
    assert [request.thinking_level for request in seen] == ["off", "off"]
    assert [m.role for m in seen[1].context.messages] == ["user", "assistant", "toolResult", "user"]


async def test_prepare_request_swaps_the_context_model_and_thinking_level_from_then_on() -> None:
    model = echo_then("done")
    other = attrs.evolve(model, id="other")
    levels: list[str] = []

    async def prepare(request: RequestContext) -> RequestUpdate | None:
        levels.append(request.thinking_level)
        if request.model is other:
            return None
        context = AgentContext("canonical", list(request.context.messages), request.context.tools)
        return RequestUpdate(context=context, model=other, thinking_level="high")

    messages = await run(model, Log(), prepare_request=prepare, reasoning="low")
    assert levels == ["low", "high"]
    first, second = model.calls
    assert (first.model.id, first.options.reasoning, first.context.system_prompt) == (
        "other",
        "high",
        "canonical",
    )
    assert (second.model.id, second.options.reasoning, second.context.system_prompt) == (
        "other",
        "high",
        "canonical",
    )
    assert [m.role for m in messages] == ["user", "assistant", "toolResult", "assistant"]


async def test_prepare_request_can_turn_reasoning_off_and_replace_the_transcript() -> None:
    model = faux.model(["done"])

    async def prepare(request: RequestContext) -> RequestUpdate:
        context = AgentContext(messages=[UserMessage.text("canonical")])
        return RequestUpdate(context=context, thinking_level="off")

    messages = await run(model, Log(), prepare_request=prepare, reasoning="medium")
    (call,) = model.calls
    assert call.options.reasoning is None
    assert [text_of(m) for m in call.context.messages] == ["canonical"]
    # The run's new messages are what it announced, whatever the context became.
    assert [m.role for m in messages] == ["user", "assistant"]


# --- finish_turn -------------------------------------------------------------------------------


def finisher(log: Log, *decisions: TurnDecision | None) -> Any:
    """A finish_turn that logs each call and returns ``decisions`` one per call, then None."""
    left = list(decisions)
    turns: list[TurnContext] = []

    async def finish(turn: TurnContext) -> TurnDecision | None:
        log.lines.append(f"finish_turn {turn.message.stop_reason} {len(turn.tool_results)}")
        turns.append(turn)
        await trio.lowlevel.checkpoint()
        return left.pop(0) if left else None

    finish.turns = turns  # type: ignore[attr-defined]  # for the test to read
    return finish


async def test_finish_turn_runs_after_the_tool_results_and_before_turn_end() -> None:
    log = Log()
    finish = finisher(log)
    messages = await run(echo_then("done"), log, finish_turn=finish)
    assert log.lines[log.lines.index("message_end toolResult") :] == [
        "message_end toolResult",
        "finish_turn toolUse 1",
        "turn_end",
        "turn_start",
        "message_start assistant",
        "message_end assistant done",
        "finish_turn stop 0",
        "turn_end",
        "agent_end",
    ]
    first, second = finish.turns
    assert first.message is messages[1]
    assert first.tool_results == (messages[2],)
    assert list(first.context.messages[-2:]) == messages[1:3]
    assert list(first.new_messages) == messages[:3]
    assert second.message is messages[3]


async def test_finish_turn_end_ends_the_run_without_polling_the_queues() -> None:
    log = Log()
    stops: list[TurnContext] = []

    async def stop(turn: TurnContext) -> bool:
        stops.append(turn)
        return False

    async def prepare(turn: TurnContext) -> None:
        log.lines.append("prepare_next_turn")

    model = echo_then("unused")
    messages = await run(
        model,
        log,
        finish_turn=finisher(log, "end"),
        get_steering_messages=queue(log, "steering", [], [UserMessage.text("s")]),
        get_follow_up_messages=queue(log, "follow-up", [UserMessage.text("f")]),
        should_stop_after_turn=stop,
        prepare_next_turn=prepare,
    )
    assert len(model.calls) == 1
    assert log.lines[-4:] == [
        "message_end toolResult",
        "finish_turn toolUse 1",
        "turn_end",
        "agent_end",
    ]
    assert log.lines.count("poll steering") == 1  # the one before the first turn
    assert "poll follow-up" not in log.lines
    assert "prepare_next_turn" not in log.lines
    assert stops == []
    assert [m.role for m in messages] == ["user", "assistant", "toolResult"]
    check_transcript(messages)


async def test_finish_turn_continue_after_a_text_reply_asks_again_with_the_context_as_it_is() -> (
    None
):
    log = Log()
    prepared: list[TurnContext] = []

    async def prepare(turn: TurnContext) -> None:
        log.lines.append("prepare_next_turn")
        prepared.append(turn)

    model = faux.model(["first", "second"])
    messages = await run(
        model,
        log,
        finish_turn=finisher(log, "continue"),
        get_steering_messages=queue(log, "steering"),
        get_follow_up_messages=queue(log, "follow-up"),
        prepare_next_turn=prepare,
    )
    assert log.lines[log.lines.index("message_end assistant first") :] == [
        "message_end assistant first",
        "finish_turn stop 0",
        "turn_end",
        "poll steering",
        "poll follow-up",  # the queues may satisfy the decision: polled first
        "prepare_next_turn",
        "poll steering",
        "turn_start",
        "message_start assistant",
        "message_end assistant second",
        "finish_turn stop 0",
        "turn_end",
        "poll steering",
        "poll follow-up",
        "agent_end",
    ]
    assert [m.role for m in model.calls[1].context.messages] == ["user", "assistant"]
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    assert prepared[0].message is messages[1]


async def test_finish_turn_continue_without_queues_adds_one_turn() -> None:
    log = Log()
    model = faux.model(["first", "second", "unused"])
    await run(model, log, finish_turn=finisher(log, "continue"))
    assert len(model.calls) == 2
    assert log.lines.count("turn_start") == 2


async def test_finish_turn_continue_is_satisfied_by_tool_results_steering_or_follow_ups() -> None:
    # Tool results: the model is asked again anyway, and only once.
    model = echo_then("done", "unused")
    await run(model, Log(), finish_turn=finisher(Log(), "continue"))
    assert len(model.calls) == 2

    # A steering message after a text reply: its turn is the one more request.
    model = faux.model(["first", "steered", "unused"])
    steering = queue(Log(), "steering", [], [UserMessage.text("s")])
    await run(model, Log(), finish_turn=finisher(Log(), "continue"), get_steering_messages=steering)
    assert len(model.calls) == 2

    # A follow-up message: likewise.
    model = faux.model(["first", "followed", "unused"])
    follow_ups = queue(Log(), "follow-up", [UserMessage.text("f")])
    messages = await run(
        model, Log(), finish_turn=finisher(Log(), "continue"), get_follow_up_messages=follow_ups
    )
    assert len(model.calls) == 2
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]


async def test_finish_turn_continue_after_a_terminating_batch_asks_again() -> None:
    async def finish(turn: TurnContext) -> TurnDecision | None:
        return "continue" if turn.tool_results else None

    async def after(context: Any) -> Any:
        from trio_agent import AfterToolCallResult

        return AfterToolCallResult(terminate=True)

    model = echo_then("done", "unused")
    await run(model, Log(), finish_turn=finish, after_tool_call=after)
    assert len(model.calls) == 2


@pytest.mark.parametrize(
    "script",
    [faux.error("boom"), faux.reply("cut", stop_reason="aborted", error_message="gone")],
    ids=["error", "aborted"],
)
async def test_finish_turn_sees_an_error_or_aborted_reply_and_the_run_still_ends(
    script: faux.Reply,
) -> None:
    log = Log()
    finish = finisher(log, "continue")
    model = faux.model([script, "unused"])
    messages = await run(
        model,
        log,
        finish_turn=finish,
        get_follow_up_messages=queue(log, "follow-up", [UserMessage.text("x")]),
    )
    assert len(model.calls) == 1
    stop_reason = messages[-1].stop_reason  # type: ignore[union-attr]  # an AssistantMessage
    assert log.lines[-3:] == [f"finish_turn {stop_reason} 0", "turn_end", "agent_end"]
    assert finish.turns[0].message is messages[-1]
    assert "poll follow-up" not in log.lines


async def test_should_stop_after_turn_still_ends_a_run_finish_turn_would_continue() -> None:
    log = Log()
    calls: list[str] = []

    async def stop(turn: TurnContext) -> bool:
        calls.append(turn.message.text)
        return True

    model = faux.model(["first", "unused"])
    await run(model, log, finish_turn=finisher(log, "continue"), should_stop_after_turn=stop)
    assert len(model.calls) == 1
    assert calls == ["first"]
    assert log.lines[-3:] == ["finish_turn stop 0", "turn_end", "agent_end"]


async def test_a_budget_still_ends_a_run_finish_turn_would_continue() -> None:
    log = Log()
    model = faux.model(["first", "unused"])
    await run(model, log, finish_turn=finisher(log, "continue"), budget=Budget(turns=1))
    assert len(model.calls) == 1
    end = log.events[-1]
    assert isinstance(end, AgentEnd)
    assert end.stop is not None
    assert end.stop.name == "turns"


# --- prepare_next_turn's messages ----------------------------------------------------------


async def test_prepare_next_turn_messages_are_announced_before_the_steering_and_the_request() -> (
    None
):
    log = Log()
    added = UserMessage.text("added")

    async def prepare(turn: TurnContext) -> NextTurn:
        log.lines.append("prepare_next_turn")
        return NextTurn(messages=[added])

    async def prepare_request(request: RequestContext) -> None:
        log.lines.append(f"prepare_request {request.context.messages[-1].role}")

    steering = queue(log, "steering", [], [UserMessage.text("steer")])
    model = echo_then("done")
    messages = await run(
        model,
        log,
        prepare_next_turn=prepare,
        prepare_request=prepare_request,
        get_steering_messages=steering,
    )
    assert log.lines[log.lines.index("turn_end") :] == [
        "turn_end",
        "poll steering",  # brings "steer": no poll after prepare_next_turn
        "prepare_next_turn",
        "turn_start",
        "message_start user added",
        "message_end user added",
        "message_start user steer",
        "message_end user steer",
        "prepare_request user",
        "message_start assistant",
        "message_end assistant done",
        "turn_end",
        "poll steering",
        "agent_end",
    ]
    assert messages[3] is added
    assert [text_of(m) for m in model.calls[1].context.messages[-2:]] == ["added", "steer"]


async def test_prepare_next_turn_messages_come_before_the_steering_polled_after_it() -> None:
    log = Log()

    async def prepare(turn: TurnContext) -> NextTurn:
        return NextTurn(messages=[UserMessage.text("added")])

    steering = queue(log, "steering", [], [], [UserMessage.text("steer")])
    messages = await run(
        echo_then("done"), log, prepare_next_turn=prepare, get_steering_messages=steering
    )
    assert [text_of(m) for m in messages if isinstance(m, UserMessage)] == [
        "hi",
        "added",
        "steer",
    ]
    assert log.lines.count("poll steering") == 4


# --- what a hook may return, and a hook that raises ------------------------------------------


async def test_a_hook_that_returns_the_wrong_thing_fails_the_run_naming_it() -> None:
    async def finish(turn: TurnContext) -> Any:
        return "stop"

    with pytest.raises(ValueError, match=r"finish_turn returned 'stop'; it must return"):
        await run(faux.model(["hi"]), Log(), finish_turn=finish)

    async def prepare(request: RequestContext) -> Any:
        return NextTurn()

    with pytest.raises(TypeError, match=r"prepare_request returned NextTurn\(.*not a RequestUp"):
        await run(faux.model(["hi"]), Log(), prepare_request=prepare)

    async def prepare_next(turn: TurnContext) -> Any:
        return {"model": None}

    with pytest.raises(TypeError, match=r"prepare_next_turn returned \{'model': None\}, not a"):
        await run(echo_then("done"), Log(), prepare_next_turn=prepare_next)


def test_the_updates_check_their_fields() -> None:
    with pytest.raises(TypeError, match=r"NextTurn.messages must be a sequence of messages"):
        NextTurn(messages="hello")
    with pytest.raises(TypeError, match=r"NextTurn.messages\[1\] is 42, not a message"):
        NextTurn(messages=[UserMessage.text("a"), 42])
    with pytest.raises(ValueError, match=r"RequestUpdate.thinking_level must be off, .* 'max'"):
        RequestUpdate(thinking_level="max")  # type: ignore[arg-type]  # the bad input
    with pytest.raises(TypeError, match=r"RequestUpdate.model must be a trio_agent.Model or None"):
        RequestUpdate(model="gpt")  # type: ignore[arg-type]  # the bad input
    with pytest.raises(TypeError, match=r"NextTurn.context must be an AgentContext or None"):
        NextTurn(context=[])  # type: ignore[arg-type]  # the bad input
    assert NextTurn(messages=[UserMessage.text("a")]).messages == (UserMessage.text("a"),)


@pytest.mark.parametrize("hook", ["prepare_request", "finish_turn"])
async def test_a_hook_that_raises_fails_the_run_with_its_own_exception(hook: str) -> None:
    class Broken(Exception):
        pass

    async def broken(argument: object) -> None:
        raise Broken(hook)

    hooks: dict[str, Any] = {hook: broken}
    with pytest.raises(Broken):
        await run(faux.model(["hi"]), Log(), **hooks)

    agent = Agent(faux.model(["hi"]), **hooks)
    with pytest.raises(Broken):
        await agent.prompt("go")
    check_transcript(agent.state.messages)
    assert not agent.state.is_streaming


async def test_the_agent_forwards_the_hooks() -> None:
    log = Log()
    requests: list[int] = []

    async def prepare(request: RequestContext) -> None:
        requests.append(len(request.context.messages))

    agent = Agent(
        faux.model(["one", "two"]), prepare_request=prepare, finish_turn=finisher(log, "continue")
    )
    await agent.prompt("go")
    assert requests == [1, 2]
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "assistant"]


# --- aborts while a hook waits --------------------------------------------------------------


async def test_an_abort_while_finish_turn_waits_keeps_the_turns_results(
    autojump_clock: trio.abc.Clock,
) -> None:
    log = Log()
    abort = trio.CancelScope()

    async def finish(turn: TurnContext) -> TurnDecision:
        abort.cancel()
        await trio.sleep(1)
        return "continue"

    model = echo_then("unused")
    messages = await run_agent_loop(
        [UserMessage.text("hi")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=model, finish_turn=finish),
        log,
        abort=abort,
    )
    check_event_grammar(log.events)
    check_transcript(messages)
    assert len(model.calls) == 1
    ends = [event for event in log.events if isinstance(event, TurnEnd)]
    assert [len(end.tool_results) for end in ends] == [1, 0]  # then a turn of its own
    assert isinstance(messages[2], ToolResultMessage)
    assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # the reply


async def test_an_abort_while_prepare_request_waits_sends_no_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    abort = trio.CancelScope()

    async def prepare(request: RequestContext) -> None:
        abort.cancel()
        await trio.sleep(1)

    model = faux.model(["unused"])
    log = Log()
    messages = await run_agent_loop(
        [UserMessage.text("hi")],
        AgentContext(),
        AgentLoopConfig(model=model, prepare_request=prepare),
        log,
        abort=abort,
    )
    check_event_grammar(log.events)
    assert model.calls == []
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # the reply


async def test_an_abort_after_prepare_next_turn_returned_keeps_its_messages(
    autojump_clock: trio.abc.Clock,
) -> None:
    abort = trio.CancelScope()
    added = UserMessage.text("added")

    async def prepare(turn: TurnContext) -> NextTurn:
        abort.cancel()  # no checkpoint here: the run sees the abort after the hook returns
        return NextTurn(messages=[added])

    log = Log()
    messages = await run_agent_loop(
        [UserMessage.text("hi")],
        AgentContext(tools=[ECHO]),
        AgentLoopConfig(model=echo_then("unused"), prepare_next_turn=prepare),
        log,
        abort=abort,
    )
    check_event_grammar(log.events)
    check_transcript(messages)
    assert added in messages
    assert log.lines[-8:] == [
        "turn_end",
        "turn_start",
        "message_start user added",
        "message_end user added",
        "message_start assistant",
        "message_end assistant",
        "turn_end",
        "agent_end",
    ]


def _hooks(log: list[str]) -> dict[str, Any]:
    """All three hooks, each waiting a while (a point to abort at) and logging its call."""

    async def prepare_request(request: RequestContext) -> RequestUpdate | None:
        log.append("prepare_request")
        await trio.sleep(0.1)
        return RequestUpdate(thinking_level="low")

    async def finish_turn(turn: TurnContext) -> TurnDecision | None:
        log.append("finish_turn")
        await trio.sleep(0.1)
        return "continue" if log.count("finish_turn") == 2 else None

    async def prepare_next_turn(turn: TurnContext) -> NextTurn:
        log.append("prepare_next_turn")
        await trio.sleep(0.1)
        return NextTurn(messages=[UserMessage.text(f"note {log.count('prepare_next_turn')}")])

    return {
        "prepare_request": prepare_request,
        "finish_turn": finish_turn,
        "prepare_next_turn": prepare_next_turn,
    }


async def test_the_loop_is_cancel_safe_at_every_point_of_the_turn_hooks(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def scenario(trial: Trial) -> list[AgentMessage]:
        prompts: list[AgentMessage] = [UserMessage.text("go")]
        config = AgentLoopConfig(model=echo_then("text", "more"), **_hooks([]))
        context = AgentContext(tools=trial.tools([ECHO]))
        new = await run_agent_loop(prompts, context, config, trial.recorder, abort=trial.abort)
        return [*prompts, *new]

    undisturbed: list[str] = []
    config = AgentLoopConfig(model=echo_then("text", "more"), **_hooks(undisturbed))
    await run_agent_loop([UserMessage.text("go")], AgentContext(tools=[ECHO]), config, Log())
    # Each hook waits in each of the turns: the scenario covers them all.
    assert undisturbed == [
        "prepare_request",
        "finish_turn",
        "prepare_next_turn",
        "prepare_request",
        "finish_turn",  # "continue"
        "prepare_next_turn",
        "prepare_request",
        "finish_turn",
    ]
    report = await assert_cancel_safe(scenario)
    assert report.points > 40


async def test_the_agent_is_cancel_safe_at_every_point_of_the_turn_hooks(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def scenario(trial: Trial) -> None:
        agent = trial.watch(Agent(echo_then("text", "more"), tools=[ECHO], **_hooks([])))
        agent.follow_up("later")
        await agent.prompt("go")

    await assert_cancel_safe(scenario)


@pytest.mark.parametrize("role", ["user", "assistant"])
async def test_no_turn_hook_is_called_once_the_run_is_aborted(role: str) -> None:
    """An abort while the listener is told of the prompt (before ``prepare_request``) or
    of the reply (before ``finish_turn``): the hook is not called."""
    abort = trio.CancelScope()
    called: list[str] = []
    log = Log()

    async def listener(event: AgentEvent) -> None:
        await log(event)
        if event.type == "message_end" and event.message.role == role:
            abort.cancel()

    async def prepare_request(request: RequestContext) -> None:
        called.append("prepare_request")

    async def finish_turn(turn: TurnContext) -> None:
        called.append("finish_turn")

    config = AgentLoopConfig(
        model=faux.model(["hello"]), prepare_request=prepare_request, finish_turn=finish_turn
    )
    messages = await run_agent_loop(
        [UserMessage.text("hi")], AgentContext(), config, listener, abort=abort
    )
    check_event_grammar(log.events)
    assert called == ([] if role == "user" else ["prepare_request"])
    assert [m.role for m in messages] == ["user", "assistant"]
