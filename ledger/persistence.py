"""Whether the Redis in use keeps what is written to it: every person's
usage and budget, the stored responses, the console's history and the
queued jobs live there, and a Redis that persists nothing loses them all
on a restart.

Asked with `CONFIG GET appendonly` and `save`; a hosted Redis that refuses
CONFIG may still say through `INFO persistence` that its append-only file
is on, else the answer is "unknown" (never a failure).
"""
from __future__ import annotations

from dataclasses import dataclass

from redis import Redis
from redis.exceptions import RedisError, ResponseError

# The one line an operator runs on a Redis that forgets (and what to start it with).
FIX = ("redis-cli CONFIG SET appendonly yes && redis-cli CONFIG REWRITE "
       "(or start redis-server with --appendonly yes)")


@dataclass(frozen=True)
class Persistence:
    mode: str  # "aof", "rdb", "aof+rdb", "none" or "unknown"
    detail: str = ""

    @property
    def forgets(self) -> bool:
        return self.mode == "none"

    def report(self) -> dict:
        """What /readyz and the console show."""
        found = {"persistence": self.mode}
        if self.forgets:
            found["warning"] = ("Redis persists nothing: a restart of it loses every person's usage and budget, "
                                f"the stored responses and the queued jobs. Fix: {FIX}")
        elif self.detail:
            found["detail"] = self.detail
        return found


def persistence(redis: Redis) -> Persistence:
    """How the server behind `redis` persists; "unknown" if it cannot tell."""
    try:  # one name per CONFIG GET: Redis before 7 takes no more
        appendonly, save = redis.pipeline(transaction=False).config_get("appendonly").config_get("save").execute()
    except ResponseError as error:  # CONFIG refused (a hosted Redis, an ACL)
        return _from_info(redis, f"CONFIG refused: {error}")
    except RedisError as error:
        return Persistence("unknown", f"Redis unreachable: {type(error).__name__}")
    modes = [mode for mode, on in (("aof", _value(appendonly, "appendonly") == "yes"),
                                   ("rdb", _value(save, "save").strip() != "")) if on]
    return Persistence("+".join(modes) or "none")


def _from_info(redis: Redis, why: str) -> Persistence:
    try:
        info = redis.info("persistence")
    except RedisError:
        return Persistence("unknown", why)
    if str(info.get("aof_enabled", "0")) == "1":
        return Persistence("aof")
    return Persistence("unknown", why)


def _value(config: dict, name: str) -> str:
    value = config.get(name, config.get(name.encode(), ""))
    return value.decode() if isinstance(value, bytes) else str(value)
