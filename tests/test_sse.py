"""The SSE decoder reads every stream, cut anywhere, exactly as httpx-sse does, but for
the one rule of the standard httpx-sse leaves out: a block without data dispatches nothing."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import httpx2  # noqa: ASYNC127  (what the providers use)
import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from trio_agent.providers._sse import EventTooLarge, SseDecoder, SseEvent
from trio_agent.providers._transport import SseStream

# httpx-sse, the reference, imports httpx for its types (it does not depend on it) and
# only reads a response's text: it runs on httpx2's responses as is. httpx2's own way for
# code that still imports httpx makes that import httpx2; httpx is not installed.
httpx2.alias_httpx()
import httpx_sse  # noqa: E402  (after the alias, as said above)
import httpx_sse._api  # noqa: E402
import httpx_sse._decoders  # noqa: E402

Decoded = list[tuple[str, str, str, int | None]]


class Pieces(httpx2.AsyncByteStream):
    """A response body that arrives in the given pieces, one per read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = iter(pieces)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        try:
            return next(self._pieces)
        except StopIteration:
            raise StopAsyncIteration from None


def response(pieces: list[bytes]) -> httpx2.Response:
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, stream=Pieces(pieces)
    )


def cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    return [body[a:b] for a, b in itertools.pairwise(points)]


def ours(pieces: list[bytes]) -> Decoded:
    async def read() -> list[SseEvent]:
        stream = SseStream("test", response(pieces), idle=None)
        events: list[SseEvent] = []
        while (batch := await stream.read()) is not None:
            events += batch
        await stream.aclose()
        return events

    return [(e.event, e.data, e.id, e.retry) for e in trio.run(read)]


class StandardDecoder(httpx_sse._decoders.SSEDecoder):
    """httpx-sse's decoder, with the rule of the standard it leaves out (WHATWG HTML,
    "dispatch the event": if the data buffer is the empty string, set the buffers to
    the empty string and return): a block without a ``data`` line dispatches nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.has_data = False

    def decode(self, line: str) -> httpx_sse.ServerSentEvent | None:
        if line.partition(":")[0] == "data":
            self.has_data = True
        event = super().decode(line)
        if line:
            return event
        has_data, self.has_data = self.has_data, False
        return event if has_data else None


def reference(pieces: list[bytes]) -> Decoded:
    """What httpx-sse's ``EventSource.aiter_sse()`` gives (its own line splitting, and its
    decoder, line by line), with the standard's rule for a block without data."""

    async def read() -> Decoded:
        decoder = StandardDecoder()
        events: Decoded = []
        async for line in httpx_sse._api._aiter_sse_lines(response(pieces)):
            event = decoder.decode(line.rstrip("\n"))
            if event is not None:
                events.append((event.event, event.data, event.id, event.retry))
        return events

    return trio.run(read)


# Text with what makes SSE hard: colons, spaces, NUL, every character that
# str.splitlines() would take for a line end, and non-ASCII (cut mid-character
# by the pieces).
TEXT = st.text(alphabet=" :a1é✓\0\x0b\x0c\x1c\x85\u2028\u2029", max_size=6)
LINE = st.one_of(
    st.builds("data: {}".format, TEXT),
    st.builds("data:{}".format, TEXT),
    st.just("data"),
    st.builds("event: {}".format, TEXT),
    st.builds("id: {}".format, TEXT),
    st.builds("retry: {}".format, st.sampled_from(["3000", "+5", "x", "", " 7", "²"])),
    st.builds(": {}".format, TEXT),
    st.just(""),
    st.builds("{}: {}".format, st.sampled_from(["other", "Data", "data "]), TEXT),
    TEXT,
)
NEWLINE = st.sampled_from(["\n", "\r\n", "\r"])
BODY = st.lists(st.tuples(LINE, NEWLINE), max_size=14).map(
    lambda lines: "".join(line + end for line, end in lines).encode()
)


@given(body=BODY, tail=TEXT, cuts=st.lists(st.integers(min_value=0), max_size=8))
@example(body=b"data: a\r", tail="", cuts=[])
@example(body=b"data: a\n\r", tail="", cuts=[])
@example(body=b"data: a\r\n\r\n", tail="", cuts=[8, 9])
@example(body=b"id: 7\n\ndata: x\n\n\n\n", tail="", cuts=[3])
@example(body=b"id: 1\n\n\n", tail="", cuts=[])  # an id alone is no event
@example(body=b"retry: 3000\n\ndata: a\n\n", tail="", cuts=[])  # nor a retry alone
@example(body=b"event: ping\n\ndata: a\n\n", tail="", cuts=[4])  # nor a name alone
@example(body=b"event: ping\ndata:\n\n", tail="", cuts=[])  # an empty data line is data
@example(body="data: \u2028é\n\n".encode(), tail="", cuts=[8])
@example(body=b"data: a\ndata: b\n\n", tail="", cuts=[])  # not the one-line fast path
def test_every_stream_cut_anywhere_decodes_as_httpx_sse_and_the_standard_decode_it(
    body: bytes, tail: str, cuts: list[int]
) -> None:
    whole = body + tail.encode()  # what follows the last line end is never an event
    pieces = cut(whole, cuts)
    assert ours(pieces) == reference(pieces)


