"""How many threads a lone token's step gets (workers/backends/lone_threads.py):
the count whose steps were faster lately, each other one tried now and then."""
from __future__ import annotations

from workers.backends import lone_threads
from workers.backends.lone_threads import TRIAL, TRY_EVERY, LoneThreads


def run(choice: LoneThreads, steps: int, seconds: dict[int, float]) -> list[int]:
    """`steps` lone steps, each count taking its `seconds`; the counts used."""
    used = []
    for _ in range(steps):
        threads = choice.pick()
        choice.record(threads, seconds[threads])
        used.append(threads)
    return used


def test_it_starts_with_the_safest_count_and_moves_to_a_faster_one_after_one_trial():
    choice = LoneThreads((1, 2))
    used = run(choice, 3 * TRIAL, {1: 0.020, 2: 0.015})
    assert used[:TRIAL] == [1] * TRIAL and used[TRIAL:2 * TRIAL] == [2] * TRIAL  # timed, then tried
    assert used[2 * TRIAL:] == [2] * TRIAL and choice.best == 2


def test_a_slower_count_is_tried_and_left():
    choice = LoneThreads((1, 2))
    used = run(choice, TRY_EVERY, {1: 0.015, 2: 0.060})  # (spinning threads on a busy machine)
    assert used.count(2) == TRIAL and choice.best == 1


def test_when_the_load_changes_the_next_trial_finds_it():
    choice = LoneThreads((1, 2))
    run(choice, 2 * TRIAL, {1: 0.020, 2: 0.015})
    assert choice.best == 2
    used = run(choice, TRY_EVERY + 2 * TRIAL, {1: 0.020, 2: 0.080})  # other processes took the cores
    assert choice.best == 1  # the next trial of one thread (at most TRY_EVERY steps on) won
    assert used[-TRIAL:] == [1] * TRIAL and used.count(2) <= TRY_EVERY


def test_one_preempted_step_does_not_decide():
    choice = LoneThreads((1, 2))
    trial = iter([0.015] * 3 + [0.500] + [0.015] * 4)  # one step lost a time slice
    for _ in range(TRIAL):
        choice.record(choice.pick(), 0.020)
    for _ in range(TRIAL):
        choice.record(choice.pick(), next(trial))
    assert choice.best == 2


def test_a_configured_count_is_kept(monkeypatch):
    monkeypatch.setattr(lone_threads, "TRY_EVERY", 4)
    choice = LoneThreads((3,))
    assert set(run(choice, 50, {3: 0.5})) == {3}
    assert LoneThreads((1, 1)).counts == (1,)  # (one core: nothing to choose)
