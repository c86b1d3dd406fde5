"""One error type for the front end, and its body in each API dialect.

Pure data: the routes turn these bodies into responses or in-band lines."""
from __future__ import annotations

from pydantic import ValidationError

from workers.exceptions import SwitchboardError

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


_BRANCH_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _is_union_branch(part) -> bool:
    """pydantic names union branches in error locations: `str`, `list[...]`."""
    return isinstance(part, str) and (part in _BRANCH_TAGS or "[" in part)


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.retry_after = status, message, param, retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}

    @classmethod
    def from_validation(cls, error: ValidationError) -> "ApiError":
        # With unions, pydantic reports one error per branch; the deepest one
        # is the most specific (a bad part of a list, not "should be a string").
        deepest = max(error.errors(), key=lambda e: len(e["loc"]))
        field = ".".join(str(p) for p in deepest["loc"] if not _is_union_branch(p))
        message = f"{field}: {deepest['msg']}" if field else deepest["msg"]
        return cls(400, message, param=field or None)

    @classmethod
    def from_switchboard(cls, error: SwitchboardError) -> "ApiError":
        return cls(error.status, str(error))


class ClientGone(Exception):
    """The client closed its connection; there is nobody to answer."""


def openai_error_body(error: ApiError) -> dict:
    kind = _OPENAI_TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error")
    return {"error": {"message": error.message, "type": kind, "param": error.param, "code": None}}


def ollama_error_body(error: ApiError) -> dict:
    return {"error": error.message}
