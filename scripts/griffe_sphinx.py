"""A griffe extension for the documentation site: the docstrings' reST markup as Markdown.

The docstrings are written for ``help()`` and editors, in reST: roles such as
``:class:`~trio_agent.Agent``` and literal blocks introduced by ``::``. mkdocstrings renders
Markdown, so this extension rewrites each docstring as the site loads it: a role becomes a
code span (``Agent``; the ``~`` keeps the last part of the path, as Sphinx does), and a
literal block becomes a fenced code block. The source is not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:class|func|meth|data|attr|mod|exc|obj|const):`(?P<tilde>~?)(?P<path>[^`]+)`"
)


def _role(match: re.Match[str]) -> str:
    path = match["path"]
    return f"`{path.rpartition('.')[2] if match['tilde'] else path}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def markdown(text: str) -> str:
    """``text`` (a docstring) with its reST roles and literal blocks written as Markdown."""
    lines = _ROLE.sub(_role, text).split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.rstrip().endswith("::"):
            out.append(line)
            continue
        # The paragraph's "::" introduces the indented block after it ("text::" reads
        # "text:", a "::" alone goes).
        head = line.rstrip()[:-2].rstrip()
        if head.strip():
            out.append(head + ":")
        block: list[str] = []
        while index < len(lines) and (
            not lines[index].strip() or _indent(lines[index]) > _indent(line)
        ):
            block.append(lines[index])
            index += 1
        while block and not block[-1].strip():
            block.pop()
        while block and not block[0].strip():
            block.pop(0)
        if not block:
            continue
        margin = min(_indent(entry) for entry in block if entry.strip())
        out += ["", "```", *(entry[margin:] for entry in block), "```", ""]
    return "\n".join(out)


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the loaded package as Markdown (see the module)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()

        def visit(obj: griffe.Object) -> None:
            if id(obj) in seen:
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = markdown(obj.docstring.value)
            for member in obj.members.values():
                if not member.is_alias:
                    visit(member)  # type: ignore[arg-type]

        visit(pkg)

    # griffe before 2.0 names the same hook so.
    on_package_loaded = on_package
