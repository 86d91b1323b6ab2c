"""The command line: ``trio-agent demo | run | chat | models`` (also ``python -m trio_agent``).

- ``demo [FOLDER]``: the scripted model with real tools on a folder; no
  network, no key.
- ``run "PROMPT" --model API:ID``: one run against a real model, with
  read-only file tools confined to ``--root``.
- ``chat --model API:ID``: a conversation. A line typed while the agent
  works steers it; ``/follow TEXT`` queues a follow-up; Ctrl-C aborts the
  run (a second Ctrl-C exits); ``/save FILE`` and ``--session FILE`` save
  and resume.
- ``models [--provider P] [--api API]``: the model catalog, one model a line.

``run`` and ``chat`` take ``--provider NAME`` to use a catalog provider's model
(its base URL, prices and key variable) rather than the API's own, and
``--mcp 'COMMAND ARGS'`` (repeatable) to give the model the tools of an MCP server
started as a subprocess for the command's life (it needs the ``mcp`` package:
``pip install 'trio_agent[mcp]'``; without it, one line and exit code 2; a server
that cannot start, one line and exit code 1).

After a run of ``run`` or ``chat``, one line on stderr tells the tokens it
used and, at the catalog's prices for the model, what they cost.

``--max-cost DOLLARS``, ``--max-turns N``, ``--max-input-tokens N``,
``--max-output-tokens N`` and ``--max-tool-calls N`` set a budget on each run
(:class:`~trio_agent.Budget`); a run that reaches one ends with a line on
stderr naming it (``budget reached: ...``), and ``run`` exits with 3.

Answers go to stdout, progress to stderr. Exit codes: 0 done, 1 an error (a
provider's, told in one line; for ``chat``, when its last run ended with one),
2 a usage error, 3 a budget ended the run (``run``), 130 interrupted. A
reader of stdout that leaves (``| head``) ends the run quietly with 0, in
every mode.

The key: the provider's environment variable, sent only to that provider's
servers, or the one ``--api-key-env NAME`` names, sent to the server ``--model``
and ``--base-url`` name. It is looked for before anything runs, so that a
missing one is told in terms a person at the command line can act on (which
variable to set, or which one is not sent to this server).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import math
import os
import secrets
import shlex
import signal
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import trio

from .. import _catalog
from .._agent import Agent
from .._budget import Budget
from .._config import ThinkingLevel
from .._errors import TranscriptError, TrioAgentError, UnknownModelError
from .._json import dumps, loads
from .._messages import AgentMessage
from .._model import Model
from .._stream import CACHE_RETENTIONS, StreamOptions
from .._tools import AgentTool

if typing.TYPE_CHECKING:
    from ..mcp import McpServer
from ..batch import _finished, _provider_key
from ..providers import anthropic, google, openai_chat, openai_responses
from ..providers._common import HttpProvider
from ._batch import FAUX, read_items, real_agent, run_items, scripted_agent, summary_line
from ._chat import HELP as CHAT_HELP
from ._chat import Chat, ended_in_error
from ._confine import escape_name
from ._cost import usage_line
from ._demo import SYSTEM_PROMPT, demo_model, demo_tools, prompt_for
from ._files import file_tools
from ._models import listing
from ._term import Terminal, _isatty, silence
from ._trace import TraceUnavailable, open_trace

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_BUDGET = 3

MODELS: dict[str, Callable[..., Model]] = {
    openai_chat.API: openai_chat.model,
    anthropic.API: anthropic.model,
    openai_responses.API: openai_responses.model,
    google.API: google.model,
}
PROVIDERS: dict[str, Callable[[], HttpProvider]] = {
    openai_chat.API: openai_chat.provider,
    anthropic.API: anthropic.provider,
    openai_responses.API: openai_responses.provider,
    google.API: google.provider,
}
ALIASES = {
    "openai": openai_chat.API,
    "anthropic": anthropic.API,
    "responses": openai_responses.API,
    "google": google.API,
    "gemini": google.API,
}
THINKING_LEVELS: tuple[str, ...] = typing.get_args(ThinkingLevel)


class UsageError(Exception):
    """A command line that cannot be run as given (exit code 2)."""


def parse_model(
    spec: str, base_url: str | None, thinking: ThinkingLevel, provider: str | None = None
) -> Model:
    """The model named by ``API:ID`` (the id may contain colons: ``openai-chat:llama3.2:3b``),
    with what the model catalog knows of it; a thinking level makes it a reasoning model
    even where the catalog does not say it is one.

    ``provider`` (``--provider``) picks a catalog provider: the model is looked up among
    its models and served at its base URL (unless ``base_url`` names another server),
    since the same id is served by several providers at different URLs and prices. A
    provider the catalog does not know, or one that serves nothing over the API, is a
    usage error naming the value and what would do; so is, without ``base_url``, an id
    the provider (``--provider``, else the API's own) does not list, with its nearest
    known ids.
    """
    api, colon, model_id = spec.partition(":")
    api = ALIASES.get(api, api)
    if not colon or not model_id:
        raise UsageError(f"--model must be API:ID (for example openai-chat:gpt-4o), not {spec!r}")
    if api not in MODELS:
        known = ", ".join([*MODELS, *ALIASES])
        raise UsageError(f"--model names an unknown API {api!r}; known: {known}")
    options: dict[str, object] = {"reasoning": True} if thinking != "off" else {}
    if provider is not None:
        known_providers = _catalog.providers()
        if provider not in known_providers:
            raise UsageError(
                f"--provider names an unknown provider {provider!r}; "
                f"known: {', '.join(known_providers)}"
            )
        if _catalog.base_url_of(api, provider) is None:
            served = sorted({m.api for m in _catalog.list_models(provider=provider)})
            raise UsageError(
                f"--provider {provider!r} serves no models over {api}; "
                f"use --model with {' or '.join(served)}"
            )
        options["provider"] = provider
    if base_url:
        options["base_url"] = base_url
    try:
        return MODELS[api](model_id, **options)
    except UnknownModelError as exc:
        remedy = "For a model the catalog does not list, give --base-url"
        error = _catalog.unknown_model(api, exc.provider, model_id, remedy)
        raise UsageError(f"--model {spec!r}: {error}") from None


class MissingKeyError(Exception):
    """No API key where the model needs one: told in one line, exit code 1."""


def find_key(model: Model, api_key_env: str | None) -> str | None:
    """The key to give the agent: the value of ``api_key_env`` when it is given (sent to
    the server the model names, whichever it is), else None (the provider reads its own
    variable, and sends it only to its provider's servers: ``HttpProvider.api_key``).
    :class:`MissingKeyError` when the model needs a key and there is none to send: it
    names the variable to set, or the variable that is not sent to this server."""
    if api_key_env is not None:
        key = os.environ.get(api_key_env)
        if not key:
            state = "empty" if key == "" else "not set"
            raise MissingKeyError(f"--api-key-env names {api_key_env}, which is {state}")
        return key
    provider = PROVIDERS[model.api]()
    if provider.api_key(model, StreamOptions()) is not None or not provider.needs_key(model):
        return None
    raise MissingKeyError(
        provider.missing_key(model, "name the variable that holds it with --api-key-env NAME")
    )


class _Parser(argparse.ArgumentParser):
    commands: dict[str, argparse.ArgumentParser]


def _parser() -> _Parser:
    parser = _Parser(
        prog="trio-agent",
        description="LLM agents on Trio: a scripted demo, and runs or chats with real models.",
        epilog="Exit codes: 0 done (also when the reader of stdout leaves), 1 error (for "
        "chat: its last run ended with one), 2 usage error, 3 a budget ended the run, "
        "130 interrupted. "
        "Colour only on a terminal, never with NO_COLOR set.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="an agent on the scripted model with real tools on a folder (no network, no key)",
        description="The scripted model lists FOLDER, reads some of its files in parallel "
        "(the reads report progress and finish out of order) and streams an answer built "
        "from what the tools returned. Ctrl-C aborts cleanly.",
    )
    demo.add_argument("folder", nargs="?", default=os.curdir, help="the folder (default: here)")
    demo.add_argument(
        "--pace",
        type=float,
        default=200.0,
        metavar="N",
        help="the model's speed in deltas per second, the tools' in step; 0: no pacing "
        "(default: 200)",
    )
    _output_options(demo)

    def real_model_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--model",
            default=os.environ.get("TRIO_AGENT_MODEL"),
            metavar="API:ID",
            help="the model, e.g. openai-chat:gpt-4o-mini, anthropic-messages:claude-sonnet-4-5, "
            "google-generative-ai:gemini-2.5-flash, openai-chat:llama3.2 with --base-url "
            "(default: $TRIO_AGENT_MODEL). Its limits and prices come from the model "
            "catalog (trio-agent models lists it). The key comes from the provider's "
            "environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...), "
            "which is sent only to that provider's servers",
        )
        command.add_argument(
            "--api-key-env",
            metavar="NAME",
            help="read the API key from the environment variable NAME instead of the "
            "provider's own (e.g. WORK_OPENAI_KEY), and send it to the server --model and "
            "--base-url name",
        )
        command.add_argument(
            "--base-url",
            metavar="URL",
            help="the server, e.g. http://localhost:11434/v1 for Ollama",
        )
        command.add_argument(
            "--provider",
            metavar="NAME",
            help="a provider of the model catalog (e.g. groq, openrouter, kimi-coding): the "
            "model is its, at its URL and prices, and the key comes from its variable "
            "(e.g. GROQ_API_KEY); trio-agent models --provider NAME lists its models",
        )
        command.add_argument(
            "--root",
            default=os.curdir,
            help="the folder the file tools may read (default: here); paths outside are refused",
        )
        command.add_argument("--system", default=None, metavar="TEXT", help="the system prompt")
        command.add_argument(
            "--thinking", choices=THINKING_LEVELS, default="off", help="the reasoning level"
        )
        command.add_argument(
            "--cache-retention",
            choices=CACHE_RETENTIONS,
            default="short",
            help="how long the service keeps the prompt cache of the conversation: short "
            "(its standard lifetime, e.g. 5 minutes), long (1 hour where the model allows "
            "it; the cache writes cost more) or none (no caching asked for)",
        )
        command.add_argument(
            "--session",
            type=Path,
            metavar="FILE",
            help="resume the conversation saved in FILE (if it exists), and save it there",
        )
        command.add_argument(
            "--mcp",
            action="append",
            default=[],
            metavar="'COMMAND ARGS'",
            help="give the model the tools of the MCP server that this command line starts "
            "(over stdio, for the command's life); repeatable. Needs the mcp package: "
            "pip install 'trio_agent[mcp]'",
        )
        _budget_options(command)

    run = commands.add_parser(
        "run",
        help="one run of a real model on a prompt",
        description="Send PROMPT to a real model, with read-only file tools over --root, and "
        "stream the answer. Ctrl-C aborts cleanly.",
    )
    run.add_argument("prompt", help="what to ask")
    real_model_options(run)
    _output_options(run)

    chat = commands.add_parser(
        "chat",
        help="a conversation with a real model",
        description="A conversation with a real model, with read-only file tools over --root.\n"
        + CHAT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    real_model_options(chat)
    _trace_option(chat)

    models = commands.add_parser(
        "models",
        help="list the models the catalog knows, with their limits and prices",
        description="The model catalog: one model a line, starting with what --model takes "
        "(API:ID), then its provider, context window, output limit, prices per million "
        "tokens, and what it takes (text, images) and does (reasoning).",
    )
    models.add_argument("--provider", metavar="P", help="only the models of provider P (e.g. groq)")
    models.add_argument(
        "--api", metavar="API", help="only the models served over API (e.g. openai-chat)"
    )
    models.add_argument("--json", action="store_true", help="one line of JSON per model")
    batch = commands.add_parser(
        "batch",
        help="many runs: the prompts of a JSONL file through a model, results to another",
        description="Run each item of ITEMS (a JSONL file: one object a line, with an id and "
        "a prompt, or messages to continue) through the model, many at once, and append "
        "each result to --out as it ends (one JSON line: id, status, usage, transcript). "
        "A rerun with --resume skips the ids already in --out. --model faux:ID is a "
        "scripted model that needs no key. Progress on stderr when it is a terminal: a bar "
        "(done, running, failed, tokens, dollars, items a second, time left) drawn with rich, "
        "from the progress extra (pip install 'trio_agent[progress]'), else one plain line. "
        "Exit code 1 when an item failed; Ctrl-C stops at once, the running items "
        "recorded as aborted (a rerun with --resume runs them again).",
    )
    batch.add_argument("items", type=Path, metavar="ITEMS.jsonl", help="the items")
    batch.add_argument(
        "--model",
        default=os.environ.get("TRIO_AGENT_MODEL"),
        metavar="API:ID",
        help="the model, as for run, or faux:ID (scripted, no key)",
    )
    batch.add_argument(
        "--out", type=Path, required=True, metavar="RESULTS.jsonl", help="the results file"
    )
    batch.add_argument(
        "--concurrency",
        type=_count(1),
        default=16,
        metavar="N",
        help="at most N items at once (default: 16)",
    )
    batch.add_argument(
        "--rpm", type=_count(1), metavar="N", help="at most N requests to the provider a minute"
    )
    batch.add_argument(
        "--tpm",
        type=_count(1),
        metavar="N",
        help="start a request only while the last minute's replies used fewer than N tokens",
    )
    batch.add_argument(
        "--resume", action="store_true", help="skip the ids already finished in --out"
    )
    batch.add_argument("--system", default=None, metavar="TEXT", help="the system prompt")
    batch.add_argument(
        "--api-key-env", metavar="NAME", help="read the API key from the variable NAME"
    )
    batch.add_argument("--base-url", metavar="URL", help="the server")
    batch.add_argument("--provider", metavar="NAME", help="a provider of the model catalog")
    batch.add_argument(
        "--thinking", choices=THINKING_LEVELS, default="off", help="the reasoning level"
    )
    parser.commands = {
        "demo": demo,
        "run": run,
        "chat": chat,
        "models": models,
        "batch": batch,
    }
    return parser


# The budget flags: (flag, the Budget field, what it reads, its help).
_BUDGET_FLAGS: tuple[tuple[str, str, str, str], ...] = (
    ("--max-cost", "cost", "DOLLARS", "end a run once it has cost DOLLARS at the catalog's prices"),
    ("--max-turns", "turns", "N", "end a run after N model requests"),
    (
        "--max-input-tokens",
        "input_tokens",
        "N",
        "end a run once the model has read N tokens, or would with its next request",
    ),
    ("--max-output-tokens", "output_tokens", "N", "end a run once the model has written N tokens"),
    (
        "--max-tool-calls",
        "tool_calls",
        "N",
        "run at most N tool calls a run (the model is told of the others, which do not run)",
    ),
)


def _dollars(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of dollars, not {text!r:.40}")
    return value


def _count(minimum: int) -> Callable[[str], int]:
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(
                f"must be a whole number of {minimum} or more, not {text!r:.40}"
            )
        return value

    return count


def _budget_options(command: argparse.ArgumentParser) -> None:
    for flag, field, metavar, text in _BUDGET_FLAGS:
        reads = _dollars if field == "cost" else _count(0 if field == "tool_calls" else 1)
        command.add_argument(flag, dest=f"budget_{field}", type=reads, metavar=metavar, help=text)


def _budget(args: argparse.Namespace) -> Budget | None:
    """The budget the ``--max-*`` flags set, or None."""
    limits = {
        field: getattr(args, f"budget_{field}")
        for _flag, field, _metavar, _text in _BUDGET_FLAGS
        if getattr(args, f"budget_{field}") is not None
    }
    return Budget(**limits) if limits else None


def _output_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--json", action="store_true", help="print every event as one line of JSON on stdout"
    )
    command.add_argument("--save", type=Path, metavar="FILE", help="save the transcript to FILE")
    _trace_option(command)


def _trace_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--trace",
        action="store_true",
        help="print the OpenTelemetry spans of each run as a tree on stderr after it "
        "(needs the OpenTelemetry SDK: pip install opentelemetry-sdk)",
    )


def _subscribe_trace(agent: Agent, args: argparse.Namespace, term: Terminal) -> None:
    if getattr(args, "trace", False):
        for listener in open_trace(term.note):
            agent.subscribe(listener)


def _system_prompt(root: Path, given: str | None) -> str:
    if given is not None:
        return given
    return (
        "You are a helpful assistant with read-only access to the files of a project "
        f"(its root: {escape_name(str(root))}) through the tools list_files, read_file and "
        "search_files."
    )


class SessionError(Exception):
    """A transcript could not be saved or resumed: told in one line, exit code 1."""


class MissingPackageError(Exception):
    """``--mcp`` without the ``mcp`` package: told in one line, exit code 2."""


class ServerError(Exception):
    """An MCP server of ``--mcp`` that could not start: told in one line, exit code 1."""


MCP_NEEDED = "--mcp needs the mcp package: pip install 'trio_agent[mcp]'"


def parse_mcp(specs: Sequence[str]) -> list[list[str]]:
    """The command line of each ``--mcp`` (split as a shell would); an empty one, or one
    a shell could not split, is a usage error. Imports :mod:`trio_agent.mcp` when there
    is one (only then: the ``mcp`` package is optional), :class:`MissingPackageError`
    when it cannot be imported."""
    commands = []
    for spec in specs:
        try:
            argv = shlex.split(spec)
        except ValueError as exc:
            raise UsageError(f"--mcp {spec!r}: {exc}") from None
        if not argv:
            raise UsageError("--mcp needs a command line, e.g. --mcp 'python server.py'")
        commands.append(argv)
    if commands:
        try:
            import trio_agent.mcp  # noqa: F401  (lazily: an optional extra)
        except ImportError:
            raise MissingPackageError(MCP_NEEDED) from None
    return commands


def _first_message(exc: BaseException) -> str:
    """The message of ``exc``, or of the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    text = " ".join(text.split())  # one line
    return text or type(exc).__name__


async def open_mcp_servers(
    stack: contextlib.AsyncExitStack, commands: Sequence[Sequence[str]]
) -> list[McpServer]:
    """Start the MCP server of each command line, kept open by ``stack``.
    :class:`ServerError` naming the command when one cannot start."""
    if not commands:
        return []
    from .. import mcp  # lazily: an optional extra, already imported by parse_mcp

    # The SDK logs what a server sent that it could not read, with a traceback, and
    # Python's logging writes a library's records to stderr when no handler is set. The
    # command line says in one line what failed (a call's error result, or ServerError).
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    servers: list[McpServer] = []
    for argv in commands:
        try:
            server = await stack.enter_async_context(
                mcp.open_server(command=argv[0], args=argv[1:])
            )
        except Exception as exc:
            raise ServerError(
                f"--mcp {shlex.join(argv)!r}: the server did not start: {_first_message(exc)}"
            ) from None
        servers.append(server)
    return servers


def _mcp_tools(servers: Sequence[McpServer]) -> list[AgentTool]:
    return [tool for server in servers for tool in server.tools]


def _follow_tool_changes(agent: Agent, root: Path, servers: Sequence[McpServer]) -> None:
    """A server whose tool list changes: the agent's next run offers the new list."""

    def changed(_tools: object) -> None:
        agent.set_tools([*file_tools(root), *_mcp_tools(servers)])

    for server in servers:
        server.on_tools_changed(changed)


def _write_whole(path: Path, data: bytes) -> None:
    """Replace the file ``path`` with ``data``, whole or not at all.

    ``data`` goes to a new file beside ``path``, which is flushed to the disk and then
    renamed over ``path``: a reader, a crash or a failure midway sees the old file or
    the new one, never a mix. On any failure the new file is removed (the old one is
    left as it was) and the exception propagates.
    """
    temporary = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(temporary, flags, 0o666)  # as open() makes a file: the umask applies
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    """Flush ``folder``'s entries (a rename in it) to the disk, where the system allows."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # Windows opens no folder
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_transcript(path: Path, messages: Sequence[AgentMessage]) -> None:
    _write_whole(path, (dumps(messages, indent=1) + "\n").encode("utf-8"))


async def _save(path: Path, messages: Sequence[AgentMessage]) -> None:
    """Write the transcript to ``path``, replacing it whole (never half-written; the file
    it replaces is kept when writing fails). :class:`SessionError` saying why.

    In a worker thread, its JSON too: a long transcript (images in base64) takes a while to
    write, and the run's Ctrl-C must not wait for it.
    """
    try:
        await trio.to_thread.run_sync(_write_transcript, path, list(messages))
    except (OSError, ValueError, TypeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SessionError(f"cannot save the transcript to {str(path)!r}: {reason}") from None


async def _save_all(paths: Sequence[Path], messages: Sequence[AgentMessage]) -> None:
    for path in paths:
        await _save(path, messages)


async def _load(path: Path | None) -> list[AgentMessage]:
    """The transcript saved in ``path`` (none if there is no such file yet)."""
    if path is None or not await trio.Path(path).exists():
        return []
    try:
        text = await trio.Path(path).read_text(encoding="utf-8")
        messages: list[AgentMessage] = await trio.to_thread.run_sync(loads, text)
    except (OSError, UnicodeDecodeError, TranscriptError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SessionError(f"cannot resume {str(path)!r}: {reason}") from None
    return messages


async def _one_run(agent: Agent, term: Terminal, prompt: str, saves: Sequence[Path]) -> int:
    """Run ``prompt`` to its end; the first Ctrl-C aborts it, a second stops waiting; a
    reader of stdout that leaves aborts it too (exit code 0)."""
    term.on_closed = agent.abort
    interrupted = False
    failure: BaseException | None = None  # raised after the nursery, not in a group
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal interrupted
                async for _ in signals:
                    if interrupted:
                        nursery.cancel_scope.cancel()
                        return
                    interrupted = True
                    agent.abort()
                    term.note("  interrupted: aborting (Ctrl-C again to quit at once)", "yellow")

            nursery.start_soon(watch)
            try:
                await agent.prompt(prompt)
            except Exception as exc:  # re-raised below
                failure = exc
            finally:
                nursery.cancel_scope.cancel()
    with trio.CancelScope(shield=True):  # saved however the run ended
        await _save_all(saves, agent.state.messages)
    if failure is not None:
        raise failure
    if term.out_closed:
        return EXIT_OK
    if interrupted:
        return EXIT_INTERRUPTED
    if agent.state.stop is not None:
        term.note(f"budget reached: {agent.state.stop}", "yellow")
        return EXIT_BUDGET
    return EXIT_ERROR if ended_in_error(agent.state.messages) else EXIT_OK


async def _demo(args: argparse.Namespace, term: Terminal) -> int:
    pace = args.pace or None
    tools = demo_tools(args.base, pace)
    agent = Agent(demo_model(pace), system_prompt=SYSTEM_PROMPT, tools=tools)
    agent.subscribe(term.show)
    _subscribe_trace(agent, args, term)
    saves = [args.save] if args.save else []
    return await _one_run(agent, term, prompt_for(Path(args.folder)), saves)


def _real_agent(
    args: argparse.Namespace, messages: list[AgentMessage], more_tools: Sequence[AgentTool] = ()
) -> Agent:
    root: Path = args.root
    return Agent(
        args.parsed_model,
        system_prompt=_system_prompt(root, args.system),
        tools=[*file_tools(root), *more_tools],
        messages=messages,
        thinking_level=args.thinking,
        api_key=args.api_key,
        session_id=args.session_id,
        cache_retention=args.cache_retention,
        budget=args.budget,
    )


async def _open_agent(
    stack: contextlib.AsyncExitStack[bool | None],
    args: argparse.Namespace,
    messages: list[AgentMessage],
    term: Terminal,
) -> Agent:
    """The agent of ``run`` or ``chat``, with the tools of the ``--mcp`` servers it opens
    in ``stack`` (for the command's life), following their changes, shown on ``term``."""
    servers = await open_mcp_servers(stack, args.mcp_commands)
    agent = _real_agent(args, messages, _mcp_tools(servers))
    _follow_tool_changes(agent, args.root, servers)
    agent.subscribe(term.show)
    _subscribe_trace(agent, args, term)
    return agent


async def _run(args: argparse.Namespace, term: Terminal) -> int:
    messages = await _load(args.session)
    async with contextlib.AsyncExitStack() as stack:  # the MCP servers, for the run's life
        agent = await _open_agent(stack, args, messages, term)
        saves = [path for path in (args.session, args.save) if path is not None]
        start = len(agent.state.messages)
        code = await _one_run(agent, term, args.prompt, saves)
    used = usage_line(agent.state.messages[start:], agent.state.model)
    if used is not None and not args.json:
        term.note(used)
    return code


def _models(args: argparse.Namespace, out: TextIO) -> int:
    api = ALIASES.get(args.api, args.api) if args.api is not None else None
    if api is not None and api not in MODELS:
        known = ", ".join([*MODELS, *ALIASES])
        raise UsageError(f"--api names an unknown API {args.api!r}; known: {known}")
    try:
        lines = listing(args.provider, api, args.json)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for text in lines:
        print(text, file=out)
    return EXIT_OK


async def _chat(args: argparse.Namespace, term: Terminal, stdin: TextIO) -> int:
    messages = await _load(args.session)
    async with contextlib.AsyncExitStack() as stack:  # the MCP servers, for the chat's life
        agent = await _open_agent(stack, args, messages, term)
        if agent.state.messages:
            term.note(f"resumed {len(agent.state.messages)} messages from {args.session}")
        return await Chat(agent, term, stdin, args.session, save=_save).run()


def _batch_command(
    args: argparse.Namespace, term: Terminal, err: TextIO, clock: trio.abc.Clock | None
) -> int:
    if not args.model:
        raise UsageError("--model API:ID is needed (or set TRIO_AGENT_MODEL)")
    try:
        items = read_items(args.items)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    system = args.system or ""
    api, _, model_id = args.model.partition(":")
    if api == FAUX:
        make = scripted_agent(model_id or FAUX, system)
        provider = FAUX
    else:
        model = parse_model(args.model, args.base_url, args.thinking, args.provider)
        key = find_key(model, args.api_key_env)
        make = real_agent(model, system, api_key=key, thinking_level=args.thinking)
        provider = _provider_key(model)
    try:  # a line that is not a result is named before anything runs
        finished, _ = _finished(args.out, args.resume)
    except FileExistsError:
        raise UsageError(
            f"--out {str(args.out)!r} holds results; add --resume to go on with it"
        ) from None
    except ValueError as exc:
        raise UsageError(f"--out: {exc}") from None
    summary = trio.run(
        functools.partial(
            run_items,
            items,
            make,
            todo=sum(1 for item in items if item.id not in finished),
            out=args.out,
            provider=provider,
            concurrency=args.concurrency,
            rpm=args.rpm,
            tpm=args.tpm,
            resume=args.resume,
            err=err,
            live=_isatty(err),
        ),
        clock=clock,
    )
    term.note(summary_line(summary))
    return EXIT_ERROR if summary.failed else EXIT_OK


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    clock: trio.abc.Clock | None = None,
) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    ``stdin``, ``stdout``, ``stderr`` replace the process's streams, and ``clock``
    is given to ``trio.run`` (a test's ``MockClock``).
    """
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    try:
        code = _main(argv, stdin, out, err, clock)
        out.flush()  # here, where a reader that left can still be told from an error
    except BrokenPipeError:  # the reader left (``| head``): a normal way to stop
        silence(out)
        silence(err)
        return EXIT_OK
    return code


def _main(
    argv: Sequence[str] | None,
    stdin: TextIO | None,
    out: TextIO,
    err: TextIO,
    clock: trio.abc.Clock | None,
) -> int:
    parser = _parser()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exit:  # --help (0) or a usage error (2), already printed
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    term = Terminal(out, err, json_lines=getattr(args, "json", False))
    try:
        if getattr(args, "trace", False):
            open_trace(term.note)  # told before any run: the SDK is missing
        if args.command == "demo":
            if not Path(args.folder).is_dir():
                raise UsageError(f"{args.folder!r} is not a folder")
            args.base = Path(args.folder).resolve()  # here, before the event loop runs
            if args.pace < 0:
                raise UsageError(f"--pace must be 0 or more, not {args.pace:g}")
            return trio.run(_demo, args, term, clock=clock)
        if args.command == "models":
            return _models(args, out)
        if args.command == "batch":
            return _batch_command(args, term, err, clock)
        if not args.model:
            raise UsageError("--model API:ID is needed (or set TRIO_AGENT_MODEL)")
        if not Path(args.root).is_dir():
            raise UsageError(f"--root {args.root!r} is not a folder")
        args.root = Path(args.root).resolve()  # here, before the event loop runs
        args.mcp_commands = parse_mcp(args.mcp)
        args.parsed_model = parse_model(args.model, args.base_url, args.thinking, args.provider)
        args.api_key = find_key(args.parsed_model, args.api_key_env)
        # The conversation's name for the services' prompt caches: one per command.
        args.session_id = secrets.token_hex(16)
        args.budget = _budget(args)
        if args.command == "run":
            return trio.run(_run, args, term, clock=clock)
        return trio.run(_chat, args, term, sys.stdin if stdin is None else stdin, clock=clock)
    except UsageError as exc:
        parser.commands[args.command].print_usage(err)
        print(f"trio-agent {args.command}: error: {exc}", file=err)
        return EXIT_USAGE
    except (MissingPackageError, TraceUnavailable) as exc:
        term.error(str(exc))
        return EXIT_USAGE
    except (TrioAgentError, SessionError, MissingKeyError, ServerError) as exc:
        term.error(str(exc))
        return EXIT_ERROR
    except BrokenPipeError:  # not an error to tell: main() ends quietly
        raise
    except OSError as exc:
        term.error(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
        return EXIT_ERROR
    except KeyboardInterrupt:
        term.note("interrupted", "yellow")
        return EXIT_INTERRUPTED
