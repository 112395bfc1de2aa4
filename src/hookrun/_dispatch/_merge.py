"""Merging what the parties of one step ask for: feeds and options. Pure, no I/O.

Parties are the caller and the hooks, in hook list order. Feeds: a key given by
two parties is a ``FeedConflictError`` naming every party and key involved; the
caller's mapping is never modified. Options: ``timeout`` is the maximum of those
given, ``trace`` is OR-ed, ``tags`` are united and a tag given two different
values is a ``ValueError`` naming the tag and the parties.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import FeedConflictError
from .._hook_protocol import RunOptions, SessionRunArgs, check_feed_dict
from . import _nest

if TYPE_CHECKING:
    from ._plan import Call

__all__ = [
    "DEFAULT_OPTIONS",
    "FetchLayout",
    "check_options",
    "merge_feeds",
    "merge_feeds_and_options",
    "merge_options",
]

DEFAULT_OPTIONS = RunOptions()


def check_options(options: object, party: str) -> RunOptions:
    """``options`` as ``RunOptions``; anything else is a ``TypeError`` naming the party."""
    if type(options) is RunOptions or isinstance(options, RunOptions):
        return options
    raise TypeError(f"{party} passed options of type {type(options).__name__}; expected hookrun.RunOptions")


def merge_feeds(
    hook_feeds: Sequence[tuple[str, Mapping[Any, Any]]],
    caller_feeds: Mapping[Any, Any] | None,
) -> Mapping[Any, Any] | None:
    """Merge the hooks' feeds (in list order) with the caller's; raise on any key fed twice."""
    if not hook_feeds:
        return caller_feeds
    merged: dict[Hashable, Any] = {}
    owner: dict[Hashable, str] = {}
    clashes: dict[Hashable, list[str]] = {}
    for party, feeds in hook_feeds:
        if type(feeds) is not dict:
            check_feed_dict(feeds, party)
        for key, value in feeds.items():
            if key in owner:
                clashes.setdefault(key, [owner[key]]).append(party)
            else:
                owner[key] = party
                merged[key] = value
    if clashes:
        _raise_conflict(clashes, "two hooks")
    if caller_feeds:
        clashes = {key: [owner[key], "the caller"] for key in caller_feeds if key in owner}
        if clashes:
            _raise_conflict(clashes, "a hook and the caller")
        merged.update(caller_feeds)
    return merged


def _raise_conflict(clashes: Mapping[Hashable, list[str]], what: str) -> None:
    parties = list(dict.fromkeys(party for names in clashes.values() for party in names))
    detail = "; ".join(f"{key!r} by {' and '.join(names)}" for key, names in clashes.items())
    raise FeedConflictError(
        f"the same key is fed by {what}: {detail}", parties=parties, keys=list(clashes)
    )


def merge_options(parties: Sequence[tuple[str, RunOptions]]) -> RunOptions:
    """Fold options in party order (caller first); the inputs are not modified."""
    if len(parties) == 1:
        return parties[0][1]
    timeout: float | None = None
    trace = False
    tags: dict[str, object] = {}
    tag_owner: dict[str, str] = {}
    for party, options in parties:
        if options.timeout is not None:
            timeout = options.timeout if timeout is None else max(timeout, options.timeout)
        trace = trace or options.trace
        for key, value in options.tags.items():
            if key in tags and tags[key] != value:
                raise ValueError(
                    f"run option tag {key!r} is given two values: {tags[key]!r} by "
                    f"{tag_owner[key]} and {value!r} by {party}"
                )
            tags.setdefault(key, value)
            tag_owner.setdefault(key, party)
    return RunOptions(timeout=timeout, trace=trace, tags=tags)


class FetchLayout:
    """The fetch layout of one step: the unique keys, and each party's shape over them.

    A step asks for the same things as the previous one far more often than not, so
    the session keeps the last layout and reuses it while the caller and every hook
    ask for the same fetch structure *object*, still equal to a snapshot taken when the
    layout was made (so a structure mutated in place is noticed).
    """

    __slots__ = ("caller", "caller_shape", "caller_snapshot", "fetches", "keys", "shapes", "snapshots")

    def __init__(
        self,
        fetches: object,
        calls: Sequence[Call],
        requests: Sequence[Any],
    ) -> None:
        keys: list[Hashable] = []
        positions: dict[Hashable, int] = {}
        self.caller = fetches
        self.caller_snapshot = _nest.snapshot(fetches)
        self.caller_shape = None if fetches is None else _nest.index(fetches, "the caller", keys, positions)
        self.shapes: dict[int, Any] = {}
        self.fetches: list[object] = []
        self.snapshots: list[object] = []
        for call, request in zip(calls, requests, strict=True):
            wanted = None if request is None else _checked(call, request).fetches
            self.fetches.append(wanted)
            self.snapshots.append(_nest.snapshot(wanted))
            if wanted is not None:
                self.shapes[call.index] = _nest.index(wanted, call.party, keys, positions)
        self.keys = tuple(keys)

    def fits(self, fetches: object, requests: Sequence[Any]) -> bool:
        """Whether this step asks for exactly what the layout was made for."""
        try:
            return self._fits(fetches, requests)
        except Exception:  # a key whose == does not answer a plain bool: just rebuild
            return False

    def _fits(self, fetches: object, requests: Sequence[Any]) -> bool:
        if fetches is not self.caller or (fetches is not None and fetches != self.caller_snapshot):
            return False
        for request, wanted, snapshot in zip(requests, self.fetches, self.snapshots, strict=True):
            if request is None:
                if wanted is not None:
                    return False
            elif type(request) is not SessionRunArgs or request.fetches is not wanted or (
                wanted is not None and wanted != snapshot
            ):
                return False
        return True


def _checked(call: Call, request: object) -> SessionRunArgs:
    if type(request) is not SessionRunArgs:
        raise TypeError(
            f"{call.party}: before_run returned {type(request).__name__}; expected None or hookrun.SessionRunArgs"
        )
    return request


def merge_feeds_and_options(
    calls: Sequence[Call],
    requests: Sequence[Any],
    feed_dict: Mapping[Any, Any] | None,
    caller_options: RunOptions,
) -> tuple[Mapping[Any, Any] | None, RunOptions]:
    """Fold the hooks' feeds and options (in list order) into the caller's."""
    hook_feeds: list[tuple[str, Mapping[Any, Any]]] = []
    hook_options: list[tuple[str, RunOptions]] = []
    for call, request in zip(calls, requests, strict=True):
        if request is None:
            continue
        if request.feed_dict is not None and type(request.feed_dict) is not dict:
            check_feed_dict(request.feed_dict, call.party)  # even an empty list or string
        if not request.feed_dict and request.options is None:
            continue
        if request.feed_dict:
            hook_feeds.append((call.party, request.feed_dict))
        if request.options is not None:
            hook_options.append((call.party, check_options(request.options, call.party)))
    feeds = merge_feeds(hook_feeds, feed_dict) if hook_feeds else feed_dict
    merged = merge_options([("the caller", caller_options), *hook_options]) if hook_options else caller_options
    return feeds, merged
