"""The Agent: state, running, queues, events, failures, persistence (design.md#the-agents-rules)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_agent
from tests._support import ECHO, make_tool
from trio_agent import (
    Agent,
    AgentBusyError,
    AgentEvent,
    AgentMessage,
    AssistantMessage,
    BeforeToolCallContext,
    ImageContent,
    TextContent,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    UserMessage,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder, check_event_grammar, check_transcript


class Boom(Exception):
    pass


def call(name: str = "echo", call_id: str = "t1", **args: Any) -> faux.Reply:
    return faux.reply(faux.tool_call(name, args or {"value": "v"}, id=call_id))


async def sleepy(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    await trio.sleep(args.get("ms", 1000) / 1000)
    return ToolResult.text(f"slept {call_id}")


SLEEPY = make_tool("sleepy", sleepy)


def texts(messages: Any) -> list[str]:
    out = []
    for message in messages:
        content = message.content
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(b.text for b in content if isinstance(b, TextContent)))
    return out


# --- state --------------------------------------------------------------------------------------


def test_a_new_agent_has_an_empty_state() -> None:
    model = faux.model()
    state = Agent(model).state
    assert (
        state.system_prompt,
        state.model,
        state.thinking_level,
        state.tools,
        list(state.messages),
        state.is_streaming,
        state.streaming_message,
        state.pending_tool_calls,
        state.error_message,
    ) == ("", model, "off", (), [], False, None, frozenset(), None)


def test_setters_copy_what_they_are_given() -> None:
    agent = Agent(faux.model())
    tools = [ECHO]
    messages: list[AgentMessage] = [UserMessage.text("hi")]
    agent.set_tools(tools)
    agent.replace_messages(messages)
    tools.append(ECHO)
    messages.append(UserMessage.text("more"))
    assert (len(agent.state.tools), len(agent.state.messages)) == (1, 1)


def test_state_messages_is_a_read_only_view() -> None:
    agent = Agent(faux.model(), messages=[UserMessage.text("hi")])
    assert not hasattr(agent.state.messages, "append")


@pytest.mark.parametrize(
    ("call_", "error"),
    [
        (lambda a: a.set_thinking_level("max"), "thinking level must be off, minimal"),
        (lambda a: a.set_model("gpt"), "model must be a trio_agent.Model, not 'gpt'"),
        (
            lambda a: setattr(a, "steering_mode", "some"),
            "steering_mode must be 'one-at-a-time' or 'all'",
        ),
        (lambda a: a.steer(42), "steer\\(\\) takes a str or a message"),
    ],
)
def test_bad_values_are_named(call_: Any, error: str) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        call_(Agent(faux.model()))


async def test_state_is_updated_before_listeners_see_the_event() -> None:
    seen: list[tuple[str, int, bool]] = []
    agent = Agent(faux.model([call(), "done"]), tools=[ECHO])

    async def listener(event: AgentEvent) -> None:
        state = agent.state
        seen.append((event.type, len(state.messages), bool(state.pending_tool_calls)))

    agent.subscribe(listener)
    await agent.prompt("go")
    assert ("message_end", 1, False) in seen  # the prompt is in the transcript at its end
    assert ("tool_execution_start", 2, True) in seen
    assert ("tool_execution_end", 2, False) in seen
    assert seen[-1] == ("agent_end", 4, False)


async def test_streaming_message_is_the_partial_reply_while_it_streams() -> None:
    partials: list[str] = []
    agent = Agent(faux.model([faux.reply("abcdef", chunk_size=2)]))

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_update":
            message = agent.state.streaming_message
            assert isinstance(message, AssistantMessage)
            partials.append(message.text)

    agent.subscribe(listener)
    await agent.prompt("go")
    assert partials == ["", "ab", "abcd", "abcdef", "abcdef"]
    assert agent.state.streaming_message is None


async def test_is_streaming_lasts_until_the_agent_end_listeners_have_finished() -> None:
    seen: list[tuple[str, bool]] = []
    agent = Agent(faux.model(["hi"]))

    async def listener(event: AgentEvent) -> None:
        seen.append((event.type, agent.state.is_streaming))

    agent.subscribe(listener)
    assert not agent.state.is_streaming
    await agent.prompt("go")
    assert all(streaming for _, streaming in seen)
    assert seen[-1] == ("agent_end", True)
    assert not agent.state.is_streaming


async def test_a_run_snapshots_the_agent_when_it_starts() -> None:
    model = faux.model([call(), "done"])
    agent = Agent(model, tools=[ECHO], system_prompt="first")

    async def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            agent.set_system_prompt("second")
            agent.set_tools([])

    agent.subscribe(listener)
    await agent.prompt("go")
    assert [c.context.system_prompt for c in model.calls] == ["first", "first"]
    assert agent.state.system_prompt == "second"


async def test_the_thinking_level_is_the_runs_reasoning() -> None:
    model = faux.model(["a", "b"])
    agent = Agent(model, thinking_level="high")
    await agent.prompt("one")
    agent.set_thinking_level("off")
    await agent.prompt("two")
    assert [c.options.reasoning for c in model.calls] == ["high", None]


# --- running ------------------------------------------------------------------------------------


async def test_prompt_takes_text_and_images() -> None:
    model = faux.model(["ok"])
    agent = Agent(model)
    image = ImageContent("aGk=", "image/png")
    await agent.prompt("look", [image])
    first = agent.state.messages[0]
    assert isinstance(first, UserMessage)
    assert first.content == (TextContent("look"), image)


async def test_prompt_takes_a_message_or_a_list_of_messages() -> None:
    agent = Agent(faux.model(["one", "two"]))
    single = UserMessage.text("single")
    pair = [UserMessage.text("a"), UserMessage.text("b")]
    await agent.prompt(single)
    await agent.prompt(pair)
    assert [m for m in agent.state.messages if m.role == "user"] == [single, *pair]


@pytest.mark.parametrize(
    ("input_", "images", "error"),
    [
        (42, (), "prompt\\(\\) takes a str or a message"),
        (
            UserMessage.text("x"),
            (ImageContent("aGk=", "image/png"),),
            "images go with a text prompt",
        ),
        ("x", ("not an image",), "images must be ImageContent blocks"),
    ],
)
async def test_bad_prompts_are_refused_before_a_run(input_: Any, images: Any, error: str) -> None:
    agent = Agent(faux.model(["never"]))
    with pytest.raises(TypeError, match=error):
        await agent.prompt(input_, images)
    assert (agent.state.is_streaming, list(agent.state.messages)) == (False, [])


async def test_continue_from_a_user_message_asks_the_model() -> None:
    agent = Agent(faux.model(["answer"]), messages=[UserMessage.text("q")])
    await agent.continue_()
    assert texts(agent.state.messages) == ["q", "answer"]


async def test_continue_from_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^No messages to continue from$"):
        await Agent(faux.model()).continue_()


async def test_continue_after_the_assistant_runs_queued_steering_first() -> None:
    agent = Agent(faux.model(["first", "steered", "followed"]))
    await agent.prompt("go")
    agent.steer("steer me")
    agent.follow_up("later")
    await agent.continue_()
    # The steering message is the run's prompt; the follow-up comes when it would stop.
    assert texts(agent.state.messages)[2:] == ["steer me", "steered", "later", "followed"]
    assert not agent.has_queued_messages()


async def test_continue_after_the_assistant_runs_queued_follow_ups() -> None:
    agent = Agent(faux.model(["first", "followed"]))
    await agent.prompt("go")
    agent.follow_up("later")
    await agent.continue_()
    assert texts(agent.state.messages)[2:] == ["later", "followed"]


async def test_continue_after_the_assistant_with_nothing_queued_is_refused() -> None:
    agent = Agent(faux.model(["first"]))
    await agent.prompt("go")
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        await agent.continue_()


async def test_a_second_prompt_or_continue_while_running_is_refused_with_pis_texts() -> None:
    errors: list[str] = []
    agent = Agent(faux.model(["hi"]))

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_update":
            try:
                await agent.prompt("again")
            except AgentBusyError as exc:
                errors.append(str(exc))
            try:
                await agent.continue_()
            except AgentBusyError as exc:
                errors.append(str(exc))
            try:
                agent.reset()
            except AgentBusyError as exc:
                errors.append(str(exc))

    agent.subscribe(listener)
    await agent.prompt("go")
    assert errors[:3] == [
        "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
        "or wait for completion.",
        "Agent is already processing. Wait for completion before continuing.",
        "Agent is already processing. Wait for completion before resetting.",
    ]
    assert isinstance(AgentBusyError("x"), RuntimeError)


async def test_abort_ends_the_run_and_prompt_returns(autojump_clock: trio.abc.Clock) -> None:
    agent = Agent(faux.model([call("sleepy", ms=10_000), "never"]), tools=[SLEEPY])
    async with trio.open_nursery() as nursery:

        async def abort_soon() -> None:
            await trio.sleep(1)
            agent.abort()
            agent.abort()  # idempotent

        nursery.start_soon(abort_soon)
        await agent.prompt("go")
    assert trio.current_time() == 1
    messages = agent.state.messages
    assert texts(messages)[2] == "Operation aborted"
    assert messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage, here
    assert agent.state.error_message == "Operation aborted"
    check_transcript(messages)


def test_abort_when_idle_does_nothing() -> None:
    agent = Agent(faux.model())
    agent.abort()
    assert not agent.state.is_streaming


async def test_wait_for_idle_returns_when_the_run_ends(autojump_clock: trio.abc.Clock) -> None:
    agent = Agent(faux.model([call("sleepy", ms=500), "done"]), tools=[SLEEPY])
    ended: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await trio.testing.wait_all_tasks_blocked()
        await agent.wait_for_idle()
        ended.append(trio.current_time())
    assert ended == [0.5]
    assert not agent.state.is_streaming


async def test_reset_clears_the_transcript_the_error_and_the_queues() -> None:
    agent = Agent(faux.model([faux.error("boom")]))
    await agent.prompt("go")
    agent.steer("s")
    agent.follow_up("f")
    agent.reset()
    assert (list(agent.state.messages), agent.state.error_message, agent.has_queued_messages()) == (
        [],
        None,
        False,
    )


# --- queues -------------------------------------------------------------------------------------


async def test_steering_is_delivered_once_in_order_one_at_a_time() -> None:
    model = faux.model([call(call_id="a"), call(call_id="b"), call(call_id="c"), "done"])
    agent = Agent(model, tools=[ECHO])

    async def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_start" and event.tool_call_id == "a":
            agent.steer("s1")
            agent.steer("s2")

    agent.subscribe(listener)
    await agent.prompt("go")
    users = [
        t
        for t, m in zip(texts(agent.state.messages), agent.state.messages, strict=True)
        if m.role == "user"
    ]
    assert users == ["go", "s1", "s2"]
    # one per poll: s1 before the second reply, s2 before the third
    roles = [m.role for m in agent.state.messages]
    assert roles[:6] == ["user", "assistant", "toolResult", "user", "assistant", "toolResult"]


async def test_steering_mode_all_takes_every_queued_message_at_once() -> None:
    agent = Agent(faux.model([call(), "done"]), tools=[ECHO], steering_mode="all")

    async def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            agent.steer("s1")
            agent.steer("s2")

    agent.subscribe(listener)
    await agent.prompt("go")
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "toolResult",
        "user",
        "user",
        "assistant",
    ]


async def test_follow_ups_wait_until_the_agent_would_stop() -> None:
    agent = Agent(faux.model([call(), "one", "two", "three"]), tools=[ECHO])
    agent.follow_up("f1")
    agent.follow_up("f2")
    await agent.prompt("go")
    assert texts(agent.state.messages)[3:] == ["one", "f1", "two", "f2", "three"]


async def test_messages_queued_when_a_run_is_aborted_stay_queued() -> None:
    agent = Agent(faux.model([faux.reply("x" * 10, chunk_size=1), "next"]))

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            agent.follow_up("after the abort")
            agent.abort()

    unsubscribe = agent.subscribe(listener)
    await agent.prompt("go")
    assert agent.has_queued_messages()
    unsubscribe()
    await agent.continue_()
    assert texts(agent.state.messages)[-2:] == ["after the abort", "next"]
    assert not agent.has_queued_messages()


def test_clearing_the_queues() -> None:
    agent = Agent(faux.model())
    agent.steer("s")
    agent.clear_steering_queue()
    assert not agent.has_queued_messages()
    agent.follow_up("f")
    agent.clear_follow_up_queue()
    assert not agent.has_queued_messages()
    agent.steer("s")
    agent.follow_up("f")
    agent.clear_all_queues()
    assert not agent.has_queued_messages()


# --- events -------------------------------------------------------------------------------------


async def test_listeners_are_awaited_in_order_and_unsubscribe_is_idempotent() -> None:
    order: list[str] = []

    def listener(name: str) -> Any:
        async def on_event(event: AgentEvent) -> None:
            if event.type == "agent_start":
                await trio.lowlevel.checkpoint()
                order.append(name)

        return on_event

    agent = Agent(faux.model(["a", "b"]))
    agent.subscribe(listener("first"))
    unsubscribe = agent.subscribe(listener("second"))
    await agent.prompt("go")
    unsubscribe()
    unsubscribe()
    await agent.prompt("again")
    assert order == ["first", "second", "first"]


async def test_a_sync_listener_is_refused() -> None:
    def listener(event: AgentEvent) -> None:
        return None

    with pytest.raises(TypeError, match="a listener must be an async function"):
        Agent(faux.model()).subscribe(listener)  # type: ignore[arg-type]  # the bad input


async def test_the_events_channel_carries_every_event() -> None:
    agent = Agent(faux.model([call(), "done"]), tools=[ECHO])
    recorder = EventRecorder()
    got: list[AgentEvent] = []

    async def consume(channel: trio.MemoryReceiveChannel[AgentEvent]) -> None:
        async for event in channel:
            got.append(event)

    agent.subscribe(recorder)
    # The channel ends before the nursery waits for its consumer: on purpose.
    async with trio.open_nursery() as nursery, agent.events(buffer=4) as channel:
        nursery.start_soon(consume, channel)  # noqa: ASYNC111  (on purpose: as said above)
        await agent.prompt("go")
    assert got == recorder.events
    check_event_grammar(got)


async def test_a_consumer_that_falls_behind_slows_the_run(autojump_clock: trio.abc.Clock) -> None:
    agent = Agent(faux.model([faux.reply("abcdefgh", chunk_size=1)]))
    taken: list[float] = []

    async def slow_consumer(channel: trio.MemoryReceiveChannel[AgentEvent]) -> None:
        async for _ in channel:
            await trio.sleep(1)
            taken.append(trio.current_time())

    # The channel ends before the nursery waits for its consumer: on purpose.
    async with trio.open_nursery() as nursery, agent.events(buffer=2) as channel:
        nursery.start_soon(slow_consumer, channel)  # noqa: ASYNC111  (on purpose: as said above)
        await agent.prompt("go")
        finished = trio.current_time()
    events = len(taken)
    assert events == 18
    # The run could not get more than the buffer (and the one being read) ahead.
    assert finished >= events - 3


async def test_a_consumer_that_never_reads_does_not_hold_up_an_abort(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent = Agent(faux.model([faux.reply("abcdefgh", chunk_size=1)]))
    async with agent.events(buffer=3), trio.open_nursery() as nursery:

        async def abort_soon() -> None:
            await trio.sleep(5)
            agent.abort()

        nursery.start_soon(abort_soon)
        await agent.prompt("go")
    assert trio.current_time() == 5
    assert agent.state.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage, here


# --- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["agent_start", "message_start", "message_update", "tool_execution_start", "turn_end"]
)
async def test_a_failing_listener_fails_the_run_and_its_error_is_reraised(kind: str) -> None:
    error = Boom("listener broke")
    agent = Agent(faux.model([call(), "done"]), tools=[ECHO])
    recorder = EventRecorder()

    async def listener(event: AgentEvent) -> None:
        if event.type == kind and not recorder.of("agent_end"):
            raise error

    agent.subscribe(listener)
    agent.subscribe(recorder)
    with pytest.raises(Boom) as caught:
        await agent.prompt("go")
    assert caught.value is error
    state = agent.state
    last = state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == ("error", "Boom: listener broke")
    assert state.error_message == "Boom: listener broke"
    assert (state.is_streaming, state.pending_tool_calls) == (False, frozenset())
    check_transcript(state.messages)


async def test_a_listener_failing_mid_stream_gives_one_turn_with_one_error_reply() -> None:
    """The reply that was streaming becomes the error reply, with what had streamed: the
    run owes no turn of its own after it, nor a second reply naming the failure."""
    agent = Agent(faux.model([faux.reply("one two three four", chunk_size=4), "never"]))
    recorder = EventRecorder()
    updates = 0

    async def listener(event: AgentEvent) -> None:
        nonlocal updates
        if event.type == "message_update" and not recorder.of("agent_end"):
            updates += 1
            if updates == 3:
                raise Boom("listener broke")

    agent.subscribe(recorder)
    agent.subscribe(listener)
    with pytest.raises(Boom):
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert recorder.types.count("turn_start") == recorder.types.count("turn_end") == 1
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    replies = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    assert [(r.stop_reason, r.error_message) for r in replies] == [
        ("error", "Boom: listener broke")
    ]
    assert texts(replies) == ["one two "]  # what had streamed when the listener raised
    assert agent.state.messages == [*recorder.of("agent_end")[0].messages]
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    check_transcript(agent.state.messages)


@pytest.mark.parametrize("emit_start", [True, False])
async def test_a_listener_failing_on_an_error_reply_is_still_named_in_the_transcript(
    emit_start: bool,
) -> None:
    agent = Agent(
        faux.model(
            [faux.reply("x", stop_reason="error", error_message="model", emit_start=emit_start)]
        )
    )
    recorder = EventRecorder()

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and getattr(event.message, "error_message", "") == "model":
            raise Boom("listener broke")

    agent.subscribe(recorder)
    agent.subscribe(listener)
    with pytest.raises(Boom):
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    replies = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    assert [(r.stop_reason, r.error_message) for r in replies] == [
        ("error", "model"),
        ("error", "Boom: listener broke"),
    ]
    assert agent.state.error_message == "Boom: listener broke"
    check_transcript(agent.state.messages)


async def test_the_failure_events_close_every_started_tool_call() -> None:
    agent = Agent(
        faux.model(
            [faux.reply(*(faux.tool_call("sleepy", {"ms": 50}, id=f"t{i}") for i in range(3)))]
        ),
        tools=[SLEEPY],
    )
    recorder = EventRecorder()

    async def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_start" and event.tool_call_id == "t1":
            raise Boom("stop")

    agent.subscribe(recorder)
    agent.subscribe(listener)
    with pytest.raises(Boom):
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, texts([r])[0]) for r in results] == [
        ("t0", "Operation aborted"),
        ("t1", "Operation aborted"),
        ("t2", "Operation aborted"),
    ]
    assert recorder.types[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]


async def test_a_failing_hook_fails_the_run_the_same_way() -> None:
    async def before(ctx: BeforeToolCallContext) -> None:
        return None

    async def transform(messages: Any) -> Any:
        raise Boom("transform failed")

    agent = Agent(faux.model(["never"]), transform_context=transform, before_tool_call=before)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with pytest.raises(Boom, match="transform failed"):
        await agent.prompt("go")
    check_event_grammar(recorder.events)
    assert agent.state.error_message == "Boom: transform failed"


async def test_a_listener_that_fails_again_while_the_run_closes_leaves_the_state_whole() -> None:
    error = Boom("always")
    agent = Agent(faux.model([call(), "done"]), tools=[ECHO])

    async def listener(event: AgentEvent) -> None:
        if event.type in ("tool_execution_start", "message_start"):
            raise error

    agent.subscribe(listener)
    with pytest.raises(Boom) as caught:
        await agent.prompt("go")
    assert caught.value is error
    assert any("while closing the run" in note for note in error.__notes__)
    assert agent.state.messages[-1].stop_reason == "error"  # type: ignore[union-attr]  # an AssistantMessage, here
    check_transcript(agent.state.messages)
    assert (agent.state.is_streaming, agent.state.pending_tool_calls) == (False, frozenset())


async def test_cancellation_from_outside_closes_the_state_and_propagates(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent = Agent(
        faux.model([faux.reply("partial", faux.tool_call("sleepy", {"ms": 5000}, id="t1"))]),
        tools=[SLEEPY],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with trio.move_on_after(1) as outer:
        await agent.prompt("go")
    assert outer.cancelled_caught
    assert "agent_end" not in recorder.types  # listeners are not called after it
    state = agent.state
    assert (state.is_streaming, state.pending_tool_calls) == (False, frozenset())
    assert texts(state.messages)[2] == "Operation aborted"
    assert state.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]  # an AssistantMessage, here
    check_transcript(state.messages)


async def test_cancellation_mid_stream_keeps_the_partial_reply(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent = Agent(faux.model([faux.reply("abcdefghij", chunk_size=1, chunk_delay=1)]))
    with trio.move_on_after(3.5):
        await agent.prompt("go")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.text, last.stop_reason) == ("abc", "aborted")


async def test_keyboard_interrupt_from_a_tool_closes_the_state_and_propagates() -> None:
    async def interrupt(call_id: str, args: Any, on_update: Any) -> ToolResult:
        raise KeyboardInterrupt

    agent = Agent(faux.model([call("ki"), "never"]), tools=[make_tool("ki", interrupt)])
    with pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")
    assert not agent.state.is_streaming
    check_transcript(agent.state.messages)


async def test_no_task_outlives_a_run(autojump_clock: trio.abc.Clock) -> None:
    alive: set[trio.lowlevel.Task] = set()

    class Watch(trio.abc.Instrument):
        def task_spawned(self, task: trio.lowlevel.Task) -> None:
            alive.add(task)

        def task_exited(self, task: trio.lowlevel.Task) -> None:
            alive.discard(task)

    reply = faux.reply(*(faux.tool_call("sleepy", {"ms": 100 * i}, id=f"t{i}") for i in range(3)))
    agent = Agent(faux.model([reply, "done"]), tools=[SLEEPY])
    trio.lowlevel.add_instrument(watch := Watch())
    try:
        await agent.prompt("go")
    finally:
        trio.lowlevel.remove_instrument(watch)
    assert alive == set()


# --- persistence --------------------------------------------------------------------------------


async def test_a_saved_transcript_resumes_in_a_new_agent() -> None:
    first = Agent(faux.model([call(), faux.error("upstream 500")]), tools=[ECHO])
    await first.prompt("go")
    saved = trio_agent.dumps(list(first.state.messages))
    loaded = trio_agent.loads(saved)
    assert loaded == list(first.state.messages)
    second = Agent(faux.model(["resumed"]), tools=[ECHO], messages=loaded)
    # An errored reply is in the transcript: the next run asks the model again.
    second.follow_up("try again")
    await second.continue_()
    assert texts(second.state.messages)[-2:] == ["try again", "resumed"]


async def test_an_id_the_model_gave_two_calls_is_pending_while_either_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The server picks the ids: two parallel calls with one id are two pending calls."""
    reply = faux.reply(
        faux.tool_call("sleepy", {"ms": 10}, id="same"),
        faux.tool_call("sleepy", {"ms": 50}, id="same"),
    )
    agent = Agent(faux.model([reply, "done"]), tools=[SLEEPY])
    seen: list[tuple[str, frozenset[str]]] = []

    async def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_end":
            seen.append((event.type, agent.state.pending_tool_calls))

    agent.subscribe(listener)
    await agent.prompt("go")
    assert seen == [
        ("tool_execution_end", frozenset({"same"})),  # the other call still runs
        ("tool_execution_end", frozenset()),
    ]
