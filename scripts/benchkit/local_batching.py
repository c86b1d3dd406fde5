"""2b. The local model, shared: several people on SmolLM2-135M at once.

All ways in one run, in turns, greedy with the same repeat penalty, so each
gives the same tokens for the same person's prompt:
- the anchor: llama.cpp's own batched decode through its low-level API (one
  context, a sequence per person, one `llama_decode` per step for all of
  them), no serving around it;
- llama-cpp-python's `Llama` in-process, one person: its completion API
  with every core (physical cores decoding, every CPU for prompts), and
  `Llama.generate` token by token with its default threads (half the CPUs),
  which is what the llamacpp backend ran before it batched;
- Switchboard served (web, Redis, a worker) with 1, 2, 4 and 8 people at
  once, with the default threads and with `n_threads = 1`.

Tokens per second are each person's tokens over the wall time from the
first request sent to the last reply ended (aggregate), so prompts and
waiting count as they would for the people.
The arrival: three people stream long replies; a fourth sends a ~500-token
prompt and times its first token, against the same kind of prompt on the
idle server (its prompt's own evaluation).
"""
from __future__ import annotations

import asyncio
import logging
import time
from contextlib import ExitStack

import llama_cpp

from catalog.llamacpp import smollm2_gguf
from scripts.benchkit.client import StreamResult, open_stream, stream
from scripts.benchkit.sharing import _Stack, job_records
from scripts.benchkit.stats import percentile
from workers.backends.cpu_threads import physical_cores, usable_cpus

