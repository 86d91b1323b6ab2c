"""The batch figures: many items through ``run_batch``, and a rerun after ``kill -9``.

- B12: 10,000 items on the scripted model, 16 at a time, each a rollout: the
  user's prompt, a reply with one tool call, the (no-op) tool's result, and a
  text answer; each item's result appended to a JSONL file in a temporary
  directory. The figure is the process's CPU time (``time.process_time``: the
  worker threads' included) per item, in µs; items per second (wall) is a
  sub-figure. Floor: the same agents started by hand in one nursery — a
  ``trio.Semaphore`` of 16 acquired before each task starts, each task making
  its agent, running ``agent.prompt``, and appending its result (id, status,
  usage, the transcript through ``trio_agent.to_json``) as one JSON line,
  written, flushed and fsync'd in the task itself, blocking the event loop for
  the fsync: each result saved durably as the batch promises, in the fewest
  operations. Also reported: the same hand loop without the fsync (the
  cheapest loop, durable only when the kernel gets to it).
- B12k: resume after ``kill -9`` at 50%: a child process runs a batch of 2,000
  items (16 at a time, each a rollout whose tool awaits ``trio.sleep(0.01)``);
  the parent watches the results file and SIGKILLs the child once half the
  items have lines, then reruns the batch with ``resume=True`` to the end. The
  figure is the rerun's time (inside its ``trio.run``), beside its floor: a
  fresh batch of only the items left, into a new file. Also reported: the
  items lost (ids with no ``done`` line at the end: 0, or the figure fails),
  the items finished twice (ids with more than one ``done`` or ``error`` line:
  0, or the figure fails), and the items that ran again (started before the
  kill and again in the rerun: those running at the kill).

Every sample of B12 checks that its file holds one ``done`` line per item, or
the figure fails loudly. ``python -m benchmarks.batch child ...`` is B12k's
child process.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from benchmarks._common import Figure, alternating, figure
from trio_agent import Agent, AgentTool, ToolResult, ToolUpdate, to_json
from trio_agent.batch import BatchItem, read_results, run_batch
from trio_agent.providers import faux

_ROOT = Path(__file__).resolve().parent.parent
_CONCURRENCY = 16


async def _noop(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    return ToolResult.text("found it")


async def _slow(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
    await trio.sleep(0.01)
    return ToolResult.text("found it")


def _tool(execute: Any) -> AgentTool:
    return AgentTool(
        name="lookup",
        description="looks a word up",
        parameters={"type": "object", "properties": {"word": {"type": "string"}}},
        execute=execute,
    )


def _items(count: int) -> list[BatchItem]:
    return [BatchItem(id=f"item-{n}", prompt=f"What does word {n} mean?") for n in range(count)]


def _factory(tool: AgentTool) -> Callable[[BatchItem], Agent]:
    """Agents that each answer in a rollout: one tool call, then a text answer."""

    def make(item: BatchItem) -> Agent:
        call = faux.reply("Let me look.", faux.tool_call("lookup", {"word": item.id}))
        return Agent(faux.model([call, f"It means {item.id}."]), tools=[tool])

    return make


# --- B12 ------------------------------------------------------------------------------------------


async def _by_hand(
    items: list[BatchItem], make: Callable[[BatchItem], Agent], out: Path, fsync: bool
) -> None:
    """The loop a user writes by hand: a semaphore, a nursery, a line per result."""
    slots = trio.Semaphore(_CONCURRENCY)
    with out.open("ab") as file:

        async def one(item: BatchItem) -> None:
            try:
                agent = make(item)
                assert item.prompt is not None
                await agent.prompt(item.prompt)
                messages = agent.state.messages
                line = {
                    "id": item.id,
                    "status": "done",
                    "usage": to_json(messages[-1].usage),  # type: ignore[union-attr]
                    "messages": to_json(list(messages)),
                }
                file.write(json.dumps(line, ensure_ascii=False).encode() + b"\n")
                file.flush()
                if fsync:
                    os.fsync(file.fileno())
            finally:
                slots.release()

        async with trio.open_nursery() as nursery:
            for item in items:
                await slots.acquire()
                nursery.start_soon(one, item)


async def _batched(items: list[BatchItem], make: Callable[[BatchItem], Agent], out: Path) -> None:
    summary = await run_batch(items, make, out=out, concurrency=_CONCURRENCY)
    if summary.done != len(items):
        raise RuntimeError(f"B12: {summary.done} items done of {len(items)}")


def _sample(
    run: Callable[[list[BatchItem], Callable[[BatchItem], Agent], Path], Any],
    count: int,
    walls: list[float],
) -> Callable[[], float]:
    """A measure: CPU µs per item of one ``trio.run`` of ``run`` (its wall time in
    ``walls``), the file checked for one ``done`` line per item."""

    def one() -> float:
        items = _items(count)
        make = _factory(_tool(_noop))
        with tempfile.TemporaryDirectory(prefix="b12-") as directory:
            out = Path(directory) / "results.jsonl"
            cpu = wall = 0.0

            async def main() -> None:
                nonlocal cpu, wall
                gc.collect()
                cpu, wall = time.process_time(), time.perf_counter()
                await run(items, make, out)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall

            trio.run(main)
            lines = out.read_bytes().splitlines()
            ids = {json.loads(line)["id"] for line in lines}
            if len(lines) != count or len(ids) != count:
                raise RuntimeError(f"B12: {len(lines)} lines, {len(ids)} ids for {count} items")
        walls.append(wall)
        return cpu / count * 1e6

    return one


def bench_b12(repeats: int, count: int = 10_000) -> Figure:
    ours_walls: list[float] = []
    hand_walls: list[float] = []
    loose_walls: list[float] = []

    def hand(fsync: bool) -> Any:
        async def run(
            items: list[BatchItem], make: Callable[[BatchItem], Agent], out: Path
        ) -> None:
            await _by_hand(items, make, out, fsync)

        return run

    samples, floor_samples, loose_samples = alternating(
        repeats,
        _sample(_batched, count, ours_walls),
        _sample(hand(True), count, hand_walls),
        _sample(hand(False), count, loose_walls),
    )
    rates = [count / wall for wall in ours_walls]
    hand_rates = [count / wall for wall in hand_walls]
    loose = figure(loose_samples, floor_samples, "us/item", lower_is_better=True)
    return figure(
        samples,
        floor_samples,
        "us/item",
        lower_is_better=True,
        floor_title="by hand, fsync'd",
        items=count,
        concurrency=_CONCURRENCY,
        also={
            "rate": figure(
                rates,
                hand_rates,
                "items/s",
                lower_is_better=False,
                title="items per second (wall)",
                floor_title="by hand, fsync'd",
            ),
            "unsynced": {
                **loose,
                "title": "the hand loop without fsync (CPU per item)",
                "client": "by hand, no fsync",
                "floor_title": "by hand, fsync'd",
            },
        },
        detail=f"{count:,} items, {_CONCURRENCY} at a time, each a prompt, one tool call and "
        f"a text answer; CPU of the process, worker threads included",
    )


# --- B12k -----------------------------------------------------------------------------------------


def _child(argv: list[str]) -> None:
    """B12k's child: ``OUT COUNT STARTED [--resume] [--rest-of FILE]``: run the batch
    into OUT, appending each item's id to STARTED as its agent is made; print the
    seconds inside ``trio.run`` as a JSON line."""
    out, count, started = Path(argv[0]), int(argv[1]), argv[2]
    resume = "--resume" in argv
    items = _items(count)
    if "--rest-of" in argv:
        finished = read_results(argv[argv.index("--rest-of") + 1])
        items = [item for item in items if item.id not in finished]
    make = _factory(_tool(_slow))
    fd = os.open(started, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def recording(item: BatchItem) -> Agent:
        os.write(fd, item.id.encode() + b"\n")
        return make(item)

    elapsed = 0.0

    async def main() -> None:
        nonlocal elapsed
        start = time.perf_counter()
        await run_batch(items, recording, out=out, concurrency=_CONCURRENCY, resume=resume)
        elapsed = time.perf_counter() - start

    trio.run(main)
    print(json.dumps({"seconds": elapsed}), flush=True)


def _run_child(*args: str) -> float:
    """Milliseconds inside the ``trio.run`` of a child run to its end."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.batch", "child", *args],
        cwd=_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"B12k: the child failed: {done.stderr[-3000:]}")
    seconds: float = json.loads(done.stdout.splitlines()[-1])["seconds"]
    return seconds * 1e3


