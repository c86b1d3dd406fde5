"""The guard's step between a job and its model: every round's request is
scanned before it leaves (guard/scrub.py), redacted or refused as the
policy says (guard/policy.py), and the reply's pieces get the person's
values back before anything else sees them (the tool-call filter, the
server-side tools, the publisher: every dialect and wire at once).

What is remembered, in Redis, for SWITCHBOARD_GUARD_MEMORY_HOURS after last
use: each scanned text's findings by its digest (kinds and spans, never a
value; agents resend the whole conversation each turn, so a turn scans only
its new messages), and, per person, the values their requests carried,
sealed under the office secret (AES-GCM, bound to the person): restored
into their replies and replaced wherever they come again (a value the model
repeated in prose, after a client compacted the message it came in away).
One round trip reads both; a second writes what was new.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib.metadata import version
from ipaddress import ip_network
from pathlib import Path
from typing import Callable

from redis import Redis

from catalog.registry import ModelEntry
from guard.finding import Finding
from guard.placeholders import PREFIX, Restorer, person_key, restore
from guard.policy import ACTIONS, Policy, allow_list, default_policy, strictest
from guard.scrub import Scrubbed, scrub, texts_of
from identity.sealing import Sealer, office_secret
from protocol.contract import Job
from protocol.errors import InvalidRequest
from protocol.keys import guard_scanned_key, guard_values_key
from workers.guard_memory import TextMemory
from workers.model_output import NativeCall, TextGenerator, Thinking

_SEALED_KIND = "guard value"
# A person's values read from Redis serve their next turns in this process for this long, where every text of
# the turn was scanned here (an agent's tool loop): a value another worker learned meanwhile waits for the next
# read (it is found again wherever its detector sees it).
VALUES_FRESH_SECONDS = 2.0


class SecretsInRequest(InvalidRequest):
    """A request a `block` policy refused: each secret's kind and where it was, never its value."""

    code = "secrets_in_request"


@dataclass
class GuardReport:
    """What the guard did to one request, for its records."""

    action: str  # logged, redacted, blocked
    kinds: dict[str, int]  # what the request held (its last round's scan)
    first_seen: Counter = field(default_factory=Counter)  # of those, found for the first time (not remembered)

    def summary(self) -> dict:
        return {"action": self.action, "kinds": self.kinds}


@dataclass(frozen=True)
class GuardConfig:
    """The operator's settings for the guard (SWITCHBOARD_GUARD*)."""

    networks: tuple = ()  # the operator's networks: an upstream there is not guarded by default
    allowed: Callable[[str], bool] = lambda value: False  # the allow-list
    allow_tag: bytes = b""  # the allow-list's text: a new one is a new digest space for what was scanned
    memory_seconds: int = 86400
    default: str = "auto"

    @classmethod
    def of(cls, settings) -> "GuardConfig":
        cidrs = settings.guard_networks if settings.guard_networks is not None else settings.trusted_networks
        networks = tuple(ip_network(c.strip(), strict=False) for c in (cidrs or "").split(",") if c.strip())
        lines = Path(settings.guard_allow_file).read_text() if settings.guard_allow_file else ""
        return cls(networks, allow_list(lines.splitlines()), lines.encode(), int(settings.guard_memory_hours * 3600),
                   settings.guard)


