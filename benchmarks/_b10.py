"""B10's shared pieces: its OpenAI chat replies, a side's measures, and the openai SDK's
side, importable without trio_agent (the SDK's process runs from here:
``python -m benchmarks._b10 ours|sdk URL AGENTS``; see :mod:`benchmarks.pool`)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

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


# Per agent: 25 text deltas, then a call whose arguments come in 10 pieces; after the tool,
# a final reply of 25 text deltas. Paced at 50 ms an event, an agent's two streams last at
# least 3.4 s (69 events), so 10,000 agents through 1,000 connections take at least 35 s.
_TEXT, _ARGUMENTS, _FINAL = 25, 10, 25
_PACE = 0.05
# A side that has not finished after this long is stopped and reported as such.
_TIME_LIMIT = 600.0


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


def client_main(argv: list[str] | None = None) -> None:
    """One side of one B10 run in this process, its measures printed as a JSON line:
    ``python -m benchmarks._b10 ours|sdk URL AGENTS`` (the SDK's side without importing
    trio_agent, whose modules would count in its peak RSS)."""
    import sys

    kind, url, agents = argv if argv is not None else sys.argv[1:]
    client: Callable[[str, int, _Script], _Side]
    if kind == "ours":
        from benchmarks.pool import _b10_ours as client
    elif kind == "sdk":
        client = _b10_sdk
    else:
        raise ValueError(f"B10: the side must be 'ours' or 'sdk', not {kind!r}")
    side = client(url, int(agents), _Script(_TEXT, _ARGUMENTS, _FINAL))
    print(json.dumps(attrs.asdict(side)), flush=True)


if __name__ == "__main__":
    client_main()
