"""A batch on a Ray cluster (``pip install 'trio_agent[ray]'``).

:func:`run_ray_batch` runs the same batch as :func:`trio_agent.batch.run_batch` on the
workers of a Ray cluster: the items are cut into chunks, each chunk is a Ray task that
runs one ``trio.run`` holding up to ``concurrency`` agents, and the results come back
to the calling process in groups (a worker sends what ended within 50 ms together),
which appends them to the same results file by the same rules (flushed and fsync'd,
one line per item, ``resume=True`` skips what is there). A Ray actor keeps the
providers' rate limits for the whole cluster.

What a lost worker costs: the items of its chunk whose results had not reached the
calling process go back into the queue, together, and run on another worker from the
start; those whose results had are not run again. An item lost a second time runs
alone, so that an item that kills its worker fails by itself: lost more than
``worker_retries`` times, it is recorded as failed with ``error_kind="worker_lost"``.

Call ``ray.init()`` first: with no address it starts a local Ray runtime on this
machine; ``ray.init(address="auto")`` joins a running cluster.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs
import ray
import ray.exceptions
import trio

from ._errors import one_exception
from ._messages import AssistantMessage, Usage
from .batch import (
    BatchItem,
    BatchResult,
    BatchSummary,
    MakeAgent,
    RateLimits,
    Status,
    _check_count,
    _check_items,
    _check_limits,
    _check_settings,
    _Counts,
    _error_text,
    _finished,
    _Gate,
    _Gates,
    _line,
    _open_results,
    _parse,
    _rate_limited,
    _run_all,
    _run_item,
    _Window,
    _Writer,
)

__all__ = ["run_ray_batch"]

_GATHER: Final = 0.05
"""Seconds a worker gathers results before it sends them to the driver together."""

_POLL: Final = 0.5
"""Seconds a worker goes on a provider's last known pause before asking the cluster's
actor again, for a provider with no limits of its own."""


# --- the cluster's rate limits ---------------------------------------------------------------


class _Limiter:
    """The providers' windows for the whole cluster, kept by one Ray actor on its own
    (monotonic) clock."""

    def __init__(self, rate_limits: Mapping[str, RateLimits], max_pause: float) -> None:
        self.rate_limits = dict(rate_limits)
        self.max_pause = max_pause
        self.windows: dict[str, _Window] = {}

    def _window(self, key: str) -> _Window:
        window = self.windows.get(key)
        if window is None:
            limits = self.rate_limits.get(key, RateLimits())
            window = self.windows[key] = _Window(limits, self.max_pause)
        return window

    def start(self, key: str) -> float:
        """Seconds until a request to ``key`` may start; 0 or less: it starts now, and
        is counted."""
        now = time.monotonic()
        window = self._window(key)
        wait = window.wait(now)
        if wait <= 0:
            window.start(now)
        return wait

    def ended(self, key: str, tokens: int, rate_limited: bool, retry_after: float | None) -> None:
        self._window(key).ended(time.monotonic(), tokens, rate_limited, retry_after)


# restarted if its node goes (its windows start again empty), the calls to it retried
_LimiterActor: Any = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(_Limiter)


async def _ask(method: Any, *args: Any) -> Any:
    ref = method.remote(*args)
    return await trio.to_thread.run_sync(ray.get, ref, abandon_on_cancel=True)


class _SharedGate(_Gate):
    """A provider's gate in one worker, in step with the cluster's actor.

    A provider with limits asks the actor before each request (the actor counts it).
    One without asks at most every ``_POLL`` seconds, only to learn of a pause another
    worker's rate-limited reply started; in between it goes on what it last heard.
    A rate-limited reply pauses this worker at once and tells the actor.
    """

    def __init__(self, limits: RateLimits, max_pause: float, limiter: Any, key: str) -> None:
        super().__init__(limits, max_pause)
        self.limiter = limiter
        self.key = key
        self.limited = limits != RateLimits()
        self.asked = -math.inf

    async def enter(self) -> None:
        async with self.lock:
            while True:
                now = trio.current_time()
                if self.limited or now - self.asked >= _POLL:
                    wait = await _ask(self.limiter.start, self.key)
                    self.asked = trio.current_time()
                    window = self.window
                    window.paused_until = max(window.paused_until, self.asked + wait)
                else:
                    wait = self.window.wait(now)
                if wait <= 0:
                    return
                try:
                    await trio.sleep(wait)
                finally:  # what was waited, also by a wait cut short
                    self.waited += trio.current_time() - now

    def ended(self, reply: AssistantMessage) -> None:
        rate_limited = _rate_limited(reply)
        if not self.limited:
            super().ended(reply)  # this worker's own pause, at once
            if not rate_limited:
                return
        self.limiter.ended.remote(
            self.key, reply.usage.total_tokens, rate_limited, reply.retry_after
        )


class _SharedGates(_Gates):
    def __init__(
        self, rate_limits: Mapping[str, RateLimits], max_pause: float, limiter: Any
    ) -> None:
        super().__init__(rate_limits, max_pause)
        self.limiter = limiter

    def new(self, key: str, limits: RateLimits) -> _Gate:
        return _SharedGate(limits, self.max_pause, self.limiter, key)


# --- a worker: one chunk in one trio.run ----------------------------------------------------


@attrs.frozen
class _Settings:
    concurrency: int
    rate_limits: Mapping[str, RateLimits]
    rate_limit_retries: int
    max_pause: float


@attrs.frozen
class _Done:
    """One item's result, as a worker sends it: its line, and what the summary counts."""

    id: str
    status: Status
    error_kind: str | None
    usage: Usage
    line: bytes


