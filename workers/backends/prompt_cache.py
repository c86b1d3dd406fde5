"""Several prompt states per local model, so that people taking turns each
keep their prefix (a llama.cpp context holds one prompt at a time).

The states live in llama-cpp-python's LlamaRAMCache (longest-prefix lookup,
least recently used evicted beyond a byte budget). A state is saved when the
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
        self.capacity_bytes = capacity_bytes

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
            llm.load_state(saved)
            return Reuse(saved_prefix, restored=True)
        return Reuse(live_prefix)

    def _lookup(self, prompt: list[int]):
        try:
            return self._states[prompt]
        except KeyError:
            return None

    def _save(self, llm, tokens: list[int]) -> None:
        if tuple(tokens) in self._states.cache_state:
            return
        state = llm.save_state()
        # save_state copies the logits of up to n_batch positions (about 100 MB
        # for a 50k-token vocabulary) that the cache's budget does not count;
        # a restored state is always re-evaluated from at least its last
        # token (Llama.generate), so one row is enough.
        state.scores = state.scores[-1:].copy()
        self._states[tokens] = state

    @property
    def size_bytes(self) -> int:
        return self._states.cache_size
