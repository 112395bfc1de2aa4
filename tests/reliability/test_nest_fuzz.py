"""Fuzz the fetch-structure machinery: ``_nest.index``/``pack`` round-trip every
structure of every party, sharing one key list, and ``flatten`` gives each key once."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Hashable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hookrun._dispatch import _nest

Pair = namedtuple("Pair", ["first", "second"])
Single = namedtuple("Single", ["only"])

#: Hashable leaves from a small pool, so that keys repeat within and across parties.
leaves: st.SearchStrategy[Hashable] = st.one_of(
    st.sampled_from(["a", "b", "c", "loss", "step"]),
    st.integers(min_value=-3, max_value=3),
    # True == 1: equal keys are one key, whatever their type; a frozenset is a key too.
    st.sampled_from([2.5, b"raw", True, None.__class__, frozenset({"a", 1})]),
)


def _structures(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(st.sampled_from(["a", "b", "c"]), max_size=4),  # the flat-list fast path
        st.lists(children, max_size=3).map(tuple),
        st.builds(Pair, children, children),
        st.builds(Single, children),
        st.dictionaries(st.sampled_from(["x", "y", "z", 1, ("k",)]), children, max_size=3),
    )


structures: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), leaves), _structures, max_leaves=12
)


def _leaves(structure: object) -> list[Hashable]:
    """Every leaf of ``structure`` in depth-first order, duplicates kept (the model)."""
    if structure is None:
        return []
    if isinstance(structure, list | tuple):
        return [leaf for item in structure for leaf in _leaves(item)]
    if isinstance(structure, dict):
        return [leaf for value in structure.values() for leaf in _leaves(value)]
    assert isinstance(structure, Hashable)
    return [structure]


def _mapped(structure: object, mapping: dict[Hashable, object]) -> object:
    """``structure`` with every leaf replaced by ``mapping[leaf]`` (the model)."""
    if structure is None:
        return None
    if isinstance(structure, list):
        return [_mapped(item, mapping) for item in structure]
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        kind: Any = type(structure)
        return kind(*[_mapped(item, mapping) for item in structure])
    if isinstance(structure, tuple):
        return tuple(_mapped(item, mapping) for item in structure)
    if isinstance(structure, dict):
        return {key: _mapped(value, mapping) for key, value in structure.items()}
    assert isinstance(structure, Hashable)
    return mapping[structure]


def _same(a: object, b: object) -> bool:
    """Equal, with the same container types all the way down (1 == True is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@given(st.lists(structures, min_size=1, max_size=5))
def test_pack_of_index_rebuilds_every_party(parties: list[Any]) -> None:
    """pack(index(x)) is x with leaves mapped, for every party sharing one key list."""
    keys: list[Hashable] = []
    positions: dict[Hashable, int] = {}
    shapes = [_nest.index(s, f"party{i}", keys, positions) for i, s in enumerate(parties)]
    expected_keys = list(dict.fromkeys(leaf for s in parties for leaf in _leaves(s)))
    assert keys == expected_keys
    assert len(keys) == len(positions)
    values: list[object] = [("value", i) for i in range(len(keys))]
    mapping = dict(zip(keys, values, strict=True))
    for structure, shape in zip(parties, shapes, strict=True):
        assert _same(_nest.pack(shape, values), _mapped(structure, mapping))


@given(structures)
def test_flatten_gives_each_key_once_in_first_occurrence_order(structure: Any) -> None:
    """flatten lists every leaf exactly once, in depth-first first-occurrence order."""
    flat = _nest.flatten(structure)
    assert flat == list(dict.fromkeys(_leaves(structure)))


@given(structures)
def test_unflatten_with_identity_mapping_is_the_structure(structure: Any) -> None:
    """unflatten(x, {k: k}) is x with equal keys unified (True is key 1), types kept."""
    identity = {key: key for key in _nest.flatten(structure)}
    assert _same(_nest.unflatten(structure, identity), _mapped(structure, identity))
