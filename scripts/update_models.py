"""Regenerate the model catalog and the key-variable table from a release of pi-ai.

pi-ai (the npm package ``@earendil-works/pi-ai``) ships a generated catalog of
models, one JSON file per provider under ``dist/providers/data/``, keyed by
wire API and then by model key. Up to 0.x a key is the model's id and every
entry is a chat model; from 1.0 on the catalog also holds image and classifier
models, and a key is ``"<type>:<id>"`` (``"chat:gpt-5.5"``) with a ``type``
field. trio_agent keeps the chat models of the four APIs it speaks, under
trio_agent's names for them, and every provider that serves one::

    python scripts/update_models.py 1.6.0              # runs `npm pack` in a temporary folder
    python scripts/update_models.py --tarball pi-ai-1.6.0.tgz
    python scripts/update_models.py --tarball pi-ai-1.6.0.tgz --check

It writes two files:

``trio_agent/_catalog.json``
    Compact JSON: ``{"source": "@earendil-works/pi-ai@VERSION", "models":
    {provider: {api: {id: entry}}}}``, each entry pi's own fields (camelCase,
    ``promptCache``, ``inputLimits`` and ``compat`` among them) less the
    ``id``, ``api``, ``provider`` and ``type`` its place already says.
``trio_agent/providers/_key_variables.py``
    ``KEY_VARIABLES``: the environment variables of each catalog provider's
    key, in the order pi-ai reads them, from its ``getApiKeyEnvVars`` (in
    ``dist/env-api-keys.js``), less the tokens that are not keys
    (:data:`NOT_KEYS`).

``--check`` writes nothing: it exits with status 1, naming the files, when
what the release makes differs from the files by a single byte.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PACKAGE = "@earendil-works/pi-ai"
DATA = "package/dist/providers/data/"
ENV_KEYS = "package/dist/env-api-keys.js"
ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "trio_agent" / "_catalog.json"
KEYS_OUTPUT = ROOT / "trio_agent" / "providers" / "_key_variables.py"

APIS = {
    "anthropic-messages": "anthropic-messages",
    "openai-completions": "openai-chat",
    "openai-responses": "openai-responses",
    "google-generative-ai": "google-generative-ai",
}
"""pi's API names, and trio_agent's for the same wire API."""

IMPLIED = ("id", "api", "provider", "type")
"""An entry's fields that its place in the catalog already says."""

NOT_KEYS = frozenset({"ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_OAUTH_TOKEN"})
"""Variables pi-ai lists for a provider that hold no API key: tokens it sends as
``Authorization: Bearer`` (an Anthropic OAuth or auth token), which trio_agent never
sends."""


def npm_pack(version: str, folder: Path) -> Path:
    """Download the package's tarball with ``npm pack`` into ``folder``."""
    result = subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{version}", "--json"],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    )
    filename: str = json.loads(result.stdout)[0]["filename"]
    return folder / filename


def chat_id(key: str, entry: dict[str, Any]) -> str | None:
    """The model id of the entry filed under ``key`` if it is a chat model, else None.

    0.x: the key is the id, and every entry a chat model. 1.x: the key is
    ``"<type>:<id>"`` and the entry says its ``type``.
    """
    if "type" not in entry:
        return key
    if entry["type"] != "chat":
        return None
    prefix = "chat:"
    return key[len(prefix) :] if key.startswith(prefix) else ""


