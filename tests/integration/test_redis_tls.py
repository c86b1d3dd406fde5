"""TLS Redis (`rediss://`, as Heroku-style hosts hand it out), kept working
everywhere: the web process, the workers, Celery's broker and the admin
tool, through real processes on a redis-server speaking only TLS with a
certificate of a CA made for the test. A self-signed one is taken with
`ssl_cert_reqs=none`, checked against `ssl_ca_certs`, and refused against
the system's CAs. Sentinel over TLS: test_redis_failover.py."""
from __future__ import annotations

import subprocess
import sys

import httpx
import openai
import pytest

from identity.keys import digest
from ledger.persistence import FIX
from scripts.processes import ROOT, ready_together, stack_env, start_stack, start_web
from scripts.redis_servers import TlsRedis, make_certificates
from tests.integration.browser import text_of
from tests.integration.waits import wait_until

ROOT_KEY = "root-key-tls"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls(certificates, tmp_path_factory):
    """A TLS-only Redis that persists nothing, a worker and a web process on
    it with `ssl_cert_reqs=none`, keys on (an admin key for the console)."""
    server = TlsRedis(certificates)
    keys = tmp_path_factory.mktemp("tls-keys") / "keys.toml"
    keys.write_text(f'[keys.root]\nsha256 = "{digest(ROOT_KEY)}"\nadmin = true\n')
    env = stack_env(f"rediss://127.0.0.1:{server.port}/0?ssl_cert_reqs=none", SWITCHBOARD_KEYS_FILE=str(keys))
    try:
        worker, web, base = start_stack(env, concurrency=2)
    except BaseException:
        server.stop()
        raise
    yield {"server": server, "env": env, "base": base, "web": web}
    web.stop()
    worker.stop()
    server.stop()


def _streamed_chat(base: str, key: str = ROOT_KEY) -> str:
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    chunks = client.chat.completions.create(model="echo", stream=True,
                                            messages=[{"role": "user", "content": "over TLS we go"}])
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_a_self_signed_tls_redis_serves_a_streamed_chat_and_the_admin_tool(tls):
    assert _streamed_chat(tls["base"]) == "over TLS we go"
    ready = httpx.get(f"{tls['base']}/readyz").json()
    assert ready["status"] == "ready" and ready["redis"]["persistence"] == "none" and FIX in ready["redis"]["warning"]
    usage = subprocess.run([sys.executable, str(ROOT / "scripts" / "admin.py"), "usage"], env=tls["env"],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode == 0 and "root" in usage.stdout, usage.stderr


def test_the_console_over_tls_warns_of_a_redis_that_forgets(tls, browser):
    browser.get(f"{tls['base']}/k/{ROOT_KEY}/admin")
    wait_until(lambda: "echo:slow" in text_of(browser, "#models"), 30, "the models to show")
    banner = wait_until(lambda: text_of(browser, "#redis-banner"), 30, "the banner of a Redis that forgets")
    assert banner.startswith("Redis persists nothing") and FIX in banner
    wait_until(lambda: "persists nothing" in tls["web"].output(), 10, "the web process's warning")
    assert tls["web"].output().count("Redis persists nothing") == 1  # said once, however often it is asked


def test_a_certificate_checked_against_the_ca_is_taken_and_against_the_systems_refused(tls, certificates):
    port = tls["server"].port
    strict = [start_web(stack_env(f"rediss://127.0.0.1:{port}/0{query}"), wait=False)
              for query in (f"?ssl_ca_certs={certificates.ca}", "")]  # our CA's, the system's
    ready_together([web for web, _ in strict])
    try:
        (_, own_ca), (_, system_cas) = strict
        assert wait_until(lambda: _ready_or_refused(own_ca), 60, "/readyz").status_code == 200
        assert _streamed_chat(own_ca) == "over TLS we go"
        refused = wait_until(lambda: _ready_or_refused(system_cas), 60, "/readyz")
        # never silently accepted: the web process says it cannot reach Redis
        assert refused.status_code == 503 and "Redis unreachable" in refused.json()["reason"]
    finally:
        for web, _ in strict:
            web.stop()


def _ready_or_refused(base: str) -> httpx.Response | None:
    try:
        return httpx.get(f"{base}/readyz", timeout=10)
    except httpx.HTTPError:
        return None
