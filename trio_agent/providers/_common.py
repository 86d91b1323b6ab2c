"""What every HTTP provider shares: the stream driver, keys, transcripts, JSON, usage.

A provider is a subclass of :class:`HttpProvider` that knows its wire API: it
builds the request (:meth:`HttpProvider.build_request`) and parses the event
stream (a :class:`Parser`). The driver here does the rest, the same way for
all: resolve the key (an error reply, without a request, when there is none),
open the stream through the transport (which retries and times out), feed the
parser, and turn every failure of the network or the server into an error
reply that keeps what arrived, its message rid of the key, and says what kind
of failure it was (``error_kind``), the HTTP status and the retry delay the
server asked for. It never raises for those; it lets ``trio.Cancelled`` and a
listener's exception through.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote, urlsplit

import attrs
import jiter
import trio

from .. import _catalog
from .._events import AssistantMessageEvent
from .._messages import (
    AssistantMessage,
    Cost,
    ErrorKind,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._model import Model
from .._overflow import error_kind
from .._stream import AssistantMessageBuilder, Emit, LlmContext, StreamOptions
from ._guard import GuardedBuilder
from ._key_variables import KEY_VARIABLES as _KEY_VARIABLES
from ._sse import SseEvent
from ._transport import HttpRequest, ProviderFailure, Transport, redact

__all__ = [
    "KEY_VARIABLES",
    "HttpProvider",
    "Parser",
    "PartialJson",
    "ProviderFailure",
    "key_servers",
    "level_value",
    "model_effort",
    "offered_level",
    "offers",
    "on_openrouter",
    "openai_effort",
    "parse_json",
    "prepare_messages",
    "priced",
    "reported",
    "server_of",
    "session_header",
    "session_key",
]

SESSION_KEY_CHARACTERS = 64
"""The longest prompt-cache key OpenAI takes (a longer one is refused with HTTP 400)."""


def session_key(options: StreamOptions) -> str | None:
    """The conversation's name as the request sends it (a prompt-cache key, a session
    header), or None: without a ``session_id``, or with ``cache_retention="none"``.

    A ``session_id`` longer than :data:`SESSION_KEY_CHARACTERS` characters (code
    points) is cut to its first 64, as pi-ai cuts OpenAI's ``prompt_cache_key``: a
    longer id never reaches a service whole, whichever field carries it.
    """
    session_id = options.session_id
    if not session_id or options.cache_retention == "none":
        return None
    return session_id[:SESSION_KEY_CHARACTERS]


def on_openrouter(model: Model) -> bool:
    """Whether ``model`` is served by OpenRouter (its provider, or its base URL), whose
    session header and cache rules differ from the others'."""
    return model.provider == "openrouter" or "openrouter.ai" in model.base_url


_HEADER_SAFE = "".join(chr(code) for code in range(0x21, 0x7F) if chr(code) != "%")
"""The characters a session key keeps in a header; others are percent-encoded."""


def session_header(key: str) -> str:
    """``key`` (a :func:`session_key`) as a header carries it, for the session headers of
    every provider: printable ASCII other than ``%`` as it is, any other character (a
    space, ``%``, a control character, one that is not ASCII, a lone surrogate)
    percent-encoded as its UTF-8 bytes. Every key makes a header the request can carry,
    the same each time, and two keys never make the same header."""
    if all(char in _HEADER_SAFE for char in key):
        return key
    return quote(key, safe=_HEADER_SAFE, errors="surrogatepass")


def openai_effort(level: str) -> str:
    """OpenAI's reasoning effort for a thinking level (it has no ``xhigh``)."""
    return "high" if level == "xhigh" else level


_LEVEL_ORDER = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


def offers(model: Model, level: str) -> bool:
    """Whether the catalog's ``thinking_levels`` of ``model`` offer ``level`` (pi-ai's
    ``getSupportedThinkingLevels``): a level mapped to None is not offered, and
    ``xhigh`` / ``max`` only when mapped."""
    levels = model.thinking_levels
    if level in levels:
        return levels[level] is not None
    return level not in ("xhigh", "max")


