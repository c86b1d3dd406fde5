"""What sign-in's relying party (app/oidc.py) answers with: the person a
provider's sign-in names, and its failures, each with a message fit to
show the person (never a token). Apart from the relying party so that the
rest of the web process knows these without loading its HTTP client."""
from __future__ import annotations

from dataclasses import dataclass


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
