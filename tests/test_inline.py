"""The lookout that lets a batch's POSTs run in turn on the calling thread and hands the rest of
the batch to other threads once it runs long (``inbots.deliveries.inline``). Real threads; the
"POSTs" are functions that answer at once or wait on an event, which is all the lookout sees of
them."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from inbots.deliveries.inline import Lookout, Turns


class Recorder:
    """A ``take_over``: posts the rest on a pool and says what it was given."""

    def __init__(self, post) -> None:  # type: ignore[no-untyped-def]
        self.post = post
        self.pool = ThreadPoolExecutor(4)
        self.given: list[tuple[list[tuple[int, str]], list[int]]] = []
        self.posted: list[tuple[int, str]] = []

    def __call__(self, done: list[tuple[int, str]], rest: list[int]) -> Future[None]:
        self.given.append((list(done), list(rest)))

        def run() -> None:
            self.posted.extend((item, self.post(item)) for item in rest)

        return self.pool.submit(run)


def test_fast_posts_run_in_turn_on_the_calling_thread_and_nothing_is_handed_over() -> None:
    lookout = Lookout(limit=30.0)
    threads: list[int] = []

    def post(item: int) -> str:
        threads.append(threading.get_ident())
        return f"answer {item}"

    take_over = Recorder(post)
    try:
        outcome = lookout.run([1, 2, 3, 4], post, take_over)
    finally:
        lookout.close()
    assert outcome.done == [(i, f"answer {i}") for i in (1, 2, 3, 4)]
    assert outcome.late is None and outcome.handed is None
    assert take_over.given == [] and set(threads) == {threading.get_ident()}


def test_a_slow_post_hands_over_what_was_answered_and_what_was_not_begun() -> None:
    """The third POST hangs: the lookout hands the first two (answered) and the last two (not
    begun) over while it still hangs; each item is posted exactly once."""
    lookout = Lookout(limit=30.0, post_limit=0.05, every=0.01)
    hang = threading.Event()
    posted: list[int] = []

    def post(item: int) -> str:
        posted.append(item)
        if item == 3:
            assert hang.wait(10)
        return f"answer {item}"

    take_over = Recorder(post)
    result: list[object] = []
    caller = threading.Thread(
        target=lambda: result.append(lookout.run([1, 2, 3, 4, 5], post, take_over))
    )
    caller.start()
    try:
        deadline = time.monotonic() + 5
        while not take_over.given and time.monotonic() < deadline:
            time.sleep(0.01)
        assert take_over.given == [([(1, "answer 1"), (2, "answer 2")], [4, 5])]
        assert caller.is_alive(), "the caller should still be waiting on the hanging POST"
    finally:
        hang.set()
        caller.join(10)
        lookout.close()
    (outcome,) = result
    assert outcome.done == [] and outcome.late == (3, "answer 3")  # type: ignore[attr-defined]
    outcome.handed.result(5)  # type: ignore[attr-defined]
    assert sorted(take_over.posted) == [(4, "answer 4"), (5, "answer 5")]
    assert sorted(posted) == [1, 2, 3, 4, 5]


def test_a_batch_that_runs_long_is_handed_over_between_two_posts() -> None:
    """Each POST takes a while but none hangs: once the batch has run past the limit, the caller
    hands the rest over itself before beginning the next POST (or the lookout does while one is
    under way); every item is answered once, in ``done``, ``late`` or by the hand-over."""
    lookout = Lookout(limit=0.05, every=10.0)  # the lookout itself too slow to act

    def post(item: int) -> str:
        time.sleep(0.03)
        return f"answer {item}"

    take_over = Recorder(post)
    try:
        outcome = lookout.run([1, 2, 3, 4, 5, 6], post, take_over)
        assert outcome.handed is not None
        outcome.handed.result(5)
    finally:
        lookout.close()
    ((given_done, rest),) = take_over.given
    assert outcome.late is None and outcome.done == []
    answered = [i for i, _ in given_done]
    assert answered + rest == [1, 2, 3, 4, 5, 6] and answered and rest  # ~2 in turn, then over
    assert sorted(take_over.posted) == [(i, f"answer {i}") for i in rest]


def test_a_take_over_that_fails_reaches_the_caller() -> None:
    lookout = Lookout(limit=0.0, every=10.0)

    def broken(_done: object, _rest: object) -> Future[None]:
        raise RuntimeError("no threads left")

    try:
        outcome = lookout.run([1, 2], lambda item: item, broken)
    finally:
        lookout.close()
    assert outcome.handed is not None
    with pytest.raises(RuntimeError, match="no threads left"):
        outcome.handed.result(1)


def test_the_lookout_hands_over_a_batch_posting_past_its_limit() -> None:
    """No single POST counts as slow here, but the batch has been posting past its limit while
    the second POST is under way: the lookout hands the third over without waiting for it."""
    lookout = Lookout(limit=0.05, post_limit=30.0, every=0.01)
    hang = threading.Event()

    def post(item: int) -> str:
        if item == 2:
            assert hang.wait(10)
        return f"answer {item}"

    take_over = Recorder(post)
    result: list[object] = []
    caller = threading.Thread(target=lambda: result.append(lookout.run([1, 2, 3], post, take_over)))
    caller.start()
    try:
        deadline = time.monotonic() + 5
        while not take_over.given and time.monotonic() < deadline:
            time.sleep(0.01)
        assert take_over.given == [([(1, "answer 1")], [3])]
    finally:
        hang.set()
        caller.join(10)
        lookout.close()
    (outcome,) = result
    assert outcome.late == (2, "answer 2")  # type: ignore[attr-defined]


def test_a_batch_past_the_turns_waits_until_one_is_left_and_a_turn_is_given_back_once() -> None:
    turns = Turns(2)
    entered = threading.Event()
    with turns.take() as first, turns.take():

        def third() -> None:
            with turns.take():
                entered.set()

        waiting = threading.Thread(target=third)
        waiting.start()
        assert not entered.wait(0.2), "a third batch got a turn while two were taken"
        first.leave()
        first.leave()  # a second leave gives nothing back (the semaphore is bounded)
        assert entered.wait(5)
        waiting.join(5)
    with turns.take(), turns.take():  # both turns are free again, and no more than two
        assert not turns._free.acquire(blocking=False)


def test_a_handed_over_batch_leaves_its_turn_while_its_slow_post_still_hangs() -> None:
    """One turn: the only batch's POST hangs; once the lookout hands it over, another batch
    takes the turn at once instead of waiting for the hanging receiver."""
    lookout = Lookout(limit=30.0, post_limit=0.05, every=0.01)
    turns = Turns(1)
    hang = threading.Event()
    posting = threading.Event()

    def post(item: int) -> str:
        if item == 1:
            posting.set()
            assert hang.wait(10)
        return f"answer {item}"

    take_over = Recorder(post)
    result: list[object] = []

    def slow_batch() -> None:
        with turns.take() as turn:
            result.append(lookout.run([1], post, take_over, turn))

    caller = threading.Thread(target=slow_batch)
    caller.start()
    try:
        assert posting.wait(5)  # the slow batch holds the turn and its POST hangs
        began = time.monotonic()
        with turns.take() as turn:
            waited = time.monotonic() - began
            assert lookout.run([2, 3], post, take_over, turn).done == [
                (2, "answer 2"),
                (3, "answer 3"),
            ]
        assert waited < 2, f"the second batch waited {waited:.2f} s for the hanging one"
        assert caller.is_alive(), "the slow batch should still be waiting on its POST"
    finally:
        hang.set()
        caller.join(10)
        lookout.close()
    (outcome,) = result
    assert outcome.late == (1, "answer 1")  # type: ignore[attr-defined]
