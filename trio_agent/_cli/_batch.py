"""``trio-agent batch``: the items of a JSONL file through a model, results to another.

Each line of the items file is a JSON object: ``id`` (a string or an integer) and
``prompt`` (a string), or ``messages`` (a transcript, as ``dumps`` writes it) to
continue. The model is a real one (``API:ID``) or ``faux:ID``, a scripted model that
answers each prompt with a line about it, so the command runs with no key. Progress
goes to stderr, one line rewritten in place, only when stderr is a terminal; the
summary is printed at the end either way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import trio

from .._agent import Agent
from .._json import from_json
from .._messages import Usage
from .._model import Model
from ..batch import BatchItem, BatchResult, BatchSummary, RateLimits, run_batch
from ..providers import faux
from ._cost import money

__all__ = ["FAUX", "Progress", "read_items", "run_items", "scripted_agent", "summary_line"]

FAUX = "faux"


def read_items(path: Path) -> list[BatchItem]:
    """The items of ``path``; ``ValueError`` naming the file and line of one that is not
    an item (blank lines are skipped)."""
    items: list[BatchItem] = []
    seen: dict[str, int] = {}  # id -> its line
    with path.open("rb") as file:
        for number, line in enumerate(file, 1):
            if not line.strip():
                continue
            where = f"{str(path)!r}, line {number}"
            try:
                data = json.loads(line)
            except ValueError as error:
                raise ValueError(f"{where} is not JSON: {error}") from None
            if not isinstance(data, dict):
                raise ValueError(f"{where} must be a JSON object, not {line[:60]!r}")
            item_id = data.get("id")
            if isinstance(item_id, int) and not isinstance(item_id, bool):
                item_id = str(item_id)
            if not isinstance(item_id, str) or not item_id:
                raise ValueError(f"{where}: id must be a non-empty string, not {item_id!r:.60}")
            if item_id in seen:
                raise ValueError(
                    f"{where}: id {item_id!r:.60} is the id of line {seen[item_id]} too"
                )
            seen[item_id] = number
            transcript = None
            if "messages" in data:
                try:
                    transcript = from_json(data["messages"])
                except Exception as error:
                    raise ValueError(f"{where}: messages: {error}") from None
            try:
                items.append(
                    BatchItem(id=item_id, prompt=data.get("prompt"), transcript=transcript)
                )
            except (TypeError, ValueError) as error:
                raise ValueError(f"{where}: {error}") from None
    return items


def scripted_agent(model_id: str, system_prompt: str) -> Callable[[BatchItem], Agent]:
    """A factory of agents on a scripted model that answers each item in one reply,
    with a usage counted in words (priced at 0)."""

    def make(item: BatchItem) -> Agent:
        asked = item.prompt if item.prompt is not None else f"{len(item.transcript or ())} messages"
        answer = f"{model_id} read {len(asked.split())} words: {asked[:60]}"
        words_in, words_out = len(asked.split()), len(answer.split())
        usage = Usage(input=words_in, output=words_out, total_tokens=words_in + words_out)
        model = faux.model([faux.reply(answer, usage=usage)], id=model_id)
        return Agent(model, system_prompt=system_prompt)

    return make


def real_agent(model: Model, system_prompt: str, **options: Any) -> Callable[[BatchItem], Agent]:
    def make(item: BatchItem) -> Agent:
        return Agent(model, system_prompt=system_prompt, **options)

    return make


class Progress:
    """The progress line on stderr: done / running / failed, tokens, dollars, rate and
    time left; drawn only when ``live`` (stderr is a terminal)."""

    def __init__(self, err: TextIO, total: int, concurrency: int, live: bool) -> None:
        self.err = err
        self.total = total
        self.concurrency = concurrency
        self.live = live
        self.done = 0
        self.failed = 0
        self.tokens = 0
        self.cost = 0.0
        self.started = trio.current_time()

    def line(self) -> str:
        ended = self.done + self.failed
        running = min(self.concurrency, self.total - ended)
        elapsed = trio.current_time() - self.started
        rate = ended / elapsed if elapsed > 0 else 0.0
        left = (self.total - ended) / rate if rate > 0 else math.inf
        eta = "?" if math.isinf(left) else f"{left:.0f}s"
        return (
            f"{ended}/{self.total} ({self.done} done, {running} running, {self.failed} "
            f"failed) {self.tokens:,} tokens {money(self.cost)} {rate:.1f}/s left {eta}"
        )

    def add(self, result: BatchResult) -> None:
        if result.status == "done":
            self.done += 1
        elif result.status == "error":
            self.failed += 1
        self.tokens += result.usage.total_tokens
        self.cost += result.usage.cost.total
        if self.live:
            self.err.write("\r\x1b[K" + self.line())
            self.err.flush()

    def close(self) -> None:
        if self.live:
            self.err.write("\r\x1b[K")
            self.err.flush()


def summary_line(summary: BatchSummary) -> str:
    failed = ", ".join(f"{count} {kind}" for kind, count in sorted(summary.failed.items()))
    parts = [f"{summary.done} done", f"{sum(summary.failed.values())} failed"]
    if failed:
        parts[-1] += f" ({failed})"
    if summary.skipped:
        parts.append(f"{summary.skipped} skipped (already in the file)")
    if summary.aborted:
        parts.append(f"{summary.aborted} aborted")
    return f"batch: {', '.join(parts)}; {summary.tokens:,} tokens, {money(summary.cost)}"


async def run_items(
    items: list[BatchItem],
    make_agent: Callable[[BatchItem], Agent],
    *,
    todo: int,
    out: Path,
    provider: str,
    concurrency: int,
    rpm: int | None,
    tpm: int | None,
    resume: bool,
    err: TextIO,
    live: bool,
) -> BatchSummary:
    limits = {provider: RateLimits(requests_per_minute=rpm, tokens_per_minute=tpm)}
    progress = Progress(err, todo, concurrency, live)
    try:
        return await run_batch(
            items,
            make_agent,
            out=out,
            concurrency=concurrency,
            rate_limits=limits,
            resume=resume,
            on_result=progress.add,
        )
    finally:
        progress.close()
