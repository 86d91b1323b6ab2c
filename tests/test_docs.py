"""The documentation is checked: every Python block of the README and of docs/ runs and
prints what its ``output`` block says, the example tests pass, and docs/api.md has an
entry, with the right signature, for every public name."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

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


def test_every_page_has_examples() -> None:
    pages = {param.values[0] for param in BLOCKS}
    assert pages == set(PAGES)


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
_HEADING = re.compile(r"^#{1,6} +(?P<title>.+?) *$", re.MULTILINE)


def _prose(text: str) -> str:
    """The text without its fenced blocks and code spans."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _anchor(title: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc slugify): the text as it
    renders, lowercased, punctuation dropped, spaces to hyphens."""
    ascii_text = unicodedata.normalize("NFKD", title.replace("`", "")).encode("ascii", "ignore")
    text = re.sub(r"[^\w\s-]", "", ascii_text.decode("ascii")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    return {
        _anchor(match["title"])
        for match in _HEADING.finditer(_FENCE.sub("", page.read_text(encoding="utf-8")))
    }


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
        elif anchor and (resolved.suffix != ".md" or anchor not in _anchors(resolved)):
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


# --- docs/api.md -------------------------------------------------------------------------------
#
# The reference is written by hand and checked here. It has one section per module, headed
# "## `module`"; in it, an *entry* is a heading (### to ######) or a table row that starts with
# a code span: `Name`, `Name = ...`, or a signature `Name(params)`, `async name(params)`,
# `async with name(params)`, where Name may be dotted (`Agent.prompt`, `faux.model`) and is
# looked up in the section's module. The providers' modules are documented in the section of
# trio_agent.providers, their names written `faux.model`.

API_PAGE = ROOT / "docs" / "api.md"
PROVIDER_MODULES = ("faux", "openai_chat", "openai_responses", "anthropic", "google")
_SECTION = re.compile(r"^## `(?P<module>[\w.]+)`", re.MULTILINE)
_ENTRY = re.compile(r"^(?:#{3,6} +|\| *)`(?P<code>[^`]+)`", re.MULTILINE)
_SIGNATURE = re.compile(
    r"(?P<prefix>async with |async )?(?P<name>[A-Za-z_][\w.]*)(?P<call>\((?P<params>.*)\))?"
)


def _required_names() -> dict[str, set[str]]:
    """For each module the page documents, the names its section must have."""
    required: dict[str, set[str]] = {}
    for name in (
        "trio_agent",
        "trio_agent.providers",
        "trio_agent.testing",
        "trio_agent.testing.strategies",
        "trio_agent.testing.pytest_plugin",
        "trio_agent.batch",
        "trio_agent.ray",
    ):
        required[name] = set(importlib.import_module(name).__all__)
    for module in PROVIDER_MODULES:
        names = importlib.import_module(f"trio_agent.providers.{module}").__all__
        required["trio_agent.providers"] |= {f"{module}.{name}" for name in names}
    return required


def _entries() -> list[tuple[str, str]]:
    """(module, code span) of every entry of docs/api.md, in order."""
    text = API_PAGE.read_text(encoding="utf-8")
    sections = list(_SECTION.finditer(text))
    entries: list[tuple[str, str]] = []
    for number, section in enumerate(sections):
        end = sections[number + 1].start() if number + 1 < len(sections) else len(text)
        body = text[section.end() : end]
        entries += [(section["module"], entry["code"]) for entry in _ENTRY.finditer(body)]
    return entries


def _resolve(module: str, dotted: str) -> Any:
    value: Any = importlib.import_module(module)
    for part in dotted.split("."):
        if isinstance(value, ModuleType) and not hasattr(value, part):
            value = importlib.import_module(f"{value.__name__}.{part}")
        else:
            value = getattr(value, part)
    return value


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
def test_api_reference_has_every_public_name() -> None:
    documented: dict[str, set[str]] = {}
    for module, code in _entries():
        match = _SIGNATURE.match(code)
        assert match is not None, f"docs/api.md: cannot read the entry `{code}`"
        documented.setdefault(module, set()).add(match["name"])
    missing = {
        module: sorted(names - documented.get(module, set()))
        for module, names in _required_names().items()
        if names - documented.get(module, set())
    }
    assert missing == {}, f"docs/api.md has no entry for these public names: {missing}"


def _documented_parameters(params: str) -> list[inspect.Parameter]:
    """The parameters of a signature as the page writes it (defaults: literals, or Ellipsis
    for an expression the test does not evaluate)."""
    function = ast.parse(f"def _({params}): pass").body[0]
    assert isinstance(function, ast.FunctionDef)
    arguments = function.args

    def default(node: ast.expr | None) -> Any:
        if node is None:
            return inspect.Parameter.empty
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError):
            return ...

    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += arguments.defaults
    result = []
    for index, (argument, value) in enumerate(zip(positional, defaults, strict=True)):
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if index < len(arguments.posonlyargs)
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        result.append(inspect.Parameter(argument.arg, kind, default=default(value)))
    if arguments.vararg is not None:
        result.append(inspect.Parameter(arguments.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for argument, value in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        result.append(
            inspect.Parameter(argument.arg, inspect.Parameter.KEYWORD_ONLY, default=default(value))
        )
    if arguments.kwarg is not None:
        result.append(inspect.Parameter(arguments.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return result


def _problems(module: str, code: str) -> list[str]:
    match = _SIGNATURE.match(code)
    assert match is not None
    name = match["name"]
    try:
        value = _resolve(module, name)
    except (AttributeError, ImportError):
        return [f"`{code}`: {module} has no {name}"]
    problems = []
    prefix = match["prefix"] or ""
    is_async = inspect.iscoroutinefunction(value)
    is_async_with = (  # an @asynccontextmanager function
        inspect.isfunction(value)
        and inspect.unwrap(value) is not value
        and inspect.isasyncgenfunction(inspect.unwrap(value))
    )
    if (prefix == "async ") != is_async or (prefix == "async with ") != is_async_with:
        kind = "async" if is_async else "async with" if is_async_with else "no prefix"
        problems.append(f"`{code}`: written with {prefix.strip() or 'no prefix'}, is {kind}")
    if match["call"] is None:
        return problems
    actual_parameters = list(inspect.signature(value).parameters.values())
    if actual_parameters and actual_parameters[0].name == "self" and "." in name:
        actual_parameters = actual_parameters[1:]  # a method, looked up on its class
    written_parameters = _documented_parameters(match["params"])
    if [(p.name, p.kind) for p in written_parameters] != [
        (p.name, p.kind) for p in actual_parameters
    ]:
        problems.append(f"`{code}`: the parameters are {inspect.signature(value)}")
        return problems
    for written, actual in zip(written_parameters, actual_parameters, strict=True):
        has_default = actual.default is not inspect.Parameter.empty
        if (written.default is not inspect.Parameter.empty) != has_default:
            problems.append(f"`{code}`: {actual.name} is {actual}")
        elif (
            written.default is not ...
            and actual.default is not attrs.NOTHING  # an attrs factory: any value is fine
            and has_default
            and written.default != actual.default
        ):
            problems.append(f"`{code}`: {actual.name} defaults to {actual.default!r}")
    return problems


@pytest.mark.usefixtures("forget_the_plugin")
def test_api_reference_entries_match_the_code() -> None:
    problems = [problem for module, code in _entries() for problem in _problems(module, code)]
    assert problems == [], "docs/api.md disagrees with the code:\n" + "\n".join(problems)
