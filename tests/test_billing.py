"""B11's billing server bills by the rules its module writes down (benchmarks/billing.py)."""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx2  # noqa: ASYNC127  (the client a request is sent with)
import pytest
import trio

from benchmarks.billing import (
    GEMINI_THOUGHT_TOKENS,
    AnthropicCache,
    Biller,
    BillingError,
    BillingReplies,
    GeminiCache,
    OpenAICache,
    Script,
    floor_dollars,
    openai_blocks,
    openai_cached,
    tokens,
)
from trio_agent import LlmContext, StreamOptions, UserMessage, models
from trio_agent.providers import anthropic, google, openai_responses
from trio_agent.testing import SSEServer


def _text(approximate_tokens: int, seed: str = "") -> str:
    """A text of about this many tokens (4 bytes each)."""
    return (seed + "x" * (approximate_tokens * 4))[: approximate_tokens * 4]


def _mark(block: dict[str, Any], ttl: str | None = None) -> dict[str, Any]:
    control = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    return {**block, "cache_control": control}


def _claude(system: str, messages: list[dict[str, Any]], ttl: str | None = None) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "system": [_mark({"type": "text", "text": system}, ttl)],
        "messages": messages,
    }


_USER = [{"role": "user", "content": "hi"}]


def test_tokens_are_a_quarter_of_the_canonical_bytes() -> None:
    assert tokens("abcd") == 1
    assert tokens("abcde") == 2
    assert tokens("é" * 4) == 2  # UTF-8 bytes, not characters
    assert tokens({"b": 1, "a": "x"}) == math.ceil(len('{"a":"x","b":1}') / 4)


def test_anthropic_a_breakpoint_sent_twice_writes_then_reads() -> None:
    cache = AnthropicCache()
    body = _claude(_text(2000), _USER)
    prompt, read, write_5m, write_1h = cache.bill(body, now=0)
    assert (read, write_1h) == (0, 0)
    assert 2000 < write_5m < prompt  # the system block and its place; the user turn is input
    again = cache.bill(body, now=10)
    assert again == (prompt, write_5m, 0, 0)


def test_anthropic_below_the_minimum_nothing_is_cached() -> None:
    cache = AnthropicCache()
    body = _claude(_text(900), _USER)
    first = cache.bill(body, now=0)
    assert first[1:] == (0, 0, 0)
    assert cache.bill(body, now=10) == first
    assert cache.entries == {}


def test_anthropic_a_1h_write_and_the_5m_expiry() -> None:
    cache = AnthropicCache()
    long_lived = _claude(_text(2000), _USER, ttl="1h")
    _, read, write_5m, write_1h = cache.bill(long_lived, now=0)
    assert (read, write_5m) == (0, 0)
    assert write_1h > 2000
    assert cache.bill(long_lived, now=3000)[1] == write_1h  # read within the hour

    short = AnthropicCache()
    body = _claude(_text(2000), _USER)
    written = short.bill(body, now=0)[2]
    assert short.bill(body, now=299)[1] == written  # read, and its life renewed
    assert short.bill(body, now=598)[1] == written
    assert short.bill(body, now=598 + 301)[1:] == (0, written, 0)  # expired: written again


def test_anthropic_reads_the_previous_breakpoint_within_20_blocks() -> None:
    system = _text(2000)
    turns: list[dict[str, Any]] = [{"role": "user", "content": "start"}]

    def body() -> dict[str, Any]:
        *earlier, last = turns
        marked = {"role": last["role"], "content": [_mark({"type": "text", "text": "end"})]}
        return {"model": "claude-sonnet-4-5", "system": system, "messages": [*earlier, marked]}

    cache = AnthropicCache()
    first = body()
    first_prompt = cache.bill(first, now=0)[0]
    turns[-1] = {"role": "user", "content": [{"type": "text", "text": "end"}]}
    for number in range(9):  # the previous breakpoint ends 18 blocks back: checked
        turns.append({"role": "assistant", "content": f"reply {number}"})
        turns.append({"role": "user", "content": f"more {number}"})
    prompt, read, write_5m, _ = cache.bill(body(), now=10)
    assert read == first_prompt
    assert write_5m == prompt - read
    # The read renewed the earlier prefix's life: 5 minutes from the read, not the write.
    assert cache.bill(first, now=305)[1] == first_prompt

    far = AnthropicCache()
    turns[1:] = []
    turns[-1] = {"role": "user", "content": "start"}
    far.bill(body(), now=0)
    turns[-1] = {"role": "user", "content": [{"type": "text", "text": "end"}]}
    for number in range(10):  # 20 blocks back: past the breakpoint and the 19 before it
        turns.append({"role": "assistant", "content": f"reply {number}"})
        turns.append({"role": "user", "content": f"more {number}"})
    prompt, read, write_5m, _ = far.bill(body(), now=10)
    assert read == 0
    assert write_5m == prompt


