"""Flatten, de-duplicate and pack back nested fetch structures. Pure, no I/O.

A fetch structure is a leaf (any hashable key), ``None`` (fetch nothing, get
``None`` back), or a list, tuple, namedtuple or dict of fetch structures.

``index(structure, party, keys, positions)`` appends the structure's new leaves
to ``keys`` (each key once, at its first occurrence across every party) and
returns a *shape*: the structure with every leaf replaced by its position in
``keys``. ``pack(shape, values)`` rebuilds the party's structure from the
session's values. Shapes are private: an int (one leaf), ``None``, or a tuple
whose first item tags the container kind.

Invariant: ``pack(index(s, ...), [key -> value for key in keys])`` equals ``s``
with every leaf replaced by its value, containers keeping their type.

Containers nest at most ``MAX_DEPTH`` levels: ``index`` refuses a deeper structure,
or one that contains itself, with a ``ValueError`` naming the party, when the
structure is first seen (the session reuses the shapes of a fetch it saw before,
so later steps do not walk it again). Only containers count the depth: a leaf or
a flat list of keys costs nothing more.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from operator import itemgetter
from typing import Any

__all__ = ["MAX_DEPTH", "flatten", "index", "pack", "snapshot", "unflatten"]

#: How deeply fetch containers may nest (far below Python's recursion limit).
MAX_DEPTH = 100

# Container tags of a shape.
_LIST, _FLAT_LIST, _TUPLE, _NAMEDTUPLE, _DICT = range(5)

Shape = Any  # int | None | tuple[int, ...]: private to this module and its callers


def index(
    structure: object, party: str, keys: list[Hashable], positions: dict[Hashable, int], depth: int = 0
) -> Shape:
    """Register the leaves of ``structure`` in ``keys``/``positions``; return its shape.

    ``depth``: how many containers enclose ``structure`` (callers leave it at 0).
    """
    kind = type(structure)
    if kind is str or kind is int:
        return _position(structure, keys, positions)
    if structure is None:
        return None
    depth += 1
    if depth > MAX_DEPTH and isinstance(structure, (list, tuple, Mapping)):
        raise ValueError(_too_deep(structure, party))
    if kind is list:
        assert isinstance(structure, list)
        flat = _index_flat(structure, keys, positions)
        if flat is not None:
            if len(flat) < 2:  # itemgetter of one index returns the item, not a 1-tuple
                return (_LIST, flat)
            return (_FLAT_LIST, itemgetter(*flat))
        return (_LIST, [index(item, party, keys, positions, depth) for item in structure])
    if isinstance(structure, tuple):
        children = [index(item, party, keys, positions, depth) for item in structure]
        if hasattr(structure, "_fields"):
            return (_NAMEDTUPLE, type(structure), children)
        return (_TUPLE, children)
    if isinstance(structure, Mapping):
        names = list(structure)
        children = [index(structure[name], party, keys, positions, depth) for name in names]
        return (_DICT, type(structure), names, children)
    if isinstance(structure, (list, set)):
        # A list subclass, or a set (unhashable, and with no order to pack back into).
        raise TypeError(
            f"{party} fetches a {type(structure).__name__}; fetch structures are "
            "lists, tuples, namedtuples and dicts of hashable keys"
        )
    try:
        hash(structure)
    except TypeError:
        raise TypeError(
            f"{party} fetches an unhashable key {structure!r} of type "
            f"{type(structure).__name__}: fetch keys must be hashable"
        ) from None
    return _position(structure, keys, positions)


def _too_deep(structure: object, party: str) -> str:
    """Why a structure nested past ``MAX_DEPTH`` is refused: it contains itself, or is deep."""
    name = party or "a party"
    if _contains_itself(structure):
        return (
            f"{name} fetches a structure that contains itself (a {type(structure).__name__} in it "
            f"holds itself, directly or not); fetch structures nest at most {MAX_DEPTH} levels deep"
        )
    return (
        f"{name} fetches a structure nested more than {MAX_DEPTH} levels deep; fetch "
        f"structures nest at most {MAX_DEPTH} levels deep"
    )


def _contains_itself(structure: object) -> bool:
    """Whether a container in ``structure`` holds itself (an iterative walk: any depth)."""
    on_path: set[int] = set()
    stack: list[tuple[object, bool]] = [(structure, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            continue
        if not isinstance(node, (list, tuple, Mapping)):
            continue
        if id(node) in on_path:
            return True
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in (node.values() if isinstance(node, Mapping) else node))
    return False


def _index_flat(
    structure: list[Any], keys: list[Hashable], positions: dict[Hashable, int]
) -> list[int] | None:
    """The positions of a list of string keys (the common case), or None if it is not one.

    Keys are registered only once the whole list is known to be flat.
    """
    for item in structure:
        if type(item) is not str:
            return None
    out = []
    get = positions.get
    for item in structure:
        found = get(item)
        if found is None:
            found = positions[item] = len(keys)
            keys.append(item)
        out.append(found)
    return out


def _position(key: Hashable, keys: list[Hashable], positions: dict[Hashable, int]) -> int:
    found = positions.get(key)
    if found is None:
        found = positions[key] = len(keys)
        keys.append(key)
    return found


def pack(shape: Shape, values: Sequence[object]) -> Any:
    """Rebuild a party's structure from ``shape`` and the fetched ``values``."""
    if type(shape) is int:
        return values[shape]
    if shape is None:
        return None
    tag = shape[0]
    if tag == _FLAT_LIST:
        return list(shape[1](values))
    if tag == _LIST:
        return [pack(child, values) for child in shape[1]]
    if tag == _TUPLE:
        return tuple(pack(child, values) for child in shape[1])
    if tag == _NAMEDTUPLE:
        return shape[1](*(pack(child, values) for child in shape[2]))
    kind, names, children = shape[1], shape[2], shape[3]
    items = [(name, pack(child, values)) for name, child in zip(names, children, strict=True)]
    if kind is dict:
        return dict(items)
    try:
        return kind(items)
    except TypeError:  # a mapping type that cannot be built from pairs
        return dict(items)


def snapshot(structure: object, depth: int = 0) -> object:
    """A copy of the containers of ``structure`` (leaves shared), to detect later mutation.

    Past ``MAX_DEPTH`` it stops copying; ``index`` refuses such a structure anyway.
    """
    kind = type(structure)
    if depth > MAX_DEPTH:
        return structure
    depth += 1
    if kind is list:
        assert isinstance(structure, list)
        return [snapshot(item, depth) for item in structure]
    if kind is dict:
        assert isinstance(structure, dict)
        return {key: snapshot(value, depth) for key, value in structure.items()}
    if isinstance(structure, tuple):
        return structure if hasattr(structure, "_fields") else tuple(snapshot(item, depth) for item in structure)
    return structure


def flatten(structure: object, party: str = "caller") -> list[Hashable]:
    """The unique leaves of ``structure`` in first-occurrence order."""
    keys: list[Hashable] = []
    index(structure, party, keys, {})
    return keys


def unflatten(structure: object, mapping: Mapping[Any, object], party: str = "caller") -> Any:
    """``structure`` with every leaf replaced by ``mapping[leaf]``."""
    keys: list[Hashable] = []
    shape = index(structure, party, keys, {})
    return pack(shape, [mapping[key] for key in keys])
