"""The monitored session's states: ``move`` allows exactly the changes ``TRANSITIONS`` lists."""

from __future__ import annotations

import itertools

import pytest

from hookrun._session._state import ALLOWS, CLOSABLE, OPENED, STEPPABLE, TRANSITIONS, State, move


def test_every_state_has_its_changes_and_what_it_allows_listed() -> None:
    """Every state is in both tables; only an open session steps, and a lane recovers in an
    open session, a stop requested or not (recovery is a lane's, not a state)."""
    assert set(TRANSITIONS) == set(State) == set(ALLOWS)
    assert {State.OPEN} == STEPPABLE
    assert {state for state, allowed in ALLOWS.items() if "recover" in allowed} == {State.OPEN, State.STOPPED} == OPENED


@pytest.mark.parametrize(("current", "new"), list(itertools.product(State, State)))
def test_move_allows_only_the_listed_changes(current: State, new: State) -> None:
    if new in TRANSITIONS[current]:
        assert move(current, new) is new
    else:
        with pytest.raises(RuntimeError, match=f"cannot go from {current.name} to {new.name}"):
            move(current, new)


def test_closed_is_final_and_every_state_but_new_closes() -> None:
    assert TRANSITIONS[State.CLOSED] == frozenset()
    assert {state for state, changes in TRANSITIONS.items() if State.CLOSED in changes} == CLOSABLE
    assert OPENED | {State.ENTERING} == CLOSABLE


def test_a_stop_request_is_a_state_left_only_by_closing() -> None:
    """A hook's stop request moves an open session to STOPPED, sticky: only a close follows."""
    assert TRANSITIONS[State.OPEN] == {State.STOPPED, State.CLOSED}
    assert TRANSITIONS[State.STOPPED] == {State.CLOSED}
