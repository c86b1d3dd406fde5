"""`llamacpp`: a GGUF model run in the worker process by llama-cpp-python.

The model is loaded once per process and serves up to `parallel` + `spare` jobs at
once, decoded together by its engine (workers/backends/llama_engine.py);
each job reads its tokens one by one, so token counts are exact, and
closing its generator frees its sequence at the engine's next step. A job's
`num_ctx` can narrow its window, never widen it past the registry's `n_ctx`:
reloading for one person would stop everyone else's jobs.
"""
from __future__ import annotations

import codecs
import json
import logging
import random
import threading

from catalog.llamacpp import LlamaCppSettings
from protocol.contract import EmbedSpec, Job, SamplingOptions
from protocol.events import FinishReason
from protocol.errors import BackendError, PromptTooLong
from workers.backends.base import Backend
from workers.backends.cpu_threads import batch_threads, decode_threads, physical_cores
from workers.backends.llama_engine import Engine, Finished, Request, Shape
from workers.backends.llama_sampling import Sampler
from workers.backends.llamacpp_embed import Embedder
from workers.backends.prompt_cache import SavedPrefixes
from workers.backends.residency import Residency
from workers.cancel import Cancel
from workers.model_output import Embedded, Outcome, Prompted, TextGenerator
from workers.stops import StopMatcher


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
    """The model and its engine; the chat template's formatter."""

    def __init__(self, settings: LlamaCppSettings):
        from llama_cpp._internals import LlamaModel
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.model = LlamaModel(path_model=str(settings.gguf), params=_model_params(), verbose=False)
        template = self.model.metadata().get("tokenizer.chat_template")
        if not template:
            self.model.close()
            raise BackendError("the GGUF has no chat template", 500)
        self.formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=self.model.token_get_text(self.model.token_eos()),
            bos_token=self.model.token_get_text(self.model.token_bos()),
        )
        self.seq_ctx = settings.served_context()
        saved = SavedPrefixes(settings.prompt_cache_mb * 2**20) if settings.prompt_cache_mb else None
        threads = decode_threads(settings.n_threads)  # (unless configured, a lone token's also every core's)
        lone = (threads,) if settings.n_threads else (threads, physical_cores())
        batch = batch_threads(settings.n_threads_batch)  # (unless configured, also one less, if faster)
        chunks = (batch,) if settings.n_threads_batch else (batch, max(1, batch - 1))
        shape = Shape(settings.jobs_at_once(), self.seq_ctx, settings.n_batch, threads, batch, lone, chunks)
        self.engine = Engine(self.model, shape, saved)

    def tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        return self.model.tokenize(text.encode(), add_bos=add_bos, special=special)

    def close(self) -> None:
        self.engine.close()
        self.model.close()


def _model_params():
    import llama_cpp

    # llama.cpp's own log goes through this logger: errors only, as Llama(verbose=False) sets it.
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
    return llama_cpp.llama_model_default_params()


