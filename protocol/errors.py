"""Typed errors, each with the HTTP status a client should see. Raised on
either side; each API renders them once, in its own shape (see dialects)."""
from __future__ import annotations


class SwitchboardError(Exception):
    """Base class. `status` is the HTTP status a client should see; `param`
    the request field at fault, if any; `retry_after` the seconds to wait."""

    status = 500

    def __init__(self, message: str, status: int | None = None, param: str | None = None,
                 retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.param = param
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


class InvalidRequest(SwitchboardError):
    """The client's request cannot be served as sent (400 unless said)."""

    status = 400


class RegistryError(SwitchboardError):
    """The model registry is invalid; the server refuses to start."""


class UnknownModel(SwitchboardError):
    status = 404

    def __init__(self, name: str, message: str | None = None):
        super().__init__(message or f'model "{name}" not found, try pulling it first')
        self.name = name


class UnknownBackend(RegistryError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(f'unknown backend "{name}" (known: {", ".join(sorted(known))})')


class BackendError(SwitchboardError):
    """A job could not be run; the message is safe to show to the client
    (it never contains a key)."""

    def __init__(self, message: str, status: int = 500, retry_after: int | None = None):
        super().__init__(message, status, retry_after=retry_after)


class PromptTooLong(SwitchboardError):
    """A prompt over the model's context, in tokens (400). Anthropic's
    clients compact the conversation on their API's own wording of it, so
    the numbers travel with the error for each dialect to word."""

    status = 400

    def __init__(self, message: str, prompt_tokens: int, context_tokens: int):
        super().__init__(message)
        self.prompt_tokens, self.context_tokens = prompt_tokens, context_tokens
