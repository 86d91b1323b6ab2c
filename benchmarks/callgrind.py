"""B1, B2 and B3 run once each, for counting instructions with callgrind.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.out \\
        python -m benchmarks.callgrind B1
    grep -E '^(summary|totals):' cg.out

``none`` imports the same and runs nothing: a workload's own figure is its
total less ``none``'s. The counts are exact and repeat from one run to the
next, on any load, so a change of a tenth of a percent shows; the timed
figures of ``python -m benchmarks`` cannot show that on a shared machine.
``docs/speed.md`` gives the figures of the speed devices measured this way.

- B1: a run of 300 turns, each one no-op tool call (the loop's cost per turn).
- B2: one turn of 1,000 parallel no-op tool calls.
- B3: one reply of 20,000 one-character text deltas.
"""

from __future__ import annotations

import sys

import trio

from benchmarks._common import noop_listener
from benchmarks.loop import _NOOP_TOOL, _b1_model
from trio_agent import AgentContext, AgentLoopConfig, UserMessage, run_agent_loop
from trio_agent.providers import faux


async def b1() -> None:
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[_NOOP_TOOL]),
        AgentLoopConfig(model=_b1_model(300)),
        noop_listener,
    )


async def b2() -> None:
    calls = [faux.tool_call("noop", {}, id=f"t{i}") for i in range(1000)]
    model = faux.model([faux.reply(*calls), "done"])
    await run_agent_loop(
        [UserMessage.text("go")],
        AgentContext(tools=[_NOOP_TOOL]),
        AgentLoopConfig(model=model),
        noop_listener,
    )


async def b3() -> None:
    model = faux.model([faux.reply("x" * 20_000, chunk_size=1)])
    await run_agent_loop(
        [UserMessage.text("go")], AgentContext(), AgentLoopConfig(model=model), noop_listener
    )


WORKLOADS = {"B1": b1, "B2": b2, "B3": b3}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in {*WORKLOADS, "none"}:
        print("usage: python -m benchmarks.callgrind {none,B1,B2,B3}", file=sys.stderr)
        return 2
    if argv[0] != "none":
        trio.run(WORKLOADS[argv[0]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
