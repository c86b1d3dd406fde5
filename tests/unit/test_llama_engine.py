"""The llamacpp backend's batched engine on the real SmolLM2-135M: a job
gets the same text decoded alone or beside others (and the same as
llama-cpp-python's own `Llama.generate`), an abort frees its sequence within
a step, a long prompt arriving mid-stream holds the others back for one
chunk at a time, prefixes are reused across sequences, and a grammar job
runs beside free ones."""
from __future__ import annotations

import json
import math
import os
import threading
import time

import llama_cpp
import pytest
from llama_cpp._internals import LlamaModel

from catalog.llamacpp import LlamaCppSettings, smollm2_gguf
from protocol.contract import EmbedSpec, Job, Message, SamplingOptions
from protocol.events import FinishReason
from workers.backends.llama_engine import Admitted, Engine, Finished, Request, Shape
from workers.backends.llama_sampling import Sampler
from workers.backends.llamacpp import LlamaCppBackend
from workers.backends.llamacpp_embed import Embedder
from workers.backends.prompt_cache import SavedPrefixes
from workers.cancel import Cancel

pytestmark = pytest.mark.slow
QUESTIONS = ["Name three colors.", "What is a dragon?", "Count to five.", "Say hello in French."]
ONE = Shape(parallel=1, seq_ctx=512, n_batch=64, threads=2, batch_threads=2)
WARM = SamplingOptions(temperature=0.8, top_k=40, top_p=0.9, seed=11, max_tokens=24)


@pytest.fixture(scope="module")
def backend():
    return LlamaCppBackend("smol", LlamaCppSettings(n_ctx=1024, parallel=4, n_batch=64))


@pytest.fixture(scope="module")
def model():
    loaded = LlamaModel(path_model=str(smollm2_gguf()), params=llama_cpp.llama_model_default_params(), verbose=False)
    yield loaded
    loaded.close()


@pytest.fixture
def engine(model):
    running = Engine(model, Shape(parallel=2, seq_ctx=2048, n_batch=64, threads=2, batch_threads=2))
    yield running
    running.close()


def job(question: str, options: SamplingOptions = WARM, **extra) -> Job:
    return Job(id="j", model="smol", messages=[Message(role="user", content=question)], options=options, **extra)


def reply(backend: LlamaCppBackend, asked: Job, cancel: Cancel | None = None) -> str:
    return "".join(piece for piece in backend.generate(asked, cancel) if isinstance(piece, str))