def offered_level(model: Model, level: str) -> str | None:
    """The thinking level to ask ``model`` for when ``level`` is wanted, as pi-ai's
    ``clampThinkingLevel``: ``level`` if the model offers it, else the nearest offered
    level above it, else the nearest below; None when that is ``off`` (no reasoning).

    A model without ``thinking_levels`` (one the catalog does not describe, or one
    with no rules) gets ``level`` unchanged.
    """
    if not model.thinking_levels or level not in _LEVEL_ORDER:
        return level
    if offers(model, level):
        return level
    at = _LEVEL_ORDER.index(level)
    nearer = (*_LEVEL_ORDER[at + 1 :], *reversed(_LEVEL_ORDER[1:at]))  # above first, then below
    return next((name for name in nearer if offers(model, name)), None)


def level_value(model: Model, level: str) -> str:
    """The API's value for an offered thinking ``level``: its ``thinking_levels`` entry,
    else the level's own name."""
    mapped = model.thinking_levels.get(level)
    return mapped if isinstance(mapped, str) else level


def model_effort(model: Model, level: str) -> str | None:
    """The OpenAI-style reasoning effort of ``model`` for a thinking ``level``: the
    nearest offered level (:func:`offered_level`) as its ``thinking_levels`` map it, or
    None when it offers none (no reasoning is asked for). A model without
    ``thinking_levels`` gets :func:`openai_effort`."""
    if not model.thinking_levels:
        return openai_effort(level)
    offered = offered_level(model, level)
    return None if offered is None else level_value(model, offered)


def parse_json(data: str, what: str, source: str) -> Any:
    """A JSON value; a :class:`ProviderFailure` naming ``what`` and its ``source`` if the
    text is not JSON (the message is made only then: this runs for every event)."""
    try:
        return jiter.from_json(data.encode("utf-8"))
    except ValueError as exc:
        raise ProviderFailure(
            f"malformed JSON in {what} from {source}: {exc}: {data[:200]!r}"
        ) from None


class PartialJson:
    """The arguments of a streamed tool call, parsed as they grow.

    The JSON text comes in pieces; the object parsed so far is what a partial
    message shows. Parsing the whole buffer at every piece would cost
    O(length²) for a long argument, so past 1 KiB the buffer is re-parsed
    (with jiter's partial mode) only when it has grown by half since the last
    parse: the total parse work stays linear (design.md#invariant-14-linear-work), and the
    partial arguments lag by at most that much. :meth:`final` parses
    strictly, and falls back to the last good partial value.
    """

    __slots__ = ("_chunks", "_length", "_parsed_at", "value")

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._length = 0
        self._parsed_at = 0
        self.value: dict[str, Any] = {}

    @property
    def text(self) -> str:
        return "".join(self._chunks)

    def add(self, piece: str) -> dict[str, Any] | None:
        """Take a piece; return the arguments parsed so far if they were re-parsed."""
        self._chunks.append(piece)
        self._length += len(piece)
        if self._length > 1024 and self._length < 1.5 * self._parsed_at:
            return None
        self._parsed_at = self._length
        try:
            value = jiter.from_json(self.text.encode("utf-8"), partial_mode="trailing-strings")
        except ValueError:
            return None
        if isinstance(value, dict):
            self.value = value
            return value
        return None

    def final(self) -> dict[str, Any]:
        text = self.text
        if not text.strip():
            return {}
        try:
            value = jiter.from_json(text.encode("utf-8"))
        except ValueError:
            try:
                value = jiter.from_json(text.encode("utf-8"), partial_mode="trailing-strings")
            except ValueError:
                return self.value
        return value if isinstance(value, dict) else self.value


