"""``trio-agent batch``: the items of a JSONL file through a model, results to another."""

from __future__ import annotations

import functools
import io
import json
import math
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests._providers import fixture
from tests.test_cli import FakeTerminal, keyed, model_options, run_main
from tests.test_cli_pty import CTRL_C, on_a_terminal
from tests.test_provider_matrix import APIS, event_end
from trio_agent import Agent, AssistantMessage, Cost, Usage
from trio_agent._cli import main
from trio_agent._cli._bar import clock_time, rate, stats
from trio_agent._cli._batch import Tally, run_items
from trio_agent.batch import BatchItem, BatchResult, read_results
from trio_agent.providers import faux
from trio_agent.testing import ScriptedResponse, open_sse_server


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


CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""A terminal's control sequence: colour, a cursor moved or hidden, a line erased."""

ITEMS = [{"id": n, "prompt": f"q {n}"} for n in range(3)]
FINISHED = [  # a transcript that ends on a reply: nothing to continue, the item fails
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


def without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make rich impossible to import (as when the ``progress`` extra is not installed)."""
    for name in [name for name in sys.modules if name == "rich" or name.startswith("rich.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.delitem(sys.modules, "trio_agent._cli._bar", raising=False)


RICH_SETTINGS = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
"""Variables with which a user tells rich what the terminal can do."""


def on_a_wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's reading of the environment, fixed: a terminal that redraws in place (not
    ``TERM=dumb``), 160 columns wide (the figures on one line)."""
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "160")
    for name in RICH_SETTINGS:
        monkeypatch.delenv(name, raising=False)


def last_frame(shown: str) -> list[str]:
    """The lines of the last thing drawn in place on a terminal, and what follows it."""
    return CSI.sub("", shown).rsplit("\r", 1)[-1].splitlines()


def test_the_bar_is_drawn_with_rich_on_a_terminal_and_ends_on_the_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_a_wide_terminal(monkeypatch)
    items = write_items(tmp_path / "items.jsonl", *ITEMS, {"id": "bad", "messages": FINISHED})
    out, err = io.StringIO(), FakeTerminal()
    argv = ["batch", str(items), "--model", "faux:echo", "--out", str(tmp_path / "r.jsonl")]
    assert main(argv, stdout=out, stderr=err, clock=trio.testing.MockClock()) == 1
    shown = err.getvalue()
    assert "\x1b[?25l" in shown  # the cursor hidden while the bar is drawn ...
    assert "\x1b[?25h" in shown  # ... and shown again
    bar, figures, summary = last_frame(shown)
    # the clock did not move: no rate yet, and nothing left to wait for
    assert re.fullmatch(r"✓ batch ━{30} 4/4 100% 0:00:00 · 0:00:00 left", bar), bar
    assert figures == "  3 done · 0 running · 1 failed · 24 tokens · $0.0000 · 0.0/s"
    assert summary == "batch: 3 done, 1 failed (1 exception); 24 tokens, $0.0000"
    assert out.getvalue() == ""


def test_the_bar_has_no_colour_with_no_color_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_a_wide_terminal(monkeypatch)
    monkeypatch.setenv("NO_COLOR", "1")
    items = write_items(tmp_path / "items.jsonl", *ITEMS, {"id": "bad", "messages": FINISHED})
    err = FakeTerminal()
    argv = ["batch", str(items), "--model", "faux:echo", "--out", str(tmp_path / "r.jsonl")]
    assert main(argv, stdout=io.StringIO(), stderr=err, clock=trio.testing.MockClock()) == 1
    shown = err.getvalue()
    assert "3 done" in CSI.sub("", shown)
    styles = set(re.findall(r"\x1b\[[0-9;]*m", shown))
    assert styles <= {"\x1b[0m", "\x1b[1m", "\x1b[2m"}, styles  # bold and dim at most


