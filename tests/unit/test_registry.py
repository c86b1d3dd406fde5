import pytest

from protocol.errors import RegistryError, UnknownModel
from catalog.registry import load_registry


def write(tmp_path, text):
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_default_registry_serves_smollm2_and_echo():
    registry = load_registry()
    assert registry.names() == ["smollm2:135m", "smollm2:135m-embed", "echo", "echo:embed", "echo:slow", "echo:coder",
                                "echo:tools"]
    assert registry.get("echo:tools").mcp_servers == ("time",) and registry.servers["time"].transport == "stdio"
    assert registry.get("echo:coder").capabilities == ["completion", "tools", "insert"]
    assert registry.get("smollm2:135m").info.context_length == 8192
    assert registry.get("echo:latest").name == "echo"  # Ollama's implicit tag


@pytest.mark.parametrize("text, message", [
    ('[models."m"]\nbackend = "nope"', 'models."m": unknown backend "nope" (known: anthropic, echo, gemini, llamacpp,'
     ' ollama, openai)'),
    ('[models."m"]\nbackend = "echo"\nspeed = 3', 'models."m": speed: Extra inputs are not permitted'),
    ('[models."m"]\npool = "x"', 'models."m": needs a "backend" key'),
    ('[models."m"]\nbackend = "llamacpp"\ngguf = "/no/such.gguf"', 'models."m": GGUF file not found: /no/such.gguf'),
    ('[models."m"]\nbackend = "echo"\ndelay_ms = -1', 'models."m": delay_ms: Input should be greater than or equal to 0'),
    ('[models."m"]\nbackend = "echo"\nprice = {input = -1, output = 2}', 'models."m": price.input: Input should be '
     'greater than or equal to 0'),
    ('[models."m"]\nbackend = "echo"\nprice = {in = 1}', 'models."m": price.input: Field required; price.output: '
     'Field required; price.in: Extra inputs are not permitted'),
    ('[models."m"]\nbackend = "echo"\nguard = "hide"', 'models."m": guard: Input should be \'off\', \'log\', '
     "'redact' or 'block'"),
    ('[model]\nx = 1', "unknown top-level keys ['model']"),
    ("", "no models defined"),
    ("[models", "cannot read model registry"),
], ids=["backend", "key", "no-backend", "gguf", "value", "negative-price", "price-key", "guard", "top-level", "empty",
        "syntax"])
def test_bad_registry_refuses_to_load_naming_the_entry(tmp_path, text, message):
    with pytest.raises(RegistryError) as error:
        load_registry(write(tmp_path, text))
    assert message in str(error.value)


def test_unknown_model():
    with pytest.raises(UnknownModel, match='model "gpt-9" not found, try pulling it first'):
        load_registry().get("gpt-9")


def test_aliases_map_name_patterns_to_a_model_listed_under_its_own_name(tmp_path):
    registry = load_registry(write(tmp_path, (
        '[models."small"]\nbackend = "echo"\naliases = ["claude-*-haiku-*", "claude-haiku-*"]\n'
        '[models."big"]\nbackend = "echo"\naliases = ["claude-*"]\n')))
    assert registry.get("claude-haiku-4-5-20251001").name == "small"
    assert registry.get("claude-3-5-haiku-latest").name == "small"  # the first model whose alias matches
    assert registry.get("claude-opus-4-1").name == "big"
    assert registry.get("small").name == "small" and registry.names() == ["small", "big"]
    with pytest.raises(UnknownModel):
        registry.get("gpt-5")


def test_an_upstream_whose_key_variable_is_unset_is_refused_at_start_up(tmp_path, monkeypatch):
    monkeypatch.delenv("GPU_BOX_KEY", raising=False)
    text = ('[models."office-coder"]\nbackend = "openai"\nbase_url = "http://gpu-box:8000/v1"\n'
            'upstream_model = "coder"\napi_key_env = "GPU_BOX_KEY"\ncontext_length = 8192\n')
    with pytest.raises(RegistryError) as error:
        load_registry(write(tmp_path, text))
    assert str(error.value) == ('models."office-coder": api_key_env: the environment variable GPU_BOX_KEY is not set '
                                "(it must hold the upstream's key)")
    monkeypatch.setenv("GPU_BOX_KEY", "secret-value")
    entry = load_registry(write(tmp_path, text)).get("office-coder")
    assert entry.pool == "upstream" and entry.settings.deployments[0].settings.auth_headers() == {
        "Authorization": "Bearer secret-value"}


# --- MCP servers ------------------------------------------------------------------------
ECHO = '[models."m"]\nbackend = "echo"\n'


@pytest.mark.parametrize("text, message", [
    ('[mcp_servers.s]\nargs = ["x"]', 'mcp_servers."s": entry: give either "command" (a stdio server) '
                                      'or "url" (streamable HTTP), not both'),
    ('[mcp_servers.s]\ncommand = "x"\nurl = "http://h/mcp"', 'give either "command"'),
    ('[mcp_servers.s]\nurl = "file:///etc/passwd"', 'url must be http:// or https://'),
    ('[mcp_servers.s]\nurl = "http://h/mcp"\nargs = ["x"]', '"args", "env" and "cwd" belong to a stdio server'),
    ('[mcp_servers.s]\ncommand = "x"\nheaders = { A = "b" }', '"headers" and "headers_env" belong to a remote'),
    ('[mcp_servers.s]\ncommand = "x"\nspeed = 1', 'mcp_servers."s": speed: Extra inputs are not permitted'),
    ('[mcp_servers.s]\ncommand = "x"\ntimeout_seconds = 0', 'timeout_seconds: Input should be greater than 0'),
    ('[mcp_servers.s]\nurl = "http://h/mcp"\nheaders_env = { Authorization = "NO_SUCH_VARIABLE_9" }',
     'mcp_servers."s": headers_env: the environment variable NO_SUCH_VARIABLE_9 is not set'),
    (ECHO + 'mcp_servers = ["nope"]', 'models."m": mcp_servers: no server "nope" in [mcp_servers] (known: none)'),
    (ECHO + 'mcp_servers = ["s"]\ntools = "off"\n[mcp_servers.s]\ncommand = "x"',
     'models."m": mcp_servers needs tools = "emulated" or "native"'),
], ids=["no-transport", "both", "url-scheme", "stdio-key", "http-key", "unknown-key", "timeout", "secret-unset",
        "unknown-server", "tools-off"])
def test_bad_mcp_server_refuses_to_load_naming_it(tmp_path, text, message):
    if "models" not in text:
        text = ECHO + text
    with pytest.raises(RegistryError) as error:
        load_registry(write(tmp_path, text))
    assert message in str(error.value)


def test_remote_server_headers_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TICKETS_AUTH", "Bearer s3cret")
    registry = load_registry(write(tmp_path, ECHO + 'mcp_servers = ["tickets"]\n[mcp_servers.tickets]\n'
                                   'url = "https://tickets/mcp"\nheaders = { X-Team = "office" }\n'
                                   'headers_env = { Authorization = "TICKETS_AUTH" }\n'))
    server = registry.servers["tickets"]
    assert server.request_headers() == {"X-Team": "office", "Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(server) and registry.get("m").mcp_servers == ("tickets",)


def test_a_price_per_million_tokens_is_what_the_usage_export_costs_with(tmp_path):
    registry = load_registry(write(tmp_path, '[models."paid"]\nbackend = "echo"\nprice = {input = 0.5, output = 2}\n'
                                             '[models."free"]\nbackend = "echo"\n'))
    assert registry.prices() == {"paid": (0.5, 2.0)}
