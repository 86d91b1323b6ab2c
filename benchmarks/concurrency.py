"""The figures of many tasks asleep: abort latency, and the memory and abort of concurrent runs.

- B6: abort latency — one turn of 1,000 parallel tool calls, each sleeping
  forever; once all are in their tool and every task is blocked,
  ``Agent.abort()`` (what users call), and the wall time until ``prompt()``
  has returned. Also run once on ``trio.testing.MockClock(autojump_threshold=0)``
  to report the virtual time the abort took (0: nothing in it waits on the
  clock). Floor: cancelling a nursery of 1,000 tasks blocked in
  ``trio.sleep_forever()``, timed the same way.
- B6m (a sub-figure of B6): abort during an MCP call — one call of the
  example server's slow tool (docs/examples/mcp_server.py, ``wait``, over
  stdio: a real subprocess, started once for all the samples); once the
  request is out and every task is blocked, ``Agent.abort()`` and the wall
  time until ``prompt()`` has returned (the SDK tells the server with
  ``notifications/cancelled`` on the way). Its floor: the same abort of one
  native sleeping tool, B6's tool. Only when ``trio_agent.mcp`` imports (the
  ``mcp`` extra); else B6's detail says "mcp not installed".
- B7: concurrent runs — 10,000 agents (``Agent``) in one ``trio.run``, each
  ``prompt()`` in a task of one nursery, each run in a tool that sleeps
  forever. Memory per run: memory traced by ``tracemalloc`` (started before
  the agents are made, so an agent's own objects count) with every run in
  its tool, divided by 10,000, in KiB. Abort all: ``abort()`` on every agent
  (tracing stopped), wall time until the nursery has exited. Floor: 10,000
  bare tasks in ``trio.sleep_forever()`` (KiB per task; one cancel of their
  nursery, until it has exited).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from benchmarks._common import Figure, alternating, figure, noop_listener
from trio_agent import Agent, AgentTool, ToolResult, ToolResultMessage, ToolUpdate
from trio_agent.providers import faux

_ROOT = str(Path(__file__).resolve().parent.parent) + "/"  # shortens file names in B7's sites
_MCP_SERVER = Path(__file__).resolve().parent.parent / "docs" / "examples" / "mcp_server.py"


async def _settled(entered: trio.Event) -> None:
    """Wait until ``entered`` is set, then until every other task is blocked."""
    await entered.wait()
    await trio.testing.wait_all_tasks_blocked()


def _sleepers(expected: int) -> tuple[Callable[[], Awaitable[None]], trio.Event]:
    """An async function that sleeps forever, and an event set once ``expected``
    calls are in it (made inside ``trio.run``)."""
    entered = 0
    all_in = trio.Event()

    async def sleep() -> None:
        nonlocal entered
        entered += 1
        if entered == expected:
            all_in.set()
        await trio.sleep_forever()

    return sleep, all_in


def _sleeping_tool(expected: int) -> tuple[AgentTool, trio.Event]:
    """A tool that sleeps forever, and the event set once ``expected`` calls are in it."""
    sleep, all_in = _sleepers(expected)

    async def execute(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        await sleep()
        raise AssertionError("unreachable: the tool sleeps until cancelled")

    tool = AgentTool(
        name="sleep",
        description="sleeps until cancelled",
        parameters={"type": "object", "properties": {}},
        execute=execute,
    )
    return tool, all_in


async def _cancel_sleepers(count: int, clock: Callable[[], float]) -> float:
    """Time from cancelling a nursery of ``count`` tasks in ``sleep_forever`` until it exits."""
    sleep, all_in = _sleepers(count)
    scope = trio.CancelScope()
    ended = math.nan

    async def hold() -> None:
        nonlocal ended
        with scope:
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(sleep)
        ended = clock()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold)
        await _settled(all_in)
        start = clock()
        scope.cancel()
    return ended - start


def _run(fn: Callable[[], Awaitable[float]], clock: trio.abc.Clock | None = None) -> float:
    """``trio.run(fn)``, after a collection; what ``fn`` returns."""
    result = math.nan

    async def main() -> None:
        nonlocal result
        result = await fn()

    gc.collect()
    trio.run(main, clock=clock)
    return result


# --- figures --------------------------------------------------------------------------------------


async def _b6_abort(calls: int, clock: Callable[[], float]) -> float:
    """Time from ``Agent.abort()`` with ``calls`` tools asleep until ``prompt()`` returned."""
    tool, all_in = _sleeping_tool(calls)
    reply = faux.reply(*(faux.tool_call("sleep", {}, id=f"t{i}") for i in range(calls)))
    agent = Agent(faux.model([reply]), tools=[tool])
    agent.subscribe(noop_listener)
    ended = math.nan

    async def run() -> None:
        nonlocal ended
        await agent.prompt("go")
        ended = clock()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await _settled(all_in)
        start = clock()
        agent.abort()
    results = sum(message.role == "toolResult" for message in agent.state.messages)
    if results != calls:
        raise RuntimeError(f"B6: the aborted run left {results} tool results for {calls} calls")
    return ended - start


async def _abort_one(agent: Agent, called: trio.Event, settle: float) -> float:
    """Seconds from ``agent.abort()``, once ``called`` is set (and ``settle`` seconds have
    passed, for a subprocess to read the request) and every task is blocked, until
    ``prompt()`` has returned with its one call's result."""
    agent.subscribe(noop_listener)
    ended = math.nan

    async def run() -> None:
        nonlocal ended
        await agent.prompt("go")
        ended = time.perf_counter()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await called.wait()
        await trio.sleep(settle)
        await trio.testing.wait_all_tasks_blocked()
        start = time.perf_counter()
        agent.abort()
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    if len(results) != 1 or not results[0].is_error:
        raise RuntimeError(f"B6m: the aborted run left {results!r}, not one error result")
    return ended - start


