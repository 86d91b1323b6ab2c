"""Property tests of the invariants that are not about the loop's control flow: 9, 12, 14, 15.

* 9 (provider failures are messages): a real provider (OpenAI chat
  completions, through httpx2) against the loopback server, which replays a
  random reply cut in random pieces with a random fault — a dropped
  connection, a malformed event, a truncated stream, an in-band error, an
  HTTP error status — at a random place. (Scripted provider errors are
  checked on every scenario of ``test_properties.py``.)
* 12 (colour is the checkpoint rule): random sequences of the public async
  and sync calls, on idle and busy agents, under
  ``trio.testing.assert_checkpoints`` / ``assert_no_checkpoints``.
* 14 (linear work): work is counted, not timed — the Python and C calls a
  run makes (``sys.setprofile``), for random transcript lengths, turn
  counts and reply lengths; and the bytes the partial-JSON parser of
  streamed tool arguments parses, for random arguments cut in random pieces.
* 15 (no secret leaks): random API keys, given to random scenarios and to
  the provider (whose server echoes the key back in its errors), and looked
  for in every event, message, saved transcript, log record, exception and
  ``repr``.
"""

from __future__ import annotations

import gc
import json
import logging
import string
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType, SimpleNamespace
from typing import Any, Literal

import attrs
import httpx2  # noqa: ASYNC127  (to see that every response the provider opens is closed)
import jiter
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import trio_agent
from tests._support import examples
from trio_agent import (
    Agent,
    AgentBusyError,
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    LlmContext,
    StreamOptions,
    TextContent,
    Timeouts,
    UserMessage,
    default_convert_to_llm,
    run_agent_loop,
    run_agent_loop_continue,
)
from trio_agent.providers import _common as provider_common
from trio_agent.providers import faux, openai_chat
from trio_agent.testing import (
    EventRecorder,
    ScriptedResponse,
    TaskWatcher,
    check_event_grammar,
    check_transcript,
    open_sse_server,
    sse_body,
)
from trio_agent.testing import strategies as ts
from trio_agent.testing.strategies import Scenario, ToolBehaviour

SEEDS = st.integers(0, 2**32 - 1)
KEYS = st.text(string.ascii_letters + string.digits + "-_", min_size=20, max_size=60).map(
    lambda tail: "sk-" + tail
)


