"""A GGUF file's key/value metadata, read from its header without numpy.

The `gguf` package's reader maps the whole file into numpy arrays, tensor
table included, and importing it brings numpy: 21 MB resident in a web
process that wants seven values to describe a model. The header is simple
(GGUF versions 2 and 3, little-endian): b"GGUF", uint32 version, uint64
tensor count, uint64 key/value count, then each pair as a string key, a
uint32 type and the value. A string is a uint64 length and UTF-8 bytes; an
array a uint32 item type, a uint64 count and the items. Anything else (a
big-endian file, version 1) is UnsupportedHeader, and the caller asks the
`gguf` package instead.
"""
from __future__ import annotations

import importlib.util
import mmap
import struct
from functools import lru_cache
from pathlib import Path
from typing import Callable

MAGIC = b"GGUF"
VERSIONS = (2, 3)
STRING, ARRAY = 8, 9
# The value types that are one fixed-size number (GGUFValueType), as struct formats.
_NUMBERS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class UnsupportedHeader(ValueError):
    """Not a GGUF header this reader knows; the `gguf` package may."""


def read_metadata(path: Path, wanted: Callable[[str], bool]) -> dict:
    """The values of the keys `wanted` says yes to (the others are skipped, their arrays unread)."""
    with open(path, "rb") as file:
        if not path.stat().st_size:
            raise UnsupportedHeader(f"{path}: the file is empty")
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
            try:
                magic, version, _, count = struct.unpack_from("<4sIQQ", view, 0)
                if magic != MAGIC or version not in VERSIONS:
                    raise UnsupportedHeader(f"{path}: not a little-endian GGUF of version 2 or 3")
                return _pairs(view, 24, count, wanted)
            except (struct.error, KeyError, UnicodeDecodeError) as error:
                raise UnsupportedHeader(f"{path}: the header could not be read ({error})") from None


def _pairs(view: mmap.mmap, offset: int, count: int, wanted: Callable[[str], bool]) -> dict:
    found = {}
    for _ in range(count):
        key, offset = _string(view, offset)
        (kind,) = struct.unpack_from("<I", view, offset)
        if wanted(key):
            found[key], offset = _value(view, offset + 4, kind)
        else:
            offset = _skip(view, offset + 4, kind)
    return found


def _string(view: mmap.mmap, offset: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", view, offset)
    end = offset + 8 + length
    if end > len(view):
        raise struct.error("a string runs past the end of the file")
    return view[offset + 8:end].decode(), end


def _value(view: mmap.mmap, offset: int, kind: int) -> tuple[object, int]:
    if kind == STRING:
        return _string(view, offset)
    if kind == ARRAY:
        item_kind, count = struct.unpack_from("<IQ", view, offset)
        offset, items = offset + 12, []
        for _ in range(count):
            item, offset = _value(view, offset, item_kind)
            items.append(item)
        return items, offset
    form = _NUMBERS[kind]
    return struct.unpack_from(form, view, offset)[0], offset + struct.calcsize(form)


def _skip(view: mmap.mmap, offset: int, kind: int) -> int:
    if kind == ARRAY:
        item_kind, count = struct.unpack_from("<IQ", view, offset)
        offset += 12
        if item_kind in _NUMBERS:  # a run of numbers: skipped in one step
            return offset + count * struct.calcsize(_NUMBERS[item_kind])
        for _ in range(count):  # strings (a vocabulary), or arrays of arrays
            offset = _skip(view, offset, item_kind)
        return offset
    if kind == STRING:
        return offset + 8 + struct.unpack_from("<Q", view, offset)[0]
    return offset + struct.calcsize(_NUMBERS[kind])


@lru_cache(maxsize=1)
def file_type_names() -> dict[int, str]:
    """llama.cpp's file types (general.file_type) by number, from the `gguf`
    package's own table: its constants module loaded alone (it imports only
    the standard library; the package's __init__ would import numpy)."""
    package = importlib.util.find_spec("gguf")
    if package is None or not package.submodule_search_locations:
        return {}
    location = Path(next(iter(package.submodule_search_locations))) / "constants.py"
    spec = importlib.util.spec_from_file_location("_gguf_constants", location)
    constants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(constants)
    return {member.value: member.name for member in constants.LlamaFileType}
