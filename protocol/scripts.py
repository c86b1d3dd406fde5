"""Lua scripts run by name from a folder of them (`ScriptBook`): EVALSHA,
loading a script on its first use (and again after a Redis restart), one
`Script` per name, called on whichever client is given; or queued on a
pipeline by its SHA, for a caller that handles a script Redis does not have
yet (NoScriptError in the pipeline's results; redis-py's own pipelined
scripts would first ask Redis whether it has them: a round trip more, each
time), or by its text, for one that does not.

A line `-- include: NAME.lua` is replaced by that file of the folder: scripts
share functions that way (Redis runs each script alone)."""
from __future__ import annotations

import re
from pathlib import Path

from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script


_INCLUDE = re.compile(r"^-- include: (\S+\.lua)$", re.MULTILINE)


class ScriptBook:
    def __init__(self, folder: Path):
        self._folder = folder
        self._scripts: dict[str, Script] = {}

    def _script(self, redis: Redis, name: str) -> Script:
        if name not in self._scripts:
            self._scripts[name] = redis.register_script(self._text(name))
        return self._scripts[name]

    def _text(self, name: str) -> str:
        text = (self._folder / f"{name}.lua").read_text()
        return _INCLUDE.sub(lambda line: (self._folder / line[1]).read_text(), text)

    def run(self, redis: Redis, name: str, keys: list[str], args: list) -> object:
        return self._script(redis, name)(keys=keys, args=args, client=redis)

    def queue(self, pipe: Pipeline, name: str, keys: list[str], args: list) -> None:
        pipe.evalsha(self._script(pipe, name).sha, len(keys), *keys, *args)

    def queue_text(self, pipe: Pipeline, name: str, keys: list[str], args: list) -> None:
        """EVAL with the script's text: never a NoScriptError (Redis caches the
        script by its hash; the text costs a few hundred bytes more to send)."""
        pipe.eval(self._script(pipe, name).script, len(keys), *keys, *args)
