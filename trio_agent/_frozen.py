"""Faster ways to make the frozen classes the loop makes by the million.

Each use of these keeps its place only with its figure, a comment beside it
naming the benchmark and the share of its instructions it saves (callgrind);
speed.md#the-devices-that-stay lists them, and how they are measured.

attrs makes a frozen, slotted class immutable by refusing ``__setattr__``, so
its generated ``__init__`` sets each field through ``object.__setattr__``,
which looks the name up again on every call. :func:`fast_init` gives such a
class an ``__init__`` of the same signature, with the same defaults,
factories and converters, that calls each slot's own descriptor instead. The
class stays what attrs made it: frozen, hashable, compared and shown by its
fields. A class it cannot copy faithfully (a validator, a converter or
factory that takes ``self``, an ``__attrs_pre_init__`` / ``__attrs_post_init__``)
is refused with ``TypeError``.

:func:`maker` goes further for the few places that make such objects per
delta or per turn. Setting a slot through its descriptor is a call; a plain
attribute store on a class without a ``__setattr__`` of its own is a few
bytecodes. So a maker builds the object as an instance of an unfrozen twin
(a subclass of the class that adds no slot and undoes the freezing), stores
each field, then makes the object an instance of the class itself: the
same object the class makes, without a call per field. A maker takes
every field in order, positionally, as the field holds it: no defaults and
no converters, which the caller has already applied. The objects it makes
are the class's own (type, equality, hash, repr, copying and pickling); the
class, its constructor and its instances are untouched, and gains one
subclass, the twin, made once per class.

A maker's parameters are known only once its class is, so :func:`maker`
returns ``Callable[..., T]``, which lets a call pass anything, two fields
swapped included. Annotate each maker where it is made with its class's
fields' types, in order, which mypy then checks at every call::

    _text_delta: Callable[[int, str, _Snapshot], TextDelta] = maker(TextDelta)

A parameter may be narrower than its field (here ``_Snapshot``, one kind of
the field's ``AssistantMessage | PartialSource``), never wider. A maker
names its class in ``__maker_of__``: ``tests/test_frozen.py`` finds every
maker in the package's module globals by it and checks its annotation
against ``attrs.fields`` of the class, so the names an annotation uses must
be importable at run time, not only under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

_C = TypeVar("_C", bound=type)
_T = TypeVar("_T")


def _refuse_init_hooks(cls: type) -> None:
    """``TypeError`` if the attrs ``__init__`` of ``cls`` calls hooks of its own."""
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        raise TypeError(f"{cls.__name__} has an __attrs_pre_init__ or __attrs_post_init__")


def fast_init(cls: _C) -> _C:
    """Replace the attrs ``__init__`` of ``cls``, a frozen slotted attrs class."""
    _refuse_init_hooks(cls)
    namespace: dict[str, Any] = {"NOTHING": attrs.NOTHING}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for index, field in enumerate(attrs.fields(cls)):
        default, converter, name = field.default, field.converter, field.alias
        if (
            not field.init
            or field.validator is not None
            or (converter is not None and not _plain_callable(converter))
            # attrs.Factory is typed as a function returning a value, not as the class it is
            or (isinstance(default, attrs.Factory) and default.takes_self)  # type: ignore[arg-type]  # see above
        ):
            raise TypeError(f"{cls.__name__}.{field.name} is not a field fast_init can copy")
        namespace[f"_set_{index}"] = vars(cls)[field.name].__set__
        if default is attrs.NOTHING:
            parameter = name
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]  # as above
            parameter = f"{name}=NOTHING"
            namespace[f"_factory_{index}"] = default.factory
            body.append(f"    if {name} is NOTHING:\n        {name} = _factory_{index}()\n")
        else:
            parameter = f"{name}=_default_{index}"
            namespace[f"_default_{index}"] = default
        (keyword if field.kw_only else positional).append(parameter)
        value = name
        if converter is not None:
            namespace[f"_convert_{index}"] = converter
            value = f"_convert_{index}({name})"
        body.append(f"    _set_{index}(self, {value})\n")
    parameters = ["self", *positional, *(["*", *keyword] if keyword else [])]
    source = f"def __init__({', '.join(parameters)}):\n{''.join(body) or '    pass'}\n"
    made: dict[str, Any] = {}
    exec(compile(source, f"<fast_init of {cls.__qualname__}>", "exec"), namespace, made)
    init = made["__init__"]
    original = vars(cls)["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(original.__annotations__)
    cls.__init__ = init  # type: ignore[misc]  # replacing a method is what this does
    return cls


def _plain_callable(converter: Any) -> bool:
    """A converter called with the value alone (not attrs' ``Converter`` taking self)."""
    converter_class = getattr(attrs, "Converter", None)
    return callable(converter) and not (
        converter_class is not None and isinstance(converter, converter_class)
    )


_MAKER_NAMES = frozenset({"_made", "_allocate", "_twin", "_cls"})


def maker(cls: type[_T]) -> Callable[..., _T]:
    """A function making ``cls`` from every field, in order, as stored (see the module docs).

    Refuses with ``TypeError`` a class whose constructor does more than store
    its fields: a validator, a field it does not take, ``__attrs_pre_init__`` /
    ``__attrs_post_init__``, a cached hash.
    """
    if not (attrs.has(cls) and "__slots__" in vars(cls)):
        raise TypeError(f"{cls.__name__} is not a slotted attrs class")
    _refuse_init_hooks(cls)
    if any("cached_hash" in slot for slot in cls.__slots__):  # type: ignore[attr-defined]  # checked above
        raise TypeError(f"{cls.__name__} caches its hash")
    fields = attrs.fields(cls)
    for field in fields:
        if not field.init or field.validator is not None or field.alias in _MAKER_NAMES:
            raise TypeError(f"{cls.__name__}.{field.name} is not a field a maker can store")
    names = [field.name for field in fields]
    parameters = [field.alias for field in fields]  # what the constructor calls them
    body = "".join(
        f"    _made.{name} = {parameter}\n"
        for name, parameter in zip(names, parameters, strict=True)
    )
    source = (
        f"def make({', '.join(parameters)}):\n"
        f"    _made = _allocate(_twin)\n{body}    _made.__class__ = _cls\n    return _made\n"
    )
    namespace: dict[str, Any] = {"_allocate": object.__new__, "_twin": _twin(cls), "_cls": cls}
    exec(compile(source, f"<maker of {cls.__qualname__}>", "exec"), namespace)
    make = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    make.__module__ = cls.__module__
    make.__maker_of__ = cls
    made: Callable[..., _T] = make
    return made


@functools.cache
def _twin(cls: type) -> type:
    """The unfrozen twin of ``cls`` (one per class): a subclass adding no slot."""
    return type(
        cls.__name__,
        (cls,),
        {
            "__slots__": (),
            "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}.<unfrozen twin>",
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
        },
    )
