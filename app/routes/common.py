"""What every API's views do the same way: parse the body, find the model,
start the job and wait for its first result, and build the response."""
from __future__ import annotations

import hashlib
import itertools
import json
from typing import Callable, Iterator, TypeVar

from flask import Response, g, jsonify, request
from pydantic import BaseModel, ValidationError
from redis.exceptions import RedisError
from werkzeug.exceptions import RequestEntityTooLarge

from app.auth import ANONYMOUS, ApiKey
from app.conversation_log import logged
from app.errors import ApiError, ClientGone
from app.jobs import JobRun
from app.limits import Busy
from app.services import services
from queue_config import completion_queue
from workers.channels import supersede
from workers.contract import DoneEvent, ErrorEvent, Event, Job, TextEvent, ToolCallEvent
from workers.exceptions import UnknownModel
from workers.metrics import count_rejection
from workers.registry import ModelEntry

M = TypeVar("M", bound=BaseModel)


def parse_body(model: type[M]) -> M:
    try:
        body = json.loads(request.get_data() or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(400, f"invalid JSON body: {error}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    g.request_body = body  # for the (opt-in) conversation log
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise ApiError.from_validation(error) from None


def find_model(name: str) -> ModelEntry:
    try:
        entry = services().registry.get(name)
    except UnknownModel as error:
        raise ApiError.from_switchboard(error) from None
    if not current_key().allows(entry.name):
        raise ApiError(403, f'this API key has no access to model "{entry.name}"')
    return entry


def current_key() -> ApiKey:
    return g.get("api_key", ANONYMOUS)


def visible_entries() -> list[ModelEntry]:
    """The models the caller's key may use (all, when keys are off)."""
    return [e for e in services().registry.entries() if current_key().allows(e.name)]


def check_request_limits(messages: list | None = None, tools: list | None = None) -> None:
    settings = services().settings
    if messages is not None and len(messages) > settings.max_messages:
        raise ApiError(400, f"messages: at most {settings.max_messages} messages are accepted", "messages")
    if tools is not None and len(tools) > settings.max_tools:
        raise ApiError(400, f"tools: at most {settings.max_tools} tools are accepted", "tools")


def is_code_completion(job: Job) -> bool:
    return job.prompt is not None and bool(job.prompt.raw or job.prompt.suffix)


def client_identity() -> str:
    """Who is asking, for superseding: the credential and the address."""
    who = f"{request.headers.get('Authorization', '')}|{request.remote_addr}|{request.user_agent.string}"
    return hashlib.sha256(who.encode()).hexdigest()[:32]


def _key_limits() -> dict:
    key, settings = current_key(), services().settings
    return {"requests_per_minute": key.requests_per_minute or settings.requests_per_minute,
            "max_concurrent": key.max_concurrent or settings.max_concurrent,
            "max_queue": settings.max_queue}


def start_job(job: Job, entry: ModelEntry, stream: bool = False) -> tuple[JobRun, Iterator[Event]]:
    """Enqueue the job and wait for its first result, so that an error before
    any text (a prompt too long, a failed model) still gets a real status.
    Code completions go to the pool's priority queue and supersede the same
    client's previous completion for the model."""
    completion = is_code_completion(job)
    run = JobRun(services(), job, request.environ, current_key().name, _key_limits())
    try:
        run.start(completion_queue(entry.pool) if completion else entry.pool, entry.pool)
        if completion:  # only once admitted and queued: a refused request cancels nothing
            supersede(services().redis, client_identity(), entry.name, job.id)
        events = run.events(keepalive=stream)  # a stream starts at once if the job keeps it waiting
        first = next(events)
    except BaseException:
        run.close()
        raise
    if isinstance(first, ErrorEvent):
        run.close()
        raise ApiError(first.status, first.message, retry_after=first.retry_after)
    events = itertools.chain([first], events)
    folder = services().settings.conversation_log_dir
    if folder is not None:
        exchange = {"request_id": g.get("request_id"), "key": current_key().name, "path": request.path,
                    "model": entry.name, "request": g.get("request_body")}
        events = logged(events, folder, exchange)
    return run, events


def collect(run: JobRun, events: Iterator[Event]) -> tuple[str, list[ToolCallEvent], DoneEvent]:
    """For non-streaming replies: the whole text, the calls, the final event."""
    try:
        texts, calls, last = [], [], None
        for event in events:
            if isinstance(event, TextEvent):
                texts.append(event.text)
            elif isinstance(event, ToolCallEvent):
                calls.append(event)
            last = event
    finally:
        run.close()
    if isinstance(last, ErrorEvent):
        raise ApiError(last.status, last.message, retry_after=last.retry_after)
    return "".join(texts), calls, last


def stream_response(run: JobRun, frames: Iterator[bytes], content_type: str) -> Response:
    def body() -> Iterator[bytes]:
        try:
            yield from frames
        except ClientGone:
            return

    response = Response(body(), content_type=content_type)
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # keep reverse proxies from buffering the stream
    response.headers["X-Job-Id"] = run.job.id  # for operators (and the benchmark) to find the job
    response.call_on_close(run.close)  # runs even if the body was never iterated
    return response


def client_gone_response(_: ClientGone) -> Response:
    # Nobody reads this; 499 is nginx's "client closed request", for the logs.
    return Response(status=499)


OLLAMA_BUSY = "server busy, please try again.  maximum pending requests exceeded"  # Ollama's own words


def register_error_handlers(blueprint, error_body: Callable[[ApiError], dict], busy_status: int = 429) -> None:
    """Errors of this blueprint's routes, in its API's shape. Over a limit:
    429 with our message, or (Ollama routes) 503 with Ollama's."""
    def render(error: ApiError) -> Response:
        response = jsonify(error_body(error))
        response.status_code = error.status
        response.headers.update(error.headers)
        return response

    def render_busy(busy: Busy) -> Response:
        count_rejection(services().redis, busy.reason)
        message = OLLAMA_BUSY if busy_status == 503 else busy.message
        return render(ApiError(busy_status, message, retry_after=busy.retry_after))

    def render_redis_down(error: RedisError) -> Response:
        # Redis down, or every pooled connection busy for 10 s: retryable, and said in the API's shape.
        return render(ApiError(503, f"the job queue is unavailable ({type(error).__name__}); try again",
                               retry_after=1))

    def render_too_large(_: RequestEntityTooLarge) -> Response:
        count_rejection(services().redis, "too_large")
        return render(ApiError(413, f"the request body is larger than {services().settings.max_body_bytes} bytes"))

    blueprint.register_error_handler(ApiError, render)
    blueprint.register_error_handler(Busy, render_busy)
    blueprint.register_error_handler(RequestEntityTooLarge, render_too_large)
    blueprint.register_error_handler(RedisError, render_redis_down)
    blueprint.register_error_handler(ClientGone, client_gone_response)
