"""Prefixes saved in RAM, for more people than the engine has sequences.

The engine's sequences keep their tokens between jobs (the first tier of
the prompt cache). When a sequence is about to be given to someone else's
prompt (one sharing less than half of what it holds: another file, not the
same person's next keystroke; or another agent session's, which shares the
system prompt and not the history), its cells are saved here first, and a later
prompt that shares a longer prefix with a saved state than with any
sequence gets it restored into its sequence. States live in
llama-cpp-python's LlamaRAMCache (longest-prefix lookup, least recently
used evicted beyond a byte budget).

Saved and restored with llama.cpp's per-sequence state calls: the KV cells
only. (`Llama.save_state` also copies the logits of up to n_batch positions,
about 100 MB for a 50k-token vocabulary: 300 ms against 20 ms for a
2k-token prompt of SmolLM2-135M.)
"""
from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
from llama_cpp.llama import LlamaState
from llama_cpp.llama_cache import LlamaRAMCache


def common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def copy_sequence(ctx, source: int, target: int) -> bool:
    """Copy one sequence's cells into another, emptied one. (Each sequence
    has a KV buffer of its own, so `llama_memory_seq_cp` could only copy a
    whole buffer: llama.cpp asserts, ending the process, on a partial one.)"""
    size = llama_cpp.llama_state_seq_get_size(ctx, source)
    data = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, data, size, source)
    return bool(llama_cpp.llama_state_seq_set_data(ctx, data, written, target))


class SavedPrefixes:
    def __init__(self, capacity_bytes: int):
        self._states = LlamaRAMCache(capacity_bytes=capacity_bytes)

    def save(self, ctx, seq: int, tokens: list[int]) -> None:
        if tuple(tokens) in self._states.cache_state:
            return
        size = llama_cpp.llama_state_seq_get_size(ctx, seq)
        data = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, data, size, seq)
        self._states[tokens] = LlamaState(
            input_ids=np.array(tokens, dtype=np.intc), scores=np.empty((0, 0), dtype=np.single),
            n_tokens=len(tokens), llama_state=data, llama_state_size=written, seed=0)

    def longest(self, prompt: list[int]) -> tuple[LlamaState | None, int]:
        """The saved state sharing the longest prefix with the prompt, and how long."""
        try:
            state = self._states[prompt]
        except KeyError:
            return None, 0
        return state, common_prefix(state.input_ids.tolist(), prompt)

    def restore(self, ctx, seq: int, state: LlamaState) -> list[int]:
        """Into an emptied sequence; returns the tokens it now holds."""
        if not llama_cpp.llama_state_seq_set_data(ctx, state.llama_state, state.llama_state_size, seq):
            return []
        return state.input_ids.tolist()

    @property
    def size_bytes(self) -> int:
        return self._states.cache_size
