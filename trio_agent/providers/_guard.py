"""What keeps the API key out of a reply whose request carried one.

A server may echo the key anywhere it chooses the text: in the response id,
in streamed text or thinking (whole, or split across deltas), in a tool
call's id, name or arguments, in a signature. When a request carries a key,
:class:`~trio_agent.providers._common.HttpProvider` builds the reply with a
:class:`GuardedBuilder`, which lets no copy of the key into an event or the
message: in every string it is given, the key is replaced by ``***``, and the
text a block streams passes through a :class:`KeyFilter`, which holds back
the end of what arrived while it could still become the key.

Only whole copies of the key are taken out of a reply, not the beginnings of
one that :func:`~trio_agent.providers._transport.redact` takes out of an
error text (which may have been cut short in the middle of a key): a model
writes a key's public prefix (``sk-proj-``, ``AIza``) for reasons of its own,
in code and in a tool's arguments, and the reply must say what it wrote.

A reply without a key (a local server, the scripted model) is built by the
plain :class:`~trio_agent._stream.AssistantMessageBuilder`, which does none
of this work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import attrs

from .._events import (
    AssistantMessageEvent,
    TextDelta,
    TextEnd,
    ThinkingDelta,
    ThinkingEnd,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from .._messages import (
    AssistantContent,
    AssistantMessage,
    ReplyThinkingLevel,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from .._stream import AssistantMessageBuilder, _Kind

__all__ = ["GuardedBuilder", "KeyFilter", "clean_value"]


def _hold_from(text: str, secret: str, start: int) -> int:
    """Where the longest end of ``text`` (from ``start`` on) that begins ``secret`` without
    being all of it starts: ``len(text)`` when no end of it does.

    Only the last ``len(secret) - 1`` characters can be such an end, and each of
    them that is the secret's first character is tried, longest first: a check
    fails at its first character that differs, so for a key (which does not
    repeat itself) this is linear in the key's length, not quadratic.
    """
    size = len(text)
    first = secret[0]
    at = text.find(first, max(start, size - len(secret) + 1))
    while at != -1:
        if secret.startswith(text[at:]):
            return at
        at = text.find(first, at + 1)
    return size


def _probe(secret: str) -> tuple[str, str, tuple[str, ...]]:
    """What a piece must hold for the filter to change or hold anything of it, when
    nothing is held: ``secret``'s first character, and its first four characters in
    it or its first one to three (short of all of it) at its end.

    A held end is a beginning of the secret: four characters or more of it hold
    its first four, and a shorter one is among those ends. Every whole secret
    holds its first four.
    """
    return secret[0], secret[:4], tuple(secret[:n] for n in range(1, 4) if n < len(secret))


class KeyFilter:
    """The text of one streamed block, piece by piece, with every copy of ``secret`` as
    ``***``.

    :meth:`feed` takes each piece as it arrives and returns what may be shown
    of it; :meth:`finish`, at the block's end, returns the rest. Joined, what
    they return is exactly ``text.replace(secret, "***")`` of the whole text
    (left to right, as ``str.replace``), and nothing they return has ever held
    the secret, whole or split across pieces: the end of the text that could
    still become it is held back until the next piece says (at most the
    secret's length less one).

    When nothing is held, a piece that holds none of the secret's first four
    characters and does not end with its first one to three is returned as it
    is (:func:`_probe`: a few searches in C, and no copy). Otherwise the work
    is linear in the piece and the secret's length.
    """

    __slots__ = ("_first", "_head", "_secret", "_tails", "held")

    def __init__(self, secret: str) -> None:
        self._secret = secret
        self._first, self._head, self._tails = _probe(secret)
        self.held = ""  # the end of the text so far that begins the secret

    def might_change(self, piece: str) -> bool:
        """Whether :meth:`feed` could return anything but ``piece`` itself."""
        return bool(self.held) or (
            self._first in piece and (self._head in piece or piece.endswith(self._tails))
        )

    def feed(self, piece: str) -> str:
        """What may be shown of the text now that ``piece`` came."""
        if not self.might_change(piece):
            return piece  # nothing in it can be, or begin, the secret
        text = self.held + piece
        secret = self._secret
        out: list[str] = []
        start = 0
        found = text.find(secret)
        while found != -1:  # as str.replace: left to right, never overlapping
            out += (text[start:found], "***")
            start = found + len(secret)
            found = text.find(secret, start)
        hold = _hold_from(text, secret, start)
        out.append(text[start:hold])
        self.held = text[hold:]
        return "".join(out)

    def finish(self) -> str:
        """The rest of the text, at the end of the block (what was held back: not the key)."""
        rest, self.held = self.held, ""
        return rest


def _without(text: str, secret: str) -> str:
    """``text`` with every copy of ``secret`` as ``***``."""
    return text.replace(secret, "***") if secret in text else text


def clean_value(value: Any, secret: str) -> Any:
    """``value`` (a JSON value: parsed tool-call arguments) with every copy of ``secret`` in
    its strings, keys and values at any depth, as ``***``; the same object when nothing
    changed.

    The depth is that of parsed JSON, which jiter bounds (200 levels).
    """
    if type(value) is str:
        return _without(value, secret)
    if type(value) is dict:
        changed = False
        out = {}
        for key, item in value.items():
            new_key, new_item = clean_value(key, secret), clean_value(item, secret)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if type(value) is list:
        items = [clean_value(item, secret) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
    return value


def _signature(signature: str | None, secret: str) -> str | None:
    return None if signature is None else _without(signature, secret)


def _clean_block(block: AssistantContent, secret: str) -> AssistantContent:
    if isinstance(block, TextContent):
        return attrs.evolve(
            block,
            text=_without(block.text, secret),
            text_signature=_signature(block.text_signature, secret),
        )
    if isinstance(block, ThinkingContent):
        return attrs.evolve(
            block,
            thinking=_without(block.thinking, secret),
            thinking_signature=_signature(block.thinking_signature, secret),
        )
    if isinstance(block, ToolCall):
        return attrs.evolve(
            block,
            id=_without(block.id, secret),
            name=_without(block.name, secret),
            arguments=clean_value(block.arguments, secret),
            thought_signature=_signature(block.thought_signature, secret),
        )
    return block


_Event = TypeVar("_Event", bound=AssistantMessageEvent)

_plain_text_delta = AssistantMessageBuilder.text_delta
_plain_thinking_delta = AssistantMessageBuilder.thinking_delta
_plain_toolcall_delta = AssistantMessageBuilder.toolcall_delta


class GuardedBuilder(AssistantMessageBuilder):
    """An :class:`~trio_agent._stream.AssistantMessageBuilder` that lets no copy of
    ``secret`` through.

    In every string a parser gives it — the response id, a tool call's id and
    name, its arguments (every string in them, at any depth, partial and
    final), a signature — each copy of the secret is replaced by ``***``. The
    text of a text, thinking or tool-call block passes through a
    :class:`KeyFilter`: a delta shows what is known not to be part of the
    secret (it may be empty while the end of the text could still become it),
    and when the block ends, the held rest comes as one more delta just before
    the ``*_end`` event. So the deltas of a block, joined, are its final text,
    which is the text the server sent with every copy of the secret as ``***``.

    That last delta is made when the parser closes the block, after the
    parser has made its ``*_end`` event: :meth:`released` puts each one before
    its end event (and drops the deltas that show nothing), so every list of
    events a parser returns must go through it when :attr:`untidy` is set. A
    block that closes without an end event (another opens, or the reply
    finishes) still gets the held rest in its final text.
    """

    __slots__ = ("_filter", "_inserts", "_secret", "untidy")

    def __init__(
        self,
        secret: str,
        *,
        api: str,
        provider: str,
        model: str,
        provider_thinking_level: str | None = None,
        thinking_level: ReplyThinkingLevel | None = None,
    ) -> None:
        super().__init__(
            api=api,
            provider=provider,
            model=model,
            provider_thinking_level=provider_thinking_level,
            thinking_level=thinking_level,
        )
        self._secret = secret
        self._filter = KeyFilter(secret)
        self._inserts: list[tuple[AssistantMessageEvent, AssistantMessageEvent]] = []
        self.untidy = False
        """A delta to drop or to move: :meth:`released` has work to do."""

    def _clean(self, text: str) -> str:
        return _without(text, self._secret)

    def _shown(self, delta: str) -> str:
        """What a delta of the open block shows (see :class:`KeyFilter`)."""
        key_filter = self._filter
        if not key_filter.might_change(delta):  # most deltas: a few searches in C
            return delta
        shown = key_filter.feed(delta)
        if not shown:
            self.untidy = True  # a delta that shows nothing: released() drops it
        return shown

    # -- the fields -------------------------------------------------------------------

    @property
    def response_id(self) -> str | None:
        """The provider's id of the response, without the secret."""
        return self._response_id

    @response_id.setter
    def response_id(self, response_id: str | None) -> None:
        self._response_id = None if response_id is None else self._clean(response_id)
        self._frame = None

    def set_signature(self, signature: str) -> None:
        super().set_signature(self._clean(signature))

    # -- blocks -----------------------------------------------------------------------

    def _finish_open(self) -> AssistantContent:
        """Close the open block without an event: what its filter held is in its text (and
        the filter, emptied, serves the next block)."""
        block = self._open
        rest = self._filter.finish()
        if rest and block is not None:
            block.chunks.append(rest)
        return super()._finish_open()

    def _flush(self, kind: _Kind) -> AssistantMessageEvent | None:
        """The last delta of the open block: what its filter held back, if anything."""
        block = self._open
        if block is None or block.kind != kind:
            self._require(kind)  # raises: no such block is open
        rest = self._filter.finish()
        if not rest:
            return None
        if kind == "text":
            return _plain_text_delta(self, rest)
        if kind == "thinking":
            return _plain_thinking_delta(self, rest)
        return _plain_toolcall_delta(self, rest)

    def _ended(self, end: _Event, last: AssistantMessageEvent | None) -> _Event:
        if last is not None:
            self._inserts.append((end, last))
            self.untidy = True
        return end

    def _signed(self, signature: str | None) -> str | None:
        return None if signature is None else self._clean(signature)

    def text_delta(self, delta: str) -> TextDelta:
        return _plain_text_delta(self, self._shown(delta))

    def text_end(self, *, signature: str | None = None) -> TextEnd:
        last = self._flush("text")
        return self._ended(super().text_end(signature=self._signed(signature)), last)

    def thinking_delta(self, delta: str) -> ThinkingDelta:
        return _plain_thinking_delta(self, self._shown(delta))

    def thinking_end(self, *, signature: str | None = None) -> ThinkingEnd:
        last = self._flush("thinking")
        return self._ended(super().thinking_end(signature=self._signed(signature)), last)

    def toolcall_start(self, id: str, name: str) -> ToolCallStart:
        return super().toolcall_start(self._clean(id), self._clean(name))

    def toolcall_delta(self, delta: str, arguments: dict[str, Any] | None = None) -> ToolCallDelta:
        if arguments is not None:
            arguments = clean_value(arguments, self._secret)
        return _plain_toolcall_delta(self, self._shown(delta), arguments)

    def toolcall_end(self, arguments: dict[str, Any] | None = None) -> ToolCallEnd:
        last = self._flush("toolCall")
        if arguments is not None:
            arguments = clean_value(arguments, self._secret)
        return self._ended(super().toolcall_end(arguments), last)

    # -- what the driver does with it -------------------------------------------------

    def released(self, events: Iterable[AssistantMessageEvent]) -> Iterable[AssistantMessageEvent]:
        """``events`` (what a parser returned) as they are emitted: each block's last
        delta just before its end event, and no delta that shows nothing."""
        if not self.untidy:
            return events
        self.untidy = False
        before = {id(end): last for end, last in self._inserts}
        self._inserts.clear()
        out: list[AssistantMessageEvent] = []
        for event in events:
            last = before.get(id(event))
            if last is not None:
                out.append(last)
            if event.type.endswith("_delta") and not event.delta:  # type: ignore[union-attr]
                continue
            out.append(event)
        return out

    def scrub(self, message: AssistantMessage) -> AssistantMessage:
        """The final message, each block this builder did not make (a parser rebuilds a
        block whose pieces came after it closed) without the secret too."""
        made = {id(block) for block in self._done}
        content = message.content
        if all(id(block) in made for block in content) and (
            message.response_id is self._response_id
        ):
            return message
        secret = self._secret
        response_id = message.response_id
        return attrs.evolve(
            message,
            content=tuple(
                block if id(block) in made else _clean_block(block, secret) for block in content
            ),
            response_id=(
                response_id
                if response_id is self._response_id or response_id is None
                else _without(response_id, secret)
            ),
        )
