"""Lua scripts run by name from a folder of them (`ScriptBook`): EVALSHA,
loading a script on its first use (and again after a Redis restart), one
`Script` per name, called on whichever client is given; or queued on a
pipeline by its SHA and sent with `execute`, the one place a script Redis
does not have yet (NoScriptError in the pipeline's results: a first use, or
a restart) is handled (redis-py's own pipelined scripts would first ask
Redis whether it has them: a round trip more, each time); or queued by its
text, never refused.

A line `-- include: NAME.lua` is replaced by that file of the folder: scripts
share functions that way (Redis runs each script alone)."""
from __future__ import annotations

import re
import weakref
from pathlib import Path

from redis import Redis
from redis.client import Pipeline
from redis.commands.core import Script
from redis.exceptions import NoScriptError


_INCLUDE = re.compile(r"^-- include: (\S+\.lua)$", re.MULTILINE)


class ScriptBook:
    def __init__(self, folder: Path):
        self._folder = folder
        self._scripts: dict[str, Script] = {}
        # Per pipeline, the scripts queued on it by SHA: (position, name, keys, args).
        self._queued: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _script(self, redis: Redis, name: str) -> Script:
        if name not in self._scripts:
            self._scripts[name] = redis.register_script(self._text(name))
        return self._scripts[name]

    def _text(self, name: str) -> str:
        text = (self._folder / f"{name}.lua").read_text()
        text = _INCLUDE.sub(lambda line: (self._folder / line[1]).read_text(), text)
        # What Redis gets: no comment lines, no blank ones (a script queued by its text is sent, and hashed by
        # Redis, whole on every call: deliver_final's 2.5 KB were two thirds comments).
        return "\n".join(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("--"))

    def run(self, redis: Redis, name: str, keys: list[str], args: list) -> object:
        return self._script(redis, name)(keys=keys, args=args, client=redis)

    def queue(self, pipe: Pipeline, name: str, keys: list[str], args: list) -> None:
        """Queued by its SHA: send the pipeline with `execute`."""
        self._queued.setdefault(pipe, []).append((len(pipe.command_stack), name, keys, args))
        pipe.evalsha(self._script(pipe, name).sha, len(keys), *keys, *args)

    def execute(self, pipe: Pipeline, redis: Redis) -> list:
        """The pipeline's results (errors among them, not raised). A script
        Redis did not have, and every script queued after it (which may have
        depended on it: a job queued only if admitted), run again alone,
        loaded, in order, their results in their places."""
        queued = self._queued.pop(pipe, [])
        results = pipe.execute(raise_on_error=False)
        missing = next((n for n, (at, *_) in enumerate(queued) if isinstance(results[at], NoScriptError)), None)
        for at, name, keys, args in queued[missing:] if missing is not None else ():
            try:
                results[at] = self.run(redis, name, keys, args)
            except Exception as error:  # noqa: BLE001 (among the results, as the pipeline's own are)
                results[at] = error
        return results

    def queue_text(self, pipe: Pipeline, name: str, keys: list[str], args: list) -> None:
        """EVAL with the script's text: never a NoScriptError (Redis caches the
        script by its hash; the text costs a few hundred bytes more to send)."""
        pipe.eval(self._script(pipe, name).script, len(keys), *keys, *args)
