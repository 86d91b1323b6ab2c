"""Many runs: a batch of items through agents, results saved as each one finishes.

:func:`run_batch` runs every :class:`BatchItem` through an :class:`~trio_agent.Agent`
that the caller's factory makes for it, many at once in one nursery, under a
concurrency limit and per-provider :class:`RateLimits` shared by every agent of the
batch. Each item's outcome is appended to a JSONL file as soon as it is known, one
line per item, flushed and fsync'd, so that a rerun with ``resume=True`` skips what
is already there and runs the rest. :func:`read_results` reads the file back.

What a rerun does, item by item:

* an item whose line is in the file (``done`` or ``error``) is not run again;
* an item running when the process was killed (``kill -9``, a power cut) has no line
  and runs again from the start: its work up to the kill is paid for twice;
* an item stopped by a cancellation (Ctrl-C, the surrounding scope) has an
  ``aborted`` line with its partial transcript, and runs again from the start;
  :func:`read_results` keeps the last line of each id;
* a last line cut short by a crash is dropped from the file before anything is
  appended, and its item runs again.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

import attrs
import trio

from ._agent import Agent
from ._errors import one_exception
from ._messages import _NO_USAGE, AgentMessage, AssistantMessage, Cost, Usage
from ._model import Model
from ._stream import Emit, LlmContext, StreamOptions
from .providers import get_stream_fn

__all__ = [
    "BatchItem",
    "BatchResult",
    "BatchSummary",
    "RateLimits",
    "read_results",
    "run_batch",
]

Status: TypeAlias = Literal["done", "error", "aborted"]

_WINDOW: Final = 60.0
_DEFAULT_PAUSE: Final = 1.0


def _check_id(item: BatchItem, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"BatchItem.id must be a non-empty str, not {value!r:.80}")


def _messages(value: Iterable[AgentMessage] | None) -> tuple[AgentMessage, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(kw_only=True)
class BatchItem:
    """One run of a batch: an ``id`` unique in the batch, and a ``prompt`` to run or a
    ``transcript`` to continue (exactly one of the two). ``settings`` is free for the
    factory's use (a model, a temperature, ...): the batch itself does not read it."""

    id: str = attrs.field(validator=_check_id)
    prompt: str | None = None
    transcript: tuple[AgentMessage, ...] | None = attrs.field(default=None, converter=_messages)
    settings: Mapping[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if (self.prompt is None) == (self.transcript is None):
            raise ValueError(
                f"BatchItem {self.id!r} needs a prompt or a transcript (exactly one), "
                f"not prompt={self.prompt!r:.40} and transcript={self.transcript!r:.40}"
            )
        if self.prompt is not None and not isinstance(self.prompt, str):
            raise TypeError(f"BatchItem {self.id!r}: prompt must be a str, not {self.prompt!r:.80}")


def _positive_or_none(name: str, whole: bool = False) -> Callable[[Any, Any, Any], None]:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is None:
            return
        kind = int if whole else int | float
        if isinstance(value, bool) or not isinstance(value, kind):
            what = "an int" if whole else "a number"
            raise TypeError(f"RateLimits.{name} must be {what} or None, not {value!r:.80}")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"RateLimits.{name} must be finite and above 0, not {value!r}")

    return check


@attrs.frozen(kw_only=True)
class RateLimits:
    """Limits on one provider's traffic, per minute, over every agent of a batch.

    ``requests_per_minute``: at most this many requests start in any 60 seconds (the
    requests the agents ask for; an agent's own retries of one, its ``max_retries``,
    pass without being counted: make the agents with ``max_retries=0`` for a strict limit).
    ``tokens_per_minute``: a request starts only while the tokens of the replies that
    ended in the last 60 seconds are fewer than this; a reply's tokens are counted when
    it ends (its ``usage.total_tokens``), so the requests already under way when the
    limit is reached may pass it by their own tokens. None: no limit.
    """

    requests_per_minute: int | None = attrs.field(
        default=None, validator=_positive_or_none("requests_per_minute", whole=True)
    )
    tokens_per_minute: float | None = attrs.field(
        default=None, validator=_positive_or_none("tokens_per_minute")
    )


