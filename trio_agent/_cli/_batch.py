"""``trio-agent batch``: the items of a JSONL file through a model, results to another.

Each line of the items file is a JSON object: ``id`` (a string or an integer) and
``prompt`` (a string), or ``messages`` (a transcript, as ``dumps`` writes it) to
continue. The model is a real one (``API:ID``) or ``faux:ID``, a scripted model that
answers each prompt with a line about it, so the command runs with no key. Progress
goes to stderr only when stderr is a terminal: a bar drawn with rich when it is
installed (the ``progress`` extra), else one plain line rewritten in place; the
summary is printed at the end either way.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Protocol, TextIO

import trio

from .._agent import Agent
from .._errors import one_exception
from .._json import from_json
from .._messages import Usage
from .._model import Model
from ..batch import BatchItem, BatchResult, BatchSummary, RateLimits, _Counts, run_batch
from ..providers import faux
from ._cost import money

__all__ = [
    "FAUX",
    "Progress",
    "Tally",
    "View",
    "open_view",
    "read_items",
    "run_items",
    "scripted_agent",
    "summary_line",
]

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


class Tally:
    """What a batch has done so far, for its progress display: items ended (done,
    failed, aborted), the ids running now, tokens, dollars, rate and time left.

    ``running`` is exact: an id enters when the factory is called for it (the batch
    calls it once its item has a slot and starts) and leaves when its result is
    recorded, whatever the result (a rate-limited item made again is still one)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.counts = _Counts(skipped=0)
        self.running: set[str] = set()
        self.started = trio.current_time()

    @property
    def done(self) -> int:
        return self.counts.done

    @property
    def failed(self) -> int:
        return sum(self.counts.failed.values())

    @property
    def aborted(self) -> int:
        return self.counts.aborted

    @property
    def tokens(self) -> int:
        return self.counts.tokens

    @property
    def cost(self) -> float:
        return self.counts.cost

    @property
    def ended(self) -> int:
        return self.done + self.failed + self.aborted

    def start(self, item: BatchItem) -> None:
        self.running.add(item.id)

    def add(self, result: BatchResult) -> None:
        self.running.discard(result.id)
        self.counts.add(result)

    def rate(self) -> float:
        """Items ended a second since the start (0 before the first)."""
        elapsed = trio.current_time() - self.started
        return self.ended / elapsed if elapsed > 0 else 0.0

    def left(self) -> float:
        """Seconds until every item has ended at this rate (``math.inf``: not known)."""
        if self.ended >= self.total:
            return 0.0
        rate = self.rate()
        return (self.total - self.ended) / rate if rate > 0 else math.inf


class View(Protocol):
    """A progress display on stderr: ``draw`` shows the tally now, ``close`` for the
    last time (the display ends; what is printed next starts on a line of its own)."""

    def draw(self) -> None: ...

    def close(self) -> None: ...


class Progress:
    """The progress line on stderr without rich: done / running / failed, tokens,
    dollars, rate and time left, one line rewritten in place (and erased at the end)."""

    def __init__(self, err: TextIO, tally: Tally) -> None:
        self.err = err
        self.tally = tally

    def line(self) -> str:
        tally = self.tally
        left = tally.left()
        eta = "?" if math.isinf(left) else f"{left:.0f}s"
        return (
            f"{tally.ended}/{tally.total} ({tally.done} done, {len(tally.running)} running, "
            f"{tally.failed} failed) {tally.tokens:,} tokens {money(tally.cost)} "
            f"{tally.rate():.1f}/s left {eta}"
        )

    def draw(self) -> None:
        self.err.write("\r\x1b[K" + self.line())
        self.err.flush()

    def close(self) -> None:
        self.draw()
        self.err.write("\r\x1b[K")
        self.err.flush()


def open_view(err: TextIO, tally: Tally) -> View:
    """The progress bar drawn with rich (the ``progress`` extra), or the plain line
    when rich cannot be imported; drawn once already."""
    try:
        from ._bar import Bar
    except ImportError:
        line = Progress(err, tally)
        line.draw()
        return line
    return Bar(err, tally)  # drawn as it starts


_TICK: Final = 0.5
"""Seconds between two draws while nothing ends (the time, the rate, what runs)."""
_QUIET: Final = 0.1
"""At most one draw in this many seconds for the results themselves."""


async def _tick(view: View) -> None:
    while True:
        await trio.sleep(_TICK)
        view.draw()


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
    make_agent: Callable[[BatchItem], Agent | Awaitable[Agent]],
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
    """Run the batch; with ``live``, its progress drawn on ``err`` (:func:`open_view`)
    from this Trio task and one more that draws every half second, none from a thread.
    One exception escapes (a ``KeyboardInterrupt`` as it is); the display is closed,
    its last state drawn, before it does."""
    limits = {provider: RateLimits(requests_per_minute=rpm, tokens_per_minute=tpm)}
    batch = functools.partial(
        run_batch,
        items,
        out=out,
        concurrency=concurrency,
        rate_limits=limits,
        resume=resume,
    )
    if not live:
        return await batch(make_agent)
    tally = Tally(todo)
    view = open_view(err, tally)
    drawn = trio.current_time()

    def make(item: BatchItem) -> Agent | Awaitable[Agent]:
        tally.start(item)
        return make_agent(item)

    def on_result(result: BatchResult) -> None:
        nonlocal drawn
        tally.add(result)
        now = trio.current_time()
        if now - drawn >= _QUIET:
            drawn = now
            view.draw()

    escaped: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_tick, view)
            summary = await batch(make, on_result=on_result)
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        escaped = one_exception(group)  # one exception escapes, never a group
    finally:
        view.close()
    if escaped is not None:
        raise escaped
    return summary
