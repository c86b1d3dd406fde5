"""Fill-in-the-middle prompt templates per model family (chosen in the
registry with `fim = "..."`), with the stop strings each family needs."""
from __future__ import annotations

from dataclasses import dataclass

from catalog import gotemplate


@dataclass(frozen=True)
class FimTemplate:
    template: str  # Go-style, as /api/show shows it (Continue looks for .Suffix)
    stops: tuple[str, ...]

    def render(self, prefix: str, suffix: str) -> str:
        return gotemplate.render(self.template, prompt=prefix, suffix=suffix)


def _fim(prefix: str, suffix: str, middle: str, stops: tuple[str, ...], spaced: bool = False) -> FimTemplate:
    if spaced:  # CodeLlama puts spaces around the prefix marker and before the middle one
        template = f"{prefix} {{{{ .Prompt }}}} {suffix}{{{{ .Suffix }}}} {middle}"
    else:
        template = f"{prefix}{{{{ .Prompt }}}}{suffix}{{{{ .Suffix }}}}{middle}"
    return FimTemplate(template, stops)


FAMILIES: dict[str, FimTemplate] = {
    "qwen2.5-coder": _fim("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", (
        "<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>",
        "<|file_sep|>", "<|im_start|>", "<|im_end|>")),
    "codellama": _fim("<PRE>", "<SUF>", "<MID>", ("<EOT>", "<PRE>", "<SUF>", "<MID>"), spaced=True),
    "starcoder2": _fim("<fim_prefix>", "<fim_suffix>", "<fim_middle>", (
        "<|endoftext|>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>")),
    "deepseek-coder": _fim("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", (
        "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>", "<|EOT|>", "<｜end▁of▁sentence｜>")),
    "codegemma": _fim("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", (
        "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_separator|>", "<end_of_turn>", "<eos>")),
}
