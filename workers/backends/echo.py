"""`echo`: a deterministic backend for smoke tests, demos and benchmarks.

It replies with the last turn's text exactly as sent (system messages
after it passed over; after a round of tool results: every result of the
round, one per line; for a completion: the model input as built, so FIM and
template prompts can be seen), one token per word (each with its leading whitespace), honouring the token limit and
stops. It cannot constrain output, so `format` is not applied.

Its embeddings hash each word to one of `embedding_length` places (a
"hashed bag of words"): deterministic, and texts that share words point the
same way, enough to test an integration end to end (not to retrieve well).
"""
from __future__ import annotations

import hashlib
import itertools
import re
import time

from catalog.echo import EchoSettings
from protocol.contract import EmbedSpec, Job, Message
from protocol.events import FinishReason
from workers.backends.base import Backend, too_long
from workers.cancel import Cancel
from workers.model_output import Embedded, Outcome, Prompted, TextGenerator
from workers.stops import StopMatcher

_TOKEN = re.compile(r"\s*\S+|\s+")


def echo_tokens(text: str) -> list[str]:
    """Words with their leading whitespace; trailing whitespace is a token too."""
    return _TOKEN.findall(text)


def _pause(seconds: float, cancel: Cancel | None) -> bool:
    """Sleep; True if the job was cancelled meanwhile (woken at once)."""
    if cancel is None:
        time.sleep(seconds)
        return False
    return cancel.wait(seconds)


def hashed_words(text: str, length: int) -> list[float]:
    vector = [0.0] * length
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % length] += 1.0 if digest[4] & 1 else -1.0
    return vector


def _last_turn(messages: list[Message]) -> str:
    """The last user or tool turn: system messages after it are passed over
    (Claude Code ends every request with one)."""
    turns = list(itertools.dropwhile(lambda m: m.role == "system", reversed(messages))) or list(reversed(messages))
    results = list(itertools.takewhile(lambda m: m.role == "tool", turns))
    if results:
        return "\n".join(m.content for m in reversed(results))
    return turns[0].content if turns else ""


class EchoBackend(Backend):
    name = "echo"
    settings: EchoSettings
    reads_prompt = False  # its "reply" is the client's last message, tool markup included

    def generate(self, job: Job, cancel: Cancel | None = None) -> TextGenerator:
        # a completion's reply: the model input, as built
        reply = job.prompt.prompt if job.prompt is not None else _last_turn(job.messages)
        prompt_tokens = self.count_tokens(job)
        yield Prompted(prompt_tokens)
        limit = job.options.max_tokens
        stops = StopMatcher(job.options.stop)
        emitted = 0
        for token in echo_tokens(reply):
            if limit is not None and emitted >= limit:
                return Outcome(FinishReason.LENGTH, prompt_tokens, emitted)
            if emitted and self.settings.delay_ms and _pause(self.settings.delay_ms / 1000, cancel):
                return Outcome(FinishReason.STOP, prompt_tokens, emitted)  # the runner sees the abort
            emitted += 1
            text = stops.feed(token)
            if text:
                yield text
            if stops.stopped:
                return Outcome(FinishReason.STOP, prompt_tokens, emitted, stop_sequence=stops.matched)
        tail = stops.flush()
        if tail:
            yield tail
        return Outcome(FinishReason.STOP, prompt_tokens, emitted)

    def count_tokens(self, job: Job) -> int:
        """Its "tokens" are words: those of the prompt or the messages, as sent."""
        texts = [job.prompt.prompt] if job.prompt is not None else [m.content for m in job.messages]
        return sum(len(echo_tokens(text)) for text in texts)

    def count_text(self, text: str) -> int:
        return len(echo_tokens(text))

    def embed(self, spec: EmbedSpec, cancel: Cancel | None = None) -> Embedded:
        texts = spec.inputs if spec.tokens is None else [" ".join(map(str, ids)) for ids in spec.tokens]
        counts = [len(echo_tokens(text)) for text in texts]
        context = self.settings.context_length
        for index, count in enumerate(counts):
            if count > context and not spec.truncate:
                raise too_long(index, count, context)
        kept = ["".join(echo_tokens(text)[:context]) for text in texts]
        return Embedded([hashed_words(text, self.settings.embedding_length) for text in kept],
                        sum(min(count, context) for count in counts))


BACKEND = EchoBackend
