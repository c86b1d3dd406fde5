"""An upstream's failures as the errors our client should see: refused
credentials 502, unknown model 404, busy 503 (with Retry-After), other
refusals 400, failures 502, timeouts 504. Errors name the upstream by host,
never by key."""
from __future__ import annotations

import json
import re

from catalog.upstream import UpstreamSettings
from protocol.errors import BackendError, PromptTooLong, SwitchboardError
from workers.backends.http_pool import HTTP_ERRORS, Response

ERROR_BODY_LIMIT = 65536  # bytes of an error reply read for its message


def _retry_after(response: Response) -> int | None:
    value = response.headers.get("retry-after", "")
    return int(value) if value.isdigit() else None


def _upstream_message(response: Response) -> str:
    try:
        raw = response.read(ERROR_BODY_LIMIT)
    except HTTP_ERRORS:
        return ""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")[:500]
    error = body.get("error", body) if isinstance(body, dict) else body
    message = error.get("message", error) if isinstance(error, dict) else error
    return str(message)[:500]


# An upstream's word for a prompt over its context, with the numbers in it:
# Anthropic's, and OpenAI's (vLLM and llama.cpp's server say it as OpenAI does).
_TOO_LONG = (re.compile(r"prompt is too long: (?P<prompt>\d+) tokens > (?P<context>\d+) maximum"),
             re.compile(r"maximum context length is (?P<context>\d+) tokens\. However, (?:your messages resulted in|"
                        r"you requested) (?P<prompt>\d+) tokens"))


def _too_long(message: str, name: str) -> PromptTooLong | None:
    """A refusal for a prompt over the context, as our typed error (Claude
    Code compacts its conversation on it)."""
    for pattern in _TOO_LONG:
        found = pattern.search(message)
        if found:
            prompt, context = int(found["prompt"]), int(found["context"])
            return PromptTooLong(f"upstream {name}: the prompt is {prompt} tokens, more than the context of {context}",
                                 prompt, context)
    return None


def status_error(response: Response, settings: UpstreamSettings, model: str) -> SwitchboardError:
    """An upstream's refusal, as the status our client should see."""
    name, status = settings.upstream_name, response.status_code
    if status in (401, 403):
        return BackendError(f"upstream {name} refused the credentials configured for it (HTTP {status})", 502)
    if status == 404:
        return BackendError(f'model "{model}" was not found at upstream {name} '
                            f'(as "{settings.upstream_model}"): {_upstream_message(response)}', 404)
    if status in (429, 503, 529):  # 529: Anthropic's "overloaded"
        return BackendError(f"upstream {name} is busy (HTTP {status}); try again later", 503, _retry_after(response))
    if 400 <= status < 500:
        message = _upstream_message(response)
        return _too_long(message, name) or BackendError(f"upstream {name} rejected the request (HTTP {status}): "
                                                        f"{message}", 400)
    return BackendError(f"upstream {name} failed (HTTP {status})", 502)


def transport_error(error: Exception, settings: UpstreamSettings) -> BackendError:
    name = settings.upstream_name
    if isinstance(error, TimeoutError):
        return BackendError(f"upstream {name} timed out ({type(error).__name__})", 504)
    return BackendError(f"cannot reach upstream {name}: {type(error).__name__}", 502)


def mid_stream_error(settings: UpstreamSettings, detail) -> BackendError:
    return BackendError(f"upstream {settings.upstream_name} failed mid-stream: {str(detail)[:300]}", 502)


def cancelled() -> BackendError:
    return BackendError("cancelled", 499)


def read_failure(error: Exception, settings: UpstreamSettings, cancelled_now: bool) -> BackendError:
    if cancelled_now:
        return cancelled()
    if isinstance(error, TimeoutError):
        return BackendError(f"upstream {settings.upstream_name} stopped sending tokens (timed out)", 504)
    return BackendError(f"upstream {settings.upstream_name} broke off the stream ({type(error).__name__})", 502)


def watchdog_timeout(settings: UpstreamSettings, started: bool) -> BackendError:
    if not started:
        return BackendError(f"upstream {settings.upstream_name} sent no token within "
                            f"{settings.first_token_timeout:g} s (timed out)", 504)
    return BackendError(f"upstream {settings.upstream_name} stopped sending tokens for "
                        f"{settings.idle_timeout:g} s (timed out)", 504)