def test_the_bars_figures_read_hours_and_high_rates() -> None:
    assert clock_time(3725.4) == "1:02:05"
    assert clock_time(math.inf) == "-:--:--"

    async def figures(clock: trio.testing.MockClock) -> str:
        tally = Tally(10_000)
        for n in range(2_500):
            tally.add(BatchResult(id=str(n), status="error" if n % 100 == 0 else "done"))
        tally.add(BatchResult(id="x", status="aborted"))
        clock.jump(2)
        assert rate(tally) == "1,250/s"
        assert tally.left() == pytest.approx(7_499 / 1_250.5)
        return stats(tally).plain

    clock = trio.testing.MockClock()
    shown = trio.run(figures, clock, clock=clock)
    assert shown == "  2475 done · 0 running · 25 failed · 1 aborted · 0 tokens · $0.0000 · 1,250/s"


def test_without_rich_the_plain_line_is_drawn_and_ends_on_the_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_rich(monkeypatch)
    items = write_items(tmp_path / "items.jsonl", *ITEMS, {"id": "bad", "messages": FINISHED})
    out, err = io.StringIO(), FakeTerminal()
    argv = ["batch", str(items), "--model", "faux:echo", "--out", str(tmp_path / "r.jsonl")]
    assert main(argv, stdout=out, stderr=err, clock=trio.testing.MockClock()) == 1
    shown = err.getvalue()
    assert "\r\x1b[K4/4 (3 done, 0 running, 1 failed) 24 tokens $0.0000 0.0/s left 0s" in shown
    summary = "\rbatch: 3 done, 1 failed (1 exception); 24 tokens, $0.0000\n"
    assert CSI.sub("", shown).endswith(summary)  # the line erased, then the summary
    assert "━" not in shown
    assert "trio_agent._cli._bar" not in sys.modules


