"""7. Sharing the server (issue 14), each on a small stack of its own:

- fairness: person A submits a batch at once, person B sends requests spread
  over the same time; B's wait for a slot (time to first token: the echo
  model's first token is immediate) with the fair queue and with FIFO;
- an anonymous burst: concurrent requests from the official `ollama` client
  with keys off, all from one address (the default set-up);
- the prompt cache: people taking turns with completion requests over their
  own ~2k-token file on the local model, with the cache, with every prompt
  new (nothing to reuse), one person alone (warm), and llama-cpp-python's
  server with the same cache budget (`--cache`).
"""
from __future__ import annotations

import asyncio
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from catalog.llamacpp import smollm2_gguf
from scripts.benchkit.client import StreamResult, stream
from scripts.benchkit.stack import LLAMA_KEY, port_of
from scripts.benchkit.stats import summary
from scripts.embedded_redis import EmbeddedRedis
from scripts.processes import (ROOT, ready_together, stack_env, start_llama_server, start_web, start_worker,
                               stop_together)

SLOTS = 4
CACHE_MB = 512
PEOPLE = ("A", "B", "C", "D")
# The people's files: sources of this repository, about 2k tokens each.
FILES = ("app/jobs.py", "workers/runner.py", "protocol/presence.py", "dialects/openai.py")
FILE_CHARS = 7000


class _Stack:
    """A Redis, a registry, workers and a web process; all stopped on exit."""

    def __init__(self, registry: str, workers: list[tuple[int, str, str]], redis_url: str | None = None,
                 tree: Path = ROOT, **env: str):
        """On a Redis of its own, or on `redis_url`; of the source tree `tree`."""
        self._exit = ExitStack()
        self.folder = Path(self._exit.enter_context(tempfile.TemporaryDirectory()))
        (self.folder / "models.toml").write_text(registry)
        if redis_url is None:
            redis = EmbeddedRedis()
            self._exit.callback(redis.stop)
            redis_url = redis.url
        self.redis_url = redis_url
        self.env = stack_env(redis_url, SWITCHBOARD_MODELS=str(self.folder / "models.toml"),
                             SWITCHBOARD_MAX_QUEUE="5000", **env)
        started = []  # side by side: each process takes seconds to start (and to stop)
        self._exit.callback(lambda: stop_together(started[::-1]))
        for concurrency, queues, pool in workers:
            started.append(start_worker(self.env, concurrency, queues, pool, wait=False, cwd=tree))
        self.web, base = start_web(self.env, wait=False, cwd=tree)
        started.append(self.web)
        ready_together(started)
        self.port = port_of(base)

    def __enter__(self) -> "_Stack":
        return self

    def __exit__(self, *exc) -> None:
        self._exit.close()


# --- fairness ------------------------------------------------------------------------
FAIR_REGISTRY = '[models."job"]\nbackend = "echo"\npool = "shared"\ndelay_ms = 40\n'
JOB_TEXT = " ".join(["word"] * 6)  # six tokens, 40 ms apart: 0.2 s a job


def job_records(redis_url: str) -> list[dict]:
    """The record of every job the stack's Redis still holds (who asked,
    when it was queued and taken, its priority)."""
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        return [client.hgetall(key) for key in client.scan_iter(match="switchboard:job:*:state", count=1000)]
    finally:
        client.close()


def _queue_waits(redis_url: str) -> dict[str, list[float]]:
    """Per person, each job's wait in the queue: from being queued to being
    taken by a worker (the records the fair queue leaves)."""
    waits: dict[str, list[float]] = {}
    for record in job_records(redis_url):
        if record.get("taken_at") and record.get("enqueued_at"):
            waits.setdefault(record["person"], []).append(float(record["taken_at"]) - float(record["enqueued_at"]))
    return waits


async def _fairness_run(port: int, a_jobs: int, b_jobs: int) -> dict:
    """One round: A's batch, B's requests spread over it; each one's results."""
    def ask(person: str):
        return stream(port, "/v1/chat/completions", {"model": "job", "stream": True, "messages": [
            {"role": "user", "content": JOB_TEXT}]}, {"Authorization": f"Bearer {person}-key"})

    started = time.monotonic()
    batch = [asyncio.ensure_future(ask("a")) for _ in range(a_jobs)]
    service_time = (len(JOB_TEXT.split()) - 1) * 0.040
    spread = a_jobs * service_time / SLOTS  # how long A's batch keeps every slot busy
    b_results = []
    for n in range(b_jobs):
        await asyncio.sleep(max(0.0, started + n * spread / b_jobs - time.monotonic()))
        b_results.append(await ask("b"))
    return {"a": await asyncio.gather(*batch), "b": b_results, "seconds": time.monotonic() - started}