def prepare_messages(messages: Sequence[Message], model: Model) -> list[Message]:
    """The transcript as a provider may send it again (pi-ai's ``transformMessages``).

    * assistant replies that ended in ``error`` or ``aborted`` are left out:
      they are incomplete turns;
    * a tool call that has no result before the next user or assistant
      message gets a synthetic error result, "No result provided";
    * replies of another model lose what only that model can read back:
      redacted thinking and signatures are dropped, thinking becomes text.
    """
    out: list[Message] = []
    pending: list[ToolCall] = []
    answered: set[str] = set()

    def answer_orphans() -> None:
        for call in pending:
            if call.id not in answered:
                out.append(
                    ToolResultMessage(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        content=(TextContent("No result provided"),),
                        is_error=True,
                    )
                )
        pending.clear()
        answered.clear()

    for message in messages:
        if isinstance(message, AssistantMessage):
            answer_orphans()
            if message.stop_reason == "error" or message.stop_reason == "aborted":
                continue
            message = _for_model(message, model)
            pending.extend(message.tool_calls)
            out.append(message)
        elif isinstance(message, ToolResultMessage):
            answered.add(message.tool_call_id)
            out.append(message)
        elif isinstance(message, UserMessage):
            answer_orphans()
            out.append(message)
    return out


def _for_model(message: AssistantMessage, model: Model) -> AssistantMessage:
    if (message.provider, message.api, message.model) == (model.provider, model.api, model.id):
        return message
    from .._messages import ThinkingContent

    content: list[Any] = []
    changed = False
    for block in message.content:
        if isinstance(block, ThinkingContent):
            changed = True
            if not block.redacted and block.thinking.strip():
                content.append(TextContent(block.thinking))
        elif isinstance(block, TextContent) and block.text_signature is not None:
            changed = True
            content.append(TextContent(block.text))
        elif isinstance(block, ToolCall) and block.thought_signature is not None:
            changed = True
            content.append(ToolCall(block.id, block.name, block.arguments))
        else:
            content.append(block)
    return attrs.evolve(message, content=content) if changed else message


def priced(usage: Usage, model: Model) -> Usage:
    """``usage`` with its cost from the model's cost table (per million tokens).

    A long request is priced by the cost table's tier for its input (input, cache
    read and cache write tokens together), as pi-ai's ``calculateCost``: providers bill
    the whole request at the higher rate once its prompt passes the threshold. Cache
    writes that live an hour (``cache_write_long``, the part of ``cache_write`` a
    ``cache_retention="long"`` request wrote) cost twice the input rate, the others
    the cache-write rate, as Anthropic bills them; a ``cache_write_long`` above
    ``cache_write`` counts as all of it.
    """
    table = model.cost.rates(usage.input + usage.cache_read + usage.cache_write)
    input_cost = usage.input * table.input / 1e6
    output_cost = usage.output * table.output / 1e6
    read_cost = usage.cache_read * table.cache_read / 1e6
    write_cost = usage.cache_write * table.cache_write / 1e6
    if usage.cache_write_long:
        long = min(usage.cache_write_long, usage.cache_write)
        short = usage.cache_write - long
        write_cost = (short * table.cache_write + long * table.input * 2) / 1e6
    return attrs.evolve(
        usage,
        cost=Cost(
            input=input_cost,
            output=output_cost,
            cache_read=read_cost,
            cache_write=write_cost,
            total=input_cost + output_cost + read_cost + write_cost,
        ),
    )


class Parser:
    """Turns one response's events into stream events (one per provider API).

    ``feed`` takes each server-sent event and returns the stream events it
    makes; it raises :class:`ProviderFailure` for an in-band error or a
    malformed event. ``finished`` is True once the terminal event came.
    When the stream has ended, ``end()`` returns the events that close what
    is still open, and ``finish()`` the final message (a
    :class:`ProviderFailure` if the stream ended without its terminal event).
    """

    def __init__(self, model: Model, builder: AssistantMessageBuilder) -> None:
        self.model = model
        self.builder = builder
        self.finished = False
        self.name = builder.provider  # who the errors name: the model's provider, or the API's

    def feed(self, event: SseEvent) -> Iterable[AssistantMessageEvent]:
        raise NotImplementedError

    def end(self) -> Iterable[AssistantMessageEvent]:
        """Close the open block, if any, with its ``*_end`` event."""
        builder = self.builder
        kind = builder.open_kind
        if kind == "text":
            return (builder.text_end(),)
        if kind == "thinking":
            return (builder.thinking_end(),)
        if kind == "toolCall":
            return (builder.toolcall_end(),)
        return ()

    def finish(self) -> AssistantMessage:
        raise NotImplementedError


