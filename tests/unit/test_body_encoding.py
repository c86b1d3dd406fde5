"""Request bodies sent compressed (Codex sends zstd): decompressed within
the body limit, refused clearly otherwise."""
from __future__ import annotations

import gzip
import zlib

import pytest
import zstandard

from app.body import decoded
from protocol.errors import SwitchboardError

BODY = b'{"model": "echo", "input": "hi"}'


@pytest.mark.parametrize("encoding, packed", [
    (None, BODY), ("identity", BODY), ("gzip", gzip.compress(BODY)), ("deflate", zlib.compress(BODY)),
    ("zstd", zstandard.ZstdCompressor().compress(BODY)), ("ZSTD", zstandard.ZstdCompressor().compress(BODY)),
], ids=["none", "identity", "gzip", "deflate", "zstd", "case"])
def test_each_encoding(encoding, packed):
    assert decoded(packed, encoding, 1000) == BODY


@pytest.mark.parametrize("encoding, pack", [("gzip", gzip.compress), ("zstd", zstandard.ZstdCompressor().compress)],
                         ids=["gzip", "zstd"])
def test_a_small_bomb_is_a_413(encoding, pack):
    bomb = pack(b" " * 10_000_000)
    assert len(bomb) < 20_000
    with pytest.raises(SwitchboardError) as refused:
        decoded(bomb, encoding, 1_000_000)
    assert refused.value.status == 413 and "once decompressed" in refused.value.message


def test_bad_data_and_unknown_encodings():
    with pytest.raises(SwitchboardError) as bad:
        decoded(b"not zstd", "zstd", 1000)
    assert bad.value.status == 400 and "not valid zstd data" in bad.value.message
    with pytest.raises(SwitchboardError) as unknown:
        decoded(BODY, "br", 1000)
    assert unknown.value.status == 415
