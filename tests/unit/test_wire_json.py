"""Upstream JSON: orjson where it can, the standard library's acceptance
everywhere (workers/backends/wire_json.py)."""
from __future__ import annotations

import math

import pytest

from workers.backends import wire_json


@pytest.mark.parametrize("text, expected", [
    pytest.param('{"choices":[{"delta":{"content":" hi"}}]}', {"choices": [{"delta": {"content": " hi"}}]},
                 id="a-chunk"),
    pytest.param(b'{"a": [1, 2.5, null, true]}', {"a": [1, 2.5, None, True]}, id="bytes"),
    pytest.param('{"s": "\\ud800"}', {"s": "\ud800"}, id="lone-surrogate-as-the-stdlib-reads-it"),
    pytest.param('{"x": -Infinity}', {"x": -math.inf}, id="infinity-as-the-stdlib-reads-it"),
])
def test_what_the_standard_library_reads_still_reads(text, expected):
    assert wire_json.loads(text) == expected


def test_nan_reads_as_the_standard_library_reads_it():
    assert math.isnan(wire_json.loads('{"logprob": NaN}')["logprob"])


@pytest.mark.parametrize("text", ["{", '{"a": }', "data: {}", ""])
def test_what_is_not_json_is_a_value_error(text):
    with pytest.raises(ValueError):
        wire_json.loads(text)