def reported(
    text: str,
    provider: str,
    codes: Iterable[object] = (),
    status: object = None,
    default: ErrorKind = "server",
) -> ProviderFailure:
    """The failure of an error the server reported in the stream, saying ``text``: its kind
    from the error's ``codes`` and ``status`` (any values, read only for what they are) and
    the text (:func:`~trio_agent._overflow.error_kind`), ``default`` when they say nothing
    more. ``status`` is an error's own number, not a response's: the reply's
    ``http_status`` stays None."""
    number = status if type(status) is int else None
    kind = error_kind(text, status=number, codes=codes, provider=provider, default=default)
    return ProviderFailure(text, kind=kind)


def _unreadable(
    provider: str, what: str, exc: Exception, secrets: tuple[str, ...]
) -> ProviderFailure:
    """The failure that a parser's unexpected exception stands for.

    Parsers check what they read and raise :class:`ProviderFailure`; any other
    exception from one is a gap in those checks, and a server must not be able
    to make a run raise through it
    (design.md#invariant-9-provider-failures-are-messages). The exception's
    text may quote the server, so the key is removed before the text is cut.
    """
    text = f"could not read {what} from {provider}: {type(exc).__name__}: {exc}"
    return ProviderFailure(redact(text, secrets)[:300], kind="malformed")


MAX_ERROR_CHARS = 2000
"""The longest error message a reply gets: a server chooses the text of an in-band
error or a stop reason, and would otherwise choose its length too."""

_CUT_NOTE = " [...]"


def _told(text: str, secrets: tuple[str, ...]) -> str:
    """An error message as the reply carries it: without the key, then cut to
    :data:`MAX_ERROR_CHARS` (in that order, so that the cut cannot leave a piece of
    the key). A text that was cut ends with " [...]", within the limit."""
    text = redact(text, secrets)
    if len(text) > MAX_ERROR_CHARS:
        return text[: MAX_ERROR_CHARS - len(_CUT_NOTE)] + _CUT_NOTE
    return text


_T = TypeVar("_T")


def _guarded(call: Callable[[], _T], provider: str, secrets: tuple[str, ...]) -> _T:
    """``call()`` (a parser's ``end`` or ``finish``), an unexpected exception from it
    as a :class:`ProviderFailure` (see :func:`_unreadable`)."""
    try:
        return call()
    except ProviderFailure:
        raise
    except Exception as exc:
        raise _unreadable(provider, "the end of the stream", exc, secrets) from None


KEY_VARIABLES: Mapping[str, tuple[str, ...]] = _KEY_VARIABLES
"""The environment variables of each catalog provider's key, in the order pi-ai's
``getApiKeyEnvVars`` reads them (generated with the catalog by
``scripts/update_models.py``): a model of Kimi's or MiniMax's served over the
Anthropic API takes its key from ``KIMI_API_KEY`` or ``MINIMAX_API_KEY``, and
``ANTHROPIC_API_KEY`` never goes to their servers."""


_KEY_SERVERS_BEYOND_CATALOG = {
    "OPENAI_API_KEY": ("https://api.openai.com",),
    "ANTHROPIC_API_KEY": ("https://api.anthropic.com",),
    "GEMINI_API_KEY": ("https://generativelanguage.googleapis.com",),
    "GOOGLE_API_KEY": ("https://generativelanguage.googleapis.com",),
    "MISTRAL_API_KEY": ("https://api.mistral.ai",),
    "TOGETHER_API_KEY": ("https://api.together.xyz",),
}
"""Servers of a key's provider besides those the catalog lists for it: the APIs' own
hosts, and hosts the chat provider knows (``openai_chat.detect_provider``)."""