class Guards:
    """A worker process's guard: its settings, and the findings it remembers."""

    def __init__(self, redis: Redis, secret: bytes, config: GuardConfig = GuardConfig()):
        self.redis, self.secret, self.networks = redis, secret, config.networks
        self.allowed, self.memory = config.allowed, config.memory_seconds
        self.default = None if config.default == "auto" else Policy.named(config.default)
        self.sealer = Sealer(secret)
        # Findings depend on the detector and the allow-list: a change of either is a new digest space.
        self.tag = hashlib.sha256(b"guard 1\n" + version("detect-secrets").encode() + b"\n" + config.allow_tag).digest()
        self.texts = TextMemory()
        self.keys: dict[str, bytes] = {}
        self.policies: dict[str, Policy | None] = {}  # each model's, as the registry and the default make it
        self.values_read: dict[str, tuple[float, dict]] = {}  # person -> (when, their sealed values as read)

    @classmethod
    def of(cls, redis: Redis, settings) -> "Guards":
        secret = office_secret(settings.secret.get_secret_value() if settings.secret else None, settings.data_dir)
        return cls(redis, secret, GuardConfig.of(settings))

    def policy(self, entry: ModelEntry, job: Job) -> Policy:
        """The model's policy (the registry's, else the server's default), or the key's if stricter."""
        if entry.name not in self.policies:
            model = Policy.named(entry.guard) if entry.guard else self.default
            self.policies[entry.name] = model if model is not None else default_policy(_base_urls(entry),
                                                                                        self.networks)
        return strictest(self.policies[entry.name], Policy.named(job.guard) if job.guard else None)

    def for_job(self, job: Job, entry: ModelEntry) -> "JobGuard":
        return JobGuard(self, job, self.policy(entry, job))

    def person_key(self, person: str) -> bytes:
        if person not in self.keys:
            self.keys[person] = person_key(self.secret, person)
        return self.keys[person]

    def digest(self, person: str, text: str) -> bytes:
        """A text's name among what was scanned, per person: one person's scan is never another's record
        (nor a clue, by its speed, to what someone else sent)."""
        hashed = hashlib.blake2b(person.encode(), digest_size=16, key=self.tag)
        hashed.update(b"\0" + text.encode(errors="surrogatepass"))
        return hashed.digest()



def _base_urls(entry: ModelEntry) -> list[str]:
    deployments = getattr(entry.settings, "deployments", None)
    if deployments is not None:
        return [d.settings.base_url for d in deployments]
    url = getattr(entry.settings, "base_url", None)
    return [url] if url else []


class JobGuard:
    """One job's guard: each round's request scanned (`outbound`), the reply restored (`restored`)."""

    def __init__(self, guards: Guards, job: Job, policy: Policy):
        self.guards, self.policy, self.person, self.model = guards, policy, job.usage_of, job.model
        self.values: dict[str, str] = {}
        self.last: Scrubbed | None = None
        self.first_seen: Counter = Counter()

    def outbound(self, job: Job) -> Job:
        """The job as its model may get it: unchanged (off, log), redacted; or SecretsInRequest (block)."""
        if self.policy == Policy.OFF:
            return job
        guards, redact, person = self.guards, self.policy == Policy.REDACT, self.person
        found, sealed = self._read(job, redact)
        known = self._opened(sealed)
        self.last = scrub(job, found.__getitem__, guards.person_key(person), known, redact,
                          lambda change, values: guards.texts.redacting(person, values, change))
        if self.policy == Policy.BLOCK and self.last.found:
            raise SecretsInRequest(_refusal(self.last, self.model))
        if redact:
            self.values = self.last.values
            self._keep(known)
            return self.last.job
        return job

    def _read(self, job: Job, redact: bool) -> tuple[dict[str, list[Finding]], dict]:
        """The findings of the job's texts (those this process does not remember from Redis, or scanned now
        and written), and the person's sealed values: one round trip, and one more for what is new. (Taken
        at once, before any round trip lets another job of this process forget them.)"""
        guards, person = self.guards, self.person
        found: dict[str, list[Finding] | None] = {}
        for _, text in texts_of(job):
            if text and text not in found:
                remembered = guards.texts.get(person, text)
                found[text] = None if remembered is None else remembered.findings
        missing = [text for text, findings in found.items() if findings is None]
        if not missing and not redact:
            return found, {}
        read_at, sealed = guards.values_read.get(person, (0.0, {}))
        if not missing and time.monotonic() - read_at < VALUES_FRESH_SECONDS:
            return found, sealed  # an agent's next turn, all of it scanned here: its person's values as just read
        digests = [guards.digest(person, text) for text in missing]
        pipe = guards.redis.pipeline(transaction=False)
        if missing:
            pipe.mget([guard_scanned_key(d.hex()) for d in digests])
        if redact:
            pipe.hgetall(guard_values_key(person))
            pipe.expire(guard_values_key(person), guards.memory)
        replies = pipe.execute()
        writes = guards.redis.pipeline(transaction=False) if missing else None
        for text, digest, raw in zip(missing, digests, replies[0] if missing else ()):
            if raw is not None:
                found[text] = [Finding(*f) for f in json.loads(raw)]
            else:
                found[text] = _detect(text, guards.allowed)
                self.first_seen.update(f.kind for f in found[text])
                writes.set(guard_scanned_key(digest.hex()),
                           json.dumps([[f.kind, f.start, f.end] for f in found[text]]), ex=guards.memory)
            guards.texts.put(person, text, found[text])
        if writes is not None and len(writes):
            writes.execute()
        if redact:
            guards.values_read[person] = (time.monotonic(), replies[-2])
        return found, replies[-2] if redact else {}

    def _opened(self, sealed: dict) -> dict[str, str]:
        opened = {}
        for stand_in, blob in sealed.items():
            try:
                opened[stand_in.decode()] = self.guards.sealer.open(_SEALED_KIND, self.person, blob.decode(), "-")
            except InvalidRequest:  # sealed under another office secret: forgotten
                continue
        return opened

    def _keep(self, known: dict[str, str]) -> None:
        """The person's values found in this round that were not known yet, sealed."""
        new = {p: v for p, v in self.values.items() if p not in known}
        if not new:
            return
        key, sealer = guard_values_key(self.person), self.guards.sealer
        sealed = {p: sealer.seal(_SEALED_KIND, self.person, v) for p, v in new.items()}
        with self.guards.redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=sealed)
            pipe.expire(key, self.guards.memory)
            pipe.execute()
        read_at, known_sealed = self.guards.values_read.get(self.person, (0.0, {}))
        self.guards.values_read[self.person] = (read_at, known_sealed | {p.encode(): v.encode()
                                                                         for p, v in sealed.items()})

    def restored(self, pieces: TextGenerator) -> TextGenerator:
        """The reply's pieces with the person's placeholders replaced by their values (text and thinking as
        they stream, a placeholder cut across pieces included; a native call's arguments as JSON)."""
        if not self.values:
            return pieces
        return _restored(pieces, self.values)

    def report(self) -> GuardReport | None:
        if self.policy == Policy.OFF or self.last is None or not self.last.found:
            return None
        return GuardReport(ACTIONS[self.policy], self.last.counts(), self.first_seen)


