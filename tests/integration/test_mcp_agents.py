"""The real agents, headless, with Switchboard's MCP gateway as a remote MCP
server and a person's key: Claude Code (`claude mcp add --transport http`),
Codex (`[mcp_servers.<name>] url` with its bearer token variable) and Gemini
CLI (`mcpServers` with `httpUrl`). The echo model's reply calls the
gateway's tools by the names each agent gives them; the agent calls the
gateway, and its answer (echo's next turn) carries the tools' results. A
tool the key may not use is not among the agent's tools at all."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.mcp_stack import CAROL_KEY
from tests.integration.test_claude_code import CLAUDE, claude
from tests.integration.test_codex import codex_run
from tests.integration.test_gemini_cli import gemini

SERVER = "office"  # the name each agent is told the gateway goes by


def invoke(tool: str, **arguments) -> str:
    parameters = "".join(f'<parameter name="{k}">{v}</parameter>' for k, v in arguments.items())
    return f'<invoke name="{tool}">{parameters}</invoke>'


def with_claude_code(base: str, prompt: str, workdir: Path, allowed: str) -> str:
    home = workdir / "home"
    settings = home / ".claude.json"
    if settings.exists() and f'"{SERVER}"' in settings.read_text():  # (added by an earlier run in this folder)
        return claude(base, prompt, workdir, "--allowedTools", allowed, key=CAROL_KEY, ENABLE_TOOL_SEARCH="false")
    added = subprocess.run([str(CLAUDE), "mcp", "add", "--transport", "http", "--scope", "user", SERVER,
                            f"{base}/mcp", "--header", f"Authorization: Bearer {CAROL_KEY}"],
                           env={"PATH": "/usr/bin:/bin", "HOME": str(home)}, capture_output=True, text=True,
                           timeout=60, cwd=workdir)
    assert added.returncode == 0, added.stdout + added.stderr
    # (tool search off: with it, Claude Code defers MCP tools until the model searches for them, which echo never does)
    return claude(base, prompt, workdir, "--allowedTools", allowed, key=CAROL_KEY, ENABLE_TOOL_SEARCH="false")


def with_codex(base: str, prompt: str, workdir: Path) -> str:
    config = f'\n[mcp_servers.{SERVER}]\nurl = "{base}/mcp"\nbearer_token_env_var = "SWITCHBOARD_KEY"\n'
    run = codex_run(base, prompt, workdir, key=CAROL_KEY, config=config)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def with_gemini_cli(base: str, prompt: str, workdir: Path) -> str:
    servers = {"mcpServers": {SERVER: {"httpUrl": f"{base}/mcp", "headers": {"Authorization": f"Bearer {CAROL_KEY}"}}}}
    return gemini(base, prompt, workdir, key=CAROL_KEY, settings=servers)


# Each agent's name for a gateway tool (the gateway's own is <server>__<tool>).
AGENTS = {
    "claude-code": (lambda tool: f"mcp__{SERVER}__{tool}", with_claude_code),
    "codex": (lambda tool: tool, with_codex),  # in its namespace mcp__office, which its calls name
    "gemini-cli": (lambda tool: f"mcp_{SERVER}_{tool}", with_gemini_cli),
}


def run_agent(agent: str, base: str, prompt: str, workdir: Path, tools: list[str]) -> str:
    named, run = AGENTS[agent]
    if agent == "claude-code":
        return run(base, prompt, workdir, ",".join(named(tool) for tool in tools))
    return run(base, prompt, workdir)


@pytest.mark.parametrize("agent", AGENTS)
def test_an_agent_calls_the_gateways_tools(agent, mcp_stack, clean_redis, tmp_path):
    base, repository = mcp_stack[0], mcp_stack[1] / "repo"
    named = AGENTS[agent][0]
    prompt = invoke(named("time__get_current_time"), timezone="UTC")
    answer = run_agent(agent, base, prompt, tmp_path, ["time__get_current_time"])
    assert '"timezone": "UTC"' in answer or '"timezone":"UTC"' in answer, answer  # mcp-server-time's result
    prompt = invoke(named("git__git_status"), repo_path=repository)
    answer = run_agent(agent, base, prompt, tmp_path, ["git__git_status"])
    assert "Untracked files" in answer and "notes.txt" in answer, answer  # mcp-server-git's


@pytest.mark.parametrize("agent", AGENTS)
def test_a_tool_the_key_may_not_use_is_not_the_agents(agent, mcp_stack, clean_redis, redis_client, tmp_path):
    base, repository = mcp_stack[0], mcp_stack[1] / "repo"
    tool = AGENTS[agent][0]("git__git_log")
    answer = run_agent(agent, base, invoke(tool, repo_path=repository), tmp_path, ["git__git_log"])
    assert "t@example.org" not in answer, answer  # no log was read (git log would name its author)
    records = [json.loads(fields[b"r"]) for _, fields in redis_client.xrange("switchboard:requests")]
    assert not any("git_log" in json.dumps(record) for record in records)  # nor asked for
