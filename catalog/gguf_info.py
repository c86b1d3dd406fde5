"""Model metadata read from a GGUF file's header (no weights are loaded).

Used by the front end for /api/tags and /api/show, so it must stay cheap:
only the header's key/value fields are read (gguf_header.py), without numpy.
"""
from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from catalog.gguf_header import UnsupportedHeader, file_type_names, read_metadata
from catalog.model_info import ModelInfo


def _quantization(file_type: int | None) -> str:
    name = file_type_names().get(file_type) if isinstance(file_type, int) else None
    return name.removeprefix("MOSTLY_") if name else "unknown"


_KEYS = {"general.architecture", "general.basename", "general.name", "general.size_label", "general.file_type",
         "tokenizer.chat_template"}


def _wanted(key: str) -> bool:
    return key in _KEYS or key.endswith(".context_length")  # (the architecture's, known once read)


def _metadata(path: Path) -> dict:
    """The header's values we describe a model with: read here (gguf_header.py), else by the `gguf` package."""
    try:
        return read_metadata(path, _wanted)
    except UnsupportedHeader:
        import gguf  # imported here: numpy is not needed for the files gguf_header reads

        reader = gguf.GGUFReader(os.fspath(path), "r")
        return {key: field.contents() for key, field in reader.fields.items() if _wanted(key)}


def _identity_digest(path: Path) -> str:
    # Hashing a multi-GB file at start-up is too slow; the path, size and
    # modification time identify the file as long as it is not rewritten.
    stat = path.stat()
    return hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()


@lru_cache(maxsize=64)
def read_gguf_info(path: Path) -> ModelInfo:
    fields = _metadata(path)
    arch = fields.get("general.architecture", "unknown")
    stat = path.stat()
    return ModelInfo(
        architecture=arch,
        basename=fields.get("general.basename") or fields.get("general.name") or path.stem,
        family=arch,
        context_length=int(fields.get(f"{arch}.context_length", 2048)),
        parameter_size=fields.get("general.size_label", ""),
        quantization_level=_quantization(fields.get("general.file_type")),
        format="gguf",
        size=stat.st_size,
        digest=_identity_digest(path),
        modified_at=datetime.fromtimestamp(stat.st_mtime, tz=timezone.utc),
        template=fields.get("tokenizer.chat_template") or "",
    )
