"""The operator's console end to end: usage counted against what the
official clients report, budgets across two web processes, the admin CLI
adding and revoking keys, and the status page in a real headless browser
(Debian's chromium, driven by Selenium with the system driver), and the
request log's page there: its filters, everyone's for an admin, one's own
for another key, bodies kept only for the key that opted in."""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import ollama
import openai
import pytest
from dialects.hints import session_of
from identity.keys import digest
from ledger import request_log
from protocol import keys
from scripts.processes import ROOT, ready_together, stack_env, start_web, start_worker, stop_together
from tests.integration.browser import text_of
from tests.integration.http import DroppableStream
from tests.integration.waits import wait_until

KEYS = {"root": "root-key-5d1f", "alice": "alice-key-91aa", "carol": "carol-key-0c3e", "frank": "frank-key-77b2"}
ARTIFACTS = Path(os.environ.get("SWITCHBOARD_ARTIFACTS", ROOT / "tests" / "artifacts"))


def keys_file(path: Path) -> Path:
    path.write_text(f'# the console tests\' keys\n[keys.root]\nsha256 = "{digest(KEYS["root"])}"\nadmin = true\n\n'
                    f'[keys.alice]\nsha256 = "{digest(KEYS["alice"])}"\n\n'
                    f'[keys.carol]\nsha256 = "{digest(KEYS["carol"])}"\ndaily_tokens = 40\n\n'
                    f'[keys.frank]\nsha256 = "{digest(KEYS["frank"])}"\nlog_bodies = true\n')
    return path


@pytest.fixture(scope="module")
def console(redis_url, tmp_path_factory):
    folder = tmp_path_factory.mktemp("console")
    env = stack_env(redis_url, SWITCHBOARD_KEYS_FILE=str(keys_file(folder / "keys.toml")))
    processes, bases = [start_worker(env, concurrency=4, wait=False)], []
    try:
        for _ in range(2):
            web, base = start_web(env, wait=False)
            processes.append(web)
            bases.append(base)
    except BaseException:
        for process in processes:
            process.stop()
        raise
    ready_together(processes)
    yield {"env": env, "keys_file": folder / "keys.toml", "a": bases[0], "b": bases[1]}
    stop_together(processes[::-1])


@pytest.fixture
def stack(console, clean_redis):
    return console


def auth(name: str) -> dict:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def test_usage_counts_what_the_clients_were_told(stack):
    client = openai.OpenAI(base_url=f"{stack['a']}/v1", api_key=KEYS["alice"], max_retries=0)
    first = client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "one two three"}])
    reply = ollama.Client(host=stack["b"], headers=auth("alice")).chat(
        model="echo", messages=[{"role": "user", "content": "four five"}])
    with pytest.raises(openai.APIStatusError):  # echo cannot honour a forced call: an error, counted
        client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "x"}], tool_choice="required",
                                       tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    report = httpx.get(f"{stack['a']}/admin/usage", headers=auth("root")).json()
    assert report["by_person"]["alice"] == {
        "requests": 3, "prompt_tokens": first.usage.prompt_tokens + reply.prompt_eval_count,
        "completion_tokens": first.usage.completion_tokens + reply.eval_count, "errors": 1, "aborts": 0}
    assert report["by_person_and_model"]["alice"]["echo"]["requests"] == 3


def test_only_an_admin_key_reads_usage_or_names(stack):
    httpx.post(f"{stack['a']}/api/chat", headers=auth("alice"), json={"model": "echo", "messages": [
        {"role": "user", "content": "hi"}], "stream": False})
    for path in ("/admin", "/admin/status", "/admin/usage"):
        refused = httpx.get(stack["a"] + path, headers=auth("alice"))
        assert refused.status_code == 403 and "admin = true" in refused.json()["error"]["message"]
    assert "alice" not in httpx.get(f"{stack['a']}/metrics", headers=auth("alice")).text
    assert 'switchboard_usage_today_tokens{kind="prompt_tokens",person="alice"} 1.0' in \
        httpx.get(f"{stack['a']}/metrics", headers=auth("root")).text