@contextmanager
def captured_logs() -> Iterator[list[str]]:
    """Every log record emitted meanwhile, formatted with its arguments."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    root = logging.getLogger()
    handler, level = Keep(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def assert_hidden(key: str, where: str, text: str) -> None:
    assert key not in text, (
        f"the API key shows in {where}: ...{text[max(0, text.find(key) - 80) :][:200]}..."
    )


# --- 9 and 15: a real provider against the loopback server ---------------------------------------

FaultKind = Literal["none", "drop", "malformed", "truncated", "in_band", "http"]


@attrs.frozen
class ChatReply:
    """A chat-completions event stream, event by event: its bytes and the text each adds."""

    events: tuple[bytes, ...]
    texts: tuple[str, ...]
    finish: int  # the index of the event with the finish_reason
    done: int  # the index of [DONE]

    @property
    def body(self) -> bytes:
        return b"".join(self.events)

    def start(self, index: int) -> int:
        """The byte offset where event ``index`` starts."""
        return sum(len(event) for event in self.events[:index])

    def text_before(self, index: int) -> str:
        return "".join(self.texts[:index])

    def text_within(self, size: int) -> str:
        """The text of the events wholly inside the first ``size`` bytes."""
        out, end = [], 0
        for event, text in zip(self.events, self.texts, strict=True):
            end += len(event)
            if end > size:
                break
            out.append(text)
        return "".join(out)


def chat_reply(deltas: list[str]) -> ChatReply:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]}

    data = [chunk({"role": "assistant", "content": ""})]
    data += [chunk({"content": delta}) for delta in deltas]
    data.append(chunk({}, "stop"))
    data.append({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3}})
    events = [sse_body([(None, item)]) for item in data] + [b"data: [DONE]\n\n"]
    texts = ["", *deltas, "", "", ""]
    return ChatReply(tuple(events), tuple(texts), finish=len(deltas) + 1, done=len(data))


@attrs.frozen
class Fault:
    kind: FaultKind
    at: int = 0  # a byte offset (drop) or an event index (the others)
    status: int = 0


@st.composite
def chat_cases(draw: st.DrawFn) -> tuple[ChatReply, Fault, tuple[int, int]]:
    reply = chat_reply(draw(st.lists(st.text("abc xyzé✓\n", min_size=1, max_size=6), max_size=8)))
    kind = draw(st.sampled_from(["none", "drop", "malformed", "truncated", "in_band", "http"]))
    if kind == "drop":
        fault = Fault("drop", draw(st.integers(0, len(reply.body) - 1)))
    elif kind == "http":
        fault = Fault("http", status=draw(st.sampled_from([400, 401, 403, 404, 422, 500, 503])))
    elif kind == "truncated":
        fault = Fault("truncated", draw(st.integers(0, reply.done)))
    else:
        fault = Fault(kind, draw(st.integers(0, reply.done + 1)))  # type: ignore[arg-type]  # a kind
    low = draw(st.integers(1, 8))
    return reply, fault, (low, low + draw(st.integers(0, 8)))


def scripted_response(
    reply: ChatReply, fault: Fault, pieces: tuple[int, int], key: str
) -> ScriptedResponse:
    body = reply.body
    if fault.kind == "http":
        error = {"error": {"message": f"Incorrect API key provided: {key}.", "type": "auth"}}
        return ScriptedResponse.error(fault.status, error)
    if fault.kind == "drop":
        return ScriptedResponse(body=body, pieces=pieces, drop_after=fault.at)
    if fault.kind == "malformed":
        return ScriptedResponse(body=body, pieces=pieces, malformed_after=reply.start(fault.at))
    if fault.kind == "truncated":
        return ScriptedResponse(body=body[: reply.start(fault.at)], pieces=pieces)
    if fault.kind == "in_band":
        at = reply.start(fault.at)
        event = sse_body([(None, {"error": {"message": f"Key {key} is over its quota"}})])
        return ScriptedResponse(body=body[:at] + event + body[at:], pieces=pieces)
    return ScriptedResponse(body=body, pieces=pieces)


def expected_reply(reply: ChatReply, fault: Fault) -> tuple[str, str | None]:
    """The text the reply keeps, and how its error message starts (None: no error)."""
    full = reply.text_before(len(reply.events))
    kind, at = fault.kind, fault.at
    if kind == "drop":
        return reply.text_within(at), "connection to openai lost: "
    if kind == "http":
        return "", f"HTTP {fault.status} from openai: auth: Incorrect API key provided: ***."
    if kind == "malformed" and at <= reply.done:
        return reply.text_before(at), "malformed JSON in a chunk from openai: "
    if kind == "truncated" and at <= reply.finish:
        return reply.text_before(at), "the stream from openai ended without a finish_reason"
    if kind == "in_band" and at <= reply.done:
        return reply.text_before(at), "openai reported an error: Key *** is over its quota"
    return full, None


@examples(0.1)
@given(chat_cases(), KEYS)
def test_provider_failures_are_error_replies_that_keep_what_arrived(
    case: tuple[ChatReply, Fault, tuple[int, int]], key: str
) -> None:
    """Invariants 9 and 15, with a real provider on loopback: whatever the fault and wherever
    it comes, the run returns normally with an assistant message that ends in ``error``,
    says what happened, and keeps exactly the text of the events that arrived before the
    fault (or, with no fault or one after the stream's end, the whole reply); the response
    is closed, and its connection either ended (the server sees it end) or, the body read
    whole, went back to the Trio run's pool, where the next request reuses it; no task is
    left (7), and the key — which the server echoes in its errors — shows nowhere."""
    reply, fault, pieces = case
    text, error = expected_reply(reply, fault)
    recorder = EventRecorder()
    watcher = TaskWatcher()
    pooled: list[bool] = []

    async def main() -> list[AgentMessage]:
        async with open_sse_server(scripted_response(reply, fault, pieces, key)) as server:
            model = openai_chat.model("gpt-test", base_url=server.url + "/v1", provider="openai")
            config = AgentLoopConfig(
                model=model,
                api_key=key,
                max_retries=0,
                timeouts=Timeouts(connect=5, first_byte=30, idle=30),
            )
            with trio.fail_after(60), watcher.watching():
                messages = await run_agent_loop(
                    [UserMessage.text("hi")], AgentContext(), config, recorder
                )
            watcher.check()
            assert server.requests[0].headers["authorization"] == f"Bearer {key}"
            await trio.testing.wait_all_tasks_blocked()  # the server saw what the client did
            pooled.append(server.open_connections == 1)
            if pooled[0]:  # read whole: back in the pool, idle, and the next request's
                assert server.closed_by_client == 0
                server.add(ScriptedResponse(body=reply.body))
                again = await run_agent_loop(
                    [UserMessage.text("again")], AgentContext(), config, EventRecorder()
                )
                assert again[-1].stop_reason == "stop"  # type: ignore[union-attr]
                assert server.connections == 1
            elif fault.kind != "drop":  # (dropped by the server itself)
                assert server.closed_by_client == 1
        return messages

    responses: list[httpx2.Response] = []
    send = httpx2.AsyncClient.send

    async def recording_send(self: httpx2.AsyncClient, *args: Any, **kwargs: Any) -> Any:
        response = await send(self, *args, **kwargs)
        responses.append(response)
        return response

    with captured_logs() as logs, pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpx2.AsyncClient, "send", recording_send)
        messages = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.05))
    assert len(responses) == 1 + pooled[0]
    assert responses[0].is_closed  # invariant 7: every HTTP response the run opened is closed
    check_event_grammar(recorder.events)
    check_transcript(messages)
    assert [m.role for m in messages] == ["user", "assistant"]
    message = messages[1]
    assert isinstance(message, AssistantMessage)
    assert message.text == text
    if error is None:
        assert (message.stop_reason, message.error_message) == ("stop", None)
    else:
        assert message.stop_reason == "error"
        assert (message.error_message or "").startswith(error), message.error_message
    for where, value in [
        ("the events", repr(recorder.events)),
        ("the saved events", trio_agent.dumps(recorder.events)),
        ("the saved transcript", trio_agent.dumps(messages)),
        ("the logs", "\n".join(logs)),
    ]:
        assert_hidden(key, where, value)


# --- 15: keys given to random scenarios ----------------------------------------------------------


@examples(0.2)
@given(ts.scenarios(), SEEDS, st.sampled_from(["loop", "agent"]), KEYS)
def test_api_keys_never_show(
    scenario: Scenario, seed: int, via: Literal["loop", "agent"], key: str
) -> None:
    """Invariant 15: a random API key given to the run reaches the model (every call's
    options carry it) and nothing else: not the events, the messages, the saved
    transcript or events, the logs, what the run raised, nor the ``repr`` of the agent,
    its state, the configuration or the stream options."""
    with captured_logs() as logs:
        result = ts.play(scenario, seed=seed, via=via, api_key=key)
    assert all(call.options.api_key == key for call in result.model.calls)
    config = AgentLoopConfig(model=result.model, api_key=key)
    places = [
        ("the events", repr(result.events)),
        ("the saved events", trio_agent.dumps(result.events)),
        ("the transcript", repr(result.transcript)),
        ("the saved transcript", trio_agent.dumps(result.transcript or [])),
        ("the logs", "\n".join(logs)),
        ("the exception", f"{result.raised!r} {result.raised}"),
        ("the model's calls", repr(result.model.calls)),
        ("the config", repr(config)),
        ("the agent", f"{result.agent!r} {result.agent.state!r}" if result.agent else ""),
    ]
    for where, value in places:
        assert_hidden(key, where, value)


# --- 12: colour is the checkpoint rule -----------------------------------------------------------

Op = Callable[[Agent], Awaitable[Any]]


async def _loop(abort: bool) -> None:
    scope = trio.CancelScope()
    if abort:
        scope.cancel()

    async def emit(event: Any) -> None:
        pass

    await run_agent_loop(
        [UserMessage.text("hi")],
        AgentContext(),
        AgentLoopConfig(model=faux.model(["hello"])),
        emit,
        scope,
    )


async def _continue(messages: list[AgentMessage]) -> None:
    async def emit(event: Any) -> None:
        pass

    await run_agent_loop_continue(
        AgentContext(messages=messages), AgentLoopConfig(model=faux.model(["more"])), emit
    )


async def _stream() -> None:
    async def emit(event: Any) -> None:
        pass

    await faux.stream(faux.model(["hi"]), LlmContext("", []), StreamOptions(), emit)


async def _events(agent: Agent) -> None:
    async with agent.events(buffer=4):
        pass


ASYNC_OPS: dict[str, Op] = {
    "prompt": lambda agent: agent.prompt("hi"),
    "prompt a message": lambda agent: agent.prompt(UserMessage.text("hi")),
    "prompt refused": lambda agent: agent.prompt(42),  # type: ignore[arg-type]  # the bad input
    "continue": lambda agent: agent.continue_(),
    "wait_for_idle": lambda agent: agent.wait_for_idle(),
    "events": _events,
    "run_agent_loop": lambda agent: _loop(abort=False),
    "run_agent_loop, aborted before it starts": lambda agent: _loop(abort=True),
    "run_agent_loop_continue": lambda agent: _continue([UserMessage.text("hi")]),
    "run_agent_loop_continue, empty": lambda agent: _continue([]),
    "run_agent_loop_continue, from the assistant": lambda agent: _continue(
        [UserMessage.text("hi"), AssistantMessage(content=(TextContent("hello"),))]
    ),
    "default_convert_to_llm": lambda agent: default_convert_to_llm(list(agent.state.messages)),
    "faux.stream": lambda agent: _stream(),
}

SyncOp = Callable[[Agent], Any]

SYNC_OPS: dict[str, SyncOp] = {
    "steer": lambda agent: agent.steer("steer"),
    "follow_up": lambda agent: agent.follow_up(UserMessage.text("follow")),
    "abort": lambda agent: agent.abort(),
    "clear_steering_queue": lambda agent: agent.clear_steering_queue(),
    "clear_follow_up_queue": lambda agent: agent.clear_follow_up_queue(),
    "clear_all_queues": lambda agent: agent.clear_all_queues(),
    "has_queued_messages": lambda agent: agent.has_queued_messages(),
    "state": lambda agent: (
        agent.state.messages,
        agent.state.is_streaming,
        agent.state.streaming_message,
        agent.state.pending_tool_calls,
        agent.state.error_message,
        agent.state.model,
        agent.state.tools,
        agent.state.system_prompt,
        agent.state.thinking_level,
    ),
    "set_system_prompt": lambda agent: agent.set_system_prompt("be brief"),
    "set_thinking_level": lambda agent: agent.set_thinking_level("low"),
    "set_tools": lambda agent: agent.set_tools(agent.state.tools),
    "set_model": lambda agent: agent.set_model(agent.state.model),
    "steering_mode": lambda agent: setattr(agent, "steering_mode", "all"),
    "follow_up_mode": lambda agent: setattr(agent, "follow_up_mode", "one-at-a-time"),
    "subscribe and unsubscribe": lambda agent: agent.subscribe(EventRecorder())(),
    "replace_messages": lambda agent: agent.replace_messages(list(agent.state.messages)),
    "reset": lambda agent: agent.reset(),
    "repr": lambda agent: repr(agent),
}

BUSY_ASYNC = ["prompt", "prompt a message", "continue", "events", "run_agent_loop"]


async def call_async(name: str, agent: Agent) -> None:
    """Invariant 12: a public async call is a checkpoint, whether it returns or raises."""
    # Refused or not, a checkpoint: the refusal is suppressed inside the checked block, so
    # the block ends normally and assert_checkpoints really checks it.
    with trio.testing.assert_checkpoints(), suppress(AgentBusyError, TypeError, ValueError):
        await ASYNC_OPS[name](agent)


def call_sync(name: str, agent: Agent) -> None:
    """Invariant 12: a public sync call is never a checkpoint."""
    with trio.testing.assert_no_checkpoints(), suppress(AgentBusyError):
        SYNC_OPS[name](agent)


OPS = st.sampled_from(sorted(ASYNC_OPS) + sorted(SYNC_OPS))


@examples(0.2)
@given(
    st.lists(OPS, max_size=8),
    st.lists(st.sampled_from(BUSY_ASYNC + sorted(SYNC_OPS)), max_size=6),
    st.lists(ts.replies(("work",), max_tool_calls=2), max_size=4),
    SEEDS,
)
def test_async_calls_are_checkpoints_and_sync_calls_are_not(
    idle_ops: list[str], busy_ops: list[str], script: list[faux.Reply], seed: int
) -> None:
    """Invariant 12 (colour is the checkpoint rule): random sequences of the public calls on
    an agent with a random script (so each call meets a random state: empty, answered,
    failed, queued), then random calls while a run is busy in a tool that hangs, then
    ``abort()`` and ``wait_for_idle()``: every async call is a checkpoint on every path
    (returning or refused), no sync call ever is."""
    hang = ts.behaviour_tool("hang", ToolBehaviour(outcome="hang"))
    work = ts.behaviour_tool("work", ToolBehaviour(duration=0.001))

    async def main() -> None:
        agent = Agent(faux.model(script), tools=[work, hang])
        for name in idle_ops:
            if name in ASYNC_OPS:
                await call_async(name, agent)
            else:
                call_sync(name, agent)
        agent.set_model(faux.model([faux.reply(faux.tool_call("hang", id="h"))]))
        agent.set_tools([work, hang])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.prompt, "hang")
            await trio.testing.wait_all_tasks_blocked()
            assert agent.state.pending_tool_calls == frozenset({"h"})
            for name in busy_ops:
                if name in ASYNC_OPS:
                    await call_async(name, agent)
                else:
                    call_sync(name, agent)
            call_sync("abort", agent)
            await call_async("wait_for_idle", agent)
            assert not agent.state.is_streaming

    trio._core._run._r.seed(seed)
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# --- 14: linear work -----------------------------------------------------------------------------


def counted(run: Callable[[], Awaitable[Any]]) -> int:
    """The Python and C calls (and returns) made while ``run`` runs, in a fresh Trio run with
    a seeded scheduler: the same code path always counts the same."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        count += 1

    async def main() -> None:
        sys.setprofile(profile)
        try:
            await run()
        finally:
            sys.setprofile(None)

    trio._core._run._r.seed(0)
    gc.disable()  # a collection would count finalizers
    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        gc.enable()
    return count


def run_turns(history: int, turns: int, reply: faux.Reply, via: Literal["loop", "agent"]) -> int:
    """Count a run over a transcript of ``history`` exchanges: ``turns`` turns with one tool
    call each, then ``reply``. The listener reads every partial message."""
    transcript: list[AgentMessage] = []
    for index in range(history):
        transcript.append(UserMessage.text(f"question {index}", ()))
        transcript.append(AssistantMessage(content=(TextContent(f"answer {index}"),)))
    script = [faux.reply(faux.tool_call("work", {"n": t}, id=f"c{t}")) for t in range(turns)]
    script.append(reply)
    work = ts.behaviour_tool("work", ToolBehaviour(duration=0.001, updates=1))

    async def listener(event: Any) -> None:
        if event.type == "message_update":
            event.message  # noqa: B018  (builds the partial message: that is the work)

    async def run() -> None:
        model = faux.model(script)
        if via == "agent":
            agent = Agent(model, tools=[work], messages=transcript)
            agent.subscribe(listener)
            await agent.prompt("go")
        else:
            config = AgentLoopConfig(model=model)
            context = AgentContext(messages=transcript, tools=[work])
            await run_agent_loop([UserMessage.text("go")], context, config, listener)

    return counted(run)


def scaled(reply: faux.Reply, factor: int) -> faux.Reply:
    """The reply with every text and thinking block ``factor`` times as long (each first
    padded to a whole number of chunks, so that its deltas are ``factor`` times as many)."""
    size = reply.chunk_size or 0

    def longer(text: str) -> str:
        if size:
            text += "p" * (-len(text) % size)
        return text * factor

    content: list[Any] = []
    for block in reply.content:
        if isinstance(block, TextContent):
            content.append(attrs.evolve(block, text=longer(block.text)))
        elif isinstance(block, trio_agent.ThinkingContent):
            content.append(attrs.evolve(block, thinking=longer(block.thinking)))
        else:
            content.append(block)
    return attrs.evolve(reply, content=content)


TEXTY_REPLIES = ts.replies(
    stop_reasons=(None, "length", "error"),
    text=st.text("abcxyz", min_size=1, max_size=20),
    chunk_sizes=st.integers(1, 3),
    chunk_delays=st.sampled_from([0.0, 0.001]),
)


@examples(0.03)
@given(
    st.integers(1, 400),
    st.integers(1, 4),
    TEXTY_REPLIES,
    st.sampled_from(["loop", "agent"]),
)
def test_per_turn_work_does_not_grow_with_the_transcript(
    history: int, turns: int, reply: faux.Reply, via: Literal["loop", "agent"]
) -> None:
    """Invariant 14: what a run does for a long transcript beyond what it does for an empty
    one (taking the transcript in once) is the same for one turn and for ``turns`` turns:
    the per-turn cost does not grow with the transcript."""
    run_turns(0, 1, reply, via)  # warm caches (imports, compiled patterns)
    extra_once = run_turns(history, 1, reply, via) - run_turns(0, 1, reply, via)
    extra_each = run_turns(history, turns, reply, via) - run_turns(0, turns, reply, via)
    assert extra_each == extra_once, (extra_once, extra_each)


@examples(0.03)
@given(TEXTY_REPLIES, st.sampled_from(["loop", "agent"]))
def test_streaming_costs_the_same_for_every_delta(
    reply: faux.Reply, via: Literal["loop", "agent"]
) -> None:
    """Invariant 14: streaming a reply with k times as many deltas (its blocks k times as
    long), to a listener that reads every partial message, costs an amount of work affine
    in k: each delta costs the same, however much text came before it."""
    run_turns(0, 0, reply, via)  # warm caches
    once, twice, thrice = (run_turns(0, 0, scaled(reply, k), via) for k in (1, 2, 3))
    assert twice - once == thrice - twice, (once, twice, thrice)


class CountingJiter:
    """``jiter`` for the provider module, counting the bytes it is asked to parse."""

    def __init__(self) -> None:
        self.parsed = 0

    def from_json(self, data: bytes, **options: Any) -> Any:
        self.parsed += len(data)
        return jiter.from_json(data, **options)


ARGUMENTS = st.fixed_dictionaries(
    {"path": st.text(max_size=40), "content": st.text(max_size=200)},
    optional={"options": ts.json_objects()},
)


@examples(0.2)
@given(ARGUMENTS, st.integers(0, 3000), st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_streamed_tool_arguments_are_parsed_in_linear_work(
    arguments: dict[str, Any], padding: int, sizes: list[int]
) -> None:
    """Invariant 14: the arguments of a streamed tool call (with ``padding`` times three
    more characters, some of them multi-byte), cut in random pieces (cycling ``sizes``), are
    parsed as they grow; the final arguments are exact, and the bytes parsed in all stay
    within a constant times their length, beyond what the first KiB may cost (it may be
    parsed again at every piece)."""
    arguments = {**arguments, "padding": "ab✓" * padding}
    text = json.dumps(arguments, ensure_ascii=False)
    counter = CountingJiter()
    namespace = SimpleNamespace(from_json=counter.from_json)
    first_kib = 0  # the bytes of the text so far, at each cut inside the first KiB
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(provider_common, "jiter", namespace)
        partial = provider_common.PartialJson()
        position, index = 0, 0
        while position < len(text):
            size = sizes[index % len(sizes)]
            partial.add(text[position : position + size])
            position, index = position + size, index + 1
            if position <= 1024:
                first_kib += len(text[:position].encode("utf-8"))
        final = partial.final()
    assert final == arguments
    characters, length = len(text), len(text.encode("utf-8"))
    # Past the first KiB, a re-parse only when the text has grown by half: at most
    # 3 x characters in all, 4 bytes each; then the final parse (twice, if it falls back).
    assert counter.parsed <= first_kib + 12 * characters + 2 * length, (counter.parsed, length)
