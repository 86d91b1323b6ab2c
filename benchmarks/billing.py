"""A loopback model server that bills each request as its service documents its prompt cache.

B11 (:mod:`benchmarks.cost`) runs one scripted tool session through a client
against this server and adds up the dollars. The replies are scripted (the
same for every client); only the bill depends on what the client sends. The
server speaks three services, chosen by the request's path, each streaming
its own SSE format and reporting usage in its own fields:

- Anthropic Messages (``.../v1/messages``): ``message_start``'s ``usage``
  (``input_tokens``, ``cache_creation_input_tokens``,
  ``cache_read_input_tokens``, ``cache_creation.ephemeral_5m_input_tokens`` /
  ``ephemeral_1h_input_tokens``), ``message_delta``'s ``output_tokens``.
- OpenAI Responses (``.../responses``): ``response.completed``'s ``usage``
  (``input_tokens``, with ``input_tokens_details.cached_tokens`` among them;
  ``output_tokens``).
- Gemini (``...:streamGenerateContent?alt=sse``): ``usageMetadata``
  (``promptTokenCount``, with ``cachedContentTokenCount`` among them;
  ``candidatesTokenCount``, ``thoughtsTokenCount``).

**Tokens.** A deterministic stand-in for a tokenizer, the same for every
client: a prompt is a sequence of *blocks* (below, per service), and a block
costs ``ceil(n / 4)`` tokens, ``n`` the UTF-8 bytes of its canonical JSON
(keys sorted, no spaces, non-ASCII kept), with cache markers
(``cache_control``) left out. A block's identity, for prefix matching, is its
canonical JSON with its place (section, role, position in its message). An
output costs the same way: a tool call, ``{"name", "input"}``; a text, the
string.

**Time.** Virtual: each request the server receives is 10 s after the one
before (a turn's worth), so expiry is deterministic; a test passes ``now``.

**Anthropic** (https://platform.claude.com/docs/en/build-with-claude/prompt-caching):

- Blocks in prefix order tools → system → messages: each tool, each system
  text block (a string system prompt is one text block), each content block
  of each message (a string content is one text block).
- A block with ``cache_control`` is a breakpoint (a top-level
  ``cache_control``, automatic caching, is one on the last block); its
  ``ttl`` is ``"5m"`` (the default) or ``"1h"``. More than 4 breakpoints is
  an HTTP 400, as the API answers.
- A prefix shorter than the model's minimum cacheable length is not cached:
  1,024 tokens for Claude Sonnet 4.5 (``_ANTHROPIC_MINIMUM``: 4,096 for Opus
  4.5/4.6 and Haiku 4.5, 2,048 for Haiku 3/3.5 and Sonnet 4.6).
- Read: at each breakpoint, and at each of the 19 block boundaries before
  it (20 in all), the service looks for a prefix it has cached and not
  expired; the longest found is read
  (``cache_read_input_tokens``) and its life renewed.
- Write: the part beyond the read, up to the last breakpoint whose prefix is
  long enough, is written (``cache_creation_input_tokens``), each segment
  with the ttl of the breakpoint that ends it; every such breakpoint's
  prefix is then cached for its ttl. The rest is ``input_tokens``.
- Price (catalog, per million): input; a 5-minute write at ``cache_write``
  (1.25x input), a 1-hour write at 2x input (as pi-ai's ``calculateCost``);
  a read at ``cache_read``; output.

**OpenAI** (https://developers.openai.com/api/docs/guides/prompt-caching):

- Blocks: each tool, the ``instructions`` (if any), each ``input`` item (a
  string input is one user item). Prompts of 1,024 tokens or more are
  cached, whole, once answered; a hit is the longest prefix the machine has
  seen, rounded down to 1,024 + k·128 tokens; in-memory retention, 5 minutes
  idle here. No write surcharge; cached tokens cost ``cache_read``.
- Routing: the service routes by a hash of the first ~256 tokens (the
  first 1,024 bytes of the canonical prompt here) combined with
  ``prompt_cache_key``, to one of many machines, each with its own cache; a
  prefix+key sent more often than ~15 requests a minute overflows to more
  machines. The simulator has 4 machines. A request with a key goes to the
  machine its hash names, always the same one for the same key and prefix. A
  request without a key stands for a prefix shared by many callers, which
  overflows: it lands on the machine named by a hash of its whole body, so
  consecutive requests of a session land on machines chosen
  deterministically but at random, and hit only what that machine saw.

**Gemini** (https://ai.google.dev/gemini-api/docs/caching, implicit caching;
https://ai.google.dev/gemini-api/docs/thinking, thinking):

- Blocks: each ``systemInstruction`` part, each function declaration (any
  other tool entry whole), each part of each ``contents`` entry.
- Implicit caching: a prefix the service has seen (5 minutes idle here; the
  service does not say) is billed at the cached rate when it is at least
  the model's minimum, 2,048 tokens for Gemini 2.5 Flash (the page's table;
  earlier versions of it said 1,024); ``cachedContentTokenCount`` is within
  ``promptTokenCount``. The service does not promise a hit; the simulator
  always hits.
- Thinking: 2.5 Flash thinks unless ``generationConfig.thinkingConfig
  .thinkingBudget`` is 0; it is simulated as 300 thought tokens per reply
  (``thoughtsTokenCount``), billed as output.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, SupportsIndex

import attrs

from trio_agent import models
from trio_agent.testing import ScriptedResponse, SSEServer, sse_body

SECONDS_PER_REQUEST = 10.0
"""The virtual time between two requests."""

_ANTHROPIC_MINIMUM = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
"""Minimum cacheable prompt lengths that are not 1,024 tokens, by model id prefix."""
_ANTHROPIC_LOOKBACK = 20
_ANTHROPIC_BREAKPOINTS = 4
_TTL = {"5m": 300.0, "1h": 3600.0}
_OPENAI_MINIMUM = 1024
_OPENAI_INCREMENT = 128
_OPENAI_MACHINES = 4
_OPENAI_ROUTING_BYTES = 1024  # ~256 tokens
_IMPLICIT_RETENTION = 300.0
_GEMINI_MINIMUM = {"gemini-2.5-flash": 2048, "gemini-2.5-pro": 2048}
GEMINI_THOUGHT_TOKENS = 300


class BillingError(ValueError):
    """A request the service would refuse (HTTP 400)."""


def canonical(value: Any) -> bytes:
    """The canonical JSON of ``value``: keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def tokens(value: Any) -> int:
    """The tokens of a block or an output: one per 4 bytes of its canonical JSON (a
    ``str`` counts as its own bytes)."""
    data = value.encode() if isinstance(value, str) else canonical(value)
    return math.ceil(len(data) / 4)


