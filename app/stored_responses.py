"""Stored responses (/v1/responses with `store: true`, OpenAI's default):
what `previous_response_id` continues and `GET /v1/responses/{id}` reads.

Each response is kept once, for SWITCHBOARD_RESPONSES_TTL seconds, with its
own input items, its output and the id of the response it continued (not
the whole history again: a long conversation costs what its turns cost).
Continuing walks that chain back. Only the person who created a response
can read, continue or delete it: for anyone else it does not exist.
"""
from __future__ import annotations

import json

from redis import Redis

from protocol.errors import SwitchboardError
from protocol.keys import stored_response_key

MAX_CHAIN = 1000  # turns a continuation walks back at most


class ResponseNotFound(SwitchboardError):
    status = 404

    def __init__(self, response_id: str):
        super().__init__(f"Response with id '{response_id}' not found.", param="previous_response_id")


def save(redis: Redis, owner: str, response: dict, input_items: list[dict], previous: str | None,
         ttl_seconds: int) -> None:
    record = {"owner": owner, "response": response, "input": input_items, "previous": previous}
    redis.set(stored_response_key(response["id"]), json.dumps(record, separators=(",", ":")), ex=ttl_seconds)


def _record(redis: Redis, owner: str, response_id: str) -> dict:
    raw = redis.get(stored_response_key(response_id))
    record = json.loads(raw) if raw else None
    if record is None or record["owner"] != owner:
        raise ResponseNotFound(response_id)
    return record


def load(redis: Redis, owner: str, response_id: str) -> dict:
    """The stored response object."""
    return _record(redis, owner, response_id)["response"]


def history(redis: Redis, owner: str, response_id: str) -> list[dict]:
    """The conversation up to and including the response: every turn's input
    items then its output items, oldest first."""
    turns, next_id = [], response_id
    while next_id is not None and len(turns) < MAX_CHAIN:
        record = _record(redis, owner, next_id)
        turns.append(record["input"] + record["response"]["output"])
        next_id = record["previous"]
    return [item for turn in reversed(turns) for item in turn]


def delete(redis: Redis, owner: str, response_id: str) -> None:
    _record(redis, owner, response_id)
    redis.delete(stored_response_key(response_id))
