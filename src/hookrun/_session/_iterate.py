"""``MonitoredSession.iterate``: one step per feed, as an async iterator.

``StepIterator`` drives a monitored session for a pipeline: every ``__anext__``
takes the next feed dict (from a sync or async iterable, or none at all), runs
one hooked step with it and returns the step's results. It ends, with
``StopAsyncIteration``, when the feeds are exhausted, when the session should
stop (a hook, a step function or the coordinator asked for it) or when a step
raises one of the clean-stop exceptions (end of input); in that last case the
session is stopped too, so ``should_stop()`` agrees. It owns no task and no
resource: breaking out of ``async for`` leaves nothing behind.

The wait for the next item of an async feed is the one wait of ``iterate`` that may last
for ever (a quiet source), at every ``max_in_flight``: ``_next_feed`` makes it under a
cancel scope of its caller's that it keeps in the session's ``stop_waits`` meanwhile, and
the session cancels those as soon as it should stop, whoever asked and from whichever task
(a hook, a step function, the coordinator, a close: ``_lifecycle.stopped``). The loop then
ends, as the stop would end it between steps. With steps in flight that scope is the
admission's own; with one lane it is entered for each item of an async feed, which a
step that does not wait pays (about 5 us on asyncio, 13 us on trio). So an async
generator given as feeds must not yield from inside a cancel scope or task group of its
own, which anyio and trio forbid anyway: its error gets a note saying so
(``note_scope_across_yield``). An item the source hands over just as the stop lands is
run only if a step may still start (after the coordinator's stop, which leaves ``run()``
working); after a hook's stop or a close it is not run.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import CLEAN_STOP_TYPES
from ._state import State

if TYPE_CHECKING:
    import anyio

    from .._dispatch._dispatcher import Dispatcher
    from ._lifecycle import Lifetime

#: ``_take_feed``'s default: take the next item of sync feeds.
_NEXT: Any = object()

_OPEN = State.OPEN

__all__ = ["StepIterator", "check_feeds", "note_scope_across_yield"]


class _Steppable(Protocol):
    _state: State
    _dispatcher: Dispatcher
    _lifetime: Lifetime

    def should_stop(self) -> bool: ...

    async def run(self, fetches: object = None, feed_dict: Mapping[Any, Any] | None = None) -> Any: ...


class StepIterator:
    """The async iterator ``MonitoredSession.iterate(fetches, feeds)`` returns.

    Each step yields what ``session.run(fetches, feed)`` returns. Iterate it
    once, from one task: the session runs one step at a time.
    """

    #: Whether a dict feed is copied as it is taken: with steps in flight a feeds generator
    #: may yield one dict changed in place, and the steps in flight keep the feed they were
    #: given (one step at a time, each step is over before the next feed is taken).
    _copy_feeds = False

    __slots__ = (
        "_async_items", "_busy", "_done", "_feeds", "_fetches", "_items", "_session", "_steps", "_stop", "_taken",
        "_waiting",
    )

    def __init__(
        self,
        session: _Steppable,
        fetches: object,
        feeds: object,
        stop: Callable[[], None],
    ) -> None:
        self._session = session
        self._fetches = fetches
        self._feeds = feeds
        self._stop = stop
        self._items: Iterator[Any] | AsyncIterator[Any] | None = None
        self._async_items = hasattr(feeds, "__aiter__")  # the feeds are taken with ``anext``
        self._steps = 0  # steps run
        self._taken = 0  # feed items taken
        self._done = False
        self._busy = False
        #: The scope of a wait for the next item of async feeds (``aclose`` ends it), while it waits.
        self._waiting: anyio.CancelScope | None = None

    def __repr__(self) -> str:
        state = "ended" if self._done else "running"
        return f"StepIterator({state}, {self._steps} steps)"

    def __aiter__(self) -> StepIterator:
        return self

    async def __anext__(self) -> Any:
        if self._busy:
            # Refused before a feed is taken, so no feed is lost to the refusal.
            raise RuntimeError("iterate(): another task is already running a step of this iterator")
        if self._done or self._session.should_stop():
            self._done = True
            raise StopAsyncIteration
        self._busy = True
        try:
            # Either raises StopAsyncIteration when the feeds end.
            if self._async_items:
                feed = _NEXT
                try:
                    with self._session._dispatcher.new_scope() as self._waiting:
                        feed = await self._next_feed()
                except RuntimeError as exc:
                    note_scope_across_yield(exc)
                    raise
                finally:
                    self._waiting = None
                if feed is _NEXT or self._done:  # a stop or aclose() ended the wait: the loop ends
                    self._done = True
                    raise StopAsyncIteration
            else:
                feed = self._take_feed()
            try:
                results = await self._session.run(self._fetches, feed)
            except KeyError as exc:  # a missing fetch: were feed dicts passed as the fetches?
                if self._feeds is None and _feed_dicts(self._fetches):
                    exc.add_note(_SWAPPED.format(fetches=_short(self._fetches)))
                raise
            except CLEAN_STOP_TYPES:
                # The step found its input exhausted: a clean end, as for the feeds' own end.
                self._done = True
                self._stop()
                raise StopAsyncIteration from None
        finally:
            self._busy = False
        self._steps += 1
        return results

    async def aclose(self) -> None:
        """Stop iterating: no more steps (with steps in flight, those running are cancelled);
        a wait for the next item of async feeds (from another task) ends at once."""
        self._done = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def _next_feed(self) -> Mapping[Any, Any] | None:
        """The next feed dict (``StopAsyncIteration`` when the feeds ended); an async feed's
        item is waited for under ``_waiting``, a cancel scope the caller entered, which a stop
        or a close of the session cancels meanwhile (see the module docstring). An item that
        comes as a hook's stop or a close lands is not run: ``StopAsyncIteration``."""
        if not self._async_items:
            return self._take_feed()
        items = self._items
        if items is None:
            items = self._items = aiter(self._feeds)  # type: ignore[arg-type]
        waiting = self._waiting
        assert waiting is not None
        waits = self._session._lifetime.stop_waits
        waits.append(waiting)
        try:
            feed = await anext(items)  # type: ignore[arg-type]
        except StopAsyncIteration:
            self._done = True
            raise StopAsyncIteration from None
        finally:
            waits.remove(waiting)
        if self._session._state is not _OPEN:  # no step may start: the item is not run
            self._done = True
            raise StopAsyncIteration
        return self._take_feed(feed)

    def _take_feed(self, feed: Any = _NEXT) -> Mapping[Any, Any] | None:
        """The next feed dict of sync feeds (or none at all), without a coroutine; or
        ``feed``, just taken from async feeds. Counted, and refused unless it is a feed dict
        (a mapping) or ``None``, naming it; a dict is copied when ``_copy_feeds``."""
        if feed is _NEXT:
            feeds = self._feeds
            if feeds is None:
                return None
            items = self._items
            if items is None:
                items = self._items = iter(feeds)  # type: ignore[call-overload]
            try:
                feed = next(items)  # type: ignore[arg-type]
            except StopIteration:
                self._done = True
                raise StopAsyncIteration from None
        index, self._taken = self._taken, self._taken + 1
        if type(feed) is dict:
            return feed.copy() if self._copy_feeds else feed
        if feed is not None and not isinstance(feed, Mapping):
            self._done = True
            raise TypeError(
                f"iterate(): feeds item {index} is {type(feed).__name__} "
                f"{_short(feed)}; each item must be a feed dict (a mapping) or None"
            )
        # A dict of its own class is copied as such (an ``OrderedDict``, a ``defaultdict``
        # with its factory); any other mapping is read-only by its protocol, and so is a
        # dict class that refuses to be copied (one whose ``__setitem__`` raises).
        if self._copy_feeds and isinstance(feed, dict):
            try:
                return copy.copy(feed)
            except Exception:
                return feed
        return feed


