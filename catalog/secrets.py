"""Secrets named in the registry (never written in it): an upstream's key is
read from the environment variable the registry names, at request time, and
never logged."""
from __future__ import annotations

import os


def secret_from_env(name: str) -> str | None:
    return os.environ.get(name) or None


def check_secret_variable(name: str) -> None:
    if secret_from_env(name) is None:
        raise ValueError(f"api_key_env: the environment variable {name} is not set (it must hold the upstream's key)")