@attrs.frozen
class _Waited:
    seconds: float


_END: Final = object()


async def _chunk(
    items: list[BatchItem],
    make_agent: MakeAgent,
    limiter: Any,
    settings: _Settings,
    send: Callable[[object], None],
) -> None:
    gates = _SharedGates(settings.rate_limits, settings.max_pause, limiter)

    async def record(result: BatchResult) -> None:
        send(_Done(result.id, result.status, result.error_kind, result.usage, _line(result)))

    async def run_item(item: BatchItem) -> None:
        await _run_item(item, make_agent, gates, settings.rate_limit_retries, record)

    await _run_all(items, settings.concurrency, run_item)
    send(_Waited(gates.waited()))


def _work(
    items: list[BatchItem], make_agent: MakeAgent, limiter: Any, settings: _Settings
) -> Iterator[object]:
    """A Ray task: the chunk's items in one ``trio.run`` (on a thread of its own), the
    results yielded in groups, each gathered over at most ``_GATHER`` seconds."""
    results: queue.SimpleQueue[object] = queue.SimpleQueue()

    def run() -> None:
        try:
            trio.run(_chunk, items, make_agent, limiter, settings, results.put)
        except BaseException as error:  # noqa: ASYNC103  # raised by the task's thread, below
            results.put(error)
        else:
            results.put(_END)

    threading.Thread(target=run, name="trio_agent batch", daemon=True).start()
    while True:
        # the results of up to _GATHER seconds go in one message, which the driver
        # writes with one fsync: a message costs the driver about 0.7 ms
        ready = [results.get()]
        until = time.monotonic() + _GATHER
        while ready[-1] is not _END and not isinstance(ready[-1], BaseException):
            try:
                ready.append(results.get(timeout=max(0.0, until - time.monotonic())))
            except queue.Empty:
                break
        done = [got for got in ready if isinstance(got, _Done | _Waited)]
        if done:
            yield done
        for got in ready:
            if got is _END:
                return
            if isinstance(got, BaseException):
                raise got


_work_remote: Any = ray.remote(num_cpus=1, max_retries=0)(_work)


# --- the driver ------------------------------------------------------------------------------

_LOST: Final = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.ObjectLostError,
    ray.exceptions.OutOfMemoryError,
)
"""What a chunk's task fails with when its worker is gone: its items run elsewhere.
Any other error of the task is the batch's."""


