"""One loaded GGUF decoding several jobs together (continuous batching).

A llama.cpp context holds `parallel` sequences, one per job being served.
One decode thread steps them: each step is a single `llama_decode` of a
batch holding every generating sequence's last token plus, in what room the
batch has left, a chunk of the prompts still being evaluated. So a job that
arrives mid-stream joins at the next step, and its long prompt holds the
others back for one chunk at a time, never for the whole prompt.

Each sequence has a KV buffer of its own (llama.cpp's non-unified cache),
so its attention never spans another's cells: a job's numbers, and so its
text, are the same decoded alone or beside others, and the same as
llama-cpp-python's own `Llama` (flash attention off, as there). A new job's
sequence reuses the longest prefix any sequence holds (its own from a
previous job, or another one's, copied over), so people taking turns stay
warm without waiting for each other. A finished sequence keeps its tokens until
another job needs the slot; then they may be saved in RAM
(workers/backends/prompt_cache.py) for when their person comes back.

Jobs talk to the loop through `Request`: the engine puts `Admitted`, the
tokens, then one `Finished` on its queue; `cancel` frees its sequence at
the next step (a waiting request is dropped).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import llama_cpp

from protocol.events import FinishReason
from protocol.errors import BackendError
from workers.backends import omp_helpers
from workers.backends.llama_sampling import Sampler
from workers.backends.thread_choice import ThreadChoice
from workers.backends.prompt_cache import SavedPrefixes, common_prefix, copy_sequence

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    reason: FinishReason | None  # None: failed with `error`
    error: BackendError | None = None


@dataclass(frozen=True)
class Shape:
    """How a model is served: its sequences, each one's context, the tokens
    of a decode step, and llama.cpp's threads for one token and for batches."""
    parallel: int
    seq_ctx: int
    n_batch: int
    threads: int
    batch_threads: int
    lone_threads: tuple[int, ...] = ()  # counts a lone token's step may use (workers/backends/thread_choice.py)
    chunk_threads: tuple[int, ...] = ()  # counts a batch may use, timed on prompt chunks


@dataclass(frozen=True)
class Admitted:
    reused: int  # prompt tokens found evaluated in the cache


@dataclass(eq=False)
class Request:
    prompt: list[int]
    sampler: Sampler
    limit: int  # tokens to generate at most
    owner: str = ""  # whose prompt it is (an agent session, else a person; "" unknown)
    out: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(eq=False)
class Slot:
    seq: int
    kept: list[int] = field(default_factory=list)  # tokens whose cells the sequence holds, from position 0
    owner: str = ""  # whose prompt they are
    request: Request | None = None
    fed: int = 0  # prompt tokens decoded so far
    last: int | None = None  # the sampled token still to decode
    generated: int = 0
    used_at: float = 0.0

    @property
    def prefilling(self) -> bool:
        return self.request is not None and self.fed < len(self.request.prompt)


CHUNK_TRIAL = 3  # prompt chunks a trial of another thread count lasts (each up to a full batch)
SAVED_AT_LEAST = 32  # tokens of another owner's a sequence would lose: saved first (cheaper than a reread)


def _goes_to_another(slot: Slot, shared: int, request: Request) -> bool:
    """Whether the sequence's cells are about to go to someone else's
    prompt: one sharing less than half of them (another file, not the same
    person's next keystroke), or another owner's (two agent sessions share
    a long system prompt, and each its own history after it)."""
    if shared < len(slot.kept) // 2:
        return True
    return bool(slot.owner) and slot.owner != request.owner and len(slot.kept) - shared >= SAVED_AT_LEAST


