"""The connection figures: a chat's keep-alive, and a server's worth of agents in one pool.

- B9: a chat of 100 prompts over loopback TLS — one ``Agent`` on an
  ``openai_chat`` model pointed at an HTTPS loopback ``SSEServer`` (a
  ``trustme`` CA; the pool given ``verify=`` a client context that trusts
  it) sends 100 prompts one after the other, each answered by a short
  streamed text reply (20 deltas); time per prompt, and connections the
  server accepted. Floor: the same chat with a new client per prompt, as
  every run had before pools were shared (an ``open_pool(verify=...)`` around
  each prompt: a new TCP connection and TLS handshake each time). The ratio
  is ours / that baseline (below 1: faster).
- B10: a server's worth of agents — 1,000 ``Agent`` runs at once in one
  ``trio.run``, all through one pool (``open_pool(max_connections=1000,
  max_keepalive=100)``: the openai SDK's default limits) to one loopback
  HTTP server in another process (:mod:`benchmarks.b10_server`). Each run
  streams a tool-call reply (25 text deltas, then one call's arguments in 10
  pieces), runs the no-op tool, and streams the final text reply (25 deltas):
  two requests and 60 deltas per agent, OpenAI chat chunks as the API sends
  them, one HTTP chunk per SSE event. Twice: **bursty** (each stream's events
  as fast as the server writes them) and **paced** (one event per stream
  every 50 ms; an agent's two streams last at least 3.4 s). The figure is the
  client process's CPU time (``time.process_time``; the server's is not in
  it) per delta a listener received, end to end, in µs. Floor: the same
  exchanges, the same bytes, through the official ``openai`` SDK
  (``AsyncOpenAI(...).chat.completions.create(stream=True)`` on its own
  httpx fork, ``httpx2``, given the same limits) under ``asyncio.run``,
  counting the deltas its chunks carry; the ratio is ours / the SDK's. Each
  side runs in a process of its own (``python -m benchmarks.pool ours|sdk URL
  AGENTS``) against a server of its own, so that peak RSS (``ru_maxrss``) and
  file descriptors (before and after: back to where they were, or the figure
  fails) are that side's alone. Also reported: wall time, the connections the
  server accepted and the most open at once (never above the limit), the
  requests it answered (two per agent, or the figure fails).
  The replies, a side's measures and the SDK's side are in
  :mod:`benchmarks._b10`, which the SDK's process imports without trio_agent.
- B10x: B10 at 1,000, 5,000 and 10,000 agents, bursty and paced, the pool
  still 1,000 connections (runs beyond that wait for one). Run only when
  named (``python -m benchmarks B10x``): about 25 minutes on 2 cores; a side
  that has not finished after ``_TIME_LIMIT`` (600 s) is reported as not
  finished.

Every run of either side must end with its whole transcript (user, tool
call, tool result, the final text, in full) and every delta, or the figure
fails loudly.
"""

from __future__ import annotations

import gc
import json
import math
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from benchmarks._b10 import (
    _ARGUMENTS,
    _FINAL,
    _KEEPALIVE,
    _LIMIT,
    _MODEL,
    _PACE,
    _TEXT,
    _TIME_LIMIT,
    _measured,
    _Script,
    _Side,
    _text_reply,
    _words,
)
from benchmarks._common import Figure, alternating, figure
from trio_agent import (
    Agent,
    AgentEvent,
    AgentTool,
    AssistantMessage,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
)
from trio_agent.testing import ScriptedResponse, open_sse_server

# --- B9 -------------------------------------------------------------------------------------------


