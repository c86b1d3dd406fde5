"""Command-line logins (`python scripts/admin.py login`): the OAuth 2.0
device authorization grant (RFC 8628) with Switchboard as its
authorization server, and the person's sign-in at the office's provider as
the way they approve it.

The tool asks for a device code (`start`) and shows its person a short
user code and a page of this server's (/login/device); signed in there,
the person approves it (`decide`); the tool, polling (`poll`), then gets a
login: a refresh token of Switchboard's own, kept on the person's machine,
which it trades for a short-lived key whenever it needs one (`use`, by the
token endpoint: app/routes/signin.py). Redis holds device codes, user codes
and logins' tokens as digests only; a login unused for SIGNIN_LOGIN_DAYS
ends, and revoking everything a person holds ends theirs at once.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass

from redis import Redis

from identity.keys import digest
from identity.own_keys import drop_indexed
from protocol import keys

DEVICE_CODE_SECONDS = 600
POLL_SECONDS = 2  # the interval a tool is told to poll at (RFC 8628 §3.2)
LOGIN_PREFIX = "sbl-"
# User codes: consonants only (no vowels, so no words; no 0/O or 1/I to confuse), 8 of them: 20^8 codes.
USER_CODE_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"


@dataclass(frozen=True)
class Started:
    device_code: str
    user_code: str
    expires_in: int
    interval: int


@dataclass(frozen=True)
class Login:
    person: str
    groups: tuple[str, ...]
    label: str
    token: str = ""  # the refresh token, only when the login is made (never read back)


class Refused(Exception):
    """An RFC 8628 / RFC 6749 error code, and what it means."""

    def __init__(self, error: str, description: str):
        super().__init__(description)
        self.error, self.description = error, description


def normal_user_code(text: str) -> str:
    """A user code as typed (any case, with or without its dash)."""
    letters = "".join(ch for ch in text.upper() if ch.isalpha())
    return f"{letters[:4]}-{letters[4:]}" if len(letters) == 8 else ""


def start(redis: Redis, label: str) -> Started:
    device_code = secrets.token_urlsafe(32)
    user_code = normal_user_code("".join(secrets.choice(USER_CODE_LETTERS) for _ in range(8)))
    found = digest(device_code)
    with redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.device_code_key(found), mapping={"user_code": user_code, "status": "pending",
                                                         "label": label[:100], "created": time.time()})
        pipe.expire(keys.device_code_key(found), DEVICE_CODE_SECONDS)
        pipe.set(keys.device_user_code_key(user_code), found, ex=DEVICE_CODE_SECONDS)
        pipe.execute()
    return Started(device_code, user_code, DEVICE_CODE_SECONDS, POLL_SECONDS)


def waiting(redis: Redis, user_code: str) -> dict | None:
    """The device login a user code names, while it waits for its person."""
    found = redis.get(keys.device_user_code_key(normal_user_code(user_code) or "-"))
    record = _record(redis, keys.device_code_key(found.decode())) if found else {}
    return record if record.get("status") == "pending" else None


def decide(redis: Redis, user_code: str, person: str, groups: tuple[str, ...], approved: bool) -> dict | None:
    """The person's answer to the device login of this user code (its
    record), or None if none waits. One answer per code: the user code is
    taken (GETDEL) by the one answer that gets it, so two people answering
    at once cannot both see theirs stand."""
    code = normal_user_code(user_code)
    found = redis.getdel(keys.device_user_code_key(code or "-"))
    if found is None:
        return None
    device = keys.device_code_key(found.decode())
    answer = {"status": "approved" if approved else "denied", "person": person, "groups": json.dumps(list(groups))}
    with redis.pipeline(transaction=True) as pipe:  # (only a code still pending: its record may have expired)
        pipe.hget(device, "status")
        pipe.hset(device, mapping=answer)
        pipe.expire(device, DEVICE_CODE_SECONDS)
        pipe.sadd(keys.device_approved_key(person), found)
        pipe.expire(keys.device_approved_key(person), DEVICE_CODE_SECONDS)
        status = pipe.execute()[0]
    if status != b"pending":
        redis.delete(device)
        return None
    return _record(redis, device)


def poll(redis: Redis, device_code: str) -> dict:
    """The record of the answer its person gave (taken now, once), or
    Refused with the RFC 8628 error: authorization_pending, slow_down,
    access_denied, expired_token. The caller makes the login (`new_login`)
    once it has checked that the person may still hold one."""
    key = keys.device_code_key(digest(device_code))
    record = _record(redis, key)
    if not record:
        raise Refused("expired_token", "no such device code, or it expired: run the login again")
    if record["status"] == "pending":
        if time.time() - float(record.get("polled", 0)) < POLL_SECONDS - 0.5:
            redis.hset(key, "polled", time.time())
            raise Refused("slow_down", f"poll at most every {POLL_SECONDS} s")
        redis.hset(key, "polled", time.time())
        raise Refused("authorization_pending", "the person has not approved it yet")
    if not redis.delete(key):  # (the one poll that takes it: a device code gives one login)
        raise Refused("expired_token", "this device code was used already")
    redis.srem(keys.device_approved_key(record["person"]), digest(device_code))
    if record["status"] != "approved":
        raise Refused("access_denied", "the person denied the login")
    return record


def new_login(redis: Redis, approved: dict, days: int) -> Login:
    return _new_login(redis, approved["person"], tuple(json.loads(approved["groups"])), approved.get("label", ""),
                      days)


def _new_login(redis: Redis, person: str, groups: tuple[str, ...], label: str, days: int) -> Login:
    token = LOGIN_PREFIX + secrets.token_urlsafe(32)
    found = digest(token)
    with redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.cli_login_key(found), mapping={"person": person, "groups": json.dumps(list(groups)),
                                                      "label": label, "created": time.time(), "used": time.time()})
        pipe.expire(keys.cli_login_key(found), days * 86400)
        pipe.sadd(keys.cli_logins_key(person), found)
        pipe.execute()
    return Login(person, groups, label, token)


def use(redis: Redis, token: str, days: int) -> Login:
    """The login of this refresh token (its unused life starts again), or Refused(invalid_grant)."""
    key = keys.cli_login_key(digest(token)) if token.startswith(LOGIN_PREFIX) else None
    record = _record(redis, key) if key else {}
    if not record.get("person"):
        raise Refused("invalid_grant", "this login has ended (revoked, expired, or never made): log in again")
    with redis.pipeline(transaction=False) as pipe:
        pipe.hset(key, "used", time.time())
        pipe.expire(key, days * 86400)
        pipe.execute()
    return Login(record["person"], tuple(json.loads(record["groups"])), record.get("label", ""))


def of_person(redis: Redis, person: str) -> list[dict]:
    """Their logins that have not ended (never their tokens)."""
    digests = [found.decode() for found in redis.smembers(keys.cli_logins_key(person))]
    with redis.pipeline(transaction=False) as pipe:
        for found in digests:
            pipe.hgetall(keys.cli_login_key(found))
        records = pipe.execute()
    gone = [found for found, record in zip(digests, records) if not record]
    if gone:
        redis.srem(keys.cli_logins_key(person), *gone)
    return sorted(({"label": r[b"label"].decode(), "created": float(r[b"created"]), "used": float(r[b"used"])}
                   for r in records if r), key=lambda r: r["created"], reverse=True)


def end_all(redis: Redis, person: str) -> int:
    """Their logins, and the device codes they approved that no tool has collected yet."""
    approved = [found.decode() for found in redis.smembers(keys.device_approved_key(person))]
    drop_indexed(redis, [keys.device_code_key(found) for found in approved], keys.device_approved_key(person))
    digests = [found.decode() for found in redis.smembers(keys.cli_logins_key(person))]
    return drop_indexed(redis, [keys.cli_login_key(found) for found in digests], keys.cli_logins_key(person))


def _record(redis: Redis, key: str) -> dict:
    return {k.decode(): v.decode() for k, v in redis.hgetall(key).items()}