@attrs.frozen
class Block:
    """One block of a prompt: its identity, its tokens, and its cache breakpoint's ttl
    (``None``: not a breakpoint)."""

    identity: bytes
    tokens: int
    ttl: str | None = None


def _block(place: Any, content: Any, ttl: str | None = None) -> Block:
    return Block(canonical([place, content]), tokens(content), ttl)


def _prefixes(blocks: list[Block]) -> tuple[list[bytes], list[int]]:
    """Each prefix's hash and tokens: ``[i]`` is the prefix through block ``i``."""
    hashes: list[bytes] = []
    totals: list[int] = []
    digest = b""
    total = 0
    for block in blocks:
        digest = hashlib.sha256(digest + block.identity).digest()
        total += block.tokens
        hashes.append(digest)
        totals.append(total)
    return hashes, totals


@attrs.frozen
class Bill:
    """What one request cost: its tokens by kind, as the service reports them, and the
    dollars."""

    service: str
    prompt: int
    """All prompt tokens: uncached input, cache reads and cache writes."""
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    output: int
    thoughts: int
    dollars: float

    @property
    def uncached(self) -> int:
        return self.prompt - self.cache_read - self.cache_write_5m - self.cache_write_1h


def _per_million(count: int, price: float) -> float:
    return count * price / 1e6


# --- Anthropic ------------------------------------------------------------------------------------


def _marker(block: Any) -> str | None:
    if not isinstance(block, dict) or not isinstance(block.get("cache_control"), dict):
        return None
    ttl = block["cache_control"].get("ttl", "5m")
    if ttl not in _TTL:
        raise BillingError(f"cache_control.ttl must be '5m' or '1h', not {ttl!r}")
    return str(ttl)


