"""trio_agent.mcp against real MCP servers: tests/mcp_server.py (the SDK's own server class),
over stdio as a subprocess and over streamable HTTP on loopback.

Every test that does real I/O is bounded by ``fail_after``; no test sleeps to wait for a
server (the HTTP one says ``ready PORT`` once its socket listens). After each stdio test the
server process has exited (checked by its pid).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import mcp.types as mcp_types
import pytest
import trio
from mcp import ClientSession

from trio_agent import (
    Agent,
    AgentEvent,
    AgentTool,
    ToolExecutionEnd,
    ToolResult,
    ToolResultMessage,
)
from trio_agent.mcp import McpServer, open_server
from trio_agent.providers import faux
from trio_agent.testing import Trial, assert_cancel_safe

SERVER = str(Path(__file__).with_name("mcp_server.py"))
# The SDK's streamable HTTP transport cancels its GET event stream when it closes and leaves
# httpx2's stream generators to the garbage collector, which Trio reports; the SDK's, not ours.
pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.:ResourceWarning")
BOUND = 15  # seconds: every real-I/O test ends well before this


def results(agent: Agent) -> list[ToolResultMessage]:
    return [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]


def text(message: ToolResultMessage | ToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in message.content)


async def server_pid(server: McpServer) -> int:
    tool = next(tool for tool in server.tools if tool.name.endswith("pid"))
    return int(text(await tool.execute("p", {}, lambda _: None)))


def assert_exited(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def run_agent(server: McpServer, call: faux.Reply, *, then: str = "done") -> Agent:
    agent = Agent(faux.model([call, then]), tools=server.tools)
    await agent.prompt("go")
    return agent


def add_call() -> faux.Reply:
    return faux.reply(faux.tool_call("add", {"a": 2, "b": 40}, id="t1"))


async def test_a_stdio_servers_tool_runs_through_an_agent() -> None:
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER]) as server:
            pid = await server_pid(server)
            agent = await run_agent(server, add_call())
    [result] = results(agent)
    assert (text(result), result.is_error) == ("42", False)
    assert_exited(pid)


@pytest.fixture
async def http_url() -> AsyncIterator[str]:
    with trio.fail_after(BOUND):
        process = await trio.lowlevel.open_process(
            [sys.executable, SERVER, "http"], stdout=-1, stderr=-1
        )
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, "the HTTP server exited before it was ready"
            line += chunk
    port = int(line.split()[1])
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        # Shielded: the server must be reaped even when the test was cancelled.
        with trio.fail_after(BOUND, shield=True):
            await process.wait()


async def test_a_streamable_http_servers_tool_runs_through_an_agent(http_url: str) -> None:
    with trio.fail_after(BOUND):
        async with open_server(url=http_url, headers={"X-Test": "1"}) as server:
            agent = await run_agent(server, add_call())
    [result] = results(agent)
    assert (text(result), result.is_error) == ("42", False)


async def test_tools_carry_the_prefix_and_the_include_filter_applies() -> None:
    with trio.fail_after(BOUND):
        async with open_server(
            sys.executable, args=[SERVER], prefix="t_", include={"add", "pid"}
        ) as server:
            names = sorted(tool.name for tool in server.tools)
            add = next(tool for tool in server.tools if tool.name == "t_add")
            pid = await server_pid(server)
    assert names == ["t_add", "t_pid"]
    assert add.parameters["required"] == ["a", "b"]
    assert_exited(pid)


async def test_arguments_are_validated_against_the_servers_schema() -> None:
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER], include=lambda n: n == "add") as s:
            call = faux.reply(faux.tool_call("add", {"a": "two", "b": 40}, id="t1"))
            agent = await run_agent(s, call)
    [result] = results(agent)
    assert result.is_error
    assert text(result).startswith('Validation failed for tool "add"')


async def test_an_error_result_of_the_server_is_an_error_result() -> None:
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER]) as server:
            agent = await run_agent(server, faux.reply(faux.tool_call("fail", {}, id="t1")))
    [result] = results(agent)
    assert result.is_error
    assert "the tool failed on purpose" in text(result)


async def test_structured_content_and_is_error_of_the_server_reach_the_result() -> None:
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER], include={"spend"}) as server:
            [spend] = server.tools
            calls = faux.reply(
                faux.tool_call("spend", {"amount": 3}, id="ok"),
                faux.tool_call("spend", {"amount": 12}, id="over"),
            )
            agent = Agent(faux.model([calls, "done"]), tools=server.tools)
            ends: dict[str, ToolExecutionEnd] = {}

            async def listen(event: AgentEvent) -> None:
                if isinstance(event, ToolExecutionEnd):
                    ends[event.tool_call_id] = event

            agent.subscribe(listen)
            await agent.prompt("go")
    assert spend.output_schema is not None
    assert spend.output_schema["properties"]["left"]["type"] == "integer"
    assert ends["ok"].result.structured_content == {"left": 7}
    assert ends["ok"].is_error is False
    over = ends["over"]
    assert (text(over.result), over.is_error) == ("quota exceeded", True)
    assert over.result.structured_content == over.result.details == {"left": -2}
    assert [(text(r), r.is_error) for r in results(agent)] == [
        ("7 left", False),
        ("quota exceeded", True),
    ]


async def test_progress_is_reported_and_an_abort_during_a_call_ends_the_run_promptly() -> None:
    updates: list[str] = []
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER]) as server:
            pid = await server_pid(server)
            call = faux.reply(faux.tool_call("slow", {"seconds": 60}, id="t1"))
            agent = Agent(faux.model([call, "never"]), tools=server.tools)

            async def listener(event: AgentEvent) -> None:
                if event.type == "tool_execution_update":
                    updates.append(text(event.partial_result))
                    agent.abort()

            agent.subscribe(listener)
            with trio.fail_after(5):
                await agent.prompt("go")
    [result] = results(agent)
    assert (text(result), result.is_error) == ("Operation aborted", True)
    assert updates[:1] == ["step 0"]
    assert_exited(pid)


async def test_a_server_that_dies_mid_call_gives_an_error_result_and_the_run_goes_on() -> None:
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER], include={"crash", "pid"}) as server:
            pid = await server_pid(server)
            agent = await run_agent(server, faux.reply(faux.tool_call("crash", {}, id="t1")))
            with pytest.raises(Exception, match="Connection closed") as later:
                await server.tools[1].execute("t2", {}, lambda _: None)
    [result] = results(agent)
    assert result.is_error
    assert (
        text(result)
        == f"MCP server {sys.executable!r} failed to run tool 'crash': Connection closed"
    )
    assert agent.state.messages[-1].content[0].text == "done"  # type: ignore[union-attr]
    assert type(later.value) is Exception
    assert_exited(pid)


async def test_list_changed_refreshes_the_tools_and_calls_back() -> None:
    seen: list[tuple[AgentTool, ...]] = []
    changed = trio.Event()

    def on_change(tools: tuple[AgentTool, ...]) -> None:
        seen.append(tools)
        changed.set()

    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER]) as server:
            server.on_tools_changed(on_change)
            assert "multiply" not in {tool.name for tool in server.tools}
            agent = await run_agent(server, faux.reply(faux.tool_call("grow", {}, id="t1")))
            await changed.wait()
            agent.set_tools(server.tools)
            call = faux.reply(faux.tool_call("multiply", {"a": 6, "b": 7}, id="t2"))
            agent2 = await run_agent(server, call)
    assert "multiply" in {tool.name for tool in seen[0]}
    assert seen[0] == server.tools
    assert text(results(agent2)[0]) == "42"


async def test_a_command_that_does_not_exist_is_one_oserror_naming_it() -> None:
    with trio.fail_after(BOUND), pytest.raises(OSError, match="no-such-mcp-server-xyz"):
        async with open_server("no-such-mcp-server-xyz"):
            pass  # pragma: no cover


async def test_a_server_that_exits_at_once_is_one_runtimeerror() -> None:
    with trio.fail_after(BOUND), pytest.raises(RuntimeError, match="MCP server") as info:
        async with open_server(sys.executable, args=["-c", "pass"]):
            pass  # pragma: no cover
    assert not isinstance(info.value, BaseExceptionGroup)


async def test_the_blocks_own_exception_escapes_as_itself() -> None:
    error = ValueError("mine")
    pids: list[int] = []

    async def body() -> None:
        async with open_server(sys.executable, args=[SERVER]) as server:
            pids.append(await server_pid(server))
            raise error

    with trio.fail_after(BOUND), pytest.raises(ValueError, match="mine") as info:
        await body()
    assert info.value is error
    assert_exited(pids[0])


async def test_a_tool_whose_schema_is_invalid_is_skipped_not_fatal() -> None:
    class Listing:
        async def list_tools(self, *, params: object = None) -> mcp_types.ListToolsResult:
            return mcp_types.ListToolsResult(
                tools=[
                    mcp_types.Tool(name="bad", input_schema={"type": "object", "properties": 3}),
                    mcp_types.Tool(name="good", input_schema={"type": "object"}),
                ]
            )

    server = McpServer(cast(ClientSession, Listing()), name="fake", prefix="", include=None)
    tools = await server.refresh()
    assert ([tool.name for tool in tools], server.skipped) == (["good"], ("bad",))


async def test_cancelling_the_block_closes_the_server() -> None:
    with trio.fail_after(BOUND):
        with trio.CancelScope() as scope:
            async with open_server(sys.executable, args=[SERVER]) as server:
                pid = await server_pid(server)
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
    assert_exited(pid)


def test_exactly_one_of_command_and_url() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        trio.run(_open_with_both)


async def _open_with_both() -> None:
    async with open_server("x", url="http://127.0.0.1:1/mcp"):
        pass  # pragma: no cover


async def test_an_agent_using_mcp_tools_is_cancel_safe() -> None:
    # One server for every trial: a call cut short by a cancellation leaves the session
    # usable for the next trial (the SDK tells the server the request is cancelled).
    async with open_server(sys.executable, args=[SERVER]) as server:
        pid = await server_pid(server)

        async def scenario(trial: Trial) -> None:
            agent = trial.watch(Agent(faux.model([add_call(), "done"]), tools=server.tools))
            await agent.prompt("go")

        with trio.fail_after(4 * BOUND):
            report = await assert_cancel_safe(scenario, max_points=24, grace=BOUND)
        assert report.points > 10
        with trio.fail_after(BOUND):  # the session still works after every trial
            agent = await run_agent(server, add_call())
        assert text(results(agent)[0]) == "42"
    assert_exited(pid)


async def test_a_result_too_large_is_cut_and_says_so() -> None:
    with trio.fail_after(BOUND):
        async with open_server(sys.executable, args=[SERVER]) as server:
            call = faux.reply(faux.tool_call("big", {"size": 250_000}, id="b1"))
            agent = await run_agent(server, call)
    [result] = results(agent)
    note = "\n[cut: 150,031 more characters]"  # 31 characters, inside the 100,000
    assert text(result) == "x" * (100_000 - len(note)) + note
