"""``trio-agent demo``: an agent on the scripted model, with real tools on a folder.

The script lists the folder, reads a few of its text files in parallel (each
read reports progress and takes a time that grows with the file, so they
finish out of order), and streams an answer composed from what the tools
really returned: lines and words per file, the totals, the longest file,
and each file's first line.
"""

from __future__ import annotations

import heapq
import io
import json
import os
from pathlib import Path
from typing import Any

import trio

from .._messages import ToolResult, ToolResultMessage
from .._model import Model
from .._stream import LlmContext
from .._tools import AgentTool, ToolUpdate
from ..providers import faux
from ._confine import SKIPPED_DIRS, open_inside, read_start
from ._files import MAX_ENTRIES, MAX_READ_BYTES

TEXT_SUFFIXES = frozenset(
    {".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".py", ".json", ".yaml", ".yml"}
)
MAX_READS = 4
SYSTEM_PROMPT = "You look at folders and say what is in them."


def prompt_for(root: Path) -> str:
    return f"What is in {root}?"


def _listing(base: Path) -> list[dict[str, Any]]:
    """The first :data:`MAX_ENTRIES` folders and regular files of ``base`` (links not
    followed), by name."""
    with os.scandir(base) as scan:
        shown = (
            entry
            for entry in scan
            if not entry.name.startswith(".")
            and entry.name not in SKIPPED_DIRS
            and (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False))
        )
        chosen = heapq.nsmallest(MAX_ENTRIES, shown, key=lambda entry: entry.name)
    return [
        {"name": entry.name + "/", "bytes": None}
        if entry.is_dir(follow_symlinks=False)
        else {"name": entry.name, "bytes": entry.stat(follow_symlinks=False).st_size}
        for entry in chosen
    ]


def _count(base: Path, name: str) -> tuple[int, dict[str, Any]]:
    """The size of ``name`` and its lines and words (of its first :data:`MAX_READ_BYTES`)."""
    with open_inside(base, name) as file:
        if not isinstance(file, io.FileIO):
            raise IsADirectoryError(f"{name!r} is not a file")
        data = read_start(file, MAX_READ_BYTES)
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    first = next((line.strip() for line in lines if line.strip()), "")
    return len(data), {"lines": len(lines), "words": len(text.split()), "first_line": first[:80]}


def demo_tools(root: Path, pace: float | None) -> list[AgentTool]:
    """``list_files`` and ``read_file`` over ``root`` (a resolved path); reads take time
    when ``pace`` is set."""
    base = root

    async def list_files(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        entries = await trio.to_thread.run_sync(_listing, base)
        return ToolResult.text(json.dumps(entries), details={"count": len(entries)})

    async def read_file(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        size, counts = await trio.to_thread.run_sync(_count, base, args["path"])
        # Then as slow as a slow disk would be, in three steps, each reported.
        step = 0.0 if pace is None else min(0.1 + size / 40_000, 1.0) * 40 / pace
        for done in (1, 2, 3):
            await trio.sleep(step)
            on_update(ToolResult.text(f"{done * 100 // 3}% of {size} bytes"))
        return ToolResult.text(json.dumps(counts), details=counts)

    return [
        AgentTool(
            name="list_files",
            description="List the folder: names (folders end in '/') and sizes in bytes.",
            parameters={"type": "object", "properties": {}},
            execute=list_files,
        ),
        AgentTool(
            name="read_file",
            description="Read a text file: its lines, words and first line.",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
            execute=read_file,
        ),
    ]


def _results(context: LlmContext) -> list[ToolResultMessage]:
    return [m for m in context.messages if isinstance(m, ToolResultMessage)]


def _result_json(message: ToolResultMessage) -> Any:
    text = "".join(getattr(block, "text", "") for block in message.content)
    return json.loads(text) if not message.is_error else None


def _read_some(context: LlmContext) -> faux.Reply:
    entries = _result_json(_results(context)[-1]) or []
    files = [e for e in entries if e["bytes"] is not None]
    texts = [e for e in files if Path(e["name"]).suffix in TEXT_SUFFIXES and e["bytes"] < 1e6]
    chosen = [e["name"] for e in texts[:MAX_READS]]
    if not chosen:
        return faux.reply(f"The folder has {len(entries)} entries and no text file I can read.")
    folders = len(entries) - len(files)
    return faux.reply(
        f"{len(files)} files and {folders} folders. Reading {_and(chosen)} in parallel.",
        *(faux.tool_call("read_file", {"path": name}) for name in chosen),
    )


def _answer(context: LlmContext) -> faux.Reply:
    results = _results(context)
    calls = {
        block.id: block.arguments["path"]
        for message in context.messages
        if message.role == "assistant"
        for block in message.content
        if block.type == "toolCall" and block.name == "read_file"
    }
    rows = []
    for message in results:
        counts = _result_json(message) if message.tool_call_id in calls else None
        if counts is not None:
            rows.append((calls[message.tool_call_id], counts))
    if not rows:
        return faux.reply("I could not read any of them.")
    lines = sum(c["lines"] for _, c in rows)
    words = sum(c["words"] for _, c in rows)
    longest = max(rows, key=lambda row: row[1]["lines"])[0]
    body = "\n".join(
        f"- {name}: {c['lines']:,} lines, {c['words']:,} words"
        + (f', starting "{c["first_line"]}"' if c["first_line"] else "")
        for name, c in rows
    )
    return faux.reply(
        f"I read {len(rows)} files: {lines:,} lines and {words:,} words in all; "
        f"the longest is {longest}.\n{body}"
    )


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def demo_model(pace: float | None) -> Model:
    """The scripted model of the demo: list, read in parallel, answer from the results."""
    return faux.model(
        [
            faux.reply("Let me look at the folder first.", faux.tool_call("list_files")),
            _read_some,
            _answer,
        ],
        pace=pace,
        chunk_size=3,
    )