def read_models(archive: tarfile.TarFile, tarball: Path) -> dict[str, Any]:
    """provider → api → id → entry: the chat models of the APIs trio_agent speaks."""
    models: dict[str, dict[str, dict[str, Any]]] = {}
    names = sorted(
        member.name
        for member in archive.getmembers()
        if member.name.startswith(DATA)
        and member.name.endswith(".json")
        and not Path(member.name).name.startswith(".")
    )
    if not names:
        raise SystemExit(f"{tarball}: no catalog under {DATA} (is it a pi-ai tarball?)")
    for name in names:
        data = json.load(archive.extractfile(name))  # type: ignore[arg-type]  # a file: not None
        for pi_api, entries in data.items():
            api = APIS.get(pi_api)
            if api is None:
                continue
            for key, entry in entries.items():
                model_id = chat_id(key, entry)
                if model_id is None:
                    continue
                if entry["api"] != pi_api or entry["id"] != model_id:
                    raise SystemExit(f"{name}: {pi_api}/{key} is filed under another key")
                kept = {k: v for k, v in entry.items() if k not in IMPLIED}
                models.setdefault(entry["provider"], {}).setdefault(api, {})[model_id] = kept
    return models


_TOKEN = re.compile(r'\s*(?:(//[^\n]*)|"((?:[^"\\]|\\.)*)"|([A-Za-z_$][\w$]*)|(\S))')


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    """The JavaScript tokens of ``text`` that the table is written in, as (kind, text):
    kind ``"str"`` (a double-quoted string, its value), ``"name"`` or ``"punct"``;
    comments are skipped."""
    position = 0
    while True:
        match = _TOKEN.match(text, position)
        if match is None:
            return
        position = match.end()
        comment, string, name, punct = match.groups()
        if comment is not None:
            continue
        if string is not None:
            value: str = json.loads(f'"{string}"')
            yield "str", value
        elif name is not None:
            yield "name", name
        else:
            yield "punct", punct


def read_key_variables(text: str) -> dict[str, list[str]]:
    """pi-ai's ``getApiKeyEnvVars`` table, provider → variables, from the JavaScript
    ``text`` of its ``env-api-keys.js``: the providers it answers with an ``if``, and
    its ``envMap`` (a value is a string or an array of strings; a name is one of the
    module's string constants)."""
    constants: dict[str, str] = dict(
        re.findall(r'^(?:export )?const (\w+) = "([^"\\]*)";$', text, re.M)
    )
    body = re.search(r"^function getApiKeyEnvVars\(provider\) \{\n(.*?)^\}$", text, re.M | re.S)
    if body is None:
        raise SystemExit(f"{ENV_KEYS}: no function getApiKeyEnvVars(provider)")
    tokens = list(_tokens(body.group(1)))
    table: dict[str, list[str]] = {}
    at = 0

    def take(kind: str, value: str | None = None) -> str:
        nonlocal at
        if at >= len(tokens) or tokens[at][0] != kind or value not in (None, tokens[at][1]):
            found = tokens[at] if at < len(tokens) else "the end"
            raise SystemExit(f"{ENV_KEYS}: expected {value or kind}, found {found!r}")
        at += 1
        return tokens[at - 1][1]

    def string() -> str:
        if tokens[at][0] == "name":
            name = take("name")
            if name not in constants:
                raise SystemExit(f"{ENV_KEYS}: {name} is no string constant")
            return constants[name]
        return take("str")

    def strings() -> list[str]:
        if tokens[at] != ("punct", "["):
            return [string()]
        take("punct", "[")
        found: list[str] = []
        while tokens[at] != ("punct", "]"):
            found.append(string())
            if tokens[at] == ("punct", ","):
                take("punct", ",")
        take("punct", "]")
        return found

    while at < len(tokens) and tokens[at] == ("name", "if"):
        for part in (("name", "if"), ("punct", "("), ("name", "provider")):
            take(*part)
        for _ in "===":
            take("punct", "=")
        provider = take("str")
        take("punct", ")")
        take("punct", "{")
        take("name", "return")
        table[provider] = strings()
        take("punct", ";")
        take("punct", "}")
    for part in (("name", "const"), ("name", "envMap"), ("punct", "="), ("punct", "{")):
        take(*part)
    while tokens[at] != ("punct", "}"):
        provider = take("str") if tokens[at][0] == "str" else take("name")
        take("punct", ":")
        table[provider] = strings()
        if tokens[at] == ("punct", ","):
            take("punct", ",")
    return table


