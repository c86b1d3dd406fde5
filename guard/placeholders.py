"""A redacted secret's stand-in, and the way back to its value.

A placeholder is `SB_SECRET_<KIND>_<12 hex>`: an identifier models copy as
it is, into prose, code and tool call arguments. Its digits are an HMAC of
the value under the person's own key (derived from the office secret), so
the same secret is the same placeholder in every turn of a person's
conversation (a prompt cache stays warm) and another placeholder for
anyone else. Only the values a person's own requests carried are put back
into their replies: a placeholder they did not send (forged, or another
person's) is left as it is.

`Restorer` puts values back into a stream as it comes, holding back the
end of a chunk that could be the start of a placeholder until the next
chunk says whether it is one.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Callable

from guard.finding import Finding

PREFIX = "SB_SECRET_"
PLACEHOLDER = re.compile(r"SB_SECRET_[A-Z0-9_]{1,40}_[0-9a-f]{12}\b")
LONGEST = len(PREFIX) + 40 + 1 + 12


def person_key(office_secret: bytes, person: str) -> bytes:
    return hmac.new(office_secret, b"guard placeholders\n" + person.encode(), hashlib.sha256).digest()


def placeholder(key: bytes, kind: str, value: str) -> str:
    digits = hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:12]
    return f"{PREFIX}{kind.upper().replace('-', '_')}_{digits}"


def replace_findings(text: str, findings: list[Finding], key: bytes) -> tuple[str, dict[str, str]]:
    """The text with each finding's value replaced; placeholder -> value for what was replaced (the value
    as `canonical` takes it)."""
    parts, values, at = [], {}, 0
    for finding in findings:
        value = canonical(finding.value(text))
        stand_in = placeholder(key, finding.kind, value)
        values[stand_in] = value
        parts += [text[at:finding.start], stand_in]
        at = finding.end
    parts.append(text[at:])
    return "".join(parts), values


def canonical(value: str) -> str:
    """A value as it is, where it was found inside a JSON string (a tool call's arguments, a tool result a
    client sent as JSON): its escapes undone, so that a private key read from a file and the same key in
    the arguments of the call that writes it are one secret, one placeholder."""
    if "\\" not in value:
        return value
    try:
        decoded = json.loads(f'"{value}"')
    except ValueError:
        return value
    return decoded if isinstance(decoded, str) else value


def restore(text: str, value_of: Callable[[str], str | None]) -> str:
    """Each placeholder the person's map knows, replaced by its value; any other left as it is."""
    if PREFIX not in text:
        return text
    return PLACEHOLDER.sub(lambda m: value_of(m.group(0)) or m.group(0), text)


class Restorer:
    """`restore` over a stream of text chunks: feed each, then flush at its end."""

    def __init__(self, value_of: Callable[[str], str | None]):
        self.value_of, self.held = value_of, ""

    def feed(self, chunk: str) -> str:
        text = self.held + chunk
        keep = _unfinished(text)
        self.held = text[len(text) - keep:] if keep else ""
        return restore(text[:len(text) - keep] if keep else text, self.value_of)

    def flush(self) -> str:
        text, self.held = self.held, ""
        return restore(text, self.value_of)


_OPEN_TAIL = re.compile(r"[A-Z0-9_]{0,40}[0-9a-f]{0,12}")


def _unfinished(text: str) -> int:
    """How much of the end of `text` may be (the start of) a placeholder that the next chunk decides: the
    longest such tail (a whole one too: a 13th hex digit would make it none)."""
    for start in range(max(0, len(text) - LONGEST), len(text)):
        if text[start] != "S":
            continue
        tail = text[start:]
        if PREFIX.startswith(tail) or (tail.startswith(PREFIX) and _OPEN_TAIL.fullmatch(tail[len(PREFIX):])):
            return len(tail)
    return 0