def test_a_daily_budget_holds_across_two_web_processes(stack):
    """carol may use 40 tokens a day: each request costs 2 x 10 words."""
    words = " ".join(["w"] * 10)
    served = 0
    for turn in range(6):
        base = stack["a"] if turn % 2 == 0 else stack["b"]
        reply = httpx.post(f"{base}/v1/chat/completions", headers=auth("carol"), timeout=30,
                           json={"model": "echo", "messages": [{"role": "user", "content": words}]})
        if reply.status_code == 429:
            break
        served += 1
    assert served == 2
    message = reply.json()["error"]["message"]
    assert message.startswith("daily token budget of 40 tokens used up (40 used today); it resets at 00:00 UTC, in")
    assert 0 < int(reply.headers["Retry-After"]) <= 86400
    other = stack["b"] if base == stack["a"] else stack["a"]
    assert httpx.post(f"{other}/api/chat", headers=auth("carol"), json={"model": "echo", "messages": [
        {"role": "user", "content": "x"}]}).status_code == 429


def admin_cli(stack, *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "admin.py"), *args], env=stack["env"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_cli_adds_a_key_that_works_and_revokes_it(stack):
    key = admin_cli(stack, "keys", "add", "dave", "--models", "echo*").strip()
    assert key.startswith("sb-") and key not in stack["keys_file"].read_text()
    assert "# the console tests' keys" in stack["keys_file"].read_text()  # the operator's comments stay
    chat = lambda: httpx.post(f"{stack['b']}/api/chat", headers={"Authorization": f"Bearer {key}"},  # noqa: E731
                              json={"model": "echo", "messages": [{"role": "user", "content": "hi"}], "stream": False})
    wait_until(lambda: chat().status_code == 200, 10, "the new key to work")
    assert "dave" in admin_cli(stack, "usage")
    assert '"name": "dave"' in admin_cli(stack, "keys", "list") and key not in admin_cli(stack, "keys", "list")
    admin_cli(stack, "keys", "revoke", "dave")
    wait_until(lambda: chat().status_code == 401, 10, "the revoked key to stop working")
    assert "HOST" in admin_cli(stack, "ps") and "local" in admin_cli(stack, "ps")


# --- the page, in a real browser ----------------------------------------------------------
def test_the_status_page_lives(stack, browser):
    browser.get(f"{stack['a']}/k/{KEYS['root']}/admin")
    wait_until(lambda: "echo:slow" in text_of(browser, "#models"), 30, "the models to show")
    wait_until(lambda: "local" in text_of(browser, "#workers"), 30, "the worker to show")
    assert "smollm2:135m" in text_of(browser, "#models") and text_of(browser, "#active-streams") == "0"
    stream = threading.Thread(target=lambda: httpx.post(
        f"{stack['b']}/api/chat", headers=auth("alice"), timeout=60,
        json={"model": "echo:slow", "messages": [{"role": "user", "content": " ".join(["word"] * 60)}]}))
    stream.start()
    wait_until(lambda: text_of(browser, "#active-streams") == "1", 30, "the page to count the stream")
    wait_until(lambda: text_of(browser, "#busy-slots") == "1", 30, "the page to count the busy slot")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "console-streaming.png"))
    stream.join(60)
    wait_until(lambda: "alice" in text_of(browser, "#usage"), 30, "today's usage to show alice")
    browser.save_screenshot(str(ARTIFACTS / "console.png"))


def test_the_live_view_groups_running_jobs_by_session(stack, browser):
    """Two terminals of alice's (two Claude Code sessions) and a request
    naming none: three groups while they run, none once they end."""
    browser.get(f"{stack['a']}/k/{KEYS['root']}/admin")
    body = {"model": "echo:slow", "messages": [{"role": "user", "content": " ".join(["word"] * 400)}]}
    streams = [DroppableStream(stack["b"], "/api/chat", body, auth("alice") | session)
               for session in ({"X-Claude-Code-Session-Id": "terminal-1"}, {"X-Claude-Code-Session-Id": "terminal-2"},
                               {})]
    try:
        for stream in streams:
            assert stream.read_line()  # running
        groups = [f"session {session_of('alice', name)[:8]}" for name in ("terminal-1", "terminal-2")]
        shown = wait_until(lambda: all(g in (text := text_of(browser, "#running tbody")) for g in groups) and text, 30,
                           "both sessions to show")
        assert "alice, no session" in shown and shown.count("1 running") == 3 and shown.count("interactive") == 3
        running = httpx.get(f"{stack['a']}/admin/status", headers=auth("root")).json()["running"]
        assert sorted((job["person"], job["session"]) for job in running) == sorted(
            [("alice", ""), ("alice", session_of("alice", "terminal-1")), ("alice", session_of("alice", "terminal-2"))])
    finally:
        for stream in streams:
            stream.drop()
    wait_until(lambda: text_of(browser, "#running tbody") == "none", 30, "the dropped jobs to leave the list")


