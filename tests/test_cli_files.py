"""The command line's file tools: what they can reach, and how their work is bounded.

They take their arguments from a model. Confinement: only regular files under the
root, links resolved and refused when they lead out, links swapped in between the
check and the open refused too, walks that follow no link. Bounds: results of at most
``MAX_OUTPUT_CHARS``, listings of ``MAX_ENTRIES``, reads of ``MAX_LINES`` lines of
``MAX_LINE_CHARS``; searches with RE2 (linear time, whatever the pattern) that an
abort stops within a few lines.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_cli import call_tool, project
from trio_agent import Agent, AgentTool, AssistantMessage, TextContent, ToolResultMessage
from trio_agent._cli import _confine, _files
from trio_agent._cli._files import (
    MAX_ENTRIES,
    MAX_LINE_CHARS,
    MAX_LINES,
    MAX_OUTPUT_CHARS,
    file_tools,
)
from trio_agent.providers import faux
from trio_agent.testing import check_transcript

SECRET = "the secret outside the root"


def outside(tmp_path: Path) -> Path:
    """A folder next to the root, with a file whose text must never come back."""
    folder = tmp_path / "outside"
    folder.mkdir(exist_ok=True)
    (folder / "notes.txt").write_text(SECRET + "\n")
    return folder


def tools_in(root: Path) -> list[AgentTool]:
    """The file tools over ``root`` (resolved, as the command line gives it)."""
    return file_tools(root.resolve())


# --- confinement --------------------------------------------------------------------------------


async def test_search_does_not_read_a_linked_file_outside_the_root(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "passwd").symlink_to(outside(tmp_path) / "notes.txt")
    (root / "sub" / "deeper").symlink_to(outside(tmp_path) / "notes.txt")
    text, failed = await call_tool(tools_in(root), "search_files", pattern="secret")
    assert (text, failed) == ("no match for 'secret'", False)


async def test_search_does_not_walk_into_a_linked_folder_outside_the_root(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    (root / "elsewhere").symlink_to(outside(tmp_path), target_is_directory=True)
    tools = tools_in(root)
    assert await call_tool(tools, "search_files", pattern="secret") == (
        "no match for 'secret'",
        False,
    )
    text, failed = await call_tool(tools, "search_files", pattern="secret", path="elsewhere")
    assert failed
    assert text == f"path 'elsewhere' is outside the root {str(root.resolve())!r}"


async def test_a_link_that_stays_inside_the_root_is_read_by_its_path(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "sub" / "b.txt").symlink_to(root / "beta.txt")
    tools = tools_in(root)
    assert await call_tool(tools, "read_file", path="sub/b.txt") == ("Beta\nshort", False)
    assert await call_tool(tools, "search_files", pattern="^short", path="sub/b.txt") == (
        "beta.txt:2: short",
        False,
    )
    # A walk follows no link: the file is found once, where it is.
    assert await call_tool(tools, "search_files", pattern="^short") == (
        "beta.txt:2: short",
        False,
    )


async def test_list_files_marks_links_and_does_not_follow_them(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "elsewhere").symlink_to(outside(tmp_path), target_is_directory=True)
    tools = tools_in(root)
    text, failed = await call_tool(tools, "list_files")
    assert (text, failed) == ("alpha.md\nbeta.txt\nelsewhere@\ngamma.py\nimage.bin\nsub/", False)
    text, failed = await call_tool(tools, "list_files", path="elsewhere/")
    assert failed
    assert "outside the root" in text


def swap_after_check(monkeypatch: pytest.MonkeyPatch, folder: Path, target: Path) -> list[Path]:
    """Make ``folder`` a link to ``target`` just after the next path inside it is resolved:
    the race a tool must lose safely (checked, then swapped, then opened)."""
    resolved: list[Path] = []
    original = pathlib.Path.resolve

    def resolve(self: Path, strict: bool = False) -> Path:
        result = original(self, strict)
        if not resolved and folder in result.parents:
            resolved.append(result)
            folder.rename(folder.with_name("was " + folder.name))
            folder.symlink_to(target, target_is_directory=True)
        return result

    monkeypatch.setattr(pathlib.Path, "resolve", resolve)
    return resolved


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read_file", {"path": "sub/notes.txt"}),
        ("list_files", {"path": "sub/inner"}),
        ("search_files", {"pattern": "secret", "path": "sub/inner"}),
    ],
)
async def test_a_link_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, arguments: dict[str, Any]
) -> None:
    root = project(tmp_path).resolve()
    (root / "sub" / "notes.txt").write_text("harmless\n")
    (root / "sub" / "inner").mkdir()
    away = outside(tmp_path)
    (away / "inner").mkdir()
    (away / "inner" / "notes.txt").write_text(SECRET + "\n")
    tools = file_tools(root)
    swapped = swap_after_check(monkeypatch, root / "sub", away)
    text, failed = await call_tool(tools, name, **arguments)
    assert swapped  # the race did happen
    assert failed, text
    path = arguments["path"]
    assert text == (
        f"path {path!r} changed while it was opened (a symbolic link appeared on the way): refused"
    )


async def test_only_regular_files_are_read(tmp_path: Path) -> None:
    root = project(tmp_path)
    os.mkfifo(root / "pipe")  # opening it to read would wait for a writer
    tools = tools_in(root)
    text, failed = await call_tool(tools, "read_file", path="pipe")
    assert failed
    assert text == "'pipe' is neither a folder nor a regular file"
    assert await call_tool(tools, "search_files", pattern="^Beta") == ("beta.txt:1: Beta", False)


# --- names that are not UTF-8 --------------------------------------------------------------------


def make_file(folder: Path, name: bytes, data: bytes) -> None:
    """A file named by bytes, as a Linux program may make one (``name`` need not be UTF-8)."""
    fd = os.open(os.path.join(os.fsencode(folder), name), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


async def test_a_name_that_is_not_utf8_is_shown_escaped_and_reaches_its_file(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    make_file(root, b"caf\xe9.txt", b"latin-1 name\n")
    make_file(root, b"a\\xe9.txt", b"a backslash, then xe9\n")  # what the escape looks like
    make_file(root, b"back\\slash.txt", b"one backslash\n")
    os.mkdir(os.path.join(os.fsencode(root), b"d\xff"))
    make_file(root / os.fsdecode(b"d\xff"), b"inner\xfe.txt", b"deeper name\n")
    tools = tools_in(root)
    listing, failed = await call_tool(tools, "list_files")
    assert (listing, failed) == (
        "a\\\\xe9.txt\nback\\\\slash.txt\ncaf\\xe9.txt\nd\\xff/",
        False,
    )
    found, failed = await call_tool(tools, "search_files", pattern="name")
    assert (found, failed) == (
        "caf\\xe9.txt:1: latin-1 name\nd\\xff/inner\\xfe.txt:1: deeper name",
        False,
    )
    # Valid text, which a request (and a saved session) can carry...
    (listing + found).encode("utf-8")
    # ... and each name, given back as shown, reaches its own file.
    for shown_path, text in [
        ("caf\\xe9.txt", "latin-1 name"),
        ("a\\\\xe9.txt", "a backslash, then xe9"),
        ("back\\\\slash.txt", "one backslash"),
        ("back\\slash.txt", "one backslash"),  # a lone backslash is taken as it is
        ("d\\xff/inner\\xfe.txt", "deeper name"),
        ("d\\XFF/../caf\\xE9.txt", "latin-1 name"),
    ]:
        assert await call_tool(tools, "read_file", path=shown_path) == (text, False), shown_path
    assert await call_tool(tools, "list_files", path="d\\xff") == ("inner\\xfe.txt", False)
    assert await call_tool(tools, "search_files", pattern="name", path="d\\xff") == (
        "d\\xff/inner\\xfe.txt:1: deeper name",
        False,
    )
    assert await call_tool(tools, "search_files", pattern="^", path="d\\xff/inner\\xfe.txt") == (
        "d\\xff/inner\\xfe.txt:1: deeper name",
        False,
    )
    # Only bytes past ASCII are written so: an escape cannot spell a way out of the root.
    outside(tmp_path)
    text, failed = await call_tool(tools, "read_file", path="\\x2e\\x2e/outside/notes.txt")
    assert failed
    assert SECRET not in text


names = st.lists(
    st.characters(exclude_characters="/\0")
    | st.sampled_from(["\\", "x", "e", "9", "F"])
    # the bytes that are not UTF-8, as Python holds them
    | st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF, exclude_categories=()),
    min_size=1,
).map("".join)


@settings(max_examples=300)
@given(names)
def test_an_escaped_name_is_valid_text_that_unescapes_to_the_name(name: str) -> None:
    text = _confine.escape_name(name)
    text.encode("utf-8")
    assert _confine.unescape_path(text) == name
    assert _confine.unescape_path(f"{text}/{text}") == f"{name}/{name}"


# --- bounds -------------------------------------------------------------------------------------


async def test_a_listing_is_cut_at_max_entries_and_says_how_many_there_are(
    tmp_path: Path,
) -> None:
    root = tmp_path / "many"
    root.mkdir()
    for number in range(MAX_ENTRIES + 500):
        (root / f"f{number:05}").touch()
    text, failed = await call_tool(tools_in(root), "list_files")
    assert not failed
    lines = text.splitlines()
    assert lines[:2] == ["f00000", "f00001"]
    assert len(lines) == MAX_ENTRIES + 1
    assert lines[-1] == (
        "[... 1,000 of the 1,500 entries of . shown: list a sub-folder, "
        "or find files with search_files]"
    )


async def test_a_listing_of_long_names_is_cut_at_max_output_chars(tmp_path: Path) -> None:
    root = tmp_path / "long"
    root.mkdir()
    for number in range(400):
        (root / f"{number:03}{'n' * 240}").touch()
    text, failed = await call_tool(tools_in(root), "list_files")
    assert not failed
    assert len(text) <= MAX_OUTPUT_CHARS
    shown = len(text.splitlines()) - 1
    assert shown < 400
    assert text.splitlines()[-1].startswith(f"[... {shown} of the 400 entries of . shown")


async def test_search_results_are_cut_at_max_output_chars(tmp_path: Path) -> None:
    root = tmp_path / "deep"
    folder = root
    for level in range(4):
        folder = folder / (f"{level}" + "d" * 200)
    folder.mkdir(parents=True)
    for number in range(60):
        (folder / f"{number:02}.txt").write_text(f"match {'x' * 300}\n" * 2)
    text, failed = await call_tool(tools_in(root), "search_files", pattern="match")
    assert not failed
    assert len(text) <= MAX_OUTPUT_CHARS
    assert text.endswith(f"[... cut at {MAX_OUTPUT_CHARS:,} characters: narrow the search]")


async def test_a_search_stops_after_max_search_files_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_files, "MAX_SEARCH_FILES", 3)
    root = tmp_path / "five"
    root.mkdir()
    for number in range(5):
        (root / f"{number}.txt").write_text("hit\n")
    text, failed = await call_tool(tools_in(root), "search_files", pattern="hit")
    assert (text, failed) == (
        "0.txt:1: hit\n1.txt:1: hit\n2.txt:1: hit\n"
        "[... stopped after 3 files and 12 bytes, as far as one search goes: "
        "search a sub-folder]",
        False,
    )


async def test_a_search_stops_after_max_walk_entries_of_empty_folders_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Empty folders yield no file to count: the walk counts what it looks at.
    monkeypatch.setattr(_confine, "MAX_WALK_ENTRIES", 50)
    root = tmp_path / "hollow"
    root.mkdir()
    (root / "a.txt").write_text("hit\n")
    for number in range(100):
        (root / f"d{number:03}").mkdir()
    text, failed = await call_tool(tools_in(root), "search_files", pattern="hit")
    assert (text, failed) == (
        "[... stopped after looking at 50 entries of folders, as far as one search goes: "
        "search a sub-folder]",
        False,
    )


async def test_search_finds_no_line_after_the_last_newline(tmp_path: Path) -> None:
    text, failed = await call_tool(tools_in(project(tmp_path)), "search_files", pattern="^$")
    assert (text, failed) == ("no match for '^$'", False)


async def test_search_shows_long_lines_around_their_match(tmp_path: Path) -> None:
    root = tmp_path / "wide"
    root.mkdir()
    (root / "min.js").write_text("a" * 5000 + "needle" + "b" * 5000 + "\n")
    text, failed = await call_tool(tools_in(root), "search_files", pattern="needle")
    assert not failed
    assert text.startswith("min.js:1: …aaa")
    assert "needle" in text
    assert len(text) < 250


async def test_read_file_gives_at_most_max_lines_whatever_the_limit(tmp_path: Path) -> None:
    root = tmp_path / "long"
    root.mkdir()
    (root / "log.txt").write_text("".join(f"line {n}\n" for n in range(1, 5001)))
    text, failed = await call_tool(tools_in(root), "read_file", path="log.txt", limit=10**9)
    assert not failed
    lines = text.splitlines()
    assert len(lines) == MAX_LINES + 1
    assert lines[-1] == "[... lines 1-2000 of 5000; read on with offset=2001]"


async def test_read_file_cuts_a_huge_line(tmp_path: Path) -> None:
    root = tmp_path / "wide"
    root.mkdir()
    (root / "data.json").write_text("[" + "1," * 100_000 + "1]\nend\n")
    text, failed = await call_tool(tools_in(root), "read_file", path="data.json")
    assert not failed
    first, second = text.splitlines()
    note = " [... line 1 cut: 200,003 characters]"
    assert first == ("[" + "1," * 1000)[: MAX_LINE_CHARS - len(note)] + note
    assert len(first) == MAX_LINE_CHARS
    assert second == "end"


async def test_read_file_cuts_its_result_at_max_output_chars(tmp_path: Path) -> None:
    root = tmp_path / "wide"
    root.mkdir()
    (root / "wide.txt").write_text(("w" * 1000 + "\n") * 200)
    text, failed = await call_tool(tools_in(root), "read_file", path="wide.txt")
    assert not failed
    assert len(text) <= MAX_OUTPUT_CHARS
    assert text.splitlines()[-1] == "[... lines 1-49 of 200; read on with offset=50]"


# --- each bound, at it and one past it -----------------------------------------------------------


def test_the_bounds_are_the_numbers_the_readme_states() -> None:
    """docs/security.md and the tools' descriptions state these numbers."""
    assert (MAX_OUTPUT_CHARS, MAX_ENTRIES, MAX_LINES, MAX_LINE_CHARS) == (50_000, 1000, 2000, 2000)
    assert (_files.MAX_READ_BYTES, _files.MAX_SEARCH_LINE_BYTES) == (1_000_000, 10_000)
    assert (_files.MAX_MATCHES, _files.MAX_SEARCH_FILES) == (100, 10_000)
    assert (_files.MAX_SEARCH_BYTES, _confine.MAX_WALK_ENTRIES) == (20_000_000, 1_000_000)
    assert _files.MAX_PATTERN_CHARS == 1000


