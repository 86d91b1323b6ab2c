"""trio_agent.batch: many items through agents, results saved as each ends, resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests._providers import fixture
from tests._support import make_tool
from tests.test_transport import model as chat_model
from trio_agent import Agent, AgentMessage, AssistantMessage, Cost, Usage, UserMessage, loads
from trio_agent.batch import BatchItem, BatchResult, RateLimits, read_results, run_batch
from trio_agent.providers import faux
from trio_agent.testing import ScriptedResponse, open_sse_server

TEXT = fixture("openai_chat", "text.sse")
ROOT = Path(__file__).resolve().parent.parent


def items(count: int) -> list[BatchItem]:
    return [BatchItem(id=f"item-{n}", prompt=f"question {n}") for n in range(count)]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def answering(**reply: Any) -> Any:
    """A factory whose agents answer every prompt with one scripted reply."""

    def make(item: BatchItem) -> Agent:
        return Agent(faux.model([faux.reply(f"answer to {item.id}", **reply)]))

    return make


async def test_each_item_ends_in_the_file_once_with_its_transcript_and_usage(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.jsonl"
    usage = Usage(input=10, output=5, reasoning=2, total_tokens=15, cost=Cost(total=0.25))
    summary = await run_batch(items(5), answering(usage=usage), out=out, concurrency=2)
    assert (summary.done, summary.failed, summary.skipped) == (5, {}, 0)
    assert (summary.tokens, summary.cost) == (75, 1.25)
    records = lines(out)
    assert sorted(record["id"] for record in records) == [f"item-{n}" for n in range(5)]
    for record in records:
        assert record["status"] == "done"
        assert record["stop"] == "stop"
        assert record["usage"]["totalTokens"] == 15
        assert record["usage"]["reasoning"] == 2  # every field of the usage is summed
        messages = loads(json.dumps(record["messages"]))
        assert messages[0].content[0].text == "question " + record["id"].removeprefix("item-")
        assert isinstance(messages[1], AssistantMessage)
        assert messages[1].text == f"answer to {record['id']}"
    results = read_results(out)
    assert set(results) == {f"item-{n}" for n in range(5)}
    assert results["item-3"].usage.cost.total == 0.25


async def test_a_transcript_is_continued_and_only_the_new_replies_count(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    old = AssistantMessage(content=(), usage=Usage(total_tokens=1000))
    transcript: list[AgentMessage] = [UserMessage.text("hi"), old, UserMessage.text("again")]
    item = BatchItem(id="t", transcript=transcript)
    summary = await run_batch([item], answering(usage=Usage(total_tokens=7)), out=out)
    assert summary.tokens == 7
    (result,) = read_results(out).values()
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_failed_items_are_counted_by_kind_and_the_batch_goes_on(tmp_path: Path) -> None:
    def make(item: BatchItem) -> Agent:
        if item.id == "item-0":
            raise RuntimeError("no agent for item-0")
        if item.id == "item-1":
            return Agent(faux.model([faux.error("too long", kind="context_overflow")]))
        return Agent(faux.model(["fine"]))

    out = tmp_path / "results.jsonl"
    summary = await run_batch(items(4), make, out=out)
    assert summary.done == 2
    assert summary.failed == {"exception": 1, "context_overflow": 1}
    results = read_results(out)
    assert results["item-0"].error == "RuntimeError: no agent for item-0"
    assert results["item-1"].error_kind == "context_overflow"


def test_bad_arguments_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="needs a prompt or a transcript"):
        BatchItem(id="x")
    with pytest.raises(ValueError, match=r"BatchItem\.id must be a non-empty str"):
        BatchItem(id="", prompt="p")
    with pytest.raises(ValueError, match="tokens_per_minute must be finite and above 0, not 0"):
        RateLimits(tokens_per_minute=0)
    with pytest.raises(TypeError, match=r"requests_per_minute must be an int or None, not 2\.5"):
        RateLimits(requests_per_minute=2.5)  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(ValueError, match="item id 'a' appears more than once"):
            await run_batch(
                [BatchItem(id="a", prompt="1"), BatchItem(id="a", prompt="2")],
                answering(),
                out="unused.jsonl",
            )
        with pytest.raises(ValueError, match="concurrency must be an int of at least 1, not 0"):
            await run_batch([], answering(), out="unused.jsonl", concurrency=0)

    trio.run(main)


# -- resume ---------------------------------------------------------------------------------


async def test_a_rerun_skips_finished_ids_and_rewrites_a_cut_last_line(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    await run_batch(items(2), answering(), out=out)
    whole = out.read_bytes()
    with out.open("ab") as file:
        file.write(b'{"id":"item-2","status":"do')  # a crash mid-line
    with pytest.raises(FileExistsError, match="already holds results"):
        await run_batch(items(4), answering(), out=out)
    ran: list[str] = []

    def make(item: BatchItem) -> Agent:
        ran.append(item.id)
        agent: Agent = answering()(item)
        return agent

    summary = await run_batch(items(4), make, out=out, resume=True)
    assert sorted(ran) == ["item-2", "item-3"]
    assert (summary.done, summary.skipped) == (2, 2)
    data = out.read_bytes()
    assert data.startswith(whole)
    assert [record["id"] for record in lines(out)].count("item-2") == 1
    assert sorted(read_results(out)) == [f"item-{n}" for n in range(4)]


# -- cancellation ---------------------------------------------------------------------------


async def test_a_cancelled_batch_records_every_running_item_as_aborted(
    tmp_path: Path, autojump_clock: Any
) -> None:
    out = tmp_path / "results.jsonl"
    updates: dict[str, int] = {}
    scope = trio.CancelScope()

    def make(item: BatchItem) -> Agent:
        if item.id == "item-0":
            return Agent(faux.model(["quick"]))
        agent = Agent(faux.model([faux.reply("slow " * 20, chunk_size=5)]))

        async def on_event(event: Any) -> None:
            if event.type == "message_update":
                updates[item.id] = updates.get(item.id, 0) + 1
                if updates[item.id] == 3:  # a partial reply: hold it there
                    if len(updates) == 3:  # every running item holds one: cancel
                        scope.cancel()
                    await trio.sleep_forever()

        agent.subscribe(on_event)
        return agent

    with scope:
        await run_batch(items(5), make, out=out, concurrency=3)
    assert scope.cancelled_caught
    results = read_results(out)
    assert results["item-0"].status == "done"
    aborted = [result for result in results.values() if result.status == "aborted"]
    assert len(aborted) == 3  # the three running; item-4 never started
    assert "item-4" not in results
    for result in aborted:
        reply = result.messages[-1]
        assert isinstance(reply, AssistantMessage)
        assert reply.stop_reason == "aborted"
        assert reply.text.startswith("slow slow")
    # a rerun runs the aborted and the unstarted items, and skips the finished one
    ran: list[str] = []

    def quick(item: BatchItem) -> Agent:
        ran.append(item.id)
        return Agent(faux.model(["done now"]))

    summary = await run_batch(items(5), quick, out=out, resume=True)
    assert sorted(ran) == [f"item-{n}" for n in range(1, 5)]
    assert summary.done == 4
    assert all(result.status == "done" for result in read_results(out).values())


# -- rate limits ----------------------------------------------------------------------------


async def test_a_429_pauses_every_agent_on_the_provider_and_its_item_runs_again(
    tmp_path: Path, clock: Any
) -> None:
    limited = ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=10)
    out = tmp_path / "results.jsonl"
    ended: dict[str, float] = {}

    def on_result(result: BatchResult) -> None:
        ended[result.id] = trio.current_time()

    with trio.fail_after(30):
        async with open_sse_server(limited, *[ScriptedResponse(body=TEXT)] * 4) as server:

            def make(item: BatchItem) -> Agent:
                return Agent(chat_model(server.url), api_key="test-key", max_retries=0)

            summary = await run_batch(items(4), make, out=out, concurrency=2, on_result=on_result)
            assert len(server.requests) == 5
    assert summary.done == 4
    assert summary.failed == {}
    # one item ran beside the rate-limited one before the 429 came; everything after
    # waited for the pause the 429 asked for
    start = min(ended.values())
    assert sorted(time - start >= 10 for time in ended.values()) == [False, True, True, True]
    assert summary.rate_limit_wait >= 9.9
    results = read_results(out)
    assert sorted(result.attempts for result in results.values()) == [1, 1, 1, 2]
    assert [record["id"] for record in lines(out)].count("item-0") == 1
    assert len(lines(out)) == 4


async def test_an_item_rate_limited_past_its_retries_fails_as_rate_limit(
    tmp_path: Path, autojump_clock: Any
) -> None:
    def make(item: BatchItem) -> Agent:
        return Agent(faux.model([faux.error("slow down", kind="rate_limit", retry_after=5)]))

    out = tmp_path / "results.jsonl"
    summary = await run_batch(items(1), make, out=out, rate_limit_retries=2)
    assert summary.failed == {"rate_limit": 1}
    assert read_results(out)["item-0"].attempts == 3
    assert trio.current_time() == pytest.approx(10)


async def test_a_servers_pause_is_cut_to_max_pause(tmp_path: Path, autojump_clock: Any) -> None:
    def make(item: BatchItem) -> Agent:
        return Agent(faux.model([faux.error("wait", kind="rate_limit", retry_after=1e12)]))

    out = tmp_path / "results.jsonl"
    await run_batch(items(1), make, out=out, rate_limit_retries=1, max_pause=30)
    assert trio.current_time() == pytest.approx(30)


def recording_factory(starts: list[float], tokens: int) -> Any:
    async def stream(model: Any, context: Any, options: Any, emit: Any) -> AssistantMessage:
        starts.append(trio.current_time())
        message: AssistantMessage = await faux.stream(model, context, options, emit)
        return message

    def make(item: BatchItem) -> Agent:
        reply = faux.reply("ok", usage=Usage(total_tokens=tokens))
        return Agent(faux.model([reply]), stream_fn=stream)

    return make


async def test_requests_per_minute_hold_on_virtual_time(
    tmp_path: Path, autojump_clock: Any
) -> None:
    starts: list[float] = []
    limits = {"faux": RateLimits(requests_per_minute=2)}
    make = recording_factory(starts, 1)
    await run_batch(items(5), make, out=tmp_path / "r.jsonl", concurrency=5, rate_limits=limits)
    assert starts == [0, 0, 60, 60, 120]


async def test_tokens_per_minute_hold_on_virtual_time(tmp_path: Path, autojump_clock: Any) -> None:
    starts: list[float] = []
    limits = {"faux": RateLimits(tokens_per_minute=250)}
    make = recording_factory(starts, 100)
    await run_batch(items(6), make, out=tmp_path / "r.jsonl", concurrency=1, rate_limits=limits)
    # three replies of 100 tokens pass 250; the next waits for the first to leave the minute
    assert starts == [0, 0, 0, 60, 60, 60]
    starts.clear()
    await run_batch(items(6), make, out=tmp_path / "other.jsonl", concurrency=6, rate_limits={})
    assert len(starts) == 6
    assert set(starts) == {starts[0]}  # no limits: none waits


# -- kill -9 --------------------------------------------------------------------------------

CHILD = """
import sys, trio
from trio_agent import Agent
from trio_agent.batch import BatchItem, run_batch
from trio_agent.providers import faux

