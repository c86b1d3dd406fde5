"""What sign-in's relying party (identity/provider.py) answers with: the person a
provider's sign-in names, and its failures, each with a message fit to
show the person (never a token). Apart from the relying party so that the
rest of the web process knows these without loading its HTTP client."""
from __future__ import annotations

import re
from dataclasses import dataclass

# A name for a person or a key: it appears in records, logs and Redis keys. Letters, digits and an
# address's signs; never a `:` (kept for the namespaces Switchboard gives: signin:<person>, trusted:<address>).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")


class SignInFailed(Exception):
    """The sign-in cannot go on; the message says why, to the person (never a token)."""


class ProviderUnavailable(SignInFailed):
    """The provider did not answer (or answered with a server error)."""


class NoLongerKnown(Exception):
    """The provider refused the person's refresh token: it no longer answers for them."""


@dataclass(frozen=True)
class Identity:
    person: str
    subject: str  # the provider's own id of them (`sub`)
    groups: tuple[str, ...]
    admin: bool
    refresh_token: str | None