def read_note(first: int, last: int, total: int) -> str:
    return f"[... lines {first}-{last} of {total}; read on with offset={last + 1}]"


async def read_whole(root: Path, lines: list[str], **arguments: Any) -> str:
    (root / "f.txt").write_text("".join(line + "\n" for line in lines))
    text, failed = await call_tool(tools_in(root), "read_file", path="f.txt", **arguments)
    assert not failed, text
    return text


async def test_a_read_of_exactly_max_output_chars_is_whole_and_one_more_is_cut(
    tmp_path: Path,
) -> None:
    lines = ["w" * 1999] * 23 + ["w" * 2000, "w" * 1999]
    assert len("\n".join(lines)) == MAX_OUTPUT_CHARS
    assert await read_whole(tmp_path, lines) == "\n".join(lines)
    lines[-1] += "w"
    text = await read_whole(tmp_path, lines)
    assert text == "\n".join([*lines[:24], read_note(1, 24, 25)])
    assert len(text) <= MAX_OUTPUT_CHARS


async def test_the_note_that_ends_a_read_fits_within_max_output_chars(tmp_path: Path) -> None:
    """25 lines fill all but 10 characters: the note takes the 25th line's place."""
    lines = ["w" * 1999] * 24 + ["w" * 1990, "w" * 100]
    assert len("\n".join(lines[:25])) == MAX_OUTPUT_CHARS - 10
    text = await read_whole(tmp_path, lines)
    assert text == "\n".join([*lines[:24], read_note(1, 24, 26)])
    assert len(text) <= MAX_OUTPUT_CHARS