def make(item):
    return Agent(faux.model([faux.reply("x" * 40, chunk_size=4, chunk_delay=0.01)]))

def said(result):
    print(result.id, flush=True)

items = [BatchItem(id=f"item-{n}", prompt="go") for n in range(40)]
trio.run(lambda: run_batch(items, make, out=sys.argv[1], concurrency=4, resume=True,
                           on_result=said))
"""


def test_a_batch_killed_mid_run_loses_nothing_and_finishes_nothing_twice(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", CHILD, str(out)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, env=env, cwd=ROOT) as child:
        assert child.stdout is not None
        for _ in range(10):  # ten items written, the others still running or waiting
            assert child.stdout.readline()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    before = [record["id"] for record in lines(out)]
    assert 10 <= len(before) < 40
    subprocess.run(command, check=True, env=env, cwd=ROOT, timeout=60, capture_output=True)
    after = [record["id"] for record in lines(out)]
    assert after[: len(before)] == before
    assert sorted(after) == sorted(f"item-{n}" for n in range(40))
    assert {record["status"] for record in lines(out)} == {"done"}


async def test_ctrl_c_escapes_as_itself_and_the_running_items_are_aborted(
    tmp_path: Path, autojump_clock: Any
) -> None:
    out = tmp_path / "results.jsonl"
    started: set[str] = set()
    all_streaming = trio.Event()

    def make(item: BatchItem) -> Agent:
        agent = Agent(faux.model([faux.reply("slow " * 20, chunk_size=5)]))

        async def on_event(event: Any) -> None:
            if event.type == "message_update":
                started.add(item.id)
                if len(started) == 3:
                    all_streaming.set()
                if item.id != "item-0":
                    await trio.sleep_forever()  # a partial reply, held
                await all_streaming.wait()
                raise KeyboardInterrupt  # as Trio delivers a Ctrl-C

        agent.subscribe(on_event)
        return agent

    with pytest.raises(KeyboardInterrupt):  # itself, not in a group
        await run_batch(items(5), make, out=out, concurrency=3)
    results = read_results(out)
    assert sorted(results) == ["item-0", "item-1", "item-2"]
    assert {result.status for result in results.values()} == {"aborted"}


async def test_an_on_result_that_raises_stops_the_batch_with_that_exception_alone(
    tmp_path: Path, autojump_clock: Any
) -> None:
    """The line of the result it was called with is written first; the other running
    item is stopped as an abort stops it (its line ``aborted``); the file holds whole
    lines only, and a rerun finishes the rest, each item once."""
    out = tmp_path / "results.jsonl"
    seen: list[str] = []

    class Enough(Exception):
        pass

    def on_result(result: BatchResult) -> None:
        seen.append(result.id)
        if len(seen) == 2:
            raise Enough(f"enough at {result.id}")

    def make(item: BatchItem) -> Agent:
        if item.id in ("item-0", "item-1"):
            return Agent(faux.model(["quick"]))
        agent = Agent(faux.model([faux.reply("slow " * 20, chunk_size=5)]))

        async def hold(event: Any) -> None:
            if event.type == "message_update":
                await trio.sleep_forever()  # a partial reply, held

        agent.subscribe(hold)
        return agent

    with pytest.raises(Enough) as caught:  # itself, not in a group
        await run_batch(items(6), make, out=out, concurrency=3, on_result=on_result)
    assert type(caught.value) is Enough
    assert str(caught.value) == f"enough at {seen[1]}"
    written = out.read_bytes()
    assert written.endswith(b"\n")
    records = lines(out)  # every line whole
    assert [record["id"] for record in records] == seen  # each line told once, in order
    assert sorted(seen[:2]) == ["item-0", "item-1"]
    assert [record["status"] for record in records[:2]] == ["done", "done"]
    # the held items are stopped (item-3 may have had its slot and not started yet)
    assert "item-2" in seen[2:]
    assert {record["status"] for record in records[2:]} == {"aborted"}
    summary = await run_batch(items(6), answering(), out=out, resume=True)
    assert summary.skipped == 2
    finished = [record["id"] for record in lines(out) if record["status"] == "done"]
    assert sorted(finished) == [f"item-{n}" for n in range(6)]


def test_a_line_that_is_not_a_result_is_named(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.write_bytes(b'{"id": "a", "status": "done"}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"results\.jsonl', line 2: not a result line"):
        read_results(out)
    out.write_bytes(b'{"id": "a", "status": "finished"}\n')
    with pytest.raises(ValueError, match="result 'a' has an unknown status 'finished'"):
        read_results(out)

    async def rerun() -> None:
        await run_batch(items(1), answering(), out=out, resume=True)

    with pytest.raises(ValueError, match="unknown status 'finished'"):
        trio.run(rerun)
    # the other fields are checked for their types too
    out.write_bytes(b'{"id": "a", "status": "done", "attempts": "2"}\n')
    with pytest.raises(ValueError, match="line 1: result 'a': attempts must be an int"):
        read_results(out)
    out.write_bytes(b'{"id": "a", "status": "error", "error": ["boom"]}\n')
    with pytest.raises(ValueError, match="result 'a': error must be a string or null"):
        read_results(out)


async def test_an_agent_handed_out_again_passes_the_gate_once_a_request(
    tmp_path: Path, autojump_clock: Any
) -> None:
    """A factory may return the same agent for every item: each request still counts once
    against the provider's requests per minute."""
    starts: list[float] = []
    agent: Agent = recording_factory(starts, 1)(BatchItem(id="x", prompt="go"))

    def make(item: BatchItem) -> Agent:
        agent.replace_messages([])
        return agent

    limits = {"faux": RateLimits(requests_per_minute=2)}
    await run_batch(items(4), make, out=tmp_path / "r.jsonl", concurrency=1, rate_limits=limits)
    assert starts == [0, 0, 60, 60]
    # the agent leaves the batch as it came: its own requests pass no gate of the batch
    agent.replace_messages([])
    await agent.prompt("after the batch")
    assert starts == [0, 0, 60, 60, 60]


