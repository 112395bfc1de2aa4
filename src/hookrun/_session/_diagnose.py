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

__all__ = ["note_missing_fetch"]


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