class Engine:
    def __init__(self, model, shape: Shape, saved: SavedPrefixes | None = None):
        self.model, self.n_batch, self.saved = model, shape.n_batch, saved
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = shape.seq_ctx * shape.parallel  # each sequence's buffer holds seq_ctx cells
        params.n_batch = params.n_ubatch = shape.n_batch
        params.n_seq_max = shape.parallel
        params.n_threads, params.n_threads_batch = shape.threads, shape.batch_threads
        params.kv_unified = False
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(model.model, params)
        if not self.ctx:
            raise BackendError("llama.cpp could not create a context for the model", 500)
        self._memory = llama_cpp.llama_get_memory(self.ctx)
        self._batch = llama_cpp.llama_batch_init(shape.n_batch, 0, 1)
        self.slots = [Slot(seq) for seq in range(shape.parallel)]
        self._lone = ThreadChoice(shape.lone_threads or (shape.threads,))
        self._chunks = ThreadChoice(shape.chunk_threads or (shape.batch_threads,), trial=CHUNK_TRIAL)
        self._threads, self._batch_threads = shape.threads, shape.batch_threads
        self._pending: deque[Request] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self.steps = 0  # decode steps run (tests and metrics read it)
        self._computed = False  # since it last gave its helper threads back
        self._thread = threading.Thread(target=self._loop, name="llama-decode", daemon=True)
        self._thread.start()

    # -- the jobs' side --------------------------------------------------

    def submit(self, request: Request) -> Request:
        with self._wake:
            if self._closed:
                raise BackendError("the model was unloaded", 503)
            self._pending.append(request)
            self._wake.notify()
        return request

    def cancel(self, request: Request) -> None:
        request.cancel()
        with self._wake:
            self._wake.notify()

    @property
    def busy(self) -> int:
        """Sequences serving a job, and jobs waiting for one."""
        with self._wake:
            return sum(s.request is not None for s in self.slots) + len(self._pending)

    def close(self) -> None:
        """Stop the loop and free the context (jobs still running get an error)."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    # -- the decode thread -----------------------------------------------

    def _loop(self) -> None:
        try:
            while self._next_step():
                self._step()
        finally:
            self._release_all(BackendError("the model was unloaded", 503))
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self.ctx)

    def _next_step(self) -> bool:
        """Admit waiting jobs into free sequences; sleep while there is
        nothing to decode. False once closed."""
        with self._wake:
            while True:
                if self._closed:
                    return False
                self._drop_cancelled()
                self._admit()
                if any(s.request is not None for s in self.slots):
                    return True
                if self._computed:  # idle from now on: its helper threads go (omp_helpers)
                    omp_helpers.release()
                    self._computed = False
                self._wake.wait()

    def _drop_cancelled(self) -> None:
        for slot in self.slots:
            if slot.request is not None and slot.request.cancelled:
                self._free(slot, Finished(FinishReason.ABORTED))
        if any(r.cancelled for r in self._pending):
            kept = [r for r in self._pending if not r.cancelled]
            for request in self._pending:
                if request.cancelled:
                    request.sampler.close()
                    request.out.put(Finished(FinishReason.ABORTED))
            self._pending = deque(kept)

    def _admit(self) -> None:
        while self._pending:
            free = [s for s in self.slots if s.request is None]
            if not free:
                return
            request = self._pending.popleft()
            slot = self._place(request, free)
            slot.request, slot.fed, slot.last, slot.generated = request, len(slot.kept), None, 0
            slot.owner = request.owner
            request.out.put(Admitted(len(slot.kept)))

    def _place(self, request: Request, free: list[Slot]) -> Slot:
        """The free sequence for a prompt, holding the longest prefix of it
        that any sequence (copied over) or saved state (restored) holds."""
        prompt = request.prompt
        held = {s.seq: common_prefix(s.kept, prompt) for s in self.slots}  # once: up to 8k tokens each
        slot = max(free, key=lambda s: (held[s.seq], -s.used_at))
        own = held[slot.seq]
        if self.saved is not None and _goes_to_another(slot, own, request):  # keep theirs
            self.saved.save(self.ctx, slot.seq, slot.kept)
        donor = max(self.slots, key=lambda s: held[s.seq])
        shared = held[donor.seq]
        state, stored = self.saved.longest(prompt) if self.saved is not None else (None, 0)
        if stored > max(own, shared):
            self._forget(slot, 0)
            slot.kept = self.saved.restore(self.ctx, slot.seq, state)
            own = stored if slot.kept else 0
        elif shared > own:
            self._forget(slot, 0)
            copied = copy_sequence(self.ctx, donor.seq, slot.seq)
            slot.kept, own = (list(donor.kept), shared) if copied else ([], 0)
        self._forget(slot, min(own, len(prompt) - 1))  # the prompt's last token is decoded again: its logits
        return slot

    def _forget(self, slot: Slot, keep: int) -> None:
        """Drop the sequence's cells from position `keep` on."""
        if not llama_cpp.llama_memory_seq_rm(self._memory, slot.seq, keep, -1):
            llama_cpp.llama_memory_seq_rm(self._memory, slot.seq, -1, -1)  # partial removal refused: all of it
            keep = 0
        del slot.kept[keep:]

    def _step(self) -> None:
        outputs = self._fill_batch()
        status = self._decode_lone() if self._batch.n_tokens == 1 else self._decode_batch()
        self.steps += 1
        self._computed = True
        if status != 0:
            self._fail_batch(outputs, status)
            return
        for slot, index in outputs:
            self._deliver(slot, slot.request.sampler.sample(self.ctx, index))

    def _decode_lone(self) -> int:
        """A step of one token, with the thread count that decodes one fastest now."""
        threads = self._lone.pick()
        self._use_threads(threads, self._batch_threads)
        started = time.perf_counter()
        status = llama_cpp.llama_decode(self.ctx, self._batch)
        self._lone.record(threads, time.perf_counter() - started)
        return status

    def _decode_batch(self) -> int:
        """A step of several tokens. One holding a prompt's chunk (at least
        a quarter of a full batch) is timed, per token, to choose the count for all."""
        size = self._batch.n_tokens
        timed = size >= self.n_batch // 4
        threads = self._chunks.pick() if timed else self._small_batch_threads()
        self._use_threads(self._threads, threads)
        started = time.perf_counter()
        status = llama_cpp.llama_decode(self.ctx, self._batch)
        if timed:
            self._chunks.record(threads, (time.perf_counter() - started) / size)
        return status

    def _use_threads(self, threads: int, batch_threads: int) -> None:
        """llama.cpp's counts for a lone token and for a batch, set when they change."""
        if (threads, batch_threads) != (self._threads, self._batch_threads):
            llama_cpp.llama_set_n_threads(self.ctx, threads, batch_threads)
            self._threads, self._batch_threads = threads, batch_threads

    def _small_batch_threads(self) -> int:
        """A batch too small to time (a short prompt, several people's
        tokens) follows the lone steps, which see the load most often: when
        one token decodes faster with fewer threads than it could use, so
        many fewer than the chunks' count."""
        return max(1, self._chunks.best - self._lone.fewer())

    def _fill_batch(self) -> list[tuple[Slot, int]]:
        """Every generating sequence's token, then prompt chunks in the room
        left, the shortest rest of a prompt first: a short turn arriving
        while a long prompt is evaluated waits for the step under way, not
        for the long prompt. Returns the sequences whose logits are sampled,
        and where."""
        batch, outputs, n = self._batch, [], 0
        for slot in self.slots:
            if slot.request is not None and slot.last is not None:
                self._put(n, slot.last, len(slot.kept), slot.seq, True)
                slot.kept.append(slot.last)
                outputs.append((slot, n))
                n += 1
        waiting = sorted((s for s in self.slots if s.prefilling), key=lambda s: len(s.request.prompt) - s.fed)
        for slot in waiting:
            if n >= self.n_batch:
                break
            prompt = slot.request.prompt
            chunk = prompt[slot.fed: slot.fed + self.n_batch - n]
            for token in chunk:
                self._put(n, token, len(slot.kept), slot.seq, False)
                slot.kept.append(token)
                n += 1
            slot.fed += len(chunk)
            if slot.fed == len(prompt):
                batch.logits[n - 1] = 1
                outputs.append((slot, n - 1))
        batch.n_tokens = n
        return outputs

    def _put(self, i: int, token: int, pos: int, seq: int, logits: bool) -> None:
        batch = self._batch
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
        batch.seq_id[i][0] = seq
        batch.logits[i] = logits

    def _deliver(self, slot: Slot, token: int) -> None:
        request = slot.request
        slot.last = None
        if llama_cpp.llama_vocab_is_eog(self.model.vocab, token):
            self._free(slot, Finished(FinishReason.STOP))
            return
        request.out.put(token)
        slot.generated += 1
        if slot.generated >= request.limit:
            self._free(slot, Finished(FinishReason.LENGTH))
        else:
            slot.last = token

    def _fail_batch(self, outputs: list[tuple[Slot, int]], status: int) -> None:
        """A decode failed (no room in the cache, or an abort): every job in
        the batch ends with an error; their sequences start over."""
        log.error("llama_decode failed with status %d", status)
        error = BackendError(f"llama.cpp could not decode the batch (status {status})", 500)
        for slot in self.slots:
            if slot.request is not None and (slot.last is not None or slot.prefilling or
                                             any(s is slot for s, _ in outputs)):
                self._forget(slot, 0)
                self._free(slot, Finished(None, error))

    def _free(self, slot: Slot, finished: Finished) -> None:
        """The job is done with the sequence, which keeps its cells (`kept`)
        for the next prompt that shares them."""
        slot.request.sampler.close()
        slot.request.out.put(finished)
        slot.request, slot.last, slot.used_at = None, None, time.monotonic()

    def _release_all(self, error: BackendError) -> None:
        with self._wake:
            for slot in self.slots:
                if slot.request is not None:
                    self._free(slot, Finished(None, error))
            for request in self._pending:
                request.sampler.close()
                request.out.put(Finished(None, error))
            self._pending.clear()
