"""Gemini CLI itself (npm @google/gemini-cli, installed by `make
install-dev` in tests/agents), headless (`gemini -p ... --yolo`), against
Switchboard's Gemini API routes: a plain answer, and a round of its own
write_file tool (echo's reply calls it, the CLI writes the file and sends
the function's response back, the answer is that response); with keys off
and on (the key never in the request log), on the local model, and through a
`gemini` upstream chained to the session's Switchboard."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from scripts import connect
from tests.integration.conftest import KEY
from tests.integration.waits import wait_until

GEMINI = Path(__file__).resolve().parent.parent / "agents" / "node_modules" / ".bin" / "gemini"


def gemini(base: str, prompt: str, workdir: Path, key: str | None = None, model: str = "echo",
           succeeds: bool = True, settings: dict | None = None, **env: str) -> str:
    """Set up by `scripts/admin.py connect gemini-cli` (its settings file,
    whose auth type it needs with a base URL, and its variables), then one
    headless run, its home in the work folder. Its output (and its errors,
    if it failed)."""
    assert GEMINI.exists(), f"{GEMINI} is missing: run `make install-dev`"
    home = workdir / "home"
    setup = connect.Setup(server=base, models=(connect.Model(model, 131072, 8192),), model=model, small_model=model,
                          key=key)
    outputs = connect.build("gemini-cli", setup)
    connect.write(outputs, home, force=True)
    if settings:  # beside connect's own
        written = home / ".gemini" / "settings.json"
        written.write_text(json.dumps(json.loads(written.read_text()) | settings))
    variables = {k: v for o in outputs if isinstance(o, connect.EnvBlock) for k, v in o.variables.items()}
    full = {"PATH": os.environ["PATH"], "HOME": str(home), "NO_COLOR": "1", "GEMINI_CLI_TRUST_WORKSPACE": "true",
            **variables, **env}
    done = subprocess.run([str(GEMINI), "-p", prompt, "--yolo"], cwd=workdir, env=full, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert (done.returncode == 0) is succeeds, done.stdout + done.stderr
    return done.stdout if succeeds else done.stdout + done.stderr


def write_call(target: Path, content: str) -> str:
    return (f'<invoke name="write_file"><parameter name="file_path">{target}</parameter>'
            f'<parameter name="content">{content}</parameter></invoke>')


def test_a_plain_answer(base_url, tmp_path):
    # its turn is its session context and the prompt: one message, which echo answers whole
    answer = gemini(base_url, "plain answer please", tmp_path).strip()
    assert answer.startswith("<session_context>") and answer.endswith("plain answer please")


def test_its_own_write_file_tool(base_url, tmp_path):
    target = tmp_path / "made-by-agent.txt"
    answer = gemini(base_url, write_call(target, "written by the agent"), tmp_path)
    assert target.read_text() == "written by the agent"
    assert "Successfully created and wrote to new file" in answer  # the function's response, echoed back


def test_with_a_key_and_never_in_the_log(keyed_base, clean_redis, tmp_path):
    started = time.time()
    target = tmp_path / "keyed.txt"
    gemini(keyed_base, write_call(target, "keyed"), tmp_path, key=KEY)
    assert target.read_text() == "keyed"
    bearer = gemini(keyed_base, "bearer hi", tmp_path, key=KEY, GEMINI_API_KEY_AUTH_MECHANISM="bearer")
    assert bearer.strip().endswith("bearer hi")

    def logged() -> list[dict]:
        reply = httpx.get(f"{keyed_base}/admin/requests.json", headers={"x-goog-api-key": KEY})
        return [r for r in reply.json()["requests"] if r["time"] >= started]
    rows = wait_until(lambda: len(found := logged()) >= 3 and found, what="its three requests in the log")
    assert {(r["person"], r["dialect"], r["model"], r["route"], r["status"], r["priority"]) for r in rows} == {
        ("alice", "gemini", "echo", "/v1beta/models/<path:model>:streamGenerateContent", 200, "interactive")}
    assert KEY not in json.dumps(rows)


@pytest.mark.slow
def test_on_the_local_model(base_url, tmp_path):
    """smollm2:135m's 8K context cannot hold Gemini CLI's 30,000-character
    system prompt and its tools: the CLI shows the 400 that says so. With a
    short system prompt of the person's own (GEMINI_SYSTEM_MD) and one tool,
    it fits, and the model answers."""
    refused = gemini(base_url, "say hi", tmp_path, model="smollm2:135m", succeeds=False)
    assert "more than the context window of 8192" in refused and '"status":"INVALID_ARGUMENT"' in refused
    system = tmp_path / "system.md"
    system.write_text("You are a helpful assistant. Answer briefly.")
    started = time.time()
    answer = gemini(base_url, "Say hello.", tmp_path, model="smollm2:135m", settings={
        "tools": {"core": ["write_file"]}, "modelConfigs": {"customOverrides": [SHORT_REPLIES]}},
        GEMINI_SYSTEM_MD=str(system))
    assert answer.strip()
    def answered() -> list[dict]:
        rows = httpx.get(f"{base_url}/admin/requests.json").json()["requests"]
        return [r for r in rows if r["time"] >= started and r["status"] == 200]
    [row] = wait_until(answered, what="the answer in the request log")
    assert row["model"] == "smollm2:135m" and row["tokens_out"] <= 256


# The CLI samples at temperature 1; a 135M model so asked may ramble for
# thousands of tokens. Its own cap, as a person on a small model sets it.
SHORT_REPLIES = {"match": {"model": "smollm2:135m"}, "modelConfig": {"generateContentConfig": {"maxOutputTokens": 256}}}


@pytest.mark.parametrize("model", ["gemini-sb", "up-sb"], ids=["gemini", "openai"])
def test_its_tool_loop_through_an_upstream(upstreams, clean_redis, tmp_path, model):
    """The Gemini routes in front of an upstream (a `gemini` one: Gemini's
    API on both hops; an OpenAI-compatible one), each a second hop to the
    session's Switchboard: the write_file call and its response cross both."""
    base = upstreams["base"]
    target = tmp_path / f"{model}.txt"
    answer = gemini(base, write_call(target, "through two hops"), tmp_path, model=model)
    assert target.read_text() == "through two hops" and "Successfully created" in answer
