"""Limits the documentation states, each at the limit and one past it.

A limit the docs state ("at most 2,000 characters") is a promise: a text of
exactly the limit is kept whole, one character more is cut to exactly the
limit, the note that says so included. (The command line's file tools have
theirs in ``test_cli_files.py``, tool time limits in ``test_limits.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest

from tests._providers import call, options
from tests.test_transport import APIS, Api
from trio_agent.providers._common import MAX_ERROR_CHARS, _told
from trio_agent.testing import ScriptedResponse, open_sse_server, sse_body

CUT = " [...]"

# -- a reply's error message: at most 2,000 characters (docs/design.md) --------------------


def test_an_error_message_is_at_most_max_error_chars_the_note_included() -> None:
    assert MAX_ERROR_CHARS == 2000
    whole = "e" * MAX_ERROR_CHARS
    assert _told(whole, ()) == whole
    cut = _told(whole + "f", ())
    assert cut == "e" * (MAX_ERROR_CHARS - len(CUT)) + CUT
    assert len(cut) == MAX_ERROR_CHARS
    # The key is replaced before the text is measured and cut.
    assert _told("k" * 30 + "e" * 1990, ("k" * 30,)) == "***" + "e" * 1990


def in_band_error(api: Api, text: str) -> bytes:
    """A well-formed in-band error event of ``api`` whose message is ``text``."""
    if api.name == "openai-chat":
        return sse_body([(None, {"error": {"message": text, "type": "server_error"}})])
    if api.name == "anthropic-messages":
        return sse_body([("error", {"type": "error", "error": {"type": "x", "message": text}})])
    if api.name == "google-generative-ai":
        return sse_body([(None, {"error": {"code": 503, "message": text}})])
    return sse_body([("error", {"type": "error", "code": "server_error", "message": text})])


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_an_in_band_error_of_the_limit_is_whole_and_one_more_is_cut_to_it(
    clock: Any, api: Api
) -> None:
    async def told(text: str) -> str:
        server.add(ScriptedResponse(body=in_band_error(api, text)))
        result = await call(api.stream, api.model(server.url), opts=options(max_retries=0))
        assert result.message.stop_reason == "error"
        assert result.message.error_message is not None
        return result.message.error_message

    async with open_sse_server() as server:
        said = await told(".")  # what the provider puts before the server's text
        assert said.endswith(": .")
        room = MAX_ERROR_CHARS - len(said) + 1
        text = "".join(chr(ord("a") + n % 26) for n in range(room + 1))
        assert await told(text[:room]) == said[:-1] + text[:room]
        cut = await told(text)
        assert cut == said[:-1] + text[: room - len(CUT)] + CUT
        assert len(cut) == MAX_ERROR_CHARS