def test_a_months_usage_goes_out_as_csv_whose_totals_are_the_counters(stack, browser):
    """The CLI's export and the console's download (fetched by the page
    itself, as its link would): the same CSV, its rows adding up to
    today's counters."""
    for name, words in (("alice", "one two"), ("alice", "three"), ("carol", "four five six")):
        httpx.post(f"{stack['a']}/api/chat", headers=auth(name), json={"model": "echo", "stream": False,
                                                                      "messages": [{"role": "user", "content": words}]})
    counters = httpx.get(f"{stack['a']}/admin/usage", headers=auth("root")).json()["by_person_and_model"]
    today = httpx.get(f"{stack['a']}/admin/usage", headers=auth("root")).json()["day"]
    exported = admin_cli(stack, "usage", "--from", today[:8] + "01", "--to", today, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(exported)))
    assert {(r["person"], r["model"]): {m: int(r[m]) for m in ("requests", "prompt_tokens", "completion_tokens",
                                                               "errors", "aborts")}
            for r in rows if r["day"] == today} == {
        (person, model): counts for person, models in counters.items() for model, counts in models.items()}
    browser.get(f"{stack['a']}/k/{KEYS['root']}/admin")
    wait_until(lambda: "usage.csv?from=" in browser.find_element("id", "usage-download").get_attribute("href"), 30,
               "the download link to take this month's dates")
    downloaded = browser.execute_async_script(
        "const done = arguments[0]; fetch(document.getElementById('usage-download').href)"
        ".then((r) => r.text()).then(done, (e) => done(String(e)))")
    assert downloaded.endswith("\r\n") and downloaded.replace("\r\n", "\n") == exported  # (the CLI's read as text)
    refused = httpx.get(f"{stack['a']}/admin/usage.csv", headers=auth("alice"))
    assert refused.status_code == 403


def test_the_audit_log_shows_who_revoked_a_key_and_a_hand_edit(stack, browser):
    """A key added and revoked with the admin tool (it logs its own changes,
    at once), and a limit changed in the file by hand (logged by the web
    process that reads it next): each logged once though two web processes
    read the file, with its author, and shown on the console."""
    admin_cli(stack, "keys", "add", "erin", "--models", "echo*")
    admin_cli(stack, "keys", "revoke", "erin")
    path = stack["keys_file"]  # root's limit: nothing the module's other tests depend on
    path.write_text(path.read_text().replace("admin = true\n", "admin = true\nmax_concurrent = 8\n", 1))
    try:
        _audit_entries_and_their_page(stack, browser)
    finally:
        path.write_text(path.read_text().replace("max_concurrent = 8\n", "", 1))


def _audit_entries_and_their_page(stack, browser) -> None:
    entries = lambda: httpx.get(f"{stack['a']}/admin/audit", headers=auth("root")).json()["entries"]  # noqa: E731
    httpx.get(f"{stack['b']}/api/tags", headers=auth("alice"))  # (a web process reads the file on a request)
    wait_until(lambda: [(e["action"], e["target"]) for e in entries()][:3] == [
        ("key changed", "root"), ("key removed", "erin"), ("key added", "erin")], 15, "three entries, once each")
    by_tool, by_hand = entries()[1], entries()[0]
    assert by_tool["who"].endswith(" with scripts/admin.py") and by_tool["from"]
    assert by_hand["who"] == "the keys file, edited outside scripts/admin.py"
    assert by_hand["details"] == {"max_concurrent": [None, 8]}
    assert httpx.get(f"{stack['a']}/admin/audit", headers=auth("alice")).status_code == 403
    browser.get(f"{stack['a']}/k/{KEYS['root']}/admin")
    wait_until(lambda: "key removed erin" in text_of(browser, "#audit"), 30, "the console to show the revocation")
    assert "with scripts/admin.py" in text_of(browser, "#audit") and "max_concurrent: null → 8" in text_of(
        browser, "#audit")


