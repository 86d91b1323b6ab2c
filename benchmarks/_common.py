"""What every figure shares: timing, sampling in turn, the figure record, common floors.

:func:`timed` is the seconds one ``trio.run`` spends in a function (startup
excluded); :func:`alternating` takes the samples of a figure and of its
floors in turn, so that a burst of noise on the machine falls on all alike;
:func:`figure` makes the record the table and ``--json`` print (median,
spread, the floor's median, their ratio, and extras). The floors here serve
more than one family: awaited no-op calls (B1, B3), and the loop's side of
a stream event in bare Python (B2, B3).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from trio_agent import AgentEvent, MessageUpdate

Figure = dict[str, Any]


async def noop_listener(event: AgentEvent) -> None:
    return None


def timed(fn: Callable[[], Awaitable[Any]]) -> float:
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


def alternating(repeats: int, *measures: Callable[[], float]) -> list[list[float]]:
    """``repeats`` samples of each measure, taken in turn (ours, its floor, ...): a
    burst of noise on the machine falls on all of them alike, not on one's samples."""
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(repeats):
        for taken, measure in zip(samples, measures, strict=True):
            taken.append(measure())
    return samples


def figure(
    samples: list[float],
    floor_samples: list[float],
    unit: str,
    *,
    lower_is_better: bool,
    **extra: Any,
) -> Figure:
    """A figure: median and spread, the floor's median, their ratio, and ``extra``
    (``also``: sub-figures by key; ``title``: a sub-figure's name in the table;
    ``detail``: a line for the table; numbers)."""
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
        **extra,
    }


# --- floors shared by several figures -------------------------------------------------------------


async def awaited_noops(count: int) -> None:
    callback = noop_listener
    event = None
    for _ in range(count):
        await callback(event)  # type: ignore[arg-type]  # None: the listener reads nothing


def never_cancelled() -> bool:
    """The cheapest abort check: a probe that says no."""
    return False


async def bare_stream_event(event: Any) -> None:
    """The loop's side of a stream event, in bare Python: its ``message_update``, an
    abort check, the awaited listener."""
    update = MessageUpdate(event)
    if never_cancelled():
        await trio.lowlevel.checkpoint_if_cancelled()
    await noop_listener(update)