PEOPLE = (1, 2, 4, 8)
NAMES = ("Ada", "Bram", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana")
REPEAT_PENALTY = 1.1
REGISTRY = ('[models."smol"]\nbackend = "llamacpp"\nn_ctx = 2048\n\n'
            '[models."smol-1-thread"]\nbackend = "llamacpp"\nn_ctx = 2048\nn_threads = 1\nn_threads_batch = 1\n')


def question(n: int) -> str:
    return f"Write a long story about a brave knight named {NAMES[n]}."


def chat_text(n: int) -> str:
    """SmolLM2's chat template around a person's question (what the served
    ways build from the same message)."""
    return (f"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            f"<|im_start|>user\n{question(n)}<|im_end|>\n<|im_start|>assistant\n")


class Anchor:
    """llama.cpp's batched decode, as little around it as its API allows: a
    context with a sequence per person, made for each run."""

    def __init__(self):
        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's log: errors only
        self.model = llama_cpp._internals.LlamaModel(path_model=str(smollm2_gguf()),
                                                     params=llama_cpp.llama_model_default_params(), verbose=False)
        self.batch = llama_cpp.llama_batch_init(512, 0, 1)
        self.vocab = self.model.vocab
        self.ctx = None

    def _context(self, sequences: int):
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = 2048 * sequences, 512, 512, sequences
        params.n_threads, params.n_threads_batch = physical_cores(), usable_cpus()
        params.kv_unified, params.flash_attn_type = False, llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        return llama_cpp.llama_init_from_model(self.model.model, params)

    def _put(self, i: int, token: int, pos: int, seq: int, logits: bool) -> None:
        b = self.batch
        b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
        b.seq_id[i][0] = seq

    def run(self, people: int, tokens: int) -> tuple[float, list[int]]:
        """Aggregate tokens/s of `people` greedy sequences; each one's count."""
        if self.ctx is not None:
            llama_cpp.llama_free(self.ctx)
        self.ctx = self._context(people)
        chains = [self._chain() for _ in range(people)]
        started = time.perf_counter()
        prompts = [self.model.tokenize(chat_text(n).encode(), add_bos=False, special=True) for n in range(people)]
        n, outputs = 0, []
        for seq, prompt in enumerate(prompts):
            for pos, token in enumerate(prompt):
                self._put(n, token, pos, seq, pos == len(prompt) - 1)
                n += 1
            outputs.append(n - 1)
        self.batch.n_tokens = n
        llama_cpp.llama_decode(self.ctx, self.batch)
        positions, counts, live = [len(p) for p in prompts], [0] * people, set(range(people))
        while live:
            sampled = {seq: llama_cpp.llama_sampler_sample(chains[seq], self.ctx, outputs[i])
                       for i, seq in enumerate(sorted(live))}
            outputs = []
            for seq, token in sampled.items():
                if llama_cpp.llama_vocab_is_eog(self.vocab, token) or counts[seq] == tokens:
                    live.discard(seq)
                    continue
                counts[seq] += 1
                self._put(len(outputs), token, positions[seq], seq, True)
                positions[seq] += 1
                outputs.append(len(outputs))
            live = {seq for seq in live if counts[seq] < tokens}
            if not live:
                break
            self.batch.n_tokens = len(outputs)
            llama_cpp.llama_decode(self.ctx, self.batch)
        seconds = time.perf_counter() - started
        for chain in chains:
            llama_cpp.llama_sampler_free(chain)
        return sum(counts) / seconds, counts

    def _chain(self):
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_penalties(
            self.model.n_vocab(), 64, REPEAT_PENALTY, 0.0, 0.0))
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain

    def close(self) -> None:
        llama_cpp.llama_batch_free(self.batch)
        if self.ctx is not None:
            llama_cpp.llama_free(self.ctx)
        self.model.close()


def library_rate(llm, tokens: int) -> float:
    """One person on llama-cpp-python in-process, its completion API."""
    started = time.perf_counter()
    reply = llm.create_chat_completion([{"role": "user", "content": question(0)}], max_tokens=tokens, temperature=0,
                                       repeat_penalty=REPEAT_PENALTY)
    return reply["usage"]["completion_tokens"] / (time.perf_counter() - started)


def generate_loop_rate(llm, tokens: int) -> float:
    """One person through `Llama.generate`, token by token, as the llamacpp
    backend ran before it batched (an upper bound of what it served: the
    serving around it only adds)."""
    started, count = time.perf_counter(), 0
    prompt = llm.tokenize(chat_text(0).encode(), add_bos=False, special=True)
    for token in llm.generate(prompt, temp=0.0, top_k=40, top_p=0.9, min_p=0.0, repeat_penalty=REPEAT_PENALTY):
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
            break
        llm.detokenize([token])
        count += 1
        if count == tokens:
            break
    return count / (time.perf_counter() - started)


async def served(port: int, model: str, people: int, tokens: int) -> dict:
    """`people` at once on Switchboard: aggregate and each one's tokens/s."""
    def body(n: int) -> dict:
        return {"model": model, "stream": True, "messages": [{"role": "user", "content": question(n)}],
                "max_tokens": tokens, "temperature": 0, "repeat_penalty": REPEAT_PENALTY,
                "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    results = await asyncio.gather(*(stream(port, "/v1/chat/completions", body(n)) for n in range(people)))
    seconds = time.perf_counter() - started
    _check(results)
    counts = [r.completion_tokens for r in results]
    return {"aggregate": sum(counts) / seconds, "each": [c / r.total for c, r in zip(counts, results)],
            "counts": counts, "ttft": [r.ttft for r in results]}


def _check(results: list[StreamResult]) -> None:
    for result in results:
        if result.status != 200 or result.error or not result.completion_tokens:
            raise RuntimeError(f"local batching: {result.status} {result.error or result.text[:200]}")


def _long_prompt(tag: str) -> str:
    """~500 tokens nobody sent before (no cache can hold its prefix)."""
    return f"# {tag}\n" + "".join(f"def f_{tag}_{n}(x):\n    return x * {n}\n\n" for n in range(40))


async def arrival(port: int, round_: int) -> tuple[float, float]:
    """A ~500-token prompt's time to first token on the idle server, then
    while three people stream."""
    async def first_token(tag: str) -> float:
        # two tokens: a turn someone waits on (a one-token call is a probe, which the fair queue runs as
        # background work, behind the room it leaves for turns: dialects/hints.py)
        result = await stream(port, "/v1/completions", {"model": "smol", "prompt": _long_prompt(tag),
                                                        "max_tokens": 2, "stream": True, "temperature": 0})
        if result.status != 200 or result.ttft is None:
            raise RuntimeError(f"local batching: {result.status} {result.error or result.text[:200]}")
        return result.ttft

    alone = await first_token(f"alone{round_}")
    # three people streaming long replies (their first text has come), unread meanwhile
    others = await asyncio.gather(*(open_stream(port, "/v1/chat/completions", {
        "model": "smol", "stream": True, "messages": [{"role": "user", "content": question(n)}], "max_tokens": 400,
        "temperature": 0}, until_text=True) for n in range(3)))
    try:
        beside = await first_token(f"beside{round_}")
    finally:
        for writer, _ in others:  # they leave: their jobs are aborted
            writer.close()
    return alone, beside


def _all_interactive(redis_url: str) -> None:
    """Every job of the section ran as a turn: one the fair queue took for
    background work would wait behind the room it leaves, and time that."""
    background = sum(record.get("priority") == "background" for record in job_records(redis_url))
    if background:
        raise RuntimeError(f"local batching: {background} of its requests ran as background work")


def measure(tokens: int, rounds: int, log=print, people_at_once: tuple[int, ...] = PEOPLE) -> dict:
    rates: dict[str, list[float]] = {}
    each: dict[str, list[float]] = {}
    arrivals: list[tuple[float, float]] = []
    same_tokens = True  # every way generated as many tokens for each person (greedy: the same ones)
    with ExitStack() as stack:
        anchor = Anchor()
        stack.callback(anchor.close)
        every_core = llama_cpp.Llama(model_path=str(smollm2_gguf()), n_ctx=2048, n_threads=physical_cores(),
                                     n_threads_batch=usable_cpus(), verbose=False)
        default = llama_cpp.Llama(model_path=str(smollm2_gguf()), n_ctx=2048, verbose=False)
        served_stack = stack.enter_context(_Stack(REGISTRY, [(8, "local-completion,local", "threads")]))
        for round_ in range(rounds + 1):  # round 0 loads and warms every way up
            got = {"llama-cpp-python in-process, every core": library_rate(every_core, tokens),
                   "before batching: Llama.generate, default threads": generate_loop_rate(default, tokens)}
            for people in people_at_once:
                got[f"anchor: llama.cpp batched, {people}"], anchor_counts = anchor.run(people, tokens)
                for model, label in (("smol", "switchboard"), ("smol-1-thread", "switchboard n_threads=1")):
                    result = asyncio.run(served(served_stack.port, model, people, tokens))
                    got[f"{label}, {people}"] = result["aggregate"]
                    same_tokens &= result["counts"] == anchor_counts
                    if round_:
                        each.setdefault(f"{label}, {people}", []).extend(result["each"])
            if round_:
                arrivals.append(asyncio.run(arrival(served_stack.port, round_)))
                for name, value in got.items():
                    rates.setdefault(name, []).append(value)
            log(f"2b. local batching: round {round_} done")
        _all_interactive(served_stack.redis_url)
    return {"same_tokens": same_tokens, "rates": {name: percentile(values, 0.5) for name, values in rates.items()},
            "rounds": rates, "alone_ms_rounds": [a * 1000 for a, _ in arrivals],
            "each_p50": {name: percentile(values, 0.5) for name, values in each.items()},
            "arrival": {"alone_ms": percentile([a for a, _ in arrivals], 0.5) * 1000,
                        "beside_three_ms": percentile([b for _, b in arrivals], 0.5) * 1000},
            "setup": (f"SmolLM2-135M Q4_1, {tokens} tokens at most per person, greedy, repeat penalty "
                      f"{REPEAT_PENALTY}; {rounds} rounds in turns after a warm-up; {physical_cores()} physical "
                      f"cores, {usable_cpus()} usable CPUs. Switchboard: one worker (8 slots), the registry's "
                      "default `parallel` (4), n_ctx 2048 per sequence.")}