class LlamaCppBackend(Backend):
    name = "llamacpp"
    constrains_output = True
    settings: LlamaCppSettings

    def __init__(self, model_name: str, settings: LlamaCppSettings):
        super().__init__(model_name, settings)
        self._model = Residency(lambda: _Loaded(settings), _Loaded.close)
        self._embedder = Residency(lambda: Embedder(settings), lambda _: None)  # its own context, for embeddings
        self._embed_lock = threading.Lock()  # which runs one batch at a time

    def _window(self, options: SamplingOptions) -> int:
        """A job's context: its num_ctx, within the one each sequence is served with."""
        served = self.settings.served_context()
        return min(options.num_ctx or served, served)

    def load(self) -> int:
        return self._model.load()

    def keep_loaded(self, seconds: float | None) -> None:
        self._model.keep_loaded(seconds)
        self._embedder.keep_loaded(seconds)

    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        with self._model.using() as (loaded, load_ns):
            outcome = yield from self._generate(loaded, job, cancel)
        outcome.load_ns = load_ns
        return outcome

    def count_tokens(self, job: Job) -> int:
        """The prompt through the model's own chat template and tokenizer,
        exactly as a reply to the job would count it."""
        with self._model.using() as (loaded, _):
            return len(self._prompt_tokens(loaded, job)[0])

    def count_text(self, text: str) -> int:
        """Its tokens by the model's own tokenizer (an estimate if the model
        was unloaded meanwhile: this is asked just after a reply)."""
        with self._model.using(load=False) as (loaded, _):
            if loaded is None:
                return super().count_text(text)
            return len(loaded.tokenize(text, add_bos=False, special=False))

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        with self._embedder.using() as (embedder, load_ns), self._embed_lock:
            embedded = embedder.embed(spec)
        embedded.load_ns = load_ns
        return embedded

    @staticmethod
    def _prompt_tokens(loaded: _Loaded, job: Job) -> tuple[list[int], list[str]]:
        if job.prompt is not None:  # raw: byte for byte; special tokens (FIM markers) are parsed
            tokens, stops = loaded.tokenize(job.prompt.prompt, add_bos=True, special=True), []
        else:
            messages = [m.model_dump(include={"role", "content"}) for m in job.messages]
            formatted = loaded.formatter(messages=messages)
            tokens = loaded.tokenize(formatted.prompt, add_bos=not formatted.added_special, special=True)
            stops = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop or ""]
        if not tokens:
            raise BackendError("prompt: empty (no tokens to continue from)", 400)
        return tokens, stops

    def _generate(self, loaded: _Loaded, job: Job, cancel: Cancel | None) -> TextGenerator:
        options = job.options
        prompt, template_stops = self._prompt_tokens(loaded, job)
        limit = _token_limit(self._window(options), len(prompt), options.max_tokens)
        stops = StopMatcher(options.stop + [s for s in template_stops if s])
        request = loaded.engine.submit(Request(prompt, _sampler(loaded, job), limit, job.session or job.usage_of))
        if cancel is not None:
            cancel.on_cancel(lambda: loaded.engine.cancel(request))
        try:
            admitted = request.out.get()
            if isinstance(admitted, Finished):  # aborted, or the model unloaded, while it waited
                return _unstarted(admitted, len(prompt))
            yield Prompted(len(prompt), admitted.reused)
            count, reason = yield from _relay(loaded, request, stops)
        finally:
            loaded.engine.cancel(request)  # left early (a stop sequence, closed): its sequence is freed
        fired = stops.matched if stops.matched in options.stop else None  # the client's, not the template's
        return Outcome(reason, len(prompt), count, cached_tokens=admitted.reused, stop_sequence=fired)


def _sampler(loaded: _Loaded, job: Job) -> Sampler:
    """The job's sampler chain; a grammar llama.cpp refuses is the client's 400."""
    seed = job.options.seed if job.options.seed is not None else random.randrange(2**31)
    try:
        return Sampler(loaded.model.vocab, loaded.model.n_vocab(), job.options, seed, _grammar(job))
    except ValueError as error:
        raise BackendError(f"format: {error}", 400) from None


def _unstarted(finished: Finished, prompt_tokens: int) -> Outcome:
    if finished.error is not None:
        raise finished.error
    return Outcome(FinishReason.STOP, prompt_tokens, 0)


def _relay(loaded: _Loaded, request: Request, stops: StopMatcher):
    """The engine's tokens as text, until it finishes or a stop sequence
    matches; returns (tokens, finish reason)."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    count, reason = 0, FinishReason.LENGTH
    while True:
        item = request.out.get()
        if isinstance(item, Finished):
            if item.error is not None:
                raise item.error
            reason = item.reason if item.reason != FinishReason.ABORTED else FinishReason.STOP
            break
        count += 1
        text = stops.feed(utf8.decode(loaded.model.detokenize([item])))
        if text:
            yield text
        if stops.stopped:
            reason = FinishReason.STOP
            break
    tail = stops.feed(utf8.decode(b"", final=True)) + stops.flush()
    if tail:
        yield tail
    return count, reason


def _token_limit(n_ctx: int, prompt_tokens: int, asked: int | None) -> int:
    """What the context leaves for the reply (PromptTooLong if nothing)."""
    room = n_ctx - prompt_tokens
    if room <= 0:
        raise PromptTooLong(f"the prompt is {prompt_tokens} tokens, more than the context window of {n_ctx}",
                            prompt_tokens, n_ctx)
    return min(asked or room, room)


BACKEND = LlamaCppBackend
