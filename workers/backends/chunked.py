"""HTTP/1.1's chunked transfer coding (RFC 9112, section 7.1), decoded from
whatever bytes have arrived, however they cut the framing.

Why not http.client's own decoding: its reads return at most one chunk, and
an upstream sends every SSE event (every token) as a chunk of its own, so a
worker that fell behind by thirty tokens made thirty reads, and ran each
token through the relay, the filters and the publisher on its own (about
15 us a token). Decoding here, one read takes everything that has arrived.

What http.client accepts, this accepts too (chunk extensions, a size line
ended by a bare LF, trailer fields, which are skipped); what it would
misread (a chunk's data not followed by CRLF, a size that is not hex, a
line longer than it allows) is an error here.
"""
from __future__ import annotations

from http.client import HTTPException

MAX_LINE = 65536  # as http.client's _MAXLINE


class ChunkedError(HTTPException):
    """The body is not valid chunked coding (a broken stream, as
    http.client's own failures are)."""


class ChunkedDecoder:
    def __init__(self) -> None:
        self._pending = b""
        self._left = 0  # the current chunk's data bytes still to come
        self._data_ends = False  # the CRLF after a chunk's data is next
        self._in_trailers = False  # the last chunk came: trailer lines up to a blank one
        self.done = False  # the body ended
        self.extra = b""  # bytes after the body's end (a server that sent more than its reply)

    def feed(self, data: bytes) -> bytes:
        """The body's bytes carried by `data` (and by what came before it
        that did not make a whole frame yet). Read by position, not by
        slicing off what was read: a burst of a thousand chunks would copy
        its rest a thousand times."""
        buf = self._pending + data if self._pending else data
        pos, out = 0, []
        while not self.done:
            if self._left:
                piece = buf[pos:pos + self._left]
                if not piece:
                    break
                out.append(piece)
                self._left -= len(piece)
                pos += len(piece)
                if self._left:
                    break
                self._data_ends = True
            if self._data_ends:
                if len(buf) - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise ChunkedError("a chunk's data is not followed by CRLF")
                pos, self._data_ends = pos + 2, False
            end = buf.find(b"\n", pos)
            if end < 0:
                if len(buf) - pos > MAX_LINE:
                    raise ChunkedError("a chunk size or trailer line is too long")
                break
            line, pos = buf[pos:end], end + 1
            if self._in_trailers:
                self.done = not line.strip(b"\r")  # trailer fields up to a blank line
            else:
                self._size(line)
        rest = buf[pos:]
        self.extra, self._pending = (rest, b"") if self.done else (b"", rest)
        return b"".join(out)

    def _size(self, line: bytes) -> None:
        try:
            size = int(line.split(b";", 1)[0], 16)  # int() ignores the CR and spaces around
        except ValueError:
            raise ChunkedError(f"a chunk size is not a hexadecimal number: {line[:40]!r}") from None
        if size < 0:
            raise ChunkedError("a chunk size is negative")
        self._left = size
        self._in_trailers = size == 0