def _unmarked(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {key: value for key, value in block.items() if key != "cache_control"}
    return block


def _text_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return [] if content is None else [content]


def anthropic_blocks(body: Mapping[str, Any]) -> list[Block]:
    """A Messages request's blocks, tools → system → messages."""
    blocks: list[Block] = []
    for tool in body.get("tools") or []:
        blocks.append(_block("tool", _unmarked(tool), _marker(tool)))
    for part in _text_blocks(body.get("system")):
        blocks.append(_block("system", _unmarked(part), _marker(part)))
    for message in body.get("messages") or []:
        for position, part in enumerate(_text_blocks(message.get("content"))):
            place = [message.get("role"), position]
            blocks.append(_block(place, _unmarked(part), _marker(part)))
    automatic = _marker(body)
    if automatic is not None and blocks:
        blocks[-1] = attrs.evolve(blocks[-1], ttl=blocks[-1].ttl or automatic)
    return blocks


def anthropic_minimum(model: str) -> int:
    """The model's minimum cacheable prompt length, in tokens."""
    for prefix, minimum in _ANTHROPIC_MINIMUM.items():
        if model.startswith(prefix):
            return minimum
    return 1024


class AnthropicCache:
    """One organization's prompt cache at Anthropic: prefixes, by hash, with their expiry."""

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[float, str]] = {}

    def _live(self, digest: bytes, now: float) -> bool:
        entry = self.entries.get(digest)
        return entry is not None and entry[0] > now

    def bill(self, body: Mapping[str, Any], now: float) -> tuple[int, int, int, int]:
        """``(prompt, read, write_5m, write_1h)`` for this request, the cache updated."""
        blocks = anthropic_blocks(body)
        breakpoints = [i for i, block in enumerate(blocks) if block.ttl is not None]
        if len(breakpoints) > _ANTHROPIC_BREAKPOINTS:
            raise BillingError(
                f"A maximum of {_ANTHROPIC_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {len(breakpoints)}."
            )
        hashes, totals = _prefixes(blocks)
        prompt = totals[-1] if totals else 0
        minimum = anthropic_minimum(str(body.get("model", "")))
        read_at = -1
        for point in breakpoints:
            for index in range(point, max(point - _ANTHROPIC_LOOKBACK, -1), -1):
                if self._live(hashes[index], now):
                    read_at = max(read_at, index)
                    break
        read = totals[read_at] if read_at >= 0 else 0
        if read_at >= 0:
            kept = self.entries[hashes[read_at]][1]
            self.entries[hashes[read_at]] = (now + _TTL[kept], kept)
        writes = {"5m": 0, "1h": 0}
        written_to = read
        for point in breakpoints:
            ttl = blocks[point].ttl
            assert ttl is not None
            if totals[point] < minimum:
                continue
            if point > read_at:
                writes[ttl] += totals[point] - written_to
                written_to = totals[point]
            self.entries[hashes[point]] = (now + _TTL[ttl], ttl)
        return prompt, read, writes["5m"], writes["1h"]


# --- OpenAI ---------------------------------------------------------------------------------------


def openai_blocks(body: Mapping[str, Any]) -> list[Block]:
    """A Responses request's blocks: tools, instructions, input items."""
    blocks = [_block("tool", tool) for tool in body.get("tools") or []]
    if body.get("instructions"):
        blocks.append(_block("instructions", body["instructions"]))
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    blocks += [_block("input", item) for item in items]
    return blocks


def openai_cached(longest: int) -> int:
    """The cached tokens OpenAI reports for a longest cached prefix of ``longest`` tokens."""
    if longest < _OPENAI_MINIMUM:
        return 0
    return _OPENAI_MINIMUM + (longest - _OPENAI_MINIMUM) // _OPENAI_INCREMENT * _OPENAI_INCREMENT


