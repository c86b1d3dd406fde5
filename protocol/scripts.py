"""The Lua scripts in protocol/lua, run by name: EVALSHA, loading a script on
its first use (and again after a Redis restart), one `Script` per name,
called on whichever client is given; or queued on a pipeline by its SHA, for
a caller that handles a script Redis does not have yet (NoScriptError in the
pipeline's results; redis-py's own pipelined scripts would first ask Redis
whether it has them: a round trip more, each time), or by its text, for one
that does not."""
from __future__ import annotations

from pathlib import Path

from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script

_LUA = Path(__file__).with_name("lua")
_scripts: dict[str, Script] = {}


def _script(redis: Redis, name: str) -> Script:
    if name not in _scripts:
        _scripts[name] = redis.register_script((_LUA / f"{name}.lua").read_text())
    return _scripts[name]


def run_script(redis: Redis, name: str, keys: list[str], args: list) -> object:
    return _script(redis, name)(keys=keys, args=args, client=redis)


def queue_script(pipe: Pipeline, name: str, keys: list[str], args: list) -> None:
    pipe.evalsha(_script(pipe, name).sha, len(keys), *keys, *args)


def queue_script_text(pipe: Pipeline, name: str, keys: list[str], args: list) -> None:
    """EVAL with the script's text: never a NoScriptError (Redis caches the
    script by its hash; the text costs a few hundred bytes more to send)."""
    pipe.eval(_script(pipe, name).script, len(keys), *keys, *args)
