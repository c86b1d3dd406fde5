"""Images in requests: OpenAI's `image_url` parts (data URLs only),
Ollama's `images` (base64) and Anthropic's base64 image blocks, into the
job's one form, with their limits.

No URL is ever fetched: a request must not make the server reach an address
of its choosing. The MIME type of Ollama's bare base64 is read from the
image's first bytes (an OpenAI upstream needs it in the data URL).
"""
from __future__ import annotations

import base64
import binascii
import re

from protocol.contract import Image
from protocol.errors import InvalidRequest

MAX_IMAGE_BYTES = 20 * 1024 * 1024  # per image, as OpenAI's API allows
_DATA_URL = re.compile(r"^data:(image/[a-zA-Z0-9.+-]+);base64,(.*)$", re.DOTALL)
_MAGIC = ((b"\x89PNG", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
          (b"RIFF", "image/webp"))


def _decoded_size(data: str, field: str) -> int:
    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{field}: not valid base64 image data", param=field) from None
    if size > MAX_IMAGE_BYTES:
        raise InvalidRequest(f"{field}: the image is {size} bytes; at most {MAX_IMAGE_BYTES} bytes "
                             "(20 MiB) per image are accepted", param=field)
    return size


def _sniffed_mime(data: str) -> str:
    head = base64.b64decode(data[:16] + "=" * (-len(data[:16]) % 4), validate=False)
    return next((mime for magic, mime in _MAGIC if head.startswith(magic)), "image/png")


def from_base64(data: str, field: str) -> Image:
    """Ollama: bare base64 (a data URL is accepted too)."""
    if data.startswith("data:"):
        return from_url(data, field)
    _decoded_size(data, field)
    return Image(data=data, mime=_sniffed_mime(data))


def check_vision(vision: bool, field: str) -> None:
    """An image for a model without the vision capability: refused, saying so."""
    if not vision:
        raise InvalidRequest(f"{field}: this model does not support images", param=field)


def from_typed_base64(data: str, mime: str | None, field: str) -> Image:
    """Anthropic: base64 with its media type beside it."""
    _decoded_size(data, field)
    return Image(data=data, mime=mime or _sniffed_mime(data))


def from_url(url: str, field: str) -> Image:
    """OpenAI: a data URL; anything else is refused, saying why."""
    match = _DATA_URL.match(url.strip())
    if match is None:
        if url.startswith(("http://", "https://")):
            raise InvalidRequest(f"{field}: remote image URLs are not fetched by this server; send the image "
                                 "inline as a data URL (data:image/png;base64,...)", param=field)
        raise InvalidRequest(f"{field}: an image must be a data URL (data:image/...;base64,...)", param=field)
    mime, data = match.groups()
    _decoded_size(data, field)
    return Image(data=data, mime=mime)
