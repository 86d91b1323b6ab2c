"""The scripted model: replies played from a script, no network, no key.

This is the provider behind :func:`trio_agent.testing.scripted_model` (``api="faux"``, as
``openai_chat`` is behind real models); :mod:`trio_agent.testing` exports the same
functions under the names tests use::

    from trio_agent.testing import reply, scripted_model, tool_call

    model = scripted_model([
        reply("Let me look.", tool_call("read", {"path": "README.md"})),
        lambda context: reply(f"I read {len(context.messages)} messages."),
    ])

Each script entry is a :class:`Reply` (or a ``str``, or an
``AssistantMessage``), or a function of the :class:`~trio_agent.LlmContext`
returning one, so an answer can be built from what the tools really returned.
The reply is streamed like a real provider streams: ``start``, each block's
``*_start`` / ``*_delta`` / ``*_end`` (text in chunks of ``chunk_size``
characters, tool-call arguments as chunks of their compact JSON), then
``done`` or ``error``. With ``pace`` (deltas per second) or ``chunk_delay``
each delta waits on Trio's clock first, so it is deterministic under
``trio.testing.MockClock``; without them each delta is only a cancellation
point. Each call waits once before its first event (a checkpoint, or
``start_delay``), as a request would.

The stream is lock-step: each event is made only after the loop has handled
the previous one, so an action taken while handling event *n* (an abort on
the third delta) deterministically affects event *n + 1*.

Every call is recorded (``model.calls``: the context, the options, the
model). When the script runs out the reply is an error ("no more scripted
responses"), not an exception.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

import attrs
import trio

from .._cancel import CancelProbe, cancel_probe
from .._events import AssistantMessageEvent, StreamError
from .._messages import (
    AssistantContent,
    AssistantMessage,
    ErrorKind,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from .._model import Model
from .._stream import AssistantMessageBuilder, Emit, LlmContext, StreamOptions

__all__ = [
    "Reply",
    "Script",
    "ScriptedCall",
    "ScriptedModel",
    "error",
    "model",
    "reply",
    "stream",
    "text",
    "thinking",
    "tool_call",
]

_DEFAULT_ERRORS = {"error": "scripted error", "aborted": "Request was aborted"}


def _content(value: Iterable[AssistantContent]) -> tuple[AssistantContent, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted reply and how to stream it.

    - ``content``: the blocks; ``stop_reason`` defaults to ``toolUse`` when
      there is a tool call, else ``stop``; ``error_message`` defaults to
      "scripted error" for ``error``.
    - ``error_kind``, ``http_status``, ``retry_after``: the error reply's fields
      (an ``aborted`` reply's kind defaults to ``"aborted"``), to test how an
      application handles a rate limit or a context overflow; a reply that does
      not end in ``error`` or ``aborted`` has none.
    - ``chunk_size``: characters per delta (``None``: the model's; 0: the
      whole text in one delta); ``chunk_delay``: seconds before each delta
      (``None``: from the model's pace); ``start_delay``: seconds before the
      first event.
    - ``emit_start=False``: emit only the terminal event (a provider that
      sends no ``start``).
    - ``raises``: the stream function raises this instead of replying (a
      stream function that breaks its contract, for testing failure paths).
    """

    content: tuple[AssistantContent, ...] = attrs.field(default=(), converter=_content)
    stop_reason: StopReason | None = None
    error_message: str | None = None
    error_kind: ErrorKind | None = None
    http_status: int | None = None
    retry_after: float | None = None
    usage: Usage = Usage()
    chunk_size: int | None = attrs.field(default=None)
    chunk_delay: float | None = None
    start_delay: float = 0.0
    emit_start: bool = True
    raises: BaseException | None = None

    @chunk_size.validator
    def _check_chunk_size(self, attribute: attrs.Attribute[int | None], value: int | None) -> None:
        # A negative size would stream no delta at all and lose the block's text.
        if value is not None and value < 0:
            raise ValueError(f"chunk_size must be >= 0, not {value!r}")


Script: TypeAlias = (
    str | AssistantMessage | Reply | Callable[[LlmContext], "str | AssistantMessage | Reply"]
)
"""What a script entry may be: a reply's text, an ``AssistantMessage``, a :class:`Reply`, or a
function of the ``LlmContext`` returning one."""