_DEFAULT_PORTS = {"https": 443, "http": 80}

_Server = tuple[str, str, int]
"""Where a request goes: scheme, host (lower case) and port."""


def server_of(url: str) -> _Server | None:
    """The scheme, host and port ``url`` names (None when it names no host), as httpx2
    reads them: a user name or password before the host, a path, a query or a
    fragment change nothing."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if not host:
        return None
    scheme = parts.scheme.lower()
    return scheme, host, port or _DEFAULT_PORTS.get(scheme, 0)


def _shown(server: _Server | None) -> str:
    """Where a request goes, for a message: the URL's scheme, host and port only (a
    password in it is not shown)."""
    if server is None:
        return "a URL that names no host"  # as given, it might hold a password
    scheme, host, port = server
    host = f"[{host}]" if ":" in host else host
    default = _DEFAULT_PORTS.get(scheme)
    return f"{scheme}://{host}" if port == default else f"{scheme}://{host}:{port}"


@functools.cache
def _key_servers() -> dict[str, frozenset[_Server]]:
    """The servers each key variable may be sent to: over HTTPS, those of every catalog
    provider whose key it is (:data:`KEY_VARIABLES`), on any API, and
    :data:`_KEY_SERVERS_BEYOND_CATALOG`. Made once, on the first key read from the
    environment."""
    found: dict[str, set[_Server]] = {}
    urls = [
        (variable, model.base_url)
        for model in _catalog.list_models()
        for variable in KEY_VARIABLES.get(model.provider, ())
    ]
    urls += [
        (variable, url) for variable, more in _KEY_SERVERS_BEYOND_CATALOG.items() for url in more
    ]
    for variable, url in urls:
        server = server_of(url)
        if server is not None and server[0] == "https":
            found.setdefault(variable, set()).add(server)
    return {variable: frozenset(servers) for variable, servers in found.items()}


def key_servers(variable: str) -> frozenset[_Server]:
    """The servers (scheme, host, port) the key in the environment variable ``variable``
    may be sent to: its provider's, over HTTPS; none for a variable no provider owns."""
    return _key_servers().get(variable, frozenset())


