"""A job's text as a hosted model may see it: every secret in what it would
send (messages and their tool calls and thinking, a completion's prompt,
suffix and system prompt, embedding inputs) found, and, to redact, each
replaced by its placeholder.

Pure: the caller gives `findings_of(text)` (guard.detect.find, remembered by
digest), the person's placeholder key and the values their earlier requests
carried (`known`, placeholder -> value). A value found anywhere in the job,
or known from before, is replaced wherever it appears, in its JSON-escaped
form too: a password the model repeated in prose, restored into the
client's copy, is sent as its placeholder again on the next turn.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from guard.detect import Finding
from guard.placeholders import placeholder
from protocol.contract import Job, Message

# Names under which agents' file tools take the file (Claude Code's Read: file_path; others: path).
_PATH_ARGUMENTS = ("file_path", "path", "filename", "file", "target_file")
SHORTEST_VALUE = 8  # a known value shorter than this is replaced only where it was found (not everywhere)


@dataclass(frozen=True)
class Found:
    kind: str
    where: str  # "message 3 (tool result of /srv/app/.env)": for a refusal, never the value


@dataclass
class Scrubbed:
    job: Job
    found: list[Found] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # placeholder -> value, this job's and the known ones

    def counts(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.found))


def scrub(job: Job, findings_of: Callable[[str], list[Finding]], key: bytes, known: dict[str, str],
          redact: bool) -> Scrubbed:
    """What the job holds; with `redact`, the job with each secret replaced."""
    result = Scrubbed(job, values=dict(known))
    spans: dict[str, list[Finding]] = {}

    def look(where: str, text: str) -> str:
        found = findings_of(text) if text else []
        if found:
            spans[text] = found
            result.found += [Found(f.kind, where) for f in found]
            result.values |= {placeholder(key, f.kind, canonical(f.value(text))): canonical(f.value(text))
                              for f in found}
        return text

    map_texts(job, look)
    if redact and result.values:
        by_length = sorted(((v, p) for p, v in result.values.items()), key=lambda pair: -len(pair[0]))
        result.job = map_texts(job, lambda where, text: _replaced(text, spans.get(text, ()), key, by_length))
    return result


def _replaced(text: str, found, key: bytes, by_length: list[tuple[str, str]]) -> str:
    parts, at = [], 0
    for finding in found:
        parts += [text[at:finding.start], placeholder(key, finding.kind, canonical(finding.value(text)))]
        at = finding.end
    text = "".join(parts) + text[at:]
    for value, stand_in in by_length:
        if len(value) < SHORTEST_VALUE:
            continue
        if value in text:
            text = text.replace(value, stand_in)
        escaped = json.dumps(value, ensure_ascii=False)[1:-1]
        if escaped != value and escaped in text:
            text = text.replace(escaped, stand_in)
    return text


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


def map_texts(job: Job, change: Callable[[str, str], str]) -> Job:
    """The job with each text a hosted model would get passed through `change(where, text)`."""
    update: dict = {}
    if job.messages:
        calls = {c.id: c for m in job.messages for c in m.tool_calls}
        update["messages"] = [_message(i, m, calls, change) for i, m in enumerate(job.messages)]
    if job.prompt is not None:
        spec = job.prompt
        update["prompt"] = spec.model_copy(update={
            "prompt": change("the prompt", spec.prompt), "suffix": change("the suffix", spec.suffix),
            "system": None if spec.system is None else change("the system prompt", spec.system)})
    if job.embed is not None:
        update["embed"] = job.embed.model_copy(update={
            "inputs": [change(f"input {i}", text) for i, text in enumerate(job.embed.inputs)]})
    return job.model_copy(update=update)


def _message(index: int, message: Message, calls: dict, change: Callable[[str, str], str]) -> Message:
    where = f"message {index} ({_role(message, calls)})"
    update = {"content": change(where, message.content)}
    if message.thinking:
        update["thinking"] = change(f"message {index} (thinking)", message.thinking)
    if message.tool_calls:
        update["tool_calls"] = [call.model_copy(update={"arguments": change(
            f"message {index} (arguments of its call to {call.name})", call.arguments)})
            for call in message.tool_calls]
    return message.model_copy(update=update)


def _role(message: Message, calls: dict) -> str:
    """The message's role, and for a tool result the file its call named, if it named one."""
    if message.role != "tool":
        return message.role
    call = calls.get(message.tool_call_id)
    name = call.name if call is not None else message.tool_name
    path = _path_of(call.arguments) if call is not None else None
    return "tool result" + (f" of {name}" if name else "") + (f", file {path}" if path else "")


def _path_of(arguments: str) -> str | None:
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return next((value[name] for name in _PATH_ARGUMENTS if isinstance(value.get(name), str)), None)