def _detect(text: str, allowed: Callable[[str], bool]) -> list[Finding]:
    """guard.detect.find, loaded on a worker's first scan: a worker whose models are all unguarded never
    loads the detectors."""
    from guard.detect import find
    return find(text, allowed)


def _restored(pieces: TextGenerator, values: dict[str, str]) -> TextGenerator:
    text, thought = Restorer(values.get), Restorer(values.get)
    as_json = {p: json.dumps(v, ensure_ascii=False)[1:-1] for p, v in values.items()}
    try:
        while True:
            try:
                piece = next(pieces)
            except StopIteration as end:
                yield from _flushed(text, thought)
                return end.value
            if isinstance(piece, str):
                yield from _flushed(None, thought)
                restored = text.feed(piece)
                if restored:
                    yield restored
            elif isinstance(piece, Thinking):
                yield from _flushed(text, None)
                restored = thought.feed(piece.text) + (thought.flush() if piece.signature else "")
                if restored or piece.signature:
                    yield Thinking(restored, piece.signature)
            else:
                yield from _flushed(text, thought)
                if isinstance(piece, NativeCall) and PREFIX in piece.arguments:
                    piece = NativeCall(piece.name, restore(piece.arguments, as_json.get), piece.id)
                yield piece
    finally:
        pieces.close()


def _flushed(text: Restorer | None, thought: Restorer | None):
    if text is not None:
        held = text.flush()
        if held:
            yield held
    if thought is not None:
        held = thought.flush()
        if held:
            yield Thinking(held)


def _refusal(scrubbed: Scrubbed, model: str) -> str:
    places: dict[str, list[str]] = {}
    for found in scrubbed.found:
        places.setdefault(found.kind, [])
        if found.where not in places[found.kind]:
            places[found.kind].append(found.where)
    said = "; ".join(f"{kind} in {', '.join(where)}" for kind, where in places.items())
    return (f'this request holds secrets that may not be sent to model "{model}": {said}. Remove them (the '
            "operator's guard policy for this model is block)")