def text(text: str) -> TextContent:
    """A text block, for :func:`reply`."""
    return TextContent(text)


def thinking(text: str, *, signature: str | None = None, redacted: bool = False) -> ThinkingContent:
    """A thinking block, for :func:`reply`: with its provider's ``signature``, or
    ``redacted``."""
    return ThinkingContent(text, thinking_signature=signature, redacted=redacted)


def tool_call(name: str, arguments: dict[str, Any] | None = None, *, id: str = "") -> ToolCall:
    """A tool call; without ``id`` one is made when it streams (``faux_<call>_<block>``)."""
    return ToolCall(id, name, {} if arguments is None else arguments)


def reply(
    *content: str | AssistantContent,
    stop_reason: StopReason | None = None,
    error_message: str | None = None,
    error_kind: ErrorKind | None = None,
    http_status: int | None = None,
    retry_after: float | None = None,
    usage: Usage | None = None,
    chunk_size: int | None = None,
    chunk_delay: float | None = None,
    start_delay: float = 0.0,
    emit_start: bool = True,
) -> Reply:
    """A reply of these blocks (a ``str`` is a text block), for a script.

    ``stop_reason`` defaults to ``toolUse`` when there is a tool call, else ``stop``.
    ``error_kind``, ``http_status`` and ``retry_after`` are those of a reply that ends in
    ``error`` or ``aborted`` (an aborted reply's kind defaults to ``"aborted"``); another
    reply has none. The other keywords are :class:`Reply`'s: how the reply streams.

    Raises:
        ValueError: a negative ``chunk_size``.
    """
    return Reply(
        content=tuple(TextContent(block) if isinstance(block, str) else block for block in content),
        stop_reason=stop_reason,
        error_message=error_message,
        error_kind=error_kind,
        http_status=http_status,
        retry_after=retry_after,
        usage=Usage() if usage is None else usage,
        chunk_size=chunk_size,
        chunk_delay=chunk_delay,
        start_delay=start_delay,
        emit_start=emit_start,
    )


def error(
    message: str = "scripted error",
    *content: str | AssistantContent,
    kind: ErrorKind | None = None,
    http_status: int | None = None,
    retry_after: float | None = None,
) -> Reply:
    """A reply that ends with ``stop_reason="error"`` after ``content``, of error ``kind``
    (its ``error_kind``), with the ``http_status`` and ``retry_after`` given::

        error("prompt is too long: 213462 tokens > 200000 maximum", kind="context_overflow")
    """
    return reply(
        *content,
        stop_reason="error",
        error_message=message,
        error_kind=kind,
        http_status=http_status,
        retry_after=retry_after,
    )


@attrs.frozen(kw_only=True)
class ScriptedCall:
    """One call of the stream function, as the scripted model received it: the ``model``,
    the :class:`~trio_agent.LlmContext` and the :class:`~trio_agent.StreamOptions` it was
    given (``trio_agent.testing.ScriptedCall``). A :class:`ScriptedModel` keeps them in
    ``calls``."""

    model: Model
    context: LlmContext
    options: StreamOptions


class _Script:
    """The mutable part of a scripted model: what is left to play, what was asked."""

    __slots__ = ("calls", "next", "responses")

    def __init__(self, responses: Iterable[Script]) -> None:
        self.responses = list(responses)
        self.calls: list[ScriptedCall] = []
        self.next = 0


@attrs.frozen(kw_only=True, eq=False)
class ScriptedModel(Model):
    """A :class:`~trio_agent.Model` that carries its script: what
    :func:`trio_agent.testing.scripted_model` makes.

    ``add(*responses)`` appends to the script, ``calls`` is every call received (a
    :class:`ScriptedCall` each), ``remaining`` the replies not played yet. ``pace`` and
    ``chunk_size`` are the defaults of its replies (see :func:`model`). Copies made with
    :func:`attrs.evolve` share the script and the record.
    """

    pace: float | None = None
    chunk_size: int | None = None
    _script: _Script = attrs.field(factory=lambda: _Script(()), alias="script")

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call received so far, in order."""
        return self._script.calls

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been played."""
        return max(0, len(self._script.responses) - self._script.next)

    def add(self, *responses: Script) -> None:
        """Append replies to the script."""
        self._script.responses.extend(responses)


