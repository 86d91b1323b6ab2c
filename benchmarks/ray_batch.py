"""B12r: a batch of 10,000 items on the scripted model through ``run_ray_batch`` on a
local Ray runtime, with 1 and 2 workers, beside ``run_batch`` in one process.

Each item is one prompt answered in one scripted reply, its result appended and
fsync'd as in B12. The figure is items per second, wall time from the call to its
return (the Ray runtime is started once, before, and its worker processes warmed by a
first small batch); the floor is the same batch through ``run_batch`` in this process.
``also`` has the 1-worker run and the scaling from 1 to 2 workers. On a 2-core machine
the driver (which writes the file) shares the cores with the workers, so 2 workers
cannot reach twice 1. Needs the ``ray`` extra; run only when named.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

from benchmarks._common import Figure, alternating, figure
from trio_agent import Agent
from trio_agent.batch import BatchItem, run_batch
from trio_agent.testing import reply, scripted_model

_ITEMS = 10_000
_CONCURRENCY = 64


def _make_agent(item: BatchItem) -> Agent:
    return Agent(scripted_model([reply(f"answer to {item.id}")]))


def _items(count: int) -> list[BatchItem]:
    return [BatchItem(id=f"item-{n}", prompt=f"question {n}") for n in range(count)]


def _rate(workers: int | None, items: list[BatchItem]) -> float:
    """Items per second of one batch: through ``run_ray_batch`` on ``workers`` workers,
    or ``run_batch`` in this process (None)."""
    from trio_agent.ray import run_ray_batch

    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "results.jsonl"

        async def main() -> None:
            if workers is None:
                summary = await run_batch(items, _make_agent, out=out, concurrency=_CONCURRENCY)
            else:
                summary = await run_ray_batch(
                    items, _make_agent, out=out, workers=workers, concurrency=_CONCURRENCY
                )
            if summary.done != len(items):  # a figure only of a batch that did its work
                raise RuntimeError(f"B12r: {summary.done} of {len(items)} items done")

        start = time.perf_counter()
        trio.run(main)
        return len(items) / (time.perf_counter() - start)


def bench_b12r(repeats: int, count: int = _ITEMS) -> Figure:
    import ray
    import ray.cloudpickle

    # the factory goes to the workers by value: they need not import the benchmarks
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    items = _items(count)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        _rate(2, _items(200))  # the workers' processes start here, not in a sample
        two, one, local = alternating(
            repeats, lambda: _rate(2, items), lambda: _rate(1, items), lambda: _rate(None, items)
        )
    finally:
        if started:
            ray.shutdown()
    scaling = statistics.median(a / b for a, b in zip(two, one, strict=True))
    return figure(
        two,
        local,
        "items/s",
        lower_is_better=False,
        floor_title="run_batch in one process",
        detail=f"{count:,} items, {_CONCURRENCY} agents at once per worker; "
        f"2 workers / 1 worker: {scaling:.2f}x",
        scaling=scaling,
        also={
            "one_worker": figure(
                one, local, "items/s", lower_is_better=False, title="1 worker on Ray"
            ),
        },
    )
