"""What a tool call of an MCP server gives the model: the server's result, within bounds.

The server decides what it sends, so everything kept from a result is bounded, and a cut says
so inside the bound: the documented numbers hold exactly, the note included.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types

from ._messages import ImageContent, TextContent, ToolResult, ToolResultContent

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_IMAGE_CHARS",
    "MAX_RESULT_BLOCKS",
    "MAX_RESULT_CHARS",
    "bounded",
    "tool_result",
]

MAX_RESULT_CHARS = 100_000
"""The most characters of text a call's result keeps: its text blocks, the notes that stand
for blocks not shown, the JSON of its structured content when it sent no text, and the note
of a cut. A result's ``details`` (its structured content) is kept when its JSON is at most
this long as well."""

MAX_ERROR_CHARS = 2_000
"""The most characters of an error a call or :func:`open_server` reports, the note of a cut
included."""

MAX_RESULT_BLOCKS = 100
"""The most content blocks a call's result keeps, the note of a cut included."""

MAX_IMAGE_CHARS = 10_000_000
"""The most characters of base64 image data (and MIME types) a call's result keeps, all its
images together (about 7.5 MB of images); an image past it is replaced by a note."""


def _more(count: int, what: str) -> str:
    return f"{count:,} more {what}{'' if count == 1 else 's'}"


def _note(cut: int, blocks: int) -> str:
    parts = [_more(cut, "character")] if cut else []
    if blocks:
        parts.append(_more(blocks, "block"))
    return f"\n[cut: {' and '.join(parts)}]"


def _kept(total: int, limit: int, blocks: int) -> tuple[int, str]:
    """How many of ``total`` characters to keep, and the note that follows them, so that the
    two together are at most ``limit`` characters (exactly ``limit`` when characters are cut).

    The note counts the characters it leaves out, so its length depends on what it leaves
    out: the smallest length that fits is found by iterating from below (the note's length
    never shrinks as it leaves out more, so this stops at the first fixed point)."""
    note = _note(0, blocks) if blocks else ""
    if total + len(note) <= limit:
        return total, note
    length = len(note)
    while True:
        note = _note(total - (limit - length), blocks)
        if len(note) == length:
            return limit - length, note
        length = len(note)


def bounded(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text``, or its first characters and a note of how many more there were: ``limit``
    characters in all."""
    if len(text) <= limit:
        return text
    keep, note = _kept(len(text), limit, 0)
    return text[:keep] + note


def _json(value: Any) -> str | None:
    """``value`` as JSON text, or None when it is not JSON (NaN and infinity, which the SDK's
    parser reads, are not: a transcript holding one could not be read back)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


def tool_result(server: str, remote: str, result: mcp_types.CallToolResult) -> ToolResult:
    """The result the model reads for ``result``, with the server's structured content (when
    kept) as its ``structured_content`` and ``details``. A result the server flags ``isError``
    is returned with ``is_error`` and the server's text, at most :data:`MAX_ERROR_CHARS`."""
    structured = result.structured_content
    structured_json = None if structured is None else _json(structured)
    items: list[str | ImageContent] = []
    if structured is not None and not any(
        isinstance(block, mcp_types.TextContent) for block in result.content
    ):
        items.append(structured_json or "[structured content that is not JSON not shown]")
    count = len(items) + len(result.content)
    room = MAX_RESULT_BLOCKS if count <= MAX_RESULT_BLOCKS else MAX_RESULT_BLOCKS - 1
    images = 0
    for block in result.content:
        if len(items) == room:  # the rest is counted in the note; one place is left for it
            break
        if isinstance(block, mcp_types.TextContent):
            items.append(block.text)
        elif isinstance(block, mcp_types.ImageContent):
            size = len(block.data) + len(block.mime_type)
            if images + size <= MAX_IMAGE_CHARS:
                images += size
                items.append(ImageContent(block.data, block.mime_type))
            else:
                items.append(f"[image not shown: {size:,} characters, past what a result keeps]")
        else:
            items.append(f"[{block.type} content not shown]")
    details: Any = structured
    if structured is not None and structured_json is None:
        details = {"cut": "structured content that is not JSON (NaN or infinity), not kept"}
        structured = None
    elif structured_json is not None and len(structured_json) > MAX_RESULT_CHARS:
        size = len(structured_json)
        details = {"cut": f"structured content of {size:,} characters of JSON, not kept"}
        structured = None
    if result.is_error:
        text = " ".join(item for item in items if isinstance(item, str))
        message = (
            bounded(text, MAX_ERROR_CHARS)
            or f"MCP server {server!r} reported an error from tool {remote!r}."
        )
        return ToolResult(
            content=(TextContent(message),),
            details=details,
            structured_content=structured,
            is_error=True,
        )
    return ToolResult(
        content=_within(items, count - len(items)), details=details, structured_content=structured
    )


def _within(items: list[str | ImageContent], dropped: int) -> tuple[ToolResultContent, ...]:
    """The content of ``items`` with at most :data:`MAX_RESULT_CHARS` of text, the note of
    a cut (of text, or of ``dropped`` blocks) included, after the last character kept."""
    total = sum(len(item) for item in items if isinstance(item, str))
    if total <= MAX_RESULT_CHARS and not dropped:
        return tuple(TextContent(item) if isinstance(item, str) else item for item in items)
    left, note = _kept(total, MAX_RESULT_CHARS, dropped)
    content: list[ToolResultContent] = []
    last, last_text = -1, ""
    for item in items:
        if isinstance(item, ImageContent):
            content.append(item)
        elif left > 0:
            last, last_text = len(content), item[:left]
            left -= len(last_text)
            content.append(TextContent(last_text))
    if last < 0:
        content.append(TextContent(note))
    else:
        content[last] = TextContent(last_text + note)
    return tuple(content)
