"""The scaling benchmark's bookkeeping: a way's windows taken in turns add up
to one row (requests, seconds, CPU), so do a tree's profiles taken in turns,
and the report says how it was measured."""
from __future__ import annotations

from scripts.benchkit import profile
from scripts.benchkit.client import StreamResult
from scripts.benchkit.upstream import WORD
from scripts.benchkit.scale import Window, level_row
from scripts.benchkit.scale_report import scale_lines


def _result() -> StreamResult:
    return StreamResult(status=200, ttft=0.01, total=0.02, text=" ".join([WORD] * 32))


def test_a_ways_windows_add_up_to_one_row():
    window = Window()
    window.add([_result()] * 3, 8.0, {"web": 0.01, "worker": 0.02})
    window.add([_result()] * 5, 8.0, {"web": 0.03, "worker": 0.02})
    row = level_row("after", 16, window.results, window.seconds, 32, window.cpu)
    assert row["requests"] == 8 and row["rps"] == 0.5
    assert row["cpu_ms_per_request"] == {"web": 5.0, "worker": 5.0}


def test_the_direct_way_has_no_cpu():
    window = Window()
    window.add([_result()], 8.0, None)
    window.add([_result()], 8.0, None)
    assert window.cpu is None and "cpu_ms_per_request" not in level_row("direct", 1, window.results, 16.0, 32, None)


def test_the_report_says_the_ways_took_turns_and_reads_older_reports():
    scale = {"environment": {"date": "d", "command": "c", "cores": 2}, "configs": [], "before": None,
             "sizes": {"tokens": 32, "slots": 100, "warmup": 3.0, "window": 8.0, "rounds": 2}}
    assert "8 s measured, 2 times in turns with the other ways (the windows added up)" in scale_lines(scale)[2]
    del scale["sizes"]["rounds"]
    assert "8 s measured; requests/s" in scale_lines(scale)[2]


def test_profiles_take_turns_and_each_trees_samples_and_requests_add_up(monkeypatch):
    order = []

    def fake_record(spy, targets, port, seconds, folder, model):
        order.append(port)
        folder.mkdir(parents=True)
        for name in targets:  # py-spy's raw format: a stack, then its sample count
            (folder / f"{name}.txt").write_text(f"f (app/x.py:1) {port}\n")
        return 10, {}

    monkeypatch.setattr(profile, "py_spy", lambda: "py-spy")
    monkeypatch.setattr(profile, "_record", fake_record)
    got = profile.profile_in_turns({"after": ({"web": 1}, 1000), "before": ({"web": 2}, 2000)}, 4.0, rounds=3)
    assert order == [1000, 2000] * 3
    assert got["after"]["requests"] == got["before"]["requests"] == 30
    # 3 turns of 1000 samples (at 1,000 a second: 1 ms each) over 30 requests
    assert got["after"]["web"]["cpu_ms_per_request"] == 100.0 and got["before"]["web"]["cpu_ms_per_request"] == 200.0


def test_the_report_says_the_profiles_took_turns():
    scale = {"environment": {"date": "d", "command": "c", "cores": 2}, "before": "/tree",
             "sizes": {"tokens": 32, "slots": 100, "warmup": 3.0, "window": 8.0, "rounds": 2,
                       "profile_seconds": 8.0, "profile_rounds": 2},
             "configs": [{"webs": 1, "workers": 1, "rows": [], "profile": {"after": {"error": "-"}, "before": {"error": "-"}}}]}
    assert any("8 s per tree 2 times in turns" in line for line in scale_lines(scale))
