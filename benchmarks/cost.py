"""The cost figure: what one agent session costs in dollars, beside pi-ai 1.6.0 and the floor.

- B11: a session of 30 requests — a ~10k-token prompt (an 8k-token system
  prompt and four tools with long descriptions), then 29 replies that each
  call ``read_file`` once, whose result adds 1-2k tokens, and a text answer —
  run by a client against :mod:`benchmarks.billing`, a loopback server that
  streams the scripted replies in each service's wire format and bills each
  request as the service documents its prompt cache (its rules, and the
  token count, are in that module). For claude-sonnet-4-5 (Anthropic
  Messages), gpt-4.1 (OpenAI Responses) and gemini-2.5-flash (Gemini), with
  the catalog's prices: trio_agent's dollars (an ``Agent`` on the catalog
  model, its base URL's origin replaced by the server's, ``session_id`` set,
  the key given, every other option its default), pi-ai 1.6.0's (its
  ``completeSimple`` in a loop with a scripted tool,
  ``benchmarks/pi_cost.mjs``: the same prompt, tools, session id and
  results, pi's default options; the simple call is the one an agent makes,
  with reasoning off unless asked for, so it switches Gemini's thinking off,
  where ``complete`` without options leaves the model to think) and
  the *floor*: the dollars of the same requests had every turn read the
  whole previous prompt from the cache (the first request writes its prompt,
  Anthropic, or pays for it in full; each later one reads the previous
  prompt and pays for only its new part, as a write on Anthropic but for the
  last request); outputs as billed, without Gemini's thoughts.

The figure is claude-sonnet-4-5's: trio_agent's dollars, the floor of its
requests, the ratio. The other models, and pi-ai's dollars with the floor
of its own requests, are its sub-figures. The dollars are deterministic: one
repeat is enough.

pi-ai is installed on first use with npm into
``~/.cache/trio_agent-bench/pi-ai-1.6.0`` (``TRIO_AGENT_BENCH_CACHE``
moves the cache); without node or npm, or when the install fails, its side
is reported unavailable, with the reason, and the figure still runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio

from benchmarks._common import Figure, figure
from benchmarks.billing import Bill, Biller, BillingReplies, Script, floor_dollars
from trio_agent import Agent, AgentTool, AssistantMessage, ToolResult, ToolUpdate, models
from trio_agent.testing import SSEServer

PI_AI = "@earendil-works/pi-ai@1.6.0"
_API_KEY = "b11-key"
_SESSION_ID = "b11-session"
_SCRIPT = Path(__file__).with_name("pi_cost.mjs")
MODELS = (
    ("anthropic", "claude-sonnet-4-5"),
    ("openai", "gpt-4.1"),
    ("google", "gemini-2.5-flash"),
)
_TIME_LIMIT = 120


# --- the session ----------------------------------------------------------------------------------

_TOPICS = (
    "error handling",
    "cancellation",
    "naming",
    "tests",
    "logging",
    "configuration",
    "concurrency",
    "documentation",
)


def _paragraph(number: int, topic: str) -> str:
    return (
        f"Rule {number} ({topic}). When you review code for {topic}, read the whole module "
        f"before you judge it, quote the lines you mean with their numbers, say what the "
        f"code does today and what it should do instead, and rank the finding as blocking, "
        f"important or minor. Never guess at behaviour you have not read; if a module "
        f"depends on another for {topic}, open that one too before you write a word. "
        f"Prefer one precise finding over three vague ones, and keep each under five lines."
    )


def _system_prompt() -> str:
    """About 8k tokens of review instructions."""
    parts = ["You are a careful senior reviewer of a Python code base."]
    number = 0
    while sum(len(part) + 2 for part in parts) < 32_000:
        number += 1
        parts.append(_paragraph(number, _TOPICS[number % len(_TOPICS)]))
    return "\n\n".join(parts)


def _tools() -> list[dict[str, Any]]:
    """Four tools, each with a long description (~500 tokens)."""
    specs = {
        "read_file": ("path", "Read a file of the repository and return its text."),
        "search": ("pattern", "Search the repository for a regular expression."),
        "list_dir": ("path", "List the entries of a directory of the repository."),
        "run_tests": ("target", "Run the tests of a module or a directory and report them."),
    }
    tools = []
    for name, (argument, summary) in specs.items():
        detail = " ".join(
            f"Note {i}: the {argument} is relative to the repository root; results longer "
            f"than the limit are cut, and the cut is said at the end."
            for i in range(1, 16)
        )
        tools.append(
            {
                "name": name,
                "description": f"{summary} {detail}",
                "parameters": {
                    "type": "object",
                    "properties": {argument: {"type": "string", "description": f"The {argument}."}},
                    "required": [argument],
                },
            }
        )
    return tools


def _file(number: int) -> str:
    """What ``read_file`` returns for module ``number``: 4-8 KB (1-2k tokens) of code."""
    size = 4000 + number * 1733 % 4000
    lines: list[str] = [f"# src/module_{number:02d}.py"]
    line = 0
    while sum(len(text) + 1 for text in lines) < size:
        line += 1
        lines.append(
            f"def step_{number}_{line}(value: int) -> int:  # line {line}\n"
            f"    return value * {line} + {number}"
        )
    return "\n".join(lines)


@attrs.frozen
class Session:
    """B11's session: what both clients send, and what the server answers."""

    system_prompt: str
    tools: tuple[Mapping[str, Any], ...]
    prompt: str
    results: Mapping[str, str]
    script: Script

    @property
    def requests(self) -> int:
        return len(self.script.calls) + 1


