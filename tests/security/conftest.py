"""The security suite's fixtures: beside the session's stack (keys off, its
worker answers every office's jobs), the MCP stack and chromium
(tests/conftest.py), the hostile tester's office (tests/security/office.py)."""
from __future__ import annotations

import pytest

from tests.security.office import apply_keys, keys_text, start_office, stop_office, write_people


@pytest.fixture(scope="session")
def office_processes(stack, redis_url, tmp_path_factory):
    office = start_office(redis_url, tmp_path_factory.mktemp("security-office"))
    yield office
    stop_office(office)


@pytest.fixture
def office(office_processes, clean_redis):
    """Everyone at the provider as they were, the keys file as it was, nobody signed in."""
    write_people(office_processes["people"])
    if not office_processes["keys_file"].read_text().startswith(keys_text() + "\n[keys.marker]"):
        apply_keys(office_processes, keys_text())
    return office_processes
