"""``trio-agent batch``: the items of a JSONL file through a model, results to another."""

from __future__ import annotations

import io
import json
from pathlib import Path

import trio
import trio.testing

from tests.test_cli import FakeTerminal, run_main
from trio_agent._cli import main
from trio_agent.batch import read_results


def write_items(path: Path, *lines: object) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_scripted_batch_runs_with_no_key_and_writes_every_item(tmp_path: Path) -> None:
    items = write_items(
        tmp_path / "items.jsonl",
        {"id": 1, "prompt": "hello there"},
        {"id": "b", "prompt": "what is up"},
    )
    out = tmp_path / "results.jsonl"
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", str(out)])
    assert result.code == 0, result
    assert "batch: 2 done, 0 failed; 18 tokens, $0.0000" in result.err
    assert "\r" not in result.err  # no progress line off a terminal
    results = read_results(out)
    assert sorted(results) == ["1", "b"]
    assert results["1"].messages[-1].text == "echo read 2 words: hello there"  # type: ignore[union-attr]


def test_a_rerun_needs_resume_and_then_skips_what_is_done(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", {"id": "a", "prompt": "x"})
    out = tmp_path / "results.jsonl"
    argv = ["batch", str(items), "--model", "faux:echo", "--out", str(out)]
    assert run_main(argv).code == 0
    refused = run_main(argv)
    assert refused.code == 2
    assert f"--out {str(out)!r} holds results; add --resume" in refused.err
    write_items(items, {"id": "a", "prompt": "x"}, {"id": "c", "prompt": "y"})
    again = run_main([*argv, "--resume", "--rpm", "5", "--concurrency", "2"])
    assert again.code == 0, again
    assert "1 done, 0 failed, 1 skipped (already in the file)" in again.err
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a", "c"]


def test_progress_is_drawn_on_a_terminal(tmp_path: Path) -> None:
    items = write_items(
        tmp_path / "items.jsonl", *({"id": n, "prompt": f"q {n}"} for n in range(3))
    )
    out, err = io.StringIO(), FakeTerminal()
    argv = ["batch", str(items), "--model", "faux:echo", "--out", str(tmp_path / "r.jsonl")]
    clock = trio.testing.MockClock(autojump_threshold=0)
    assert main(argv, stdout=out, stderr=err, clock=clock) == 0
    shown = err.getvalue()
    assert "\r\x1b[K3/3 (3 done, 0 running, 0 failed) 24 tokens $0.0000" in shown
    assert "batch: 3 done" in shown


def test_a_failed_item_is_exit_code_1(tmp_path: Path) -> None:
    finished = [
        {"role": "user", "content": "hi", "timestamp": 1},
        {
            "role": "assistant",
            "content": [],
            "api": "faux",
            "provider": "faux",
            "model": "m",
            "usage": {},
            "stopReason": "stop",
            "timestamp": 2,
        },
    ]
    items = write_items(
        tmp_path / "items.jsonl", {"id": "ok", "prompt": "x"}, {"id": "bad", "messages": finished}
    )
    out = tmp_path / "results.jsonl"
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", str(out)])
    assert result.code == 1, result
    assert "1 done, 1 failed (1 exception)" in result.err
    error = read_results(out)["bad"].error
    assert error == "ValueError: Cannot continue from message role: assistant"


def test_an_item_that_is_not_one_is_a_usage_error_naming_its_line(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text('{"id": "a", "prompt": "x"}\n{"id": "b"}\n')
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", "r.jsonl"])
    assert result.code == 2
    assert f"{str(items)!r}, line 2: BatchItem 'b' needs a prompt or a transcript" in result.err
    items.write_text("[1, 2]\n")
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", "r.jsonl"])
    assert result.code == 2
    assert "line 1 must be a JSON object" in result.err


def test_a_repeated_id_and_a_bad_results_line_are_usage_errors(tmp_path: Path) -> None:
    """``1`` and ``"1"`` are one id (ids are read as strings): the second is named with its
    line; a results file to resume whose line is not a result is named before anything
    runs."""
    items = write_items(
        tmp_path / "items.jsonl", {"id": 1, "prompt": "x"}, {"id": "1", "prompt": "y"}
    )
    out = tmp_path / "r.jsonl"
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", str(out)])
    assert result.code == 2, result
    assert f"{str(items)!r}, line 2: id '1' is the id of line 1 too" in result.err
    items = write_items(tmp_path / "items.jsonl", {"id": "a", "prompt": "x"})
    out.write_text('{"id": "a"}\n')
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", str(out), "--resume"])
    assert result.code == 2, result
    assert "--out: " in result.err
    assert "Traceback" not in result.err
