"""Codex itself (npm @openai/codex, installed by `make install-dev` in
tests/agents), headless (`codex exec`), against Switchboard's Responses
API: a plain answer, and a round of its own tool loop in which the echo
model's reply calls Codex's shell tool (exec_command), Codex runs the
command (it writes a file) and sends the output back, and the answer is
that output; on echo, through each upstream kind chained to echo, and
with a key; on the local model, whose context is too small for Codex."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import KEY

CODEX = Path(__file__).resolve().parent.parent / "agents" / "node_modules" / ".bin" / "codex"


def codex(base: str, prompt: str, workdir: Path, *args: str, model: str = "echo", key: str | None = None,
          succeeds: bool = True) -> str:
    """One headless run with a provider of its own (config.toml in its home);
    the key, if any, from the variable the provider names. Its output (its
    errors, when it fails)."""
    assert CODEX.exists(), f"{CODEX} is missing: run `make install-dev`"
    home = workdir / "codex-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'model = "{model}"\nmodel_provider = "switchboard"\n\n[model_providers.switchboard]\nname = "Switchboard"\n'
        f'base_url = "{base}/v1"\nwire_api = "responses"\n' + ('env_key = "SWITCHBOARD_KEY"\n' if key else ""))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home)} | (
        {"SWITCHBOARD_KEY": key} if key else {})
    done = subprocess.run([str(CODEX), "exec", prompt, "--skip-git-repo-check", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert (done.returncode == 0) is succeeds, done.stdout + done.stderr
    return done.stdout if succeeds else done.stderr


def shell_round(base: str, workdir: Path, **options) -> None:
    call = '<invoke name="exec_command"><parameter name="cmd">echo hello-from-codex > made.txt</parameter></invoke>'
    answer = codex(base, call, workdir, "--sandbox", "workspace-write", **options)
    assert (workdir / "made.txt").read_text() == "hello-from-codex\n"
    assert "Process exited with code 0" in answer  # the command's output, echoed back


def test_a_plain_answer(base_url, tmp_path):
    assert codex(base_url, "say hi", tmp_path).strip() == "say hi"


def test_its_own_tool_loop_runs_a_command(base_url, tmp_path):
    shell_round(base_url, tmp_path)


@pytest.mark.slow
def test_on_the_local_model_its_prompt_is_too_long(base_url, tmp_path):
    """smollm2:135m serves an 8K context, less than Codex's own prompt: the
    400 carries OpenAI's code (context_length_exceeded), which Codex reads
    as its context running out (it would compact a longer thread)."""
    refused = codex(base_url, "say hi", tmp_path, model="smollm2:135m", succeeds=False)
    assert "ran out of room in the model's context window" in refused


def test_with_a_key(keyed_base, clean_redis, tmp_path):
    assert codex(keyed_base, "keyed hi", tmp_path, key=KEY).strip() == "keyed hi"


@pytest.mark.parametrize("model", ["up-sb", "up-ollama", "claude-sb"], ids=["openai", "ollama", "anthropic"])
def test_through_each_upstream_kind(upstreams, clean_redis, tmp_path, model):
    """Upstreams with native tools, each a second hop to the session's
    Switchboard in its own protocol: the shell call and its output cross
    both hops."""
    base = upstreams["base"]
    assert codex(base, "say hi", tmp_path, model=model).strip() == "say hi"
    shell_round(base, tmp_path, model=model)