def test_anthropic_more_than_four_breakpoints_is_refused() -> None:
    blocks = [_mark({"type": "text", "text": f"part {i}"}) for i in range(5)]
    body = {"model": "claude-sonnet-4-5", "system": blocks, "messages": _USER}
    with pytest.raises(BillingError, match="A maximum of 4 blocks with cache_control"):
        AnthropicCache().bill(body, now=0)


def test_openai_cached_tokens_round_down_to_1024_plus_128s() -> None:
    assert openai_cached(1023) == 0
    assert openai_cached(1024) == 1024
    assert openai_cached(1024 + 127) == 1024
    assert openai_cached(1024 + 128) == 1152
    assert openai_cached(5000) == 1024 + (5000 - 1024) // 128 * 128


def _gpt(key: str | None, *items: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-4.1",
        "input": [{"role": "developer", "content": _text(3000)}]
        + [{"role": "user", "content": item} for item in items],
    }
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def test_openai_a_key_routes_a_session_to_one_machine() -> None:
    cache = OpenAICache()
    first = _gpt("session-1", "one")
    prompt, cached = cache.bill(first, now=0)
    assert cached == 0
    assert prompt > 3000
    second = _gpt("session-1", "one", "two")
    prompt, cached = cache.bill(second, now=10)
    assert cached == openai_cached(sum(b.tokens for b in openai_blocks(first)))


def test_openai_without_a_key_requests_spread_over_machines() -> None:
    cache = OpenAICache()
    first = _gpt(None, "one")
    cache.bill(first, now=0)
    home = cache.machine(first, openai_blocks(first))
    # Deterministic: the machine is a hash of the whole body.
    elsewhere = next(
        body
        for body in (_gpt(None, "one", f"next {n}") for n in range(100))
        if cache.machine(body, openai_blocks(body)) != home
    )
    same = next(
        body
        for body in (_gpt(None, "one", f"next {n}") for n in range(100))
        if cache.machine(body, openai_blocks(body)) == home
    )
    assert cache.bill(elsewhere, now=10)[1] == 0
    assert cache.bill(same, now=20)[1] == openai_cached(sum(b.tokens for b in openai_blocks(first)))


def test_openai_short_prompts_are_not_cached() -> None:
    cache = OpenAICache()
    body = {"model": "gpt-4.1", "input": _text(1000), "prompt_cache_key": "k"}
    prompt, _ = cache.bill(body, now=0)
    assert prompt < 1024
    assert cache.bill(body, now=10) == (prompt, 0)


