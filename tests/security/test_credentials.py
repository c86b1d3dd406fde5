"""Properties 2, 3 and 6: every credential a person holds can be checked
and ended; what it may do follows the provider now, not when it was made;
revoking everything ends everything, a device code approved but not yet
collected included, and a code is approved once.

The provider gives an account marked `no_refresh` no refresh token at its
sign-in (tests/security/office.py)."""
from __future__ import annotations

import threading
import time

import httpx
import pytest

from identity.signin import RECHECK_LOOP_SECONDS
from tests.integration.waits import wait_until
from tests.security.office import OPS_KEY, RECHECK_SECONDS, as_key, chat, signed_in, write_people

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
BOUND = RECHECK_SECONDS + RECHECK_LOOP_SECONDS + 5  # the README's bound, with the provider's answer


def start_device(base: str) -> dict:
    answer = httpx.post(f"{base}/auth/device", data={"client_id": "security test"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def approve(person, started: dict, decision: str = "approve") -> httpx.Response:
    return person.request("POST", "/login/device", data={"user_code": started["user_code"], "decision": decision})


def collect(base: str, started: dict) -> httpx.Response:
    return httpx.post(f"{base}/auth/token", data={"grant_type": DEVICE_GRANT, "device_code": started["device_code"]})


def refresh(base: str, token: str) -> httpx.Response:
    return httpx.post(f"{base}/auth/token", data={"grant_type": "refresh_token", "refresh_token": token})


def login(base: str, person) -> dict:
    """A command-line login of `person`'s, approved and collected: its refresh token and first key."""
    started = start_device(base)
    assert approve(person, started).status_code == 200
    answer = collect(base, started)
    assert answer.status_code == 200, answer.text
    return answer.json()


# --- 2. no credential the server cannot check -----------------------------------------------------------------
def test_without_a_refresh_token_no_credential_is_handed_out(office):
    front = office["front"]
    write_people(office["people"], {"bob": {"no_refresh": True}})
    bob = signed_in(front, "bob")
    assert bob.request("POST", "/me/keys", json={"label": "fixed"}).status_code == 403
    started = start_device(front)
    refused = approve(bob, started)
    assert refused.status_code == 403 and "refresh token" in refused.text
    assert collect(front, started).json()["error"] == "authorization_pending"  # (nothing was approved)


def test_a_sign_in_without_a_refresh_token_ends_the_credentials_made_before(office):
    """Signed in once with a refresh token (a key, a login), then again without one: the server can no
    longer ask about them, so neither the key, nor the login, nor a key from the login works."""
    front = office["front"]
    carol = signed_in(front, "carol")
    kept = carol.request("POST", "/me/keys", json={"label": "fixed"}).json()["key"]
    held = login(front, carol)
    assert chat(front, kept).status_code == 200 and chat(front, held["access_token"]).status_code == 200
    write_people(office["people"], {"carol": {"no_refresh": True}})
    signed_in(front, "carol")
    for key in (kept, held["access_token"]):
        assert chat(front, key).status_code == 401
    assert refresh(front, held["refresh_token"]).json()["error"] == "invalid_grant"


def test_a_login_of_someone_disabled_at_the_provider_ends_within_the_bound(office):
    front = office["front"]
    dave = signed_in(front, "dave")
    held = login(front, dave)
    write_people(office["people"], {"dave": {"disabled": True}})
    wait_until(lambda: refresh(front, held["refresh_token"]).status_code == 400, timeout=BOUND,
               what="dave's login refused")
    assert chat(front, held["access_token"]).status_code == 401


# --- 3. the policy follows the provider's groups now --------------------------------------------------------
def models_of(base: str, key: str) -> set[str]:
    answer = httpx.get(f"{base}/v1/models", headers=as_key(key))
    return {m["id"] for m in answer.json()["data"]} if answer.status_code == 200 else set()


def test_a_group_removed_at_the_provider_narrows_every_key_and_login(office):
    front = office["front"]
    write_people(office["people"], {"bob": {"groups": ["staff", "ml-team"]}})
    bob = signed_in(front, "bob")
    kept = bob.request("POST", "/me/keys", json={"label": "fixed"}).json()["key"]
    held = login(front, bob)
    for key in (kept, held["access_token"]):
        assert "echo:slow" in models_of(front, key) and chat(front, key, "echo:slow").status_code == 200
    write_people(office["people"], {"bob": {"groups": ["staff"]}})
    removed_at = time.monotonic()
    wait_until(lambda: "echo:slow" not in models_of(front, kept), timeout=BOUND, what="bob's key narrowed")
    assert time.monotonic() - removed_at <= BOUND
    renewed = refresh(front, held["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    later = renewed.json()["access_token"]
    for key in (kept, held["access_token"], later):
        assert models_of(front, key) == {"echo"}
        assert chat(front, key, "echo:slow").status_code == 404
        assert chat(front, key, "echo").status_code == 200


def test_an_admin_group_removed_at_the_provider_ends_console_rights(office):
    front = office["front"]
    alice = signed_in(front, "alice")
    assert alice.request("GET", "/admin/people").status_code == 200
    write_people(office["people"], {"alice": {"groups": ["staff"]}})
    wait_until(lambda: alice.request("GET", "/admin/people").status_code == 403, timeout=BOUND,
               what="alice no longer an admin")


# --- 6. revoking everything ends everything, and an approval is one transition -------------------------------
def test_revoking_everything_ends_a_login_approved_but_not_yet_collected(office):
    front = office["front"]
    carol = signed_in(front, "carol")
    started = start_device(front)
    assert approve(carol, started).status_code == 200
    revoked = httpx.post(f"{front}/admin/people/carol/revoke", headers=as_key(OPS_KEY))
    assert revoked.status_code == 200
    answer = collect(front, started)
    assert answer.status_code == 400 and answer.json()["error"] in ("expired_token", "access_denied")


def test_a_login_approved_then_suspended_is_never_collected(office):
    front = office["front"]
    erin = signed_in(front, "carol")
    started = start_device(front)
    assert approve(erin, started).status_code == 200
    write_people(office["people"], {"carol": {"disabled": True}})
    wait_until(lambda: erin.request("GET", "/me.json").status_code == 401, timeout=BOUND, what="carol suspended")
    assert collect(front, started).json()["error"] in ("expired_token", "access_denied", "invalid_grant")


@pytest.mark.parametrize("decisions", [("approve", "approve"), ("approve", "deny")], ids=["both approve",
                                                                                         "approve and deny"])
def test_two_people_answering_one_code_at_once_one_answer_stands(office, decisions):
    front = office["front"]
    people = [signed_in(front, "bob"), signed_in(front, "carol")]
    for _ in range(5):  # (several rounds: the race is at the server, the threads only start together)
        started, answers = start_device(front), [None, None]
        barrier = threading.Barrier(2)

        def answer(index: int) -> None:
            barrier.wait()
            answers[index] = approve(people[index], started, decisions[index])

        threads = [threading.Thread(target=answer, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stood = [i for i, a in enumerate(answers) if a.status_code == 200]
        assert len(stood) == 1, [a.text[:200] for a in answers]
        collected = collect(front, started)
        if decisions[stood[0]] == "approve":
            assert collected.json()["person"] == people[stood[0]].person
        else:
            assert collected.json()["error"] == "access_denied"
