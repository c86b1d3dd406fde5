"""`admin.py connect <client>`: each client's config, from the registry and
the keys file; no key but the one given; no file replaced silently."""
from __future__ import annotations

import json
import tomllib

import pytest
import yaml

from identity.keys import digest
from scripts import admin, connect

SERVER = "http://office-box:11434"
PARSERS = {".json": json.loads, ".toml": tomllib.loads, ".yaml": yaml.safe_load, ".yml": yaml.safe_load}
SECRETS = {"OPENAI_API_KEY": "sk-from-the-environment", "ANTHROPIC_API_KEY": "sk-ant-from-the-environment",
           "SWITCHBOARD_API_KEYS": "alice:sb-alices-real-key", "GEMINI_API_KEY": "AIza-from-the-environment"}


def _connect(capsys, *args: str) -> str:
    admin.main(["connect", *args, "--url", SERVER])
    return capsys.readouterr().out


def _parsed(output) -> object:
    suffix = next((s for s in PARSERS if output.path.endswith(s)), None)
    return PARSERS[suffix](output.text) if suffix else output.text


@pytest.mark.parametrize("client, wire", [(c, w) for c, spec in connect.CLIENTS.items() for w in spec.wires])
def test_every_client_gets_a_config_that_parses_and_names_the_server(client, wire):
    setup = connect.Setup(SERVER, (connect.Model("echo", 131072, 8192), connect.Model("small", 8192, 4096)),
                          "echo", "small", wire=wire)
    outputs = connect.build(client, setup)
    assert outputs
    for output in outputs:
        _parsed(output)  # valid JSON, TOML or YAML where the name says so
        assert output.path.startswith("~/")
    text = "".join(o.text for o in outputs)
    assert "office-box:11434" in text and "echo" in text
    assert (connect.PLACEHOLDER_KEY in text) is not connect.CLIENTS[client].key_in_ui


