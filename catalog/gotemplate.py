"""The subset of Go templates that Ollama prompt templates use for plain
completion: `{{ .Prompt }}`, `{{ .System }}`, `{{ .Suffix }}`,
`{{ if .X }}…{{ else }}…{{ end }}`, and the `{{-`/`-}}` trim markers.
Enough for a request-level `template` and for the FIM templates we show."""
from __future__ import annotations

import re

from protocol.errors import InvalidRequest

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.DOTALL)


def _tokens(template: str) -> list[tuple[str, str]]:
    """("text", s) and ("action", s) pieces, trim markers applied."""
    tokens: list[tuple[str, str]] = []
    position = 0
    for match in _ACTION.finditer(template):
        text = template[position:match.start()]
        if match.group(1):
            text = text.rstrip()
        tokens.append(("text", text))
        tokens.append(("action", match.group(2)))
        position = match.end()
        if match.group(3):
            rest = template[position:]
            position += len(rest) - len(rest.lstrip())
    tokens.append(("text", template[position:]))
    return tokens


def _value(expression: str, values: dict[str, str]) -> str:
    if not expression.startswith("."):
        raise InvalidRequest(f"template: unsupported expression {{{{ {expression} }}}}", param="template")
    return values.get(expression[1:], "")


MAX_NESTING = 32  # real templates nest two or three `if`s


def _render(tokens: list[tuple[str, str]], i: int, values: dict[str, str], stop: set[str],
            nesting: int = 0) -> tuple[str, int]:
    if nesting > MAX_NESTING:
        raise InvalidRequest(f"template: `if` blocks nest deeper than {MAX_NESTING} levels", param="template")
    out: list[str] = []
    while i < len(tokens):
        kind, body = tokens[i]
        if kind == "text":
            out.append(body)
            i += 1
            continue
        word = body.split(" ", 1)[0]
        if word in stop:
            return "".join(out), i
        if word == "if":
            then, i = _render(tokens, i + 1, values, {"else", "end"}, nesting + 1)
            otherwise = ""
            if tokens[i][1] == "else":
                otherwise, i = _render(tokens, i + 1, values, {"end"}, nesting + 1)
            out.append(then if _value(body[3:].strip(), values) else otherwise)
        else:
            out.append(_value(body, values))
        i += 1
    if stop:
        raise InvalidRequest("template: missing {{ end }}", param="template")
    return "".join(out), i


def render(template: str, prompt: str = "", system: str = "", suffix: str = "") -> str:
    values = {"Prompt": prompt, "System": system, "Suffix": suffix, "Response": ""}
    text, _ = _render(_tokens(template), 0, values, set())
    return text
