"""Every citation in the code points at a section of the documentation that exists.

The code cites the contract it keeps: ``design.md#the-order-of-events``,
``design.md#invariant-10-well-formed-events``, "invariant 8", or a page and a
section title in quotes (``docs/design.md, "What a run owes"``). Each citation
in ``trio_agent/`` and ``.ci/run`` is checked here: the page is one of
``docs/`` (or the README or the changelog); the citation names a section of
it, by the anchor of one of its headings (as the site's table of contents
makes it) or by one of its headings in quotes; and "invariant N" has its
heading in ``docs/design.md``. No ``§``: the site numbers only the invariants.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ROOT_PAGES = ("README.md", "CHANGELOG.md")
DESIGN = DOCS / "design.md"

# A page: a name ending in .md, maybe under folders, maybe with an anchor, maybe followed by a
# section title in quotes ("design.md, "What a run owes"").
_PAGE = re.compile(
    r"(?<![\w./-])(?P<page>(?:[\w-]+/)*[\w-]+\.md)(?:#(?P<anchor>[\w-]*))?"
    r"(?:,?[ \t]+\"(?P<title>[^\"\n]+)\")?"
)
# "invariant 8", "invariants 1 and 2", "invariants 4, 5 and 6", "invariants.md 14"
_INVARIANT = re.compile(r"\b[Ii]nvariants?(?:\.md)?\s+(?P<numbers>\d+(?:\s*(?:,|and)\s*\d+)*)")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})[ \t]+(?P<text>.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_CUSTOM_ID = re.compile(r"[ \t]*\{[ \t]*#(?P<id>[\w-]+)[^}]*\}$")
_INVARIANT_HEADING = re.compile(r"^Invariant (?P<number>\d+): ")


def slugify(text: str) -> str:
    """A heading's anchor, as Python-Markdown's ``toc`` extension makes it (MkDocs and its
    Material theme use it unchanged): ASCII, lowercase, characters that are not word
    characters, spaces or hyphens dropped, each run of spaces and hyphens one hyphen."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _plain(markdown: str) -> str:
    """The text of a heading as rendered, which the anchor is made from: links become their
    text, code spans and emphasis lose their marks."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = text.replace("`", "")
    return re.sub(r"(\*{1,3})(\S(?:.*?\S)?)\1", r"\2", text)


def headings(page: Path) -> dict[str, str]:
    """Each heading's anchor, and its text, outside code blocks, in page order; a repeated
    anchor gets ``_1``, ``_2``, ... as the table of contents numbers it."""
    found: dict[str, str] = {}
    fence: str | None = None
    for line in page.read_text(encoding="utf-8").splitlines():
        opening = _FENCE.match(line)
        if opening:
            if fence is None:
                fence = opening[1]
            elif opening[1] == fence:
                fence = None
            continue
        match = _HEADING.match(line) if fence is None else None
        if match is None:
            continue
        text = match["text"]
        custom = _CUSTOM_ID.search(text)
        if custom:
            text = text[: custom.start()]
            anchor = custom["id"]
        else:
            anchor = slugify(_plain(text))
        base, n = anchor, 0
        while anchor in found:
            n += 1
            anchor = f"{base}_{n}"
        found[anchor] = _plain(text)
    return found


def _page_path(name: str) -> Path | None:
    """The page a citation names, or None if the repository has no such page."""
    if name in ROOT_PAGES:
        return ROOT / name
    name = name.removeprefix("docs/")
    path = DOCS / name
    return path if path.is_file() and "/" not in name else None


def invariant_numbers() -> set[int]:
    return {
        int(match["number"])
        for text in headings(DESIGN).values()
        if (match := _INVARIANT_HEADING.match(text))
    }


def citation_problems(path: Path, text: str) -> list[str]:
    """Every citation of ``text`` (the contents of ``path``) that does not resolve, as
    ``file:line: why``."""
    problems: list[tuple[int, str]] = []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    def report(offset: int, why: str) -> None:
        line = text.count("\n", 0, offset) + 1
        source = text.splitlines()[line - 1].strip()
        problems.append((line, f"{where}:{line}: {why}\n    {source}"))

    for match in re.finditer("§", text):
        report(match.start(), "a § citation: cite a heading's anchor, page.md#anchor")
    invariants = invariant_numbers()
    for match in _PAGE.finditer(text):
        before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
        if before in ("'", '"') and after == before:
            continue  # a file name as a value ({"path": "README.md"}), not a citation
        name = match["page"]
        page = _page_path(name)
        if page is None:
            report(match.start(), f"{name!r} is not a page of docs/ (nor README.md, CHANGELOG.md)")
            continue
        anchors = headings(page)
        anchor, title = match["anchor"], match["title"]
        if anchor is None and title is None:
            report(match.start(), f"{name} is cited without its section (#anchor, or a heading)")
        if anchor is not None and anchor not in anchors:
            report(match.start(), f"{name} has no heading with the anchor {anchor!r}")
        if title is not None and title not in anchors.values():
            report(match.start(), f"{name} has no heading {title!r}")
    for match in _INVARIANT.finditer(text):
        for number in map(int, re.findall(r"\d+", match["numbers"])):
            if number not in invariants:
                report(match.start(), f"docs/design.md has no heading 'Invariant {number}: ...'")
    return [problem for _, problem in sorted(problems, key=lambda problem: problem[0])]


def cited_files() -> list[Path]:
    return [*sorted((ROOT / "trio_agent").rglob("*.py")), ROOT / ".ci" / "run"]


# -- the anchors are the site's --------------------------------------------------------------------


def test_slugify_makes_the_anchors_of_the_table_of_contents() -> None:
    assert slugify("The order of events") == "the-order-of-events"
    assert slugify("The Agent's rules") == "the-agents-rules"
    assert slugify("Invariant 4: Abort is prompt") == "invariant-4-abort-is-prompt"
    assert slugify("Where trio_agent differs from pi-agent-core") == (
        "where-trio_agent-differs-from-pi-agent-core"
    )
    assert slugify("Abort, steering — and follow-ups") == "abort-steering-and-follow-ups"
    assert slugify("  Café   au lait  ") == "cafe-au-lait"
    assert slugify(_plain("`Agent.prompt()` and [the loop](design.md)")) == (
        "agentprompt-and-the-loop"
    )


def test_headings_skip_code_blocks_and_number_repeated_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Errors\n\n```python\n# not a heading\n```\n\n## Errors\n\n"
        "### *Emphasis* and `code` ###\n\n## Custom {#mine}\n",
        encoding="utf-8",
    )
    assert list(headings(page)) == ["title", "errors", "errors_1", "emphasis-and-code", "mine"]


def test_the_checker_catches_each_kind_of_broken_citation() -> None:
    text = (
        '"""The loop (loop.md §4).\n'
        "See design.md#no-such-heading, and design.md#the-order-of-events.\n"
        'As docs/design.md, "No such section" and docs/design.md, "What a run owes" say.\n'
        "Invariant 99, invariants 8 and 10; linear (invariants.md 14).\n"
        'For failures, design.md; {"path": "README.md"} is a value, not a citation.\n'
        '"""\n'
    )
    problems = citation_problems(ROOT / "trio_agent" / "example.py", text)
    assert [problem.split("\n")[0] for problem in problems] == [
        "trio_agent/example.py:1: a § citation: cite a heading's anchor, page.md#anchor",
        "trio_agent/example.py:1: 'loop.md' is not a page of docs/ (nor README.md, CHANGELOG.md)",
        "trio_agent/example.py:2: design.md has no heading with the anchor 'no-such-heading'",
        "trio_agent/example.py:3: docs/design.md has no heading 'No such section'",
        "trio_agent/example.py:4: 'invariants.md' is not a page of docs/"
        " (nor README.md, CHANGELOG.md)",
        "trio_agent/example.py:4: docs/design.md has no heading 'Invariant 99: ...'",
        "trio_agent/example.py:5: design.md is cited without its section (#anchor, or a heading)",
    ]
    assert problems[0].endswith('\n    """The loop (loop.md §4).')


# -- the contract --------------------------------------------------------------------------------


def test_the_invariants_are_numbered_headings_of_the_design_page() -> None:
    numbered = [
        int(match["number"])
        for text in headings(DESIGN).values()
        if (match := _INVARIANT_HEADING.match(text))
    ]
    assert numbered == list(range(1, 16))


def test_every_citation_in_the_code_resolves() -> None:
    problems = [
        problem
        for path in cited_files()
        for problem in citation_problems(path, path.read_text(encoding="utf-8"))
    ]
    assert not problems, f"{len(problems)} citations do not resolve:\n" + "\n".join(problems)
