import pytest

from workers.stops import StopMatcher


def run(stops, pieces):
    matcher = StopMatcher(stops)
    out = [matcher.feed(p) for p in pieces]
    return "".join(out) + matcher.flush(), matcher.stopped


@pytest.mark.parametrize("stops, pieces, matched", [
    ([], ["a"], None),
    (["END", "x"], ["ab", "EN", "Dx"], "END"),
    (["ab", "b"], ["xab"], "ab"),
], ids=["none", "split", "earliest"])
def test_the_matcher_tells_which_stop_fired(stops, pieces, matched):
    matcher = StopMatcher(stops)
    for piece in pieces:
        matcher.feed(piece)
    assert matcher.matched == matched


@pytest.mark.parametrize("stops, pieces, expected", [
    ([], ["a", "b"], ("ab", False)),
    (["END"], ["abc", "E", "N", "D", "x"], ("abc", True)),
    (["END"], ["abE", "Nx"], ("abENx", False)),            # a false start is released
    (["END"], ["ab", "EN"], ("abEN", False)),              # held text is flushed at the end
    (["a", "bc"], ["xb", "cd"], ("x", True)),
    (["<|im_end|>"], ["Hi<|im", "_end|>more"], ("Hi", True)),
    (["ab", "b"], ["xab"], ("x", True)),                   # earliest match wins
], ids=["none", "split", "false-start", "flush", "two", "special", "earliest"])
def test_stop_matcher(stops, pieces, expected):
    assert run(stops, pieces) == expected