def session(calls: int = 29) -> Session:
    paths = [f"src/module_{number:02d}.py" for number in range(1, calls + 1)]
    return Session(
        system_prompt=_system_prompt(),
        tools=tuple(_tools()),
        prompt="Review the modules under src/ one by one and list what you find.",
        results={path: _file(number) for number, path in enumerate(paths, start=1)},
        script=Script(
            tool="read_file",
            calls=tuple({"path": path} for path in paths),
            final=f"Reviewed {calls} modules: no blocking findings, three minor ones.",
        ),
    )


def _at(server_url: str, base_url: str) -> str:
    """``base_url`` with its origin replaced by the server's."""
    return server_url + urlsplit(base_url).path.rstrip("/")


# --- one client's session against the billing server ----------------------------------------------


async def _billed(run: Callable[[str], Any], biller: Biller) -> None:
    """Run ``run(server_url)`` against a billing server answering with ``biller``."""
    async with trio.open_nursery() as nursery:
        server = SSEServer()
        server.responses = BillingReplies(server, biller)
        url = await server.start(nursery)
        with trio.fail_after(_TIME_LIMIT):
            await run(url)
        nursery.cancel_scope.cancel()


def trio_agent_bills(provider: str, model_id: str, plan: Session) -> list[Bill]:
    """The bills of ``plan`` run by trio_agent on ``provider``/``model_id``."""
    found = models.find(provider, model_id)
    if found is None:
        raise LookupError(f"B11: the catalog has no model {provider}/{model_id}")
    biller = Biller(plan.script)

    async def read_file(
        tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate
    ) -> ToolResult:
        text = plan.results.get(args.get("path", ""))
        if text is None:
            raise FileNotFoundError(f"no such file: {args.get('path')!r}")
        return ToolResult.text(text)

    async def unused(tool_call_id: str, args: dict[str, Any], on_update: ToolUpdate) -> ToolResult:
        raise RuntimeError("B11: the script calls only read_file")

    tools = [
        AgentTool(
            name=spec["name"],
            description=spec["description"],
            parameters=spec["parameters"],
            execute=read_file if spec["name"] == "read_file" else unused,
        )
        for spec in plan.tools
    ]

    async def run(url: str) -> None:
        model = attrs.evolve(found, base_url=_at(url, found.base_url))
        agent = Agent(
            model,
            system_prompt=plan.system_prompt,
            tools=tools,
            api_key=_API_KEY,
            session_id=_SESSION_ID,
        )
        await agent.prompt(plan.prompt)
        replies = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
        last = replies[-1] if replies else None
        if (
            len(replies) != plan.requests
            or last is None
            or last.stop_reason != "stop"
            or last.text != plan.script.final
        ):
            errors = "; ".join(m.error_message for m in replies if m.error_message)
            raise RuntimeError(
                f"B11 (trio_agent, {model_id}): {len(replies)} replies for "
                f"{plan.requests} requests, the last {last.stop_reason if last else None!r} "
                f"({errors})"
            )

    trio.run(_billed, run, biller)
    return biller.bills


def _cache_dir() -> Path:
    root = os.environ.get("TRIO_AGENT_BENCH_CACHE") or Path.home() / ".cache" / "trio_agent-bench"
    return Path(root) / "pi-ai-1.6.0"