_SWAPPED = (
    "hookrun: iterate(fetches, feeds) takes what each step fetches first and the feed dicts "
    "second, but was given {fetches} as the fetches and no feeds; to run one step per feed "
    "dict write iterate(fetches, [...]) or iterate(feeds=[...])"
)


def check_feeds(feeds: object, fetches: object = None) -> None:
    """Refuse what cannot be a source of feed dicts, and an iterator given as the fetches
    (never a fetch structure: feeds in the wrong place), naming what was given."""
    if feeds is None and (hasattr(fetches, "__aiter__") or hasattr(fetches, "__next__")):
        raise TypeError(
            f"iterate(): the fetches are {type(fetches).__name__} {_short(fetches)}, an iterator, "
            "which cannot be fetched; the feed dicts come second: iterate(fetches, feeds) "
            "or iterate(feeds=...)"
        )
    if feeds is None or hasattr(feeds, "__aiter__"):
        return
    if isinstance(feeds, Mapping):
        raise TypeError(
            "iterate(): feeds is a single mapping; pass an iterable of feed dicts, "
            f"for example [{_short(feeds)}], or an async iterable of them"
        )
    if isinstance(feeds, (str, bytes)) or not hasattr(feeds, "__iter__"):
        raise TypeError(
            f"iterate(): feeds must be an iterable or async iterable of feed dicts, "
            f"or None; got {type(feeds).__name__} {_short(feeds)}"
        )


def _feed_dicts(fetches: object) -> bool:
    """Whether ``fetches`` looks like feed dicts: a non-empty list or tuple of mappings."""
    return isinstance(fetches, (list, tuple)) and bool(fetches) and all(isinstance(item, Mapping) for item in fetches)


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def note_scope_across_yield(exc: RuntimeError) -> None:
    """A note on the error of a scope left out of order around an item of async feeds: the
    feeds' async generator yielded from inside a cancel scope or task group of its own."""
    text = str(exc).lower()
    if "cancel scope" in text or "nursery stack" in text:
        exc.add_note(
            "hookrun: iterate() waits for each item of the feeds under a cancel scope of its own; "
            "an async generator given as feeds must not yield from inside a cancel scope or a task "
            "group it opened (anyio and trio forbid it): open them around each item's work instead, "
            "or send the items through a memory object stream"
        )