class _Window:
    """One provider's traffic over the last minute, and the pause a rate-limited reply
    asked for: plain state, read on whatever clock the caller passes as ``now``."""

    def __init__(self, limits: RateLimits, max_pause: float) -> None:
        self.limits = limits
        self.max_pause = max_pause
        self.starts: deque[float] = deque()
        self.tokens: deque[tuple[float, int]] = deque()
        self.token_sum = 0
        self.paused_until = -math.inf

    def wait(self, now: float) -> float:
        """Seconds until a request may start (0 or less: now)."""
        wait = self.paused_until - now
        rpm = self.limits.requests_per_minute
        starts = self.starts
        while starts and starts[0] <= now - _WINDOW:
            starts.popleft()
        if rpm is not None and len(starts) >= rpm:
            wait = max(wait, starts[len(starts) - rpm] + _WINDOW - now)
        tpm = self.limits.tokens_per_minute
        tokens = self.tokens
        while tokens and tokens[0][0] <= now - _WINDOW:
            self.token_sum -= tokens.popleft()[1]
        if tpm is not None and self.token_sum >= tpm:
            # wait for enough of the oldest replies to leave the window
            over = self.token_sum - tpm
            for ended, count in tokens:
                over -= count
                if over < 0:
                    wait = max(wait, ended + _WINDOW - now)
                    break
        return wait

    def start(self, now: float) -> None:
        """Count a request that starts now."""
        if self.limits.requests_per_minute is not None:
            self.starts.append(now)

    def ended(self, now: float, tokens: int, rate_limited: bool, retry_after: float | None) -> None:
        """Count a reply's tokens, and pause the provider if it was rate-limited."""
        if self.limits.tokens_per_minute is not None and tokens > 0:
            self.tokens.append((now, tokens))
            self.token_sum += tokens
        if rate_limited:
            pause = retry_after
            if pause is None or not math.isfinite(pause) or pause < 0:
                pause = _DEFAULT_PAUSE
            self.paused_until = max(self.paused_until, now + min(pause, self.max_pause))


def _rate_limited(reply: AssistantMessage) -> bool:
    return reply.stop_reason == "error" and reply.error_kind == "rate_limit"


class _Gate:
    """A provider's window in this process, on the Trio clock; requests wait for it in
    the order they asked."""

    def __init__(self, limits: RateLimits, max_pause: float) -> None:
        self.window = _Window(limits, max_pause)
        self.lock = trio.Lock()  # fair: requests start in the order they asked
        self.waited = 0.0

    async def enter(self) -> None:
        """Wait until a request may start, and count it. Cancellation: a cancelled wait
        counts nothing. A request that need not wait (none waits before it, the window
        allows it) starts at once, with no checkpoint of its own: the request that
        follows is one (B12: a lock taken for every request cost 10% of an item)."""
        now = trio.current_time()
        if not self.lock.locked() and self.window.wait(now) <= 0:
            self.window.start(now)
            return
        async with self.lock:
            while True:
                now = trio.current_time()
                wait = self.window.wait(now)
                if wait <= 0:
                    break
                try:
                    await trio.sleep_until(now + wait)
                finally:  # what was waited, also by a wait cut short
                    self.waited += trio.current_time() - now
            self.window.start(trio.current_time())

    def ended(self, reply: AssistantMessage) -> None:
        """Count a reply's tokens, and pause the provider if it was rate-limited."""
        self.window.ended(
            trio.current_time(), reply.usage.total_tokens, _rate_limited(reply), reply.retry_after
        )


def _check_limits(rate_limits: Mapping[str, RateLimits]) -> dict[str, RateLimits]:
    for name, limits in rate_limits.items():
        if not isinstance(limits, RateLimits):
            raise TypeError(f"rate_limits[{name!r}] must be a RateLimits, not {limits!r:.80}")
    return dict(rate_limits)


