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
from typing import Callable

from redis import Redis

from protocol.errors import SwitchboardError
from protocol.keys import background_key, response_events_key, stored_response_key

MAX_CHAIN = 1000  # turns a continuation walks back at most


class ResponseNotFound(SwitchboardError):
    status = 404

    def __init__(self, response_id: str):
        super().__init__(f"Response with id '{response_id}' not found.", param="previous_response_id")

    code = "previous_response_not_found"  # OpenAI's code for it


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


def history(redis: Redis, owner: str, response_id: str) -> Conversation:
    """The conversation up to and including the response: every turn's input
    items then its output items, oldest first."""
    return walk(lambda next_id: _record(redis, owner, next_id), response_id)


class Conversation(list):
    """A chain's items, oldest first; `root`: the id of its first response
    (the oldest within MAX_CHAIN), which names the chain's session."""
    root: str = ""


def walk(record_of: Callable[[str], dict], response_id: str) -> Conversation:
    """A chain of records, each with its turn's input, its response and the
    id it continued, as one list of items, oldest first."""
    turns, next_id, root = [], response_id, response_id
    while next_id is not None and len(turns) < MAX_CHAIN:
        record = record_of(next_id)
        turns.append(record["input"] + record["response"]["output"])
        root, next_id = next_id, record["previous"]
    conversation = Conversation(item for turn in reversed(turns) for item in turn)
    conversation.root = root
    return conversation


class ConnectionMemory:
    """The responses made on one Responses WebSocket, stored or not (Codex
    sends `store: false` and, on the same socket, only a turn's new items
    after `previous_response_id`). The newest MAX_CHAIN are kept; a chain
    that leaves this socket's memory continues from Redis if it was stored."""

    def __init__(self, redis: Redis, owner: str):
        self._redis, self._owner = redis, owner
        self._records: dict[str, dict] = {}

    def save(self, response: dict, input_items: list[dict], previous: str | None) -> None:
        self._records[response["id"]] = {"response": response, "input": input_items, "previous": previous}
        if len(self._records) > MAX_CHAIN:
            del self._records[next(iter(self._records))]

    def _record(self, response_id: str) -> dict:
        return self._records.get(response_id) or _record(self._redis, self._owner, response_id)

    def history(self, response_id: str) -> Conversation:
        return walk(self._record, response_id)


def replace_response(redis: Redis, response_id: str, response: dict) -> None:
    """A record's response object anew (a background response's status as
    it moves on), the rest of the record and its lifetime kept."""
    key = stored_response_key(response_id)
    raw = redis.get(key)
    if raw:
        record = json.loads(raw) | {"response": response}
        redis.set(key, json.dumps(record, separators=(",", ":")), keepttl=True)


def delete(redis: Redis, owner: str, response_id: str) -> None:
    """The response, and a background one's run and event log."""
    _record(redis, owner, response_id)
    redis.delete(stored_response_key(response_id), background_key(response_id), response_events_key(response_id))
