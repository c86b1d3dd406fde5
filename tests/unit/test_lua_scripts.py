"""The job queue's Lua scripts read as functions do: each takes its
arguments by name (at most 10), documents every one it reads in its header,
and gets key names from protocol/keys.py (lua_key_templates) instead of
spelling them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from protocol import keys

SCRIPTS = sorted((Path(__file__).resolve().parents[2] / "jobqueue" / "lua").glob("*.lua"))


def _documented(text: str) -> set[str]:
    """The names an argument list in the header documents ("--   name  what")."""
    names = set()
    for line in text.splitlines():
        match = re.match(r"^--   ([a-z_]+(?:, [a-z_]+)*)\s", line)
        if match:
            names.update(match.group(1).split(", "))
    return names


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_arguments_are_named_few_and_documented(script):
    text = script.read_text()
    used = set(re.findall(r"\bA\.([a-z_]+)", text))
    assert used <= _documented(text), f"undocumented: {sorted(used - _documented(text))}"
    assert len(_documented(text)) <= 10
    assert max((int(n) for n in re.findall(r"ARGV\[(\d+)\]", text)), default=0) <= 3  # named, not positional


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_no_script_spells_a_key(script):
    code = "\n".join(line.split("--")[0] for line in script.read_text().splitlines())
    assert keys.PREFIX not in code and not re.search(r"\.\. ?':' ?\.\.", code)


def test_the_templates_are_the_key_functions_own():
    templates = json.loads(keys.lua_key_templates())
    assert templates["job"] % "j1" == keys.fair_job_key("j1")
    assert templates["affinity"] % ("smol", "alice") == keys.affinity_key("smol", "alice")
    assert templates["state"] % "j1" == keys.state_key("j1")
    assert set(templates.values()) >= {keys.inflight_key.lua, keys.deployment_affinity_key.lua}


def test_a_key_family_is_named_by_exactly_its_parts():
    assert keys.inflight_key("qwen2.5-coder:7b", "http://[::1]:8080") == \
        "switchboard:deployment:qwen2.5-coder:7b\x1fhttp://[::1]:8080:inflight"
    assert keys.drained_key("default", 17) == "switchboard:drained:default:17"
    with pytest.raises(TypeError, match="2 parts, not 1"):
        keys.affinity_key("smol")  # a key one part short would name another person's


# The one list of ours a script may touch: the MCP pool's calls (keys.MCP_CALLS), admitted and queued at once.
OWN_LIST = "the MCP pool's list of calls"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_no_script_reads_or_writes_celerys_lists(script):
    """Celery's queues are Celery's: tickets go through its API (queue_config).
    A list command names its key as a KEYS[n] the header documents as ours."""
    text = script.read_text()
    code = "\n".join(line.split("--")[0] for line in text.splitlines()).upper()
    for key in re.findall(r"'(?:[LR](?:PUSH|POP)|LLEN|LRANGE|BRPOP)'\s*,\s*([^,)]+)", code):
        assert re.fullmatch(r"KEYS\[\d+\]", key.strip()), f"a list command on {key.strip()}"
        assert re.search(rf"--.*{re.escape(key.strip())}: {re.escape(OWN_LIST)}", text, re.IGNORECASE), \
            f"{key.strip()} is not documented as {OWN_LIST}"
