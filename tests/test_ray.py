"""trio_agent.ray: the batch on a local Ray runtime (marked ``ray``: run apart, by
``pytest -m ray``, since a Ray runtime takes seconds to start)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import ray
import ray.cloudpickle
import trio

from tests._providers import fixture
from tests.test_transport import model as chat_model
from trio_agent import Agent, AssistantMessage, Usage
from trio_agent.batch import BatchItem, BatchResult, RateLimits, read_results, run_batch
from trio_agent.providers import faux
from trio_agent.ray import _Limiter, _LimiterActor, _SharedGates, run_ray_batch
from trio_agent.testing import ScriptedResponse, open_sse_server

pytestmark = pytest.mark.ray

# the factories below are sent to Ray's workers by value, as a script's would be
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

TEXT = fixture("openai_chat", "text.sse")


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def items(count: int, prefix: str = "item") -> list[BatchItem]:
    return [BatchItem(id=f"{prefix}-{n}", prompt=f"question {n}") for n in range(count)]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def answering(item: BatchItem) -> Agent:
    usage = Usage(input=3, output=2, total_tokens=5)
    return Agent(faux.model([faux.reply(f"answer to {item.id} from {os.getpid()}", usage=usage)]))


async def test_every_item_ends_in_the_file_once_and_a_rerun_skips_them(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    seen: list[str] = []

    def on_result(result: BatchResult) -> None:
        seen.append(result.id)

    with trio.fail_after(60):
        summary = await run_ray_batch(
            items(60), answering, out=out, workers=2, chunk_size=7, on_result=on_result
        )
    assert (summary.done, summary.failed, summary.skipped) == (60, {}, 0)
    assert summary.tokens == 300
    records = lines(out)
    assert Counter(record["id"] for record in records) == Counter(f"item-{n}" for n in range(60))
    assert sorted(seen) == sorted(record["id"] for record in records)
    results = read_results(out)
    answers = {key: result.messages[-1] for key, result in results.items()}
    assert all(isinstance(answer, AssistantMessage) for answer in answers.values())
    texts = {key: cast(AssistantMessage, answer).text for key, answer in answers.items()}
    assert texts["item-5"].startswith("answer to item-5 from ")
    # the items ran in Ray's worker processes, not in this one
    pids = {text.rsplit(" ", 1)[1] for text in texts.values()}
    assert str(os.getpid()) not in pids
    # the same file, resumed, with more items: only the new ones run
    with trio.fail_after(60):
        again = await run_ray_batch(items(65), answering, out=out, resume=True)
    assert (again.done, again.skipped) == (5, 60)
    assert len(lines(out)) == 65
    # and the in-process runner reads the same file the same way
    with trio.fail_after(30):
        local = await run_batch(items(65), answering, out=out, resume=True)
    assert (local.done, local.skipped) == (0, 65)


def dying(runs: Path, marker: Path, victim: str) -> Any:
    """A factory that logs each run, and kills its worker process the first time it
    makes ``victim``'s agent."""

    def make(item: BatchItem) -> Agent:
        with runs.open("a") as log:
            log.write(item.id + "\n")
        if item.id == victim and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return answering(item)

    return make


async def test_a_worker_killed_mid_batch_loses_nothing_and_finishes_nothing_twice(
    tmp_path: Path,
) -> None:
    out, runs, marker = tmp_path / "results.jsonl", tmp_path / "runs.log", tmp_path / "killed"
    batch = items(40)
    before_kill: set[str] = set()

    def on_result(result: BatchResult) -> None:
        if not marker.exists():
            before_kill.add(result.id)

    with trio.fail_after(120):
        summary = await run_ray_batch(
            batch,
            dying(runs, marker, "item-6"),
            out=out,
            workers=2,
            concurrency=1,
            chunk_size=10,
            on_result=on_result,
        )
    assert marker.exists()  # a worker was killed
    assert (summary.done, summary.failed) == (40, {})
    assert Counter(record["id"] for record in lines(out)) == Counter(i.id for i in batch)
    ran = Counter(runs.read_text().split())
    twice = {item_id for item_id, count in ran.items() if count > 1}
    # only the killed worker's items ran again, and of those only the ones whose result
    # had not reached this process when it was killed
    assert "item-6" in twice
    assert twice <= {f"item-{n}" for n in range(10)}
    assert not twice & before_kill
    assert max(ran.values()) == 2


def always_dying(item: BatchItem) -> Agent:
    if item.id == "doomed":
        os.kill(os.getpid(), signal.SIGKILL)
    return answering(item)


@pytest.mark.parametrize("retries", [1, 2])
async def test_an_item_that_kills_every_worker_fails_as_worker_lost(
    tmp_path: Path, retries: int
) -> None:
    out = tmp_path / "results.jsonl"
    batch = [BatchItem(id="doomed", prompt="hi"), *items(3)]
    with trio.fail_after(120):
        summary = await run_ray_batch(
            batch, always_dying, out=out, workers=1, chunk_size=4, worker_retries=retries
        )
    # lost with the others (with 2 retries), then alone: it fails by itself
    assert summary.failed == {"worker_lost": 1}
    assert summary.done == 3
    results = read_results(out)
    assert results["doomed"].status == "error"
    assert results["doomed"].attempts == retries + 1
    assert "WorkerCrashedError" in (results["doomed"].error or "")
    assert len(lines(out)) == 4


