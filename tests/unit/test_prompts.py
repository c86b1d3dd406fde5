"""Completion prompts: FIM per family (exact strings), templates, raw."""
import pytest

from catalog import gotemplate
from protocol.contract import Job, PromptSpec, SamplingOptions
from protocol.errors import BackendError, SwitchboardError
from catalog.fim import FAMILIES
from workers.prompts import is_load_only, resolve_prompt


def job(**spec):
    return Job(id="j", model="m", prompt=PromptSpec(**spec), options=SamplingOptions(stop=["X"]))


@pytest.mark.parametrize("family, expected", [
    ("qwen2.5-coder", "<|fim_prefix|>def f(a):\n    <|fim_suffix|>\n    return b<|fim_middle|>"),
    ("codellama", "<PRE> def f(a):\n     <SUF>\n    return b <MID>"),
    ("starcoder2", "<fim_prefix>def f(a):\n    <fim_suffix>\n    return b<fim_middle>"),
    ("deepseek-coder", "<｜fim▁begin｜>def f(a):\n    <｜fim▁hole｜>\n    return b<｜fim▁end｜>"),
    ("codegemma", "<|fim_prefix|>def f(a):\n    <|fim_suffix|>\n    return b<|fim_middle|>"),
])
def test_fim_prompt_per_family(family, expected):
    resolved = resolve_prompt(job(prompt="def f(a):\n    ", suffix="\n    return b"), family)
    assert resolved.prompt == PromptSpec(prompt=expected, raw=True)
    assert resolved.options.stop == ["X", *FAMILIES[family].stops]
    assert "{{ .Suffix }}" in FAMILIES[family].template


def test_no_family_stops_for_a_backend_that_reads_no_prompt():
    resolved = resolve_prompt(job(prompt="a", suffix="b"), "qwen2.5-coder", family_stops=False)
    assert resolved.options.stop == ["X"]


def test_suffix_without_a_fim_family_is_refused():
    with pytest.raises(BackendError, match='"m" does not support insert'):
        resolve_prompt(job(prompt="a", suffix="b"), None)


def test_raw_is_untouched_and_plain_becomes_a_chat():
    raw = job(prompt="  exact\n", raw=True)
    assert resolve_prompt(raw, None) is raw
    chat = resolve_prompt(job(prompt="q", system="s"), None)
    assert chat.prompt is None and [(m.role, m.content) for m in chat.messages] == [("system", "s"), ("user", "q")]


def test_request_template_override():
    resolved = resolve_prompt(job(prompt="hi", system="be kind", template="{{ if .System }}[{{ .System }}] {{ end }}U: {{ .Prompt }}"), None)
    assert resolved.prompt.prompt == "[be kind] U: hi"


@pytest.mark.parametrize("template, expected", [
    ("{{ .Prompt }}", "P"),
    ("{{- if .Suffix }}A{{ .Suffix }}{{- else }}B{{ .Prompt }}{{- end }}", "BP"),
    ("x  {{- .Prompt -}}  y", "xPy"),
    ("{{ if .System }}S{{ end }}{{ .Prompt }}", "P"),
])
def test_go_template_subset(template, expected):
    assert gotemplate.render(template, prompt="P") == expected


def test_bad_template_is_a_400():
    with pytest.raises(SwitchboardError) as error:
        gotemplate.render("{{ range .Messages }}")
    assert error.value.status == 400


def test_load_only():
    assert is_load_only(job(prompt="")) and not is_load_only(job(prompt="", suffix="x"))
    assert is_load_only(Job(id="j", model="m")) and not is_load_only(job(prompt="a"))
