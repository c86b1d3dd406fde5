"""What the guard does with what it finds, for one request.

    off     nothing is scanned
    log     scanned and counted; sent as it came
    redact  each secret sent as its placeholder; put back into the reply
    block   refused (400) naming each secret's kind and place, never its value

A model's policy is the registry's `guard` for it, else the server's
default: `redact` for an upstream any of whose servers is outside the
operator's networks, `off` for the local model, echo and upstreams inside
them (loopback always is). A key may ask for a stricter policy than its
model's, never a weaker one. The allow-list names values (or, as `re:...`,
patterns matched against a whole value) never touched: a test fixture's
fake key, a public key.
"""
from __future__ import annotations

import ipaddress
import re
from enum import IntEnum
from typing import Callable, Iterable
from urllib.parse import urlparse


class Policy(IntEnum):
    """In order of strictness: the stricter of two is the larger."""

    OFF = 0
    LOG = 1
    REDACT = 2
    BLOCK = 3

    @classmethod
    def named(cls, name: str) -> "Policy":
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f'guard: "{name}" is not a policy (known: {", ".join(NAMES)})') from None

    @property
    def label(self) -> str:
        return self.name.lower()


NAMES = tuple(p.label for p in Policy)
ACTIONS = {Policy.LOG: "logged", Policy.REDACT: "redacted", Policy.BLOCK: "blocked"}  # what a finding got


def strictest(*policies: Policy | None) -> Policy:
    return max((p for p in policies if p is not None), default=Policy.OFF)


def inside(base_url: str, networks: Iterable) -> bool:
    """Whether an upstream's server is on the operator's networks: its host an
    address in one of them, or this machine. A name is outside (the guard
    does not trust what a name resolves to)."""
    host = (urlparse(base_url).hostname or "").strip("[]")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or any(address in network for network in networks)


def default_policy(base_urls: Iterable[str], networks: Iterable) -> Policy:
    """The server's default for a model whose requests go to `base_urls`
    (none: a model that runs here)."""
    networks = tuple(networks)
    return Policy.REDACT if any(not inside(url, networks) for url in base_urls) else Policy.OFF


def allow_list(lines: Iterable[str]) -> Callable[[str], bool]:
    """The operator's allow-list, one value or `re:<pattern>` per line (blank
    lines and `#` comments skipped), as `allowed(value)` for guard.detect.find."""
    values, patterns = set(), []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("re:"):
            try:
                patterns.append(re.compile(line[3:]))
            except re.error as error:
                raise ValueError(f"guard allow-list line {number}: not a regular expression: {error}") from None
        else:
            values.add(line)
    return lambda value: value in values or any(p.fullmatch(value) for p in patterns)
