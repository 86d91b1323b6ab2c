"""Read-only file tools confined to a root folder: list, read, search.

Every path an argument names is resolved (symbolic links followed) before it
is used, and refused unless it is the root or inside it. The tools are sync
functions made into tools with :func:`~trio_agent.tool`, so they run in a
worker thread; the search polls for cancellation between files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import trio

from .._decorator import tool
from .._tools import AgentTool

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__"})
"""Folders that listings and searches leave out (version control, environments, caches)."""

MAX_READ_BYTES = 1_000_000
MAX_LINES = 2000
MAX_MATCHES = 100


class OutsideRootError(ValueError):
    """A tool argument named a path outside the root."""


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` (relative to ``root``) resolved; :class:`OutsideRootError` if it leaves the root."""
    resolved = (root / path).resolve()
    if resolved != root and root not in resolved.parents:
        raise OutsideRootError(f"path {path!r} is outside the root {str(root)!r}")
    return resolved


def _relative(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() or "."


def _text_of(path: Path, display: str) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"{display!r} is not a file")
    with path.open("rb") as file:
        data = file.read(MAX_READ_BYTES + 1)
    if b"\0" in data[:8192]:
        raise ValueError(f"{display!r} is a binary file")
    text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_READ_BYTES:
        text += f"\n[... {display} is longer than {MAX_READ_BYTES} bytes: cut here]"
    return text


def _walk(top: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            yield Path(folder, name)


def file_tools(root: Path) -> list[AgentTool]:
    """``list_files``, ``read_file`` and ``search_files`` over ``root`` (read-only; a
    resolved path: the tools compare resolved paths with it)."""
    base = root

    @tool
    def list_files(path: str = ".") -> str:
        """List a folder of the project: one entry per line, folders ending in "/".

        Args:
            path: The folder, relative to the project's root.
        """
        folder = resolve_inside(base, path)
        if not folder.is_dir():
            raise NotADirectoryError(f"{path!r} is not a folder")
        entries = []
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.name in SKIPPED_DIRS:
                continue
            entries.append(entry.name + "/" if entry.is_dir() else entry.name)
        return "\n".join(entries) if entries else "(empty folder)"

    @tool
    def read_file(path: str, offset: int = 1, limit: int = MAX_LINES) -> str:
        """Read a text file of the project, ``limit`` lines from line ``offset``.

        Args:
            path: The file, relative to the project's root.
            offset: The first line to read (from 1).
            limit: How many lines to read at most.
        """
        if offset < 1:
            raise ValueError(f"offset must be 1 or more, not {offset}")
        if limit < 1:
            raise ValueError(f"limit must be 1 or more, not {limit}")
        lines = _text_of(resolve_inside(base, path), path).splitlines()
        chosen = lines[offset - 1 : offset - 1 + limit]
        text = "\n".join(chosen)
        last = offset - 1 + len(chosen)
        if last < len(lines):
            text += f"\n[... lines {offset}-{last} of {len(lines)}; read on with offset={last + 1}]"
        return text

    @tool
    def search_files(pattern: str, path: str = ".") -> str:
        """Search the project's text files for a regular expression; "file:line: text" per match.

        Args:
            pattern: A Python regular expression.
            path: The folder (or file) to search, relative to the project's root.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a regular expression: {exc}") from None
        top = resolve_inside(base, path)
        files = [top] if top.is_file() else _walk(top)
        matches: list[str] = []
        for file in files:
            trio.from_thread.check_cancelled()
            try:
                text = _text_of(file, _relative(base, file))
            except (OSError, ValueError):
                continue  # unreadable or binary: not searched
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    matches.append(f"{_relative(base, file)}:{number}: {line.strip()[:200]}")
                    if len(matches) == MAX_MATCHES:
                        return "\n".join(matches) + f"\n[... stopped at {MAX_MATCHES} matches]"
        return "\n".join(matches) if matches else f"no match for {pattern!r}"

    return [list_files, read_file, search_files]
