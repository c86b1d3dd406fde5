"""Copilot CLI and Kilo CLI themselves (pinned in tests/agents), headless,
each set up by `admin.py connect` (scripts/connect.py) in a home of its own:
Copilot CLI with a Codex-family model id, whose `apply_patch` is a freeform
tool on Chat Completions, and on its other wires; Kilo, whose every user
turn is two text parts, on its three AI-SDK providers. Each writes a file
with its own tool; keys on and off. The other agents are in the
compatibility matrix (scripts/clients.py, docs/clients.md)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from scripts import connect
from tests.integration.conftest import KEY

BIN = Path(__file__).resolve().parent.parent / "agents" / "node_modules" / ".bin"
TEXT = "written by the agent"


def _run(client: str, argv: list[str], base: str, workdir: Path, wire: str, key: str | None, prompt: str,
         stdin: bool = False, **env: str) -> str:
    """Set up by connect, then one headless run (the prompt after `argv`,
    or on stdin); its output."""
    assert (BIN / argv[0]).exists(), f"{BIN / argv[0]} is missing: run `make install-dev`"
    home = workdir / "home"
    setup = connect.Setup(server=base, models=(connect.Model("echo", 131072, 8192),), model="echo",
                          small_model="echo", key=key, wire=wire)
    outputs = connect.build(client, setup)
    if not home.exists():
        connect.write(outputs, home, force=False)
    variables = {k: v for o in outputs if isinstance(o, connect.EnvBlock) for k, v in o.variables.items()}
    full = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1", **variables, **env}
    done = subprocess.run([str(BIN / argv[0]), *argv[1:], *([] if stdin else [prompt])], cwd=workdir, env=full,
                          input=prompt if stdin else "", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _copilot(base: str, workdir: Path, wire: str, key: str | None, prompt: str, **env: str) -> str:
    return _run("copilot-cli", ["copilot", "--allow-all-tools", "-s", "-p"], base, workdir, wire, key, prompt,
                COPILOT_AUTO_UPDATE="false", **env)


def _patch(path: Path) -> str:
    return (f'<invoke name="apply_patch"><parameter name="input">*** Begin Patch\n*** Add File: {path}\n+{TEXT}\n'
            "*** End Patch\n</parameter></invoke>")


@pytest.mark.parametrize("keyed", [False, True], ids=["keys-off", "keys-on"])
def test_copilot_cli_with_a_codex_model_id_patches_over_chat_completions(stack, keyed_base, clean_redis, tmp_path,
                                                                         keyed):
    base, key = (keyed_base, KEY) if keyed else (stack, None)
    codex = {"COPILOT_MODEL": "gpt-5.1-codex", "COPILOT_PROVIDER_WIRE_MODEL": "echo"}
    assert _copilot(base, tmp_path, "chat", key, "plain answer please", **codex).strip().endswith(
        "plain answer please")
    target = tmp_path / "made-by-agent.txt"
    answer = _copilot(base, tmp_path, "chat", key, _patch(target), **codex)
    assert target.read_text() == TEXT + "\n" and f"Added 1 file(s): {target}" in answer


@pytest.mark.parametrize("wire", ["responses", "websocket", "messages"])
def test_copilot_cli_creates_a_file_on_its_other_wires(base_url, tmp_path, wire):
    target = tmp_path / "made-by-agent.txt"
    call = f'<invoke name="create"><parameter name="path">{target}</parameter><parameter name="file_text">{TEXT}' \
           "</parameter></invoke>"
    _copilot(base_url, tmp_path, wire, None, call)
    assert target.read_text() == TEXT


# What Kilo would fetch or start at each run (models.dev's list, plugins, its
# language servers): nothing it needs here, and seconds of every run.
KILO_QUIET = {name: "1" for name in ("KILO_DISABLE_MODELS_FETCH", "KILO_DISABLE_AUTOUPDATE", "KILO_DISABLE_SHARE",
                                     "KILO_DISABLE_DEFAULT_PLUGINS", "KILO_DISABLE_LSP_DOWNLOAD",
                                     "KILO_DISABLE_SESSION_INGEST", "KILO_DISABLE_PRESENCE")}


def test_kilo_answers_its_turn_of_two_parts_whole_and_writes_a_file(keyed_base, clean_redis, tmp_path):
    """Its prompt (the call), then its <environment_details> part: one turn,
    which echo answers whole, so the call is made (the part alone was
    answered before). Its two other providers are in the matrix."""
    target = tmp_path / "made-by-agent.txt"
    call = f'<invoke name="write"><parameter name="filePath">{target}</parameter><parameter name="content">{TEXT}' \
           "</parameter></invoke>"
    # Kilo 7.7 quotes a message given as an argument when it has spaces: the prompt goes on stdin, as typed
    answer = _run("kilo", ["kilo", "run", "--auto", "-m", "switchboard/echo"], keyed_base, tmp_path, "chat", KEY,
                  call, stdin=True, **KILO_QUIET)
    assert "Wrote file successfully." in answer and target.read_text() == TEXT
