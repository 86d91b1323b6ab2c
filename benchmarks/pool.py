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

import asyncio
import gc
import itertools
import json
import math
import os
import resource
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

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

_MODEL = "gpt-4.1"
# B10's pool limits, on both sides: the openai SDK's defaults (one connection per agent, 100
# kept idle). Below one per agent, runs queue for a connection, and httpcore's pool
# (1.0.9) then costs O(queued requests x connections) per request and per release: with
# 1,000 runs on 100 connections that bookkeeping is most of the CPU, the whole grows
# quadratically, and a run queued longer than ``Timeouts.connect`` (the pool wait's bound,
# 10 s) fails with PoolTimeout.
_LIMIT = 1000
_KEEPALIVE = 100

# --- OpenAI chat SSE bodies -----------------------------------------------------------------------


def _chunk(reply_id: str, delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": reply_id,
        "object": "chat.completion.chunk",
        "created": 1736251300,
        "model": "gpt-4.1-2025-04-14",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"


def _ending(reply_id: str, finish: str, completion_tokens: int) -> list[str]:
    """A reply's last SSE events: the finish, the usage, ``[DONE]``."""
    usage = {
        "id": reply_id,
        "object": "chat.completion.chunk",
        "created": 1736251300,
        "model": "gpt-4.1-2025-04-14",
        "system_fingerprint": "fp_1",
        "choices": [],
        "usage": {
            "prompt_tokens": 60,
            "completion_tokens": completion_tokens,
            "total_tokens": 60 + completion_tokens,
        },
    }
    return [
        _chunk(reply_id, {}, finish),
        f"data: {json.dumps(usage, separators=(',', ':'))}\n\n",
        "data: [DONE]\n\n",
    ]


_WORDS = ("Streaming ", "tokens ", "from ", "a ", "model ", "over ", "loopback, ", "fast. ")


def _words(count: int) -> list[str]:
    return [_WORDS[i % len(_WORDS)] for i in range(count)]


def _text_events(reply_id: str, pieces: list[str]) -> list[str]:
    """A streamed text reply's SSE events: the role, one chunk per piece, the finish, the
    usage, the end."""
    out = [_chunk(reply_id, {"role": "assistant", "content": "", "refusal": None})]
    out += [_chunk(reply_id, {"content": piece}) for piece in pieces]
    out += _ending(reply_id, "stop", len(pieces))
    return out


def _text_reply(reply_id: str, pieces: list[str]) -> bytes:
    """A streamed text reply (:func:`_text_events`) as one body."""
    return "".join(_text_events(reply_id, pieces)).encode()


def _tool_events(reply_id: str, pieces: list[str], arguments: list[str], call_id: str) -> list[str]:
    """A streamed reply's SSE events: some text, then one call of ``noop`` whose arguments
    come in ``arguments`` pieces (the first chunk of the call names it, with no arguments
    yet)."""
    out = [_chunk(reply_id, {"role": "assistant", "content": "", "refusal": None})]
    out += [_chunk(reply_id, {"content": piece}) for piece in pieces]
    header = {"index": 0, "id": call_id, "type": "function"}
    out.append(
        _chunk(
            reply_id, {"tool_calls": [{**header, "function": {"name": "noop", "arguments": ""}}]}
        )
    )
    out += [
        _chunk(reply_id, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in arguments
    ]
    out += _ending(reply_id, "tool_calls", len(pieces) + len(arguments))
    return out


def _argument_pieces(count: int) -> tuple[list[str], dict[str, Any]]:
    """A tool call's arguments as JSON cut in ``count`` pieces, and the arguments."""
    arguments = {"note": "".join(_words(count - 2)).strip()}
    text = json.dumps(arguments)
    cuts = [len(text) * i // count for i in range(count + 1)]
    pieces = [text[start:end] for start, end in itertools.pairwise(cuts)]
    if len(pieces) != count or not all(pieces):
        raise AssertionError(f"B10: {len(pieces)} argument pieces, not {count}")
    return pieces, arguments


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

# Per agent: 25 text deltas, then a call whose arguments come in 10 pieces; after the tool,
# a final reply of 25 text deltas. Paced at 50 ms an event, an agent's two streams last at
# least 3.4 s (69 events), so 10,000 agents through 1,000 connections take at least 35 s.
_TEXT, _ARGUMENTS, _FINAL = 25, 10, 25
_PACE = 0.05
# A side that has not finished after this long is stopped and reported as such.
_TIME_LIMIT = 600.0
_ROOT = Path(__file__).resolve().parent.parent


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@attrs.define
class _Side:
    """One side's measures of one B10 run (the client process's; the server's counts)."""

    deltas: int = 0
    cpu: float = 0.0
    wall: float = 0.0
    fds_before: int = 0
    fds_after: int = 0
    rss_mib: float = 0.0
    connections: int = 0
    peak_connections: int = 0
    requests: int = 0

    @property
    def cpu_us_per_delta(self) -> float:
        return self.cpu / self.deltas * 1e6


@contextmanager
def _measured(side: _Side) -> Iterator[None]:
    """Measure the block's CPU time (this process's: the server is another), wall time,
    peak RSS and file descriptors before and after (which must match)."""
    gc.collect()
    side.fds_before = _fds()
    cpu, wall = time.process_time(), time.perf_counter()
    yield
    side.wall = time.perf_counter() - wall
    side.cpu = time.process_time() - cpu
    side.rss_mib = _rss_mib()
    gc.collect()
    side.fds_after = _fds()
    if side.fds_after != side.fds_before:
        raise RuntimeError(
            f"B10: {side.fds_after} file descriptors after the run, {side.fds_before} before"
        )


class _Script:
    """B10's replies, and what every run must end with."""

    def __init__(self, text_deltas: int, argument_deltas: int, final_deltas: int) -> None:
        words = _words(text_deltas)
        self.preamble = "".join(words)
        self.argument_pieces, self.arguments = _argument_pieces(argument_deltas)
        final = _words(final_deltas)
        self.final = "".join(final)
        self.tool_call = _tool_events("chatcmpl-b10a", words, self.argument_pieces, "call_b10")
        self.final_reply = _text_events("chatcmpl-b10b", final)
        self.deltas = text_deltas + argument_deltas + final_deltas  # per agent


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


def _b10_sdk(url: str, agents: int, script: _Script) -> _Side:
    import httpx2  # the SDK's own fork of httpx
    import openai

    side = _Side()
    tools: Any = [
        {
            "type": "function",
            "function": {
                "name": "noop",
                "description": "does nothing",
                "parameters": {"type": "object", "properties": {"note": {"type": "string"}}},
            },
        }
    ]
    finished = 0

    async def exchange(client: openai.AsyncOpenAI) -> None:
        nonlocal finished
        messages: list[Any] = [{"role": "user", "content": "go"}]
        stream = await client.chat.completions.create(
            model=_MODEL, messages=messages, tools=tools, stream=True
        )
        text: list[str] = []
        arguments: list[str] = []
        call_id = name = ""
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    side.deltas += 1
                    text.append(delta.content)
                for call in delta.tool_calls or ():
                    call_id = call.id or call_id
                    if call.function is not None:
                        name = call.function.name or name
                        if call.function.arguments:
                            side.deltas += 1
                            arguments.append(call.function.arguments)
        if "".join(text) != script.preamble or json.loads("".join(arguments)) != script.arguments:
            raise RuntimeError("B10 (SDK): the tool-call reply did not arrive in full")
        messages.append(
            {
                "role": "assistant",
                "content": "".join(text),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": "".join(arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "ok"})
        stream = await client.chat.completions.create(
            model=_MODEL, messages=messages, tools=tools, stream=True
        )
        text = []
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    side.deltas += 1
                    text.append(choice.delta.content)
        if "".join(text) != script.final:
            raise RuntimeError("B10 (SDK): the final reply did not arrive in full")
        finished += 1

    async def main() -> None:
        limits = httpx2.Limits(max_connections=_LIMIT, max_keepalive_connections=_KEEPALIVE)
        # A connect timeout of 60 s, not the SDK's 5: a thousand connects at once to one
        # busy loopback server wait their turn in its accept queue.
        timeout = httpx2.Timeout(600, connect=60)
        http_client = openai.DefaultAsyncHttpxClient(limits=limits, timeout=timeout)
        async with (
            http_client,
            openai.AsyncOpenAI(
                api_key="bench-key", base_url=url + "/v1", http_client=http_client, max_retries=0
            ) as client,
            asyncio.TaskGroup() as group,
        ):
            for _ in range(agents):
                group.create_task(exchange(client))

    with _measured(side):
        asyncio.run(main())
    if finished != agents or side.deltas != agents * script.deltas:
        raise RuntimeError(
            f"B10 (SDK): {finished} exchanges of {agents} in full, {side.deltas} deltas"
        )
    return side


_CLIENTS: dict[str, Callable[[str, int, _Script], _Side]] = {"ours": _b10_ours, "sdk": _b10_sdk}


def client_main(argv: list[str] | None = None) -> None:
    """One side of one B10 run in this process, its measures printed as a JSON line:
    ``python -m benchmarks.pool ours|sdk URL AGENTS``."""
    import sys

    kind, url, agents = argv if argv is not None else sys.argv[1:]
    side = _CLIENTS[kind](url, int(agents), _Script(_TEXT, _ARGUMENTS, _FINAL))
    print(json.dumps(attrs.asdict(side)), flush=True)


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
                [sys.executable, "-m", "benchmarks.pool", kind, url, str(agents)],
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


if __name__ == "__main__":
    client_main()