class OpenAICache:
    """OpenAI's prompt caches: one per machine, each prefixes by hash, with their expiry."""

    def __init__(self, machines: int = _OPENAI_MACHINES) -> None:
        self.machines: list[dict[bytes, float]] = [{} for _ in range(machines)]

    def machine(self, body: Mapping[str, Any], blocks: Iterable[Block]) -> int:
        """The machine a request is routed to (see the module's rules)."""
        head = b"".join(block.identity for block in blocks)[:_OPENAI_ROUTING_BYTES]
        key = body.get("prompt_cache_key")
        if isinstance(key, str) and key:
            route = hashlib.sha256(b"key\0" + key.encode() + b"\0" + head).digest()
        else:
            route = hashlib.sha256(b"overflow\0" + canonical(body)).digest()
        return int.from_bytes(route[:8], "big") % len(self.machines)

    def bill(self, body: Mapping[str, Any], now: float) -> tuple[int, int]:
        """``(prompt, cached)`` for this request, the cache updated."""
        blocks = openai_blocks(body)
        hashes, totals = _prefixes(blocks)
        prompt = totals[-1] if totals else 0
        cache = self.machines[self.machine(body, blocks)]
        longest = max(
            (
                total
                for digest, total in zip(hashes, totals, strict=True)
                if cache.get(digest, 0) > now
            ),
            default=0,
        )
        cached = min(openai_cached(longest), prompt)
        if prompt >= _OPENAI_MINIMUM:
            for digest in hashes:
                cache[digest] = now + _IMPLICIT_RETENTION
        return prompt, cached


# --- Gemini ---------------------------------------------------------------------------------------


def gemini_blocks(body: Mapping[str, Any]) -> list[Block]:
    """A generateContent request's blocks: system instruction parts, tools, content parts."""
    blocks: list[Block] = []
    system = body.get("systemInstruction") or body.get("system_instruction") or {}
    for part in system.get("parts") or [] if isinstance(system, dict) else []:
        blocks.append(_block("system", part))
    for tool in body.get("tools") or []:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        if isinstance(declarations, list):
            blocks += [_block("function", declaration) for declaration in declarations]
        else:
            blocks.append(_block("tool", tool))
    for content in body.get("contents") or []:
        for position, part in enumerate(content.get("parts") or []):
            blocks.append(_block([content.get("role"), position], part))
    return blocks


def gemini_thinks(body: Mapping[str, Any]) -> bool:
    """Whether the reply thinks: unless ``thinkingConfig.thinkingBudget`` is 0."""
    config = body.get("generationConfig") or {}
    thinking = config.get("thinkingConfig") if isinstance(config, dict) else None
    return not (isinstance(thinking, dict) and thinking.get("thinkingBudget") == 0)


class GeminiCache:
    """Gemini's implicit cache: prefixes, by hash, with their expiry."""

    def __init__(self) -> None:
        self.entries: dict[bytes, float] = {}

    def bill(self, body: Mapping[str, Any], model: str, now: float) -> tuple[int, int]:
        """``(prompt, cached)`` for this request, the cache updated."""
        hashes, totals = _prefixes(gemini_blocks(body))
        prompt = totals[-1] if totals else 0
        minimum = _GEMINI_MINIMUM.get(model, 1024)
        longest = max(
            (
                total
                for digest, total in zip(hashes, totals, strict=True)
                if self.entries.get(digest, 0) > now
            ),
            default=0,
        )
        cached = longest if longest >= minimum else 0
        for digest, total in zip(hashes, totals, strict=True):
            if total >= minimum:
                self.entries[digest] = now + _IMPLICIT_RETENTION
        return prompt, cached


# --- the script: what the model answers -----------------------------------------------------------


@attrs.frozen
class Script:
    """The scripted replies of a session: ``calls`` tool calls (of ``tool``, one per
    reply, with these arguments), then a text reply."""

    tool: str
    calls: tuple[Mapping[str, Any], ...]
    final: str

    def reply(self, done: int) -> tuple[Mapping[str, Any] | None, str]:
        """The reply after ``done`` tool results: ``(arguments, "")`` for a call,
        ``(None, text)`` for the answer."""
        if done < len(self.calls):
            return self.calls[done], ""
        return None, self.final

    def output_tokens(self, done: int) -> int:
        arguments, text = self.reply(done)
        if arguments is None:
            return tokens(text)
        return tokens({"name": self.tool, "input": arguments})


