"""``--trace``: the spans of each run as a tree on stderr (the demo: no network)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.test_cli import project, run_main
from trio_agent._cli import _parser


def test_the_demo_prints_its_span_tree(tmp_path: Path) -> None:
    result = run_main(["demo", str(project(tmp_path)), "--trace"], autojump=0.01)
    assert result.code == 0, result
    lines = [
        line
        for line in result.err.splitlines()
        if re.match(r" *(invoke_agent|turn|chat |execute_tool )", line)
    ]
    shape = [re.sub(r"(\S)  .*", r"\1", line) for line in lines]
    assert shape == [
        "invoke_agent",
        "  turn",
        "    chat faux",
        "    execute_tool list_files",
        "  turn",
        "    chat faux",
        "    execute_tool read_file",
        "    execute_tool read_file",
        "    execute_tool read_file",
        "  turn",
        "    chat faux",
    ]
    lines = [line for line in lines if not line.lstrip().startswith("turn")]
    assert re.fullmatch(r"invoke_agent  \d+\.\d ms  request\.model=faux", lines[0])
    assert "response.finish_reasons=toolUse" in lines[1]
    assert "response.finish_reasons=stop" in lines[-1]
    assert re.search(r"tool\.call\.id=\S+", lines[2])
    assert "invoke_agent" not in result.out  # stderr only


def test_without_trace_no_tree(tmp_path: Path) -> None:
    result = run_main(["demo", str(project(tmp_path))], autojump=0.01)
    assert result.code == 0, result
    assert "invoke_agent" not in result.err


def test_without_the_sdk_trace_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    result = run_main(["demo", str(project(tmp_path)), "--trace"], autojump=0.01)
    assert result.code == 2, result
    assert result.err.strip().splitlines() == [
        "error: --trace needs the OpenTelemetry SDK: pip install opentelemetry-sdk"
    ]
    assert result.out == ""


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"], ["demo"]])
def test_run_chat_and_demo_take_trace(command: list[str]) -> None:
    assert _parser().parse_args([*command, "--trace"]).trace is True
