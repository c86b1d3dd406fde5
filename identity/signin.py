"""Sign-in with the office's identity provider, turned into what the rest
already uses: a person's name, a console session that is an `ApiKey` of
that name (an admin's marked admin, from the provider's group claim or
SWITCHBOARD_OIDC_ADMINS), and keys of that name they mint for themselves
(identity/own_keys.py, identity/device_login.py). Nothing downstream knows whether a
key came from the keys file or from a sign-in.

- A sign-in under way is kept by its `state` for FLOW_SECONDS with its
  nonce and PKCE verifier, bound to the browser that started it (the digest
  of a cookie of its own): a provider's answer brought to another browser,
  or twice, is refused.
- A session is an unguessable id in a cookie (Secure, HttpOnly,
  SameSite=Lax, for SIGNIN_SESSION_SECONDS); Redis holds its digest.
- Each person who signed in is asked about again every
  SIGNIN_RECHECK_SECONDS (their refresh token at the provider, kept sealed,
  is used): by whichever web process holds the maintenance lock, in its
  periodic loop. A person the provider no longer answers for is suspended
  (their keys and logins refused from their next use, their sessions
  ended) until they sign in again, which only the provider can let them do.
- An admin can revoke everything a person holds at once: keys, logins and
  sessions end at their next use, on every web process.
Each mint, revocation, suspension and return is an audit-log entry under
the person's (or the admin's) identity.
"""
from __future__ import annotations

import json
import logging
import secrets
import socket
import time
from dataclasses import dataclass

from redis import Redis
from redis.exceptions import RedisError

from identity import device_login, mcp_accounts, own_keys
from identity.keys import ApiKey, digest, signed_in_name
from identity.people import Identity, NoLongerKnown, ProviderUnavailable, SignInFailed
from identity.sealing import SealedContentInvalid, Sealer
from ledger import audit
from protocol import keys

log = logging.getLogger(__name__)

FLOW_SECONDS = 600
SESSION_COOKIE, FLOW_COOKIE = "switchboard_session", "switchboard_signin"
RECHECK_LOOP_SECONDS = 2.0  # how often a web process looks for people due to be asked about again
UNAVAILABLE_RETRY_SECONDS = 60  # a provider that could not be asked is asked again this soon
PERSON_RECHECK_LOCK_SECONDS = 60  # at most one process asks about a person (a provider's answer takes seconds)
SEALED = "oidc-refresh-token"  # what the sealed refresh token is bound to (identity/sealing.py)


class StateMismatch(SignInFailed):
    """The provider's answer belongs to no sign-in this browser started."""


class NameTaken(SignInFailed):
    """The provider's username is bound here to another of its accounts."""


@dataclass(frozen=True)
class Session:
    person: str
    admin: bool
    groups: tuple[str, ...]
    expires: float

    def key(self) -> ApiKey:
        """The console's caller: the person, by their signed-in name (limits do not apply to pages)."""
        return ApiKey(signed_in_name(self.person), admin=self.admin)