async def test_a_line_of_max_line_chars_is_whole_and_one_more_is_cut_to_it(
    tmp_path: Path,
) -> None:
    text = await read_whole(tmp_path, ["a" * MAX_LINE_CHARS, "b" * (MAX_LINE_CHARS + 1)])
    first, second = text.split("\n")
    assert first == "a" * MAX_LINE_CHARS
    note = " [... line 2 cut: 2,001 characters]"
    assert second == "b" * (MAX_LINE_CHARS - len(note)) + note
    assert len(second) == MAX_LINE_CHARS


async def test_a_read_of_max_lines_is_whole_and_one_more_is_cut(tmp_path: Path) -> None:
    lines = [f"line {n}" for n in range(1, MAX_LINES + 1)]
    assert await read_whole(tmp_path, lines) == "\n".join(lines)
    text = await read_whole(tmp_path, [*lines, "one more"])
    assert text == "\n".join([*lines, read_note(1, MAX_LINES, MAX_LINES + 1)])


async def test_a_read_sees_the_first_max_read_bytes_and_says_when_there_is_more(
    tmp_path: Path,
) -> None:
    lines = ["r" * 999] * (_files.MAX_READ_BYTES // 1000)
    assert await read_whole(tmp_path, lines, offset=1000) == "r" * 999
    with (tmp_path / "f.txt").open("a") as file:
        file.write("x")  # byte 1,000,001: not seen
    text, failed = await call_tool(tools_in(tmp_path), "read_file", path="f.txt", offset=1000)
    assert (text, failed) == (
        "r" * 999 + "\n\n[... f.txt is longer than 1,000,000 bytes: the rest cannot be read]",
        False,
    )


async def list_of(root: Path) -> str:
    text, failed = await call_tool(tools_in(root), "list_files")
    assert not failed, text
    return text


def list_note(shown: int, total: int) -> str:
    return (
        f"[... {shown:,} of the {total:,} entries of . shown: list a sub-folder, "
        "or find files with search_files]"
    )


async def test_a_listing_of_max_entries_is_whole_and_one_more_is_cut(tmp_path: Path) -> None:
    names = [f"f{number:04}" for number in range(MAX_ENTRIES)]
    for name in names:
        (tmp_path / name).touch()
    assert await list_of(tmp_path) == "\n".join(names)
    (tmp_path / "z").touch()
    assert await list_of(tmp_path) == "\n".join([*names, list_note(MAX_ENTRIES, 1001)])


async def test_a_listing_of_exactly_max_output_chars_is_whole_and_one_more_is_cut(
    tmp_path: Path,
) -> None:
    names = [f"{number:03}" + "n" * 246 for number in range(199)] + ["199" + "n" * 247]
    assert len("\n".join(names)) == MAX_OUTPUT_CHARS
    for name in names:
        (tmp_path / name).touch()
    assert await list_of(tmp_path) == "\n".join(names)
    (tmp_path / "z").touch()
    text = await list_of(tmp_path)
    assert text == "\n".join([*names[:199], list_note(199, 201)])
    assert len(text) <= MAX_OUTPUT_CHARS


async def search(root: Path, pattern: str) -> str:
    text, failed = await call_tool(tools_in(root), "search_files", pattern=pattern)
    assert not failed, text
    return text


async def test_a_search_of_max_matches_is_whole_and_one_more_says_it_stopped(
    tmp_path: Path,
) -> None:
    (tmp_path / "f.txt").write_text("hit\n" * _files.MAX_MATCHES)
    hits = [f"f.txt:{n}: hit" for n in range(1, _files.MAX_MATCHES + 1)]
    assert await search(tmp_path, "hit") == "\n".join(hits)
    (tmp_path / "f.txt").write_text("hit\n" * (_files.MAX_MATCHES + 1))
    assert await search(tmp_path, "hit") == "\n".join(
        [*hits, "[... stopped at 100 matches: narrow the search]"]
    )


async def test_a_search_of_exactly_max_output_chars_is_whole_and_one_more_is_cut(
    tmp_path: Path,
) -> None:
    """100 matches of 499 characters (the paths are long) and newlines: 50,000."""
    folder = tmp_path / ("a" * 200) / ("b" * 200)
    folder.mkdir(parents=True)
    names = [f"{number:02}" + "f" * 86 for number in range(99)] + ["99" + "f" * 87]
    for name in names:
        (folder / name).write_text("match\n")
    expected = "\n".join(f"{'a' * 200}/{'b' * 200}/{name}:1: match" for name in names)
    assert len(expected) == MAX_OUTPUT_CHARS
    assert await search(tmp_path, "match") == expected
    (folder / names[-1]).rename(folder / (names[-1] + "f"))
    text = await search(tmp_path, "match")
    *shown, note = text.split("\n")
    assert shown == expected.split("\n")[:99]
    assert note == f"[... cut at {MAX_OUTPUT_CHARS:,} characters: narrow the search]"
    assert len(text) <= MAX_OUTPUT_CHARS


async def test_a_search_matches_each_line_up_to_max_search_line_bytes(tmp_path: Path) -> None:
    """A match that ends at the 10,000th byte of its line is found; one byte later, not."""
    (tmp_path / "at.txt").write_text("a" * (_files.MAX_SEARCH_LINE_BYTES - 6) + "needle\n")
    (tmp_path / "past.txt").write_text("a" * (_files.MAX_SEARCH_LINE_BYTES - 5) + "needle\n")
    assert (await search(tmp_path, "needle")).startswith("at.txt:1: …aaa")
    assert "past.txt" not in await search(tmp_path, "needle")


async def test_a_search_sees_each_file_up_to_max_read_bytes(tmp_path: Path) -> None:
    """A match that ends at a file's 1,000,000th byte is found; one byte later, not."""
    filler = ("r" * 999 + "\n") * (_files.MAX_READ_BYTES // 1000 - 1)
    (tmp_path / "at.txt").write_text(filler + "r" * 994 + "needle")
    (tmp_path / "past.txt").write_text(filler + "r" * 995 + "needle")
    assert (tmp_path / "at.txt").stat().st_size == _files.MAX_READ_BYTES
    text = await search(tmp_path, "needle")
    assert text.startswith("at.txt:1000: ")
    assert "past.txt" not in text


@pytest.mark.parametrize(("bound", "step"), [("MAX_SEARCH_FILES", 1), ("MAX_SEARCH_BYTES", 4)])
async def test_a_search_of_exactly_its_files_and_bytes_is_whole_and_one_more_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bound: str, step: int
) -> None:
    """(With the bound lowered to 3 files, or to 12 bytes: files of 4 bytes each.)"""
    monkeypatch.setattr(_files, bound, 3 * step)
    for number in range(3):
        (tmp_path / f"{number}.txt").write_text("hit\n")
    hits = "0.txt:1: hit\n1.txt:1: hit\n2.txt:1: hit"
    assert await search(tmp_path, "hit") == hits
    (tmp_path / "3.txt").write_text("hit\n")
    assert await search(tmp_path, "hit") == (
        f"{hits}\n[... stopped after 3 files and 12 bytes, as far as one search goes: "
        "search a sub-folder]"
    )


async def test_a_walk_of_exactly_max_walk_entries_is_whole_and_one_more_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(With the bound lowered to 5 entries.)"""
    monkeypatch.setattr(_confine, "MAX_WALK_ENTRIES", 5)
    for number in range(5):
        (tmp_path / f"{number}.txt").write_text("hit\n")
    hits = "\n".join(f"{number}.txt:1: hit" for number in range(5))
    assert await search(tmp_path, "hit") == hits
    (tmp_path / "empty").mkdir()
    assert await search(tmp_path, "hit") == (
        "[... stopped after looking at 5 entries of folders, as far as one search goes: "
        "search a sub-folder]"
    )


async def test_a_pattern_of_max_pattern_chars_is_taken(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x" * _files.MAX_PATTERN_CHARS + "\n")
    text = await search(tmp_path, "x" * _files.MAX_PATTERN_CHARS)
    assert text.startswith("f.txt:1: ")


@pytest.mark.parametrize(
    ("content", "arguments", "expected"),
    [
        ("", {}, ("(empty file)", False)),
        (
            "one\ntwo\n",
            {"offset": 3},
            ("offset 3 is past the end of 'f.txt', which has 2 lines", True),
        ),
    ],
)
async def test_read_file_never_answers_with_empty_text(
    tmp_path: Path, content: str, arguments: dict[str, Any], expected: tuple[str, bool]
) -> None:
    """(An empty text block is refused by some providers.)"""
    (tmp_path / "f.txt").write_text(content)
    tools = tools_in(tmp_path)
    assert await call_tool(tools, "read_file", path="f.txt", **arguments) == expected


# --- the pattern language -----------------------------------------------------------------------

BACKTRACKING = "(a+)+$"  # exponential in Python's re on a line of a's that ends otherwise


def test_a_pattern_that_backtracks_takes_linear_time(tmp_path: Path) -> None:
    """Python's ``re`` would take hours on one such line, and nothing could stop it; RE2
    is linear. In a process of its own, so that a regression fails at the bound instead
    of holding the test run."""
    root = tmp_path / "tree"
    for folder in range(20):
        (root / f"{folder:02}").mkdir(parents=True)
        for number in range(10):
            (root / f"{folder:02}" / f"{number}.txt").write_text(("a" * 40 + "!\n") * 100)
    script = textwrap.dedent(
        f"""
        import pathlib, trio
        from trio_agent._cli._files import file_tools
        (search,) = [t for t in file_tools(pathlib.Path({str(root.resolve())!r}))
                     if t.name == "search_files"]
        async def main():
            result = await search.execute("id", {{"pattern": {BACKTRACKING!r}}}, print)
            print(result.content[0].text)
        trio.run(main)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"no match for {BACKTRACKING!r}\n"


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        (
            "(?=a)",
            "pattern '(?=a)' is not a regular expression RE2 accepts: invalid perl operator: "
            "(?= (RE2 has no backreferences and no lookaround)",
        ),
        ("x" * 1001, "pattern is 1,001 characters long; at most 1,000"),
    ],
)
async def test_a_pattern_re2_refuses_is_a_clear_error(
    tmp_path: Path, pattern: str, error: str, capfd: pytest.CaptureFixture[str]
) -> None:
    text, failed = await call_tool(
        file_tools(project(tmp_path).resolve()), "search_files", pattern=pattern
    )
    assert (text, failed) == (error, True)
    assert capfd.readouterr().err == ""  # RE2 logs nothing of its own