def key_variables(
    table: dict[str, list[str]], models: dict[str, Any]
) -> dict[str, tuple[str, ...]]:
    """The catalog providers' entries of pi's table, less :data:`NOT_KEYS`, sorted."""
    out: dict[str, tuple[str, ...]] = {}
    for provider in sorted(models):
        variables = tuple(v for v in table.get(provider, ()) if v not in NOT_KEYS)
        if not variables:
            continue
        # written into Python source: only plain names pass
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", provider):
            raise SystemExit(f"{ENV_KEYS}: {provider!r} is not a provider name")
        for variable in variables:
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", variable):
                raise SystemExit(
                    f"{ENV_KEYS}: {variable!r} ({provider}) is not an environment variable"
                )
        out[provider] = variables
    return out


def read_release(tarball: Path) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The catalog trio_agent ships and its key-variable table, from the pi-ai tarball
    ``tarball``."""
    with tarfile.open(tarball) as archive:
        package = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]  # a file
        models = read_models(archive, tarball)
        try:
            script = archive.extractfile(ENV_KEYS)
        except KeyError:
            raise SystemExit(f"{tarball}: no {ENV_KEYS}") from None
        table = read_key_variables(script.read().decode("utf-8"))  # type: ignore[union-attr]  # a file
    source = f"{package['name']}@{package['version']}"
    return {"source": source, "models": models}, key_variables(table, models)


def catalog_text(catalog: dict[str, Any]) -> str:
    """The text of ``_catalog.json``."""
    return json.dumps(catalog, separators=(",", ":"), ensure_ascii=False, sort_keys=True) + "\n"


def key_variables_text(source: str, table: dict[str, tuple[str, ...]]) -> str:
    """The text of ``_key_variables.py``, formatted as ``ruff format`` leaves it."""
    lines = [
        f'"""The environment variables of each catalog provider\'s key, from {source}.',
        "",
        "Generated by ``scripts/update_models.py`` from pi-ai's ``getApiKeyEnvVars``, with",
        "the catalog (``_catalog.json``): do not edit. A provider's variables are read in",
        "order, the first one set giving the key.",
        '"""',
        "",
        "KEY_VARIABLES: dict[str, tuple[str, ...]] = {",
    ]
    for provider, variables in table.items():
        if len(variables) == 1:
            lines.append(f'    "{provider}": ("{variables[0]}",),')
        else:
            lines.append(f'    "{provider}": (')
            lines.extend(f'        "{variable}",' for variable in variables)
            lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", help="the pi-ai version to download with npm pack")
    parser.add_argument("--tarball", type=Path, help="a pi-ai tarball already downloaded")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT}")
    parser.add_argument(
        "--keys-output", type=Path, default=KEYS_OUTPUT, help=f"default: {KEYS_OUTPUT}"
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the files differ"
    )
    args = parser.parse_args(argv)
    if (args.version is None) == (args.tarball is None):
        parser.error("give either a VERSION or --tarball PATH")
    with tempfile.TemporaryDirectory() as folder:
        tarball = args.tarball or npm_pack(args.version, Path(folder))
        catalog, table = read_release(tarball)
    texts = {
        args.output: catalog_text(catalog),
        args.keys_output: key_variables_text(catalog["source"], table),
    }
    if args.check:
        stale = [
            str(path)
            for path, text in texts.items()
            if not path.exists() or path.read_text(encoding="utf-8") != text
        ]
        if stale:
            print(f"not made from {catalog['source']}: {', '.join(stale)}", file=sys.stderr)
            return 1
        print(f"made from {catalog['source']}, byte for byte", file=sys.stderr)
        return 0
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
    counts = {p: sum(map(len, apis.values())) for p, apis in catalog["models"].items()}
    print(
        f"{args.output}: {sum(counts.values())} models of {len(counts)} providers "
        f"from {catalog['source']}; {args.keys_output}: {len(table)} providers' key variables",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
