"""`llamacpp`: a GGUF model run in the worker process by llama-cpp-python.

The model is loaded once per process (again only if a job asks for another
context size) and generation runs token by token through `Llama.generate`, so
token counts are exact and closing the generator stops llama.cpp at once.
llama_cpp is imported lazily: the front end describes models without it.
"""
from __future__ import annotations

import codecs
import json
import random
import threading
import time

from catalog.llamacpp import DEFAULT_SAMPLING, LlamaCppSettings
from protocol.contract import EmbedSpec, FinishReason, Job, SamplingOptions
from protocol.errors import BackendError, PromptTooLong
from workers.backends.base import Backend
from workers.backends.prompt_cache import PromptCache, live_reuse
from workers.cancel import Cancel
from workers.model_output import Embedded, Outcome, Prompted, TextGenerator
from workers.stops import StopMatcher

DEFAULT_KEEP_ALIVE = 300.0


# llama-cpp-python's schema converter lets raw control characters into JSON
# strings (`[^"\\]`), which no JSON parser accepts; llama.cpp's own converter
# excludes them, as its JSON_GBNF does.
_LOOSE_CHAR = 'char ::= [^"\\\\]'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F]'


def schema_grammar_text(schema: dict) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema)).replace(_LOOSE_CHAR, _JSON_CHAR)


def _grammar(job: Job):
    """Constrained decoding: a forced tool call (the worker's grammar), else
    any JSON value for "json", else the schema's."""
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    if job.grammar is not None:
        return LlamaGrammar.from_string(job.grammar, verbose=False)
    if job.format is None:
        return None
    if job.format == "json":
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    try:
        return LlamaGrammar.from_string(schema_grammar_text(job.format), verbose=False)
    except Exception as error:  # noqa: BLE001 - llama_cpp raises bare errors for schemas it cannot express
        raise BackendError(f"format: cannot build a grammar from this JSON schema ({error})", 400) from None


class _Loaded:
    def __init__(self, llm, n_ctx: int, cache_bytes: int):
        self.llm, self.n_ctx = llm, n_ctx
        self.cache = PromptCache(cache_bytes) if cache_bytes else None
        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise BackendError("the GGUF has no chat template", 500)
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        vocab = llm._model  # token texts for the template's bos/eos variables
        self.formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=vocab.token_get_text(llm.token_eos()),
            bos_token=vocab.token_get_text(llm.token_bos()),
        )