def _tls() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for 127.0.0.1 from a test CA, and a client
    context that trusts that CA."""
    import trustme

    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


def _b9_chat(prompts: int, deltas: int, pool_per_prompt: bool) -> tuple[float, int]:
    """Seconds per prompt of a chat of ``prompts`` prompts over loopback TLS, and the
    connections the server accepted: one pool for the chat, or a new one per prompt."""
    from trio_agent.providers import open_pool, openai_chat

    server_context, client_context = _tls()
    pieces = _words(deltas)
    body = _text_reply("chatcmpl-b9", pieces)
    expected = "".join(pieces)
    outcome = (0.0, 0)

    async def main() -> None:
        nonlocal outcome
        async with open_sse_server(ssl_context=server_context) as server:
            server.add(*(ScriptedResponse(body=body) for _ in range(prompts)))
            model = openai_chat.model(_MODEL, base_url=server.url + "/v1", provider="openai")
            agent = Agent(model, api_key="bench-key")
            gc.collect()
            start = time.perf_counter()
            if pool_per_prompt:
                for i in range(prompts):
                    async with open_pool(verify=client_context):
                        await agent.prompt(f"prompt {i}")
            else:
                async with open_pool(verify=client_context):
                    for i in range(prompts):
                        await agent.prompt(f"prompt {i}")
            elapsed = time.perf_counter() - start
            replies = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
            if len(replies) != prompts or any(
                reply.stop_reason != "stop" or reply.text != expected for reply in replies
            ):
                failed = next((r for r in replies if r.stop_reason != "stop"), None)
                raise RuntimeError(
                    f"B9: {len(replies)} replies for {prompts} prompts, not all in full"
                    + (f": {failed.error_message}" if failed is not None else "")
                )
            outcome = (elapsed / prompts, server.connections)

    trio.run(main)
    return outcome


def bench_b9(repeats: int, prompts: int = 100, deltas: int = 20) -> Figure:
    pooled_connections: list[int] = []
    fresh_connections: list[int] = []

    def measure(per_prompt: bool, connections: list[int]) -> Callable[[], float]:
        def one() -> float:
            seconds, opened = _b9_chat(prompts, deltas, per_prompt)
            connections.append(opened)
            return seconds * 1e3

        return one

    samples, floor_samples = alternating(
        repeats, measure(False, pooled_connections), measure(True, fresh_connections)
    )
    pooled, fresh = max(pooled_connections), max(fresh_connections)
    return figure(
        samples,
        floor_samples,
        "ms/prompt",
        lower_is_better=True,
        floor_title="a new client per prompt",
        connections=pooled,
        baseline_connections=fresh,
        detail=f"connections opened for {prompts} prompts: {pooled} (a new client per prompt: "
        f"{fresh})",
    )


# --- B10 ------------------------------------------------------------------------------------------

_ROOT = Path(__file__).resolve().parent.parent


def _b10_ours(url: str, agents: int, script: _Script) -> _Side:
    from trio_agent.providers import open_pool, openai_chat

    side = _Side()
    delta_types = frozenset({"text_delta", "toolcall_delta"})

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_update" and event.assistant_message_event.type in delta_types:
            side.deltas += 1

    async def noop(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        return ToolResult.text("ok")

    tool = AgentTool(
        name="noop",
        description="does nothing",
        parameters={"type": "object", "properties": {"note": {"type": "string"}}},
        execute=noop,
    )
    runs: list[Agent] = []

    with _measured(side):
        model = openai_chat.model(_MODEL, base_url=url + "/v1", provider="openai")

        async def main() -> None:
            for _ in range(agents):
                agent = Agent(model, tools=[tool], api_key="bench-key")
                agent.subscribe(listener)
                runs.append(agent)
            async with (
                open_pool(max_connections=_LIMIT, max_keepalive=_KEEPALIVE),
                trio.open_nursery() as nursery,
            ):
                for agent in runs:
                    nursery.start_soon(agent.prompt, "go")

        trio.run(main)

    for number, agent in enumerate(runs):
        messages = list(agent.state.messages)
        roles = [message.role for message in messages]
        problem = None
        if roles != ["user", "assistant", "toolResult", "assistant"]:
            errors = [
                m.error_message
                for m in messages
                if isinstance(m, AssistantMessage) and m.error_message
            ]
            problem = f"the transcript's roles are {roles} ({'; '.join(errors)})"
        else:
            call, result, final = messages[1], messages[2], messages[3]
            assert isinstance(call, AssistantMessage)
            assert isinstance(final, AssistantMessage)
            assert isinstance(result, ToolResultMessage)
            calls = call.tool_calls
            if (
                call.stop_reason != "toolUse"
                or call.text != script.preamble
                or len(calls) != 1
                or calls[0].arguments != script.arguments
                or result.is_error
                or final.stop_reason != "stop"
                or final.text != script.final
            ):
                errors = [m.error_message for m in (call, final) if m.error_message]
                problem = f"the transcript is not the one scripted ({'; '.join(errors)})"
        if problem is not None:
            raise RuntimeError(f"B10: agent {number}: {problem}")
    if side.deltas != agents * script.deltas:
        raise RuntimeError(
            f"B10: listeners received {side.deltas} deltas, not {agents * script.deltas}"
        )
    return side


def _b10_run(kind: str, agents: int, pace: float, limit: float = _TIME_LIMIT) -> _Side | None:
    """One side (``ours`` or ``sdk``) of B10 at ``agents`` agents, each in a process of its
    own, against a :mod:`benchmarks.b10_server` in another; None if it did not finish
    within ``limit`` seconds."""
    import subprocess
    import sys

    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.b10_server", "--text", str(_TEXT), "--arguments",
         str(_ARGUMENTS), "--final", str(_FINAL), "--pace", str(pace)],
        cwd=_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdin is not None
    assert server.stdout is not None
    try:
        url = f"http://127.0.0.1:{int(server.stdout.readline())}"
        try:
            client = subprocess.run(
                [sys.executable, "-m", "benchmarks._b10", kind, url, str(agents)],
                cwd=_ROOT, capture_output=True, text=True, timeout=limit, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None
        if client.returncode != 0:
            raise RuntimeError(f"B10 ({kind}, {agents} agents): {client.stderr[-3000:]}")
        side = _Side(**json.loads(client.stdout.splitlines()[-1]))
        server.stdin.close()
        counts = json.loads(server.stdout.readline())
        side.connections = counts["connections"]
        side.peak_connections = counts["peak"]
        side.requests = counts["requests"]
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()
    if side.peak_connections > _LIMIT:
        raise RuntimeError(f"B10: {side.peak_connections} connections open at once (> {_LIMIT})")
    if side.requests != 2 * agents:
        raise RuntimeError(f"B10: {side.requests} requests for {agents} agents, not {2 * agents}")
    return side


def _scale(agents: int, mode: str, repeats: int, limit: float) -> Figure:
    """B10 at ``agents`` agents, ``mode`` bursty or paced: CPU per delta, ours beside the
    SDK's, with the wall time and the counts."""
    pace = _PACE if mode == "paced" else 0.0
    ours: list[_Side] = []
    sdk: list[_Side] = []
    unfinished = {"ours": False, "sdk": False}

    def run(kind: str, sides: list[_Side]) -> Callable[[], float]:
        def one() -> float:
            side = _b10_run(kind, agents, pace, limit)
            if side is None:
                unfinished[kind] = True
                return math.nan
            sides.append(side)
            return side.cpu_us_per_delta

        return one

    samples, floor_samples = alternating(repeats, run("ours", ours), run("sdk", sdk))

    def described(name: str, sides: list[_Side]) -> str:
        if not sides:
            return f"{name}: did not finish in {limit:.0f} s"
        side = sides[0]
        return (
            f"{name}: {side.wall:.1f} s wall, {side.connections:,} connections opened (at most "
            f"{side.peak_connections:,} open), peak RSS {side.rss_mib:.0f} MiB, fds "
            f"{side.fds_before} before, {side.fds_after} after"
        )

    deltas = agents * (_TEXT + _ARGUMENTS + _FINAL)
    return figure(
        samples,
        floor_samples,
        "us/delta",
        lower_is_better=True,
        title=f"{agents:,} agents, {mode}",
        floor_title="openai SDK (asyncio)",
        agents=agents,
        mode=mode,
        deltas=deltas,
        finished=not unfinished["ours"],
        sdk_finished=not unfinished["sdk"],
        sides={"ours": [attrs.asdict(s) for s in ours], "sdk": [attrs.asdict(s) for s in sdk]},
        detail=f"{deltas:,} deltas; {described('ours', ours)}; {described('SDK', sdk)}",
    )


def _b10(repeats: int, scales: tuple[int, ...], limit: float = _TIME_LIMIT) -> Figure:
    figures = {
        f"{agents}_{mode}": _scale(agents, mode, repeats, limit)
        for agents in scales
        for mode in ("bursty", "paced")
    }
    first = figures.pop(f"{scales[0]}_bursty")
    return {**first, "also": figures}


def bench_b10(repeats: int) -> Figure:
    """B10 at 1,000 agents, bursty (the figure) and paced (``also``)."""
    return _b10(repeats, (1000,))


def bench_b10x(repeats: int) -> Figure:
    """B10 at 1,000, 5,000 and 10,000 agents, bursty and paced."""
    return _b10(repeats, (1000, 5000, 10000))