class HttpProvider:
    """A provider over HTTP: a subclass says how to ask and how to read the answer."""

    api: ClassVar[str]
    label: ClassVar[str]
    env_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, http_client: Any = None) -> None:
        """``http_client``: an ``httpx2.AsyncClient`` to send with, which the caller closes;
        without one, requests go through the current pool (one per Trio run, or the
        :func:`~trio_agent.providers.open_pool` block's). Anything else (httpx's own
        ``httpx.AsyncClient`` among them) is a ``TypeError`` naming what was given."""
        self.transport = Transport(self.label, http_client)

    def key_variables(self, model: Model) -> tuple[str, ...]:
        """The environment variables the key of ``model`` is read from, in order: this
        API's own (``env_keys``) for a model of its own provider or of a provider the
        catalog does not know, else that provider's (:data:`KEY_VARIABLES`)."""
        if model.provider in ("", self.label):
            return self.env_keys
        return KEY_VARIABLES.get(model.provider) or self.env_keys

    def api_key(self, model: Model, options: StreamOptions) -> str | None:
        """The key to send: the option (``api_key``, or what ``get_api_key`` gave), to
        whatever server the model names; else the first of :meth:`key_variables` that
        is set, if the request goes to a server of the provider that key belongs to
        (:func:`key_servers`: its host, over HTTPS, decides, not the model's provider
        label); else None."""
        if options.api_key:
            return options.api_key
        variables = self.key_variables(model)
        if not variables:
            return None
        server = server_of(model.base_url)
        for name in variables:
            value = os.environ.get(name)
            if value and server in key_servers(name):
                return value
        return None

    def missing_key(self, model: Model, remedy: str = "give api_key (or get_api_key)") -> str:
        """Why a request to ``model`` goes without a key, and ``remedy``: which variable to
        set, or which variables hold keys for other servers than the one it goes to."""
        provider = model.provider or self.label
        variables = self.key_variables(model)
        if not variables:
            return f"no API key for {provider}: {remedy}"
        server = server_of(model.base_url)
        usable = [name for name in variables if server in key_servers(name)]
        if usable:
            return f"no API key for {provider}: set {' or '.join(usable)}, or {remedy}"
        servers = sorted({known for name in variables for known in key_servers(name)})
        where = " or ".join(_shown(known) for known in servers) or "its provider's servers"
        names = " and ".join(variables)
        verb = "is" if len(variables) == 1 else "are"
        return (
            f"no API key for {provider} at {_shown(server)}: "
            f"{names} {verb} sent only to {where}; for this server, {remedy}"
        )

    def needs_key(self, model: Model) -> bool:
        """Whether a request without a key is refused before it is sent."""
        return True

    def build_request(
        self, model: Model, context: LlmContext, options: StreamOptions, api_key: str | None
    ) -> HttpRequest:
        """The HTTP request of one call: URL, headers (the key among them) and JSON body."""
        raise NotImplementedError

    def parser(self, model: Model, builder: AssistantMessageBuilder) -> Parser:
        """A parser of this API's events for one call, making its events with ``builder``."""
        raise NotImplementedError

    def thinking_level(self, model: Model, options: StreamOptions) -> str | None:
        """The reply's ``provider_thinking_level``: the effort the request asks for, where this
        API needs it to replay the reply later; None (the default) where it does not."""
        return None

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions, emit: Emit
    ) -> AssistantMessage:
        """The stream function of this provider (design.md#the-stream-protocol).

        The key goes only where :meth:`api_key` allows; when there is none to send
        and the server needs one (:meth:`needs_key`), the reply is an error that
        says why (:meth:`missing_key`), and no request is sent.

        The key never comes back from the server into the reply. Every text
        that says what went wrong — a failure of the transport or the parser,
        and the final message's ``error_message``, which the parser may have
        made from the server's stop reason — passes through :func:`redact`
        here, the one gate between the server and the events, the transcript
        and the caller. Server text cut short before it came here (a parser
        quotes the first few hundred characters of an event) loses the piece
        of a key that the cut left (4 characters or more; see :func:`redact`).
        Then the text is cut to :data:`MAX_ERROR_CHARS`, whatever length the
        server gave it.

        An error reply has an ``error_kind``: the failure's own (the transport
        says ``rate_limit``, ``network``, ...; a parser the kind of an error the
        server reported in the stream), ``malformed`` for a parser's failure
        without one, ``authentication`` for a missing key, and, for a stop reason
        that is an error, what its text says (``context_overflow``), else
        ``refused``. ``http_status`` and ``retry_after`` are the last attempt's,
        after the retries. This costs nothing on a reply that did not fail.

        When the request carries a key, the reply is built by a
        :class:`~trio_agent.providers._guard.GuardedBuilder`, which takes every
        copy of the key out of every other text the server chooses: the
        response id, tool calls' ids, names and arguments (every string in them,
        at any depth), signatures, and the text of every block — where the key
        may come whole or split across deltas: each block's deltas show the
        text with the key as ``***``, the end that could still become the key
        held back until the next delta (or the block's end) says. There, only
        whole copies are taken out: a model writes a key's public prefix
        (``sk-proj-``) for reasons of its own. A key in another encoding (JSON
        ``\\u`` escapes, base64, reversed) is not the key's text, and is not
        found there (the parsed arguments, where escapes are decoded, are
        clean). A request without a key (a local server) is built plainly.
        """
        provider = model.provider or self.label
        level = self.thinking_level(model, options)
        key = self.api_key(model, options)
        secrets = (key,) if key else ()
        guard: GuardedBuilder | None = None
        builder: AssistantMessageBuilder
        if secrets:
            builder = guard = GuardedBuilder(
                secrets[0],
                api=model.api,
                provider=provider,
                model=model.id,
                provider_thinking_level=level,
                thinking_level=options.thinking_level,
            )
        else:
            builder = AssistantMessageBuilder(
                api=model.api,
                provider=provider,
                model=model.id,
                provider_thinking_level=level,
                thinking_level=options.thinking_level,
            )
            if self.needs_key(model):
                missing = ProviderFailure(self.missing_key(model), kind="authentication")
                return await self._fail(builder, model, emit, str(missing), missing)
        parser = self.parser(model, builder)
        try:
            request = self.build_request(model, context, options, key)
            opened = await self.transport.open(request, options, secrets=secrets, name=provider)
            async with opened as events:
                await emit(builder.start())
                feed = parser.feed
                # The hot loop: one pass per network read, all under one idle scope.
                with events.limited():
                    while not parser.finished:
                        batch = await events.read()
                        if batch is None:
                            break
                        for event in batch:
                            try:
                                stream_events = feed(event)
                            except ProviderFailure:
                                raise
                            except Exception as exc:  # a parser's bug: still an error reply
                                what = f"an event {event.event[:40]!r}"
                                raise _unreadable(provider, what, exc, secrets) from None
                            if guard is not None and guard.untidy:
                                stream_events = guard.released(stream_events)
                            for stream_event in stream_events:
                                await emit(stream_event)
                            if parser.finished:
                                break
                closing = _guarded(parser.end, provider, secrets)
                if guard is not None:
                    closing = guard.released(closing)
                for stream_event in closing:
                    await emit(stream_event)
                if parser.finished:
                    await events.drain()  # the connection goes back to the run's pool
            message = _guarded(parser.finish, provider, secrets)
        except ProviderFailure as exc:
            failure: ProviderFailure | None = exc
        else:
            failure = None
        if failure is not None:
            try:  # what was open is closed before the error
                closing = _guarded(parser.end, provider, secrets)
            except ProviderFailure:  # the parser's own close failed: the generic one
                closing = Parser.end(parser)
            if guard is not None:
                closing = guard.released(closing)
            for stream_event in closing:
                await emit(stream_event)
            return await self._fail(builder, model, emit, _told(str(failure), secrets), failure)
        if guard is not None:
            message = guard.scrub(message)
        error = message.error_message
        told = None if error is None else _told(error, secrets)
        if message.stop_reason == "error" and message.error_kind is None:
            # A stop reason that is an error (a refusal, a content filter, one unknown).
            message = attrs.evolve(
                message,
                usage=priced(message.usage, model),
                error_message=told,
                error_kind=error_kind(told or "", provider=provider, default="refused"),
            )
        else:
            message = attrs.evolve(message, usage=priced(message.usage, model), error_message=told)
        await emit(builder.done(message))
        return message

    @staticmethod
    async def _fail(
        builder: AssistantMessageBuilder,
        model: Model,
        emit: Emit,
        text: str,
        failure: ProviderFailure,
    ) -> AssistantMessage:
        """End the reply with an error: ``text``, and what ``failure`` says of its kind (a
        parser's failure without one is ``malformed``), HTTP status and retry delay."""
        await trio.lowlevel.checkpoint()  # a refusal before any request is a checkpoint too
        builder.usage = priced(builder.usage, model)
        delay = failure.retry_after
        message = attrs.evolve(
            builder.finish("error", text),
            error_kind=failure.kind or "malformed",
            http_status=failure.status,
            # A server's "wait forever" is no delay a program can sleep for: its text says it.
            retry_after=delay if delay is not None and math.isfinite(delay) else None,
        )
        await emit(builder.done(message))
        return message
