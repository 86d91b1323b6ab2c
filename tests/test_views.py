"""Prefix: a read-only view of the first n items of a list that only grows."""

from __future__ import annotations

import pytest

from trio_agent._views import Prefix


def test_a_prefix_keeps_its_length_while_the_list_grows() -> None:
    items = [1, 2, 3]
    view = Prefix(items)
    items.append(4)
    assert (len(view), list(view), view[-1]) == (3, [1, 2, 3], 3)


def test_indexing_past_the_prefix_is_an_index_error() -> None:
    items = [1, 2, 3]
    view = Prefix(items, 2)
    with pytest.raises(IndexError, match="index 2 out of range for a sequence of 2"):
        view[2]


def test_slices_and_negative_indexes_stay_inside_the_prefix() -> None:
    view = Prefix([1, 2, 3, 4], 3)
    assert (view[1:], view[-2:], view[-3]) == ([2, 3], [2, 3], 1)


def test_a_prefix_equals_sequences_with_the_same_items() -> None:
    view = Prefix([1, 2, 3], 2)
    assert view == [1, 2]
    assert view == (1, 2)
    assert view != [1, 2, 3]
    assert view != "12"


def test_a_prefix_is_read_only_and_unhashable() -> None:
    view = Prefix([1])
    assert not hasattr(view, "append")
    with pytest.raises(TypeError):
        hash(view)


def test_a_prefix_pickles_as_a_list() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(Prefix([1, 2, 3], 2))) == [1, 2]
