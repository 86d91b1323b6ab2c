"""Read-only file tools confined to a root folder: list, read, search.

What they can reach: regular files and folders under the root, by paths that are
resolved (symbolic links followed) and refused unless they stay inside it, and opened
so that a link swapped in meanwhile is not followed either (``_confine``). A search
walks the tree without following any link. Nothing is ever written.

How their work is bounded: a model chooses the arguments, so no argument can make a
tool run long or answer at length. Every result is at most :data:`MAX_OUTPUT_CHARS`
characters, and says when and where it was cut; a listing shows at most
:data:`MAX_ENTRIES` entries, a read :data:`MAX_LINES` lines of :data:`MAX_LINE_CHARS`
characters, from the first :data:`MAX_READ_BYTES` bytes of a file. A search matches
with RE2 (google-re2), whose time is linear in the text searched, whatever the
pattern (Python's ``re`` can backtrack for hours on ``(a+)+$``); it reads at most
:data:`MAX_SEARCH_FILES` files and :data:`MAX_SEARCH_BYTES` bytes in all, matches each
line up to its first :data:`MAX_SEARCH_LINE_BYTES` bytes, and stops at
:data:`MAX_MATCHES` matches.

The tools are sync functions made into tools with :func:`~trio_agent.tool`, so they
run in a worker thread. Cancellation: they poll ``trio.from_thread.check_cancelled``
between files, between lines and while scanning a folder, so an abort stops them
within a line's match (RE2 releases the GIL meanwhile).
"""

from __future__ import annotations

import contextlib
import heapq
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
import trio

from .._decorator import tool
from .._tools import AgentTool
from . import _confine
from ._confine import (
    SKIPPED_DIRS,
    Folder,
    NotRegularError,
    WalkTooLarge,
    escape_name,
    open_at,
    open_inside,
    open_parts,
    parts_inside,
    read_start,
    walk,
)

MAX_OUTPUT_CHARS = 50_000
"""The longest result of any tool, in characters (about 12,000 tokens), the note saying
where it was cut included."""
MAX_ENTRIES = 1000
"""Entries a listing shows at most."""
MAX_READ_BYTES = 1_000_000
"""Bytes of a file that a read or a search sees: its start."""
MAX_LINES = 2000
"""Lines one read returns at most (a larger ``limit`` is cut to this)."""
MAX_LINE_CHARS = 2000
"""Characters of one line that a read shows at most, the note saying it was cut included."""
MAX_PATTERN_CHARS = 1000
"""The longest search pattern."""
MAX_SEARCH_FILES = 10_000
"""Files one search reads at most."""
MAX_SEARCH_BYTES = 20_000_000
"""Bytes one search reads at most, in all."""
MAX_SEARCH_LINE_BYTES = 10_000
"""Bytes of each line that a search matches against."""
MAX_MATCHES = 100
"""Matches one search returns at most."""

_SEARCH_CUT = f"[... cut at {MAX_OUTPUT_CHARS:,} characters: narrow the search]"
_SNIPPET_CHARS = 200  # of a matching line shown, around the match
_POLL_LINES = 256  # lines between two polls for cancellation
_BINARY_PROBE = 8192  # a NUL in this many first bytes: a binary file, not read


def _poll() -> None:
    trio.from_thread.check_cancelled()


def _no_note(count: int) -> str:
    return ""


class _Result:
    """The lines of a tool's result, then a note saying where it was cut: at most
    :data:`MAX_OUTPUT_CHARS` characters in all, the note included."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0  # of the lines joined by newlines
        self.full = False

    def add(self, line: str) -> bool:
        """Add ``line`` if it fits; whether it did (once one does not, none is added)."""
        size = self.size + len(line) + (1 if self.lines else 0)
        if self.full or size > MAX_OUTPUT_CHARS:
            self.full = True
            return False
        self.lines.append(line)
        self.size = size
        return True

    def text(self, note: Callable[[int], str] = _no_note) -> str:
        """The lines, then ``note(count)`` on a line of its own: what to say when the first
        ``count`` lines are shown ("" for nothing). Lines are left out from the end until
        the note fits, and ``note`` is asked again for what is left."""
        lines, size = self.lines, self.size
        count = len(lines)
        while True:
            said = note(count)[:MAX_OUTPUT_CHARS]
            if not said:
                return "\n".join(lines[:count])
            if size + (1 if count else 0) + len(said) <= MAX_OUTPUT_CHARS:
                return "\n".join([*lines[:count], said])
            while count and size + 1 + len(said) > MAX_OUTPUT_CHARS:
                count -= 1
                size -= len(lines[count]) + (1 if count else 0)


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:_BINARY_PROBE]


def _shown(text: str) -> str:
    """``text`` as the person or model gave it, cut for an error message."""
    return repr(text) if len(text) <= 200 else f"{text[:200]!r}... ({len(text):,} characters)"


def _compile(pattern: str) -> Any:
    """``pattern`` compiled by RE2; ``ValueError`` naming it if RE2 refuses it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(
            f"pattern is {len(pattern):,} characters long; at most {MAX_PATTERN_CHARS:,}"
        )
    options = re2.Options()
    options.log_errors = False  # the reason is in the exception: nothing on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "refused"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(
            f"pattern {_shown(pattern)} is not a regular expression RE2 accepts: {reason} "
            "(RE2 has no backreferences and no lookaround)"
        ) from None


