"""A read-only view of the first *n* items of a list that only grows.

The loop hands the transcript to hooks and to the model once per turn. Copying
it each time makes a turn's cost grow with the transcript (at turn 2,000 a
copy of 4,000 messages costs more than the rest of the turn); a view of a
prefix of the append-only list costs O(1) and stays valid, because nothing
before its end is ever rewritten.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, overload

__all__ = ["Prefix"]

T = TypeVar("T")


class Prefix(Sequence[T]):
    """The first ``length`` items of ``items`` (a list that is only appended to)."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[T], length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"index {index} out of range for a sequence of {self._length}")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self._length and all(
                a == b for a, b in zip(self, other, strict=False)
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a view of mutable data is not hashable

    def __repr__(self) -> str:
        return f"Prefix({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))
