"""catalog/deployments.py through the registry: an upstream model's
deployments, their defaults and mixed kinds, and what a bad entry says."""
import pytest

from catalog.registry import load_registry
from protocol.errors import RegistryError

TWO_BOXES = '''[models."coder"]
backend = "openai"
upstream_model = "qwen-coder"
context_length = 32768
max_concurrent = 8
fallbacks = ["hosted"]
deployments = [
  { base_url = "http://gpu1:8000/v1", weight = 2 },
  { base_url = "http://gpu2:11434", backend = "ollama", context_length = 16384, max_concurrent = 4, name = "gpu2" },
]

[models."hosted"]
backend = "anthropic"
base_url = "https://api.example.com"
upstream_model = "big"
context_length = 200000
'''


def _load(tmp_path, text: str):
    path = tmp_path / "models.toml"
    path.write_text(text)
    return load_registry(path)


def test_deployments_take_the_models_keys_as_defaults_and_may_mix_kinds(tmp_path):
    registry = _load(tmp_path, TWO_BOXES)
    coder = registry.get("coder")
    one, two = coder.settings.deployments
    assert (one.name, one.backend, one.weight, one.max_concurrent) == ("gpu1:8000", "openai", 2, 8)
    assert (two.name, two.backend, two.weight, two.max_concurrent) == ("gpu2", "ollama", 1, 4)
    assert one.settings.upstream_model == two.settings.upstream_model == "qwen-coder"
    assert one.settings.retries == two.settings.retries == 0  # with several, a failure moves on at once
    assert coder.info.context_length == 16384  # the smallest: a prompt that fits one fits all
    assert coder.settings.routed and coder.settings.bounded and coder.fallbacks == ("hosted",)


def test_one_base_url_is_a_list_of_one_as_before(tmp_path):
    hosted = _load(tmp_path, TWO_BOXES).get("hosted")
    (only,) = hosted.settings.deployments
    assert (only.name, only.backend, only.settings.retries) == ("api.example.com", "anthropic", 2)
    assert not hosted.settings.routed  # nothing to place: no router, no Redis round trip


@pytest.mark.parametrize("table, message", [
    ('deployments = [{ base_url = "http://a" }]', "deployments[0]: upstream_model: Field required"),
    ('upstream_model = "m"\ncontext_length = 1\ndeployments = [{ base_url = "http://a" }, { base_url = "http://a" }]',
     "two deployments are named 'a': give each a distinct `name`"),
    ('upstream_model = "m"\ncontext_length = 1\ndeployments = [{ base_url = "http://a", backend = "echo" }]',
     "deployments[0]: backend 'echo' is not an upstream kind"),
    ('base_url = "http://a"\nupstream_model = "m"\ncontext_length = 1\nweight = 0',
     "deployments[0]: weight: Input should be greater than 0"),
    ('base_url = "http://a"\nupstream_model = "m"\ncontext_length = 1\nbogus = 1', "unknown key 'bogus'"),
    ('base_url = "http://a"\nupstream_model = "m"\ncontext_length = 1\nfallbacks = ["nope"]',
     'fallbacks: "nope" is not another model of the registry'),
    ('base_url = "http://a"\nupstream_model = "m"\ncontext_length = 1\nfallbacks = ["m"]',
     'fallbacks: "m" is not another model'),
    ('base_url = "http://a"\nupstream_model = "m"\ncontext_length = 1\nfallback_after = 5',
     "fallback_after needs fallbacks"),
], ids=["missing-key", "same-name", "not-upstream", "weight", "unknown-key", "unknown-fallback", "itself",
        "after-alone"])
def test_a_bad_deployment_refuses_to_load_naming_it(tmp_path, table, message):
    with pytest.raises(RegistryError) as error:
        _load(tmp_path, f'[models."m"]\nbackend = "openai"\n{table}\n')
    assert message in str(error.value) and 'models."m"' in str(error.value)
