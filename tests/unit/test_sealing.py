"""Sealed content (identity/sealing.py): it opens only for the same office
secret, kind and person, and not at all once changed; the office secret is
generated once into the data directory, private to its owner."""
from __future__ import annotations

import stat

import pytest

from identity.sealing import PREFIX, SealedContentInvalid, Sealer, office_secret
from tests.unit.own_process import run_apart

SEALER = Sealer(b"office secret")


def test_a_blob_opens_for_its_own_kind_and_person_only():
    blob = SEALER.seal("reasoning", "alice", "I think, therefore")
    assert blob.startswith(PREFIX) and "think" not in blob
    assert SEALER.open("reasoning", "alice", blob, "input.0.encrypted_content") == "I think, therefore"
    assert SEALER.seal("reasoning", "alice", "same") != SEALER.seal("reasoning", "alice", "same")  # fresh nonces


@pytest.mark.parametrize("kind, person, blob", [
    ("reasoning", "bob", None),  # another person's key sends it back
    ("compaction", "alice", None),  # sealed as reasoning, sent as a compaction
    ("reasoning", "alice", "tampered"),
    ("reasoning", "alice", "other-office"),
    ("reasoning", "alice", "not ours"),
    ("reasoning", "alice", PREFIX + "!!!"),
], ids=["other-person", "other-kind", "one-byte-changed", "other-office", "no-prefix", "not-base64"])
def test_anything_else_is_a_400_naming_the_field(kind, person, blob):
    good = SEALER.seal("reasoning", "alice", "text")
    blob = {None: good, "tampered": good[:-6] + ("A" if good[-6] != "A" else "B") + good[-5:],
            "other-office": Sealer(b"another office").seal("reasoning", "alice", "text")}.get(blob, blob)
    with pytest.raises(SealedContentInvalid) as refused:
        SEALER.open(kind, person, blob, "input.3.encrypted_content")
    assert refused.value.status == 400 and refused.value.code == "invalid_encrypted_content"
    assert refused.value.param == "input.3.encrypted_content" and "could not be verified" in refused.value.message


def test_the_office_secret_is_made_once_and_kept_private(tmp_path):
    data = tmp_path / "data"
    first = office_secret(None, data)
    assert len(first) == 64 and office_secret(None, data) == first
    assert stat.S_IMODE((data / "secret").stat().st_mode) == 0o600
    assert list(data.iterdir()) == [data / "secret"]  # no draft left behind
    assert office_secret("configured", data) == b"configured"


def test_a_process_that_never_seals_never_loads_the_cipher_library():
    """The worker makes a Sealer at start; OpenSSL's bindings (some 7 MB resident) wait for the first seal."""
    loaded = run_apart("import json, sys; from identity.sealing import Sealer; import workers.tasks\n"
                       "sealer = Sealer(b's'); loaded = lambda: 'cryptography.hazmat.bindings._rust' in sys.modules\n"
                       "before = loaded(); sealer.open('k', 'p', sealer.seal('k', 'p', 't'), 'x')\n"
                       "print(json.dumps({'before': before, 'after': loaded()}))")
    assert loaded == {"before": False, "after": True}