def pi_ai_install() -> tuple[Path | None, str]:
    """Where pi-ai 1.6.0 is installed (installing it on first use), or ``None`` and why."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None, "node or npm is not on PATH"
    where = _cache_dir()
    installed = where / "node_modules" / "@earendil-works" / "pi-ai" / "package.json"
    if not installed.exists():
        try:
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(where), PI_AI],
                check=True,
                capture_output=True,
                timeout=600,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            output = getattr(exc, "stderr", b"") or b""
            return None, f"npm install {PI_AI} failed: {exc} {output.decode()[-300:]}".strip()
        if not installed.exists():
            return None, f"npm install {PI_AI} left no {installed}"
    return where, ""


def pi_ai_bills(where: Path, provider: str, model_id: str, plan: Session) -> list[Bill]:
    """The bills of ``plan`` run by pi-ai (installed at ``where``) on ``provider``/``model_id``."""
    biller = Biller(plan.script)
    node = shutil.which("node") or "node"
    # Only what node needs: no provider keys or PI_* settings of this shell.
    env = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}

    async def run(url: str) -> None:
        config = {
            "provider": provider,
            "model": model_id,
            "url": url,
            "apiKey": _API_KEY,
            "sessionId": _SESSION_ID,
            "systemPrompt": plan.system_prompt,
            "prompt": plan.prompt,
            "tools": list(plan.tools),
            "results": dict(plan.results),
            "maxRequests": plan.requests,
        }
        done = await trio.run_process(
            [node, str(_SCRIPT), str(where)],
            stdin=json.dumps(config).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=env,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"B11 (pi-ai, {model_id}): node exited {done.returncode}: "
                f"{done.stderr.decode()[-500:]}"
            )
        outcome = json.loads(done.stdout)
        if outcome != {"requests": plan.requests, "stopReason": "stop", "text": plan.script.final}:
            raise RuntimeError(f"B11 (pi-ai, {model_id}): the session ended as {outcome!r}")

    trio.run(_billed, run, biller)
    return biller.bills


# --- the figure -----------------------------------------------------------------------------------


def _tally(bills: list[Bill]) -> dict[str, Any]:
    return {
        "requests": len(bills),
        "prompt_tokens": sum(b.prompt for b in bills),
        "cache_read_tokens": sum(b.cache_read for b in bills),
        "cache_write_tokens": sum(b.cache_write_5m + b.cache_write_1h for b in bills),
        "uncached_tokens": sum(b.uncached for b in bills),
        "output_tokens": sum(b.output for b in bills),
        "thought_tokens": sum(b.thoughts for b in bills),
    }


def _describe(tally: Mapping[str, Any]) -> str:
    text = (
        f"{tally['prompt_tokens']:,} prompt tokens in {tally['requests']} requests: "
        f"{tally['cache_read_tokens']:,} read from the cache, "
        f"{tally['cache_write_tokens']:,} written, {tally['uncached_tokens']:,} uncached"
    )
    if tally["thought_tokens"]:
        text += f"; {tally['thought_tokens']:,} thought tokens"
    return text


def _side(provider: str, model_id: str, bills: list[Bill], client: str, floor_title: str) -> Figure:
    dollars = sum(bill.dollars for bill in bills)
    floor = floor_dollars(provider, model_id, bills)
    tally = _tally(bills)
    return figure(
        [dollars],
        [floor],
        "$",
        lower_is_better=True,
        title=f"{client}, {model_id}",
        client=client,
        floor_title=floor_title,
        model=model_id,
        detail=_describe(tally),
        **tally,
    )


def bench_b11(repeats: int = 1) -> Figure:
    """B11 (``repeats`` is ignored: the dollars are deterministic)."""
    plan = session()
    where, why = pi_ai_install()
    results: dict[str, Figure] = {}
    for provider, model_id in MODELS:
        ours = _side(
            provider,
            model_id,
            trio_agent_bills(provider, model_id, plan),
            "trio_agent",
            "floor (every turn reads the whole earlier prompt)",
        )
        also: dict[str, Figure] = {}
        if where is not None:
            also["pi-ai"] = _side(
                provider,
                model_id,
                pi_ai_bills(where, provider, model_id, plan),
                "pi-ai 1.6.0",
                "floor of its requests",
            )
        if also:
            ours["also"] = also
        results[model_id] = ours
    top = results[MODELS[0][1]]
    top["also"] = {
        **top.get("also", {}),
        **{model_id: results[model_id] for _, model_id in MODELS[1:]},
    }
    top["pi_ai"] = PI_AI if where is not None else f"unavailable: {why}"
    if where is None:
        top["detail"] += f"; pi-ai unavailable: {why}"
    return top
