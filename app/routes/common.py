"""What every API's views do the same way: parse the body, find the model,
check request limits, and answer: a stream (SSE or NDJSON) or one object."""
from __future__ import annotations

from functools import partial
from typing import Callable, Iterator, TypeVar

from flask import Response, after_this_request, g, jsonify, request
from pydantic import BaseModel, ValidationError

import jobqueue
from app.auth import current_key
from app.body import decoded, read_json_object
from app.cork import Cork
from app.errors import ApiError, ClientGone
from app.fallback import start_on_a_model
from app.jobs import JobRun
from app.services import services
from app.streaming import (
    JSON_CONTENT_TYPE, NDJSON_CONTENT_TYPE, SSE_CONTENT_TYPE, ndjson, sse, stream, stream_array, whole_reply,
)
from catalog.registry import ModelEntry
from dialects.writer import Writer
from protocol.contract import Job
from protocol.events import Event
from protocol.errors import PromptTooLong, UnknownModel

M = TypeVar("M", bound=BaseModel)
TOOLS_LEFT_OUT = "X-Switchboard-Tools-Left-Out"  # the vendor-only tools a request named (web search, ...)


def parse_body(model: type[M]) -> M:
    raw = decoded(request.get_data(), request.headers.get("Content-Encoding"), services().settings.max_body_bytes)
    body = read_json_object(raw)
    g.request_body = body  # for the (opt-in) conversation log
    if g.get("exchange") is not None:  # the request's record keeps what the client named
        g.exchange.heard(body)
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise ApiError.from_validation(error) from None


def find_model(name: str) -> ModelEntry:
    """The model, if the caller's key may use it. A model the key may not
    use answers exactly as an unknown one (404): a restricted key cannot
    learn which models exist."""
    entry = services().registry.get(name)  # UnknownModel: 404
    if not current_key().allows(entry.name):
        raise UnknownModel(name)
    return entry


def find_served_model(name: str, shown: str) -> ModelEntry:
    """The model, for clients that ask for their vendor's names (claude-*,
    gemini-*): an unknown one is a 404 (`shown` as the client's API names
    it) naming the models the caller may use, and how to map other names."""
    try:
        return find_model(name)
    except UnknownModel:
        served = ", ".join(entry.name for entry in visible_entries()) or "none"
        raise UnknownModel(name, f"{shown} is not served here (served models: {served}; the operator can map "
                                 "other names to one with aliases in the registry)") from None


def visible_entries() -> list[ModelEntry]:
    """The models the caller's key may use (all, when keys are off)."""
    return [e for e in services().registry.entries() if current_key().allows(e.name)]


def note_tools_left_out(names: list[str]) -> None:
    """Tools only the API's own vendor runs (web search, ...) are left out of
    the job, not refused: the request log names them, and so does the
    response, in a header its client's SDK keeps, whichever way it answers."""
    if not names:
        return
    g.log_fields = g.get("log_fields", {}) | {"tools_left_out": names}
    if not g.get("says_tools_left_out"):  # (once a request: a WebSocket notes each turn's, and forgets them)
        g.says_tools_left_out = True
        after_this_request(_say_tools_left_out)


def _say_tools_left_out(response: Response) -> Response:
    names = g.get("log_fields", {}).get("tools_left_out")
    if names:
        response.headers[TOOLS_LEFT_OUT] = ", ".join(names).encode("ascii", "replace").decode()
    return response


def check_request_limits(messages: list | None = None, tools: list | None = None) -> None:
    settings = services().settings
    if messages is not None and len(messages) > settings.max_messages:
        raise ApiError(400, f"messages: at most {settings.max_messages} messages are accepted", "messages")
    if tools is not None and len(tools) > settings.max_tools:
        raise ApiError(400, f"tools: at most {settings.max_tools} tools are accepted", "tools")


