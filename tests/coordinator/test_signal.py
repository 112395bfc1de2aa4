"""A coordinator's stop signal tells its watcher each time a stop is recorded."""

from __future__ import annotations

from hookrun._coordinator._signal import StopSignal


def test_the_watcher_is_told_of_every_stop_recorded() -> None:
    """A plain request and an error both set the flag and call the watcher; clearing does not."""
    told: list[bool] = []
    signal = StopSignal()
    signal.record(None)  # no watcher yet: nothing to tell
    signal.watcher = lambda: told.append(signal.stopped)
    signal.clear()
    assert told == [] and not signal.stopped
    signal.record(None)
    signal.record(ValueError("boom"))
    assert told == [True, True]
    assert isinstance(signal.exception, ValueError)
