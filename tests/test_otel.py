"""trio_agent.otel: the spans of a run, asserted with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests._support import make_tool
from trio_agent import (
    AfterToolCallContext,
    AfterToolCallResult,
    Agent,
    AgentTool,
    BeforeToolCallContext,
    BeforeToolCallResult,
    TextContent,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
)
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
    assert failed.status.description == "tool_error"  # not the error's text: no content
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
    assert [t.status.description for t in tools] == ["tool_error", None, "aborted"]
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


# --- calls that share an id -------------------------------------------------------------

SLEEP_SCHEMA = {
    "type": "object",
    "properties": {"ms": {"type": "integer"}, "fail": {"type": "boolean"}},
    "required": ["ms"],
}


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_calls_that_share_an_id_each_get_a_span_ended_once_with_their_outcome(
    autojump_clock: trio.abc.Clock, mode: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # The server chose one id for three calls: the first runs longest and succeeds, the
    # second is refused at once (its arguments), the third fails first.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sleep = make_tool("sleep", sleeper().execute, schema=SLEEP_SCHEMA)
    calls = faux.reply(
        faux.tool_call("sleep", {"ms": 20}, id="dup"),
        faux.tool_call("sleep", {"ms": "soon"}, id="dup"),
        faux.tool_call("sleep", {"ms": 10, "fail": True}, id="dup"),
    )
    agent = Agent(faux.model([calls, "done"]), tools=[sleep], tool_execution=mode)
    agent.subscribe(Tracing(provider, capture_content=True).listener)
    with caplog.at_level(logging.WARNING):
        await agent.prompt("go")
    assert "ended span" not in caplog.text  # no span was ended twice
    spans = tool_spans(exporter)
    assert len(spans) == 3  # each ended (an open span is never exported)
    outcomes = {
        str(span.attributes["gen_ai.tool.call.arguments"]): (  # type: ignore[index]
            span.status.status_code,
            span.status.description,
            json.loads(str(span.attributes["gen_ai.tool.call.result"]))["content"][0]["text"],  # type: ignore[index]
        )
        for span in spans
    }
    assert outcomes == {
        '{"ms": 20}': (StatusCode.UNSET, None, "done dup"),
        '{"ms": "soon"}': (
            StatusCode.ERROR,
            'Validation failed for tool "sleep":\n  - ms: must be integer\n\n'
            'Received arguments:\n{\n  "ms": "soon"\n}',
            'Validation failed for tool "sleep":\n  - ms: must be integer\n\n'
            'Received arguments:\n{\n  "ms": "soon"\n}',
        ),
        '{"ms": 10, "fail": true}': (StatusCode.ERROR, "it broke", "it broke"),
    }
    by_arguments = {str(s.attributes["gen_ai.tool.call.arguments"]): s for s in spans}  # type: ignore[index]
    slow, refused, failing = (by_arguments[k] for k in outcomes)
    assert slow.start_time is not None
    assert failing.start_time is not None
    assert slow.start_time <= refused.start_time <= failing.start_time  # type: ignore[operator]
    assert refused.end_time is not None
    assert failing.end_time is not None
    assert slow.end_time is not None
    if mode == "parallel":  # each ends when its call did: the failing one before the slow one
        assert refused.end_time < failing.end_time < slow.end_time
    else:
        assert slow.end_time < refused.end_time < failing.end_time
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == ["dup"] * 3


async def test_an_abort_ends_every_span_of_calls_that_share_an_id(
    autojump_clock: trio.abc.Clock,
) -> None:
    agent, exporter = traced(
        [
            faux.reply(
                faux.tool_call("sleep", {"ms": 500}, id="dup"),
                faux.tool_call("sleep", {"ms": 10}, id="dup"),
                faux.tool_call("sleep", {"ms": 500}, id="dup"),
            ),
            "never",
        ]
    )

    async def abort_later() -> None:
        await trio.sleep(0.1)  # after the second call, during the others
        agent.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        await agent.prompt("go")
    spans = tool_spans(exporter)
    spans.sort(key=lambda span: span.start_time or 0)
    assert [(s.status.status_code, s.status.description) for s in spans] == [
        (StatusCode.ERROR, "aborted"),
        (StatusCode.UNSET, None),  # the second call, which finished before the abort
        (StatusCode.ERROR, "aborted"),
    ]


# --- no content without capture_content ---------------------------------------------------

MARKER = "MARKER-of-the-arguments-7f3a"


async def raising(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    raise ValueError(f"cannot use {args['x']}")


async def returning(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    return ToolResult.text(f"used {args['x']}")


async def hanging(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    await trio.sleep_forever()
    raise AssertionError("not reached")


ERROR_PATHS: dict[str, tuple[AgentTool | None, dict[str, Any]]] = {
    "invalid arguments": (
        make_tool(
            "typed", returning, schema={"type": "object", "properties": {"n": {"type": "integer"}}}
        ),
        {"n": MARKER, "x": MARKER},
    ),
    "unknown tool": (None, {"x": MARKER}),
    "tool raises": (make_tool("raising", raising), {"x": MARKER}),
    "blocked before": (make_tool("blocked", returning), {"x": MARKER}),
    "overridden after": (make_tool("overridden", returning), {"x": MARKER}),
    "time limit": (make_tool("hanging", hanging), {"x": MARKER}),
    "succeeds": (make_tool("returning", returning), {"x": MARKER}),
}


async def before(context: BeforeToolCallContext) -> BeforeToolCallResult | None:
    if context.tool_call.name == "blocked":
        return BeforeToolCallResult(block=True, reason=f"refused {context.args}")
    return None


async def after(context: AfterToolCallContext) -> AfterToolCallResult | None:
    if context.tool_call.name == "overridden":
        return AfterToolCallResult(content=[TextContent(f"no: {context.args}")], is_error=True)
    return None


def every_string_of(span: ReadableSpan) -> str:
    """All a span carries as text: its name, attributes, events and status."""
    events = [(event.name, dict(event.attributes or {})) for event in span.events]
    return repr((span.name, dict(span.attributes or {}), events, span.status.description))


@pytest.mark.parametrize("path", list(ERROR_PATHS))
@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_no_argument_or_result_reaches_a_span_without_capture_content(
    autojump_clock: trio.abc.Clock, path: str, mode: Any
) -> None:
    tool, arguments = ERROR_PATHS[path]
    name = tool.name if tool is not None else "missing"
    calls = faux.reply(
        faux.tool_call(name, arguments, id="c1"), faux.tool_call("companion", {"x": 1}, id="c2")
    )
    tools = [t for t in (tool, make_tool("companion", returning)) if t is not None]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def run(capture_content: bool) -> Agent:
        agent = Agent(
            faux.model([calls, "done"]),
            tools=tools,
            before_tool_call=before,
            after_tool_call=after,
            tool_time_limit=1,
            tool_execution=mode,
        )
        agent.subscribe(Tracing(provider, capture_content=capture_content).listener)
        await agent.prompt("go")
        return agent

    agent = await run(capture_content=False)
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    first = results[0]
    assert first.is_error == (path != "succeeds"), first
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans].count(f"execute_tool {name}") == 1
    for span in spans:
        assert MARKER not in every_string_of(span)
    (tool_span,) = [s for s in spans if s.name == f"execute_tool {name}"]
    if path == "succeeds":
        assert tool_span.status.status_code is StatusCode.UNSET
    else:
        assert (tool_span.status.status_code, tool_span.status.description) == (
            StatusCode.ERROR,
            "tool_error",
        )
    # With capture_content, the same run records them: the test would see a leak.
    exporter.clear()
    await run(capture_content=True)
    (tool_span,) = [s for s in exporter.get_finished_spans() if s.name == f"execute_tool {name}"]
    assert MARKER in every_string_of(tool_span)


async def test_a_value_dumps_refuses_is_recorded_as_a_note_and_the_run_goes_on(
    autojump_clock: trio.abc.Clock,
) -> None:
    deep: Any = 1
    for _ in range(300):
        deep = [deep]

    async def odd(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text("ok", details=deep if args["deep"] else {"when": {1, 2}})

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    calls = faux.reply(
        faux.tool_call("odd", {"deep": True}, id="c1"),
        faux.tool_call("odd", {"deep": False}, id="c2"),
    )
    agent = Agent(faux.model([calls, "done"]), tools=[make_tool("odd", odd)])
    agent.subscribe(Tracing(provider, capture_content=True).listener)
    await agent.prompt("go")
    assert agent.state.messages[-1].text == "done"  # type: ignore[union-attr]
    notes = sorted(str(s.attributes["gen_ai.tool.call.result"]) for s in tool_spans(exporter))  # type: ignore[index]
    assert notes[0].startswith("[not recorded: Object of type set is not JSON serializable"), notes
    assert notes[1].startswith(
        "[not recorded: cannot write ToolResult.details as JSON: it is nested deeper than 256"
    ), notes


def test_importing_trio_agent_does_not_import_opentelemetry() -> None:
    code = "import sys, trio_agent; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout == "False\n"


async def test_a_failed_reply_records_its_error_kind_and_http_status() -> None:
    agent, exporter = traced([faux.error("rate limited", kind="rate_limit", http_status=429)])
    await agent.prompt("go")
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "rate_limit"
    assert (chat.attributes or {})["http.response.status_code"] == 429
