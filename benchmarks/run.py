"""The loop's own cost, beside the cost of bare Trio, measured in the same run.

    python -m benchmarks            # a table
    python -m benchmarks --json     # one JSON object keyed by figure id
    python benchmarks/run.py B1     # only some figures

Every figure runs on the scripted (faux) model with no network, several
times; the table gives the median and the spread (min-max). Beside each is
its *floor*: what the same number of irreducible Trio operations costs on
this machine in this run — bare checkpoints, awaited no-op callbacks, task
spawns, memory-channel sends — and the ratio of the two. Absolute times move
with the machine; the ratios do not move much.

Figures (performance.md):

- B1: loop overhead per turn — one run of 2,000 turns, each one no-op tool
  call, then a text answer; the low-level loop and an awaited no-op listener.
  Floor: one checkpoint per turn (the model's wait) plus one awaited no-op
  call per event the listener receives and per stream event the loop
  handles.
- B1a: the same through ``Agent`` with one awaited no-op listener; the same
  floor.
- B2: parallel fan-out — one turn of 1,000 parallel no-op tool calls, the
  whole run. Floor: a nursery spawning 1,000 tasks that each send once over
  a memory channel the parent receives from.
- B3: streaming — 100,000 one-character text deltas through the loop to one
  awaited listener, in events (deltas) per second. Floor: two awaited no-op
  calls per delta (provider to loop, loop to listener).
- B8: provider stream — a 20 MB OpenAI chat-completions SSE body served on
  loopback, read, parsed and normalized by ``openai_chat`` into stream events
  (to an awaited no-op emit), in MB per second. Floor: plain ``httpx-sse``
  iteration over the same body from the same server, through the same
  ``httpx`` client, without parsing the events' JSON (the goal is at least
  half its rate: a ratio of 2 or less).

Only B8 touches the network (loopback, the server in the same process).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trio_agent import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    ToolResult,
    ToolUpdate,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import faux

Figure = dict[str, Any]


async def _noop_listener(event: AgentEvent) -> None:
    return None


async def _noop_execute(
    tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate
) -> ToolResult:
    return _RESULT


_RESULT = ToolResult.text("ok")
_NOOP_TOOL = AgentTool(
    name="noop",
    description="does nothing",
    parameters={"type": "object", "properties": {}},
    execute=_noop_execute,
)


def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    """Seconds one ``trio.run`` of ``fn`` spends inside ``fn`` (startup excluded)."""
    elapsed = 0.0

    async def main() -> None:
        nonlocal elapsed
        gc.collect()
        start = time.perf_counter()
        await fn()
        elapsed = time.perf_counter() - start

    trio.run(main)
    return elapsed


def _stats(samples: list[float]) -> tuple[float, float, float]:
    return statistics.median(samples), min(samples), max(samples)


# --- floors -------------------------------------------------------------------------------------


async def _awaited_noops(count: int) -> None:
    callback = _noop_listener
    event = None
    for _ in range(count):
        await callback(event)  # type: ignore[arg-type]


async def _checkpoints(count: int) -> None:
    for _ in range(count):
        await trio.lowlevel.checkpoint()


async def _spawn_and_send(count: int) -> None:
    send, receive = trio.open_memory_channel[int](math.inf)

    async def child(i: int) -> None:
        send.send_nowait(i)

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(child, i)
        for _ in range(count):
            await receive.receive()


# --- figures ------------------------------------------------------------------------------------


def _b1_model(turns: int) -> faux.FauxModel:
    call = faux.reply(faux.tool_call("noop", {}, id="t"))
    return faux.model([*([call] * turns), "done"])


def _b1_floor(turns: int, repeats: int) -> list[float]:
    """One checkpoint per turn, and one awaited no-op call per event of a turn."""
    counts = {"events": 0, "stream": 0}

    async def counting_listener(event: AgentEvent) -> None:
        counts["events"] += 1

    async def count_events() -> None:
        async def stream_fn(model: Any, context: Any, options: Any, emit: Any) -> Any:
            async def counting_emit(event: Any) -> None:
                counts["stream"] += 1
                await emit(event)

            return await faux.stream(model, context, options, counting_emit)

        await run_agent_loop(
            [UserMessage.text("go")],
            AgentContext(tools=[_NOOP_TOOL]),
            AgentLoopConfig(model=_b1_model(turns)),
            counting_listener,
            stream_fn=stream_fn,
        )

    trio.run(count_events)
    awaits = counts["events"] + counts["stream"]
    return [
        (_timed(lambda: _checkpoints(turns + 1)) + _timed(lambda: _awaited_noops(awaits)))
        / (turns + 1)
        * 1e6
        for _ in range(repeats)
    ]


def bench_b1(repeats: int, turns: int = 2000) -> Figure:
    def one() -> float:
        model = _b1_model(turns)

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                _noop_listener,
            )

        return _timed(go) / (turns + 1) * 1e6

    samples = [one() for _ in range(repeats)]
    return _figure(samples, _b1_floor(turns, repeats), "us/turn", lower_is_better=True)


def bench_b1a(repeats: int, turns: int = 2000) -> Figure:
    def one() -> float:
        agent = Agent(_b1_model(turns), tools=[_NOOP_TOOL])
        agent.subscribe(_noop_listener)
        return _timed(lambda: agent.prompt("go")) / (turns + 1) * 1e6

    samples = [one() for _ in range(repeats)]
    return _figure(samples, _b1_floor(turns, repeats), "us/turn", lower_is_better=True)


def bench_b2(repeats: int, calls: int = 1000) -> Figure:
    reply = faux.reply(*(faux.tool_call("noop", {}, id=f"t{i}") for i in range(calls)))

    def one() -> float:
        model = faux.model([reply, "done"])

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(tools=[_NOOP_TOOL]),
                AgentLoopConfig(model=model),
                _noop_listener,
            )

        return _timed(go) * 1e3

    samples = [one() for _ in range(repeats)]
    floor_samples = [_timed(lambda: _spawn_and_send(calls)) * 1e3 for _ in range(repeats)]
    return _figure(samples, floor_samples, "ms", lower_is_better=True)


def bench_b3(repeats: int, deltas: int = 100_000) -> Figure:
    reply = faux.reply("x" * deltas, chunk_size=1)

    def one() -> float:
        model = faux.model([reply])

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(),
                AgentLoopConfig(model=model),
                _noop_listener,
            )

        return deltas / _timed(go)

    samples = [one() for _ in range(repeats)]
    floor_samples = [deltas / _timed(lambda: _awaited_noops(2 * deltas)) for _ in range(repeats)]
    return _figure(samples, floor_samples, "events/s", lower_is_better=False)


def _b8_body(size: int) -> bytes:
    """An OpenAI chat-completions SSE body of about ``size`` bytes: short text deltas."""
    words = ("streaming ", "tokens ", "from ", "a ", "model ", "over ", "loopback, ", "fast. ")
    chunk = (
        'data: {"id":"chatcmpl-b8","object":"chat.completion.chunk","created":1,'
        '"model":"gpt-4.1","choices":[{"index":0,"delta":{"content":%s},'
        '"finish_reason":null}]}\n\n'
    )
    pieces = [chunk % json.dumps(words[i % len(words)]) for i in range(len(words))]
    one_round = "".join(pieces).encode()
    body = one_round * (size // len(one_round) + 1)
    end = (
        'data: {"id":"chatcmpl-b8","object":"chat.completion.chunk","created":1,'
        '"model":"gpt-4.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        '"usage":{"prompt_tokens":10,"completion_tokens":1000,"total_tokens":1010}}\n\n'
        "data: [DONE]\n\n"
    )
    return body + end.encode()


def bench_b8(repeats: int, size: int = 20_000_000) -> Figure:
    import httpx  # noqa: ASYNC127  (the client the providers use)
    import httpx_sse

    from trio_agent import LlmContext, StreamOptions
    from trio_agent.providers import openai_chat
    from trio_agent.testing import ScriptedResponse, SSEServer

    body = _b8_body(size)
    megabytes = len(body) / 1e6
    samples: list[float] = []
    floor_samples: list[float] = []

    async def emit(event: Any) -> None:
        return None

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            server = SSEServer()
            url = await server.start(nursery)
            model = openai_chat.model("gpt-4.1", base_url=url + "/v1", provider="openai")
            context = LlmContext("", [UserMessage.text("go")])
            async with httpx.AsyncClient(timeout=60) as client:
                provider = openai_chat.OpenAIChat(client)
                options = StreamOptions(api_key="bench-key")
                request = {"model": "gpt-4.1", "stream": True, "messages": []}
                for _ in range(repeats):
                    server.add(ScriptedResponse(body=body, pieces=[65536]))
                    gc.collect()
                    start = time.perf_counter()
                    message = await provider.stream(model, context, options, emit)
                    samples.append(megabytes / (time.perf_counter() - start))
                    if message.stop_reason != "stop":
                        raise RuntimeError(f"B8: the provider failed: {message.error_message}")
                    server.add(ScriptedResponse(body=body, pieces=[65536]))
                    gc.collect()
                    start = time.perf_counter()
                    async with httpx_sse.aconnect_sse(
                        client, "POST", url + "/v1/chat/completions", json=request
                    ) as source:
                        async for _ in source.aiter_sse():
                            pass
                    floor_samples.append(megabytes / (time.perf_counter() - start))
            nursery.cancel_scope.cancel()

    trio.run(main)
    return _figure(samples, floor_samples, "MB/s", lower_is_better=False)


def _figure(
    samples: list[float], floor_samples: list[float], unit: str, *, lower_is_better: bool
) -> Figure:
    median, low, high = _stats(samples)
    floor = statistics.median(floor_samples)
    ratio = median / floor if lower_is_better else floor / median
    return {
        "median": median,
        "min": low,
        "max": high,
        "unit": unit,
        "floor": floor,
        "ratio": ratio,
        "repeats": len(samples),
    }


BENCHMARKS: dict[str, tuple[str, Callable[[int], Figure], int]] = {
    "B1": ("loop overhead per turn (2,000 turns, one no-op tool each)", bench_b1, 5),
    "B1a": ("the same through Agent, one listener", bench_b1a, 5),
    "B2": ("parallel fan-out (1,000 no-op tools, whole run)", bench_b2, 15),
    "B3": ("streaming (100,000 one-character deltas)", bench_b3, 5),
    "B8": ("provider stream (20 MB of OpenAI chat SSE on loopback)", bench_b8, 5),
}


def _format(value: float, unit: str) -> str:
    if unit == "events/s":
        return f"{value / 1e6:.2f} M/s"
    if unit == "MB/s":
        return f"{value:.1f} MB/s"
    return f"{value:.1f} {unit.split('/')[0].replace('us', 'µs')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("figures", nargs="*", help="figure ids to run (default: all)")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object keyed by figure id"
    )
    parser.add_argument("--repeats", type=int, help="repetitions per figure (default: per figure)")
    args = parser.parse_args(argv)
    by_name = {name.upper(): name for name in BENCHMARKS}
    chosen = [by_name.get(f.upper(), f) for f in args.figures] or list(BENCHMARKS)
    unknown = [f for f in chosen if f not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    results: dict[str, Figure] = {}
    for figure in chosen:
        title, bench, repeats = BENCHMARKS[figure]
        result = bench(args.repeats or repeats)
        results[figure] = result
        if not args.json:
            unit = result["unit"]
            print(
                f"{figure}  {title}\n"
                f"    trio_agent {_format(result['median'], unit)} "
                f"(min {_format(result['min'], unit)}, max {_format(result['max'], unit)}, "
                f"n={result['repeats']})\n"
                f"    Trio floor {_format(result['floor'], unit)}   "
                f"ratio {result['ratio']:.2f}x the floor",
                flush=True,
            )
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