# -- the results file: each line durable before its result is reported ------------------------


def together(count: int) -> Any:
    """A factory whose agents all end at once: each waits at its ``agent_end`` until
    every one of the ``count`` has got there."""
    arrived = 0
    everyone = trio.Event()

    def make(item: BatchItem) -> Agent:
        agent: Agent = answering()(item)

        async def wait_for_the_others(event: Any) -> None:
            nonlocal arrived
            if event.type == "agent_end":
                arrived += 1
                if arrived == count:
                    everyone.set()
                await everyone.wait()

        agent.subscribe(wait_for_the_others)
        return agent

    return make


async def test_items_ending_together_share_an_fsync_and_each_line_is_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs: list[int] = []
    real_fsync = os.fsync

    def counted(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    out = tmp_path / "results.jsonl"
    seen: list[str] = []

    def on_result(result: BatchResult) -> None:
        # the result's line is in the file, whole, when the result is reported
        ids = [json.loads(line)["id"] for line in out.read_bytes().splitlines()]
        assert result.id in ids
        assert len(fsyncs) >= 1
        seen.append(result.id)

    with trio.fail_after(30):
        summary = await run_batch(
            items(50), together(50), out=out, concurrency=50, on_result=on_result
        )
    assert summary.done == 50
    assert sorted(seen) == sorted(f"item-{n}" for n in range(50))
    assert sorted(record["id"] for record in lines(out)) == sorted(seen)
    assert out.read_bytes().endswith(b"\n")
    # fifty lines, one fsync for the first and one for the forty-nine that came during it
    assert 1 <= len(fsyncs) <= 2, len(fsyncs)


async def test_a_result_is_reported_only_after_the_fsync_that_follows_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each item's line was in the file when an fsync that reported it began."""
    out = tmp_path / "results.jsonl"
    synced: set[str] = set()  # the ids whose lines were in the file at an fsync
    real_fsync = os.fsync

    def recording(fd: int) -> None:
        real_fsync(fd)
        synced.update(json.loads(line)["id"] for line in out.read_bytes().splitlines())

    monkeypatch.setattr(os, "fsync", recording)
    reported: list[str] = []

    def on_result(result: BatchResult) -> None:
        assert result.id in synced, result.id
        reported.append(result.id)

    with trio.fail_after(30):
        await run_batch(items(40), answering(), out=out, concurrency=8, on_result=on_result)
    assert len(reported) == 40


async def test_a_failed_write_fails_every_item_of_its_group_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    reported: list[str] = []
    with trio.fail_after(30), pytest.raises(OSError, match="No space left on device") as caught:
        await run_batch(
            items(5), together(5), out=tmp_path / "r.jsonl", concurrency=5,
            on_result=lambda result: reported.append(result.id),
        )  # fmt: skip
    assert reported == []  # no item of a group that was not written is reported
    notes = " ".join(getattr(caught.value, "__notes__", []))
    assert "the line of 'item-" in notes  # the others of the group, each by name
    assert "not written to" in notes
    assert "r.jsonl" in notes


async def test_an_items_usage_says_the_total_came_from_the_provider_only_when_every_reply_did(
    tmp_path: Path,
) -> None:
    billed = Usage(total_tokens=5, cost=Cost(total=0.5, total_from_provider=True))
    estimated = Usage(total_tokens=5, cost=Cost(total=0.5))
    call = faux.reply(faux.tool_call("missing", {}), usage=billed)

    def make(item: BatchItem) -> Agent:
        answer = faux.reply("ok", usage=billed if item.id == "item-0" else estimated)
        return Agent(faux.model([call, answer]))

    out = tmp_path / "results.jsonl"
    await run_batch(items(2), make, out=out)
    results = read_results(out)
    assert results["item-0"].usage.cost == Cost(total=1.0, total_from_provider=True)
    assert results["item-1"].usage.cost == Cost(total=1.0, total_from_provider=False)


async def test_after_a_failed_write_no_line_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first fsync fails; the items still running are then stopped, and their
    # aborted lines are not written after the line that may be cut short
    real_fsync = os.fsync
    calls: list[int] = []

    def first_fails(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", first_fails)

    async def wait(tool_call_id: str, args: dict[str, Any], on_update: Any) -> Any:
        await trio.sleep_forever()

    def make(item: BatchItem) -> Agent:
        if item.id == "item-0":
            agent: Agent = answering()(item)
            return agent
        calling = faux.model([faux.reply(faux.tool_call("wait", {}))])
        return Agent(calling, tools=[make_tool("wait", wait)])

    out = tmp_path / "r.jsonl"
    with trio.fail_after(30), pytest.raises(OSError, match="Input/output error"):
        await run_batch(items(3), make, out=out, concurrency=3)
    assert len(calls) == 1  # nothing was written, nor fsync'd, after the failed write
    assert [record["id"] for record in lines(out)] == ["item-0"]


async def test_a_file_with_results_is_refused_without_reading_it(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_bytes(b"not a result line\n")  # never read: its size refuses it
    with pytest.raises(FileExistsError, match="already holds results"):
        await run_batch(items(1), answering(), out=out)