def test_off_a_terminal_only_the_summary_is_printed(tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl", *ITEMS)
    result = run_main(["batch", str(items), "--model", "faux:echo", "--out", str(tmp_path / "r")])
    assert result.code == 0, result
    assert result.err == "batch: 3 done, 0 failed; 24 tokens, $0.0000\n"  # no bar, no escapes


def holding(release: trio.Event, entered: list[str]) -> Callable[[BatchItem], Agent]:
    """A factory whose agents answer once ``release`` is set (their item's prompt in
    ``entered`` as their request starts), each reply 10 tokens and $0.01."""

    async def held(model: Any, context: Any, options: Any, emit: Any) -> AssistantMessage:
        entered.append(context.messages[-1].content[0].text)
        await release.wait()
        reply: AssistantMessage = await faux.stream(model, context, options, emit)
        return reply

    def make(item: BatchItem) -> Agent:
        usage = Usage(input=6, output=4, total_tokens=10, cost=Cost(total=0.01))
        return Agent(faux.model([faux.reply("ok", usage=usage)]), stream_fn=held)

    return make


@pytest.mark.parametrize("rich", [True, False])
async def test_the_progress_counts_what_runs_exactly_and_the_rate_and_time_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mock_clock: trio.testing.MockClock, rich: bool
) -> None:
    """Three items, two at once, held until released: both are counted running (not
    guessed from the concurrency), the third waiting is not; the time passes on the
    display; at the end the rate and the counts are those of the batch. The clock moves
    only when told (the results' writes run in threads, which an autojump would race)."""
    on_a_wide_terminal(monkeypatch)
    if not rich:
        without_rich(monkeypatch)
    release, entered = trio.Event(), list[str]()
    err = FakeTerminal()
    items = [BatchItem(id=f"i{n}", prompt=f"i{n}") for n in range(3)]
    go = functools.partial(
        run_items,
        items,
        holding(release, entered),
        todo=3,
        out=tmp_path / "r.jsonl",
        provider="faux",
        concurrency=2,
        rpm=None,
        tpm=None,
        resume=False,
        err=err,
        live=True,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        while len(entered) < 2:  # the results file is opened in a thread first
            await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(10)
        await trio.testing.wait_all_tasks_blocked()  # the display is drawn as time passes
        held = CSI.sub("", err.getvalue())
        threads = [type(thread).__name__ for thread in threading.enumerate()]
        release.set()
    assert "_RefreshThread" not in threads  # rich draws from the batch's tasks only
    assert entered == ["i0", "i1", "i2"]
    if rich:
        assert "batch ━━━━" in held
        assert (
            " 0/3   0% 0:00:10 · -:--:-- left\n  0 done · 2 running · 0 failed · 0 tokens" in held
        )
        bar, figures = last_frame(err.getvalue())
        assert re.fullmatch(r"✓ batch ━{30} 3/3 100% 0:00:10 · 0:00:00 left", bar), bar
        assert figures == "  3 done · 0 running · 0 failed · 30 tokens · $0.0300 · 0.3/s"
    else:
        assert "\r0/3 (0 done, 2 running, 0 failed) 0 tokens $0.0000 0.0/s left ?" in held
        final = CSI.sub("", err.getvalue()).split("\r")[-2]
        assert final == "3/3 (3 done, 0 running, 0 failed) 30 tokens $0.0300 0.3/s left 0s"


def test_a_failed_item_is_exit_code_1(tmp_path: Path) -> None:
    items = write_items(
        tmp_path / "items.jsonl", {"id": "ok", "prompt": "x"}, {"id": "bad", "messages": FINISHED}
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


async def test_ctrl_c_exits_130_keeps_whole_lines_and_a_resumed_batch_finishes_each_item_once(
    tmp_path: Path,
) -> None:
    """On a pseudo-terminal, as at a keyboard: four items one at a time on a real provider
    over loopback; the third's reply stalls; Ctrl-C once the bar shows two done and one
    running. Exit 130, the file holds whole lines (two done, the third aborted), and a
    rerun with --resume runs the third and the fourth: every id done exactly once."""
    (api,) = [a for a in APIS if a.name == "anthropic"]
    body = fixture(api.name, "text.sse")
    stalled = ScriptedResponse(body=body, stall_after=event_end(body, api.first_text))
    items = write_items(
        tmp_path / "items.jsonl", *({"id": f"q{n}", "prompt": f"question {n}"} for n in range(4))
    )
    out = tmp_path / "results.jsonl"
    with trio.fail_after(60):
        async with open_sse_server(
            ScriptedResponse(body=body), ScriptedResponse(body=body), stalled
        ) as server:
            argv = [
                "batch",
                str(items),
                "--out",
                str(out),
                "--concurrency",
                "1",
                *model_options(api, server.url, key=True),
            ]
            env = {**keyed(api), "TERM": "xterm"}  # a terminal that redraws (not "dumb")
            for name in RICH_SETTINGS:
                env.pop(name, None)
            async with on_a_terminal(argv, tmp_path, env) as terminal:
                await terminal.expect("2 done · 1 running · 0 failed")  # the bar's figures
                await terminal.type(CTRL_C)
                assert await terminal.exit_code() == 130
            assert "interrupted" in terminal.shown
            assert "Traceback" not in terminal.shown
        written = out.read_bytes()
        assert written.endswith(b"\n")
        first = [json.loads(line) for line in written.splitlines()]  # every line whole
        assert [(r["id"], r["status"]) for r in first] == [
            ("q0", "done"),
            ("q1", "done"),
            ("q2", "aborted"),
        ]
        async with open_sse_server(
            ScriptedResponse(body=body), ScriptedResponse(body=body)
        ) as server:
            options = model_options(api, server.url, key=True)
            argv = [*argv[: -len(options)], *options, "--resume"]
            again = await trio.run_process(
                [sys.executable, "-m", "trio_agent", *argv],
                cwd=tmp_path,
                env=keyed(api),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert again.returncode == 0, again.stderr
    assert "2 done, 0 failed, 2 skipped (already in the file)" in again.stderr.decode()
    records = [json.loads(line) for line in out.read_bytes().splitlines()]
    assert records[:3] == first  # what was there stays as it was
    done = [r["id"] for r in records if r["status"] == "done"]
    assert sorted(done) == ["q0", "q1", "q2", "q3"]  # each exactly once
    assert read_results(out)["q2"].messages[-1].text == api.text  # type: ignore[union-attr]
