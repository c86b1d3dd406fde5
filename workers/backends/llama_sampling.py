"""One sequence's sampler: a llama.cpp sampler chain built the way
llama-cpp-python's `Llama.generate` builds its own (`Llama._init_sampler`),
so a job gets the same tokens for the same options and seed whether it is
decoded alone or beside others.

The chain holds the sequence's own state (recent tokens for the repeat
penalty, the grammar's position, the random generator), so sequences in one
batch never share one.
"""
from __future__ import annotations

import llama_cpp

from catalog.llamacpp import DEFAULT_SAMPLING
from protocol.contract import SamplingOptions

# Llama.generate's `last_n_tokens_size`: recent tokens the repeat penalty sees.
PENALTY_LAST_N = 64


def sampling_values(options: SamplingOptions) -> dict:
    """The job's options, Ollama's defaults where it set none."""
    return {k: v if (v := getattr(options, k)) is not None else d for k, d in DEFAULT_SAMPLING.items()}


class Sampler:
    """Owns a chain (freed by `close`); `sample` picks a batch output's token
    and records it in the chain's state."""

    def __init__(self, vocab, n_vocab: int, options: SamplingOptions, seed: int, grammar=None):
        values = sampling_values(options)
        self._chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        # llama-cpp-python passes the vocabulary size first (llama.h of its vendored llama.cpp).
        self._add(llama_cpp.llama_sampler_init_penalties(n_vocab, PENALTY_LAST_N, values["repeat_penalty"], 0.0, 0.0))
        if grammar is not None:  # a llama_cpp.llama_grammar.LlamaGrammar, already parsed
            self._add(llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode(), grammar._root.encode()))
        temperature = values["temperature"]
        if temperature < 0:
            self._add(llama_cpp.llama_sampler_init_dist(seed))
        elif temperature == 0:
            self._add(llama_cpp.llama_sampler_init_greedy())
        else:
            self._add(llama_cpp.llama_sampler_init_top_k(values["top_k"]))
            self._add(llama_cpp.llama_sampler_init_top_p(values["top_p"], 1))
            self._add(llama_cpp.llama_sampler_init_min_p(values["min_p"], 1))
            self._add(llama_cpp.llama_sampler_init_temp(temperature))
            self._add(llama_cpp.llama_sampler_init_dist(seed))

    def _add(self, sampler) -> None:
        if not sampler:
            self.close()
            raise ValueError("llama.cpp refused a sampler of this job's options")
        llama_cpp.llama_sampler_chain_add(self._chain, sampler)

    def sample(self, ctx, index: int) -> int:
        """The token for the logits at batch position `index` (accepted into
        the chain's state, as llama_sampler_sample does)."""
        return llama_cpp.llama_sampler_sample(self._chain, ctx, index)

    def close(self) -> None:
        if self._chain is not None:
            llama_cpp.llama_sampler_free(self._chain)
            self._chain = None
