"""Claude Code itself (npm @anthropic-ai/claude-code, installed by `make
install-dev` in tests/agents), headless (`claude -p`), against Switchboard:
a plain answer, and a round of its own tool loop in which the echo model's
reply calls Claude Code's Write tool, Claude Code writes the file and sends
the result back, and the answer is that result; on echo, and through each
upstream kind (OpenAI-compatible, Ollama, Anthropic, Gemini) chained to echo; and
on the local model, whose context is too small for Claude Code's tools."""
from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from dialects.hints import session_of
from protocol import keys
from tests.integration.conftest import KEY
from tests.integration.waits import wait_until

CLAUDE = Path(__file__).resolve().parent.parent / "agents" / "node_modules" / ".bin" / "claude"
# On the local model: greedy, and the reply ends at its first blank line. Claude Code's prompt carries the
# date and the working folder, so a greedy 135M model's reply changes with them: on some days and paths it
# rambles to the output limit (and Claude Code asks it to go on three times more, minutes on two cores).
LOCAL_BODY = json.dumps({"temperature": 0, "stop_sequences": ["\n\n"]})


def claude(base: str, prompt: str, workdir: Path, *args: str, key: str = "unused", model: str = "echo",
           succeeds: bool = True, **env: str) -> str:
    """One headless run; its home in the work folder (no settings, no
    account), nothing sent anywhere but to `base`. Its output."""
    assert CLAUDE.exists(), f"{CLAUDE} is missing: run `make install-dev`"
    env = {"PATH": os.environ["PATH"], "HOME": str(workdir / "home"), "ANTHROPIC_BASE_URL": base,
           "ANTHROPIC_API_KEY": key, "ANTHROPIC_MODEL": model, "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", **env}
    done = subprocess.run([str(CLAUDE), "-p", prompt, *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert (done.returncode == 0) is succeeds, done.stdout + done.stderr
    return done.stdout


def test_a_plain_answer(base_url, tmp_path):
    # its turn is a <system-reminder> block and the prompt: one message, which echo answers whole
    answer = claude(base_url, "say hi", tmp_path).strip()
    assert answer.startswith("<system-reminder>") and answer.endswith("</system-reminder>\nsay hi")


def test_its_own_tool_loop_writes_a_file(base_url, tmp_path):
    target = tmp_path / "hello.txt"
    call = (f'<invoke name="Write"><parameter name="file_path">{target}</parameter>'
            '<parameter name="content">hello from echo</parameter></invoke>')
    answer = claude(base_url, call, tmp_path, "--allowedTools", "Write")
    assert target.read_text() == "hello from echo"
    assert answer.startswith(f"File created successfully at: {target}")  # the tool's result, echoed back


@pytest.mark.slow
def test_on_the_local_model(base_url, redis_client, tmp_path):
    """smollm2:135m serves an 8K context: with Claude Code's own tools the
    prompt does not fit, and Claude Code reads Switchboard's 400 as
    Anthropic's (it tells the size and the limit, as it does before
    compacting); with no tools it fits, and the model answers. It answers
    greedily and up to its first blank line (LOCAL_BODY, through
    CLAUDE_CODE_EXTRA_BODY). The worker that answered holds the session's
    prefix: its next turn goes there."""
    refused = claude(base_url, "say hi", tmp_path, model="smollm2:135m", succeeds=False)
    assert "Prompt is too long" in refused and "(limit 8192)" in refused
    answer = json.loads(claude(base_url, "Say hello.", tmp_path, "--tools", "", "--output-format", "json",
                               model="smollm2:135m", CLAUDE_CODE_MAX_OUTPUT_TOKENS="1500",
                               CLAUDE_CODE_EXTRA_BODY=LOCAL_BODY))
    assert answer["result"].strip() and "\n\n" not in answer["result"]
    session = "session:" + session_of("address:127.0.0.1", answer["session_id"])
    holder = wait_until(lambda: redis_client.get(keys.affinity_key("smollm2:135m", session)), what="the session's worker")
    assert redis_client.get(keys.affinity_key("smollm2:135m", "address:127.0.0.1")) == holder


@pytest.mark.slow
@pytest.mark.timeout(240)  # four turns of about 3,000 tokens each on the local model, two at a time
def test_two_sessions_of_one_person_keep_their_own_prefixes_warm(base_url, tmp_path):
    """Two Claude Code sessions of one person side by side on the local
    model, each told its own 700-token notes after the common system prompt:
    each session's second turn reads all of its first turn's prompt from the
    cache, not only the part the sessions share."""
    def session(name: str) -> str:
        work = tmp_path / name
        work.mkdir()
        notes = " ".join(f"{name} note {n}." for n in range(175))
        args = ("--tools", "", "--output-format", "json", "--append-system-prompt", notes)
        env = {"model": "smollm2:135m", "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "1500",
               "CLAUDE_CODE_EXTRA_BODY": LOCAL_BODY}
        first = json.loads(claude(base_url, "Say hello.", work, *args, **env))
        claude(base_url, "Say goodbye.", work, *args, "--resume", first["session_id"], **env)
        return first["session_id"]

    with ThreadPoolExecutor(2) as pool:
        sessions = list(pool.map(session, ["ada", "bob"]))

    def turns() -> dict[str, list[dict]]:  # (a record lands a moment after its reply)
        rows = httpx.get(f"{base_url}/admin/requests.json").json()["requests"]
        found = {sid: sorted((r for r in rows if r["session"] == sid), key=lambda r: r["time"]) for sid in sessions}
        return all(len(listed) == 2 for listed in found.values()) and found
    for first, second in wait_until(turns, what="both sessions' two turns in the request log").values():
        assert first["person"] == second["person"] == "address:127.0.0.1"
        assert second["cached"] >= first["tokens_in"] - 8, (first, second)


def test_with_a_key_as_claude_code_sends_it(keyed_base, clean_redis, tmp_path):
    assert claude(keyed_base, "keyed hi", tmp_path, key=KEY).strip().endswith("</system-reminder>\nkeyed hi")


def test_its_small_model_calls_wait_as_background_work(keyed_base, clean_redis, tmp_path):
    """A subagent on Claude Code's small/fast model (`haiku`: the keyed web
    process maps claude-*haiku* names onto echo) is background work, as the
    request log shows; the turns around it are interactive."""
    call = ('<invoke name="Agent"><parameter name="description">greet</parameter><parameter name="prompt">say hi'
            '</parameter><parameter name="subagent_type">general-purpose</parameter><parameter name="model">haiku'
            '</parameter></invoke>')
    started = time.time()
    claude(keyed_base, call, tmp_path, "--allowedTools", "Agent", key=KEY,
           ANTHROPIC_DEFAULT_HAIKU_MODEL="claude-haiku-4-5")

    def logged() -> list[dict]:  # (its own: another test's last record may land meanwhile)
        reply = httpx.get(f"{keyed_base}/admin/requests.json", headers={"Authorization": f"Bearer {KEY}"})
        return [r for r in reply.json()["requests"] if r["time"] >= started]
    rows = wait_until(lambda: (found := logged()) and any(r["model"] == "claude-haiku-4-5" for r in found) and found,
                      what="the subagent's request in the log")
    assert {(r["model"], r["answered"], r["priority"]) for r in rows} == {
        ("claude-haiku-4-5", "echo", "background"), ("echo", "echo", "interactive")}


@pytest.mark.parametrize("model", ["up-sb", "up-ollama", "claude-sb", "gemini-sb"],
                         ids=["openai", "ollama", "anthropic", "gemini"])
def test_its_tool_loop_through_each_upstream_kind(upstreams, clean_redis, tmp_path, model):
    """Upstreams with native tools, each a second hop to the session's
    Switchboard in its own protocol: the Write call and its result cross
    both hops."""
    base = upstreams["base"]
    assert claude(base, "say hi", tmp_path, model=model).strip().endswith("</system-reminder>\nsay hi")
    target = tmp_path / f"{model}.txt"
    call = (f'<invoke name="Write"><parameter name="file_path">{target}</parameter>'
            '<parameter name="content">through two hops</parameter></invoke>')
    answer = claude(base, call, tmp_path, "--allowedTools", "Write", model=model)
    assert target.read_text() == "through two hops" and answer.startswith(f"File created successfully at: {target}")