def _anthropic_sse(
    script: Script, done: int, usage: Mapping[str, int], output: int, model: str
) -> bytes:
    arguments, text = script.reply(done)
    start_usage = {
        "input_tokens": usage["input"],
        "cache_creation_input_tokens": usage["write_5m"] + usage["write_1h"],
        "cache_read_input_tokens": usage["read"],
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage["write_5m"],
            "ephemeral_1h_input_tokens": usage["write_1h"],
        },
        "output_tokens": 1,
        "service_tier": "standard",
    }
    message: dict[str, Any] = {
        "id": f"msg_b11_{done:02d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    if arguments is None:
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": text}
        stop = "end_turn"
    else:
        block = {
            "type": "tool_use",
            "id": f"toolu_b11_{done:02d}",
            "name": script.tool,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
        stop = "tool_use"
    events += [
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return sse_body(events)


def _openai_sse(
    script: Script, done: int, prompt: int, cached: int, output: int, model: str
) -> bytes:
    arguments, text = script.reply(done)
    response: dict[str, Any] = {
        "id": f"resp_b11_{done:02d}",
        "object": "response",
        "created_at": 1764800000 + done,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": [],
        "usage": None,
    }
    if arguments is None:
        item_id = f"msg_b11_{done:02d}"
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        middle: list[dict[str, Any]] = [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "content": []},
            },
            {"type": "response.content_part.added", **where, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **where, "delta": text, "logprobs": []},
            {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
            {"type": "response.content_part.done", **where, "part": part},
        ]
    else:
        item_id = f"fc_b11_{done:02d}"
        encoded = json.dumps(arguments)
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "completed",
            "arguments": encoded,
            "call_id": f"call_b11_{done:02d}",
            "name": script.tool,
        }
        where = {"item_id": item_id, "output_index": 0}
        middle = [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "status": "in_progress", "arguments": ""},
            },
            {"type": "response.function_call_arguments.delta", **where, "delta": encoded},
            {"type": "response.function_call_arguments.done", **where, "arguments": encoded},
        ]
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }
    completed = {**response, "status": "completed", "output": [item], "usage": usage}
    events = [
        {"type": "response.created", "response": response},
        {"type": "response.in_progress", "response": response},
        *middle,
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": completed},
    ]
    return sse_body(
        (event["type"], {**event, "sequence_number": number}) for number, event in enumerate(events)
    )


