"""Transcripts of pi 1.6.0: system messages, the thinking level of a reply, both ways.

``fixtures/pi_1_6_0_transcript.json`` is what pi-agent-core 1.6.0's ``Agent`` keeps after
two prompts on pi-ai's faux provider (``fixtures/pi_transcript.mjs record``): a leading
system message with the prompt and the tools, a later one that adds an instruction and a
section and changes the tools, and replies at two thinking levels.

The other directions run pi 1.6.0 under node when node and pi-agent-core 1.6.0 are
installed (see :func:`_pi_dir`): on what trio_agent writes (``pi_transcript.mjs
continue``), and on 150 transcripts of system messages, for the system prompt pi-ai sends
(``prompts``). Each run is also checked against its record (``pi_1_6_0_continued.json``,
``pi_1_6_0_prompts.json``): the question asked must be the one recorded, so that where
node is not installed the recorded answer stands for pi's. ``TRIO_AGENT_RECORD_PI=1``
records anew.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import trio

import trio_agent
from tests._support import make_tool
from tests.test_sdk_types import _STREAM, _model, check_request
from trio_agent import (
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AssistantMessage,
    NextTurn,
    ReasoningLevel,
    ReplyThinkingLevel,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingLevel,
    ToolDeclaration,
    ToolReference,
    ToolResult,
    TranscriptError,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import anthropic, faux, openai_chat, openai_responses
from trio_agent.testing import ScriptedResponse, open_sse_server

FIXTURES = Path(__file__).parent / "fixtures"
PI_TRANSCRIPT = FIXTURES / "pi_1_6_0_transcript.json"
PI_CONTINUED = FIXTURES / "pi_1_6_0_continued.json"
PI_SCRIPT = FIXTURES / "pi_transcript.mjs"


async def _answer(tool_call_id: str, args: dict[str, Any], on_update: Any) -> ToolResult:
    await trio.lowlevel.checkpoint()
    return ToolResult.text(f"contents of {args.get('path')}")


def _schema(name: str) -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


READ = make_tool("read", _answer, schema=_schema("path"))
SEARCH = make_tool("search", _answer, schema=_schema("query"))


def pi_data() -> list[dict[str, Any]]:
    """The recorded pi 1.6.0 transcript, as JSON data."""
    data: list[dict[str, Any]] = json.loads(PI_TRANSCRIPT.read_text())
    return data


async def noop(event: Any) -> None:
    await trio.lowlevel.checkpoint()


# --- reading what pi 1.6.0 writes ------------------------------------------------------------


def test_a_pi_1_6_0_transcript_loads_as_typed_messages() -> None:
    messages = trio_agent.from_json(pi_data())
    roles = [type(message).__name__ for message in messages]
    assert roles == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]
    first, later = messages[0], messages[5]
    assert isinstance(first, SystemMessage)
    assert isinstance(later, SystemMessage)
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    assert first == SystemMessage(
        "You are terse.",
        tools_added=[ToolDeclaration("read", "Read a file.", parameters)],
        timestamp=0,
    )
    assert (later.content, later.sections) == (
        "Answer in one line.",
        {"style": "<style>plain</style>"},
    )
    assert ([tool.name for tool in later.tools_added], later.tools_removed) == (
        ["search"],
        (ToolReference("read"),),
    )
    levels = [m.thinking_level for m in messages if isinstance(m, AssistantMessage)]
    assert levels == ["low", "low", "high", "high"]


def test_a_pi_1_6_0_transcript_is_written_back_as_pi_wrote_it() -> None:
    data = pi_data()
    assert json.loads(trio_agent.dumps(trio_agent.from_json(data))) == data


def test_the_fields_pi_1_6_0_adds_to_a_reply_are_read_and_written_back() -> None:
    data = pi_data()[2]
    data["responseModel"] = "faux-1-2026"
    data["rawStopReason"] = "tool_use"
    data["diagnostics"] = [{"type": "retry", "timestamp": 1, "error": {"message": "429"}}]
    data["durationMs"] = 1234
    data["usage"]["reasoning"] = 7
    data["usage"]["cost"]["totalFromProvider"] = True
    data["content"][1]["namespace"] = "files"
    data["content"][1]["argumentsError"] = "not an object: [1]"
    message = trio_agent.from_json(data, AssistantMessage)
    assert message.extra == {
        "responseModel": "faux-1-2026",
        "rawStopReason": "tool_use",
        "diagnostics": [{"type": "retry", "timestamp": 1, "error": {"message": "429"}}],
        "durationMs": 1234,
    }
    assert (message.usage.reasoning, message.usage.cost.total_from_provider) == (7, True)
    call = message.tool_calls[0]
    assert call.extra == {"namespace": "files", "argumentsError": "not an object: [1]"}
    assert json.loads(trio_agent.dumps(message)) == data


def test_an_0_85_transcript_still_loads_and_is_written_as_it_was() -> None:
    data = [
        {"role": "user", "content": "hi", "timestamp": 1},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "hello"}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {
                "input": 1,
                "output": 2,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 3,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": "stop",
            "timestamp": 2,
        },
    ]
    messages = trio_agent.from_json(data)
    reply = messages[1]
    assert isinstance(reply, AssistantMessage)
    assert (reply.thinking_level, reply.extra, reply.usage.reasoning) == (None, None, None)
    assert json.loads(trio_agent.dumps(messages)) == data


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        (
            {"role": "system", "content": 5},
            "expected a string or a JSON array of text blocks, got int 5 @ $[0].content",
        ),
        (
            {"role": "system", "content": [{"type": "image", "data": "x", "mimeType": "a"}]},
            "type 'image' is not 'text' @ $[0].content[0]",
        ),
        (
            {"role": "system", "content": "", "sections": {"style": 3}},
            "expected a string or null for section 'style', got int 3 @ $[0].sections",
        ),
        (
            {"role": "system", "content": "", "sections": ["a"]},
            "expected a JSON object of sections, got list ['a'] @ $[0].sections",
        ),
        (
            {"role": "system", "content": "", "toolsAdded": {"name": "read"}},
            "expected a JSON array, got dict {'name': 'read'} @ $[0].toolsAdded",
        ),
        (
            {"role": "system", "content": "", "toolsAdded": [{"name": 3}]},
            "expected a string, got int 3 @ $[0].toolsAdded[0].name",
        ),
        (
            {"role": "system", "content": "", "toolsRemoved": [{"name": "a", "why": "x"}]},
            "extra fields found (why) @ $[0].toolsRemoved[0]",
        ),
        (
            {**json.loads(trio_agent.dumps(AssistantMessage())), "thinkingLevel": "huge"},
            "expected one of 'off', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max' or null,"
            " got str 'huge' @ $[0].thinkingLevel",
        ),
        (
            json.loads(trio_agent.dumps(AssistantMessage())) | {"durationMs": float("inf")},
            "expected a finite number, got float inf @ $[0].durationMs",
        ),
        (
            {**json.loads(trio_agent.dumps(AssistantMessage())), "durationMs": "12"},
            "expected a finite number, got str '12' @ $[0].durationMs",
        ),
    ],
)
def test_a_bad_system_message_or_reply_field_is_named_with_its_value(
    message: dict[str, Any], problem: str
) -> None:
    with pytest.raises(TranscriptError) as info:
        trio_agent.from_json([message])
    assert str(info.value) == f"invalid transcript:\n  {problem}"


def test_a_system_message_is_written_in_pis_shape() -> None:
    message = SystemMessage(
        [TextContent("a"), TextContent("b")],
        sections={"x": "X", "gone": None},
        tools_added=[ToolDeclaration("t", "T", {"type": "object"}, constrained_sampling=False)],
        tools_removed=[ToolReference("u")],
        timestamp=3,
    )
    assert json.loads(trio_agent.dumps(message)) == {
        "role": "system",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "sections": {"x": "X", "gone": None},
        "toolsAdded": [
            {
                "name": "t",
                "description": "T",
                "parameters": {"type": "object"},
                "constrainedSampling": False,
            }
        ],
        "toolsRemoved": [{"name": "u"}],
        "timestamp": 3,
    }
    # Empty tool changes and no sections are left out, as pi leaves them out.
    assert json.loads(trio_agent.dumps(SystemMessage("p", timestamp=0))) == {
        "role": "system",
        "content": "p",
        "timestamp": 0,
    }
    assert trio_agent.loads(trio_agent.dumps(message), SystemMessage) == message


# --- the system prompt a request carries ---------------------------------------------------


def test_the_prompt_replays_content_and_sections_as_pi_does() -> None:
    messages = [
        SystemMessage("base", sections={"b": "<b/>", "a": "<a/>"}, timestamp=0),
        SystemMessage([TextContent("one"), TextContent("two")], timestamp=1),
        SystemMessage("", sections={"b": None, "c": "<c/>", "a": "<a2/>"}, timestamp=2),
        SystemMessage("", sections={"b": "<b2/>"}, timestamp=3),
    ]
    # A replaced section keeps its place, a removed one added again goes last.
    expected = "run\n\nbase\n\none\ntwo\n\n<a2/>\n\n<c/>\n\n<b2/>"
    assert trio_agent.system_prompt("run", messages) == expected
    assert trio_agent.system_prompt("", []) == ""
    assert SystemMessage("p", sections={"x": "X", "y": None}).text == "p\n\nX"


def test_sections_with_index_names_come_first_as_in_a_javascript_object() -> None:
    message = SystemMessage("", sections={"b": "B", "10": "ten", "2": "two", "01": "zero-one"})
    assert message.text == "two\n\nten\n\nB\n\nzero-one"


async def test_system_messages_fold_into_the_request_and_leave_its_messages(
    autojump_clock: Any,
) -> None:
    model = faux.model(["one", "two"])
    start = trio_agent.from_json(pi_data())
    context = AgentContext(system_prompt="", messages=start, tools=[READ])
    with trio.fail_after(5):
        new = await run_agent_loop(
            [UserMessage.text("more"), SystemMessage("Be kind.", timestamp=1)],
            context,
            AgentLoopConfig(model=model, get_follow_up_messages=None),
            noop,
        )
    sent = model.calls[0].context
    assert sent.system_prompt == (
        "You are terse.\n\nAnswer in one line.\n\nBe kind.\n\n<style>plain</style>"
    )
    assert not any(isinstance(message, SystemMessage) for message in sent.messages)
    assert len(sent.messages) == len(start) - 2 + 1
    assert [tool.name for tool in sent.tools] == ["read"]  # the run's tools
    assert isinstance(new[1], SystemMessage)  # it stays in the transcript


async def test_a_custom_convert_to_llm_may_keep_or_drop_system_messages(
    autojump_clock: Any,
) -> None:
    async def without_system(messages: Any) -> list[Any]:
        await trio.lowlevel.checkpoint()
        return [m for m in messages if isinstance(m, UserMessage | AssistantMessage)]

    async def transform(messages: Any) -> list[Any]:
        await trio.lowlevel.checkpoint()
        return [SystemMessage("From the transform.", timestamp=0), *messages]

    configs: list[tuple[dict[str, Any], str]] = [
        ({"convert_to_llm": without_system}, "Run prompt."),
        (
            {"transform_context": transform},
            "Run prompt.\n\nFrom the transform.\n\nIn transcript.",
        ),
        ({"convert_to_llm": trio_agent.default_convert_to_llm}, "Run prompt.\n\nIn transcript."),
    ]
    for config, expected in configs:
        model = faux.model(["ok"])
        context = AgentContext(
            system_prompt="Run prompt.", messages=[SystemMessage("In transcript.", timestamp=0)]
        )
        with trio.fail_after(5):
            await run_agent_loop(
                [UserMessage.text("go")], context, AgentLoopConfig(model=model, **config), noop
            )
        assert model.calls[0].context.system_prompt == expected, config


async def test_a_context_from_prepare_next_turn_is_folded_afresh(autojump_clock: Any) -> None:
    model = faux.model([faux.reply(faux.tool_call("read", {"path": "a"})), "done"])

    async def prepare_next_turn(turn: Any) -> NextTurn:
        await trio.lowlevel.checkpoint()
        kept = [m for m in turn.context.messages if not isinstance(m, SystemMessage)]
        return NextTurn(context=attrs.evolve(turn.context, messages=kept))

    context = AgentContext(
        system_prompt="Run.", messages=[SystemMessage("Old.", timestamp=0)], tools=[READ]
    )
    with trio.fail_after(5):
        await run_agent_loop(
            [UserMessage.text("go")],
            context,
            AgentLoopConfig(model=model, prepare_next_turn=prepare_next_turn),
            noop,
        )
    assert [call.context.system_prompt for call in model.calls] == ["Run.\n\nOld.", "Run."]


async def test_an_agent_does_not_continue_from_system_messages_alone(autojump_clock: Any) -> None:
    model = faux.model(["never"])
    agent = trio_agent.Agent(model, messages=[SystemMessage("Be brief.", timestamp=0)])
    with pytest.raises(ValueError, match=r"^No messages to continue from$"):
        await agent.continue_()
    assert model.calls == []


async def test_a_continuation_goes_on_from_the_last_message_that_is_not_a_system_message(
    autojump_clock: Any,
) -> None:
    """A system message after the model's reply does not end the conversation: continuing
    from it would send a request that ends with the reply (a prefill)."""
    reply = AssistantMessage(content=(TextContent("hi"),), timestamp=0)
    messages: list[AgentMessage] = [
        UserMessage.text("hello"),
        reply,
        SystemMessage("Be brief.", timestamp=0),
    ]
    model = faux.model(["never"])
    agent = trio_agent.Agent(model, messages=messages)
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        await agent.continue_()
    with pytest.raises(ValueError, match=r"^Cannot continue from message role: assistant$"):
        await trio_agent.run_agent_loop_continue(
            AgentContext(messages=messages), AgentLoopConfig(model=model), noop
        )
    only_system = AgentContext(messages=[SystemMessage("Be brief.", timestamp=0)])
    with pytest.raises(ValueError, match=r"^Cannot continue: no messages in context$"):
        await trio_agent.run_agent_loop_continue(only_system, AgentLoopConfig(model=model), noop)
    assert model.calls == []


# --- the thinking level of a reply -----------------------------------------------------------


async def test_each_reply_of_the_loop_records_the_thinking_level_it_was_asked_at(
    autojump_clock: Any,
) -> None:
    model = faux.model([faux.reply(faux.tool_call("read", {"path": "a"})), "done"])
    levels: Iterator[ThinkingLevel] = iter(["minimal", "off"])

    async def prepare_next_turn(turn: Any) -> NextTurn:
        await trio.lowlevel.checkpoint()
        return NextTurn(thinking_level=next(levels))

    events: list[Any] = []

    async def listen(event: Any) -> None:
        await trio.lowlevel.checkpoint()
        events.append(event)

    runs: list[tuple[ReasoningLevel | None, Any, list[str]]] = [
        ("high", None, ["high", "high"]),
        (None, None, ["off", "off"]),
        ("high", prepare_next_turn, ["high", "minimal"]),
    ]
    for reasoning, prepare, expected in runs:
        model = faux.model([faux.reply(faux.tool_call("read", {"path": "a"})), "done"])
        events.clear()
        config = AgentLoopConfig(model=model, reasoning=reasoning, prepare_next_turn=prepare)
        with trio.fail_after(5):
            new = await run_agent_loop(
                [UserMessage.text("go")], AgentContext(tools=[READ]), config, listen
            )
        replies = [m for m in new if isinstance(m, AssistantMessage)]
        assert [reply.thinking_level for reply in replies] == expected
        # As in pi, the streaming reply carries none; its end, the message kept, does.
        ends = [e.message for e in events if e.type == "message_end"]
        assert [m for m in ends if isinstance(m, AssistantMessage)] == replies
        starts = [e.message for e in events if e.type in ("message_start", "message_update")]
        assert {m.thinking_level for m in starts if isinstance(m, AssistantMessage)} == {None}


async def test_a_failed_and_an_aborted_reply_record_the_thinking_level_too(
    autojump_clock: Any,
) -> None:
    failing = faux.model([faux.reply("x", stop_reason="error", error_message="boom")])
    with trio.fail_after(5):
        new = await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(),
            AgentLoopConfig(model=failing, reasoning="low"),
            noop,
        )
    assert isinstance(new[-1], AssistantMessage)
    assert (new[-1].stop_reason, new[-1].thinking_level) == ("error", "low")

    abort = trio.CancelScope()

    async def abort_on_delta(event: Any) -> None:
        await trio.lowlevel.checkpoint()
        if event.type == "message_update":
            abort.cancel()

    slow = faux.model([faux.reply("abcdef", chunk_size=1)])
    with trio.fail_after(5):
        new = await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(),
            AgentLoopConfig(model=slow, reasoning="xhigh"),
            abort_on_delta,
            abort,
        )
    assert isinstance(new[-1], AssistantMessage)
    assert (new[-1].stop_reason, new[-1].thinking_level) == ("aborted", "xhigh")


async def test_a_stream_function_records_the_level_of_its_options_on_the_final_reply_only(
    autojump_clock: Any,
) -> None:
    """Outside the loop a reply records none, unless the options ask; the loop's own
    options ask for the level it wants, and a stream function that does not record it
    gets it from the loop."""
    events: list[Any] = []

    async def keep(event: Any) -> None:
        await trio.lowlevel.checkpoint()
        events.append(event)

    levels: list[tuple[ReplyThinkingLevel | None, str | None]] = [(None, None), ("max", "max")]
    for level, expected in levels:
        model = faux.model(["hi", faux.reply("x", stop_reason="error", error_message="boom")])
        events.clear()

        options = StreamOptions(thinking_level=level)
        context = trio_agent.LlmContext("", [UserMessage.text("go")])
        with trio.fail_after(5):
            done = await faux.stream(model, context, options, keep)
            failed = await faux.stream(model, context, options, keep)
        assert (done.thinking_level, failed.thinking_level) == (expected, expected)
        partials = [e.partial for e in events if e.type not in ("done", "error")]
        assert {p.thinking_level for p in partials} == {None}

    async def ignores_options(model: Any, context: Any, options: Any, emit: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return AssistantMessage(content=[TextContent("mine")])

    with trio.fail_after(5):
        new = await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(),
            AgentLoopConfig(model=faux.model(), reasoning="medium"),
            noop,
            stream_fn=ignores_options,
        )
    assert isinstance(new[-1], AssistantMessage)
    assert new[-1].thinking_level == "medium"


# --- a real provider's request for a 1.6.0 transcript ----------------------------------------


@pytest.mark.parametrize("api", list(_STREAM))
async def test_a_loaded_1_6_0_transcript_continued_sends_a_request_of_the_sdks_type(
    clock: Any, api: str
) -> None:
    start = trio_agent.from_json(pi_data())
    expected_prompt = "You are terse.\n\nAnswer in one line.\n\n<style>plain</style>"
    async with open_sse_server(ScriptedResponse(body=b"")) as server:
        model = _model(api, server.url)
        config = AgentLoopConfig(model=model, api_key="test-key", max_retries=0)
        with trio.fail_after(30):
            new = await run_agent_loop(
                [UserMessage.text("And now?")],
                AgentContext(system_prompt="", messages=start, tools=[SEARCH]),
                config,
                noop,
            )
    body: dict[str, Any] = server.requests[0].json
    check_request(api, body)
    reply = new[-1]  # an error: the server sent no events
    assert isinstance(reply, AssistantMessage)
    assert (reply.stop_reason, reply.thinking_level) == ("error", "off")
    if api == openai_chat.API:
        system = [m for m in body["messages"] if m["role"] in ("system", "developer")]
        assert [m["content"] for m in system] == [expected_prompt]
        assert body["messages"][0]["role"] in ("system", "developer")
        assert [tool["function"]["name"] for tool in body["tools"]] == ["search"]
    elif api == openai_responses.API:
        system = [m for m in body["input"] if m.get("role") in ("system", "developer")]
        prompts = [m["content"] for m in system] or [body.get("instructions")]
        assert prompts == [expected_prompt]
        assert [tool["name"] for tool in body["tools"]] == ["search"]
    elif api == anthropic.API:
        blocks = body["system"]
        prompt = blocks if isinstance(blocks, str) else "".join(b["text"] for b in blocks)
        assert expected_prompt in prompt
        assert {m["role"] for m in body["messages"]} == {"user", "assistant"}
        assert [tool["name"] for tool in body["tools"]] == ["search"]
    else:
        parts = body["systemInstruction"]["parts"]
        assert "".join(part["text"] for part in parts) == expected_prompt
        assert {c["role"] for c in body["contents"]} == {"user", "model"}
        names = [f["name"] for tool in body["tools"] for f in tool["functionDeclarations"]]
        assert names == ["search"]


# --- pi 1.6.0 reading what trio_agent writes ---------------------------------------------------


def _pi_dir() -> Path | None:
    """Where pi-agent-core 1.6.0 is installed, if it is: ``$TRIO_AGENT_PI_CORE`` or
    ``~/.cache/trio_agent-bench/pi-agent-core-1.6.0`` (``npm install
    @earendil-works/pi-agent-core@1.6.0 @earendil-works/pi-ai@1.6.0`` there)."""
    found = os.environ.get("TRIO_AGENT_PI_CORE")
    path = Path(found) if found else Path.home() / ".cache/trio_agent-bench/pi-agent-core-1.6.0"
    package = path / "node_modules/@earendil-works/pi-agent-core/package.json"
    return path if package.is_file() else None


async def _written_transcript() -> str:
    """What trio_agent writes after continuing the recorded pi transcript for one prompt with a
    tool call, timestamps fixed so that the text is the same on every run."""
    model = faux.model([faux.reply(faux.tool_call("read", {"path": "b.txt"}, id="c9")), "Done."])
    start = trio_agent.from_json(pi_data())
    new = await run_agent_loop(
        [UserMessage.text("Read b.txt")],
        AgentContext(messages=start, tools=[READ]),
        AgentLoopConfig(model=model, reasoning="high"),
        noop,
    )
    fixed = [
        attrs.evolve(cast(Any, message), timestamp=100 + index) for index, message in enumerate(new)
    ]
    text: str = trio_agent.dumps([*start, *fixed])
    return text


def test_pi_1_6_0_loads_what_trio_agent_writes() -> None:
    written = trio.run(_written_transcript, clock=trio.testing.MockClock(autojump_threshold=0))
    node = shutil.which("node")
    pi = _pi_dir()
    if node is not None and pi is not None:
        result = subprocess.run(
            [node, str(PI_SCRIPT), str(pi), "continue"],
            input=written,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        continued = json.loads(result.stdout)
        if os.environ.get("TRIO_AGENT_RECORD_PI") == "1":
            recorded = {"written": written, "continued": continued}
            PI_CONTINUED.write_text(json.dumps(recorded, indent=1) + "\n")
    # What pi 1.6.0 was recorded loading is what trio_agent writes today (where node is
    # not installed, the record stands for the run; TRIO_AGENT_RECORD_PI=1 records anew).
    recorded = json.loads(PI_CONTINUED.read_text())
    assert recorded["written"] == written
    if node is None or pi is None:
        continued = recorded["continued"]
    ours = json.loads(written)
    # pi kept every message as written, in order, and added its prompt and reply, after a
    # system message declaring its own tools (read) in place of the transcript's (search).
    assert continued["messages"][: len(ours)] == ours
    added = continued["messages"][len(ours) :]
    assert [m["role"] for m in added] == ["system", "user", "assistant"]
    assert [t["name"] for t in added[0]["toolsAdded"]] == ["read"]
    assert added[0]["toolsRemoved"] == [{"name": "search"}]
    assert continued["request"][-3:] == ["assistant", "system", "user"]
    assert continued["systemPrompt"] == (
        "You are terse.\n\nAnswer in one line.\n\n<style>plain</style>"
    )


# --- the system prompt against pi-ai's own replay ------------------------------------------------

PI_PROMPTS = FIXTURES / "pi_1_6_0_prompts.json"
_SECTION_NAMES = ["a", "b", "c", "0", "2", "10", "01", "-1", "4294967294", "4294967295"]


def _prompt_cases() -> list[dict[str, Any]]:
    """Transcripts of system messages (content, sections by names JavaScript orders
    differently, removals, empty texts) among user messages, made the same on every run."""
    draw = random.Random(1606)
    cases = []
    for _ in range(150):
        messages: list[dict[str, Any]] = []
        for index in range(draw.randint(0, 5)):
            if draw.random() < 0.3:
                messages.append({"role": "user", "content": "u", "timestamp": index})
                continue
            text = draw.choice(["", "Be brief.", "Use tools.", " "])
            content: Any = (
                text
                if draw.random() < 0.6
                else [{"type": "text", "text": draw.choice(["x", "", "y"])}] * draw.randint(0, 2)
            )
            message: dict[str, Any] = {"role": "system", "content": content, "timestamp": index}
            if draw.random() < 0.7:
                names = draw.sample(_SECTION_NAMES, draw.randint(0, 4))
                message["sections"] = {
                    name: draw.choice([None, "<A/>", "<B/>", ""]) for name in names
                }
            messages.append(message)
        cases.append({"base": draw.choice(["", "Base."]), "messages": messages})
    return cases


def test_the_system_prompt_is_the_one_pi_ai_1_6_0_sends() -> None:
    cases = _prompt_cases()
    node, pi = shutil.which("node"), _pi_dir()
    if node is not None and pi is not None:
        result = subprocess.run(
            [node, str(PI_SCRIPT), str(pi), "prompts"],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        expected = json.loads(result.stdout)
        if os.environ.get("TRIO_AGENT_RECORD_PI") == "1":
            PI_PROMPTS.write_text(json.dumps({"cases": cases, "prompts": expected}) + "\n")
    recorded = json.loads(PI_PROMPTS.read_text())
    assert recorded["cases"] == cases  # what pi was recorded answering is what is asked
    if node is None or pi is None:
        expected = recorded["prompts"]
    ours = []
    for case in cases:
        messages = trio_agent.from_json(case["messages"])
        systems = [m for m in messages if isinstance(m, SystemMessage)]
        ours.append(trio_agent.system_prompt(case["base"], systems))
    assert ours == expected