class SignIn:
    def __init__(self, settings, redis: Redis, sealer: Sealer, provider=None):
        """`provider`: identity.provider.Provider (the office's, from the settings, by default)."""
        if provider is None:
            from identity.provider import Provider  # (only with sign-in on: the web process's one HTTP client)
            provider = Provider(settings)
        self.settings, self.redis, self.sealer, self.provider = settings, redis, sealer, provider

    # --- a sign-in under way -------------------------------------------------------------
    def begin(self, redirect_uri: str, next_path: str) -> tuple[str, str]:
        """The provider's URL to send the browser to, and the value of the
        cookie that binds the sign-in to that browser."""
        started, binding = self.provider.start(redirect_uri), secrets.token_urlsafe(24)
        self.redis.set(keys.signin_flow_key(started.state), json.dumps({
            "nonce": started.nonce, "verifier": started.verifier, "browser": digest(binding),
            "redirect_uri": redirect_uri, "next": next_path}), ex=FLOW_SECONDS)
        return started.url, binding

    def complete(self, state: str, code: str, binding: str) -> tuple[str, Identity, str]:
        """The new session's id, the person, and where they were going."""
        flow = self._take_flow(state)
        if flow is None or not secrets.compare_digest(flow["browser"], digest(binding or "")):
            raise StateMismatch("this sign-in's state does not match one this browser started (it expired, was "
                                "used already, or came from elsewhere): sign in again")
        identity = self.provider.finish(code, flow["redirect_uri"], flow["nonce"], flow["verifier"])
        self._check_bound(identity)
        self._remember(identity)
        return self._open_session(identity), identity, flow["next"]

    def _take_flow(self, state: str) -> dict | None:
        if not state or len(state) > 200:
            return None
        with self.redis.pipeline(transaction=True) as pipe:  # (read and gone in one step: used once)
            pipe.get(keys.signin_flow_key(state))
            pipe.delete(keys.signin_flow_key(state))
            found, _ = pipe.execute()
        return json.loads(found) if found else None

    # --- sessions --------------------------------------------------------------------------
    def _open_session(self, identity: Identity) -> str:
        session_id, seconds = secrets.token_urlsafe(32), self.settings.signin_session_seconds
        record = {"person": identity.person, "admin": int(identity.admin), "groups": json.dumps(identity.groups),
                  "expires": time.time() + seconds}
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(keys.signin_session_key(digest(session_id)), mapping=record)
            pipe.expire(keys.signin_session_key(digest(session_id)), seconds)
            pipe.sadd(keys.signin_sessions_key(identity.person), digest(session_id))
            pipe.expire(keys.signin_sessions_key(identity.person), seconds)
            pipe.execute()
        return session_id

    def session_of(self, cookie: str | None) -> Session | None:
        if not cookie or len(cookie) > 200:
            return None
        found = {k.decode(): v.decode() for k, v in self.redis.hgetall(keys.signin_session_key(digest(cookie))).items()}
        if "person" not in found or float(found.get("expires", 0)) <= time.time():
            return None
        return Session(found["person"], found["admin"] == "1", tuple(json.loads(found["groups"])),
                       float(found["expires"]))

    def end_session(self, cookie: str | None) -> None:
        session = self.session_of(cookie)
        if session is not None:
            self.redis.delete(keys.signin_session_key(digest(cookie)))
            self.redis.srem(keys.signin_sessions_key(session.person), digest(cookie))

    # --- people ----------------------------------------------------------------------------
    def _check_bound(self, identity: Identity) -> None:
        """A name is bound to the provider's account (issuer and `sub`) that
        first signed in with it: a recycled username is not its old holder."""
        subject, issuer = self.redis.hmget(keys.signin_person_key(identity.person), "subject", "issuer")
        if subject is not None and (subject.decode() != identity.subject or
                                    (issuer is not None and issuer.decode() != self.provider.issuer)):
            raise NameTaken(f"the name {identity.person!r} here belongs to another account of the identity provider "
                            "(a username given to someone new): an admin releases it first (the console's People "
                            "section, or POST /admin/people/<person>/forget)")

    def _remember(self, identity: Identity) -> None:
        """A person who just signed in: their refresh token kept (sealed) for
        asking about them again, and a suspension lifted."""
        person, days = identity.person, max(self.settings.signin_login_days, self.settings.signin_key_days)
        record = {"subject": identity.subject, "issuer": self.provider.issuer, "groups": json.dumps(identity.groups),
                  "admin": int(identity.admin), "signed_in": time.time()}
        if identity.refresh_token:
            record["refresh"] = self.sealer.seal(SEALED, person, identity.refresh_token)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(keys.signin_person_key(person), mapping=record)
            if not identity.refresh_token:
                pipe.hdel(keys.signin_person_key(person), "refresh")
            pipe.expire(keys.signin_person_key(person), days * 86400)
            if identity.refresh_token:
                pipe.zadd(keys.SIGNIN_RECHECKS, {person: time.time() + self.settings.signin_recheck_seconds})
            pipe.execute()
        if self.redis.delete(keys.signin_suspended_key(person)):  # (a suspension lifted)
            own_keys.suspend(self.redis, person, False)
            self.audit(f"{person} (signed in)", "", "person restored", person,
                       {"why": "signed in again at the identity provider"})

    def can_mint(self, person: str) -> bool:
        """Whether the server can ask the provider about them later (it holds their refresh token)."""
        return own_keys.standing(self.redis, person) is not None

    def suspended(self, person: str) -> bool:
        return bool(self.redis.exists(keys.signin_suspended_key(person)))

    def people(self) -> list[dict]:
        """Everyone who signed in and still holds something, for the console."""
        found = []
        for key in self.redis.scan_iter(match=keys.signin_person_key("*"), count=500):
            person = key.decode().removeprefix(keys.signin_person_key(""))
            if ":" in person:
                continue  # (a person's keys, logins or sessions: their own keys of the family)
            record = {k.decode(): v.decode() for k, v in self.redis.hgetall(key).items()}
            found.append({"person": person, "admin": record.get("admin") == "1",
                          "groups": json.loads(record.get("groups", "[]")),
                          "signed_in": float(record.get("signed_in", 0)), "suspended": self.suspended(person),
                          "keys": len(own_keys.of_person(self.redis, person)),
                          "logins": len(device_login.of_person(self.redis, person))})
        return sorted(found, key=lambda p: p["person"])

    def revoke_everything(self, person: str, who: str, where: str) -> dict:
        """Every key, login and session of theirs, ended now, and their accounts on MCP servers forgotten."""
        ended = self._end_everything(person)
        self.audit(who, where, "everything revoked", person, ended)
        return ended

    def forget(self, person: str, who: str, where: str) -> dict:
        """Everything they hold ended, and their name released from the provider's account it was bound to."""
        ended = self._end_everything(person)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.delete(keys.signin_person_key(person), keys.signin_suspended_key(person))
            pipe.zrem(keys.SIGNIN_RECHECKS, person)
            pipe.execute()
        self.audit(who, where, "person forgotten", person, ended)
        return ended

    def _end_everything(self, person: str) -> dict:
        return {"keys": own_keys.revoke_all(self.redis, person), "logins": device_login.end_all(self.redis, person),
                "sessions": self._end_sessions(person),
                "mcp_accounts": mcp_accounts.drop_all(self.redis, signed_in_name(person))}

    def _end_sessions(self, person: str) -> int:
        sessions = [s.decode() for s in self.redis.smembers(keys.signin_sessions_key(person))]
        return own_keys.drop_indexed(self.redis, [keys.signin_session_key(s) for s in sessions],
                                     keys.signin_sessions_key(person))

    # --- asking the provider again ---------------------------------------------------------
    def recheck_turn(self) -> None:
        """One turn of a process's loop asking about people again (every
        RECHECK_LOOP_SECONDS): done by whichever process holds the lock. It
        raises nothing, so the loop outlives a Redis restart."""
        try:
            if self.redis.set(keys.maintenance_lock_key("signin-recheck"), socket.gethostname(), nx=True,
                              px=int(RECHECK_LOOP_SECONDS * 1000)):
                self.recheck_due()
        except Exception as error:  # noqa: BLE001 - the loop must outlive a Redis restart
            log.warning("sign-in: asking the provider about people failed (%s)", type(error).__name__)

    def describe_admins(self) -> str:
        """Who is an admin, in words (the console says it to a person who is not)."""
        return self.provider.describe_admins()

    def recheck_due(self, now: float | None = None) -> list[str]:
        """Ask the provider about each person due; the people it no longer answers for, suspended."""
        now = now or time.time()
        suspended = []
        for entry in self.redis.zrangebyscore(keys.SIGNIN_RECHECKS, "-inf", now, start=0, num=50):
            person = entry.decode()
            if self._recheck(person, now) is False:
                suspended.append(person)
        return suspended

    def _recheck(self, person: str, now: float) -> bool | None:
        """True: still known; False: suspended now; None: ask again later. One
        process at a time asks about a person: providers rotate refresh tokens
        and take a spent one offered again for a stolen one (invalid_grant)."""
        lock = keys.maintenance_lock_key(f"signin-recheck:{person}")
        if not self.redis.set(lock, socket.gethostname(), nx=True, ex=PERSON_RECHECK_LOCK_SECONDS):
            return None
        try:
            return self._ask_about(person, now)
        finally:
            self.redis.delete(lock)

    def _ask_about(self, person: str, now: float) -> bool | None:
        sealed, subject, issuer = self.redis.hmget(keys.signin_person_key(person), "refresh", "subject", "issuer")
        if issuer is not None and issuer.decode() != self.provider.issuer:
            return None  # (another provider's person, on a Redis two offices share: theirs to ask)
        if sealed is None:
            self.redis.zrem(keys.SIGNIN_RECHECKS, person)
            return None
        try:
            token = self.provider.refresh(self.sealer.open(SEALED, person, sealed.decode(), "refresh"))
            # (kept at once: a provider that rotates its tokens takes the old one, offered again, for a stolen one)
            self.redis.hset(keys.signin_person_key(person), "refresh",
                            self.sealer.seal(SEALED, person, token["refresh_token"]))
            now_known = self.provider.described(token, (subject or b"").decode())
        except (ProviderUnavailable, SealedContentInvalid) as error:
            log.warning("sign-in: could not ask the provider about %s (%s); asking again later", person, error)
            self.redis.zadd(keys.SIGNIN_RECHECKS, {person: now + min(self.settings.signin_recheck_seconds,
                                                                      UNAVAILABLE_RETRY_SECONDS)})
            return None
        except NoLongerKnown as why:
            self._suspend(person, str(why))
            return False
        self._known_now(person, now_known, now)
        return True

    def _known_now(self, person: str, known: Identity, now: float) -> None:
        """What the provider says of them now: their groups and admin rights (which every key, login and
        session of theirs follows from its next use), and the refresh token to ask with next time."""
        described = {"groups": json.dumps(known.groups), "admin": int(known.admin)}
        sessions = [s.decode() for s in self.redis.smembers(keys.signin_sessions_key(person))]
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(keys.signin_person_key(person), mapping=described | {
                "refresh": self.sealer.seal(SEALED, person, known.refresh_token)})
            for session in sessions:
                pipe.hset(keys.signin_session_key(session), mapping=described)
            pipe.zadd(keys.SIGNIN_RECHECKS, {person: now + self.settings.signin_recheck_seconds})
            pipe.execute()
        for session in sessions:  # (a session that ended meanwhile was made again above: gone again)
            if not self.redis.hexists(keys.signin_session_key(session), "person"):
                self.redis.delete(keys.signin_session_key(session))

    def _suspend(self, person: str, why: str) -> None:
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(keys.signin_suspended_key(person), why[:200])
            pipe.hdel(keys.signin_person_key(person), "refresh")
            pipe.zrem(keys.SIGNIN_RECHECKS, person)
            pipe.execute()
        own_keys.suspend(self.redis, person, True)
        self._end_sessions(person)
        accounts = mcp_accounts.drop_all(self.redis, signed_in_name(person))
        self.audit(f"the identity provider ({self.provider.issuer})", socket.gethostname(), "person suspended",
                   person, {"why": f"the provider no longer answers for them: {why}"[:300], "mcp_accounts": accounts})

    # --- the audit log -----------------------------------------------------------------------
    def audit(self, who: str, where: str, action: str, target: str, details: dict) -> None:
        entry = {"time": time.time(), "who": who, "from": where, "action": action, "target": target,
                 "details": details}
        try:
            audit.append(self.redis, [entry], self.settings.audit_log_days)
        except RedisError as error:
            log.warning("the audit log could not be written (%s): %s %s", error, action, target)
