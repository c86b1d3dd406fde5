"""The runtime code's shape, held: no function over 40 lines or 6
parameters, no line over 120 characters, and each process's story (the web
process's request lifecycle, the worker's job lifecycle) in one module of at
most 150 lines, read top-down."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = sorted(p for folder in ("app", "workers", "jobqueue", "protocol", "dialects", "catalog", "settings")
                 for p in (ROOT / folder).rglob("*.py")) + [ROOT / "queue_config.py", ROOT / "broker_transport.py"]
STORIES = ("app/jobs.py", "workers/runner.py")


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


def test_no_line_is_over_120_characters():
    long_lines = [f"{p.relative_to(ROOT)}:{n}" for p in RUNTIME
                  for n, line in enumerate(p.read_text().splitlines(), 1) if len(line) > 120]
    assert long_lines == []


@pytest.mark.parametrize("story", STORIES)
def test_each_process_tells_its_story_in_one_short_module(story):
    assert len((ROOT / story).read_text().splitlines()) <= 150