class _Task:
    """A chunk's Ray task, made on the thread that reads it, and stopped from Trio."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stream: Any = None
        self.stopping = False

    def started(self, stream: Any) -> None:
        with self.lock:
            self.stream = stream
            stopping = self.stopping
        if stopping:
            ray.cancel(stream, force=True)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            stream = self.stream
        if stream is not None:
            ray.cancel(stream, force=True)


async def run_ray_batch(
    items: Iterable[BatchItem],
    make_agent: MakeAgent,
    *,
    out: str | os.PathLike[str],
    workers: int = 2,
    concurrency: int = 16,
    chunk_size: int | None = None,
    rate_limits: Mapping[str, RateLimits] | None = None,
    rate_limit_retries: int = 5,
    max_pause: float = 300.0,
    worker_retries: int = 2,
    resume: bool = False,
    on_result: Callable[[BatchResult], None] | None = None,
) -> BatchSummary:
    """:func:`~trio_agent.batch.run_batch` on a Ray cluster: the same items, factory,
    results file, resume rule and summary.

    At most ``workers`` Ray tasks run at once (one CPU each), each holding up to
    ``concurrency`` agents of a chunk of ``chunk_size`` items (default: a quarter of a
    worker's share, at least ``concurrency``). ``make_agent`` is sent to the workers
    with Ray's pickling (cloudpickle): a closure or lambda works, and what it holds
    (an open connection pool, say) must be made on the worker, inside the factory.

    ``rate_limits`` hold for the whole cluster: an actor keeps each provider's window.
    A provider named in ``rate_limits`` asks the actor before every request; any other
    provider learns of a pause (a reply with ``error_kind="rate_limit"``) at most
    ``0.5`` seconds late on other workers. ``worker_retries``: how many times an item
    whose worker was lost runs again elsewhere (the second time alone) before it is
    recorded as failed (``error_kind="worker_lost"``); see the module's docs.

    Raises ``RuntimeError`` if Ray is not initialized (``ray.init()``), and what
    ``run_batch`` raises for bad arguments and results files. ``on_result`` is called
    with each result, read back from its line, after the line is written. The summary's
    ``rate_limit_wait`` is summed over the workers: two workers paused together count
    the pause twice.

    Cancellation stops every worker task at once (``ray.cancel(force=True)``): the
    items running there have no line, as after ``kill -9``, and run again on a rerun
    with ``resume=True``; the file holds whole lines only.
    """
    _check_settings(concurrency, rate_limit_retries, max_pause)
    _check_count("workers", workers, 1)
    _check_count("worker_retries", worker_retries, 0)
    if chunk_size is not None:
        _check_count("chunk_size", chunk_size, 1)
    items = _check_items(items)
    limits = _check_limits(rate_limits or {})
    if not ray.is_initialized():
        raise RuntimeError(
            "run_ray_batch needs Ray: call ray.init() first (with no address it starts "
            "a local runtime; address='auto' joins a running cluster)"
        )
    path = Path(out)
    finished, end = await trio.to_thread.run_sync(_finished, path, resume)
    todo = [item for item in items if item.id not in finished]
    counts = _Counts(skipped=len(items) - len(todo))
    size = chunk_size or max(concurrency, math.ceil(len(todo) / (4 * workers)))
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    send, receive = trio.open_memory_channel[list[BatchItem]](math.inf)
    for chunk in chunks:
        send.send_nowait(chunk)
    pending = len(chunks)
    if not pending:
        send.close()
    lost: dict[str, int] = {}
    waited = 0.0
    agent_ref = await trio.to_thread.run_sync(ray.put, make_agent)  # pickled once, here
    settings = _Settings(concurrency, limits, rate_limit_retries, max_pause)
    draining = trio.CapacityLimiter(workers)  # so that the writer always has a thread

    async def record(results: list[_Done]) -> None:
        await writer.write_line(b"".join(done.line for done in results))
        for done in results:
            counts.count(done.status, done.error_kind, done.usage)
            if on_result is not None:
                on_result(_parse(done.line))

    async def take(got: list[_Done | _Waited], seen: set[str]) -> None:
        nonlocal waited
        results = [done for done in got if isinstance(done, _Done)]
        seen.update(done.id for done in results)
        waited += sum(wait.seconds for wait in got if isinstance(wait, _Waited))
        if results:
            # what arrived is written whole, even as the batch stops
            with trio.CancelScope(shield=True):
                await record(results)

    async def fail(item: BatchItem, error: BaseException) -> None:
        result = BatchResult(
            id=item.id,
            status="error",
            error_kind="worker_lost",
            error=_error_text(error),
            attempts=lost[item.id],
        )
        with trio.CancelScope(shield=True):
            await record([_Done(item.id, "error", "worker_lost", result.usage, _line(result))])

    async def run_chunk(chunk: list[BatchItem]) -> None:
        nonlocal pending
        task = _Task()
        seen: set[str] = set()

        def drain() -> None:
            # the chunk is pickled and sent here, off the event loop
            stream = _work_remote.remote(chunk, agent_ref, limiter, settings)
            task.started(stream)
            for ref in stream:
                trio.from_thread.run(take, ray.get(ref), seen)

        lost_worker: ray.exceptions.RayError | None = None
        ended = False  # the task ended, or its worker was lost: nothing to stop

        async def stop_unless_ended() -> None:
            try:
                await trio.sleep_forever()
            finally:
                if not ended:  # the batch is stopping, or failed: the task goes at once
                    task.stop()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_unless_ended)
            try:
                # not abandoned on cancellation: no result arrives after the file closes
                await trio.to_thread.run_sync(drain, limiter=draining)
                ended = True
            except _LOST as error:
                lost_worker, ended = error, True
            except ray.exceptions.TaskCancelledError:
                if not task.stopping:
                    raise
                # stopped by this batch: the cancellation that stopped it goes on
            except ray.exceptions.RayTaskError as error:
                raise error.as_instanceof_cause() from None  # type: ignore[no-untyped-call]
            finally:
                nursery.cancel_scope.cancel()
        if lost_worker is not None:
            again: list[BatchItem] = []
            for item in chunk:
                if item.id in seen:
                    continue
                times = lost[item.id] = lost.get(item.id, 0) + 1
                if times > worker_retries:
                    await fail(item, lost_worker)
                elif times == 1 and worker_retries >= 2:
                    again.append(item)
                else:  # alone, so that an item that kills its worker fails by itself
                    send.send_nowait([item])
                    pending += 1
            if again:
                send.send_nowait(again)
                pending += 1
        pending -= 1
        if not pending:
            send.close()

    async def worker() -> None:
        async for chunk in receive:
            await run_chunk(chunk)

    file = await trio.to_thread.run_sync(_open_results, path, end)
    writer = _Writer(file)
    limiter: Any = None
    try:
        limiter = await trio.to_thread.run_sync(_LimiterActor.remote, limits, max_pause)
        async with trio.open_nursery() as nursery:
            for _ in range(min(workers, max(pending, 1))):
                nursery.start_soon(worker)
    except BaseExceptionGroup as group:
        raise one_exception(group) from None
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(file.close)
            if limiter is not None:
                await trio.to_thread.run_sync(ray.kill, limiter)
    return counts.summary(waited)