def _killed_and_resumed(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="b12k-") as directory:
        out = Path(directory) / "results.jsonl"
        first, second = Path(directory) / "started-1", Path(directory) / "started-2"
        child = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.batch", "child", str(out), str(count), str(first)],
            cwd=_ROOT, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            while True:
                if child.poll() is not None:
                    raise RuntimeError("B12k: the child ended before half its items had lines")
                if time.monotonic() > deadline:
                    raise RuntimeError("B12k: half the items did not end in 300 s")
                if out.exists() and out.read_bytes().count(b"\n") >= count // 2:
                    break
                time.sleep(0.002)
            child.send_signal(signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
        at_kill = read_results(out)
        left = Path(directory) / "left.jsonl"
        rest = _run_child(str(left), str(count), str(Path(directory) / "started-rest"),
                          "--rest-of", str(out))  # fmt: skip
        rerun = _run_child(str(out), str(count), str(second), "--resume")
        ids = [json.loads(line)["id"] for line in out.read_bytes().splitlines()]
        statuses = [json.loads(line)["status"] for line in out.read_bytes().splitlines()]
        started_before = set(first.read_text().split())
        started_again = set(second.read_text().split())
    ended = [i for i, status in zip(ids, statuses, strict=True) if status in ("done", "error")]
    final = {i for i, status in zip(ids, statuses, strict=True) if status == "done"}
    lost = count - len(final & {item.id for item in _items(count)})
    twice = len(ended) - len(set(ended))
    running = started_before - set(at_kill)
    if lost or twice:
        raise RuntimeError(f"B12k: {lost} items lost, {twice} finished twice")
    if started_again & set(at_kill):
        raise RuntimeError("B12k: the rerun ran an item that had its line")
    return {
        "rerun": rerun,
        "rest": rest,
        "at_kill": len(at_kill),
        "lost": lost,
        "twice": twice,
        "ran_again": len(started_before & started_again),
        "running_at_kill": len(running),
    }


def bench_b12k(repeats: int, count: int = 2000) -> Figure:
    runs = [_killed_and_resumed(count) for _ in range(repeats)]
    first = runs[0]
    return figure(
        [run["rerun"] for run in runs],
        [run["rest"] for run in runs],
        "ms",
        lower_is_better=True,
        floor_title="a fresh batch of the items left",
        items=count,
        lost=max(run["lost"] for run in runs),
        twice=max(run["twice"] for run in runs),
        at_kill=[run["at_kill"] for run in runs],
        ran_again=[run["ran_again"] for run in runs],
        detail=f"{count:,} items, killed with {first['at_kill']:,} lines in the file; items "
        f"lost {first['lost']}, finished twice {first['twice']}; ran again "
        f"{first['ran_again']} (running at the kill: {first['running_at_kill']})",
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        _child(sys.argv[2:])