def test_the_common_event_and_the_general_one() -> None:
    decoder = SseDecoder()
    assert decoder.decode('data: {"a": 1}\n\nevent: ping\ndata: x\ndata: y\n\n') == [
        SseEvent("message", '{"a": 1}'),
        SseEvent("ping", "x\ny"),
    ]


def test_an_event_cut_in_many_pieces_arrives_when_its_empty_line_does() -> None:
    decoder = SseDecoder()
    text = "data: " + "x" * 1000 + "\n\n"
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    events = [event for piece in pieces for event in decoder.decode(piece)]
    assert events == [SseEvent("message", "x" * 1000)]


def test_an_unfinished_event_is_kept_in_pieces_until_its_end_arrives() -> None:
    # Joining what is pending at every read would make an event that spans n
    # reads cost O(n^2); the pieces are joined once, by the read that ends it.
    decoder = SseDecoder()
    for _ in range(100):
        assert decoder.decode("data: " + "x" * 10) == []
    assert len(decoder._pending) == 100
    assert decoder.decode("\n\n") == [SseEvent("message", ("x" * 10 + "data: ") * 99 + "x" * 10)]
    assert decoder._pending == []


def test_a_crlf_cut_between_its_cr_and_its_lf_is_one_line_end() -> None:
    decoder = SseDecoder()
    assert decoder.decode("data: a\r") == []
    assert decoder.decode("\n\r") == []  # the second CR may still be the start of a CRLF
    assert decoder.decode("\ndata: b\r") == [SseEvent("message", "a")]
    assert decoder.flush() == []  # "data: b" ended, but no empty line followed it


def test_a_last_cr_ends_the_stream_s_last_line() -> None:
    decoder = SseDecoder()
    assert decoder.decode("data: a\n\r") == []
    assert decoder.flush() == [SseEvent("message", "a")]


def test_an_id_is_kept_for_the_events_after_it() -> None:
    decoder = SseDecoder()
    assert decoder.decode("id: 7\ndata: a\n\ndata: b\n\nid: bad\0\ndata: c\n\n") == [
        SseEvent("message", "a", "7"),
        SseEvent("message", "b", "7"),
        SseEvent("message", "c", "7"),
    ]


def test_a_block_without_data_is_no_event() -> None:
    # WHATWG HTML, "dispatch the event": an empty data buffer dispatches nothing,
    # and the event name and retry of the block go with it; its id stays.
    decoder = SseDecoder()
    events = decoder.decode("retry: 3000\n\nid: 1\n\nevent: ping\n\ndata: x\n\n: keep-alive\n\n")
    assert events == [SseEvent("message", "x", "1")]
    assert decoder.flush() == []


def test_an_empty_data_line_is_an_event_with_empty_data() -> None:
    decoder = SseDecoder()
    assert decoder.decode("event: ping\ndata:\n\n") == [SseEvent("ping", "")]


def test_an_event_that_never_ends_is_refused_past_the_limit() -> None:
    # A server that never ends an event would make the decoder hold all it sends.
    decoder = SseDecoder(max_event_chars=1000)
    assert decoder.decode("data: ok\n\ndata: ") == [SseEvent("message", "ok")]
    for _ in range(9):
        assert decoder.decode("x" * 100) == []
    with pytest.raises(EventTooLarge, match=r"longer than 1,000 characters \(1,006 received"):
        decoder.decode("x" * 100)


def test_an_event_that_arrives_whole_past_the_limit_is_refused() -> None:
    decoder = SseDecoder(max_event_chars=1000)
    with pytest.raises(EventTooLarge):
        decoder.decode("data: ok\n\ndata: " + "x" * 2000)


def test_events_within_the_limit_pass_however_many_pieces_they_come_in() -> None:
    decoder = SseDecoder(max_event_chars=1000)
    events = []
    for _ in range(100):  # 100 events of 900 characters, in pieces of 300
        for piece in ("data: " + "x" * 294, "x" * 300, "x" * 300 + "\n\n"):
            events += decoder.decode(piece)
    assert len(events) == 100
    assert {len(event.data) for event in events} == {894}