async def test_an_abort_stops_a_search_of_a_big_tree_within_a_few_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """The run is aborted while the search works through a tree of lines that would
    backtrack in Python's ``re``: the search stops at its next poll (within 256 lines),
    every call gets its result, and no time passes."""
    root = tmp_path / "tree"
    for folder in range(10):
        (root / f"{folder}").mkdir(parents=True)
        for number in range(10):
            (root / f"{folder}" / f"{number}.txt").write_text(("a" * 40 + "!\n") * 1000)
    model = faux.model(
        [faux.reply("Searching.", faux.tool_call("search_files", {"pattern": BACKTRACKING})), "-"]
    )
    agent = Agent(model, tools=tools_in(root))
    searched = 0
    compile_pattern = _files._compile

    class Counting:
        """The pattern, counting the lines it is matched against; in the middle of the
        second file it aborts the run (in the Trio thread, as Ctrl-C would) and goes on."""

        def __init__(self, regex: Any) -> None:
            self.regex = regex

        def search(self, line: bytes) -> Any:
            nonlocal searched
            searched += 1
            if searched == 1500:
                trio.from_thread.run_sync(agent.abort)
            return self.regex.search(line)

    monkeypatch.setattr(_files, "_compile", lambda pattern: Counting(compile_pattern(pattern)))
    start = trio.current_time()
    await agent.prompt("Find it")
    assert trio.current_time() == start
    assert 1500 <= searched <= 1500 + 256  # stopped at the next poll, within 256 lines
    check_transcript(agent.state.messages)
    (result,) = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert result.is_error
    assert result.content == (TextContent(text="Operation aborted"),)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"
