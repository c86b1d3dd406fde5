"""Property 7: no throttle turns into an office-wide lockout. Behind a
trusted reverse proxy each client is the address the proxy forwards for,
so one client's 60 sign-ins lock out that client only; a client cannot pick
its address (an X-Forwarded-For from anyone but a trusted proxy, or the
hops a client wrote itself, are not believed); and guessing user codes is
throttled per person. (192.0.2.0/24 is the documentation range: addresses
named in headers, never reached.)"""
from __future__ import annotations

import httpx

from app.routes.signin import THROTTLES
from tests.security.office import signed_in

SIGN_INS = THROTTLES["sign-ins"]


def login_from(base: str, forwarded: str | None = None) -> int:
    headers = {"X-Forwarded-For": forwarded} if forwarded is not None else {}
    return httpx.get(f"{base}/login", params={"next": "/me"}, headers=headers).status_code


def test_one_client_behind_the_proxy_locks_out_only_itself(office):
    front = office["front"]
    assert all(login_from(front, "192.0.2.10") == 302 for _ in range(SIGN_INS))
    assert login_from(front, "192.0.2.10") == 429
    assert login_from(front, "192.0.2.11") == 302  # a colleague behind the same proxy
    assert login_from(front, "192.0.2.10, 127.0.0.1") == 429  # (the proxy's own hop: still that client)


def test_a_client_cannot_pick_its_address(office):
    front, plain = office["front"], office["plain"]
    # Through the proxy, the hops left of the one it appended are the client's own words.
    assert all(login_from(front, f"192.0.2.{n}, 192.0.2.20") == 302 for n in range(SIGN_INS))
    assert login_from(front, "192.0.2.99, 192.0.2.20") == 429
    # A web process that trusts no proxy believes no X-Forwarded-For at all.
    assert all(login_from(plain, f"192.0.2.{n}") == 302 for n in range(100, 100 + SIGN_INS))
    assert login_from(plain, "192.0.2.250") == 429
    assert login_from(plain, "not an address") == 429


def test_user_code_guesses_are_throttled_per_person(office):
    front = office["front"]
    bob, carol = signed_in(front, "bob"), signed_in(front, "carol")
    guesses = [bob.request("GET", "/login/device", params={"user_code": f"BCDF-GH{a}{b}"})
               for a in "JKLM" for b in "NPQRSTVW"][:THROTTLES["user code guesses"] + 1]
    assert [g.status_code for g in guesses[:-1]] == [200] * THROTTLES["user code guesses"]
    assert guesses[-1].status_code == 429
    refused = bob.request("POST", "/login/device", data={"user_code": "BCDF-GHJK", "decision": "approve"})
    assert refused.status_code == 429
    assert carol.request("GET", "/login/device", params={"user_code": "BCDF-GHJK"}).status_code == 200