def _provider_key(model: Model) -> str:
    """The key of a model's provider in ``rate_limits``: its ``provider``, or its ``api``
    when that is empty."""
    return model.provider or model.api


class _Gates:
    """The gates of a batch, one per provider, made on first use."""

    def __init__(self, rate_limits: Mapping[str, RateLimits], max_pause: float) -> None:
        self.max_pause = max_pause
        self.rate_limits = _check_limits(rate_limits)
        self.by_provider: dict[str, _Gate] = {}

    def new(self, key: str, limits: RateLimits) -> _Gate:
        return _Gate(limits, self.max_pause)

    def get(self, model: Model) -> _Gate:
        key = _provider_key(model)
        gate = self.by_provider.get(key)
        if gate is None:
            gate = self.by_provider[key] = self.new(key, self.rate_limits.get(key, RateLimits()))
        return gate

    def waited(self) -> float:
        """Seconds the gates held requests back, summed over providers."""
        return sum(gate.waited for gate in self.by_provider.values())


class _Gated:
    """A stream function whose requests pass their provider's gate first."""

    def __init__(self, gates: _Gates, inner: Any) -> None:
        self.gates = gates
        self.inner = inner

    async def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions, emit: Emit
    ) -> AssistantMessage:
        gate = self.gates.get(model)
        await gate.enter()
        fn = self.inner or get_stream_fn(model.api)
        reply: AssistantMessage = await fn(model, context, options, emit)
        if isinstance(reply, AssistantMessage):
            gate.ended(reply)
        return reply


def _gated(gates: _Gates, inner: Any) -> Any:
    """``inner`` behind the batch's gates, once: a factory that hands out the same agent
    again (for another item, or a retry) does not put its requests through twice."""
    if isinstance(inner, _Gated) and inner.gates is gates:
        return inner
    return _Gated(gates, inner)


# --- results ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BatchResult:
    """One line of a results file: how an item ended.

    ``status``: ``"done"`` (the run ended on a reply that did not fail), ``"error"``
    (it ended on a failed reply, ``error_kind`` and ``error`` say why, or the factory
    or the run raised: ``error_kind="exception"``), ``"aborted"`` (a cancellation
    stopped it; a rerun runs it again). ``stop`` is the last reply's ``stop_reason``.
    ``usage`` sums the replies of this run (not those of a transcript it continued),
    the rate-limited attempts included; ``attempts`` counts the runs of the item.
    """

    id: str
    status: Status
    messages: tuple[AgentMessage, ...] = ()
    usage: Usage = Usage()
    stop: str | None = None
    error_kind: str | None = None
    error: str | None = None
    attempts: int = 1


@attrs.frozen(kw_only=True)
class BatchSummary:
    """What a batch did: items ``done`` and ``failed`` (by error kind) in this run,
    ``skipped`` (already in the file), ``aborted``, the ``tokens`` and ``cost`` (dollars)
    of this run's replies (from the catalog's prices), and ``rate_limit_wait``, the seconds
    spent paused by rate limits."""

    done: int = 0
    failed: Mapping[str, int] = attrs.field(factory=dict)
    skipped: int = 0
    aborted: int = 0
    tokens: int = 0
    cost: float = 0.0
    rate_limit_wait: float = 0.0
    """Seconds the providers' gates held requests back, summed over providers: the time
    the first request in each provider's line waited (the requests queued behind it
    waited as long, and are not counted again). On Ray, summed over the workers too."""


def _error_text(error: BaseException) -> str:
    """An exception as a result line says it: its type and text, 500 characters at most."""
    return f"{type(error).__name__}: {str(error)[:500]}"


