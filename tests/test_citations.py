"""Every citation in the code points at a section of the documentation that exists.

The code cites the contract it keeps: ``design.md#the-order-of-events``,
``design.md#invariant-10-well-formed-events``, "invariant 8", or a page and a
section title in quotes (``docs/design.md, "What a run owes"``). Each citation
in ``trio_agent/``, ``.ci/run``, the tests (``tests/``, with the conformance
recorder and its pages), ``benchmarks/`` and ``scripts/`` is checked here: the page is a
Markdown file of the citing file's own folder (the conformance harness cites
``FORMAT.md``, beside it), one of ``docs/``, the README or the changelog, or a
Markdown file named by its path from the repository's root
(``tests/conformance/FORMAT.md``); the citation names a section of it, by the
anchor of one of its headings (as the site's table of contents makes it) or by
one of its headings in quotes; and "invariant N" has its heading in
``docs/design.md``. No ``§``: the site numbers only the invariants; a ``§``
right after ``RFC NNNN`` cites a section of that RFC, which is not a page of
the repository. The tests, benchmarks and scripts may also name a page whole
(a test that checks a page, a benchmark that points at its figures), and the
name of a Markdown file a test writes (``alpha.md``) is that file, not a page.
This file is not checked: its samples are broken on purpose.
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
# "RFC 9113 §4.1": a section of an RFC, not of a page.
_RFC_BEFORE = re.compile(r"\bRFC[ \t]?\d+[ \t]*$")


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


def _page_path(name: str, citing: Path) -> Path | None:
    """The page a citation in the file ``citing`` names, or None if the repository has no
    such page: a Markdown file of the citing file's own folder first, then the README or the
    changelog, a page of ``docs/``, or a file named by its path from the repository's root."""
    if "/" not in name and (beside := citing.parent / name).is_file():
        return beside
    if name in ROOT_PAGES:
        return ROOT / name
    if (
        "/" not in name.removeprefix("docs/")
        and (path := DOCS / name.removeprefix("docs/")).is_file()
    ):
        return path
    if "/" in name and (path := ROOT / name).is_file():
        return path
    return None


def invariant_numbers() -> set[int]:
    return {
        int(match["number"])
        for text in headings(DESIGN).values()
        if (match := _INVARIANT_HEADING.match(text))
    }


def citation_problems(path: Path, text: str, samples: frozenset[str] = frozenset()) -> list[str]:
    """Every citation of ``text`` (the contents of ``path``) that does not resolve, as
    ``file:line: why``. The package and CI cite a page's section; the tests, benchmarks and
    scripts may also name a page whole (a test that checks a page, a benchmark's figures).
    ``samples`` are the names of files the tests write (``alpha.md``), not citations."""
    problems: list[tuple[int, str]] = []
    sections_required = any(path.is_relative_to(ROOT / top) for top in ("trio_agent", ".ci"))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    folder = where.parent.as_posix()

    def report(offset: int, why: str) -> None:
        line = text.count("\n", 0, offset) + 1
        source = text.splitlines()[line - 1].strip()
        problems.append((line, f"{where}:{line}: {why}\n    {source}"))

    for match in re.finditer("§", text):
        if _RFC_BEFORE.search(text, max(0, match.start() - 20), match.start()):
            continue
        report(match.start(), "a § citation: cite a heading's anchor, page.md#anchor")
    invariants = invariant_numbers()
    for match in _PAGE.finditer(text):
        before, after = text[match.start() - 1 : match.start()], text[match.end() : match.end() + 1]
        if before in ("'", '"') and after == before:
            continue  # a file name as a value ({"path": "README.md"}), not a citation
        name = match["page"]
        page = _page_path(name, path)
        if page is None and name in samples:
            continue
        if page is None:
            report(
                match.start(),
                f"{name!r} is not a page of docs/, {folder}/, the README or the changelog",
            )
            continue
        anchors = headings(page)
        anchor, title = match["anchor"], match["title"]
        if anchor is None and title is None and sections_required:
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
    """The files whose citations are checked: the code, CI, the tests (with the conformance
    recorder and pages), the benchmarks and the scripts; not this file, whose samples are broken on
    purpose."""
    found = [
        *sorted((ROOT / "trio_agent").rglob("*.py")),
        ROOT / ".ci" / "run",
        *sorted((ROOT / "tests").rglob("*.py")),
        *sorted((ROOT / "tests" / "conformance" / "recorder").glob("*.mjs")),
        *sorted((ROOT / "tests" / "conformance").glob("*.md")),
        *sorted((ROOT / "benchmarks").rglob("*.py")),
        *sorted((ROOT / "benchmarks").rglob("*.mjs")),
        *sorted((ROOT / "scripts").rglob("*.py")),
    ]
    return [path for path in found if path != Path(__file__).resolve()]