def test_over_the_budget_a_websocket_turn_gets_a_429_event_with_its_wait(stack):
    """Limits and budgets hold on the Responses WebSocket as over HTTP:
    carol's 40 tokens a day used up, her next turn is an error event with
    the status and the Retry-After an HTTP answer would carry, and the
    socket stays open."""
    from websockets.sync.client import connect

    words = " ".join(["w"] * 10)
    with connect(stack["a"].replace("http://", "ws://") + "/v1/responses",
                 additional_headers=auth("carol")) as ws:
        ends = []
        for _ in range(3):
            ws.send(json.dumps({"type": "response.create", "model": "echo", "input": words, "store": False}))
            while (event := json.loads(ws.recv(timeout=30)))["type"] not in ("response.completed", "error"):
                pass
            ends.append(event)
    assert [e["type"] for e in ends] == ["response.completed", "response.completed", "error"], ends
    assert ends[2]["status"] == 429 and ends[2]["error"]["code"] == "rate_limit_exceeded"
    assert "daily token budget of 40 tokens used up" in ends[2]["error"]["message"]
    assert 0 < int(ends[2]["headers"]["Retry-After"]) <= 86400


# --- the request log ----------------------------------------------------------------------
def _requests(stack, name: str, **query) -> list[dict]:
    return httpx.get(f"{stack['a']}/admin/requests.json", params=query, headers=auth(name)).json()["requests"]


def test_the_request_log_page_filters_and_shows_a_key_its_own(stack, browser):
    """Its requests carry a session of their own, so the page, filtered to
    it, shows only them (another test's last record may land meanwhile)."""
    session = {"X-Claude-Code-Session-Id": f"page-{uuid.uuid4().hex[:8]}"}
    client = openai.OpenAI(base_url=f"{stack['b']}/v1", api_key=KEYS["alice"], max_retries=0, default_headers=session)
    list(client.chat.completions.create(model="echo", stream=True, messages=[{"role": "user", "content": "a b c"}]))
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    httpx.post(f"{stack['a']}/api/chat", headers=auth("carol") | session, json={
        "model": "echo", "stream": False, "messages": [{"role": "user", "content": "four five"}]})
    mine = lambda name: _requests(stack, name, session=session["X-Claude-Code-Session-Id"])  # noqa: E731
    records = wait_until(lambda: (r := mine("root")) and len(r) == 3 and r, 10, "the three records")
    alice_ok = next(r for r in records if r["person"] == "alice" and r["status"] == 200)
    assert alice_ok["finish"] == "stop" and alice_ok["tokens_out"] > 0 and alice_ok["dialect"] == "openai"
    assert alice_ok["route"] == "/v1/chat/completions" and alice_ok["ttft_ms"] <= alice_ok["total_ms"]
    assert alice_ok["queue_ms"] is not None
    assert [r["person"] for r in _requests(stack, "alice", person="carol")][:2] == ["alice", "alice"]  # her own only
    assert {r["person"] for r in _requests(stack, "alice")} == {"alice"}
    browser.get(f"{stack['a']}/k/{KEYS['root']}/admin")
    browser.find_element("id", "requests-link").click()  # the console's link to it
    _filter(browser, session=session["X-Claude-Code-Session-Id"])
    wait_until(lambda: len(_rows(browser)) == 3, 30, "the page to list the three requests")
    _filter(browser, person="alice")
    wait_until(lambda: {person for person, _ in _rows(browser)} == {"alice"}, 30, "the person filter")
    _filter(browser, person="", status="4xx")
    wait_until(lambda: [status for _, status in _rows(browser)] == ["404"], 30, "the status filter")
    _filter(browser, status="", model="echo", start="2000-01-01T00:00", end="2000-01-02T00:00")
    wait_until(lambda: _rows(browser) == [] and "0 shown" in text_of(browser, "#summary"), 30, "the time range")
    _filter(browser, start="", end="")
    wait_until(lambda: len(_rows(browser)) == 2, 30, "the model filter (asked for echo)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "console-requests.png"))
    browser.get(f"{stack['a']}/k/{KEYS['alice']}/admin/requests")
    wait_until(lambda: "yours: alice" in text_of(browser, "#summary"), 30, "alice's own view")
    assert {person for person, _ in _rows(browser)} == {"alice"}


def test_a_model_name_of_10000_characters_leaves_a_small_record_and_a_page_that_fits(stack, browser, clean_redis):
    """A client names its model: a record keeps at most request_log.TEXT_MOST
    characters of it, and the page cuts a long cell short, so the columns
    after the model's (route, status, tokens, times, trace) stay on screen."""
    session = {"X-Claude-Code-Session-Id": f"long-{uuid.uuid4().hex[:8]}"}
    client = openai.OpenAI(base_url=f"{stack['b']}/v1", api_key=KEYS["alice"], max_retries=0, default_headers=session)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="m" * 10_000, messages=[{"role": "user", "content": "x"}])
    [record] = wait_until(lambda: _requests(stack, "root", session=session["X-Claude-Code-Session-Id"]), 10,
                          "its record")
    assert record["model"] == "m" * (request_log.TEXT_MOST - 1) + "…" and record["status"] == 404
    [(_, fields)] = clean_redis.xrange(keys.REQUEST_LOG, record["id"], record["id"])
    assert len(fields[b"r"]) < 1024, fields  # (whole: 10 KB and more)
    browser.get(f"{stack['a']}/k/{KEYS['root']}/admin/requests")
    _filter(browser, session=session["X-Claude-Code-Session-Id"])
    wait_until(lambda: len(_rows(browser)) == 1, 30, "the page to list the request")
    table, shown = browser.execute_script(
        "const t = document.getElementById('requests'); return [t.scrollWidth, t.parentElement.clientWidth]")
    assert table <= shown, (table, shown)  # every column on screen, none scrolled off to the right
    assert browser.execute_script("return document.querySelector('#requests tbody td.model').title").startswith("mmm")