def _answered(result: StreamResult) -> bool:
    return result.status == 200 and not result.error and result.ttft is not None


def _fairness_rounds(port: int, a_jobs: int, b_jobs: int, rounds: int) -> dict:
    """`rounds` rounds on one stack, pooled (and each round's median job time: the target's anchor)."""
    runs = [asyncio.run(_fairness_run(port, a_jobs, b_jobs)) for _ in range(rounds)]
    a_results, b_results = [r for run in runs for r in run["a"]], [r for run in runs for r in run["b"]]
    results = a_results + b_results
    def answered(found: list) -> list:
        return [r for r in found if _answered(r)]
    failed = [r for r in results if not _answered(r)]
    return {"b_ttft_ms": summary([r.ttft for r in answered(b_results)]),
            "a_ttft_ms": summary([r.ttft for r in answered(a_results)]),
            "job_ms": summary([r.total - r.ttft for r in answered(results)]),
            "job_ms_rounds": [summary([r.total - r.ttft for r in answered(run["a"] + run["b"])])["p50"]
                              for run in runs],
            "failed": len(failed), "failure": f"{failed[0].status} {failed[0].error or failed[0].text[:200]}"
            if failed else None,
            "seconds": sum(run["seconds"] for run in runs)}


FIFO_ROUNDS = 3  # FIFO is the comparison, not the target: its rounds wait out A's whole batch


def fairness(a_jobs: int, b_jobs: int, rounds: int = 1) -> dict:
    rows = {}
    for policy in ("fair", "fifo"):
        with _Stack(FAIR_REGISTRY, [(SLOTS, "shared-completion,shared", "threads")],
                    SWITCHBOARD_API_KEYS="a:a-key,b:b-key", SWITCHBOARD_QUEUE_POLICY=policy,
                    SWITCHBOARD_REQUESTS_PER_MINUTE="1000000") as stack:  # (rounds of A's batch within a minute)
            rows[policy] = _fairness_rounds(stack.port, a_jobs, b_jobs, rounds if policy == "fair" else
                                            min(rounds, FIFO_ROUNDS))
            waits = _queue_waits(stack.redis_url)
            rows[policy] |= {"b_wait_ms": summary(waits.get("b", [])), "a_wait_ms": summary(waits.get("a", []))}
    return {"rows": rows, "setup": (
        f"One worker with {SLOTS} slots; each job is the echo model's six tokens 40 ms apart (0.2 s). Person A "
        f"sends {a_jobs} requests at once; person B sends {b_jobs}, one after another, spread over the time A's "
        f"batch keeps the slots busy; {rounds} such rounds on one stack, pooled ({min(rounds, FIFO_ROUNDS)} with "
        "FIFO). Queue wait: from the job being queued to a worker taking it (the job's record in Redis); time to "
        "first token: as the client sees it (the echo model's first token is immediate), which adds the web "
        "process's work under the load of A's streams. Both people have keys; same machine, same run, one policy "
        "after the other.")}


# --- anonymous burst -----------------------------------------------------------------
async def _burst_run(port: int, requests: int) -> dict:
    import ollama

    client = ollama.AsyncClient(host=f"http://127.0.0.1:{port}", timeout=300)

    async def one(n: int) -> str:
        reply = await client.chat(model="job", messages=[{"role": "user", "content": f"{JOB_TEXT} {n}"}])
        return reply["message"]["content"]

    started = time.monotonic()
    outcomes = await asyncio.gather(*(one(n) for n in range(requests)), return_exceptions=True)
    seconds = time.monotonic() - started
    ok = sum(1 for n, o in enumerate(outcomes) if o == f"{JOB_TEXT} {n}")
    errors = sorted({type(o).__name__ + ": " + str(o)[:80] for o in outcomes if isinstance(o, BaseException)})
    return {"requests": requests, "succeeded": ok, "errors": errors, "seconds": seconds,
            "workers_need_seconds": requests * len(JOB_TEXT.split() + ["n"]) * 0.040 / SLOTS}


