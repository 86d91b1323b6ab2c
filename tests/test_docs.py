"""The documentation is checked: every Python block of the README and of docs/ runs and
prints what its ``output`` block says, the example tests pass, and the site built from docs/
(mkdocs.yml) has every page in its navigation and renders every public name's docstring once."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.test_citations import headings

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "reference").glob("*.md")),
]

# A ```python block, and the ```output block that follows it (blank lines between allowed):
# what the block must print.
_BLOCK = re.compile(
    r"^```python\n(?P<code>.*?)^```[ \t]*$(?:\s*?^```output\n(?P<output>.*?)^```[ \t]*$)?",
    re.DOTALL | re.MULTILINE,
)
_OUTPUT_FENCE = re.compile(r"^```output$", re.MULTILINE)


def _blocks(page: Path) -> list[tuple[str, str | None]]:
    text = page.read_text(encoding="utf-8")
    return [(match["code"], match["output"]) for match in _BLOCK.finditer(text)]


BLOCKS = [
    pytest.param(
        page,
        index,
        code,
        output,
        id=f"{page.relative_to(ROOT)}#{index}",
        # an example that starts a Ray runtime runs with the Ray suite (pytest -m ray)
        marks=[pytest.mark.ray] if "ray.init(" in code else [],
    )
    for page in PAGES
    for index, (code, output) in enumerate(_blocks(page))
]


def _lines(text: str) -> list[str]:
    """The text's lines without trailing whitespace, and without trailing blank lines."""
    return [line.rstrip() for line in text.rstrip().splitlines()]


def _needs_examples(page: Path) -> bool:
    """Every page shows its topic at work, except the reference pages (rendered from the
    docstrings, with an example only where one helps) and a page that is only its title."""
    text = page.read_text(encoding="utf-8").strip()
    return page.parent.name != "reference" and "\n" in text


def test_every_page_has_examples() -> None:
    pages = {param.values[0] for param in BLOCKS}
    assert {page for page in PAGES if _needs_examples(page)} <= pages


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_output_block_follows_a_python_block(page: Path) -> None:
    fences = len(_OUTPUT_FENCE.findall(page.read_text(encoding="utf-8")))
    checked = sum(output is not None for _, output in _blocks(page))
    assert fences == checked, "an ```output block must come right after a ```python block"


README_MAX_LINES = 250


def test_the_readme_is_read_in_five_minutes() -> None:
    """The README is a front page that points onward, not a second guide."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, more than {README_MAX_LINES}"


# A link of Markdown, [text](target), outside code; a target is a path, an anchor, or both.
_LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```[ \t]*$", re.DOTALL | re.MULTILINE)
_CODE_SPAN = re.compile(r"`[^`]*`")


def _prose(text: str) -> str:
    """The text without its fenced blocks and code spans."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_link_reaches_its_page_and_heading(page: Path) -> None:
    """A link between pages names a file that exists and, after ``#``, one of its headings;
    a page of docs/ links only within docs/ (the site is built from docs/ alone, so a link
    out of it is broken there: a file of the repository is named as code instead)."""
    docs = ROOT / "docs"
    problems = []
    for match in _LINK.finditer(_prose(page.read_text(encoding="utf-8"))):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: another site
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if page.is_relative_to(docs) and not resolved.is_relative_to(docs):
            problems.append(f"{target}: leaves docs/")
        elif resolved.is_relative_to(docs / "reference"):
            continue  # the API reference: mkdocs build --strict checks those links
        elif not resolved.is_file():
            problems.append(f"{target}: no such file")
        elif anchor and (resolved.suffix != ".md" or anchor not in headings(resolved)):
            problems.append(f"{target}: no heading with that anchor")
    assert problems == [], f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize(("page", "index", "block", "output"), BLOCKS)
