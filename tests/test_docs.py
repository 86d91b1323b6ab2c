"""Every Python block of the README and of docs/ runs, and shows something."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
