"""Property 4: a signed-in person is never someone else. A provider username
that is also a keys-file key's name (`ops`, the admin key) reaches none of
that key's records; a username given to a new account at the provider (a
new `sub`) does not inherit the old holder's; and no key of the file or the
environment can take a signed-in person's name."""
from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from identity.keys import load_keys, signed_in_name
from tests.integration.waits import wait_until
from tests.security.office import OPS_KEY, as_key, chat, sign_in_answer, signed_in, write_people


def records(base: str, headers: dict) -> list[dict]:
    return httpx.get(f"{base}/admin/requests.json", headers=headers).json()["requests"]


def test_a_username_that_is_a_keys_name_reaches_none_of_its_records(office):
    front = office["front"]
    assert chat(front, OPS_KEY, **{"X-Request-Id": "ops-secret-request"}).status_code == 200
    ops_own = wait_until(lambda: [r for r in records(front, as_key(OPS_KEY)) if r["person"] == "ops"],
                         what="the ops key's request in the log")
    assert ops_own[0]["body"]
    impostor = signed_in(front, "ops")  # (the provider's username `ops`: not an admin there)
    shown = impostor.request("GET", "/admin/requests.json")
    assert shown.status_code == 200 and not any(r["person"] == "ops" for r in shown.json()["requests"])
    for record in ops_own:
        assert impostor.request("GET", f"/admin/requests/{record['request']}/body").status_code == 404
    me = impostor.request("GET", "/me.json").json()
    assert me["usage"] == [] and me["person"] == "ops"
    key = impostor.request("POST", "/me/keys", json={"label": "mine"}).json()["key"]
    assert chat(front, key).status_code == 200
    mine = wait_until(lambda: impostor.request("GET", "/admin/requests.json").json()["requests"],
                      what="the impostor's own request in the log")
    assert {r["person"] for r in mine} == {signed_in_name("ops")}
    assert httpx.get(f"{front}/admin/people", headers=as_key(key)).status_code == 403


def test_a_username_given_to_a_new_account_is_not_the_old_holder(office, redis_client):
    front = office["front"]
    dave = signed_in(front, "dave")
    key = dave.request("POST", "/me/keys", json={"label": "daves"}).json()["key"]
    # The provider deletes dave's account and gives the username to someone new (another `sub`).
    write_people(office["people"], {"dave": None, "dave-new-hire": {"username": "dave", "groups": ["staff"]}})
    refused = sign_in_answer(front, "dave-new-hire")
    assert refused.status_code == 403 and "belongs to another account" in refused.text
    assert "switchboard_session" not in refused.headers.get("set-cookie", "")
    # An admin releases the name: the old holder's keys end with it, and the new holder may sign in.
    released = httpx.post(f"{front}/admin/people/dave/forget", headers=as_key(OPS_KEY))
    assert released.status_code == 200 and released.json()["keys"] == 1
    assert chat(front, key).status_code == 401
    assert sign_in_answer(front, "dave-new-hire").status_code == 302


@pytest.mark.parametrize("name", ["signin:ops", "trusted:10.0.0.1", "ops bob", "", "a/b"])
def test_no_key_of_the_file_or_environment_takes_a_reserved_name(tmp_path: Path, name):
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text(f'[keys."{name}"]\nsha256 = "{"0" * 64}"\n')
    with pytest.raises(ValueError, match="name here"):
        load_keys(keys_file, None)
    if ":" not in name:  # (the environment's entries are name:key: its names hold no colon)
        with pytest.raises(ValueError, match="name here"):
            load_keys(None, f"{name}:some-key")
