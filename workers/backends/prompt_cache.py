"""Several prompt states per local model, so that people taking turns each
keep their prefix (a llama.cpp context holds one prompt at a time).

The states live in llama-cpp-python's LlamaRAMCache (longest-prefix lookup,
least recently used evicted beyond a byte budget), captured per sequence
(see `_capture`). A state is saved when the
context is about to be given to another prompt (one sharing less than half
of it: someone else's file, not the same person's next keystroke; saving
costs about as much as restoring, so it is not done after every job), and
restored when it shares a longer prefix with the new prompt than the
context does.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Reuse:
    """What a prompt found: tokens already evaluated (0: evaluated from scratch)."""
    tokens: int = 0
    restored: bool = False  # from a saved state (else the live context)


def live_reuse(llm, prompt: list[int]) -> Reuse:
    """Without a cache: what the context holds now (llama-cpp-python reuses it)."""
    from llama_cpp import Llama

    return Reuse(Llama.longest_token_prefix(llm.input_ids[: llm.n_tokens], prompt))


class PromptCache:
    def __init__(self, capacity_bytes: int):
        from llama_cpp.llama_cache import LlamaRAMCache

        self._states = LlamaRAMCache(capacity_bytes=capacity_bytes)

    def prepare(self, llm, prompt: list[int]) -> Reuse:
        """Make the context hold the longest known prefix of `prompt`."""
        from llama_cpp import Llama

        live = list(llm.input_ids[: llm.n_tokens])
        live_prefix = Llama.longest_token_prefix(live, prompt)
        saved = self._lookup(prompt)
        saved_prefix = Llama.longest_token_prefix(saved.input_ids[: saved.n_tokens], prompt) if saved else 0
        if live_prefix < len(live) // 2:  # the context goes to someone else's prompt: keep it
            self._save(llm, live)
        if saved_prefix > live_prefix:
            _restore(llm, saved)
            return Reuse(saved_prefix, restored=True)
        return Reuse(live_prefix)

    def _lookup(self, prompt: list[int]):
        try:
            return self._states[prompt]
        except KeyError:
            return None

    def _save(self, llm, tokens: list[int]) -> None:
        if tuple(tokens) not in self._states.cache_state:
            self._states[tokens] = _capture(llm)

    @property
    def size_bytes(self) -> int:
        return self._states.cache_size


# The context's sequence 0 (the only one llama-cpp-python's Llama uses), saved
# and restored with llama.cpp's per-sequence state calls: the KV cells only.
# Llama.save_state/load_state also copy the logits of up to n_batch positions
# (about 100 MB for a 50k-token vocabulary) and the state three times over:
# 300 ms against 20 ms for a 2k-token prompt of SmolLM2-135M here.
def _capture(llm):
    import ctypes

    import llama_cpp
    import numpy as np
    from llama_cpp.llama import LlamaState

    ctx = llm._ctx.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    data = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, data, size, 0)
    return LlamaState(input_ids=llm.input_ids[: llm.n_tokens].copy(), scores=np.empty((0, 0), dtype=np.single),
                      n_tokens=llm.n_tokens, llama_state=data, llama_state_size=written, seed=0)


def _restore(llm, state) -> None:
    import llama_cpp

    if not llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, state.llama_state, state.llama_state_size, 0):
        raise RuntimeError("llama.cpp could not restore a saved prompt state")
    llm.input_ids[: state.n_tokens] = state.input_ids
    llm.n_tokens = state.n_tokens
    # No logits came with the state: Llama.generate must decode at least the
    # prompt's last token again before it samples.
    llm._requires_eval = True