def _snippet(line: bytes, start: int) -> str:
    """The matching ``line``, or around its match at byte ``start`` when it is long."""
    text = line.decode("utf-8", "replace").strip()
    if len(text) <= _SNIPPET_CHARS:
        return text
    at = len(line[:start].decode("utf-8", "replace").lstrip())
    begin = max(0, min(at - _SNIPPET_CHARS // 4, len(text) - _SNIPPET_CHARS))
    cut = text[begin : begin + _SNIPPET_CHARS]
    return ("…" if begin else "") + cut + ("…" if begin + _SNIPPET_CHARS < len(text) else "")


class _Search:
    """One search's matches and what it has read."""

    def __init__(self, regex: Any) -> None:
        self.regex = regex
        self.result = _Result()
        self.matches = 0
        self.files = 0
        self.bytes = 0
        self.stopped = ""  # why the search stopped early, for the result

    def file(self, display: str, file: io.FileIO) -> None:
        """Search one file; set :attr:`stopped` when a bound is reached."""
        budget = min(MAX_READ_BYTES, MAX_SEARCH_BYTES - self.bytes)
        data = read_start(file, budget)
        self.files += 1
        self.bytes += len(data)
        if _is_binary(data):
            return
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # the newline at the end ends the last line: no line after it
        for number, line in enumerate(lines, 1):
            if number % _POLL_LINES == 0:
                _poll()
            found = self.regex.search(line[:MAX_SEARCH_LINE_BYTES].removesuffix(b"\r"))
            if found is None:
                continue
            if self.matches == MAX_MATCHES:  # one more than are shown: say so
                self.stopped = f"[... stopped at {MAX_MATCHES} matches: narrow the search]"
                return
            if not self.result.add(f"{display}:{number}: {_snippet(line, found.start())}"):
                self.stopped = _SEARCH_CUT
                return
            self.matches += 1

    def note(self, count: int) -> str:
        """What the result says after its first ``count`` matches (see :meth:`_Result.text`)."""
        return self.stopped if count == len(self.result.lines) else _SEARCH_CUT

    def tree(self, top: Folder, prefix: str) -> None:
        """Search the files under ``top`` until they end or a bound is reached."""
        with contextlib.closing(walk(top, prefix, _poll)) as files:
            try:
                self.files_of(files)
            except WalkTooLarge:
                self.stopped = (
                    f"[... stopped after looking at {_confine.MAX_WALK_ENTRIES:,} entries of "
                    "folders, as far as one search goes: search a sub-folder]"
                )

    def files_of(self, files: Iterator[tuple[str, Folder, str]]) -> None:
        """Search ``files`` (a walk) until they end or a bound is reached."""
        for display, folder, name in files:
            _poll()
            if self.files >= MAX_SEARCH_FILES or self.bytes >= MAX_SEARCH_BYTES:
                self.stopped = (
                    f"[... stopped after {self.files:,} files and {self.bytes:,} bytes, "
                    "as far as one search goes: search a sub-folder]"
                )
                return
            try:
                opened = open_at(folder, name)
            except (OSError, NotRegularError):
                continue  # gone, unreadable, or swapped for a link: not searched
            if not isinstance(opened, io.FileIO):
                continue  # swapped for a folder: the walk did not see it as one
            with opened:
                self.file(display, opened)
            if self.stopped:
                return


def _listing(folder: Folder, display: str) -> str:
    total = 0

    def entries() -> Iterator[tuple[str, os.DirEntry[str]]]:
        nonlocal total
        with os.scandir(folder) as scan:
            for count, entry in enumerate(scan):
                if count % 1024 == 0:
                    _poll()
                if entry.name not in SKIPPED_DIRS or not entry.is_dir(follow_symlinks=False):
                    total += 1
                    yield entry.name, entry

    # The first entries by name, without holding all of a huge folder's.
    chosen = heapq.nsmallest(MAX_ENTRIES, entries(), key=lambda item: item[0])
    if not chosen:
        return "(empty folder)"
    result = _Result()
    for name, entry in chosen:
        if entry.is_symlink():
            label = escape_name(name) + "@"
        elif entry.is_dir(follow_symlinks=False):
            label = escape_name(name) + "/"
        else:
            label = escape_name(name)
        if not result.add(label):
            break

    def note(shown: int) -> str:
        if shown == total:
            return ""
        return (
            f"[... {shown:,} of the {total:,} entries of {display} shown: list a sub-folder, "
            "or find files with search_files]"
        )

    return result.text(note)


def _read(file: io.FileIO, path: str, offset: int, limit: int) -> str:
    data = read_start(file, MAX_READ_BYTES + 1)
    if _is_binary(data):
        raise ValueError(f"{path!r} is a binary file")
    longer = len(data) > MAX_READ_BYTES
    lines = data[:MAX_READ_BYTES].decode("utf-8", "replace").split("\n")
    if lines[-1] == "" and not longer:
        lines.pop()  # the newline at the end ends the last line: no line after it
    if not lines:
        return "(empty file)"
    if offset > len(lines):
        raise ValueError(
            f"offset {offset} is past the end of {path!r}, which has {len(lines)} lines"
        )
    result = _Result()
    for number in range(offset, min(offset - 1 + min(limit, MAX_LINES), len(lines)) + 1):
        if number % _POLL_LINES == 0:
            _poll()
        line = lines[number - 1].removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            cut = f" [... line {number} cut: {len(line):,} characters]"
            line = line[: MAX_LINE_CHARS - len(cut)] + cut
        if not result.add(line):
            break

    def more(shown: int) -> str:
        last = offset - 1 + shown
        if last < len(lines):
            return f"[... lines {offset}-{last} of {len(lines)}; read on with offset={last + 1}]"
        if longer:
            return f"[... {path} is longer than {MAX_READ_BYTES:,} bytes: the rest cannot be read]"
        return ""

    return result.text(more)


def file_tools(root: Path) -> list[AgentTool]:
    """``list_files``, ``read_file`` and ``search_files`` over ``root`` (read-only; a
    resolved path: the tools compare resolved paths with it)."""
    base = root

    @tool
    def list_files(path: str = ".") -> str:
        """List a folder of the project: one entry per line, by name; folders end in "/",
        symbolic links in "@". At most 1,000 entries (the result says how many there are).

        Args:
            path: The folder, relative to the project's root.
        """
        with open_inside(base, path) as folder:
            if isinstance(folder, io.FileIO):
                raise NotADirectoryError(f"{path!r} is not a folder")
            return _listing(folder, path)

    @tool
    def read_file(path: str, offset: int = 1, limit: int = MAX_LINES) -> str:
        """Read a text file of the project, ``limit`` lines (2,000 at most) from line
        ``offset``. Lines longer than 2,000 characters are cut; only a file's first
        1,000,000 bytes can be read.

        Args:
            path: The file, relative to the project's root.
            offset: The first line to read (from 1).
            limit: How many lines to read at most.
        """
        if offset < 1:
            raise ValueError(f"offset must be 1 or more, not {offset}")
        if limit < 1:
            raise ValueError(f"limit must be 1 or more, not {limit}")
        with open_inside(base, path) as file:
            if not isinstance(file, io.FileIO):
                raise IsADirectoryError(f"{path!r} is not a file")
            return _read(file, path, offset, limit)

    @tool
    def search_files(pattern: str, path: str = ".") -> str:
        """Search the project's text files for a regular expression; one "file:line: text"
        per matching line.

        The pattern is RE2 syntax (https://github.com/google/re2/wiki/Syntax): like
        Python's, without backreferences or lookaround; "(?i)" ignores case. It is matched
        against each line (its first 10,000 bytes) of each file's first 1,000,000 bytes.
        Symbolic links are not followed. A search stops at 100 matches, 10,000 files or
        20,000,000 bytes, and says so.

        Args:
            pattern: An RE2 regular expression, e.g. "def \\w+_files" or "(?i)todo".
            path: The folder (or file) to search, relative to the project's root.
        """
        search = _Search(_compile(pattern))
        parts = parts_inside(base, path)
        with open_parts(base, parts, path) as top:
            if isinstance(top, io.FileIO):
                search.file("/".join(map(escape_name, parts)), top)
            else:
                search.tree(top, "".join(escape_name(part) + "/" for part in parts))
        return search.result.text(search.note) or f"no match for {_shown(pattern)}"

    return [list_files, read_file, search_files]
