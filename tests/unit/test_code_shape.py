"""The runtime code's shape, held: no function over 40 lines or 6
parameters (Lua's included: the scheduling policy is code too), no line over
120 characters, and each process's story (the web process's request
lifecycle, the worker's job lifecycle) in one module of at most 135 lines,
read top-down."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("app", "workers", "jobqueue", "ledger", "telemetry", "protocol", "dialects", "catalog", "settings")
RUNTIME = sorted(p for folder in FOLDERS
                 for p in (ROOT / folder).rglob("*.py")) + [ROOT / "queue_config.py", ROOT / "broker_transport.py"]
LUA = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.lua"))
STORIES = ("app/jobs.py", "workers/runner.py")
_LUA_FUNCTION = re.compile(r"^(\s*)(?:local\s+)?function\s+([\w.:]+)\s*\(([^)]*)\)")


def _functions(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _parameters(function: ast.FunctionDef) -> int:
    args = function.args
    named = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "cls")]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def test_no_function_is_over_40_lines_or_6_parameters():
    too_long = [f"{p.relative_to(ROOT)}:{f.lineno} {f.name}" for p in RUNTIME for f in _functions(p)
                if f.end_lineno - f.lineno + 1 > 40]
    too_many = [f"{p.relative_to(ROOT)}:{f.lineno} {f.name}" for p in RUNTIME for f in _functions(p)
                if _parameters(f) > 6]
    assert (too_long, too_many) == ([], [])


def lua_functions(text: str):
    """(name, first line, lines, parameters) of each named function, nested
    ones included: it ends at the first `end` at its own indentation."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        found = _LUA_FUNCTION.match(line)
        if found:
            indent, name, parameters = found.groups()
            end = next(m for m in range(n + 1, len(lines)) if lines[m] == f"{indent}end")
            yield name, n + 1, end - n + 1, len([p for p in parameters.split(",") if p.strip()])


def test_lua_functions_are_measured_as_python_is():
    text = "local function a(x, y)\n  local function b()\n    return 1\n  end\n  return b()\nend\n"
    assert list(lua_functions(text)) == [("a", 1, 6, 2), ("b", 2, 3, 0)]


def test_no_lua_function_is_over_40_lines_or_6_parameters():
    shapes = [(p, *shape) for p in LUA for shape in lua_functions(p.read_text())]
    assert shapes, "no Lua function found: the pattern no longer matches how they are written"
    assert [f"{p.relative_to(ROOT)}:{line} {name}" for p, name, line, length, parameters in shapes
            if length > 40 or parameters > 6] == []


def test_no_line_is_over_120_characters():
    long_lines = [f"{p.relative_to(ROOT)}:{n}" for p in RUNTIME + LUA
                  for n, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 120]
    assert long_lines == []


@pytest.mark.parametrize("story", STORIES)
def test_each_process_tells_its_story_in_one_short_module(story):
    assert len((ROOT / story).read_text().splitlines()) <= 135
