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
from typing import Callable, Iterator

from guard.finding import Finding
from guard.placeholders import replace_findings
from protocol.contract import Job, Message, ToolCall

# Names under which agents' file tools take the file (Claude Code's Read: file_path; others: path).
_PATH_ARGUMENTS = ("file_path", "path", "filename", "file", "target_file")
SHORTEST_VALUE = 8  # a known value shorter than this is replaced only where it was found (not everywhere)


@dataclass(frozen=True)
class Found:
    kind: str
    where: str  # "message 2 (tool result of Read, file /srv/app/.env)": for a refusal, never the value


@dataclass
class Scrubbed:
    job: Job
    found: list[Found] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)  # placeholder -> value, this job's and the known ones

    def counts(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.found))


def scrub(job: Job, findings_of: Callable[[str], list[Finding]], key: bytes, known: dict[str, str],
          redact: bool, remembered=lambda change, values: change) -> Scrubbed:
    """What the job holds; with `redact`, the job with each secret replaced (`remembered(change, values)`:
    the caller's memo of a text's redacted form, made with these values)."""
    result = Scrubbed(job, values=dict(known))
    spliced: dict[str, str] = {}  # a text with findings, each replaced by its placeholder
    for place, text in texts_of(job):
        found = findings_of(text) if text else []
        if found:
            where = describe(job, place)
            result.found += [Found(f.kind, where) for f in found]
            spliced[text], values = replace_findings(text, found, key)
            result.values |= values
    if redact and result.values:
        by_length = sorted(((v, json.dumps(v, ensure_ascii=False)[1:-1], p) for p, v in result.values.items()
                            if len(v) >= SHORTEST_VALUE), key=lambda each: -len(each[0]))
        change = remembered(lambda text: _replaced(text, spliced.get(text), by_length), frozenset(result.values))
        result.job = changed(job, change)
    return result


def _replaced(text: str, spliced: str | None, by_length: list[tuple[str, str, str]]) -> str:
    """The text with its findings (`spliced`, where it has any), then every known value (raw or
    JSON-escaped), replaced; the text itself (the same object) where nothing was."""
    if spliced is not None:
        text = spliced
    for value, escaped, stand_in in by_length:
        if value in text:
            text = text.replace(value, stand_in)
        if escaped != value and escaped in text:
            text = text.replace(escaped, stand_in)
    return text


def texts_of(job: Job) -> Iterator[tuple[tuple, str]]:
    """Each text a hosted model would get, with its place in the job (for `describe`)."""
    for i, message in enumerate(job.messages):
        yield ("content", i), message.content
        if message.thinking:
            yield ("thinking", i), message.thinking
        for j, call in enumerate(message.tool_calls):
            yield ("arguments", i, j), call.arguments
    if job.prompt is not None:
        yield ("prompt",), job.prompt.prompt
        yield ("suffix",), job.prompt.suffix
        if job.prompt.system is not None:
            yield ("system",), job.prompt.system
    for i, text in enumerate(job.embed.inputs if job.embed is not None else ()):
        yield ("input", i), text


def describe(job: Job, place: tuple) -> str:
    """Where a text is, as a refusal names it ("message 2 (tool result of Read, file /srv/app/.env)")."""
    kind, *at = place
    if kind == "content":
        calls = {c.id: c for m in job.messages for c in m.tool_calls}
        return f"message {at[0]} ({_role(job.messages[at[0]], calls)})"
    if kind == "thinking":
        return f"message {at[0]} (thinking)"
    if kind == "arguments":
        return f"message {at[0]} (arguments of its call to {job.messages[at[0]].tool_calls[at[1]].name})"
    return f"input {at[0]}" if kind == "input" else {"system": "the system prompt"}.get(kind, f"the {kind}")


def changed(job: Job, change: Callable[[str], str]) -> Job:
    """The job with each text passed through `change` (which returns the text itself where nothing changes:
    only what changed is copied)."""
    update: dict = {}
    messages = [_message(m, change) for m in job.messages]
    if any(new is not old for new, old in zip(messages, job.messages)):
        update["messages"] = messages
    if job.prompt is not None:
        spec = job.prompt
        update["prompt"] = spec.model_copy(update={"prompt": change(spec.prompt), "suffix": change(spec.suffix),
                                                   "system": None if spec.system is None else change(spec.system)})
    if job.embed is not None:
        update["embed"] = job.embed.model_copy(update={"inputs": [change(t) for t in job.embed.inputs]})
    return job.model_copy(update=update) if update else job


def _message(message: Message, change: Callable[[str], str]) -> Message:
    update = {}
    content = change(message.content)
    if content is not message.content:
        update["content"] = content
    thinking = change(message.thinking) if message.thinking else message.thinking
    if thinking is not message.thinking:
        update["thinking"] = thinking
    calls = [_call(call, change) for call in message.tool_calls]
    if any(new is not old for new, old in zip(calls, message.tool_calls)):
        update["tool_calls"] = calls
    return message.model_copy(update=update) if update else message


def _call(call: ToolCall, change: Callable[[str], str]) -> ToolCall:
    arguments = change(call.arguments)
    return call if arguments is call.arguments else call.model_copy(update={"arguments": arguments})


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