def _signalling(tool: AgentTool) -> tuple[AgentTool, trio.Event]:
    """``tool``, and an event set when a call of it starts."""
    called = trio.Event()
    remote = tool.execute

    async def execute(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        called.set()
        return await remote(call_id, args, on_update)

    signalling = AgentTool(
        name=tool.name, description=tool.description, parameters=tool.parameters, execute=execute
    )
    return signalling, called


def _b6m_samples(repeats: int, settle: float = 0.05) -> tuple[list[float], list[float]]:
    """Milliseconds to abort a run in one MCP call (the example server's ``wait``, over
    stdio), and in one native sleeping tool, taken in turn; one server for all."""
    from trio_agent import mcp

    mcp_samples: list[float] = []
    native_samples: list[float] = []
    reply = faux.reply(faux.tool_call("wait", {"seconds": 3600}, id="w"))
    native_reply = faux.reply(faux.tool_call("sleep", {}, id="t"))

    async def main() -> None:
        async with mcp.open_server(sys.executable, args=[str(_MCP_SERVER)]) as server:
            (wait,) = [tool for tool in server.tools if tool.name == "wait"]
            for _ in range(repeats):
                tool, called = _signalling(wait)
                agent = Agent(faux.model([reply]), tools=[tool])
                gc.collect()
                mcp_samples.append(await _abort_one(agent, called, settle) * 1e3)
                native, all_in = _sleeping_tool(1)
                gc.collect()
                native_agent = Agent(faux.model([native_reply]), tools=[native])
                native_samples.append(await _abort_one(native_agent, all_in, settle) * 1e3)

    trio.run(main)
    return mcp_samples, native_samples


def bench_b6(repeats: int, calls: int = 1000) -> Figure:
    clock = time.perf_counter
    samples, floor_samples = alternating(
        repeats,
        lambda: _run(lambda: _b6_abort(calls, clock)) * 1e3,
        lambda: _run(lambda: _cancel_sleepers(calls, clock)) * 1e3,
    )
    virtual = _run(
        lambda: _b6_abort(calls, trio.current_time),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    detail = f"virtual time from abort to return (MockClock, autojump 0): {virtual:g} s"
    also: dict[str, Figure] = {}
    if importlib.util.find_spec("mcp") is None:
        detail += "; B6m, abort during an MCP call: mcp not installed"
    else:
        with contextlib.suppress(ImportError):
            import trio_agent.mcp  # noqa: F401  (the extra, whole)

            mcp_samples, native_samples = _b6m_samples(repeats)
            also["mcp"] = figure(
                mcp_samples,
                native_samples,
                "ms",
                lower_is_better=True,
                title="B6m: abort during one MCP call (example server, stdio)",
                floor_title="one native sleeping tool",
            )
        if not also:
            detail += "; B6m, abort during an MCP call: mcp not installed"
    return figure(
        samples,
        floor_samples,
        "ms",
        lower_is_better=True,
        virtual_s=virtual,
        also=also,
        detail=detail,
    )


def _b7_agents(count: int, top: int) -> tuple[float, float, float, list[str]]:
    """KiB per idle agent, KiB per agent mid-run, seconds to abort all, top allocation sites."""
    reply = faux.reply(faux.tool_call("sleep", {}, id="t"))
    model = faux.model([reply] * count)  # one model for all, as with a real provider
    outcome: tuple[float, float, float, list[str]] = (math.nan, math.nan, math.nan, [])

    async def main() -> None:
        nonlocal outcome
        tool, all_in = _sleeping_tool(count)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            agents = [Agent(model, tools=[tool]) for _ in range(count)]
            gc.collect()
            idle = tracemalloc.get_traced_memory()[0] - base
            async with trio.open_nursery() as nursery:
                for agent in agents:
                    nursery.start_soon(agent.prompt, "go")
                await _settled(all_in)
                gc.collect()
                running = tracemalloc.get_traced_memory()[0] - base
                sites: list[str] = []
                if top:
                    stats = tracemalloc.take_snapshot().statistics("lineno")
                    for stat in stats[:top]:
                        frame = stat.traceback[0]
                        where = frame.filename.replace(_ROOT, "")
                        if "/site-packages/" in where:
                            where = where.split("/site-packages/", 1)[1]
                        sites.append(f"{where}:{frame.lineno} {stat.size / count:.0f} B")
                tracemalloc.stop()
                gc.collect()
                start = time.perf_counter()
                for agent in agents:
                    agent.abort()
            elapsed = time.perf_counter() - start
        finally:
            tracemalloc.stop()
        if any(agent.state.is_streaming for agent in agents):
            raise RuntimeError("B7: a run was still active after the nursery exited")
        outcome = (idle / count / 1024, running / count / 1024, elapsed, sites)

    trio.run(main)
    return outcome


def _b7_floor(count: int) -> tuple[float, float]:
    """KiB per bare task in ``sleep_forever``, and seconds to cancel them all."""
    outcome = (math.nan, math.nan)

    async def main() -> None:
        nonlocal outcome
        sleep, all_in = _sleepers(count)
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(sleep)
                await _settled(all_in)
                gc.collect()
                used = tracemalloc.get_traced_memory()[0] - base
                tracemalloc.stop()
                gc.collect()
                start = time.perf_counter()
                nursery.cancel_scope.cancel()
            elapsed = time.perf_counter() - start
        finally:
            tracemalloc.stop()
        outcome = (used / count / 1024, elapsed)

    trio.run(main)
    return outcome


def bench_b7(repeats: int, agents: int = 10_000, top: int = 5) -> Figure:
    runs, floors = [], []
    for i in range(repeats):  # in turn, as alternating takes them
        runs.append(_b7_agents(agents, top if i == 0 else 0))
        floors.append(_b7_floor(agents))
    abort_all = figure(
        [elapsed * 1e3 for _, _, elapsed, _ in runs],
        [elapsed * 1e3 for _, elapsed in floors],
        "ms",
        lower_is_better=True,
        title=f"abort all {agents:,}",
    )
    idle = statistics.median(idle for idle, _, _, _ in runs)
    sites = runs[0][3]
    return figure(
        [running for _, running, _, _ in runs],
        [used for used, _ in floors],
        "KiB/run",
        lower_is_better=True,
        also={"abort_all": abort_all},
        idle_agent_kib=idle,
        top_sites=sites,
        detail=(
            f"of which the idle Agent: {idle:.1f} KiB; top allocation sites per run: "
            + "; ".join(sites)
        ),
    )
