"""workers/backends/chunked.py: chunked transfer coding decoded from bytes
cut anywhere, as reads return them."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from workers.backends.chunked import ChunkedDecoder, ChunkedError


def encode(pieces: list[bytes], extension: bytes = b"", trailers: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in pieces if p) + b"0\r\n" + trailers + b"\r\n"


def decode_in(reads: list[bytes]) -> tuple[bytes, ChunkedDecoder]:
    decoder = ChunkedDecoder()
    return b"".join(decoder.feed(read) for read in reads), decoder


def cut(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in points})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


@given(pieces=st.lists(st.binary(max_size=300), max_size=8), points=st.lists(st.integers(0, 10_000), max_size=12),
       extension=st.sampled_from([b"", b";name=value", b" ; x"]),
       trailers=st.sampled_from([b"", b"Trailer-Field: 1\r\n", b"A: 1\r\nB: 2\n"]))
def test_any_cut_of_a_chunked_body_decodes_to_its_bytes(pieces, points, extension, trailers):
    body, decoder = decode_in(cut(encode(pieces, extension, trailers), points))
    assert body == b"".join(pieces) and decoder.done and decoder.extra == b""


def test_each_read_gives_what_it_completed_and_nothing_is_held_back():
    decoder = ChunkedDecoder()
    assert decoder.feed(b"5\r\nhel") == b"hel"  # part of a chunk's data goes on at once
    assert decoder.feed(b"lo\r\n3\r\n") == b"lo"
    assert decoder.feed(b"abc\r\n4\r\nwxyz\r\n") == b"abcwxyz"  # two chunks in one read: one piece
    assert not decoder.done
    assert decoder.feed(b"0\r\n\r\n") == b"" and decoder.done


def test_bytes_after_the_body_are_kept_apart():
    body, decoder = decode_in([encode([b"hi"]) + b"HTTP/1.1 200 OK"])
    assert body == b"hi" and decoder.done and decoder.extra == b"HTTP/1.1 200 OK"


@pytest.mark.parametrize("framing, problem", [
    (b"zz\r\nhi\r\n", "not a hexadecimal number"),
    (b"-2\r\nhi\r\n", "negative"),
    (b"2\r\nhiXX", "not followed by CRLF"),
    (b"1" * 70_000, "too long"),
])
def test_broken_framing_is_an_error_naming_the_problem(framing, problem):
    with pytest.raises(ChunkedError, match=problem):
        ChunkedDecoder().feed(framing)
