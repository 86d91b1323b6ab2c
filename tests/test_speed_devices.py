"""Every speed device in the package carries its figure (docs/speed.md).

A speed device is code written a less plain way only to be faster: a class given
``fast_init``, an object built by a ``maker``, a cancel probe reading Trio's internal
state, a step written out inline on a hot path. Each keeps its place only with a
comment naming the benchmark and the share of its instructions it saves, measured
with callgrind: ``# B3: saves 8.0% of instructions (callgrind)``. The comment is on
the device's line or above it, in the same block of lines (no blank line between).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trio_agent

PACKAGE = Path(trio_agent.__file__).parent

FIGURE = re.compile(r"#.*\bB\d+: saves \d+(\.\d)?% of instructions \(callgrind\)")

# What marks a device in the source, and what it is.
DEVICES = {
    re.compile(r"^\s*@fast_init\b"): "a class given fast_init",
    re.compile(r"\bmaker\((?:[A-Z]\w*\)|$)"): "an object built by a maker",
    re.compile(r"^def (cancel_probe|children_probe)\("): "a cancel probe",
    re.compile(r"# \w+\(\), inline\b"): "a step written out inline",
}

# Where fast_init and maker are defined (its docs show a maker), not used.
DEFINITIONS = {"_frozen.py"}


def sources() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if path.name not in DEFINITIONS)


def has_figure(lines: list[str], index: int) -> bool:
    """Whether line ``index`` or a line above it in its block carries a figure."""
    while index >= 0 and lines[index].strip():
        if FIGURE.search(lines[index]):
            return True
        index -= 1
    return False


def devices_without_figures(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    missing = []
    for index, line in enumerate(lines):
        for pattern, what in DEVICES.items():
            if pattern.search(line) and not has_figure(lines, index):
                missing.append(f"{path.relative_to(PACKAGE)}:{index + 1}: {what}: {line.strip()}")
    return missing


def test_the_devices_are_found() -> None:
    found = {
        what
        for path in sources()
        for line in path.read_text(encoding="utf-8").splitlines()
        for pattern, what in DEVICES.items()
        if pattern.search(line)
    }
    assert found == set(DEVICES.values())


@pytest.mark.parametrize("path", sources(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_every_speed_device_names_its_figure(path: Path) -> None:
    assert devices_without_figures(path) == []


def test_a_device_without_its_figure_is_caught(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "# B2: saves 3.1% of instructions (callgrind)\n"
        "_made = maker(Made)\n"
        "\n"
        "_other = maker(Other)\n"
        "@fast_init  # B1: saves 1% of instructions\n",
        encoding="utf-8",
    )
    lines = source.read_text(encoding="utf-8").splitlines()
    assert has_figure(lines, 1)
    assert not has_figure(lines, 3)  # the blank line ends the block
    assert not has_figure(lines, 4)  # a figure says how it was measured
