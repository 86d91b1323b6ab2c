"""Public objects name the package that exports them, not the private module that defines them.

As Trio does (``trio._util.fixup_module_metadata``): a repr, a traceback or the
documentation says ``trio_agent.Agent``, not ``trio_agent._agent.Agent``.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any

__all__ = ["fixup_module_metadata"]

_ROOT = __name__.partition(".")[0]

_packages: set[str] = set()
"""The packages whose public objects were given their name, as objects now report them."""


def fixup_module_metadata(package: str, namespace: Mapping[str, Any]) -> None:
    """Set ``__module__`` to ``package`` on the classes and functions of ``namespace["__all__"]``.

    Called at the end of a package's ``__init__``. Changed: a class or a function exported
    under its own ``__qualname__`` (so pickle, which looks up ``module.qualname``, finds it at
    ``package``), defined in a private module of ours (a dotted part starts with ``_``) or
    already given a subpackage's name (when both export it, the outer package wins, whichever
    ran first). Unchanged: type aliases and other typing constructs, constants, objects of
    public modules (:mod:`trio_agent.providers.faux`) and objects exported under another name.

    ``typing.get_type_hints`` looks a class's string annotations up in the module its
    ``__module__`` names; a class's own are made forward references to the module that defines
    them, so they resolve there as before, when asked (a function's use its ``__globals__``).
    """
    _packages.add(package)
    for name in namespace["__all__"]:
        value = namespace.get(name)
        if not isinstance(value, type | types.FunctionType) or value.__qualname__ != name:
            continue
        module = value.__module__
        if module.partition(".")[0] != _ROOT:
            continue
        private = any(part.startswith("_") for part in module.split("."))
        claimed = module in _packages and module.startswith(package + ".")
        if private or claimed:
            if isinstance(value, type) and not claimed:
                _pin_annotations(value, module)
            value.__module__ = package


def _pin_annotations(cls: type, module: str) -> None:
    annotations = inspect.get_annotations(cls)
    if annotations:
        cls.__annotations__ = {
            name: typing.ForwardRef(hint, is_argument=False, is_class=True, module=module)
            if isinstance(hint, str)
            else hint
            for name, hint in annotations.items()
        }
