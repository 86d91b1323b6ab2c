"""Invariant 12 (colour is the checkpoint rule), for every public member of ``Agent``.

Every public async method of :class:`~trio_agent.Agent` is a checkpoint on
every path — a normal run, a refusal, a busy agent — and every sync method,
property and setter never is. ``trio.testing.assert_checkpoints()`` lets a
block that raises pass without a checkpoint, so on the paths that raise,
``pytest.raises`` sits *inside* it: the block then ends normally and the
checkpoint is really checked.

The sync members cannot checkpoint (they are not coroutines); wrapping each
real call in ``assert_no_checkpoints()`` documents the rule and keeps it if
one of them ever becomes something else. ``abort()`` gets more: it is
idempotent, harmless when idle, and works from another thread through
``trio.from_thread.run_sync``. A last test checks that the lists here cover
every public member, so a new method cannot skip the rule.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from tests._support import make_tool
from trio_agent import (
    Agent,
    AgentBusyError,
    AgentState,
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    UnknownApiError,
    UserMessage,
)
from trio_agent.providers import faux
from trio_agent.testing import EventRecorder

BUSY_PROMPT = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
BUSY_CONTINUE = "Agent is already processing. Wait for completion before continuing."
BUSY_RESET = "Agent is already processing. Wait for completion before resetting."
BUSY_REPLACE = "Agent is already processing. Wait for completion before replacing the messages."
ABORTED = "Operation aborted"


def exactly(text: str) -> str:
    """A ``match=`` pattern for exactly ``text``."""
    return f"^{re.escape(text)}$"


async def nap(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    await trio.sleep(args["seconds"])
    return ToolResult.text("rested")


NAP = make_tool("nap", nap)
SLOW = faux.reply(faux.tool_call("nap", {"seconds": 1.0}))  # a tool call that takes 1 s


def make_agent(*script: faux.Script, **options: Any) -> Agent:
    return Agent(faux.model(script), tools=[NAP], **options)


def answered() -> list[AssistantMessage | UserMessage]:
    """A transcript that ends with the assistant's reply."""
    return [UserMessage.text("hi"), AssistantMessage(content=(TextContent("hello"),))]


def roles(agent: Agent) -> list[str]:
    return [message.role for message in agent.state.messages]


@contextlib.asynccontextmanager
async def running(agent: Agent) -> AsyncIterator[None]:
    """A run of ``agent`` in another task, waiting in its slow tool during the block.

    The run's ``prompt()`` must return normally: the nursery re-raises otherwise.
    """
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.state.pending_tool_calls != frozenset()
        yield


# -- async methods: a checkpoint on every path --------------------------------------------------


async def test_prompt_is_a_checkpoint() -> None:
    agent = make_agent("hello")
    with trio.testing.assert_checkpoints():
        await agent.prompt("hi")
    assert roles(agent) == ["user", "assistant"]


async def test_prompt_while_busy_is_a_checkpoint(autojump_clock: trio.abc.Clock) -> None:
    agent = make_agent(SLOW, "done")
    async with running(agent):
        with (
            trio.testing.assert_checkpoints(),
            pytest.raises(AgentBusyError, match=exactly(BUSY_PROMPT)),
        ):
            await agent.prompt("again")


BAD_PROMPTS: dict[str, Callable[[Agent], Awaitable[None]]] = {
    "not a message": lambda agent: agent.prompt(42),  # type: ignore[arg-type]  # the bad input
    "not an image": lambda agent: agent.prompt("hi", ["pixels"]),  # type: ignore[list-item]  # same
    "images with a message": lambda agent: agent.prompt(
        UserMessage.text("hi"), [ImageContent("aGk=", "image/png")]
    ),
    "a list with a non-message": lambda agent: agent.prompt(
        [UserMessage.text("hi"), 42]  # type: ignore[list-item]  # the bad input
    ),
}


@pytest.mark.parametrize("call", BAD_PROMPTS.values(), ids=BAD_PROMPTS.keys())
async def test_prompt_with_bad_input_is_a_checkpoint(
    call: Callable[[Agent], Awaitable[None]],
) -> None:
    agent = make_agent("hello")
    with trio.testing.assert_checkpoints(), pytest.raises(TypeError):
        await call(agent)
    assert roles(agent) == []


async def test_prompt_with_an_unknown_api_is_a_checkpoint() -> None:
    agent = Agent(Model(id="m", api="no-such-api"))
    with trio.testing.assert_checkpoints(), pytest.raises(UnknownApiError):
        await agent.prompt("hi")


async def test_continue_from_a_user_message_is_a_checkpoint() -> None:
    agent = make_agent("hello", messages=[UserMessage.text("hi")])
    with trio.testing.assert_checkpoints():
        await agent.continue_()
    assert roles(agent) == ["user", "assistant"]


async def test_continue_from_an_empty_transcript_is_a_checkpoint() -> None:
    agent = make_agent("hello")
    with (
        trio.testing.assert_checkpoints(),
        pytest.raises(ValueError, match=exactly("No messages to continue from")),
    ):
        await agent.continue_()


