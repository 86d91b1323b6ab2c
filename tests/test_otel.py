"""trio_agent.otel: the spans of a run, asserted with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests._support import make_tool
from trio_agent import Agent, AgentTool, ToolResult, ToolUpdate
from trio_agent.otel import Tracing
from trio_agent.providers import faux

ROOT = Path(__file__).resolve().parent.parent


def sleeper() -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await trio.sleep(args["ms"] / 1000)
        if args.get("fail"):
            raise ValueError("it broke")
        return ToolResult.text(f"done {call_id}")

    return make_tool("sleep", execute)


def traced(
    replies: list[Any], *, capture_content: bool = False
) -> tuple[Agent, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(faux.model(replies), tools=[sleeper()])
    agent.subscribe(Tracing(provider, capture_content=capture_content).listener)
    return agent, exporter


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


TWO_TOOLS = faux.reply(
    faux.tool_call("sleep", {"ms": 20}, id="t1"),
    faux.tool_call("sleep", {"ms": 10, "fail": True}, id="t2"),
)


async def test_a_two_turn_run_with_parallel_tools(autojump_clock: trio.abc.Clock) -> None:
    agent, exporter = traced([TWO_TOOLS, "the answer"])
    await agent.prompt("go")
    spans = exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names[-1] == "invoke_agent"
    assert sorted(names[:-1]) == sorted(
        [f"chat {agent.state.model.id}"] * 2 + ["execute_tool sleep"] * 2 + ["turn"] * 2
    )
    run = spans[-1]
    assert run.parent is None
    turns = [s for s in spans if s.name == "turn"]
    assert [parent_of(t) for t in turns] == [run.context.span_id] * 2
    assert all(dict(t.attributes or {}) == {"trio_agent.turn": True} for t in turns)
    assert all(t.status.status_code is StatusCode.UNSET for t in turns)
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.request.model": agent.state.model.id,
        "gen_ai.provider.name": agent.state.model.provider,
        "gen_ai.system": agent.state.model.provider,
    }
    assert run.status.status_code is StatusCode.UNSET
    first_turn, second_turn = turns
    for span in spans[:-1]:
        assert span.context.trace_id == run.context.trace_id
    # the first turn holds the first reply and both tools (child tasks), the second the answer
    in_first = sorted(s.name for s in spans if parent_of(s) == first_turn.context.span_id)
    assert in_first == [f"chat {agent.state.model.id}", "execute_tool sleep", "execute_tool sleep"]
    in_second = [s.name for s in spans if parent_of(s) == second_turn.context.span_id]
    assert in_second == [f"chat {agent.state.model.id}"]
    chats = [s for s in spans if s.name.startswith("chat")]
    first, second = chats
    assert first.start_time is not None
    assert first.end_time is not None
    attributes = dict(first.attributes or {})
    assert attributes.pop("gen_ai.usage.input_tokens") >= 0  # type: ignore[operator]
    assert attributes.pop("gen_ai.usage.output_tokens") >= 0  # type: ignore[operator]
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": agent.state.model.id,
        "gen_ai.provider.name": agent.state.model.provider,
        "gen_ai.system": agent.state.model.provider,
        "gen_ai.response.finish_reasons": ("toolUse",),
    }
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)  # type: ignore[index]
    assert [e.name for e in second.events] == ["gen_ai.first_token"]
    assert first.status.status_code is StatusCode.UNSET
    tools = [s for s in spans if s.name == "execute_tool sleep"]
    assert [t.attributes["gen_ai.tool.call.id"] for t in tools] == ["t2", "t1"]  # type: ignore[index]
    failed, done = tools
    assert dict(done.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "sleep",
        "gen_ai.tool.call.id": "t1",
    }
    assert done.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "it broke"
    assert failed.attributes["error.type"] == "tool_error"  # type: ignore[index]
    # the two tools overlap in time: they ran in parallel
    assert failed.start_time is not None
    assert done.end_time is not None
    assert done.start_time is not None
    assert failed.end_time is not None
    assert failed.start_time < done.end_time
    assert done.start_time < failed.end_time
    # no content by default
    for span in spans:
        assert not any(
            key in (span.attributes or {})
            for key in ("gen_ai.output.messages", "gen_ai.tool.call.arguments")
        )


async def test_an_aborted_run_ends_its_spans_in_error(autojump_clock: trio.abc.Clock) -> None:
    # Two turns: two parallel tools that finish, then a tool the abort cuts short; then
    # the turn of its own that says the run was aborted.
    agent, exporter = traced(
        [TWO_TOOLS, faux.reply(faux.tool_call("sleep", {"ms": 500}, id="t3")), "never"]
    )

    async def abort_later() -> None:
        await trio.sleep(0.2)  # after the first turn's tools (20 ms), during t3 (500 ms)
        agent.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        await agent.prompt("go")
    spans = exporter.get_finished_spans()
    model = agent.state.model.id
    by_id = {s.context.span_id: s for s in spans}

    def path(span: ReadableSpan) -> list[str]:
        names = []
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    run = spans[-1]
    turns = [s for s in spans if s.name == "turn"]
    assert [s.name for s in spans if s.name != "turn"] == [
        f"chat {model}",
        "execute_tool sleep",
        "execute_tool sleep",
        f"chat {model}",
        "execute_tool sleep",
        f"chat {model}",
        "invoke_agent",
    ]
    assert len(turns) == 3
    assert all(
        path(s) == ["turn", "invoke_agent"] for s in spans if s.name != "turn" and s is not run
    )
    assert all(path(t) == ["invoke_agent"] for t in turns)
    chats = [s for s in spans if s.name.startswith("chat")]
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    # turn 1: its reply and its two tools, one failing; the turn itself is fine
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [  # type: ignore[index]
        ("toolUse",),
        ("toolUse",),
        ("aborted",),
    ]
    assert [(t.attributes["gen_ai.tool.call.id"], t.status.status_code) for t in tools] == [  # type: ignore[index]
        ("t2", StatusCode.ERROR),
        ("t1", StatusCode.UNSET),
        ("t3", StatusCode.ERROR),
    ]
    assert [t.status.description for t in tools] == ["it broke", None, "Operation aborted"]
    assert [c.status.status_code for c in chats[:2]] == [StatusCode.UNSET] * 2
    assert (chats[2].status.status_code, chats[2].status.description) == (
        StatusCode.ERROR,
        "aborted",
    )
    assert [(t.status.status_code, t.status.description) for t in turns] == [
        (StatusCode.UNSET, None),
        (StatusCode.UNSET, None),
        (StatusCode.ERROR, "aborted"),
    ]
    assert (run.status.status_code, run.status.description) == (StatusCode.ERROR, "aborted")
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.request.model": model,
        "gen_ai.provider.name": agent.state.model.provider,
        "gen_ai.system": agent.state.model.provider,
    }


async def test_an_abort_mid_stream(autojump_clock: trio.abc.Clock) -> None:
    agent, exporter = traced([faux.reply("abcdefghij", chunk_size=2)])
    updates = 0

    async def abort_at_the_second_delta(event: Any) -> None:
        nonlocal updates
        if event.type == "message_update":
            updates += 1
            if updates == 2:
                agent.abort()

    agent.subscribe(abort_at_the_second_delta)
    await agent.prompt("go")
    chat, turn, run = exporter.get_finished_spans()
    assert (turn.name, turn.status.description) == ("turn", "aborted")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.status.description == "aborted"
    assert [e.name for e in chat.events] == ["gen_ai.first_token"]
    assert run.status.description == "aborted"


async def test_content_is_captured_when_asked(autojump_clock: trio.abc.Clock) -> None:
    agent, exporter = traced([TWO_TOOLS, "the answer"], capture_content=True)
    await agent.prompt("go")
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat")]
    output = json.loads(str(chats[-1].attributes["gen_ai.output.messages"]))  # type: ignore[index]
    assert output[0]["content"] == [{"type": "text", "text": "the answer"}]
    tool = next(s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "t1")  # type: ignore[union-attr]
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"ms": 20}  # type: ignore[index]
    result = json.loads(str(tool.attributes["gen_ai.tool.call.result"]))  # type: ignore[index]
    assert result["content"] == [{"type": "text", "text": "done t1"}]


async def test_no_api_key_is_ever_recorded(autojump_clock: trio.abc.Clock) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(faux.model(["hi"]), api_key="sk-secret-123")
    agent.subscribe(Tracing(provider, capture_content=True).listener)
    await agent.prompt("go")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["chat faux", "turn", "invoke_agent"]
    assert "sk-secret-123" not in repr([(s.attributes, s.events) for s in spans])


async def test_without_an_sdk_provider_nothing_is_recorded() -> None:
    agent = Agent(faux.model([TWO_TOOLS, "the answer"]), tools=[sleeper()])
    tracing = Tracing()  # the global provider: the API's no-op one here
    agent.subscribe(tracing.listener)
    await agent.prompt("go")
    assert agent.state.messages[-1].text == "the answer"  # type: ignore[union-attr]


async def test_wrap_traces_a_loop_run() -> None:
    from trio_agent import AgentContext, AgentLoopConfig, UserMessage, run_agent_loop

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list[str] = []

    async def emit(event: Any) -> None:
        seen.append(event.type)

    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(),
        AgentLoopConfig(model=faux.model(["hi"])),
        Tracing(provider).wrap(emit),
    )
    assert [s.name for s in exporter.get_finished_spans()][-1] == "invoke_agent"
    assert seen[0] == "agent_start"
    assert seen[-1] == "agent_end"


def test_importing_trio_agent_does_not_import_opentelemetry() -> None:
    code = "import sys, trio_agent; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout == "False\n"
