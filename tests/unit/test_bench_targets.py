"""The benchmark's targets: a ratio is "met" or "missed" only when its
anchor was measured properly (three rounds or more, a plausible reading,
rounds within 2x of each other) and a p99 has samples enough; otherwise
the target is "unmeasured", in the printout and in the report."""
from __future__ import annotations

from scripts.benchkit import targets
from scripts.benchkit.report import _verdict
from scripts.benchkit.targets import Anchor, Check, Enough, Plausible

LIBRARY = "llama-cpp-python in-process, every core"
BATCHED = "anchor: llama.cpp batched, 4"
BEFORE = "before batching: Llama.generate, default threads"


def _batching(library_rounds: list[float], lone: float = 62.0) -> dict:
    """Section 2b's results, as local_batching.measure writes them."""
    rounds = {LIBRARY: library_rounds, BATCHED: [90.0, 92.0, 88.0], BEFORE: [60.0, 61.0, 59.0],
              "anchor: llama.cpp batched, 1": [80.0, 81.0, 79.0], "switchboard, 1": [lone] * 3,
              "switchboard, 4": [96.0] * 3}
    rates = {name: sorted(values)[len(values) // 2] for name, values in rounds.items()}
    return {"local_batching": {"rates": rates, "rounds": rounds, "alone_ms_rounds": [200.0, 210.0, 190.0],
                               "arrival": {"alone_ms": 200.0, "beside_three_ms": 260.0}}}


def _lone_person(results: dict) -> Check:
    return next(c for c in targets._batching(results) if "one person" in c.target)


def test_a_sane_anchor_gives_met_or_missed():
    assert _lone_person(_batching([88.0, 86.0, 90.0], lone=84.0)).verdict == "met"
    missed = _lone_person(_batching([88.0, 86.0, 90.0], lone=62.0))
    assert missed.verdict == "missed" and not missed.met and not missed.unmeasured


def test_an_anchor_reading_5x_too_slow_makes_its_target_unmeasured():
    """The quick run that printed 'met ... 44.2 vs 14.3 tok/s (309%)'."""
    check = _lone_person(_batching([17.6, 17.0, 18.1], lone=44.2))
    assert check.verdict == "unmeasured" and not check.met
    assert "outside its plausible" in check.unmeasured and "17.6 tok/s" in check.unmeasured


def test_a_library_reading_below_its_own_lesser_way_is_no_anchor():
    """The full run that printed 'met ... 81.1 vs 30.9 tok/s (262%)': with
    every core the library read 30.9 tok/s, inside its plausible range but
    below its own default threads (49.7), slowed in the harness's process."""
    results = _batching([30.4, 30.9, 31.7], lone=81.1)
    results["local_batching"]["rates"][BEFORE] = 49.7
    check = _lone_person(results)
    assert check.verdict == "unmeasured" and "below its default threads (49.7)" in check.unmeasured
    results["local_batching"]["rates"][BEFORE] = 33.0  # within the slack of a lesser way: a slow machine
    assert _lone_person(results).verdict == "met"


def test_an_anchor_whose_rounds_spread_more_than_2x_is_unmeasured():
    check = _lone_person(_batching([88.0, 30.0, 90.0], lone=84.0))
    assert check.verdict == "unmeasured" and "spread 30.0-90.0" in check.unmeasured


def test_an_anchor_of_fewer_than_three_rounds_is_unmeasured():
    assert "rounds 1, fewer than 3" in _lone_person(_batching([88.0], lone=84.0)).unmeasured
    older = _batching([88.0, 86.0, 90.0], lone=84.0)
    del older["local_batching"]["rounds"]  # a report from before the rounds were kept
    assert "rounds not recorded" in _lone_person(older).unmeasured


def test_every_check_of_section_2b_names_its_anchor_when_broken():
    results = _batching([88.0, 86.0, 90.0], lone=84.0)
    results["local_batching"]["rounds"][BATCHED] = [9.0, 9.5, 9.2]
    results["local_batching"]["alone_ms_rounds"] = [200.0]
    verdicts = {c.target.split(":")[0][:40]: c.verdict for c in targets._batching(results)}
    assert sorted(verdicts.values()) == ["met", "met", "unmeasured", "unmeasured"], verdicts


def _fairness(b_waits: int, job_rounds: list[float]) -> dict:
    fair = {"job_ms": {"p50": 202.0}, "job_ms_rounds": job_rounds, "failed": 0,
            "b_wait_ms": {"p99": 250.0, "n": b_waits}, "b_ttft_ms": {"p99": 260.0}}
    cache = {"rows": {"one person alone (warm)": {"p50": 100.0}, "4 people, prompt cache": {"p50": 150.0},
                      "4 people, every prompt new": {"p50": 900.0}}, "warm_ms_rounds": [100.0, 98.0, 103.0]}
    return {"sharing": {"fairness": {"rows": {"fair": fair, "fifo": {**fair, "b_wait_ms": {"p99": 2600.0}}}},
                        "burst": {"requests": 4, "succeeded": 4, "seconds": 1.0, "workers_need_seconds": 1.0},
                        "prompt_cache": cache}}


def test_a_p99_of_ten_waits_is_unmeasured_and_of_a_hundred_is_measured():
    few = targets._sharing(_fairness(10, [202.0, 203.0, 201.0]))[0]
    assert few.verdict == "unmeasured" and "10 samples, a p99 needs 100" in few.unmeasured
    enough = targets._sharing(_fairness(100, [202.0, 203.0, 201.0]))[0]
    assert enough.verdict == "met", enough
    slow_jobs = targets._sharing(_fairness(100, [1202.0, 1203.0, 1201.0]))[0]  # the echo job takes 200 ms
    assert slow_jobs.verdict == "unmeasured" and "one job read 1,202.0 ms" in slow_jobs.unmeasured


def test_a_server_that_reads_half_its_capacity_is_no_anchor():
    def section(one_rounds: list[float]) -> dict:
        rows = {"1": {"requests_per_second": sorted(one_rounds)[1], "rps_rounds": one_rounds},
                "2": {"requests_per_second": 48.0, "rps_rounds": [48.0] * 3}}
        return {"deployments": {"rows": rows, "one_best_rps": 25.0, "kill": {"failed": 0, "requests": 9, "cut": 0}}}
    assert targets._deployments(section([24.5, 24.0, 24.8]))[0].verdict == "met"
    broken = targets._deployments(section([10.0, 10.5, 9.8]))[0]  # two servers would read 4.8x one
    assert broken.verdict == "unmeasured" and "one server read 10.0 requests/s" in broken.unmeasured


def test_the_report_and_the_printout_say_unmeasured_and_why():
    check = Check("x <= 2 x y", "1 vs 1", True, "y: rounds 1, fewer than 3")
    assert check.verdict == "unmeasured" and _verdict(check) == "unmeasured: y: rounds 1, fewer than 3"
    assert _verdict(Check("t", "m", False)) == "**no**" and _verdict(Check("t", "m", True)) == "yes"


def test_anchor_and_sample_rules_on_their_own():
    plausible = Plausible(10.0, 100.0, "ms")
    assert Anchor("a", [50.0, 60.0, 55.0], plausible).problem() == ""
    assert "outside" in Anchor("a", [150.0, 160.0, 155.0], plausible).problem()
    assert "spread" in Anchor("a", [20.0, 50.0, 55.0], plausible).problem()
    assert "spread" in Anchor("a", [0.0, 50.0, 55.0], plausible).problem()
    assert Enough("w", 100, 100).problem() == "" and "99 samples" in Enough("w", 99, 100).problem()


def _overhead(direct_rounds: list[float], added_ms: float) -> dict:
    """Section 1's results at c=1 (instant), as overhead.measure and added write them."""
    hop = sorted(direct_rounds)[len(direct_rounds) // 2]
    rows = [{"way": "direct", "variant": "instant", "concurrency": 1, "ttft": {"p50": hop},
             "ttft_p50_rounds": direct_rounds}]
    added = [{"way": "switchboard", "variant": "instant", "concurrency": 1, "ttft_p50": added_ms, "ttft_p99": 9.0}]
    return {"overhead": {"rows": rows, "added": added}}


def _against_hop(results: dict) -> Check:
    return next(c for c in targets._overhead(results) if "the direct hop" in c.target)


def test_added_time_to_first_token_is_judged_against_the_direct_hop_of_the_same_run():
    assert _against_hop(_overhead([0.40, 0.38, 0.42], added_ms=1.1)).verdict == "met"
    missed = _against_hop(_overhead([0.22, 0.20, 0.24], added_ms=4.2))
    assert missed.verdict == "missed" and "(19.1x)" in missed.measured
    broken = _against_hop(_overhead([40.0, 41.0, 39.0], added_ms=4.2))  # a direct hop of 40 ms is no hop
    assert broken.verdict == "unmeasured" and "the direct hop read 40.0 ms" in broken.unmeasured
    older = _overhead([0.40, 0.38, 0.42], added_ms=1.1)
    del older["overhead"]["rows"][0]["ttft_p50_rounds"]  # a report from before the rounds were kept
    assert "rounds not recorded" in _against_hop(older).unmeasured
