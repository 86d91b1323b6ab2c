"""Regenerate ``trio_agent/_catalog.json``, the model catalog, from a release of pi-ai.

pi-ai (the npm package ``@earendil-works/pi-ai``) ships a generated catalog of
models, one JSON file per provider under ``dist/providers/data/``, keyed by
wire API and then by model id. trio_agent keeps the models of the four APIs it
speaks, under trio_agent's names for them, and every provider that serves one::

    python scripts/update_models.py 0.85.1             # runs `npm pack` in a temporary folder
    python scripts/update_models.py --tarball pi-ai-0.85.1.tgz

The output is compact JSON: ``{"source": "@earendil-works/pi-ai@VERSION",
"models": {provider: {api: {id: entry}}}}``, each entry pi's own fields
(camelCase) less the ``id``, ``api`` and ``provider`` its keys already say.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PACKAGE = "@earendil-works/pi-ai"
DATA = "package/dist/providers/data/"
OUTPUT = Path(__file__).resolve().parent.parent / "trio_agent" / "_catalog.json"

APIS = {
    "anthropic-messages": "anthropic-messages",
    "openai-completions": "openai-chat",
    "openai-responses": "openai-responses",
    "google-generative-ai": "google-generative-ai",
}
"""pi's API names, and trio_agent's for the same wire API."""


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


def read_catalog(tarball: Path) -> dict[str, Any]:
    """The catalog trio_agent ships, made from the pi-ai tarball ``tarball``."""
    models: dict[str, dict[str, dict[str, Any]]] = {}
    with tarfile.open(tarball) as archive:
        package = json.load(archive.extractfile("package/package.json"))  # type: ignore[arg-type]  # a file
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
                for model_id, entry in entries.items():
                    if entry["api"] != pi_api or entry["id"] != model_id:
                        raise SystemExit(f"{name}: {pi_api}/{model_id} is filed under another key")
                    kept = {k: v for k, v in entry.items() if k not in ("id", "api", "provider")}
                    models.setdefault(entry["provider"], {}).setdefault(api, {})[model_id] = kept
    return {"source": f"{package['name']}@{package['version']}", "models": models}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", help="the pi-ai version to download with npm pack")
    parser.add_argument("--tarball", type=Path, help="a pi-ai tarball already downloaded")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"default: {OUTPUT}")
    args = parser.parse_args(argv)
    if (args.version is None) == (args.tarball is None):
        parser.error("give either a VERSION or --tarball PATH")
    with tempfile.TemporaryDirectory() as folder:
        tarball = args.tarball or npm_pack(args.version, Path(folder))
        catalog = read_catalog(tarball)
    text = json.dumps(catalog, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    args.output.write_text(text + "\n", encoding="utf-8")
    counts = {p: sum(map(len, apis.values())) for p, apis in catalog["models"].items()}
    print(
        f"{args.output}: {sum(counts.values())} models of {len(counts)} providers "
        f"from {catalog['source']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
