"""The Lua scripts in protocol/lua, run by name: EVALSHA, loading a script on
its first use (and again after a Redis restart), one `Script` per name,
called on whichever client is given."""
from __future__ import annotations

from pathlib import Path

from redis import Redis
from redis.commands.core import Script

_LUA = Path(__file__).with_name("lua")
_scripts: dict[str, Script] = {}


def run_script(redis: Redis, name: str, keys: list[str], args: list) -> object:
    if name not in _scripts:
        _scripts[name] = redis.register_script((_LUA / f"{name}.lua").read_text())
    return _scripts[name](keys=keys, args=args, client=redis)