def together(backend: LlamaCppBackend, jobs: list[Job]) -> list[str]:
    """The jobs' replies, all submitted at once (each from its own thread, as
    a worker's slots run them)."""
    texts: list[str | None] = [None] * len(jobs)
    start = threading.Barrier(len(jobs))

    def run(i: int) -> None:
        start.wait()
        texts[i] = reply(backend, jobs[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return texts


def test_the_same_seed_and_options_give_the_same_text_batched_and_alone(backend):
    alone = [reply(backend, job(q)) for q in QUESTIONS]
    assert together(backend, [job(q) for q in QUESTIONS]) == alone
    assert all(alone) and len(set(alone)) == len(alone)


def test_alone_it_matches_llama_cpp_pythons_own_generation(backend):
    llm = llama_cpp.Llama(model_path=str(smollm2_gguf()), n_ctx=1024, verbose=False)
    expected = llm.create_chat_completion(
        messages=[{"role": "user", "content": QUESTIONS[1]}], temperature=0.8, top_k=40, top_p=0.9, min_p=0.0,
        repeat_penalty=1.1, seed=WARM.seed, max_tokens=WARM.max_tokens)
    asked = job(QUESTIONS[1])
    assert reply(backend, asked) == expected["choices"][0]["message"]["content"]
    assert backend.count_tokens(asked) == expected["usage"]["prompt_tokens"]


def test_a_reply_is_the_same_whichever_thread_counts_decode_it(model):
    """Its steps change thread counts as the engine times them (a trial of
    two, then the faster; its prompt's chunks too): the tokens are those of
    one fixed count."""
    prompt = "Tell me a story about a knight who " + "rides through the old forest and " * 12 + "finds"

    def tokens(lone: tuple[int, ...], chunks: tuple[int, ...], options: SamplingOptions) -> list[int]:
        engine = Engine(model, Shape(parallel=1, seq_ctx=512, n_batch=16, threads=1, batch_threads=2,
                                     lone_threads=lone, chunk_threads=chunks))
        try:
            asked = request(model, engine, prompt, 40, options)
            found = _tokens_of(asked)
            assert all(engine._chunks._recent[n] for n in chunks)  # each count evaluated some of the prompt
            return found
        finally:
            engine.close()
    for options in (SamplingOptions(temperature=0.0), WARM):
        assert tokens((1, 2), (2, 1), options) == tokens((1,), (2,), options)


def test_a_small_batch_takes_one_thread_less_while_a_lone_token_does(model):
    engine = Engine(model, Shape(parallel=1, seq_ctx=256, n_batch=64, threads=1, batch_threads=2,
                                 lone_threads=(1, 2), chunk_threads=(2, 1)))
    try:
        assert engine._small_batch_threads() == 2  # (the lone steps not timed yet)
        for seconds in [0.02] * 8 + [0.015] * 8 + [0.08] * 2 + [0.02] * 8:  # idle: two chosen; then a busy core
            engine._lone.record(engine._lone.pick(), seconds)
        assert engine._lone.best == 1 and engine._small_batch_threads() == 1
    finally:
        engine.close()


def _tokens_of(asked: Request) -> list[int]:
    found = []
    while True:
        item = asked.out.get(timeout=60)
        if isinstance(item, Finished):
            return found
        if not isinstance(item, Admitted):
            found.append(item)


def request(model, engine: Engine, text: str, limit: int, options: SamplingOptions = WARM) -> Request:
    prompt = model.tokenize(text.encode(), add_bos=True, special=False)
    return engine.submit(Request(prompt, Sampler(model.vocab, model.n_vocab(), options, 1), limit))


def test_an_abort_frees_its_sequence_within_a_step(model, engine):
    running = request(model, engine, "Once upon a time", limit=1000)
    assert isinstance(running.out.get(timeout=60), Admitted)
    for _ in range(3):
        assert isinstance(running.out.get(timeout=60), int)
    steps = engine.steps
    engine.cancel(running)
    while not isinstance(item := running.out.get(timeout=60), Finished):
        pass
    assert item.reason == FinishReason.ABORTED and engine.steps <= steps + 1
    assert engine.busy == 0


def test_a_long_prompt_arriving_mid_stream_holds_the_others_back_one_chunk_at_a_time(model, engine):
    streaming = request(model, engine, "Once upon a time", limit=1500)
    assert isinstance(streaming.out.get(timeout=60), Admitted)
    assert isinstance(streaming.out.get(timeout=60), int)
    long_text = " ".join(f"item {n}," for n in range(300))
    arriving = request(model, engine, long_text, limit=1)
    prompt_tokens = len(model.tokenize(long_text.encode(), add_bos=True, special=False))
    assert isinstance(arriving.out.get(timeout=120), Admitted)
    assert isinstance(arriving.out.get(timeout=120), int)  # its prompt is evaluated: its first token
    meanwhile = 0
    while not streaming.out.empty():
        meanwhile += isinstance(streaming.out.get(), int)
    # each step held the streaming job's token and at most n_batch - 1 prompt tokens
    assert meanwhile >= math.ceil(prompt_tokens / (engine.n_batch - 1)) - 1
    engine.cancel(streaming)


class Noting(Sampler):
    """A sampler that notes the engine's step at each token it picks (on
    the decode thread: no race with the test's own reading)."""

    def __init__(self, model, engine: Engine):
        super().__init__(model.vocab, model.n_vocab(), WARM, 1)
        self.engine, self.steps = engine, []

    def sample(self, ctx, index: int) -> int:
        self.steps.append(self.engine.steps)
        return super().sample(ctx, index)


def test_a_short_turn_arriving_during_a_long_prompt_waits_one_chunk_not_the_prompt(model):
    """A 1,700-token prompt is evaluated in chunks of 32 (54 steps); a short
    turn arriving meanwhile has its first token within the step under way
    and its own, not after the long prompt's."""
    engine = Engine(model, Shape(parallel=2, seq_ctx=2048, n_batch=32, threads=2, batch_threads=2))
    try:
        long_text = " ".join(f"item {n}," for n in range(300))
        long_prompt = model.tokenize(long_text.encode(), add_bos=True, special=False)
        long_turn = engine.submit(Request(long_prompt, Noting(model, engine), 1))
        assert isinstance(long_turn.out.get(timeout=60), Admitted)
        short_sampler = Noting(model, engine)
        short = engine.submit(Request(model.tokenize(b"Say hi.", add_bos=True, special=False), short_sampler, 1))
        arrived = engine.steps  # (read after submitting: a late read only loosens the bound)
        assert isinstance(short.out.get(timeout=60), Admitted) and isinstance(short.out.get(timeout=60), int)
        assert isinstance(long_turn.out.get(timeout=120), int)
        assert short_sampler.steps[0] <= arrived + 2 < long_turn.sampler.steps[0], (
            arrived, short_sampler.steps, long_turn.sampler.steps, len(long_prompt))
    finally:
        engine.close()


def test_a_prompt_reuses_the_prefix_another_sequence_holds(model, engine):
    shared = "You are a helpful assistant. " * 20
    first = request(model, engine, shared + "Tell me a story.", limit=400)
    assert isinstance(first.out.get(timeout=60), Admitted)
    assert isinstance(first.out.get(timeout=60), int)  # its prompt is in the cache
    second = request(model, engine, shared + "Name a color.", limit=2)
    admitted = second.out.get(timeout=60)
    assert admitted.reused >= len(model.tokenize(shared.encode(), add_bos=True, special=False)) - 2
    engine.cancel(first)


def test_a_grammar_constrained_job_beside_free_ones(backend):
    jobs = [job(q) for q in QUESTIONS[:3]]
    jobs.append(job("Name a big city and its population, as JSON.",
                    SamplingOptions(temperature=0.8, seed=3, max_tokens=120), format="json"))
    texts = together(backend, jobs)
    assert isinstance(json.loads(texts[-1]), dict)
    assert texts[:3] == [reply(backend, j) for j in jobs[:3]]


def test_keep_alive_zero_waits_for_the_other_peoples_jobs():
    own = LlamaCppBackend("smol", LlamaCppSettings(n_ctx=512, parallel=2, prompt_cache_mb=0))
    long_reply = own.generate(job(QUESTIONS[0], SamplingOptions(temperature=0, max_tokens=100)))
    next(p for p in long_reply if isinstance(p, str))  # someone's reply is streaming
    assert reply(own, job(QUESTIONS[1], SamplingOptions(temperature=0, max_tokens=2)))
    own.keep_loaded(0)  # another person's request asks to unload
    assert "".join(p for p in long_reply if isinstance(p, str))  # the first reply runs to its end
    with own._model.using(load=False) as (loaded, _):
        assert loaded is None  # then the model is unloaded


def test_closing_a_reply_early_frees_its_sequence_for_the_next_job(backend):
    pieces = backend.generate(job(QUESTIONS[0], SamplingOptions(temperature=0, max_tokens=200)))
    next(p for p in pieces if isinstance(p, str))
    pieces.close()
    assert reply(backend, job(QUESTIONS[2]))  # the engine goes on serving
    with backend._model.using(load=False) as (loaded, _):
        assert loaded.engine.busy == 0


def test_agent_sessions_sharing_a_system_prompt_each_get_their_history_back_from_ram(model):
    """Two sessions on one sequence, the same long system prompt, each its
    own short history after it: the other's turn shares more than half of
    the cells, yet they are another session's, so they are saved, and each
    session's next turn reads all of its previous prompt from the cache."""
    system = "You are a careful coding agent. Use the tools. " * 12
    saved = SavedPrefixes(64 * 2**20)
    engine = Engine(model, Shape(parallel=1, seq_ctx=1024, n_batch=64, threads=2, batch_threads=2), saved)

    def turn(owner: str, text: str) -> tuple[int, int]:
        prompt = model.tokenize((system + text).encode(), add_bos=True, special=False)
        asked = engine.submit(Request(prompt, Sampler(model.vocab, model.n_vocab(), WARM, 1), 2, owner))
        admitted = asked.out.get(timeout=60)
        while not isinstance(asked.out.get(timeout=60), Finished):
            pass
        return admitted.reused, len(prompt)
    try:
        ada = " ".join(f"ada read file {n}." for n in range(12))
        bob = " ".join(f"bob ran test {n}." for n in range(12))
        _, ada_first = turn("ada", ada)
        _, bob_first = turn("bob", bob)
        assert turn("ada", ada + " ada goes on")[0] >= ada_first - 2
        assert turn("bob", bob + " bob goes on")[0] >= bob_first - 2
    finally:
        engine.close()


def test_a_person_back_after_others_took_the_only_sequence_is_restored_from_ram(model):
    """More people than sequences: the one sequence is saved in RAM when it
    goes to someone else's prompt, and restored for its person's next turn,
    which continues exactly as a fresh evaluation does."""
    alice = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n" * 4
    bob = "The capital of France is Paris. The capital of Italy is" * 4
    greedy = SamplingOptions(temperature=0, repeat_penalty=1.1)

    def turn(engine: Engine, text: str) -> tuple[int, list[int]]:
        asked = request(model, engine, text, limit=6, options=greedy)
        admitted, tokens = asked.out.get(timeout=60), []
        while not isinstance(item := asked.out.get(timeout=60), Finished):
            tokens.append(item)
        return admitted.reused, tokens

    fresh = Engine(model, ONE)
    expected = turn(fresh, alice + "    return")[1]
    fresh.close()
    saved = SavedPrefixes(64 * 2**20)
    engine = Engine(model, ONE, saved)
    try:
        turn(engine, alice)
        assert turn(engine, bob)[0] == 0 and saved.size_bytes > 0  # alice's cells went to RAM
        reused, tokens = turn(engine, alice + "    return")
        alice_tokens = len(model.tokenize(alice.encode(), add_bos=True, special=False))
        assert reused >= alice_tokens - 2 and tokens == expected
    finally:
        engine.close()


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _threads_back_to(count: int, within: float = 30.0) -> int:
    """The process's thread count once it is down to `count`, or after `within` seconds."""
    deadline = time.monotonic() + within
    while _threads() > count and time.monotonic() < deadline:
        time.sleep(0.01)
    return _threads()


def test_an_idle_engine_gives_its_helper_threads_back(model, engine):
    """llama.cpp's OpenMP helpers of a decode thread go when its engine goes
    idle: while an idle model's helpers stayed, libgomp made every thread of
    the process sleep at its barriers, and another model decoded 3x slower
    (workers/backends/omp_helpers.py)."""
    before = _threads()
    _tokens_of(request(model, engine, "Once upon a time", limit=8))
    assert _threads_back_to(before) == before


def test_a_thread_that_embedded_keeps_no_helper_threads():
    """A worker's job thread that embedded (the default registry's embedding
    model) holds no helpers afterwards, for as long as it lives."""
    embedder = Embedder(LlamaCppSettings(n_ctx=512))
    go, embedded, done = threading.Event(), threading.Event(), threading.Event()

    def embed_then_wait():
        go.wait(60)
        embedder.embed(EmbedSpec(inputs=["an idle thread holds nothing"]))
        embedded.set()
        done.wait(60)
    living = threading.Thread(target=embed_then_wait)
    living.start()
    try:
        before = _threads()  # with it running, before its computation made helpers
        go.set()
        assert embedded.wait(60)
        assert _threads_back_to(before) == before
    finally:
        done.set()
        living.join()
