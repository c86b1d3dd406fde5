"""Codex itself (npm @openai/codex, installed by `make install-dev` in
tests/agents: the pinned version and the newest, `codex-newest`), headless
(`codex exec`), against Switchboard's Responses API: a plain answer, and a
round of its own tool loop in which the echo model's reply calls Codex's
shell tool (exec_command), Codex runs the command (it writes a file) and
sends the output back, and the answer is that output.

Two set-ups: a custom provider (`wire_api = "responses"`: HTTP), on echo,
through each upstream kind chained to echo, with a key, and on the local
model; and the simplest an office writes, the built-in OpenAI provider
pointed at us (`openai_base_url`, the key from `codex login
--with-api-key`), where Codex speaks its native transport, the Responses
WebSocket."""
from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import KEY
from tests.integration.waits import wait_until

AGENTS = Path(__file__).resolve().parent.parent / "agents" / "node_modules"
PINNED = AGENTS / "@openai" / "codex" / "bin" / "codex.js"
NEWEST = AGENTS / "codex-newest" / "bin" / "codex.js"


def codex(base: str, prompt: str, workdir: Path, *args: str, model: str = "echo", key: str | None = None,
          succeeds: bool = True, binary: Path = PINNED, native: bool = False) -> str:
    """One headless run, configured in its own home; its output (its errors,
    when it fails). `native`: only `openai_base_url`, the key logged in."""
    run = codex_run(base, prompt, workdir, *args, model=model, key=key, binary=binary, native=native)
    assert (run.returncode == 0) is succeeds, run.stdout + run.stderr
    return run.stdout if succeeds else run.stderr


