"""The streaming figures: deltas through the loop, bursts into a late reader, a provider's stream.

- B3: streaming — 100,000 one-character text deltas through the loop to one
  awaited listener, in events (deltas) per second. Floor: two awaited no-op
  calls per delta (provider to loop, loop to listener). Also measured: the
  same two awaits with what the contract makes per delta and nothing else
  (a delta event holding a partial snapshot, its ``message_update``, an
  abort check on each side), in bare Python: the most CPython allows.
- B4: bursts — the same 100,000 deltas into a subscriber that reads only
  after the run: ``Agent.events()`` with a buffer that holds every event of
  the run, drained once ``prompt()`` has returned; deltas per second,
  drain included. Floor: as many memory-channel ``send_nowait`` + ``receive``
  pairs. Linearity: the per-event cost at 100,000 deltas divided by the
  per-event cost at 10,000 (1 is linear), beside the same ratio for the floor.
- B8: provider stream — a 20 MB OpenAI chat-completions SSE body served on
  loopback, read, parsed and normalized by ``openai_chat`` into stream events
  (to an awaited no-op emit), in MB per second. Floor: plain ``httpx-sse``
  iteration over the same body from the same server, through the same
  ``httpx2`` client, without parsing the events' JSON (the goal is at least
  half its rate: a ratio of 2 or less).
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from typing import Any

import trio

from benchmarks._common import (
    Figure,
    alternating,
    awaited_noops,
    bare_stream_event,
    figure,
    never_cancelled,
    noop_listener,
    timed,
)
from trio_agent import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    TextDelta,
    UserMessage,
    run_agent_loop,
)
from trio_agent._frozen import maker
from trio_agent.providers import faux

# --- floors ---------------------------------------------------------------------------------------


async def _bare_deltas(count: int) -> None:
    """What the contract makes and calls per delta, in bare Python and nothing else:
    a delta event with a partial snapshot, its ``message_update``, an abort check
    on each side, an await from provider to loop and from loop to listener."""
    make_delta = maker(TextDelta)
    for _ in range(count):
        if never_cancelled():
            await trio.lowlevel.checkpoint_if_cancelled()
        snapshot = [None, 0, None, 0, None, None, None, None, None, None]
        await bare_stream_event(make_delta(0, "x", snapshot))


async def _channel_pairs(count: int) -> None:
    send, receive = trio.open_memory_channel[None](count)
    for _ in range(count):
        send.send_nowait(None)
    for _ in range(count):
        await receive.receive()


# --- figures --------------------------------------------------------------------------------------


def bench_b3(repeats: int, deltas: int = 100_000) -> Figure:
    reply = faux.reply("x" * deltas, chunk_size=1)

    def one() -> float:
        model = faux.model([reply])

        async def go() -> None:
            await run_agent_loop(
                [UserMessage.text("go")],
                AgentContext(),
                AgentLoopConfig(model=model),
                noop_listener,
            )

        return deltas / timed(go)

    samples, floor_samples, bare_samples = alternating(
        repeats,
        one,
        lambda: deltas / timed(lambda: awaited_noops(2 * deltas)),
        lambda: deltas / timed(lambda: _bare_deltas(deltas)),
    )
    bare = statistics.median(bare_samples)
    return figure(
        samples,
        floor_samples,
        "events/s",
        lower_is_better=False,
        bare_python=bare,
        detail=f"the contract's per-delta objects and awaits alone, in bare Python: "
        f"{bare / 1e6:.2f} M/s",
    )


def _b4_count(reply: faux.Reply) -> int:
    """How many events a run of ``reply`` through an ``Agent`` gives a subscriber."""
    count = 0

    async def counting_listener(event: AgentEvent) -> None:
        nonlocal count
        count += 1

    agent = Agent(faux.model([reply]))
    agent.subscribe(counting_listener)
    trio.run(agent.prompt, "go")
    return count


def _b4_seconds(reply: faux.Reply, capacity: int) -> float:
    """One run into ``events(buffer=capacity)``, drained after ``prompt()`` returned."""
    agent = Agent(faux.model([reply]))
    received = 0

    async def go() -> None:
        nonlocal received
        async with agent.events(buffer=capacity) as events:
            await agent.prompt("go")
        # The block has exited: the channel holds the whole run, then ends.
        with events:
            async for _ in events:
                received += 1

    elapsed = timed(go)
    if received != capacity:
        raise RuntimeError(f"B4: the subscriber received {received} events, not {capacity}")
    return elapsed


def bench_b4(repeats: int, deltas: int = 100_000, small: int = 10_000) -> Figure:
    big_reply = faux.reply("x" * deltas, chunk_size=1)
    small_reply = faux.reply("x" * small, chunk_size=1)
    big, little = _b4_count(big_reply), _b4_count(small_reply)
    samples: list[float] = []
    linearity: list[float] = []
    floor_samples: list[float] = []
    floor_linearity: list[float] = []
    for _ in range(repeats):
        seconds = _b4_seconds(big_reply, big)
        samples.append(deltas / seconds)
        linearity.append((seconds / big) / (_b4_seconds(small_reply, little) / little))
        seconds = timed(lambda: _channel_pairs(big))
        floor_samples.append(deltas / seconds)
        floor_linearity.append((seconds / big) / (timed(lambda: _channel_pairs(little)) / little))
    per_event = figure(
        linearity,
        floor_linearity,
        "x",
        lower_is_better=True,
        title=f"per-event cost, {deltas:,} / {small:,} deltas",
    )
    return figure(
        samples,
        floor_samples,
        "events/s",
        lower_is_better=False,
        also={"linearity": per_event},
    )


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
    import httpx2  # noqa: ASYNC127  (the client the providers use)

    # httpx-sse imports httpx for its types (it does not depend on it) and only reads a
    # response's text: httpx2's alias makes that import httpx2, and it runs on its client.
    httpx2.alias_httpx()
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
            async with httpx2.AsyncClient(timeout=60) as client:
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
    return figure(samples, floor_samples, "MB/s", lower_is_better=False)