@pytest.mark.parametrize("client, find", [
    ("pi", lambda c: c["providers"]["switchboard"]["models"][0]),
    ("opencode", lambda c: c["provider"]["switchboard"]["models"]["echo"]["limit"]),
    ("kilo", lambda c: c["provider"]["switchboard"]["models"]["echo"]["limit"]),
    ("vibe", lambda c: c["models"][0]),
    ("vscode", lambda c: c[0]["models"][0]),
    ("zed", lambda c: c["language_models"]["openai_compatible"]["Switchboard"]["available_models"][0]),
    ("aider", lambda c: c["openai/echo"]),
    ("continue", lambda c: c["models"][0]["defaultCompletionOptions"]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_windows_and_output_limits_come_from_the_registry(client, find):
    setup = connect.Setup(SERVER, (connect.Model("echo", 131072, 8192),), "echo", "echo")
    documents = [_parsed(o) for o in connect.build(client, setup) if not o.path.endswith(".yml")]
    entry = find(next(d for d in documents if isinstance(d, (dict, list)) and _has(d, find)))
    numbers = set(_numbers(entry))
    assert {131072, 8192} <= numbers or {131072 - 8192, 8192} <= numbers or {131072, 131072 // 4} <= numbers


def _has(document: dict | list, find) -> bool:
    try:
        find(document)
        return True
    except (KeyError, IndexError, TypeError):
        return False


def _numbers(value) -> list[int]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def test_the_registrys_models_and_windows(capsys):
    printed = json.loads(_connect(capsys, "pi", "--model", "echo").split("\n", 1)[1].split("\n# ")[0])
    models = {m["id"]: m for m in printed["providers"]["switchboard"]["models"]}
    assert "smollm2:135m-embed" not in models and "echo:embed" not in models  # embedding models are no chat models
    assert models["smollm2:135m"]["contextWindow"] == 8192 and models["smollm2:135m"]["maxTokens"] == 4096
    assert list(models)[0] == "echo"  # the chosen model first: list-reading clients start with it


def test_no_key_is_printed_but_the_one_given(capsys, monkeypatch, tmp_path):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": "sk-in-a-file"}))
    monkeypatch.setenv("HOME", str(tmp_path))
    for client, spec in connect.CLIENTS.items():
        printed = _connect(capsys, client)
        assert (connect.PLACEHOLDER_KEY in printed) is not spec.key_in_ui
        assert not any(secret in printed for secret in [*SECRETS.values(), "sk-in-a-file"]), client
        assert "sb-given" in _connect(capsys, client, "--key", "sb-given")


def test_a_key_sees_the_models_it_may_use(capsys, tmp_path, monkeypatch):
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys.alice]\nsha256 = "{digest("sb-alice")}"\nmodels = ["echo*"]\n')
    monkeypatch.setenv("SWITCHBOARD_KEYS_FILE", str(keys))
    printed = _connect(capsys, "opencode", "--key", "sb-alice")
    models = json.loads(printed.split("\n", 1)[1])["provider"]["switchboard"]["models"]
    assert set(models) == {"echo", "echo:slow", "echo:coder", "echo:tools"}
    with pytest.raises(SystemExit, match="not a key of this server"):
        _connect(capsys, "opencode", "--key", "sb-someone-else")
    with pytest.raises(SystemExit, match="'smollm2:135m' is not a chat model this key may use"):
        _connect(capsys, "opencode", "--key", "sb-alice", "--model", "smollm2:135m")


def test_an_existing_file_is_never_replaced_silently(capsys, tmp_path):
    config = tmp_path / ".pi" / "agent" / "models.json"
    config.parent.mkdir(parents=True)
    config.write_text("mine")
    with pytest.raises(SystemExit, match="already exist"):
        _connect(capsys, "pi", "--write", "--home", str(tmp_path))
    assert config.read_text() == "mine" and not (tmp_path / ".pi" / "agent" / "settings.json").exists()
    said = _connect(capsys, "pi", "--write", "--force", "--home", str(tmp_path))
    assert (config.parent / "models.json.bak").read_text() == "mine" and "models.json.bak" in said
    assert json.loads(config.read_text())["providers"]["switchboard"]["baseUrl"] == f"{SERVER}/v1"
    assert oct(config.stat().st_mode & 0o777) == "0o600"  # it may hold the key


def test_an_unknown_wire_names_the_clients_wires(capsys):
    with pytest.raises(SystemExit, match="kilo has no wire 'ws'; its wires: chat, responses, messages"):
        _connect(capsys, "kilo", "--wire", "ws")


def test_with_sign_in_the_agents_that_run_a_helper_get_it_and_no_key(capsys):
    printed = _connect(capsys, "claude-code", "--sign-in")
    assert f'scripts/admin.py token --url {SERVER}"' in printed and "ANTHROPIC_API_KEY" not in printed
    helper = ("/usr/bin/python3", "/opt/switchboard/scripts/admin.py", "token", "--url", SERVER)
    setup = connect.Setup(SERVER, (connect.Model("echo", 8192, 1024),), "echo", "echo", helper=helper)
    [claude] = connect.build("claude-code", setup)
    assert json.loads(claude.text)["apiKeyHelper"] == " ".join(helper)
    [codex] = connect.build("codex", setup)
    provider = tomllib.loads(codex.text)["model_providers"]["switchboard"]
    assert provider["auth"] == {"command": helper[0], "args": list(helper[1:])} and "env_key" not in provider
    for client in ("aider", "continue", "gemini-cli"):
        with pytest.raises(ValueError, match=f"{client} takes only a fixed key: mint one on {SERVER}/me"):
            connect.build(client, setup)


@pytest.mark.parametrize("client", list(connect.CLIENTS))
def test_each_agent_is_told_how_to_add_the_mcp_gateway(client):
    from catalog.agent_setups import mcp_gateway
    signed, keyed = mcp_gateway(client, "https://sb.office", True), mcp_gateway(client, "https://sb.office", False)
    assert "https://sb.office/mcp" in signed and "https://sb.office/mcp" in keyed
    assert connect.PLACEHOLDER_KEY in keyed or "SWITCHBOARD_KEY" in keyed  # (a key, where the agent takes one)
    if client in ("claude-code", "codex", "gemini-cli"):  # (they sign in themselves: no key at all)
        assert connect.PLACEHOLDER_KEY not in signed and "Bearer" not in signed
    if client == "claude-code":
        assert "claude mcp login office" in signed
    if client == "codex":
        assert "codex mcp login office" in signed
