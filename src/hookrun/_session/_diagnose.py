"""Notes that name the culprit when a step fails in the session's run.

A session that has no value for a fetch raises ``KeyError``; the session does
not know who asked for the key, the monitored session does. ``note_missing_fetch``
adds a note naming every party (the caller, ``hook <name>``) whose fetches hold
that key. Only called on the error path; pure apart from ``add_note``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from .._dispatch import _nest

if TYPE_CHECKING:
    from .._dispatch._plan import Call

__all__ = ["note_missing_fetch", "note_missing_fetch_of_layout"]


def note_missing_fetch(
    exc: KeyError, caller_fetches: object, calls: Sequence[Call], requests: Sequence[Any]
) -> None:
    """Add to ``exc`` a note naming who fetched its key (``exc.key``, else ``exc.args[0]``)."""
    key = getattr(exc, "key", None)
    if key is None and exc.args:
        key = exc.args[0]
    try:
        hash(key)
    except TypeError:
        return
    parties = ["the caller"] if _holds(caller_fetches, key) else []
    for call, request in zip(calls, requests, strict=False):
        if request is not None and _holds(request.fetches, key):
            parties.append(call.party)
    if parties:
        exc.add_note(f"hookrun: the fetch {key!r} was asked for by {' and '.join(parties)}")


def _holds(fetches: object, key: Hashable) -> bool:
    if fetches is None:
        return False
    keys: list[Hashable] = []
    _nest.index(fetches, "", keys, {})
    return key in keys


def note_missing_fetch_of_layout(
    exc: KeyError, caller_fetches: object, calls: Sequence[Call], shapes: dict[int, Any] | None,
    keys: Sequence[Hashable],
) -> None:
    """``note_missing_fetch`` for a step that kept its run's layout rather than the hooks'
    requests: each hook's fetches are its shape (``shapes``, by hook index) over ``keys``."""
    from .._hook_protocol import SessionRunArgs  # the error path only

    requests = [
        None if shapes is None or call.index not in shapes else SessionRunArgs(_nest.pack(shapes[call.index], keys))
        for call in calls
    ]
    note_missing_fetch(exc, caller_fetches, calls, requests)
