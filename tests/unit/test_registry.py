import pytest

from protocol.errors import RegistryError, UnknownModel
from catalog.registry import load_registry


def write(tmp_path, text):
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_default_registry_serves_smollm2_and_echo():
    registry = load_registry()
    assert registry.names() == ["smollm2:135m", "echo", "echo:slow", "echo:coder"]
    assert registry.get("echo:coder").capabilities == ["completion", "tools", "insert"]
    assert registry.get("smollm2:135m").info.context_length == 8192
    assert registry.get("echo:latest").name == "echo"  # Ollama's implicit tag


@pytest.mark.parametrize("text, message", [
    ('[models."m"]\nbackend = "nope"', 'models."m": unknown backend "nope" (known: echo, llamacpp, ollama, openai)'),
    ('[models."m"]\nbackend = "echo"\nspeed = 3', 'models."m": speed: Extra inputs are not permitted'),
    ('[models."m"]\npool = "x"', 'models."m": needs a "backend" key'),
    ('[models."m"]\nbackend = "llamacpp"\ngguf = "/no/such.gguf"', 'models."m": GGUF file not found: /no/such.gguf'),
    ('[models."m"]\nbackend = "echo"\ndelay_ms = -1', 'models."m": delay_ms: Input should be greater than or equal to 0'),
    ('[model]\nx = 1', "unknown top-level keys ['model']"),
    ("", "no models defined"),
    ("[models", "cannot read model registry"),
], ids=["backend", "key", "no-backend", "gguf", "value", "top-level", "empty", "syntax"])
def test_bad_registry_refuses_to_load_naming_the_entry(tmp_path, text, message):
    with pytest.raises(RegistryError) as error:
        load_registry(write(tmp_path, text))
    assert message in str(error.value)


def test_unknown_model():
    with pytest.raises(UnknownModel, match='model "gpt-9" not found, try pulling it first'):
        load_registry().get("gpt-9")


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
    assert entry.pool == "upstream" and entry.settings.auth_headers() == {"Authorization": "Bearer secret-value"}
