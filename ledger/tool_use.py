"""Who used which tools of the MCP gateway, per UTC day: a counter per
person, server and tool (the console's "tools used today"). Written once
per gateway tool call by the web process that relayed it; kept
USE_DAYS days."""
from __future__ import annotations

from redis import Redis
from redis.client import Pipeline

from protocol.keys import tool_use_key

SEPARATOR = "\x1f"
USE_DAYS = 35


def count(pipe: Pipeline, day: str, person: str, server: str, tool: str) -> None:
    pipe.hincrby(tool_use_key(day), SEPARATOR.join((person, server, tool)), 1)
    pipe.expire(tool_use_key(day), USE_DAYS * 86400)


def of_day(redis: Redis, day: str) -> list[dict]:
    """The day's tool use, most used first."""
    rows = []
    for field, calls in redis.hgetall(tool_use_key(day)).items():
        person, server, tool = field.decode().split(SEPARATOR, 2)
        rows.append({"person": person, "server": server, "tool": tool, "calls": int(calls)})
    return sorted(rows, key=lambda row: (-row["calls"], row["person"], row["server"], row["tool"]))
