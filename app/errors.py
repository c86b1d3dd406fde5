"""The front end's errors and how each API renders them.

Every error is a `SwitchboardError` (protocol.errors) with its status; each
blueprint renders errors once, in its dialect's shape (the writers'
`error_body`). Over a limit: 429 with our message, or (Ollama routes) 503
with Ollama's own words; Redis down: a retryable 503."""
from __future__ import annotations

from typing import Callable

import logging

from flask import Flask, Response, g, jsonify, request
from pydantic import ValidationError
from redis.exceptions import RedisError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from app.services import services
from dialects import anthropic_writer, gemini_writer, ollama_writer, openai_writer, simple_chat
from dialects.common import TAG_MARK
from jobqueue import Busy, Verdict
from protocol.errors import SwitchboardError
from telemetry.metrics import count_rejection

OLLAMA_BUSY = "server busy, please try again.  maximum pending requests exceeded"  # Ollama's own words
_BRANCH_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _is_union_branch(part) -> bool:
    """pydantic names union branches in error locations: `str`, `list[...]`,
    and a tagged union's tag (dialects.common.union_by_type)."""
    return isinstance(part, str) and (part in _BRANCH_TAGS or "[" in part or part.startswith(TAG_MARK))


class ApiError(SwitchboardError):
    def __init__(self, status: int, message: str, param: str | None = None, retry_after: int | None = None):
        super().__init__(message, status, param, retry_after)

    @classmethod
    def from_validation(cls, error: ValidationError) -> "ApiError":
        # With unions, pydantic reports one error per branch; the deepest one
        # is the most specific (a bad part of a list, not "should be a string").
        deepest = max(error.errors(), key=lambda e: len(e["loc"]))
        field = ".".join(str(p) for p in deepest["loc"] if not _is_union_branch(p))
        message = f"{field}: {deepest['msg']}" if field else deepest["msg"]
        return cls(400, message, param=field or None)


class ClientGone(Exception):
    """The client closed its connection; there is nobody to answer."""


def client_gone_response(_: ClientGone) -> Response:
    # Nobody reads this; 499 is nginx's "client closed request", for the logs.
    return Response(status=499)


def error_response(error: SwitchboardError, error_body: Callable[[SwitchboardError], dict]) -> Response:
    response = jsonify(error_body(error))
    response.status_code = error.status
    response.headers.update(error.headers)
    return response


def busy_error(busy: Busy, status: int = 429) -> ApiError:
    """Over a limit (counted): `status`, in Ollama's words where that is 503."""
    count_rejection(services().redis, busy.reason)
    return ApiError(status, OLLAMA_BUSY if status == 503 else busy.message, retry_after=busy.retry_after)


def redis_down_error(error: RedisError) -> ApiError:
    """Redis down, or every pooled connection busy for 10 s: retryable."""
    return ApiError(503, f"the job queue is unavailable ({type(error).__name__}); try again", retry_after=1)


def known_error(error: Exception) -> SwitchboardError | None:
    """What a view's error is to its client, where the handlers below would
    render it (for answers that are not an HTTP response: a WebSocket's)."""
    if isinstance(error, SwitchboardError):
        return error
    if isinstance(error, Busy):
        return busy_error(error)
    if isinstance(error, RedisError):
        return redis_down_error(error)
    return None


def register_error_handlers(target, error_body: Callable[[SwitchboardError], dict], busy_status: int = 429,
                            queue_full_status: int | None = None) -> None:
    """Errors of a blueprint's (or the app's) routes, in its API's shape.
    Over a limit: `busy_status`, or for a full queue `queue_full_status`
    where the API has a status of its own for it (Anthropic's 529)."""
    def render(error: SwitchboardError) -> Response:
        return error_response(error, error_body)

    def render_busy(busy: Busy) -> Response:
        status = queue_full_status if busy.reason == Verdict.QUEUE_FULL and queue_full_status else busy_status
        return render(busy_error(busy, status))

    def render_redis_down(error: RedisError) -> Response:
        return render(redis_down_error(error))

    def render_too_large(_: RequestEntityTooLarge) -> Response:
        count_rejection(services().redis, "too_large")
        return render(ApiError(413, f"the request body is larger than {services().settings.max_body_bytes} bytes"))

    target.register_error_handler(SwitchboardError, render)
    target.register_error_handler(Busy, render_busy)
    target.register_error_handler(RequestEntityTooLarge, render_too_large)
    target.register_error_handler(RedisError, render_redis_down)
    target.register_error_handler(ClientGone, client_gone_response)


log = logging.getLogger("switchboard.errors")


def error_body_for_path(path: str) -> Callable[[SwitchboardError], dict]:
    """The error shape of the API a path belongs to: clients show the body
    as the error, and raw HTML confuses every one of them."""
    if path.startswith("/api/"):
        return ollama_writer.error_body
    if path.startswith("/chat/"):
        return simple_chat.error_body
    if path.startswith("/v1/messages"):
        return anthropic_error_body
    if path.startswith("/v1beta/") or (path.startswith("/v1/models/") and ":" in path):
        return gemini_writer.error_body
    return openai_writer.error_body


def anthropic_error_body(error: SwitchboardError) -> dict:
    """Anthropic's envelope carries the request's id."""
    return anthropic_writer.error_body(error, g.get("request_id"))


def _http_error(error: HTTPException) -> Response:
    if error.code == 404:
        message = f"no such endpoint: {request.method} {request.path}"
    elif error.code == 405:
        message = f"method {request.method} is not allowed on {request.path}"
    else:
        message = error.description or error.name
    response = error_response(SwitchboardError(message, error.code or 500), error_body_for_path(request.path))
    if error.code == 405 and error.valid_methods:
        response.headers["Allow"] = ", ".join(error.valid_methods)
    return response


def _unexpected(error: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_response(SwitchboardError("internal error; see the server log", 500),
                          error_body_for_path(request.path))


def install_fallback_errors(app: Flask) -> None:
    """Every answer is JSON in the dialect of its path: errors raised outside
    a blueprint (a key check on an unknown path), Flask's own 404 and 405,
    and anything unexpected (logged, never shown)."""
    app.register_error_handler(SwitchboardError,
                               lambda error: error_response(error, error_body_for_path(request.path)))
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