class LlamaCppBackend(Backend):
    name = "llamacpp"
    constrains_output = True
    settings: LlamaCppSettings

    def __init__(self, model_name: str, settings: LlamaCppSettings):
        super().__init__(model_name, settings)
        self._lock = threading.Lock()  # one Llama context serves one job at a time
        self._loaded: _Loaded | None = None
        self._embedder = None  # llamacpp_embed.Embedder, made on the first embedding job
        self._unload_timer: threading.Timer | None = None

    def _context_size(self, options: SamplingOptions) -> int:
        trained = self.settings.trained_context()
        return min(options.num_ctx or self.settings.n_ctx, trained)

    def load(self) -> int:
        with self._lock:
            return self._load(self._context_size(SamplingOptions()))

    def keep_loaded(self, seconds: float | None) -> None:
        """Unload after `seconds` idle (Ollama's keep_alive; default 5 min)."""
        seconds = DEFAULT_KEEP_ALIVE if seconds is None else seconds
        with self._lock:
            if self._unload_timer is not None:
                self._unload_timer.cancel()
                self._unload_timer = None
            if seconds == 0:
                self._loaded = self._embedder = None
            elif seconds > 0:
                self._unload_timer = threading.Timer(seconds, self._unload_if_idle)
                self._unload_timer.daemon = True
                self._unload_timer.start()

    def _unload_if_idle(self) -> None:
        if self._lock.acquire(blocking=False):  # a job running now keeps it
            try:
                self._loaded = self._embedder = None
            finally:
                self._lock.release()

    def _load(self, n_ctx: int) -> int:
        """Load (or reload for another context size); returns nanoseconds spent."""
        if self._unload_timer is not None:  # a job is starting: no unloading meanwhile
            self._unload_timer.cancel()
            self._unload_timer = None
        if self._loaded and self._loaded.n_ctx == n_ctx:
            return 0
        from llama_cpp import Llama

        started = time.perf_counter_ns()
        self._loaded = None
        llm = Llama(
            model_path=str(self.settings.gguf), n_ctx=n_ctx, n_batch=self.settings.n_batch,
            n_threads=self.settings.n_threads, verbose=False,
        )
        self._loaded = _Loaded(llm, n_ctx, self.settings.prompt_cache_mb * 2**20)
        return time.perf_counter_ns() - started

    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        # llama.cpp runs in this thread: the runner's check between tokens is enough.
        with self._lock:
            load_ns = self._load(self._context_size(job.options))
            outcome = yield from self._generate(self._loaded, job)
            outcome.load_ns = load_ns
            return outcome

    def count_tokens(self, job: Job) -> int:
        """The prompt through the model's own chat template and tokenizer,
        exactly as a reply to the job would count it."""
        with self._lock:
            self._load(self._context_size(job.options))
            return len(self._prompt_tokens(self._loaded, job)[0])

    def count_text(self, text: str) -> int:
        """Its tokens by the model's own tokenizer (an estimate if the model
        was unloaded meanwhile: this is asked just after a reply)."""
        with self._lock:
            if self._loaded is None:
                return super().count_text(text)
            return len(self._loaded.llm.tokenize(text.encode(), add_bos=False, special=False))

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        from workers.backends.llamacpp_embed import Embedder

        with self._lock:
            if self._unload_timer is not None:  # as _load: no unloading while a job runs
                self._unload_timer.cancel()
                self._unload_timer = None
            started = time.perf_counter_ns()
            if self._embedder is None:
                self._embedder = Embedder(self.settings)
            load_ns = time.perf_counter_ns() - started
            embedded = self._embedder.embed(spec)
            embedded.load_ns = load_ns
            return embedded

    def _prompt_tokens(self, loaded: _Loaded, job: Job) -> tuple[list[int], list[str]]:
        if job.prompt is not None:  # raw: byte for byte; special tokens (FIM markers) are parsed
            return loaded.llm.tokenize(job.prompt.prompt.encode(), add_bos=True, special=True), []
        messages = [m.model_dump(include={"role", "content"}) for m in job.messages]
        formatted = loaded.formatter(messages=messages)
        tokens = loaded.llm.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True)
        template_stops = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop or ""]
        return tokens, template_stops

    def _generate(self, loaded: _Loaded, job: Job) -> TextGenerator:
        import llama_cpp

        llm, options = loaded.llm, job.options
        prompt, template_stops = self._prompt_tokens(loaded, job)
        limit = _token_limit(loaded.n_ctx, len(prompt), options.max_tokens)
        stops = StopMatcher(options.stop + [s for s in template_stops if s])
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        reused = loaded.cache.prepare(llm, prompt) if loaded.cache else live_reuse(llm, prompt)
        llm.set_seed(options.seed if options.seed is not None else random.randrange(2**31))
        sampling = {k: v if (v := getattr(options, k)) is not None else d for k, d in DEFAULT_SAMPLING.items()}
        count, reason = 0, FinishReason.LENGTH
        tokens = llm.generate(prompt, temp=sampling["temperature"], top_k=sampling["top_k"], top_p=sampling["top_p"],
                              min_p=sampling["min_p"], repeat_penalty=sampling["repeat_penalty"],
                              grammar=_grammar(job))
        try:
            yield Prompted(len(prompt), reused.tokens)  # after the grammar: a bad schema is still a 400
            for token in tokens:
                if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                    reason = FinishReason.STOP
                    break
                count += 1
                text = stops.feed(utf8.decode(llm.detokenize([token])))
                if text:
                    yield text
                if stops.stopped:
                    reason = FinishReason.STOP
                    break
                if count >= limit:
                    break
        finally:
            tokens.close()
        tail = stops.feed(utf8.decode(b"", final=True)) + stops.flush()
        if tail:
            yield tail
        fired = stops.matched if stops.matched in options.stop else None  # the client's, not the template's
        return Outcome(reason, len(prompt), count, cached_tokens=reused.tokens, stop_sequence=fired)


def _token_limit(n_ctx: int, prompt_tokens: int, asked: int | None) -> int:
    """What the context leaves for the reply (PromptTooLong if nothing)."""
    room = n_ctx - prompt_tokens
    if room <= 0:
        raise PromptTooLong(f"the prompt is {prompt_tokens} tokens, more than the context window of {n_ctx}",
                            prompt_tokens, n_ctx)
    return min(asked or room, room)


BACKEND = LlamaCppBackend
