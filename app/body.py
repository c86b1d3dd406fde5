"""Reading a request body as JSON (decompressed first if it came so, within
the body limit), refusing what would hurt later: invalid
JSON, anything but an object, nesting deeper than any real request needs
(10,000 levels overflow the parser; a few hundred overflow the queue's
encoder), and lone UTF-16 surrogates (`"\\ud800"` is valid JSON but not
Unicode text: no model, log or queue can encode it). Each is a 400 naming
the problem, before any work is done."""
from __future__ import annotations

import json
import re
import zlib

import zstandard

from dialects.nesting import MAX_DEPTH, depth, nodes
from protocol.errors import InvalidRequest, SwitchboardError

# Only a body with a surrogate escape can hold a lone surrogate (pairs decode to one character).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def lone_surrogate(value) -> str | None:
    for item, _ in nodes(value):
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as error:
                return f"\\u{ord(item[error.start]):04x}"
    return None


def read_json_object(raw: bytes) -> dict:
    try:
        body = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"invalid JSON body: {error}") from None
    except RecursionError:
        raise InvalidRequest(f"the request body nests deeper than {MAX_DEPTH} levels") from None
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    if depth(body) > MAX_DEPTH:
        raise InvalidRequest(f"the request body nests deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(raw) and (lone := lone_surrogate(body)):
        raise InvalidRequest(f"the request body holds a lone UTF-16 surrogate ({lone}), which is not valid "
                             "Unicode text")
    return body


# Content-Encoding -> a decompressor of at most `limit` bytes (one more, to tell an overflow).
def _gunzip(raw: bytes, limit: int) -> bytes:
    return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(raw, limit + 1)


def _inflate(raw: bytes, limit: int) -> bytes:
    return zlib.decompressobj().decompress(raw, limit + 1)


def _unzstd(raw: bytes, limit: int) -> bytes:
    with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
        return reader.read(limit + 1)


_DECODERS = {"gzip": _gunzip, "x-gzip": _gunzip, "deflate": _inflate, "zstd": _unzstd}


def decoded(raw: bytes, encoding: str | None, limit: int) -> bytes:
    """A body as sent, or decompressed (Codex sends zstd): at most `limit`
    bytes once decompressed (413 past it, however small it came), so a
    small bomb cannot fill the server's memory."""
    encoding = (encoding or "identity").strip().lower()
    if encoding == "identity":
        return raw
    if encoding not in _DECODERS:
        raise SwitchboardError(f"Content-Encoding {encoding!r} is not supported (send identity, gzip, deflate or "
                               "zstd)", 415)
    try:
        body = _DECODERS[encoding](raw, limit)
    except (zlib.error, zstandard.ZstdError) as error:
        raise InvalidRequest(f"the request body is not valid {encoding} data ({error})") from None
    if len(body) > limit:
        raise SwitchboardError(f"the request body is larger than {limit} bytes once decompressed", 413)
    return body