def _add(a: Usage, b: Usage) -> Usage:
    if not a.total_tokens and a == _NO_USAGE:  # a first attempt: nothing to add to
        return b
    ca, cb = a.cost, b.cost
    return Usage(
        input=a.input + b.input,
        output=a.output + b.output,
        cache_read=a.cache_read + b.cache_read,
        cache_write=a.cache_write + b.cache_write,
        cache_write_long=a.cache_write_long + b.cache_write_long,
        reasoning=(
            None
            if a.reasoning is None and b.reasoning is None
            else (a.reasoning or 0) + (b.reasoning or 0)
        ),
        total_tokens=a.total_tokens + b.total_tokens,
        cost=Cost(
            input=ca.input + cb.input,
            output=ca.output + cb.output,
            cache_read=ca.cache_read + cb.cache_read,
            cache_write=ca.cache_write + cb.cache_write,
            total=ca.total + cb.total,
            total_from_provider=ca.total_from_provider and cb.total_from_provider,
        ),
    )


def _usage_of(messages: Sequence[AgentMessage]) -> Usage:
    total: Usage | None = None
    for message in messages:
        if isinstance(message, AssistantMessage):
            total = message.usage if total is None else _add(total, message.usage)
    return _NO_USAGE if total is None else total


def _line(result: BatchResult) -> bytes:
    from ._json import to_json

    data: dict[str, Any] = {
        "id": result.id,
        "status": result.status,
        "stop": result.stop,
        "errorKind": result.error_kind,
        "error": result.error,
        "attempts": result.attempts,
        "usage": to_json(result.usage),
        "messages": to_json(list(result.messages)),
    }
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass") + b"\n"


def _head(line: bytes) -> tuple[dict[str, Any], Status]:
    """A result line's JSON object and its status, checked (its messages are parsed as
    JSON, not read as a transcript)."""
    data = json.loads(line)
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise ValueError(f"not a result line: {line[:80]!r}")
    status = data.get("status")
    if status not in ("done", "error", "aborted"):
        raise ValueError(f"result {data['id']!r} has an unknown status {status!r:.40}")
    return data, status


def _optional_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(
            f"result {data['id']!r}: {key} must be a string or null, not {value!r:.40}"
        )
    return value


def _attempts(data: dict[str, Any]) -> int:
    value = data.get("attempts", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"result {data['id']!r}: attempts must be an int of 1 or more, not {value!r:.40}"
        )
    return value


def _parse(line: bytes) -> BatchResult:
    from ._json import from_json

    data, status = _head(line)
    return BatchResult(
        id=data["id"],
        status=status,
        messages=tuple(from_json(data.get("messages", []))),
        usage=from_json(data.get("usage", {}), Usage),
        stop=_optional_str(data, "stop"),
        error_kind=_optional_str(data, "errorKind"),
        error=_optional_str(data, "error"),
        attempts=_attempts(data),
    )


