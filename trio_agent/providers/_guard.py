"""What keeps the API key out of a reply whose request carried one.

A server may echo the key anywhere it chooses the text: in the response id,
in streamed text or thinking (whole, or split across deltas), in a tool
call's id, name or arguments, in a signature. When a request carries a key,
:class:`~trio_agent.providers._common.HttpProvider` builds the reply with a
:class:`GuardedBuilder`, which lets no such text into an event or the
message as the server sent it: every string it is given is passed through
:func:`~trio_agent.providers._transport.redact`, and the text a block
streams passes through a :class:`KeyFilter`, which holds back the end of
what arrived while it could still become the key.

A reply without a key (a local server, the scripted model) is built by the
plain :class:`~trio_agent._stream.AssistantMessageBuilder`, which does none
of this work.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias, TypeVar

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
from .._messages import AssistantContent, AssistantMessage, TextContent, ThinkingContent, ToolCall
from .._stream import (
    AssistantMessageBuilder,
    _Frame,
    _Kind,
    _OpenBlock,
    _Snapshot,
    _snapshot,
    _text_delta,
)
from ._transport import SECRET_FRAGMENT, _continues_key, redact

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


class _Whole:
    """The first pass of :func:`redact`, on a stream: each whole ``secret`` as ``***``.

    ``held`` is the end of the text so far that begins the secret: it becomes
    the secret, or not, with what comes next.
    """

    __slots__ = ("held", "secret")

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.held = ""

    def feed(self, piece: str, final: bool) -> str:
        text = self.held + piece
        secret = self.secret
        out: list[str] = []
        start = 0
        found = text.find(secret)
        while found != -1:  # as str.replace: left to right, never overlapping
            out += (text[start:found], "***")
            start = found + len(secret)
            found = text.find(secret, start)
        hold = len(text) if final else _hold_from(text, secret, start)
        out.append(text[start:hold])
        self.held = text[hold:]
        return "".join(out)


class _Cut:
    """The second pass of :func:`redact` (``_redact_cut``), on a stream: each beginning
    of ``secret`` of :data:`SECRET_FRAGMENT` characters or more that stops where a cut
    left it (at the end of the text, or before a character no key holds) as ``***``.

    ``held`` starts where the pass is undecided: at a beginning of the secret
    that reaches the end of the text so far (what comes next decides), or at
    an end of the text that could still grow into one.
    """

    __slots__ = ("head", "held", "secret")

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.head = secret[:SECRET_FRAGMENT]
        self.held = ""

    def feed(self, piece: str, final: bool) -> str:
        text = self.held + piece
        secret, head = self.secret, self.head
        size = len(text)
        out: list[str] = []
        kept = 0  # text[:kept] is written out
        at = 0  # where the search for the next beginning goes on
        found = text.find(head)
        while found != -1:
            end = found + SECRET_FRAGMENT
            limit = min(size, found + len(secret))
            while end < limit and text[end] == secret[end - found]:
                end += 1
            if end == size and not final:  # what comes next decides: hold it from here
                out.append(text[kept:found])
                self.held = text[found:]
                return "".join(out)
            if end == size or not _continues_key(text[end]):
                out += (text[kept:found], "***")
                kept = at = end
            else:
                at = found + 1
            found = text.find(head, at)
        hold = size if final else _hold_from(text, head, max(at, kept))
        out.append(text[kept:hold])
        self.held = text[hold:]
        return "".join(out)


_Probe: TypeAlias = tuple[str, str, tuple[str, ...]]


def _probe(secret: str) -> _Probe:
    """What a piece must hold for the filter to change or hold anything of it, when
    nothing is held: ``secret``'s first character, and its first four characters in
    it or its first one to three (short of all of it) at its end.

    A held end is a beginning of the secret (of the whole one, or of its first
    four characters): four characters or more of it hold its first four, and a
    shorter one is among those ends. Every whole secret holds its first four.
    """
    return (
        secret[0],
        secret[:SECRET_FRAGMENT],
        tuple(secret[:n] for n in range(1, 4) if n < len(secret)),
    )


class KeyFilter:
    """The text of one streamed block, piece by piece, as :func:`redact` leaves it.

    :meth:`feed` takes each piece as it arrives and returns what may be shown
    of it; :meth:`finish`, at the block's end, returns the rest. Joined, what
    they return is exactly ``redact(text, secrets)`` of the whole text, and
    nothing they return has ever held a secret, whole or split across
    pieces: the end of the text that could still become one is held back
    until the next piece says (at most a secret's length).

    When nothing is held, a piece that holds no secret's first four
    characters and does not end with one's first one to three is returned as
    it is (:func:`_probe`: a few searches in C, and no copy). Otherwise the
    work is linear in the piece and the secret's length.
    """

    __slots__ = ("_probes", "_stages", "holding")

    def __init__(self, secrets: Iterable[str]) -> None:
        stages: list[_Whole | _Cut] = []
        probes: list[_Probe] = []
        for secret in secrets:
            if not secret:
                continue
            stages.append(_Whole(secret))
            if len(secret) > SECRET_FRAGMENT:
                stages.append(_Cut(secret))
            probes.append(_probe(secret))
        self._stages = tuple(stages)
        self._probes = tuple(probes)
        self.holding = False  # some stage holds text back

    def feed(self, piece: str) -> str:
        """What may be shown of the text now that ``piece`` came."""
        if not self.holding:
            for first, head, tails in self._probes:
                if first in piece and (head in piece or piece.endswith(tails)):
                    break
            else:
                return piece  # nothing in it can be, or begin, a secret
        return self._pass(piece, final=False)

    def finish(self) -> str:
        """The rest of the text, at the end of the block (what was held back, redacted)."""
        if not self.holding:
            return ""
        return self._pass("", final=True)

    def _pass(self, piece: str, final: bool) -> str:
        holding = False
        for stage in self._stages:
            piece = stage.feed(piece, final)
            holding = holding or bool(stage.held)
        self.holding = holding
        return piece


def clean_value(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (a JSON value: parsed tool-call arguments) with every string in it, keys
    and values at any depth, rid of the secrets; the same object when nothing changed.

    The depth is that of parsed JSON, which jiter bounds (200 levels).
    """
    if type(value) is str:
        cleaned = redact(value, secrets)
        return cleaned if cleaned != value else value
    if type(value) is dict:
        changed = False
        out = {}
        for key, item in value.items():
            new_key, new_item = clean_value(key, secrets), clean_value(item, secrets)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if type(value) is list:
        items = [clean_value(item, secrets) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
    return value


def _clean_block(block: AssistantContent, secrets: tuple[str, ...]) -> AssistantContent:
    if isinstance(block, TextContent):
        signature = block.text_signature
        return attrs.evolve(
            block,
            text=redact(block.text, secrets),
            text_signature=None if signature is None else redact(signature, secrets),
        )
    if isinstance(block, ThinkingContent):
        signature = block.thinking_signature
        return attrs.evolve(
            block,
            thinking=redact(block.thinking, secrets),
            thinking_signature=None if signature is None else redact(signature, secrets),
        )
    if isinstance(block, ToolCall):
        signature = block.thought_signature
        return attrs.evolve(
            block,
            id=redact(block.id, secrets),
            name=redact(block.name, secrets),
            arguments=clean_value(block.arguments, secrets),
            thought_signature=None if signature is None else redact(signature, secrets),
        )
    return block


_Event = TypeVar("_Event", bound=AssistantMessageEvent)

_plain_text_delta = AssistantMessageBuilder.text_delta
_plain_thinking_delta = AssistantMessageBuilder.thinking_delta
_plain_toolcall_delta = AssistantMessageBuilder.toolcall_delta


class GuardedBuilder(AssistantMessageBuilder):
    """An :class:`~trio_agent._stream.AssistantMessageBuilder` that lets no secret through.

    Every string a parser gives it — the response id, a tool call's id and
    name, its arguments (every string in them, at any depth, partial and
    final), a signature — is passed through :func:`redact`. The text of a
    text, thinking or tool-call block passes through a :class:`KeyFilter`:
    a delta shows what is known not to be part of a secret (it may be empty
    while the end of the text could still become one), and when the block
    ends, the held rest comes as one more delta just before the ``*_end``
    event. So the deltas of a block, joined, are its final text, which is
    ``redact`` of the text the server sent.

    That last delta is made when the parser closes the block, after the
    parser has made its ``*_end`` event: :meth:`released` puts each one before
    its end event (and drops the deltas that show nothing), so every list of
    events a parser returns must go through it when :attr:`untidy` is set. A
    block that closes without an end event (another opens, or the reply
    finishes) still gets the held rest in its final text.
    """

    __slots__ = ("_filter", "_first", "_head", "_inserts", "_secrets", "_tails", "untidy")

    def __init__(
        self,
        secrets: tuple[str, ...],
        *,
        api: str,
        provider: str,
        model: str,
        provider_thinking_level: str | None = None,
    ) -> None:
        super().__init__(
            api=api, provider=provider, model=model, provider_thinking_level=provider_thinking_level
        )
        self._secrets = secrets
        self._filter = KeyFilter(secrets)
        # What text_delta looks for before it asks the filter (see _probe); with several
        # keys, "": the filter is always asked.
        single = len(secrets) == 1 and secrets[0]
        self._first, self._head, self._tails = _probe(secrets[0]) if single else ("", "", ("",))
        self._inserts: list[tuple[AssistantMessageEvent, AssistantMessageEvent]] = []
        self.untidy = False
        """A delta to drop or to move: :meth:`released` has work to do."""

    def _clean(self, text: str) -> str:
        return redact(text, self._secrets)

    # -- the fields -------------------------------------------------------------------

    @property
    def response_id(self) -> str | None:
        """The provider's id of the response, rid of the secrets."""
        return self._response_id

    @response_id.setter
    def response_id(self, response_id: str | None) -> None:
        self._response_id = None if response_id is None else self._clean(response_id)
        self._frame = None

    def set_signature(self, signature: str) -> None:
        super().set_signature(self._clean(signature))

    # -- blocks -----------------------------------------------------------------------

    def _begin(self, block: _OpenBlock) -> _Snapshot:
        snapshot = super()._begin(block)  # closes the open block first (_finish_open)
        self._filter = KeyFilter(self._secrets)
        return snapshot

    def _finish_open(self) -> AssistantContent:
        """Close the open block without an event: what its filter held is in its text."""
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

    def text_delta(self, delta: str) -> TextDelta:
        # The one method of this class that runs for most deltas: the filter is asked
        # only when the delta could hold a beginning of the key, and the plain
        # builder's text_delta is inlined.
        block = self._open
        if block is None or block.kind != "text":
            block = self._require("text")
        key_filter = self._filter
        first = self._first
        if key_filter.holding or (
            first in delta and (self._head in delta or delta.endswith(self._tails))
        ):
            delta = key_filter.feed(delta)
            if not delta:
                self.untidy = True
        chunks = block.chunks
        chunks.append(delta)
        frame = self._frame
        if frame is None:
            frame = self._frame = _Frame(self)
        return _text_delta(frame.done, delta, _snapshot(frame, len(chunks)))

    def text_end(self, *, signature: str | None = None) -> TextEnd:
        last = self._flush("text")
        signature = None if signature is None else self._clean(signature)
        return self._ended(super().text_end(signature=signature), last)

    def thinking_delta(self, delta: str) -> ThinkingDelta:
        self._require("thinking")
        shown = self._filter.feed(delta)
        if not shown:
            self.untidy = True
        return _plain_thinking_delta(self, shown)

    def thinking_end(self, *, signature: str | None = None) -> ThinkingEnd:
        last = self._flush("thinking")
        signature = None if signature is None else self._clean(signature)
        return self._ended(super().thinking_end(signature=signature), last)

    def toolcall_start(self, id: str, name: str) -> ToolCallStart:
        return super().toolcall_start(self._clean(id), self._clean(name))

    def toolcall_delta(self, delta: str, arguments: dict[str, Any] | None = None) -> ToolCallDelta:
        self._require("toolCall")
        shown = self._filter.feed(delta)
        if not shown:
            self.untidy = True
        if arguments is not None:
            arguments = clean_value(arguments, self._secrets)
        return _plain_toolcall_delta(self, shown, arguments)

    def toolcall_end(self, arguments: dict[str, Any] | None = None) -> ToolCallEnd:
        last = self._flush("toolCall")
        if arguments is not None:
            arguments = clean_value(arguments, self._secrets)
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
        block whose pieces came after it closed) rid of the secrets too."""
        made = {id(block) for block in self._done}
        content = message.content
        if all(id(block) in made for block in content) and (
            message.response_id is self._response_id
        ):
            return message
        secrets = self._secrets
        response_id = message.response_id
        return attrs.evolve(
            message,
            content=tuple(
                block if id(block) in made else _clean_block(block, secrets) for block in content
            ),
            response_id=(
                response_id
                if response_id is self._response_id or response_id is None
                else redact(response_id, secrets)
            ),
        )