async def test_continue_with_queued_steering_is_a_checkpoint() -> None:
    agent = make_agent("again", messages=answered())
    agent.steer("more")
    with trio.testing.assert_checkpoints():
        await agent.continue_()
    assert roles(agent) == ["user", "assistant", "user", "assistant"]


async def test_continue_with_queued_follow_ups_is_a_checkpoint() -> None:
    agent = make_agent("again", messages=answered())
    agent.follow_up("more")
    with trio.testing.assert_checkpoints():
        await agent.continue_()
    assert roles(agent) == ["user", "assistant", "user", "assistant"]


async def test_continue_from_the_assistant_with_nothing_queued_is_a_checkpoint() -> None:
    agent = make_agent("again", messages=answered())
    with (
        trio.testing.assert_checkpoints(),
        pytest.raises(ValueError, match=exactly("Cannot continue from message role: assistant")),
    ):
        await agent.continue_()


async def test_continue_while_busy_is_a_checkpoint(autojump_clock: trio.abc.Clock) -> None:
    agent = make_agent(SLOW, "done")
    async with running(agent):
        with (
            trio.testing.assert_checkpoints(),
            pytest.raises(AgentBusyError, match=exactly(BUSY_CONTINUE)),
        ):
            await agent.continue_()


async def test_continue_with_an_unknown_api_is_a_checkpoint() -> None:
    agent = Agent(Model(id="m", api="no-such-api"), messages=[UserMessage.text("hi")])
    with trio.testing.assert_checkpoints(), pytest.raises(UnknownApiError):
        await agent.continue_()


async def test_wait_for_idle_while_idle_is_a_checkpoint() -> None:
    agent = make_agent()
    with trio.testing.assert_checkpoints():
        await agent.wait_for_idle()