def sample_names() -> frozenset[str]:
    """The Markdown files the tests write (``(root / "alpha.md").write_text(...)``): their
    names in the tests' texts are those files, not pages."""
    quoted = re.compile(r"""/\s*(["'])([\w-]+\.md)\1\)\.(?:write_text|write_bytes|touch)\(""")
    return frozenset(
        match[2]
        for path in cited_files()
        if path.is_relative_to(ROOT / "tests")
        for match in quoted.finditer(path.read_text(encoding="utf-8"))
    )


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
        "trio_agent/example.py:1: 'loop.md' is not a page of docs/, trio_agent/, the README"
        " or the changelog",
        "trio_agent/example.py:2: design.md has no heading with the anchor 'no-such-heading'",
        "trio_agent/example.py:3: docs/design.md has no heading 'No such section'",
        "trio_agent/example.py:4: 'invariants.md' is not a page of docs/, trio_agent/, the"
        " README or the changelog",
        "trio_agent/example.py:4: docs/design.md has no heading 'Invariant 99: ...'",
        "trio_agent/example.py:5: design.md is cited without its section (#anchor, or a heading)",
    ]
    assert problems[0].endswith('\n    """The loop (loop.md §4).')


def test_the_tests_cite_pages_beside_them_and_sections_of_rfcs() -> None:
    conformance = ROOT / "tests" / "conformance"
    text = (
        "# The scenario file (FORMAT.md#the-scenario-file); see FORMAT.md#no-such-part.\n"
        "# Normalization: tests/conformance/FORMAT.md#normalization, and FORMAT.md, the page.\n"
        "# One HTTP/2 frame (RFC 9113 §4.1); but not (loop.md §4).\n"
        "# The checks of docs/security.md, and docs/design.md#no-such-heading.\n"
        '# A file the test makes: alpha.md; not a page: beta.md. {"path": "gamma.md"}\n'
    )
    problems = citation_problems(conformance / "runner.py", text, frozenset({"alpha.md"}))
    assert [problem.split("\n")[0] for problem in problems] == [
        "tests/conformance/runner.py:1: FORMAT.md has no heading with the anchor 'no-such-part'",
        "tests/conformance/runner.py:3: a § citation: cite a heading's anchor, page.md#anchor",
        "tests/conformance/runner.py:3: 'loop.md' is not a page of docs/, tests/conformance/,"
        " the README or the changelog",
        "tests/conformance/runner.py:4: docs/design.md has no heading with the anchor"
        " 'no-such-heading'",
        "tests/conformance/runner.py:5: 'beta.md' is not a page of docs/, tests/conformance/,"
        " the README or the changelog",
    ]
    # Beside the recorder there is no FORMAT.md: it names the page by its path.
    recorder = conformance / "recorder" / "record.mjs"
    assert citation_problems(recorder, "// tests/conformance/FORMAT.md#normalization\n") == []
    assert [
        problem.split("\n")[0] for problem in citation_problems(recorder, "// FORMAT.md\n")
    ] == [
        "tests/conformance/recorder/record.mjs:1: 'FORMAT.md' is not a page of docs/,"
        " tests/conformance/recorder/, the README or the changelog"
    ]


def test_every_file_with_citations_is_checked_but_this_one() -> None:
    files = {path.relative_to(ROOT).as_posix() for path in cited_files()}
    assert {
        "trio_agent/_loop.py",
        ".ci/run",
        "tests/_h2_server.py",
        "tests/conformance/runner.py",
        "tests/conformance/recorder/record.mjs",
        "tests/conformance/README.md",
        "benchmarks/callgrind.py",
        "scripts/update_models.py",
    } <= files
    assert "tests/test_citations.py" not in files
    # A file a test writes is not a page; a page a test checks is gone stays a citation.
    assert "alpha.md" in sample_names()
    assert "api.md" not in sample_names()


# -- the contract --------------------------------------------------------------------------------


def test_the_invariants_are_numbered_headings_of_the_design_page() -> None:
    numbered = [
        int(match["number"])
        for text in headings(DESIGN).values()
        if (match := _INVARIANT_HEADING.match(text))
    ]
    assert numbered == list(range(1, 16))


def test_every_citation_in_the_code_resolves() -> None:
    samples = sample_names()
    problems = [
        problem
        for path in cited_files()
        for problem in citation_problems(path, path.read_text(encoding="utf-8"), samples)
    ]
    assert not problems, f"{len(problems)} citations do not resolve:\n" + "\n".join(problems)
