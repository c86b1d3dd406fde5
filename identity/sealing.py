"""Sealed content: what this office's gateway hands a client to keep and
send back, opaque to everyone else (a reasoning item's `encrypted_content`,
a compaction item's). Authenticated encryption (AES-256-GCM, from the
`cryptography` package) under a key derived (HKDF-SHA256) from the office
secret, with the content's kind and the person it was made for as
associated data: a blob changed by one bit, made by another office, or sent
back by another person's key does not open.

The office secret is SWITCHBOARD_SECRET; unset, it is generated once into
the data directory (`secret`, mode 0600) and read from there by every web
process that shares the directory. Web processes on several machines need
the same secret: set it.
"""
from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path

from protocol.errors import InvalidRequest

PREFIX = "sb1."  # the format's version, so a later one can be told apart
NONCE_BYTES = 12
SECRET_FILE = "secret"


class SealedContentInvalid(InvalidRequest):
    code = "invalid_encrypted_content"  # OpenAI's code for a blob it cannot verify

    def __init__(self, param: str):
        super().__init__(f"{param}: the encrypted content could not be verified (it was made by another server "
                         "or for another key, or it was changed)", param=param)


class Sealer:
    """Made at every process's start; `cryptography` (some 7 MB resident with
    its OpenSSL bindings) is loaded at the first seal or open, so a process
    that never seals (most workers) never holds it."""

    def __init__(self, secret: bytes):
        self._secret = secret
        self._made = None  # the AEAD, once used (two threads making it at once make the same)

    @property
    def _aead(self):
        if self._made is None:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            self._made = AESGCM(HKDF(hashes.SHA256(), 32, salt=None, info=b"switchboard sealed content")
                                .derive(self._secret))
        return self._made

    def seal(self, kind: str, owner: str, text: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, text.encode(), _bound(kind, owner))
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, kind: str, owner: str, blob: str, param: str) -> str:
        """The text sealed in `blob`, or SealedContentInvalid (400) naming `param`."""
        if not isinstance(blob, str) or not blob.startswith(PREFIX):
            raise SealedContentInvalid(param)
        from cryptography.exceptions import InvalidTag

        try:
            raw = base64.urlsafe_b64decode(blob[len(PREFIX):].encode())
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _bound(kind, owner)).decode()
        except (InvalidTag, binascii.Error, ValueError):
            raise SealedContentInvalid(param) from None


def _bound(kind: str, owner: str) -> bytes:
    return f"{kind}\n{owner}".encode()


def office_secret(configured: str | None, data_dir: Path) -> bytes:
    """The configured secret, else the data directory's (made on first use;
    of two processes making it at once, one writes and both read it)."""
    if configured:
        return configured.encode()
    path = data_dir / SECRET_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        draft = data_dir / f".{SECRET_FILE}.{os.getpid()}"
        with os.fdopen(os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
            file.write(secrets.token_hex(32) + "\n")
        try:
            os.link(draft, path)  # whole or not at all: a process reading it never sees half
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip().encode()
