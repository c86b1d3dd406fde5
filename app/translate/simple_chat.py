"""The simple chat API's shapes (in-house tools): one message object, or
lines/events `{"message": {...}, "done": false, "index": N}` with `index`
counting from 0 and only the last one `done: true`."""
from __future__ import annotations

from app.errors import ApiError, openai_error_body


def reply(completion_id: str, model: str, created: int, content: str) -> dict:
    return {"id": completion_id, "model": model, "created": created,
            "message": {"role": "assistant", "content": content}, "done": True}


class Lines:
    def __init__(self):
        self.index = 0

    def _line(self, content: str, done: bool) -> dict:
        line = {"message": {"role": "assistant", "content": content}, "done": done, "index": self.index}
        self.index += 1
        return line

    def text(self, text: str) -> dict:
        return self._line(text, False)

    def done(self) -> dict:
        return self._line("", True)


def error_object(error: ApiError) -> dict:
    """`{"message", "type", "code"}`: OpenAI's error without `param`; the
    code is the HTTP status."""
    body = openai_error_body(error)["error"]
    return {"message": body["message"], "type": body["type"], "code": error.status}


def error_body(error: ApiError) -> dict:
    return {"error": error_object(error)}
