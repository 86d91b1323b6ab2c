"""The loop's own cost, beside the cost of bare Trio, measured in the same run.

    python -m benchmarks            # a table
    python -m benchmarks --json     # one JSON object keyed by figure id
    python benchmarks/run.py B1     # only some figures

Every figure runs on the scripted (faux) model with no network, several
times; the table gives the median and the spread (min-max). Beside each is
its *floor*: what the same number of irreducible Trio operations costs on
this machine in this run — bare checkpoints, awaited no-op callbacks, task
spawns, memory-channel sends — and the ratio of the two. Absolute times move
with the machine; the ratios do not move much. The samples of a figure and of
its floor are taken in turn (ours, the floor, ours, ...), so that a burst of
noise on the machine falls on both alike.

Figures (performance.md), by family; each module says what its figures and
their floors are:

- :mod:`benchmarks.loop`: B1 (loop overhead per turn), B1a (the same through
  ``Agent``), B2 (parallel fan-out), B5 (flat growth).
- :mod:`benchmarks.streaming`: B3 (streaming deltas), B4 (bursts into a
  subscriber that reads after the run), B8 (a provider's stream on loopback).
- :mod:`benchmarks.concurrency`: B6 (abort latency; with B6m, an abort
  during one MCP call over stdio, when the ``mcp`` extra is installed), B7
  (memory and abort of concurrent runs).
- :mod:`benchmarks.pool`: the connections family, B9 (a chat of 100 prompts
  over loopback TLS, beside a new client per prompt) and B10 (1,000
  concurrent agents on one loopback server in another process, bursty and
  paced, beside the official openai SDK; B10x: the same at 1,000, 5,000 and
  10,000 agents, run only when named).
- :mod:`benchmarks.cost`: B11 (the dollars of a 30-request tool session on
  claude-sonnet-4-5, gpt-4.1 and gemini-2.5-flash, billed by a loopback
  server that follows each service's documented prompt cache,
  :mod:`benchmarks.billing`; beside pi-ai 1.6.0 on the same server, and the
  floor: every turn reading the whole earlier prompt from the cache).
- :mod:`benchmarks.batch`: B12 (10,000 items through ``run_batch``, CPU per
  item and items per second, beside the same agents started by hand in one
  nursery, each result fsync'd), B12k (a batch killed with ``kill -9`` at
  half its items, then resumed: items lost and finished twice, and the
  rerun's time beside a fresh batch of the items left).
- :mod:`benchmarks.ray_batch`: B12r (a batch of 10,000 scripted items on a
  local Ray runtime with 1 and 2 workers, beside ``run_batch`` in one process;
  run only when named, with the ``ray`` extra).
- :mod:`benchmarks._common`: what they share (timing, sampling in turn, the
  figure record, the floors of several families).

This module holds the table of figures and the command line.

Only B8, B9, B10 and B11 touch the network (loopback; the server in the
same process, but B10's, in another; B11 also runs node for pi-ai's side,
installing pi-ai with npm on first use). A figure may carry sub-figures
(``also``: B4's linearity, B6m, B7's abort time, B10's paced run and B10x's
other scales, B11's other models and pi-ai, B12's items per second and
unsynced hand loop), a ``detail`` line, and a
``floor_title`` when its floor is a reference other than bare Trio (B9's new
client per prompt, B10's openai SDK, B11's dollars of a perfect
cache, B12's hand-written loop, B12k's fresh batch of the items left); all are
in the table and in ``--json``. B12k runs its batches in child processes
(``python -m benchmarks.batch child ...``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import Figure
from benchmarks.batch import bench_b12, bench_b12k
from benchmarks.concurrency import bench_b6, bench_b7
from benchmarks.cost import bench_b11
from benchmarks.loop import bench_b1, bench_b1a, bench_b2, bench_b5
from benchmarks.pool import bench_b9, bench_b10, bench_b10x
from benchmarks.ray_batch import bench_b12r
from benchmarks.streaming import bench_b3, bench_b4, bench_b8

BENCHMARKS: dict[str, tuple[str, Callable[[int], Figure], int]] = {
    "B1": ("loop overhead per turn (2,000 turns, one no-op tool each)", bench_b1, 9),
    "B1a": ("the same through Agent, one listener", bench_b1a, 9),
    "B2": ("parallel fan-out (1,000 no-op tools, whole run)", bench_b2, 15),
    "B3": ("streaming (100,000 one-character deltas)", bench_b3, 5),
    "B4": ("bursts (100,000 deltas into events(), drained after the run)", bench_b4, 5),
    "B5": ("flat growth (B1: turns 1,900-2,000 / turns 1-100, per turn)", bench_b5, 5),
    "B6": ("abort latency (1,000 sleeping tools, Agent.abort() to return)", bench_b6, 15),
    "B7": ("concurrent runs (10,000 Agents, each in a sleeping tool)", bench_b7, 3),
    "B8": ("provider stream (20 MB of OpenAI chat SSE on loopback)", bench_b8, 5),
    "B9": ("a chat of 100 prompts over loopback TLS, one pool", bench_b9, 3),
    "B10": (
        "a server's worth of agents (1,000 on one pool, a server in another process)",
        bench_b10,
        1,
    ),
    "B10x": ("B10 at 1,000, 5,000 and 10,000 agents (about 25 minutes)", bench_b10x, 1),
    "B11": (
        "the dollars of a 30-request tool session, billed as each service caches",
        bench_b11,
        1,
    ),
    "B12": ("a batch of 10,000 items, beside the same agents started by hand", bench_b12, 5),
    "B12k": ("resume after kill -9 at 50% (2,000 items)", bench_b12k, 1),
    "B12r": ("a batch of 10,000 scripted items on a local Ray runtime, 2 workers", bench_b12r, 3),
}


# Figures run only when named: B10x takes about 25 minutes; B12r needs Ray.
_ONLY_BY_NAME = frozenset({"B10x", "B12r"})


def _format(value: float, unit: str) -> str:
    if unit == "events/s":
        return f"{value / 1e6:.2f} M/s"
    if unit == "x":
        return f"{value:.2f}"
    if unit == "$":
        return f"${value:.4f}"
    if unit == "items/s":
        return f"{value:,.0f} items/s"
    if unit == "MB/s":
        return f"{value:.1f} MB/s"
    return f"{value:.1f} {unit.split('/')[0].replace('us', 'µs')}"


def _lines(result: Figure, indent: str) -> str:
    unit = result["unit"]
    lines = [
        f"{indent}{result.get('client', 'trio_agent')} {_format(result['median'], unit)} "
        f"(min {_format(result['min'], unit)}, max {_format(result['max'], unit)}, "
        f"n={result['repeats']})",
        f"{indent}{result.get('floor_title', 'Trio floor')} {_format(result['floor'], unit)}   "
        f"ratio {result['ratio']:.2f}x the floor",
    ]
    for name, sub in result.get("also", {}).items():
        lines.append(f"{indent}{sub.get('title', name)}:")
        lines.append(_lines(sub, indent + "    "))
    if "detail" in result:
        lines.append(f"{indent}{result['detail']}")
    return "\n".join(lines)


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
    chosen = [by_name.get(f.upper(), f) for f in args.figures] or [
        name for name in BENCHMARKS if name not in _ONLY_BY_NAME
    ]
    unknown = [f for f in chosen if f not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    results: dict[str, Figure] = {}
    for figure in chosen:
        title, bench, repeats = BENCHMARKS[figure]
        result = bench(args.repeats or repeats)
        results[figure] = result
        if not args.json:
            print(f"{figure}  {title}\n{_lines(result, '    ')}", flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