def _gemini_sse(
    script: Script, done: int, prompt: int, cached: int, output: int, thoughts: int, model: str
) -> bytes:
    arguments, text = script.reply(done)
    part: dict[str, Any] = (
        {"text": text}
        if arguments is None
        else {"functionCall": {"name": script.tool, "args": arguments}}
    )
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        usage["cachedContentTokenCount"] = cached
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    chunk = {
        "candidates": [
            {"content": {"parts": [part], "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": f"b11_{done:02d}",
    }
    return sse_body([(None, chunk)], crlf=True)


# --- the server -----------------------------------------------------------------------------------


def _prices(provider: str, model: str) -> Any:
    found = models.find(provider, model)
    if found is None:
        raise LookupError(f"B11: the catalog has no model {provider}/{model}")
    return found.cost


def _done(service: str, body: Mapping[str, Any]) -> int:
    """How many tool results the request carries: which reply of the script it gets."""
    if service == "anthropic":
        return sum(
            1
            for message in body.get("messages") or []
            for part in _text_blocks(message.get("content"))
            if isinstance(part, dict) and part.get("type") == "tool_result"
        )
    if service == "openai":
        items = body.get("input") or []
        return sum(
            1
            for item in items
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        )
    return sum(
        1
        for content in body.get("contents") or []
        for part in content.get("parts") or []
        if isinstance(part, dict) and "functionResponse" in part
    )


class Biller:
    """Bills requests and makes their replies; one per client's session (a fresh cache).

    :meth:`answer` takes a request's path and JSON body and returns the scripted reply,
    its usage in the service's fields, and records the :class:`Bill` in :attr:`bills`.
    """

    def __init__(self, script: Script, clock: Callable[[], float] | None = None) -> None:
        self.script = script
        self.bills: list[Bill] = []
        self.anthropic = AnthropicCache()
        self.openai = OpenAICache()
        self.gemini = GeminiCache()
        self._requests = 0
        self._clock = clock

    def now(self) -> float:
        self._requests += 1
        return self._clock() if self._clock is not None else self._requests * SECONDS_PER_REQUEST

    def answer(self, path: str, body: Mapping[str, Any]) -> bytes:
        """The reply to a request at ``path`` (raises :class:`BillingError` for a request
        the service refuses)."""
        now = self.now()
        done = _done(service_of(path), body)
        if service_of(path) == "anthropic":
            model = str(body.get("model", ""))
            cost = _prices("anthropic", model)
            prompt, read, write_5m, write_1h = self.anthropic.bill(body, now)
            uncached = prompt - read - write_5m - write_1h
            output = self.script.output_tokens(done)
            dollars = (
                _per_million(uncached, cost.input)
                + _per_million(write_5m, cost.cache_write)
                + _per_million(write_1h, 2 * cost.input)
                + _per_million(read, cost.cache_read)
                + _per_million(output, cost.output)
            )
            self.bills.append(
                Bill("anthropic", prompt, read, write_5m, write_1h, output, 0, dollars)
            )
            usage = {"input": uncached, "read": read, "write_5m": write_5m, "write_1h": write_1h}
            return _anthropic_sse(self.script, done, usage, output, model)
        if service_of(path) == "openai":
            model = str(body.get("model", ""))
            cost = _prices("openai", model)
            prompt, cached = self.openai.bill(body, now)
            output = self.script.output_tokens(done)
            dollars = (
                _per_million(prompt - cached, cost.input)
                + _per_million(cached, cost.cache_read)
                + _per_million(output, cost.output)
            )
            self.bills.append(Bill("openai", prompt, cached, 0, 0, output, 0, dollars))
            return _openai_sse(self.script, done, prompt, cached, output, model)
        model = path.rpartition("/models/")[2].partition(":")[0]
        cost = _prices("google", model)
        prompt, cached = self.gemini.bill(body, model, now)
        output = self.script.output_tokens(done)
        thoughts = GEMINI_THOUGHT_TOKENS if gemini_thinks(body) else 0
        dollars = (
            _per_million(prompt - cached, cost.input)
            + _per_million(cached, cost.cache_read)
            + _per_million(output + thoughts, cost.output)
        )
        self.bills.append(Bill("google", prompt, cached, 0, 0, output, thoughts, dollars))
        return _gemini_sse(self.script, done, prompt, cached, output, thoughts, model)


def service_of(path: str) -> str:
    """The service a request path belongs to: ``anthropic``, ``openai`` or ``google``."""
    route = path.partition("?")[0]
    if route.endswith("/messages"):
        return "anthropic"
    if route.endswith("/responses"):
        return "openai"
    if ":streamGenerateContent" in route or ":generateContent" in route:
        return "google"
    raise BillingError(f"B11: no service answers {path!r}")


class BillingReplies(list[ScriptedResponse]):
    """An ``SSEServer``'s script that answers each request by billing it: the server takes
    a response (``pop(0)``) right after recording the request it answers, with no
    checkpoint between, so the last request recorded is the one being answered."""

    def __init__(self, server: SSEServer, biller: Biller) -> None:
        super().__init__()
        self._server = server
        self.biller = biller

    def __bool__(self) -> bool:
        return True

    def pop(self, index: SupportsIndex = -1) -> ScriptedResponse:
        request = self._server.requests[-1]
        try:
            body = request.json
            if not isinstance(body, dict):
                raise BillingError(f"B11: the request body is not a JSON object: {body!r:.80}")
            return ScriptedResponse(body=self.biller.answer(request.path, body))
        except (BillingError, ValueError, TypeError, AttributeError, LookupError) as exc:
            # A request of a shape the service refuses: HTTP 400, naming what is wrong.
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": str(exc)},
            }
            return ScriptedResponse.error(400, error)


def floor_dollars(provider: str, model: str, bills: list[Bill]) -> float:
    """The dollars of these requests had every turn read the whole earlier prompt from the
    cache: the first writes (Anthropic) or pays for its whole prompt, each later one reads
    the previous prompt and writes (Anthropic, but the last) or pays for the rest; outputs
    as billed, without thoughts."""
    cost = _prices(provider, model)
    first = cost.cache_write if provider == "anthropic" and len(bills) > 1 else cost.input
    dollars = _per_million(bills[0].prompt, first) if bills else 0.0
    for number, (before, bill) in enumerate(itertools.pairwise(bills), start=2):
        new = bill.prompt - before.prompt
        rate = cost.cache_write if provider == "anthropic" and number < len(bills) else cost.input
        dollars += _per_million(before.prompt, cost.cache_read) + _per_million(new, rate)
    return dollars + sum(_per_million(bill.output, cost.output) for bill in bills)
