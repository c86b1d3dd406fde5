"""The keys people mint for themselves once signed in: those they make in
the console (to paste into a client that takes only a fixed key) and the
short-lived ones a command-line login hands its helper
(identity/device_login.py). Redis holds each as its SHA-256 digest and a record
(whose, its name, the person's groups when it was made, the models asked
for, when it ends), never the key itself.

Every use looks its key up, and its person's standing (two round trips),
so a revocation, a person the provider no longer answers for (`suspend`),
or one the server can no longer ask about (`standing`) takes effect at the
next request on every web process. What a key may do is decided at each
use by the keys file's sign-in policy for the groups the provider gave at
the person's last sign-in or recheck (identity/keys.py's SignInPolicy; the
groups in a key's record are those it was made with, kept for the record),
so a changed policy or group applies to keys already made.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, replace

from redis import Redis

from identity.keys import ApiKey, SignInPolicy, digest
from protocol import keys

KEY_PREFIX = "sb-"
LIST_SECONDS = 366 * 86400  # a person's list of keys outlives each of them (its members are pruned as they end)
# made in the console by the person; handed to a command-line login's helper; to an agent (identity/mcp_oauth.py)
SOURCES = ("console", "login", "mcp")


@dataclass(frozen=True)
class Wanted:
    """A key as its person asks for it."""
    label: str
    seconds: int
    models: tuple[str, ...] | None = None  # None: all their policy allows
    source: str = "console"  # one of SOURCES
    resource: str = ""  # a path only it is taken on (the MCP gateway's, "/mcp"); "" for every route


@dataclass(frozen=True)
class Minted:
    key: str  # shown once, to its person
    record: dict


def mint(redis: Redis, person: str, groups: tuple[str, ...], wanted: Wanted) -> Minted:
    key, now, seconds = KEY_PREFIX + secrets.token_urlsafe(32), time.time(), wanted.seconds
    record = {"id": "k-" + secrets.token_hex(5), "person": person, "label": wanted.label, "source": wanted.source,
              "groups": json.dumps(list(groups)), "models": json.dumps(list(wanted.models) if wanted.models else None),
              "created": now, "expires": now + seconds, "resource": wanted.resource}
    found = digest(key)
    with redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.own_key_key(found), mapping=record)
        pipe.expire(keys.own_key_key(found), seconds)
        pipe.zremrangebyscore(keys.own_keys_key(person), "-inf", now)  # (those that ended meanwhile)
        pipe.zadd(keys.own_keys_key(person), {found: now + seconds})
        pipe.expire(keys.own_keys_key(person), max(seconds, LIST_SECONDS))
        pipe.execute()
    return Minted(key, _shown(record))


def standing(redis: Redis, person: str) -> tuple[str, ...] | None:
    """A person's groups now, if they may hold credentials: signed in, not
    suspended, and with a refresh token the server asks the provider with
    (so that every credential of theirs can be checked and ended); else None."""
    refresh, groups = redis.hmget(keys.signin_person_key(person), "refresh", "groups")
    return tuple(json.loads(groups or "[]")) if refresh is not None else None


def key_of(redis: Redis, policy: SignInPolicy, key_digest: str) -> ApiKey | None:
    """The key of this digest as the routes see it, with the policy of its
    person's groups as the provider last named them; None for no such key,
    one that ended, or one whose person may hold none now (`standing`)."""
    record = {k.decode(): v.decode() for k, v in redis.hgetall(keys.own_key_key(key_digest)).items()}
    if not record or record.get("suspended") or float(record.get("expires", 0)) <= time.time():
        return None
    groups = standing(redis, record["person"])
    if groups is None:
        return None
    models = json.loads(record.get("models") or "null")
    return replace(policy.key_of(record["person"], groups, tuple(models) if models else None, record["id"]),
                   resource=record.get("resource", ""))


def of_person(redis: Redis, person: str) -> list[dict]:
    """Their keys that have not ended, the newest first (never the keys)."""
    digests = redis.zrangebyscore(keys.own_keys_key(person), time.time(), "+inf")
    with redis.pipeline(transaction=False) as pipe:
        for found in digests:
            pipe.hgetall(keys.own_key_key(found.decode()))
        records = pipe.execute()
    shown = [_shown({k.decode(): v.decode() for k, v in r.items()}) for r in records if r]
    return sorted(shown, key=lambda r: r["created"], reverse=True)


def revoke(redis: Redis, person: str, key_id: str) -> dict | None:
    """Their key of this id, revoked (its record as it was), or None."""
    for found in redis.zrange(keys.own_keys_key(person), 0, -1):
        record = {k.decode(): v.decode() for k, v in redis.hgetall(keys.own_key_key(found.decode())).items()}
        if record.get("id") == key_id:
            with redis.pipeline(transaction=False) as pipe:
                pipe.delete(keys.own_key_key(found.decode()))
                pipe.zrem(keys.own_keys_key(person), found)
                pipe.execute()
            return _shown(record)
    return None


def revoke_all(redis: Redis, person: str) -> int:
    digests = [found.decode() for found in redis.zrange(keys.own_keys_key(person), 0, -1)]
    return drop_indexed(redis, [keys.own_key_key(found) for found in digests], keys.own_keys_key(person))


def drop_indexed(redis: Redis, records: list[str], index: str) -> int:
    """Delete records and the index that lists them, in one round trip; how many records there were."""
    with redis.pipeline(transaction=False) as pipe:
        for record in records:
            pipe.delete(record)
        pipe.delete(index)
        return sum(pipe.execute()[:-1])


def suspend(redis: Redis, person: str, suspended: bool) -> None:
    """Their keys refused (or served again) from their next use."""
    with redis.pipeline(transaction=False) as pipe:
        for found, ends in redis.zrange(keys.own_keys_key(person), 0, -1, withscores=True):
            if suspended:  # (a record that ended meanwhile is made again: it ends when the key would have)
                pipe.hset(keys.own_key_key(found.decode()), "suspended", "1")
                pipe.expireat(keys.own_key_key(found.decode()), int(ends) + 1)
            else:
                pipe.hdel(keys.own_key_key(found.decode()), "suspended")
        pipe.execute()


def _shown(record: dict) -> dict:
    """A record as its person and the console see it."""
    return {"id": record["id"], "label": record.get("label", ""), "source": record.get("source", ""),
            "models": json.loads(record.get("models") or "null"), "created": float(record["created"]),
            "expires": float(record["expires"]), "suspended": bool(record.get("suspended"))}