def model(
    responses: Iterable[Script] = (),
    *,
    id: str = "faux",
    provider: str = "faux",
    pace: float | None = None,
    chunk_size: int | None = None,
    reasoning: bool = False,
) -> ScriptedModel:
    """A scripted model playing ``responses`` in order, one per call, lock-step, recording
    every call (``trio_agent.testing.scripted_model``).

    Args:
        responses: the script: each entry a :class:`Reply`, a ``str`` (a text reply), an
            ``AssistantMessage``, or a function of the :class:`~trio_agent.LlmContext`
            returning one. A call past its end gets an error reply ("no more scripted
            responses"), not an exception.
        id: the model's ``id``, recorded on its replies.
        provider: the model's ``provider``.
        pace: deltas per second on Trio's clock (``None``: as fast as the loop takes them).
        chunk_size: characters per delta (``None`` or 0: whole blocks). ``pace`` and
            ``chunk_size`` can be overridden per reply.
        reasoning: the model's ``reasoning`` (whether it takes a thinking level).

    Returns:
        A :class:`ScriptedModel`: ``add()`` more replies, read its ``calls``.

    Raises:
        TypeError: ``responses`` is a single reply, not an iterable of them.
        ValueError: a ``pace`` that is not positive, a negative ``chunk_size``.
    """
    if isinstance(responses, str | Reply | AssistantMessage):
        raise TypeError(
            f"responses must be an iterable of replies, not a single {type(responses).__name__}"
        )
    if pace is not None and not pace > 0:
        raise ValueError(f"pace must be a positive number of deltas per second, not {pace!r}")
    if chunk_size is not None and chunk_size < 0:
        raise ValueError(f"chunk_size must be >= 0, not {chunk_size!r}")
    return ScriptedModel(
        id=id,
        api="faux",
        provider=provider,
        reasoning=reasoning,
        pace=pace,
        chunk_size=chunk_size,
        script=_Script(responses),
    )


def _as_reply(script: str | AssistantMessage | Reply) -> Reply:
    if isinstance(script, Reply):
        return script
    if isinstance(script, str):
        return Reply(content=(TextContent(script),))
    if isinstance(script, AssistantMessage):
        return Reply(
            content=script.content,
            stop_reason=script.stop_reason,
            error_message=script.error_message,
            error_kind=script.error_kind,
            http_status=script.http_status,
            retry_after=script.retry_after,
            usage=script.usage,
        )
    raise TypeError(
        f"a scripted response must be a Reply, str or AssistantMessage, not {script!r:.80}"
    )


def _chunks(text: str, size: int) -> list[str]:
    if not text:
        return [""]
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _fail(model: Model, emit: Emit, text: str) -> AssistantMessage:
    """End the call with an error reply (after the wait every call has)."""
    await trio.lowlevel.checkpoint()
    message = AssistantMessage(
        api="faux", provider=model.provider, model=model.id, stop_reason="error", error_message=text
    )
    await emit(StreamError("error", message))
    return message