def anonymous_burst(requests: int) -> dict:
    with _Stack(FAIR_REGISTRY, [(SLOTS, "shared-completion,shared", "threads")]) as stack:
        result = asyncio.run(_burst_run(stack.port, requests))
    result["setup"] = (f"Keys off (the default): every request from 127.0.0.1, one person. {requests} concurrent "
                       f"`ollama.AsyncClient().chat` calls; one worker with {SLOTS} slots; default limits "
                       "(16 running per person, 500 waiting per pool).")
    return result


# --- prompt cache --------------------------------------------------------------------
def _cache_registry() -> str:
    return f'[models."smol-cache"]\nbackend = "llamacpp"\npool = "local"\nn_ctx = 4096\nprompt_cache_mb = {CACHE_MB}\n'



def _file(n: int, chars: int) -> str:
    return (ROOT / FILES[n]).read_text()[:chars]


async def _turns(port: int, model: str, people: tuple[str, ...], rounds: int, chars: int,
                 headers: dict | None = None, path: str = "/v1/completions", new: bool = False) -> list[float]:
    """Each person's file plus what they typed this round; the first round
    warms up (not counted). `new`: each prompt starts with a line of its own,
    so no cache holds any of it. Returns times to first token, in seconds."""
    ttfts = []
    for round_ in range(rounds + 1):
        for n, person in enumerate(people):
            prompt = _file(PEOPLE.index(person), chars) + f"\n# {person} edits, round {round_}\ndef "
            if new:
                prompt = f"# {person}, round {round_}\n" + prompt
            result = await stream(port, path, {"model": model, "prompt": prompt, "max_tokens": 4, "stream": True,
                                               "temperature": 0}, headers)
            if result.status != 200 or result.ttft is None:
                raise RuntimeError(f"{model}: {result.status} {result.error or result.text[:200]}")
            if round_:
                ttfts.append(result.ttft)
    return ttfts


def prompt_cache(rounds: int, chars: int = FILE_CHARS) -> dict:
    rows = {}
    # Two slots: a worker whose only slot is busy stops polling Celery for up
    # to a second after it frees (kombu's Redis transport sleeps while it may
    # not consume), which would add that second to every request here.
    with _Stack(_cache_registry(), [(2, "local-completion,local", "threads")]) as stack:
        warm = asyncio.run(_turns(stack.port, "smol-cache", ("A",), rounds * 4, chars))
        rows["one person alone (warm)"] = summary(warm)
        warm_rounds = [summary(warm[n: n + 2])["p50"] for n in range(0, len(warm), 2)]  # (pairs of turns)
        rows["4 people, prompt cache"] = summary(asyncio.run(_turns(stack.port, "smol-cache", PEOPLE, rounds, chars)))
        rows["4 people, every prompt new"] = summary(asyncio.run(_turns(stack.port, "smol-cache", PEOPLE, rounds, chars,
                                                                        new=True)))
    server, url = start_llama_server(smollm2_gguf(), LLAMA_KEY, (
        "--n_ctx", "4096", "--cache", "true", "--cache_type", "ram", "--cache_size", str(CACHE_MB * 2**20)))
    try:
        rows["4 people, llama-cpp-python server --cache"] = summary(asyncio.run(_turns(
            port_of(url), "smollm2", PEOPLE, rounds, chars, {"Authorization": f"Bearer {LLAMA_KEY}"})))
    finally:
        server.stop()
    return {"rows": rows, "warm_ms_rounds": warm_rounds, "setup": (
        f"SmolLM2-135M, n_ctx 4096, one worker (two slots; the model's four sequences). Four people, each with their own file "
        f"({chars} characters of a source file of this repository; 7,000 are about 2k tokens), take turns with completion requests "
        f"(`/v1/completions`, 4 tokens, greedy): their file plus a line typed that round. {rounds} rounds after "
        f"a warm-up round; `every prompt new` starts each prompt with a line of its own (nothing to reuse). "
        f"Prompt cache budget {CACHE_MB} MB, the same for llama-cpp-python's server "
        "(`--cache true --cache_type ram`). Time to first token, milliseconds.")}