def _rows(browser) -> list[list[str]]:
    """The table's rows as (person, status), read at once (the page redraws it)."""
    return browser.execute_script("return [...document.querySelectorAll('#requests tbody tr')].map("
                                  "(r) => [r.querySelector('.person').textContent, r.querySelector('.status')"
                                  ".textContent])")


def _filter(browser, **values) -> None:
    names = {"person": "f-person", "status": "f-status", "model": "f-model", "start": "f-from", "end": "f-to",
             "session": "f-session"}
    for name, value in values.items():
        browser.execute_script("document.getElementById(arguments[0]).value = arguments[1]", names[name], value)
    browser.find_element("id", "f-apply").click()


def test_bodies_are_kept_only_for_the_key_that_opted_in(stack):
    session = {"session-id": f"bodies-{uuid.uuid4().hex[:8]}"}
    for name in ("frank", "alice"):
        reply = httpx.post(f"{stack['a']}/v1/chat/completions", headers=auth(name) | session, json={
            "model": "echo", "messages": [{"role": "user", "content": f"{name} says hello"}]})
        assert reply.status_code == 200
    records = wait_until(lambda: (r := _requests(stack, "root", session=session["session-id"])) and len(r) == 2
                         and r, 10, "both records")
    kept = {r["person"]: r for r in records}
    assert kept["frank"]["body"] is True and kept["alice"]["body"] is False
    url = f"{stack['a']}/admin/requests/{kept['frank']['request']}/body"
    body = httpx.get(url, headers=auth("frank")).json()
    assert body["reply"] == "frank says hello" and body["request"]["messages"][0]["content"] == "frank says hello"
    assert KEYS["frank"] not in json.dumps(body) and httpx.get(url, headers=auth("root")).status_code == 200
    assert httpx.get(url, headers=auth("alice")).status_code == 404  # not hers
    assert httpx.get(f"{stack['a']}/admin/requests/{kept['alice']['request']}/body",
                     headers=auth("root")).status_code == 404


def test_a_budget_reset_by_the_admin_tool_lets_her_on_and_is_audited(stack):
    chat = lambda: httpx.post(f"{stack['a']}/api/chat", headers=auth("carol"), json={  # noqa: E731
        "model": "echo", "stream": False, "messages": [{"role": "user", "content": " ".join(["w"] * 10)}]})
    statuses = [chat().status_code for _ in range(4)]
    assert statuses[-1] == 429 and 200 in statuses  # her 40 tokens used up
    refused = wait_until(lambda: _requests(stack, "root", person="carol", status="429"), 10, "the refusal's record")
    assert refused[0]["finish"] is None and refused[0]["route"] == "/api/chat"  # refused before any job
    used = httpx.get(f"{stack['a']}/admin/usage", headers=auth("root")).json()["by_person"]["carol"]
    assert "carol's daily budget reset" in admin_cli(stack, "budget", "reset", "carol")
    assert chat().status_code == 200  # on again, at once, on either web process
    after = httpx.get(f"{stack['b']}/admin/usage", headers=auth("root")).json()["by_person"]["carol"]
    assert after["requests"] == used["requests"] + 1  # usage keeps every token; only the budget starts over
    entries = httpx.get(f"{stack['a']}/admin/audit", headers=auth("root")).json()["entries"]
    entry = next(e for e in entries if e["action"] == "budget reset")  # (a web process may log a hand edit too)
    assert entry["target"] == "carol"
    assert entry["who"].endswith("with scripts/admin.py")
    assert entry["details"]["tokens_used_today"] == used["prompt_tokens"] + used["completion_tokens"]