async def test_wait_for_idle_during_a_run_waits_for_its_end(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent = make_agent(SLOW, "done")
    async with running(agent):
        with trio.testing.assert_checkpoints():
            await agent.wait_for_idle()
        assert (agent.state.is_streaming, roles(agent), trio.current_time()) == (
            False,
            ["user", "assistant", "toolResult", "assistant"],
            1.0,
        )


async def test_entering_events_is_a_checkpoint() -> None:
    agent = make_agent()
    async with contextlib.AsyncExitStack() as stack:
        with trio.testing.assert_checkpoints():
            receive = await stack.enter_async_context(agent.events())
        assert isinstance(receive, trio.MemoryReceiveChannel)


# -- sync members: never a checkpoint -------------------------------------------------------------

STATE_PROPERTIES = (
    "system_prompt",
    "model",
    "thinking_level",
    "tools",
    "messages",
    "is_streaming",
    "streaming_message",
    "pending_tool_calls",
    "error_message",
    "stop",
)


def read_state(name: str) -> Callable[[Agent], Callable[[], object]]:
    return lambda agent: partial(getattr, agent.state, name)


# Each entry makes the call to check (a member of ``agent``, bound to its arguments).
SYNC_CALLS: dict[str, Callable[[Agent], Callable[[], object]]] = {
    "steer": lambda agent: partial(agent.steer, "more"),
    "steer(message)": lambda agent: partial(agent.steer, UserMessage.text("more")),
    "follow_up": lambda agent: partial(agent.follow_up, "later"),
    "follow_up(message)": lambda agent: partial(agent.follow_up, UserMessage.text("later")),
    "abort": lambda agent: agent.abort,
    "clear_steering_queue": lambda agent: agent.clear_steering_queue,
    "clear_follow_up_queue": lambda agent: agent.clear_follow_up_queue,
    "clear_all_queues": lambda agent: agent.clear_all_queues,
    "has_queued_messages": lambda agent: agent.has_queued_messages,
    "subscribe": lambda agent: partial(agent.subscribe, EventRecorder()),
    "subscribe()()": lambda agent: agent.subscribe(EventRecorder()),  # the returned unsubscribe
    "set_system_prompt": lambda agent: partial(agent.set_system_prompt, "Be brief."),
    "set_model": lambda agent: partial(agent.set_model, faux.model(["other"])),
    "set_thinking_level": lambda agent: partial(agent.set_thinking_level, "high"),
    "set_tools": lambda agent: partial(agent.set_tools, []),
    "steering_mode": lambda agent: partial(getattr, agent, "steering_mode"),
    "steering_mode =": lambda agent: partial(setattr, agent, "steering_mode", "all"),
    "follow_up_mode": lambda agent: partial(getattr, agent, "follow_up_mode"),
    "follow_up_mode =": lambda agent: partial(setattr, agent, "follow_up_mode", "all"),
    "state": lambda agent: partial(getattr, agent, "state"),
    **{f"state.{name}": read_state(name) for name in STATE_PROPERTIES},
}


@pytest.mark.parametrize("make_call", SYNC_CALLS.values(), ids=SYNC_CALLS.keys())
async def test_a_sync_member_is_not_a_checkpoint_while_idle(
    make_call: Callable[[Agent], Callable[[], object]],
) -> None:
    agent = make_agent("hello")
    call = make_call(agent)
    with trio.testing.assert_no_checkpoints():
        call()


@pytest.mark.parametrize("make_call", SYNC_CALLS.values(), ids=SYNC_CALLS.keys())
async def test_a_sync_member_is_not_a_checkpoint_during_a_run(
    make_call: Callable[[Agent], Callable[[], object]], autojump_clock: trio.abc.Clock
) -> None:
    agent = make_agent(SLOW, "done")
    async with running(agent):
        call = make_call(agent)
        with trio.testing.assert_no_checkpoints():
            call()


async def test_reset_while_idle_is_not_a_checkpoint() -> None:
    agent = make_agent(messages=answered())
    agent.steer("more")
    with trio.testing.assert_no_checkpoints():
        agent.reset()
    assert (roles(agent), agent.has_queued_messages()) == ([], False)


async def test_reset_while_busy_raises_without_a_checkpoint(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent = make_agent(SLOW, "done")
    async with running(agent):
        with (
            trio.testing.assert_no_checkpoints(),
            pytest.raises(AgentBusyError, match=exactly(BUSY_RESET)),
        ):
            agent.reset()


async def test_replace_messages_while_idle_is_not_a_checkpoint() -> None:
    agent = make_agent()
    with trio.testing.assert_no_checkpoints():
        agent.replace_messages(answered())
    assert roles(agent) == ["user", "assistant"]


async def test_replace_messages_while_busy_raises_without_a_checkpoint(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent = make_agent(SLOW, "done")
    async with running(agent):
        with (
            trio.testing.assert_no_checkpoints(),
            pytest.raises(AgentBusyError, match=exactly(BUSY_REPLACE)),
        ):
            agent.replace_messages(answered())
        assert roles(agent)[0] == "user"  # the run's transcript stays


# -- abort: idempotent, harmless when idle, from another thread -----------------------------------


def result_texts(agent: Agent) -> list[str]:
    return [
        "".join(block.text for block in message.content if isinstance(block, TextContent))
        for message in agent.state.messages
        if isinstance(message, ToolResultMessage)
    ]


def stop_reasons(agent: Agent) -> list[str]:
    return [
        message.stop_reason
        for message in agent.state.messages
        if isinstance(message, AssistantMessage)
    ]


async def test_abort_twice_during_a_run_ends_it_once(autojump_clock: trio.abc.Clock) -> None:
    agent = make_agent(SLOW, "unused")
    async with running(agent):
        agent.abort()
        agent.abort()
    assert (stop_reasons(agent), result_texts(agent), trio.current_time()) == (
        ["toolUse", "aborted"],
        [ABORTED],
        0.0,
    )


async def test_an_abort_does_not_reach_the_next_run(autojump_clock: trio.abc.Clock) -> None:
    agent = make_agent(SLOW, "next")
    async with running(agent):
        agent.abort()
        agent.abort()
    await agent.prompt("again")
    assert stop_reasons(agent) == ["toolUse", "aborted", "stop"]


async def test_abort_twice_while_idle_is_harmless() -> None:
    agent = make_agent("hello")
    agent.abort()
    agent.abort()
    await agent.prompt("hi")
    assert (roles(agent), stop_reasons(agent)) == (["user", "assistant"], ["stop"])


async def test_abort_from_another_thread_ends_a_run_waiting_in_a_slow_tool() -> None:
    started = trio.Event()

    async def hang(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        started.set()
        await trio.sleep_forever()

    agent = Agent(
        faux.model([faux.reply(faux.tool_call("hang")), "unused"]), tools=[make_tool("hang", hang)]
    )

    async def abort_from_a_thread() -> None:
        await started.wait()
        await trio.to_thread.run_sync(trio.from_thread.run_sync, agent.abort)

    # A real thread, so a real-time bound: the run must not wait for it.
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort_from_a_thread)
            await agent.prompt("go")  # returns normally
    assert (stop_reasons(agent), result_texts(agent), agent.state.is_streaming) == (
        ["toolUse", "aborted"],
        [ABORTED],
        False,
    )


# -- coverage of the rule -------------------------------------------------------------------------

ASYNC_MEMBERS = {"prompt", "continue_", "wait_for_idle", "events"}  # the tests above
OTHER_SYNC_MEMBERS = {"reset", "replace_messages"}  # tested above, idle and busy


def test_every_public_member_of_agent_is_checked() -> None:
    sync = {key.split("(")[0].split(" ")[0].split(".")[0] for key in SYNC_CALLS}
    public = {name for name in dir(Agent) if not name.startswith("_")}
    assert (public - sync - ASYNC_MEMBERS - OTHER_SYNC_MEMBERS, sync & ASYNC_MEMBERS) == (
        set(),
        set(),
    )


def test_every_property_of_agent_state_is_checked() -> None:
    properties = {name for name, value in vars(AgentState).items() if isinstance(value, property)}
    assert properties == set(STATE_PROPERTIES)
