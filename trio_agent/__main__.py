"""``python -m trio_agent demo``: an agent on the scripted model, with real tools on a folder.

The scripted model lists the folder, reads a few files in parallel (the
tools report progress and finish out of order), and streams an answer made
from what the tools really returned. The stream, each tool call's start,
progress and end, and the order the results are handed back in are shown as
they happen. Ctrl-C aborts the run cleanly.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import trio

from trio_agent import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AgentTool,
    LlmContext,
    ToolResult,
    ToolResultMessage,
    ToolUpdate,
    UserMessage,
    run_agent_loop,
)
from trio_agent.providers import faux


def _visible_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_file() and not p.name.startswith("."))


def _tools(root: Path) -> list[AgentTool]:
    base = root.resolve()

    async def list_files(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        names = await trio.to_thread.run_sync(_visible_files, base)
        return ToolResult.text("\n".join(names), details={"count": len(names)})

    async def read_file(call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        path = await trio.Path(base / args["path"]).resolve()
        if trio.Path(base) not in path.parents:
            raise ValueError(f"{args['path']!r} is outside {root}")
        text = await path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines()
        for done in range(1, 4):  # pretend the read is slow, and say how far it got
            await trio.sleep(0.05 * (1 + len(lines) % 3))
            on_update(ToolResult.text(f"{done * 33}%"))
        return ToolResult.text(
            f"{len(lines)} lines, {len(text.split())} words", details={"lines": len(lines)}
        )

    return [
        AgentTool(
            name="list_files",
            description="List the files of the folder.",
            parameters={"type": "object", "properties": {}},
            execute=list_files,
        ),
        AgentTool(
            name="read_file",
            description="Read a file and count its lines and words.",
            parameters={
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
            execute=read_file,
        ),
    ]


def _script(root: Path) -> list[faux.Script]:
    def read_some(context: LlmContext) -> faux.Reply:
        listing = context.messages[-1]
        assert isinstance(listing, ToolResultMessage)
        names = [line for line in listing.content[0].text.splitlines() if line][:3]  # type: ignore[union-attr]
        return faux.reply(
            f"Reading {', '.join(names)} together.",
            *(faux.tool_call("read_file", {"path": name}) for name in names),
        )

    def answer(context: LlmContext) -> faux.Reply:
        results = [m for m in context.messages if isinstance(m, ToolResultMessage)][1:]
        parts = [f"{m.tool_call_id}: {m.content[0].text}" for m in results]  # type: ignore[union-attr]
        return faux.reply("Here is what I found:\n" + "\n".join(parts), chunk_size=4)

    return [
        faux.reply("Let me look at the folder first.", faux.tool_call("list_files")),
        read_some,
        answer,
    ]


async def _show(event: AgentEvent) -> None:
    err = sys.stderr
    if event.type == "message_update":
        inner = event.assistant_message_event
        if inner.type == "text_delta":
            sys.stdout.write(inner.delta)
            sys.stdout.flush()
        elif inner.type == "text_end":
            sys.stdout.write("\n")
    elif event.type == "tool_execution_start":
        print(f"  → {event.tool_name} {event.args} [{event.tool_call_id}]", file=err)
    elif event.type == "tool_execution_update":
        print(f"    … {event.tool_call_id}: {event.partial_result.content[0].text}", file=err)  # type: ignore[union-attr]
    elif event.type == "tool_execution_end":
        print(f"  ✓ {event.tool_call_id} finished", file=err)
    elif event.type == "turn_end" and event.tool_results:
        order = ", ".join(m.tool_call_id for m in event.tool_results)
        print(f"  results handed back in source order: {order}", file=err)


async def _demo(root: Path, pace: float | None) -> int:
    model = faux.model(_script(root), pace=pace)
    abort = trio.CancelScope()
    messages = await run_agent_loop(
        [UserMessage.text(f"What is in {root}?")],
        AgentContext(system_prompt="You look at folders.", tools=_tools(root)),
        AgentLoopConfig(model=model),
        _show,
        abort,
    )
    return 0 if messages[-1].stop_reason == "stop" else 1  # type: ignore[union-attr]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trio_agent")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run an agent on the scripted model over a folder")
    demo.add_argument("folder", nargs="?", default=os.curdir, help="the folder (default: here)")
    demo.add_argument("--pace", type=float, default=200.0, help="deltas per second (0: no pacing)")
    args = parser.parse_args(argv)
    root = Path(args.folder)
    if not root.is_dir():
        parser.error(f"{args.folder!r} is not a folder")
    try:
        return trio.run(_demo, root, args.pace or None)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
