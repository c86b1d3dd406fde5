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
        that did not make a whole frame yet)."""
        self._pending += data
        out: list[bytes] = []
        while not self.done:
            if self._left:
                piece = self._pending[:self._left]
                if not piece:
                    break
                out.append(piece)
                self._left -= len(piece)
                self._pending = self._pending[len(piece):]
                if self._left:
                    break
                self._data_ends = True
            if self._data_ends and not self._end_data():
                break
            if not (self._trailer_line() if self._in_trailers else self._size_line()):
                break
        if self.done:
            self.extra, self._pending = self._pending, b""
        return b"".join(out)

    def _end_data(self) -> bool:
        if len(self._pending) < 2:
            return False
        if self._pending[:2] != b"\r\n":
            raise ChunkedError("a chunk's data is not followed by CRLF")
        self._pending, self._data_ends = self._pending[2:], False
        return True

    def _line(self) -> bytes | None:
        end = self._pending.find(b"\n")
        if end < 0:
            if len(self._pending) > MAX_LINE:
                raise ChunkedError("a chunk size or trailer line is too long")
            return None
        line, self._pending = self._pending[:end], self._pending[end + 1:]
        return line

    def _size_line(self) -> bool:
        line = self._line()
        if line is None:
            return False
        try:
            size = int(line.split(b";", 1)[0], 16)  # int() ignores the CR and spaces around
        except ValueError:
            raise ChunkedError(f"a chunk size is not a hexadecimal number: {line[:40]!r}") from None
        if size < 0:
            raise ChunkedError("a chunk size is negative")
        self._left = size
        self._in_trailers = size == 0
        return True

    def _trailer_line(self) -> bool:
        line = self._line()
        if line is None:
            return False
        if not line.strip(b"\r"):
            self.done = True
        return True
