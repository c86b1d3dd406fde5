"""The guard with real agents (Claude Code and Codex, headless) on a hosted
model of their own API kind (guarded, through the recording relay to the
session's echo). The agent runs a command that shows a deployment note
holding a cloud key, a private key and a database URL with its password;
echo answers with the note, which is the model's next move: a call of the
agent's own file-writing tool with those values. The upstream gets
placeholders in every request, the same in each turn; the agent gets the
values back and writes the real file."""
from __future__ import annotations

import pytest

from guard.placeholders import PLACEHOLDER
from tests.guard_secrets import ENV_FILE, leaked
from tests.integration.test_claude_code import claude
from tests.integration.test_codex import codex, shell_call


@pytest.fixture
def up(upstreams, clean_redis):
    return upstreams


def turns(relay, since: int) -> list[str]:
    return [r["body"].decode() for r in relay.requests[since:] if r["body"]]


def assert_kept_from_the_upstream(relay, since: int) -> None:
    """No secret in any request; the requests after the tool result carry the same four placeholders."""
    sent = turns(relay, since)
    assert sent and all(leaked(body) == [] for body in sent), [leaked(b) for b in sent]
    carrying = [set(PLACEHOLDER.findall(body)) for body in sent if PLACEHOLDER.search(body)]
    assert len(carrying) >= 2 and all(found == carrying[0] for found in carrying) and len(carrying[0]) == 4


def test_claude_code_writes_the_real_file_and_the_upstream_never_sees_it(up, tmp_path):
    target = tmp_path / "restored.env"
    (tmp_path / "deploy.txt").write_text(f'<invoke name="Write"><parameter name="file_path">{target}</parameter>'
                                         f'<parameter name="content">{ENV_FILE}</parameter></invoke>')
    since = len(up["relay"].requests)
    prompt = '<invoke name="Bash"><parameter name="command">cat deploy.txt</parameter></invoke>'
    answer = claude(up["base"], prompt, tmp_path, "--allowedTools", "Bash(cat:*)", "Write",
                    model="guard-anthropic")
    assert target.read_text().strip() == ENV_FILE.strip(), answer
    assert answer.startswith(f"File created successfully at: {target}")
    assert_kept_from_the_upstream(up["relay"], since)


def test_codex_writes_the_real_file_and_the_upstream_never_sees_it(up, tmp_path):
    command = f"cat > restored.env <<'EOF'\n{ENV_FILE}EOF"
    (tmp_path / "deploy.txt").write_text(shell_call(command))
    since = len(up["relay"].requests)
    answer = codex(up["base"], shell_call("cat deploy.txt"), tmp_path, "--sandbox", "workspace-write",
                   model="guard-openai")
    assert (tmp_path / "restored.env").read_text() == ENV_FILE, answer
    assert_kept_from_the_upstream(up["relay"], since)
