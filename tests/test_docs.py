"""Every Python block of the README and of docs/ runs, and so do the example tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [
    pytest.param(page, index, block, id=f"{page.relative_to(ROOT)}#{index}")
    for page in PAGES
    for index, block in enumerate(
        re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    )
]


def test_every_page_has_examples() -> None:
    pages = {param.values[0] for param in BLOCKS}
    assert pages == set(PAGES)


@pytest.mark.parametrize(("page", "index", "block"), BLOCKS)
def test_example_runs(
    page: Path, index: int, block: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = compile(block, f"{page.name} block {index}", "exec")
    exec(code, {"__name__": "__docs__"})
    assert capsys.readouterr().out  # every example shows something


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