async def stream(
    model: Model, context: LlmContext, options: StreamOptions, emit: Emit
) -> AssistantMessage:
    """The stream function of scripted models (``api="faux"``): plays the next reply of
    ``model``'s script into ``emit`` and returns it.

    Records the call in ``model.calls``. A model without a script, or a script that has
    run out, gives an error reply, not an exception; a :class:`Reply` with ``raises``
    makes it raise that instead (a broken stream function, for failure paths).

    Cancellation: the call waits once before its first event (a checkpoint, or the
    reply's ``start_delay``) and before each delta (a checkpoint, or a wait on Trio's
    clock when paced); ``Cancelled`` propagates from there.
    """
    script: _Script | None = getattr(model, "_script", None)
    if script is None:
        return await _fail(
            model,
            emit,
            f"model {model.id!r} has no script: make it with trio_agent.testing.scripted_model()",
        )
    assert isinstance(model, ScriptedModel)
    index = script.next
    script.calls.append(ScriptedCall(model=model, context=context, options=options))
    if index >= len(script.responses):
        # Not advancing ``next``: a reply added later (``model.add``) is played
        # by the next call instead of being skipped.
        return await _fail(
            model,
            emit,
            f"no more scripted responses "
            f"(call {len(script.calls)}, {len(script.responses)} scripted)",
        )
    script.next += 1
    entry = script.responses[index]
    spec = _as_reply(entry(context) if callable(entry) else entry)
    if spec.start_delay:
        await trio.sleep(spec.start_delay)
    else:
        await trio.lowlevel.checkpoint()
    if spec.raises is not None:
        raise spec.raises

    builder = AssistantMessageBuilder(
        api="faux", provider=model.provider, model=model.id, thinking_level=options.thinking_level
    )
    builder.usage = spec.usage
    stop_reason = spec.stop_reason or "stop"
    error_message = spec.error_message or _DEFAULT_ERRORS.get(stop_reason)
    if spec.emit_start:
        size = model.chunk_size if spec.chunk_size is None else spec.chunk_size
        delay = spec.chunk_delay
        if delay is None:
            delay = 1 / model.pace if model.pace else 0.0
        cancelled = cancel_probe()
        await emit(builder.start())
        await _stream_content(builder, spec.content, index, size, delay, cancelled, emit)
        final = builder.finish(stop_reason, error_message)
        if stop_reason == "error" or stop_reason == "aborted":
            final = _failed(final, spec)
    else:
        content = tuple(
            attrs.evolve(block, id=f"faux_{index}_{position}")
            if isinstance(block, ToolCall) and not block.id
            else block
            for position, block in enumerate(spec.content)
        )
        final = AssistantMessage(
            content=content,
            api="faux",
            provider=model.provider,
            model=model.id,
            usage=spec.usage,
            stop_reason=spec.stop_reason or ("toolUse" if _has_tool_call(content) else "stop"),
            error_message=error_message,
        )
        if final.stop_reason == "error" or final.stop_reason == "aborted":
            final = _failed(final, spec)
    await emit(builder.done(final))
    return final


def _failed(message: AssistantMessage, spec: Reply) -> AssistantMessage:
    """An error or aborted reply with the script's kind, status and retry delay."""
    kind = spec.error_kind
    if kind is None and message.stop_reason == "aborted":
        kind = "aborted"
    return attrs.evolve(
        message, error_kind=kind, http_status=spec.http_status, retry_after=spec.retry_after
    )


def _has_tool_call(content: tuple[AssistantContent, ...]) -> bool:
    return any(isinstance(block, ToolCall) for block in content)


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


async def _stream_content(
    builder: AssistantMessageBuilder,
    content: tuple[AssistantContent, ...],
    call: int,
    size: int | None,
    delay: float,
    cancelled: CancelProbe,
    emit: Emit,
) -> None:
    """Stream each block: its start, a delta per chunk, its end.

    Each delta first waits for its pace, or is only a cancellation point: an
    abort while the loop handled delta n stops the stream before n + 1.
    """
    for position, block in enumerate(content):
        delta: Callable[[str], AssistantMessageEvent]
        if isinstance(block, ToolCall):
            id = block.id or f"faux_{call}_{position}"  # made only when needed
            start: AssistantMessageEvent = builder.toolcall_start(id, block.name)
            text = _encode(block.arguments) if block.arguments else "{}"
            delta = builder.toolcall_delta
        elif isinstance(block, TextContent):
            start, text, delta = builder.text_start(), block.text, builder.text_delta
        else:
            start = builder.thinking_start(redacted=block.redacted)
            text, delta = block.thinking, builder.thinking_delta
        await emit(start)
        for chunk in _chunks(text, size) if size else (text,):  # no size: one chunk
            if delay:
                await trio.sleep(delay)
            elif cancelled():
                await trio.lowlevel.checkpoint_if_cancelled()
            await emit(delta(chunk))
        await emit(_block_end(builder, block))


def _block_end(builder: AssistantMessageBuilder, block: AssistantContent) -> AssistantMessageEvent:
    """Close ``block``, the open block: its end event."""
    if isinstance(block, ToolCall):
        if block.thought_signature is not None:
            builder.set_signature(block.thought_signature)
        return builder.toolcall_end({**block.arguments})
    if isinstance(block, TextContent):
        return builder.text_end(signature=block.text_signature)
    return builder.thinking_end(signature=block.thinking_signature)
