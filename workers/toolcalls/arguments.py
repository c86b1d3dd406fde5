"""Typing argument values by the tool's JSON schema.

Emulated calls carry every value as text (`<parameter name="start">10</...>`);
clients validate against the schema, so "10" must become 10 for an integer.
A value that does not fit its schema is passed on as the text it was.
"""
from __future__ import annotations

import json
from typing import Any

_NOT_CONVERTED = object()


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_CONVERTED


def _as_type(text: str, kind: str) -> Any:
    stripped = text.strip()
    if kind == "string":
        return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(stripped.lower(), _NOT_CONVERTED)
    if kind == "null":
        return None if stripped.lower() in ("null", "none", "") else _NOT_CONVERTED
    value = _json_value(stripped)
    expected = {"integer": int, "number": (int, float), "object": dict, "array": list}.get(kind)
    if expected is None or isinstance(value, bool) or not isinstance(value, expected):
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            return int(value)
        return _NOT_CONVERTED
    return value


def _convert(text: str, schema: dict) -> Any:
    if "enum" in schema:
        for option in schema["enum"]:
            if text.strip() == str(option) or json.dumps(option) == text.strip():
                return option
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        kinds = [b for b in branches if isinstance(b, dict)]
        # Prefer a typed reading over a plain string when both would fit.
        for branch in sorted(kinds, key=lambda b: b.get("type") == "string"):
            value = _convert(text, branch)
            if value is not _NOT_CONVERTED:
                return value
        return _NOT_CONVERTED
    kinds = schema.get("type")
    for kind in (kinds if isinstance(kinds, list) else [kinds] if kinds else []):
        value = _as_type(text, kind)
        if value is not _NOT_CONVERTED:
            return value
    return text if not kinds else _NOT_CONVERTED


def convert_value(text: str, schema: dict | None) -> Any:
    """The value of one textual argument, typed by its schema if it fits."""
    value = _convert(text, schema or {})
    return text if value is _NOT_CONVERTED else value


def typed_arguments(arguments: dict[str, Any], parameters: dict) -> dict[str, Any]:
    """Type the textual values of a call's arguments; other values stay."""
    properties = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    return {
        name: convert_value(value, properties.get(name)) if isinstance(value, str) else value
        for name, value in arguments.items()
    }