def test_example_runs(
    page: Path, index: int, block: str, output: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = compile(block, f"{page.name} block {index}", "exec")
    exec(code, {"__name__": "__docs__"})
    printed = capsys.readouterr().out
    assert printed  # every example shows something
    if output is not None:
        assert _lines(output) == _lines(printed)


EXAMPLES = sorted((ROOT / "docs" / "examples").glob("test_*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_test_file_passes_as_a_user_would_run_it(
    example: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeini("[pytest]\ntrio_mode = true\nfilterwarnings = error\n")
    pytester.makeconftest('pytest_plugins = ["trio_agent.testing.pytest_plugin"]\n')
    pytester.makepyfile(**{example.stem: example.read_text(encoding="utf-8")})
    result = pytester.runpytest_subprocess()
    tests = example.read_text(encoding="utf-8").count("\ndef test_") + example.read_text(
        encoding="utf-8"
    ).count("\nasync def test_")
    result.assert_outcomes(passed=tests)


# --- the site and its API reference -----------------------------------------------------------
#
# The reference is generated from the docstrings by mkdocstrings: docs/reference/*.md are made of
# `::: dotted.path` directives. A module's directive renders the module's docstring and, unless
# its options say `members: false`, every name of its __all__.

MKDOCS = ROOT / "mkdocs.yml"
REFERENCE = ROOT / "docs" / "reference"
PUBLIC_MODULES = (
    "trio_agent",
    "trio_agent.models",
    "trio_agent.providers",
    "trio_agent.providers.faux",
    "trio_agent.providers.openai_chat",
    "trio_agent.providers.openai_responses",
    "trio_agent.providers.anthropic",
    "trio_agent.providers.google",
    "trio_agent.testing",
    "trio_agent.testing.strategies",
    "trio_agent.testing.pytest_plugin",
    "trio_agent.batch",
    "trio_agent.ray",
    "trio_agent.mcp",
    "trio_agent.otel",
)
_DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)\n(?P<options>(?:[ \t]+\S.*\n)*)", re.MULTILINE)


def _public_names() -> list[tuple[str, str]]:
    """(module, name) of every name of every public module's __all__."""
    return [
        (module, name)
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
    ]


def _object(path: str) -> Any:
    """What a dotted path names: a module, or an attribute of the longest module prefix."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            value = getattr(value, part)
        return value
    raise ImportError(path)


def _key(module: str, name: str) -> object:
    """What a public name stands for, so that a thing re-exported under several names is
    documented once: a name assigned at a module's top level with a docstring (a type alias, a
    constant) is the assignment; another name is the object it names (a class, a function, a
    module), or, for a plain value, its dotted path (two equal constants are two names)."""
    assigned = _assignment(module, name)
    if assigned is not None:
        return assigned
    value = _object(f"{module}.{name}")
    if isinstance(value, str | int | float | bool | tuple | frozenset) or value is None:
        return f"{module}.{name}"
    return id(value)


def _documented() -> dict[object, list[str]]:
    """For each thing the reference pages render, the directives that render it."""
    rendered: dict[object, list[str]] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for directive in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            path = directive["path"]
            where = f"{page.name}: ::: {path}"
            module, _, name = path.rpartition(".")
            rendered.setdefault(_key(module, name), []).append(where)
            value = _object(path)
            if isinstance(value, ModuleType) and "members: false" not in directive["options"]:
                for member in value.__all__:
                    rendered.setdefault(_key(path, member), []).append(where)
    return rendered


@pytest.fixture
def forget_the_plugin() -> Iterator[None]:
    """Unimport trio_agent.testing.pytest_plugin after the test, if the test imported it.

    A plugin module left in ``sys.modules`` cannot be assertion-rewritten when a later
    in-process pytester run loads it: pytest warns (an error under ``filterwarnings =
    error``) and the plugin's own tests fail. pytester restores ``sys.modules`` the same way.
    """
    name = "trio_agent.testing.pytest_plugin"
    imported = name in sys.modules
    yield
    if not imported and name in sys.modules:
        del sys.modules[name]
        testing = sys.modules["trio_agent.testing"]
        if hasattr(testing, "pytest_plugin"):
            delattr(testing, "pytest_plugin")


@pytest.mark.usefixtures("forget_the_plugin")
def test_the_reference_renders_every_public_name_once() -> None:
    rendered = _documented()
    counts = {
        f"{module}.{name}": rendered.get(_key(module, name), []) for module, name in _public_names()
    }
    missing = sorted(path for path, where in counts.items() if not where)
    twice = {path: where for path, where in counts.items() if len(where) > 1}
    assert missing == [], f"docs/reference/ renders none of these public names: {missing}"
    assert twice == {}, f"docs/reference/ renders these public names more than once: {twice}"


# A private module's directive renders its docstring alone, as the introduction of a page or a
# section: the docstring that says how the public names it defines work together.
_INTRODUCTION = "    options:\n      members: false\n      show_root_heading: false\n"


@pytest.mark.usefixtures("forget_the_plugin")
def test_every_directive_of_the_reference_names_something_public() -> None:
    public = {_key(module, name) for module, name in _public_names()}
    public |= {id(importlib.import_module(module)) for module in PUBLIC_MODULES}
    for page in sorted(REFERENCE.glob("*.md")):
        for directive in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            path = directive["path"]
            if path.rpartition(".")[2].startswith("_"):
                assert isinstance(_object(path), ModuleType), f"{page.name}: ::: {path}"
                assert directive["options"] == _INTRODUCTION, f"{page.name}: ::: {path}"
                continue
            module, _, name = path.rpartition(".")
            assert _key(module, name) in public, f"{page.name}: ::: {path}"


@functools.cache
def _attribute_docstrings(module: str) -> dict[str, str]:
    """The names a module assigns at its top level that a string literal follows (the
    attribute docstrings mkdocstrings renders), and where the module imports a name from."""
    path = importlib.import_module(module).__file__
    assert path is not None
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for statement, after in zip(tree.body, [*tree.body[1:], None], strict=True):
        if isinstance(statement, ast.ImportFrom) and statement.level > 0:
            package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
            for _ in range(statement.level - 1):
                package = package.rpartition(".")[0]
            source = f"{package}.{statement.module}" if statement.module else package
            for alias in statement.names:
                found.setdefault(alias.asname or alias.name, f"from {source}:{alias.name}")
            continue
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        docstring = (
            after.value.value
            if isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
            else ""
        )
        for target in targets:
            if isinstance(target, ast.Name) and docstring.strip():
                found[target.id] = docstring
    return found


def _assignment(module: str, name: str) -> str | None:
    """Where a name is assigned with a docstring (``module.name``, after following the imports
    that re-export it), or None if it is not."""
    for _ in range(5):
        found = _attribute_docstrings(module).get(name)
        if found is None:
            return None
        if not found.startswith("from "):
            return f"{module}.{name}"
        module, _, name = found[len("from ") :].rpartition(":")
    return None


def _docstring(module: str, name: str) -> str | None:
    """The docstring mkdocstrings renders for a public name: its own ``__doc__`` for a class,
    function or module (not one it inherits), else the string that follows its assignment."""
    assigned = _assignment(module, name)
    if assigned is not None:
        module, _, name = assigned.rpartition(".")
        return _attribute_docstrings(module)[name]
    value = _object(f"{module}.{name}")
    if isinstance(value, ModuleType) or inspect.isroutine(value):
        return value.__doc__
    if inspect.isclass(value):
        return value.__dict__.get("__doc__")
    return None


@pytest.mark.usefixtures("forget_the_plugin")
def test_every_public_name_has_a_docstring_of_its_own() -> None:
    bare = [
        f"{module}.{name}"
        for module, name in _public_names()
        if not (_docstring(module, name) or "").strip()
    ]
    assert bare == [], f"these public names have no docstring: {bare}"


def _nav_pages() -> list[str]:
    """The pages of mkdocs.yml's nav (every `.md` path in the nav section), in order."""
    text = MKDOCS.read_text(encoding="utf-8")
    nav = text[text.index("\nnav:\n") :]
    return re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", nav, re.MULTILINE)


def test_every_page_of_the_nav_exists() -> None:
    pages = _nav_pages()
    assert "index.md" in pages
    assert "reference/index.md" in pages
    assert [page for page in pages if not (ROOT / "docs" / page).is_file()] == []
    assert len(pages) == len(set(pages)), "a page is twice in the nav"


def test_every_page_of_the_docs_is_in_the_nav() -> None:
    pages = {str(path.relative_to(ROOT / "docs")) for path in (ROOT / "docs").rglob("*.md")}
    assert sorted(pages - set(_nav_pages())) == []


def test_the_site_has_no_hand_written_reference() -> None:
    assert not (ROOT / "docs" / "api.md").exists()
    for page in PAGES:
        assert "api.md" not in page.read_text(encoding="utf-8"), page


def test_no_docstring_holds_a_table_the_reference_cannot_draw() -> None:
    """A reST table (``====  ====`` lines) renders on the site as one paragraph with the
    rules in it: the docstrings use lists instead."""
    rule = re.compile(r"^[ \t]*={3,}(?:[ \t]{2,}={3,})+[ \t]*$", re.MULTILINE)
    tables = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "trio_agent").rglob("*.py"))
        if rule.search(path.read_text(encoding="utf-8"))
    ]
    assert tables == []
