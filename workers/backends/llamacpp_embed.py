"""Embeddings from a GGUF model: a second llama.cpp context made for them
(embedding mode, mean pooling), whose batch holds a whole input.

Inputs are tokenized here to apply `truncate` (cut to the context, or a 400);
token arrays are the model's own token ids, turned back into text for
llama-cpp-python's `embed`, which tokenizes itself."""
from __future__ import annotations

from catalog.llamacpp import LlamaCppSettings
from protocol.contract import EmbedSpec
from workers.backends import omp_helpers
from workers.backends.base import too_long
from workers.backends.cpu_threads import batch_threads, decode_threads
from workers.model_output import Embedded


class Embedder:
    def __init__(self, settings: LlamaCppSettings):
        import llama_cpp

        self.n_ctx = min(settings.embedding_ctx, settings.trained_context())
        self.llm = llama_cpp.Llama(
            model_path=str(settings.gguf), embedding=True, n_ctx=self.n_ctx, n_batch=self.n_ctx, n_ubatch=self.n_ctx,
            pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, n_threads=decode_threads(settings.n_threads),
            n_threads_batch=batch_threads(settings.n_threads_batch), verbose=False)

    def _texts(self, spec: EmbedSpec) -> list[str]:
        if spec.tokens is not None:
            return [self.llm.detokenize(ids).decode("utf-8", errors="replace") for ids in spec.tokens]
        return spec.inputs

    def embed(self, spec: EmbedSpec) -> Embedded:
        texts = self._texts(spec)
        if not spec.truncate:
            for index, text in enumerate(texts):
                count = len(self.llm.tokenize(text.encode("utf-8")))
                if count > self.n_ctx:
                    raise too_long(index, count, self.n_ctx)
        try:
            vectors, tokens = self.llm.embed(texts, normalize=False, truncate=True, return_count=True)
        finally:
            omp_helpers.release()  # this job's thread computes no more (omp_helpers: they slow the decode threads)
        return Embedded([list(v) for v in vectors], tokens)