def _gemini(system_tokens: int, budget: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "systemInstruction": {"parts": [{"text": _text(system_tokens)}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    }
    if budget is not None:
        body["generationConfig"] = {"thinkingConfig": {"thinkingBudget": budget}}
    return body


def test_gemini_caches_a_repeated_prefix_of_2048_tokens_or_more() -> None:
    cache = GeminiCache()
    body = _gemini(3000)
    prompt, cached = cache.bill(body, "gemini-2.5-flash", now=0)
    assert cached == 0
    assert cache.bill(body, "gemini-2.5-flash", now=10) == (prompt, prompt)

    short = GeminiCache()
    small = _gemini(1500)
    short.bill(small, "gemini-2.5-flash", now=0)
    assert short.bill(small, "gemini-2.5-flash", now=10)[1] == 0


_SCRIPT = Script(tool="read_file", calls=({"path": "a.py"},), final="Done.")
_GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def test_gemini_thoughts_are_billed_unless_the_budget_is_0() -> None:
    cost = models.find("google", "gemini-2.5-flash")
    assert cost is not None
    thinking, silent = Biller(_SCRIPT), Biller(_SCRIPT)
    thinking.answer(_GEMINI_PATH, _gemini(100))
    silent.answer(_GEMINI_PATH, _gemini(100, budget=0))
    assert thinking.bills[0].thoughts == GEMINI_THOUGHT_TOKENS
    assert silent.bills[0].thoughts == 0
    extra = thinking.bills[0].dollars - silent.bills[0].dollars
    assert extra == pytest.approx(GEMINI_THOUGHT_TOKENS * cost.cost.output / 1e6)


def test_anthropic_prices_writes_reads_and_1h_writes() -> None:
    found = models.find("anthropic", "claude-sonnet-4-5")
    assert found is not None
    price = found.cost
    for ttl, rate in ((None, price.cache_write), ("1h", 2 * price.input)):
        biller = Biller(_SCRIPT)
        body = _claude(_text(2000), _USER, ttl)
        biller.answer("/v1/messages", body)
        biller.answer("/v1/messages", body)
        first, second = biller.bills
        written = first.cache_write_5m + first.cache_write_1h
        output = first.output * price.output
        assert first.dollars * 1e6 == pytest.approx(
            written * rate + first.uncached * price.input + output
        )
        assert second.dollars * 1e6 == pytest.approx(
            written * price.cache_read + second.uncached * price.input + output
        )


def test_the_floor_reads_every_earlier_prompt() -> None:
    biller = Biller(_SCRIPT)
    biller.answer("/v1/responses", _gpt("k", "one"))
    biller.answer("/v1/responses", _gpt("k", "one", "two"))
    first, second = biller.bills
    found = models.find("openai", "gpt-4.1")
    assert found is not None
    price = found.cost
    expected = (
        first.prompt * price.input
        + first.prompt * price.cache_read
        + (second.prompt - first.prompt) * price.input
        + (first.output + second.output) * price.output
    ) / 1e6
    assert floor_dollars("openai", "gpt-4.1", biller.bills) == pytest.approx(expected)


# --- through a client: the replies are each service's SSE, and its usage fields -------------------


async def _ignore(event: object) -> None:
    return None


@pytest.mark.parametrize(
    ("stream", "provider", "model_id"),
    [
        (anthropic.stream, "anthropic", "claude-sonnet-4-5"),
        (openai_responses.stream, "openai", "gpt-4.1"),
        (google.stream, "google", "gemini-2.5-flash"),
    ],
)
async def test_a_client_reads_the_billed_usage(stream: Any, provider: str, model_id: str) -> None:
    """The replies are each service's SSE, with the usage in its own fields."""
    found = models.find(provider, model_id)
    assert found is not None
    biller = Biller(_SCRIPT)
    async with trio.open_nursery() as nursery:
        server = SSEServer()
        server.responses = BillingReplies(server, biller)
        url = await server.start(nursery)
        model = attrs.evolve(found, base_url=url + urlsplit(found.base_url).path)
        context = LlmContext(_text(2000), [UserMessage.text("hi")], ())
        with trio.fail_after(30):
            message = await stream(model, context, StreamOptions(api_key="k"), _ignore)
        nursery.cancel_scope.cancel()
    assert message.stop_reason == "toolUse", message.error_message
    assert message.tool_calls[0].arguments == {"path": "a.py"}
    (bill,) = biller.bills
    usage = message.usage
    assert usage.input == bill.uncached
    assert usage.cache_read == bill.cache_read
    assert usage.cache_write == bill.cache_write_5m + bill.cache_write_1h
    assert usage.output == bill.output + bill.thoughts
    assert usage.cost.total == pytest.approx(bill.dollars)


_FIVE_BREAKPOINTS = {
    "model": "claude-sonnet-4-5",
    "system": [_mark({"type": "text", "text": f"part {i}"}) for i in range(5)],
    "messages": _USER,
}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_FIVE_BREAKPOINTS, "A maximum of 4 blocks with cache_control"),
        ({"model": "claude-sonnet-4-5", "messages": ["hi"]}, "'str' object has no attribute"),
        ({"model": "claude-sonnet-4-5", "messages": 7}, "'int' object is not iterable"),
    ],
)
async def test_a_request_the_service_refuses_is_http_400(body: Any, message: str) -> None:
    biller = Biller(_SCRIPT)
    async with trio.open_nursery() as nursery:
        server = SSEServer()
        server.responses = BillingReplies(server, biller)
        url = await server.start(nursery)
        async with httpx2.AsyncClient() as client:
            with trio.fail_after(30):
                response = await client.post(url + "/v1/messages", json=body)
        nursery.cancel_scope.cancel()
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]
    assert biller.bills == []
