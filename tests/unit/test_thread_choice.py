"""How many threads a step gets (workers/backends/thread_choice.py): the count
whose steps were faster lately, each other one tried now and then."""
from __future__ import annotations

from workers.backends import thread_choice
from workers.backends.thread_choice import MOST_SPACED, TRIAL, TRY_EVERY, ThreadChoice


def run(choice: ThreadChoice, steps: int, seconds: dict[int, float]) -> list[int]:
    """`steps` lone steps, each count taking its `seconds`; the counts used."""
    used = []
    for _ in range(steps):
        threads = choice.pick()
        choice.record(threads, seconds[threads])
        used.append(threads)
    return used


def test_it_starts_with_the_safest_count_and_moves_to_a_faster_one_after_one_trial():
    choice = ThreadChoice((1, 2))
    used = run(choice, 3 * TRIAL, {1: 0.020, 2: 0.015})
    assert used[:TRIAL] == [1] * TRIAL and used[TRIAL:2 * TRIAL] == [2] * TRIAL  # timed, then tried
    assert used[2 * TRIAL:] == [2] * TRIAL and choice.best == 2


def test_a_slower_count_is_tried_and_left():
    choice = ThreadChoice((1, 2))
    used = run(choice, TRY_EVERY, {1: 0.015, 2: 0.060})  # (spinning threads on a busy machine)
    assert used.count(2) == TRIAL and choice.best == 1


def test_when_the_load_comes_the_chosen_counts_slowdown_starts_a_trial_at_once():
    choice = ThreadChoice((1, 2))
    run(choice, 2 * TRIAL, {1: 0.020, 2: 0.015})
    assert choice.best == 2
    used = run(choice, 2 * TRIAL, {1: 0.020, 2: 0.080})  # other processes took the cores
    assert used == [2] * 2 + [1] * (2 * TRIAL - 2) and choice.best == 1  # two steps on, not TRY_EVERY


def test_a_slowdown_of_every_count_alike_does_not_start_trial_after_trial():
    choice = ThreadChoice((1, 2))
    run(choice, 2 * TRIAL, {1: 0.020, 2: 0.015})
    used = run(choice, TRY_EVERY, {1: 0.060, 2: 0.045})  # (a longer context: every step costs more)
    assert used.count(1) == TRIAL and choice.best == 2


def test_a_hopeless_trial_ends_after_two_steps_and_is_tried_less_and_less_often():
    choice = ThreadChoice((1, 2))
    used = run(choice, 40 * TRY_EVERY, {1: 0.020, 2: 1.5})  # (2 threads spinning beside a busy process)
    trials = [i for i, n in enumerate(used) if n == 2 and used[i - 1] == 1]
    assert used.count(2) == 2 * len(trials) and choice.best == 1
    gaps = [b - a for a, b in zip(trials, trials[1:])]
    assert gaps == sorted(gaps) and gaps[0] <= 2 * TRY_EVERY + 2 and max(gaps) <= MOST_SPACED * TRY_EVERY + 2


def test_when_the_load_goes_a_spaced_out_trial_still_finds_it():
    choice = ThreadChoice((1, 2))
    run(choice, 40 * TRY_EVERY, {1: 0.020, 2: 1.5})
    used = run(choice, MOST_SPACED * TRY_EVERY + 2 * TRIAL, {1: 0.020, 2: 0.015})
    assert choice.best == 2 and used[-TRIAL:] == [2] * TRIAL


def test_one_preempted_step_does_not_decide():
    choice = ThreadChoice((1, 2))
    trial = iter([0.015] * 3 + [0.500] + [0.015] * 4)  # one step lost a time slice
    for _ in range(TRIAL):
        choice.record(choice.pick(), 0.020)
    for _ in range(TRIAL):
        choice.record(choice.pick(), next(trial))
    assert choice.best == 2


def test_one_preempted_step_of_the_chosen_count_changes_nothing():
    choice = ThreadChoice((1, 2))
    run(choice, 2 * TRIAL, {1: 0.030, 2: 0.015})
    choice.record(choice.pick(), 0.500)  # (lost a time slice)
    used = run(choice, 2 * TRIAL, {1: 0.030, 2: 0.015})
    assert used == [2] * 2 * TRIAL and choice.best == 2


def test_how_many_fewer_threads_than_it_may_use_it_chose():
    choice = ThreadChoice((1, 2))
    assert choice.best == 1 and choice.fewer() == 0  # (not timed yet: no sign of load)
    run(choice, 2 * TRIAL, {1: 0.020, 2: 0.015})
    assert choice.fewer() == 0
    run(choice, 2 * TRIAL, {1: 0.020, 2: 0.080})
    assert choice.fewer() == 1 and ThreadChoice((3,)).fewer() == 0


def test_a_configured_count_is_kept(monkeypatch):
    monkeypatch.setattr(thread_choice, "TRY_EVERY", 4)
    choice = ThreadChoice((3,))
    assert set(run(choice, 50, {3: 0.5})) == {3}
    assert ThreadChoice((1, 1)).counts == (1,)  # (one core: nothing to choose)