def _read_lines(path: Path) -> tuple[list[bytes], int]:
    """The whole lines of ``path`` and the byte length they span (a last line without
    its newline, cut by a crash, is not among them)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), end


def read_results(path: str | os.PathLike[str]) -> dict[str, BatchResult]:
    """The results of a file :func:`run_batch` wrote, by id: the last line of each id
    (an aborted item that a rerun finished has two). A last line cut short by a crash
    is left out; ``ValueError`` naming the line for any other line that is not a result.
    """
    results: dict[str, BatchResult] = {}
    lines, _ = _read_lines(Path(path))
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            result = _parse(line)
        except Exception as error:
            raise ValueError(f"{os.fspath(path)!r}, line {number}: {error}") from None
        results[result.id] = result
    return results


def _finished(path: Path, resume: bool) -> tuple[set[str], int]:
    """The ids that have a ``done`` or ``error`` line in ``path`` (a rerun skips them),
    and the byte length of the file's whole lines. ``FileExistsError`` if the file holds
    anything and ``resume`` is false; ``ValueError`` naming a line that is not a result.
    """
    finished: set[str] = set()
    if not resume:
        try:
            if path.stat().st_size:
                raise FileExistsError(
                    f"{os.fspath(path)!r} already holds results; pass resume=True to skip them"
                )
        except FileNotFoundError:
            pass
        return finished, 0
    lines, end = _read_lines(path)
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                data, status = _head(line)
            except Exception as error:
                raise ValueError(f"{os.fspath(path)!r}, line {number}: {error}") from None
            if status != "aborted":
                finished.add(data["id"])
    return finished, end


class _Writer:
    """Appends result lines to the file, each flushed and fsync'd (in a worker thread)
    before the call that handed it over returns.

    A group commit: the lines that arrive while a write and its fsync run are written and
    fsync'd together by the next one, so that items ending together share one fsync and
    one trip to a worker thread. Lines are written whole, in the order they arrived; a
    call returns only once an fsync that followed its lines has returned. Once a write
    has failed, every call raises, its lines not written: what follows a line cut short
    could not be read back.
    """

    def __init__(self, file: Any) -> None:
        self.file = file
        self.lock = trio.Lock()  # fair: groups go in the order their lines arrived
        self.pending: list[bytes] = []
        self.queued = 0  # calls that handed lines over, in order: call n's ticket is n
        self.durable = 0  # lines up to this ticket are written and fsync'd
        self.error: BaseException | None = None  # the write that failed

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # the file is unbuffered: a write may take part of the bytes
            view = view[self.file.write(view) :]
        os.fsync(self.file.fileno())

    async def write(self, result: BatchResult) -> None:
        """Append ``result``'s line; return once it is fsync'd (see :meth:`write_line`)."""
        await self.write_line(_line(result), f"the line of {result.id!r}")

    async def write_line(self, data: bytes, what: str = "result lines") -> None:
        """Append whole lines (``_line``'s bytes); return once they are fsync'd. Call it
        shielded: a cancellation that lands while a group is in the worker thread waits
        for it. ``OSError`` naming ``what`` and the file if the write of its group failed.
        """
        self.pending.append(data)
        self.queued += 1
        ticket = self.queued
        async with self.lock:
            # the lock passes in the order of the tickets: every call of a group gets
            # it after the group's write, before any call of a later group
            if ticket <= self.durable:
                return
            if self.error is not None:
                raise OSError(
                    f"{what} not written to {getattr(self.file, 'name', '?')!r}: {self.error!r}"
                ) from self.error
            lines, self.pending = self.pending, []
            last = self.queued
            try:
                await trio.to_thread.run_sync(self._write, b"".join(lines))
            except BaseException as error:
                self.error = error
                raise
            self.durable = last


# --- running ---------------------------------------------------------------------------------


def _outcome(item: BatchItem, agent: Agent, start: int) -> BatchResult:
    messages = tuple(agent.state.messages)
    last = next((m for m in reversed(messages[start:]) if isinstance(m, AssistantMessage)), None)
    usage = _usage_of(messages[start:])
    if last is None:
        return BatchResult(id=item.id, status="done", messages=messages, usage=usage)
    if last.stop_reason == "error":
        return BatchResult(
            id=item.id,
            status="error",
            messages=messages,
            usage=usage,
            stop=last.stop_reason,
            error_kind=last.error_kind or "unknown",
            error=last.error_message,
        )
    status: Status = "aborted" if last.stop_reason == "aborted" else "done"
    return BatchResult(
        id=item.id, status=status, messages=messages, usage=usage, stop=last.stop_reason
    )


def _check_count(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an int of at least {least}, not {value!r:.80}")


def _check_settings(concurrency: int, rate_limit_retries: int, max_pause: float) -> None:
    _check_count("concurrency", concurrency, 1)
    _check_count("rate_limit_retries", rate_limit_retries, 0)
    if isinstance(max_pause, bool) or not isinstance(max_pause, int | float):
        raise TypeError(f"max_pause must be a number of seconds, not {max_pause!r:.80}")
    if not (math.isfinite(max_pause) and max_pause >= 0):
        raise ValueError(f"max_pause must be finite and at least 0, not {max_pause!r}")


def _check_items(items: Iterable[BatchItem]) -> list[BatchItem]:
    checked = list(items)
    seen: set[str] = set()
    for item in checked:
        if not isinstance(item, BatchItem):
            raise TypeError(f"items must be BatchItem records, not {item!r:.80}")
        if item.id in seen:
            raise ValueError(f"item id {item.id!r} appears more than once in the batch")
        seen.add(item.id)
    return checked


MakeAgent: TypeAlias = Callable[[BatchItem], "Agent | Awaitable[Agent]"]


async def _run_item(
    item: BatchItem,
    make_agent: MakeAgent,
    gates: _Gates,
    rate_limit_retries: int,
    record: Callable[[BatchResult], Awaitable[None]],
) -> None:
    """Run one item to its result, again after a rate-limited reply, and record the
    result (shielded). Cancellation: the item's partial transcript is recorded as
    ``aborted``, and the cancellation propagates."""
    usage = Usage()
    attempt = 0
    while True:
        attempt += 1
        agent: Agent | None = None
        start = 0
        try:
            made = make_agent(item)
            agent = await made if not isinstance(made, Agent) else made
            if not isinstance(agent, Agent):
                raise TypeError(f"make_agent returned {agent!r:.80}, not an Agent")
            own = agent._stream_fn
            agent._stream_fn = _gated(gates, own)
            try:  # the agent is the factory's: it leaves the batch as it came
                if item.transcript is not None:
                    agent.replace_messages(item.transcript)
                    start = len(item.transcript)
                    await agent.continue_()
                else:
                    start = len(agent.state.messages)
                    assert item.prompt is not None
                    await agent.prompt(item.prompt)
            finally:
                agent._stream_fn = own
        except Exception as error:
            messages = () if agent is None else tuple(agent.state.messages)
            usage = _add(usage, _usage_of(messages[start:]))
            result = BatchResult(
                id=item.id,
                status="error",
                messages=messages,
                usage=usage,
                error_kind="exception",
                error=_error_text(error),
                attempts=attempt,
            )
        except BaseException:
            if agent is not None:
                result = _outcome(item, agent, start)
                result = attrs.evolve(
                    result, status="aborted", usage=_add(usage, result.usage), attempts=attempt
                )
            else:
                result = BatchResult(id=item.id, status="aborted", attempts=attempt)
            with trio.CancelScope(shield=True):
                await record(result)
            raise
        else:
            result = _outcome(item, agent, start)
            result = attrs.evolve(result, usage=_add(usage, result.usage), attempts=attempt)
            if result.error_kind == "rate_limit" and attempt <= rate_limit_retries:
                usage = result.usage
                continue
        # however the run ended, its line is written whole (a cancellation arriving
        # now is raised at the next checkpoint)
        with trio.CancelScope(shield=True):
            await record(result)
        return


async def _run_all(
    items: Iterable[BatchItem],
    concurrency: int,
    run_item: Callable[[BatchItem], Awaitable[None]],
) -> None:
    """``run_item`` for every item, at most ``concurrency`` at once, each started in
    the items' order once a slot is free (no task waits for a slot, however many the
    items). One exception escapes, never a group."""
    slots = trio.Semaphore(concurrency)

    async def run(item: BatchItem) -> None:
        try:
            # an item whose slot came as the batch stopped does not start (nor get a line)
            await trio.lowlevel.checkpoint_if_cancelled()
            await run_item(item)
        finally:
            slots.release()

    try:
        async with trio.open_nursery() as nursery:
            for item in items:
                await slots.acquire()
                nursery.start_soon(run, item)
    except BaseExceptionGroup as group:
        raise one_exception(group) from None


class _Counts:
    """What a batch has recorded so far, for its summary."""

    def __init__(self, skipped: int) -> None:
        self.skipped = skipped
        self.done = 0
        self.aborted = 0
        self.failed: dict[str, int] = {}
        self.tokens = 0
        self.cost = 0.0

    def add(self, result: BatchResult) -> None:
        self.count(result.status, result.error_kind, result.usage)

    def count(self, status: Status, error_kind: str | None, usage: Usage) -> None:
        self.tokens += usage.total_tokens
        self.cost += usage.cost.total
        if status == "done":
            self.done += 1
        elif status == "aborted":
            self.aborted += 1
        else:
            kind = error_kind or "unknown"
            self.failed[kind] = self.failed.get(kind, 0) + 1

    def summary(self, rate_limit_wait: float) -> BatchSummary:
        return BatchSummary(
            done=self.done,
            failed=self.failed,
            skipped=self.skipped,
            aborted=self.aborted,
            tokens=self.tokens,
            cost=self.cost,
            rate_limit_wait=rate_limit_wait,
        )


def _open_results(path: Path, end: int) -> Any:
    """``path`` opened to append, a last line cut short by a crash cut off (``end``:
    the length of its whole lines)."""
    # unbuffered: a write that failed leaves nothing behind to be written later
    file = open(path, "ab", buffering=0)  # noqa: SIM115  # the caller closes it
    file.truncate(end)
    return file


async def run_batch(
    items: Iterable[BatchItem],
    make_agent: MakeAgent,
    *,
    out: str | os.PathLike[str],
    concurrency: int = 16,
    rate_limits: Mapping[str, RateLimits] | None = None,
    rate_limit_retries: int = 5,
    max_pause: float = 300.0,
    resume: bool = False,
    on_result: Callable[[BatchResult], None] | None = None,
) -> BatchSummary:
    """Run every item through an agent made for it, and append each outcome to ``out``.

    ``make_agent(item)`` (sync or async) makes the item's :class:`~trio_agent.Agent`;
    the batch runs ``agent.prompt(item.prompt)``, or, for a transcript,
    ``agent.replace_messages(item.transcript)`` then ``agent.continue_()``. At most
    ``concurrency`` items run at once. ``rate_limits`` maps a provider (a model's
    ``provider``, or its ``api`` when that is empty) to its :class:`RateLimits`, shared
    by every agent of the batch; a reply that fails with ``error_kind="rate_limit"``
    pauses every request to that provider for its ``retry_after`` (1 s when it gives
    none; ``max_pause`` seconds at most, whatever the server asks), and its item runs
    again from the start after the pause, up to
    ``rate_limit_retries`` times, then is recorded as failed. The agents' own
    ``max_retries`` still apply first; ``max_retries=0`` leaves the waiting to the batch.

    ``out`` gets one JSON line per item as it ends (see :class:`BatchResult`; read them
    with :func:`read_results`), flushed and fsync'd. With ``resume=False`` the file
    must not hold results (``FileExistsError`` naming it); with ``resume=True`` the
    items whose ids have a ``done`` or ``error`` line are skipped (see the module's docs
    for what a rerun does). ``on_result`` is called with each result after its line is
    written and fsync'd (items that end together share one fsync), in the batch's task
    that ended the item, and the summary counts it only then; an exception it raises
    stops the batch: the other running items are stopped as a cancellation stops them
    (their lines ``aborted``, each also passed to ``on_result``), no other item starts,
    and that exception escapes alone (when it raised more than once, the first, the
    others in its notes) once the file is closed, holding whole lines only. Items are
    checked first: ``ValueError`` naming a repeated id.

    A factory or a run that raises fails its item (``error_kind="exception"``, the
    exception's type and text in ``error``); the batch goes on. Cancellation: every
    running item is stopped as an abort stops it, its partial transcript written
    (shielded) as ``aborted``, and the cancellation propagates; the file holds whole
    lines only.
    """
    _check_settings(concurrency, rate_limit_retries, max_pause)
    items = _check_items(items)
    path = Path(out)
    gates = _Gates(rate_limits or {}, max_pause)
    finished, end = await trio.to_thread.run_sync(_finished, path, resume)
    todo = [item for item in items if item.id not in finished]
    counts = _Counts(skipped=len(items) - len(todo))
    file = await trio.to_thread.run_sync(_open_results, path, end)
    writer = _Writer(file)

    async def record(result: BatchResult) -> None:
        await writer.write(result)
        counts.add(result)
        if on_result is not None:
            on_result(result)

    try:
        await _run_all(
            todo,
            concurrency,
            functools.partial(
                _run_item,
                make_agent=make_agent,
                gates=gates,
                rate_limit_retries=rate_limit_retries,
                record=record,
            ),
        )
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(file.close)
    return counts.summary(gates.waited())
