import pytest

from workers.toolcalls.arguments import convert_value, typed_arguments


@pytest.mark.parametrize("text, schema, expected", [
    ("10", {"type": "integer"}, 10),
    (" 10\n", {"type": "integer"}, 10),
    ("10.0", {"type": "integer"}, 10),
    ("1.5", {"type": "integer"}, "1.5"),
    ("1.5", {"type": "number"}, 1.5),
    ("3", {"type": "number"}, 3),
    ("true", {"type": "boolean"}, True),
    ("False", {"type": "boolean"}, False),
    ("yes", {"type": "boolean"}, "yes"),
    ("null", {"type": "null"}, None),
    ('{"a": [1]}', {"type": "object"}, {"a": [1]}),
    ("[1, 2]", {"type": "array"}, [1, 2]),
    ("not json", {"type": "array"}, "not json"),
    ("10", {"type": "string"}, "10"),
    ("a < b && c", {"type": "string"}, "a < b && c"),
    ("fast", {"enum": ["slow", "fast"]}, "fast"),
    ("2", {"enum": [1, 2]}, 2),
    ("7", {"anyOf": [{"type": "string"}, {"type": "integer"}]}, 7),
    ("seven", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, "seven"),
    ("null", {"type": ["integer", "null"]}, None),
    ("5", {"type": ["integer", "null"]}, 5),
    ("5", None, "5"),
    ("5", {"description": "no type"}, "5"),
], ids=lambda v: repr(v)[:20])
def test_convert_value(text, schema, expected):
    value = convert_value(text, schema)
    assert value == expected and type(value) is type(expected)


def test_typed_arguments_uses_the_property_schemas_and_keeps_typed_values():
    schema = {"type": "object", "properties": {"start": {"type": "integer"}, "path": {"type": "string"},
                                               "flag": {"type": "boolean"}}}
    assert typed_arguments({"start": "10", "path": "/a", "flag": True, "extra": "x"}, schema) == {
        "start": 10, "path": "/a", "flag": True, "extra": "x"}