def to_server(url: str) -> Any:
    def make(item: BatchItem) -> Agent:
        return Agent(chat_model(url), api_key="test-key", max_retries=0)

    return make


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(None, id="no-limits"),
        pytest.param({"openai": RateLimits(requests_per_minute=100_000)}, id="limited"),
    ],
)
async def test_a_429_on_one_worker_pauses_the_other_worker(
    tmp_path: Path, limits: dict[str, RateLimits] | None
) -> None:
    out = tmp_path / "results.jsonl"
    # both workers are warm before the 429, so that both are running when it comes
    with trio.fail_after(60):
        await run_ray_batch(items(4, "warm"), answering, out=tmp_path / "warm.jsonl")
    limited = ScriptedResponse.error(429, {"error": {"message": "Slow down"}}, retry_after=3)
    batch = items(400)
    with trio.fail_after(120):
        async with open_sse_server(limited, *[ScriptedResponse(body=TEXT)] * 400) as server:
            summary = await run_ray_batch(
                batch,
                to_server(server.url),
                out=out,
                workers=2,
                concurrency=1,
                chunk_size=200,
                rate_limits=limits,
            )
            assert len(server.requests) == 401
    assert (summary.done, summary.failed) == (400, {})
    # the rate-limited worker waited its 3 s; the other learned of the pause (at once
    # with limits, within half a second without) and waited most of it too
    assert summary.rate_limit_wait >= 4.5
    results = read_results(out)
    assert sorted(result.attempts for result in results.values())[-2:] == [1, 2]
    assert len(lines(out)) == 400


async def test_the_clusters_requests_per_minute_are_counted_across_workers() -> None:
    limits = {"faux": RateLimits(requests_per_minute=10)}
    limiter = _LimiterActor.remote(limits, 300.0)
    try:
        model = faux.model(["hi"])
        first, second = _SharedGates(limits, 300.0, limiter), _SharedGates(limits, 300.0, limiter)
        with trio.fail_after(30):
            for gates in [first, second] * 5:
                await gates.get(model).enter()
            # the eleventh request, from either worker, waits for the minute to turn
            wait: float = await trio.to_thread.run_sync(ray.get, limiter.start.remote("faux"))
        assert 55 < wait <= 60
    finally:
        ray.kill(limiter)


def test_the_limiter_pauses_on_a_rate_limited_reply_for_at_most_max_pause() -> None:
    limiter = _Limiter({}, max_pause=5.0)
    assert limiter.start("openai") <= 0
    limiter.ended("openai", 0, rate_limited=True, retry_after=1e9)
    assert 4.9 < limiter.start("openai") <= 5.0
    assert limiter.start("anthropic") <= 0  # another provider is not paused


async def test_bad_arguments_are_refused_by_name(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    with pytest.raises(ValueError, match="workers must be an int of at least 1, not 0"):
        await run_ray_batch(items(1), answering, out=out, workers=0)
    with pytest.raises(ValueError, match="chunk_size must be an int of at least 1, not 0"):
        await run_ray_batch(items(1), answering, out=out, chunk_size=0)
    with pytest.raises(ValueError, match="'item-0' appears more than once"):
        await run_ray_batch(items(1) * 2, answering, out=out)
    out.write_text('{"id": "x", "status": "done"}\n')
    with pytest.raises(FileExistsError, match="resume=True"):
        await run_ray_batch(items(1), answering, out=out)


async def test_cancelling_stops_the_workers_and_leaves_whole_lines(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    batch = items(3000)
    got: list[str] = []

    def on_result(result: BatchResult) -> None:
        got.append(result.id)
        if len(got) == 50:
            cancel.cancel()

    with trio.fail_after(120):
        with trio.CancelScope() as cancel:
            await run_ray_batch(batch, answering, out=out, chunk_size=100, on_result=on_result)
        assert cancel.cancelled_caught
        records = lines(out)  # every line whole
        assert 50 <= len(records) < 3000
        assert len({record["id"] for record in records}) == len(records)
        summary = await run_ray_batch(batch, answering, out=out, resume=True)
    assert summary.skipped == len(records)
    assert summary.done == 3000 - len(records)
    assert Counter(record["id"] for record in lines(out)) == Counter(i.id for i in batch)


async def test_more_workers_than_trio_has_threads_by_default(tmp_path: Path) -> None:
    # 45 chunks waiting on Ray at once (the runtime runs 2 at a time): the driver's
    # threads that wait for them do not take the threads the results file needs
    out = tmp_path / "results.jsonl"
    with trio.fail_after(90):
        summary = await run_ray_batch(items(90), answering, out=out, workers=45, chunk_size=2)
    assert summary.done == 90
    assert len(lines(out)) == 90


class Boom(BaseException):
    pass


def booming(item: BatchItem) -> Agent:
    if item.id == "item-3":
        raise Boom("the factory gave up")
    return answering(item)


async def test_a_chunk_that_raises_stops_the_batch_with_its_exception(tmp_path: Path) -> None:
    # not a lost worker: its items are not run again, and the batch raises what it raised
    out = tmp_path / "results.jsonl"
    with trio.fail_after(60), pytest.raises(Boom, match="the factory gave up"):
        await run_ray_batch(items(6), booming, out=out, workers=1, chunk_size=6, concurrency=1)
    assert "worker_lost" not in out.read_text()
