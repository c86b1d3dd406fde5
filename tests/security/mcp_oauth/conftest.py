"""The office these tests share (tests/integration/oauth_office.py), once for the package: it is stopped before
the next package's tests, whose own sign-in office would otherwise share its Redis with this one's."""
from __future__ import annotations

import pytest

from tests.integration.oauth_office import oauth_office as start_oauth_office


@pytest.fixture(scope="package")
def oauth_office(mcp_stack, redis_url, tmp_path_factory):
    with start_oauth_office(mcp_stack, redis_url, tmp_path_factory.mktemp("mcp-oauth")) as office:
        yield office