def codex_run(base: str, prompt: str, workdir: Path, *args: str, model: str = "echo", key: str | None = None,
              binary: Path = PINNED, native: bool = False, config: str = "") -> subprocess.CompletedProcess:
    assert binary.exists(), f"{binary} is missing: run `make install-dev`"
    home = workdir / "codex-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home)}
    if native:
        (home / "config.toml").write_text(f'model = "{model}"\nopenai_base_url = "{base}/v1"\n{config}')
        subprocess.run(["node", str(binary), "login", "--with-api-key"], input=key or "unused", env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    else:
        (home / "config.toml").write_text(
            f'model = "{model}"\nmodel_provider = "switchboard"\n\n[model_providers.switchboard]\n'
            f'name = "Switchboard"\nbase_url = "{base}/v1"\nwire_api = "responses"\n'
            + ('env_key = "SWITCHBOARD_KEY"\n' if key else "") + config)
        env |= {"SWITCHBOARD_KEY": key} if key else {}
    # (the prompt last: `args` may name a subcommand, `resume <thread>`)
    return subprocess.run(["node", str(binary), "exec", "--skip-git-repo-check", *args, prompt], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def shell_call(command: str) -> str:
    return f'<invoke name="exec_command"><parameter name="cmd">{command}</parameter></invoke>'


def shell_round(base: str, workdir: Path, **options) -> None:
    answer = codex(base, shell_call("echo hello-from-codex > made.txt"), workdir, "--sandbox", "workspace-write",
                   **options)
    assert (workdir / "made.txt").read_text() == "hello-from-codex\n"
    assert "Process exited with code 0" in answer  # the command's output, echoed back


def test_a_plain_answer(base_url, tmp_path):
    assert codex(base_url, "say hi", tmp_path).strip() == "say hi"


def test_its_turn_is_interactive_work_of_its_session(base_url, tmp_path):
    """Codex says what a call is for (x-codex-turn-metadata): its turn is
    interactive, and its session (the session-id header) is its thread's."""
    run = codex_run(base_url, "say hi", tmp_path, "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    thread = next(e["thread_id"] for e in map(json.loads, run.stdout.splitlines()) if e["type"] == "thread.started")
    rows = wait_until(lambda: httpx.get(f"{base_url}/admin/requests.json", params={"session": thread}).json()[
        "requests"], what="its record")  # (filtered: another test's last record may land meanwhile)
    assert [(r["route"], r["session"], r["priority"]) for r in rows] == [("/v1/responses", thread, "interactive")]


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
    assert said_hi(codex(base, "say hi", tmp_path, model=model), model)
    shell_round(base, tmp_path, model=model)


def said_hi(output: str, model: str) -> bool:
    """echo's answer to Codex's "say hi". Anthropic's API takes turns that
    alternate: Codex's two user messages (its environment context, then the
    prompt) reach the second hop as one turn, which echo answers whole."""
    answer = output.strip()
    return answer.endswith("</environment_context>\nsay hi") if model == "claude-sb" else answer == "say hi"


def test_two_sessions_of_one_person_keep_their_own_prefixes_warm(upstreams, clean_redis, tmp_path):
    """Two Codex sessions of one person side by side on a model of two
    servers, each with its own prefix cache (the scripted upstream holds the
    first answer until both first turns are in flight, so they take one
    server each): each session's second turn goes back to its own server
    and reads all of its first turn's prompt from that server's cache."""
    base, scripted = upstreams["base"], upstreams["scripted"]

    def session(name: str) -> str:
        work = tmp_path / name
        work.mkdir()
        run = codex_run(base, f"{name} starts here", work, "--json", model="two-caches")
        assert run.returncode == 0, run.stdout + run.stderr
        thread = next(e["thread_id"] for e in map(json.loads, run.stdout.splitlines())
                      if e["type"] == "thread.started")
        codex(base, f"{name} goes on", work, "resume", thread, model="two-caches")
        return thread

    with ThreadPoolExecutor(2) as pool:
        threads = list(pool.map(session, ["ada", "bob"]))
    served = [(r["body"]["model"], json.dumps(r["body"]["messages"])) for r in scripted.requests
              if r["body"].get("model", "").startswith("cached-")]
    for name in ("ada", "bob"):  # both turns of a session on one server, the two sessions on two
        assert len({model for model, messages in served if f"{name} starts here" in messages}) == 1, served
    assert len({model for model, _ in served}) == 2, served

    def turns() -> dict[str, list[dict]]:  # (a record lands a moment after its reply)
        rows = httpx.get(f"{base}/admin/requests.json").json()["requests"]
        found = {t: sorted((r for r in rows if r["session"] == t), key=lambda r: r["time"]) for t in threads}
        return all(len(listed) == 2 for listed in found.values()) and found
    for first, second in wait_until(turns, what="both sessions' two turns in the request log").values():
        assert first["cached"] == 0 and second["cached"] >= first["tokens_in"], (first, second)


# --- the built-in provider, on its native transport ---------------------------------------
def turns(web) -> list[dict]:
    """The request log's lines of a web process."""
    return [json.loads(line) for line in web.output().splitlines()
            if line.startswith("{") and '"message": "request"' in line]


def assert_quiet(run: subprocess.CompletedProcess, words: tuple[str, ...] = ("Reconnecting", "ERROR")) -> None:
    assert run.returncode == 0, run.stdout + run.stderr
    assert [line for line in (run.stdout + run.stderr).splitlines() if any(w in line for w in words)] == []


@pytest.mark.parametrize("binary", [PINNED, NEWEST], ids=["pinned", "newest"])
def test_with_only_openai_base_url_it_works_over_the_websocket(socket_webs, clean_redis, tmp_path, binary):
    """No retries, no errors, every turn on the socket (none POSTed), the
    turns after the first continuing the socket's last response."""
    web, base = socket_webs["plain"]
    before = len(turns(web))
    run = codex_run(base, "say hi", tmp_path, binary=binary, native=True)
    assert_quiet(run)
    assert run.stdout.strip() == "say hi"
    shell = codex_run(base, shell_call("echo hello-from-codex > made.txt"), tmp_path, "--sandbox", "workspace-write",
                      binary=binary, native=True)
    assert_quiet(shell)
    assert (tmp_path / "made.txt").read_text() == "hello-from-codex\n"
    assert "Process exited with code 0" in shell.stdout
    lines = turns(web)[before:]
    assert not [line for line in lines if line["method"] == "POST"]
    sockets = [line for line in lines if line.get("transport") == "websocket"]
    assert len(sockets) >= 3 and all(line["status"] == 200 for line in sockets)
    assert [line for line in sockets if line["generate"] is True and line["continues"]]


@pytest.mark.slow
def test_with_only_openai_base_url_on_the_local_model(socket_webs, clean_redis, tmp_path):
    """Codex's own instructions are more than smollm2:135m's 8K context
    holds (above); with a short instructions file of its own the prompt
    fits, and the local model answers over the socket. (A model this small
    does not call tools, even told the exact block to write: the tool round
    is shown on echo and through upstreams.)"""
    web, base = socket_webs["plain"]
    instructions = tmp_path / "instructions.md"
    instructions.write_text("You are a helpful assistant. Answer briefly.\n")
    before = len(turns(web))
    run = codex_run(base, "Say hello.", tmp_path, model="smollm2:135m", binary=NEWEST, native=True,
                    config=f'model_instructions_file = "{instructions}"\n')
    assert_quiet(run)
    assert run.stdout.strip()
    assert [line for line in turns(web)[before:] if line.get("transport") == "websocket" and line["generate"]]


@pytest.mark.parametrize("model", ["up-sb", "claude-sb"], ids=["openai", "anthropic"])
def test_with_only_openai_base_url_through_an_upstream(upstreams, clean_redis, tmp_path, model):
    """On the socket, through an upstream of another protocol chained to
    echo: the shell call and its output cross both hops."""
    base = upstreams["base"]
    assert_quiet(run := codex_run(base, "say hi", tmp_path, model=model, binary=NEWEST, native=True))
    assert said_hi(run.stdout, model)
    shell = codex_run(base, shell_call("echo through-an-upstream > made.txt"), tmp_path, "--sandbox",
                      "workspace-write", model=model, binary=NEWEST, native=True)
    assert_quiet(shell)
    assert (tmp_path / "made.txt").read_text() == "through-an-upstream\n"


def test_with_only_openai_base_url_and_a_key(keyed_base, clean_redis, tmp_path):
    assert_quiet(run := codex_run(keyed_base, "keyed hi", tmp_path, key=KEY, binary=NEWEST, native=True))
    assert run.stdout.strip() == "keyed hi"


def test_with_the_websocket_switched_off_it_uses_http_at_once(socket_webs, clean_redis, tmp_path):
    """One upgrade, answered 426, and no retry (Codex logs the refusal once,
    as an ERROR line of its own log: that much it always says)."""
    web, base = socket_webs["off"]
    before = len(turns(web))
    assert_quiet(run := codex_run(base, "over http", tmp_path, binary=NEWEST, native=True), ("Reconnecting",))
    assert run.stdout.strip() == "over http"
    lines = turns(web)[before:]
    assert [line["status"] for line in lines if line["method"] == "GET" and line["path"] == "/v1/responses"] == [426]
    assert [line for line in lines if line["method"] == "POST" and line["path"] == "/v1/responses"]


def test_past_a_sockets_life_it_opens_a_new_one_and_goes_on(socket_webs, clean_redis, tmp_path):
    """A socket lives 2 s here: a command of 3 s in the middle of the turn
    outlives it, the next request is refused with OpenAI's code, and Codex
    sends it again on a new socket."""
    web, base = socket_webs["short"]
    before = len(turns(web))
    run = codex_run(base, shell_call("sleep 3; echo after-the-limit > made.txt"), tmp_path, "--sandbox",
                    "workspace-write", binary=NEWEST, native=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "made.txt").read_text() == "after-the-limit\n"
    lines = turns(web)[before:]
    assert [line for line in lines if line.get("transport") == "websocket" and line["status"] == 400]
    assert len([line for line in lines if line["status"] == 101]) >= 2


@pytest.mark.parametrize("binary", [PINNED, NEWEST], ids=["pinned", "newest"])
def test_past_its_compaction_limit_it_compacts_remotely_and_goes_on(socket_webs, clean_redis, tmp_path, binary):
    """With a 1,000-token limit, Codex's own prompt is past it after the
    first round: it sends its compaction trigger on the socket, takes the
    one sealed compaction item we answer, sends it back, and goes on (on
    echo, its last answer is then the summary it was given)."""
    web, base = socket_webs["plain"]
    run = codex_run(base, shell_call("echo hello-from-codex > made.txt"), tmp_path, "--sandbox", "workspace-write",
                    binary=binary, native=True, config="model_auto_compact_token_limit = 1000\n")
    assert_quiet(run)
    assert (tmp_path / "made.txt").read_text() == "hello-from-codex\n"
    assert run.stdout.strip().startswith("An earlier part of this conversation was compacted")
