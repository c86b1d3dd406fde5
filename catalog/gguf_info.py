"""Model metadata read from a GGUF file's header (no weights are loaded).

Used by the front end for /api/tags and /api/show, so it must stay cheap: the
`gguf` reader memory-maps the file and we only look at key/value fields.
"""
from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from catalog.model_info import ModelInfo


def _field(reader, key: str, default=None):
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _quantization(file_type: int | None) -> str:
    import gguf

    try:
        return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except (ValueError, TypeError):
        return "unknown"


def _identity_digest(path: Path) -> str:
    # Hashing a multi-GB file at start-up is too slow; the path, size and
    # modification time identify the file as long as it is not rewritten.
    stat = path.stat()
    return hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()


@lru_cache(maxsize=64)
def read_gguf_info(path: Path) -> ModelInfo:
    import gguf  # imported here: numpy is not needed until a GGUF is described

    reader = gguf.GGUFReader(os.fspath(path), "r")
    arch = _field(reader, "general.architecture", "unknown")
    stat = path.stat()
    return ModelInfo(
        architecture=arch,
        basename=_field(reader, "general.basename") or _field(reader, "general.name") or path.stem,
        family=arch,
        context_length=int(_field(reader, f"{arch}.context_length", 2048)),
        parameter_size=_field(reader, "general.size_label", ""),
        quantization_level=_quantization(_field(reader, "general.file_type")),
        format="gguf",
        size=stat.st_size,
        digest=_identity_digest(path),
        modified_at=datetime.fromtimestamp(stat.st_mtime, tz=timezone.utc),
        template=_field(reader, "tokenizer.chat_template", "") or "",
    )
