"""Identity: who a request is, a room of its own below the processes.

    keys.py          API keys: the keys file (and its sign-in policy) and the
                     environment's keys, read into a KeyRing that says who a
                     presented key is (a minted key is found in Redis)
    people.py        who a person is (Identity), the names people and keys
                     may have, and how asking a provider about one fails
    provider.py      the office's OpenID provider, as its relying party
    signin.py        sign-in flows, console sessions, the recheck of each
                     person at the provider, suspension and revocation
    own_keys.py      the keys people mint for themselves
    device_login.py  command-line logins (the device authorization grant)
    sealing.py       what the server hands out or keeps sealed under the
                     office secret (reasoning items, refresh tokens)

Every credential becomes the same `ApiKey` (a name, its limits, its grants)
that the rest already uses: nothing downstream knows where a key came from.
No web framework is imported here (import-linter): the web process's hook
that asks for a key is app/auth.py, and sign-in's pages are
app/routes/signin.py. The rest of the web process knows sign-in only by the
narrow interface below.
"""
from __future__ import annotations

from typing import Protocol


class SignInService(Protocol):
    """What the web process, beyond sign-in's own pages, asks of sign-in
    (the console's people section)."""

    def people(self) -> list[dict]:
        """Everyone who signed in: their standing, groups and what they hold."""

    def revoke_everything(self, person: str, who: str, where: str) -> dict:
        """Every key, login and session the person holds, ended (audited as `who` from `where`)."""

    def forget(self, person: str, who: str, where: str) -> dict:
        """As revoke_everything, and the name released from the provider's account it was bound to."""

    def describe_admins(self) -> str:
        """Who is an admin, in words."""