def stream_response(run: JobRun, frames: Iterator[bytes], content_type: str) -> Response:
    cork = Cork(request.environ.get("gunicorn.socket"))

    def body() -> Iterator[bytes]:
        cork.hold()  # the headers wait for the first piece
        try:
            for piece in frames:
                if run.finished:
                    cork.hold()  # the last piece waits for the chunked terminator, written after the body
                yield piece
                if not run.finished:
                    cork.release()
        except ClientGone:
            return

    response = Response(body(), content_type=content_type)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # keep reverse proxies from buffering the stream
    response.headers["X-Job-Id"] = run.job.id  # for operators (and the benchmark) to find the job
    response.call_on_close(cork.release)  # gunicorn closes the body after the terminator
    response.call_on_close(run.close)  # runs even if the body was never iterated
    return response


FRAMINGS: dict[str, tuple[Callable[..., Iterator[bytes]], str]] = {
    "sse": (partial(stream, encode=sse), SSE_CONTENT_TYPE), "ndjson": (partial(stream, encode=ndjson),
                                                                       NDJSON_CONTENT_TYPE),
    "json-array": (stream_array, JSON_CONTENT_TYPE)}


def respond(run: JobRun, events: Iterator[Event], writer: Writer, framing: str | None) -> Response:
    """Stream the job's events in `framing` ("sse", "ndjson", "json-array"),
    or (None) answer with the writer's whole reply once the job finished."""
    if framing is not None:
        pieces, content_type = FRAMINGS[framing]
        return stream_response(run, pieces(events, writer, observers=tuple(run.observers),
                                           more_waiting=run.has_waiting), content_type)
    try:
        body = whole_reply(events, writer, tuple(run.observers))
    finally:
        run.close()
    return jsonify(body)


# No tokenizer makes a token of more characters than this (runs of spaces come
# closest): a prompt longer than the context times this cannot fit, and is
# refused before a worker spends time (and memory) tokenizing it.
MAX_CHARACTERS_PER_TOKEN = 64


def check_prompt_size(job: Job, entry: ModelEntry) -> int:
    """Its prompt's characters, if the model's context may hold them."""
    context = entry.info.context_length
    size, most = job.prompt_characters(), context * MAX_CHARACTERS_PER_TOKEN
    if size > most:  # at least size / MAX_CHARACTERS_PER_TOKEN tokens: the number it is refused with
        raise PromptTooLong(f'the prompt is {size} characters: more than the {context}-token context of '
                            f'"{entry.name}" can hold (at most {most} characters)',
                            -(-size // MAX_CHARACTERS_PER_TOKEN), context)
    return size


def check_job_kind(job: Job, entry: ModelEntry) -> None:
    """An embedding model makes no text; a chat model embeds only if the
    registry lets it (Ollama's wording for the first)."""
    if job.embed is None and entry.embeddings == "only":
        raise ApiError(400, f'"{entry.name}" does not support {"generate" if job.prompt else "chat"}')
    if job.embed is not None and entry.embeddings == "off":
        raise ApiError(400, f'"{entry.name}" does not support embeddings (the registry offers them from models '
                            'with embeddings = "only" or "also")')


def check_job(job: Job, entry: ModelEntry) -> None:
    """What every job is checked for before it is queued; and what it will be
    charged (its characters counted once, on the web's hot path)."""
    check_job_kind(job, entry)
    job.charge = jobqueue.estimate_charge(job, check_prompt_size(job, entry))


def start_serving(job: Job, entry: ModelEntry, writer: Writer, stream: bool,
                  watch_client: bool = True) -> tuple[JobRun, Iterator[Event]]:
    """Check the job, start it (or a fallback: the writer names who answers)."""
    check_job(job, entry)
    job.whole = not stream
    run, events = start_on_a_model(job, entry, stream, watch_client)
    if run.job.model != entry.name:
        writer.answered_by(run.job.model)
    return run, events


def serve(job: Job, entry: ModelEntry, writer: Writer, framing: str | None) -> Response:
    """Run the job and answer it: a view's last step."""
    run, events = start_serving(job, entry, writer, framing is not None)
    response = respond(run, events, writer, framing)
    response.headers["X-Switchboard-Model"] = run.job.model
    return response

